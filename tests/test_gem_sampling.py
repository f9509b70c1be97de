"""GEM's sampling: codes drawn from the generator's probabilities (a fresh noise vector per row,
and the fixed noise batch's finite mixture), the measured graph's elimination and the decoupling of
what no measurement holds, and the finer one-way release (finer bins nested in the model's, codes
refined inside their bin, a peaked integer column kept)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpgen_jax import data, synthesizers
from dpgen_jax.synthesizers import GEMConfig, gem
from tests import _tables


def test_drawn_codes_follow_the_generator_probabilities():
    sizes = (3, 2, 4)
    cfg = GEMConfig(hidden=(8,), noise_dim=4).for_sizes(sizes)
    index = jnp.asarray(gem.bin_index(sizes))
    net = gem.network(cfg, sum(sizes))
    params = gem.init(cfg, sum(sizes), jax.random.key(0))
    n = 20_000
    codes = np.asarray(gem.draw_codes(params, index, jax.random.key(1), net=net, n=n, noise_dim=4))
    assert codes.shape == (n, 3) and codes.min() >= 0 and all(codes[:, j].max() < s for j, s in enumerate(sizes))
    # expected frequencies: the mixture over many noise vectors of the per-column softmax
    z = jax.random.normal(jax.random.key(2), (200_000, 4))
    probs = np.asarray(gem.probabilities(net, params, z, index)).mean(axis=0)
    for j, s in enumerate(sizes):
        counts = np.bincount(codes[:, j], minlength=s)
        p = np.asarray(probs[j, :s], np.float64)
        assert stats.chisquare(counts, n * p / p.sum()).pvalue > 1e-4


def test_rows_drawn_on_fixed_noise_follow_the_finite_mixture():
    """``fixed_noise``: each row reads one of the K stored vectors for all its columns, so a pair's
    frequencies are the K-component mixture's marginal (mixture_marginal over the same vectors)."""
    sizes = (3, 2, 4)
    cfg = GEMConfig(hidden=(8,), noise_dim=4, output_init_scale=3.0).for_sizes(sizes)
    index = jnp.asarray(gem.bin_index(sizes))
    net = gem.network(cfg, sum(sizes))
    params = gem.init(cfg, sum(sizes), jax.random.key(0))
    noise = jax.random.normal(jax.random.key(3), (5, 4))
    n = 30_000
    codes = np.asarray(gem.draw_codes(params, index, jax.random.key(1), net=net, n=n, noise_dim=4, noise=noise))
    for clique in ((0, 1), (0, 2), (1, 2)):
        expected = gem.mixture_marginal(net, params, noise, index, clique, sizes)
        flat = np.ravel_multi_index(tuple(codes[:, a] for a in clique), [sizes[a] for a in clique])
        counts = np.bincount(flat, minlength=expected.size)
        assert stats.chisquare(counts, n * expected / expected.sum()).pvalue > 1e-4
    # the same pair drawn with a column-independent product of the mixture's one-ways is far off
    one = [gem.mixture_marginal(net, params, noise, index, (a,), sizes) for a in (0, 2)]
    product = np.outer(*one).ravel()
    flat = np.ravel_multi_index((codes[:, 0], codes[:, 2]), (3, 4))
    assert stats.chisquare(np.bincount(flat, minlength=12), n * product / product.sum()).pvalue < 1e-6


def test_eliminate_triangulates_the_measured_graph():
    graph = gem.measured_graph([(0, 1), (1, 2), (2, 3), (3, 0)], 6)  # a 4-cycle, columns 4, 5 alone
    assert graph.sum() == 8 + 4 and not graph[4].any() and not graph[:, 5].any()
    assert np.all(np.diag(graph)[:4]) and gem.measured_graph([(2,)], 3).tolist() == [
        [False] * 3, [False] * 3, [False, False, True]]  # a one-way marginal: its column only
    tree = gem.eliminate(graph)
    assert tree.order[:2] == (4, 5) and sorted(tree.order) == list(range(6))
    assert tree.neighbours[4] == tree.neighbours[5] == () and tree.parent[4] == tree.parent[5] == -1
    cliques = [{v, *tree.neighbours[v]} for v in range(6)]
    # every measured pair lies in a clique, and the cycle got a chord (a clique of 3 columns)
    assert all(any({a, b} <= c for c in cliques) for a, b in [(0, 1), (1, 2), (2, 3), (3, 0)])
    assert max(map(len, cliques)) == 3
    position = {v: i for i, v in enumerate(tree.order)}
    for v in range(6):  # neighbours are eliminated later; the parent is the first of them
        assert all(position[a] > position[v] for a in tree.neighbours[v])
        assert tree.parent[v] == (min(tree.neighbours[v], key=position.get) if tree.neighbours[v] else -1)
        if tree.parent[v] >= 0:  # the running intersection: the rest lies in the parent's clique
            assert set(tree.neighbours[v]) - {tree.parent[v]} <= cliques[tree.parent[v]]


