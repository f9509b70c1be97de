"""Tests of dpgen_jax.metrics.evaluate and its metrics on small frames: scores against sklearn
called directly, identical, disjoint and constant synthetic data, edge cases, bad input and the
report. The divergences and the 3-way marginal against scipy and slow references are in
test_metrics_definitions.py; Adult-based checks are in test_metrics_adult.py."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon as scipy_js
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import Lasso, LogisticRegression
from sklearn.metrics import f1_score, r2_score, roc_auc_score

from dpgen_jax import metrics
from dpgen_jax.data import ADULT_COLUMNS, Schema, binary_schema, mimic_like

LN2 = math.log(2.0)

SCHEMA = Schema.from_dict(
    {
        "columns": [
            {"name": "num", "kind": "continuous", "lower": 0, "upper": 100},
            {"name": "count", "kind": "continuous", "lower": 0, "upper": 50, "integer": True},
            {"name": "color", "kind": "categorical", "categories": ["?", "blue", "green", "red"]},
            {"name": "size", "kind": "categorical", "categories": ["L", "M", "S"]},
            {"name": "flag", "kind": "binary", "categories": ["no", "yes"]},
            {"name": "y", "kind": "binary", "categories": ["neg", "pos"], "label": True},
        ]
    }
)


#: Fewer trees where a test is not about the Table 3 forest itself (its default, 800, is tested on
#: Adult in test_metrics_adult.py); keeps the default test run short.
FAST = metrics.LabelAccuracyProtocol(n_estimators=40)


def make_frame(n: int, seed: int) -> pd.DataFrame:
    """Mixed rows with real dependencies, so every model has some signal."""
    rng = np.random.default_rng(seed)
    color = rng.choice(["blue", "green", "red"], size=n, p=[0.5, 0.3, 0.2])
    num = np.clip(rng.normal(40, 15, n) + 25 * (color == "red"), 0, 100)
    count = np.clip(np.round(num / 3 + rng.normal(0, 3, n)), 0, 50)
    size = np.where(num > 55, "L", np.where(rng.random(n) < 0.5, "M", "S"))
    flag = np.where(rng.random(n) < 0.3 + 0.4 * (size == "L"), "yes", "no")
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-(num - 50) / 8)), "pos", "neg")
    return pd.DataFrame({"num": num, "count": count, "color": color, "size": size, "flag": flag, "y": y})


@pytest.fixture(scope="module")
def frames():
    return make_frame(500, 1), make_frame(300, 2), make_frame(400, 3)


def onehot(df: pd.DataFrame, schema: Schema, drop: str | None = None) -> np.ndarray:
    """Independent encoding straight from the schema (one-hot / 0-1 / min-max), for references."""
    parts = []
    for c in schema.columns:
        if c.name == drop:
            continue
        if c.kind == "continuous":
            parts.append(((df[c.name].to_numpy(float) - c.lower) / (c.upper - c.lower))[:, None])
        elif c.kind == "binary":
            parts.append((df[c.name].to_numpy() == c.categories[1]).astype(float)[:, None])
        else:
            parts.append(np.stack([(df[c.name].to_numpy() == k).astype(float) for k in c.categories], axis=1))
    return np.hstack(parts).astype(np.float32)


def codes(df: pd.DataFrame, schema: Schema, name: str) -> np.ndarray:
    c = schema[name]
    if c.kind == "continuous":
        return df[name].to_numpy(float)
    return pd.Categorical(df[name], categories=list(c.categories)).codes.astype(int)

# -- evaluate: identical, disjoint and constant synthetic data -------------------------------------
@pytest.fixture(scope="module")
def identical_result(frames):
    df = frames[0]
    return metrics.evaluate(df, df, df, SCHEMA, n_triples=20, label_protocol=FAST)


def test_identical_data_zero_divergence_equal_scores(identical_result):
    r = identical_result
    json.dumps(r, allow_nan=False)
    assert set(r["jsd"]) == {"color", "size", "flag", "y", "total"}
    assert all(v == 0.0 for v in r["jsd"].values())
    assert all(v == 0.0 for v in r["kl_mu"].values())
    assert r["three_way_marginal"]["mean"] == 0.0
    assert all(m["total_variation"] == 0.0 for m in r["marginals"].values())
    assert set(r["dimension_wise_prediction"]) == set(SCHEMA.names)
    for s in r["dimension_wise_prediction"].values():
        assert s["real"] == s["synthetic"] and s["flag"] is None
    assert r["label_accuracy"]["real"] == r["label_accuracy"]["synthetic"]
    assert r["tstr_auroc"]["real"] == r["tstr_auroc"]["synthetic"]
    assert r["pca"]["real_mean"] == pytest.approx(r["pca"]["synthetic_mean"], abs=1e-12)
    assert r["excluded"] == {} and r["nulls"] == {}
    assert r["dimension_wise_summary"]["mean_distance_from_diagonal"] == {
        "r2": 0.0,
        "f1_micro": 0.0,
        "f1_binary": 0.0,
    }
    assert r["diversity_total_features"] == ["color", "size", "flag", "y"]
    assert "dimension_wise_probability" not in r  # mixed schema


def test_metrics_match_direct_sklearn(frames):
    train, test, syn = frames
    r = metrics.dimension_wise_prediction(train, test, syn, SCHEMA, seed=0)
    assert r["excluded"] == {}
    # RF F1 (micro) on a categorical target, from an independent encoding
    for name, average in (("color", "micro"), ("flag", "binary")):
        rf = RandomForestClassifier(n_estimators=10, random_state=0, n_jobs=1)
        rf.fit(onehot(syn, SCHEMA, drop=name), codes(syn, SCHEMA, name))
        ref = f1_score(
            codes(test, SCHEMA, name), rf.predict(onehot(test, SCHEMA, drop=name)), average=average
        )
        assert r["scores"][name]["synthetic"] == pytest.approx(ref, abs=1e-12)
        assert r["scores"][name]["metric"] == f"f1_{average}"
    # Lasso R^2 on a raw-scale continuous target
    lasso = Lasso(alpha=1.0).fit(onehot(train, SCHEMA, drop="num"), codes(train, SCHEMA, "num"))
    ref = r2_score(codes(test, SCHEMA, "num"), lasso.predict(onehot(test, SCHEMA, drop="num")))
    assert r["scores"]["num"]["real"] == pytest.approx(ref, rel=1e-6)
    # Table 3 forest on integer codes
    x_cols = [n for n in SCHEMA.names if n != "y"]
    x_tr = np.stack([codes(syn, SCHEMA, n) for n in x_cols], axis=1)
    x_te = np.stack([codes(test, SCHEMA, n) for n in x_cols], axis=1)
    rf = RandomForestClassifier(n_estimators=100, random_state=0, n_jobs=1).fit(x_tr, codes(syn, SCHEMA, "y"))
    ref = np.mean(rf.predict(x_te) == codes(test, SCHEMA, "y"))
    assert metrics.label_accuracy(syn, test, SCHEMA, n_estimators=100) == ref
    assert metrics.LabelAccuracyProtocol().n_estimators == 800  # the paper's forest is the default
    # TSTR logistic regression
    lr = LogisticRegression(solver="liblinear", random_state=0).fit(
        onehot(syn, SCHEMA, drop="y"), codes(syn, SCHEMA, "y")
    )
    ref = roc_auc_score(codes(test, SCHEMA, "y"), lr.predict_proba(onehot(test, SCHEMA, drop="y"))[:, 1])
    assert metrics.tstr_auroc(syn, test, SCHEMA) == pytest.approx(ref, abs=1e-12)


def test_tstr_tuned_selects_best_validation_config(frames):
    train, test, syn = frames
    from sklearn.model_selection import train_test_split

    x, y = onehot(syn, SCHEMA, drop="y"), codes(syn, SCHEMA, "y")
    x_fit, x_val, y_fit, y_val = train_test_split(x, y, test_size=1 / 9, stratify=y, random_state=4)
    best = None
    for l1_ratio in (1.0, 0.0):  # l1 first, then l2, C ascending: first best wins
        for c in np.logspace(-4, 0, 20):
            lr = LogisticRegression(solver="liblinear", C=c, l1_ratio=l1_ratio, random_state=0).fit(
                x_fit, y_fit
            )
            auc = roc_auc_score(y_val, lr.predict_proba(x_val)[:, 1])
            if best is None or auc > best[0]:
                best = (auc, c, l1_ratio)
    lr = LogisticRegression(solver="liblinear", C=best[1], l1_ratio=best[2], random_state=0).fit(x, y)
    ref = roc_auc_score(codes(test, SCHEMA, "y"), lr.predict_proba(onehot(test, SCHEMA, drop="y"))[:, 1])
    assert metrics.tstr_auroc(syn, test, SCHEMA, tune=True, seed=4) == pytest.approx(ref, abs=1e-12)


def test_label_accuracy_size_and_shuffle_protocol(frames):
    train, test, _ = frames
    kw = {"n_estimators": 50}
    assert metrics.label_accuracy(train, test, SCHEMA, size=120, **kw) == metrics.label_accuracy(
        train.iloc[:120], test.iloc[:120], SCHEMA, **kw
    )
    perm = np.random.default_rng(7).permutation(len(train))
    assert metrics.label_accuracy(
        train, test, SCHEMA, shuffle_seed=7, size=150, **kw
    ) == metrics.label_accuracy(train.iloc[perm[:150]], test.iloc[:150], SCHEMA, **kw)
    # a size larger than the frames keeps them whole, as the notebook's slicing does
    assert metrics.label_accuracy(train, test, SCHEMA, size=10**6, **kw) == metrics.label_accuracy(
        train, test, SCHEMA, **kw
    )


def test_disjoint_and_constant_synthetic(frames):
    train, test, syn = frames
    syn = syn.copy()
    syn["color"] = "?"  # a schema category the real data never uses: disjoint support
    syn["size"] = "M"  # one real category only
    syn["y"] = "neg"  # constant label
    r = metrics.evaluate(train, test, syn, SCHEMA, n_triples=10, label_protocol=FAST)
    json.dumps(r, allow_nan=False)
    assert r["jsd"]["color"] == pytest.approx(LN2 / 2, rel=1e-12)
    ref = pd.concat([train, test])
    p_size = ref["size"].value_counts(normalize=True).reindex(["L", "M", "S"]).to_numpy()
    assert r["jsd"]["size"] == pytest.approx(scipy_js(p_size, [0.0, 1.0, 0.0]) ** 2, rel=1e-12)
    assert r["mu"]["size"] == pytest.approx(math.exp(-1 / (1 - p_size.max())), rel=1e-14)
    # constant synthetic targets: the constant prediction's score, flagged (docs/metrics.md,
    # "Dimension-wise prediction and probability")
    color = r["dimension_wise_prediction"]["color"]
    assert color["flag"] == "constant_synthetic_target"
    assert color["synthetic"] == pytest.approx(np.mean(test["color"] == "?"))  # = 0.0
    size = r["dimension_wise_prediction"]["size"]
    assert size["flag"] == "constant_synthetic_target"
    assert size["synthetic"] == pytest.approx(np.mean(test["size"] == "M"), abs=1e-12)
    y = r["dimension_wise_prediction"]["y"]
    assert y["flag"] == "constant_synthetic_target" and y["synthetic"] == 0.0  # binary F1 of all-negative
    assert r["label_accuracy"]["synthetic"] == pytest.approx(np.mean(test["y"] == "neg"))
    assert r["tstr_auroc"]["synthetic"] == 0.5 and r["tstr_auroc"]["flag"] == "constant_synthetic_target"
    assert r["dimension_wise_summary"]["n_flagged"] == 3


def test_reuse_real_gives_the_fresh_result(frames):
    train, test, syn = frames
    syn2 = make_frame(350, 9)
    syn2["y"] = "pos"  # a constant synthetic label, so the TSTR flag is exercised too
    first = metrics.evaluate(train, test, syn, SCHEMA, n_triples=5, label_protocol=FAST)
    reused = metrics.evaluate(train, test, syn2, SCHEMA, n_triples=5, label_protocol=FAST, reuse_real=first)
    fresh = metrics.evaluate(train, test, syn2, SCHEMA, n_triples=5, label_protocol=FAST)
    assert reused["meta"].pop("real_scores_reused") and not fresh["meta"].pop("real_scores_reused")
    for r in (reused, fresh):
        r.pop("timings_s")
    assert reused == fresh
    with pytest.raises(ValueError, match="reuse_real was computed on different real rows or settings"):
        metrics.evaluate(train, test.iloc[1:], syn2, SCHEMA, label_protocol=FAST, reuse_real=first)
    with pytest.raises(ValueError, match="reuse_real was computed on different real rows or settings"):
        metrics.evaluate(train, test, syn2, SCHEMA, seed=1, label_protocol=FAST, reuse_real=first)
    with pytest.raises(TypeError, match="reuse_real must be a dict returned by evaluate"):
        metrics.evaluate(train, test, syn2, SCHEMA, label_protocol=FAST, reuse_real=[1])


def test_unconverged_linear_fit_is_flagged(frames, monkeypatch):
    from dpgen_jax.metrics import _dimension_wise

    train, test, syn = frames
    # one coordinate-descent pass cannot converge: sklearn warns, and the metric flags it
    monkeypatch.setattr(_dimension_wise, "Lasso", lambda alpha: Lasso(alpha=alpha, max_iter=1, tol=1e-12))
    r = metrics.dimension_wise_prediction(train, test, syn, SCHEMA, features=["num", "color"])
    assert r["scores"]["num"]["flag"] == "real_fit_not_converged,synthetic_fit_not_converged"
    assert r["scores"]["color"]["flag"] is None
    assert set(r["scores"]) == {"num", "color"}


def test_single_class_test_labels_are_excluded_with_reason(frames):
    train, test, syn = frames
    test = test.copy()
    test["flag"] = "no"
    r = metrics.evaluate(train, test, syn, SCHEMA, n_triples=5, label_protocol=FAST)
    assert "flag" not in r["dimension_wise_prediction"]
    assert "single class ('no')" in r["excluded"]["flag"]
    assert r["dimension_wise_summary"]["n_excluded"] == 1
    assert len(r["dimension_wise_prediction"]) == len(SCHEMA) - 1


def test_infinite_kl_becomes_null_with_reason():
    schema = Schema.from_dict(
        {
            "columns": [
                {"name": f"c{i}", "kind": "categorical", "categories": ["a", "b", "c"]} for i in range(3)
            ]
        }
    )
    rng = np.random.default_rng(0)
    real = pd.DataFrame({f"c{i}": rng.choice(["a", "b"], 60) for i in range(3)})
    real["c0"] = "a"  # constant real column: mu = 0
    syn = real.copy()
    syn["c0"] = "b"
    r = metrics.evaluate(real, real, syn, schema, label="c1", n_triples=3, label_protocol=FAST)
    text = json.dumps(r, allow_nan=False)
    assert "Infinity" not in text and "NaN" not in text
    assert r["kl_mu"]["c0"] is None and r["kl_mu"]["total"] is None
    assert "mu = 0" in r["nulls"]["kl_mu.c0"]
    assert r["jsd"]["c0"] == pytest.approx(LN2 / 2)
    # c0 is constant in the test rows: its dimension-wise score is undefined
    assert "c0" in r["excluded"]
    assert r["tstr_auroc"] is None and "3 categories" in r["nulls"]["tstr_auroc"]


# -- all-binary data (MIMIC setting) ---------------------------------------------------------------
def test_all_binary_dimension_wise(tmp_path):
    df = mimic_like(n_rows=900, n_features=10, seed=0)
    schema = binary_schema(10)
    train, test, syn = df.iloc[:400], df.iloc[400:650].reset_index(drop=True), df.iloc[650:].copy()
    test = test.copy()
    test["x3"] = 0  # single class in the test rows: excluded
    syn["x5"] = 0  # constant synthetic column: AUROC 0.5, flagged
    r = metrics.evaluate(train, test, syn, schema, label="x0", n_triples=5, label_protocol=FAST)
    json.dumps(r, allow_nan=False)
    assert "x3" in r["excluded"] and "x3" not in r["dimension_wise_prediction"]
    single_class_in_test = [c for c in schema.names if test[c].nunique() < 2]
    assert sorted(r["excluded"]) == sorted(single_class_in_test)
    scored = r["dimension_wise_prediction"]
    assert all(s["metric"] == "auroc" for s in scored.values())
    if "x5" in scored:
        assert scored["x5"]["synthetic"] == 0.5 and scored["x5"]["flag"] == "constant_synthetic_target"
    # independent AUROC for one scored feature
    name = next(n for n, s in scored.items() if s["flag"] is None)
    others = [c for c in schema.names if c != name]
    lr = LogisticRegression(solver="liblinear", max_iter=100, random_state=0).fit(train[others], train[name])
    assert scored[name]["real"] == pytest.approx(
        roc_auc_score(test[name], lr.predict_proba(test[others])[:, 1]), abs=1e-12
    )
    probs = r["dimension_wise_probability"]
    assert probs["x1"] == {
        "real": pytest.approx(train["x1"].mean()),
        "synthetic": pytest.approx(syn["x1"].mean()),
    }
    written = metrics.write_report(r, tmp_path)
    assert "dimension_wise_probability.png" in written and "pca.png" not in written
    assert "The PCA plot was not drawn" in written["summary.md"].read_text()


# -- 3-way marginal: the triples -------------------------------------------------------------------
def test_three_way_triples_are_seeded(frames):
    train, _, syn = frames
    r1 = metrics.three_way_marginal(train, syn, SCHEMA, n_triples=30, seed=5)
    r2 = metrics.three_way_marginal(train, syn, SCHEMA, n_triples=30, seed=5)
    r3 = metrics.three_way_marginal(train, syn, SCHEMA, n_triples=30, seed=6)
    assert r1 == r2 and r1["per_triple"] != r3["per_triple"]
    for t in r1["per_triple"]:
        assert len(set(t["features"])) == 3
        assert 0.0 <= t["l1"] <= 2.0


# -- marginals and PCA -----------------------------------------------------------------------------
def test_one_way_marginals_and_pca(frames):
    train, _, syn = frames
    m = metrics.one_way_marginals(train, syn, SCHEMA, bins=10)
    assert m["color"]["categories"] == ["?", "blue", "green", "red"]
    assert m["color"]["real"] == pytest.approx(
        train["color"]
        .value_counts(normalize=True)
        .reindex(["?", "blue", "green", "red"], fill_value=0)
        .tolist()
    )
    assert m["num"]["bin_edges"] == pytest.approx(np.linspace(0, 100, 11).tolist())
    assert m["count"]["bin_edges"][:2] == [-0.5, 0.5] and len(m["count"]["bin_edges"]) == 52
    assert sum(m["count"]["synthetic"]) == pytest.approx(1.0)
    proj = metrics.pca_projection(train, syn, SCHEMA)
    x = onehot(train, SCHEMA).astype(np.float64)
    xc = x - x.mean(axis=0)
    # the first axis is the top eigenvector of the real covariance
    w, v = np.linalg.eigh(xc.T @ xc)
    assert abs(proj.components[0] @ v[:, -1]) == pytest.approx(1.0, abs=1e-8)
    assert proj.real[:, 0] == pytest.approx(xc @ proj.components[0], abs=1e-9)
    ys = onehot(syn, SCHEMA).astype(np.float64) - x.mean(axis=0)
    assert proj.synthetic[:, 1] == pytest.approx(ys @ proj.components[1], abs=1e-9)


# -- bad input -------------------------------------------------------------------------------------
def test_bad_input_errors_name_the_problem(frames):
    train, test, syn = frames
    with pytest.raises(ValueError, match=r"synthetic and real_train have different columns.*'flag'"):
        metrics.evaluate(train, test, syn.drop(columns="flag"), SCHEMA)
    # the data layer's check_frame, with the argument's name: the same words as the encoder's
    with pytest.raises(
        ValueError,
        match=r"^synthetic has column\(s\) not declared in the schema: 'extra'; expected exactly the "
        r"schema's columns 'num', 'count', 'color', 'size', 'flag', 'y' \(in any order\)\.$",
    ):
        metrics.dimension_wise_prediction(train, test, syn.assign(extra=1), SCHEMA)
    with pytest.raises(ValueError, match="synthetic is empty"):
        metrics.evaluate(train, test, syn.iloc[:0], SCHEMA)
    with pytest.raises(ValueError, match=r"synthetic: column 'color': value\(s\) not in the schema's categories"):
        metrics.evaluate(train, test, syn.assign(color="purple"), SCHEMA)
    with pytest.raises(ValueError, match=r"real_test: column 'num'.*outside the schema bounds"):
        metrics.evaluate(train, test.assign(num=150.0), syn, SCHEMA)
    other = binary_schema(6)
    with pytest.raises(ValueError, match=r"real_train is missing schema column\(s\) 'x0'"):
        metrics.evaluate(train, test, syn, other)
    with pytest.raises(TypeError, match="schema must be a dpgen_jax.data.Schema"):
        metrics.evaluate(train, test, syn, {"columns": []})
    with pytest.raises(TypeError, match="synthetic must be a pandas DataFrame"):
        metrics.evaluate(train, test, syn.to_numpy(), SCHEMA)
    with pytest.raises(ValueError, match="label='num' is a continuous column"):
        metrics.evaluate(train, test, syn, SCHEMA, label="num")
    with pytest.raises(ValueError, match="label='nope' is not a column"):
        metrics.label_accuracy(train, test, SCHEMA, label="nope")
    with pytest.raises(ValueError, match="needs a binary label"):
        metrics.tstr_auroc(train, test, SCHEMA, label="color")
    with pytest.raises(ValueError, match="n_triples=0"):
        metrics.three_way_marginal(train, syn, SCHEMA, n_triples=0)
    with pytest.raises(ValueError, match="size=0"):
        metrics.label_accuracy(train, test, SCHEMA, size=0)
    with pytest.raises(ValueError, match="single class"):
        metrics.tstr_auroc(syn, test.assign(y="pos"), SCHEMA)


# -- report ----------------------------------------------------------------------------------------
def test_write_report(tmp_path, identical_result, frames):
    df = frames[0]
    written = metrics.write_report(
        identical_result, tmp_path / "rep", real=(df, df), synthetic=df, schema=SCHEMA
    )
    for name in (
        "metrics.json",
        "dimension_wise.png",
        "marginals.png",
        "diversity.png",
        "pca.png",
        "summary.md",
    ):
        assert written[name].exists() and written[name].stat().st_size > 0
        if name.endswith(".png"):
            assert written[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "rep" / "metrics.json").read_text()) == identical_result
    md = (tmp_path / "rep" / "summary.md").read_text()
    assert "RF accuracy on y" in md and "Published" not in md  # published=None: no published numbers
    assert "seed 000" not in md and "spec" not in md and "§" not in md
    with pytest.raises(ValueError, match="missing"):
        metrics.write_report(identical_result, tmp_path / "x", real=df)
    bad = dict(identical_result, oops=float("nan"))
    with pytest.raises(ValueError, match="NaN or infinity"):
        metrics.write_report(bad, tmp_path / "y")


def test_published_records_are_consistent():
    pub = metrics.published
    rec = pub.DP_AUTO_GAN_ADULT
    assert rec.epsilons == (0.36, 0.51, 1.01) and rec.delta == 1e-5 and rec.columns == ADULT_COLUMNS
    assert "Tantipongpipat" in rec.citation and "2021" in rec.citation
    assert rec.label == "DP-auto-GAN (Tantipongpipat et al. 2021)"
    assert pub.DP_SACTGAN_ADULT.label == "DP-SACTGAN (Li et al. 2023)"
    assert rec.at("label_accuracy.synthetic") == [0.7466, 0.7868, 0.7919]
    for key in ("jsd", "kl_mu"):
        for k, _ in enumerate(rec.epsilons):
            # Table 2's "All" is the sum of Tables 6/7 to their printed rounding
            parts = sum(rec.at(f"{key}.{f}")[k] for f in metrics.PAPER_DIVERSITY_FEATURES)
            assert parts == pytest.approx(rec.at(f"{key}.total")[k], abs=0.006)
    for record in pub.ALL:
        for path in record.values:  # every published path is a path of evaluate's result
            assert path.split(".")[0] in {
                "label_accuracy", "jsd", "kl_mu", "lr_utility", "wasserstein_mean", "js_distance_mean", "diff_cor"
            }
            assert record.source(path), path
    with pytest.raises(ValueError, match="epsilons \\[2.0\\] not in epsilons"):
        metrics.PublishedResults("m", "d", "A (2020), t", (1.0,), None, {"jsd.total": {2.0: 0.1}})


def test_the_metric_table_drives_evaluate_and_the_docs(identical_result):
    """Every key a metric of the table writes is in evaluate's result (or null with a reason),
    its time is recorded under the metric's name, and docs/metrics.md names every key."""
    from dpgen_jax.metrics._registry import result_keys

    keys = result_keys()
    assert len(keys) == len(set(keys))
    for metric in metrics.METRICS:
        assert metric.name in identical_result["timings_s"]
        for key in metric.keys:
            if key == "dimension_wise_probability":  # written for all-binary schemas only
                continue
            assert key in identical_result
            assert identical_result[key] is not None or key in identical_result["nulls"]
    docs = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text()
    assert [k for k in keys if f"`{k}`" not in docs] == []
    with pytest.raises(ValueError, match="clashes"):
        metrics.register_metric(metrics.Metric("tv_again", ("tv_1way",), lambda inputs, nulls: {}))


