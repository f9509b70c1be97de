"""Exact Poisson sampling: statistics of many draws against the definition.

A Poisson sample includes each of the m records independently with probability q. These tests
check consequences of that definition over thousands of draws (vectorised over keys): the
sample size is Binomial(m, q), every record is included with probability q, pairs of records are
included independently, the gaps between selected records have the law the definition implies,
and a tiny chunk capacity changes none of it (the overflow is processed in further chunks, never
truncated). Every statistical test uses fixed keys and accepts at p > 1e-4; most are paired with a
check that the same statistic rejects a slightly wrong q, so that the test has power.

All draws use one key-array shape so the vectorised sampler compiles once per (m, q, capacity).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpgen_jax import dpsgd
from tests._compile import FAST_COMPILE

P_ACCEPT = 1e-4
P_REJECT = 1e-6
N_DRAWS = 20_000


def _keys(seed: int) -> jax.Array:
    return jax.random.split(jax.random.key(seed), N_DRAWS)


def _binomial_chi2(sizes: np.ndarray, m: int, q: float) -> float:
    """Chi-square p-value of ``sizes`` against Binomial(m, q), bins merged to >= 5 expected."""
    n = sizes.size
    expected = n * stats.binom.pmf(np.arange(m + 1), m, q)
    observed = np.bincount(sizes, minlength=m + 1).astype(float)
    obs_bins, exp_bins, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(observed, expected):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5.0:
            obs_bins.append(acc_o)
            exp_bins.append(acc_e)
            acc_o, acc_e = 0.0, 0.0
    obs_bins[-1] += acc_o
    exp_bins[-1] += acc_e
    obs, exp = np.array(obs_bins), np.array(exp_bins)
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def _inclusion_chi2(counts: np.ndarray, n_draws: int, q: float) -> float:
    """p-value of per-record inclusion counts against independent Binomial(n_draws, q) counts."""
    mean, var = n_draws * q, n_draws * q * (1.0 - q)
    return float(stats.chi2.sf(float(np.sum((counts - mean) ** 2) / var), df=counts.size))


@functools.partial(jax.jit, static_argnums=(2, 3, 4), compiler_options=FAST_COMPILE)
def _single_chunks(keys, position, m, q, capacity):
    return jax.vmap(lambda k: dpsgd.poisson_chunk(k, position, m, q, capacity))(keys)


def _draw(seed, m, q, position=0):
    c = _single_chunks(_keys(seed), jnp.int32(position), m, q, dpsgd.default_capacity(m, q))
    return np.asarray(c.indices), np.asarray(c.mask), np.asarray(c.next_position)


def _inclusion_matrix(idx: np.ndarray, mask: np.ndarray, m: int) -> np.ndarray:
    incl = np.zeros((idx.shape[0], m), bool)
    rows, cols = np.nonzero(mask)
    incl[rows, idx[rows, cols]] = True
    return incl


@functools.partial(jax.jit, static_argnums=(1, 2, 3), compiler_options=FAST_COMPILE)
def _full_samples(keys, m, q, capacity):
    """The whole sample for every key, chunk after chunk (fresh key per chunk), inside jit.

    Returns per key: the sample size, a (m,) inclusion count per record, the number of chunks, and
    whether the selected indices were strictly increasing within and across chunks with every
    padded slot holding index 0.
    """

    def one(key):
        def body(carry):
            pos, size, incl, ok, last, i = carry
            c = dpsgd.poisson_chunk(jax.random.fold_in(key, i), pos, m, q, capacity)
            sel = jnp.where(c.mask, c.indices, -1)
            prev = jnp.concatenate([last[None], sel[:-1]])
            ok = ok & jnp.all(jnp.where(c.mask, sel > prev, True))
            ok = ok & jnp.all(jnp.where(c.mask, True, c.indices == 0))
            new_last = jnp.max(jnp.where(c.mask, c.indices, last))
            incl = incl.at[c.indices].add(c.mask.astype(jnp.int32))
            return c.next_position, size + jnp.sum(c.mask), incl, ok, new_last, i + 1

        init = (jnp.int32(0), jnp.int32(0), jnp.zeros((m,), jnp.int32), jnp.bool_(True),
                jnp.int32(-1), jnp.int32(0))
        _, size, incl, ok, _, chunks = jax.lax.while_loop(lambda c: c[0] < m, body, init)
        return size, incl, chunks, ok

    return jax.vmap(one)(keys)


# --------------------------------------------------------------------------------------------
# Capacity and chunk structure
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("m", [1, 7, 100, 1000, 27_912, 1_000_000])
@pytest.mark.parametrize("q", [1e-6, 1e-3, 0.01, 0.0458, 0.3, 1.0])
def test_default_capacity_covers_six_sigma(m, q):
    cap = dpsgd.default_capacity(m, q)
    mean = q * m
    # A sample never has more than m records, so a capacity of m always suffices.
    assert cap >= min(mean + 6.0 * math.sqrt(mean), m)
    assert cap >= 1 and cap % 8 == 0


def test_chunk_structure_over_many_draws():
    m, q = 1000, 0.02
    idx, mask, nxt = _draw(0, m, q)
    assert idx.dtype == np.int32 and mask.dtype == bool
    assert idx.shape == (N_DRAWS, dpsgd.default_capacity(m, q))
    # The selected slots form a prefix; padded slots hold the valid index 0.
    n_sel = mask.sum(1)
    assert np.array_equal(mask, np.arange(idx.shape[1])[None, :] < n_sel[:, None])
    assert np.all(idx[~mask] == 0)
    assert np.all((idx >= 0) & (idx < m))
    both = mask[:, 1:] & mask[:, :-1]
    assert np.all(np.diff(idx, axis=1)[both] > 0)  # strictly increasing, hence unique
    # With the default capacity every draw completes in one chunk: the scan passed the end.
    assert np.all(nxt >= m)


def test_chunk_from_a_start_position():
    m, q, start = 1000, 0.02, 321
    idx, mask, _ = _draw(1, m, q, position=start)
    assert np.all(idx[mask] >= start)
    # The record at the start position is included with probability q like any other, and the
    # number selected from [start, m) is Binomial(m - start, q).
    hit = mask[:, 0] & (idx[:, 0] == start)
    assert abs(hit.mean() - q) < 5 * math.sqrt(q * (1 - q) / N_DRAWS)
    assert _binomial_chi2(mask.sum(1), m - start, q) > P_ACCEPT


# --------------------------------------------------------------------------------------------
# Size distribution, uniformity and independence
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "m, q", [(1000, 0.02), (60, 0.9), (200_000, 5e-5)], ids=["q0.02", "q0.9", "q5e-5_large_m"]
)
def test_sample_size_is_binomial(m, q):
    idx, mask, nxt = _draw(10, m, q)
    assert np.all(nxt >= m)
    sizes = mask.sum(1)
    assert _binomial_chi2(sizes, m, q) > P_ACCEPT
    # Mean and variance against q m and q (1 - q) m (z-tests at 5 standard errors).
    n, mu, var = N_DRAWS, q * m, q * (1 - q) * m
    assert abs(sizes.mean() - mu) < 5 * math.sqrt(var / n)
    var_of_var = (var * (1 - 6 * q * (1 - q)) + 2 * var**2) / n  # binomial 4th central moment
    assert abs(sizes.var(ddof=1) - var) < 5 * math.sqrt(var_of_var)
    # Power: the same test rejects an inclusion probability a few percent off.
    assert _binomial_chi2(sizes, m, q * 1.04 if q < 0.9 else 0.92) < P_REJECT


@pytest.mark.parametrize("m, q", [(1000, 0.02), (60, 0.9)], ids=["q0.02", "q0.9"])
def test_inclusion_is_uniform_and_pairwise_independent(m, q):
    idx, mask, _ = _draw(10, m, q)  # same draws as the size test: shares its compilation
    incl = _inclusion_matrix(idx, mask, m)
    counts = incl.sum(0)
    n = N_DRAWS
    assert _inclusion_chi2(counts, n, q) > P_ACCEPT
    # The first record (also the padding index) and the last record, one by one.
    for j in (0, m - 1):
        assert abs(counts[j] / n - q) < 5 * math.sqrt(q * (1 - q) / n), j
    # P(j and j + lag both selected) = q^2 for every lag.
    for lag in (1, 2, 7):
        both = int(np.sum(incl[:, :-lag] & incl[:, lag:]))
        pairs = n * (m - lag)
        sd = math.sqrt(pairs * q * q * (1 - q * q) * 3)  # conservative: overlapping pairs
        assert abs(both - pairs * q * q) < 5 * sd, (lag, both, pairs * q * q)
    assert _inclusion_chi2(counts, n, q * 1.04 if q < 0.9 else 0.92) < P_REJECT


def test_gaps_between_selected_records_follow_the_definition():
    # For a Bernoulli(q) process on [0, m), the expected number of pairs (i, i + k) that are both
    # selected with nothing selected between them is (m - k) q^2 (1 - q)^(k - 1). The sampler
    # draws these gaps by inverting a geometric law, so this checks the inversion directly.
    m, q = 1000, 0.02
    idx, mask, _ = _draw(10, m, q)
    gaps = np.diff(idx, axis=1)[mask[:, 1:] & mask[:, :-1]]
    ks = np.arange(1, m)
    expected = N_DRAWS * (m - ks) * q * q * (1 - q) ** (ks - 1)
    observed = np.bincount(gaps, minlength=m)[1:].astype(float)
    # Bins of width 10 up to 300, then one tail bin.
    edges = list(range(0, 300, 10)) + [m - 1]
    obs = np.add.reduceat(observed, edges[:-1])
    exp = np.add.reduceat(expected, edges[:-1])
    stat = float(np.sum((obs - exp) ** 2 / exp))
    assert stats.chi2.sf(stat, df=obs.size) > P_ACCEPT
    # Power: gaps of a sampler with q 4% too large would be rejected.
    q2 = q * 1.04
    exp2 = np.add.reduceat(N_DRAWS * (m - ks) * q2 * q2 * (1 - q2) ** (ks - 1), edges[:-1])
    assert stats.chi2.sf(float(np.sum((obs - exp2) ** 2 / exp2)), df=obs.size) < P_REJECT


# --------------------------------------------------------------------------------------------
# Overflow: a tiny capacity is processed in further chunks, never truncated
# --------------------------------------------------------------------------------------------


def test_tiny_capacity_still_gives_exact_poisson_sample():
    m, q, cap = 1000, 0.02, 4  # expected batch 20 through 4-slot chunks
    size, incl, chunks, ok = map(np.asarray, _full_samples(_keys(40), m, q, cap))
    assert ok.all()  # strictly increasing within and across chunks; padded slots hold index 0
    assert incl.max() <= 1  # no record twice
    assert np.array_equal(incl.sum(1), size)
    assert np.mean(chunks) > 5 and np.all(chunks >= np.ceil(size / cap))  # overflow processed
    assert _binomial_chi2(size, m, q) > P_ACCEPT
    assert abs(size.mean() - q * m) < 5 * math.sqrt(q * (1 - q) * m / N_DRAWS)
    assert _inclusion_chi2(incl.sum(0), N_DRAWS, q) > P_ACCEPT
    # Truncation at a fixed number of chunks would be rejected by the same test.
    assert _binomial_chi2(np.minimum(size, 4 * cap), m, q) < P_REJECT


def test_poisson_sample_indices_host_helper():
    m, q = 400, 0.05
    keys = _keys(50)[:60]
    sizes = []
    for k in keys:
        s = dpsgd.poisson_sample_indices(k, m, q, capacity=3)  # about 7 chunks per draw
        assert s.dtype.kind == "i"
        assert np.all(np.diff(s) > 0)
        assert s.size == 0 or (s[0] >= 0 and s[-1] < m)
        sizes.append(s.size)
    sizes = np.array(sizes)
    assert abs(sizes.mean() - q * m) < 5 * math.sqrt(q * (1 - q) * m / sizes.size)
    a = dpsgd.poisson_sample_indices(keys[0], m, q, capacity=3)
    assert np.array_equal(a, dpsgd.poisson_sample_indices(keys[0], m, q, capacity=3))
    assert not np.array_equal(a, dpsgd.poisson_sample_indices(keys[1], m, q, capacity=3))


@pytest.mark.parametrize("capacity", [None, 5])
def test_rate_one_selects_every_record_once(capacity):
    m = 37
    s = dpsgd.poisson_sample_indices(jax.random.key(3), m, 1.0, capacity=capacity)
    assert np.array_equal(s, np.arange(m))


def test_rate_one_chunk_from_a_position():
    c = dpsgd.poisson_chunk(jax.random.key(4), jnp.int32(30), 37, 1.0, 16)
    idx, mask = np.asarray(c.indices), np.asarray(c.mask)
    assert np.array_equal(idx[mask], np.arange(30, 37))
    assert np.all(idx[~mask] == 0)
    assert int(c.next_position) >= 37


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5, float("nan")])
def test_bad_sample_rate_raises(bad):
    with pytest.raises(ValueError, match="sample_rate"):
        dpsgd.default_capacity(100, bad)
    with pytest.raises(ValueError, match="sample_rate"):
        dpsgd.poisson_sample_indices(jax.random.key(0), 100, bad)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-3, ValueError), (2.5, TypeError),
                                        (True, TypeError)])
def test_bad_num_records_raises(bad, error):
    # One convention for every argument check in the library: TypeError for a wrong type,
    # ValueError for a value out of range, both naming the argument.
    with pytest.raises(error, match="num_records"):
        dpsgd.default_capacity(bad, 0.1)


# --------------------------------------------------------------------------------------------
# The gaps: every value reachable, no overflow, large datasets
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _gap_fn(m: int, q: float):
    from dpgen_jax.dpsgd import _sampling

    rate = -math.log1p(-q)

    def gaps(hi, lo, extra):
        with jax.enable_x64(True):
            return _sampling.gaps_from_words(hi, lo, extra, rate, m)

    return jax.jit(gaps)


def _gap_of(m, q, k: np.ndarray, w) -> np.ndarray:
    """The gap the sampler draws from the 96 random bits ``(k, w)`` (uint64, uint32 arrays)."""
    hi = (k >> np.uint64(32)).astype(np.uint32)
    lo = (k & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    w = np.broadcast_to(np.asarray(w, np.uint32), hi.shape)
    return np.asarray(_gap_fn(m, q)(hi, lo, w)).astype(np.int64)


def _bisect(lo, hi, above):
    """Smallest x in (lo, hi] with not above(x), given above(lo) and not above(hi) (uint64)."""
    for _ in range(64):
        mid = lo + (hi - lo) // np.uint64(2)
        up = above(mid)
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return hi


@pytest.mark.parametrize("q", [1e-3, 0.05])
def test_every_gap_up_to_forty_over_q_is_reachable(q):
    # The inversion is monotone (non-increasing) in the 96-bit word (K, w), so the gap value k is
    # reachable iff the smallest (K, w) whose gap is <= k has gap exactly k. Find it for every k
    # up to 40/q by vectorised bisection: first over K (with w at its largest), then over w.
    m = 2**31 - 1
    top = int(math.ceil(40 / q))
    targets = np.arange(1, top + 1, dtype=np.int64)
    n, w_max, k_max = targets.size, np.uint64(2**32 - 1), np.uint64(2**64 - 1)
    assert _gap_of(m, q, np.array([0], np.uint64), w_max)[0] > top  # above every target at 0
    assert np.all(_gap_of(m, q, np.full(n, k_max), w_max) == 1)
    k = _bisect(np.zeros(n, np.uint64), np.full(n, k_max),
                lambda x: _gap_of(m, q, x, w_max) > targets)
    at_zero = _gap_of(m, q, k, 0) <= targets
    w = _bisect(np.zeros(n, np.uint64), np.full(n, w_max),
                lambda x: _gap_of(m, q, k, x.astype(np.uint32)) > targets)
    w = np.where(at_zero, np.uint64(0), w).astype(np.uint32)
    gaps = _gap_of(m, q, k, w)
    missing = targets[gaps != targets]
    assert missing.size == 0, f"{missing.size} unreachable gap values, first {missing[:5]}"


def test_gap_is_capped_at_m_plus_one_only():
    m, q = 1000, 1e-6
    g = _gap_of(m, q, np.array([0, 1, 2**40, 2**63, 2**64 - 1], np.uint64), 0)
    assert g[0] == m + 1 and g[-1] == 1 and np.all(np.diff(g) <= 0)
    assert _gap_of(1000, 0.5, np.array([0], np.uint64), 0)[0] > 66 / -math.log1p(-0.5) - 2


@functools.partial(jax.jit, static_argnums=(2, 3, 4), compiler_options=FAST_COMPILE)
def _chunk_structure(keys, position, m, q, capacity):
    c = jax.vmap(lambda k: dpsgd.poisson_chunk(k, position, m, q, capacity))(keys)
    return c.indices, c.mask, c.next_position


def test_no_overflow_near_the_largest_dataset():
    # m = 2^31 - 1 with gaps near 1e9: the cumulative positions pass 2^31 within a chunk.
    m, q, cap = 2**31 - 1, 1e-9, 16
    idx, mask, nxt = map(np.asarray, _chunk_structure(_keys(60), jnp.int32(0), m, q, cap))
    assert np.all((idx >= 0) & (idx < m))
    both = mask[:, 1:] & mask[:, :-1]
    assert np.all(np.diff(idx.astype(np.int64), axis=1)[both] > 0)
    assert np.all(nxt == m)  # the scan ended (saturated at m, never wrapped)
    sizes = mask.sum(1)
    # Binomial(2^31 - 1, 1e-9) is Poisson(2.147) to within 1e-9: chi-square on bins 0..6, 7+.
    lam = q * m
    probs = np.append(stats.poisson.pmf(np.arange(7), lam), stats.poisson.sf(6, lam))
    observed = np.append(np.bincount(np.minimum(sizes, 7), minlength=8)[:7], np.sum(sizes >= 7))
    assert stats.chisquare(observed, probs * sizes.size).pvalue > P_ACCEPT
    assert abs(sizes.mean() - lam) < 5 * math.sqrt(lam / N_DRAWS)
    # From a start position near the end: only [position, m) is scanned.
    idx, mask, nxt = map(np.asarray, _chunk_structure(_keys(61), jnp.int32(m - 5), m, 0.5, cap))
    assert np.all(idx[mask] >= m - 5) and np.all(nxt == m)


@functools.partial(jax.jit, static_argnums=(1, 2, 3), compiler_options=FAST_COMPILE)
def _sizes_and_counts(keys, m, q, capacity):
    c = jax.vmap(lambda k: dpsgd.poisson_chunk(k, jnp.int32(0), m, q, capacity))(keys)
    counts = jnp.zeros((m,), jnp.int32).at[c.indices.ravel()].add(c.mask.ravel().astype(jnp.int32))
    pairs = jnp.sum(c.mask[:, 1:] & c.mask[:, :-1] & (jnp.diff(c.indices, axis=1) == 1))
    return jnp.sum(c.mask, axis=1), counts, pairs, jnp.all(c.next_position >= m)


def test_million_records_binomial_size_and_uniform_inclusion():
    m, q, n = 1_000_000, 2e-3, 5000
    sizes, counts, adjacent, done = _sizes_and_counts(_keys(62)[:n], m, q, dpsgd.default_capacity(m, q))
    sizes, counts = np.asarray(sizes), np.asarray(counts)
    assert bool(done)
    assert _binomial_chi2(sizes, m, q) > P_ACCEPT
    assert _binomial_chi2(sizes, m, q * 1.04) < P_REJECT
    assert _inclusion_chi2(counts, n, q) > P_ACCEPT
    assert abs(counts[0] / n - q) < 5 * math.sqrt(q / n) and abs(counts[-1] / n - q) < 5 * math.sqrt(q / n)
    # Adjacent records are both selected with probability q^2.
    expected = n * (m - 1) * q * q
    assert abs(int(adjacent) - expected) < 5 * math.sqrt(expected)


# --------------------------------------------------------------------------------------------
# Traced dataset size and rate (one compiled chunk, vmapped over groups)
# --------------------------------------------------------------------------------------------


def test_traced_size_and_rate_under_vmap_equal_per_group_calls():
    groups = [(37, 0.3), (1000, 0.02), (5, 1.0), (20_000, 1e-3)]
    ms = jnp.asarray([g[0] for g in groups], jnp.int32)
    qs = jnp.asarray([g[1] for g in groups], jnp.float32)
    keys = jax.random.split(jax.random.key(70), len(groups))
    pos = jnp.asarray([0, 100, 2, 0], jnp.int32)
    cap = 48
    traced = jax.jit(jax.vmap(lambda k, p, m, q: dpsgd.poisson_chunk(k, p, m, q, cap)))(keys, pos, ms, qs)
    for i, (m, q) in enumerate(groups):
        # Per-group static call with the same (float32-rounded) rate.
        ref = dpsgd.poisson_chunk(keys[i], pos[i], m, float(np.float32(q)), cap)
        for got, want in zip(traced, ref):
            np.testing.assert_array_equal(np.asarray(got)[i], np.asarray(want))
    # A traced call also runs under jit without vmap, with the rate as an array.
    one = jax.jit(lambda k: dpsgd.poisson_chunk(k, jnp.int32(0), jnp.int32(1000), jnp.float32(0.02), cap))
    single = dpsgd.poisson_chunk(keys[1], jnp.int32(0), 1000, float(np.float32(0.02)), cap)
    np.testing.assert_array_equal(np.asarray(one(keys[1]).indices), np.asarray(single.indices))


@pytest.mark.parametrize("bad", [0, -4, 2.5, True])
def test_bad_capacity_raises(bad):
    with pytest.raises(ValueError, match="capacity"):
        dpsgd.poisson_chunk(jax.random.key(0), jnp.int32(0), 100, 0.1, bad)
