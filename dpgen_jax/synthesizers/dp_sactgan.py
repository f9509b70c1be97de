"""DP-SACTGAN: a conditional column-token transformer GAN whose generator learns only through one
sanitised gradient per step. See ``docs/dp-sactgan.md``.

Li and Wang (2023), "A self-attention-based differentially private tabular GAN with high data
utility" (arXiv:2312.13031), after CTAB-GAN+ (Zhao et al. 2022), with this project's corrections:

* **Encoding.** Discrete columns one-hot (a binary column as a two-slot one-hot); a continuous
  column ``v`` (scaled to [-1, 1] by its schema bounds) as ``(alpha, beta)``: ``beta`` one-hot of a
  mode m, ``alpha = (v - mu_m) / (4 sd_m)``. The modes are **public** (centres of equal-width
  public bins, ``modes="public"``) or fitted by a one-dimensional **DP-EM** per column
  (``dpsgd.dp_em_ssp``, accounted, ``modes="dp-em"``); never a mixture fitted on private values.
  A row takes its most probable mode (``mode_assignment="argmax"``, the paper) or one drawn from
  the posterior (``"sample"``, CTAB-GAN+).
* **Conditional vector.** One one-hot block per column (the category, or the mode); each row
  conditions on one block. Its frequencies are Gaussian-noised histograms (accounted,
  ``cond="noisy"``; the modes of a DP-EM column take the fitted DP weights, free) or uniform
  (``cond="uniform"``, free). The critic sees real rows of the chosen category (training by
  sampling), drawn inside the chosen shard.
* **Networks.** :class:`dpgen_jax.models.ColumnTokenGenerator` and
  :class:`~dpgen_jax.models.ColumnTokenCritic` (one token per column) and, when the schema has a
  discrete label, an :class:`~dpgen_jax.models.AuxClassifier`. WGAN-GP with slerp interpolates,
  gumbel-softmax (tau 0.2), the information loss, Adam with coupled L2 (CTAB-GAN+'s settings).
* **The DP hook.** The generator's activated output passes once through
  :func:`dpgen_jax.dpsgd.sanitized` (each row's gradient clipped to C, Gaussian noise of std
  2 C sigma). The adversarial term, the information loss and the auxiliary classifier all consume
  the hooked rows and are summed into one loss: one release per step. The conditional
  cross-entropy on the raw logits bypasses the hook: it depends on the DP conditional
  frequencies only.
* **Shards.** K critics and classifiers, one per secret shard (GS-WGAN's partition), stacked and
  ``vmap``-ed; each step draws one shard, updates its critic and classifier on that shard only,
  and the generator through the hook. Accounted by :class:`privacy.ShardedSanitizerPhase`
  with the proven (selection-conditioned) bound as the headline, composed exactly with the
  histograms and DP-EM; the number that assumes each step's shard draw is fresh is reported
  beside it, labelled. K = 1 is the paper's single discriminator, whose honest epsilon is the
  unsubsampled composition (all three accountings agree there but the paper's).

Functional API: :func:`build_layout`, :func:`public_modes`, :func:`fit_modes`, :func:`encode_rows`,
:func:`noisy_counts`, :func:`prepare`, :func:`activate`, :func:`critic_update`,
:func:`generator_update`, :func:`shard_iteration`, :func:`train_step`, :func:`pretrain`,
:func:`train`, :func:`sample_encoded`, :func:`privacy_phases`, :func:`num_shards`,
:func:`generator_steps`. Class API: :class:`DPSACTGAN` (``synthesizers.create("dp-sactgan")``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, models, privacy
from dpgen_jax._validate import check_choice
from dpgen_jax.synthesizers import gs_wgan as _gs
from dpgen_jax.synthesizers._base import Synthesizer, SynthesizerConfig, TrainResult, register

PyTree = Any
MODE_SOURCES = ("dp-em", "public")
MODE_ASSIGNMENTS = ("argmax", "sample")
COND_SOURCES = ("noisy", "uniform")
#: Below this per-step signal-to-noise bound, sqrt(B) / (2 sigma sqrt(width)), a calibration warns.
ABSURD_SNR = 1e-3

PAPER_PRESETS: dict[str, dict[str, Any]] = {
    # the paper's single discriminator on CTAB-GAN+'s schedule: B = 500, 150 epochs
    "paper": {"num_discriminators": 1, "batch_size": 500, "epochs": 150.0},
}


@dataclasses.dataclass(frozen=True)
class DPSACTGANConfig(SynthesizerConfig):
    """Hyperparameters of DP-SACTGAN (all public; ``docs/dp-sactgan.md`` says where each comes from).

    ``num_discriminators`` (K): None chooses ``min(max_discriminators, N // batch_size)`` (every
    shard holds a batch on average); an explicit K must leave N / K >= batch_size. K = 1 is the
    paper's single discriminator. ``epochs`` (if set) gives ``epochs * (N // batch_size)``
    generator steps (CTAB-GAN+'s schedule) instead of ``generator_steps``.

    ``preprocessing_share``: ``fit(epsilon=...)`` first scales the histogram and DP-EM noise so
    that those mechanisms alone spend this share of epsilon, then calibrates the generator noise
    with them held fixed; None keeps ``hist_noise_multiplier`` and ``em_noise_multiplier`` as given.
    """

    NOISE_FIELDS: ClassVar[Mapping[str, str]] = {"histograms": "hist_noise_multiplier",
                                                 "dp-em": "em_noise_multiplier",
                                                 "generator": "noise_multiplier"}

    num_discriminators: int | None = None
    max_discriminators: int = 100
    batch_size: int = 64
    generator_steps: int = 2000
    epochs: float | None = None
    critic_steps: int = 1
    pretrain_iterations: int = 0
    noise_dim: int = 100
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    aux_hidden: tuple[int, ...] = (256, 256, 256, 256)
    aux_classifier: bool = True
    info_loss: bool = True
    modes: str = "dp-em"
    n_modes: int = 10
    em_iterations: int = 10
    mode_assignment: str = "argmax"
    cond: str = "noisy"
    hist_noise_multiplier: float = 100.0
    em_noise_multiplier: float = 100.0
    preprocessing_share: float | None = 0.1
    noise_multiplier: float = 1.0
    clip_norm: float = 1.0
    gradient_penalty: float = 10.0
    learning_rate: float = 2e-4
    beta1: float = 0.5
    beta2: float = 0.9
    adam_eps: float = 1e-3
    weight_decay: float = 1e-5
    tau: float = 0.2
    shard_group: int = 32
    chunk_size: int = 100

    def validate(self) -> DPSACTGANConfig:
        for name in ("max_discriminators", "batch_size", "critic_steps", "noise_dim", "d_model",
                     "num_heads", "num_layers", "n_modes", "shard_group", "chunk_size"):
            _v.count(getattr(self, name), name, 1)
        for name in ("generator_steps", "pretrain_iterations", "em_iterations"):
            _v.count(getattr(self, name), name, 0)
        if self.num_discriminators is not None:
            _v.count(self.num_discriminators, "num_discriminators", 1)
        if self.epochs is not None:
            _v.positive_finite(self.epochs, "epochs")
        if self.d_model % self.num_heads:
            raise ValueError(f"Expected d_model={self.d_model} to be a multiple of num_heads={self.num_heads}.")
        if not self.aux_hidden or any(isinstance(w, bool) or int(w) != w or w < 1 for w in self.aux_hidden):
            raise ValueError(f"Expected aux_hidden={self.aux_hidden!r} to be a non-empty tuple of widths >= 1.")
        for name in ("aux_classifier", "info_loss"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"Expected {name}={getattr(self, name)!r} to be a bool.")
        check_choice(self.modes, MODE_SOURCES, "modes")
        check_choice(self.mode_assignment, MODE_ASSIGNMENTS, "mode_assignment")
        check_choice(self.cond, COND_SOURCES, "cond")
        for name in ("hist_noise_multiplier", "em_noise_multiplier", "noise_multiplier", "clip_norm",
                     "learning_rate", "adam_eps", "tau"):
            _v.positive_finite(getattr(self, name), name)
        for name in ("gradient_penalty", "weight_decay"):
            _v.non_negative_finite(getattr(self, name), name)
        for name in ("beta1", "beta2"):
            if not 0.0 <= _v.real(getattr(self, name), name) < 1.0:
                raise ValueError(f"Expected {name}={getattr(self, name)!r} in [0, 1).")
        if self.preprocessing_share is not None and not 0.0 < _v.real(
                self.preprocessing_share, "preprocessing_share") < 1.0:
            raise ValueError(f"Expected preprocessing_share={self.preprocessing_share!r} in (0, 1) or None.")
        return self


# ----------------------------------------------------------------------------- layout


@dataclasses.dataclass(frozen=True)
class Layout:
    """The static structure of the encoding (public: from the schema and the configuration).

    Every column is one token and owns one one-hot block of the conditional vector (its category
    or its mode). Slots are padded to ``max_width`` per column.

    Attributes:
        names: column names in schema order.
        continuous: per column, whether it is encoded as ``(alpha, beta)``.
        widths: encoded width per column (discrete: categories; continuous: 1 + n_modes).
        starts: first flat position of each column.
        width: total encoded width.
        max_width: the widest column.
        block_lo: first slot of each column's one-hot block (0 discrete, 1 continuous).
        block_size: size of each one-hot block.
        cond_offsets: first position of each block in the conditional vector.
        cond_width: length of the conditional vector.
        label: the label column's index (discrete label) or None.
        src_starts: the column's first position in ``TableEncoder``'s layout.
        src_kinds: ``TableEncoder`` kinds (binary, categorical, continuous).
    """

    names: tuple[str, ...]
    continuous: tuple[bool, ...]
    widths: tuple[int, ...]
    starts: tuple[int, ...]
    width: int
    max_width: int
    block_lo: tuple[int, ...]
    block_size: tuple[int, ...]
    cond_offsets: tuple[int, ...]
    cond_width: int
    label: int | None
    src_starts: tuple[int, ...]
    src_kinds: tuple[str, ...]

    @property
    def n_cols(self) -> int:
        return len(self.names)

    @property
    def n_continuous(self) -> int:
        return sum(self.continuous)

    def flat_index(self) -> tuple[np.ndarray, np.ndarray]:
        """``(column, slot)`` of every flat encoded position."""
        col = np.concatenate([np.full(w, c) for c, w in enumerate(self.widths)])
        slot = np.concatenate([np.arange(w) for w in self.widths])
        return col.astype(np.int32), slot.astype(np.int32)

    def critic_index(self) -> tuple[tuple[int, ...], ...]:
        """Per column: its flat slots, then its conditional block's positions (offset by width),
        padded with ``width + cond_width`` (a constant 0)."""
        pad = self.width + self.cond_width
        rows = []
        for c in range(self.n_cols):
            own = list(range(self.starts[c], self.starts[c] + self.widths[c]))
            own += [self.width + self.cond_offsets[c] + i for i in range(self.block_size[c])]
            rows.append(own)
        m = max(len(r) for r in rows)
        return tuple(tuple(r + [pad] * (m - len(r))) for r in rows)

    def features_without_label(self) -> np.ndarray:
        """Flat positions that are not the label's (the auxiliary classifier's input)."""
        keep = np.ones(self.width, bool)
        if self.label is not None:
            s = self.starts[self.label]
            keep[s:s + self.widths[self.label]] = False
        return np.flatnonzero(keep).astype(np.int32)


def build_layout(schema: data_lib.Schema, config: DPSACTGANConfig) -> Layout:
    """The encoding's :class:`Layout` from the public schema and configuration (no data).

    Raises:
        ValueError: a continuous column without public bounds (naming it).
    """
    enc = data_lib.TableEncoder(schema)
    widths, continuous, lo, size = [], [], [], []
    for col in schema.columns:
        if col.kind == "continuous":
            _check_bounds(col)
            widths.append(1 + config.n_modes)
            continuous.append(True)
            lo.append(1)
            size.append(config.n_modes)
        else:
            k = len(col.categories)
            widths.append(k)
            continuous.append(False)
            lo.append(0)
            size.append(k)
    starts = tuple(int(s) for s in np.cumsum([0] + widths[:-1]))
    offsets = tuple(int(s) for s in np.cumsum([0] + size[:-1]))
    label = next((i for i, c in enumerate(schema.columns) if c.label and c.kind != "continuous"), None)
    return Layout(tuple(schema.names), tuple(continuous), tuple(widths), starts, int(sum(widths)),
                  int(max(widths)), tuple(lo), tuple(size), offsets, int(sum(size)), label,
                  tuple(b.start for b in enc.blocks), tuple(b.kind for b in enc.blocks))


def _check_bounds(col) -> None:
    lower, upper = getattr(col, "lower", None), getattr(col, "upper", None)
    if lower is None or upper is None or not (math.isfinite(lower) and math.isfinite(upper)) or not lower < upper:
        raise ValueError(f"column {col.name!r} is continuous and needs public bounds (lower < upper) to "
                         f"place its modes; got lower={lower!r}, upper={upper!r}.")


# ----------------------------------------------------------------------------- modes


class Modes(NamedTuple):
    """Modes of the continuous columns on the [-1, 1] scale, each ``(n_continuous, n_modes)``."""

    means: jax.Array
    stds: jax.Array
    weights: jax.Array


def public_modes(schema: data_lib.Schema, config: DPSACTGANConfig) -> Modes:
    """Modes from the schema alone (reads no data): the centres of ``n_modes`` equal-width public
    bins over each column's bounds (``data.bin_edges``), std half a bin width, equal weights."""
    means, stds = [], []
    for col in schema.columns:
        if col.kind != "continuous":
            continue
        _check_bounds(col)
        e = 2.0 * (data_lib.bin_edges(col, config.n_modes) - col.lower) / (col.upper - col.lower) - 1.0
        means.append((e[1:] + e[:-1]) / 2.0)
        stds.append((e[1:] - e[:-1]) / 2.0)
    m = config.n_modes
    shape = (len(means), m)
    return Modes(jnp.asarray(np.reshape(means, shape), jnp.float32),
                 jnp.asarray(np.reshape(stds, shape), jnp.float32), jnp.full(shape, 1.0 / m, jnp.float32))


