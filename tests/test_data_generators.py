"""Tests for the data layer's generators: uniform_rows (public-schema rows) and adult_like
(a licence-free stand-in in Adult's exact format). None of them needs the Adult files."""

import jax
import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import roc_auc_score

from dpgen_jax import data
from dpgen_jax.data import Column, Schema, TableEncoder


def mixed_schema() -> Schema:
    return Schema(
        (
            Column("c", "categorical", categories=("a", "b", "c", "d", "e")),
            Column("y", "binary", categories=("no", "yes")),
            Column("v", "continuous", lower=-2.0, upper=3.0),
            Column("n", "continuous", lower=10, upper=14, integer=True),
            Column("k", "categorical", categories=(7, 8, 9)),
        )
    )


# -- uniform_rows ----------------------------------------------------------------------------
def test_uniform_rows_layout_and_validity():
    schema = mixed_schema()
    enc = TableEncoder(schema)
    x = data.uniform_rows(schema, 1000, jax.random.key(0))
    assert isinstance(x, jax.Array) and x.dtype == np.float32 and x.shape == (1000, enc.width)
    x = np.asarray(x)
    for b in enc.blocks:
        part = x[:, b.slice]
        if b.kind == "categorical":
            assert set(np.unique(part).tolist()) == {0.0, 1.0}
            np.testing.assert_array_equal(part.sum(axis=1), 1.0)  # valid one-hot
        elif b.kind == "binary":
            assert set(np.unique(part).tolist()) == {0.0, 1.0}
        else:
            assert part.min() >= 0.0 and part.max() <= 1.0
    back = enc.decode(x)  # decodes within the schema: the strict encoder accepts it again
    np.testing.assert_array_equal(enc.encode(back)[:, enc.block("c").slice], x[:, enc.block("c").slice])
    assert back["v"].between(-2.0, 3.0).all() and back["n"].between(10, 14).all()
    assert back["n"].dtype == np.int64


def test_uniform_rows_statistics():
    """Many draws: each category, each binary value and each tenth of [0, 1] equally likely
    (chi-square goodness of fit), and the test rejects a skewed alternative."""
    schema = mixed_schema()
    enc = TableEncoder(schema)
    n = 40_000
    x = np.asarray(data.uniform_rows(schema, n, jax.random.key(3)))
    cat_counts = x[:, enc.block("c").slice].sum(axis=0)
    assert stats.chisquare(cat_counts).pvalue > 1e-3
    assert stats.chisquare(cat_counts, n * np.array([0.3, 0.2, 0.2, 0.2, 0.1])).pvalue < 1e-6  # power
    ones = x[:, enc.block("y").start].sum()
    assert abs(ones - n / 2) < 4 * np.sqrt(n / 4)
    for name in ("v", "n"):
        tenths = np.histogram(x[:, enc.block(name).start], bins=10, range=(0, 1))[0]
        assert stats.chisquare(tenths).pvalue > 1e-3
    assert stats.kstest(x[:, enc.block("v").start], "uniform").pvalue > 1e-3
    # integer columns by rounding: inner values 1/4 each, the bounds 1/8 each
    counts = enc.decode(x)["n"].value_counts().reindex(range(10, 15)).to_numpy()
    assert stats.chisquare(counts, n * np.array([1, 2, 2, 2, 1]) / 8).pvalue > 1e-3


def test_uniform_rows_keys():
    schema = mixed_schema()
    a = data.uniform_rows(schema, 50, jax.random.key(1))
    np.testing.assert_array_equal(a, data.uniform_rows(schema, 50, jax.random.key(1)))
    assert not np.array_equal(a, data.uniform_rows(schema, 50, jax.random.key(2)))
    legacy = data.uniform_rows(schema, 5, jax.random.PRNGKey(0))  # legacy uint32[2] keys work too
    assert legacy.shape == (5, TableEncoder(schema).width)
    assert data.uniform_rows(schema, 0, jax.random.key(0)).shape == (0, TableEncoder(schema).width)
    # a column's draws do not depend on the other columns
    other = Schema(mixed_schema().columns[:1] + (Column("z", "continuous", lower=0, upper=1),))
    np.testing.assert_array_equal(data.uniform_rows(other, 50, jax.random.key(1))[:, :5], a[:, :5])


