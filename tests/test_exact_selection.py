"""The exact exponential mechanism (dpgen_jax.dpsgd._selection; issue 63, item 3).

Frequencies are checked against the exact laws with fixed seeds (deterministic) and tolerances of
5 binomial standard deviations. The support test drives the shipped sampler with a numpy Generator
on an MT19937 bit generator set to a chosen state (its next 624 32-bit outputs are then the chosen
words), so a path that Gumbel-max in float64 can never take is followed draw by draw.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpgen_jax.dpsgd import _selection as sel
from dpgen_jax.dpsgd._selection import (
    bernoulli_exp,
    bernoulli_rational,
    exponential_mechanism_exact,
    randbelow,
)

# float64 Gumbel draws of numpy (-log(-log U), U = 1 - k 2^-53) lie in [G_MIN, G_MAX]
G_MIN = -math.log(53 * math.log(2.0))
G_MAX = -math.log(-math.log1p(-(2.0**-53)))


def _within(count: int, n: int, p: float, sds: float = 5.0) -> bool:
    return abs(count - n * p) <= sds * math.sqrt(n * p * (1 - p)) + 1e-9


def _softmax(q, epsilon, sensitivity):
    q = np.asarray(q, np.float64)
    w = np.where(q > -np.inf, np.exp(epsilon * (q - q.max()) / (2 * sensitivity)), 0.0)
    return w / w.sum()


def _gammas_of(gamma: float) -> tuple[sel._Gammas, np.ndarray]:
    """Scores [0, -2 gamma], epsilon 1, sensitivity 1: gamma of candidate 1 is exactly gamma."""
    gam = sel._Gammas(np.array([0.0, -2.0 * gamma]), 1.0, 1.0)
    assert gam.exact(1) == Fraction(gamma)
    return gam, np.array([1])


# ----------------------------------------------------------------------------- (1) Bernoulli(exp(-gamma))


@pytest.mark.parametrize("gamma", [0.0, 0.3, 1.0, 2.5, Fraction(7, 3)])
def test_bernoulli_exp_scalar_frequencies(gamma):
    rng = np.random.default_rng(11)
    n = 20_000
    hits = sum(bernoulli_exp(gamma, rng) for _ in range(n))
    p = math.exp(-float(gamma))
    if gamma == 0:
        assert hits == n
    assert _within(hits, n, p), (gamma, hits / n, p)


@pytest.mark.parametrize("gamma", [0.0, 0.3, 1.0, 2.5, 7.75])
def test_bernoulli_exp_vectorised_frequencies(gamma):
    gam, one = _gammas_of(gamma)
    rng = np.random.default_rng(12)
    n = 400_000
    hits = int(sel._accept(rng, gam, np.repeat(one, n)).sum())
    p = math.exp(-gamma)
    if gamma == 0:
        assert hits == n
    assert _within(hits, n, p), (gamma, hits / n, p)


def test_bernoulli_exp_vectorised_deep_chain():
    """gamma = 10: ten Bernoulli(exp(-1)) successes in a row, then Bernoulli(exp(-0.5))."""
    gam, one = _gammas_of(10.5)
    rng = np.random.default_rng(13)
    n = 3_000_000
    hits = int(sel._accept(rng, gam, np.repeat(one, n)).sum())
    lam = n * math.exp(-10.5)                       # ~82.5 expected
    assert abs(hits - lam) <= 5 * math.sqrt(lam), (hits, lam)


def test_bernoulli_exp1_frequency():
    rng = np.random.default_rng(14)
    n = 500_000
    assert _within(int(sel._bernoulli_exp1(rng, n).sum()), n, math.exp(-1))


def test_exact_only_path_has_the_same_law():
    """With the float enclosure removed every comparison is decided by exact Fractions."""
    gam, one = _gammas_of(1.7)
    gam.lo[:] = -np.inf
    gam.hi[:] = np.inf
    rng = np.random.default_rng(15)
    n = 30_000
    assert _within(int(sel._accept(rng, gam, np.repeat(one, n)).sum()), n, math.exp(-1.7))


def test_randbelow_uniform_and_bounded():
    rng = np.random.default_rng(16)
    for d in (1, 7, 2**62, 2**62 + 1, 3 * 2**70 + 5):
        draws = [randbelow(rng, d) for _ in range(6000)]
        assert all(0 <= x < d for x in draws) and all(type(x) is int for x in draws)
        if d > 1:                      # 7 cells of equal size (up to one value)
            cells = np.bincount([x * 7 // d for x in draws], minlength=7)
            assert stats.chisquare(cells).pvalue > 1e-4, (d, cells)
    assert randbelow(rng, 1) == 0
    with pytest.raises(ValueError, match="d"):
        randbelow(rng, 0)
    n = 20_000
    assert _within(sum(bernoulli_rational(rng, 1, 3) for _ in range(n)), n, 1 / 3)
    assert not any(bernoulli_rational(rng, 0, 2**80 + 1) for _ in range(100))


def test_float_enclosure_contains_the_exact_gamma():
    rng = np.random.default_rng(17)
    for _ in range(40):
        mag = 10.0 ** rng.uniform(-300, 300, size=50)
        q = np.concatenate([rng.choice([-1.0, 1.0], 50) * mag, [5e-324, -5e-324, 0.0, 1e308, -1e308]])
        eps = 10.0 ** rng.uniform(-5, 3)
        sens = 10.0 ** rng.uniform(-5, 5)
        gam = sel._Gammas(q, eps, sens)
        for j in range(q.size):
            if np.isfinite(gam.lo[j]):     # else every comparison of j is decided exactly
                assert np.isfinite(gam.hi[j])
                assert Fraction(gam.lo[j]) <= gam.exact(j) <= Fraction(gam.hi[j]), (q[j], eps, sens)
    near = sel._Gammas(np.array([0.0, -1.0, -3.0]), 2.0, 1.0)   # integer gammas: enclosures straddle
    assert near.lo[1] < 1.0 < near.hi[1]


# ----------------------------------------------------------------------------- (2) the selection law


@pytest.mark.parametrize("quality, epsilon, sensitivity, seed", [
    ([0.0, -0.5, -1.0, -2.0, -3.3, -np.inf, -6.0, 1.2], 1.3, 1.0, 21),
    ([0.0, -1.0, -2.0, -3.0, 2.0], 2.0, 1.0, 22),           # integer gammas: the exact path
    (list(np.linspace(-40.0, 3.0, 60)), 0.5, 0.25, 23),
])
def test_selection_frequencies_match_softmax(quality, epsilon, sensitivity, seed):
    rng = np.random.default_rng(seed)
    n = 8_000
    draws = np.array([exponential_mechanism_exact(quality, epsilon, sensitivity, rng) for _ in range(n)])
    p = _softmax(quality, epsilon, sensitivity)
    counts = np.bincount(draws, minlength=len(quality))
    assert counts[p == 0].sum() == 0
    for c, pi in zip(counts, p):
        if pi > 0:
            assert _within(int(c), n, float(pi)), (counts, n * p)
    big = p * n >= 5
    observed = np.append(counts[big], counts[~big].sum())
    expected = np.append(p[big], p[~big].sum()) * n
    keep = expected > 0
    assert stats.chisquare(observed[keep], expected[keep]).pvalue > 1e-4


def test_selection_many_candidates_wide_spread():
    r = np.random.default_rng(24)
    q = -r.gamma(0.7, 30.0, size=3000)
    q[:5] = [0.0, -0.2, -0.7, -1.5, -2.5]
    rng = np.random.default_rng(25)
    n = 2000
    draws = np.array([exponential_mechanism_exact(q, 1.0, 1.0, rng) for _ in range(n)])
    p = _softmax(q, 1.0, 1.0)
    for i in range(5):
        assert _within(int((draws == i).sum()), n, float(p[i]))
    assert _within(int((draws >= 5).sum()), n, float(p[5:].sum()))


# ----------------------------------------------------------------------------- (3) the distinguisher


def _untemper(y: int) -> int:
    y ^= y >> 18
    y ^= (y << 15) & 0xEFC60000
    r = y
    for _ in range(5):
        r = y ^ ((r << 7) & 0x9D2C5680)
    y = r & 0xFFFFFFFF
    r = y
    for _ in range(3):
        r = y ^ (r >> 11)
    return r & 0xFFFFFFFF


def _scripted(words: list[int]) -> tuple[np.random.Generator, np.random.MT19937]:
    """A Generator whose next 32-bit outputs are ``words`` (MT19937 at position 0 of its key)."""
    assert len(words) <= 624
    bg = np.random.MT19937(0)
    key = np.array([_untemper(w) for w in words] + [0] * (624 - len(words)), dtype=np.uint32)
    bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": 0}}
    return np.random.Generator(bg), bg


# integers(0, K) on one 32-bit word w (numpy's Lemire draw): w = 1 gives 0, w = 2^32 - 1 gives K - 1
ZERO, TOP = 1, 0xFFFFFFFF


def _worst_first_path(successes: int, accept: bool = True) -> list[int]:
    """The draws of quality [worst, best] (gamma of the worst = whole + 1/2), 8 proposals
    [0, 1, 1, ...]: ``successes`` Bernoulli(exp(-1)) successes of the one proposal of the worst
    candidate (each Bernoulli(1/2) = 1, then Bernoulli(1/3) = 0: K = 3, odd), then (``accept``) the
    8 stage-2 draws u of 52 bits (two words each), the worst's U >= 1/2 and the others' U > 0, so
    K = 1 (odd) for all and the worst, first, is returned; or (not ``accept``) a failed trial
    (Bernoulli(1/2) = 0: K = 2) and the 7 stage-2 draws of the best candidate's proposals."""
    words = [ZERO] + [TOP] * 7 + [ZERO, TOP] * successes
    if accept:
        return words + [TOP, TOP] + [ZERO, ZERO] * 7
    return words + [TOP] + [ZERO, ZERO] * 7


