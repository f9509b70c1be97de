"""GS-WGAN for tables: K discriminators on secret shards, one vectorised ensemble, and a generator
that learns only through sanitised row gradients. See ``docs/gs-wgan.md``.

Chen, Orekondy and Fritz (2020), "GS-WGAN: A Gradient-Sanitized Approach for Learning
Differentially Private Generators" (NeurIPS), as adapted to tabular data by a master's thesis
(K discriminators on disjoint shards, WGAN-GP, rows min-max scaled to [-1, 1]).

* **Partition.** Every private row gets an independent, uniform shard label in {0..K-1} from the
  secret key (adding or removing a row moves no other row); rows are sorted by label so that each
  shard is a contiguous slice. Labels, shard sizes and the per-step shard choices stay inside the
  process: never saved, logged or reported.
* **Pretraining** (optional, the thesis's 2,000 iterations in its presets; no release, no privacy
  cost): every discriminator trains on its own shard only, against its own temporary generator,
  with WGAN-GP (5 critic steps per generator step), all K at once under ``vmap``. Nothing leaves
  this phase but the discriminators, which reach the released generator only through the sanitiser.
* **Private generator.** Each step draws one discriminator uniformly at random; every critic
  (``critic_schedule="all"``, the default) or the drawn one alone (``"selected"``, GS-WGAN's)
  gets 5 WGAN-GP updates on its own shard against the current generator; then the generator is
  updated on the drawn critic's scores through :func:`dpgen_jax.dpsgd.sanitized`: the
  gradient of the generator loss with respect to each generated row is clipped to C and gets
  Gaussian noise of std 2C sigma, once per step. The generator update is a function of its
  parameters, z and the sanitised gradient alone. An exponential moving average of the generator
  (GS-WGAN's, decay 0.999 with warm-up) is released beside the raw one and samples by default.
* **Accounting.** :class:`dpgen_jax.privacy.ShardedSanitizerPhase` with the proven
  (selection-conditioned) bound as the headline, on the generator steps actually executed; the
  report gives beside it the number that assumes each step's shard draw is fresh
  (``sharded_accounting["assumed"]``, not a proven bound) and the thesis/GS-WGAN recipe as
  ``paper_accounting`` (not a valid bound).

Functional API: :func:`networks`, :func:`init_generator`, :func:`init_critic`, :func:`num_shards`,
:func:`partition`, :func:`shard_batch_indices`, :func:`critic_loss`, :func:`pretrain_iteration`,
:func:`init_pretrain`, :func:`pretrain`, :func:`generator_step`, :func:`init_generator_phase`,
:func:`train_generator`, :func:`sample_encoded`, :func:`privacy_phases`. Class API:
:class:`GSWGAN` (``synthesizers.create("gs-wgan")``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, models, privacy
from dpgen_jax._validate import check_choice, check_steps
from dpgen_jax.synthesizers._base import Synthesizer, SynthesizerConfig, TrainResult, register

PyTree = Any
SAMPLE_FROM = ("ema", "raw")
CRITIC_SCHEDULES = ("all", "selected")
#: The smallest proven epsilon at which GS-WGAN's frontier on cardio reached TSTR AUROC 0.70
#: (experiments.gswgan_frontier, docs/gs-wgan.md); below it a fit's report says what to expect.
LEARNS_FROM_EPSILON = 100.0

# The thesis's settings (sigma 1.07, B 32, C 1) at its five shard counts K: the thesis's K itself
# when the table's N records give shards of at least a batch on average (N / K >= B; on cardio's
# 56,000 training rows M1500 is K = 1500 shards of 37.3 rows, so the thesis's accounting gives its
# 6.45), else the thesis's shard size, K = round(N / (70,000 / K)) (Adult's 32,561 rows: M1500 is
# K = 698 shards of about 46.7 records). generator_steps are the checkpoints the
# thesis reported (docs/gs-wgan.md). The presets are the thesis's algorithm as published: 2,000
# pretraining iterations, only the drawn critic trains at each step ("selected"), BatchNorm in both
# networks (docs/gs-wgan.md, "Why sharded training collapses", says what that schedule does).
THESIS_ROWS = 70_000
THESIS_PRESETS: dict[str, dict[str, Any]] = {
    f"thesis-M{k}": {"records_per_shard": THESIS_ROWS / k, "thesis_shards": k, "generator_steps": t,
                     "num_shards": None,
                     "batch_size": 32, "noise_multiplier": 1.07, "clip_norm": 1.0,
                     "pretrain_iterations": 2000, "critic_schedule": "selected",
                     "generator_norm": "batch", "critic_norm": "batch"}
    for k, t in ((1500, 21_000), (1000, 39_000), (750, 20_000), (500, 38_000), (250, 21_000))
}


@dataclasses.dataclass(frozen=True)
class GSWGANConfig(SynthesizerConfig):
    """Hyperparameters of GS-WGAN (all public; ``docs/gs-wgan.md`` says where each comes from).

    ``num_shards`` (K) fixes the number of discriminators; None derives it from the public
    number of records N as ``round(N / records_per_shard)`` (at least 1). ``critic_schedule``:
    ``"all"`` (default) gives every critic its ``critic_steps_per_generator_step`` updates on its
    own shard at every generator step, so that each critic keeps up with the generator, and the
    drawn critic's scores train the generator; ``"selected"`` is GS-WGAN's and the thesis's: only
    the drawn critic trains. Without noise the latter collapses every binary column to one value
    once K > 1 (``docs/gs-wgan.md``, "Why sharded training collapses"); the privacy analysis is the
    same for both. The defaults (shards of 160 records, no pretraining, 3,000 generator steps:
    about 15 steps per shard, as the thesis's M1500) keep the cost of ``"all"``, K x T x 5 critic
    updates, near the thesis's pretraining; the ``thesis-M*`` presets are the thesis's schedule.
    ``fit(epsilon=...)`` calibrates the noise multiplier under the proven bound (no cap short of
    1e7: a proven epsilon near 1 on Adult needs a noise multiplier far above 100).
    ``snapshot_every`` (0: off): keep a host copy of the moving-average generator after every that
    many generator steps, in memory only (:attr:`GSWGAN.snapshots`, :meth:`GSWGAN.sample_snapshot`),
    for choosing a checkpoint on held-out rows; each is a function of the sanitised steps before it,
    so the accounting of the executed steps covers it (the choice itself, on real rows, is not).
    """

    NOISE_FIELDS: ClassVar[Mapping[str, str]] = {"generator": "noise_multiplier"}

    num_shards: int | None = None
    records_per_shard: float = 160.0
    thesis_shards: int | None = None
    batch_size: int = 32
    noise_dim: int = 32
    generator_hidden: tuple[int, ...] = (128, 256)
    critic_hidden: tuple[int, ...] = (128,)
    generator_norm: str = "layer"
    critic_norm: str = "layer"
    init: str = "torch"
    critic_steps_per_generator_step: int = 5
    pretrain_iterations: int = 0
    generator_steps: int = 3000
    noise_multiplier: float = 1.07
    clip_norm: float = 1.0
    gradient_penalty: float = 10.0
    drift: float = 1e-3
    learning_rate: float = 1e-4
    beta1: float = 0.0
    beta2: float = 0.9
    ema_decay: float = 0.999
    sample_from: str = "ema"
    pretrain_chunk: int = 50
    shard_group: int = 32
    chunk_size: int = 500
    critic_schedule: str = "all"
    snapshot_every: int = 0

    def validate(self) -> GSWGANConfig:
        for name in ("batch_size", "noise_dim", "critic_steps_per_generator_step",
                     "pretrain_chunk", "shard_group", "chunk_size"):
            if check_steps(getattr(self, name), name) < 1:
                raise ValueError(f"Expected {name}={getattr(self, name)!r} to be an integer >= 1.")
        if self.num_shards is not None and check_steps(self.num_shards, "num_shards") < 1:
            raise ValueError(f"Expected num_shards={self.num_shards!r} to be an integer >= 1 or None.")
        if self.thesis_shards is not None and check_steps(self.thesis_shards, "thesis_shards") < 1:
            raise ValueError(f"Expected thesis_shards={self.thesis_shards!r} to be an integer >= 1 or None.")
        check_steps(self.pretrain_iterations, "pretrain_iterations")
        check_steps(self.snapshot_every, "snapshot_every")
        check_steps(self.generator_steps, "generator_steps")
        for name, widths in (("generator_hidden", self.generator_hidden),
                             ("critic_hidden", self.critic_hidden)):
            if not widths or any(isinstance(w, bool) or int(w) != w or w < 1 for w in widths):
                raise ValueError(f"Expected {name}={widths!r} to be a non-empty tuple of widths >= 1.")
        check_choice(self.generator_norm, models._gswgan.NORMS, "generator_norm")
        check_choice(self.critic_norm, models._gswgan.NORMS, "critic_norm")
        check_choice(self.init, models._gswgan.INITS, "init")
        check_choice(self.sample_from, SAMPLE_FROM, "sample_from")
        check_choice(self.critic_schedule, CRITIC_SCHEDULES, "critic_schedule")
        for name in ("records_per_shard", "noise_multiplier", "clip_norm", "learning_rate"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (v > 0 and math.isfinite(v)):
                raise ValueError(f"Expected {name}={v!r} to be finite and > 0.")
        for name in ("gradient_penalty", "drift"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"Expected {name}={v!r} to be finite and >= 0.")
        for name in ("beta1", "beta2", "ema_decay"):
            v = getattr(self, name)
            if isinstance(v, bool) or not 0 <= v < 1:
                raise ValueError(f"Expected {name}={v!r} in [0, 1).")
        return self


# ----------------------------------------------------------------------------- structure


def networks(config: GSWGANConfig, width: int) -> models.GSWGANNetworks:
    return models.gs_wgan_networks(width, generator_hidden=config.generator_hidden,
                                   critic_hidden=config.critic_hidden,
                                   generator_norm=config.generator_norm,
                                   critic_norm=config.critic_norm, init=config.init)


def optimizer(config: GSWGANConfig) -> optax.GradientTransformation:
    """Adam(lr, betas=(beta1, beta2), eps=1e-8), the thesis's optimiser for both networks."""
    return optax.adam(config.learning_rate, b1=config.beta1, b2=config.beta2, eps=1e-8)


def init_generator(config: GSWGANConfig, width: int, key: jax.Array) -> PyTree:
    return networks(config, width).generator.init(key, jnp.zeros((1, config.noise_dim)))["params"]


def init_critic(config: GSWGANConfig, width: int, key: jax.Array) -> PyTree:
    return networks(config, width).critic.init(key, jnp.zeros((2, width)))["params"]


def generate(config: GSWGANConfig, width: int, params: PyTree, z: jax.Array) -> jax.Array:
    """Generated rows in (-1, 1) for latent codes ``z`` (n, noise_dim)."""
    return networks(config, width).generator.apply({"params": params}, z)


def critic_scores(config: GSWGANConfig, params: PyTree, rows: jax.Array) -> jax.Array:
    """One score per row, ``(n,)``."""
    return networks(config, rows.shape[1]).critic.apply({"params": params}, rows)[:, 0]


def num_shards(config: GSWGANConfig, num_records: int) -> int:
    """K: ``num_shards``; else ``thesis_shards`` when N / thesis_shards >= B (the presets); else
    ``round(N / records_per_shard)``, all from the public number of records N.

    Raises:
        ValueError: K larger than N, or expected shards (N / K records) smaller than a batch.
    """
    n = check_steps(num_records, "num_records")
    if config.num_shards is not None:
        k, field = config.num_shards, "num_shards"
    elif config.thesis_shards is not None and n >= config.thesis_shards * config.batch_size:
        k, field = config.thesis_shards, "thesis_shards"
    else:
        k, field = max(1, round(n / config.records_per_shard)), "records_per_shard"
    value = getattr(config, field)
    if n < 1:
        raise ValueError(f"Expected num_records={num_records!r} to be >= 1.")
    if k > n:
        raise ValueError(f"Expected num_shards={k} <= the number of records N={n} (from {field}={value}).")
    if n / k < config.batch_size:
        raise ValueError(
            f"{field}={value} gives K={k} shards of N/K={n / k:.1f} records on average for N={n}, "
            f"fewer than batch_size={config.batch_size}; use fewer shards or a smaller batch.")
    return k


# ----------------------------------------------------------------------------- shards


class Shards(NamedTuple):
    """Where each shard sits in the rows sorted by their secret labels (never released)."""

    starts: jax.Array  # (K,) int32
    sizes: jax.Array   # (K,) int32


@functools.partial(jax.jit, static_argnums=(2,))
def partition(x: jax.Array, key: jax.Array, num_shards: int) -> tuple[jax.Array, Shards]:
    """Independent uniform shard labels for the rows of ``x``; the rows sorted by label.

    Returns ``(x_sorted, shards)``: shard k is ``x_sorted[starts[k] : starts[k] + sizes[k]]``.
    Adding or removing a row changes no other row's label (every accounting assumes this).
    """
    labels = jax.random.randint(key, (x.shape[0],), 0, num_shards)
    order = jnp.argsort(labels, stable=True)
    sizes = jnp.bincount(labels, length=num_shards).astype(jnp.int32)
    starts = (jnp.cumsum(sizes) - sizes).astype(jnp.int32)
    return x[order], Shards(starts, sizes)


def shard_batch_indices(key: jax.Array, start: jax.Array, size: jax.Array, batch: int) -> jax.Array:
    """``batch`` row indices inside the shard ``[start, start + size)``, static shape.

    Distinct rows (a uniform random subset, Floyd's algorithm) when the shard holds at least
    ``batch`` rows; uniform draws with replacement inside the shard otherwise. An empty shard
    returns ``start`` (the caller masks those rows out).
    """
    size = jnp.asarray(size, jnp.int32)
    u = jax.random.uniform(key, (2, batch))
    # Floyd: for j = size - batch .. size - 1, t ~ U{0..j}; take t unless already taken, else j.
    j = size - batch + jnp.arange(batch, dtype=jnp.int32)
    t = jnp.minimum((u[0] * (j + 1).astype(jnp.float32)).astype(jnp.int32), j)

    def body(i, chosen):
        dup = jnp.any((chosen == t[i]) & (jnp.arange(batch) < i))
        return chosen.at[i].set(jnp.where(dup, j[i], t[i]))

    floyd = lax.fori_loop(0, batch, body, jnp.zeros(batch, jnp.int32))
    bound = jnp.maximum(size, 1)
    with_replacement = jnp.minimum((u[1] * bound.astype(jnp.float32)).astype(jnp.int32), bound - 1)
    return start + jnp.where(size >= batch, floyd, with_replacement)


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
        self.raw = check_choice(sample_from, SAMPLE_FROM, "sample_from") == "raw"

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
def _pretrain_runner(config: GSWGANConfig, mesh: jax.sharding.Mesh | None = None):
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
                       batch_size=min(config.shard_group, starts.shape[0]))

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


