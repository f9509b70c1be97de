"""Tests for dpgen_jax.data.TableEncoder: layout, encode/decode, codes and every bad-input case."""

import warnings

import jax
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpgen_jax import data
from dpgen_jax.data import Column, Schema, TableEncoder

PAPER_LAYOUT = [
    ("age", 1), ("workclass", 9), ("education-num", 16), ("marital-status", 7), ("occupation", 15),
    ("relationship", 6), ("race", 5), ("sex", 1), ("capital-gain", 1), ("capital-loss", 1),
    ("hours-per-week", 1), ("native-country", 42), ("salary", 1),
]  # fmt: skip


def small_schema() -> Schema:
    return Schema(
        (
            Column("c", "categorical", categories=("a", "b", "c", "?"), missing="?"),
            Column("y", "binary", categories=("no", "yes")),
            Column("k", "categorical", categories=(10, 20, 30)),
            Column("v", "continuous", lower=0, upper=4),
            Column("n", "continuous", lower=0, upper=4, integer=True),
        )
    )


def small_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "c": ["b", "a", "?", "c"],
            "y": ["yes", "no", "no", "yes"],
            "k": [30, 10, 20, 10],
            "v": [1.0, 0.0, 4.0, 3.0],
            "n": [2, 0, 4, 1],
        }
    )


def reference_encode(schema: Schema, df: pd.DataFrame) -> np.ndarray:
    """Slow row-by-row encoder written from the definition (the DP-auto-GAN paper, §4.1)."""
    rows = []
    for _, r in df.iterrows():
        row = []
        for col in schema:
            v = r[col.name]
            if col.kind == "categorical":
                row += [
                    1.0 if i == list(col.categories).index(v) else 0.0 for i in range(len(col.categories))
                ]
            elif col.kind == "binary":
                row.append(float(list(col.categories).index(v)))
            else:
                row.append((float(v) - col.lower) / (col.upper - col.lower))
        rows.append(row)
    return np.asarray(rows, dtype=np.float32)


# -- layout ------------------------------------------------------------------------------
def test_adult_width_and_block_layout():
    enc = TableEncoder(data.adult_schema())
    assert enc.width == 106
    start = 0
    for block, (name, width) in zip(enc.blocks, PAPER_LAYOUT, strict=True):
        assert (block.name, block.start, block.stop, block.width) == (name, start, start + width, width)
        start += width
    assert enc.block("salary") == data.Block("salary", "binary", 105, 106, ("<=50K", ">50K"))
    assert enc.block("workclass").categories[0] == "?" and enc.block("age").categories is None
    assert [b.kind for b in enc.blocks].count("continuous") == 4
    with pytest.raises(KeyError, match="fnlwgt"):
        enc.block("fnlwgt")


def test_encode_matches_reference_by_hand():
    enc = TableEncoder(small_schema())
    x = enc.encode(small_frame())
    assert x.dtype == np.float32 and x.shape == (4, 4 + 1 + 3 + 1 + 1)
    np.testing.assert_array_equal(x[0], [0, 1, 0, 0, 1, 0, 0, 1, 0.25, 0.5])
    np.testing.assert_array_equal(x, reference_encode(small_schema(), small_frame()))
    # column order in the frame does not matter
    np.testing.assert_array_equal(enc.encode(small_frame()[["n", "v", "k", "y", "c"]]), x)


def test_adult_encode_matches_slow_reference(adult):
    train, _ = adult
    schema = data.adult_schema()
    sub = train.sample(300, random_state=1)
    np.testing.assert_array_equal(TableEncoder(schema).encode(sub), reference_encode(schema, sub))


def test_adult_round_trip_train_and_test(adult):
    """decode(encode(df)) is the frame load_adult returns: values and dtypes, integers exact."""
    enc = TableEncoder(data.adult_schema())
    for df in adult:
        x = enc.encode(df)
        assert x.shape == (len(df), 106)  # no row dropped
        for b in enc.blocks:
            part = x[:, b.slice]
            if b.kind == "categorical":
                np.testing.assert_array_equal(part.sum(axis=1), 1.0)
            assert part.min() >= 0.0 and part.max() <= 1.0
        pd.testing.assert_frame_equal(enc.decode(x), df)
    train = adult[0]
    assert enc.decode(enc.encode(train.iloc[:1]))["capital-gain"].tolist() == [2174]  # once 2173.99994


