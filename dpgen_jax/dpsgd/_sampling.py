"""Exact Poisson sampling with static shapes, drawn inside jit.

A Poisson sample selects each of the m records independently with probability q. We draw it in
time proportional to the batch, not the dataset: the gaps between consecutive selected records
of a Bernoulli(q) process are i.i.d. Geometric(q), so the selected indices are the cumulative
sums of geometric gaps that fall below m. A chunk holds ``capacity`` gaps; when the last of them
still falls inside the dataset, more records may follow, and the caller processes a further chunk
starting after it. The union of the chunks is exactly the Poisson sample: nothing is truncated or
resampled, so the accounting is the plain ``PoissonSampledDpEvent``.

Precision: each gap is drawn by inversion, ``floor(-log1p(-V) / -log1p(-q)) + 1`` with V uniform on
(0, 1) built from 32 random bits, so the inclusion probability is q up to float32 rounding
(relative error about 1e-7), and independence across records is exact.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax.dpsgd._validate import check_num_records, check_sample_rate


def default_capacity(num_records: int, sample_rate: float) -> int:
    """Padded batch size: qm + 6 sqrt(qm), rounded up to a multiple of 8.

    With this capacity a second chunk is needed with probability well under 1e-6 per step for the
    batch sizes used here (fast-dp-sgd spec §4); when it is needed it is processed, not dropped.
    """
    m = check_num_records(num_records)
    q = check_sample_rate(sample_rate)
    mean = q * m
    cap = int(math.ceil(mean + 6.0 * math.sqrt(mean) + 1.0))
    cap = min(max(cap, 8), m + 8)
    return int(-(-cap // 8) * 8)


class PoissonChunk(NamedTuple):
    """One chunk of a Poisson sample.

    Attributes:
        indices: (capacity,) int32 record indices; padded slots hold a valid index (0), masked out.
        mask: (capacity,) bool, True for selected records.
        next_position: int32 scalar; the first record not yet scanned. The sample is complete
            when ``next_position >= num_records``.
    """

    indices: jax.Array
    mask: jax.Array
    next_position: jax.Array


def poisson_chunk(
    key: jax.Array, position: jax.Array, num_records: int, sample_rate: float, capacity: int
) -> PoissonChunk:
    """Draws up to ``capacity`` records of a Poisson(q) sample, scanning from ``position``.

    Args:
        key: a ``jax.random`` key (secret: it decides which records are used).
        position: int32 scalar, the first record index to consider.
        num_records: dataset size m (static).
        sample_rate: inclusion probability q (static).
        capacity: number of slots (static).

    Returns:
        A :class:`PoissonChunk`.
    """
    m = int(num_records)
    q = float(sample_rate)
    if q >= 1.0:
        # Every record is selected: a deterministic scan.
        idx = position + jnp.arange(capacity, dtype=jnp.int32)
    else:
        bits = jax.random.bits(key, (capacity,), dtype=jnp.uint32)
        v = (bits.astype(jnp.float32) + 0.5) * jnp.float32(2.0**-32)  # uniform on (0, 1)
        v = jnp.minimum(v, jnp.float32(1.0 - 2.0**-24))
        expo = -jnp.log1p(-v)  # Exponential(1)
        rate = jnp.float32(-math.log1p(-q))
        gaps = jnp.floor(jnp.minimum(expo / rate, jnp.float32(m + 1))) + 1.0
        idx = position - 1 + jnp.cumsum(gaps.astype(jnp.int32))
    mask = idx < m
    safe = jnp.where(mask, idx, 0).astype(jnp.int32)
    return PoissonChunk(safe, mask, (idx[-1] + 1).astype(jnp.int32))


def poisson_sample_indices(
    key: jax.Array, num_records: int, sample_rate: float, capacity: int | None = None
) -> np.ndarray:
    """The full Poisson sample as a host array (for tests and inspection, not for training)."""
    m = check_num_records(num_records)
    q = check_sample_rate(sample_rate)
    cap = capacity or default_capacity(m, q)
    chunk = jax.jit(poisson_chunk, static_argnums=(2, 3, 4))
    out, pos, i = [], jnp.int32(0), 0
    while True:
        c = chunk(jax.random.fold_in(key, i), pos, m, q, cap)
        out.append(np.asarray(c.indices)[np.asarray(c.mask)])
        pos, i = c.next_position, i + 1
        if int(pos) >= m:
            return np.concatenate(out)
