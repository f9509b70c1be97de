"""GS-WGAN's critics and generator: the networks, the critics' updates on their shards,
pretraining, the private generator steps through the sanitiser, and sampling
(``docs/gs-wgan.md``). The configuration and the privacy plan are in ``_config.py``, the class in
``__init__.py``."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, models
from dpgen_jax.synthesizers._shards import (Shards, hooked, pad_shards, sanitizer_hook, shard_batch_indices,
                                           step_keys)
from dpgen_jax.synthesizers._config import Flags
from dpgen_jax.synthesizers.gs_wgan._config import FLAGS, SAMPLE_FROM, GSWGANConfig


def networks(config: GSWGANConfig, width: int) -> models.GSWGANNetworks:
    return models.gs_wgan_networks(width, generator_hidden=config.generator_hidden,
                                   critic_hidden=config.critic_hidden,
                                   generator_norm=config.generator_norm,
                                   critic_norm=config.critic_norm, init=config.init)


def optimizer(config: GSWGANConfig) -> optax.GradientTransformation:
    """Adam(lr, betas=(beta1, beta2), eps=1e-8), the thesis's optimiser for both networks."""
    return optax.adam(config.learning_rate, b1=config.beta1, b2=config.beta2, eps=1e-8)


@functools.partial(jax.jit, static_argnums=(0, 1))
def init_generator(config: GSWGANConfig, width: int, key: jax.Array) -> PyTree:
    return networks(config, width).generator.init(key, jnp.zeros((1, config.noise_dim)))["params"]


@functools.partial(jax.jit, static_argnums=(0, 1))
def init_critic(config: GSWGANConfig, width: int, key: jax.Array) -> PyTree:
    return networks(config, width).critic.init(key, jnp.zeros((2, width)))["params"]


def generate(config: GSWGANConfig, width: int, params: PyTree, z: jax.Array) -> jax.Array:
    """Generated rows in (-1, 1) for latent codes ``z`` (n, noise_dim)."""
    return networks(config, width).generator.apply({"params": params}, z)


def critic_scores(config: GSWGANConfig, params: PyTree, rows: jax.Array) -> jax.Array:
    """One score per row, ``(n,)``."""
    return networks(config, rows.shape[1]).critic.apply({"params": params}, rows)[:, 0]


# ----------------------------------------------------------------------------- losses and steps


class Net(NamedTuple):
    params: PyTree
    opt_state: PyTree


def critic_loss(config: GSWGANConfig, params: PyTree, real: jax.Array, fake: jax.Array,
                alpha: jax.Array) -> jax.Array:
    """WGAN-GP: ``mean D(fake) - mean D(real) + lambda * mean (||grad D(x_hat)|| - 1)^2`` plus
    GS-WGAN's drift term ``drift * mean D(real)^2``; ``x_hat = alpha real + (1 - alpha) fake``
    with ``alpha`` (B, 1) drawn per row."""
    x_hat = alpha * real + (1.0 - alpha) * fake
    grads = jax.grad(lambda x: jnp.sum(critic_scores(config, params, x)))(x_hat)
    norms = jnp.sqrt(jnp.sum(grads * grads, axis=1) + 1e-12)
    d_real = critic_scores(config, params, real)
    d_fake = critic_scores(config, params, fake)
    return (jnp.mean(d_fake) - jnp.mean(d_real) + config.gradient_penalty * jnp.mean((norms - 1.0) ** 2)
            + config.drift * jnp.mean(d_real ** 2))


def critic_update(config: GSWGANConfig, critic: Net, gen_params: PyTree, x: jax.Array,
                  start: jax.Array, size: jax.Array, key: jax.Array) -> Net:
    """One Adam step of a critic on B rows of its shard against B fresh generated rows."""
    k_z, k_rest = jax.random.split(key)
    return critic_update_on(config, critic, _fake_rows(config, x.shape[1], gen_params, k_z), x, start, size, k_rest)


def _fake_rows(config: GSWGANConfig, width: int, gen_params: PyTree, key: jax.Array) -> jax.Array:
    """B generated rows for a critic update (no gradient flows back to the generator)."""
    return lax.stop_gradient(generate(config, width, gen_params,
                                      jax.random.normal(key, (config.batch_size, config.noise_dim))))


