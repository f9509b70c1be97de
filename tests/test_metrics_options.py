"""Each metric owns its options: evaluate routes each keyword to the metrics that declare it."""

from __future__ import annotations

import pathlib

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import metrics
from dpgen_jax.data import Schema
from dpgen_jax.metrics._registry import route_options

SCHEMA = Schema.from_dict({"columns": [
    {"name": "a", "kind": "binary", "categories": ["0", "1"]},
    {"name": "b", "kind": "categorical", "categories": ["x", "y", "z"]},
    {"name": "c", "kind": "continuous", "lower": 0, "upper": 1},
    {"name": "y", "kind": "binary", "categories": ["no", "yes"], "label": True},
]})


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.choice(["0", "1"], n), "b": rng.choice(["x", "y", "z"], n),
                         "c": rng.random(n), "y": rng.choice(["no", "yes"], n)})


def test_every_option_is_declared_by_its_metrics_and_named_in_the_docs():
    routed = route_options({}, SCHEMA)
    assert set(routed) == {m.name for m in metrics.METRICS}
    for metric in metrics.METRICS:
        assert set(routed[metric.name]) == {o.name for o in metric.options}
    assert routed["tstr_auroc"] == {"tune_tstr": False}
    assert routed["three_way_marginal"] == {"n_triples": 100}
    docs = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text()
    assert [o.name for m in metrics.METRICS for o in m.options if f"`{o.name}`" not in docs] == []


def test_a_keyword_is_routed_to_every_metric_that_declares_it_and_checked():
    routed = route_options({"marginal_bins": 7, "n_jobs": 1, "marginal_pairs": [["a", "b"]]}, SCHEMA)
    assert routed["tv_1way_marginal_l1_3way"]["marginal_bins"] == routed["marginal_l1_2way"]["marginal_bins"] == 7
    assert routed["dimension_wise_prediction"]["n_jobs"] == routed["label_accuracy"]["n_jobs"] == 1
    assert routed["marginal_l1_2way"]["marginal_pairs"] == (("a", "b"),)
    assert isinstance(routed["label_accuracy"]["label_protocol"], metrics.LabelAccuracyProtocol)
    with pytest.raises(ValueError, match="marginal_bins"):
        route_options({"marginal_bins": 0}, SCHEMA)
    with pytest.raises(ValueError, match="nope"):
        route_options({"marginal_pairs": [["a", "nope"]]}, SCHEMA)
    with pytest.raises(TypeError, match="label_protocol must be a LabelAccuracyProtocol"):
        route_options({"label_protocol": 3}, SCHEMA)


def test_an_unknown_option_is_named_with_every_known_one_and_its_metrics():
    df = _frame(60, 0)
    with pytest.raises(TypeError, match=r"unknown option 'n_tripels'.*n_triples \(three_way_marginal\)") as err:
        metrics.evaluate(df, df, df, SCHEMA, n_tripels=5)
    assert "marginal_bins (tv_1way_marginal_l1_3way, marginal_l1_2way)" in str(err.value)


def test_a_new_metric_brings_its_own_option():
    saved = list(metrics.METRICS)
    try:
        metrics.register_metric(metrics.Metric(
            "toy_rows", ("toy_rows",),
            lambda inputs, nulls: {"toy_rows": len(inputs.synthetic) * inputs.options["toy_rows"]["toy_scale"]},
            options=(metrics.Option("toy_scale", 1),), rank=1000))
        df = _frame(40, 1)
        kw = {"n_jobs": 1, "n_triples": 2, "label_protocol": metrics.LabelAccuracyProtocol(n_estimators=5)}
        assert metrics.evaluate(df, df, df, SCHEMA, **kw)["toy_rows"] == 40
        assert metrics.evaluate(df, df, df, SCHEMA, toy_scale=3, **kw)["toy_rows"] == 120
        with pytest.raises(ValueError, match="declares the option 'n_jobs' with the default 2"):
            metrics.register_metric(metrics.Metric("toy_jobs", ("toy_jobs",), lambda i, n: {},
                                                   options=(metrics.Option("n_jobs", 2),)))
    finally:
        metrics.METRICS[:] = saved
