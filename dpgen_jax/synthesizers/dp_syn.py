"""DP-SYN (Abay, Zhou, Kantarcioglu, Thuraisingham, Sweeney 2018, "Privacy Preserving Synthetic
Data Release Using Deep Learning", ECML-PKDD). See ``docs/dp-syn.md``.

The private rows are partitioned by the schema's label. Then:

1. **Counts.** The group sizes are released once as a Gaussian noisy histogram (L2 sensitivity 1
   under add/remove), unless the user declares them public (``group_counts``). They set only the
   share of each label in the output: no rate, step count or noise depends on them.
2. **Autoencoders.** One autoencoder per group (one hidden layer, sigmoid latent, mixed-type
   reconstruction loss, the label excluded), trained with DP-SGD (Poisson sampling over the
   group's rows, ghost clipping). Each group's rate, steps and noise are fixed before any row is
   read, from public values only: the public number of records N, every group assumed to hold
   N / k rows (or the declared ``group_counts``), rate ``batch_size / (N / k)``,
   ``epochs * (N / k) / batch_size`` steps, the noised sum divided by ``batch_size``. All groups
   train at once: their parameters are stacked and one compiled step is ``vmap``-ed over the
   groups (``dpsgd.GroupRates``).
3. **DP-EM.** Per group, a Gaussian mixture on the latent codes (mapped into the unit ball by a
   fixed map) by sufficient-statistics perturbation (``_dp_em.dp_em_ssp``, snapped exact sums).
4. **Sampling.** Latent codes from each group's mixture, decoded (each categorical value drawn
   from the decoder's softmax by default, ``sample(mode="argmax")`` for the most likely one),
   labelled; rows split by the noisy proportions.

Privacy: the count release touches every record; a record's other mechanisms are those of its
own group, so the groups compose in parallel (``privacy.ParallelPhases``): epsilon is the
maximum over the groups of counts + autoencoder + DP-EM. Every mechanism's parameters are fixed
by the plan (``Synthesizer.plan``: no data) before the fit reads a row, so the PLD composition
is that of mechanisms chosen in advance. ``plan(epsilon=...)`` sets the DP-EM noise so that
DP-EM alone would spend ``em_share * epsilon``, then calibrates each group's autoencoder noise
so that every group meets the target.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, models, privacy
from dpgen_jax.synthesizers import _dp_em, _dpsgd_phases, _losses
from dpgen_jax.synthesizers._base import Flags, Synthesizer, Release, register
from dpgen_jax.synthesizers._config import GeneratorConfig

GROUP_COMPOSITIONS = ("parallel", "sequential")
CONTINUOUS_ENCODINGS = ("scaled", "bins")
BUDGET_SPLITS = ("calibrated", "original")
# The speed settings this method reads and their defaults (synthesizers.Flags).
FLAGS = Flags(clip_method="ghost", chunk_size=500)


@dataclasses.dataclass(frozen=True)
class DPSYNConfig(GeneratorConfig):
    """Hyperparameters of DP-SYN (all public; they go into the privacy report).

    ``groups`` are the label's categories in the schema's order (filled from the schema by
    ``plan`` and ``fit``; a value given by the user must match the schema). ``ae_noise_multipliers``
    holds one noise multiplier per group, in that order; ``plan(epsilon=...)`` calibrates them
    per group and ``em_noise_multiplier`` from ``em_share``.

    Each group's DP-SGD schedule is fixed from public values before any row is read: every group
    is assumed to hold N / k rows (N the public number of records, k the number of groups), or N
    times its public share (``group_shares``, e.g. published label frequencies), or the counts the
    user declares public (``group_counts``); its rate is ``batch_size`` over that size and its
    steps ``epochs`` passes over it (``group_schedule``). Without ``group_counts`` the fit releases
    noisy group counts (a DP output, ``Release.statistics["released_counts"]``); they set only each
    label's share of the sampled rows.
    """


    latent_dim: int = 8
    batch_size: int = 16                           # per group of the assumed size (docs/dp-syn.md)
    epochs: float = 10.0
    max_steps: int | None = 20_000                 # per group's autoencoder; None: epochs alone
    learning_rate: float = 1e-3
    clip_norm: float = 1.0
    continuous_loss: str = "mse"
    continuous_encoding: str = "bins"              # one-hot on public bins; "scaled": by the bounds
    bins: int = 20
    groups: tuple[str, ...] | None = None          # the label's categories (from the schema)
    ae_noise_multipliers: tuple[float, ...] | None = None   # None: 1.0 per group before calibration
    count_noise_multiplier: float = 20.0
    em_components: int = 3
    em_iterations: int = 10
    em_noise_multiplier: float = 42.0
    em_share: float = 0.5
    group_shares: tuple[float, ...] | None = None  # public assumed label shares; None: equal
    group_counts: tuple[float, ...] | None = None
    group_composition: str = "parallel"
    budget_split: str = "calibrated"

    def validate(self) -> DPSYNConfig:
        for name in ("latent_dim", "batch_size", "em_components"):
            _v.whole(minimum=1, **{name: getattr(self, name)})
        _v.whole(em_iterations=self.em_iterations)
        _v.non_negative(epochs=self.epochs)
        if self.max_steps is not None:
            _v.whole(minimum=1, max_steps=self.max_steps)
        for name in ("learning_rate", "clip_norm", "count_noise_multiplier", "em_noise_multiplier"):
            _v.positive(**{name: getattr(self, name)})
        _v.fraction(em_share=self.em_share)
        _v.one_of(_losses.CONTINUOUS_LOSSES, continuous_loss=self.continuous_loss)
        _v.one_of(GROUP_COMPOSITIONS, group_composition=self.group_composition)
        _v.one_of(CONTINUOUS_ENCODINGS, continuous_encoding=self.continuous_encoding)
        _v.whole(minimum=1, bins=self.bins)
        _v.one_of(BUDGET_SPLITS, budget_split=self.budget_split)
        for name in ("ae_noise_multipliers", "group_shares", "group_counts"):
            values = getattr(self, name)
            if values is not None:
                for i, v in enumerate(values):
                    _v.positive(**{f"{name}[{i}]": v})
        if self.groups is not None:
            if not self.groups or len(set(self.groups)) != len(self.groups) or \
                    not all(isinstance(g, str) and g for g in self.groups):
                raise ValueError(f"groups={self.groups!r} are not the label's distinct categories: pass "
                                 "each category once, as a non-empty string.")
            for name in ("ae_noise_multipliers", "group_shares", "group_counts"):
                values = getattr(self, name)
                if values is not None and len(values) != len(self.groups):
                    raise ValueError(f"{name}={values!r} does not have one value per label group: pass "
                                     f"{len(self.groups)}, for {list(self.groups)}.")
        return super().validate()


def label_column(schema: data_lib.Schema) -> data_lib.Column:
    """The schema's label column (DP-SYN partitions by it); a clear error without one."""
    labels = [c for c in schema.columns if c.label]
    if not labels or labels[0].kind == "continuous":
        raise ValueError("DP-SYN partitions the rows by the schema's label: expected a schema with a "
                         "binary or categorical label column (label=True), got none.")
    return labels[0]


