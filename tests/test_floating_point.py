"""Floating-point tests of every noisy-count path: a cell with count 0 against the same cell with
count 1, many cells per call, through the functions as shipped.

The attack (Mironov 2012, "On significance of the least significant bits for differential
privacy"): a count released as ``float32(count + float32 noise)``. For a true count of 1, every
output with |o| < 1/2 is ``1 + y`` rounded to float32, a multiple of 2^-24; for a true count of 0
it is ``y`` itself, whose low bits are finer. So "|o - 0| < 1/2 and o is not a multiple of 2^-24"
(:func:`mironov`) fires only on count-0 cells: an output with probability 0 under one neighbour
and a positive one under the other, whatever epsilon the report prints.

Every path releases ``count + N`` with ``N = round(std * Z)`` an integer drawn before it meets the
count (``dpsgd.noisy_counts``). Per path and noise std, 2^20 cells of count 0 and 2^20 of count 1
(one call each, independent keys): 2^21 cells per side per path in all, and:

(a) every output is an exact integer, so the distinguisher fires 0 times on both sides: |o| < 1/2
    leaves only o = 0, a multiple of 2^-24;
(b) the law of ``o - count`` is the same on both sides (two-sample chi-square, p > 1e-4) and is the
    rounded Gaussian P(k) = Phi((k + 1/2) / std) - Phi((k - 1/2) / std) (``rounded_gaussian_pvalue``
    of tests/_oracles.py, p > 1e-4); the raw outputs do differ (the same statistic rejects o_0 against
    o_1), so the comparison has the power to see a shift of one count.

DP-SACTGAN clips its counts at 0 (post-processing): see :func:`test_dp_sactgan_clipped_counts`.
:func:`test_the_float32_pattern_is_caught` runs the distinguisher on the float32 pattern written out
here, and :func:`test_the_path_checks_catch_the_float32_pattern` puts that pattern in place of
``dpsgd.noisy_counts`` under the paths: the distinguisher fires, so these tests can fail.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest
from scipy import stats

from dpgen_jax import data, dpsgd
from dpgen_jax.synthesizers import _one_way, dp_sactgan, dp_syn, independent
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers.dp_sactgan import _conditional
from tests._oracles import rounded_gaussian_pvalue

CELLS = 1 << 20          # released cells per side, per path and std (one call)
STDS = (2.0, 20.0)       # noise standard deviations of the count-0 against count-1 tests
LEVEL = 1e-4             # a law test fails below this p-value
GRID = 2.0**-24          # the float32 spacing just below 1: where 1 + y lands for |1 + y| < 1


# ----------------------------------------------------------------------------- the distinguisher


def mironov(o, base: float = 0.0) -> int:
    """How often Mironov's test fires on released values ``o`` of a cell whose count-0 neighbour
    has count ``base``: ``|o - base| < 1/2`` and ``o`` not a multiple of 2^-24. Evaluated in
    float64, exact for float32 outputs and for integers below 2^53 (scaling by 2^24 is exact)."""
    o = np.asarray(o, np.float64)
    scaled = o / GRID
    return int(np.count_nonzero((np.abs(o - base) < 0.5) & (scaled != np.floor(scaled))))


def assert_exact_integers(o, what: str) -> np.ndarray:
    """``o`` as int64, after checking that every value is an exact integer (an integer dtype, or
    finite floats equal to their rounding)."""
    a = np.asarray(o)
    if a.dtype.kind not in "iu":
        assert a.dtype.kind == "f", (what, a.dtype)
        bad = ~np.isfinite(a) | (a != np.rint(a))
        assert not bad.any(), f"{what}: {int(bad.sum())} non-integer outputs, e.g. {a[bad][:3]}"
    return a.astype(np.int64)


def two_sample_pvalue(a, b, min_count: int = 40) -> float:
    """Chi-square test that integer samples ``a`` and ``b`` have one law: the 2 x K table of their
    histograms, adjacent values merged (left to right) until a column holds ``min_count`` draws."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
    ha = np.bincount(a - lo, minlength=hi - lo + 1)
    hb = np.bincount(b - lo, minlength=hi - lo + 1)
    cols, acc = [], np.zeros(2, np.int64)
    for x, y in zip(ha, hb):
        acc += (x, y)
        if acc.sum() >= min_count:
            cols.append(acc.copy())
            acc[:] = 0
    cols[-1] += acc
    return float(stats.chi2_contingency(np.array(cols).T, correction=False).pvalue)


