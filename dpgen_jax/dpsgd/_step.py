"""DP-SGD steps that compose with any optax optimizer, and a fused phase runner.

A step samples a Poisson batch inside the compiled graph (:mod:`._sampling`), computes the clipped
per-example gradient sum (:mod:`._clipping`), adds Gaussian noise with standard deviation
``noise_multiplier * clip_norm`` per coordinate (:mod:`._noise`: one keyed draw per step, tails
beyond 9 sigma), divides by the *expected* batch size (a public ``B = q * N``, or ``q * m``) and
applies the optimizer. Every step realises an accounted phase (``privacy.DPSGDPhase``): q, sigma,
C and B are read from it. A draw that exceeds the padded
capacity is processed in further chunks inside the same step (``lax.while_loop``), so the sample
is exactly Poisson. :func:`run_phase` executes many steps per compiled call and counts the steps
actually executed in the state; that count is what the accountant must be given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import privacy
from dpgen_jax.dpsgd._clipping import check_method, clipped_grad_sum, grad_sum
from dpgen_jax.dpsgd._noise import add_gaussian_noise
from dpgen_jax.dpsgd._sampling import default_capacity, poisson_chunk
from dpgen_jax.dpsgd._devices import mesh_axis, pad_to_devices, resolve_mesh


class TrainState(NamedTuple):
    """State of one trained network: parameters, optimizer state, executed step count."""

    params: PyTree
    opt_state: PyTree
    steps: jax.Array  # int32 scalar


def init_state(params: PyTree, optimizer: optax.GradientTransformation) -> TrainState:
    return TrainState(params, optimizer.init(params), jnp.zeros((), jnp.int32))


def gather_rows(data: PyTree, indices: jax.Array, key: jax.Array, extra: PyTree) -> PyTree:
    """Default batch builder: the selected rows of every array in ``data``."""
    del key, extra
    return jax.tree_util.tree_map(lambda x: jnp.take(x, indices, axis=0), data)


class GroupRates(NamedTuple):
    """Per-call values of a DP step that may be traced (one per group under ``vmap``).

    Attributes:
        scan_rows: int32, the rows m the sampler scans (the group's real row count).
        sample_rate: float32, the Poisson rate q.
        normaliser: float32, what the noised sum is divided by (q * N for a public N).
        noise_std: float32, sigma * C.
    """

    scan_rows: jax.Array
    sample_rate: jax.Array
    normaliser: jax.Array
    noise_std: jax.Array


def make_dp_step(
    loss_fn: Callable[[PyTree, PyTree], jax.Array],
    optimizer: optax.GradientTransformation,
    phase: privacy.DPSGDPhase | privacy.NonPrivatePhase,
    *,
    scan_rows: int,
    method: str | Mapping[str, str] = "ghost",
    fallback: str = "vmap",
    capacity: int | None = None,
    batch_fn: Callable[[PyTree, jax.Array, jax.Array, PyTree], PyTree] = gather_rows,
    post_update: Callable[[PyTree], PyTree] | None = None,
    public_grad_fn: Callable[[PyTree, jax.Array, PyTree], PyTree] | None = None,
    mesh: jax.sharding.Mesh | None = None,
) -> Callable[[TrainState, PyTree, jax.Array, PyTree], tuple[TrainState, dict]]:
    """Builds one (DP-)SGD step ``step(state, data, key, extra=None) -> (state, metrics)``.

    The step realises the accounted ``phase``: it reads the sampling rate q, the noise multiplier
    sigma, the clip norm C and the normaliser (the public expected batch size B) from it, so that
    what runs is by construction what the accountant is given (``phase.event()``).

    Args:
        loss_fn: per-example loss ``(params, batch) -> (B,)``.
        optimizer: any optax transformation; it sees only the privatised gradient.
        phase: a ``privacy.DPSGDPhase`` with its clip norm (``with_clip_norm`` resolves one
            chosen at train time): the private step, Poisson rate ``phase.sample_rate``,
            per-example clip C, Gaussian noise of std ``phase.noise_std`` (sigma * C) per
            coordinate. Or a ``privacy.NonPrivatePhase`` with a ``sample_rate``: the non-private
            step (no noise; the plain gradient of the sampled batch, or its per-example gradients
            clipped when the phase has a ``clip_norm``). The noised sum is
            divided by ``phase.normaliser(scan_rows)``: B for a phase built from a batch size over
            a public N (``from_batch_size``), so that the real row count enters only the
            sampler's scan and nothing released depends on it (``docs/engine.md``); else q * m.
        scan_rows: the rows m of ``data`` (its leading axis), which the sampler scans.
        method: "ghost", "vmap", "map" or a mapping of parameter groups to one of them (see
            :func:`clipped_grad_sum`); ignored without a clip norm.
        fallback: see :func:`clipped_grad_sum`.
        capacity: padded batch size per chunk (default qm + 6 sqrt(qm)).
        batch_fn: ``(data, indices, key, extra) -> batch`` builds the padded batch from the
            selected indices; the default gathers rows. A batch_fn may add data-independent
            inputs (e.g. one fresh generated row per real row, from ``key`` and ``extra``).
        post_update: applied to the parameters after each update (e.g. a WGAN weight clamp);
            post-processing, so it needs no accounting.
        public_grad_fn: ``(params, key, extra) -> grads``, the gradient of a loss term that
            depends on no private record (e.g. the fake-data term of a critic loss: generator and
            decoder are DP outputs and z is fresh noise; docs/privacy.md), summed on the
            same scale as the clipped sum. It is added to the noised sum, unclipped, before the
            division by the normaliser, once per step. Its size must not depend on the
            private data (use a fixed number of generated rows).
        mesh: a one-axis :class:`jax.sharding.Mesh` (``dpsgd.data_mesh()``) for data-parallel
            steps; default: the mesh of an enclosing :func:`dpsgd.data_parallel` block, if any. The
            padded batch (rows and mask) is split along the mesh axis, each device computes the
            clipped gradient sum of its rows, the sums are added once (``psum``) and the noise is
            drawn once on the replicated sum, from the same key as without a mesh: the step equals
            the single-device step with the same capacity to float rounding. The capacity is
            rounded up to a multiple of the device count (the default capacity, a multiple of 8,
            is unchanged for 2, 4 or 8 devices); the extra slots are padding, masked out, and the
            sample is still exactly Poisson (a draw that overflows is processed in further
            chunks, which a rounded capacity cuts elsewhere). Batch building (``batch_fn``),
            ``public_grad_fn`` and the optimizer run replicated. See ``docs/scaling.md``.

    Returns:
        ``step(state, data, key, extra=None, rates=None)``; ``metrics`` has ``batch_size``
        (realised size) and ``chunks`` (number of sampler chunks used). ``rates``, a
        :class:`GroupRates`, replaces the phase's q, normaliser and noise standard deviation (and
        the static m) by traced values, so that one compiled step serves groups with different
        sizes and noise under ``vmap`` (DP-SYN's per-label autoencoders, each accounted as its own
        phase with the same clip norm); ``capacity`` must then be given (the chunk size, static),
        and overflow chunks are processed as usual. Metrics describe private data and are for
        diagnostics only.

    Privacy:
        One step of a ``DPSGDPhase`` is the Poisson-subsampled Gaussian mechanism with sampling
        rate q and noise multiplier sigma under add/remove-one neighbours, when ``loss_fn`` is
        per-example and ``key`` is secret.
    """
    private = _phase_kind(phase)
    m = _v.whole(minimum=1, scan_rows=scan_rows)
    q = phase.sample_rate
    check_method(method)
    noise_std = phase.noise_std if private else 0.0  # raises for a clip norm not resolved yet
    if phase.clip_norm is None:
        grads_fn = grad_sum(loss_fn)
    else:
        grads_fn = clipped_grad_sum(loss_fn, phase.clip_norm, method=method, fallback=fallback)
    if capacity is None:
        cap = default_capacity(m, q)
    elif isinstance(capacity, bool) or int(capacity) != capacity or capacity < 1:
        raise ValueError(f"capacity={capacity!r} is not a positive integer: pass an int >= 1 or None.")
    else:
        cap = int(capacity)
    mesh = resolve_mesh(mesh)
    if mesh is not None:
        cap = pad_to_devices(cap, mesh)
        grads_fn = _sharded_grads(grads_fn, mesh)
    normaliser = phase.normaliser(m)

    def step(state: TrainState, data: PyTree, key: jax.Array, extra: PyTree = None,
             rates: GroupRates | None = None):
        if rates is None:
            m_, q_, norm_, std = m, q, normaliser, noise_std
        else:
            m_, q_, norm_, std = rates.scan_rows, rates.sample_rate, rates.normaliser, rates.noise_std
        k_sample, k_batch, k_noise, k_public = jax.random.split(key, 4)
        zeros = jax.tree_util.tree_map(jnp.zeros_like, state.params)

        def body(carry):
            pos, gsum, count, i = carry
            chunk = poisson_chunk(jax.random.fold_in(k_sample, i), pos, m_, q_, cap)
            batch = batch_fn(data, chunk.indices, jax.random.fold_in(k_batch, i), extra)
            g, _ = grads_fn(state.params, batch, chunk.mask)
            gsum = jax.tree_util.tree_map(jnp.add, gsum, g)
            return chunk.next_position, gsum, count + jnp.sum(chunk.mask), i + 1

        init = (jnp.int32(0), zeros, jnp.int32(0), jnp.int32(0))
        _, gsum, count, n_chunks = jax.lax.while_loop(lambda c: c[0] < m_, body, init)
        noisy = add_gaussian_noise(gsum, k_noise, std)
        if public_grad_fn is not None:
            public = public_grad_fn(state.params, k_public, extra)
            noisy = jax.tree_util.tree_map(jnp.add, noisy, public)
        grad = jax.tree_util.tree_map(lambda g: g / norm_, noisy)
        updates, opt_state = optimizer.update(grad, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        if post_update is not None:
            params = post_update(params)
        new_state = TrainState(params, opt_state, state.steps + 1)
        return new_state, {"batch_size": count, "chunks": n_chunks}

    return step


def _phase_kind(phase) -> bool:
    """True for a private step's phase, False for a non-private one; refuses anything else."""
    if isinstance(phase, privacy.DPSGDPhase):
        return True
    _v.instance(privacy.NonPrivatePhase, "a privacy.DPSGDPhase or a privacy.NonPrivatePhase with a "
                "sample_rate", phase=phase)
    if phase.sample_rate is None:
        raise ValueError(f"NonPrivatePhase {phase.name!r} has no sample_rate, so no sampled schedule to "
                         "run (a non-private plan whose expected batch is larger than its N records "
                         "has none); build it with NonPrivatePhase.from_batch_size.")
    return False