def feature_schema(schema: data_lib.Schema) -> data_lib.Schema:
    """The schema without its label (the autoencoders' input)."""
    return data_lib.Schema(tuple(c for c in schema.columns if not c.label), source=schema.source,
                           notes=schema.notes)


def encoder_for(config: DPSYNConfig, schema: data_lib.Schema):
    """The row encoding: continuous columns scaled by their bounds (``TableEncoder``) or one-hot on
    public bins (``BinnedEncoder``, ``continuous_encoding="bins"``)."""
    if config.continuous_encoding == "bins":
        return data_lib.BinnedEncoder(schema, config.bins)
    return data_lib.TableEncoder(schema)


def group_names(schema: data_lib.Schema) -> tuple[str, ...]:
    return tuple(str(c) for c in label_column(schema).categories)


def for_schema(config: DPSYNConfig, schema: data_lib.Schema) -> DPSYNConfig:
    """``config`` with ``groups`` set to the schema's label categories (refused if it names others)."""
    names = group_names(schema)
    if config.groups is not None and tuple(config.groups) != names:
        raise ValueError(f"The configuration's groups={list(config.groups)} are not the schema's label "
                         f"categories {list(names)} (label {label_column(schema).name!r}).")
    return config.replace(groups=names).validate()


def _groups(config: DPSYNConfig) -> tuple[str, ...]:
    if config.groups is None:
        raise ValueError("DPSYNConfig.groups is not set: use for_schema(config, schema) (plan and fit "
                         "set it from the schema's label).")
    return tuple(config.groups)