def critic_update_on(config: GSWGANConfig, critic: Net, fake: jax.Array, x: jax.Array,
                     start: jax.Array, size: jax.Array, key: jax.Array) -> Net:
    """One Adam step of a critic on B rows of its shard against the generated rows ``fake``."""
    k_idx, k_a = jax.random.split(key)
    b = config.batch_size
    real = jnp.take(x, shard_batch_indices(k_idx, start, size, b), axis=0)
    real = real * (size > 0).astype(real.dtype)  # an empty shard contributes no row of another
    alpha = jax.random.uniform(k_a, (b, 1))
    grads = jax.grad(critic_loss, argnums=1)(config, critic.params, real, fake, alpha)
    updates, opt_state = optimizer(config).update(grads, critic.opt_state, critic.params)
    return Net(optax.apply_updates(critic.params, updates), opt_state)


def critic_updates(config, critic: Net, gen_params, x, start, size, key) -> Net:
    """``critic_steps_per_generator_step`` critic updates with keys ``fold_in(key, i)``: update i
    is :func:`critic_update` with that key. The generator does not change during them, so the
    generated rows of all updates come from one call (batches of B, each normalised on its own)."""
    n = config.critic_steps_per_generator_step
    k_z, k_rest = jax.vmap(jax.random.split, out_axes=1)(
        jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(n)))
    fakes = jax.vmap(lambda kz: _fake_rows(config, x.shape[1], gen_params, kz))(k_z)
    return lax.fori_loop(0, n, lambda i, c: critic_update_on(config, c, fakes[i], x, start, size, k_rest[i]),
                         critic)


def all_critic_updates(config: GSWGANConfig, critics: Net, gen_params: PyTree, x: jax.Array,
                       shards: Shards, key: jax.Array, *, num_shards: int | None = None,
                       mesh: jax.sharding.Mesh | None = None) -> Net:
    """``critic_steps_per_generator_step`` updates of EVERY critic (stacked over K), each on B rows
    of its own shard; update i of every critic uses the same B rows generated from
    ``fold_in(key, i)`` (they depend on the generator and public randomness only, so sharing them
    couples no shard to another).

    With a ``mesh`` the stack (padded by the caller with empty shards to a multiple of the device
    count; ``num_shards``: the real K) is split along K over the devices (``shard_map``; the
    critics never communicate); critic k's keys are those of the unpadded run."""
    k_pad = shards.starts.shape[0]
    k = k_pad if num_shards is None else num_shards

    def update(nets, starts, sizes, keys, fake, rows):
        return jax.vmap(lambda c, start, size, kk: critic_update_on(config, c, fake, rows, start, size, kk))(
            nets, starts, sizes, keys)

    if mesh is not None:
        P = jax.sharding.PartitionSpec
        axis = mesh.axis_names[0]
        update = jax.shard_map(update, mesh=mesh, in_specs=(P(axis),) * 4 + (P(), P()),
                               out_specs=P(axis), check_vma=False)

    def one_round(i, nets):
        k_z, k_rest = jax.random.split(jax.random.fold_in(key, i))
        fake = _fake_rows(config, x.shape[1], gen_params, k_z)
        keys = jax.random.split(k_rest, k)
        if k_pad > k:  # the padding's critics (empty shards, dropped afterwards) reuse keys
            keys = keys[jnp.arange(k_pad) % k]
        return update(nets, shards.starts, shards.sizes, keys, fake, x)

    return lax.fori_loop(0, config.critic_steps_per_generator_step, one_round, critics)


class Snapshots:
    """A :func:`dpsgd.run_phase` checkpoint hook that keeps the generator that samples
    (``sample_from``: the moving average or the raw one; a host copy) whenever the executed step
    count is a multiple of ``every`` or the phase's last, then hands ``restore``/``save`` to the
    fit's own hook ``inner`` (None: none). ``kept``: step -> parameters; a resumed phase keeps only
    the snapshots of the steps run in this process."""

    def __init__(self, every: int, inner=None, sample_from: str = "ema"):
        self.every, self.inner, self.kept = every, inner, {}
        self.raw = _v.one_of(SAMPLE_FROM, sample_from=sample_from) == "raw"

    def restore(self, state, total):
        return self.inner.restore(state, total) if self.inner is not None else (state, 0)

    def save(self, state, done, total, stopping):
        if done % self.every == 0 or done == total or stopping:
            self.kept[int(done)] = jax.device_get(state.generator.params if self.raw else state.ema)
        if self.inner is not None:
            self.inner.save(state, done, total, stopping)


class PretrainState(NamedTuple):
    critics: Net      # stacked over the K shards
    generators: Net   # each shard's temporary generator, stacked
    steps: jax.Array  # iterations executed (int32 scalar)