def _pad_shards(shards: Shards, size: int) -> Shards:
    """K shards padded to ``size`` with empty ones (start 0, size 0): their networks (copies of
    shard 0's, :func:`dpsgd.pad_stacked`) train and are dropped; an empty shard's critic sees no
    real row."""
    zeros = jnp.zeros((size - shards.starts.shape[0],), jnp.int32)
    return Shards(jnp.concatenate([shards.starts, zeros]), jnp.concatenate([shards.sizes, zeros]))


def pretrain(config: GSWGANConfig, x_sorted: jax.Array, shards: Shards, key: jax.Array, *,
             iterations: int | None = None, progress=None, should_stop=None,
             checkpoint=None, mesh: jax.sharding.Mesh | None = None) -> PretrainState:
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
        state, shards = PretrainState(nets[0], nets[1], state.steps), _pad_shards(shards, size)
        x_sorted = dpsgd.replicate(x_sorted, mesh)
    state = dpsgd.run_phase(None, state, x_sorted, k_run, total, extra=shards,
                            chunk_size=config.pretrain_chunk, progress=progress,
                            runner=_pretrain_runner(config, mesh), should_stop=should_stop,
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


def step_keys(key: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(shard, k_critic, k_z, k_noise)`` of one generator step: the shard is drawn uniformly from
    0..K-1, independently at every step (secret: never logged or released)."""
    k_sel, k_c, k_z, k_noise = jax.random.split(key, 4)
    return jax.random.randint(k_sel, (), 0, k), k_c, k_z, k_noise


def generator_step(config: GSWGANConfig, private: bool, mesh: jax.sharding.Mesh | None = None):
    """One private generator step ``step(state, x_sorted, key, shards) -> (state, {})``.

    Draws a shard k uniformly (secret); gives every critic (``critic_schedule="all"``) or critic k
    alone (``"selected"``) its updates on its own shard; then updates the generator on
    ``-sum_i D_k(G(z_i))`` through the sanitiser (scale 1/B: the mean loss), and the EMA. What the
    step releases comes from critic k alone; the other critics' states depend on their own shards
    and on the generator, never on shard k. ``private=False``: the same without the sanitiser (no
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
            rows = generate(config, x.shape[1], p, z)
            if private:
                rows = dpsgd.sanitized(rows, k_noise, clip_norm=config.clip_norm,
                                       noise_multiplier=config.noise_multiplier, scale=1.0 / b)
                return -jnp.sum(critic_scores(config, critic.params, rows))
            return -jnp.mean(critic_scores(config, critic.params, rows))

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
                    key: jax.Array, *, private: bool = True, steps: int | None = None, progress=None,
                    should_stop=None, checkpoint=None,
                    mesh: jax.sharding.Mesh | None = None) -> GeneratorState:
    """``generator_steps`` generator steps (step t uses ``fold_in(key, t)``); ``int(state.steps)``
    is the executed count the accountant is given.

    ``mesh`` (default: the mesh of an enclosing ``dpsgd.data_parallel`` block, if any): with
    ``critic_schedule="all"`` the K critics are split over the devices (K padded with empty shards
    whose critics are dropped at the end; the shard draw, keys and release are those of the
    unsharded run, to float rounding); ``"selected"`` trains one critic per step and ignores it.
    A checkpoint hook sees the padded state, so a run resumes on the same number of devices."""
    total = config.generator_steps if steps is None else steps
    mesh = dpsgd.resolve_mesh(mesh) if config.critic_schedule == "all" else None
    k = shards.starts.shape[0]
    if mesh is not None:
        config = config.replace(num_shards=k)
        size = dpsgd.pad_to_devices(k, mesh)
        state, shards = state._replace(critics=dpsgd.pad_stacked(state.critics, size)), _pad_shards(shards, size)
        x_sorted = dpsgd.replicate(x_sorted, mesh)
    state = dpsgd.run_phase(None, state, x_sorted, key, total, extra=shards,
                            chunk_size=config.chunk_size, progress=progress,
                            runner=_generator_runner(config, private, mesh), should_stop=should_stop,
                            checkpoint=checkpoint)
    if mesh is not None:
        state = state._replace(critics=jax.tree_util.tree_map(lambda a: a[:k], state.critics))
    return state


@functools.lru_cache(maxsize=32)
def _generator_runner(config: GSWGANConfig, private: bool, mesh: jax.sharding.Mesh | None = None):
    """The compiled runner of :func:`generator_step`, cached per configuration (and mesh)."""
    return dpsgd.make_phase_runner(generator_step(config, private, mesh))


# ----------------------------------------------------------------------------- sampling, privacy


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


def privacy_phases(config: GSWGANConfig, num_records: int, *, steps: Mapping[str, int] | None = None,
                   private: bool = True, accounting: str = "proven") -> list:
    """The generator phase: :class:`privacy.ShardedSanitizerPhase` (pretraining releases nothing
    and has no event), or non-private."""
    t = dict(steps or {}).get("generator", config.generator_steps)
    if not private:
        return [privacy.NonPrivatePhase("generator", t)]
    return [privacy.ShardedSanitizerPhase(
        "generator", num_shards=num_shards(config, num_records), steps=t,
        rows_per_step=config.batch_size, noise_multiplier=config.noise_multiplier,
        dataset_size=num_records, accounting=accounting, clip_norm=config.clip_norm)]


@register
class GSWGAN(Synthesizer):
    """GS-WGAN for tables with a scikit-learn-like interface (``docs/gs-wgan.md``).

    Example:
        >>> model = GSWGAN().fit(train_df, data.adult_schema(), epsilon=10.0)   # doctest: +SKIP
        >>> model.sample(1000)                                                  # doctest: +SKIP
    """

    METHOD = "gs-wgan"
    DESCRIPTION = ("K discriminators on secret shards, a generator trained through sanitised row "
                   "gradients (Chen et al. 2020, for tables)")
    CONFIG = GSWGANConfig
    PRESETS = THESIS_PRESETS
    CHECKPOINTS = True

    def _phases(self, config, num_records, steps, private):
        return privacy_phases(config, num_records, steps=steps, private=private)

    def _calibrate(self, config, phases, epsilon, delta):
        # The proven bound needs noise multipliers well above the default cap of 100 (about 120
        # for a proven 1.01 on Adult); calibrate allows up to 1e7, as for DP-SACTGAN.
        return privacy.calibrate(phases, target_epsilon=epsilon, delta=delta,
                                 accountant=self.ACCOUNTANT, max_noise_multiplier=1e7)

    def _paper_accounting(self, phases, delta, report):
        paper = [dataclasses.replace(p, accounting="paper") for p in phases]
        return {"label": ("GS-WGAN / thesis accounting (autodp recipe: steps * B per-row releases, each "
                          "subsampled at 1/K, RDP classic conversion); NOT a valid bound, for "
                          "comparison with the published numbers only"),
                "epsilon": privacy.epsilon(paper, delta, accountant="rdp", conversion="classic")}

    def _train(self, config, x, key, ctx) -> TrainResult:
        k = num_shards(config, ctx.num_records)
        config = config.replace(num_shards=k)
        k_part, k_pre, k_init, k_gen = jax.random.split(key, 4)
        rows = 2.0 * x - 1.0  # the encoder's [0, 1] layout scaled to the generator's (-1, 1)
        x_sorted, shards = partition(rows, k_part, k)
        t0 = time.perf_counter()
        pre = pretrain(config, x_sorted, shards, k_pre, progress=ctx.progress("pretrain"),
                       should_stop=ctx.should_stop, checkpoint=ctx.checkpoint("pretrain"))
        pretrained = int(pre.steps)
        t1 = time.perf_counter()
        state = init_generator_phase(config, x.shape[1], pre.critics.params, k_init)
        del pre
        hook, run_config = ctx.checkpoint("generator"), config
        if config.snapshot_every:  # chunks end on every snapshot step
            hook = Snapshots(config.snapshot_every, hook, config.sample_from)
            run_config = config.replace(chunk_size=math.gcd(config.chunk_size, config.snapshot_every))
        state = train_generator(run_config, state, x_sorted, shards, k_gen, private=ctx.private,
                                progress=ctx.progress("generator"), should_stop=ctx.should_stop,
                                checkpoint=hook)
        jax.block_until_ready(state.ema)
        t2 = time.perf_counter()
        notes = [
            f"Shards: every record got an independent uniform label in 1..K (K={k}) from the secret "
            "key, so adding or removing a record moves no other record; the labels, shard sizes and "
            "the shard drawn at each step are never saved, logged or reported. A shard with fewer "
            f"rows than a batch (B={config.batch_size}) draws its rows with replacement inside the "
            "shard; an empty shard's critic sees no real row.",
            f"Discriminator pretraining ({pretrained} iterations per shard, each "
            "critic on its own shard against its own temporary generator) releases nothing: the "
            "critics and temporary generators stay in the process, so its event is a no-op.",
            ("Every critic trains on its own shard at every generator step (critic_schedule='all'); "
             "a step's release comes from the drawn critic alone, and the other critics depend on "
             "their own shards and the generator only, so the sharded bound is unchanged."
             if config.critic_schedule == "all" else
             "Only the drawn critic trains at each step (critic_schedule='selected', GS-WGAN's "
             "schedule)."),
        ]
        if ctx.private:
            notes.append(
                "The released generator (raw and its moving average) depends on the private rows only "
                "through the sanitised row gradients: each generated row's gradient clipped to C="
                f"{config.clip_norm} with Gaussian noise of std 2*C*noise_multiplier added once per step.")
        if ctx.private and (eps := ctx.plan.epsilon()) < LEARNS_FROM_EPSILON:
            notes.append(
                f"Measured budgets (docs/gs-wgan.md, 'The frontier'): on cardio (16 columns) GS-WGAN's best "
                f"configuration scores above an untrained generator's TSTR only from a proven epsilon of "
                f"about {LEARNS_FROM_EPSILON:g} (0.718 there, 0.694 at 30, the untrained floor at 10 and "
                f"below); on Adult no accounted run measured so far learned (those runs used the former "
                f"schedule); at this fit's epsilon of {eps:.3g} expect rows with no usable relation between "
                f"the columns.")
        if ctx.plan.preset is not None:
            notes.append("The preset's schedule and noise are the thesis's, which its author chose by "
                         "evaluating synthetic data against the real data; that search is not accounted.")
        return TrainResult(config=config, released={"generator": state.generator.params,
                                                    "generator_ema": state.ema},
                           steps={"generator": int(state.steps)},
                           seconds={"pretrain": t1 - t0, "generator": t2 - t1}, assumptions=notes,
                           state={"snapshots": hook.kept if isinstance(hook, Snapshots) else {}})

    @property
    def snapshots(self) -> dict[int, PyTree]:
        """Step -> the sampling generator (``sample_from``) kept by the last fit
        (``snapshot_every > 0``; in memory only, never saved; empty after :meth:`load`)."""
        return dict(self._state.get("snapshots") or {})

    def sample_snapshot(self, step: int, n: int, seed: int | None = None, mode: str | None = None):
        """``n`` rows decoded from the generator kept after ``step`` steps (see :meth:`sample`)."""
        n = self._check_sample_size(n)
        kept = self.snapshots
        if step not in kept:
            raise ValueError(f"Expected step={step!r} to be a kept snapshot step {sorted(kept)} "
                             "(fit with snapshot_every > 0 keeps them).")
        return self._sample_frame(n, dpsgd.make_key(seed).key, mode or self.default_decode_mode(),
                                  params=kept[step])

    def _sample_encoded(self, n, key, params=None):
        if params is None:
            params = self.released["generator_ema" if self.fitted_config.sample_from == "ema" else "generator"]
        width = data_lib.TableEncoder(self.schema).width
        return sample_encoded(self.fitted_config, width, params, n, key)

    def _release_shapes(self, config, schema):
        width = data_lib.TableEncoder(schema).width
        g = jax.eval_shape(lambda kk: init_generator(config, width, kk), jax.random.key(0))
        return {"generator": g, "generator_ema": g}