def _tuples(x: np.ndarray, cols) -> list:
    return sorted(map(tuple, x[:, list(cols)].tolist()))


def test_decouple_keeps_the_measured_marginals_and_removes_the_rest():
    rng = np.random.default_rng(0)
    n = 8000
    u, h = rng.integers(0, 2, n), rng.integers(0, 3, n)
    # column 1 joins 0 and 2 in the measurements; 0 and 2 are copies of one bit u that is
    # independent of column 1 (dependence no measurement holds); column 3 copies u as well
    x = np.stack([u, h, u, u], axis=1)
    graph = gem.measured_graph([(0, 1), (1, 2)], 4)
    y = gem.decouple(x, graph, np.random.default_rng(1))
    for clique in [(0, 1), (1, 2), (3,)]:  # each measured marginal's rows exactly as drawn
        assert _tuples(y, clique) == _tuples(x, clique)
    # given column 1, columns 0 and 2 are independent: agreement 1/2 in each stratum
    # (binomial(~n/3, 1/2): 5 sd < 0.05), and the lone column 3 is independent of both
    for value in range(3):
        rows = y[:, 1] == value
        assert abs(np.mean(y[rows, 0] == y[rows, 2]) - 0.5) < 0.05
    assert abs(np.mean(y[:, 0] == y[:, 3]) - 0.5) < 0.04
    assert np.all(x[:, 0] == x[:, 2])  # the input is not changed
    # a lone column is drawn from the released one-way histogram when one is given
    one_way = gem.one_way_probabilities([np.array([30.0, -5.0]), np.array([1.0, 1.0, 1.0]),
                                         np.array([10.0, 30.0]), np.array([10.0, 30.0])], (2, 3, 2, 2))
    z = gem.decouple(x, graph, np.random.default_rng(2), one_way)
    assert _tuples(z, (0, 1)) == _tuples(x, (0, 1)) and abs(np.mean(z[:, 3]) - 0.75) < 0.03
    # ... but not a column a round measured on its own (the generator fitted that measurement too)
    z = gem.decouple(x, gem.measured_graph([(0, 1), (1, 2), (3,)], 4), np.random.default_rng(2), one_way)
    assert _tuples(z, (3,)) == _tuples(x, (3,)) and abs(np.mean(z[:, 0] == z[:, 3]) - 0.5) < 0.04
    # no measured marginal: every column on its own
    w = gem.decouple(x, np.zeros((4, 4), bool), np.random.default_rng(3))
    assert abs(np.mean(w[:, 0] == w[:, 2]) - 0.5) < 0.04
    assert all(_tuples(w, (j,)) == _tuples(x, (j,)) for j in range(4))


def test_decouple_moves_the_columns_below_together_along_a_chain():
    """A chain 0 - 1 - 2 - 3 measured pairwise, on rows where every column is a noisy copy of one
    bit: every measured pair keeps its rows (a column moves with the columns below it, so pairs
    decoupled earlier are not broken), and the ends become independent given the middle (on the
    rows as drawn they are not: where columns 1 and 2 disagree, the ends agree far more often)."""
    rng = np.random.default_rng(4)
    bit = rng.integers(0, 2, 5000)
    noise = rng.random((5000, 4)) < 0.1
    x = np.where(noise, 1 - bit[:, None], bit[:, None])  # four noisy copies of one bit
    cliques = [(0, 1), (1, 2), (2, 3)]
    y = gem.decouple(x, gem.measured_graph(cliques, 4), np.random.default_rng(5))
    for clique in cliques:
        assert _tuples(y, clique) == _tuples(x, clique)
    # the chain's Markov property: 0 and 3 independent given 1 and 2 (agreement given the
    # middle is the product of the two ends' conditional rates, not the shared bit's)
    for a in range(2):
        for b in range(2):
            rows = (y[:, 1] == a) & (y[:, 2] == b)
            p0, p3 = np.mean(y[rows, 0]), np.mean(y[rows, 3])
            both = np.mean((y[rows, 0] == 1) & (y[rows, 3] == 1))
            assert abs(both - p0 * p3) < 5 * np.sqrt(p0 * p3 * (1 - p0 * p3) / rows.sum()) + 0.01


# ----------------------------------------------------------------------------- the finer one-way release


