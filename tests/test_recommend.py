"""Method advice (``dpgen_jax.advice``): every registered method ranked with numeric reasons,
the unusable ones last; the first choice against the grid with the scored dataset left out; the
collapse flags of the sharded methods; the noise-to-signal ratio against the plan's own fields; the
shipped evidence against the committed leaderboard; the dataset facts against the benchmark's
loaders (one table of facts); the evidence shipped as package data; argument checks. Plans read no
data, so everything but the dataset-fact checks is public."""

from __future__ import annotations

import importlib.resources
import json
import math
import pathlib
import re
import statistics
import sys
import tomllib

import pytest

from dpgen_jax import data, privacy, synthesizers
from dpgen_jax.advice import (
    BENCHMARK_DATASETS,
    DPSGD,
    EVIDENCE_FILE,
    FAMILIES,
    SHARDED,
    build_evidence,
    choose_method,
    collapse_rules,
    evidence_path,
    format_recommendations,
    load_evidence,
    plan_summary,
    recommend,
    warn_if_flagged,
    write_evidence,
)
from dpgen_jax.advice._evidence import GRID_OVERRIDES
from dpgen_jax.advice._recommend import TIE

ROOT = pathlib.Path(__file__).resolve().parents[1]
LEADERBOARD = ROOT / "docs" / "results" / "leaderboard.json"
NUMBER = re.compile(r"\d+\.\d+")


@pytest.fixture(scope="module")
def board() -> dict:
    return json.loads(LEADERBOARD.read_text())


@pytest.fixture(scope="module")
def adult_schema():
    return data.adult_schema()


@pytest.fixture(scope="module")
def small(adult_schema):
    """The ranking for adult-small's shape (Adult's schema, N = 1,000) at epsilon 3, all evidence."""
    return recommend(adult_schema, 1000, 3.0)


def grid_medians(board: dict, dataset: str, epsilon: float) -> dict[str, float]:
    """method -> median over seeds of the 3-way L1 of the leaderboard's cells (dataset, epsilon)."""
    by: dict[str, list[float]] = {}
    for c in board["cells"]:
        if c["dataset"] == dataset and c["target_epsilon"] == epsilon and c["l1_3way"] is not None:
            by.setdefault(c["method"], []).append(c["l1_3way"])
    return {m: statistics.median(v) for m, v in by.items()}


# -- the ranking ---------------------------------------------------------------------------------


def test_ranks_every_registered_method_with_a_reason_in_numbers(small):
    assert sorted(r.method for r in small) == sorted(synthesizers.available())
    assert [r.rank for r in small] == list(range(1, len(small) + 1))
    for r in small:
        assert NUMBER.search(r.reason), r.reason
        assert str(r).startswith(f"{r.rank}. {r.method}")
    text = format_recommendations(small)
    assert all(r.method in text for r in small)
    # usable, feasible and not flagged, then flagged, then infeasible, then unusable
    groups = [3 if not r.usable else 2 if not r.feasible else int(r.flagged) for r in small]
    assert groups == sorted(groups)
    scored = [r.score for r in small if r.usable and r.feasible and not r.flagged and r.score is not None]
    # by score, except that a score within TIE of the best remaining one may come first (the faster fit)
    assert all(scored[i] <= min(scored[i:]) * (1 + TIE) for i in range(len(scored)))


def test_with_all_evidence_adult_small_advice_is_the_grids_own_best(small, board):
    """At distance 0 the evidence is the dataset's own cells: AIM first, as the grid shows."""
    medians = grid_medians(board, "adult-small", 3.0)
    assert small[0].method == min(medians, key=medians.get) == "aim"
    assert small[0].evidence.groups == (("adult-small", 3.0),) and small[0].evidence.distance == 0.0
    assert small[0].evidence.l1_3way == pytest.approx(medians["aim"])


def test_far_evidence_ranks_below_near_evidence_in_its_group():
    """On a 1,058-column binary table the grid's wide binary tables are near for some methods and
    far (beyond EXTRAPOLATION_DISTANCE) for others: among the usable, unflagged, feasible methods
    every one with near evidence ranks above every one whose evidence is far."""
    ranked = recommend(data.binary_schema(1058), 1670, 3.0)
    head = [r for r in ranked if r.usable and not r.flagged and r.cost.feasible and r.evidence is not None]
    far = [r.evidence.extrapolated for r in head]
    assert any(far) and not all(far)
    assert far == sorted(far), [(r.method, round(r.evidence.distance, 2)) for r in head]