def fit_modes(values: jax.Array, key: jax.Array, config: DPSACTGANConfig, *, private: bool = True) -> Modes:
    """Modes by one-dimensional DP-EM per column (``dpsgd.dp_em_ssp``, noise
    ``em_noise_multiplier`` on every statistic; accounted as ``3 * em_iterations`` Gaussian
    releases per column, phase ``"dp-em"``). ``values``: ``(n, n_continuous)`` in [-1, 1]; the
    starts are public (``dpsgd.init_mixture``). ``private=False`` runs plain EM."""
    n_cont = values.shape[1]
    m = config.n_modes
    if n_cont == 0:
        z = jnp.zeros((0, m), jnp.float32)
        return Modes(z, z, z)
    k_init, k_fit = jax.random.split(key)
    inits = jax.vmap(lambda kk: dpsgd.init_mixture(kk, m, 1))(jax.random.split(k_init, n_cont))
    noise = config.em_noise_multiplier if private else 0.0
    mix = jax.vmap(lambda u, kk, init: dpsgd.dp_em_ssp(u[:, None], kk, init, iterations=config.em_iterations,
                                                      noise_multiplier=noise))(
        values.T, jax.random.split(k_fit, n_cont), inits)
    return Modes(mix.means[..., 0], jnp.sqrt(mix.covariances[..., 0, 0]), mix.weights)


