"""The files of the command line: CSVs that keep every dtype through a round trip, schema drafts
that keep codes, public metadata files (``--from-yaml``) and their errors, named by file, column
and key. The helpers and the environment are those of test_cli.py."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import cli, data
from tests.test_cli import (
    MIXED_SCHEMA,
    env,  # noqa: F401  (the fixture of the command-line tests)
    mixed_frame,
    run,
)

ROOT = pathlib.Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- CSVs and schemas


def test_csv_round_trip_keeps_every_dtype(tmp_path):
    schema = MIXED_SCHEMA
    df = mixed_frame()
    enc = data.TableEncoder(schema)
    decoded = enc.decode(enc.encode(df))
    path = tmp_path / "rows.csv"
    data.write_csv(decoded, path)
    back = data.read_csv(path, schema)
    assert back["zip"].tolist() == decoded["zip"].tolist()  # "01" stays "01", "10" stays a string
    assert back["code"].dtype == np.int64 and back["age"].dtype == np.int64
    assert back["flag"].map(type).eq(bool).all()
    assert back["note"].isin(["a", " b", "NA"]).all()  # "NA" and a leading space survive
    assert back["score"].tolist() == decoded["score"].tolist()  # floats at full precision
    np.testing.assert_array_equal(enc.encode(back), enc.encode(decoded))
    # an empty cell of a column with a missing category encodes as that category
    text = path.read_text().splitlines()
    header = text[0].split(",")
    cells = text[1].split(",")
    cells[header.index("note")] = ""
    path.write_text("\n".join([text[0], ",".join(cells)]) + "\n")
    one = data.read_csv(path, schema)
    assert pd.isna(one["note"][0])
    assert enc.decode(enc.encode(one))["note"][0] == "NA"


def test_read_csv_names_the_file_and_column_it_cannot_parse(tmp_path):
    path = tmp_path / "bad.csv"
    mixed_frame(5).assign(age="old").to_csv(path, index=False)
    with pytest.raises(cli.UsageError, match=r"bad.csv: column 'age' holds text that is not a number; expected integers"):
        data.read_csv(path, MIXED_SCHEMA)
    mixed_frame(5).assign(flag="maybe").to_csv(path, index=False)
    with pytest.raises(cli.UsageError, match=r"column 'flag' holds a value other than True/False; expected True or False"):
        data.read_csv(path, MIXED_SCHEMA)


def test_draft_types_columns_without_losing_codes(tmp_path):
    path = tmp_path / "mixed.csv"
    mixed_frame().to_csv(path, index=False)
    draft = data.draft_schema(path, label="y")
    s = draft.schema
    assert s.source == "data-derived" and draft.drafted == s.names and draft.rows is None
    assert s["zip"].categories == ("01", "2", "10")  # codes with leading zeros stay strings, in numeric order
    assert s["code"].kind == "categorical" and s["code"].categories == (10, 20, 30)  # few whole numbers: a code
    assert any("'code'" in n and "categorical" in n for n in draft.advice)
    assert s["flag"].categories == (False, True)
    assert s["note"].categories == (" b", "NA", "a")
    assert s["score"].kind == "continuous" and not s["score"].integer
    assert s.label == "y"


# ----------------------------------------------------------------------------- metadata files

needs_yaml = pytest.mark.skipif(importlib.util.find_spec("yaml") is None,
                                reason="the --from-yaml tests need PyYAML (the 'yaml' extra)")


@needs_yaml
def test_adult_metadata_file_declares_the_public_adult_schema():
    draft = data.draft_schema(None, yaml_path=ROOT / "docs" / "adult-metadata.yaml")
    adult = data.adult_schema()
    assert draft.schema.columns == adult.columns and draft.drafted == [] and draft.rows == 32561
    assert draft.schema.source == "public" and draft.schema.notes[1:] == adult.notes


@needs_yaml
def test_from_yaml_with_data_drafts_only_the_undeclared_facts(tmp_path, env):  # noqa: F811
    (tmp_path / "meta.yaml").write_text(
        '"":\n  s:\n    t:\n      max_ids: 3\n'
        "      zip: {type: string, categories: ['01', '10', '2', '99']}\n"
        "      age: {type: int, lower: 0, upper: 120}\n"
        "      flag: {type: boolean}\n"
        "      note: {type: string}\n"
        "      code: {type: int, categories: [10, 20, 30]}\n")
    mixed_frame().to_csv(tmp_path / "d.csv", index=False)
    proc = run(env, tmp_path, "schema", "draft", "d.csv", "--from-yaml", "meta.yaml", "--label", "y",
               "-o", "s.json")
    assert proc.returncode == 0, proc.stderr
    assert "DATA-DERIVED" in proc.stderr
    s = data.load_schema(tmp_path / "s.json")
    assert s.source == "data-derived" and s.names == list(mixed_frame().columns)
    assert s["zip"].categories == ("01", "10", "2", "99") and s["age"].upper == 120 and s["age"].integer
    assert s["code"].categories == (10, 20, 30) and s["flag"].kind == "binary"
    assert s["note"].categories == (" b", "NA", "a")  # drafted: no public list in the file
    drafted = ["note", "score", "y"]
    assert str(drafted) in s.notes[0] and "declared in the public metadata file" in s.notes[1]
    assert any("max_ids" in n for n in s.notes)


@needs_yaml
@pytest.mark.parametrize("column, message", [
    ("id: {type: int, private_id: true}", "private identifier"),
    ("when: {type: datetime}", "type 'datetime' is not supported"),
    ("x: {type: int, lower: 0, uper: 3}", "unknown key(s) ['uper']"),
    ("x: {type: int, lower: 0}", "give both lower and upper"),
    ("x: {type: string}", "lack public facts"),
    ("x: {type: float, lower: 0, upper: 1, missing_value: 0}", "missing_value is supported for discrete"),
])
def test_metadata_errors_name_the_column(tmp_path, column, message):
    (tmp_path / "m.yaml").write_text(f'"":\n  s:\n    t:\n      {column}\n')
    with pytest.raises(cli.UsageError) as info:
        data.draft_schema(None, yaml_path=tmp_path / "m.yaml")
    assert message in str(info.value)


@needs_yaml
def test_metadata_file_with_several_tables_needs_table(tmp_path):
    (tmp_path / "m.yaml").write_text(
        'C:\n  s:\n    a:\n      x: {type: boolean}\n    b:\n      y: {type: boolean}\n')
    with pytest.raises(cli.UsageError, match="describes 2 tables"):
        data.draft_schema(None, yaml_path=tmp_path / "m.yaml")
    assert data.draft_schema(None, yaml_path=tmp_path / "m.yaml", table="s.b").schema.names == ["y"]
