"""Missing values in continuous columns declared ``missing=True`` (``docs/data.md``, "Missing values";
every other kind: ``tests/test_data_gaps.py``).

The schema declares them, the encoder adds an indicator, every method learns it (a fast check on
three methods here, every registered method under ``-m slow``), the metrics compare "missing" as a
value, and a column not declared so still refuses a missing value, naming the column and the rule.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data, metrics, synthesizers
from tests import _tables

GAPS = 0.2


def _schema(missing_c: bool = True, missing_d: bool = True) -> data.Schema:
    d = _tables.MIXED_SCHEMA.to_dict()
    for c in d["columns"]:
        if c["name"] == "c":
            c["missing"] = missing_c
        if c["name"] == "d":
            c["missing"] = missing_d
        if c["name"] == "b":
            c["label"] = True  # DP-SYN needs a label
    return data.Schema.from_dict(d)


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    """Mixed rows with GAPS of ``c`` (nullable Int64) and ``d`` (float NaN) missing at random."""
    df = _tables.mixed_frame(n, seed)
    r = np.random.default_rng(seed + 100)
    df["c"] = df["c"].astype("Int64")
    df.loc[r.random(n) < GAPS, "c"] = pd.NA
    df.loc[r.random(n) < GAPS, "d"] = np.nan
    return df


# -- schema ---------------------------------------------------------------------------------------
def test_schema_declares_continuous_missing_and_round_trips():
    s = _schema()
    assert s["c"].missing is True and s["d"].missing is True
    assert data.Schema.from_json(s.to_json()) == s
    assert data.model_schema(s).names == ["a", "b", "c", "c [missing]", "d", "d [missing]"]
    ind = data.model_schema(s)["d [missing]"]
    assert ind.kind == "binary" and ind.categories == (False, True) and not ind.label
    assert data.model_schema(_tables.MIXED_SCHEMA) is _tables.MIXED_SCHEMA
    assert _schema(False, False) == _tables.MIXED_SCHEMA.__class__.from_dict(
        {"columns": [dict(c.to_dict(), label=c.name == "b") for c in _tables.MIXED_SCHEMA]})


def test_schema_refuses_a_category_as_continuous_missing_and_an_indicator_clash():
    with pytest.raises(ValueError, match=r"column 'v': missing='\?'; a continuous column takes missing=True"):
        data.Column("v", "continuous", lower=0, upper=1, missing="?")
    with pytest.raises(ValueError, match=r"'v \[missing\]'.*missingness indicators"):
        data.Schema((data.Column("v", "continuous", lower=0, upper=1, missing=True),
                     data.Column("v [missing]", "binary", categories=(0, 1))))


def test_assumptions_state_that_missingness_is_declared_public():
    text = " ".join(_schema(True, False).assumptions())
    assert "'c' may be missing is declared as public knowledge" in text
    assert "may be missing" not in " ".join(_tables.MIXED_SCHEMA.assumptions())


# -- encoder --------------------------------------------------------------------------------------
def test_encoder_adds_indicators_and_decodes_missing_back():
    s, df = _schema(), _frame(200)
    enc = data.TableEncoder(s)
    assert enc.width == data.TableEncoder(_tables.MIXED_SCHEMA).width + 2
    x = enc.encode(df)
    c_nan = df["c"].isna().to_numpy()
    d_nan = df["d"].isna().to_numpy()
    # indicators sit right after their column; a missing value encodes as its lower bound (0)
    np.testing.assert_array_equal(x[:, enc.block("c [missing]").start], c_nan.astype(np.float32))
    np.testing.assert_array_equal(x[:, enc.block("d [missing]").start], d_nan.astype(np.float32))
    assert (x[c_nan, enc.block("c").start] == 0).all() and (x[d_nan, enc.block("d").start] == 0).all()
    back = enc.decode(x)
    assert list(back.columns) == s.names
    assert str(back["c"].dtype) == "Int64" and back["d"].dtype == np.float64
    pd.testing.assert_series_equal(back["c"], df["c"].reset_index(drop=True), check_names=False)
    np.testing.assert_array_equal(back["d"].isna().to_numpy(), d_nan)
    np.testing.assert_allclose(back["d"][~d_nan], df["d"][~d_nan], atol=1e-6)
    codes = enc.codes(df)
    assert list(codes.columns) == data.model_schema(s).names
    np.testing.assert_array_equal(codes["c [missing]"].to_numpy(), c_nan.astype(int))


def test_a_column_not_declared_missing_refuses_gaps_naming_the_column_and_the_rule():
    df = _frame(200)
    n_gaps = int(df["d"].isna().sum())
    with pytest.raises(ValueError, match=rf"column 'd': {n_gaps} missing value\(s\).*does not declare"):
        data.TableEncoder(_schema(True, False)).encode(df, verbose=True)
    with pytest.raises(ValueError, match=r"column 'd': missing value\(s\).*does not declare"):
        synthesizers.create("independent").fit(df, _schema(True, False), epsilon=1.0, seed=0)  # no count


def test_read_csv_reads_blank_cells_of_a_declared_column(tmp_path):
    df = _frame(50)
    path = tmp_path / "t.csv"
    data.write_csv(df, path)
    back = data.read_csv(path, _schema())
    np.testing.assert_array_equal(back["c"].isna().to_numpy(), df["c"].isna().to_numpy())
    np.testing.assert_array_equal(back["d"].isna().to_numpy(), df["d"].isna().to_numpy())


# -- metrics --------------------------------------------------------------------------------------
def test_metrics_compare_missing_as_a_value():
    s, real = _schema(), _frame(400)
    assert metrics.total_variation_1way(real, real, s)["mean"] == 0.0
    filled = real.copy()
    filled["d"] = filled["d"].fillna(0.5)  # no value missing any more
    tv = metrics.total_variation_1way(real, filled, s)["per_column"]
    # the indicator's TV is the difference of the missing rates: an independent computation
    assert tv["d [missing]"] == pytest.approx(real["d"].isna().mean())
    assert tv["c [missing]"] == 0.0
    l1 = metrics.marginal_l1_2way(real, filled, s)
    assert l1["mean"] > 0
    assert metrics.marginal_l1_2way(real, real, s)["mean"] == 0.0
    with pytest.raises(ValueError, match="synthetic is missing schema column"):
        metrics.marginal_l1_2way(real, filled.drop(columns="d"), s)


# -- synthesizers ---------------------------------------------------------------------------------
def _fit_and_check(method: str, tmp_path, n: int = 600) -> synthesizers.Synthesizer:
    s, df = _schema(), _frame(n)
    model = synthesizers.create(method, **synthesizers.get(method).SMOKE).fit(df, s, epsilon=10.0, seed=0)
    assert model.schema == s
    rows = model.sample(300, seed=1)
    assert list(rows.columns) == s.names
    assert str(rows["c"].dtype) == "Int64" and rows["d"].dtype == np.float64
    present = rows["d"].dropna()
    assert ((present >= -1) & (present <= 1)).all()
    assert (rows["c"].dropna().between(0, 99)).all()
    report = model.privacy_report()
    assert any("'c', 'd' may be missing" in a for a in report["assumptions"])
    path = tmp_path / f"{method}.npz"
    model.save(path)
    loaded = synthesizers.Synthesizer.load(path)
    assert loaded.schema == s
    pd.testing.assert_frame_equal(loaded.sample(300, seed=1), rows)
    return model


FAST = ["independent", "dp-wgan"]


@pytest.mark.parametrize("method", FAST)
def test_methods_fit_and_sample_a_declared_missing_column(method, tmp_path):
    _fit_and_check(method, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("method", sorted(set(synthesizers.available()) - set(FAST)))
def test_every_method_fits_and_samples_a_declared_missing_column(method, tmp_path):
    if synthesizers.get(method).unavailable_reason():
        pytest.skip(synthesizers.get(method).unavailable_reason())
    _fit_and_check(method, tmp_path)


def test_plan_takes_the_users_schema():  # non-private: the same phases either way
    smoke = synthesizers.get("dp-wgan").SMOKE
    s = _schema()
    a = synthesizers.create("dp-wgan", **smoke).plan(s, 600, epsilon=math.inf)
    b = synthesizers.create("dp-wgan", **smoke).plan(data.model_schema(s), 600, epsilon=math.inf)
    assert a.config == b.config
    assert a.phases == b.phases


def test_independent_learns_the_missing_rate():
    """At epsilon 1 on 5,000 rows the one-way histogram of the indicator is noisy by about
    1e-3, and 20,000 sampled rows add a sampling error of about 3e-3."""
    s, df = _schema(), _frame(5000, seed=3)
    model = synthesizers.create("independent").fit(df, s, epsilon=1.0, seed=0)
    rows = model.sample(20_000, seed=2)
    for col in ("c", "d"):
        real, syn = df[col].isna().mean(), rows[col].isna().mean()
        assert math.isclose(syn, real, abs_tol=0.02), (col, real, syn)


def test_discretizer_codes_missing_as_one_more_bin_and_decodes_it_back():
    import jax

    schema = data.Schema([data.Column("a", "continuous", lower=0, upper=10, missing=True),
                          data.Column("b", "categorical", categories=("x", "y"))])
    frame = pd.DataFrame({"a": [1.0, np.nan, 5.0, np.nan], "b": ["x", "y", "x", "x"]})
    disc = data.Discretizer(schema, 4)
    assert disc.schema.names == ["a", "b"] and disc.sizes == (5, 2) and disc.missing_codes == {"a": 4}
    codes = disc.codes(frame)
    np.testing.assert_array_equal(codes[:, 0], [0, 4, 2, 4])  # gaps: the last code, not bin 0
    np.testing.assert_array_equal(codes, disc.codes_from_encoded(data.TableEncoder(schema).encode(frame)))
    back = disc.decode(codes, jax.random.key(0))
    assert list(back.columns) == ["a", "b"]
    np.testing.assert_array_equal(back["a"].isna().to_numpy(), frame["a"].isna().to_numpy())


@pytest.mark.slow  # two evaluate runs (about 40 s on one core)
def test_the_study_punches_gaps_in_columns_of_every_kind_and_reports_each(tmp_path):
    """``experiments.studies.missing_values --columns`` (issue 48's acceptance study): gaps in an
    integer, a categorical, a binary and a float column, each declared missing; the report has the
    real and synthetic rate of each; ``--gaps 0`` is the same table without gaps."""
    import json

    from experiments.studies import missing_values

    common = ["--method", "independent", "--epsilon", "3", "--dataset", "adult-like", "--adult-like-rows",
              "300", "--seeds", "0", "--set", "bins=8", "--no-progress"]
    cols = ["age", "workclass", "sex", "hours-per-week"]
    missing_values.main(common + ["--columns", *cols, "--gaps", "0.2", "--out", str(tmp_path / "gaps")])
    report = json.loads(next((tmp_path / "gaps").glob("**/report.json")).read_text())
    per = report["missing"]["per_column"]
    assert sorted(per) == sorted(cols)
    for c in cols:
        assert 0.1 < per[c]["real_rate"] < 0.3 and 0.0 <= per[c]["synthetic_rate"] <= 1.0
    missing_values.main(common + ["--columns", *cols, "--gaps", "0", "--out", str(tmp_path / "none")])
    report = json.loads(next((tmp_path / "none").glob("**/report.json")).read_text())
    assert all(r["real_rate"] == 0.0 for r in report["missing"]["per_column"].values())
    for bad in (["--columns", "nope"], ["--gaps", "1.5"], ["--column", "age", "--columns", "sex"]):
        with pytest.raises(SystemExit):
            missing_values.main(common + bad + ["--out", str(tmp_path / "bad")])
