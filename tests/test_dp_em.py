"""synthesizers._dp_em.dp_em_ssp: DP-EM by sufficient-statistics perturbation.

Oracles: a NumPy/SciPy EM iteration; the sensitivity bound checked by adding rows; the noise scale
from many keys; the accounting against dp_accounting called directly.
"""

from __future__ import annotations

import dp_accounting as dpa
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from scipy import stats

from dpgen_jax import privacy
from dpgen_jax.synthesizers import _dp_em


def _two_clusters(n=4000, seed=0):
    r = np.random.default_rng(seed)
    which = r.random(n) < 0.3
    centres = np.where(which[:, None], [[-0.5, 0.2]], [[0.4, -0.1]])
    return (centres + 0.05 * r.standard_normal((n, 2))).astype(np.float32), which


def test_noiseless_em_recovers_a_two_component_mixture():
    x, which = _two_clusters()
    init = _dp_em.init_mixture(jax.random.key(3), 2, 2)
    fit = _dp_em.dp_em_ssp(x, jax.random.key(0), init, iterations=20, noise_multiplier=0.0)
    order = np.argsort(np.asarray(fit.means)[:, 0])
    np.testing.assert_allclose(np.asarray(fit.means)[order], [[-0.5, 0.2], [0.4, -0.1]], atol=0.01)
    np.testing.assert_allclose(np.asarray(fit.weights)[order], [which.mean(), 1 - which.mean()], atol=0.01)
    np.testing.assert_allclose(np.asarray(fit.covariances)[order][:, 0, 0], 0.0025, rtol=0.2)


def test_one_iteration_matches_a_numpy_em_step():
    x, _ = _two_clusters(600, seed=1)
    init = _dp_em.Mixture(jnp.array([0.4, 0.6]), jnp.array([[-0.3, 0.0], [0.3, 0.0]]),
                         jnp.array([np.eye(2) * 0.05, np.eye(2) * 0.08], jnp.float32))
    got = _dp_em.dp_em_ssp(x, jax.random.key(0), init, iterations=1, noise_multiplier=0.0)
    dens = np.stack([w * stats.multivariate_normal(m, c).pdf(x) for w, m, c in
                     zip(np.asarray(init.weights), np.asarray(init.means), np.asarray(init.covariances))], 1)
    r = dens / dens.sum(1, keepdims=True)
    n = r.sum(0)
    mu = (r.T @ x) / n[:, None]
    cov = np.einsum("nk,ni,nj->kij", r, x, x) / n[:, None, None] - np.einsum("ki,kj->kij", mu, mu)
    np.testing.assert_allclose(np.asarray(got.weights), n / n.sum(), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(got.means), mu, atol=1e-5)
    np.testing.assert_allclose(np.asarray(got.covariances), cov, atol=1e-5)


@pytest.mark.parametrize("extra_norm", [0.3, 1.0, 5.0])
def test_one_row_changes_each_statistic_by_at_most_one(extra_norm):
    r = np.random.default_rng(2)
    x = _dp_em.clip_rows(jnp.asarray(r.standard_normal((50, 3)), jnp.float32))
    mixture = _dp_em.init_mixture(jax.random.key(1), 4, 3)
    for trial in range(20):
        row = r.standard_normal(3)
        row = row / np.linalg.norm(row) * extra_norm
        more = jnp.concatenate([x, _dp_em.clip_rows(jnp.asarray(row[None], jnp.float32))])
        a = _dp_em.sufficient_statistics(x, mixture)
        b = _dp_em.sufficient_statistics(more, mixture)
        diffs = [np.linalg.norm(np.asarray(b[0] - a[0])), np.linalg.norm(np.asarray(b[1] - a[1])),
                 np.linalg.norm(np.triu(np.asarray(b[2] - a[2])))]
        assert max(diffs) <= 1.0 + 1e-5, (trial, diffs)
    # the bound is attained: a unit row that one component owns changes its count by 1
    sharp = _dp_em.Mixture(jnp.array([0.5, 0.5]), jnp.array([[0.0, 0.0, 0.9], [0.0, 0.0, -0.9]]),
                          jnp.broadcast_to(0.01 * jnp.eye(3), (2, 3, 3)))
    one = _dp_em.sufficient_statistics(jnp.array([[0.0, 0.0, 1.0]]), sharp)
    assert float(jnp.linalg.norm(one[0])) == pytest.approx(1.0, abs=1e-5)


def test_the_noise_has_the_stated_scale():
    # Rows in +-pairs: S1 = 0 exactly, so a one-component mean is z * e1 / (n + z * e0).
    r = np.random.default_rng(4)
    half = _dp_em.clip_rows(jnp.asarray(r.standard_normal((500, 2)), jnp.float32))
    x = jnp.concatenate([half, -half])
    init = _dp_em.init_mixture(jax.random.key(0), 1, 2)
    z = 10.0
    fit = jax.vmap(lambda k: _dp_em.dp_em_ssp(x, k, init, iterations=1, noise_multiplier=z).means)(
        jax.random.split(jax.random.key(5), 400))
    scaled = np.asarray(fit).reshape(-1) * x.shape[0] / z
    assert abs(np.std(scaled) - 1.0) < 0.1 and abs(np.mean(scaled)) < 0.1
    assert stats.kstest(scaled, "norm").pvalue > 1e-3


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
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_accounted_as_three_gaussian_releases_per_iteration():
    z, iterations = 22.16, 10
    direct = RdpAccountant(list(privacy.RDP_ORDERS)).compose(dpa.SelfComposedDpEvent(
        dpa.ComposedDpEvent([dpa.GaussianDpEvent(z)] * 3), iterations)).get_epsilon(1e-5)
    phase = privacy.GaussianPhase("dp-em", z, steps=3 * iterations, sensitivity=1.0)
    assert privacy.epsilon([phase], 1e-5, "rdp") == pytest.approx(direct, rel=1e-9)
    assert direct == pytest.approx(1.0, abs=5e-3)
