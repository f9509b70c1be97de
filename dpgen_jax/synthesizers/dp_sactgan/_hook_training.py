"""DP-SACTGAN's networks and its hook mechanism (``mechanism="hook"``, ``docs/dp-sactgan.md``):
critic and classifier updates, the generator through the DP hook on its output, the sharded step,
pretraining and sampling. The networks, optimizer and activations here are shared with the critic
mechanism (``_critic.py``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from dpgen_jax._typing import PyTree
from dpgen_jax import dpsgd, models
from dpgen_jax.synthesizers import _shards
from dpgen_jax.synthesizers.dp_sactgan._conditional import (
    TrainData,
    cond_log_probs,
    real_indices,
    sample_cond,
)
from dpgen_jax.synthesizers._config import Flags
from dpgen_jax.synthesizers.dp_sactgan._config import FLAGS, DPSACTGANConfig
from dpgen_jax.synthesizers.dp_sactgan._encoding import Layout, Modes, decode_rows


# ----------------------------------------------------------------------------- networks


class Nets(NamedTuple):
    generator: models.ColumnTokenGenerator
    critic: models.ColumnTokenCritic
    aux: models.AuxClassifier | None


@functools.lru_cache(maxsize=64)
def networks(config: DPSACTGANConfig, layout: Layout) -> Nets:
    aux = None
    if config.aux_classifier and layout.label is not None:
        aux = models.AuxClassifier(layout.widths[layout.label], tuple(config.aux_hidden))
    return Nets(models.ColumnTokenGenerator(layout.n_cols, layout.max_width, config.d_model,
                                            config.num_heads, config.num_layers),
                models.ColumnTokenCritic(layout.critic_index(), config.d_model, config.num_heads,
                                         config.num_layers), aux)


def optimizer(config: DPSACTGANConfig) -> optax.GradientTransformation:
    """CTAB-GAN+'s torch Adam with coupled L2: ``add_decayed_weights`` before ``scale_by_adam``."""
    return optax.chain(optax.add_decayed_weights(config.weight_decay),
                       optax.scale_by_adam(b1=config.beta1, b2=config.beta2, eps=config.adam_eps),
                       optax.scale(-config.learning_rate))


class Net(NamedTuple):
    params: PyTree
    opt_state: PyTree


def init_generator(config, layout, key) -> PyTree:
    return networks(config, layout).generator.init(
        key, jnp.zeros((1, config.noise_dim + layout.cond_width)))["params"]


def init_critic(config, layout, key) -> PyTree:
    return networks(config, layout).critic.init(key, jnp.zeros((1, layout.width + layout.cond_width)))["params"]


def init_aux(config, layout, key) -> PyTree:
    aux = networks(config, layout).aux
    if aux is None:
        return None
    return aux.init(key, jnp.zeros((1, layout.width - layout.widths[layout.label])))["params"]


def _masks(layout: Layout):
    slots = np.arange(layout.max_width)[None, :]
    lo, size = np.asarray(layout.block_lo)[:, None], np.asarray(layout.block_size)[:, None]
    soft = (slots >= lo) & (slots < lo + size)
    tanh = (slots == 0) & np.asarray(layout.continuous)[:, None]
    return jnp.asarray(soft), jnp.asarray(tanh)


def activate(layout: Layout, logits: jax.Array, key: jax.Array | None, tau: float) -> jax.Array:
    """Padded logits ``(B, n_cols, max_width)`` -> flat rows ``(B, width)``: tanh for alpha,
    gumbel-softmax (temperature ``tau``) over each one-hot block (plain softmax without a key)."""
    soft, tanh = _masks(layout)
    g = 0.0 if key is None else jax.random.gumbel(key, logits.shape)
    y = jax.nn.softmax(jnp.where(soft, (logits + g) / tau, -jnp.inf), axis=-1)
    y = jnp.where(soft, y, 0.0)
    out = jnp.where(tanh, jnp.tanh(logits), y)
    col, slot = layout.flat_index()
    return out[:, col, slot]


def cond_loss(layout: Layout, logits: jax.Array, col: jax.Array, cat: jax.Array) -> jax.Array:
    """Mean cross-entropy of each row's conditioned block (raw logits) against its condition."""
    soft, _ = _masks(layout)
    row = logits[jnp.arange(logits.shape[0]), col]                       # (B, max_width)
    logp = jax.nn.log_softmax(jnp.where(soft[col], row, -jnp.inf), axis=-1)
    target = jnp.asarray(layout.block_lo, jnp.int32)[col] + cat
    return -jnp.mean(jnp.take_along_axis(logp, target[:, None], axis=1))


