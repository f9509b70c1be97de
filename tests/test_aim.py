"""AIM: contract, its mechanisms against slow references, the unit schedule, accounting against
dp_accounting directly, the model marginals against brute force, sampling from released cliques.

The tests that fit need the optional ``mbi`` package, which the ``test`` extra installs (as does
``baselines``), and skip with that message without it; the mechanisms that do not need it are
tested either way.
"""

from __future__ import annotations

import itertools
import math
import pathlib
import subprocess
import sys

import dp_accounting as dpa
import jax
import numpy as np
import pandas as pd
import pytest
from dp_accounting.rdp import RdpAccountant
from scipy import stats
from scipy.special import logsumexp

from dpgen_jax import data, privacy, synthesizers
from dpgen_jax.synthesizers import AIMConfig, aim
from dpgen_jax.synthesizers import _select_measure as sm
from tests import _tables
from tests._contract import SynthesizerContract

needs_mbi = pytest.mark.skipif(aim.AIM.unavailable_reason() is not None, reason=str(aim.AIM.unavailable_reason()))
SCHEMA = _tables.MIXED_SCHEMA
TINY = aim.AIM.SMOKE  # the method's smoke schedule


@needs_mbi
class TestAIMContract(SynthesizerContract):
    METHOD = "aim"
    OVERRIDES = TINY
    EPSILON = 3.0

    def zero_steps(self):
        return {"max_rounds": 1}

    def functional_phases(self, config, schema, num_records):
        return aim.privacy_phases(config, len(schema))  # d: one coded column per column

    def functional_released(self, model, frame, schema, phases):
        cfg = model.fitted_config
        disc = aim.discretizer(cfg, schema)
        tables, cliques, _ = aim.fit_released(cfg, disc.codes(frame), disc.sizes, jax.random.key(self.SEED),
                                              phases=phases)
        assert tuple(map(tuple, cliques)) == aim.model_cliques(model.fitted_release.statistics)
        return {"model": tables}


# -- workload, scores and selection (no mbi needed) -------------------------------------------------


def test_workload_and_weights_equal_a_count_over_the_workload():
    sizes = (3, 50, 4, 300)
    work = aim.workload(sizes, 2, 1000)
    assert work == [(0, 1), (0, 2), (0, 3), (1, 2)]  # (1, 3) and (2, 3) exceed 1,000 cells
    cands = aim.candidates(work)
    assert set(cands) == {(0,), (1,), (2,), (3,), *work}
    for r, w in cands.items():
        assert w == sum(len(set(r) & set(s)) for s in work)
    assert cands[(0, 1)] == 2 + 2 + 1 and cands[(3,)] == 1
    full = aim.candidates(aim.workload((2,) * 5, 3, 10_000))
    assert len(full) == 5 + 10 + 10 and max(full.values()) == 3 * math.comb(4, 2)


def test_scores_are_the_weighted_l1_minus_the_expected_noise_and_have_sensitivity_w():
    r = np.random.default_rng(0)
    sizes = (3, 4, 2)
    codes = np.stack([r.integers(0, k, 200) for k in sizes], axis=1)
    cands = aim.candidates(aim.workload(sizes, 2, 100))
    est = {c: r.uniform(0, 20, math.prod(sizes[j] for j in c)) for c in cands}

    def answers(rows):
        return {c: sm.counts(rows, sizes, c) for c in cands}

    full = aim.scores(cands, answers(codes), est, sizes, 2.0)
    for c, w in cands.items():
        l1 = np.abs(answers(codes)[c] - est[c]).sum()
        assert full[c] == pytest.approx(w * (l1 - math.sqrt(2 / math.pi) * 2.0 * est[c].size))
    for i in range(0, 200, 23):
        less = aim.scores(cands, answers(np.delete(codes, i, axis=0)), est, sizes, 2.0)
        assert all(abs(full[c] - less[c]) <= cands[c] + 1e-9 for c in cands)


