"""Tests for dpgen_jax.data schema objects: Column, Schema, adult_schema, binary_schema, infer_schema."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data
from dpgen_jax._validate import UsageError
from dpgen_jax.data import Column, DataDerivedSchemaWarning, Schema

# The DP-auto-GAN paper's §4.1 table: (column, width), in order; total 106.
PAPER_LAYOUT = [
    ("age", 1), ("workclass", 9), ("education-num", 16), ("marital-status", 7), ("occupation", 15),
    ("relationship", 6), ("race", 5), ("sex", 1), ("capital-gain", 1), ("capital-loss", 1),
    ("hours-per-week", 1), ("native-country", 42), ("salary", 1),
]  # fmt: skip


def mixed_schema() -> Schema:
    return Schema(
        (
            Column("s", "categorical", categories=("b", "a", "?"), missing="?"),
            Column("i", "categorical", categories=(3, 1, 2)),
            Column("flag", "binary", categories=(False, True)),
            Column("y", "binary", categories=(0, 1), label=True),
            Column("v", "continuous", lower=-1.5, upper=2, integer=False),
            Column("n", "continuous", lower=0, upper=10, integer=True),
        ),
        source="public",
        notes=("a note",),
    )


# -- Column ------------------------------------------------------------------------------
def test_column_normalises_types():
    c = Column("c", "categorical", categories=[np.int64(2), np.int64(5)])
    assert c.categories == (2, 5) and all(type(v) is int for v in c.categories)
    v = Column("v", "continuous", lower=np.int32(1), upper=3)
    assert v.lower == 1.0 and isinstance(v.lower, float) and v.width == 1
    assert Column("c", "categorical", categories=("a", "b", "c")).width == 3
    assert Column("b", "binary", categories=("n", "y")).width == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(name="", kind="binary", categories=(0, 1)), "non-empty"),
        (dict(name="c", kind="ordinal", categories=(0, 1)), "kind='ordinal'"),
        (dict(name="c", kind="binary", categories=("a",)), "exactly 2"),
        (dict(name="c", kind="binary", categories=("a", "b", "c")), "exactly 2"),
        (dict(name="c", kind="categorical", categories=("a", "a")), "duplicate"),
        (dict(name="c", kind="categorical", categories=()), "at least one"),
        (dict(name="c", kind="categorical", categories=None), "ordered sequence"),
        (dict(name="c", kind="categorical", categories="abc"), "ordered sequence"),
        (dict(name="c", kind="categorical", categories={"a", "b"}), "ordered sequence"),
        (dict(name="c", kind="categorical", categories=("a", "b"), missing="?"), "missing='\\?'"),
        (dict(name="c", kind="categorical", categories=("a", "b"), lower=0), "no bounds"),
        (dict(name="c", kind="categorical", categories=("a", "b"), integer=True), "continuous columns only"),
        (dict(name="c", kind="continuous", lower=0, upper=0), "smaller than"),
        (dict(name="c", kind="continuous", lower=2, upper=1), "smaller than"),
        (dict(name="c", kind="continuous", lower=0), "upper"),
        (dict(name="c", kind="continuous", lower=0, upper=float("inf")), "finite"),
        (dict(name="c", kind="continuous", lower="0", upper=1), "lower='0'"),
        (dict(name="c", kind="continuous", lower=0, upper=1, categories=("a",)), "no categories"),
        (dict(name="c", kind="continuous", lower=0, upper=1, missing=0), "missing"),
    ],
)
def test_column_rejects_inconsistent_fields(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Column(**kwargs)


def test_column_rejects_bad_category_types():
    with pytest.raises(TypeError, match="mix types"):
        Column("c", "categorical", categories=("1", 2))
    with pytest.raises(TypeError, match="float"):
        Column("c", "categorical", categories=(1.5, 2.5))
    with pytest.raises(TypeError, match="mix types"):
        Column("c", "binary", categories=(0, True))


# -- Schema ------------------------------------------------------------------------------
def test_schema_lookup_and_properties():
    s = mixed_schema()
    assert s.names == ["s", "i", "flag", "y", "v", "n"]
    assert len(s) == 6 and s.label == "y" and "v" in s and "zz" not in s
    assert s["v"].upper == 2.0 and [c.name for c in s] == s.names
    with pytest.raises(KeyError, match="no column 'zz'"):
        s["zz"]
    assert data.binary_schema(2).label is None


def test_schema_rejects_bad_structure():
    a = Column("a", "binary", categories=(0, 1), label=True)
    b = Column("b", "binary", categories=(0, 1), label=True)
    with pytest.raises(ValueError, match="duplicate column names"):
        Schema((a, a))
    with pytest.raises(ValueError, match="at most one label"):
        Schema((a, b))
    with pytest.raises(ValueError, match="at least one column"):
        Schema(())
    with pytest.raises(ValueError, match="source="):
        Schema((a,), source="dp-ish")
    with pytest.raises(TypeError, match="Column objects"):
        Schema(({"name": "a"},))


def test_json_round_trip_is_lossless_and_keeps_category_types():
    s = mixed_schema()
    text = s.to_json()
    back = Schema.from_json(text)
    assert back == s
    assert back.to_json() == text
    assert [type(c) for c in back["i"].categories] == [int, int, int]
    assert [type(c) for c in back["flag"].categories] == [bool, bool]
    assert [type(c) for c in back["s"].categories] == [str, str, str]
    assert back["s"].missing == "?" and back.notes == ("a note",) and back.source == "public"
    # int categories stay ints and string digits stay strings in the JSON text itself
    raw = json.loads(text)
    assert raw["columns"][1]["categories"] == [3, 1, 2]
    adult = data.adult_schema()
    assert Schema.from_json(adult.to_json()) == adult
    assert Schema.from_json(adult.to_json())["education-num"].categories[0] == "1"
    ds = Schema.from_dict({**s.to_dict(), "source": "data-derived"})
    assert Schema.from_dict(ds.to_dict()) == ds and ds.source == "data-derived"


def test_from_dict_defaults_and_errors():
    s = Schema.from_dict({"columns": [{"name": "a", "kind": "binary", "categories": ["n", "y"]}]})
    assert s.source == "public" and s.notes == () and s["a"].categories == ("n", "y")
    with pytest.raises(ValueError, match="unknown keys \\['colums'\\]"):
        Schema.from_dict({"colums": []})
    with pytest.raises(ValueError, match="unknown keys \\['bounds'\\]"):
        Schema.from_dict({"columns": [{"name": "a", "kind": "continuous", "bounds": [0, 1]}]})
    with pytest.raises(ValueError, match="version=2"):
        Schema.from_dict({"version": 2, "columns": []})
    with pytest.raises(ValueError, match="missing key 'columns'"):
        Schema.from_dict({"source": "public"})


def test_assumptions_public_vs_data_derived():
    pub = data.adult_schema().assumptions()
    assert any("public knowledge" in a for a in pub)
    assert any("adult.names documents no numeric bounds" in a and "public knowledge" in a for a in pub)
    assert not any("NOT end-to-end" in a for a in pub)
    df = pd.DataFrame({"a": ["x", "y", "x"], "b": [1.0, 2.5, 3.0]})
    with pytest.warns(DataDerivedSchemaWarning):
        derived = data.infer_schema(df)
    text = " ".join(derived.assumptions())
    assert derived.source == "data-derived" and "NOT end-to-end differentially private" in text


# -- adult_schema ------------------------------------------------------------------------
def test_adult_schema_matches_paper_layout():
    s = data.adult_schema()
    assert [(c.name, c.width) for c in s] == PAPER_LAYOUT
    assert sum(c.width for c in s) == 106
    assert s.label == "salary" and s.source == "public"
    assert s["sex"].kind == "binary" and s["sex"].categories == ("Female", "Male")
    assert s["salary"].categories == ("<=50K", ">50K")
    assert s["education-num"].categories == tuple(str(i) for i in range(1, 17))
    for name in ("workclass", "occupation", "native-country"):
        assert s[name].categories[0] == "?" and s[name].missing == "?"
        assert list(s[name].categories) == sorted(s[name].categories)
    for name in ("marital-status", "relationship", "race"):
        assert "?" not in s[name].categories and s[name].missing is None
    assert "Holand-Netherlands" in s["native-country"].categories
    assert s["workclass"].categories[:3] == ("?", "Federal-gov", "Local-gov")
    assert s["race"].categories == ("Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White")
    bounds = {c.name: (c.lower, c.upper, c.integer) for c in s if c.kind == "continuous"}
    assert bounds == {
        "age": (17, 90, True),
        "capital-gain": (0, 99999, True),
        "capital-loss": (0, 4356, True),
        "hours-per-week": (1, 99, True),
    }


def test_adult_schema_categories_come_from_adult_names(adult_dir):
    """Every category list equals the one in adult.names (plus '?' where documented)."""
    names_text = (adult_dir / "adult.names").read_text()
    s = data.adult_schema()
    for line in names_text.splitlines():
        if ":" not in line or line.startswith("|") or "continuous" in line:
            continue
        key, values = line.split(":", 1)
        if key not in s:
            continue
        listed = {v.strip() for v in values.strip().rstrip(".").split(",")}
        ours = set(s[key].categories) - {"?"}
        assert ours == listed, key


def test_adult_schema_covers_the_data(adult_dir):
    train, test = data.load_adult(adult_dir)
    s = data.adult_schema()
    for c in s:
        both = pd.concat([train[c.name], test[c.name]])
        if c.kind == "continuous":
            assert c.lower == both.min() and c.upper == both.max()  # the paper's bounds
        else:
            assert set(both.unique()) <= set(c.categories), c.name


# -- binary_schema / infer_schema --------------------------------------------------------
def test_binary_schema():
    s = data.binary_schema(4, prefix="code_")
    assert s.names == ["code_0", "code_1", "code_2", "code_3"]
    assert all(c.kind == "binary" and c.categories == (0, 1) for c in s)
    assert s.source == "public"
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="n_features"):
            data.binary_schema(bad)


def test_infer_schema_rules():
    df = pd.DataFrame(
        {
            "flag": [True, False, True],
            "bin": [0, 1, 1],
            "count": [3, 7, 5],
            "real": [0.5, 1.5, -2.0],
            "cat": ["b", "a", "c"],
            "yn": ["no", "yes", "no"],
        }
    )
    with pytest.warns(DataDerivedSchemaWarning, match="not end-to-end"):
        s = data.infer_schema(df, label="yn")
    assert s.source == "data-derived" and s.label == "yn"
    assert s["flag"] == Column("flag", "binary", categories=(False, True))
    assert s["bin"] == Column("bin", "binary", categories=(0, 1))
    assert s["count"] == Column("count", "continuous", lower=3, upper=7, integer=True)
    assert s["real"] == Column("real", "continuous", lower=-2.0, upper=1.5)
    assert s["cat"].categories == ("a", "b", "c") and s["cat"].kind == "categorical"
    assert s["yn"].kind == "binary" and s["yn"].categories == ("no", "yes")
    enc = data.TableEncoder(s)
    back = enc.decode(enc.encode(df))
    pd.testing.assert_frame_equal(back, df[s.names], check_dtype=False, rtol=1e-6)
    assert back["bin"].dtype == np.int8 and back["flag"].dtype == bool and back["count"].dtype == np.int64


def test_infer_schema_errors():
    ok = pd.DataFrame({"a": [1.0, 2.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataDerivedSchemaWarning)
        with pytest.raises(ValueError, match="empty"):
            data.infer_schema(ok.iloc[:0])
        with pytest.raises(ValueError, match="label='b'"):
            data.infer_schema(ok, label="b")
        with pytest.raises(ValueError, match="column 'a' has no value"):
            data.infer_schema(pd.DataFrame({"a": [None, None]}, dtype=object))
        with pytest.raises(ValueError, match="column 'a' is constant") as info:
            data.infer_schema(pd.DataFrame({"a": [2.5, 2.5]}))
        assert "2.5" not in str(info.value)  # no private value in the message
        with pytest.raises(ValueError, match="mixes value types"):
            data.infer_schema(pd.DataFrame({"a": ["x", 1]}, dtype=object))
        with pytest.raises(TypeError, match="DataFrame"):
            data.infer_schema({"a": [1]})


def test_public_schema_does_not_depend_on_rows_but_inferred_does(adult_dir):
    """Removing the single Holand-Netherlands row changes nothing under a public schema."""
    train, _ = data.load_adult(adult_dir)
    holand = train["native-country"] == "Holand-Netherlands"
    assert holand.sum() == 1
    without = train[~holand]
    enc_a, enc_b = data.TableEncoder(data.adult_schema()), data.TableEncoder(data.adult_schema())
    x_full, x_without = enc_a.encode(train), enc_b.encode(without)
    assert enc_a.blocks == enc_b.blocks and enc_a.schema.to_json() == enc_b.schema.to_json()
    np.testing.assert_array_equal(x_full[~holand.to_numpy()], x_without)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataDerivedSchemaWarning)
        inferred_full, inferred_without = data.infer_schema(train), data.infer_schema(without)
    assert inferred_full.to_json() != inferred_without.to_json()
    assert "Holand-Netherlands" not in inferred_without["native-country"].categories


def test_docstring_examples_run():
    import doctest

    from dpgen_jax.data import _encoder, _schema

    for module in (_schema, _encoder):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# -- unreadable data files: the rule, no position of the private file unless verbose ----------
MALFORMED = {
    "fields": ("a,b\n" + "1,2\n" * 488 + "3,4,5\n", "a row has a different number of fields than the header",
               "line 490"),
    "quote": ("a,b\n" + "1,2\n" * 40 + '1,"2\n3,4\n', "a quoted field is not closed before the end of the file",
              "row 41"),
    "bytes": (b"a,b\n" + b"1,2\n" * 40 + b"1,\xff\n", "the file is not utf-8 text", "byte 0xff"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_unreadable_csv_errors_name_the_rule_and_no_position_unless_verbose(case, tmp_path, capsys):
    from dpgen_jax import cli

    content, rule, position = MALFORMED[case]
    bad = tmp_path / "bad.csv"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    schema = Schema((Column("a", "continuous", lower=0, upper=9, integer=True),
                     Column("b", "continuous", lower=0, upper=9, integer=True)), source="public")
    with pytest.raises(UsageError) as info:
        data.read_csv(bad, schema)
    msg = str(info.value)
    assert msg.startswith(f"{bad}: not a readable CSV file ({rule}).") and "--verbose" in msg
    assert not any(ch.isdigit() for ch in msg.replace(str(bad), "").replace(rule, "")), msg  # no position
    with pytest.raises(UsageError, match=position):
        data.read_csv(bad, schema, verbose=True)

    # the command line: fit and schema draft, with and without --verbose
    (tmp_path / "schema.json").write_text(schema.to_json())
    fit = ["fit", "--method", "independent", "--data", str(bad), "--schema", str(tmp_path / "schema.json"),
           "--epsilon", "1", "--out", str(tmp_path / "m.npz")]
    draft = ["schema", "draft", str(bad), "-o", str(tmp_path / "draft.json")]
    for argv in (fit, draft):
        for verbose in (False, True):
            assert cli.main(argv + ["--verbose"] * verbose) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and err[0].startswith(f"dpgen-jax: error: {bad}: not a readable CSV file"), err
            assert (rule in err[0], position in err[0]) == (not verbose, verbose), (argv, verbose, err)