def clipped_gaussian_pvalue(t, std: float) -> float:
    """Chi-square p-value of draws ``t`` against the law of ``max(round(std Z), 0)``: P(0) =
    Phi(1/2 / std), P(k) = Phi((k + 1/2) / std) - Phi((k - 1/2) / std) for k >= 1 (values with
    fewer than 20 expected draws merged into the right tail)."""
    t = np.asarray(t, np.int64)
    assert t.min() >= 0
    ks = np.arange(0, int(np.ceil(10 * std)) + 3)
    pmf = stats.norm.cdf((ks + 0.5) / std) - stats.norm.cdf((ks - 0.5) / std)
    pmf[0] = stats.norm.cdf(0.5 / std)
    top = int(ks[pmf * t.size >= 20][-1])
    observed = np.bincount(np.minimum(t, top), minlength=top + 1)
    expected = np.append(pmf[:top], stats.norm.sf((top - 0.5) / std)) * t.size
    return float(stats.chisquare(observed, expected).pvalue)


# ----------------------------------------------------------------------------- the paths, as shipped
# Each takes the true count c (0 or 1) of all ``cells`` cells, the noise std and a key, calls the
# library's function once, and returns the released values in one flat array (as released).


def one_way(c: int, std: float, key, cells: int = CELLS):
    """``_one_way.release_histograms`` (the matching stage of every neural generator; ``independent``'s
    release is the same function): d = 4 histograms of cells / 4 codes at noise std ``std``."""
    k = cells // 4
    codes = np.tile(np.arange(k, dtype=np.int64)[:, None], (c, 4))   # c rows in every cell
    out = _one_way.release_histograms(codes, (k,) * 4, std, key)
    assert sorted(out) == ["0", "1", "2", "3"]
    return np.concatenate([out[str(j)] for j in range(4)])


def measure(c: int, std: float, key, cells: int = CELLS):
    """``_select_measure.measure`` (MST, AIM and GEM's marginal measurements): two 2-way cliques
    (0, 1) and (0, 2) over sizes (2, k, k), k = cells / 4; the rows (x, y, y) for x < 2, y < k,
    repeated c times, put c records in every cell of both marginals."""
    k = cells // 4
    x, y = np.divmod(np.arange(2 * k, dtype=np.int64), k)
    codes = np.tile(np.stack([x, y, y], axis=1), (c, 1))
    out = sm.measure(codes, (2, k, k), [(0, 1), (0, 2)], std, key)
    assert [a.size for a in out] == [2 * k, 2 * k]
    return np.concatenate(out)


def dp_syn_counts(c: int, std: float, key, cells: int = CELLS):
    """``dp_syn.release_counts`` (DP-SYN's label-group sizes, Python ints): ``cells`` groups."""
    out = dp_syn.release_counts(np.full(cells, c, np.int64), key, std)
    assert isinstance(out, tuple) and len(out) == cells
    assert all(type(v) is int for v in out)
    return np.array(out, np.int64)


@functools.cache
def _sactgan_layout(categories: int):
    schema = data.Schema.from_dict({"columns": [
        {"name": f"c{j}", "kind": "categorical", "categories": [f"v{i}" for i in range(categories)]}
        for j in range(4)]})
    config = dp_sactgan.DPSACTGANConfig(modes="public", cond="noisy").validate()
    layout = dp_sactgan.build_layout(schema, config)
    assert dp_sactgan.histogram_columns(layout, config) == (0, 1, 2, 3)
    return layout


def sactgan(c: int, std: float, key, cells: int = CELLS):
    """``dp_sactgan.release_conditional_counts`` (DP-SACTGAN's conditional frequencies): 4 categorical
    columns of cells / 4 categories, one histogram each, noise std per bin, clipped at 0, float32."""
    k = cells // 4
    layout = _sactgan_layout(k)
    codes = np.tile(np.arange(k, dtype=np.int64)[:, None], (c, 4))
    out = np.asarray(dp_sactgan.release_conditional_counts(codes, layout, key, std, (0, 1, 2, 3)))
    assert out.shape == (4, k) and out.dtype == np.float32
    return out.reshape(-1)


