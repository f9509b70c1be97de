"""synthesizers._dp_em.dp_em_ssp: DP-EM by sufficient-statistics perturbation, in fixed point.

Oracles: a NumPy/SciPy EM iteration on the fixed-point rows; exact sums with Fractions on a tiny
input; the sensitivity bound checked in integers by adding rows; the noise scale from many
mixtures; the release against ``dpsgd.snapped_gaussian`` and the ideal snapped Gaussian (the
floating-point distinguisher); the accounting against dp_accounting called directly.
"""

from __future__ import annotations

import math
from fractions import Fraction

import dp_accounting as dpa
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from scipy import special, stats

from dpgen_jax import dpsgd, privacy
from dpgen_jax.synthesizers import _dp_em

B = _dp_em.FRAC_BITS


def _two_clusters(n=4000, seed=0):
    r = np.random.default_rng(seed)
    which = r.random(n) < 0.3
    centres = np.where(which[:, None], [[-0.5, 0.2]], [[0.4, -0.1]])
    return (centres + 0.05 * r.standard_normal((n, 2))).astype(np.float32), which


def _stack(mixtures):
    return _dp_em.Mixture(*(jnp.stack(f) for f in zip(*mixtures)))


def test_noiseless_em_recovers_a_two_component_mixture():
    x, which = _two_clusters()
    init = _dp_em.init_mixture(jax.random.key(3), 2, 2)
    fit = _dp_em.dp_em_ssp(x, jax.random.key(0), init, iterations=20, noise_multiplier=0.0)
    order = np.argsort(np.asarray(fit.means)[:, 0])
    np.testing.assert_allclose(np.asarray(fit.means)[order], [[-0.5, 0.2], [0.4, -0.1]], atol=0.01)
    np.testing.assert_allclose(np.asarray(fit.weights)[order], [which.mean(), 1 - which.mean()], atol=0.01)
    np.testing.assert_allclose(np.asarray(fit.covariances)[order][:, 0, 0], 0.0025, rtol=0.2)


def test_one_iteration_matches_a_numpy_em_step_on_the_fixed_point_rows():
    x, _ = _two_clusters(600, seed=1)
    init = _dp_em.Mixture(jnp.array([0.4, 0.6]), jnp.array([[-0.3, 0.0], [0.3, 0.0]]),
                          jnp.array([np.eye(2) * 0.05, np.eye(2) * 0.08], jnp.float32))
    got = _dp_em.dp_em_ssp(x, jax.random.key(0), init, iterations=1, noise_multiplier=0.0)
    xq = np.trunc(np.asarray(x, np.float64) * 2**B) / 2**B      # rows inside the ball: truncation only
    dens = np.stack([w * stats.multivariate_normal(m, c).pdf(xq) for w, m, c in
                     zip(np.asarray(init.weights), np.asarray(init.means), np.asarray(init.covariances))], 1)
    r = np.floor(dens / dens.sum(1, keepdims=True) * 2**B) / 2**B
    n = r.sum(0)
    mu = (r.T @ xq) / n[:, None]
    cov = np.einsum("nk,ni,nj->kij", r, xq, xq) / n[:, None, None] - np.einsum("ki,kj->kij", mu, mu)
    np.testing.assert_allclose(np.asarray(got.weights), n / n.sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got.means), mu, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got.covariances), cov, atol=1e-6)


def test_statistics_are_exact_sums_of_the_fixed_point_rows():
    """Integers against Fractions on a tiny input: rows inside the ball are truncated, a row
    outside is clipped first; counts, first and second moments are the exact sums."""
    r = np.random.default_rng(7)
    x = r.uniform(-0.55, 0.55, (9, 3))
    x[0] = [3.0, -4.0, 0.0]                          # clipped to (0.6, -0.8, 0)
    mixture = _dp_em.init_mixture(jax.random.key(2), 2, 3)
    X = _dp_em.fixed_point_rows(x)
    assert X[0].tolist() == [2457, -3276, 0]         # trunc(0.6 * 4096), trunc(-0.8 * 4096)
    for i in range(1, 9):
        assert X[i].tolist() == [math.trunc(Fraction(float(v)) * 2**B) for v in x[i]]
    R = _dp_em.fixed_point_responsibilities(X, mixture)
    assert R.dtype == np.int64 and (R >= 0).all() and (R.sum(1) <= 2**B).all()
    assert (R.sum(1) >= 2**B - 2).all()              # floor of probabilities summing to 1
    nums = _dp_em.sufficient_statistics(X, R)
    assert nums.shape == (2, 1 + 3 + 6) and nums.dtype == np.int64
    pairs = [(j, k) for j in range(3) for k in range(j, 3)]
    for c in range(2):
        rows = [(Fraction(int(R[i, c]), 2**B), [Fraction(int(v), 2**B) for v in X[i]]) for i in range(9)]
        want = [sum(rr for rr, _ in rows)]
        want += [sum(rr * xx[j] for rr, xx in rows) for j in range(3)]
        want += [sum(rr * xx[j] * xx[k] for rr, xx in rows) for j, k in pairs]
        assert [Fraction(int(v), 2 ** (3 * B)) for v in nums[c]] == want
    # padding rows count for nothing
    masked = _dp_em.fixed_point_responsibilities(X, mixture, mask=np.arange(9) < 5)
    assert (masked[5:] == 0).all() and (masked[:5] == R[:5]).all()


