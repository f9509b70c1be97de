"""DP-SACTGAN's encoding: the column layout, public or DP-EM modes, encoding and decoding rows
(``docs/dp-sactgan.md``)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import data as data_lib
from dpgen_jax.synthesizers import _dp_em
from dpgen_jax.synthesizers.dp_sactgan._config import DPSACTGANConfig

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


def fit_modes(values: jax.Array, key: jax.Array, config: DPSACTGANConfig, noise_multiplier: float) -> Modes:
    """Modes by one-dimensional DP-EM per column (``_dp_em.dp_em_ssp``, ``noise_multiplier`` on
    every statistic: the accounted phase ``"dp-em"``'s, ``3 * em_iterations`` Gaussian releases
    per column; the columns stacked in one call, each column's statistics exact fixed-point sums
    released on the public grid). ``values``: ``(n, n_continuous)`` in [-1, 1]; the starts are
    public (``_dp_em.init_mixture``). ``noise_multiplier=0`` runs plain EM (non-private)."""
    n_cont = values.shape[1]
    m = config.n_modes
    if n_cont == 0:
        z = jnp.zeros((0, m), jnp.float32)
        return Modes(z, z, z)
    k_init, k_fit = jax.random.split(key)
    inits = jax.vmap(lambda kk: _dp_em.init_mixture(kk, m, 1))(jax.random.split(k_init, n_cont))
    mix = _dp_em.dp_em_ssp(jnp.asarray(values).T[:, :, None], k_fit, inits,  # columns stacked
                           iterations=config.em_iterations, noise_multiplier=noise_multiplier)
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


def _kind_columns(layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column indices of the ``TableEncoder`` kinds: ``(categorical, binary, continuous)``."""
    kinds = np.asarray(layout.src_kinds)
    return tuple(np.flatnonzero(kinds == k) for k in ("categorical", "binary", "continuous"))


def split_columns(layout: Layout, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """From ``TableEncoder`` rows: ``(codes (n, n_cols) int32, values (n, n_cont) in [-1, 1])``;
    a continuous column's code is filled in by :func:`encode_rows`.

    The columns of one kind (and categorical columns of one width) are read together, so the work
    does not grow with the number of columns beyond the size of the data."""
    x = jnp.asarray(x)
    n = x.shape[0]
    starts, widths = np.asarray(layout.src_starts), np.asarray(layout.widths)
    cat, binary, cont = _kind_columns(layout)
    order, parts = [], []  # columns in the order of the pieces of ``parts``
    for w in sorted(set(widths[cat].tolist())):  # categorical: argmax over each block, by width
        cols = cat[widths[cat] == w]
        order.append(cols)
        parts.append(jnp.argmax(x[:, starts[cols][:, None] + np.arange(w)], axis=-1).astype(jnp.int32))
    order += [binary, cont]
    parts += [(x[:, starts[binary]] > 0.5).astype(jnp.int32), jnp.zeros((n, len(cont)), jnp.int32)]
    where = np.empty(layout.n_cols, np.int64)
    where[np.concatenate(order).astype(np.int64)] = np.arange(layout.n_cols)
    codes = jnp.concatenate(parts, axis=1)[:, where]
    return codes, 2.0 * x[:, starts[cont]] - 1.0


def encode_rows(layout: Layout, x: jax.Array, modes: Modes, how: str = "argmax",
                key: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """``TableEncoder`` rows -> ``(rows (n, width), codes (n, n_cols))`` in this method's layout:
    one-hot discrete columns, ``(alpha, beta)`` continuous ones with alpha clipped to +-0.99
    (one compiled call per layout, ``how`` and shape)."""
    return _encode_rows(layout, jnp.asarray(x), modes, how, key)


@functools.partial(jax.jit, static_argnums=(0, 3))
def _encode_rows(layout: Layout, x: jax.Array, modes: Modes, how: str, key: jax.Array | None):
    codes, u = split_columns(layout, x)
    n = codes.shape[0]
    starts = np.asarray(layout.starts) + np.asarray(layout.block_lo)  # first slot of each one-hot block
    rows = jnp.zeros((n, layout.width), jnp.float32)
    if layout.n_continuous:
        cont = np.flatnonzero(layout.continuous)
        mode = assign_modes(u, modes, how, key)
        j = np.arange(len(cont))[None, :]
        alpha = jnp.clip((u - modes.means[j, mode]) / (4.0 * modes.stds[j, mode]), -0.99, 0.99)
        codes = codes.at[:, cont].set(mode)
        rows = rows.at[:, np.asarray(layout.starts)[cont]].set(alpha)
    rows = rows.at[jnp.arange(n)[:, None], starts + codes].set(1.0)
    return rows, codes


def decode_rows(layout: Layout, probs: jax.Array, modes: Modes, key: jax.Array) -> jax.Array:
    """Generated padded outputs -> ``TableEncoder`` rows (post-processing).

    ``probs`` is ``(n, n_cols, max_width)``: tanh(alpha) in slot 0 and mode logits in the block of
    a continuous column, class probabilities for a discrete one. The mode is drawn from its
    softmax; the value is ``alpha * 4 sd + mu`` clipped to [-1, 1], mapped to [0, 1]. The ``j``-th
    continuous column draws with the ``j``-th key of ``jax.random.split(key, n_continuous)``; all of
    them in one vectorised draw.
    """
    n, n_cols, max_width = probs.shape
    cont = np.flatnonzero(layout.continuous)
    flat = probs.reshape(n, n_cols * max_width)
    source = []  # per output column: its position in concat(flat, continuous values)
    j = 0
    for c in range(n_cols):
        if layout.continuous[c]:
            source.append(n_cols * max_width + j)
            j += 1
        elif layout.src_kinds[c] == "binary":
            source.append(c * max_width + 1)
        else:
            source.extend(c * max_width + np.arange(layout.widths[c]))
    if len(cont):
        keys = jax.random.split(key, len(cont))
        n_modes = layout.block_size[cont[0]]
        logits = probs[:, cont, 1:1 + n_modes]  # every continuous column has n_modes modes
        m = jax.vmap(lambda k, lg: jax.random.categorical(k, lg, axis=-1), in_axes=(0, 1), out_axes=1)(keys, logits)
        j = np.arange(len(cont))[None, :]
        u = probs[:, cont, 0] * 4.0 * modes.stds[j, m] + modes.means[j, m]
        flat = jnp.concatenate([flat, (jnp.clip(u, -1.0, 1.0) + 1.0) / 2.0], axis=1)
    return flat[:, np.asarray(source, np.int64)]