def slerp(t: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """Spherical interpolation between the rows of ``a`` and ``b`` at fractions ``t`` (B, 1)."""
    an = a / jnp.maximum(jnp.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    bn = b / jnp.maximum(jnp.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    omega = jnp.arccos(jnp.clip(jnp.sum(an * bn, axis=1, keepdims=True), -1 + 1e-6, 1 - 1e-6))
    so = jnp.sin(omega)
    return jnp.sin((1.0 - t) * omega) / so * a + jnp.sin(t * omega) / so * b


def label_of(layout: Layout, rows: jax.Array) -> jax.Array:
    s = layout.starts[layout.label]
    return jnp.argmax(rows[:, s:s + layout.widths[layout.label]], axis=1)


# ----------------------------------------------------------------------------- steps


class Batch(NamedTuple):
    z: jax.Array        # (B, noise_dim + cond_width): noise (+) condition
    cond: jax.Array     # (B, cond_width)
    col: jax.Array      # (B,)
    cat: jax.Array      # (B,)
    real: jax.Array     # (B, width) rows of the shard with the conditioned categories


def draw_batch(config, layout, data: TrainData, k, log_probs, key) -> Batch:
    k_c, k_r, k_z = jax.random.split(key, 3)
    b = config.batch_size
    cond, col, cat = sample_cond(layout, log_probs, k_c, b)
    real = jnp.take(data.rows, real_indices(data, layout, k, col, cat, k_r), axis=0)
    real = real * (data.shards.sizes[k] > 0).astype(real.dtype)  # an empty shard sees no row
    z = jnp.concatenate([jax.random.normal(k_z, (b, config.noise_dim)), cond], axis=1)
    return Batch(z, cond, col, cat, real)


def critic_loss(config, layout, d_params, real, fake, cond, t) -> jax.Array:
    """WGAN-GP: ``mean D(fake) - mean D(real) + lambda mean(||grad D(slerp)|| - 1)^2``."""
    critic = networks(config, layout).critic
    score = lambda p, v: critic.apply({"params": p}, v)[0]  # noqa: E731
    r, f = jnp.concatenate([real, cond], 1), jnp.concatenate([fake, cond], 1)
    mid = slerp(t, r, f)
    grads = jax.grad(lambda v: jnp.sum(score(d_params, v)))(mid)
    gp = jnp.mean((jnp.sqrt(jnp.sum(grads * grads, axis=1) + 1e-12) - 1.0) ** 2)
    return jnp.mean(score(d_params, f)) - jnp.mean(score(d_params, r)) + config.gradient_penalty * gp


def critic_update(config, layout, d: Net, g_params, data, k, log_probs, key) -> Net:
    """One Adam step of critic k on a conditioned batch of its shard (not private: never released)."""
    k_b, k_g, k_t = jax.random.split(key, 3)
    batch = draw_batch(config, layout, data, k, log_probs, k_b)
    nets = networks(config, layout)
    fake = lax.stop_gradient(activate(layout, nets.generator.apply({"params": g_params}, batch.z), k_g, config.tau))
    t = jax.random.uniform(k_t, (config.batch_size, 1))
    grads = jax.grad(critic_loss, argnums=2)(config, layout, d.params, batch.real, fake, batch.cond, t)
    updates, opt_state = optimizer(config).update(grads, d.opt_state, d.params)
    return Net(optax.apply_updates(d.params, updates), opt_state)


def private_terms(config, layout, rows, cond, real, d_params, aux_params) -> jax.Array:
    """The loss terms that depend on private data, on the summed-over-rows scale, as functions of
    the (hooked) generated rows: ``-sum D(x) + B * info + sum CE(Aux(x), label(x))``."""
    nets = networks(config, layout)
    b = rows.shape[0]
    score, feat = nets.critic.apply({"params": d_params}, jnp.concatenate([rows, cond], 1))
    total = -jnp.sum(score)
    if config.info_loss:
        _, feat_real = nets.critic.apply({"params": d_params}, jnp.concatenate([real, cond], 1))
        feat_real = lax.stop_gradient(feat_real)
        info = (jnp.sum(jnp.abs(feat.mean(0) - feat_real.mean(0)))
                + jnp.sum(jnp.abs(feat.std(0) - feat_real.std(0))))
        total = total + b * info
    if nets.aux is not None:
        keep = layout.features_without_label()
        logits = nets.aux.apply({"params": aux_params}, rows[:, keep])
        target = lax.stop_gradient(label_of(layout, rows))
        total = total - jnp.sum(jnp.take_along_axis(jax.nn.log_softmax(logits), target[:, None], 1))
    return total


def hooked_loss(config, layout, rows, batch: Batch, d_params, aux_params, key, hook) -> jax.Array:
    """The private part of the generator loss as a function of the activated rows.

    With a ``hook`` (``_shards.sanitizer_hook`` of the accounted phase) the rows pass once
    through ``dpsgd.sanitized`` (each row's cotangent clipped to the phase's C, noise of std
    2 C sigma drawn from ``key``, scale 1/B) and every private term consumes the hooked rows, so
    their cotangents are summed before the single clip and noise. ``hook=None``: the same terms
    averaged over the rows, no clipping or noise.
    """
    rows, divisor = _shards.hooked(rows, key, hook, config.batch_size)
    return private_terms(config, layout, rows, batch.cond, batch.real, d_params, aux_params) / divisor


def generator_loss(config, layout, g_params, batch: Batch, d_params, aux_params, key, hook):
    """One step's generator loss: :func:`hooked_loss` of the activated rows plus the conditional
    cross-entropy on the raw logits (it depends on the public/DP condition only)."""
    k_g, k_noise = jax.random.split(key)
    logits = networks(config, layout).generator.apply({"params": g_params}, batch.z)
    rows = activate(layout, logits, k_g, config.tau)
    return (hooked_loss(config, layout, rows, batch, d_params, aux_params, k_noise, hook)
            + cond_loss(layout, logits, batch.col, batch.cat))


def generator_grads(config, layout, g_params, batch: Batch, d_params, aux_params, key, hook):
    """The generator's gradient of one step (:func:`generator_loss`)."""
    return jax.grad(generator_loss, argnums=2)(config, layout, g_params, batch, d_params, aux_params,
                                               key, hook)


def generator_update(config, layout, g: Net, batch: Batch, d_params, aux_params, key, hook) -> Net:
    grads = generator_grads(config, layout, g.params, batch, d_params, aux_params, key, hook)
    updates, opt_state = optimizer(config).update(grads, g.opt_state, g.params)
    return Net(optax.apply_updates(g.params, updates), opt_state)


def aux_update(config, layout, aux: Net, real) -> Net:
    """One Adam step of the classifier on real rows of its shard (not private: never released)."""
    nets = networks(config, layout)
    keep = layout.features_without_label()

    def loss(p):
        logits = nets.aux.apply({"params": p}, real[:, keep])
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), label_of(layout, real)[:, None], 1))

    grads = jax.grad(loss)(aux.params)
    updates, opt_state = optimizer(config).update(grads, aux.opt_state, aux.params)
    return Net(optax.apply_updates(aux.params, updates), opt_state)