# ----------------------------------------------------------------------------- labels with gaps, scores at
# chance, warnings once


def _with_label_gaps(df: pd.DataFrame, seed: int, share: float = 0.2) -> pd.DataFrame:
    out = df.copy().astype({"y": object})
    out.loc[np.random.default_rng(seed).random(len(out)) < share, "y"] = np.nan
    return out


GAPPY = Schema.from_dict({"columns": [
    {**c.to_dict(), "missing": True} if c.name == "y" else c.to_dict() for c in SCHEMA.columns]})
LABEL_KEYS = ("label_accuracy", "tstr_auroc", "lr_utility")


def test_a_label_with_gaps_is_scored_on_the_rows_where_it_is_present(frames):
    """The reference: the same metrics on frames from which the user dropped the rows without a
    label, under the schema without gaps; the label stays binary (TSTR and LR are defined)."""
    gappy = [_with_label_gaps(f, seed) for seed, f in enumerate(frames)]
    got = metrics.evaluate(*gappy, GAPPY, n_triples=5, label_protocol=FAST, n_jobs=1)
    present = [f[f["y"].notna()].reset_index(drop=True) for f in gappy]
    want = metrics.evaluate(*present, SCHEMA, n_triples=5, label_protocol=FAST, n_jobs=1)
    for key in LABEL_KEYS:
        assert got[key] is not None and got[key] == want[key], key
    assert got["meta"]["label_majority_rate"] == want["meta"]["label_majority_rate"]
    assert "present" in got["meta"]["label_rows"] and "label_rows" not in want["meta"]
    # the public functions read the same rows
    assert metrics.tstr_auroc(gappy[0], gappy[1], GAPPY) == want["tstr_auroc"]["real"]
    assert metrics.label_accuracy(gappy[2], gappy[1], GAPPY, n_estimators=40) == want["label_accuracy"]["synthetic"]


