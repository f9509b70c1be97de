"""Degenerate-release checks (``synthesizers._degenerate.check_release``) on hand-built synthetic
frames: each finding fires on a frame built to have it, names its column, and a healthy frame gives
none. The expected findings are computed here by hand from the frames' construction."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

from dpgen_jax.data import Schema, binary_schema
from dpgen_jax.synthesizers._degenerate import EDGE_BINS, DegenerateReleaseWarning, check_release

SCHEMA = Schema.from_dict({"columns": [
    {"name": "age", "kind": "continuous", "lower": 0, "upper": 100},
    {"name": "income", "kind": "continuous", "lower": 0, "upper": 500_000, "scale": "log"},
    {"name": "color", "kind": "categorical", "categories": ["blue", "green", "red"], "missing": True},
    {"name": "y", "kind": "binary", "categories": ["no", "yes"], "label": True},
]})


def healthy(n: int = 400, seed: int = 0) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    color = r.choice(np.array(["blue", "green", "red", None], dtype=object), n)
    return pd.DataFrame({"age": r.uniform(20, 80, n), "income": np.exp(r.uniform(np.log(100), np.log(1e5), n)),
                         "color": color, "y": r.choice(["no", "yes"], n)})


def run(frame, schema=SCHEMA, **kw) -> tuple[list[str], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = check_release(frame, schema, **kw)
    assert all(issubclass(w.category, DegenerateReleaseWarning) for w in caught)
    assert issubclass(DegenerateReleaseWarning, UserWarning)
    return found, [str(w.message) for w in caught]


def test_a_healthy_frame_gives_no_finding():
    assert run(healthy()) == ([], [])


def test_a_constant_column_and_a_constant_label_are_found():
    df = healthy()
    df["y"], df["color"] = "yes", np.nan
    found, shown = run(df, method="mst")
    assert found == shown and len(found) == 2
    assert found[0].startswith("column 'color' is constant") and "a gap" in found[0]
    assert found[1].startswith("the label 'y' is constant") and "'yes'" in found[1]
    for text in found:
        assert "mst" in text and "dpgen-jax recommend" in text and "epsilon" in text


@pytest.mark.parametrize("column, values, end", [
    ("age", lambda n, r: np.where(r.random(n) < 0.6, r.uniform(0, 4.9, n), r.uniform(5, 100, n)), "first"),
    ("age", lambda n, r: np.where(r.random(n) < 0.6, r.uniform(95.1, 100, n), r.uniform(0, 95, n)), "last"),
    # log-spaced bins of 0-500,000 (unit 500): the first edge is 500 * expm1(log1p(1000) / 20) = 207,
    # so values below it (here 0: the fill value a bad method writes) pile in the first bin
    ("income", lambda n, r: np.where(r.random(n) < 0.6, 0.0, r.uniform(1e3, 1e5, n)), "first"),
])
def test_a_column_piled_in_an_end_bin_is_found(column, values, end):
    r = np.random.default_rng(1)
    df = healthy()
    df[column] = values(len(df), r)
    found, _ = run(df)
    assert len(found) == 1 and found[0].startswith(f"column {column!r}") and f"in the {end} of {EDGE_BINS}" in found[0]
    assert ("log-spaced" in found[0]) == (column == "income")


def test_end_bins_follow_the_columns_scale():
    """Incomes spread log-uniformly over 100-100,000 hold 90 % of their mass in the first of 20
    equal-width bins of 0-500,000 (below 25,000), but no bin of the log-spaced ones holds half."""
    df = healthy()
    share_first_equal = np.mean(df["income"] < 25_000)
    assert share_first_equal > 0.5
    assert run(df)[0] == []
    linear = Schema(tuple(dataclasses.replace(c, scale="linear") if c.name == "income" else c
                          for c in SCHEMA.columns))
    found, _ = run(df, linear)
    assert len(found) == 1 and "income" in found[0] and "equal-width" in found[0]


def test_binary_row_sums_far_from_the_released_totals_are_found():
    schema = binary_schema(10)
    r = np.random.default_rng(2)
    shares = {n: 0.3 for n in schema.names}  # released total: 3 positive values per row
    close = pd.DataFrame((r.random((500, 10)) < 0.3).astype(int), columns=schema.names)
    assert run(close, schema, one_way=shares) == ([], [])
    for p, far in ((0.1, True), (0.16, False), (0.7, True)):  # mean row sums 1, 1.6, 7 against 3
        df = pd.DataFrame((r.random((500, 10)) < p).astype(int), columns=schema.names)
        found, _ = run(df, schema, one_way=shares)
        assert bool(found) == far, p
        if far:
            assert "released one-way shares" in found[0] and "factor 2" in found[0]
    ones, _ = run(pd.DataFrame(np.ones((50, 10), int), columns=schema.names), schema)  # no one_way
    assert [t.split(" is constant")[0] for t in ones] == [f"column {n!r}" for n in schema.names]


def test_bad_arguments_name_what_was_expected():
    schema = binary_schema(3)
    df = pd.DataFrame(np.zeros((4, 3), int), columns=schema.names)
    with pytest.raises(ValueError, match="all-binary"):
        check_release(healthy(), SCHEMA, one_way={"y": 0.5})
    with pytest.raises(ValueError, match=r"no released share for the column\(s\) \['x1', 'x2'\]"):
        check_release(df, schema, one_way={"x0": 0.5})
    with pytest.raises(ValueError, match="share of 'x0' is 1.5"):
        check_release(df, schema, one_way={"x0": 1.5, "x1": 0, "x2": 0})
    with pytest.raises(ValueError, match="missing columns"):
        check_release(df.drop(columns="x1"), schema)
    with pytest.raises(TypeError, match="DataFrame"):
        check_release(df.to_numpy(), schema)


def test_sample_warns_once_per_fitted_model_and_trusts_a_released_one_way_pile():
    """``Synthesizer.sample`` runs the checks on its first draw of >= MIN_ROWS rows: a constant
    column warns (once per fit), a column piled at its bound does not for a method that released
    that column's one-way marginal (independent), where the pile is the real column's."""
    import math
    import warnings

    from dpgen_jax import data, synthesizers
    from dpgen_jax.synthesizers import _degenerate

    schema = data.Schema([data.Column("flag", "binary", categories=(0, 1)),
                          data.Column("gain", "continuous", lower=0, upper=100_000)])
    rng = np.random.default_rng(0)
    gain = np.where(rng.random(500) < 0.9, 0.0, rng.uniform(1_000, 100_000, 500))  # piled at 0, as in the data
    frame = pd.DataFrame({"flag": np.zeros(500, dtype=int), "gain": gain})
    model = synthesizers.create("independent", bins=16).fit(frame, schema, epsilon=math.inf, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.sample(_degenerate.MIN_ROWS - 1, seed=1)  # too few rows: no check
        model.sample(400, seed=1)
        model.sample(400, seed=2)  # checked already
    found = [str(w.message) for w in caught if issubclass(w.category, _degenerate.DegenerateReleaseWarning)]
    assert len(found) == 1 and "'flag' is constant" in found[0], found


def test_many_constant_columns_are_one_warning_line():
    """A wide binary release with 40 constant columns: one warning with the count and the first
    names, not 40 lines; the returned list still holds every finding."""
    schema = binary_schema(60)
    r = np.random.default_rng(0)
    x = r.integers(0, 2, (200, 60))
    x[:, :40] = 0
    frame = pd.DataFrame(x, columns=schema.names)
    found, shown = run(frame, schema)
    assert len(found) == 40 and len(shown) == 1
    assert shown[0].startswith("40 columns are constant in the synthetic rows (the first: 'x0', 'x1', 'x2'")