def _sharded_grads(grads_fn: Callable, mesh: jax.sharding.Mesh) -> Callable:
    """``grads_fn`` with the batch and mask split over ``mesh``'s axis and the sums added once.

    Each device runs ``grads_fn`` on its contiguous slice of the padded batch (its rows' clip
    factors depend on those rows only: the loss is per-example), and one ``psum`` adds the
    per-device clipped sums; the result is replicated. The per-example ``aux`` stays on the
    devices (it is diagnostics only, and the step does not return it).

    ``check_vma=False`` is required for correctness, not speed: with JAX's varying-axes checks on,
    ``jax.grad`` inside the body treats the replicated parameters (and the ghost path's zero
    perturbations) as broadcast to every device and transposes that broadcast into a ``psum``, so
    each device's "per-example" gradient would be the sum of one example from every device and the
    clip factors would be wrong. With the checks off the body is a plain per-device program
    (tested against the single-device step in ``tests/test_dpsgd_sharding.py``).
    """
    axis, _ = mesh_axis(mesh)
    P = jax.sharding.PartitionSpec

    def local(params, batch, mask):
        g, _ = grads_fn(params, batch, mask)
        return jax.lax.psum(g, axis)

    sharded = jax.shard_map(local, mesh=mesh, in_specs=(P(), P(axis), P(axis)), out_specs=P(),
                            check_vma=False)

    def fn(params, batch, mask):
        return sharded(params, batch, mask), None

    return fn


