"""dpgen_jax.metrics on UCI Adult: the spec's mu table, the Table 3 real-data accuracy, the
report beside the published numbers, and (slow) the full evaluation with its timing."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from dpgen_jax import metrics
from dpgen_jax.data import adult_schema, load_adult

# dp-auto-gan §6.5 table: mu = exp(-1/(1-p1)), p1 over all 48,842 rows.
SPEC_MU = {
    "workclass": 0.0380032,
    "marital-status": 0.157919,
    "occupation": 0.318337,
    "relationship": 0.186949,
    "race": 0.00100921,
    "sex": 0.0489759,
    "native-country": 5.83587e-05,
    "salary": 0.0153112,
}


@pytest.fixture(scope="module")
def adult(adult_dir):
    train, test = load_adult(adult_dir)
    return train, test, adult_schema()


def test_adult_mu_matches_spec_table(adult):
    train, test, schema = adult
    reference = pd.concat([train, test], ignore_index=True)
    assert len(reference) == 48842
    div = metrics.diversity(reference, train, schema)
    for name, mu in SPEC_MU.items():
        # the table prints 6 significant digits
        assert div["mu"][name] == pytest.approx(mu, rel=1e-5), name
        assert metrics.published.ADULT_MU["value"][name] == mu
    assert div["total_features"] == list(metrics.PAPER_DIVERSITY_FEATURES)
    # train-only p1 gives a different mu (§6.5's last column): the reference matters
    train_only = metrics.diversity(train, train, schema)["mu"]["race"]
    assert train_only != pytest.approx(SPEC_MU["race"], rel=1e-3)


def test_adult_real_label_accuracy_size_4000(adult):
    """The notebook's real-data protocol: 800 trees, random_state 0, 4,000 shuffled training rows
    against the first 4,000 test rows. The paper reports 0.8453 for one unseeded shuffle; the
    spec's reruns over three shuffles gave 0.8488 / 0.8428 / 0.8395. The accuracy on 4,000 test
    rows has a binomial standard error of sqrt(0.85 * 0.15 / 4000) = 0.0056, so we accept the
    paper's value +- 2 SE (0.834 .. 0.857), which also covers the spread of the reruns."""
    train, test, schema = adult
    acc = metrics.label_accuracy(train, test, schema, size=4000, shuffle_seed=0)
    assert 0.8453 - 0.0115 <= acc <= 0.8453 + 0.0115


def test_adult_report_places_published_numbers(adult, tmp_path):
    train, test, schema = adult
    result = metrics.evaluate(
        train.iloc[:1500],
        test.iloc[:800],
        train.iloc[1500:3000],
        schema,
        n_triples=20,
        label_protocol=metrics.LabelAccuracyProtocol(n_estimators=40),
    )
    assert set(result["dimension_wise_prediction"]) | set(result["excluded"]) == set(schema.names)
    assert set(result["jsd"]) == {c.name for c in schema.columns if c.kind != "continuous"} | {"total"}
    assert result["jsd"]["total"] == pytest.approx(
        sum(result["jsd"][f] for f in metrics.PAPER_DIVERSITY_FEATURES)
    )
    written = metrics.write_report(
        result,
        tmp_path,
        real=(train.iloc[:1500], test.iloc[:800]),
        synthetic=train.iloc[1500:3000],
        schema=schema,
        epsilon=1.01,
    )
    md = written["summary.md"].read_text()
    assert "Published columns: DP-auto-GAN on Adult" in md
    for published in (
        "0.7466 / 0.7868 / 0.7919",
        "0.33 / 0.23 / 0.19",
        "0.81 / 0.48 / 0.53",
        "0.8519",
        "0.8453",
    ):
        assert published in md, published
    assert "| race |" in md and "0.021 / 0.014 / 0.016" in md
    assert json.loads(written["metrics.json"].read_text()) == result


@pytest.mark.slow
def test_full_adult_evaluation(adult, capsys):
    """Every metric on the full split with the real training rows as the 'synthetic' table
    (32,561 rows vs 16,281 test rows). Prints the wall time; the goal is < 60 s on 2 cores."""
    train, test, schema = adult
    t0 = time.perf_counter()
    result = metrics.evaluate(train, test, train, schema)
    elapsed = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\nfull Adult evaluate: {elapsed:.1f} s; per metric: {json.dumps(result['timings_s'])}")
    json.dumps(result, allow_nan=False)
    # §6.7: the full 32,561/16,281 split gives 0.8519 (a deterministic forest; sklearn versions
    # may move it by a few test rows).
    assert result["label_accuracy"]["real"] == pytest.approx(0.8519, abs=0.002)
    assert result["label_accuracy"]["synthetic"] == result["label_accuracy"]["real"]
    # §6.2 real-data dimension-wise scores ("agree with the notebook to about 0.01")
    for name, ref in metrics.published.DIMENSION_WISE_REAL["value"].items():
        assert result["dimension_wise_prediction"][name]["real"] == pytest.approx(ref, abs=0.01), name
    assert result["jsd"]["total"] < 1e-3 and result["kl_mu"]["total"] < 1e-3
    assert result["excluded"] == {} and result["nulls"] == {}
