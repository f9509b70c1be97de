"""The DP-SGD engine: Poisson sampling with static shapes, per-example clipping, noise, steps.

- :func:`poisson_chunk` / :func:`default_capacity`: Poisson sampling inside jit (exact to float64
  rounding of the geometric gaps; static or traced dataset size and rate).
- :func:`clipped_grad_sum`: per-example clipped gradient sums, ``method="ghost"`` (ghost norms and
  book-keeping for Dense and LayerNorm), ``"vmap"``, or one of them per parameter group under one
  clip (:func:`check_method`).
- :func:`make_dp_step`: one DP-SGD step over any optax optimizer; :func:`run_phase` fuses many
  steps per compiled call.
- :func:`add_gaussian_noise` / :func:`gaussian_noise`: float32 noise with tails beyond 9 sigma from
  Threefry-2x32-20, fused with its addition.
- :func:`noisy_counts` / :func:`snapped_gaussian`: the one home of every released noisy statistic:
  integer counts (``count + round(std * Z)``) and real sums snapped to a public grid in exact
  arithmetic (:func:`integer_gaussian`, :func:`host_normal`: float64 normals from the same stream).
- :func:`sanitized` / :func:`sanitize_rows`: the generator-side gradient sanitiser (an identity
  whose backward pass clips each row's gradient and adds Gaussian noise once; GS-WGAN).
- :func:`data_mesh` / :func:`data_parallel`: data-parallel DP-SGD over several devices
  (``make_dp_step(..., mesh=...)``; :func:`replicate`; docs/scaling.md).
- :func:`make_key`: 64-bit OS-entropy keys unless a seed is given; :func:`shared_key`: the same key
  on every process; :func:`host_rng`: a numpy generator from a key (host-side draws);
  :func:`exponential_mechanism_exact`: the exponential mechanism sampled exactly (rational
  arithmetic, no Gumbel-max). Every key of a run comes from
  :func:`make_key`, every host generator from :func:`host_rng`.
"""

from dpgen_jax.dpsgd._clipping import (
    FALLBACKS,
    METHODS,
    UnsupportedLayerError,
    check_method,
    clip_factors,
    clipped_grad_sum,
    grad_sum,
    per_example_grads,
)
from dpgen_jax.dpsgd._devices import (
    current_mesh,
    data_mesh,
    data_parallel,
    pad_stacked,
    pad_to_devices,
    replicate,
    resolve_mesh,
)
from dpgen_jax.dpsgd._exact import host_normal, integer_gaussian, noisy_counts, snapped_gaussian
from dpgen_jax.dpsgd._keys import RunKey, host_rng, make_key, shared_key
from dpgen_jax.dpsgd._noise import add_gaussian_noise, gaussian_noise
from dpgen_jax.dpsgd._selection import exponential_mechanism_exact
from dpgen_jax.dpsgd._sanitizer import sanitize_rows, sanitized
from dpgen_jax.dpsgd._sampling import (
    PoissonChunk,
    default_capacity,
    poisson_chunk,
    poisson_sample_indices,
)
from dpgen_jax.dpsgd._step import (
    GroupRates,
    TrainState,
    gather_rows,
    init_state,
    make_dp_step,
    make_phase_runner,
    run_chunks,
    run_phase,
)

__all__ = [
    "FALLBACKS",
    "GroupRates",
    "METHODS",
    "PoissonChunk",
    "RunKey",
    "TrainState",
    "UnsupportedLayerError",
    "check_method",
    "add_gaussian_noise",
    "clip_factors",
    "clipped_grad_sum",
    "current_mesh",
    "data_mesh",
    "data_parallel",
    "default_capacity",
    "exponential_mechanism_exact",
    "gather_rows",
    "gaussian_noise",
    "grad_sum",
    "host_normal",
    "host_rng",
    "init_state",
    "integer_gaussian",
    "make_dp_step",
    "make_key",
    "make_phase_runner",
    "noisy_counts",
    "pad_stacked",
    "pad_to_devices",
    "per_example_grads",
    "poisson_chunk",
    "poisson_sample_indices",
    "replicate",
    "resolve_mesh",
    "run_chunks",
    "run_phase",
    "sanitize_rows",
    "sanitized",
    "shared_key",
    "snapped_gaussian",
]
