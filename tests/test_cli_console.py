"""What the command line prints for a data scientist who uses only it: third-party warnings of the
metrics attributed to the metric without their data-derived numbers, an unlabelled table named as
such, an out-of-bounds error naming the schema field to edit, drafted codes in numeric order, and a
console without XLA's C++ log lines. The helpers and the environment are those of test_cli.py."""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso

from dpgen_jax import data
from tests.test_cli import (
    assert_user_error,
    env,  # noqa: F401  (the fixture of the command-line tests)
    run,
    run_process,
)
from tests.test_cli_schemas import needs_yaml

LEVELS = [f"v{j}" for j in range(12)]
# No label; "big" on a raw scale of 1e9 beside 48 one-hot features and 80 training rows: the
# dimension-wise Lasso(alpha=1) of "big" stops at max_iter, and scikit-learn's ConvergenceWarning
# quotes the duality gap, a number computed from the rows.
SCHEMA = {"version": 1, "source": "public", "notes": ["A generated table."], "columns": [
    *[{"name": f"k{i}", "kind": "categorical", "categories": LEVELS} for i in range(4)],
    {"name": "c", "kind": "continuous", "lower": 0, "upper": 1},
    {"name": "big", "kind": "continuous", "lower": 0, "upper": 1e9}]}


def wide_frame(n: int = 240, seed: int = 0) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    c = r.uniform(0, 1, n)
    cols = {f"k{i}": r.choice(LEVELS, n).astype(object) for i in range(4)}
    return pd.DataFrame({**cols, "c": c, "big": np.minimum(1e9 * c + r.uniform(0, 1e8, n), 1e9)})


@pytest.fixture(scope="module")
def evaluated(env, tmp_path_factory):  # noqa: F811
    d = tmp_path_factory.mktemp("console")
    df = wide_frame()
    for name, part in (("train", df[:80]), ("test", df[80:160]), ("synthetic", df[160:])):
        part.to_csv(d / f"{name}.csv", index=False)
    (d / "schema.json").write_text(json.dumps(SCHEMA))
    proc = run(env, d, "evaluate", "--real", "train.csv", "--test", "test.csv", "--synthetic", "synthetic.csv",
               "--schema", "schema.json", "--n-jobs", "1", "--out", "eval")
    assert proc.returncode == 0, proc.stderr
    return d, proc


def test_a_metrics_third_party_warning_is_attributed_without_its_numbers(evaluated):
    d, proc = evaluated
    df = wide_frame()
    # The reference: scikit-learn alone, on this table's features, warns with the data's numbers.
    x = pd.get_dummies(df[[f"k{i}" for i in range(4)]]).to_numpy(float)
    with warnings.catch_warnings(record=True) as direct:
        warnings.simplefilter("always")
        Lasso(alpha=1.0).fit(np.column_stack([x, df["c"]])[:80], df["big"][:80])
    assert any(issubclass(w.category, ConvergenceWarning) and "Duality gap" in str(w.message) for w in direct)
    result = json.loads((d / "eval" / "metrics.json").read_text())
    flags = [s["flag"] or "" for s in result["dimension_wise_prediction"].values()]
    fits = sum(f.count("not_converged") for f in flags)
    assert fits >= 1  # the metric recorded its non-converged fits
    lines = [line for line in proc.stderr.splitlines() if "ConvergenceWarning" in line]
    assert lines == [f"dpgen-jax: warning: metric dimension_wise_prediction: ConvergenceWarning from sklearn, "
                     f"{f'{fits} times' if fits > 1 else 'once'} (message withheld: it may hold data-derived "
                     "numbers)"], proc.stderr
    assert "Duality gap" not in proc.stderr and "did not converge" not in proc.stderr