@pytest.mark.parametrize("gap", [40.5, 39.5, 200.5])
def test_worst_candidate_reachable_beyond_the_gumbel_range(gap):
    """Neighbouring vectors q = [-81, 0] and q' = [-80, -1] (sensitivity 1, epsilon 1) scale to
    gaps 40.5 and 39.5, on either side of float64 Gumbel-max's reach G_MAX - G_MIN = 40.34: there
    the worst candidate has probability 0 under q and a positive one under q'. The exact sampler
    returns it under both (and at gap 200.5), along the path of the draws that the law
    exp(-gamma) requires; a stream with one Bernoulli(exp(-1)) success fewer rejects it."""
    assert 39.5 < G_MAX - G_MIN < 40.5
    whole = int(gap)
    quality = np.array([-2.0 * gap, 0.0])
    assert sel._Gammas(quality, 1.0, 1.0).batch_size() == 8          # the path assumes 8 proposals
    words = _worst_first_path(whole)
    rng, bg = _scripted(words)
    assert exponential_mechanism_exact(quality, 1.0, 1.0, rng) == 0
    assert bg.state["state"]["pos"] == len(words)                    # every draw as scripted
    words = _worst_first_path(whole - 1, accept=False)               # the last e^-1 trial fails
    rng, bg = _scripted(words)
    assert exponential_mechanism_exact(quality, 1.0, 1.0, rng) == 1
    assert bg.state["state"]["pos"] == len(words)