def test_selection_follows_the_exponential_mechanism():
    """Frequencies of exp(epsilon q / (2 max w)) over 4 candidates (chi-square), and not of twice
    that epsilon."""
    weights = {(0,): 1.0, (1,): 1.0, (0, 1): 2.0, (1, 2): 2.0}
    quality = {(0,): 0.0, (1,): 2.0, (0, 1): 5.0, (1, 2): 8.0}
    eps, n = 1.5, 4000
    picks = [aim.select(quality, weights, eps, jax.random.key(i)) for i in range(n)]
    keys = list(quality)
    counts = np.array([picks.count(k) for k in keys])
    q = np.array([quality[k] for k in keys])
    p = np.exp(eps * q / 4.0)
    assert stats.chisquare(counts, n * p / p.sum()).pvalue > 1e-3
    p2 = np.exp(2 * eps * q / 4.0)
    assert stats.chisquare(counts, n * p2 / p2.sum()).pvalue < 1e-6
    assert aim.select(quality, weights, None, jax.random.key(0)) == (1, 2)


def test_every_annealing_path_spends_exactly_the_round_budget():
    """Whatever the (data-dependent) annealing decisions, the rounds spend all R units: m = 1, 4,
    16, ... units per round and one last round with everything left (the paper's rule)."""
    for total in (1, 2, 3, 7, 32, 100):
        for decisions in itertools.product([False, True], repeat=6):
            level, spent, units = 1, 0, []
            while spent < total:
                m, last = aim.round_units(level, total - spent)
                assert m >= 1 and (last or total - spent - m >= m)
                spent, units = spent + m, units + [m]
                if not last and decisions[min(len(units) - 1, 5)]:
                    level *= 4
            assert spent == total and all(u in (1, 4, 16, 64) for u in units[:-1])
    assert aim.round_units(1, 1) == (1, True) and aim.round_units(4, 7) == (7, True)
    assert aim.round_units(4, 8) == (4, False)
    with pytest.raises(ValueError, match="remaining=0"):
        aim.round_units(1, 0)


# -- model marginals and sampling (no mbi needed) -----------------------------------------------------


def test_model_marginals_equal_brute_force_on_the_joint():
    r = np.random.default_rng(3)
    sizes = (2, 3, 4, 2, 3)
    cliques = [(0, 1), (1, 2), (2, 3), (0, 3), (4,), (1, 4)]  # a cycle: elimination must fill in
    pots = [(c, r.normal(0, 1, [sizes[j] for j in c])) for c in cliques]
    log_joint = np.zeros(sizes)
    for c, t in pots:
        log_joint = log_joint + aim._align(c, t, tuple(range(5)), sizes)
    joint = np.exp(log_joint - logsumexp(log_joint)) * 500.0
    for q in [(0,), (3, 1), (0, 2, 4), (4, 2)]:
        other = tuple(j for j in range(5) if j not in q)
        expect = np.transpose(joint.sum(axis=other), np.argsort(np.argsort(q)))
        np.testing.assert_allclose(aim.model_marginal(pots, sizes, q, 500.0), expect, rtol=1e-10)


def test_sampling_follows_the_released_cliques():
    """Codes drawn from released cliques (0, 1, 2) then (2, 3) reproduce both tables."""
    r = np.random.default_rng(0)
    sizes = (2, 3, 2, 4)
    p012 = r.dirichlet(np.ones(12)).reshape(2, 3, 2)
    cond = r.dirichlet(np.ones(4), size=2)  # P(3 | 2)
    p23 = p012.sum(axis=(0, 1))[:, None] * cond
    codes = aim.sample_codes({"c000": p012, "c001": p23}, [(0, 1, 2), (2, 3)], sizes, 80_000, jax.random.key(1))
    for cols, p in (((0, 1, 2), p012), ((2, 3), p23)):
        emp = np.zeros(p.shape)
        np.add.at(emp, tuple(codes[:, j] for j in cols), 1)
        np.testing.assert_allclose(emp / len(codes), p, atol=0.01)
    # a clique whose new columns are drawn jointly, and its columns out of order
    codes = aim.sample_codes({"c000": p23.T}, [(1, 0)], (2, 4), 40_000, jax.random.key(2))
    emp = np.zeros((2, 4))
    np.add.at(emp, (codes[:, 0], codes[:, 1]), 1)
    np.testing.assert_allclose(emp / len(codes), p23, atol=0.01)
    with pytest.raises(ValueError, match="do not cover every column"):
        aim.sample_codes({"c000": p23}, [(0, 1)], (2, 4, 3), 10, jax.random.key(3))