def test_an_unlabelled_table_is_named_as_such(evaluated, env, tmp_path):  # noqa: F811
    d, proc = evaluated
    assert "None" not in proc.stdout, proc.stdout
    first = proc.stdout.splitlines()[0]
    assert first.startswith("no label (--label L") and "mean 1-way TV" in first and "AUROC" not in first
    assert "on None" not in (d / "eval" / "summary.md").read_text()
    wide_frame().to_csv(tmp_path / "d.csv", index=False)
    draft = run(env, tmp_path, "schema", "draft", "d.csv", "-o", "s.json")
    assert draft.returncode == 0, draft.stderr
    assert "label None" not in draft.stdout and "no label (--label L" in draft.stdout.splitlines()[0]
    labelled = run(env, tmp_path, "schema", "draft", "d.csv", "--label", "k0", "-o", "t.json")
    assert "label 'k0'" in labelled.stdout.splitlines()[0]


def test_an_out_of_bounds_value_names_the_schema_field_to_edit(env, tmp_path):  # noqa: F811
    df = wide_frame(40)
    df.loc[3, "c"] = 1.5
    df.to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    proc = run(env, tmp_path, "fit", "--method", "independent", "--data", "d.csv", "--schema", "schema.json",
               "--epsilon", "1", "--no-progress", "--out", "m.npz")
    line = assert_user_error(proc, "column 'c'", "outside the schema bounds [0, 1]",
                             'widen the column\'s "lower"/"upper" in the schema', "--verbose")
    assert "1.5" not in line


def test_a_draft_sorts_codes_spelled_as_text_by_value(env, tmp_path):  # noqa: F811
    codes = ["01", "2", "10", "3", "20"]  # a leading zero: the draft keeps them as text
    pd.DataFrame({"grade": codes * 8, "y": ["a", "b"] * 20}).to_csv(tmp_path / "d.csv", index=False)
    proc = run(env, tmp_path, "schema", "draft", "d.csv", "-o", "s.json")
    assert proc.returncode == 0, proc.stderr
    assert data.load_schema(tmp_path / "s.json")["grade"].categories == tuple(sorted(codes, key=int))


@needs_yaml
def test_a_metadata_string_column_drafted_from_the_data_sorts_by_value(env, tmp_path):  # noqa: F811
    (tmp_path / "meta.yaml").write_text('"":\n  s:\n    t:\n      level: {type: string}\n'
                                        "      y: {type: string, categories: [b, a]}\n")
    levels = ["1", "10", "2", "9", "11"]
    pd.DataFrame({"level": levels * 8, "y": ["a", "b"] * 20}).to_csv(tmp_path / "d.csv", index=False)
    proc = run(env, tmp_path, "schema", "draft", "d.csv", "--from-yaml", "meta.yaml", "-o", "s.json")
    assert proc.returncode == 0, proc.stderr
    schema = data.load_schema(tmp_path / "s.json")
    assert schema["level"].categories == tuple(sorted(levels, key=int))
    assert schema["y"].categories == ("b", "a")  # a declared list keeps the file's order


def xla_run(env, tmp_path, **extra: str):  # noqa: F811
    """``fit --method independent`` in a new process with XLA told to dump every compiled program
    into a folder it cannot create: XLA's C++ logs an error line per program."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    flags = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={blocker / 'dump'}".strip()
    process_env = {k: v for k, v in env.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "TF_CPP_MIN_LOG_LEVEL")}
    return run_process({**process_env, "XLA_FLAGS": flags, **extra}, tmp_path, "fit", "--method", "independent",
                       "--data", "d.csv", "--schema", "schema.json", "--epsilon", "1", "--no-progress",
                       "--force", "--out", "m.npz")


def test_the_console_holds_no_xla_log_line_unless_the_user_sets_the_level(env, tmp_path):  # noqa: F811
    wide_frame(40).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    xla_line = re.compile(r"^[IWE]\d{4} .*\.cc:\d+\]", re.M)  # absl's prefix: level, date, file:line
    theirs = xla_run(env, tmp_path, TF_CPP_MIN_LOG_LEVEL="0")
    assert theirs.returncode == 0, theirs.stderr
    assert xla_line.search(theirs.stderr) and "dump" in theirs.stderr  # the user's level is kept
    quiet = xla_run(env, tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert not xla_line.search(quiet.stderr), quiet.stderr