def test_adult_like_round_trip_and_unchanged_scaling():
    """adult_like has load_adult's format, so the round trip is exact; the scaled values are the
    plain (x - lower) / (upper - lower) rounded to float32 (marking columns integer changed no
    encoded value)."""
    df = data.adult_like(3000, seed=4)
    enc = TableEncoder(data.adult_schema())
    x = enc.encode(df)
    pd.testing.assert_frame_equal(enc.decode(x), df)
    for col in enc.schema:
        if col.kind == "continuous":
            want = ((df[col.name].to_numpy(np.float64) - col.lower) / (col.upper - col.lower)).astype(np.float32)
            np.testing.assert_array_equal(x[:, enc.block(col.name).start], want)


@pytest.mark.parametrize(
    "lower, upper",
    [
        (0, 99999),  # UCI Adult's capital-gain
        (0, 2**24 - 1),  # the widest range that still round-trips exactly
        (-(2**53), -(2**53) + 2**24 - 1),  # extreme magnitude, widest exact range
        (2**53 - 1000, 2**53),
        (-7, 3),
    ],
)
def test_integer_columns_round_trip_exactly(lower, upper):
    schema = Schema((Column("v", "continuous", lower=lower, upper=upper, integer=True),))
    enc = TableEncoder(schema)
    span = upper - lower
    rng = np.random.default_rng(span % 1000)
    # the bounds, every value near them, and random values in between (top half: coarsest float32)
    offsets = np.unique(np.concatenate([
        np.arange(min(span, 2**16) + 1), span - np.arange(min(span, 2**16) + 1),
        rng.integers(0, span + 1, 2**16), rng.integers(span // 2, span + 1, 2**16),
    ]))  # fmt: skip
    df = pd.DataFrame({"v": np.int64(lower) + offsets.astype(np.int64)})
    back = enc.decode(enc.encode(df))
    assert back["v"].dtype == np.int64
    np.testing.assert_array_equal(back["v"].to_numpy(), df["v"].to_numpy())


def test_integer_range_too_wide_for_float32_warns():
    wide = Schema((Column("v", "continuous", lower=0, upper=2**24, integer=True),))
    with pytest.warns(data.IntegerResolutionWarning, match="column 'v'.*2\\*\\*24 or more values"):
        enc = TableEncoder(wide)
    df = pd.DataFrame({"v": np.arange(2**24 - 200, 2**24 + 1, dtype=np.int64)})
    err = np.abs(enc.decode(enc.encode(df))["v"].to_numpy() - df["v"].to_numpy())
    assert err.max() <= 1  # a float32 step is 1 here: off by at most one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TableEncoder(Schema((Column("v", "continuous", lower=0, upper=2**24 - 1, integer=True),)))
        TableEncoder(Schema((Column("v", "continuous", lower=0, upper=1e12),)))  # not integer: no claim


def test_integer_columns_refuse_fractions_and_decode_ties_to_even():
    enc = TableEncoder(small_schema())
    df = small_frame()
    df["n"] = [2.0, 0.5, 4.0, 1.25]
    with pytest.raises(ValueError, match="column 'n': 2 non-integer value\\(s\\), e.g. 0.5, 1.25"):
        enc.encode(df, verbose=True)
    with pytest.raises(ValueError, match="^column 'n': non-integer value\\(s\\); the schema") as info:
        enc.encode(df)
    assert "0.5" not in str(info.value) and "verbose=True" in str(info.value)
    df["n"] = [2.0, 0.0, 4.0, 1.0]  # integral floats are integers
    assert enc.decode(enc.encode(df))["n"].tolist() == [2, 0, 4, 1]
    # ties round to the even value also when lower is odd
    odd = TableEncoder(Schema((Column("v", "continuous", lower=1, upper=9, integer=True),)))
    out = odd.decode(np.array([[0.0625], [0.1875], [-3.0], [7.0]]))  # offsets 0.5, 1.5 -> values 1.5, 2.5
    assert out["v"].tolist() == [2, 2, 1, 9] and out["v"].dtype == np.int64


def test_round_trip_int_categories_mimic_like():
    df = data.mimic_like(n_rows=200, n_features=30, seed=3)
    enc = TableEncoder(data.binary_schema(30))
    x = enc.encode(df)
    np.testing.assert_array_equal(x, df.to_numpy(dtype=np.float32))
    back = enc.decode(x)
    pd.testing.assert_frame_equal(back, df)
    assert (back.dtypes == np.int8).all()


def test_codes(adult):
    train, _ = adult
    enc = TableEncoder(data.adult_schema())
    sub = train.iloc[1000:1400]
    codes = enc.codes(sub)
    assert list(codes.columns) == enc.schema.names and codes.index.equals(sub.index)
    for col in enc.schema:
        if col.kind == "continuous":
            assert codes[col.name].dtype == np.float64
            np.testing.assert_array_equal(codes[col.name], sub[col.name].astype(float))
        else:
            assert codes[col.name].dtype == np.int64
            expected = [list(col.categories).index(v) for v in sub[col.name]]
            assert codes[col.name].tolist() == expected, col.name
    assert set(enc.codes(train)["salary"]) == {0, 1}
    assert enc.codes(train)["sex"].mean() == pytest.approx((train["sex"] == "Male").mean())


# -- decode ------------------------------------------------------------------------------
def test_decode_argmax_rules():
    enc = TableEncoder(small_schema())
    out = np.array(
        [
            # c (ties -> first), y, k, v, n
            [0.3, 0.3, 0.1, 0.0, 0.5, 0.2, 0.9, 0.9, -0.5, 0.125],
            [0.0, 0.1, 0.9, 0.0, 0.5000001, 5.0, 1.0, 2.0, 1.5, 0.375],
            [-3.0, -1.0, -2.0, -4.0, 0.51, 0.0, 0.0, 0.0, 0.5, 0.625],
        ]
    )
    back = enc.decode(out, key=jax.random.key(0))  # a key is ignored by argmax
    assert back["c"].tolist() == ["a", "c", "b"]
    assert back["y"].tolist() == ["no", "yes", "yes"]  # strictly > 0.5
    assert back["k"].tolist() == [20, 10, 10] and back["k"].dtype == np.int8
    assert back["v"].tolist() == [0.0, 4.0, 2.0]  # clipped to the bounds
    assert back["n"].tolist() == [0, 2, 2] and back["n"].dtype == np.int64  # 0.5, 1.5, 2.5: half to even
    assert back.index.equals(pd.RangeIndex(3))
    assert back["c"].dtype == pd.Series(["x"]).dtype  # pandas' default string dtype
    jax_out = enc.decode(jax.numpy.asarray(out, dtype=jax.numpy.float32))
    assert jax_out["c"].tolist() == ["a", "c", "b"]
    assert len(enc.decode(np.zeros((0, enc.width)))) == 0


def test_decode_rejects_bad_arrays():
    enc = TableEncoder(small_schema())
    with pytest.raises(ValueError, match=r"shape \(3, 9\); expected \(n, 10\)"):
        enc.decode(np.zeros((3, 9)))
    with pytest.raises(ValueError, match="expected \\(n, 10\\)"):
        enc.decode(np.zeros(10))
    bad = np.zeros((2, 10))
    bad[1, 8] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite outputs in column\\(s\\) 'v'"):
        enc.decode(bad)
    with pytest.raises(ValueError, match="mode='best'"):
        enc.decode(np.zeros((2, 10)), mode="best")
    with pytest.raises(ValueError, match="dtype"):
        enc.decode(np.full((2, 10), "a"))


def _sample_schema() -> Schema:
    return Schema(
        (
            Column("c", "categorical", categories=("p", "q", "r", "s")),
            Column("b", "binary", categories=(0, 1)),
            Column("v", "continuous", lower=0, upper=1),
        )
    )


def test_decode_sample_frequencies_follow_outputs():
    enc = TableEncoder(_sample_schema())
    n = 20000
    w1 = np.array([0.2, 0.0, 1.2, 0.6])  # unnormalised; p = (0.1, 0, 0.6, 0.3)
    w2 = np.array([0.25, 0.25, 0.25, 0.25])
    out = np.zeros((2 * n, 6))
    out[:n, :4], out[n:, :4] = w1, w2
    out[:n, 4], out[n:, 4] = 0.3, 0.9
    out[:, 5] = 0.4
    back = enc.decode(out, mode="sample", key=jax.random.key(42))
    g1, g2 = back.iloc[:n], back.iloc[n:]
    counts1 = g1["c"].value_counts().reindex(list("pqrs"), fill_value=0).to_numpy()
    counts2 = g2["c"].value_counts().reindex(list("pqrs"), fill_value=0).to_numpy()
    assert counts1[1] == 0  # a zero output is never drawn
    nz = w1 > 0
    assert stats.chisquare(counts1[nz], n * w1[nz] / w1.sum()).pvalue > 1e-3
    assert stats.chisquare(counts2, n * w2).pvalue > 1e-3
    assert stats.chisquare(counts2, n * np.array([0.1, 0.2, 0.4, 0.3])).pvalue < 1e-6  # the test has power
    for group, p in ((g1, 0.3), (g2, 0.9)):
        freq = group["b"].mean()
        assert abs(freq - p) < 4 * np.sqrt(p * (1 - p) / n)
    assert (back["v"] == 0.4).all()  # continuous columns decode deterministically
    # the same key gives the same table, another key another one
    pd.testing.assert_frame_equal(back, enc.decode(out, mode="sample", key=jax.random.key(42)))
    assert not back.equals(enc.decode(out, mode="sample", key=jax.random.key(43)))
    legacy = enc.decode(out[:10], mode="sample", key=jax.random.PRNGKey(0))
    assert len(legacy) == 10


def test_decode_sample_of_one_hot_equals_argmax():
    enc = TableEncoder(data.adult_schema())
    row = {
        "age": 30, "workclass": "?", "education-num": "9", "marital-status": "Divorced",
        "occupation": "Sales", "relationship": "Wife", "race": "Black", "sex": "Female",
        "capital-gain": 0, "capital-loss": 0, "hours-per-week": 40, "native-country": "Peru",
        "salary": ">50K",
    }  # fmt: skip
    x = enc.encode(pd.DataFrame([row] * 50))
    pd.testing.assert_frame_equal(enc.decode(x, mode="sample", key=jax.random.key(1)), enc.decode(x))


@pytest.mark.parametrize(
    "column, value, match",
    [
        (0, -0.1, "column 'c'.*must be >= 0"),
        (4, 1.2, "column 'b'.*in \\[0, 1\\]"),
        (4, -0.2, "column 'b'.*in \\[0, 1\\]"),
    ],
)
def test_decode_sample_rejects_non_probabilities(column, value, match):
    enc = TableEncoder(_sample_schema())
    out = np.full((3, 6), 0.5)
    out[1, column] = value
    with pytest.raises(ValueError, match=match):
        enc.decode(out, mode="sample", key=jax.random.key(0))


def test_decode_sample_rejects_all_zero_block():
    enc = TableEncoder(_sample_schema())
    out = np.full((3, 6), 0.5)
    out[2, :4] = 0.0
    with pytest.raises(ValueError, match="column 'c'.*1 row\\(s\\) are all zero"):
        enc.decode(out, mode="sample", key=jax.random.key(0))
    enc.decode(out)  # argmax has no such requirement


def test_decode_sample_requires_a_jax_key():
    enc = TableEncoder(_sample_schema())
    out = np.full((3, 6), 0.5)
    with pytest.raises(ValueError, match="needs a key.*jax.random.key"):
        enc.decode(out, mode="sample")
    for bad in (
        0,
        np.random.default_rng(0),
        np.zeros(2, dtype=np.uint32),
        jax.numpy.zeros(3, dtype=jax.numpy.uint32),
    ):
        with pytest.raises(TypeError, match="jax.random key"):
            enc.decode(out, mode="sample", key=bad)
    with pytest.raises(ValueError, match="single key"):
        enc.decode(out, mode="sample", key=jax.random.split(jax.random.key(0), 2))


# -- bad input ---------------------------------------------------------------------------
def test_constructor_arguments():
    with pytest.raises(ValueError, match="on_out_of_bounds='drop'"):
        TableEncoder(small_schema(), on_out_of_bounds="drop")
    with pytest.raises(TypeError, match="Schema"):
        TableEncoder(small_schema().to_dict())


def test_rejects_non_frames_and_empty_frames():
    enc = TableEncoder(small_schema())
    with pytest.raises(TypeError, match="DataFrame"):
        enc.encode(small_frame().to_numpy())
    with pytest.raises(ValueError, match="empty"):
        enc.encode(small_frame().iloc[:0])
    with pytest.raises(ValueError, match="empty"):
        enc.codes(small_frame().iloc[:0])


def test_missing_and_undeclared_columns():
    """One message, shared with the metrics (data.check_frame): the frame, every missing and
    undeclared column, and what was expected."""
    enc = TableEncoder(small_schema())
    expected = "expected exactly the schema's columns 'c', 'y', 'k', 'v', 'n' \\(in any order\\)"
    with pytest.raises(ValueError, match=f"^df is missing schema column\\(s\\) 'k', 'v'; {expected}"):
        enc.encode(small_frame().drop(columns=["k", "v"]))
    with pytest.raises(ValueError, match=f"^df has column\\(s\\) not declared in the schema: 'extra'; {expected}"):
        enc.encode(small_frame().assign(extra=1))
    both = small_frame().drop(columns="v").assign(extra=1, more=2)
    with pytest.raises(
        ValueError, match="missing schema column\\(s\\) 'v' and has column\\(s\\) not declared in the schema: 'extra', 'more'"
    ):
        enc.codes(both)
    dup = pd.concat([small_frame(), small_frame()["v"]], axis=1)
    with pytest.raises(ValueError, match="duplicate column names \\['v'\\]"):
        enc.encode(dup)
    with pytest.raises(ValueError, match="^train is empty \\(0 rows\\)"):
        data.check_frame(small_frame().iloc[:0], small_schema(), "train")
    with pytest.raises(TypeError, match="^train must be a pandas DataFrame, got ndarray"):
        data.check_frame(small_frame().to_numpy(), small_schema(), "train")
    assert data.check_frame(small_frame()[["n", "v", "k", "y", "c"]], small_schema()) is None


def test_unknown_categories_are_named_with_a_few_values():
    enc = TableEncoder(small_schema())
    df = small_frame()
    df.loc[1, "c"] = " a"  # not stripped
    with pytest.raises(
        ValueError, match="column 'c': 1 value\\(s\\) not in the schema's categories: ' a' \\(1 row\\)"
    ):
        enc.encode(df, verbose=True)
    with pytest.raises(ValueError, match="^column 'c': value\\(s\\) not in the schema's categories; expected") as info:
        enc.encode(df)
    assert "' a'" not in str(info.value) and "row" not in str(info.value)
    many = pd.DataFrame(
        {**small_frame().iloc[[0] * 12].to_dict("list"), "c": [f"z{i}" for i in range(10)] + ["z0", "z0"]}
    )
    with pytest.raises(ValueError, match="12 value\\(s\\).*'z0' \\(3 rows\\).*\\(5 more distinct\\)"):
        enc.encode(many, verbose=True)
    df = small_frame()
    df["k"] = df["k"].astype(str)  # "10" is not 10
    with pytest.raises(ValueError, match="column 'k'.*'30'"):
        enc.encode(df, verbose=True)
    df = small_frame()
    df["k"] = [30, 10, 20, 15]
    with pytest.raises(ValueError, match="column 'k'.*15 \\(1 row\\)"):
        enc.codes(df, verbose=True)
    with pytest.raises(ValueError, match="column 'k': value\\(s\\) not in") as info:
        enc.codes(df)
    assert "15" not in str(info.value)


def test_missing_values_need_a_missing_category():
    enc = TableEncoder(small_schema())
    for col, value in (("y", None), ("y", np.nan), ("k", np.nan)):
        df = small_frame()
        df[col] = df[col].astype(object)
        df.loc[2, col] = value
        with pytest.raises(
            ValueError, match=f"column '{col}': 1 missing value\\(s\\).*does not declare the column missing"
        ):
            enc.encode(df, verbose=True)
        with pytest.raises(ValueError, match=f"^column '{col}': missing value\\(s\\)"):
            enc.encode(df)
    df = small_frame()
    df["k"] = pd.array([30, None, 20, 10], dtype="Int64")  # nullable integers
    with pytest.raises(ValueError, match="column 'k': missing value"):
        enc.encode(df)
    df["k"] = pd.array([30, 10, 20, 10], dtype="Int64")
    np.testing.assert_array_equal(enc.encode(df), enc.encode(small_frame()))
    df = small_frame()
    df.loc[0, "c"] = None  # column c declares missing='?'
    codes = enc.codes(df)
    assert codes.loc[0, "c"] == 3
    np.testing.assert_array_equal(enc.encode(df)[0, :4], [0, 0, 0, 1])
    assert enc.decode(enc.encode(df))["c"][0] == "?"


@pytest.mark.parametrize("value", ["1.5", "abc", True, (1,)])
def test_non_numeric_continuous_values(value):
    enc = TableEncoder(small_schema())
    df = small_frame()
    df["v"] = df["v"].astype(object)
    df.at[3, "v"] = value
    with pytest.raises(ValueError, match="column 'v': 1 non-numeric value\\(s\\)"):
        enc.encode(df, verbose=True)
    with pytest.raises(ValueError, match="^column 'v': non-numeric value\\(s\\) in a continuous column; expected"):
        enc.encode(df)
    df = small_frame()
    df["v"] = ["1", "2", "3", "4"]
    with pytest.raises(ValueError, match="column 'v': 4 non-numeric"):
        enc.encode(df, verbose=True)
    df = small_frame()
    df["v"] = [True, False, True, True]
    with pytest.raises(ValueError, match="column 'v'.*non-numeric"):
        enc.encode(df)


def test_missing_and_infinite_continuous_values():
    enc = TableEncoder(small_schema())
    df = small_frame()
    df.loc[0, "v"] = np.nan
    with pytest.raises(ValueError, match="column 'v': 1 missing value"):
        enc.encode(df, verbose=True)
    with pytest.raises(ValueError, match="^column 'v': missing value"):
        enc.encode(df)
    df = small_frame()
    df["n"] = df["n"].astype(object)
    df.loc[0, "n"] = None
    with pytest.raises(ValueError, match="column 'n': 1 missing value"):
        enc.encode(df, verbose=True)
    df = small_frame()
    df["n"] = pd.array([1, 2, None, 3], dtype="Int64")
    with pytest.raises(ValueError, match="column 'n': 1 missing value"):
        enc.encode(df, verbose=True)
    df = small_frame()
    df.loc[0, "v"] = np.inf
    with pytest.raises(ValueError, match="column 'v': 1 infinite"):
        TableEncoder(small_schema(), on_out_of_bounds="clip").encode(df, verbose=True)
    with pytest.raises(ValueError, match="^column 'v': infinite"):
        TableEncoder(small_schema(), on_out_of_bounds="clip").encode(df)


def test_out_of_bounds_error_by_default():
    enc = TableEncoder(small_schema())
    assert enc.last_clip_counts is None
    df = small_frame()
    df["v"] = [-1.0, 5.0, 4.5, 2.0]
    with pytest.raises(
        ValueError,
        match="column 'v': 3 value\\(s\\) outside the schema bounds \\[0, 4\\].*-1.0, 4.5, 5.0.*'clip'",
    ):
        enc.encode(df, verbose=True)
    with pytest.raises(ValueError, match=r"^column 'v': value\(s\) outside the schema bounds \[0, 4\]\. Fix") as info:
        enc.encode(df)
    assert "4.5" not in str(info.value)
    enc.encode(small_frame())
    assert enc.last_clip_counts == {"v": 0, "n": 0}


def test_out_of_bounds_clip_policy_reports_counts():
    enc = TableEncoder(small_schema(), on_out_of_bounds="clip")
    df = small_frame()
    df["v"] = [-1.0, 5.0, 4.5, 2.0]
    df["n"] = [7, 0, 1, 2]
    with pytest.warns(UserWarning, match="'v': 3, 'n': 1 \\(of 4 rows\\)"):
        x = enc.encode(df, verbose=True)
    assert enc.last_clip_counts == {"v": 3, "n": 1}
    with pytest.warns(UserWarning, match="in column\\(s\\) 'v', 'n' to the bounds") as record:
        enc.encode(df)
    assert not any(ch.isdigit() for ch in str(record[0].message))  # no count, no row number
    np.testing.assert_array_equal(x[:, 8], [0.0, 1.0, 1.0, 0.5])
    np.testing.assert_array_equal(x[:, 9], [1.0, 0.0, 0.25, 0.5])
    assert x.shape[0] == 4  # no row dropped
    with pytest.warns(UserWarning, match="'v': 3"):
        codes = enc.codes(df, verbose=True)
    assert codes["v"].tolist() == [0.0, 4.0, 4.0, 2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        enc.encode(small_frame())  # nothing clipped: no warning
    assert enc.last_clip_counts == {"v": 0, "n": 0}