def pretrain_iteration(config: GSWGANConfig, critic: Net, generator: Net, x: jax.Array,
                       start: jax.Array, size: jax.Array, key: jax.Array) -> tuple[Net, Net]:
    """One pretraining iteration of ONE shard: critic updates, then one step of that shard's own
    temporary generator (non-private: nothing of it is released)."""
    k_c, k_z = jax.random.split(key)
    critic = critic_updates(config, critic, generator.params, x, start, size, k_c)
    z = jax.random.normal(k_z, (config.batch_size, config.noise_dim))

    def loss(p):
        return -jnp.mean(critic_scores(config, critic.params, generate(config, x.shape[1], p, z)))

    grads = jax.grad(loss)(generator.params)
    updates, opt_state = optimizer(config).update(grads, generator.opt_state, generator.params)
    return critic, Net(optax.apply_updates(generator.params, updates), opt_state)


def init_pretrain(config: GSWGANConfig, width: int, k: int, key: jax.Array) -> PretrainState:
    """Fresh critics and temporary generators (and Adam states) for the K shards."""
    k_d, k_g = jax.random.split(key)
    opt = optimizer(config)
    d = jax.vmap(lambda kk: init_critic(config, width, kk))(jax.random.split(k_d, k))
    g = jax.vmap(lambda kk: init_generator(config, width, kk))(jax.random.split(k_g, k))
    return PretrainState(Net(d, jax.vmap(opt.init)(d)), Net(g, jax.vmap(opt.init)(g)),
                         jnp.zeros((), jnp.int32))


@functools.lru_cache(maxsize=32)
def _pretrain_runner(config: GSWGANConfig, shard_group: int, mesh: jax.sharding.Mesh | None = None):
    """A compiled ``run(state, x_sorted, key, shards, n)`` doing ``n`` iterations of every shard.

    The shards are processed in groups of ``shard_group``: inside a group the shards are one
    ``vmap``-ed computation that runs all ``n`` iterations before the next group starts
    (``lax.map``), so a group's parameters and activations stay in cache; with every shard in one
    group each operation streams the state of all K networks through memory (measured 1.4x slower
    per discriminator-iteration at K = 707 on this project's CPU). Iteration t of shard k uses
    ``fold_in(fold_in(key, t), k)`` whatever the grouping and chunking.

    With a ``mesh`` (one axis of D devices) the stacked shards are split along K over the devices
    (``shard_map``; K must be a multiple of D, see :func:`pretrain`): each device runs the same
    grouped loop over its K / D shards, with the shards' global indices, so the keys and results
    are those of the unsharded runner. The shards never communicate, so there is no reduction.
    """

    def local(critics, gens, starts, sizes, idx, x, key, steps, n):
        def one(args):
            critic, gen, start, size, i_shard = args

            def body(i, cg):
                key_tk = jax.random.fold_in(jax.random.fold_in(key, steps + i), i_shard)
                return pretrain_iteration(config, cg[0], cg[1], x, start, size, key_tk)

            return lax.fori_loop(0, n, body, (critic, gen))

        return lax.map(one, (critics, gens, starts, sizes, idx),
                       batch_size=min(shard_group, starts.shape[0]))

    if mesh is not None:
        axis = mesh.axis_names[0]
        P = jax.sharding.PartitionSpec
        # check_vma=False: a plain per-device program (see dpsgd._step._sharded_grads).
        local = jax.shard_map(local, mesh=mesh, in_specs=(P(axis),) * 5 + (P(),) * 4,
                              out_specs=(P(axis), P(axis)), check_vma=False)

    def run(state: PretrainState, x, key, shards: Shards, n):
        k = shards.starts.shape[0]
        critics, gens = local(state.critics, state.generators, shards.starts, shards.sizes,
                              jnp.arange(k, dtype=jnp.uint32), x, key, state.steps, n)
        return PretrainState(critics, gens, state.steps + n)

    return jax.jit(run)