# -- accounting against dp_accounting (no mbi needed) ----------------------------------------------


def test_phases_split_the_budget_as_the_paper_and_match_dp_accounting():
    d, rounds = 13, 32
    model = synthesizers.create("aim")
    cfg = model.resolve_config(data.adult_schema())
    assert cfg == AIMConfig() and cfg.rounds(d) == rounds  # the user's choices only
    phases = aim.privacy_phases(cfg, d)
    assert [(p.name, p.steps) for p in phases] == [("one_way", 1), ("selection", rounds), ("measure", rounds)]
    assert phases[0].sensitivity == pytest.approx(math.sqrt(d)) and phases[2].sensitivity == 1.0
    # before calibration the total rho is 1, a unit 1 / T with T = R + 0.9 d (the paper's T)
    t = rounds + 0.9 * d
    rho_one = 1 / (2 * phases[0].noise_multiplier**2)
    rho_meas = 1 / (2 * phases[2].noise_multiplier**2)
    np.testing.assert_allclose([rho_one, rho_meas, phases[1].rho], [0.9 * d / t, 0.9 / t, 0.1 / t])
    assert rho_one + rounds * (rho_meas + phases[1].rho) == pytest.approx(1.0)
    # calibrated: the report's RDP epsilon is dp_accounting's on the same events
    plan = model.plan(data.adult_schema(), 1000, epsilon=3.0)
    p1, sel, meas = plan.phases
    acc = RdpAccountant(list(privacy.RDP_ORDERS))
    acc.compose(dpa.GaussianDpEvent(p1.noise_multiplier))
    acc.compose(dpa.ZCDpEvent(sel.epsilon**2 / 8), rounds).compose(dpa.GaussianDpEvent(meas.noise_multiplier), rounds)
    assert plan.epsilon() == pytest.approx(acc.get_epsilon(1e-5), rel=1e-12) and plan.epsilon() <= 3.0
    assert plan.epsilon() >= 3.0 * (1 - 1e-4)
    assert meas.noise_multiplier / p1.noise_multiplier == pytest.approx(math.sqrt(d))  # ratio kept


def test_a_round_of_m_units_costs_m_unit_rounds():
    """The identity the report relies on: one Gaussian at sigma / sqrt(m) and one selection at
    epsilon sqrt(m) have the RDP of m unit measurements and m unit selections, at every order."""
    sigma, eps, m = 7.0, 0.1, 4
    orders = list(privacy.RDP_ORDERS)
    one = RdpAccountant(orders).compose(dpa.GaussianDpEvent(sigma / math.sqrt(m))).compose(
        dpa.ZCDpEvent((eps * math.sqrt(m)) ** 2 / 8))
    many = RdpAccountant(orders).compose(dpa.GaussianDpEvent(sigma), m).compose(dpa.ZCDpEvent(eps**2 / 8), m)
    np.testing.assert_allclose(one._rdp, many._rdp, rtol=1e-12)
    assert one.get_epsilon(1e-5) == pytest.approx(many.get_epsilon(1e-5), rel=1e-12)