def shard_iteration(config, layout, g: Net, d: Net, aux: Net | None, data: TrainData, k, log_probs,
                    key, hook):
    """One iteration on shard k: ``critic_steps`` critic updates, one generator update (through the
    sanitiser ``hook``, if any), one classifier update; all real rows come from shard k."""
    k_c, k_b, k_g = jax.random.split(key, 3)
    d = lax.fori_loop(0, config.critic_steps, lambda i, dd: critic_update(
        config, layout, dd, g.params, data, k, log_probs, jax.random.fold_in(k_c, i)), d)
    batch = draw_batch(config, layout, data, k, log_probs, k_b)
    g = generator_update(config, layout, g, batch, d.params, None if aux is None else aux.params, k_g, hook)
    if aux is not None:
        aux = aux_update(config, layout, aux, batch.real)
    return g, d, aux


class State(NamedTuple):
    generator: Net
    critics: Net          # stacked over K (never released)
    aux: Net | None       # stacked over K (never released)
    steps: jax.Array


def init_state(config, layout, k: int, key: jax.Array, critics: Net | None = None,
               aux: Net | None = None) -> State:
    """A fresh generator; fresh (or the given pretrained) stacked critics and classifiers."""
    k_g, k_d, k_a = jax.random.split(key, 3)
    opt = optimizer(config)
    g = init_generator(config, layout, k_g)
    if critics is None:
        dp = jax.vmap(lambda kk: init_critic(config, layout, kk))(jax.random.split(k_d, k))
        critics = Net(dp, jax.vmap(opt.init)(dp))
        if networks(config, layout).aux is not None:
            ap = jax.vmap(lambda kk: init_aux(config, layout, kk))(jax.random.split(k_a, k))
            aux = Net(ap, jax.vmap(opt.init)(ap))
    return State(Net(g, opt.init(g)), critics, aux, jnp.zeros((), jnp.int32))