def test_uniform_rows_bad_arguments():
    schema = mixed_schema()
    with pytest.raises(TypeError, match="schema must be a dpgen_jax.data.Schema"):
        data.uniform_rows(schema.to_dict(), 3, jax.random.key(0))
    for n in (-1, 2.5, True, "3"):
        with pytest.raises((TypeError, ValueError), match=f"expected n to be an integer >= 0|expected n to be an integer, got n={n!r}"):
            data.uniform_rows(schema, n, jax.random.key(0))
    with pytest.raises(ValueError, match="uniform_rows needs a key"):
        data.uniform_rows(schema, 3, None)
    with pytest.raises(TypeError, match="jax.random key"):
        data.uniform_rows(schema, 3, 0)
    with pytest.raises(ValueError, match="single key"):
        data.uniform_rows(schema, 3, jax.random.split(jax.random.key(0), 2))


# -- adult_like ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def adult_like_frames():
    return data.adult_like(6000, seed=0), data.adult_like(3000, seed=1)


def test_adult_like_matches_the_schema(adult_like_frames):
    df, _ = adult_like_frames
    schema = data.adult_schema()
    assert list(df.columns) == schema.names and df.index.equals(pd.RangeIndex(6000))
    for col in schema:
        s = df[col.name]
        assert not s.isna().any(), col.name
        if col.kind == "continuous":
            assert s.dtype == np.int64, col.name
            assert s.min() >= col.lower and s.max() <= col.upper, col.name
        else:
            assert s.dtype == pd.Series(["x"]).dtype, col.name  # pandas' default string dtype
            assert set(s.unique()) <= set(col.categories), col.name
    for name in ("workclass", "occupation", "native-country"):
        assert (df[name] == "?").any(), name  # the unknown category occurs, as in Adult
    assert ((df["occupation"] == "?") == df["workclass"].isin(["?", "Never-worked"])).all()
    married = df["marital-status"].isin(["Married-civ-spouse", "Married-AF-spouse"])
    assert df.loc[married, "relationship"].isin(["Husband", "Wife"]).all()
    assert (df["capital-gain"] == 0).mean() > 0.8 and (df["capital-gain"] > 0).any()
    enc = TableEncoder(schema)
    pd.testing.assert_frame_equal(enc.decode(enc.encode(df)), df)


def test_adult_like_has_load_adults_dtypes(adult_dir, adult_like_frames):
    train, _ = data.load_adult(adult_dir)
    pd.testing.assert_series_equal(adult_like_frames[0].dtypes, train.dtypes)


def test_adult_like_is_deterministic_and_prefix_stable(adult_like_frames):
    df, other = adult_like_frames
    pd.testing.assert_frame_equal(data.adult_like(6000, seed=0), df)
    pd.testing.assert_frame_equal(data.adult_like(1234, seed=0), df.iloc[:1234])
    assert (data.adult_like(3000, seed=0).to_numpy() != other.to_numpy()).mean() > 0.2


def test_adult_like_salary_has_signal(adult_like_frames):
    """A forest trained on one seed's rows predicts salary on another seed's rows well above the
    majority rate, and the positive rate is in Adult's range."""
    train, test = adult_like_frames
    schema = data.adult_schema()
    enc = TableEncoder(schema)
    b = enc.block("salary")
    x_tr, x_te = enc.encode(train), enc.encode(test)
    feats = np.r_[0 : b.start, b.stop : enc.width]
    y_tr, y_te = x_tr[:, b.start], x_te[:, b.start]
    assert 0.18 < y_tr.mean() < 0.32
    rf = RandomForestClassifier(n_estimators=100, min_samples_leaf=5, random_state=0, n_jobs=1)
    rf.fit(x_tr[:, feats], y_tr)
    acc = (rf.predict(x_te[:, feats]) == y_te).mean()
    majority = max(y_te.mean(), 1 - y_te.mean())
    assert acc > majority + 0.04
    assert roc_auc_score(y_te, rf.predict_proba(x_te[:, feats])[:, 1]) > 0.8


def test_adult_like_bad_arguments():
    assert len(data.adult_like(1)) == 1
    for kwargs, name in (
        (dict(n_rows=0), "n_rows"),
        (dict(n_rows=2.5), "n_rows"),
        (dict(n_rows=True), "n_rows"),
        (dict(n_rows=5, seed=-1), "seed"),
        (dict(n_rows=5, seed="0"), "seed"),
    ):
        with pytest.raises((TypeError, ValueError), match=f"expected {name} to be an integer"):
            data.adult_like(**kwargs)
