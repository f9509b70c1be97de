"""DP-SGD phases every method shares: the accounted phase of a schedule (:func:`dpsgd_phase`), its
run over the private rows (:func:`run_private_phase`), public clip-norm rules, and the optimizers,
clamp and parameter average the methods train with.

Functions of plain values and callables (a per-example loss, an optax optimizer, sizes), never of
a method's configuration, so that every method composes them the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy


def torch_adam(learning_rate: float, b1: float = 0.9, b2: float = 0.999) -> optax.GradientTransformation:
    """``torch.optim.Adam(lr, betas=(b1, b2), eps=1e-8)`` in optax."""
    return optax.adam(learning_rate, b1=b1, b2=b2, eps=1e-8)


def torch_rmsprop(learning_rate: float) -> optax.GradientTransformation:
    """``torch.optim.RMSprop(lr, alpha=0.99, eps=1e-8)`` in optax (eps outside the square root)."""
    return optax.rmsprop(learning_rate, decay=0.99, eps=1e-8, eps_in_sqrt=False)


def weight_clamp(bound: float | None) -> Callable[[PyTree], PyTree] | None:
    """The WGAN weight clamp: every parameter clipped to [-bound, bound] (None: no clamp)."""
    if bound is None:
        return None
    return lambda params: jax.tree_util.tree_map(lambda x: jnp.clip(x, -bound, bound), params)


class ParamsAverageState(NamedTuple):
    """:func:`params_average`'s state: ``optax.ema``'s moment of the parameters and its
    bias-corrected value after the last update."""

    ema: optax.EmaState
    average: PyTree


def params_average(decay: float) -> optax.GradientTransformation:
    """Keeps an exponential moving average of the parameters in the optimizer state.

    Chained last (``optax.chain(opt, params_average(decay))``), it leaves the updates unchanged and,
    after each update, folds the new parameters into ``optax.ema(decay, debias=True)``: the average
    is ``sum_t (1 - decay) decay^(T - t) params_t / (1 - decay^T)`` over the iterates after steps
    1..T (the initial parameters carry no weight). Read it with :func:`averaged_params`. An average
    of a network's iterates is a function of the iterates, so it is post-processing of whatever
    released them.
    """
    _v.fraction(decay=decay)
    ema = optax.ema(decay, debias=True)

    def init(params):
        return ParamsAverageState(ema.init(params), params)

    def update(updates, state, params=None):
        if params is None:
            raise ValueError("params_average needs the parameters: pass them to update().")
        average, ema_state = ema.update(optax.apply_updates(params, updates), state.ema)
        return updates, ParamsAverageState(ema_state, average)

    return optax.GradientTransformation(init, update)


def averaged_params(opt_state: PyTree) -> PyTree:
    """The average kept by the :func:`params_average` in ``opt_state`` (an optimizer's state).

    Raises:
        ValueError: the state holds no (or more than one) :class:`ParamsAverageState`.
    """
    found = [s for s in jax.tree_util.tree_leaves(opt_state, is_leaf=lambda s: isinstance(s, ParamsAverageState))
             if isinstance(s, ParamsAverageState)]
    if len(found) != 1:
        raise ValueError(f"The optimizer state holds {len(found)} params_average states: build the optimizer "
                         "with exactly one params_average.")
    return found[0].average


def run_private_phase(
    loss_fn: Callable[[PyTree, PyTree], jax.Array],
    optimizer: optax.GradientTransformation,
    params: PyTree,
    data: PyTree,
    key: jax.Array,
    phase: privacy.DPSGDPhase | privacy.NonPrivatePhase,
    *,
    method: str = "ghost",
    chunk_size: int = 1000,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    batch_fn: Callable[[PyTree, jax.Array, jax.Array, PyTree], PyTree] | None = None,
    checkpoint: Any = None,
    mesh: jax.sharding.Mesh | None = None,
) -> dpsgd.TrainState:
    """The ``phase.steps`` steps of the accounted ``phase`` on ``loss_fn`` from ``params``.

    The step reads q, sigma, C and the normaliser B from ``phase`` (``dpsgd.make_dp_step``); the
    rows of ``data`` (the real row count m) are only the sampler's scan length. ``batch_fn``
    (default: gather the sampled rows) builds each padded batch from the sampled indices and a
    fresh key per sampler chunk, e.g. to add per-example reparameterisation noise.
    ``checkpoint``: the phase's checkpoint hook (``Hooks.checkpoint``, see
    :func:`dpgen_jax.dpsgd.run_phase`), or None.

    ``mesh`` (default: the mesh of an enclosing :func:`dpgen_jax.dpsgd.data_parallel` block, if
    any) makes the steps data-parallel over its devices; the data and the initial state are then
    replicated on every device of the mesh. Same key, same result as without a mesh (to float
    rounding), and the same accounting (docs/scaling.md).

    Returns the final state; ``int(state.steps)`` is the number of steps executed, which the
    caller gives to the accountant.
    """
    m = jax.tree_util.tree_leaves(data)[0].shape[0]
    extra = {} if batch_fn is None else {"batch_fn": batch_fn}
    mesh = dpsgd.current_mesh() if mesh is None else mesh
    step = dpsgd.make_dp_step(loss_fn, optimizer, phase, scan_rows=m, method=method, mesh=mesh, **extra)
    state = dpsgd.init_state(params, optimizer)
    if mesh is not None:
        state, data = dpsgd.replicate((state, data), mesh)
    return dpsgd.run_phase(step, state, data, key, phase.steps,
                           chunk_size=chunk_size, progress=progress, should_stop=should_stop,
                           checkpoint=checkpoint)


def dpsgd_phase(name: str, *, batch_size: int, num_records: int, noise_multiplier: float, steps: int,
                clip_norm: float | str | None, private: bool = True):
    """The accounted phase of a DP-SGD schedule with expected batch B over N records.

    ``privacy.DPSGDPhase.from_batch_size`` (q = B / N), or, when not ``private``,
    ``privacy.NonPrivatePhase.from_batch_size`` (the same schedule without clipping or noise). A
    ``clip_norm`` that is still a rule's name (a string, resolved during training and set with
    ``phase.with_clip_norm``) is None in the phase until then.
    """
    if not private:
        if batch_size > num_records:  # plannable, not runnable (as a private plan would refuse it)
            return privacy.NonPrivatePhase(name, steps)
        return privacy.NonPrivatePhase.from_batch_size(name, batch_size, num_records, steps)
    clip = None if clip_norm is None or isinstance(clip_norm, str) else float(clip_norm)
    return privacy.DPSGDPhase.from_batch_size(name, batch_size, num_records, noise_multiplier, steps,
                                              clip_norm=clip)


def median_grad_norm(loss_fn: Callable[[PyTree, PyTree], jax.Array], params: PyTree,
                     batch: PyTree) -> float:
    """The median per-example gradient norm of ``loss_fn`` at ``params`` over ``batch``.

    A clip-norm rule ("the median norm in a non-private run", Tantipongpipat et al. 2021) that
    is private only when ``batch`` and ``params`` depend on no private row: call it on public
    rows (``data.uniform_rows``) and parameters trained on them.
    """
    _, aux = jax.jit(dpsgd.clipped_grad_sum(loss_fn, 1e30, method="vmap"))(params, batch)
    return float(jnp.median(aux["norms"]))


def median_grad_norm_after(loss_fn: Callable[[PyTree, PyTree], jax.Array],
                           optimizer: optax.GradientTransformation, params: PyTree, rows: PyTree,
                           eval_rows: PyTree, key: jax.Array, *, steps: int, batch_size: int) -> float:
    """:func:`median_grad_norm` over ``eval_rows`` after ``steps`` non-private steps on ``rows``.

    The same rule for a clip norm chosen later in training; private only when ``rows``,
    ``eval_rows`` and ``params`` depend on no private row (e.g. ``data.uniform_rows`` and initial
    parameters).
    """
    num_rows = jax.tree_util.tree_leaves(rows)[0].shape[0]
    public = privacy.NonPrivatePhase.from_batch_size("public-clip-norm", batch_size, num_rows, steps)
    state = run_private_phase(loss_fn, optimizer, params, rows, key, public, chunk_size=max(1, steps))
    return median_grad_norm(loss_fn, state.params, eval_rows)


__all__ = [
    "ParamsAverageState",
    "averaged_params",
    "dpsgd_phase",
    "median_grad_norm",
    "median_grad_norm_after",
    "params_average",
    "run_private_phase",
    "torch_adam",
    "torch_rmsprop",
    "weight_clamp",
]
