"""Tests of the benchmark's distances (1-way TV and 3-way L1 on public bins) and the DP-SACTGAN
paper's metrics (LR utility, Wasserstein, JS distance, Diff-Cor), each against numpy, scipy or
sklearn called directly, with identical and disjoint data as extremes."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import chi2_contingency, pearsonr, wasserstein_distance
from scipy.stats.contingency import association
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import f1_score, roc_auc_score

from dpgen_jax import data, metrics
from dpgen_jax.data import Schema, TableEncoder
from dpgen_jax.metrics._inputs import prepare

#: A six-column slice of the Adult layout: two integer columns (one heavy-tailed), three discrete
#: ones and the binary label; rows come from the licence-free stand-in data.adult_like.
COLUMNS = ("age", "capital-gain", "workclass", "race", "sex", "salary")
SCHEMA = Schema(tuple(data.adult_schema()[c] for c in COLUMNS))
FAST = metrics.LabelAccuracyProtocol(n_estimators=20)


def make_frame(n: int, seed: int, older: int = 0) -> pd.DataFrame:
    df = data.adult_like(n, seed=seed)[list(COLUMNS)]
    return df.assign(age=np.clip(df["age"] + older, 17, 90))


@pytest.fixture(scope="module")
def frames():
    return make_frame(600, 1), make_frame(400, 2), make_frame(500, 3, older=6)


def disjoint_pair(schema: Schema = SCHEMA, n: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two frames whose every column puts its mass on different categories / bins."""
    a, b = {}, {}
    for col in schema.columns:
        if col.kind == "continuous":
            a[col.name], b[col.name] = [int(col.lower)] * n, [int(col.upper)] * n
        else:
            a[col.name], b[col.name] = [col.categories[0]] * n, [col.categories[-1]] * n
    return pd.DataFrame(a), pd.DataFrame(b)


def direct_histogram(values: np.ndarray, col, bins: int, spacing: str) -> np.ndarray:
    """Relative frequencies by numpy.histogram over independently written edges."""
    lo, hi = col.lower, col.upper
    if spacing == "equal":
        edges = np.linspace(lo, hi, bins + 1)
    else:
        edges = lo + np.geomspace(1.0, hi - lo + 1.0, bins + 1) - 1.0
        edges[-1] = hi
    return np.histogram(values, bins=edges)[0] / values.size


# -- 1-way total variation -------------------------------------------------------------------
@pytest.mark.parametrize("spacing", ["equal", "log"])
def test_tv_1way_matches_direct_numpy(frames, spacing):
    real, _, syn = frames
    r = metrics.total_variation_1way(real, syn, SCHEMA, bins=12, spacing=spacing)
    for col in SCHEMA.columns:
        if col.kind == "continuous":
            p = direct_histogram(real[col.name].to_numpy(float), col, 12, spacing)
            q = direct_histogram(syn[col.name].to_numpy(float), col, 12, spacing)
        else:
            p = real[col.name].value_counts(normalize=True).reindex(col.categories, fill_value=0).to_numpy()
            q = syn[col.name].value_counts(normalize=True).reindex(col.categories, fill_value=0).to_numpy()
        assert r["per_column"][col.name] == pytest.approx(0.5 * np.abs(p - q).sum(), abs=1e-12), col.name
    per = r["per_column"]
    assert r["mean"] == pytest.approx(np.mean(list(per.values())))
    assert r["mean_continuous"] == pytest.approx((per["age"] + per["capital-gain"]) / 2)
    assert r["mean_discrete"] == pytest.approx(np.mean([per[c] for c in ("workclass", "race", "sex", "salary")]))
    assert r["bins"] == 12 and r["spacing"] == {"age": spacing, "capital-gain": spacing}
    assert per["age"] > 0.05  # the shift is seen


