"""The advice across table shapes and budgets (issue 51): evidence nearest in (log N, log columns,
column mix, log epsilon), interpolated between cells and marked as an extrapolation far from them;
scores named as the evidence tables' labels; ``independent`` first when nothing beats it; feasibility
from the plan and the measured time models; the held-out checks of docs/recommend.md. Everything but
the generated tables' facts reads only the shipped evidence and public plans."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from dpgen_jax import advice, data
from dpgen_jax.advice import (
    BENCHMARK_DATASETS,
    EXTRAPOLATION_DISTANCE,
    REFERENCE_METHOD,
    choose_method,
    format_recommendations,
    headline,
    leave_one_out,
    load_evidence,
    recommend,
)
from dpgen_jax.advice._datasets import GENERATED
from dpgen_jax.advice._feasibility import TERMS, _term, fit_time_models, time_models
from dpgen_jax.advice._recommend import MIX_WEIGHT, TIE, _point

NUMBER = re.compile(r"\d+\.\d+")


def _groups_of(dataset: str) -> set[float]:
    return {c["epsilon"] for c in load_evidence()["cells"] if c["dataset"] == dataset}


# -- where the evidence comes from ----------------------------------------------------------------


def test_the_distance_counts_the_column_mix():
    kinds_mixed = {"binary": 2, "categorical": 7, "continuous": 4}
    kinds_binary = {"binary": 13, "categorical": 0, "continuous": 0}
    a, b = _point(1000, kinds_mixed, 1.0), _point(1000, kinds_binary, 1.0)
    # same N, width and epsilon: the distance is the mix's, MIX_WEIGHT x the shares' Euclidean distance
    assert math.dist(a, b) == pytest.approx(MIX_WEIGHT * math.hypot(11 / 13, 4 / 13))
    # a binary table's evidence comes from the binary tables of the grid, not from Adult's shape
    ranked = {r.method: r for r in recommend(data.binary_schema(100), 1600, 1.0)}
    binary = {name for name, d in load_evidence()["datasets"].items() if d["kinds"]["binary"] == d["columns"]}
    assert binary, "the grid has binary tables"
    ran_binary = {c["method"] for c in load_evidence()["cells"] if c["dataset"] in binary}
    for r in ranked.values():
        if r.evidence is not None and r.method in ran_binary:
            assert r.evidence.groups[0][0] in binary, (r.method, r.evidence.groups)


def test_a_query_at_a_grid_group_uses_that_group_alone():
    ranked = recommend(data.adult_schema(), BENCHMARK_DATASETS["adult"].num_records, 1.01)
    gem = next(r for r in ranked if r.method == "gem").evidence
    assert gem.groups == (("adult", 1.01),) and gem.distances == (0.0,) and gem.weights == (1.0,)


def test_between_grid_groups_the_evidence_names_both_and_their_distances():
    eps = sorted(_groups_of("adult"))
    mid = math.sqrt(eps[0] * eps[1])  # halfway in log epsilon between Adult's two smallest budgets
    ranked = recommend(data.adult_schema(), BENCHMARK_DATASETS["adult"].num_records, mid)
    e = next(r for r in ranked if r.method == "mst").evidence
    assert set(e.groups) == {("adult", eps[0]), ("adult", eps[1])}
    assert e.distances[0] == pytest.approx(e.distances[1]) == pytest.approx(math.log(eps[1] / mid))
    assert sum(e.weights) == pytest.approx(1.0) and e.weights[0] == pytest.approx(0.5)
    text = e.describe(load_evidence()["datasets"])
    assert "between adult at epsilon" in text and f"distance {e.distances[0]:.2f}" in text
    # the score is the weighted mean of the two groups' ratios, from the cells themselves
    cells = load_evidence()["cells"]

    def median(method, epsilon):
        return float(np.median([c["l1_3way"] for c in cells if (c["dataset"], c["method"], c["epsilon"])
                                == ("adult", method, epsilon)]))

    expected = np.mean([median("mst", x) / median(REFERENCE_METHOD, x) for x in eps[:2]])
    assert e.score == pytest.approx(expected, rel=1e-12)


def test_far_from_every_cell_the_advice_says_it_extrapolates():
    ranked = recommend(data.binary_schema(3000), 200_000, 1.0, max_minutes=None)
    first = next(r for r in ranked if r.usable)
    assert first.evidence.distance > EXTRAPOLATION_DISTANCE and first.evidence.extrapolated
    assert "extrapolation" in first.reason
    assert "This is an extrapolation" in headline(ranked)
    near = recommend(data.adult_schema(), BENCHMARK_DATASETS["adult"].num_records, 1.01)
    assert "extrapolation" not in headline(near) and not near[0].evidence.extrapolated


def test_scores_are_named_as_the_evidence_tables_labels():
    ranked = recommend(data.adult_schema(), 5000, 1.0)
    first = ranked[0]
    labels = {load_evidence()["datasets"][ds]["label"] for ds, _ in first.evidence.groups}
    assert labels == {"salary"}
    assert "salary (the evidence tables' label, not yours)" in first.reason
    assert "not your table's label" in format_recommendations(ranked)
    datasets = load_evidence()["datasets"]
    binary = [r for r in recommend(data.binary_schema(100), 1600, 1.0) if r.evidence is not None
              and all(datasets[ds]["label"] is None for ds, _ in r.evidence.groups)]
    assert binary and all("no label in the evidence tables" in r.reason for r in binary)


# -- independent is a valid answer ----------------------------------------------------------------


def _medians(dataset: str, epsilon: float) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for c in load_evidence()["cells"]:
        if (c["dataset"], c["epsilon"]) == (dataset, epsilon):
            by.setdefault(c["method"], []).append(c["l1_3way"])
    return {m: float(np.median(v)) for m, v in by.items()}


def test_independent_first_where_nothing_measured_beats_it():
    """A grid group where every method's median 3-way L1 is at least independent's: queried at that
    group, independent is first and the headline says so."""
    groups = sorted({(c["dataset"], c["epsilon"]) for c in load_evidence()["cells"]})
    none_better = [(ds, eps) for ds, eps in groups
                   if all(v >= _medians(ds, eps)[REFERENCE_METHOD] for v in _medians(ds, eps).values())]
    assert none_better, "the grid holds a group where nothing beats independent"
    ds, eps = none_better[0]
    schema, n = BENCHMARK_DATASETS[ds].schema_for(False), BENCHMARK_DATASETS[ds].num_records
    ranked = recommend(schema, n, eps)
    rank = {r.method: r.rank for r in ranked}
    ref = next(r for r in ranked if r.method == REFERENCE_METHOD)
    assert ref.evidence.groups == ((ds, eps),) and ref.score == 1.0
    for m in _medians(ds, eps):  # every method measured there: its score at this group is >= 1
        assert rank[REFERENCE_METHOD] <= rank[m], (m, rank)
    if ranked[0].method == REFERENCE_METHOD:
        assert headline(ranked).startswith(f"No method's grid evidence beats {REFERENCE_METHOD} at this shape")
        assert choose_method(schema, n, eps) == REFERENCE_METHOD


@pytest.mark.slow
def test_independent_first_exactly_when_no_methods_evidence_beats_it():
    """At every grid group (about a minute of planning): independent first if and only if no usable,
    feasible, unflagged method's score is below 1."""
    ev = load_evidence()
    for ds, facts in ev["datasets"].items():
        schema = BENCHMARK_DATASETS[ds].schema_for(False)
        for eps in _groups_of(ds):
            ranked = recommend(schema, facts["num_records"], eps)
            usable = [r for r in ranked if r.usable and r.feasible and not r.flagged and r.score is not None]
            beats = [r for r in usable if r.score < 1.0 / (1 + TIE) and r.method != REFERENCE_METHOD]
            if beats:
                assert ranked[0].score < 1.0 and ranked[0].method != REFERENCE_METHOD
                assert headline(ranked).startswith(f"First choice: {ranked[0].method}")
            else:
                assert ranked[0].method == REFERENCE_METHOD
                assert headline(ranked).startswith(f"No method's grid evidence beats {REFERENCE_METHOD}")