def train_step(config, layout, hook):
    """``step(state, data, key, log_probs) -> (state, {})``: a secret uniform shard
    (``_shards.step_keys``), its critic and classifier updated on it, the generator updated."""

    def step(state: State, data: TrainData, key, log_probs):
        k_count = data.shards.starts.shape[0]
        k, k_it, _, _ = _shards.step_keys(key, k_count)
        take = functools.partial(jax.tree_util.tree_map, lambda a: lax.dynamic_index_in_dim(a, k, 0, False))
        put = functools.partial(jax.tree_util.tree_map, lambda a, v: lax.dynamic_update_index_in_dim(a, v, k, 0))
        aux = None if state.aux is None else take(state.aux)
        g, d, aux = shard_iteration(config, layout, state.generator, take(state.critics), aux, data, k,
                                    log_probs, k_it, hook)
        # materialise the updated critic before writing it back: otherwise XLA fuses the update
        # into the write and copies the whole stacked ensemble every step (measured 2.5x slower)
        d, aux = lax.optimization_barrier((d, aux))
        new_aux = None if aux is None else put(state.aux, aux)
        return State(g, put(state.critics, d), new_aux, state.steps + 1), {}

    return step


@functools.lru_cache(maxsize=32)
def _runner(config, layout, hook):
    return dpsgd.make_phase_runner(train_step(config, layout, hook))


def train(config, layout, state: State, data: TrainData, log_probs, key, phase, *,
          steps: int | None = None, progress=None, should_stop=None, checkpoint=None,
          flags: Flags = FLAGS) -> State:
    """The training steps of the accounted generator ``phase`` (its sanitiser's clip norm and
    noise; a ``NonPrivatePhase``: none), ``phase.steps`` of them unless ``steps`` is given, in
    compiled chunks; step t uses ``fold_in(key, t)``. ``int(state.steps)`` is the executed count
    the accountant is given."""
    total = phase.steps if steps is None else steps
    return dpsgd.run_phase(None, state, data, key, total, extra=log_probs, chunk_size=flags.chunk_size,
                           progress=progress, runner=_runner(config, layout, _shards.sanitizer_hook(phase)),
                           should_stop=should_stop, checkpoint=checkpoint)


class PretrainState(NamedTuple):
    generators: Net   # temporary, one per shard (never released)
    critics: Net
    aux: Net | None
    steps: jax.Array


@functools.lru_cache(maxsize=32)
def _pretrain_runner(config, layout, shard_group: int, mesh: jax.sharding.Mesh | None = None):
    """Every shard's iteration (temporary generator, critic, classifier; non-private) at once:
    ``vmap`` inside groups of ``shard_group`` shards (``lax.map``), as GS-WGAN's pretraining.

    With a ``mesh`` (one axis of D devices; the stacked networks padded to a multiple of D, see
    :func:`pretrain`) the networks are split along K over the devices (``shard_map``): each device
    runs the same grouped loop over its shards with their global indices, so keys and results are
    those of the unsharded runner. Shards never communicate: there is no reduction."""

    def local(gens, critics, aux, idx, data, key, log_probs, steps, n):
        def one(args):
            g, d, a, i_shard = args
            # a padding shard (index >= K, dropped after the phase) reads shard K - 1's rows
            i_data = jnp.minimum(i_shard, data.shards.starts.shape[0] - 1)

            def body(i, carry):
                key_tk = jax.random.fold_in(jax.random.fold_in(key, steps + i), i_shard)
                return shard_iteration(config, layout, *carry, data, i_data, log_probs, key_tk, None)

            return lax.fori_loop(0, n, body, (g, d, a))

        return lax.map(one, (gens, critics, aux, idx), batch_size=min(shard_group, idx.shape[0]))

    if mesh is not None:
        axis = mesh.axis_names[0]
        P = jax.sharding.PartitionSpec
        # check_vma=False: a plain per-device program (see dpsgd._step._sharded_grads).
        local = jax.shard_map(local, mesh=mesh, in_specs=(P(axis),) * 4 + (P(),) * 5,
                              out_specs=(P(axis),) * 3, check_vma=False)

    def run(state: PretrainState, data, key, log_probs, n):
        kk = jax.tree_util.tree_leaves(state.critics.params)[0].shape[0]
        g, d, a = local(state.generators, state.critics, state.aux, jnp.arange(kk, dtype=jnp.int32),
                        data, key, log_probs, state.steps, n)
        return PretrainState(g, d, a, state.steps + n)

    return jax.jit(run)