def assumed_sizes(config: DPSYNConfig, num_records: int) -> tuple[float, ...]:
    """The public number of rows each group's schedule assumes: the declared ``group_counts``, else
    N times each group's public share (``group_shares``, normalised; default 1 / k each), N the
    public number of records. Never a private or released count."""
    k = len(_groups(config))
    if config.group_counts is not None:
        return tuple(float(c) for c in config.group_counts)
    shares = np.asarray(config.group_shares or (1.0,) * k, np.float64)
    return tuple(float(num_records * s) for s in shares / shares.sum())


def group_schedule(config: DPSYNConfig, num_records: int) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """``(rates, steps)`` of every group's autoencoder, from public values only.

    For a group assumed to hold s rows (:func:`assumed_sizes`): Poisson rate ``batch_size / s``
    (``privacy.batch_rate(..., float32=True)``: in float32, rounded down, the rate the compiled
    sampler realises, never above B / s) and ``round(epochs * s / batch_size)`` steps, i.e. ``epochs`` expected passes over the
    group's rows whatever its true size, at most ``max_steps`` (20,000 by default, twice a group of
    Adult: on larger tables the steps stop growing while the rate keeps falling). The noised sum is divided by ``batch_size`` (the expected
    batch of a group of s rows; a public number).

    Raises:
        ValueError: an assumed size below ``batch_size`` (a rate above 1) or ``em_components``.
    """
    sizes = assumed_sizes(config, num_records)
    names = _groups(config)
    small = [g for g, s in zip(names, sizes) if s < max(config.batch_size, config.em_components)]
    if small:  # N is not quoted: it may be the private row count (treated as public)
        source = ("their declared group_counts" if config.group_counts is not None else
                  "N rows times their share (group_shares; default 1 / k each), N the number of "
                  "records the rates refer to")
        raise ValueError(f"DP-SYN: label group(s) {small} are assumed to hold {source}, which is "
                         f"fewer than batch_size={config.batch_size} or em_components="
                         f"{config.em_components}; use a smaller batch_size or fewer components.")
    rates = tuple(privacy.batch_rate(config.batch_size, s, f"DP-SYN group {g!r}", float32=True)
                  for g, s in zip(names, sizes))
    cap = config.max_steps if config.max_steps is not None else float("inf")
    steps = tuple(int(min(cap, round(config.epochs * s / config.batch_size))) for s in sizes)
    return rates, steps


def output_counts(config: DPSYNConfig, released_counts=None) -> tuple[tuple[float, ...], str]:
    """The counts that split the sampled rows between groups and where they come from: declared
    public (``group_counts``) or released by the fit (``released_counts``, its statistic)."""
    if config.group_counts is not None:
        return tuple(config.group_counts), "public"
    if released_counts is not None:
        return tuple(float(c) for c in released_counts), "released"
    raise ValueError("DP-SYN: no group counts to split the output by (neither group_counts nor "
                     "released_counts is given; fit releases them).")


def privacy_phases(config: DPSYNConfig, num_records: int, *, steps: Mapping[str, int] | None = None,
                   private: bool = True) -> list:
    """Counts (unless declared public), then per group its autoencoder and DP-EM phases, composed
    in parallel (or in sequence, ``group_composition="sequential"``). Every rate, step count and
    noise multiplier comes from ``config`` and the public ``num_records`` (:func:`group_schedule`):
    the same phases for any private table."""
    names = _groups(config)
    k = len(names)
    rates, planned = group_schedule(config, num_records)
    steps = dict(steps or {})
    sigmas = config.ae_noise_multipliers or (1.0,) * k
    groups = []
    for j, g in enumerate(names):
        ae, em = f"autoencoder/{g}", f"dp-em/{g}"
        if not private:  # the same schedule, clipped, without noise
            inner = (privacy.NonPrivatePhase(ae, steps.get(ae, planned[j]), rates[j], config.batch_size,
                                             clip_norm=config.clip_norm),
                     privacy.NonPrivatePhase(em, steps.get(em, 3 * config.em_iterations)))
        else:
            inner = (privacy.DPSGDPhase(ae, rates[j], sigmas[j], steps.get(ae, planned[j]),
                                        clip_norm=config.clip_norm, batch_size=config.batch_size),
                     privacy.GaussianPhase(em, config.em_noise_multiplier,
                                           steps.get(em, 3 * config.em_iterations), sensitivity=1.0,
                                           output="snapped"))
        groups.append((g, inner))
    phases = []
    if config.group_counts is None:
        phases.append(privacy.GaussianPhase("counts", config.count_noise_multiplier, 1, sensitivity=1.0)
                      if private else privacy.NonPrivatePhase("counts", 1))
    if config.group_composition == "parallel" and private:
        phases.append(privacy.ParallelPhases("groups", tuple(groups)))
    else:
        phases.extend(q for _, inner in groups for q in inner)
    return phases