def test_a_label_missing_everywhere_in_the_synthetic_rows_says_why(frames, tmp_path):
    train, test, syn = frames
    empty = syn.copy().astype({"y": object})
    empty["y"] = np.nan
    r = metrics.evaluate(_with_label_gaps(train, 0), test, empty, GAPPY, n_triples=5, label_protocol=FAST, n_jobs=1)
    for key in LABEL_KEYS:
        assert r[key] is None and r["nulls"][key] == "the label 'y' is missing in every row of synthetic"
    md = metrics.summary_markdown(r)
    assert "| RF accuracy on the label | — | undefined: the label 'y' is missing in every row of synthetic |" in md
    assert "LR AUROC on y (TSTR, liblinear) | — | undefined: the label 'y' is missing" in md


def test_a_synthetic_score_at_or_below_the_majority_rate_is_flagged(frames):
    train, test, syn = frames
    constant = syn.copy()
    constant["y"] = "neg"
    majority = float(max(np.mean(test["y"] == "neg"), np.mean(test["y"] == "pos")))
    with pytest.warns(UserWarning) as caught:
        r = metrics.evaluate(train, test, constant, SCHEMA, n_triples=5, label_protocol=FAST, n_jobs=1)
    assert r["meta"]["label_majority_rate"] == pytest.approx(majority)
    assert set(r["warnings"]) == {"label_accuracy.synthetic", "lr_utility.synthetic.accuracy",
                                  "tstr_auroc.synthetic"}
    assert r["label_accuracy"]["synthetic"] <= majority  # a forest trained on one class predicts it
    shown = [str(w.message) for w in caught]
    for path, text in r["warnings"].items():
        assert text.startswith(path) and "'y'" in text and shown.count(text) == 1
    assert "## Warnings" in metrics.summary_markdown(r)
    healthy = metrics.evaluate(train, test, train, SCHEMA, n_triples=5, label_protocol=FAST, n_jobs=1)
    assert healthy["label_accuracy"]["synthetic"] > majority and healthy["warnings"] == {}