UNCLIPPED = {"one_way": one_way, "measure": measure, "dp_syn": dp_syn_counts}
ALL = {**UNCLIPPED, "dp_sactgan": sactgan}


def _keys(name: str, std: float):
    seed = sorted(ALL).index(name) * 100 + int(std)
    return jax.random.split(jax.random.key(seed))


def _release_both(name: str, std: float):
    """(o_0, o_1): the released values of CELLS count-0 and CELLS count-1 cells, independent keys,
    each checked to be exact integers (returned as int64)."""
    k0, k1 = _keys(name, std)
    out = []
    for c, k in ((0, k0), (1, k1)):
        o = ALL[name](c, std, k)
        assert o.size == CELLS
        assert mironov(o) == 0, f"{name}, std {std}, count {c}: the distinguisher fired"
        out.append(assert_exact_integers(o, f"{name}, std {std}, count {c}"))
    return out


# ----------------------------------------------------------------------------- the tests


def test_every_path_releases_through_dpsgd_noisy_counts(monkeypatch):
    """Each path calls ``dpsgd.noisy_counts`` once and releases what it returns (DP-SACTGAN: clipped
    at 0, as float32); ``independent`` uses the one-way stage's function itself."""
    assert independent.release_histograms is _one_way.release_histograms
    assert dp_sactgan.release_conditional_counts is _conditional.release_conditional_counts
    real, calls = dpsgd.noisy_counts, []

    def spy(tables, std, key):
        out = real(tables, std, key)
        calls.append(out)
        return out

    monkeypatch.setattr(dpsgd, "noisy_counts", spy)
    key = jax.random.key(7)
    for name, path in ALL.items():
        calls.clear()
        got = path(1, 3.0, key, cells=4096)
        assert len(calls) == 1, name
        want = np.concatenate([calls[0][t].reshape(-1) for t in sorted(calls[0])])
        if name == "dp_sactgan":
            want = np.maximum(want, 0).astype(np.float32)
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("name", sorted(ALL))
def test_noise_is_one_draw_whatever_the_count(name):
    """Under one key, the count-1 release is the count-0 release shifted by one (after the same
    clipping at 0 for DP-SACTGAN): the integer noise is drawn from the key alone, before it meets
    the count, so neighbouring counts give shifted copies of one law."""
    key = jax.random.key(11)
    o0 = assert_exact_integers(ALL[name](0, 2.0, key, cells=8192), name)
    o1 = assert_exact_integers(ALL[name](1, 2.0, key, cells=8192), name)
    if name == "dp_sactgan":
        np.testing.assert_array_equal(np.maximum(o1 - 1, 0), o0)
    else:
        np.testing.assert_array_equal(o1 - 1, o0)
    assert np.any(o0 != 0)                                        # noise was added


@pytest.mark.parametrize("std", STDS)
@pytest.mark.parametrize("name", sorted(UNCLIPPED))
def test_count_zero_against_one(name, std):
    """(a) integers, the distinguisher fires 0 times on 2^20 cells of each side; (b) ``o - count``
    has one law on both sides, the rounded Gaussian of the std."""
    o0, o1 = _release_both(name, std)
    n0, n1 = o0, o1 - 1
    p_same = two_sample_pvalue(n0, n1)
    p_ref = [rounded_gaussian_pvalue(n, std) for n in (n0, n1)]
    assert p_same > LEVEL, (name, std, p_same)
    assert min(p_ref) > LEVEL, (name, std, p_ref)
    assert two_sample_pvalue(o0, o1) < 1e-10                      # a shift of one count is seen


