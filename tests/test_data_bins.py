"""Tests for data.bin_edges / data.bin_index: public bins from a column's bounds."""

import numpy as np
import pytest

from dpgen_jax import data
from dpgen_jax.data import Column


def test_equal_and_log_edges():
    col = Column("g", "continuous", lower=0, upper=99999, integer=True)
    eq = data.bin_edges(col, 20)
    np.testing.assert_allclose(eq, np.linspace(0, 99999, 21), rtol=0, atol=0)
    log = data.bin_edges(col, 20, "log")
    assert log[0] == 0.0 and log[-1] == 99999.0 and (np.diff(log) > 0).all()
    # widths grow geometrically in the distance from lower: (edge + 1) is a geometric sequence
    ratios = (log[1:] + 1) / (log[:-1] + 1)
    np.testing.assert_allclose(ratios, 100000 ** (1 / 20), rtol=1e-9)
    assert log[1] < 1  # the first bin holds only the zeros of an integer column
    shifted = data.bin_edges(Column("s", "continuous", lower=-5, upper=95), 4, "log")
    np.testing.assert_allclose(shifted, -5 + np.expm1(np.linspace(0, np.log(101), 5)))


def test_bin_index_follows_numpy_histogram():
    col = Column("x", "continuous", lower=-1, upper=3)
    rng = np.random.default_rng(0)
    for spacing in ("equal", "log"):
        edges = data.bin_edges(col, 7, spacing)
        v = np.concatenate([rng.uniform(-1, 3, 500), edges])  # every edge, the upper bound too
        idx = data.bin_index(v, edges)
        assert idx.dtype == np.int64 and idx.min() == 0 and idx.max() == 6
        np.testing.assert_array_equal(np.bincount(idx, minlength=7), np.histogram(v, bins=edges)[0])
    with pytest.raises(ValueError, match="2 value\\(s\\) outside the bin range \\[-1, 3\\]"):
        data.bin_index([-1.5, 0.0, np.nan], data.bin_edges(col, 2))


def test_bin_edges_bad_arguments():
    cont = Column("x", "continuous", lower=0, upper=1)
    with pytest.raises(ValueError, match="column 'c' is categorical"):
        data.bin_edges(Column("c", "categorical", categories=("a",)), 3)
    for n in (0, 2.0, True):
        with pytest.raises(ValueError, match=f"n_bins={n!r}"):
            data.bin_edges(cont, n)
    with pytest.raises(ValueError, match="spacing='quantile'"):
        data.bin_edges(cont, 3, "quantile")
    with pytest.raises(TypeError, match="Column"):
        data.bin_edges({"lower": 0, "upper": 1}, 3)