def make_phase_runner(step: Callable, *, donate: bool = False) -> Callable:
    """Compiles ``run(state, data, key, extra, num_steps) -> state`` executing ``num_steps`` steps.

    The loop is a ``lax.fori_loop`` with a *dynamic* trip count, so one compilation serves every
    chunk length. With ``donate=True`` the input state's buffers are reused for the output (less
    memory; the caller must not touch the input state afterwards). Step t uses the key ``fold_in(key, state.steps)`` (t counted over the whole
    phase), so results do not depend on how the phase is cut into chunks.
    """

    def run(state, data, key, extra, num_steps):
        def body(_, s):
            new, _ = step(s, data, jax.random.fold_in(key, s.steps), extra)
            return new

        return jax.lax.fori_loop(0, num_steps, body, state)

    return jax.jit(run, donate_argnums=(0,) if donate else ())


def run_phase(
    step: Callable,
    state: TrainState,
    data: PyTree,
    key: jax.Array,
    num_steps: int,
    *,
    extra: PyTree = None,
    chunk_size: int = 1000,
    progress: Callable[[int, int], None] | None = None,
    runner: Callable | None = None,
    should_stop: Callable[[], bool] | None = None,
    checkpoint: Any = None,
) -> TrainState:
    """Runs ``num_steps`` steps of ``step`` in compiled chunks of at most ``chunk_size`` steps.

    Args:
        step: a step from :func:`make_dp_step` (or any function of the same signature); may be
            None when ``runner`` is given.
        state: initial :class:`TrainState`; ``state.steps`` counts executed steps.
        data: the dataset pytree (device-resident; leading axis m).
        key: the phase key (secret for DP phases).
        num_steps: steps to execute.
        extra: passed to every step (e.g. frozen generator and decoder parameters).
        chunk_size: steps per compiled call; progress is reported between chunks.
        progress: ``progress(done, total)`` called after each chunk.
        runner: a compiled ``runner(state, data, key, extra, num_steps) -> state``, e.g. from
            :func:`make_phase_runner` to reuse its compilation (GS-WGAN passes its own grouped
            pretraining runner).
        should_stop: called after each chunk; when it returns True the phase ends early (the
            state's step count then says how many steps ran).
        checkpoint: a hook with ``restore(state, total) -> (state, done)``, called once before the
            first chunk (it may return a saved state of this phase and the number of its steps
            already executed, which are then not run again), and ``save(state, done, total,
            stopping)``, called after every chunk (``stopping``: ``should_stop`` ended the phase
            early). Step t uses ``fold_in(key, state.steps)``, so a phase continued from a saved
            state with the same key executes exactly the steps of an uninterrupted run. ``save``
            may raise to end the run (a paused fit, ``docs/checkpoints.md``). None: no hook.

    Returns:
        The final state; ``int(state.steps)`` is the number of steps actually executed.
    """
    total = _v.whole(minimum=0, num_steps=num_steps)
    chunk = _v.whole(minimum=1, chunk_size=chunk_size)
    runner = runner or make_phase_runner(step)

    def report(state, done):
        jax.block_until_ready(state.steps)
        progress(done, total)

    return run_chunks(lambda state, done, n: runner(state, data, key, extra, jnp.int32(n)), state,
                      total, chunk, after_chunk=report if progress is not None else None,
                      should_stop=should_stop, checkpoint=checkpoint)