@pytest.mark.parametrize("extra_norm", [0.3, 1.0, 5.0])
def test_one_row_changes_each_statistic_by_at_most_one(extra_norm):
    """In integers: the squared L2 change of each statistic (counts, S1, S2's upper triangle) over
    all components is at most 2^(6b) in units of 2^-3b."""
    r = np.random.default_rng(2)
    x = r.standard_normal((50, 3))
    mixture = _dp_em.init_mixture(jax.random.key(1), 4, 3)
    pieces = (slice(0, 1), slice(1, 4), slice(4, 10))
    for trial in range(20):
        row = r.standard_normal(3)
        row = row / np.linalg.norm(row) * extra_norm
        more = np.concatenate([x, row[None]])
        Xa, Xb = _dp_em.fixed_point_rows(x), _dp_em.fixed_point_rows(more)
        a = _dp_em.sufficient_statistics(Xa, _dp_em.fixed_point_responsibilities(Xa, mixture))
        b = _dp_em.sufficient_statistics(Xb, _dp_em.fixed_point_responsibilities(Xb, mixture))
        for s in pieces:
            diff = (b - a)[:, s].reshape(-1).tolist()
            assert sum(v * v for v in diff) <= 2 ** (6 * B), (trial, s)
    # the bound is attained: a unit row that one component owns changes its count by exactly 1
    sharp = _dp_em.Mixture(jnp.array([0.5, 0.5]), jnp.array([[0.0, 0.0, 0.9], [0.0, 0.0, -0.9]]),
                           jnp.broadcast_to(0.01 * jnp.eye(3), (2, 3, 3)))
    X = _dp_em.fixed_point_rows(np.array([[0.0, 0.0, 1.0]]))
    one = _dp_em.sufficient_statistics(X, _dp_em.fixed_point_responsibilities(X, sharp))
    assert one[:, 0].tolist() == [2 ** (3 * B), 0] and one[0, 3] == 2 ** (3 * B)
    assert one[0, -1] == 2 ** (3 * B)


def test_fixed_point_rows_stay_in_the_unit_ball():
    r = np.random.default_rng(3)
    u = r.standard_normal((200_000, 4))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    ulps = r.integers(-4, 5, (200_000, 1))
    x = u * (1.0 + ulps * 2.0**-52)                  # on the sphere, a few ulps either side
    x[:1000] *= 7.0                                  # far outside
    X = _dp_em.fixed_point_rows(x)
    assert (np.sum(X * X, axis=1) <= 4**B).all()
    assert (np.abs(X) <= 2**B).all()
    np.testing.assert_array_equal(_dp_em.fixed_point_rows(-x), -X)  # symmetric: +-pairs cancel


def test_the_noise_has_the_stated_scale():
    # Rows in +-pairs: S1 = 0 exactly, so a one-component mean is z * e1 / (n + z * e0).
    r = np.random.default_rng(4)
    half = r.standard_normal((500, 2))
    x = np.concatenate([half, -half])
    runs = 400
    inits = _stack([_dp_em.init_mixture(jax.random.key(0), 1, 2)] * runs)
    z = 10.0
    fit = _dp_em.dp_em_ssp(np.broadcast_to(x, (runs,) + x.shape), jax.random.key(5), inits,
                           iterations=1, noise_multiplier=z)
    scaled = np.asarray(fit.means).reshape(-1) * x.shape[0] / z
    assert abs(np.std(scaled) - 1.0) < 0.1 and abs(np.mean(scaled)) < 0.1
    assert stats.kstest(scaled, "norm").pvalue > 1e-3