def test_methods_that_cannot_plan_are_last_with_their_reason():
    schema = data.binary_schema(8)  # no label: DP-SYN cannot partition by it
    ranked = recommend(schema, 1000, 3.0)
    assert ranked[-1].method == "dp-syn" and not ranked[-1].usable and ranked[-1].plan is None
    assert "label" in ranked[-1].unavailable and "label" in ranked[-1].reason
    assert "[cannot be used here]" in str(ranked[-1])
    tiny = recommend(data.adult_schema(), 1000, 0.01)  # unreachable for the DP-SGD methods
    usable = [r.usable for r in tiny]
    assert usable == sorted(usable, reverse=True) and not all(usable)
    for r in tiny:
        if not r.usable:
            assert "unreachable" in r.unavailable and NUMBER.search(r.reason)


def test_a_method_missing_its_optional_package_is_last_with_the_reason(monkeypatch, adult_schema):
    monkeypatch.setitem(sys.modules, "mbi", None)  # as if mbi were not installed
    ranked = recommend(adult_schema, 1000, 3.0)
    last = {r.method: r for r in ranked[-2:]}
    assert set(last) == {"aim", "mst"}
    for r in last.values():
        assert not r.usable and "mbi" in r.unavailable and r.reason.startswith("cannot fit here")
    assert ranked[0].method == "gem"  # fits without mbi
    assert choose_method(adult_schema, 1000, 3.0) == "gem"


# -- collapse flags --------------------------------------------------------------------------------


@pytest.mark.parametrize("exclude", [(), ("adult-small",)])
def test_sharded_gs_wgan_is_flagged_on_adult_small_at_epsilon_3(adult_schema, exclude):
    ranked = {r.method: r for r in recommend(adult_schema, 1000, 3.0, exclude_datasets=exclude)}
    rules = collapse_rules(exclude)
    r = ranked["gs-wgan"]
    sigma = r.plan.statistic(SHARDED)
    assert r.flagged and sigma >= rules[SHARDED].threshold, (sigma, rules[SHARDED])
    assert "likely to collapse" in r.reason and NUMBER.search(r.reason)
    # DP-SACTGAN's default is the critic mechanism: a DP-SGD plan, judged by the DP-SGD rule
    assert synthesizers.create("dp-sactgan").resolve_config(adult_schema).mechanism == "critic"
    sact = ranked["dp-sactgan"]
    assert sact.plan.statistic(SHARDED) is None
    assert sact.flagged == rules[DPSGD].flags(sact.plan.statistic(DPSGD))
    assert not ranked["aim"].flagged and not ranked["gem"].flagged


def test_collapse_rules_separate_the_grid_as_documented():
    rules = collapse_rules()
    dpsgd, sharded = rules[DPSGD], rules[SHARDED]
    # DP-SGD (docs/recommend.md): DP-SYN on the heaped cardio-like table at epsilon 1 is the largest
    # plan that learned, DP-VAE on adult-small at 1 the smallest that collapsed above it; the
    # threshold is their geometric mean. No capped group enters a rule.
    assert (dpsgd.learned_max.method, dpsgd.learned_max.dataset, dpsgd.learned_max.epsilon) == \
        ("dp-syn", "cardio-like-3k", 1.0)
    assert (dpsgd.collapsed_min.method, dpsgd.collapsed_min.dataset, dpsgd.collapsed_min.epsilon) == \
        ("dp-vae", "adult-small", 1.0)
    assert dpsgd.threshold == pytest.approx(math.sqrt(dpsgd.learned_max.value * dpsgd.collapsed_min.value))
    assert dpsgd.threshold == pytest.approx(0.0039, rel=0.02)
    capped = {(c["dataset"], c["method"], c["epsilon"]) for c in load_evidence()["cells"] if c["capped"]}
    assert not any((p.dataset, p.method, p.epsilon) in capped for rule in rules.values() for p in rule.points)
    # sharded: every grid plan collapsed; the smallest noise multiplier is GS-WGAN's on cardio at 10
    assert sharded.learned_max is None and all(p.collapsed for p in sharded.points)
    assert sharded.threshold == min(p.value for p in sharded.points) == pytest.approx(10.76, rel=0.01)
    for rule in rules.values():
        assert not any(rule.flags(p.value) for p in rule.points if not p.collapsed)
        assert NUMBER.search(rule.describe())