def test_paper_rounds_and_conversion():
    cfg = AIMConfig(max_rounds=None)
    assert cfg.rounds(13) == aim.paper_rounds(13) == 196  # T = 196 + 11.7 = 16 d (207.7 ~ 208)
    phases = aim.privacy_phases(cfg, 13)
    assert [p.steps for p in phases] == [1, 196, 196]
    plan = synthesizers.create("aim", max_rounds=None).plan(data.adult_schema(), 1000, epsilon=1.0)
    assert plan.config.max_rounds is None and [p.steps for p in plan.phases] == [1, 196, 196]  # derived in the phases
    rho = 1 / (2 * phases[0].noise_multiplier**2) + 196 * (1 / (2 * phases[2].noise_multiplier**2) + phases[1].rho)
    assert rho == pytest.approx(1.0)
    model = synthesizers.create("aim")
    plan = model.plan(data.adult_schema(), 1000, epsilon=1.0)
    paper = model._paper_accounting(plan.config, plan.phases, 1e-5, {})
    assert paper["epsilon"] <= plan.epsilon() + 1e-9 and paper["epsilon"] == pytest.approx(plan.epsilon(), abs=1e-3)


def test_configuration_is_checked():
    for kwargs, match in [(dict(max_rounds=0), "max_rounds"), (dict(measure_share=1.0), "measure_share"),
                          (dict(max_model_size=-1.0), "max_model_size"), (dict(workload_degree=0), "workload_degree"),
                          (dict(max_cells=0), "max_cells"), (dict(round_iters=0), "round_iters"),
                          (dict(measure_noise_multiplier=0.0), "measure_noise_multiplier"),
                          (dict(bin_spacing="cubic"), "bin_spacing")]:
        with pytest.raises(ValueError, match=match):
            synthesizers.create("aim", **kwargs)
    with pytest.raises(TypeError, match="bins=True"):
        synthesizers.create("aim", bins=True)
    with pytest.raises(ValueError, match="workload_degree=5 exceeds the 4 columns"):
        synthesizers.create("aim", workload_degree=5).plan(SCHEMA, 100, epsilon=1.0)
    with pytest.raises(ValueError, match="max_cells=2 leaves no 3-way marginal"):
        synthesizers.create("aim", max_cells=2).plan(SCHEMA, 100, epsilon=1.0)
    with pytest.raises(ValueError, match=r"no field\(s\) \['model_cliques'\]"):  # a statistic of the release
        synthesizers.create("aim", model_cliques=((0, 1),))
    with pytest.raises(ValueError, match=r"no field\(s\) \['num_columns'\]"):  # d is the schema's
        synthesizers.create("aim", num_columns=4)


def test_missing_mbi_is_a_clear_error():
    code = (
        "import sys; sys.modules['mbi'] = None\n"
        "from dpgen_jax import synthesizers\n"
        "from tests import _tables\n"
        "print(synthesizers.get('aim').unavailable_reason())\n"
        "try:\n"
        "    synthesizers.create('aim').fit(_tables.mixed_frame(50, 0), _tables.MIXED_SCHEMA, epsilon=1.0)\n"
        "except ImportError as e:\n"
        "    print('ERR', e)\n")
    root = pathlib.Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env={"PYTHONPATH": str(root), "JAX_PLATFORMS": "cpu", "PATH": ""}, timeout=300)
    assert "mbi is not installed" in out.stdout and 'pip install "dpgen-jax[baselines]"' in out.stdout
    assert "ERR aim cannot fit here" in out.stdout, out.stderr


# -- fits (need mbi) --------------------------------------------------------------------------------


