"""Tests of the k-way marginal L1 on public bins: marginal_l1_2way against hand-computed values,
given pairs and triples (exactly the ones scored, bad names refused), the 3-way default left
unchanged, evaluate's key and options, and the planted structure of data.planted_binary."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data, metrics
from dpgen_jax.data import Column, Schema

#: Two integer columns (one heavy-tailed), three discrete ones and the binary label of Adult's
#: layout; rows from the licence-free stand-in data.adult_like.
COLUMNS = ("age", "capital-gain", "workclass", "race", "sex", "salary")
SCHEMA = Schema(tuple(data.adult_schema()[c] for c in COLUMNS))
FAST = metrics.LabelAccuracyProtocol(n_estimators=20)


@pytest.fixture(scope="module")
def real() -> pd.DataFrame:
    return data.adult_like(800, seed=1)[list(COLUMNS)]


def test_identical_frames_score_zero(real):
    for fn in (metrics.marginal_l1_2way, metrics.marginal_l1_3way):
        r = fn(real, real.iloc[::-1], SCHEMA)  # row order does not matter
        assert r["mean"] == 0.0 and r["max"] == 0.0
    r2 = metrics.marginal_l1_2way(real, real, SCHEMA)
    assert r2["n_pairs"] == 15 and r2["all_pairs"] and r2["seed"] is None and "given" not in r2
    # the same result shape as the 3-way one, "pairs" for "triples"
    r3 = metrics.marginal_l1_3way(real, real, SCHEMA)
    assert list(r2) == [k.replace("triples", "pairs") for k in r3]


def test_hand_computed_two_column_values():
    schema = data.binary_schema(2)
    real = pd.DataFrame({"x0": [0, 0, 1, 1], "x1": [0, 1, 1, 1]})  # cells 00 01 10 11: 1/4 1/4 0 1/2
    syn = pd.DataFrame({"x0": [0, 1], "x1": [0, 0]})  # 1/2 0 1/2 0
    assert metrics.marginal_l1_2way(real, syn, schema)["mean"] == pytest.approx(0.25 + 0.25 + 0.5 + 0.5)
    # a categorical and a continuous column on 2 public bins over [0, 10]: [0, 5) and [5, 10]
    mixed = Schema((Column("c", "categorical", categories=("a", "b", "c")),
                    Column("v", "continuous", lower=0.0, upper=10.0)))
    real = pd.DataFrame({"c": ["a", "a", "b", "c"], "v": [1.0, 7.0, 10.0, 2.0]})  # a0 a1 b1 c0
    syn = pd.DataFrame({"c": ["a", "b", "b", "c"], "v": [1.0, 9.0, 3.0, 6.0]})  # a0 b1 b0 c1
    r = metrics.marginal_l1_2way(real, syn, mixed, bins=2)
    assert r["mean"] == pytest.approx(4 * 0.25)  # a1, c0, b0, c1 each differ by 1/4
    assert r["n_pairs"] == 1 and r["worst"] == [{"features": ["c", "v"], "l1": r["mean"]}]
    assert r["spacing"] == {"v": "equal"} and r["bins"] == 2


def test_breaking_one_column_moves_only_its_pairs(real):
    """Rows permuted in one column: its dependence on every other column is broken, its 1-way
    marginal and every other joint are untouched."""
    syn = real.assign(sex=np.random.default_rng(0).permutation(real["sex"].to_numpy()))
    pairs = list(itertools.combinations(COLUMNS, 2))
    r = metrics.marginal_l1_2way(real, syn, SCHEMA, pairs=pairs)
    scores = {tuple(g["features"]): g["l1"] for g in r["given"]}
    for pair, score in scores.items():
        if "sex" in pair:
            assert score > 0.0, pair
        else:
            assert score == 0.0, pair
    assert r["all_pairs"] and r["mean"] == metrics.marginal_l1_2way(real, syn, SCHEMA)["mean"]
    assert metrics.total_variation_1way(real, syn, SCHEMA)["mean"] == 0.0
    assert all("sex" in g["features"] for g in r["worst"])


def test_given_pairs_and_triples_are_exactly_the_ones_scored(real):
    syn = data.adult_like(500, seed=7)[list(COLUMNS)]
    pairs = [("salary", "age"), ("race", "workclass"), ("sex", "capital-gain")]
    r = metrics.marginal_l1_2way(real, syn, SCHEMA, pairs=pairs, max_pairs=1, seed=9)  # cap, seed unused
    assert r["n_pairs"] == 3 and not r["all_pairs"] and r["seed"] is None
    assert [tuple(g["features"]) for g in r["given"]] == pairs
    for g in r["given"]:  # each score is that pair's own value
        assert g["l1"] == metrics.marginal_l1_2way(real, syn, SCHEMA, pairs=[g["features"]])["mean"]
    assert r["mean"] == pytest.approx(np.mean([g["l1"] for g in r["given"]]))
    assert {tuple(w["features"]) for w in r["worst"]} == set(pairs)
    triples = [("age", "sex", "salary"), ("workclass", "race", "capital-gain")]
    t = metrics.marginal_l1_3way(real, syn, SCHEMA, triples=triples)
    assert t["n_triples"] == 2 and [tuple(g["features"]) for g in t["given"]] == triples
    every = metrics.marginal_l1_3way(real, syn, SCHEMA)
    by_triple = {frozenset(w["features"]): w["l1"] for w in every["worst"]}
    for g in t["given"]:  # column order inside a tuple does not change the score
        again = metrics.marginal_l1_3way(real, syn, SCHEMA, triples=[tuple(reversed(g["features"]))])
        assert again["mean"] == pytest.approx(g["l1"], abs=1e-12)
        if frozenset(g["features"]) in by_triple:
            assert by_triple[frozenset(g["features"])] == pytest.approx(g["l1"], abs=1e-12)


def test_the_default_3way_result_is_unchanged(real):
    syn = data.adult_like(500, seed=7)[list(COLUMNS)]
    for kwargs in ({}, {"bins": 7, "spacing": "log"}, {"max_triples": 6, "seed": 4}):
        plain = metrics.marginal_l1_3way(real, syn, SCHEMA, **kwargs)
        assert metrics.marginal_l1_3way(real, syn, SCHEMA, triples=None, **kwargs) == plain
        assert "given" not in plain
    plain = metrics.marginal_l1_3way(real, syn, SCHEMA)
    assert plain["n_triples"] == 20 and plain["all_triples"] and plain["seed"] is None


def test_capped_pairs_are_drawn_with_the_seed():
    t = data.planted_binary(300, 40, seed=2)
    a, b = t.frame.iloc[:150], t.frame.iloc[150:]
    r = metrics.marginal_l1_2way(a, b, t.schema, max_pairs=25, seed=3)
    assert r["n_pairs"] == 25 and not r["all_pairs"] and r["seed"] == 3
    assert metrics.marginal_l1_2way(a, b, t.schema, max_pairs=25, seed=3) == r
    assert metrics.marginal_l1_2way(a, b, t.schema, max_pairs=25, seed=4)["mean"] != r["mean"]
    assert metrics.marginal_l1_2way(a, b, t.schema, max_pairs=780)["all_pairs"]  # C(40, 2) = 780


def test_bad_marginals_are_refused(real):
    fn2, fn3 = metrics.marginal_l1_2way, metrics.marginal_l1_3way
    for given, err, match in (
        ([("age", "nope")], ValueError, r"pairs\[0\] names 'nope', which the schema does not have"),
        ([("age", "sex"), ("Age", 3)], ValueError, r"pairs\[1\] names 'Age', 3"),
        ([("age",)], ValueError, r"pairs\[0\]=\('age',\) has 1 column\(s\); expected 2 column names"),
        ([("age", "sex", "race")], ValueError, "has 3 column.*expected 2"),
        ([("age", "age")], ValueError, "repeats a column; expected 2 distinct columns"),
        ([("age", "sex"), ("sex", "age")], ValueError, r"pairs\[1\].*is the marginal of pairs\[0\] again"),
        ([], ValueError, "pairs is empty"),
        ("age", TypeError, "pairs must be a sequence"),
        (["agesex"], TypeError, r"pairs\[0\]='agesex'; expected a tuple of 2 column names"),
    ):
        with pytest.raises(err, match=match):
            fn2(real, real, SCHEMA, pairs=given)
    with pytest.raises(ValueError, match=r"triples\[0\]=\('age', 'sex'\) has 2 column\(s\); expected 3"):
        fn3(real, real, SCHEMA, triples=[("age", "sex")])
    with pytest.raises(ValueError, match=r"triples\[0\] names 'salry'"):
        fn3(real, real, SCHEMA, triples=[("age", "sex", "salry")])
    with pytest.raises(ValueError, match="max_pairs=0"):
        fn2(real, real, SCHEMA, max_pairs=0)
    one = Schema((SCHEMA["sex"],))
    with pytest.raises(ValueError, match="a 2-way marginal needs at least 2 columns; the schema has 1"):
        fn2(real[["sex"]], real[["sex"]], one)


def test_evaluate_key_and_given_marginals(real):
    train, test = real.iloc[:500], real.iloc[500:]
    syn = data.adult_like(400, seed=7)[list(COLUMNS)]
    reference = pd.concat([train, test], ignore_index=True)
    options = {"n_triples": 5, "label_protocol": FAST, "marginal_bins": 10}
    r = metrics.evaluate(train, test, syn, SCHEMA, **options)
    assert r["marginal_l1_2way"] == metrics.marginal_l1_2way(reference, syn, SCHEMA, bins=10)
    assert r["marginal_l1_3way"] == metrics.marginal_l1_3way(reference, syn, SCHEMA, bins=10)
    assert "marginal_l1_2way" in r["timings_s"]
    md = metrics.summary_markdown(r)
    assert "2-way marginal L1 on public bins, mean of 15 pairs" in md
    pairs, triples = [("age", "salary")], [("sex", "race", "salary"), ("age", "workclass", "capital-gain")]
    g = metrics.evaluate(train, test, syn, SCHEMA, marginal_pairs=pairs, marginal_triples=triples,
                         reuse_real=r, **options)
    assert g["marginal_l1_2way"] == metrics.marginal_l1_2way(reference, syn, SCHEMA, bins=10, pairs=pairs)
    assert g["marginal_l1_3way"] == metrics.marginal_l1_3way(reference, syn, SCHEMA, bins=10, triples=triples)
    assert g["marginal_l1_3way"]["n_triples"] == 2 and g["tv_1way"] == r["tv_1way"]
    with pytest.raises(ValueError, match=r"marginal_pairs\[0\] names 'nope'"):
        metrics.evaluate(train, test, syn, SCHEMA, marginal_pairs=[("age", "nope")], **options)
    with pytest.raises(ValueError, match=r"marginal_triples\[0\]=\('age', 'sex'\) has 2"):
        metrics.evaluate(train, test, syn, SCHEMA, marginal_triples=[("age", "sex")], **options)


def test_planted_structure_is_seen_only_at_its_degree():
    """Columns shuffled independently keep every 1-way marginal: the planted pairs then score high
    on the 2-way L1, the planted triples on the 3-way L1, while the triples' own pairs stay at the
    sampling-noise level of unrelated pairs."""
    t = data.planted_binary(4000, 60, seed=0)
    rng = np.random.default_rng(1)
    independent = t.frame.apply(lambda col: rng.permutation(col.to_numpy()))
    planted_2 = metrics.marginal_l1_2way(t.frame, independent, t.schema, pairs=t.pairs)
    triple_pairs = [p for tr in t.triples for p in itertools.combinations(tr, 2)]
    hidden_2 = metrics.marginal_l1_2way(t.frame, independent, t.schema, pairs=triple_pairs)
    planted_3 = metrics.marginal_l1_3way(t.frame, independent, t.schema, triples=t.triples)
    assert planted_2["min"] > 0.6  # 1 - 2 flip = 0.8 of a fair coin pair
    assert planted_3["min"] > 0.6
    assert hidden_2["max"] < 0.15