def pretrain(config: GSWGANConfig, x_sorted: jax.Array, shards: Shards, key: jax.Array, *,
             iterations: int | None = None, progress=None, should_stop=None,
             checkpoint=None, mesh: jax.sharding.Mesh | None = None,
             flags: Flags = FLAGS) -> PretrainState:
    """Pretrains the K critics, each on its own shard against its own temporary generator, all in
    one compiled program (``vmap`` over groups of ``shard_group`` shards); iteration t of shard k
    uses the key ``fold_in(fold_in(k_run, t), k)`` where ``k_run`` is the second half of
    ``split(key)`` (the first initialises). Progress and ``should_stop`` act between chunks of
    ``pretrain_chunk`` iterations. The compiled runner is cached per configuration.

    ``mesh`` (default: the mesh of an enclosing ``dpsgd.data_parallel`` block, if any; one axis
    of D devices) splits the K shards over the devices; K is padded to a multiple of D with empty
    shards whose networks are dropped at the end. Same key, same critics as without a mesh (to
    float rounding); pretraining releases nothing either way (docs/scaling.md)."""
    k_init, k_run = jax.random.split(key)
    k = shards.starts.shape[0]
    state = init_pretrain(config, x_sorted.shape[1], k, k_init)
    total = config.pretrain_iterations if iterations is None else iterations
    mesh = dpsgd.resolve_mesh(mesh)
    if mesh is not None:
        size = dpsgd.pad_to_devices(k, mesh)
        nets = dpsgd.pad_stacked((state.critics, state.generators), size)
        state, shards = PretrainState(nets[0], nets[1], state.steps), pad_shards(shards, size)
        x_sorted = dpsgd.replicate(x_sorted, mesh)
    state = dpsgd.run_phase(None, state, x_sorted, k_run, total, extra=shards,
                            chunk_size=flags.pretrain_chunk, progress=progress,
                            runner=_pretrain_runner(config, flags.shard_group, mesh), should_stop=should_stop,
                            checkpoint=checkpoint)
    if mesh is not None:
        nets = jax.tree_util.tree_map(lambda x: x[:k], (state.critics, state.generators))
        state = PretrainState(nets[0], nets[1], state.steps)
    return state


class GeneratorState(NamedTuple):
    generator: Net
    ema: PyTree
    critics: Net      # stacked over the K shards (never released)
    steps: jax.Array  # generator steps executed (int32 scalar)


def init_generator_phase(config: GSWGANConfig, width: int, critics: PyTree, key: jax.Array) -> GeneratorState:
    """A fresh generator (not a copy of any temporary one), its EMA, the pretrained critics with
    fresh Adam states (as GS-WGAN)."""
    opt = optimizer(config)
    g = init_generator(config, width, key)
    return GeneratorState(Net(g, opt.init(g)), g, Net(critics, jax.vmap(opt.init)(critics)),
                          jnp.zeros((), jnp.int32))


def generator_step(config: GSWGANConfig, hook, mesh: jax.sharding.Mesh | None = None):
    """One private generator step ``step(state, x_sorted, key, shards) -> (state, {})``.

    Draws a shard k uniformly (secret); gives every critic (``critic_schedule="all"``) or critic k
    alone (``"selected"``) its updates on its own shard; then updates the generator on
    ``-sum_i D_k(G(z_i))`` through the sanitiser of ``hook`` (``_shards.sanitizer_hook`` of the
    accounted phase: its clip norm and noise; scale 1/B: the mean loss), and the EMA. What the
    step releases comes from critic k alone; the other critics' states depend on their own shards
    and on the generator, never on shard k. ``hook=None``: the same without the sanitiser (no
    clipping, no noise). With a ``mesh`` (``"all"`` only) the critics and shards are padded to a
    multiple of the device count (:func:`train_generator` does it), ``config.num_shards`` is the
    real K, and the critic updates are split along K over the devices.
    """
    b = config.batch_size
    if mesh is not None and (config.critic_schedule != "all" or config.num_shards is None):
        raise ValueError("generator_step: a mesh needs critic_schedule='all' and num_shards set "
                         f"(got {config.critic_schedule!r}, {config.num_shards!r}).")

    def step(state: GeneratorState, x, key, shards: Shards):
        k, k_c, k_z, k_noise = step_keys(key, shards.starts.shape[0] if mesh is None else config.num_shards)
        take = functools.partial(jax.tree_util.tree_map, lambda a: a[k])
        if config.critic_schedule == "all":
            critics = all_critic_updates(config, state.critics, state.generator.params, x, shards, k_c,
                                         num_shards=None if mesh is None else config.num_shards, mesh=mesh)
            critic = Net(take(critics.params), take(critics.opt_state))
        else:
            critic = critic_updates(config, Net(take(state.critics.params), take(state.critics.opt_state)),
                                    state.generator.params, x, shards.starts[k], shards.sizes[k], k_c)
            put = functools.partial(jax.tree_util.tree_map, lambda a, v: a.at[k].set(v))
            critics = Net(put(state.critics.params, critic.params),
                          put(state.critics.opt_state, critic.opt_state))
        z = jax.random.normal(k_z, (b, config.noise_dim))

        def loss(p):
            rows, divisor = hooked(generate(config, x.shape[1], p, z), k_noise, hook, b)
            return -jnp.sum(critic_scores(config, critic.params, rows)) / divisor

        grads = jax.grad(loss)(state.generator.params)
        gen = state.generator
        updates, opt_state = optimizer(config).update(grads, gen.opt_state, gen.params)
        params = optax.apply_updates(gen.params, updates)
        t = state.steps.astype(jnp.float32)
        decay = jnp.minimum(1.0 - 1.0 / (t + 1.0), config.ema_decay)
        ema = jax.tree_util.tree_map(lambda e, p: decay * e + (1.0 - decay) * p, state.ema, params)
        return GeneratorState(Net(params, opt_state), ema, critics, state.steps + 1), {}

    return step