# -- feasibility ----------------------------------------------------------------------------------


def test_a_time_model_recovers_a_known_law():
    """On times that are an exact nonnegative sum of the family's terms, the fit predicts them (and a
    new, larger shape) to within a per cent; a method with too few groups takes the family's model,
    rescaled to its own groups."""
    rng = np.random.default_rng(0)
    terms = TERMS["marginal"]
    truth = np.array([5.0, 2e-6, 3e-8, 1e-5, 0.0, 1e-4])

    def draw():
        return {"n": float(rng.integers(500, 10**6)), "columns": float(rng.integers(10, 300)),
                "width": float(rng.integers(10, 400)), "work": float(rng.integers(10, 10**5)), "shards": 0.0,
                "epsilon": float(rng.uniform(0.3, 10))}

    def seconds(f):
        return float(truth @ np.array([_term(t, f) for t in terms]))

    rows = [("m", ("t", float(i)), f, seconds(f)) for i, f in enumerate(draw() for _ in range(30))]
    few = [("few", ("t", 100.0 + i), f, 3.0 * seconds(f)) for i, f in enumerate(draw() for _ in range(2))]
    models = fit_time_models(rows + few, terms)
    assert max(max(r, 1 / r) for r in models["m"].ratios()) < 1.01
    new = draw()
    assert models["m"].predict(new) == pytest.approx(seconds(new), rel=0.01)
    assert models["few"].predict(new) == pytest.approx(3.0 * seconds(new), rel=0.02)
    assert fit_time_models(rows[:2], terms) == {}  # too few rows for any model


