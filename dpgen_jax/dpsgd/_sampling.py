"""Poisson sampling with static shapes, drawn inside jit, from exact-to-rounding geometric gaps.

A Poisson sample selects each of the m records independently with probability q. We draw it in
time proportional to the batch, not the dataset: the gaps between consecutive selected records
of a Bernoulli(q) process are i.i.d. Geometric(q) on {1, 2, ...}, so the selected indices are the
cumulative sums of geometric gaps that fall below m. A chunk holds ``capacity`` gaps; when the last
of them still falls inside the dataset, more records may follow, and the caller processes a
further chunk starting after it. The union of the chunks is the Poisson sample: nothing is
truncated or resampled, so the accounting is the plain ``PoissonSampledDpEvent``.

What holds, precisely. Each gap is ``floor(E / lambda) + 1`` with ``lambda = -log(1 - q)`` and
``E = -log(U)`` an Exponential(1) variable, computed in float64 (a scoped ``jax.enable_x64``) from a
uniform ``U`` on 96 random bits (three 32-bit words of ``jax.random``'s Threefry generator): 64
bits ``K`` plus a third word that refines ``U`` where the far tail needs it. Near 1, ``E`` is
computed as ``-log1p(-V)`` from the complement ``V = 1 - U`` formed from the complemented bits,
so ``U`` is resolved to 2^-96 near both ends. Consequences:

* the reachable gaps include every integer up to ``(66.5 - log(1 / lambda)) / lambda`` (e.g.
  59,600 at q = 1e-3; with 64 bits alone it would be 37,400) and reach ``66.5 / lambda``; the gap
  is capped only at ``m + 1`` (a gap that long already ends the sample), so no record position
  is out of reach;
* ``P(gap = k)`` equals ``(1 - q)^(k - 1) q`` up to float64 rounding of ``E / lambda`` (absolute
  error below 1e-6 in units of records for any ``m < 2^31``) and the 2^-96 grid of ``U``;
* the gaps are independent (disjoint words of a keyed stream), so the inclusion indicators are
  independent Bernoulli(q) to the same precision; the deviation of any record's conditional
  inclusion probability from q is of the same relative order (about 1e-6 at worst, ~1e-12 at
  typical batch sizes).

Cumulative positions are summed in int64 and saturate at m: a position past the end stays past
the end, so no ``m < 2^31`` and no capacity can overflow, and there is no error path.

``num_records`` and ``sample_rate`` may be Python numbers (the usual, static case) or traced
arrays, so that one compiled step can be ``vmap``-ed over groups of different sizes and rates
(a traced rate is used as the float32 value it is; pass the accountant that same value).
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import _validate as _v


def default_capacity(num_records: int, sample_rate: float) -> int:
    """Padded batch size: qm + 6 sqrt(qm), rounded up to a multiple of 8.

    With this capacity a second chunk is needed with probability well under 1e-6 per step for the
    batch sizes used here; when it is needed it is processed, not dropped.
    """
    m = _v.whole(minimum=1, num_records=num_records)
    q = _v.probability(sample_rate=sample_rate)
    mean = q * m
    cap = int(math.ceil(mean + 6.0 * math.sqrt(mean) + 1.0))
    cap = min(max(cap, 8), m + 8)
    return int(-(-cap // 8) * 8)


class PoissonChunk(NamedTuple):
    """One chunk of a Poisson sample.

    Attributes:
        indices: (capacity,) int32 record indices; padded slots hold a valid index (0), masked out.
        mask: (capacity,) bool, True for selected records.
        next_position: int32 scalar; the first record not yet scanned, at most ``num_records``.
            The sample is complete when ``next_position >= num_records``.
    """

    indices: jax.Array
    mask: jax.Array
    next_position: jax.Array


def _is_static(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, jax.Array)


def exponential_from_words(hi: jax.Array, lo: jax.Array, extra: jax.Array) -> jax.Array:
    """Exponential(1) as float64 from the 96-bit uniform ``U = (K + (w + 1/2) 2^-32) 2^-64``.

    ``K = hi:lo`` and ``w = extra`` (uint32 words). Must be called under ``jax.enable_x64(True)``.
    For ``U < 1/2`` the value is ``-log(U)``; otherwise ``-log1p(-V)`` with ``V = 1 - U`` formed
    from the complemented bits, so both ends are resolved to 2^-96 (the third word only matters
    when ``K`` or its complement is below 2^21). Monotone decreasing in ``(K, w)``.
    """
    k = (hi.astype(jnp.uint64) << np.uint64(32)) | lo.astype(jnp.uint64)
    lower = hi < np.uint32(2**31)
    u = (k.astype(jnp.float64) + (extra.astype(jnp.float64) + 0.5) * 2.0**-32) * 2.0**-64
    v = ((~k).astype(jnp.float64) + ((~extra).astype(jnp.float64) + 0.5) * 2.0**-32) * 2.0**-64
    return jnp.where(lower, -jnp.log(u), -jnp.log1p(-v))


def gaps_from_words(hi, lo, extra, rate, num_records):
    """Geometric(q) gaps in {1, ..., m + 1} (int64) from uint32 words; ``rate = -log(1 - q)``.

    Must be called under ``jax.enable_x64(True)``; ``rate`` and ``num_records`` may be traced.
    """
    t = exponential_from_words(hi, lo, extra) / rate
    m = jnp.asarray(num_records).astype(jnp.float64)
    return jnp.floor(jnp.minimum(t, m)).astype(jnp.int64) + 1


def poisson_chunk(
    key: jax.Array, position: jax.Array, num_records, sample_rate, capacity: int
) -> PoissonChunk:
    """Draws up to ``capacity`` records of a Poisson(q) sample, scanning from ``position``.

    Args:
        key: a ``jax.random`` key (secret: it decides which records are used).
        position: int32 scalar, the first record index to consider (0 <= position <= m).
        num_records: dataset size m < 2^31: a Python int (static), or an int32 array (traced,
            e.g. one value per group under ``vmap``).
        sample_rate: inclusion probability q in (0, 1]: a Python float (static) or a float32
            array (traced). Traced values are not validated.
        capacity: number of slots (static Python int).

    Returns:
        A :class:`PoissonChunk`.
    """
    if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
        raise ValueError(f"capacity={capacity!r} is not a positive integer: pass a static int >= 1.")
    static = _is_static(num_records) and _is_static(sample_rate)
    if static:
        m = _v.whole(minimum=1, num_records=num_records)
        q = _v.probability(sample_rate=sample_rate)
        if q >= 1.0:
            return _scan_all(position, m, capacity)
    words = jax.random.bits(key, (3, capacity), jnp.uint32)
    with jax.enable_x64(True):
        if static:
            rate = -math.log1p(-q)
            m64 = jnp.int64(m)
        else:
            q64 = jnp.asarray(sample_rate).astype(jnp.float64)
            rate = -jnp.log1p(-q64)
            m64 = jnp.asarray(num_records).astype(jnp.int64)
        gaps = gaps_from_words(words[0], words[1], words[2], rate, m64)
        pos = jnp.minimum(jnp.asarray(position).astype(jnp.int64), m64)
        idx = jnp.minimum(pos - 1 + jnp.cumsum(gaps), m64)  # saturating: past the end stays there
        nxt = jnp.minimum(idx[-1] + 1, m64)
        mask = idx < m64
        safe = jnp.where(mask, idx, 0).astype(jnp.int32)
        nxt = nxt.astype(jnp.int32)
    return PoissonChunk(safe, mask, nxt)


def _scan_all(position, m: int, capacity: int) -> PoissonChunk:
    """q = 1: every record is selected, a deterministic scan."""
    with jax.enable_x64(True):
        pos = jnp.asarray(position).astype(jnp.int64)
        idx = jnp.minimum(pos + jnp.arange(capacity, dtype=jnp.int64), m)
        mask = idx < m
        safe = jnp.where(mask, idx, 0).astype(jnp.int32)
        nxt = jnp.minimum(idx[-1] + 1, m).astype(jnp.int32)
    return PoissonChunk(safe, mask, nxt)


def poisson_sample_indices(
    key: jax.Array, num_records: int, sample_rate: float, capacity: int | None = None
) -> np.ndarray:
    """The full Poisson sample as a host array (for tests and inspection, not for training)."""
    m = _v.whole(minimum=1, num_records=num_records)
    q = _v.probability(sample_rate=sample_rate)
    cap = capacity or default_capacity(m, q)
    chunk = jax.jit(poisson_chunk, static_argnums=(2, 3, 4))
    out, pos, i = [], jnp.int32(0), 0
    while True:
        c = chunk(jax.random.fold_in(key, i), pos, m, q, cap)
        out.append(np.asarray(c.indices)[np.asarray(c.mask)])
        pos, i = c.next_position, i + 1
        if int(pos) >= m:
            return np.concatenate(out)