def test_fit_warning_names_a_better_choice(adult_schema, small):
    text = warn_if_flagged("gs-wgan", adult_schema, 1000, 3.0)
    assert text.startswith("gs-wgan at N 1,000 and epsilon 3 is likely to collapse")
    assert f"A better choice: {small[0].method}" in text and NUMBER.search(text)
    assert warn_if_flagged("aim", adult_schema, 1000, 3.0) is None
    # the fit's own overrides are planned: one generator step needs a noise multiplier of about 7, below
    # every sharded plan of the grid (all of which collapsed)
    one_step = {"generator_steps": 1}
    assert plan_summary("gs-wgan", adult_schema, 1000, 3.0, overrides=one_step).statistic(SHARDED) < 9.9
    assert warn_if_flagged("gs-wgan", adult_schema, 1000, 3.0, overrides=one_step) is None
    assert choose_method(adult_schema, 1000, 3.0) == small[0].method == "aim"
    with pytest.raises(ValueError, match="Unknown method 'nope'"):
        warn_if_flagged("nope", adult_schema, 1000, 3.0)


# -- the plan's numbers against the plan's own fields ----------------------------------------------


@pytest.mark.parametrize("method", ["dp-auto-gan", "dp-wgan"])
def test_noise_to_signal_against_the_phase_fields(adult_schema, small, method):
    plan = synthesizers.create(method).plan(adult_schema, 1000, epsilon=3.0)
    phases = [p for p in privacy.flat_phases(plan.phases) if isinstance(p, privacy.DPSGDPhase)]
    mine = {p.name: p for p in next(r for r in small if r.method == method).plan.phases}
    assert phases and set(mine) >= {p.name for p in phases}
    over = []
    for p in phases:
        expected = p.noise_multiplier / (p.sample_rate * 1000)  # sigma * C / (q N C)
        assert mine[p.name].noise_to_signal == pytest.approx(expected, rel=1e-9)
        assert mine[p.name].steps == p.steps
        assert mine[p.name].phase_noise_to_signal == pytest.approx(expected / math.sqrt(p.steps), rel=1e-9)
        assert f"{mine[p.name].noise_to_signal:.3g}" in next(r for r in small if r.method == method).reason
        over.append(expected / math.sqrt(p.steps))
    assert plan_summary(method, adult_schema, 1000, 3.0).statistic(DPSGD) == pytest.approx(max(over), rel=1e-9)


def test_sharded_noise_multiplier_is_the_proven_plans_sigma(adult_schema, small):
    plan = synthesizers.create("gs-wgan").plan(adult_schema, 1000, epsilon=3.0)
    (phase,) = [p for p in plan.phases if isinstance(p, privacy.ShardedSanitizerPhase)]
    assert phase.accounting == "proven"
    assert next(r for r in small if r.method == "gs-wgan").plan.statistic(SHARDED) == phase.noise_multiplier


# -- the evidence file -----------------------------------------------------------------------------


def test_shipped_evidence_equals_what_the_leaderboard_gives(board, adult_schema):
    shipped = load_evidence()
    assert {k: v for k, v in shipped.items() if k != "plans"} == build_evidence(board, plans=False)
    groups = {(c["dataset"], c["method"], float(c["target_epsilon"])) for c in board["cells"] if not c.get("quick")}
    assert {(p["dataset"], p["method"], p["epsilon"]) for p in shipped["plans"]} == groups
    # the plan statistics of the groups planned above (cached), against fresh plans
    for p in shipped["plans"]:
        if (p["dataset"], p["epsilon"]) in {("adult-small", 3.0), ("adult", 1.01)}:
            facts = BENCHMARK_DATASETS[p["dataset"]]
            cell = (p["dataset"], p["method"], p["epsilon"])
            summary = plan_summary(p["method"], facts.schema_for(), facts.num_records, p["epsilon"],
                                   overrides=GRID_OVERRIDES.get(cell))  # as the cells ran
            for family in FAMILIES:
                fresh = summary.statistic(family)
                assert p[family] == (None if fresh is None else pytest.approx(fresh, rel=1e-6)), (p, family)


