"""The round trip of docs/cli.md on a CSV with gaps in every column kind, through the command
line (``cli.main``, as ``tests/test_cli.py`` runs it): ``schema draft`` accepts the gaps, declares
each such column ``missing=True`` and flags the id column; the only edit is the one docs/cli.md
asks for (drop the id, replace data-derived facts by public ones, mark the schema public); ``fit``
with ``independent`` at a small epsilon, ``sample`` writes gaps as empty cells in every kind and
nothing else (no sentinel), and ``evaluate`` scores the label on the rows where it is present."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data
from tests.test_cli import env, run  # noqa: F401  (env: the fixture of the command-line tests)

N = 360
GAPS = {"age": 0.06, "sex": 0.05, "educ": 0.08, "income": 0.07, "married": 0.1}


def census(n: int, seed: int) -> pd.DataFrame:
    """A census-like table: a person id repeated over two rows, gaps in every other column."""
    r = np.random.default_rng(seed)
    x = r.normal(size=n)
    df = pd.DataFrame({
        "pid": np.arange(n) // 2,
        "age": np.clip(np.round(40 + 12 * x), 18, 90).astype(int),          # integer
        "sex": r.choice(["F", "M"], n),                                      # binary strings
        "educ": r.choice(["hs", "college", "grad"], n),                      # categorical strings
        "income": np.round(np.minimum(np.exp(10 + x + 0.5 * r.normal(size=n)), 9e5), 2),  # float, skewed
        "married": (x + r.normal(size=n) > 0).astype(int),                   # binary 0/1 label
    })
    for column, share in GAPS.items():
        df[column] = df[column].astype(object)
        df.loc[r.random(n) < share, column] = None
    return df


def public(draft: dict) -> dict:
    """The user's edit (docs/cli.md, step 2): drop the identifier, replace the data-derived
    bounds by public ones, keep everything else of the draft, mark the schema public."""
    bounds = {"age": (17, 90), "income": (0, 1_000_000)}
    columns = [dict(c) for c in draft["columns"] if c["name"] != "pid"]
    for c in columns:
        if c["name"] in bounds:
            c["lower"], c["upper"] = bounds[c["name"]]
    return dict(draft, columns=columns, source="public", notes=["Bounds from the survey's codebook."])


@pytest.fixture(scope="module")
def trip(env, tmp_path_factory):  # noqa: F811
    d = tmp_path_factory.mktemp("gaps")
    full = census(N, 0)
    full.to_csv(d / "data.csv", index=False)
    procs = {"draft": run(env, d, "schema", "draft", "data.csv", "--label", "married", "-o", "draft.json")}
    draft = json.loads((d / "draft.json").read_text())
    (d / "schema.json").write_text(json.dumps(public(draft), indent=2))
    rows = full.drop(columns="pid")
    rows.iloc[: 2 * N // 3].to_csv(d / "train.csv", index=False)
    rows.iloc[2 * N // 3:].to_csv(d / "test.csv", index=False)
    procs["fit"] = run(env, d, "fit", "--method", "independent", "--data", "train.csv", "--schema", "schema.json",
                       "--epsilon", "3", "--seed", "0", "--no-progress", "--out", "model.npz")
    procs["sample"] = run(env, d, "sample", "model.npz", "-n", "400", "-o", "synthetic.csv", "--seed", "1")
    procs["evaluate"] = run(env, d, "evaluate", "--real", "train.csv", "--test", "test.csv", "--synthetic",
                            "synthetic.csv", "--schema", "schema.json", "--n-jobs", "1", "--out", "eval")
    return d, procs, draft


def test_draft_accepts_gaps_in_every_kind_and_flags_the_id(trip):
    d, procs, draft = trip
    assert procs["draft"].returncode == 0, procs["draft"].stderr
    kinds = {c["name"]: (c["kind"], c.get("integer"), c["missing"]) for c in draft["columns"]}
    assert kinds["age"] == ("continuous", True, True) and kinds["income"][::2] == ("continuous", True)
    assert kinds["sex"] == ("binary", False, True) and kinds["married"] == ("binary", False, True)
    assert kinds["educ"] == ("categorical", False, True) and kinds["pid"][2] is None
    out = procs["draft"].stdout
    assert "fill" not in (out + procs["draft"].stderr).lower()
    assert "'pid'" in out and "identifier" in out and "per row" in out  # drop the id; unit of privacy
    for column in GAPS:
        assert f"'{column}'" in out.split("have gaps")[0].splitlines()[-1]


def test_sample_writes_gaps_as_empty_cells_in_every_kind_and_no_sentinel(trip):
    d, procs, _ = trip
    for step in ("fit", "sample"):
        assert procs[step].returncode == 0, (step, procs[step].stderr)
    schema = data.load_schema(d / "schema.json")
    raw = pd.read_csv(d / "synthetic.csv", dtype=str, keep_default_na=False)
    assert list(raw.columns) == list(pd.read_csv(d / "train.csv", nrows=0).columns)
    for column in GAPS:
        cells = raw[column]
        assert (cells == "").any(), column  # a gap is an empty cell
        present = cells[cells != ""]
        if schema[column].kind == "continuous":
            values = present.astype(float)
            assert values.between(schema[column].lower, schema[column].upper).all(), column
            if schema[column].integer:
                assert present.str.fullmatch(r"-?\d+").all(), column
        else:  # the user's own categories only: no sentinel, no "nan"
            assert set(present) <= {str(c) for c in schema[column].categories}, column
    back = data.read_csv(d / "synthetic.csv", schema)  # and it reads back under the schema
    assert all(back[c].isna().any() for c in GAPS)


def test_evaluate_scores_the_label_on_the_rows_where_it_is_present(trip):
    d, procs, _ = trip
    assert procs["evaluate"].returncode == 0, procs["evaluate"].stderr
    result = json.loads((d / "eval" / "metrics.json").read_text())
    assert "present" in result["meta"]["label_rows"]
    # the label stays binary: TSTR and the LR utility are defined
    for key in ("label_accuracy", "tstr_auroc", "lr_utility"):
        assert result[key] is not None, (key, result["nulls"].get(key))
    assert result["tstr_auroc"]["protocol"]["positive"] == 1
    line = next(l for l in procs["evaluate"].stdout.splitlines() if l.startswith("label 'married'"))
    assert "random-forest accuracy real" in line and " - " not in line
