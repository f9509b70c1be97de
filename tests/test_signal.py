"""The public signal-to-noise rule of the marginal methods' schedules (``synthesizers._signal``) and
GEM's auto schedule built on it: monotone in N and epsilon, zero rounds on a tiny table, GEM's
default at Adult's size, the rule's noise against the calibrated plan's, and a zero-round fit that
releases the one-way histograms only, its report accounting for exactly what ran; without a public
N, the planned units split after the one-way release by its released total (``released_split``),
every path spending exactly the planned units."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from scipy import optimize

from dpgen_jax import data, privacy, synthesizers
from dpgen_jax.synthesizers import _signal
from dpgen_jax.synthesizers import gem
from dpgen_jax.synthesizers import RecordCount
from dpgen_jax.synthesizers.gem import GEMConfig
from tests import _tables

ADULT = gem.discretizer(GEMConfig(), data.model_schema(data.adult_schema())).sizes


def _rule(n, epsilon, sizes=ADULT, config=GEMConfig()):
    cfg = config.for_sizes(sizes)
    return cfg.signal(sizes, _signal.Target(n, epsilon, 1e-5))


def _brute_force(target, cells, noise_at, default, per_round, threshold):
    """The rule from its definition: every R from 1 to the default, the candidates whose expected
    count per cell N / cells is at least threshold sigma_R; the largest R with R k of them."""
    rho = optimize.brentq(lambda r: privacy.cks_epsilon(r, target.delta) - target.epsilon, 1e-12, 1e3, xtol=1e-14)
    best = 0
    for rounds in range(1, default + 1):
        sigma = noise_at(rounds) / math.sqrt(rho)
        if sum(target.n / c >= threshold * sigma for c in cells) >= rounds * per_round:
            best = rounds
    return best


def test_zcdp_budget_inverts_the_papers_conversion():
    for eps, delta in [(0.1, 1e-6), (1.0, 1e-5), (3.0, 1e-5), (20.0, 1e-3)]:
        rho = _signal.zcdp_budget(eps, delta)
        assert privacy.cks_epsilon(rho, delta) == pytest.approx(eps, rel=1e-6)
        # the classic conversion eps = rho + 2 sqrt(rho log(1 / delta)) is looser: a smaller rho
        classic = (math.sqrt(eps + math.log(1 / delta)) - math.sqrt(math.log(1 / delta)))**2
        assert rho >= classic


def test_rule_agrees_with_its_definition():
    cells = [4, 6, 10, 12, 20, 30, 45, 60, 64, 100, 160, 256, 512, 1024]
    def noise_at(rounds):
        return math.sqrt(2.0 * (rounds + 5.0))  # a unit split: rho 1 / (R + 5) per measurement
    for n in (50, 300, 1000, 5000, 40_000):
        for eps in (0.3, 1.0, 3.0):
            target = _signal.Target(n, eps, 1e-5)
            got = _signal.signal_schedule(target, cells, noise_at, 16, threshold=5.0, cell_threshold=2.0)
            assert got.rounds == _brute_force(target, cells, noise_at, 16, 1, 5.0), (n, eps)
            sigma = noise_at(max(got.rounds, 1)) / math.sqrt(got.rho)
            assert got.sigma == pytest.approx(sigma)
            assert got.max_cells == math.floor(n / (2.0 * sigma))
            assert got.measurable == sum(n / c >= 5.0 * sigma for c in cells)


def test_rounds_grow_with_n_and_epsilon_and_reach_the_default_at_adults_size():
    default = GEMConfig().for_sizes(ADULT).max_rounds
    grid = [(n, eps) for n in (100, 300, 800, 2000, 5000, 32_561) for eps in (0.3, 1.0, 3.0, 10.0)]
    got = {(n, eps): _rule(n, eps) for n, eps in grid}
    for (n, eps), rule in got.items():
        assert 0 <= rule.rounds <= default
        for m, e in grid:
            if m >= n and e >= eps:
                assert got[(m, e)].rounds >= rule.rounds, ((n, eps), (m, e))
                if got[(m, e)].rounds == rule.rounds:
                    assert got[(m, e)].max_cells >= rule.max_cells
    assert got[(32_561, 1.0)].rounds == got[(32_561, 3.0)].rounds == default  # Adult: the default
    assert got[(100, 0.3)].rounds == 0  # a tiny N x epsilon: no round is worth it
    assert 0 < got[(800, 1.0)].rounds < default


def test_the_rules_noise_is_the_calibrated_plans():
    """The rule's sigma at the rounds it chose is the calibrated measurement's noise (the plan's
    RDP calibration against the paper's zCDP conversion: within 15 %)."""
    for n, eps in [(800, 1.0), (5000, 3.0), (32_561, 1.0)]:
        rule = _rule(n, eps)
        plan = synthesizers.create("gem").plan(data.adult_schema(), n, epsilon=eps)
        steps = {p.name: p.steps for p in plan.phases}
        assert steps == {"one_way": 1, "selection": rule.rounds, "measure": rule.rounds}
        assert plan.phase("measure").noise_std == pytest.approx(rule.sigma, rel=0.15)
        assert plan.epsilon() == pytest.approx(eps, rel=1e-3)


def test_explicit_values_win_and_non_private_fits_keep_the_default():
    target = _signal.Target(100, 0.3, 1e-5)
    assert GEMConfig(max_rounds=7).for_sizes(ADULT, target).max_rounds == 7
    assert GEMConfig(max_rounds=7).for_sizes(ADULT, target).candidate_cells is None
    auto = GEMConfig().for_sizes(ADULT, _signal.Target(2000, 1.0, 1e-5))
    assert auto.candidate_cells == _rule(2000, 1.0).max_cells
    assert GEMConfig(candidate_cells=9).for_sizes(ADULT, _signal.Target(2000, 1.0, 1e-5)).candidate_cells == 9
    assert gem.target(RecordCount(100, True), math.inf, 1e-5, private=False) is None
    assert gem.target(RecordCount(100, False), 1.0, 1e-5, private=True) is None  # a private count sets nothing
    assert gem.target(RecordCount(100, True), 1.0, 1e-5, private=True) == _signal.Target(100, 1.0, 1e-5)
    plan = synthesizers.create("gem").plan(data.adult_schema(), 100, epsilon=math.inf)
    assert {p.name: p.steps for p in plan.phases}["measure"] == GEMConfig().for_sizes(ADULT).max_rounds
    with pytest.raises(ValueError, match="candidate_cells"):
        GEMConfig(candidate_cells=0).validate()


def test_a_zero_round_fit_spends_the_budget_on_the_one_way_release():
    """On 60 rows at epsilon 0.5 nothing of two columns is measurable: the plan has no selection or
    measurement, the one-way release spends all of epsilon, the report says so and accounts for
    exactly that, and every column is drawn from its released histogram (no measured edge)."""
    frame, schema = _tables.mixed_frame(60, 3), _tables.MIXED_SCHEMA
    model = synthesizers.create("gem", **{k: v for k, v in gem.GEM.SMOKE.items() if k != "max_rounds"})
    model.fit(frame, schema, epsilon=0.5, delta=1e-5, seed=0, num_records=60)
    report = model.privacy_report()
    steps = {p["name"]: p["steps"] for p in report["phases"]}
    assert steps == {"one_way": 1, "selection": 0, "measure": 0}
    assert report["epsilon"] == pytest.approx(0.5, rel=1e-3)
    alone = [privacy.GaussianPhase("one_way", model.fitted_plan.phase("one_way").noise_multiplier, 1,
                                   sensitivity=model.fitted_plan.phase("one_way").sensitivity)]
    assert privacy.epsilon(alone, 1e-5, accountant="rdp") == pytest.approx(0.5, rel=1e-3)
    assert any("no round ran" in a and "independent" in a for a in report["assumptions"])
    assert not any("treated as public" in a for a in report["assumptions"])  # N=60 is the user's
    assert not np.asarray(model.released["sampler"]["graph"]).any()
    assert model.fitted_release.diagnostics["rounds"] == []
    assert len(model.sample(50, seed=1)) == 50


def test_without_a_public_count_the_default_schedule_runs_and_no_count_is_used():
    """No num_records: the private row count sets nothing (the rule needs a public N), the default
    rounds are planned, and the report neither states nor assumes a row count."""
    frame, schema = _tables.mixed_frame(60, 3), _tables.MIXED_SCHEMA
    smoke = {k: v for k, v in gem.GEM.SMOKE.items() if k != "max_rounds"}
    model = synthesizers.create("gem", **smoke)
    model.fit(frame, schema, epsilon=0.5, delta=1e-5, seed=0)
    report = model.privacy_report()
    steps = {p["name"]: p["steps"] for p in report["phases"]}
    default = GEMConfig(**smoke).for_sizes(gem.discretizer(GEMConfig(**smoke), data.model_schema(schema)).sizes).max_rounds
    assert steps == {"one_way": 1, "selection": default, "measure": default}
    assert not any("treated as public" in a or "no round ran" in a for a in report["assumptions"])


def test_split_units_spend_exactly_the_units():
    for units in (1, 2, 5, 12, 32, 97):
        for rounds in range(0, units + 3):
            got = _signal.split_units(units, rounds)
            assert sum(got) == units and len(got) == min(max(rounds, 1), units)
            assert len(set(got[:-1])) <= 1 and got[-1] >= got[0]  # equal rounds, the last the remainder
    assert _signal.split_units(32, 5) == (6, 6, 6, 6, 8)
    assert _signal.split_units(32, 0) == (32,)  # nothing measurable: one round of every unit


def test_released_split_agrees_with_its_definition():
    """The rounds from the definition: the largest R (up to the units) with R candidates whose
    expected count per cell n / cells is at least threshold sigma_u / sqrt(units // R); 0 gives one
    round of every unit. More records never give fewer rounds."""
    cells = [4, 6, 10, 12, 20, 30, 45, 60, 64, 100, 160, 256, 512, 1024]
    for units in (1, 7, 32):
        previous = 0
        for n in (3.0, 40.0, 300.0, 1000.0, 5000.0, 40_000.0):
            got = _signal.released_split(n, cells, 6.0, units)
            best = max([r for r in range(1, units + 1)
                        if sum(n / c >= 5.0 * 6.0 / math.sqrt(units // r) for c in cells) >= r], default=0)
            assert got.rule_rounds == best, (units, n)
            assert got.units == _signal.split_units(units, best) and sum(got.units) == units
            sigma = 6.0 / math.sqrt(got.units[0])
            assert got.sigma == pytest.approx(sigma)
            assert got.max_cells == math.floor(n / (_signal.CELL_THRESHOLD * sigma))
            assert got.measurable == sum(n / c >= _signal.THRESHOLD * sigma for c in cells)
            assert best >= previous
            previous = best
    assert _signal.released_split(3.0, cells, 6.0, 32).units == (32,)
    with pytest.raises(ValueError, match="unit_sigma"):
        _signal.released_split(100.0, cells, 0.0, 32)


def _recomputed_epsilon(phases: dict, delta: float) -> float:
    """The epsilon of the executed phases with dp_accounting directly (a selection at epsilon_u is
    RDP as a Gaussian of noise multiplier 2 / epsilon_u)."""
    acc = RdpAccountant()
    acc.compose(dpa.GaussianDpEvent(phases["one_way"].noise_multiplier))
    acc.compose(dpa.GaussianDpEvent(phases["measure"].noise_multiplier), phases["measure"].steps)
    acc.compose(dpa.GaussianDpEvent(2.0 / phases["selection"].epsilon), phases["selection"].steps)
    return acc.get_epsilon(delta)


@pytest.mark.parametrize("rows, epsilon", [(12, 0.3), (150, 1.0), (1500, 3.0)])
def test_without_a_public_count_the_split_follows_the_released_total_and_spends_the_plan(rows, epsilon):
    """No num_records: the default units are planned, then split after the one-way release by its
    released total; on every table (a dozen rows to 1,500) and seed the rounds spend exactly the
    planned units, the split is the rule's on the released total, no candidate exceeds its largest
    marginal, and the report's epsilon is the target recomputed from the executed phases."""
    schema = _tables.MIXED_SCHEMA
    smoke = {k: v for k, v in gem.GEM.SMOKE.items() if k != "max_rounds"}
    cfg = GEMConfig(**smoke)
    sizes = gem.discretizer(cfg, data.model_schema(schema)).sizes
    planned = cfg.for_sizes(sizes).units()
    for seed in range(3):
        frame = _tables.mixed_frame(rows, seed)
        model = synthesizers.create("gem", **smoke).fit(frame, schema, epsilon=epsilon, delta=1e-5, seed=seed)
        release, plan = model.fitted_release, model.fitted_plan
        executed = release.diagnostics["rounds"]
        assert sum(r.units for r in executed) == planned
        split = _signal.released_split(release.diagnostics["total"], cfg.for_sizes(sizes).candidate_sizes(sizes),
                                       plan.phase("measure").noise_multiplier, planned)
        assert tuple(r.units for r in executed) == split.units
        assert all(math.prod(sizes[j] for j in c) <= max(1, split.max_cells)
                   for r in executed for c in r.cliques if len(c) > 1)
        phases = {p.name: p for p in model.fitted_phases()}
        assert phases["selection"].steps == phases["measure"].steps == planned
        report = model.privacy_report()
        assert report["epsilon"] == pytest.approx(_recomputed_epsilon(phases, 1e-5), rel=1e-6)
        assert report["epsilon"] == pytest.approx(epsilon, rel=1e-3)
        assert any("split after the one-way release" in a for a in report["assumptions"])


def test_explicit_rounds_or_anneal_keep_their_schedule():
    frame, schema = _tables.mixed_frame(150, 0), _tables.MIXED_SCHEMA
    smoke = {k: v for k, v in gem.GEM.SMOKE.items() if k != "max_rounds"}
    for extra, units in [(dict(max_rounds=5), [1] * 5), (dict(max_rounds=5, anneal=True), None)]:
        model = synthesizers.create("gem", **smoke, **extra).fit(frame, schema, epsilon=1.0, seed=0)
        got = [r.units for r in model.fitted_release.diagnostics["rounds"]]
        assert sum(got) == 5 and (units is None or got == units)
        assert not any("split after the one-way release" in a for a in model.fitted_release.notes)
    # An explicit candidate_cells is kept by the split (which still shares out the units).
    model = synthesizers.create("gem", **smoke, candidate_cells=9).fit(frame, schema, epsilon=1.0, seed=0)
    sizes = gem.discretizer(model.fitted_config, model.model_schema).sizes
    executed = model.fitted_release.diagnostics["rounds"]
    assert sum(r.units for r in executed) == GEMConfig(**smoke).for_sizes(sizes).units()
    assert all(math.prod(sizes[j] for j in c) <= 9 for r in executed for c in r.cliques if len(c) > 1)
    split = [a for a in model.fitted_release.notes if "split after the one-way release" in a]
    assert len(split) == 1 and "candidates of at most" not in split[0]