def train_generator(config: GSWGANConfig, state: GeneratorState, x_sorted: jax.Array, shards: Shards,
                    key: jax.Array, phase, *, steps: int | None = None, progress=None,
                    should_stop=None, checkpoint=None,
                    mesh: jax.sharding.Mesh | None = None, flags: Flags = FLAGS) -> GeneratorState:
    """The generator steps of the accounted ``phase`` (``privacy_phases``' generator phase: its
    clip norm and noise multiplier; a ``NonPrivatePhase``: no sanitiser), ``phase.steps`` of them
    unless ``steps`` is given (step t uses ``fold_in(key, t)``); ``int(state.steps)`` is the
    executed count the accountant is given.

    ``mesh`` (default: the mesh of an enclosing ``dpsgd.data_parallel`` block, if any): with
    ``critic_schedule="all"`` the K critics are split over the devices (K padded with empty shards
    whose critics are dropped at the end; the shard draw, keys and release are those of the
    unsharded run, to float rounding); ``"selected"`` trains one critic per step and ignores it.
    A checkpoint hook sees the padded state, so a run resumes on the same number of devices."""
    total = phase.steps if steps is None else steps
    mesh = dpsgd.resolve_mesh(mesh) if config.critic_schedule == "all" else None
    k = shards.starts.shape[0]
    if mesh is not None:
        config = config.replace(num_shards=k)
        size = dpsgd.pad_to_devices(k, mesh)
        state, shards = state._replace(critics=dpsgd.pad_stacked(state.critics, size)), pad_shards(shards, size)
        x_sorted = dpsgd.replicate(x_sorted, mesh)
    state = dpsgd.run_phase(None, state, x_sorted, key, total, extra=shards,
                            chunk_size=flags.chunk_size, progress=progress,
                            runner=_generator_runner(config, sanitizer_hook(phase), mesh), should_stop=should_stop,
                            checkpoint=checkpoint)
    if mesh is not None:
        state = state._replace(critics=jax.tree_util.tree_map(lambda a: a[:k], state.critics))
    return state


@functools.lru_cache(maxsize=32)
def _generator_runner(config: GSWGANConfig, hook, mesh: jax.sharding.Mesh | None = None):
    """The compiled runner of :func:`generator_step`, cached per configuration, hook (and mesh)."""
    return dpsgd.make_phase_runner(generator_step(config, hook, mesh))


# ----------------------------------------------------------------------------- sampling


@functools.partial(jax.jit, static_argnums=(0, 1, 4))
def _generate_jit(config, width, params, key, n):
    if config.generator_norm != "batch":
        return generate(config, width, params, jax.random.normal(key, (n, config.noise_dim)))
    # Batch statistics: rows are generated in batches of B, as in training (no running averages).
    b = config.batch_size
    m = -(-n // b)
    z = jax.random.normal(key, (m, b, config.noise_dim))
    rows = jax.vmap(lambda zz: generate(config, width, params, zz))(z)
    return rows.reshape(m * b, width)[:n]


def sample_encoded(config: GSWGANConfig, width: int, gen_params: PyTree, n: int, key: jax.Array) -> np.ndarray:
    """``n`` generated rows in the encoder's layout (values in [0, 1]: ``(tanh + 1) / 2``)."""
    return (np.asarray(_generate_jit(config, width, gen_params, key, int(n))) + 1.0) / 2.0