def test_each_distinct_sklearn_warning_is_shown_once_per_evaluate(monkeypatch):
    """Every dimension-wise liblinear fit of an all-binary table (run in threads) stops at max_iter:
    scikit-learn warns once per fit, evaluate shows the warning once, and every fit is still flagged."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from dpgen_jax.metrics import _dimension_wise

    monkeypatch.setattr(_dimension_wise, "LogisticRegression",
                        lambda **kw: LogisticRegression(**{**kw, "max_iter": 1}))
    schema = binary_schema(12)
    rng = np.random.default_rng(0)
    base = rng.random((900, 1)) < 0.5
    rows = (rng.random((900, 12)) < np.where(base, 0.7, 0.3)).astype(int)
    train, test, syn = (pd.DataFrame(rows[i::3], columns=schema.names) for i in range(3))
    with warnings.catch_warnings(record=True) as direct:  # the reference: sklearn on its own
        warnings.simplefilter("always")
        for j in range(3):
            LogisticRegression(solver="liblinear", max_iter=1).fit(np.delete(rows, j, 1), rows[:, j])
    assert sum(issubclass(w.category, ConvergenceWarning) for w in direct) == 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = metrics.evaluate(train, test, syn, schema, n_triples=5, n_jobs=2)
    convergence = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(convergence) == 1
    flags = [s["flag"] for s in r["dimension_wise_prediction"].values()]
    assert len(flags) == 12 and all(f == "real_fit_not_converged,synthetic_fit_not_converged" for f in flags)
