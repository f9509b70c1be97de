"""dpsgd.snapped_gaussian: the vectorised snapping against exact arithmetic.

Oracles: ``fractions.Fraction`` (``floor((n / 2^f + w) / 2^g + 1/2)``) and the exact scalar path
in Python integers (``_exact._snap_one``, the former per-element loop), element by element on
more than 10^5 draws with ties, near-ties, large and small values and every fallback; mpmath for
the accuracy of ``scipy.special.ndtri`` that docs/privacy.md assumes.
"""

from __future__ import annotations

import math
from fractions import Fraction

import jax
import numpy as np
import pytest

from dpgen_jax import dpsgd
from dpgen_jax.dpsgd import _exact


def _fraction(n: int, f: int, g: int, w: float) -> float:
    q = math.floor((Fraction(int(n), 2**f) + Fraction(float(w))) / Fraction(2) ** g + Fraction(1, 2))
    return math.ldexp(q, g)


def _bits(a) -> np.ndarray:
    return np.asarray(a, np.float64).view(np.int64)   # bit patterns: -0.0 differs from 0.0


def _ties(rng, size, f, g):
    """(n, w) with n 2^-f + w exactly a half-way point (m + 1/2) 2^g, and their float neighbours."""
    n = rng.integers(-(2**40), 2**40, size)
    m = rng.integers(-(2**20), 2**20, size)
    w = np.array([float(Fraction(2 * int(mm) + 1, 2) * Fraction(2) ** g - Fraction(int(nn), 2**f))
                  for nn, mm in zip(n, m)])
    exact = np.array([Fraction(float(ww)) == Fraction(2 * int(mm) + 1, 2) * Fraction(2) ** g
                      - Fraction(int(nn), 2**f) for nn, mm, ww in zip(n, m, w)])
    n, w = n[exact], w[exact]
    return (np.concatenate([n, n, n]),
            np.concatenate([w, np.nextafter(w, np.inf), np.nextafter(w, -np.inf)]))


SETTINGS = [(36, -6), (36, -25), (36, 10), (24, -3), (12, 0), (0, 0), (0, 5), (5, -12), (40, 13)]


@pytest.mark.parametrize("f,g", SETTINGS)
def test_vectorised_snap_is_bit_equal_to_exact_arithmetic(f, g):
    rng = np.random.default_rng(f * 100 + g + 50)
    size = 12_000                                      # x 9 settings, plus ties: > 10^5 draws
    n = rng.integers(-(2**45), 2**45, size) >> rng.integers(0, 45, size)
    w = rng.standard_normal(size) * 10.0 ** rng.uniform(-4, 4, size)
    w[:50] = 0.0
    w[50:100] = -0.0
    w[100:150] = rng.standard_normal(50) * 1e-310       # subnormal noise
    n[150:200] = 0
    tn, tw = _ties(rng, 1500, min(f, 20), g)            # exact half-way points and their neighbours
    tn = tn << (f - min(f, 20))                         # the same values at f fraction bits
    n, w = np.concatenate([n, tn]), np.concatenate([w, tw])
    keep = np.abs(n / 2.0**f + w) / 2.0**g < 2.0**52    # representable on the grid
    n, w = n[keep], w[keep]
    got = _exact._snap(n, f, g, w)
    want = [_fraction(a, f, g, b) for a, b in zip(n.tolist(), w.tolist())]
    np.testing.assert_array_equal(_bits(got), _bits(want))
    scalar = [_exact._snap_one(a, f, g, b) for a, b in zip(n[:2000].tolist(), w[:2000].tolist())]
    np.testing.assert_array_equal(_bits(got[:2000]), _bits(scalar))
    assert (np.ldexp(got, -g) == np.round(np.ldexp(got, -g))).all()