def autoencoder_phases(phases: Sequence) -> list:
    """Each group's autoencoder phase among ``phases`` (:func:`privacy_phases`' or a plan's), in
    the order of the label's categories: what :func:`train_autoencoders` runs."""
    return [p for p in privacy.flat_phases(phases) if p.name.startswith("autoencoder/")]


def calibrate(config: DPSYNConfig, phases: list, epsilon: float, delta: float,
              fixed: Sequence[str] = ()) -> list:
    """DP-EM noise for ``em_share * epsilon`` alone, then each group's autoencoder noise so that
    every group (with the counts) meets ``epsilon``; the phases named in ``fixed`` (the
    matching stage's one-way release) are held as they are.

    ``budget_split="original"`` (comparison only): the original code's split instead, DP-EM and
    each autoencoder alone at (epsilon / 2, delta / 2), to be added by basic composition; the
    report's headline is still the honest composition of every phase.
    """
    em = [p for p in privacy.flat_phases(phases) if p.name.startswith("dp-em/")]
    original = config.budget_split == "original"
    share, d = (0.5, delta / 2) if original else (config.em_share, delta)
    z = privacy.calibrate([privacy.GaussianPhase("dp-em", 1.0, em[0].steps)], share * epsilon,
                          d)[0].noise_multiplier
    phases = privacy.map_phases(phases, lambda p: _with_em(p, z))
    if original:
        return privacy.map_phases(phases, lambda p: _with_each_ae(p, epsilon / 2, delta / 2))
    fixed = [*fixed, *["counts"] * any(p.name == "counts" for p in phases), *[p.name for p in em]]
    return privacy.calibrate(phases, epsilon, delta, fixed=fixed)


def _with_each_ae(p, epsilon, delta):
    return privacy.calibrate([p], epsilon, delta)[0] if p.name.startswith("autoencoder/") else p


def _with_em(p, z):
    return dataclasses.replace(p, noise_multiplier=z) if p.name.startswith("dp-em/") else p


# ----------------------------------------------------------------------------- training


def networks(config: DPSYNConfig, width: int) -> models.Autoencoder:
    return models.Autoencoder((config.latent_dim,), (width,), encoder_activation="sigmoid")


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def init(config: DPSYNConfig, width: int, k: int, key: jax.Array):
    """Stacked initial autoencoder parameters of the k groups."""
    ae = networks(config, width)
    return jax.vmap(lambda kk: ae.init(kk, jnp.zeros((1, width)))["params"])(jax.random.split(key, k))


def make_group_runner(config: DPSYNConfig, blocks: tuple, capacity: int, phase, *,
                      flags: Flags = FLAGS):
    """``run(states, data, key, rates, planned, start, n) -> states``: n DP-SGD steps of every
    group at once (vmap over groups); a group stops after its planned steps. ``phase``: one
    group's autoencoder phase, whose clip norm every group shares; each group's rate, normaliser
    and noise come from its own phase through ``rates`` (``dpsgd.GroupRates``)."""
    ae = networks(config, max(b.stop for b in blocks))
    recon = _losses.reconstruction_loss(blocks, config.continuous_loss)

    def loss(params, batch):
        return recon(ae.apply({"params": params}, batch), batch)

    optimizer = _dpsgd_phases.torch_adam(config.learning_rate)
    step = dpsgd.make_dp_step(loss, optimizer, phase, scan_rows=capacity, method=flags.clip_method,
                              capacity=capacity)

    @jax.jit
    def run(states, data, key, rates, planned, start, n):
        k = planned.shape[0]

        def body(i, st):
            t = start + i
            keys = jax.vmap(lambda g: jax.random.fold_in(jax.random.fold_in(key, t), g))(jnp.arange(k))
            new, _ = jax.vmap(step, in_axes=(0, 0, 0, None, 0))(st, data, keys, None, rates)
            active = st.steps < planned
            return jax.tree_util.tree_map(
                lambda a, b: jnp.where(active.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), new, st)

        return jax.lax.fori_loop(0, n, body, states)

    return run, optimizer


