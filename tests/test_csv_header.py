"""A CSV whose first row looks like data is refused, never turned into column names.

Without a header row, pandas would name the columns after the first private record ('1', '1.1',
'0', ...: repeated names get a '.k' suffix) and drop that record. ``schema draft`` (library and
command line) refuses such a file, without quoting the names (they may be a private row).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import cli, data
from dpgen_jax._validate import UsageError


def _binary_rows(path, rows=40, columns=1058, header=False, seed=0):
    """A sparse 0/1 table of the shape of the public 1,670 x 1,058 binary table."""
    x = (np.random.default_rng(seed).random((rows, columns)) < 0.05).astype(int)
    x[0, :3] = (1, 1, 0)  # a first row with repeats, as in a real headerless file
    pd.DataFrame(x, columns=[f"f{j}" for j in range(columns)]).to_csv(path, index=False, header=header)
    return x


def test_a_headerless_binary_table_is_refused(tmp_path):
    path = tmp_path / "binary.csv"
    _binary_rows(path)
    with pytest.raises(UsageError, match="does not look like a header row") as info:
        data.draft_schema(path)
    assert "1058 column names is a number" in str(info.value)
    assert "'1.1'" not in str(info.value)  # no name (a private row) is quoted


def test_repeated_names_are_refused_and_a_real_header_is_read(tmp_path):
    path = tmp_path / "rows.csv"
    pd.DataFrame([["a", "b", "a"], ["c", "d", "e"]]).to_csv(path, index=False, header=False)
    with pytest.raises(UsageError, match="1 of its 3 column names repeat"):
        data.draft_schema(path)
    good = tmp_path / "good.csv"
    pd.DataFrame({"age": [30, 41, 52], "sex": ["f", "m", "f"]}).to_csv(good, index=False)
    draft = data.draft_schema(good)
    assert [c.name for c in draft.schema.columns] == ["age", "sex"]


def test_the_command_line_exits_with_one_line(tmp_path, capsys):
    path = tmp_path / "binary.csv"
    _binary_rows(path, columns=30)
    code = cli.main(["schema", "draft", str(path), "-o", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    assert code == 2 and "does not look like a header row" in err
    assert not (tmp_path / "s.json").exists()
