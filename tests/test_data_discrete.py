"""data.Discretizer: codes on public bins, integer bins, decoding uniformly inside a bin."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpgen_jax import data
from tests import _tables

SCHEMA = data.Schema.from_dict({"columns": [
    {"name": "n", "kind": "continuous", "lower": 1, "upper": 4, "integer": True},
    {"name": "g", "kind": "continuous", "lower": 0, "upper": 99999, "integer": True},
    {"name": "x", "kind": "continuous", "lower": -1, "upper": 1},
    {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
    {"name": "y", "kind": "binary", "categories": ["no", "yes"]}]})


def _frame(n=500, seed=0):
    r = np.random.default_rng(seed)
    return pd.DataFrame({"n": r.integers(1, 5, n), "g": r.choice([0, 0, 0, 7, 150, 99999], n),
                         "x": r.uniform(-1, 1, n), "c": r.choice(["a", "b", "c"], n),
                         "y": r.choice(["no", "yes"], n).astype(object)})


def test_sizes_keep_only_bins_that_hold_an_integer():
    d = data.Discretizer(SCHEMA, bins=8)
    assert d.sizes[0] == 4  # four integers, eight bins: four kept
    assert d.sizes[2:] == (8, 3, 2)
    assert d.spacings == {"n": "equal", "g": "log", "x": "equal"}  # "auto": log for 0..99999
    # every integer of g's range falls in a kept bin, and kept bins partition the integers
    e = d.edges["g"]
    first, last, _ = d._int_ranges["g"]
    assert first[0] == 0 and last[-1] == 99999 and (first[1:] == last[:-1] + 1).all()
    assert ((first >= e[0]) & (last <= e[-1])).all()


def test_codes_are_the_public_bins_of_the_values():
    d = data.Discretizer(SCHEMA, bins=8, spacing="equal")
    df = _frame()
    codes = d.codes(df)
    np.testing.assert_array_equal(codes[:, 2], data.bin_index(df["x"], d.edges["x"]))
    np.testing.assert_array_equal(codes[:, 0], df["n"].to_numpy() - 1)  # one kept bin per integer
    np.testing.assert_array_equal(codes[:, 3], df["c"].map({"a": 0, "b": 1, "c": 2}).to_numpy())
    np.testing.assert_array_equal(codes, d.codes_from_encoded(data.TableEncoder(SCHEMA).encode(df)))


def test_decode_then_code_is_the_identity_and_values_fall_in_their_bin():
    d = data.Discretizer(SCHEMA, bins=16)
    codes = d.codes(_frame(2000, 1))
    back = d.decode(codes, jax.random.key(0))
    np.testing.assert_array_equal(d.codes(back), codes)
    assert back["n"].dtype == np.int64 and back["g"].dtype == np.int64
    assert list(back.columns) == SCHEMA.names
    pd.testing.assert_frame_equal(back, d.decode(codes, jax.random.key(0)))  # keyed


def test_decoding_is_uniform_inside_a_bin():
    """Integer bins: every integer of the bin equally often (chi-square); real bins: uniform."""
    d = data.Discretizer(SCHEMA, bins=4, spacing="log")
    first, last, _ = d._int_ranges["g"]
    k = int(np.argmax(last - first))  # the widest kept bin of g
    codes = np.zeros((40_000, 5), np.int64)
    codes[:, 1] = k
    values = d.decode(codes, jax.random.key(3))["g"].to_numpy()
    assert values.min() >= first[k] and values.max() <= last[k]
    width = int(last[k] - first[k] + 1)
    hist = np.bincount(((values - first[k]) * 20 // width).astype(int), minlength=20)
    assert stats.chisquare(hist).pvalue > 1e-3
    x = d.decode(codes, jax.random.key(4))["x"].to_numpy()
    e = d.edges["x"]
    assert stats.kstest((x - e[0]) / (e[1] - e[0]), "uniform").pvalue > 1e-3


def test_bad_arguments_name_what_was_expected():
    with pytest.raises(ValueError, match="bins=0"):
        data.Discretizer(SCHEMA, bins=0)
    with pytest.raises(ValueError, match="spacing='cubic'"):
        data.Discretizer(SCHEMA, spacing="cubic")
    d = data.Discretizer(SCHEMA, bins=8)
    with pytest.raises(ValueError, match="column 'c': codes must lie in"):
        d.decode(np.array([[0, 0, 0, 3, 0]]), jax.random.key(0))
    with pytest.raises(ValueError, match="expected \\(n, 5\\)"):
        d.decode(np.zeros((2, 4), np.int64), jax.random.key(0))
    with pytest.raises(ValueError, match="'x'"):
        d.codes(_frame().assign(x=5.0))


def test_mixed_table_round_trip():
    d = data.Discretizer(_tables.MIXED_SCHEMA)
    frame = _tables.mixed_frame(300, 0)
    np.testing.assert_array_equal(d.codes(d.decode(d.codes(frame), jax.random.key(1))), d.codes(frame))
    assert d.sizes == (3, 2, 100, 100)  # c: 0..99 on 100 bins, one integer each
    assert d.describe() == "c: 100 equal-width bins; d: 100 equal-width bins"


def test_binned_encoder_round_trips_to_the_same_bin():
    df = _frame(400, seed=3)
    enc = data.BinnedEncoder(SCHEMA, bins=8)
    disc = data.Discretizer(SCHEMA, bins=8)
    x = enc.encode(df)
    assert x.shape == (400, sum(disc.sizes[:4]) + 1) == (400, enc.width)  # y is one 0/1 column
    cat = x[:, :enc.width - 1]
    assert set(np.unique(cat)) <= {0.0, 1.0} and (cat.sum(axis=1) == 4).all()  # one-hot per block
    back = enc.decode(x, key=jax.random.key(0))
    assert (back["c"] == df["c"]).all() and (back["y"] == df["y"]).all()
    assert (disc.codes(back) == disc.codes(df)).all()  # every continuous value in its own bin
    assert back["n"].dtype == np.int64 and back["g"].dtype == np.int64
    assert (back["n"] == df["n"]).all()  # one integer per bin: exact
    with pytest.raises(ValueError, match="needs a key"):
        enc.decode(x, key=None)


def test_binned_encoder_sample_mode_draws_bins_by_their_weights():
    enc = data.BinnedEncoder(SCHEMA, bins=8)
    n = 20_000
    x = np.zeros((n, enc.width), np.float32)
    b = enc.blocks[2]  # x: eight equal bins over [-1, 1]; weight 3:1 on bins 0 and 7
    x[:, b.start], x[:, b.start + 7] = 0.75, 0.25
    for other in (enc.blocks[0], enc.blocks[1], enc.blocks[3]):
        x[:, other.start] = 1.0
    out = enc.decode(x, mode="sample", key=jax.random.key(1))["x"].to_numpy()
    low = (out < -0.75).mean()
    assert abs(low - 0.75) < 4 * np.sqrt(0.75 * 0.25 / n)
    assert ((out < -0.75) | (out >= 0.75)).all()


GAPS = data.Schema([
    data.Column("n", "continuous", lower=0, upper=9, integer=True, missing=True),
    data.Column("x", "continuous", lower=0, upper=1, missing=True),
    data.Column("c", "categorical", categories=("a", "b")),
    data.Column("z", "continuous", lower=-1, upper=1)])


def _gap_frame(n=400, seed=0):
    r = np.random.default_rng(seed)
    nn = pd.array(r.integers(3, 10, n), dtype="Int64")
    nn[r.random(n) < 0.25] = pd.NA
    x = np.where(r.random(n) < 0.25, np.nan, r.uniform(0.3, 1.0, n))
    return pd.DataFrame({"n": nn, "x": x, "c": r.choice(["a", "b"], n).astype(object),
                         "z": r.uniform(-1, 1, n)})


def test_a_gap_is_the_last_code_of_its_column():
    d = data.Discretizer(GAPS, bins=4)
    assert d.schema.names == ["n", "x", "c", "z"] and d.sizes == (5, 5, 2, 4)
    assert d.missing_codes == {"n": 4, "x": 4}
    df = _gap_frame()
    codes = d.codes(df)
    np.testing.assert_array_equal(codes[:, 0] == 4, df["n"].isna().to_numpy())
    np.testing.assert_array_equal(codes[:, 1] == 4, df["x"].isna().to_numpy())
    present = df["x"].notna().to_numpy()
    np.testing.assert_array_equal(codes[present, 1], data.bin_index(df["x"][present], d.edges["x"]))
    np.testing.assert_array_equal(codes, d.codes_from_encoded(data.TableEncoder(GAPS).encode(df)))
    assert d.describe() == ("n: 4 equal-width bins and a missing code; "
                            "x: 4 equal-width bins and a missing code; z: 4 equal-width bins")


def test_decode_returns_the_gaps_of_the_missing_code_and_values_elsewhere():
    d = data.Discretizer(GAPS, bins=4)
    codes = d.codes(_gap_frame(2000, 1))
    back = d.decode(codes, jax.random.key(0))
    assert list(back.columns) == GAPS.names
    assert str(back["n"].dtype) == "Int64" and back["x"].dtype == np.float64
    np.testing.assert_array_equal(back["n"].isna().to_numpy(), codes[:, 0] == 4)
    np.testing.assert_array_equal(back["x"].isna().to_numpy(), codes[:, 1] == 4)
    np.testing.assert_array_equal(d.codes(back), codes)  # every value in its own bin
    # a discretizer of the model schema codes the same columns and returns the model frame
    m = data.Discretizer(data.model_schema(GAPS), bins=4)
    assert m.sizes == d.sizes and m.schema.names == d.schema.names
    model_rows = m.decode(codes, jax.random.key(0))
    assert list(model_rows.columns) == data.model_schema(GAPS).names
    assert (model_rows.loc[codes[:, 1] == 4, "x"] == 0.0).all()  # the fill, only where missing
    pd.testing.assert_frame_equal(data.from_model_frame(model_rows, GAPS), back)


def test_parents_map_the_missing_code_to_the_missing_code():
    coarse, fine = data.Discretizer(GAPS, bins=4), data.Discretizer(GAPS, bins=8)
    up = fine.parents(coarse)
    assert up["x"].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4]  # eight nested bins, then the gap
    assert up["n"][-1] == coarse.missing_codes["n"] and up["n"].size == fine.sizes[0]
    assert coarse.parents(fine)["x"][-1] == fine.missing_codes["x"]
    with pytest.raises(ValueError, match="same schema"):
        fine.parents(data.Discretizer(data.Schema([dataclasses.replace(c, missing=None)
                                                   for c in GAPS.columns]), bins=4))


def test_binned_encoder_has_no_indicator_block_and_returns_the_gaps():
    enc = data.BinnedEncoder(GAPS, bins=4)
    df = _gap_frame(300, 2)
    assert enc.width == 5 + 5 + 2 + 4 == sum(enc.discretizer.sizes)  # one block per coded column
    x = enc.encode(df)
    back = enc.decode(x, key=jax.random.key(0))
    for col in ("n", "x"):
        np.testing.assert_array_equal(back[col].isna().to_numpy(), df[col].isna().to_numpy())
    np.testing.assert_array_equal(enc.discretizer.codes(back), enc.discretizer.codes(df))


def test_a_declared_log_scale_spaces_the_auto_bins_logarithmically():
    cols = [data.Column("small", "continuous", lower=0, upper=50, scale="log"),
            data.Column("neg", "continuous", lower=-5, upper=5, scale="log"),
            data.Column("plain", "continuous", lower=0, upper=50)]
    d = data.Discretizer(data.Schema(cols), bins=5)
    assert d.spacings == {"small": "log", "neg": "log", "plain": "equal"}
    # the declared log scale's unit is a thousandth of the span (0.01 here), not 1
    np.testing.assert_allclose(d.edges["neg"], -5 + 0.01 * np.expm1(np.linspace(0, np.log1p(1000), 6)))
    assert data.Discretizer(data.Schema(cols), bins=5, spacing="equal").spacings["small"] == "equal"


@pytest.mark.parametrize("lower, upper, spacing", [
    (0, 99_999, "log"),          # Adult's capital-gain: from zero, 1,000 times its unit and more
    (0, 4_356, "log"),           # capital-loss
    (0.5, 1_000, "log"),         # a lower bound below 1 counts as 1
    (0, 999, "equal"),           # from zero but short of 1,000
    (14_275, 23_713, "equal"),   # cardio's age in days: a wide span far from zero, not skewed
    (5, 4_999, "equal"),         # reaches less than 1,000 times its lower bound
    (5, 5_000, "log"),
    (-1, 1e6, "equal"),          # below zero: never log by the rule
])
def test_auto_spacing_is_log_for_ranges_reaching_a_thousand_times_their_lower_bound(lower, upper, spacing):
    col = data.Column("v", "continuous", lower=lower, upper=upper)
    assert data.auto_spacing(col) == spacing
    assert data.Discretizer(data.Schema([col]), bins=4).spacings == {"v": spacing}


def test_log_bins_of_a_declared_log_column_start_at_a_thousandth_of_its_span():
    """An income declared log over 0-500,000: half of 20 bins lie below ~15,300 (unit 500), not
    below 707 as on ``log1p(x - lower)``; bins of an undeclared auto-log column keep unit 1."""
    inc = data.Column("inc", "continuous", lower=0, upper=500_000, scale="log")
    assert inc.log_unit == 500.0
    edges = data.bin_edges(inc, 20, "log")
    assert edges[0] == 0 and edges[-1] == 500_000
    assert 15_000 < edges[10] < 16_000 and 200 < edges[1] < 210
    np.testing.assert_allclose(np.diff(np.log1p(edges / 500.0)), np.log1p(1000) / 20)
    plain = data.Column("gain", "continuous", lower=0, upper=99_999)
    assert plain.log_unit == 1.0
    np.testing.assert_allclose(data.bin_edges(plain, 20, "log")[1], np.expm1(np.log1p(99_999) / 20))
    with pytest.raises(ValueError, match="'c' is categorical"):
        data.Column("c", "categorical", categories=("a", "b")).log_unit