def _log_density(u: jax.Array, modes: Modes) -> jax.Array:
    """``(n, n_cont, n_modes)`` log weight + log normal density of every value under every mode."""
    z = (u[..., None] - modes.means) / modes.stds
    return jnp.log(modes.weights) - 0.5 * z * z - jnp.log(modes.stds)


def assign_modes(u: jax.Array, modes: Modes, how: str, key: jax.Array | None = None) -> jax.Array:
    """``(n, n_cont)`` mode of each value: the most probable (``"argmax"``) or one drawn from the
    posterior (``"sample"``, needs ``key``)."""
    logp = _log_density(u, modes)
    if how == "argmax":
        return jnp.argmax(logp, axis=-1).astype(jnp.int32)
    return jax.random.categorical(key, logp, axis=-1).astype(jnp.int32)


# ----------------------------------------------------------------------------- encoding


def split_columns(layout: Layout, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """From ``TableEncoder`` rows: ``(codes (n, n_cols) int32, values (n, n_cont) in [-1, 1])``;
    a continuous column's code is filled in by :func:`encode_rows`."""
    x = jnp.asarray(x)
    codes, values = [], []
    for c in range(layout.n_cols):
        s, kind = layout.src_starts[c], layout.src_kinds[c]
        if kind == "categorical":
            codes.append(jnp.argmax(x[:, s:s + layout.widths[c]], axis=1))
        elif kind == "binary":
            codes.append((x[:, s] > 0.5).astype(jnp.int32))
        else:
            codes.append(jnp.zeros(x.shape[0], jnp.int32))
            values.append(2.0 * x[:, s] - 1.0)
    vals = jnp.stack(values, axis=1) if values else jnp.zeros((x.shape[0], 0), jnp.float32)
    return jnp.stack(codes, axis=1).astype(jnp.int32), vals


def encode_rows(layout: Layout, x: jax.Array, modes: Modes, how: str = "argmax",
                key: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """``TableEncoder`` rows -> ``(rows (n, width), codes (n, n_cols))`` in this method's layout:
    one-hot discrete columns, ``(alpha, beta)`` continuous ones with alpha clipped to +-0.99."""
    codes, u = split_columns(layout, x)
    mode = assign_modes(u, modes, how, key) if layout.n_continuous else None
    parts, j = [], 0
    for c in range(layout.n_cols):
        if layout.continuous[c]:
            m = mode[:, j]
            mu = modes.means[j][m]
            sd = modes.stds[j][m]
            alpha = jnp.clip((u[:, j] - mu) / (4.0 * sd), -0.99, 0.99)
            parts += [alpha[:, None], jax.nn.one_hot(m, layout.block_size[c])]
            codes = codes.at[:, c].set(m)
            j += 1
        else:
            parts.append(jax.nn.one_hot(codes[:, c], layout.widths[c]))
    return jnp.concatenate(parts, axis=1).astype(jnp.float32), codes


def decode_rows(layout: Layout, probs: jax.Array, modes: Modes, key: jax.Array) -> jax.Array:
    """Generated padded outputs -> ``TableEncoder`` rows (post-processing).

    ``probs`` is ``(n, n_cols, max_width)``: tanh(alpha) in slot 0 and mode logits in the block of
    a continuous column, class probabilities for a discrete one. The mode is drawn from its
    softmax; the value is ``alpha * 4 sd + mu`` clipped to [-1, 1], mapped to [0, 1].
    """
    cols, j = [], 0
    keys = jax.random.split(key, max(1, layout.n_continuous))
    for c in range(layout.n_cols):
        w = layout.widths[c]
        if layout.continuous[c]:
            m = jax.random.categorical(keys[j], probs[:, c, 1:w], axis=-1)
            u = probs[:, c, 0] * 4.0 * modes.stds[j][m] + modes.means[j][m]
            cols.append(((jnp.clip(u, -1.0, 1.0) + 1.0) / 2.0)[:, None])
            j += 1
        elif layout.src_kinds[c] == "binary":
            cols.append(probs[:, c, 1:2])
        else:
            cols.append(probs[:, c, :w])
    return jnp.concatenate(cols, axis=1)


def noisy_counts(codes: jax.Array, layout: Layout, key: jax.Array, noise_multiplier: float,
                 columns) -> jax.Array:
    """``(n_cols, max_width)`` per-column histograms of ``codes`` plus N(0, noise_multiplier^2) per
    bin, for the columns in ``columns`` (each record adds 1 to one bin per column: L2 sensitivity 1
    per histogram); clipped at 0. Padding bins and other columns are 0."""
    out = jnp.zeros((layout.n_cols, layout.max_width), jnp.float32)
    for c in columns:
        size = layout.block_size[c]
        h = jnp.bincount(codes[:, c], length=size).astype(jnp.float32)
        if noise_multiplier:
            h = h + noise_multiplier * dpsgd.gaussian_noise(jax.random.fold_in(key, c), (size,))
        out = out.at[c, :size].set(jnp.maximum(h, 0.0))
    return out


def cond_log_probs(layout: Layout, counts: jax.Array, *, training: bool) -> jax.Array:
    """``(n_cols, max_width)`` log-probabilities of each block's categories (-inf on padding).

    Training by sampling uses ``log(1 + count)`` as CTAB-GAN+ does (rare categories up-weighted);
    sampling the synthetic data uses the counts. A block of zero counts is uniform."""
    lo = np.arange(layout.max_width)[None, :]
    valid = jnp.asarray(lo < np.asarray(layout.block_size)[:, None])
    w = jnp.log1p(counts) if training else counts
    w = jnp.where(valid, w, 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = jnp.where(total > 0, w, valid.astype(jnp.float32))
    return jnp.where(valid, jnp.log(w / w.sum(axis=1, keepdims=True)), -jnp.inf)


# ----------------------------------------------------------------------------- shards and sampling


class TrainData(NamedTuple):
    """The private rows on the device, sorted by secret shard label (never released).

    ``order[c]`` lists row indices sorted by (shard, code of column c); ``first``/``count``
    ``(K, cond_width)`` locate the rows of shard k with category (or mode) i of each block.
    """

    rows: jax.Array        # (n, width)
    order: jax.Array       # (n_cols, n) int32
    first: jax.Array       # (K, cond_width) int32
    count: jax.Array       # (K, cond_width) int32
    shards: _gs.Shards


def prepare(layout: Layout, rows: jax.Array, codes: jax.Array, key: jax.Array, k: int) -> TrainData:
    """Secret shard labels (``gs_wgan.partition``: i.i.d. uniform, adding or removing a record
    moves no other record), rows sorted by shard, and the training-by-sampling index."""
    both = jnp.concatenate([rows, codes.astype(jnp.float32)], axis=1)
    sorted_both, shards = _gs.partition(both, key, k)
    rows_s = sorted_both[:, :layout.width]
    codes_s = np.asarray(sorted_both[:, layout.width:]).astype(np.int64)
    sizes = np.asarray(shards.sizes)
    labels = np.repeat(np.arange(k), sizes)
    n = rows_s.shape[0]
    order = np.zeros((layout.n_cols, n), np.int32)
    first = np.zeros((k, layout.cond_width), np.int32)
    count = np.zeros((k, layout.cond_width), np.int32)
    for c in range(layout.n_cols):
        size, off = layout.block_size[c], layout.cond_offsets[c]
        key_c = labels * size + codes_s[:, c]
        order[c] = np.argsort(key_c, kind="stable")
        hist = np.bincount(key_c, minlength=k * size).reshape(k, size)
        count[:, off:off + size] = hist
        first[:, off:off + size] = (np.cumsum(hist.ravel()) - hist.ravel()).reshape(k, size)
    return TrainData(rows_s, jnp.asarray(order), jnp.asarray(first), jnp.asarray(count), shards)


def sample_cond(layout: Layout, log_probs: jax.Array, key: jax.Array, n: int):
    """``(cond (n, cond_width), column (n,), category (n,))``: a uniform column per row, then a
    category of its block from ``log_probs`` (public or DP)."""
    k_col, k_cat = jax.random.split(key)
    col = jax.random.randint(k_col, (n,), 0, layout.n_cols)
    cat = jax.random.categorical(k_cat, log_probs[col], axis=-1)
    slot = jnp.asarray(layout.cond_offsets, jnp.int32)[col] + cat
    return jax.nn.one_hot(slot, layout.cond_width, dtype=jnp.float32), col, cat


def real_indices(data: TrainData, layout: Layout, k: jax.Array, col: jax.Array, cat: jax.Array,
                 key: jax.Array) -> jax.Array:
    """Row indices of shard k with category ``cat`` of column ``col`` (uniform among them); a
    category absent from the shard falls back to a uniform row of the shard."""
    u = jax.random.uniform(key, (2, col.shape[0]))
    slot = jnp.asarray(layout.cond_offsets, jnp.int32)[col] + cat
    cnt, first = data.count[k, slot], data.first[k, slot]
    pos = first + jnp.minimum((u[0] * cnt).astype(jnp.int32), jnp.maximum(cnt - 1, 0))
    match = data.order[col, pos]
    size = jnp.maximum(data.shards.sizes[k], 1)
    anyrow = data.shards.starts[k] + jnp.minimum((u[1] * size).astype(jnp.int32), size - 1)
    return jnp.where(cnt > 0, match, anyrow)


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


def hooked_loss(config, layout, rows, batch: Batch, d_params, aux_params, key, private: bool) -> jax.Array:
    """The private part of the generator loss as a function of the activated rows.

    ``private=True``: the rows pass once through ``dpsgd.sanitized`` (each row's cotangent clipped
    to C, noise of std 2 C sigma drawn from ``key``, scale 1/B) and every private term consumes
    the hooked rows, so their cotangents are summed before the single clip and noise.
    ``private=False``: the same terms averaged over the rows, no clipping or noise.
    """
    b = config.batch_size
    if private:
        rows = dpsgd.sanitized(rows, key, clip_norm=config.clip_norm,
                               noise_multiplier=config.noise_multiplier, scale=1.0 / b)
        return private_terms(config, layout, rows, batch.cond, batch.real, d_params, aux_params)
    return private_terms(config, layout, rows, batch.cond, batch.real, d_params, aux_params) / b


def generator_loss(config, layout, g_params, batch: Batch, d_params, aux_params, key, private: bool):
    """One step's generator loss: :func:`hooked_loss` of the activated rows plus the conditional
    cross-entropy on the raw logits (it depends on the public/DP condition only)."""
    k_g, k_noise = jax.random.split(key)
    logits = networks(config, layout).generator.apply({"params": g_params}, batch.z)
    rows = activate(layout, logits, k_g, config.tau)
    return (hooked_loss(config, layout, rows, batch, d_params, aux_params, k_noise, private)
            + cond_loss(layout, logits, batch.col, batch.cat))


def generator_grads(config, layout, g_params, batch: Batch, d_params, aux_params, key, private: bool):
    """The generator's gradient of one step (:func:`generator_loss`)."""
    return jax.grad(generator_loss, argnums=2)(config, layout, g_params, batch, d_params, aux_params,
                                               key, private)


def generator_update(config, layout, g: Net, batch: Batch, d_params, aux_params, key, private: bool) -> Net:
    grads = generator_grads(config, layout, g.params, batch, d_params, aux_params, key, private)
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
                    key, private: bool):
    """One iteration on shard k: ``critic_steps`` critic updates, one generator update (through the
    hook when private), one classifier update; all real rows come from shard k."""
    k_c, k_b, k_g = jax.random.split(key, 3)
    d = lax.fori_loop(0, config.critic_steps, lambda i, dd: critic_update(
        config, layout, dd, g.params, data, k, log_probs, jax.random.fold_in(k_c, i)), d)
    batch = draw_batch(config, layout, data, k, log_probs, k_b)
    g = generator_update(config, layout, g, batch, d.params, None if aux is None else aux.params, k_g, private)
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


def train_step(config, layout, private: bool):
    """``step(state, data, key, log_probs) -> (state, {})``: a secret uniform shard
    (``gs_wgan.step_keys``), its critic and classifier updated on it, the generator updated."""

    def step(state: State, data: TrainData, key, log_probs):
        k_count = data.shards.starts.shape[0]
        k, k_it, _, _ = _gs.step_keys(key, k_count)
        take = functools.partial(jax.tree_util.tree_map, lambda a: lax.dynamic_index_in_dim(a, k, 0, False))
        put = functools.partial(jax.tree_util.tree_map, lambda a, v: lax.dynamic_update_index_in_dim(a, v, k, 0))
        aux = None if state.aux is None else take(state.aux)
        g, d, aux = shard_iteration(config, layout, state.generator, take(state.critics), aux, data, k,
                                    log_probs, k_it, private)
        # materialise the updated critic before writing it back: otherwise XLA fuses the update
        # into the write and copies the whole stacked ensemble every step (measured 2.5x slower)
        d, aux = lax.optimization_barrier((d, aux))
        new_aux = None if aux is None else put(state.aux, aux)
        return State(g, put(state.critics, d), new_aux, state.steps + 1), {}

    return step


@functools.lru_cache(maxsize=32)
def _runner(config, layout, private):
    return dpsgd.make_phase_runner(train_step(config, layout, private))


def train(config, layout, state: State, data: TrainData, log_probs, key, *, private=True,
          steps: int | None = None, progress=None, should_stop=None, checkpoint=None) -> State:
    """``steps`` (default: ``generator_steps``) training steps in compiled chunks; step t uses
    ``fold_in(key, t)``. ``int(state.steps)`` is the executed count the accountant is given."""
    total = config.generator_steps if steps is None else steps
    return dpsgd.run_phase(None, state, data, key, total, extra=log_probs, chunk_size=config.chunk_size,
                           progress=progress, runner=_runner(config, layout, private),
                           should_stop=should_stop, checkpoint=checkpoint)


class PretrainState(NamedTuple):
    generators: Net   # temporary, one per shard (never released)
    critics: Net
    aux: Net | None
    steps: jax.Array


@functools.lru_cache(maxsize=32)
def _pretrain_runner(config, layout, mesh: jax.sharding.Mesh | None = None):
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
                return shard_iteration(config, layout, *carry, data, i_data, log_probs, key_tk, False)

            return lax.fori_loop(0, n, body, (g, d, a))

        return lax.map(one, (gens, critics, aux, idx), batch_size=min(config.shard_group, idx.shape[0]))

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
             should_stop=None, checkpoint=None, mesh: jax.sharding.Mesh | None = None) -> PretrainState:
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
                            chunk_size=max(1, min(config.chunk_size, config.pretrain_iterations)),
                            progress=progress, runner=_pretrain_runner(config, layout, mesh),
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


# ----------------------------------------------------------------------------- privacy


def num_shards(config: DPSACTGANConfig, num_records: int) -> int:
    """K: ``num_discriminators``, or ``min(max_discriminators, N // batch_size)``.

    Raises:
        ValueError: too few records for one batch per shard on average (naming the argument).
    """
    n = _v.count(num_records, "num_records", 1)
    b = config.batch_size
    if config.num_discriminators is None:
        if n < b:
            raise ValueError(f"too few rows: N={n} records is fewer than batch_size={b}, so not even one "
                             "shard holds a batch; use a smaller batch_size.")
        return min(config.max_discriminators, n // b)
    k = config.num_discriminators
    if n / k < b:
        raise ValueError(f"too few rows per shard: num_discriminators={k} gives N/K={n / k:.1f} records "
                         f"per shard for N={n}, fewer than batch_size={b}; use fewer discriminators, a "
                         "smaller batch_size, or num_discriminators=None (K chosen from N).")
    return k


def generator_steps(config: DPSACTGANConfig, num_records: int) -> int:
    """T: ``generator_steps``, or ``round(epochs * (N // batch_size))`` when ``epochs`` is set."""
    if config.epochs is None:
        return config.generator_steps
    return int(round(config.epochs * (int(num_records) // config.batch_size)))


def histogram_columns(layout: Layout, config: DPSACTGANConfig) -> tuple[int, ...]:
    """Columns whose block frequencies are noisy histograms (``cond="noisy"``): every discrete
    column, and the continuous ones when their modes are public."""
    if config.cond != "noisy":
        return ()
    return tuple(c for c in range(layout.n_cols) if not layout.continuous[c] or config.modes == "public")


def privacy_phases(config: DPSACTGANConfig, layout: Layout, num_records: int, *,
                   steps: Mapping[str, int] | None = None, private: bool = True) -> list:
    """Histograms (one Gaussian release per histogram), DP-EM (``3 * em_iterations`` releases per
    continuous column), and the generator (:class:`privacy.ShardedSanitizerPhase`, proven)."""
    steps = dict(steps or {})
    phases = []
    n_hist = len(histogram_columns(layout, config))
    n_em = 3 * config.em_iterations * layout.n_continuous if config.modes == "dp-em" else 0
    t = steps.get("generator", generator_steps(config, num_records))
    if n_hist:
        s = steps.get("histograms", n_hist)
        phases.append(privacy.GaussianPhase("histograms", config.hist_noise_multiplier, s, sensitivity=1.0)
                      if private else privacy.NonPrivatePhase("histograms", s))
    if n_em:
        s = steps.get("dp-em", n_em)
        phases.append(privacy.GaussianPhase("dp-em", config.em_noise_multiplier, s, sensitivity=1.0)
                      if private else privacy.NonPrivatePhase("dp-em", s))
    if not private:
        return phases + [privacy.NonPrivatePhase("generator", t)]
    return phases + [privacy.ShardedSanitizerPhase(
        "generator", num_shards=num_shards(config, num_records), steps=t, rows_per_step=config.batch_size,
        noise_multiplier=config.noise_multiplier, dataset_size=int(num_records), accounting="proven",
        clip_norm=config.clip_norm)]


PREPROCESSING = ("histograms", "dp-em")


def calibrate(config: DPSACTGANConfig, layout: Layout, phases: list, epsilon: float, delta: float,
              accountant: str = "pld") -> list:
    """Preprocessing noise first (alone at ``preprocessing_share * epsilon``, or as configured),
    then the generator noise with the preprocessing held fixed; warns when the generator update
    would be essentially noise (per-step signal-to-noise bound below :data:`ABSURD_SNR`)."""
    pre = [p for p in phases if p.name in PREPROCESSING]
    if pre and config.preprocessing_share is not None:
        scaled = {p.name: p for p in privacy.calibrate(pre, config.preprocessing_share * epsilon, delta,
                                                       accountant, max_noise_multiplier=1e7)}
        phases = [scaled.get(p.name, p) for p in phases]
    gen = next(p for p in phases if p.name == "generator")
    if not gen.spends_privacy:  # no generator step planned: nothing left to calibrate
        return phases
    out = privacy.calibrate(phases, epsilon, delta, accountant, max_noise_multiplier=1e7,
                            fixed=[p.name for p in pre])
    gen = next(p for p in out if p.name == "generator")
    snr = math.sqrt(config.batch_size) / (2.0 * gen.noise_multiplier * math.sqrt(layout.width))
    if snr < ABSURD_SNR:
        warnings.warn(
            f"epsilon={epsilon} with K={gen.num_shards} discriminator(s), B={gen.rows_per_step} and "
            f"T={gen.steps} steps needs a per-row noise multiplier of {gen.noise_multiplier:.6g} (the "
            f"paper's sigma = {2 * gen.noise_multiplier:.6g}): each generator update is essentially "
            f"noise (signal-to-noise at most sqrt(B)/(sigma sqrt(width)) = {snr:.2e}). Use the sharded "
            "mode (num_discriminators=None) or fewer steps.", UserWarning, stacklevel=4)
    return out


@register
class DPSACTGAN(Synthesizer):
    """DP-SACTGAN with a scikit-learn-like interface (``docs/dp-sactgan.md``).

    Example:
        >>> model = DPSACTGAN().fit(train_df, data.adult_schema(), epsilon=1.0)   # doctest: +SKIP
        >>> model.sample(1000)                                                   # doctest: +SKIP
    """

    METHOD = "dp-sactgan"
    DESCRIPTION = ("conditional column-token transformer GAN, generator trained through one sanitised "
                   "output gradient per step, K sharded critics (Li and Wang 2023, corrected)")
    CONFIG = DPSACTGANConfig
    PRESETS = PAPER_PRESETS
    DECODE_MODE = "sample"
    CHECKPOINTS = True

    def _check_schema(self, schema):
        self._schema_for_phases = schema

    def _layout(self, config):
        return build_layout(self._schema_for_phases, config)

    def _phases(self, config, num_records, steps, private):
        return privacy_phases(config, self._layout(config), num_records, steps=steps, private=private)

    def _calibrate(self, config, phases, epsilon, delta):
        return calibrate(config, self._layout(config), phases, epsilon, delta, self.ACCOUNTANT)

    def _paper_accounting(self, phases, delta, report):
        gen = next(p for p in phases if p.name == "generator")
        if gen.num_shards == 1:
            return {"label": ("The paper's Theorem 1 ((lambda, 2 B lambda / sigma_paper^2)-RDP per generator "
                              "step) composed over the executed steps, RDP classic conversion, training "
                              "only: a valid bound for the training phase (one discriminator sees every "
                              "record, no amplification); the preprocessing is not included"),
                    "epsilon": privacy.epsilon([gen], delta, accountant="rdp", conversion="classic")}
        paper = dataclasses.replace(gen, accounting="paper")
        return {"label": ("GS-WGAN's accounting of sharded discriminators (steps * B per-row releases, "
                          "each subsampled at 1/K, RDP classic conversion), training only; NOT a valid "
                          "bound, for comparison only"),
                "epsilon": privacy.epsilon([paper], delta, accountant="rdp", conversion="classic")}

    def _train(self, config, x, key, ctx) -> TrainResult:
        layout = build_layout(ctx.schema, config)
        k = num_shards(config, ctx.num_records)
        config = config.replace(num_discriminators=k)
        k_modes, k_assign, k_hist, k_part, k_pre, k_init, k_run = jax.random.split(key, 7)
        t0 = time.perf_counter()
        _, u = split_columns(layout, x)
        if config.modes == "dp-em":
            modes = fit_modes(u, k_modes, config, private=ctx.private)
        else:
            modes = public_modes(ctx.schema, config)
        rows, codes = encode_rows(layout, x, modes, config.mode_assignment, k_assign)
        hist_cols = histogram_columns(layout, config)
        noise = config.hist_noise_multiplier if ctx.private else 0.0
        counts = noisy_counts(codes, layout, k_hist, noise, hist_cols)
        if config.cond == "noisy" and config.modes == "dp-em":  # the DP-EM weights (post-processing)
            j = 0
            for c in range(layout.n_cols):
                if layout.continuous[c]:
                    counts = counts.at[c, :config.n_modes].set(modes.weights[j] * ctx.num_records)
                    j += 1
        elif config.cond == "uniform":
            counts = jnp.where(jnp.isfinite(cond_log_probs(layout, jnp.zeros_like(counts), training=False)),
                               1.0, 0.0)
        log_probs = cond_log_probs(layout, counts, training=True)
        data = prepare(layout, rows, codes, k_part, k)
        t1 = time.perf_counter()
        critics = aux = None
        pretrained = 0
        if config.pretrain_iterations:
            pre = pretrain(config, layout, data, log_probs, k_pre, progress=ctx.progress("pretrain"),
                           should_stop=ctx.should_stop, checkpoint=ctx.checkpoint("pretrain"))
            critics, aux, pretrained = pre.critics, pre.aux, int(pre.steps)
            opt = optimizer(config)  # fresh Adam states for the generator phase, as GS-WGAN
            critics = Net(critics.params, jax.vmap(opt.init)(critics.params))
            if aux is not None:
                aux = Net(aux.params, jax.vmap(opt.init)(aux.params))
        t2 = time.perf_counter()
        state = init_state(config, layout, k, k_init, critics, aux)
        state = train(config, layout, state, data, log_probs, k_run, private=ctx.private,
                      steps=generator_steps(config, ctx.num_records),
                      progress=ctx.progress("generator"), should_stop=ctx.should_stop,
                      checkpoint=ctx.checkpoint("generator"))
        jax.block_until_ready(state.generator.params)
        t3 = time.perf_counter()
        notes = self._notes(config, layout, k, pretrained, ctx.private)
        steps = {"generator": int(state.steps)}
        if hist_cols:
            steps["histograms"] = len(hist_cols)
        if config.modes == "dp-em" and layout.n_continuous:
            steps["dp-em"] = 3 * config.em_iterations * layout.n_continuous
        released = {"generator": state.generator.params,
                    "modes": {f: getattr(modes, f) for f in Modes._fields},
                    "cond": {"counts": counts}}
        return TrainResult(config=config, released=released, steps=steps,
                           seconds={"preprocessing": t1 - t0, "pretrain": t2 - t1, "generator": t3 - t2},
                           assumptions=notes)

    @staticmethod
    def _notes(config, layout, k, pretrained, private) -> list[str]:
        notes = [
            (f"Modes of the {layout.n_continuous} continuous column(s): one-dimensional DP-EM per column "
             f"({config.n_modes} components, {config.em_iterations} iterations, values scaled to [-1, 1] by "
             "the schema bounds; phase 'dp-em'); no mixture is fitted on private values without noise."
             if config.modes == "dp-em" else
             f"Modes of the continuous columns: centres of {config.n_modes} equal-width public bins over "
             "the schema bounds (no data read)."),
            ("Conditional-vector frequencies: Gaussian-noised histograms (phase 'histograms'; each record "
             "adds 1 to one bin per histogram)" + (", the DP-EM weights for mode blocks" if config.modes == "dp-em"
                                                   else "") + "; they are released to sample."
             if config.cond == "noisy" else "Conditional-vector frequencies: uniform (no data read)."),
            f"Shards: every record got an independent uniform label in 1..K (K={k}) from the secret key, so "
            "adding or removing a record moves no other record; the labels, shard sizes and the shard drawn "
            "at each step are never saved, logged or reported." if k > 1 else
            "One discriminator sees every record (the paper's mechanism): no amplification by sampling.",
            "The critics and auxiliary classifiers (one per shard) train without privacy and never leave "
            "the process, and no state is shared across shards (each shard's pretraining has its own "
            "temporary generator): the headline bound needs nothing more, whatever state a critic "
            "carries between steps.",
            "The critic's real rows for a condition (training by sampling) are looked up inside the chosen "
            "shard; they reach the generator only through the sanitised rows.",
        ]
        if pretrained:
            notes.append(f"Pretraining ({pretrained} iterations per shard, each critic and classifier on its "
                         "own shard against its own temporary generator) releases nothing.")
        if private:
            notes.append(
                "The released generator depends on the private rows only through one sanitised gradient per "
                f"step: each generated row's gradient (adversarial, information and classifier terms summed) "
                f"clipped to C={config.clip_norm} with Gaussian noise of std 2*C*noise_multiplier. The "
                "conditional cross-entropy on the raw logits bypasses the sanitiser: it depends on the DP or "
                "public conditional frequencies only.")
        return notes

    def _sample_encoded(self, n, key):
        layout = build_layout(self.schema, self.fitted_config)
        return sample_encoded(self.fitted_config, layout, self.released, n, key)

    def _release_shapes(self, config, schema):
        layout = build_layout(schema, config)
        g = jax.eval_shape(lambda kk: init_generator(config, layout, kk), jax.random.key(0))
        shape = (layout.n_continuous, config.n_modes)
        f32 = jnp.float32
        return {"generator": g,
                "modes": {f: jax.ShapeDtypeStruct(shape, f32) for f in Modes._fields},
                "cond": {"counts": jax.ShapeDtypeStruct((layout.n_cols, layout.max_width), f32)}}


__all__ = [
    "DPSACTGAN",
    "DPSACTGANConfig",
    "Layout",
    "Modes",
    "PAPER_PRESETS",
    "build_layout",
    "calibrate",
    "encode_rows",
    "fit_modes",
    "num_shards",
    "prepare",
    "privacy_phases",
    "public_modes",
    "sample_encoded",
    "train",
    "train_step",
]
