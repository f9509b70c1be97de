"""Gaps in every column kind, skewed columns and the advice of a draft (``docs/data.md``).

A column of any kind declared ``missing=True`` round-trips its gaps through the encoder, the model
frames and CSV files with the dtypes a user expects; ``infer_schema`` / ``draft_schema`` accept
gaps and say which columns have them, which look like identifiers and which are skewed;
``scale="log"`` encodes on ``log1p((x - lower) / u)``; messages name the column and the rule, and quote values
only under ``verbose=True``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data, synthesizers
from dpgen_jax.data import Column, DataDerivedSchemaWarning, Schema

N = 300


def _gap_schema() -> Schema:
    return Schema.from_dict({"columns": [
        {"name": "flag", "kind": "binary", "categories": [False, True], "missing": True},
        {"name": "sex", "kind": "binary", "categories": ["F", "M"], "missing": True},
        {"name": "bit", "kind": "binary", "categories": [0, 1], "missing": True, "label": True},
        {"name": "city", "kind": "categorical", "categories": ["a", "b", "c"], "missing": True},
        {"name": "grade", "kind": "categorical", "categories": [1, 2, 3, 7], "missing": True},
        {"name": "age", "kind": "continuous", "lower": 0, "upper": 99, "integer": True, "missing": True},
        {"name": "income", "kind": "continuous", "lower": 0, "upper": 5e5, "missing": True, "scale": "log"},
        {"name": "w", "kind": "continuous", "lower": -1, "upper": 1},
    ]})


def _gap_frame(n: int = N, seed: int = 0) -> pd.DataFrame:
    """Every kind with about 15 % gaps, in the dtypes a user has for such columns."""
    r = np.random.default_rng(seed)

    def gaps():
        return r.random(n) < 0.15

    flag = pd.array(r.random(n) < 0.4, dtype="boolean")
    flag[gaps()] = pd.NA
    sex = pd.Series(r.choice(["F", "M"], n), dtype=object)
    sex[gaps()] = np.nan
    bit = pd.array(r.integers(0, 2, n), dtype="Int64")
    bit[gaps()] = pd.NA
    city = pd.Series(r.choice(["a", "b", "c"], n), dtype=object)
    city[gaps()] = np.nan
    grade = pd.array(r.choice([1, 2, 3, 7], n), dtype="Int64")
    grade[gaps()] = pd.NA
    age = pd.array(r.integers(18, 90, n), dtype="Int64")
    age[gaps()] = pd.NA
    income = np.round(np.minimum(r.lognormal(9, 1.5, n), 5e5), 2)
    income[gaps()] = np.nan
    return pd.DataFrame({"flag": flag, "sex": sex, "bit": bit, "city": city, "grade": grade, "age": age,
                         "income": income, "w": r.uniform(-1, 1, n)})


def _assert_same_gaps_and_values(back: pd.DataFrame, df: pd.DataFrame, rtol: float = 0.0) -> None:
    """Same gaps and, where present, the same values (floats within ``rtol``)."""
    assert list(back.columns) == list(df.columns)
    for c in df.columns:
        np.testing.assert_array_equal(back[c].isna().to_numpy(), df[c].isna().to_numpy(), err_msg=c)
        present = ~df[c].isna().to_numpy()
        a, b = back[c].to_numpy(dtype=object)[present], df[c].to_numpy(dtype=object)[present]
        if df[c].dtype == np.float64:
            np.testing.assert_allclose(a.astype(float), b.astype(float), rtol=rtol, atol=1e-6, err_msg=c)
        else:
            assert a.tolist() == b.tolist(), c


# -- schema and model schema ------------------------------------------------------------------------
def test_missing_true_on_every_kind_round_trips_through_json():
    s = _gap_schema()
    assert all(c.missing is True for c in s if c.name != "w")
    assert Schema.from_json(s.to_json()) == s
    assert data.has_missing(s)
    # a category sentinel (Adult's "?") keeps its meaning; missing=False is "not missing"
    adult_like = Column("wc", "categorical", categories=("?", "a"), missing="?")
    assert adult_like.missing == "?" and not data.has_missing(Schema((adult_like,)))
    assert Column("b", "binary", categories=(False, True), missing=False).missing is None
    text = " ".join(s.assumptions())
    assert "discrete column(s) 'flag', 'sex', 'bit', 'city', 'grade' may be missing" in text
    assert "'income'" in text and "scale \"log\"" in text


def test_model_schema_of_each_kind():
    m = data.model_schema(_gap_schema())
    assert m.names == ["flag", "sex", "bit", "city", "grade", "age", "age [missing]", "income",
                       "income [missing]", "w"]
    expected = {"flag": (0, 1, 2), "sex": ("F", "M", "[missing]"), "bit": (0, 1, 2),
                "city": ("a", "b", "c", "[missing]"), "grade": (1, 2, 3, 7, 8)}
    for name, cats in expected.items():
        col = m[name]
        assert col.kind == "categorical" and col.categories == cats and col.missing == cats[-1], name
    assert m["bit"].label and m.label == "bit"
    assert m["age"].missing is None and m["age"].integer and m["income"].scale == "log"
    assert m["income [missing]"].categories == (False, True)
    assert not data.has_missing(m) and data.model_schema(m) is m


def test_missing_category_rules():
    assert data.missing_category(Column("s", "binary", categories=("[missing]", "x"), missing=True)) == "[missing]_"
    assert data.missing_category(Column("s", "categorical", categories=("[missing]", "[missing]_"),
                                        missing=True)) == "[missing]__"
    assert data.missing_category(Column("i", "categorical", categories=(-5, 3), missing=True)) == 4
    assert data.missing_category(Column("i", "binary", categories=(2**63 - 1, 0), missing=True)) == -1
    assert data.missing_category(Column("b", "binary", categories=(True, False), missing=True)) == 2
    with pytest.raises(ValueError, match="column 'v'.*indicator_name"):
        data.missing_category(Column("v", "continuous", lower=0, upper=1, missing=True))
    with pytest.raises(ValueError, match="column 'c'"):
        data.missing_category(Column("c", "binary", categories=("x", "y")))


# -- encoder and model frames -----------------------------------------------------------------------
def test_every_kind_round_trips_gaps_through_the_encoder_with_user_dtypes():
    s, df = _gap_schema(), _gap_frame()
    enc = data.TableEncoder(s)
    assert enc.width == 3 + 3 + 3 + 4 + 5 + 2 + 2 + 1
    back = enc.decode(enc.encode(df))
    _assert_same_gaps_and_values(back, df, rtol=1e-5)
    dtypes = {c: str(back[c].dtype) for c in back.columns}
    assert dtypes == {"flag": "boolean", "sex": "object", "bit": "Int64", "city": "object", "grade": "Int64",
                      "age": "Int64", "income": "float64", "w": "float64"}
    assert back["sex"].isna().any() and all(v is np.nan or isinstance(v, str) for v in back["sex"])
    # the gap is one more one-hot position: an independent count of the input's gaps
    city = enc.block("city")
    x = enc.encode(df)
    np.testing.assert_array_equal(x[:, city.stop - 1], df["city"].isna().to_numpy())
    np.testing.assert_array_equal(x[:, enc.block("flag").stop - 1], df["flag"].isna().to_numpy())


def test_model_frames_accept_other_gap_spellings_and_map_back():
    s = Schema.from_dict({"columns": [
        {"name": "f", "kind": "binary", "categories": [True, False], "missing": True},
        {"name": "g", "kind": "categorical", "categories": [10, 20], "missing": True}]})
    df = pd.DataFrame({"f": pd.Series([True, None, False, np.nan], dtype=object),
                       "g": [10.0, np.nan, 20.0, 10.0]})
    model = data.to_model_frame(df, s)
    assert model["f"].tolist() == [0, 2, 1, 2]  # position in (True, False); gaps -> 2
    assert model["g"].tolist() == [10, 21, 20, 10]
    back = data.from_model_frame(model, s)
    assert back["f"].tolist()[0] is True and back["f"].isna().tolist() == [False, True, False, True]
    assert back["g"].astype(object).where(back["g"].notna(), None).tolist() == [10, None, 20, 10]


def test_model_frames_refuse_a_non_bool_and_the_reserved_gap_value():
    s = Schema((Column("f", "binary", categories=(False, True), missing=True),
                Column("s", "categorical", categories=("a", "b"), missing=True)))
    with pytest.raises(ValueError, match="column 'f': value\\(s\\) that are not True or False"):
        data.TableEncoder(s).encode(pd.DataFrame({"f": [1, 0], "s": ["a", "b"]}))
    with pytest.raises(ValueError, match="column 's': holds '\\[missing\\]'"):
        data.TableEncoder(s).encode(pd.DataFrame({"f": [True, False], "s": ["a", "[missing]"]}))
    with pytest.raises(ValueError, match="column 's': value\\(s\\) not in the schema's categories"):
        data.TableEncoder(s).encode(pd.DataFrame({"f": [True, False], "s": ["a", "z"]}))


def test_independent_fit_on_a_binary_column_with_gaps_samples_gaps():
    s = Schema((Column("smoker", "binary", categories=(0, 1), missing=True),
                Column("x", "categorical", categories=("u", "v"))))
    r = np.random.default_rng(1)
    smoker = pd.array(r.integers(0, 2, 2000), dtype="Int64")
    smoker[r.random(2000) < 0.3] = pd.NA
    df = pd.DataFrame({"smoker": smoker, "x": r.choice(["u", "v"], 2000).astype(object)})
    rows = synthesizers.create("independent").fit(df, s, epsilon=1.0, seed=0).sample(4000, seed=1)
    assert str(rows["smoker"].dtype) == "Int64"
    assert set(rows["smoker"].dropna().tolist()) <= {0, 1}
    # 30 % gaps; the one-way noise at epsilon 1 on 2,000 rows and 4,000 draws stay within 0.05
    assert abs(rows["smoker"].isna().mean() - df["smoker"].isna().mean()) < 0.05


# -- CSV files ----------------------------------------------------------------------------------------
def test_csv_read_write_read_keeps_gaps_values_and_dtypes(tmp_path):
    s, df = _gap_schema(), _gap_frame()
    first = tmp_path / "a.csv"
    data.write_csv(df, first)
    lines = first.read_text().splitlines()
    row = df.index[df["city"].isna()][0]
    assert lines[row + 1].split(",")[3] == ""  # a gap is an empty cell
    a = data.read_csv(first, s)
    _assert_same_gaps_and_values(a, df)
    second = tmp_path / "b.csv"
    data.write_csv(a, second)
    b = data.read_csv(second, s)
    pd.testing.assert_frame_equal(a, b)
    assert first.read_text() == second.read_text()
    assert {c: str(a[c].dtype) for c in ("flag", "bit", "grade", "age", "income")} == {
        "flag": "boolean", "bit": "Int64", "grade": "Int64", "age": "Int64", "income": "float64"}
    # decoded synthetic-like rows write and read back the same way
    enc = data.TableEncoder(s)
    decoded = enc.decode(enc.encode(df))
    data.write_csv(decoded, tmp_path / "c.csv")
    pd.testing.assert_frame_equal(data.read_csv(tmp_path / "c.csv", s), decoded, check_exact=False, rtol=1e-12)


def test_read_csv_refuses_an_empty_category_in_a_gap_column_and_quotes_only_when_verbose(tmp_path):
    s = Schema((Column("s", "binary", categories=("", "x"), missing=True),))
    (tmp_path / "e.csv").write_text("s\nx\n\n")
    with pytest.raises(ValueError, match="column 's'.*category \"\"; in a CSV file an empty cell"):
        data.read_csv(tmp_path / "e.csv", s)
    s = Schema((Column("n", "continuous", lower=0, upper=10), Column("f", "binary", categories=(False, True))))
    (tmp_path / "bad.csv").write_text("n,f\n3,True\nsecret-7,False\n")
    with pytest.raises(ValueError, match="column 'n' holds text that is not a number") as info:
        data.read_csv(tmp_path / "bad.csv", s)
    assert "secret" not in str(info.value)
    with pytest.raises(ValueError, match="column 'n' holds 'secret-7'"):
        data.read_csv(tmp_path / "bad.csv", s, verbose=True)
    (tmp_path / "bad.csv").write_text("n,f\n3,True\n4,secret\n")
    with pytest.raises(ValueError, match="column 'f' holds a value other than True/False") as info:
        data.read_csv(tmp_path / "bad.csv", s)
    assert "secret" not in str(info.value)
    (tmp_path / "bad.csv").write_text("n,f\n3,True\n123457,False\n")
    with pytest.raises(ValueError, match="column 'n': value\\(s\\) outside the schema bounds") as info:
        data.read_csv(tmp_path / "bad.csv", s)
    assert "123457" not in str(info.value)


# -- infer_schema and draft_schema -----------------------------------------------------------------
def _infer(df: pd.DataFrame, **kw) -> Schema:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataDerivedSchemaWarning)
        return data.infer_schema(df, **kw)


def test_infer_schema_accepts_gaps_in_every_kind_and_lists_them():
    df = _gap_frame().drop(columns="w")
    s = _infer(df, label="bit")
    assert [c.name for c in s if c.missing is True] == list(df.columns)
    assert s["flag"].categories == (False, True) and s["sex"].categories == ("F", "M")
    assert s["bit"].kind == "binary" and s["bit"].categories == (0, 1) and s["bit"].label
    assert s["city"].categories == ("a", "b", "c") and s["grade"].categories == (1, 2, 3, 7)  # a code
    present = df["age"].dropna()
    assert s["age"].integer and (s["age"].lower, s["age"].upper) == (present.min(), present.max())
    gap_notes = [n for n in s.notes if "have gaps" in n]
    assert len(gap_notes) == 1 and all(f"'{c}'" in gap_notes[0] for c in df.columns)
    text = " ".join(s.notes).lower()
    assert "fill" not in text and not any(ch.isdigit() for ch in gap_notes[0])
    enc = data.TableEncoder(s)
    _assert_same_gaps_and_values(enc.decode(enc.encode(df)), df, rtol=1e-5)


def test_infer_schema_without_gaps_ids_or_skew_keeps_its_single_note():
    df = pd.DataFrame({"a": ["x", "y", "x"], "b": [1.0, 2.5, 3.0], "n": [3, 7, 5]})
    s = _infer(df)
    assert s.notes == ("The schema was produced by infer_schema from the table's own values.",)
    assert all(c.missing is None and c.scale == "linear" for c in s)


@pytest.mark.parametrize("name, values, flagged", [
    ("pid", [1, 2, 1, 2] * 20, True),
    ("person_id", ["a", "b"] * 40, True),
    ("userId", [5] * 10 + [6] * 10, True),
    ("ID", [1.5, 2.5] * 5, True),
    ("row", list(range(100)), True),  # every value distinct integers
    ("code", [f"c{i:04d}" for i in range(60)] + [None] * 3, True),  # distinct strings, gaps ignored
    ("paid", [0, 1] * 30, False),
    ("city", ["a", "b", "c"] * 30, False),
    ("few", [f"s{i}" for i in range(15)], False),  # 15 distinct strings: not more than 20
    ("score", list(np.linspace(0, 1, 100)), False),  # floats are never flagged by their values
])
def test_id_like_columns_are_flagged_with_the_unit_of_privacy(name, values, flagged):
    other = np.resize([1.0, 2.0, 3.5], len(values))
    s = _infer(pd.DataFrame({name: pd.Series(values), "v": other}))
    id_notes = [n for n in s.notes if "look like identifiers" in n]
    per_row = [n for n in s.notes if "Protection is per row" in n]
    if flagged:
        assert len(id_notes) == 1 and f"'{name}'" in id_notes[0] and "drop" in id_notes[0]
        assert len(per_row) == 1 and "divide epsilon" in per_row[0]
    else:
        assert not id_notes and not per_row


def test_log_scale_is_suggested_for_a_column_spanning_three_orders_of_magnitude():
    r = np.random.default_rng(0)
    df = pd.DataFrame({
        "income": np.round(r.lognormal(10, 1.5, 500), 2),  # 0 < min, max / min well above 1000
        "count": np.r_[0, 1, r.integers(2, 5_000, 498)],  # counts: smallest positive 1, maximum > 1000
        "age": r.integers(17, 91, 500),
        "shift": np.r_[-10.0, r.uniform(0, 10_000, 499)],  # a negative lower bound: linear
    })
    s = _infer(df)
    ratio = df["income"].max() / df["income"].min()
    assert (s["income"].scale == "log") == (ratio >= 1000) and ratio >= 1000
    assert s["count"].scale == "log" and s["age"].scale == "linear" and s["shift"].scale == "linear"
    log_notes = [n for n in s.notes if "scale=\"log\"" in n]
    assert len(log_notes) == 1 and "'income', 'count'" in log_notes[0]


def test_draft_schema_from_a_csv_with_gaps_everywhere(tmp_path):
    df = _gap_frame()
    df["pid"] = np.arange(len(df)) // 2
    path = tmp_path / "census.csv"
    data.write_csv(df, path)
    draft = data.draft_schema(path, label="bit")
    schema, drafted, rows = draft  # unpacks as before
    assert drafted == list(df.columns) and rows is None and schema.source == "data-derived"
    gap_cols = [c for c in df.columns if df[c].isna().any()]
    assert [c.name for c in schema if c.missing is True] == gap_cols
    assert schema["bit"].kind == "binary" and schema["bit"].categories == (0, 1)  # Int64 kept its ints
    assert schema["flag"].categories == (False, True) and schema["age"].integer
    assert schema["income"].scale == "log"
    advice = " ".join(draft.advice)
    assert all(f"'{c}'" in advice for c in gap_cols) and "'pid'" in advice and "Protection is per row" in advice
    assert set(draft.advice) <= set(schema.notes) and "fill" not in advice.lower()
    # the reviewed draft reads the same file
    back = data.read_csv(path, schema)
    _assert_same_gaps_and_values(back, df)


@pytest.mark.skipif(__import__("importlib").util.find_spec("yaml") is None, reason="needs PyYAML")
def test_draft_from_yaml_nullable_and_undeclared_gaps(tmp_path):
    (tmp_path / "m.yaml").write_text(
        '"":\n  s:\n    t:\n'
        "      sex: {type: string, categories: [F, M], nullable: true}\n"
        "      age: {type: int, lower: 0, upper: 99, nullable: true}\n"
        "      city: {type: string, categories: [a, b, c]}\n")
    only_yaml = data.draft_schema(None, yaml_path=tmp_path / "m.yaml")
    s = only_yaml.schema
    assert s.source == "public" and s["sex"].missing is True and s["age"].missing is True
    assert s["city"].missing is None and only_yaml.advice == ()
    df = _gap_frame()[["sex", "age", "city"]]
    data.write_csv(df, tmp_path / "d.csv")
    draft = data.draft_schema(tmp_path / "d.csv", yaml_path=tmp_path / "m.yaml")
    assert draft.drafted == ["city"] and draft.schema.source == "data-derived"
    assert draft.schema["city"].missing is True and draft.schema["city"].categories == ("a", "b", "c")
    assert any("'city'" in n and "may be missing was read from the rows" in n for n in draft.schema.notes)
    assert "'sex', 'age', 'city'" in " ".join(draft.advice)


# -- scale="log" ---------------------------------------------------------------------------------------
def test_scale_is_validated_serialised_only_when_log_and_public():
    with pytest.raises(ValueError, match="column 'c': scale='log' applies to continuous columns only"):
        Column("c", "categorical", categories=("a",), scale="log")
    with pytest.raises(ValueError, match="column 'v': scale='sqrt'; expected one of \\('linear', 'log'\\)"):
        Column("v", "continuous", lower=0, upper=1, scale="sqrt")
    lin = Column("v", "continuous", lower=0, upper=1)
    assert list(lin.to_dict()) == ["name", "kind", "categories", "lower", "upper", "integer", "label", "missing"]
    log = Column("v", "continuous", lower=0, upper=1e6, scale="log")
    assert log.to_dict()["scale"] == "log" and Column.from_dict(log.to_dict()) == log
    assert Column.from_dict({**lin.to_dict(), "scale": "linear"}) == lin


def test_log_scale_encoding_follows_log1p_of_its_unit_and_inverts():
    s = Schema((Column("inc", "continuous", lower=-5, upper=5e5, scale="log"),
                Column("lin", "continuous", lower=-5, upper=5e5)))
    v = np.array([-5.0, 0.0, 12.5, 999.0, 22_000.0, 5e5])
    df = pd.DataFrame({"inc": v, "lin": v})
    x = data.TableEncoder(s).encode(df)
    u = (5e5 + 5) * 1e-3  # the public unit: a thousandth of the span
    ref = np.array([math.log1p((a + 5) / u) / math.log1p((5e5 + 5) / u) for a in v], dtype=np.float32)
    np.testing.assert_array_equal(x[:, 0], ref)
    np.testing.assert_array_equal(x[:, 1], ((v + 5) / (5e5 + 5)).astype(np.float32))  # linear as before
    back = data.TableEncoder(s).decode(x)
    np.testing.assert_allclose(back["inc"], v, rtol=2e-6, atol=1e-6)
    # outputs outside [0, 1] decode to the bounds
    out = data.TableEncoder(s).decode(np.array([[-0.5, 0.0], [1.5, 0.0]]))
    assert out["inc"].tolist() == [-5.0, 5e5]
    with pytest.raises(ValueError, match=r"^column 'inc': value\(s\) outside the schema bounds \[-5, 500000\]"):
        data.TableEncoder(s).encode(pd.DataFrame({"inc": [6e5], "lin": [0.0]}))


def test_log_scale_integer_column_round_trips_exactly_up_to_a_million():
    s = Schema((Column("n", "continuous", lower=0, upper=1_000_000, integer=True, scale="log"),))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        enc = data.TableEncoder(s)
    values = np.arange(0, 1_000_001, dtype=np.int64)
    back = enc.decode(enc.encode(pd.DataFrame({"n": values})))
    assert back["n"].dtype == np.int64
    np.testing.assert_array_equal(back["n"].to_numpy(), values)
    with pytest.warns(data.IntegerResolutionWarning, match="column 'w'.*on a log scale"):
        data.TableEncoder(Schema((Column("w", "continuous", lower=0, upper=10**7, integer=True, scale="log"),)))