def test_one_noisy_iteration_is_the_snapped_release_of_the_exact_statistics():
    """The key layout: mixture b of a batch of B, iteration t, draws counters (t B + b) M onward
    of one stream, through dpsgd.snapped_gaussian on the grid of grid_exponent."""
    x, _ = _two_clusters(300, seed=6)
    inits = _stack([_dp_em.init_mixture(jax.random.key(s), 2, 2) for s in (1, 2)])
    z, key = 3.0, jax.random.key(11)
    xs = np.stack([x, x[::-1]])
    got = _dp_em.dp_em_ssp(xs, key, inits, iterations=2, noise_multiplier=z)
    first = _dp_em.dp_em_ssp(xs, key, inits, iterations=1, noise_multiplier=z)
    X = _dp_em.fixed_point_rows(xs)
    R = _dp_em.fixed_point_responsibilities(X, first)
    nums = _dp_em.sufficient_statistics(X, R)                       # (2, 2, 6)
    m = nums[0].size
    for b in range(2):
        out = dpsgd.snapped_gaussian(nums[b], 3 * B, z, _dp_em.grid_exponent(z), key, offset=(2 + b) * m)
        want = _dp_em.m_step(*_dp_em.unpack_statistics(out, 2))
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g[b]), w.astype(np.float32), rtol=1e-6, atol=1e-7)


def test_a_batch_fits_each_mixture_as_alone_without_noise():
    x, _ = _two_clusters(400, seed=8)
    y, _ = _two_clusters(250, seed=9)
    inits = [_dp_em.init_mixture(jax.random.key(s), 3, 2) for s in (4, 5)]
    padded = np.stack([x, np.concatenate([y, np.full((150, 2), 0.7)])])
    mask = np.arange(400)[None, :] < np.array([[400], [250]])
    both = _dp_em.dp_em_ssp(padded, jax.random.key(0), _stack(inits), iterations=4,
                            noise_multiplier=0.0, mask=mask)
    for b, (rows, init) in enumerate([(x, inits[0]), (y, inits[1])]):
        alone = _dp_em.dp_em_ssp(rows, jax.random.key(0), init, iterations=4, noise_multiplier=0.0)
        for g, w in zip(both, alone):
            np.testing.assert_array_equal(np.asarray(g[b]), np.asarray(w))


def test_covariances_stay_positive_definite_and_means_in_the_ball_under_heavy_noise():
    x, _ = _two_clusters(100, seed=3)
    init = _dp_em.init_mixture(jax.random.key(2), 3, 2)
    fit = _dp_em.dp_em_ssp(x, jax.random.key(9), init, iterations=10, noise_multiplier=50.0)
    assert np.linalg.eigvalsh(np.asarray(fit.covariances)).min() >= 1e-3 * (1 - 1e-3)
    assert np.linalg.norm(np.asarray(fit.means), axis=1).max() <= 1.0 + 1e-6
    assert float(fit.weights.sum()) == pytest.approx(1.0, abs=1e-5) and (np.asarray(fit.weights) > 0).all()
    draws = _dp_em.sample_mixture(fit, jax.random.key(1), 1000)
    assert draws.shape == (1000, 2) and np.isfinite(np.asarray(draws)).all()


def test_padding_rows_are_ignored():
    x, _ = _two_clusters(200, seed=5)
    init = _dp_em.init_mixture(jax.random.key(3), 2, 2)
    plain = _dp_em.dp_em_ssp(x, jax.random.key(1), init, iterations=3, noise_multiplier=2.0)
    padded = jnp.concatenate([x, jnp.ones((56, 2)) * 0.7])
    mask = jnp.concatenate([jnp.ones(200), jnp.zeros(56)])
    masked = _dp_em.dp_em_ssp(padded, jax.random.key(1), init, iterations=3, noise_multiplier=2.0, mask=mask)
    for a, b in zip(plain, masked):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_grid_is_the_largest_power_of_two_below_a_64th_of_the_noise():
    for z in (1e-9, 1e-3, 0.5, 1.0, 2.0, 3.0, 42.0, 64.0, 100.0, 1e6):
        g = _dp_em.grid_exponent(z)
        assert g == max(_dp_em.GRID_FLOOR, math.floor(math.log2(z / 64)))
        assert g == _dp_em.GRID_FLOOR or 2.0**g <= z / 64 < 2.0 ** (g + 1)
    # at the floor the largest statistic (MAX_ROWS) plus 9.2 std is below 2^53 grid units
    assert (_dp_em.MAX_ROWS + 9.2 * 64 * 2.0**_dp_em.GRID_FLOOR) / 2.0**_dp_em.GRID_FLOOR < 2**53
    assert _dp_em.MAX_ROWS * 2 ** (3 * B) < 2**63