def to_ball(z: jax.Array) -> jax.Array:
    """Sigmoid latent codes in [0, 1]^d mapped into the unit ball (a fixed, public map)."""
    return (z - 0.5) * 2.0 / math.sqrt(z.shape[-1])


def from_ball(u: jax.Array) -> jax.Array:
    return jnp.clip(u * math.sqrt(u.shape[-1]) / 2.0 + 0.5, 0.0, 1.0)


def split_label(schema: data_lib.Schema, x, encoder=None) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, features)``: each encoded row's label group and its encoding without the label
    (``encoder``: the encoder of ``x``, default ``TableEncoder(schema)``)."""
    enc = encoder or data_lib.TableEncoder(schema)
    b = next(blk for blk in enc.blocks if blk.name == label_column(schema).name)
    x = np.asarray(x)
    codes = (x[:, b.start] > 0.5).astype(np.int64) if b.kind == "binary" else \
        np.argmax(x[:, b.start:b.stop], axis=1).astype(np.int64)
    return codes, np.delete(x, np.s_[b.start:b.stop], axis=1)


def release_counts(true_counts, key: jax.Array, noise_std: float) -> tuple[int, ...]:
    """The group sizes released by ``dpsgd.noisy_counts`` (integer counts plus integer Gaussian
    noise of std ``noise_std``, the ``counts`` phase's ``privacy.GaussianPhase.noise_std``: sigma
    times the L2 sensitivity 1 under add/remove; 0: the exact counts)."""
    released = dpsgd.noisy_counts({"counts": np.asarray(true_counts)}, float(noise_std) or None, key)
    return tuple(int(c) for c in released["counts"])


def stack_groups(codes, feats, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(data (k, m_max, d), sizes (k,))``: each group's rows, zero-padded to the largest group."""
    sizes = np.bincount(codes, minlength=k)
    data = np.zeros((k, int(sizes.max()), feats.shape[1]), np.float32)
    for j in range(k):
        data[j, :sizes[j]] = feats[codes == j]
    return data, sizes


def train_autoencoders(config: DPSYNConfig, blocks: tuple, codes, feats, init_key, key,
                       phases: Sequence, *, progress=None, should_stop=None, checkpoint=None,
                       flags: Flags = FLAGS) -> dpsgd.TrainState:
    """Phase 2: every group's autoencoder at once (stacked states, one vmapped DP-SGD step).

    ``phases``: each group's accounted autoencoder phase, in the order of the label's categories
    (:func:`privacy_phases`: rate and steps from :func:`group_schedule` of ``config`` and the
    public N, normaliser ``batch_size``, the calibrated noise); every group's step reads its
    rate, normaliser, noise and planned steps from its phase. The true group sizes serve only as
    the samplers' scan lengths and the padded batch's size. ``progress(done, total)`` follows each
    chunk (iterations); ``should_stop`` may end the phase after a chunk; ``checkpoint`` is
    a hook as in :func:`dpgen_jax.dpsgd.run_phase` (iteration t of every group uses
    ``fold_in(key, t)``, so a continued phase equals an uninterrupted one).
    """
    k = len(phases)
    if len({p.clip_norm for p in phases}) != 1:
        raise ValueError(f"DP-SYN's groups share one clip norm; got {[p.clip_norm for p in phases]}.")
    data, sizes = stack_groups(codes, feats, k)
    big = max(int(sizes.max()), 1)
    run, opt = make_group_runner(config, blocks, dpsgd.default_capacity(big, max(p.sample_rate for p in phases)),
                                 phases[0], flags=flags)
    group_rates = dpsgd.GroupRates(
        jnp.asarray(sizes, jnp.int32), jnp.asarray([p.sample_rate for p in phases], jnp.float32),
        jnp.asarray([p.normaliser(int(n)) for p, n in zip(phases, sizes)], jnp.float32),
        jnp.asarray([p.noise_std if p.differentially_private else 0.0 for p in phases], jnp.float32))
    states = jax.vmap(lambda p: dpsgd.init_state(p, opt))(init(config, feats.shape[1], k, init_key))
    planned = jnp.asarray([p.steps for p in phases], jnp.int32)
    data = jnp.asarray(data)
    return dpsgd.run_chunks(
        lambda s, done, n: run(s, data, key, group_rates, planned, jnp.int32(done), jnp.int32(n)),
        states, int(planned.max()), flags.chunk_size, should_stop=should_stop, checkpoint=checkpoint,
        after_chunk=None if progress is None else lambda s, done: progress(done, int(planned.max())))