def test_tv_1way_extremes_and_options(frames):
    real = frames[0]
    same = metrics.total_variation_1way(real, real.sample(frac=1.0, random_state=0), SCHEMA)
    assert all(v == 0.0 for v in same["per_column"].values()) and same["mean"] == 0.0
    a, b = disjoint_pair()
    dis = metrics.total_variation_1way(a, b, SCHEMA)
    assert all(v == pytest.approx(1.0) for v in dis["per_column"].values()), dis["per_column"]
    assert metrics.MARGINAL_BINS == 20 and dis["bins"] == 20
    mixed = metrics.total_variation_1way(real, frames[2], SCHEMA, spacing={"capital-gain": "log"})
    assert mixed["spacing"] == {"age": "equal", "capital-gain": "log"}
    # log bins resolve the heavy tail: 100 and 4,000 share the first of 20 equal bins, not a log bin
    small, large = real.assign(**{"capital-gain": 100}), real.assign(**{"capital-gain": 4000})
    assert metrics.total_variation_1way(small, large, SCHEMA)["per_column"]["capital-gain"] == 0.0
    assert metrics.total_variation_1way(small, large, SCHEMA, spacing="log")["per_column"]["capital-gain"] == 1.0
    only_discrete = Schema((SCHEMA["race"], SCHEMA["salary"]))
    r = metrics.total_variation_1way(real[["race", "salary"]], frames[2][["race", "salary"]], only_discrete)
    assert r["mean_continuous"] is None and r["spacing"] == {}
    with pytest.raises(ValueError, match="spacing names 'race'.*not continuous columns"):
        metrics.total_variation_1way(real, real, SCHEMA, spacing={"race": "log"})
    with pytest.raises(ValueError, match="spacing='quantile'"):
        metrics.total_variation_1way(real, real, SCHEMA, spacing="quantile")
    with pytest.raises(ValueError, match="spacing has unknown values"):
        metrics.total_variation_1way(real, real, SCHEMA, spacing={"age": "cubic"})
    with pytest.raises(ValueError, match="bins=0"):
        metrics.total_variation_1way(real, real, SCHEMA, bins=0)
    with pytest.raises(ValueError, match="^synthetic is missing schema column\\(s\\) 'salary'"):
        metrics.total_variation_1way(real, real.drop(columns="salary"), SCHEMA)


# -- 3-way marginal L1 -----------------------------------------------------------------------
def direct_l1_3way(real: pd.DataFrame, syn: pd.DataFrame, cols: list[str], bins: int) -> float:
    def keys(df):
        parts = []
        for c in cols:
            col = SCHEMA[c]
            if col.kind == "continuous":
                edges = np.linspace(col.lower, col.upper, bins + 1)
                idx = np.clip(np.digitize(df[c].to_numpy(float), edges) - 1, 0, bins - 1)
                parts.append(idx.astype(str))
            else:
                parts.append(df[c].astype(str).to_numpy())
        return pd.Series(["|".join(t) for t in zip(*parts, strict=True)])

    p, q = keys(real).value_counts(normalize=True), keys(syn).value_counts(normalize=True)
    return float(p.sub(q, fill_value=0).abs().sum())


def test_marginal_l1_3way_matches_direct_computation(frames):
    real, _, syn = frames
    r = metrics.marginal_l1_3way(real, syn, SCHEMA, bins=8)
    triples = list(itertools.combinations(SCHEMA.names, 3))
    assert r["n_triples"] == len(triples) == 20 and r["all_triples"] and r["seed"] is None
    direct = [direct_l1_3way(real, syn, list(t), 8) for t in triples]
    assert r["mean"] == pytest.approx(np.mean(direct), abs=1e-12)
    assert r["max"] == pytest.approx(max(direct)) and r["min"] == pytest.approx(min(direct))
    assert r["worst"][0]["l1"] == pytest.approx(max(direct))
    assert tuple(r["worst"][0]["features"]) == triples[int(np.argmax(direct))]


def test_marginal_l1_3way_extremes_and_sampling(frames):
    real = frames[0]
    assert metrics.marginal_l1_3way(real, real.iloc[::-1], SCHEMA)["mean"] == 0.0
    a, b = disjoint_pair()
    assert metrics.marginal_l1_3way(a, b, SCHEMA)["mean"] == pytest.approx(2.0)
    capped = metrics.marginal_l1_3way(real, frames[2], SCHEMA, max_triples=7, seed=3)
    assert capped["n_triples"] == 7 and not capped["all_triples"] and capped["seed"] == 3
    again = metrics.marginal_l1_3way(real, frames[2], SCHEMA, max_triples=7, seed=3)
    assert capped == again
    # wide all-binary data: a sample of distinct triples
    wide = data.mimic_like(300, 40, seed=0)
    w = metrics.marginal_l1_3way(wide.iloc[:150], wide.iloc[150:], data.binary_schema(40), max_triples=50)
    assert w["n_triples"] == 50 and 0.0 <= w["mean"] <= 2.0
    with pytest.raises(ValueError, match="at least 3 columns"):
        metrics.marginal_l1_3way(real[["sex", "salary"]], real[["sex", "salary"]], Schema((SCHEMA["sex"], SCHEMA["salary"])))


