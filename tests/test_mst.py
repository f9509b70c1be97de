"""MST: contract, its three mechanisms against slow references, accounting against dp_accounting
and the zCDP conversion of the paper's code, sampling from the released tree.

The tests that fit need the optional ``mbi`` package, which the ``test`` extra installs (as does
``baselines``), and skip with that message without it; the mechanisms that do not need it are
tested either way.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import dp_accounting as dpa
import jax
import networkx as nx
import numpy as np
import pandas as pd
import pytest
from dp_accounting.rdp import RdpAccountant
from scipy import stats

from dpgen_jax import data, privacy, synthesizers
from dpgen_jax.synthesizers import MSTConfig
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers import mst
from tests import _tables
from tests._contract import SynthesizerContract
from tests._oracles import reference_integer_noise, rounded_gaussian_pvalue

needs_mbi = pytest.mark.skipif(mst.MST.unavailable_reason() is not None, reason=str(mst.MST.unavailable_reason()))
SCHEMA = _tables.MIXED_SCHEMA
TINY = mst.MST.SMOKE  # the method's smoke schedule


@needs_mbi
class TestMSTContract(SynthesizerContract):
    METHOD = "mst"
    OVERRIDES = TINY
    EPSILON = 3.0

    def zero_steps(self):
        return {}

    def functional_phases(self, config, schema, num_records):
        return mst.privacy_phases(config, len(schema))  # d: one coded column per column

    def functional_released(self, model, frame, schema, phases):
        cfg = model.fitted_config
        disc = mst.discretizer(cfg, schema)
        released, _, _ = mst.fit_released(cfg, disc.codes(frame), disc.sizes, jax.random.key(self.SEED),
                                          phases=phases)
        return {"model": released._asdict()}


# -- mechanisms against slow references (no mbi needed) -------------------------------------------


def test_pair_scores_equal_a_loop_over_pairs():
    r = np.random.default_rng(0)
    sizes = (3, 2, 4, 5)
    codes = np.stack([r.integers(0, k, 400) for k in sizes], axis=1)
    ones = [r.uniform(1, 5, k) for k in sizes]
    got = mst.pair_scores(codes, sizes, ones, 400.0)
    for a, b in itertools.combinations(range(4), 2):
        x = np.zeros((sizes[a], sizes[b]))
        np.add.at(x, (codes[:, a], codes[:, b]), 1)
        xhat = 400.0 * np.outer(ones[a] / ones[a].sum(), ones[b] / ones[b].sum())
        assert got[a, b] == pytest.approx(np.abs(x - xhat).sum(), rel=1e-9)
        assert got[b, a] == pytest.approx(got[a, b], rel=1e-9)


def test_scores_have_sensitivity_one():
    r = np.random.default_rng(1)
    sizes = (3, 4, 2)
    codes = np.stack([r.integers(0, k, 300) for k in sizes], axis=1)
    ones = [np.ones(k) for k in sizes]
    full = mst.pair_scores(codes, sizes, ones, 300.0)
    for i in range(0, 300, 37):
        less = mst.pair_scores(np.delete(codes, i, axis=0), sizes, ones, 300.0)
        assert np.abs(full - less).max() <= 1.0 + 1e-9


def test_non_private_selection_is_the_maximum_spanning_tree():
    r = np.random.default_rng(2)
    w = r.uniform(0, 10, (7, 7))
    w = np.triu(w, 1) + np.triu(w, 1).T
    edges = mst.select_tree(w, None, jax.random.key(0))
    g = nx.Graph()
    g.add_weighted_edges_from((a, b, w[a, b]) for a, b in itertools.combinations(range(7), 2))
    best = nx.maximum_spanning_tree(g)
    assert len(edges) == 6 and nx.is_tree(nx.Graph(edges))
    assert sum(w[a, b] for a, b in edges) == pytest.approx(best.size(weight="weight"))


def test_selection_follows_the_exponential_mechanism():
    """First choice over 4 columns: frequencies of exp(epsilon * score / 2) (chi-square)."""
    scores = np.zeros((4, 4))
    for (a, b), s in zip(itertools.combinations(range(4), 2), [0.0, 1.0, 2.0, 3.0, 0.5, 4.0]):
        scores[a, b] = scores[b, a] = s
    eps, n = 0.8, 4000
    firsts = [mst.select_tree(scores, eps, jax.random.key(i))[0] for i in range(n)]
    pairs = list(itertools.combinations(range(4), 2))
    counts = np.array([sum(f == p for f in firsts) for p in pairs])
    weights = np.exp(eps * np.array([scores[p] for p in pairs]) / 2)
    assert stats.chisquare(counts, n * weights / weights.sum()).pvalue > 1e-3
    # and not with twice the epsilon (a mis-scaled mechanism would pass the first check only)
    w2 = np.exp(2 * eps * np.array([scores[p] for p in pairs]) / 2)
    assert stats.chisquare(counts, n * w2 / w2.sum()).pvalue < 1e-6


def test_measurement_noise_has_the_given_standard_deviation():
    """The noise is integer, equal to the rounded engine normals recomputed independently (one
    stream over the marginals in order), and a chi-square over 4 x 10,000 cells accepts the rounded
    Gaussian of the std and rejects 0.85 and 1.15 times it."""
    codes = np.zeros((5, 2), np.int64)
    sizes = (100, 100)
    cliques = [(0, 1), (1, 0), (0, 1), (1, 0)]
    noisy = sm.measure(codes, sizes, cliques, 3.0, jax.random.key(1))
    exact = sm.measure(codes, sizes, cliques, None, jax.random.key(1))
    z = np.concatenate([a - b for a, b in zip(noisy, exact)])
    assert all(a.dtype == np.int64 for a in noisy)
    np.testing.assert_array_equal(z, reference_integer_noise(jax.random.key(1), z.size, 3.0))
    assert rounded_gaussian_pvalue(z, 3.0) > 1e-3
    assert rounded_gaussian_pvalue(z, 2.55) < 1e-6 and rounded_gaussian_pvalue(z, 3.45) < 1e-6
    assert exact[0].sum() == 5 and exact[0][0] == 5


def test_compression_merges_rare_values_only():
    maps = mst.compress([np.array([10.0, 1.0, 50.0, 2.0]), np.array([10.0, 1.0, 50.0])], 5.0)
    np.testing.assert_array_equal(maps[0], [0, 2, 1, 2])
    np.testing.assert_array_equal(maps[1], [0, 1, 2])  # one rare value: nothing to merge
    np.testing.assert_array_equal(mst.compress([np.array([1.0, 2.0])], None)[0], [0, 1])


def test_phases_and_paper_accounting():
    cfg = synthesizers.create("mst").resolve_config(data.adult_schema())
    assert cfg == MSTConfig()  # the user's choices only: the split's multipliers are derived
    phases = mst.privacy_phases(cfg, 13)
    assert [(p.name, p.steps) for p in phases] == [("one_way", 1), ("selection", 12), ("two_way", 1)]
    assert phases[0].sensitivity == pytest.approx(math.sqrt(13)) and phases[2].sensitivity == pytest.approx(math.sqrt(12))
    rhos = [1 / (2 * phases[0].noise_multiplier**2), 12 * phases[1].rho, 1 / (2 * phases[2].noise_multiplier**2)]
    np.testing.assert_allclose(rhos, [1 / 3] * 3)  # thirds of a total rho of 1 before calibration
    calibrated = synthesizers.create("mst").plan(data.adult_schema(), 1000, epsilon=1.0).phases
    acc = RdpAccountant(list(privacy.RDP_ORDERS))
    acc.compose(dpa.GaussianDpEvent(calibrated[0].noise_multiplier))
    acc.compose(dpa.ZCDpEvent(calibrated[1].rho), 12).compose(dpa.GaussianDpEvent(calibrated[2].noise_multiplier))
    headline = privacy.epsilon(calibrated, 1e-5, "rdp")
    assert headline == pytest.approx(acc.get_epsilon(1e-5), rel=1e-12) and headline <= 1.0
    rho = 3 / (2 * calibrated[0].noise_multiplier**2)
    slow = min(rho * a + (math.log(1e5) + (a - 1) * math.log(1 - 1 / a) - math.log(a)) / (a - 1)
               for a in np.linspace(1.01, 200, 400_000))
    assert privacy.cks_epsilon(rho, 1e-5) == pytest.approx(slow, abs=1e-6)
    assert privacy.cks_epsilon(rho, 1e-5) <= privacy.epsilon(calibrated, 1e-5, "rdp") + 1e-9


def test_sampling_follows_the_released_tree():
    """Codes drawn from a released 3-column tree reproduce its pair marginals."""
    sizes = (2, 3, 2)
    p01 = np.array([[0.3, 0.1, 0.1], [0.0, 0.2, 0.3]])
    p12 = np.array([[0.1, 0.2], [0.25, 0.05], [0.05, 0.35]])
    big = 3
    pairs = np.zeros((2, big, big))
    pairs[0, :2, :3], pairs[1, :3, :2] = p01, p12
    margs = np.zeros((3, big))
    margs[0, :2], margs[1, :3], margs[2, :2] = p01.sum(1), p01.sum(0), p12.sum(0)
    released = {"edges": np.array([[0, 1], [1, 2]]), "pairs": pairs, "marginals": margs}
    codes = mst.sample_codes(released, sizes, 60_000, jax.random.key(0))
    for (a, b), p in (((0, 1), p01), ((1, 2), p12)):
        emp = np.zeros(p.shape)
        np.add.at(emp, (codes[:, a], codes[:, b]), 1)
        np.testing.assert_allclose(emp / len(codes), p, atol=0.01)


# -- fits (need mbi) --------------------------------------------------------------------------------


@needs_mbi
def test_non_private_fit_finds_and_keeps_a_strong_dependency():
    r = np.random.default_rng(0)
    a = r.choice(["x", "y", "z"], 2000, p=[0.5, 0.3, 0.2])
    frame = pd.DataFrame({"a": a, "b": np.where(a == "x", "q", "p").astype(object),
                          "c": r.integers(0, 100, 2000), "d": r.uniform(-1, 1, 2000)})
    model = synthesizers.create("mst", **TINY).fit(frame, SCHEMA, epsilon=math.inf, seed=0)
    assert any("a-b" in s for s in model.privacy_report()["assumptions"])
    s = model.sample(5000, seed=1)
    agree = ((s["a"] == "x") == (s["b"] == "q")).mean()
    assert agree > 0.97


@needs_mbi
def test_private_fit_reports_rdp_with_three_phases():
    model = synthesizers.create("mst", **TINY).fit(_tables.mixed_frame(400, 1), SCHEMA, epsilon=1.0, seed=0)
    rep = model.privacy_report()
    assert rep["accountant"] == "rdp" and rep["epsilon_by_accountant"]["pld"] is None
    assert [p["mechanism"] for p in rep["phases"]] == ["gaussian", "exponential_mechanism", "gaussian"]
    assert rep["paper_accounting"]["epsilon"] <= rep["epsilon"] <= 1.0
    assert model.released["model"]["pairs"].shape == (3, 16, 16)


def test_missing_mbi_is_a_clear_error():
    code = (
        "import sys; sys.modules['mbi'] = None\n"
        "from dpgen_jax import synthesizers\n"
        "from tests import _tables\n"
        "print(synthesizers.get('mst').unavailable_reason())\n"
        "try:\n"
        "    synthesizers.create('mst').fit(_tables.mixed_frame(50, 0), _tables.MIXED_SCHEMA, epsilon=1.0)\n"
        "except ImportError as e:\n"
        "    print('ERR', e)\n")
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": str(root), "JAX_PLATFORMS": "cpu", "PATH": ""}, timeout=300)
    assert "mbi is not installed" in out.stdout and 'pip install "dpgen-jax[baselines]"' in out.stdout
    assert "ERR mst cannot fit here" in out.stdout, out.stderr


def test_configuration_is_checked():
    with pytest.raises(ValueError, match="budget_split"):
        synthesizers.create("mst", budget_split=(0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="selection_noise_multiplier"):
        synthesizers.create("mst", selection_noise_multiplier=-1.0)
    with pytest.raises(ValueError, match=r"no field\(s\) \['num_columns'\]"):
        synthesizers.create("mst", num_columns=2)
    noise = MSTConfig(budget_split=(0.2, 0.2, 0.6)).noise_multipliers(4)
    assert noise["one_way_noise_multiplier"] == pytest.approx(1 / math.sqrt(0.4))
    assert noise["selection_noise_multiplier"] == pytest.approx(math.sqrt(3 / 0.4))
    assert noise["two_way_noise_multiplier"] == pytest.approx(1 / math.sqrt(1.2))
    assert MSTConfig(one_way_noise_multiplier=2.5).noise_multipliers(4)["one_way_noise_multiplier"] == 2.5