def test_the_fallbacks_agree_with_exact_arithmetic():
    """Huge numerators (Python ints beyond int64, int64 near its ends), f + g > 53, noise that
    scales out of float64's normal range: the exact path, element by element, in one call."""
    rng = np.random.default_rng(0)
    cases = [
        (np.array([2**62, -(2**62), 2**63 - 1, -(2**63), 5, -7], np.int64), 30, 40, rng.standard_normal(6) * 1e12),
        (np.array([2**70 + 3, -(2**90), 1, 0], dtype=object), 40, 0, rng.standard_normal(4)),
        (rng.integers(-(2**60), 2**60, 500), 60, 5, rng.standard_normal(500) * 100),   # f + g = 65
        (np.zeros(200, np.int64), 0, -1040, rng.standard_normal(200) * 2.0**-1035),  # shift > 61
        (rng.integers(-(2**30), 2**30, 200), 10, 1000, rng.standard_normal(200) * 2.0**1010),
        (np.array([[3.0, -4.0], [0.0, 2.0**40]]), 2, -3, np.array([[0.25, -0.125], [1e-300, 3.5]])),
    ]
    for n, f, g, w in cases:
        got = _exact._snap(n, f, g, w)
        want = np.array([_fraction(a, f, g, b) for a, b in zip(np.asarray(n).reshape(-1).tolist(),
                                                                 w.reshape(-1).tolist())]).reshape(w.shape)
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_snapped_gaussian_equals_the_exact_path_on_its_own_draws():
    rng = np.random.default_rng(3)
    n = rng.integers(-(2**50), 2**50, (300, 7))
    key, std, f, g = jax.random.key(5), 3.7, 36, -5
    got = dpsgd.snapped_gaussian(n, f, std, g, key, offset=123)
    w = std * dpsgd.host_normal(key, n.shape, offset=123)
    want = np.array([_exact._snap_one(a, f, g, b) for a, b in zip(n.reshape(-1).tolist(),
                                                                  w.reshape(-1).tolist())])
    np.testing.assert_array_equal(_bits(got), _bits(want.reshape(n.shape)))
    assert got.shape == (300, 7)
    # Python ints and integral floats are the same numerators
    np.testing.assert_array_equal(dpsgd.snapped_gaussian(n.tolist(), f, std, g, key, offset=123), got)
    small = rng.integers(-1000, 1000, 50)
    np.testing.assert_array_equal(dpsgd.snapped_gaussian(small.astype(float), 4, 1.0, -2, key),
                                  dpsgd.snapped_gaussian(small, 4, 1.0, -2, key))


def test_bad_input_is_refused():
    key = jax.random.key(0)
    with pytest.raises(TypeError, match="numerators"):
        dpsgd.snapped_gaussian(np.array([1.5]), 4, 1.0, 0, key)
    with pytest.raises(TypeError, match="numerators"):
        dpsgd.snapped_gaussian(np.array(["a"]), 4, 1.0, 0, key)
    with pytest.raises(TypeError, match="numerators"):
        dpsgd.snapped_gaussian(np.array([1, 0.5], dtype=object), 4, 1.0, 0, key)
    with pytest.raises(ValueError, match="53 bits"):
        dpsgd.snapped_gaussian(np.array([2**60]), 0, 1.0, 0, key)
    with pytest.raises(ValueError, match="53 bits"):       # the same error on the exact path
        dpsgd.snapped_gaussian(np.array([2**80], dtype=object), 0, 1.0, 0, key)
    with pytest.raises(TypeError, match="grid_exp"):
        dpsgd.snapped_gaussian(np.array([1]), 4, 1.0, 0.5, key)


def test_ndtri_is_within_the_error_docs_privacy_assumes():
    """docs/privacy.md bounds what the sampler leaves assuming ``scipy.special.ndtri`` is within a
    relative 2^-50 of the normal quantile at the sampler's float64 p; checked with mpmath on
    uniforms spread over every binade the 63-bit lattice reaches."""
    mpmath = pytest.importorskip("mpmath")
    from scipy import special

    mpmath.mp.prec = 100
    rng = np.random.default_rng(9)
    k = np.unique(np.floor(2.0 ** rng.uniform(0, 62.9, 1500)).astype(np.uint64))
    p = (k.astype(np.float64) + 0.5) * 2.0**-64
    z = -special.ndtri(p)
    worst = max(abs((mpmath.mpf(zi) + mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(pi) - 1)) / zi)
                for pi, zi in zip(p.tolist(), z.tolist()))
    assert worst <= 2.0**-50