def test_neighbouring_ratio_within_e_epsilon():
    """q: one best candidate and N copies at scaled gap 8; q': every score moved by the sensitivity
    towards the copies (gap 7). Both laws match the softmax and the ratio of each outcome's
    frequency stays below e^epsilon (within binomial tolerance)."""
    eps, sens, n_copies = 1.0, 1.0, 1490
    q = np.array([0.0] + [-16.0] * n_copies)
    q_nb = np.array([-1.0] + [-15.0] * n_copies)
    assert np.abs(q - q_nb).max() <= sens
    n = 2000
    freq = []
    for seed, quality in ((31, q), (32, q_nb)):
        rng = np.random.default_rng(seed)
        hits = sum(exponential_mechanism_exact(quality, eps, sens, rng) > 0 for _ in range(n))
        p = float(_softmax(quality, eps, sens)[1:].sum())
        assert _within(hits, n, p), (hits / n, p)
        freq.append(hits / n)
    tol = 5 * math.sqrt(0.25 / n)
    for a, b in ((freq[0], freq[1]), (1 - freq[0], 1 - freq[1])):
        assert a <= math.e**eps * (b + tol) and b <= math.e**eps * (a + tol)


# ----------------------------------------------------------------------------- (4) -inf and errors


def test_minus_inf_candidates_are_never_drawn():
    rng = np.random.default_rng(41)
    q = np.array([-np.inf, 0.0, -np.inf, -0.3, -np.inf])
    draws = {exponential_mechanism_exact(q, 1.0, 1.0, rng) for _ in range(2000)}
    assert draws == {1, 3}
    only = np.array([-np.inf, -np.inf, 5.0])
    assert {exponential_mechanism_exact(only, 1.0, 1.0, rng) for _ in range(50)} == {2}


def test_select_many_pattern_removes_chosen():
    rng = np.random.default_rng(42)
    q = np.array([0.0, -1.0, -2.0, -0.5])
    chosen = []
    for _ in range(4):
        i = exponential_mechanism_exact(q, 1.0, 1.0, rng)
        chosen.append(i)
        q[i] = -np.inf
    assert sorted(chosen) == [0, 1, 2, 3]


@pytest.mark.parametrize("kwargs, name", [
    (dict(epsilon=float("inf")), "epsilon"), (dict(epsilon=float("nan")), "epsilon"),
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"),
    (dict(sensitivity=float("inf")), "sensitivity"), (dict(sensitivity=0.0), "sensitivity"),
    (dict(sensitivity=float("nan")), "sensitivity"),
])
def test_bad_epsilon_or_sensitivity(kwargs, name):
    args = dict(quality=[0.0, -1.0], epsilon=1.0, sensitivity=1.0, rng=np.random.default_rng(0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        exponential_mechanism_exact(**args)
    with pytest.raises(TypeError, match="epsilon"):
        exponential_mechanism_exact([0.0], None, 1.0, np.random.default_rng(0))


@pytest.mark.parametrize("quality", [[], [-np.inf, -np.inf], [0.0, np.nan], [np.inf, 0.0], [[0.0, 1.0]]])
def test_bad_quality(quality):
    with pytest.raises(ValueError, match="quality"):
        exponential_mechanism_exact(quality, 1.0, 1.0, np.random.default_rng(0))


def test_bad_gamma():
    with pytest.raises(ValueError, match="gamma"):
        bernoulli_exp(-0.5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="gamma"):
        bernoulli_exp(float("inf"), np.random.default_rng(0))