@pytest.mark.parametrize("bins, refine", [(32, 4), (6, 3), (100, 2)])
def test_finer_bins_nest_in_the_models_bins(bins, refine):
    """Every value's finer bin names its model bin (so finer histograms sum to the model's), on
    Adult's schema (integer columns, log-spaced capital columns) and the mixed test table (a
    float column), for values at and beside every edge."""
    cases = [(data.adult_schema(), data.adult_like(3000, seed=0)), (_tables.MIXED_SCHEMA, _tables.mixed_frame(500, 0))]
    for schema, frame in cases:
        cfg = GEMConfig(bins=bins, one_way_refine=refine)
        coarse, finer = gem.discretizer(cfg, schema), gem.fine_discretizer(cfg, schema)
        ref = gem.refinement(coarse, finer)
        probe = frame.copy()
        for col in schema.columns:  # the rows' values, then every edge and its neighbours
            if col.kind != "continuous":
                continue
            e = finer.edges[col.name]
            extra = np.clip(np.concatenate([e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf)]), col.lower, col.upper)
            extra = np.round(extra) if col.integer else extra
            rows = probe.sample(extra.size, replace=True, random_state=1).reset_index(drop=True)
            rows[col.name] = extra.astype(frame[col.name].dtype)
            probe = pd.concat([probe, rows], ignore_index=True)
        c, f = coarse.codes(probe), finer.codes(probe)
        for j, parent in enumerate(ref.parents):
            if parent is None:
                np.testing.assert_array_equal(f[:, j], c[:, j])
                assert ref.sizes[j] == coarse.sizes[j]
            else:
                np.testing.assert_array_equal(parent[f[:, j]], c[:, j], err_msg=coarse.schema.names[j])
                assert set(parent) == set(range(coarse.sizes[j]))  # every model bin has finer bins
        hists = [np.bincount(f[:, j], minlength=ref.sizes[j]).astype(float) for j in range(len(ref.sizes))]
        for j, h in enumerate(gem.coarse_histograms(hists, ref, coarse.sizes)):
            np.testing.assert_array_equal(h, np.bincount(c[:, j], minlength=coarse.sizes[j]))


def test_refined_codes_follow_the_finer_probabilities_inside_their_bin():
    ref = gem.Refinement(sizes=(5, 2), parents=(np.array([0, 0, 0, 1, 1]), None), fallback=(np.array([0, 3]), None))
    probs = np.array([[0.1, 0.0, 0.3, 0.0, 0.0], [0.5, 0.5, 0, 0, 0]], np.float32)
    n = 20000
    codes = np.stack([np.repeat([0, 1], n // 2), np.repeat([1, 0], n // 2)], axis=1)
    out = gem.refine_codes(codes, ref, probs, np.random.default_rng(0))
    np.testing.assert_array_equal(out[:, 1], codes[:, 1])  # a discrete column keeps its codes
    first, second = out[: n // 2, 0], out[n // 2:, 0]
    assert set(first) <= {0, 2}  # a zero-probability finer bin is never drawn
    assert stats.binomtest(int((first == 2).sum()), first.size, 0.75).pvalue > 1e-3
    assert set(second) == {3, 4}  # all finer probabilities 0: uniform among the bin's finer bins
    assert stats.binomtest(int((second == 3).sum()), second.size, 0.5).pvalue > 1e-3
    # a model bin no finer bin names (rounding) falls back to the finer bin holding its start
    lone = gem.Refinement(sizes=(2,), parents=(np.array([0, 0]),), fallback=(np.array([0, 1]),))
    np.testing.assert_array_equal(gem.refine_codes(np.array([[1], [1]]), lone, probs[:1, :2], np.random.default_rng(0)),
                                  [[1], [1]])


def _peaked(n, seed):
    """An integer column with 60 % of its rows at 40 (as Adult's hours-per-week) and two binaries."""
    r = np.random.default_rng(seed)
    hours = np.where(r.random(n) < 0.6, 40, r.integers(1, 100, n))
    frame = pd.DataFrame({"hours": hours, "y": r.choice(["a", "b"], n).astype(object),
                          "z": r.choice(["a", "b"], n).astype(object)})
    schema = data.Schema.from_dict({"columns": [
        {"name": "hours", "kind": "continuous", "lower": 1, "upper": 99, "integer": True},
        {"name": "y", "kind": "binary", "categories": ["a", "b"]},
        {"name": "z", "kind": "binary", "categories": ["a", "b"]}]})
    return frame, schema


def test_a_peaked_integer_column_keeps_its_peak_and_the_accounting_is_unchanged():
    frame, schema = _peaked(4000, 0)
    # the smoke schedule with 16 bins (about 6 integers each) and steps enough for the generator
    # to give the peak's bin its mass
    small = {**gem.GEM.SMOKE, "bins": 16, "round_steps": 50, "final_steps": 100}
    share = {}
    for refine in (1, 8):
        model = synthesizers.create("gem", one_way_refine=refine, **small).fit(frame, schema, epsilon=3.0, seed=0)
        share[refine] = float(np.mean(model.sample(4000, seed=1)["hours"] == 40))
        rep = model.privacy_report()
        share[refine, "eps"] = rep["epsilon"]
        share[refine, "noise"] = [(p["name"], p.get("noise_multiplier")) for p in rep["phases"]]
    # 16 bins over 1..99 hold about 6 integers each: uniform draws inside the bin give 40 about
    # a sixth of the bin's mass; the finer release (one bin per integer) puts it back
    assert share[1] < 0.2 and share[8] > 0.5, share
    assert share[1, "eps"] == share[8, "eps"] and share[1, "noise"] == share[8, "noise"]
    assert any("finer bins" in a for a in rep["assumptions"])
