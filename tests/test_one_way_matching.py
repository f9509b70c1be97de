"""Rows matched to released one-way marginals (``synthesizers/_matching.py``, issue 49).

References: the counts are recomputed independently with ``Discretizer.codes`` and ``np.bincount``;
the least change is the surplus a counting argument gives (no fewer rows can move); the order of
a continuous column is checked row by row against the rows' original values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data
from dpgen_jax.synthesizers import _naive_bayes
from dpgen_jax.synthesizers._matching import _within_quota, match_one_way, rounded_counts
from tests.test_gaps_no_fill import _frame, _schema


def _released(frame: pd.DataFrame, disc: data.Discretizer) -> list[np.ndarray]:
    codes = disc.codes(frame)
    return [np.bincount(codes[:, j], minlength=k) / len(frame) for j, k in enumerate(disc.sizes)]


@pytest.fixture(scope="module")
def case():
    """A generator's rows whose columns are off (hours halved, age shifted up), and marginals
    released from another draw of the real table."""
    schema = _schema()
    disc = data.Discretizer(schema, 20)
    syn = _frame(1000, 0)
    syn["hours"] = syn["hours"] * 0.5
    syn["age"] = (syn["age"] + 5).clip(upper=100)
    probs = _released(_frame(5000, 7), disc)
    out = match_one_way(syn, disc, probs, np.random.default_rng(0))
    return disc, syn, probs, out


def test_rounded_counts_sum_to_n_and_follow_the_shares():
    p = np.array([0.5, 0.25, 0.25, 0.0, -0.1])
    for n in (0, 1, 7, 1000):
        c = rounded_counts(p, n)
        assert c.sum() == n and (c >= 0).all() and c[3] == c[4] == 0
        assert np.abs(c - np.clip(p, 0, None) / 1.0 * n).max() < 1.0
    np.testing.assert_array_equal(rounded_counts(np.zeros(4), 8), [2, 2, 2, 2])  # nothing released: uniform


def test_every_column_gets_the_released_counts(case):
    disc, syn, probs, out = case
    assert list(out.columns) == list(syn.columns) and (out.dtypes == syn.dtypes).all()
    codes = disc.codes(out)
    for j, col in enumerate(disc.schema.columns):
        np.testing.assert_array_equal(np.bincount(codes[:, j], minlength=disc.sizes[j]),
                                      rounded_counts(probs[j], len(syn)), err_msg=col.name)


def test_a_discrete_column_changes_only_its_surplus_rows(case):
    disc, syn, probs, out = case
    before, after = disc.codes(syn), disc.codes(out)
    for j, col in enumerate(disc.schema.columns):
        if col.kind == "continuous":
            continue
        current = np.bincount(before[:, j], minlength=disc.sizes[j])
        surplus = np.clip(current - rounded_counts(probs[j], len(syn)), 0, None).sum()
        assert int((before[:, j] != after[:, j]).sum()) == surplus, col.name
        unchanged = before[:, j] == after[:, j]
        assert syn.loc[unchanged, col.name].equals(out.loc[unchanged, col.name])


def test_a_continuous_column_keeps_the_order_of_its_rows(case):
    disc, syn, probs, out = case
    before, after = disc.codes(syn), disc.codes(out)
    for j, col in enumerate(disc.schema.columns):
        if col.kind != "continuous":
            continue
        both = (syn[col.name].notna() & out[col.name].notna()).to_numpy()
        values = syn[col.name].to_numpy(dtype=np.float64, na_value=np.nan)[both]
        order = np.lexsort((after[both, j], values))  # equal values may go to either bin
        assert (np.diff(after[both, j][order]) >= 0).all(), col.name  # bins follow the original order
        same = both & (before[:, j] == after[:, j])
        # (hours, halved, may move every row; age keeps many)
        np.testing.assert_array_equal(syn[col.name][same].to_numpy(dtype=np.float64),
                                      out[col.name][same].to_numpy(dtype=np.float64))
        lo, hi = disc.user_schema[col.name].lower, disc.user_schema[col.name].upper
        v = out[col.name].dropna().to_numpy(dtype=np.float64)
        assert v.min() >= lo and v.max() <= hi


def test_the_relation_between_columns_survives(case):
    """The rows keep their joint order: hours still separates the label as before."""
    disc, syn, probs, out = case
    def gap(frame):
        h = frame["hours"].rank()
        return float(h[frame["y"] == 1].mean() - h[frame["y"] == 0].mean())
    assert abs(gap(out) - gap(syn)) < 0.1 * abs(gap(syn)) + 5


def test_rows_that_already_match_are_returned_unchanged():
    schema = _schema()
    disc = data.Discretizer(schema, 16)
    frame = _frame(400, 3)
    out = match_one_way(frame, disc, _released(frame, disc), np.random.default_rng(1))
    pd.testing.assert_frame_equal(out, frame)


def test_probs_of_the_wrong_shape_are_refused():
    disc = data.Discretizer(_schema(), 8)
    with pytest.raises(ValueError, match="one vector per coded column"):
        match_one_way(_frame(20), disc, [np.ones(3)], np.random.default_rng(0))


def test_the_rows_that_move_are_those_their_other_columns_point_to():
    """A binary label drawn 70 / 30 that should be 50 / 50, and a feature that mostly agrees with
    it: the rows that must move to label 1 are rows whose feature says 1 (the naive-Bayes
    ratio), not random rows of label 0 (of which about a third have feature 1)."""
    schema = data.Schema.from_dict({"columns": [
        {"name": "y", "kind": "binary", "categories": [0, 1]},
        {"name": "x", "kind": "binary", "categories": [0, 1]}]})
    rng = np.random.default_rng(0)
    n = 1000
    y = (rng.random(n) < 0.3).astype(int)
    x = np.where(rng.random(n) < 0.9, y, 1 - y)
    x[np.flatnonzero(y == 0)[:200]] = 1  # the rows the real table would have labelled 1
    frame = pd.DataFrame({"y": y, "x": x})
    disc = data.Discretizer(schema, 4)
    probs = [np.array([0.5, 0.5]), np.bincount(x, minlength=2) / n]
    out = match_one_way(frame, disc, probs, np.random.default_rng(1))
    assert (out["y"] == 1).sum() == 500 and (out["x"] == frame["x"]).all()
    moved = out["y"] != frame["y"]
    assert moved.sum() == 500 - y.sum()  # the least change
    assert (frame.loc[moved, "x"] == 1).all()  # every moved row is one its feature points to
    assert (out["y"] == out["x"]).mean() > 0.85


@pytest.mark.parametrize("missing_share", [0.05, 0.45])
def test_model_frames_move_gaps_with_their_indicator_and_never_the_fill(missing_share):
    """The path ``sample`` takes: rows of the model schema (a continuous gap is its indicator with
    the value at the lower bound). A generator with too few / too many gaps is matched to the
    released 20 %: every row's indicator agrees with its new code, no present value sits at the
    fill (the real values start at 20; the released marginal has no mass below), and rows made
    present take ranks spread over the present values, not the lowest bins."""
    schema = _schema()
    model = data.model_schema(schema)
    disc = data.Discretizer(model, 20)
    probs = _released(data.to_model_frame(_frame(5000, 7), schema), disc)
    syn = _frame(2000, 0)
    r = np.random.default_rng(5)
    for col in ("age", "hours"):
        syn[col] = syn[col].astype("float64")
        syn.loc[r.random(len(syn)) < 0.5, col] = 50.0  # refill every gap, then punch the share anew
        syn.loc[r.random(len(syn)) < missing_share, col] = np.nan
    syn["age"] = syn["age"].round().astype("Int64")
    frame = data.to_model_frame(syn, schema)
    out = match_one_way(frame, disc, probs, np.random.default_rng(2))
    codes = disc.codes(out)  # reads the indicators: the counts include the gaps
    for j, col in enumerate(disc.schema.columns):
        np.testing.assert_array_equal(np.bincount(codes[:, j], minlength=disc.sizes[j]),
                                      rounded_counts(probs[j], len(frame)), err_msg=col.name)
    back = data.from_model_frame(out, schema)
    for col in ("age", "hours"):
        gap = out[data.indicator_name(col)].to_numpy(dtype=bool)
        assert abs(gap.mean() - probs[disc.schema.names.index(col)][-1]) < 1e-3
        present = back[col].dropna().to_numpy(dtype=np.float64)
        assert present.size == (~gap).sum() and present.min() >= 20, col
        made_present = frame[data.indicator_name(col)].to_numpy(dtype=bool) & ~gap
        if made_present.any():  # their values spread like the others (random ranks), not at the bottom
            assert np.median(out.loc[made_present, col]) > np.quantile(present, 0.25), col


def _reference_log_likelihoods(classes: np.ndarray, context: np.ndarray, k: int) -> np.ndarray:
    """The naive-Bayes log-likelihoods as their definition reads: one smoothed count table per
    other column, summed over the columns in turn."""
    out = np.zeros((classes.size, k))
    for c in range(context.shape[1]):
        v = context[:, c]
        m = int(v.max()) + 1
        table = np.zeros((k, m))
        np.add.at(table, (classes, v), 1.0)
        table = np.log((table + 1.0) / (table.sum(axis=1, keepdims=True) + m))
        out += table[:, v].T
    return out


@pytest.mark.parametrize("batch_codes", [1, 6, 1000])
def test_batched_likelihoods_follow_the_definition_as_columns_move(monkeypatch, batch_codes):
    """``Likelihoods`` (one-hot counts and products batched over columns, corrected for the rows a
    batch's earlier columns moved) against the per-column definition, column after column while
    rows move: discrete classes, a continuous column's states (bins as one class), columns never
    asked, a one-code column, codes absent from a column."""
    monkeypatch.setattr(_naive_bayes, "BATCH_CODES", batch_codes)
    rng = np.random.default_rng(3)
    sizes = [2, 3, 5, 1, 2, 4, 6, 2, 3, 2]
    n = 300
    codes = np.stack([rng.integers(0, max(k - (j == 6), 1), n) for j, k in enumerate(sizes)], axis=1)
    classes = [np.arange(k) for k in sizes]
    classes[2] = np.array([0, 0, 0, 1, 2])  # three bins, an atom, a gap
    classes[4] = classes[8] = None
    context = _naive_bayes.Likelihoods(codes, sizes, classes)
    current = codes.copy()
    for j, k in enumerate(sizes):
        if classes[j] is not None:
            got = context.log_likelihoods(j)
            cls = classes[j][current[:, j]]
            want = _reference_log_likelihoods(cls, np.delete(current, j, axis=1), int(classes[j].max()) + 1)
            np.testing.assert_allclose(got, want - want[:, :1], rtol=0, atol=1e-9, err_msg=str(j))
        moved = rng.random(n) < 0.2  # rows that move, to any code
        current[moved, j] = rng.integers(0, k, int(moved.sum()))
        context.update(j, current[:, j])


def test_the_quota_keeps_each_codes_first_rows_in_order():
    rng = np.random.default_rng(0)
    for _ in range(20):
        owners = rng.integers(0, 4, 30)
        quota = rng.integers(0, 10, 4)
        left, want = quota.copy(), []
        for o in owners:  # the rows in order of preference, each code's quota spent as it goes
            want.append(left[o] > 0)
            left[o] -= left[o] > 0
        np.testing.assert_array_equal(_within_quota(owners, quota), want)
