"""DP-SACTGAN's conditional vectors: noisy block frequencies, the training data, and the draw of
real rows of a chosen category inside a shard (training by sampling) (``docs/dp-sactgan.md``)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import dpsgd
from dpgen_jax.synthesizers import _shards
from dpgen_jax.synthesizers.dp_sactgan._encoding import Layout


def release_conditional_counts(codes, layout: Layout, key: jax.Array, noise_std: float,
                               columns) -> jax.Array:
    """``(n_cols, max_width)`` per-column histograms of ``codes`` released by ``dpsgd.noisy_counts``
    (integer counts plus integer Gaussian noise of std ``noise_std`` per bin) for the columns in
    ``columns``; ``noise_std`` is the ``histograms`` phase's (``privacy.GaussianPhase.noise_std``:
    sigma times the L2 sensitivity 1 of one histogram, as each record adds 1 to one bin per
    column), 0 for exact counts. Then clipped at 0 (post-processing). Padding bins and other
    columns are 0. Every value is an integer (float32, exact below 2^24)."""
    c = np.asarray(codes).astype(np.int64)
    hists = {str(col): np.bincount(c[:, col], minlength=layout.block_size[col]) for col in columns}
    released = dpsgd.noisy_counts(hists, float(noise_std) if noise_std else None, key)
    out = np.zeros((layout.n_cols, layout.max_width), np.float32)
    for col in columns:
        out[col, :layout.block_size[col]] = np.maximum(released[str(col)], 0)
    return jnp.asarray(out)


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
    shards: _shards.Shards


def prepare(layout: Layout, rows: jax.Array, codes: jax.Array, key: jax.Array, k: int) -> TrainData:
    """Secret shard labels (``_shards.partition``: i.i.d. uniform, adding or removing a record
    moves no other record), rows sorted by shard, and the training-by-sampling index."""
    both = jnp.concatenate([rows, codes.astype(jnp.float32)], axis=1)
    sorted_both, shards = _shards.partition(both, key, k)
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