@needs_mbi
def test_model_marginals_agree_with_mbi():
    r = np.random.default_rng(1)
    sizes = (3, 4, 5)
    log = [((0,), r.uniform(5, 50, 3), 2.0), ((1,), r.uniform(5, 50, 4), 2.0), ((2,), r.uniform(5, 50, 5), 2.0),
           ((0, 1), r.uniform(0, 20, 12), 1.0), ((1, 2), r.uniform(0, 20, 20), 1.0)]
    model = aim.estimate(sizes, log, 200)
    pots = aim._potentials(model)
    for q in [(0, 1), (1, 2), (2,)]:
        expect = np.asarray(model.project(tuple(str(j) for j in q)).datavector(flatten=False))
        np.testing.assert_allclose(aim.model_marginal(pots, sizes, q, float(model.total)), expect, rtol=2e-4)
    assert aim.maximal_cliques(sizes, [c for c, _, _ in log]) == [(0, 1), (1, 2)]
    assert aim.model_size(sizes, [(0, 1), (1, 2)]) == pytest.approx(32 * 8 / 2**20)
    allowed = aim.filter_candidates({(0,): 1.0, (0, 2): 1.0, (0, 1): 1.0}, [(0,), (1,), (2,), (0, 1)], sizes, 1e-4)
    assert set(allowed) == {(0,), (0, 1)}  # (0, 2) would grow the model past 1e-4 MB


@needs_mbi
def test_non_private_fit_finds_and_keeps_a_strong_dependency():
    r = np.random.default_rng(0)
    a = r.choice(["x", "y", "z"], 2000, p=[0.5, 0.3, 0.2])
    frame = pd.DataFrame({"a": a, "b": np.where(a == "x", "q", "p").astype(object),
                          "c": r.integers(0, 100, 2000), "d": r.uniform(-1, 1, 2000)})
    converged = {**TINY, "estimation_iters": 500}  # the final estimate close enough to keep it
    model = synthesizers.create("aim", **converged).fit(frame, SCHEMA, epsilon=math.inf, seed=0)
    assert {0, 1} <= set(model.fitted_release.diagnostics["rounds"][0].clique)  # the worst-approximated marginal first
    s = model.sample(5000, seed=1)
    assert ((s["a"] == "x") == (s["b"] == "q")).mean() > 0.97


@needs_mbi
def test_private_fit_reports_rdp_and_the_units_of_every_round():
    model = synthesizers.create("aim", **TINY).fit(_tables.mixed_frame(400, 1), SCHEMA, epsilon=1.0, seed=0)
    rep = model.privacy_report()
    assert rep["accountant"] == "rdp" and rep["epsilon_by_accountant"]["pld"] is None
    assert [p["mechanism"] for p in rep["phases"]] == ["gaussian", "exponential_mechanism", "gaussian"]
    units = TINY["max_rounds"]
    assert [p["steps"] for p in rep["phases"]] == [1, units, units]
    assert rep["paper_accounting"]["epsilon"] <= rep["epsilon"] <= 1.0
    rounds = model.fitted_release.diagnostics["rounds"]
    assert sum(r.units for r in rounds) == units and any(
        f"{len(rounds)} rounds spent {units} of the {units}" in a for a in rep["assumptions"])
    cliques = aim.model_cliques(model.fitted_release.statistics)
    assert sorted({a for c in cliques for a in c}) == [0, 1, 2, 3]
    sizes = aim.discretizer(model.fitted_config, SCHEMA).sizes
    assert all(model.released["model"][f"c{i:03d}"].shape == tuple(sizes[a] for a in c)
               for i, c in enumerate(cliques))


def test_a_wide_table_has_a_workload_route():
    """More column subsets than are listed: the error names the option that exists
    (``workload_size``), which the configuration and ``--set`` accept; with it the workload is a
    public random subset of that size, the same for the same seed."""
    schema = data.binary_schema(150)  # C(150, 3) = 551,300 subsets, above the listing limit
    with pytest.raises(ValueError, match="workload_size"):
        synthesizers.create("aim").resolve_config(schema)
    values = synthesizers.config_overrides("aim", ["workload_size=40", "workload_seed=3"])
    config = synthesizers.create("aim", **values).resolve_config(schema)
    sizes = aim.discretizer(config, schema).sizes
    work = sm.workload(sizes, 3, config.max_cells, size=config.workload_size, seed=config.workload_seed)
    assert len(work) == 40 and work == sm.workload(sizes, 3, config.max_cells, size=40, seed=3)
