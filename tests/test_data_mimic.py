"""Tests for the MIMIC-like generator: shape, determinism, sparsity and correlation structure."""

import numpy as np
import pytest

from dpgen_jax import data


@pytest.fixture(scope="module")
def full():
    """The default-size table (46,520 x 1,071), generated once."""
    return data.mimic_like()


def test_shape_dtype_and_names(full):
    assert full.shape == (46520, 1071)
    assert list(full.columns) == data.binary_schema(1071).names
    assert (full.dtypes == np.int8).all()
    assert set(np.unique(full.to_numpy()).tolist()) == {0, 1}


def test_deterministic_per_seed_and_prefix_stable(full):
    a = data.mimic_like(n_rows=3000, n_features=1071, seed=0)
    np.testing.assert_array_equal(a.to_numpy(), full.to_numpy()[:3000])
    b = data.mimic_like(n_rows=3000, n_features=50, seed=7)
    np.testing.assert_array_equal(
        b.to_numpy(), data.mimic_like(n_rows=3000, n_features=50, seed=7).to_numpy()
    )
    c = data.mimic_like(n_rows=3000, n_features=50, seed=8)
    assert (b.to_numpy() != c.to_numpy()).mean() > 0.01
    np.testing.assert_array_equal(b.to_numpy()[:2049], data.mimic_like(2049, 50, 7).to_numpy())


def test_sparsity_statistics_resemble_mimic(full):
    """Tantipongpipat et al. 2021, §4.2: 146 features with no 1s, 706 under 1 %, 219 / 127 / 64 at >= 1 / 2.5 / 5 %."""
    p = full.to_numpy().mean(axis=0)
    zero = int((p == 0).sum())
    rare = int(((p > 0) & (p < 0.01)).sum())
    assert 120 <= zero <= 175
    assert 675 <= rare <= 735
    assert 205 <= (p >= 0.01).sum() <= 230
    assert 115 <= (p >= 0.025).sum() <= 140
    assert 55 <= (p >= 0.05).sum() <= 72
    assert 0.35 <= p.max() <= 0.55  # a few very common codes
    per_row = full.to_numpy().sum(axis=1)
    assert 10.5 <= per_row.mean() <= 13.0


def test_empirical_marginals_match_the_model(full):
    """Column frequencies agree with the exact model marginals (binomial z-scores)."""
    truth = data.mimic_like_marginals()
    p = full.to_numpy().mean(axis=0)
    assert (p[truth == 0] == 0).all()
    common = truth >= 0.01
    z = (p[common] - truth[common]) / np.sqrt(truth[common] * (1 - truth[common]) / len(full))
    assert np.abs(z).max() < 5 and abs(z.mean()) < 0.3
    expected_ones = (truth * len(full))[~common].sum()
    assert abs(full.to_numpy()[:, ~common].sum() - expected_ones) < 5 * np.sqrt(expected_ones)
    assert np.allclose(np.sort(truth)[::-1][[0, 63, 126, 218]], [0.45, 0.05, 0.025, 0.01], rtol=0.02)


def test_codes_co_occur(full):
    """Latent classes make groups of codes correlate: co-occurrence well above independence."""
    x = full.to_numpy()[:20000].astype(np.float32)
    p = x.mean(axis=0)
    top = np.argsort(-p)[:100]
    corr = np.corrcoef(x[:, top].T)
    off = corr[~np.eye(100, dtype=bool)]
    assert off.max() > 0.3
    assert (off > 0.1).mean() > 0.01
    # an independent table with the same marginals has none of that
    rng = np.random.default_rng(0)
    indep = (rng.random((20000, 100)) < p[top]).astype(np.float32)
    off_indep = np.corrcoef(indep.T)[~np.eye(100, dtype=bool)]
    assert np.abs(off_indep).max() < 0.05


def test_small_sizes_and_bad_arguments():
    tiny = data.mimic_like(n_rows=1, n_features=1, seed=0)
    assert tiny.shape == (1, 1) and list(tiny.columns) == ["x0"]
    assert data.mimic_like(5, 3, 1).shape == (5, 3)
    for kwargs, name in (
        (dict(n_rows=0), "n_rows"),
        (dict(n_rows=2.5), "n_rows"),
        (dict(n_features=0), "n_features"),
        (dict(seed=-1), "seed"),
        (dict(seed=True), "seed"),
    ):
        with pytest.raises((TypeError, ValueError), match=name):
            data.mimic_like(**{"n_rows": 10, **kwargs})
