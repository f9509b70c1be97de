"""Definitions of dpgen_jax.metrics on small vectors and tables, against scipy and slow references:
the Jensen-Shannon divergence and the mu-smoothed KL (known extremes, the published mu, bad
vectors), and the 3-way marginal against a per-row histogram. Scores from ``evaluate`` are tested
in test_metrics.py."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon as scipy_js
from scipy.special import rel_entr

from dpgen_jax import metrics
from dpgen_jax.data import Schema

LN2 = math.log(2.0)


# -- JSD and mu-smoothed KL against scipy ---------------------------------------------------------
def random_pair(rng: np.random.Generator, k: int, zeros_p: int, zeros_q: int):
    p, q = rng.random(k), rng.random(k)
    p[rng.choice(k, zeros_p, replace=False)] = 0
    q[rng.choice(k, zeros_q, replace=False)] = 0
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("seed", range(5))
def test_jsd_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    p, q = random_pair(rng, 9, 2, 3)
    # union support = the textbook JSD; scipy returns its square root (natural log by default)
    assert metrics.jensen_shannon(p, q, support="union") == pytest.approx(
        scipy_js(p, q) ** 2, rel=1e-12, abs=1e-15
    )
    # real support: scipy's relative entropy restricted to the real categories
    m = (p + q) / 2
    keep = p > 0
    expected = 0.5 * rel_entr(p[keep], m[keep]).sum() + 0.5 * rel_entr(q[keep], m[keep]).sum()
    assert metrics.jensen_shannon(p, q) == pytest.approx(expected, rel=1e-12)
    # the two differ by exactly the synthetic mass outside the real support, times ln(2)/2
    outside = q[~keep].sum()
    assert metrics.jensen_shannon(p, q, support="union") - metrics.jensen_shannon(p, q) == pytest.approx(
        0.5 * LN2 * outside
    )


@pytest.mark.parametrize("seed", range(5))
def test_kl_mu_matches_scipy(seed):
    rng = np.random.default_rng(10 + seed)
    p, q = random_pair(rng, 7, 2, 3)
    mu = math.exp(-1 / (1 - p.max()))
    keep = p > 0
    expected = rel_entr(p[keep] + mu, q[keep] + mu).sum()
    assert metrics.smoothing_mu(p) == pytest.approx(mu, rel=1e-15)
    assert metrics.kl_mu(p, q) == pytest.approx(expected, rel=1e-12)
    assert metrics.kl_mu(p, q, mu=0.1) == pytest.approx(
        rel_entr(p[keep] + 0.1, q[keep] + 0.1).sum(), rel=1e-12
    )


def test_divergence_extremes():
    p = np.array([0.2, 0.3, 0.5, 0.0])
    assert metrics.jensen_shannon(p, p) == 0.0
    assert metrics.kl_mu(p, p) == 0.0
    # disjoint: all synthetic mass on a category the real data lacks
    q = np.array([0.0, 0.0, 0.0, 1.0])
    assert metrics.jensen_shannon(p, q, support="union") == pytest.approx(LN2, rel=1e-14)
    assert metrics.jensen_shannon(p, q) == pytest.approx(LN2 / 2, rel=1e-14)
    mu = math.exp(-1 / 0.5)
    assert metrics.kl_mu(p, q) == pytest.approx(
        sum((x + mu) * math.log((x + mu) / mu) for x in (0.2, 0.3, 0.5))
    )
    # one category: the synthetic data puts everything on the first real category
    p2, q2 = np.array([0.5, 0.5]), np.array([1.0, 0.0])
    by_hand = 0.25 * math.log(0.5 / 0.75) + 0.5 * math.log(1 / 0.75) + 0.25 * math.log(0.5 / 0.25)
    assert metrics.jensen_shannon(p2, q2) == pytest.approx(by_hand, rel=1e-14)
    # constant real column: mu = 0, and missing its value makes the KL infinite
    assert metrics.smoothing_mu([1.0, 0.0]) == 0.0
    assert metrics.kl_mu([1.0, 0.0], [0.0, 1.0]) == math.inf


def test_mu_of_the_published_table():
    # The mu of Adult in the DP-auto-GAN paper (Tantipongpipat et al. 2021, "Differentially Private
    # Synthetic Mixed-Type Data Generation For Unsupervised Learning"; docs/metrics.md, "Diversity"):
    # race p1 = 0.855043 = 41762/48842 -> mu = 0.00100921; native-country p1 = 0.897424 =
    # 43832/48842 -> 5.83587e-05 (the table's p1 is rounded; mu is sensitive to it)
    n = 48842
    assert metrics.smoothing_mu([41762 / n, 1 - 41762 / n]) == pytest.approx(0.00100921, rel=5e-6)
    assert metrics.smoothing_mu([43832 / n, 1 - 43832 / n]) == pytest.approx(5.83587e-05, rel=5e-6)


@pytest.mark.parametrize(
    "p,q,match",
    [
        ([0.5, 0.6], [0.5, 0.5], "sum to 1"),
        ([1.0], [0.5, 0.5], "same length"),
        ([-0.5, 1.5], [0.5, 0.5], "non-negative"),
    ],
)
def test_divergence_bad_vectors(p, q, match):
    with pytest.raises(ValueError, match=match):
        metrics.jensen_shannon(p, q)


# -- 3-way marginal against a slow reference ------------------------------------------------------
def slow_three_way(real: pd.DataFrame, syn: pd.DataFrame, cols: list[str]) -> float:
    lo, hi = real[cols].min(), real[cols].max()

    def hist(df):
        keys = [
            tuple(math.floor((row[c] - lo[c]) * 100 / (hi[c] - lo[c])) for c in cols)
            for _, row in df.iterrows()
        ]
        return {k: v / len(keys) for k, v in Counter(keys).items()}

    hr, hs = hist(real), hist(syn)
    return sum(abs(hr.get(k, 0.0) - hs.get(k, 0.0)) for k in set(hr) | set(hs))


def test_three_way_marginal_matches_slow_reference():
    schema = Schema.from_dict(
        {
            "columns": [
                {"name": "a", "kind": "continuous", "lower": -10, "upper": 10},
                {"name": "b", "kind": "continuous", "lower": 0, "upper": 5},
                {"name": "c", "kind": "continuous", "lower": 0, "upper": 1},
            ]
        }
    )
    rng = np.random.default_rng(3)
    real = pd.DataFrame(
        {"a": rng.normal(0, 1, 150).clip(-10, 10), "b": rng.random(150) * 3, "c": rng.random(150)}
    )
    syn = pd.DataFrame(
        {"a": rng.normal(0.5, 2, 120).clip(-10, 10), "b": rng.random(120) * 5, "c": rng.random(120)}
    )
    # b is outside the real range for some synthetic rows: bins beyond 100
    assert (syn["b"] > real["b"].max()).any()
    r = metrics.three_way_marginal(real, syn, schema, n_triples=4, seed=1)
    ref = slow_three_way(real, syn, ["a", "b", "c"])
    assert [t["l1"] for t in r["per_triple"]] == pytest.approx([ref] * 4, rel=1e-12)
    assert r["mean"] == pytest.approx(ref, rel=1e-12)
    assert metrics.three_way_marginal(real, real, schema, n_triples=3)["mean"] == 0.0
    shifted = real.assign(c=np.full(150, 1.0), a=np.full(150, 10.0))
    assert (
        metrics.three_way_marginal(real.assign(a=np.full(150, -10.0)), shifted, schema, n_triples=2)["mean"]
        == 2.0
    )