def run_chunks(run_chunk: Callable, state: Any, total: int, chunk_size: int, *,
               after_chunk: Callable | None = None, should_stop: Callable[[], bool] | None = None,
               checkpoint: Any = None) -> Any:
    """The host loop of every compiled phase: ``total`` units (steps, iterations) in chunks.

    ``run_chunk(state, done, n) -> state`` runs units ``done .. done + n - 1`` (one compiled call);
    ``after_chunk(state, done)`` follows each chunk (progress); ``should_stop()`` may end the phase
    after a chunk that is not the last (asked once the chunk has run, not when it was dispatched); ``checkpoint`` is the hook described in :func:`run_phase`
    (``restore`` once before the first chunk, ``save`` after every chunk). Used by
    :func:`run_phase`, the GAN phases and DP-SYN's stacked autoencoders.
    """
    done = 0
    if checkpoint is not None:
        state, done = checkpoint.restore(state, total)
    while done < total:
        n = min(chunk_size, total - done)
        state = run_chunk(state, done, n)
        done += n
        if should_stop is not None:  # a compiled call returns before it has run: wait for it,
            jax.block_until_ready(state)  # or a clock-based test would see every chunk in time
        if after_chunk is not None:
            after_chunk(state, done)
        stop = should_stop is not None and done < total and should_stop()
        if checkpoint is not None:
            checkpoint.save(state, done, total, stop)
        if stop:
            break
    return state


__all__ = [
    "TrainState",
    "gather_rows",
    "init_state",
    "make_dp_step",
    "make_phase_runner",
    "run_chunks",
    "run_phase",
]