# -- Wasserstein and JS distance -------------------------------------------------------------
def test_wasserstein_and_js_distance_match_scipy(frames):
    real, _, syn = frames
    wd = metrics.wasserstein_mean(real, syn, SCHEMA)
    expected = {}
    for c in ("age", "capital-gain"):
        col = SCHEMA[c]
        span = col.upper - col.lower
        expected[c] = wasserstein_distance((real[c] - col.lower) / span, (syn[c] - col.lower) / span)
    assert wd["per_column"] == pytest.approx(expected, rel=1e-12)
    assert wd["mean"] == pytest.approx(np.mean(list(expected.values())))
    js = metrics.js_distance_mean(real, syn, SCHEMA)
    expected = {}
    for c in ("workclass", "race", "sex", "salary"):
        cats = SCHEMA[c].categories
        p = real[c].value_counts(normalize=True).reindex(cats, fill_value=0).to_numpy()
        q = syn[c].value_counts(normalize=True).reindex(cats, fill_value=0).to_numpy()
        expected[c] = jensenshannon(p, q, base=2)
    assert js["per_column"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert js["mean"] == pytest.approx(np.mean(list(expected.values())))
    assert (real["workclass"] != "Never-worked").all()  # a zero-mass category is handled


def test_wasserstein_and_js_distance_extremes(frames):
    real = frames[0]
    assert metrics.wasserstein_mean(real, real, SCHEMA)["mean"] == 0.0
    assert metrics.js_distance_mean(real, real, SCHEMA)["mean"] == 0.0
    a, b = disjoint_pair()
    assert all(v == pytest.approx(1.0) for v in metrics.js_distance_mean(a, b, SCHEMA)["per_column"].values())
    # all mass at the two bounds: the scaled distance is 1
    assert metrics.wasserstein_mean(a, b, SCHEMA)["per_column"] == {"age": 1.0, "capital-gain": 1.0}
    discrete = Schema((SCHEMA["race"], SCHEMA["salary"]))
    assert metrics.wasserstein_mean(real[["race", "salary"]], real[["race", "salary"]], discrete)["mean"] is None


# -- Diff-Cor --------------------------------------------------------------------------------
def direct_association(df: pd.DataFrame) -> np.ndarray:
    """dython's defaults written out with scipy/sklearn: Pearson, correlation ratio as the root of
    the R^2 of a regression on the category indicators, bias-corrected Cramér's V."""
    names = SCHEMA.names
    nominal = {c.name for c in SCHEMA.columns if c.kind != "continuous"}
    out = np.eye(len(names))
    for i, j in itertools.combinations(range(len(names)), 2):
        a, b = names[i], names[j]
        if a in nominal and b in nominal:
            table = pd.crosstab(df[a], df[b]).to_numpy()
            chi2 = chi2_contingency(table)[0]
            n = table.sum()
            r, k = table.shape
            phi2 = max(0.0, chi2 / n - (k - 1) * (r - 1) / (n - 1))
            v = math.sqrt(phi2 / min(k - (k - 1) ** 2 / (n - 1) - 1, r - (r - 1) ** 2 / (n - 1) - 1))
        elif a in nominal or b in nominal:
            cat, num = (a, b) if a in nominal else (b, a)
            x = pd.get_dummies(df[cat]).to_numpy(float)
            y = df[num].to_numpy(float)
            v = math.sqrt(max(LinearRegression().fit(x, y).score(x, y), 0.0))
        else:
            v = pearsonr(df[a], df[b]).statistic
        out[i, j] = out[j, i] = v
    return out


def test_diff_cor_matches_direct_computation(frames):
    real, _, syn = frames
    r = metrics.diff_cor(real, syn, SCHEMA)
    a_real, a_syn = direct_association(real), direct_association(syn)
    np.testing.assert_allclose(r["real"], a_real, atol=1e-9)
    np.testing.assert_allclose(r["synthetic"], a_syn, atol=1e-9)
    assert r["value"] == pytest.approx(np.linalg.norm(a_real - a_syn, "fro"), rel=1e-9)
    assert r["columns"] == SCHEMA.names
    assert metrics.diff_cor(real, real, SCHEMA)["value"] == 0.0


def test_cramers_v_without_correction_is_scipys_association():
    """With many rows the bias correction vanishes: V tends to scipy's uncorrected statistic."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, 200_000)
    y = np.where(rng.random(200_000) < 0.3, x % 3, rng.integers(0, 3, 200_000))
    table = pd.crosstab(x, y).to_numpy()
    from dpgen_jax.metrics._association import cramers_v

    assert cramers_v(x, y) == pytest.approx(association(table, method="cramer"), abs=1e-3)


def test_association_matrix_single_value_and_undefined_columns(frames):
    real = frames[0].copy()
    real["race"] = "White"  # a single value: its row and column are 0 (diagonal too), as dython
    a = metrics.association_matrix(prepare(real, SCHEMA, "real"), SCHEMA)
    j = SCHEMA.names.index("race")
    assert (a[j] == 0).all() and (a[:, j] == 0).all()
    assert a[0, 0] == 1.0 and np.allclose(a, a.T)


# -- logistic-regression utility -------------------------------------------------------------
def test_lr_utility_matches_sklearn(frames):
    train, test, syn = frames
    r = metrics.lr_utility(train, test, syn, SCHEMA)
    enc = TableEncoder(SCHEMA)
    b = enc.block("salary")
    cols = np.r_[0 : b.start, b.stop : enc.width]
    x_test = enc.encode(test)[:, cols]
    y_test = (test["salary"] == ">50K").to_numpy(int)
    for source, df in (("real", train), ("synthetic", syn)):
        x = enc.encode(df)[:, cols]
        model = LogisticRegression(max_iter=500, random_state=42).fit(x, (df["salary"] == ">50K").to_numpy(int))
        pred = model.predict(x_test)
        want = {
            "accuracy": np.mean(pred == y_test),
            "auroc": roc_auc_score(y_test, model.predict_proba(x_test)[:, 1]),
            "f1_macro": f1_score(y_test, pred, average="macro"),
        }
        assert r[source] == pytest.approx(want, abs=1e-12), source
    assert r["difference"] == pytest.approx({k: r["real"][k] - r["synthetic"][k] for k in r["real"]})
    assert r["label"] == "salary" and r["flag"] is None and r["protocol"]["positive"] == ">50K"
    same = metrics.lr_utility(train, test, train, SCHEMA)
    assert same["difference"] == {"accuracy": 0.0, "auroc": 0.0, "f1_macro": 0.0}


def test_lr_utility_edge_cases(frames):
    train, test, syn = frames
    r = metrics.lr_utility(train, test, syn.assign(salary="<=50K"), SCHEMA)
    assert r["flag"] == "constant_synthetic_target"
    assert r["synthetic"]["auroc"] == 0.5
    assert r["synthetic"]["accuracy"] == pytest.approx(np.mean(test["salary"] == "<=50K"))
    with pytest.raises(ValueError, match="single class"):
        metrics.lr_utility(train, test.assign(salary=">50K"), syn, SCHEMA)
    with pytest.raises(ValueError, match="label='race' has 5 categories"):
        metrics.lr_utility(train, test, syn, SCHEMA, label="race")


# -- evaluate: the new keys ------------------------------------------------------------------
def test_evaluate_adds_the_new_keys(frames):
    train, test, syn = frames
    r = metrics.evaluate(train, test, syn, SCHEMA, n_triples=5, label_protocol=FAST, marginal_bins=10)
    json.dumps(r, allow_nan=False)
    reference = pd.concat([train, test], ignore_index=True)
    assert r["tv_1way"] == metrics.total_variation_1way(reference, syn, SCHEMA, bins=10)
    assert r["marginal_l1_3way"] == metrics.marginal_l1_3way(reference, syn, SCHEMA, bins=10)
    assert r["wasserstein_mean"] == metrics.wasserstein_mean(reference, syn, SCHEMA)
    assert r["js_distance_mean"] == metrics.js_distance_mean(reference, syn, SCHEMA)
    assert r["diff_cor"] == metrics.diff_cor(reference, syn, SCHEMA)
    assert r["lr_utility"] == metrics.lr_utility(train, test, syn, SCHEMA)
    for key in ("tv_1way_marginal_l1_3way", "wasserstein_js_distance_diff_cor", "lr_utility"):
        assert key in r["timings_s"]
    # the existing keys are unchanged: the old 1-way marginals keep their own (plot) binning
    assert len(r["marginals"]["capital-gain"]["bin_edges"]) == 31 and "three_way_marginal" in r
    # reuse_real keeps the real-data LR fit
    again = metrics.evaluate(train, test, syn, SCHEMA, n_triples=5, label_protocol=FAST, marginal_bins=10, reuse_real=r)
    assert again["lr_utility"] == r["lr_utility"]
    with pytest.raises(ValueError, match="spacing names 'salary'"):
        metrics.evaluate(train, test, syn, SCHEMA, marginal_spacing={"salary": "log"})


def test_evaluate_nulls_for_narrow_or_unlabelled_schemas():
    schema = Schema((SCHEMA["workclass"], SCHEMA["race"]))
    df = make_frame(200, 5)[["workclass", "race"]]
    r = metrics.evaluate(df, df, df, schema, label="race", n_triples=1, label_protocol=FAST)
    assert r["marginal_l1_3way"] is None and "needs 3" in r["nulls"]["marginal_l1_3way"]
    assert r["wasserstein_mean"]["mean"] is None and "no continuous" in r["nulls"]["wasserstein_mean.mean"]
    assert r["tv_1way"]["mean_continuous"] is None and "tv_1way.mean_continuous" in r["nulls"]
    assert r["lr_utility"] is None and "5 categories" in r["nulls"]["lr_utility"]