def test_infeasible_methods_are_listed_after_the_feasible_with_the_predicted_numbers():
    schema, n = data.adult_schema(), BENCHMARK_DATASETS["adult"].num_records
    models = time_models(load_evidence())
    tight = recommend(schema, n, 1.01, max_minutes=0.5)
    infeasible = [r for r in tight if r.usable and not r.feasible]
    assert infeasible, "some method needs more than 30 s on Adult"
    for r in infeasible:
        assert r.cost.seconds > 30 and "infeasible here: predicted fit" in r.reason and NUMBER.search(r.reason)
        assert r.method in models
    order = [(not r.usable) * 2 + (r.usable and not r.feasible) for r in tight]
    assert order == sorted(order)
    assert choose_method(schema, n, 1.01, max_minutes=0.5) not in {r.method for r in infeasible}
    assert "infeasible" in format_recommendations(tight)


def test_on_a_wide_binary_table_mst_is_predicted_near_its_fit_and_aim_cannot_plan():
    """A 1,058-column binary table: MST's predicted time is within 2x of its grid cell's measured
    fit on the 1,000-column table (1,110 s at N 1,600; a user's fit took 707 s), so it is feasible
    within 30 minutes; AIM cannot list its workload of 3-way marginals there (no plan)."""
    ranked = {r.method: r for r in recommend(data.binary_schema(1058), 2000, 3.0)}
    mst = ranked["mst"]
    cell = [c for c in load_evidence()["cells"] if c["dataset"] == "planted-binary" and c["method"] == "mst"]
    assert len(cell) == 1
    measured = cell[0]["fit_seconds"]
    assert measured / 2 < mst.cost.seconds < measured * 2 and mst.feasible, (mst.cost, measured)
    assert not ranked["aim"].usable and "workload" in ranked["aim"].unavailable
    first = next(r for r in ranked.values() if r.rank == 1)
    assert first.usable and first.feasible


# -- the held-out checks (docs/recommend.md) ------------------------------------------------------


def test_adult_small_held_out_meets_the_acceptance():
    """One table held out in the default run (the slow test below holds out every one)."""
    rows = leave_one_out(datasets=["adult-small"])
    assert {r.epsilon for r in rows} == _groups_of("adult-small")
    for r in rows:
        assert r.within_reference and r.within_best and not r.overran, r


@pytest.mark.slow
def test_leave_one_dataset_out_meets_the_acceptance():
    """Every grid group with its dataset held out (a few minutes of planning)."""
    held_out = leave_one_out()
    assert {(r.dataset, r.epsilon) for r in held_out} == {
        (ds, eps) for ds in load_evidence()["datasets"] for eps in _groups_of(ds)}
    for r in held_out:
        print(f"{r.dataset} at {r.epsilon:g}: {r.first} {r.first_l1:.4f}, best {r.best} {r.best_l1:.4f}, "
              f"independent {r.reference_l1:.4f}")
        assert not r.overran, r  # no method ranked feasible took longer than 30 minutes there
    # the misses docs/recommend.md names, and no other
    assert {(r.dataset, r.epsilon) for r in held_out if not r.within_best} == {
        ("cardio", 1.01), ("cardio", 10.0), ("cardio-like-3k", 1.0), ("adult-like-200k", 1.0)}
    assert {(r.dataset, r.epsilon) for r in held_out if not r.within_reference} == {("cardio-like-3k", 1.0)}


# -- the generated tables' public facts ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_tables_facts_match_their_loader(name):
    from experiments import _datasets

    g = GENERATED[name]
    if g.train_rows > 20_000:
        pytest.skip("large table: the same generator as its smaller siblings")
    train, test = _datasets.DATASETS[name].load(None, False)
    facts = BENCHMARK_DATASETS[name]
    assert (len(train), len(test)) == (g.train_rows, g.test_rows) == (facts.num_records, g.test_rows)
    if facts.label is not None:
        assert test[facts.label].value_counts(normalize=True).max() == pytest.approx(facts.majority_rate, abs=1e-12)
    else:
        assert facts.majority_rate is None and g.columns == train.shape[1]


def test_the_command_line_states_the_time_limit_and_the_headline(tmp_path, capsys):
    from dpgen_jax import cli

    schema_path = tmp_path / "schema.json"
    schema_path.write_text(data.adult_schema().to_json())
    argv = ["recommend", "--schema", str(schema_path), "--num-records", "32561", "--epsilon", "1.01"]
    assert cli.main(argv + ["--max-minutes", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "fits up to 0.5 minutes" in out and "infeasible" in out
    assert out.splitlines()[1] == headline(recommend(data.adult_schema(), 32561, 1.01, max_minutes=0.5))
    assert cli.main(argv + ["--max-minutes", "0"]) == 2
    assert "--max-minutes" in capsys.readouterr().err