@pytest.mark.parametrize("std", STDS)
def test_dp_sactgan_clipped_counts(std):
    """DP-SACTGAN releases ``o_c = max(c + N, 0)`` as float32. Clipping is a function of
    ``c + N`` alone (post-processing), and ``c + N`` has support every integer within
    ``c +- round(9.16 std)`` for both counts, so both outputs take every value 0, 1, 2, ...
    (up to the sampler's far tail) and no output is possible under one count and impossible under
    the other; the count-0 side never goes below 0 because of the clip, not because of the count.
    Subtracting the count and applying the same clip to both sides, ``max(o_c - c, 0) = max(N, 0)``
    (for c = 1: max(max(1 + N, 0) - 1, 0) = max(N, -1, 0)): the same law on both sides, the rounded
    Gaussian with its mass below 1/2 at 0."""
    o0, o1 = _release_both("dp_sactgan", std)
    assert o0.min() == 0 and o1.min() == 0                         # the clip binds on both sides
    central = int(3 * std)                                         # both supports cover 0..3 std
    for o in (o0, o1):
        assert np.isin(np.arange(central + 1), o).all()
    t0, t1 = np.maximum(o0, 0), np.maximum(o1 - 1, 0)
    p_same = two_sample_pvalue(t0, t1)
    p_ref = [clipped_gaussian_pvalue(t, std) for t in (t0, t1)]
    assert p_same > LEVEL, (std, p_same)
    assert min(p_ref) > LEVEL, (std, p_ref)
    assert two_sample_pvalue(o0, o1) < 1e-10


def test_the_float32_pattern_is_caught():
    """The counterexample: ``float32(count) + float32(std * Z)`` rounded in float32. The
    distinguisher fires on count-0 cells only (about 13% of them at std 2, 1.2% at std 20), and
    the integer check rejects the outputs; the same statistics of the shipped paths are 0 above."""
    rng = np.random.default_rng(63)
    n = 100_000
    for std, least in ((2.0, 10_000), (20.0, 800)):
        y0 = np.float32(std) * rng.standard_normal(n, dtype=np.float32)
        y1 = np.float32(std) * rng.standard_normal(n, dtype=np.float32)
        o0 = np.float32(0.0) + y0                                 # float32 arithmetic throughout
        o1 = np.float32(1.0) + y1
        assert o0.dtype == o1.dtype == np.float32
        assert mironov(o0) >= least, (std, mironov(o0))
        assert mironov(o1) == 0                                   # 1 + y: multiples of 2^-24 near 0
        with pytest.raises(AssertionError, match="non-integer"):
            assert_exact_integers(o0, "float32 pattern")


def test_the_path_checks_catch_the_float32_pattern(monkeypatch):
    """The same pattern put in place of ``dpsgd.noisy_counts`` under the paths that keep the
    values as they come (one-way, measure, DP-SACTGAN): the distinguisher fires on their count-0
    cells and never on count-1 cells, and the integer check rejects them, so the path tests above
    fail on it. (DP-SYN's ``int()`` would truncate such values; the law test (b) sees that.)"""

    def float32_counts(tables, std, key):
        out = {}
        for i, name in enumerate(sorted(tables)):
            t = np.asarray(tables[name])
            y = np.float32(std) * np.asarray(jax.random.normal(jax.random.fold_in(key, i), t.shape))
            out[name] = t.astype(np.float32) + y.astype(np.float32)
        return out

    monkeypatch.setattr(dpsgd, "noisy_counts", float32_counts)
    for name in ("one_way", "measure", "dp_sactgan"):
        o0 = ALL[name](0, 2.0, jax.random.key(1), cells=1 << 16)
        o1 = ALL[name](1, 2.0, jax.random.key(2), cells=1 << 16)
        assert mironov(o0) > 3000 and mironov(o1) == 0, (name, mironov(o0), mironov(o1))
        with pytest.raises(AssertionError, match="non-integer"):
            assert_exact_integers(o0, name)


def test_the_law_tests_can_fail():
    """The law tests reject what they should: the rounded Gaussian of a std 5% off (against the
    reference, and two samples), and a law that moves the mass of one value to the next."""
    key = jax.random.key(5)
    n = dpsgd.integer_gaussian(key, CELLS, 2.0)
    assert rounded_gaussian_pvalue(n, 2.1) < 1e-10
    assert clipped_gaussian_pvalue(np.maximum(n, 0), 2.1) < 1e-10
    assert two_sample_pvalue(n, dpsgd.integer_gaussian(jax.random.key(6), CELLS, 2.1)) < 1e-10
    assert two_sample_pvalue(n, np.where(n == 3, 4, n)) < 1e-10