@pytest.mark.slow
def test_shipped_evidence_equals_a_full_regeneration(board, tmp_path):
    """Plans every group of the grid (about two minutes)."""
    path = write_evidence(LEADERBOARD, tmp_path / "evidence.json")
    fresh, shipped = json.loads(path.read_text()), load_evidence()
    assert {k: v for k, v in fresh.items() if k != "plans"} == {k: v for k, v in shipped.items() if k != "plans"}
    for a, b in zip(fresh["plans"], shipped["plans"], strict=True):
        assert {k: v for k, v in a.items() if k not in FAMILIES} == {k: v for k, v in b.items() if k not in FAMILIES}
        for family in FAMILIES:
            assert a[family] == (None if b[family] is None else pytest.approx(b[family], rel=1e-6)), (a, family)


def test_the_benchmark_reads_the_one_table_of_dataset_facts():
    """Each built-in dataset is registered once: its facts here, its loader in experiments/_datasets.py."""
    from experiments import _datasets

    assert set(_datasets.LOADERS) == set(BENCHMARK_DATASETS)
    for name, facts in BENCHMARK_DATASETS.items():
        ds = _datasets.DATASETS[name]
        assert (ds.name, ds.description, ds.schema) == (name, facts.description, facts.schema)
        assert ds.label == facts.label
        assert ds.schema_for(True) == facts.schema_for(True) and ds.schema_for(False) == facts.schema_for(False)
    shipped = load_evidence()["datasets"]
    assert all(BENCHMARK_DATASETS[name].num_records == d["num_records"] for name, d in shipped.items())
    assert shipped["adult"]["columns"] == 13 and shipped["cardio"]["columns"] == 12
    with pytest.raises(ValueError, match="'adult-like'"):  # no recorded N or majority rate
        build_evidence({"cells": [{"dataset": "adult-like"}]}, plans=False)


def test_the_evidence_ships_as_package_data():
    """The evidence is read through importlib.resources (as from an installed package), and
    pyproject.toml ships it with the package."""
    resource = importlib.resources.files("dpgen_jax.advice") / EVIDENCE_FILE
    assert resource.is_file() and json.loads(resource.read_text()) == load_evidence()
    assert evidence_path() == pathlib.Path(str(resource))
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert package_data["dpgen_jax.advice"] == [EVIDENCE_FILE]
    assert not any(EVIDENCE_FILE in files for pkg, files in package_data.items() if pkg != "dpgen_jax.advice")


def test_dataset_facts_match_the_data(adult_dir, cardio_path):
    train, test = data.load_adult(adult_dir)
    assert len(train) == BENCHMARK_DATASETS["adult"].num_records
    from experiments import _datasets

    small, _ = _datasets.DATASETS["adult-small"].load(adult_dir, False)
    assert len(small) == BENCHMARK_DATASETS["adult-small"].num_records
    assert test["salary"].value_counts(normalize=True).max() == pytest.approx(
        BENCHMARK_DATASETS["adult"].majority_rate, abs=1e-12)
    train, _, test = data.cardio_split(data.load_cardio(cardio_path))
    assert len(train) == BENCHMARK_DATASETS["cardio"].num_records
    assert test["cardio"].value_counts(normalize=True).max() == pytest.approx(
        BENCHMARK_DATASETS["cardio"].majority_rate, abs=1e-12)


# -- argument checks ------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, error, name", [
    ({"schema": {"age": "continuous"}}, TypeError, "schema"),
    ({"num_records": 0}, ValueError, "num_records"),
    ({"num_records": 1000.0}, TypeError, "num_records"),
    ({"num_records": True}, TypeError, "num_records"),
    ({"epsilon": 0.0}, ValueError, "epsilon"),
    ({"epsilon": -1.0}, ValueError, "epsilon"),
    ({"epsilon": math.inf}, ValueError, "epsilon"),
    ({"epsilon": math.nan}, ValueError, "epsilon"),
    ({"epsilon": "3"}, TypeError, "epsilon"),
    ({"delta": 1.0}, ValueError, "delta"),
    ({"exclude_datasets": "adult"}, TypeError, "exclude_datasets"),
    ({"exclude_datasets": ("census",)}, ValueError, "exclude_datasets"),
])
def test_bad_arguments_are_refused_naming_the_argument(adult_schema, kwargs, error, name):
    args = {"schema": adult_schema, "num_records": 1000, "epsilon": 3.0, **kwargs}
    with pytest.raises(error, match=name):
        recommend(args.pop("schema"), args.pop("num_records"), args.pop("epsilon"), **args)
