"""Tests for data.planted_binary: shape and schema, determinism, and the planted structure (pairs
strongly correlated, triples pairwise independent but fixed by their XOR)."""

import itertools
import time

import numpy as np
import pytest

from dpgen_jax import data


@pytest.fixture(scope="module")
def table():
    """The default benchmark size, 2,000 x 1,000 (50 pairs, 50 triples, flip 0.1)."""
    return data.planted_binary(2000, 1000)


def corr(x: np.ndarray, a: int, b: int) -> float:
    return float(np.corrcoef(x[:, a], x[:, b])[0, 1])


def test_shape_schema_and_groups(table):
    frame, schema, pairs, triples = table
    assert isinstance(table, data.PlantedTable)
    assert frame.shape == (2000, 1000) and (frame.dtypes == np.int8).all()
    assert schema.names == data.binary_schema(1000).names and list(frame.columns) == schema.names
    data.check_frame(frame, schema)
    assert data.TableEncoder(schema).encode(frame).shape == (2000, 1000)  # values pass the encoder
    assert set(np.unique(frame.to_numpy()).tolist()) == {0, 1}
    assert len(pairs) == 50 and len(triples) == 50  # defaults: n_features // 20 each
    assert all(len(p) == 2 for p in pairs) and all(len(t) == 3 for t in triples)
    index = {n: j for j, n in enumerate(schema.names)}
    columns = [c for group in pairs + triples for c in group]
    assert len(set(columns)) == len(columns) == 250  # disjoint groups
    for groups in (pairs, triples):  # each group in schema order, groups by their first column
        idx = [[index[c] for c in g] for g in groups]
        assert all(g == sorted(g) for g in idx) and idx == sorted(idx)


def test_deterministic_and_prefix_stable(table):
    again = data.planted_binary(2000, 1000, seed=0)
    assert again.frame.equals(table.frame) and again.pairs == table.pairs and again.triples == table.triples
    head = data.planted_binary(300, 1000)
    assert head.frame.equals(table.frame.iloc[:300]) and head.pairs == table.pairs
    other = data.planted_binary(2000, 1000, seed=1)
    assert other.pairs != table.pairs and (other.frame.to_numpy() != table.frame.to_numpy()).mean() > 0.1


def test_fast_at_the_benchmark_size():
    t0 = time.perf_counter()
    data.planted_binary(2000, 1000, seed=5)
    assert time.perf_counter() - t0 < 1.0


def test_planted_pairs_are_correlated_and_the_rest_independent(table):
    x = table.frame.to_numpy().astype(np.float64)
    index = {n: j for j, n in enumerate(table.schema.names)}
    pair_corr = [corr(x, index[a], index[b]) for a, b in table.pairs]
    np.testing.assert_allclose(pair_corr, 1 - 2 * 0.1, atol=0.05)  # fair coins: exactly 1 - 2 flip
    planted = {c for g in table.pairs + table.triples for c in g}
    free = [j for j, n in enumerate(table.schema.names) if n not in planted]
    rng = np.random.default_rng(0)
    others = [tuple(rng.choice(free, 2, replace=False)) for _ in range(300)]
    other_corr = np.abs([corr(x, a, b) for a, b in others])
    assert other_corr.mean() < 0.03 and other_corr.max() < 0.12  # sampling noise ~ 1/sqrt(2000)
    rates = x[:, free].mean(axis=0)  # background rates drawn in [0.1, 0.5]
    assert rates.min() > 0.06 and rates.max() < 0.55 and rates.std() > 0.08


def test_planted_triples_are_pairwise_independent_but_fixed_by_their_xor(table):
    x = table.frame.to_numpy()
    index = {n: j for j, n in enumerate(table.schema.names)}
    for triple in table.triples:
        cols = [index[c] for c in triple]
        for a, b in itertools.combinations(cols, 2):
            assert abs(corr(x.astype(np.float64), a, b)) < 0.1, (triple, a, b)
        agree = np.mean((x[:, cols[0]] ^ x[:, cols[1]] ^ x[:, cols[2]]) == 0)
        assert agree == pytest.approx(1 - 0.1, abs=0.03), triple  # 1/2 without the triple


def test_options_flip_zero_and_group_counts():
    t = data.planted_binary(500, 40, seed=3, n_pairs=4, n_triples=2, flip=0.0, p_range=(0.2, 0.2))
    assert len(t.pairs) == 4 and len(t.triples) == 2
    for a, b in t.pairs:
        assert t.frame[a].equals(t.frame[b])
    for a, b, c in t.triples:
        assert ((t.frame[a] ^ t.frame[b] ^ t.frame[c]) == 0).all()
    none = data.planted_binary(50, 10, n_pairs=0, n_triples=0)
    assert none.pairs == () and none.triples == ()
    assert data.planted_binary(50, 5, n_pairs=1, n_triples=1).frame.shape == (50, 5)  # exactly full
    small = data.planted_binary(20, 19)  # 19 // 20 = 0 groups by default
    assert small.pairs == () and small.triples == ()


def test_refusals():
    with pytest.raises(ValueError, match=r"n_pairs=3 and n_triples=2 need .* 12 columns; n_features=10"):
        data.planted_binary(10, 10, n_pairs=3, n_triples=2)
    with pytest.raises(ValueError, match="n_pairs=450 and n_triples=50 need .* 1050 columns"):
        data.planted_binary(10, 1000, n_pairs=450)  # with the default 50 triples
    for kwargs, match in (
        ({"n_pairs": -1}, "expected n_pairs to be an integer >= 0, got n_pairs=-1"),
        ({"n_triples": 1.5}, "n_triples=1.5"),
        ({"flip": 0.5}, r"flip=0.5; expected a probability in \[0, 0.5\)"),
        ({"flip": "x"}, "expected flip to be a real number, got flip='x'"),
        ({"p_range": (0.0, 0.5)}, "p_range=.*0 < low <= high < 1"),
        ({"p_range": (0.6, 0.5)}, "p_range=.*0 < low <= high < 1"),
        ({"p_range": 0.3}, r"p_range=0.3; expected a \(low, high\) pair"),
    ):
        with pytest.raises((TypeError, ValueError), match=match):
            data.planted_binary(10, 20, **kwargs)
    with pytest.raises(ValueError, match="n_rows=0"):
        data.planted_binary(0, 20)
    with pytest.raises(TypeError, match="n_features=True"):
        data.planted_binary(10, True)
    with pytest.raises(ValueError, match="seed=-1"):
        data.planted_binary(10, 20, seed=-1)