def fit_mixtures(config: DPSYNConfig, blocks: tuple, codes, feats, params, key,
                 noise_multiplier: float) -> _dp_em.Mixture:
    """Phase 3: each group's latent codes (in the unit ball) fitted by DP-EM, the groups stacked in
    one ``_dp_em.dp_em_ssp`` call, with the ``dp-em/<group>`` phases' noise (0: plain EM)."""
    k = jax.tree_util.tree_leaves(params)[0].shape[0]
    data, sizes = stack_groups(codes, feats, k)
    ae = networks(config, feats.shape[1])
    latent = jax.vmap(lambda p, d: ae.apply({"params": p}, d, method=ae.encode))(params, jnp.asarray(data))
    mask = np.arange(data.shape[1])[None, :] < sizes[:, None]
    inits = jax.vmap(lambda kk: _dp_em.init_mixture(kk, config.em_components, config.latent_dim))(
        jax.random.split(jax.random.fold_in(key, 0), k))
    return _dp_em.dp_em_ssp(to_ball(latent), jax.random.fold_in(key, 1), inits,
                            iterations=config.em_iterations, noise_multiplier=noise_multiplier, mask=mask)


@register
class DPSYN(Synthesizer):
    """DP-SYN with a scikit-learn-like interface (``synthesizers.create("dp-syn")``)."""

    METHOD = "dp-syn"
    DESCRIPTION = ("per-label DP autoencoders and DP-EM mixtures in their latent spaces, composed "
                   "in parallel across labels (Abay et al. 2018)")
    CONFIG = DPSYNConfig
    SMOKE = dict(latent_dim=3, batch_size=16, epochs=0.5, chunk_size=5, em_components=2,
                 em_iterations=3)
    PRESETS: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    DECODE_MODE = "sample"  # the decoder's softmax blocks are distributions over categories
    USES_NUM_RECORDS = True  # each group's rate is batch_size / (N / k) (unless group_counts)
    CHECKPOINTS = True
    FLAGS = FLAGS

    def _check_schema(self, schema):
        label_column(schema)

    def resolve_config(self, schema, preset=None):
        """The base resolution, then ``groups`` from the schema's label (public)."""
        return for_schema(super().resolve_config(schema, preset), schema)

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, num_records, private=private)

    def _paper_accounting(self, config, phases, delta, report):
        if config.budget_split != "original":
            return super()._paper_accounting(config, phases, delta, report)
        flat = [p for p in privacy.flat_phases(phases) if p.name != "counts"]
        groups = {p.name.split("/", 1)[1] for p in flat if "/" in p.name}
        eps = max(sum(privacy.epsilon([p], delta / 2) for p in flat if p.name.endswith("/" + g))
                  for g in groups)
        eps += sum(privacy.epsilon([p], delta / 2) for p in flat if "/" not in p.name)  # the one-way matching release
        return {"label": "DP-SYN's original split: the autoencoder and DP-EM each at (epsilon/2, "
                         "delta/2) by PLD, added by basic composition; the label counts public",
                "epsilon": eps}

    def _encoder(self, schema, config):
        return encoder_for(config, schema)

    def _calibrate(self, config, schema, phases, epsilon, delta, fixed=()):
        return calibrate(config, phases, epsilon, delta, fixed=fixed)

    def _train(self, plan, x, key, hooks) -> Release:
        config = plan.config
        names = _groups(config)
        k = len(names)
        codes, feats = split_label(plan.model_schema, x, encoder_for(config, plan.model_schema))
        k_cnt, k_init, k_ae, k_em = jax.random.split(key, 4)
        t0 = time.perf_counter()
        statistics = {}
        if config.group_counts is None:  # the output's label shares (no rate depends on them)
            statistics["released_counts"] = list(release_counts(
                np.bincount(codes, minlength=k), k_cnt,
                plan.phase("counts").noise_std if plan.private else 0.0))
        blocks = tuple(encoder_for(config, feature_schema(plan.model_schema)).blocks)
        ae_phases = autoencoder_phases(plan.phases)
        states = train_autoencoders(config, blocks, codes, feats, k_init, k_ae, ae_phases,
                                    **hooks.phase_args("autoencoders", [p.name for p in ae_phases]))
        t1 = time.perf_counter()
        mixtures = fit_mixtures(config, blocks, codes, feats, states.params, k_em,
                                plan.phase(f"dp-em/{names[0]}").noise_multiplier if plan.private else 0.0)
        t2 = time.perf_counter()
        sizes = ("its declared count (group_counts)" if config.group_counts is not None else
                 "N rows times its public share (group_shares)" if config.group_shares is not None
                 else f"N / {k} rows (N the number of records the sampling rates refer to)")
        notes = [(f"The label group counts {list(config.group_counts)} are declared public by the "
                  "user (group_counts); no count is released.") if config.group_counts is not None else
                 ("The label group counts are released once with Gaussian noise (phase 'counts'); "
                  "they set only each label's share of the sampled rows (released_counts)."),
                 "Every group's sampling rate, step count and noise were fixed before any row was "
                 f"read, from public values only: each group is assumed to hold {sizes}, its rate is "
                 f"batch_size={config.batch_size} over that size, its steps epochs={config.epochs:g} "
                 "passes over it, its noised gradient sum is divided by batch_size; the groups' "
                 "phases therefore compose as mechanisms chosen in advance.",
                 "The true group sizes serve only as the samplers' scan lengths and padded batch "
                 "sizes; latent codes are mapped into the unit ball by a fixed map before DP-EM "
                 f"(rows clipped to norm 1, {config.em_components} components, "
                 f"{config.em_iterations} iterations)."]
        executed = [int(v) for v in np.asarray(states.steps)]
        steps = {f"autoencoder/{g}": executed[j] for j, g in enumerate(names)}
        steps.update({f"dp-em/{g}": 3 * config.em_iterations for g in names})
        return Release(arrays={"decoder": states.params["decoder"], "mixture": dict(mixtures._asdict())},
                       steps=steps, statistics=statistics, seconds={"autoencoders": t1 - t0, "dp_em": t2 - t1},
                       notes=tuple(notes))

    def _sample_frame(self, n, key, mode):
        config = self.fitted_config
        label = label_column(self.model_schema)
        k = len(label.categories)
        counts, _ = output_counts(config, self.fitted_release.statistics.get("released_counts"))
        props = np.maximum(np.asarray(counts, np.float64), 0.0)
        if not props.sum() > 0:  # every noisy count at or below zero: no share to follow
            props = np.ones_like(props)
        sizes = np.floor(n * props / props.sum()).astype(int)
        sizes[np.argmax(props)] += n - sizes.sum()
        fs = feature_schema(self.model_schema)
        enc = encoder_for(config, fs)
        decoder = models.MLP((enc.width,), activation=networks(config, enc.width).decoder_activation)
        activate = _losses.output_activation(tuple(enc.blocks))
        frames = []
        for j in range(k):
            if sizes[j] == 0:
                continue
            kj = jax.random.fold_in(key, j)
            mix = _dp_em.Mixture(*(self.released["mixture"][f][j] for f in ("weights", "means", "covariances")))
            u = _dp_em.sample_mixture(mix, jax.random.fold_in(kj, 0), int(sizes[j]))
            dec = jax.tree_util.tree_map(lambda a, j=j: a[j], self.released["decoder"])
            logits = decoder.apply({"params": dec}, from_ball(u))
            frame = enc.decode(np.asarray(activate(logits)), mode=mode, key=jax.random.fold_in(kj, 1))
            frame[label.name] = [label.categories[j]] * int(sizes[j])
            frames.append(frame)
        out = pd.concat(frames, ignore_index=True)[self.model_schema.names]
        perm = np.asarray(jax.random.permutation(jax.random.fold_in(key, k), len(out)))
        return out.iloc[perm].reset_index(drop=True)

    def _release_shapes(self, config, schema, statistics):
        k = len(label_column(schema).categories)
        width = encoder_for(config, feature_schema(schema)).width
        params = jax.eval_shape(lambda kk: init(config, width, k, kk), jax.random.key(0))
        c, d = config.em_components, config.latent_dim
        f32 = jnp.float32
        return {"decoder": params["decoder"], "mixture": {
            "weights": jax.ShapeDtypeStruct((k, c), f32), "means": jax.ShapeDtypeStruct((k, c, d), f32),
            "covariances": jax.ShapeDtypeStruct((k, c, d, d), f32)}}
