"""The DP-SGD engine: Poisson sampling with static shapes, per-example clipping, noise, steps.

- :func:`poisson_chunk` / :func:`default_capacity`: exact Poisson sampling inside jit.
- :func:`clipped_grad_sum`: per-example clipped gradient sums, ``method="ghost"`` (ghost norms and
  book-keeping for Dense and LayerNorm) or ``"vmap"``.
- :func:`make_dp_step`: one DP-SGD step over any optax optimizer; :func:`run_phase` fuses many
  steps per compiled call.
- :func:`make_key`: OS-entropy keys unless a seed is given.
"""

from dpgen_jax.dpsgd._clipping import (
    FALLBACKS,
    METHODS,
    UnsupportedLayerError,
    clip_factors,
    clipped_grad_sum,
    grad_sum,
    per_example_grads,
)
from dpgen_jax.dpsgd._keys import RunKey, make_key
from dpgen_jax.dpsgd._sampling import (
    PoissonChunk,
    default_capacity,
    poisson_chunk,
    poisson_sample_indices,
)
from dpgen_jax.dpsgd._step import (
    TrainState,
    add_gaussian_noise,
    expected_batch_size,
    gather_rows,
    init_state,
    make_dp_step,
    make_phase_runner,
    run_phase,
)

__all__ = [
    "FALLBACKS",
    "METHODS",
    "PoissonChunk",
    "RunKey",
    "TrainState",
    "UnsupportedLayerError",
    "add_gaussian_noise",
    "clip_factors",
    "clipped_grad_sum",
    "default_capacity",
    "expected_batch_size",
    "gather_rows",
    "grad_sum",
    "init_state",
    "make_dp_step",
    "make_key",
    "make_phase_runner",
    "per_example_grads",
    "poisson_chunk",
    "poisson_sample_indices",
    "run_phase",
]