def test_bad_input_is_refused_naming_the_argument(monkeypatch):
    x, _ = _two_clusters(20, seed=0)
    init = _dp_em.init_mixture(jax.random.key(0), 2, 2)
    run = dict(iterations=1, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="x holds NaN or inf"):
        _dp_em.dp_em_ssp(np.where(np.arange(20)[:, None] == 3, np.nan, x), jax.random.key(0), init, **run)
    with pytest.raises(ValueError, match="mask"):
        _dp_em.dp_em_ssp(x, jax.random.key(0), init, mask=np.full(20, 0.5), **run)
    with pytest.raises(ValueError, match="mask"):
        _dp_em.dp_em_ssp(x, jax.random.key(0), init, mask=np.ones(19), **run)
    with pytest.raises(ValueError, match="init"):
        _dp_em.dp_em_ssp(x, jax.random.key(0), _dp_em.init_mixture(jax.random.key(0), 2, 3), **run)
    with pytest.raises(ValueError, match="noise_multiplier"):
        _dp_em.dp_em_ssp(x, jax.random.key(0), init, iterations=1, noise_multiplier=2.0**41)
    with pytest.raises(ValueError, match=r"x has shape \(2,\): pass \(n, d\) rows"):
        _dp_em.dp_em_ssp(x[0], jax.random.key(0), init, **run)
    monkeypatch.setattr(_dp_em, "MAX_ROWS", 19)
    with pytest.raises(ValueError, match="got x with 20 rows"):
        _dp_em.dp_em_ssp(x, jax.random.key(0), init, **run)


def test_accounted_as_three_gaussian_releases_per_iteration():
    z, iterations = 22.16, 10
    direct = RdpAccountant(list(privacy.RDP_ORDERS)).compose(dpa.SelfComposedDpEvent(
        dpa.ComposedDpEvent([dpa.GaussianDpEvent(z)] * 3), iterations)).get_epsilon(1e-5)
    phase = privacy.GaussianPhase("dp-em", z, steps=3 * iterations, sensitivity=1.0, output="snapped")
    assert privacy.epsilon([phase], 1e-5, "rdp") == pytest.approx(direct, rel=1e-9)
    assert direct == pytest.approx(1.0, abs=5e-3)


# ----------------------------------------------------------------------------- floating point


def _ideal_cell_probabilities(v: float, std: float, h: float, cells: np.ndarray) -> np.ndarray:
    """P[round((v + std Z) / h) = m] for the ideal snapped Gaussian (float64 CDF differences)."""
    lo = ((cells - 0.5) * h - v) / std
    return special.ndtr(lo + h / std) - special.ndtr(lo)


def test_floating_point_distinguisher_finds_nothing_in_the_snapped_release():
    """Neighbouring tables, n rows against n + 1 where the extra row moves S1 by 3 * 2^-12 (not
    a multiple of the grid), 2^20 + cells per side released through ``release_statistics`` as
    shipped: every output is a multiple of 2^g (Mironov's low-bit distinguisher fires 0 times),
    and on each side every statistic follows the ideal snapped Gaussian's law at its own value
    (chi-square), i.e. the two sides differ only by the shift. The float32 release it replaced
    is caught by the same distinguisher."""
    std = 2.0
    g = _dp_em.grid_exponent(std)
    h = 2.0**g
    r = np.random.default_rng(10)
    base = r.uniform(-0.9, 0.9, (25, 1))
    sides = {"out": base, "in": np.concatenate([base, [[3 * 2.0**-B]]])}
    runs = 350_000                                               # x 3 statistics: 1.05e6 cells per side
    one = _dp_em.Mixture(np.ones((1,)), np.zeros((1, 1)), np.eye(1)[None])
    for i, (name, rows) in enumerate(sides.items()):
        X = _dp_em.fixed_point_rows(rows)
        nums = _dp_em.sufficient_statistics(X, _dp_em.fixed_point_responsibilities(X, one))  # (1, 3)
        out = _dp_em.release_statistics(np.broadcast_to(nums, (runs, 1, 3)), jax.random.key(20 + i), std)
        grid_units = np.ldexp(out, -g)
        assert int(np.sum(grid_units != np.round(grid_units))) == 0, name   # the distinguisher
        for c in range(3):
            v = float(Fraction(int(nums[0, c]), 2 ** (3 * B)))
            q = grid_units[:, 0, c].astype(np.int64)
            cells = np.arange(q.min(), q.max() + 1)
            p = _ideal_cell_probabilities(v, std, h, cells)
            seen = np.bincount(q - q.min(), minlength=cells.size)
            keep = p * runs >= 20                                  # tails merged into one bin
            f_obs = np.append(seen[keep], seen[~keep].sum())
            f_exp = np.append(p[keep], 1.0 - p[keep].sum()) * runs
            assert stats.chisquare(f_obs, f_exp).pvalue > 1e-4, (name, c)
        if name == "in":   # the float32 pattern: statistic + noise rounded in float32
            v32 = np.float32(nums[0, 1] * 2.0 ** (-3 * B))
            naive = v32 + np.float32(std) * np.asarray(jax.random.normal(jax.random.key(3), (runs,)))
            assert int(np.sum(np.ldexp(naive.astype(np.float64), -g) % 1 != 0)) > runs // 2