def pretrain(config, layout, data: TrainData, log_probs, key, *, progress=None,
             should_stop=None, checkpoint=None, mesh: jax.sharding.Mesh | None = None,
             flags: Flags = FLAGS) -> PretrainState:
    """``pretrain_iterations`` non-private iterations of every shard's critic and classifier
    against that shard's own temporary generator (releases nothing; GS-WGAN's warm start).

    ``mesh`` (default: the mesh of an enclosing ``dpsgd.data_parallel`` block, if any) splits the
    K shards' networks over its devices; K is padded to a multiple of the device count with copies
    of shard 0's networks, trained and dropped. Same key, same networks as without a mesh (to float
    rounding); see docs/scaling.md. ``checkpoint`` is ``dpsgd.run_phase``'s hook."""
    k_init, k_run = jax.random.split(key)
    kk = int(data.shards.starts.shape[0])
    opt = optimizer(config)
    base = init_state(config, layout, kk, k_init)
    gp = jax.vmap(lambda q: init_generator(config, layout, q))(jax.random.split(jax.random.fold_in(k_init, 1), kk))
    state = PretrainState(Net(gp, jax.vmap(opt.init)(gp)), base.critics, base.aux, jnp.zeros((), jnp.int32))
    mesh = dpsgd.resolve_mesh(mesh)
    if mesh is not None:
        padded = dpsgd.pad_stacked((state.generators, state.critics, state.aux),
                                   dpsgd.pad_to_devices(kk, mesh))
        state = PretrainState(*padded, state.steps)
        data, log_probs = dpsgd.replicate((data, log_probs), mesh)
    state = dpsgd.run_phase(None, state, data, k_run, config.pretrain_iterations, extra=log_probs,
                            chunk_size=max(1, min(flags.chunk_size, config.pretrain_iterations)),
                            progress=progress, runner=_pretrain_runner(config, layout, flags.shard_group, mesh),
                            should_stop=should_stop, checkpoint=checkpoint)
    if mesh is not None:
        cut = functools.partial(jax.tree_util.tree_map, lambda a: a[:kk])
        state = PretrainState(cut(state.generators), cut(state.critics), cut(state.aux), state.steps)
    return state


# ----------------------------------------------------------------------------- sampling


@functools.partial(jax.jit, static_argnums=(0, 1, 6))
def _generate(config, layout, g_params, modes, log_probs, key, n):
    k_c, k_z, k_d = jax.random.split(key, 3)
    cond, _, _ = sample_cond(layout, log_probs, k_c, n)
    z = jnp.concatenate([jax.random.normal(k_z, (n, config.noise_dim)), cond], axis=1)
    logits = networks(config, layout).generator.apply({"params": g_params}, z)
    soft, tanh = _masks(layout)
    probs = jax.nn.softmax(jnp.where(soft, logits, -jnp.inf), axis=-1)
    probs = jnp.where(soft, probs, 0.0)
    # continuous columns: tanh(alpha) in slot 0, mode logits in the block
    out = jnp.where(tanh, jnp.tanh(logits), jnp.where(np.asarray(layout.continuous)[None, :, None],
                                                      jnp.where(soft, logits, -jnp.inf), probs))
    return decode_rows(layout, out, modes, k_d)


def sample_encoded(config, layout, released: Mapping[str, PyTree], n: int, key) -> np.ndarray:
    """``n`` rows in ``TableEncoder``'s layout from the released generator, modes and condition
    frequencies (post-processing only)."""
    modes = Modes(**{f: jnp.asarray(released["modes"][f]) for f in Modes._fields})
    log_probs = cond_log_probs(layout, jnp.asarray(released["cond"]["counts"]), training=False)
    return np.asarray(_generate(config, layout, released["generator"], modes, log_probs, key, int(n)))
