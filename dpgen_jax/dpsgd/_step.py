"""DP-SGD steps that compose with any optax optimizer, and a fused phase runner.

A step samples a Poisson batch inside the compiled graph (:mod:`._sampling`), computes the clipped
per-example gradient sum (:mod:`._clipping`), adds Gaussian noise with standard deviation
``noise_multiplier * clip_norm`` per coordinate (:mod:`._noise`: one keyed draw per step, tails
beyond 9 sigma), divides by the *expected* batch size (``q * m``, or a public ``q * N``) and
applies the optimizer. A draw that exceeds the padded
capacity is processed in further chunks inside the same step (``lax.while_loop``), so the sample
is exactly Poisson. :func:`run_phase` executes many steps per compiled call and counts the steps
actually executed in the state; that count is what the accountant must be given.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax.dpsgd._clipping import METHODS, clipped_grad_sum, grad_sum
from dpgen_jax.dpsgd._noise import add_gaussian_noise
from dpgen_jax.dpsgd._sampling import default_capacity, poisson_chunk
from dpgen_jax.dpsgd._sharding import mesh_axis, pad_to_devices, resolve_mesh
from dpgen_jax._validate import positive_finite


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
        num_records: int32, the rows m the sampler scans (the group's real row count).
        sample_rate: float32, the Poisson rate q.
        expected_batch_size: float32, the normaliser of the noised sum (q * N for a public N).
        noise_std: float32, sigma * C.
    """

    num_records: jax.Array
    sample_rate: jax.Array
    expected_batch_size: jax.Array
    noise_std: jax.Array


def make_dp_step(
    loss_fn: Callable[[PyTree, PyTree], jax.Array],
    optimizer: optax.GradientTransformation,
    *,
    num_records: int,
    sample_rate: float,
    clip_norm: float | None,
    noise_multiplier: float,
    method: str = "ghost",
    fallback: str = "vmap",
    capacity: int | None = None,
    batch_fn: Callable[[PyTree, jax.Array, jax.Array, PyTree], PyTree] = gather_rows,
    post_update: Callable[[PyTree], PyTree] | None = None,
    public_grad_fn: Callable[[PyTree, jax.Array, PyTree], PyTree] | None = None,
    expected_batch_size: float | None = None,
    mesh: jax.sharding.Mesh | None = None,
) -> Callable[[TrainState, PyTree, jax.Array, PyTree], tuple[TrainState, dict]]:
    """Builds one (DP-)SGD step ``step(state, data, key, extra=None) -> (state, metrics)``.

    Args:
        loss_fn: per-example loss ``(params, batch) -> (B,)``.
        optimizer: any optax transformation; it sees only the privatised gradient.
        num_records: number of rows m of ``data`` (its leading axis), which the sampler scans.
        sample_rate: Poisson inclusion probability q; the expected batch size is q * m unless
            ``expected_batch_size`` is given.
        clip_norm: per-example L2 clip C; ``None`` for the non-private step (plain gradient).
        noise_multiplier: sigma; noise std is sigma * C per coordinate. Must be 0 when
            ``clip_norm`` is None.
        method: "ghost" or "vmap" (see :func:`clipped_grad_sum`); ignored when ``clip_norm`` is
            None.
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
            division by the expected batch size, once per step. Its size must not depend on the
            private data (use a fixed number of generated rows).
        expected_batch_size: the normaliser of the noised sum; default ``sample_rate *
            num_records``. Pass ``q * N`` for a public dataset size N (with ``q = B / N``) so
            that the real row count m enters only the sampler's scan and nothing released
            depends on it (see ``docs/engine.md``).
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
        :class:`GroupRates`, replaces the static m, q, normaliser and noise standard deviation by
        traced values, so that one compiled step serves groups with different sizes and noise
        under ``vmap`` (DP-SYN's per-label autoencoders); ``capacity`` must then be given (the
        chunk size, static), and overflow chunks are processed as usual. Metrics describe private data and are for
        diagnostics only.

    Privacy:
        One step is the Poisson-subsampled Gaussian mechanism with sampling rate q and noise
        multiplier sigma under add/remove-one neighbours (``privacy.DPSGDPhase``), when
        ``loss_fn`` is per-example and ``key`` is secret.
    """
    m = _v.count(num_records, "num_records", 1)
    q = _v.sample_rate(sample_rate, "sample_rate")
    sigma = _v.non_negative_finite(noise_multiplier, "noise_multiplier")
    _v.choice(method, "method", METHODS)
    if clip_norm is None:
        if sigma != 0.0:
            raise ValueError(
                f"noise_multiplier={noise_multiplier!r} needs a clip_norm; the non-private step "
                "(clip_norm=None) takes noise_multiplier=0."
            )
        grads_fn = grad_sum(loss_fn)
    else:
        clip_norm = _v.positive_finite(clip_norm, "clip_norm")
        grads_fn = clipped_grad_sum(loss_fn, clip_norm, method=method, fallback=fallback)
    if capacity is None:
        cap = default_capacity(m, q)
    elif isinstance(capacity, bool) or int(capacity) != capacity or capacity < 1:
        raise ValueError(f"Expected capacity={capacity!r} to be a positive integer.")
    else:
        cap = int(capacity)
    mesh = resolve_mesh(mesh)
    if mesh is not None:
        cap = pad_to_devices(cap, mesh)
        grads_fn = _sharded_grads(grads_fn, mesh)
    if expected_batch_size is None:
        expected_batch = q * m
    else:
        expected_batch = positive_finite(expected_batch_size, "expected_batch_size")
    noise_std = 0.0 if clip_norm is None else sigma * clip_norm

    def step(state: TrainState, data: PyTree, key: jax.Array, extra: PyTree = None,
             rates: GroupRates | None = None):
        if rates is None:
            m_, q_, normaliser, std = m, q, expected_batch, noise_std
        else:
            m_, q_ = rates.num_records, rates.sample_rate
            normaliser, std = rates.expected_batch_size, rates.noise_std
            if clip_norm is None:
                raise ValueError("rates= needs a private step (a clip_norm).")
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
        grad = jax.tree_util.tree_map(lambda g: g / normaliser, noisy)
        updates, opt_state = optimizer.update(grad, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        if post_update is not None:
            params = post_update(params)
        new_state = TrainState(params, opt_state, state.steps + 1)
        return new_state, {"batch_size": count, "chunks": n_chunks}

    return step


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
    total = _v.count(num_steps, "num_steps", 0)
    chunk = _v.count(chunk_size, "chunk_size", 1)
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
    after a chunk that is not the last; ``checkpoint`` is the hook described in :func:`run_phase`
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
        if after_chunk is not None:
            after_chunk(state, done)
        stop = should_stop is not None and done < total and should_stop()
        if checkpoint is not None:
            checkpoint.save(state, done, total, stop)
        if stop:
            break
    return state


def expected_batch_size(num_records: int, sample_rate: float) -> float:
    """q * N, the normaliser of a DP-SGD step.

    ``num_records`` is the dataset size the normaliser is based on: the real row count m (the
    default of :func:`make_dp_step`) or a public size N, whose result is what to pass as
    ``make_dp_step(..., expected_batch_size=...)``.
    """
    return _v.sample_rate(sample_rate, "sample_rate") * _v.count(num_records, "num_records", 1)


__all__ = [
    "TrainState",
    "expected_batch_size",
    "gather_rows",
    "init_state",
    "make_dp_step",
    "make_phase_runner",
    "run_chunks",
    "run_phase",
]
