"""GEM: contract, the compiled marginals against a per-row loop, the public random workload,
accounting against dp_accounting directly, the fixed-noise steps against Adam on the whole loss,
and that it learns a 3-way relation no pair shows (a planted XOR) where the one-way reference
cannot. Sampling (drawn codes, the measured graph, the finer one-way release) is in
test_gem_sampling.py."""

from __future__ import annotations

import math

import dp_accounting as dpa
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from dp_accounting.rdp import RdpAccountant

from dpgen_jax import _migrate, data, privacy, synthesizers
from dpgen_jax.synthesizers import GEMConfig, gem
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers.gem import _generator
from tests import _tables
from tests._contract import SynthesizerContract

TINY = gem.GEM.SMOKE  # the method's smoke schedule


class TestGEMContract(SynthesizerContract):
    METHOD = "gem"
    OVERRIDES = TINY
    EPSILON = 3.0

    def zero_steps(self):
        return {"max_rounds": 1}

    def functional_phases(self, config, schema, num_records):
        return gem.privacy_phases(config, gem.discretizer(config, data.model_schema(schema)).sizes)

    def functional_released(self, model, frame, schema, phases):
        cfg = model.fitted_config
        disc, finer = gem.discretizer(cfg, schema), gem.fine_discretizer(cfg, schema)
        fine = None if finer is None else (finer.codes(frame), gem.refinement(disc, finer))
        out = gem.fit_released(
            cfg, disc.codes(frame), disc.sizes, jax.random.key(self.SEED), phases=phases, fine=fine)
        rounds = out.rounds
        assert [r.cliques for r in rounds] == [r.cliques for r in model.fitted_release.diagnostics["rounds"]]
        graph = gem.measured_graph([c for r in rounds for c in r.cliques], len(disc.sizes))
        sampler = {"graph": graph, "one_way": out.one_way}
        if out.fine is not None:
            sampler["fine"] = out.fine
        if out.noise is not None:
            sampler["noise"] = out.noise
        return {"generator": out.params, "sampler": sampler}


class TestGEMFreshNoiseContract(TestGEMContract):
    """The contract with a fresh batch of noise vectors every step (``fixed_noise=False``)."""

    OVERRIDES = {**TINY, "fixed_noise": False}

    def test_functional_api_agrees_with_the_class(self, fitted, table):  # not marked xla_default:
        super().test_functional_api_agrees_with_the_class(fitted, table)  # one class per method there


class TestGEMCoarseOneWayContract(TestGEMContract):
    """The contract with the finer one-way release off (``one_way_refine=1``; 4 by default)."""

    OVERRIDES = {**TINY, "one_way_refine": 1}

    def test_functional_api_agrees_with_the_class(self, fitted, table):  # not marked xla_default:
        super().test_functional_api_agrees_with_the_class(fitted, table)  # one class per method there


def _mixture_marginal(probs: np.ndarray, sizes, clique) -> np.ndarray:
    """The slow reference: for every row the outer product of its columns' probabilities, averaged."""
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    out = np.zeros([sizes[a] for a in clique])
    for row in probs:
        parts = [row[offsets[a]:offsets[a] + sizes[a]] for a in clique]
        t = parts[0]
        for p in parts[1:]:
            t = np.multiply.outer(t, p)
        out += t
    return out / len(probs)


def test_compiled_marginals_equal_a_loop_over_rows():
    rng = np.random.default_rng(0)
    sizes = (3, 2, 5, 9, 2)
    d = len(sizes)
    mask, index = gem.bin_mask(sizes), jnp.asarray(gem.bin_index(sizes))
    logits = jnp.asarray(rng.normal(size=(40, sum(sizes))), jnp.float32)

    class Identity:  # probabilities() of an identity network: logits in, one softmax per column out
        def apply(self, variables, z):
            return z

    padded = np.asarray(gem.probabilities(Identity(), None, logits, index), np.float64)
    np.testing.assert_allclose(padded.sum(axis=2), 1.0, rtol=1e-5)
    assert np.all(padded[:, ~mask] == 0.0)
    flat = np.concatenate([padded[:, j, :sizes[j]] for j in range(d)], axis=1)
    offsets = np.concatenate([[0], np.cumsum(sizes)])  # each column's softmax over its own logits
    for j in range(d):
        x = np.asarray(logits, np.float64)[:, offsets[j]:offsets[j + 1]]
        np.testing.assert_allclose(flat[:, offsets[j]:offsets[j + 1]],
                                   np.exp(x) / np.exp(x).sum(axis=1, keepdims=True), rtol=1e-5)
    even = np.asarray(gem.probabilities(Identity(), None, logits[:, :12], jnp.asarray(gem.bin_index((3,) * 4))))
    x = np.asarray(logits[:, :12], np.float64).reshape(-1, 4, 3)  # no padding: the reshape path
    np.testing.assert_allclose(even, np.exp(x) / np.exp(x).sum(axis=2, keepdims=True), rtol=1e-5)
    cliques = [(0, 2, 3), (1, 4), (3,), (2, 3, 4), (0, 1), (1, 2, 3)]
    log = [(c, rng.normal(size=math.prod(sizes[a] for a in c)), 1.0 + i) for i, c in enumerate(cliques)]
    meas = gem.measured([np.arange(s, dtype=float) for s in sizes], 2.0, log, sizes)
    got = {}
    for g in meas.groups:
        values = np.asarray(gem.group_marginals(jnp.asarray(padded, jnp.float32), g))
        for m in range(values.shape[0]):
            if float(g.weight[m]) > 0.0:
                cols = tuple(int(c[m]) for c in g.columns)
                got[cols] = (values[m].reshape(g.widths), np.asarray(g.target[m]).reshape(g.widths),
                             float(g.weight[m]))
    assert len(got) == len(cliques)
    for (c, y, std) in log:
        want = _mixture_marginal(flat, sizes, c)
        order = sorted(range(len(c)), key=lambda i: (gem.bucket(sizes[c[i]], max(sizes)), c[i]))
        value, target, weight = got[tuple(c[i] for i in order)]
        inner = tuple(slice(0, sizes[c[i]]) for i in order)
        np.testing.assert_allclose(value[inner], np.transpose(want, order), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(target[inner], np.transpose(y.reshape([sizes[a] for a in c]), order), rtol=1e-6)
        assert value.sum() == pytest.approx(value[inner].sum())  # padding bins carry nothing
        assert weight == pytest.approx(1.0 / std)
    one = np.asarray(meas.one_way)
    for j, s in enumerate(sizes):
        np.testing.assert_array_equal(one[j, :s], np.arange(s))
        np.testing.assert_array_equal(one[j, s:], 0)
    assert float(meas.one_weight) == 0.5


def test_mixture_marginal_equals_a_loop_over_rows():
    rng = np.random.default_rng(1)
    sizes = (3, 2, 5, 4)
    index = jnp.asarray(gem.bin_index(sizes))
    logits = jnp.asarray(rng.normal(size=(30, sum(sizes))), jnp.float32)

    class Identity:
        def apply(self, variables, z):
            return z

    padded = np.asarray(gem.probabilities(Identity(), None, logits, index), np.float64)
    flat = np.concatenate([padded[:, j, :sizes[j]] for j in range(len(sizes))], axis=1)
    for c in [(0,), (2, 0), (1, 3, 2), (0, 1, 2, 3)]:
        got = gem.mixture_marginal(Identity(), None, logits, index, c, sizes)
        np.testing.assert_allclose(got, _mixture_marginal(flat, sizes, c).ravel(), rtol=1e-5, atol=1e-7)


def test_annealing_spends_exactly_the_planned_units():
    # At a small budget the fits move the measured marginals by less than the noise, so rounds
    # anneal (4x the units); whatever the path, the rounds spend the R planned units, each round
    # after an annealed one spends 4x (or, last, everything left), and the accounted steps are R.
    planted = _xor_table(1500, 1)
    cfg = dict(TINY, max_rounds=12, anneal=True)
    model = synthesizers.create("gem", **cfg).fit(planted.frame, planted.schema, epsilon=0.2, seed=0)
    rounds = model.fitted_release.diagnostics["rounds"]
    units = [r.units for r in rounds]
    assert sum(units) == 12 and any(r.annealed for r in rounds) and len(rounds) < 12
    level = 1
    for i, r in enumerate(rounds):
        last = i == len(rounds) - 1
        assert r.units == level or (last and r.units == 12 - sum(units[:-1]) and r.units < 2 * level)
        level = 4 * level if r.annealed else level
    phases = {p.name: p for p in model.fitted_phases()}
    assert phases["selection"].steps == phases["measure"].steps == 12
    assert model.privacy_report()["epsilon"] == pytest.approx(0.2, rel=1e-3)
    # Without noise nothing anneals: every round is one unit.
    exact = synthesizers.create("gem", **cfg).fit(planted.frame, planted.schema, epsilon=math.inf, seed=0)
    assert [r.units for r in exact.fitted_release.diagnostics["rounds"]] == [1] * 12


def test_random_workload_is_public_deterministic_and_capped():
    sizes = (2,) * 1000 + (50,) * 3
    a = sm.workload(sizes, 3, 64, size=300, seed=4)
    assert a == sm.workload(sizes, 3, 64, size=300, seed=4) and a != sm.workload(sizes, 3, 64, size=300, seed=5)
    assert len(a) == 300 == len(set(a)) and a == sorted(a)
    assert all(c == tuple(sorted(c)) and len(set(c)) == 3 and math.prod(sizes[j] for j in c) <= 64 for c in a)
    small = sm.workload((3, 4, 2, 5, 2), 3, 30, size=4, seed=0)  # enumerated, then sampled
    every = sm.workload((3, 4, 2, 5, 2), 3, 30)
    assert len(small) == 4 and set(small) <= set(every) and len(every) > 4
    with pytest.raises(ValueError, match="give the configuration.s workload_size"):
        sm.workload(sizes, 3, 64)
    with pytest.raises(ValueError, match="found only"):
        sm.workload((50,) * 200, 3, 10, size=5)


def test_units_compose_as_dp_accounting_says():
    cfg, sizes = GEMConfig(max_rounds=7), (3,) * 5
    phases = gem.privacy_phases(cfg, sizes)
    noise = cfg.noise_multipliers(sizes)
    acc = RdpAccountant()
    acc.compose(dpa.GaussianDpEvent(noise["one_way_noise_multiplier"]))  # sensitivity sqrt(d), std sigma sqrt(d)
    acc.compose(dpa.GaussianDpEvent(noise["measure_noise_multiplier"]), 7)
    # a selection at epsilon_u is (epsilon_u^2 / 8)-zCDP: RDP (alpha epsilon_u^2 / 8), as a Gaussian
    # of noise multiplier 2 / epsilon_u
    eps_u = 2.0 / noise["selection_noise_multiplier"]
    acc.compose(dpa.GaussianDpEvent(2.0 / eps_u), 7)
    assert privacy.epsilon(phases, 1e-5, "rdp") == pytest.approx(acc.get_epsilon(1e-5), rel=1e-6)
    rho = privacy.zcdp_rho(phases)
    assert rho == pytest.approx(1.0, rel=1e-9)  # AIM's split of a total rho of 1


def test_gram_pair_marginals_equal_counts():
    rng = np.random.default_rng(3)
    sizes = (2, 5, 3, 2, 7)
    codes = np.stack([rng.integers(0, k, 700) for k in sizes], axis=1)
    other = np.stack([rng.integers(0, k, 400) for k in sizes], axis=1)
    g, h = sm.onehot_gram(codes, sizes, chunk=128), sm.onehot_gram(other, sizes)
    l1 = sm.pair_l1(g, h, sizes)
    for i in range(len(sizes)):
        for j in range(len(sizes)):
            if i == j:
                continue
            block = g[sum(sizes[:i]):sum(sizes[:i + 1]), sum(sizes[:j]):sum(sizes[:j + 1])]
            np.testing.assert_array_equal(block.ravel(), sm.counts(codes, sizes, (i, j)))
            want = np.abs(sm.counts(codes, sizes, (i, j)) - sm.counts(other, sizes, (i, j))).sum()
            assert l1[i, j] == pytest.approx(want)


def test_select_many_is_distinct_and_follows_the_scores():
    q = np.array([0.0, 5.0, 1.0, 4.0, 3.0])
    assert sm.select_many(q, 3, None, np.random.default_rng(0)) == [1, 3, 4]
    rng = np.random.default_rng(1)
    draws = [sm.select_many(q, 2, 1.0, rng) for _ in range(4000)]
    assert all(len(set(d)) == 2 for d in draws)
    # the first draw is one exponential mechanism: P(i) proportional to exp(q_i / 2)
    want = np.exp(q / 2) / np.exp(q / 2).sum()
    got = np.bincount([d[0] for d in draws], minlength=5) / len(draws)
    np.testing.assert_allclose(got, want, atol=0.025)
    with pytest.raises(ValueError, match="count=6"):
        sm.select_many(q, 6, 1.0, rng)


def test_one_way_share_and_rounds_of_several_units_keep_the_total():
    cfg, sizes = GEMConfig(max_rounds=5, measurements_per_round=4, one_way_share=0.3), (2,) * 12
    phases = {p.name: p for p in gem.privacy_phases(cfg, sizes)}
    assert phases["selection"].steps == phases["measure"].steps == 20
    assert 1.0 / (2.0 * cfg.noise_multipliers(sizes)["one_way_noise_multiplier"]**2) == pytest.approx(0.3)
    assert privacy.zcdp_rho(phases.values()) == pytest.approx(1.0, rel=1e-9)
    with pytest.raises(ValueError, match="one_way_share"):
        GEMConfig(one_way_share=1.0).validate()
    with pytest.raises(ValueError, match="measurements_per_round"):
        GEMConfig(measurements_per_round=0).validate()


def test_pair_candidates_are_automatic_on_wide_tables_only():
    assert not GEMConfig().scores_pairs(gem.discretizer(GEMConfig(), data.adult_schema()).sizes)
    assert GEMConfig().scores_pairs((2,) * 1000)
    assert GEMConfig().scores_pairs((2,) * 120)  # 280,840 triples listed, more than the 2,000 drawn
    assert not GEMConfig(pair_candidates=False).scores_pairs((2,) * 1000)
    assert not GEMConfig().scores_pairs((40,) * 1000)  # 40,000 bins: no Gram matrix
    with pytest.raises(ValueError, match="pair_candidates=True"):
        GEMConfig(pair_candidates=True).scores_pairs((40,) * 1000)
    wide, narrow = GEMConfig().for_sizes((2,) * 1000), GEMConfig().for_sizes((2, 3, 4))
    assert (wide.pair_candidates, wide.units(), wide.output_init_scale, wide.one_way_init,
            wide.graphical_sampling) == (True, 64, 0.1, True, True)
    assert (narrow.pair_candidates, narrow.units(), narrow.output_init_scale, narrow.one_way_init,
            narrow.graphical_sampling) == (False, 32, 1.0, False, True)
    assert GEMConfig(max_rounds=3).for_sizes((2,) * 1000).units() == 24  # a set field is kept
    assert (wide.round_steps, narrow.round_steps, GEMConfig(round_steps=7).for_sizes((2, 3, 4)).round_steps) == (
        200, 50, 7)
    assert (wide.calibrate_iterations, narrow.calibrate_iterations) == (4, 0)
    full, small = (gem.init(c, 10, jax.random.key(0)) for c in (narrow, narrow.replace(output_init_scale=0.1)))
    np.testing.assert_allclose(small["layer_2"]["kernel"], 0.1 * full["layer_2"]["kernel"], rtol=1e-6)
    np.testing.assert_array_equal(small["layer_1"]["kernel"], full["layer_1"]["kernel"])


def test_pair_candidates_find_planted_pairs_outside_the_random_workload(tmp_path):
    """On 120 binary columns the random workload's closure misses the planted pairs; with every
    pair a candidate GEM selects them and fits them, where it cannot without."""
    planted = data.planted_binary(2000, 120, 2, n_pairs=4, n_triples=0, flip=0.05)
    frame, schema = planted.frame, planted.schema
    pairs = [tuple(sorted(schema.names.index(c) for c in p)) for p in planted.pairs]
    small = dict(max_rounds=2, measurements_per_round=4, round_steps=150, final_steps=300, hidden=(64,),
                 noise_dim=16, batch_size=256, score_samples=2000, workload_size=50)
    def fit(**kw):
        return synthesizers.create("gem", **small, **kw).fit(frame, schema, epsilon=20.0, seed=0)
    with_pairs, without = fit(), fit(pair_candidates=False)
    chosen = {tuple(sorted(c)) for r in with_pairs.fitted_release.diagnostics["rounds"] for c in r.cliques}
    assert set(pairs) <= chosen
    assert not set(pairs) & set(sm.candidates(sm.workload(
        gem.discretizer(with_pairs.fitted_config, schema).sizes, 3, 10_000, size=50, seed=0)))
    def pair_l1(model):
        from dpgen_jax import metrics
        return metrics.marginal_l1_2way(frame, model.sample(2000, seed=1), schema,
                                        pairs=[list(p) for p in planted.pairs])["mean"]
    assert pair_l1(with_pairs) < 0.45 < 0.6 < pair_l1(without)
    # the sampler follows the measured marginals' graph; the graph is released (post-processing of
    # the selections) and survives a save and load
    graph = np.asarray(with_pairs.released["sampler"]["graph"])
    np.testing.assert_array_equal(graph, gem.measured_graph(
        [c for r in with_pairs.fitted_release.diagnostics["rounds"] for c in r.cliques], 120))
    assert 0 < graph.any(axis=1).sum() < 120
    with_pairs.save(tmp_path / "gem.npz")
    again = synthesizers.load(tmp_path / "gem.npz")
    assert again.sample(300, seed=4).equals(with_pairs.sample(300, seed=4))


def test_one_way_init_starts_the_mixture_at_the_released_one_way_probabilities():
    sizes = (2, 3, 5)
    one_way = gem.one_way_probabilities([np.array([99.0, 1.0]), np.array([5.0, -2.0, 15.0]),
                                         np.array([1.0, 2.0, 3.0, 4.0, 0.0])], sizes)
    mask, width = gem.bin_mask(sizes), sum(sizes)
    cfg = GEMConfig(hidden=(16,), noise_dim=4, output_init_scale=1e-6).for_sizes(sizes)
    params = gem.init(cfg, width, jax.random.key(0), one_way[mask])
    probs = np.asarray(gem.probabilities(gem.network(cfg, width), params, jax.random.normal(
        jax.random.key(1), (64, 4)), jnp.asarray(gem.bin_index(sizes))))
    want = np.where(one_way > 0, one_way, gem.ONE_WAY_FLOOR) * mask
    want = want / want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probs, np.broadcast_to(want, probs.shape), rtol=1e-4, atol=1e-7)
    assert probs[0, 0, 1] == pytest.approx(0.01, rel=1e-4)  # a rare code, far from uniform
    without = gem.init(cfg, width, jax.random.key(0))  # the same kernels, He's zero bias
    np.testing.assert_array_equal(without["layer_1"]["kernel"], params["layer_1"]["kernel"])
    assert not np.any(np.asarray(without["layer_1"]["bias"]))
    with pytest.raises(ValueError, match="width"):
        gem.init(cfg, width + 1, jax.random.key(0), one_way[mask])


def _xor_table(n: int, seed: int):
    """Six binary columns; column 5 = c0 XOR c1 XOR c2 (pairwise independent, a 3-way relation)."""
    planted = data.planted_binary(n, 6, seed, n_pairs=0, n_triples=1, flip=0.0)
    return planted


def test_learns_a_planted_triple_the_one_way_reference_cannot():
    planted = _xor_table(3000, 0)
    frame, schema, (triple,) = planted.frame, planted.schema, planted.triples
    idx = [schema.names.index(c) for c in triple]
    x = frame.to_numpy().astype(np.int64)
    true_xor = np.mean(np.bitwise_xor.reduce(x[:, idx], axis=1) == 0)
    assert true_xor == 1.0
    model = synthesizers.create("gem", max_rounds=6, round_steps=150, final_steps=300, batch_size=256,
                                hidden=(64,), noise_dim=16, score_samples=3000)
    model.fit(frame, schema, epsilon=math.inf, seed=0)
    assert any(set(c) == set(idx) for r in model.fitted_release.diagnostics["rounds"] for c in r.cliques)
    syn = model.sample(4000, seed=1).to_numpy().astype(np.int64)
    got = np.mean(np.bitwise_xor.reduce(syn[:, idx], axis=1) == 0)
    indep = synthesizers.create("independent").fit(frame, schema, epsilon=math.inf, seed=0)
    base = np.mean(np.bitwise_xor.reduce(indep.sample(4000, seed=1).to_numpy().astype(np.int64)[:, idx], axis=1) == 0)
    assert base < 0.6 and got > 0.85


def test_one_way_bias_fit_moves_the_chosen_columns_rates_to_the_target_and_keeps_the_kernels():
    """A generator far from its one-way target (a random start at He's scale): a few bias shifts
    take the mean probabilities of the chosen columns to the target (the fixed noise batch's
    mean exactly in the limit, a fresh batch's within sampling error), leave the other columns'
    probabilities and every kernel as they were."""
    sizes = (2, 3, 5)
    target = gem.one_way_probabilities([np.array([90.0, 10.0]), np.array([5.0, 1.0, 14.0]),
                                        np.array([1.0, 2.0, 3.0, 4.0, 10.0])], sizes)
    index = jnp.asarray(gem.bin_index(sizes))
    cfg = GEMConfig(hidden=(16,), noise_dim=4).for_sizes(sizes)
    net = gem.network(cfg, sum(sizes))
    params = gem.init(cfg, sum(sizes), jax.random.key(0))
    columns = jnp.asarray([True, True, False])

    def mean_probs(p, key, n=20_000):
        return np.asarray(gem.probabilities(net, p, jax.random.normal(key, (n, 4)), index).mean(axis=0))

    before = mean_probs(params, jax.random.key(3))
    assert np.abs(before[:2] - target[:2]).max() > 0.05  # far from the target to begin with
    out = gem.fit_one_way_bias(params, index, jnp.asarray(target), columns, jax.random.key(1), net=net,
                               noise_dim=4, n=20_000, iterations=8)
    after = mean_probs(out, jax.random.key(3))
    np.testing.assert_allclose(after[:2], target[:2], atol=0.01)
    np.testing.assert_allclose(after[2], before[2], rtol=1e-5, atol=1e-7)  # a column not chosen
    for name in params:
        np.testing.assert_array_equal(out[name]["kernel"], params[name]["kernel"])
    assert not np.array_equal(out["layer_1"]["bias"], params["layer_1"]["bias"])
    same = gem.fit_one_way_bias(params, index, jnp.asarray(target), columns, jax.random.key(1), net=net,
                                noise_dim=4, n=100, iterations=0)
    np.testing.assert_array_equal(same["layer_1"]["bias"], params["layer_1"]["bias"])


def test_config_is_refused_by_name():
    for bad, word in [(dict(calibrate_iterations=-1), "calibrate_iterations"), (dict(max_rounds=-1), "max_rounds"), (dict(hidden=()), "hidden"),
                      (dict(measure_share=1.0), "measure_share"), (dict(workload_size=0), "workload_size"),
                      (dict(learning_rate=-1.0), "learning_rate"),
                      (dict(one_way_refine=0), "one_way_refine")]:
        with pytest.raises(ValueError, match=word):
            GEMConfig(**bad).validate()
    with pytest.raises(ValueError, match="measurements_per_round=2"):
        GEMConfig(anneal=True, measurements_per_round=2).validate()
    with pytest.raises(TypeError, match="expected anneal to be True or False, got anneal='yes'"):
        GEMConfig(anneal="yes").validate()
    with pytest.raises(ValueError, match="workload_degree=4 exceeds the 3 columns"):
        GEMConfig(workload_degree=4).for_sizes((2, 2, 2))
    with pytest.raises(ValueError, match="workload_degree=5 exceeds the 4 columns"):
        synthesizers.create("gem", workload_degree=5).plan(_tables.MIXED_SCHEMA, 100, epsilon=1.0)
    with pytest.raises(ValueError, match=r"no field\(s\) \['num_columns'\]"):  # d is the schema's
        synthesizers.create("gem", num_columns=4)


def test_a_thousand_column_plan_calibrates():
    """A unit's noise multiplier on a wide table passes the default cap of 100; the marginal methods
    calibrate up to 1e4 (data-free plan of the wide-table benchmark's shape)."""
    schema = data.binary_schema(1000)
    plan = synthesizers.create("gem", pair_candidates=False).plan(schema, 1600, epsilon=3.0)  # AIM's units
    assert plan.epsilon() == pytest.approx(3.0, rel=1e-3)
    assert max(p.noise_multiplier for p in plan.phases) > 100
    wide = synthesizers.create("gem").plan(schema, 1600, epsilon=3.0)  # the wide defaults: 64 units
    assert wide.epsilon() == pytest.approx(3.0, rel=1e-3)
    assert {p.name: p.steps for p in wide.phases} == {"one_way": 1, "selection": 64, "measure": 64}


def test_a_second_fit_reuses_the_compiled_round_programs():
    """The round program's static arguments (network, optimizer) compare equal across fits of one
    configuration, so a process that fits many times (a benchmark grid) compiles each layout once
    and does not keep a new set of programs per fit."""
    planted = _xor_table(600, 2)
    fit = lambda: synthesizers.create("gem", **TINY).fit(planted.frame, planted.schema, epsilon=3.0, seed=0)
    programs = (_generator._network_step, _generator._group_grad, _generator._one_way_grad,
                _generator._fresh_steps)
    fit()
    compiled = [p._cache_size() for p in programs]
    again = fit()
    assert [p._cache_size() for p in programs] == compiled
    assert again.fitted_release.diagnostics["rounds"]  # it ran its rounds
    fresh = lambda: synthesizers.create("gem", **TINY, fixed_noise=False).fit(
        planted.frame, planted.schema, epsilon=3.0, seed=0)
    fresh()
    compiled = _generator._fresh_steps._cache_size()
    fresh()
    assert _generator._fresh_steps._cache_size() == compiled


def test_a_configuration_written_before_fixed_noise_loads_with_fresh_noise():
    stored = GEMConfig().to_dict()
    assert GEMConfig.from_dict(stored).fixed_noise is None  # auto: the defaults' True
    assert GEMConfig().for_sizes((3, 4, 5)).fixed_noise is True
    del stored["fixed_noise"]  # a release file (format version 2) written before the fixed noise batch existed
    meta = _migrate.upgrade({"format_version": 2, "method": "gem", "config": stored,
                             "privacy_report": {"delta": 1e-5}})
    assert GEMConfig.from_dict(meta["config"]).fixed_noise is False


def test_fixed_noise_steps_equal_adam_on_the_whole_loss():
    """On fixed noise a step is split in programs (the loss's gradient with respect to the
    probabilities per stack, then the network's backward pass): three steps give the parameters
    of Adam on ``jax.grad`` of the whole loss written out directly."""
    sizes = (3, 4, 2, 5)
    cfg = GEMConfig(hidden=(16,), noise_dim=4, learning_rate=1e-2).for_sizes(sizes)
    index = jnp.asarray(gem.bin_index(sizes))
    net, opt = gem.network(cfg, sum(sizes)), gem.optimizer(cfg)
    params = gem.init(cfg, sum(sizes), jax.random.key(0))
    noise = jax.random.normal(jax.random.key(1), (32, 4))
    rng = np.random.default_rng(0)
    log = [(c, rng.uniform(0, 60, math.prod(sizes[a] for a in c)), s)
           for c, s in (((0, 1), 3.0), ((1, 2, 3), 5.0), ((0, 3), 2.0))]
    one = [rng.uniform(0, 100, s) for s in sizes]
    meas = gem.measured(one, 4.0, log, sizes)
    total = jnp.float32(500.0)
    got, _ = gem.fit_steps(params, opt.init(params), meas, index, total, jax.random.key(2), 3, net=net, opt=opt,
                           batch_size=32, noise_dim=4, noise=noise)

    def whole(p):  # the loss from its definition: every marginal by a loop over its cells
        probs = gem.probabilities(net, p, noise, index)
        out = 0.0
        for j, s in enumerate(sizes):
            out = out + jnp.sum(jnp.abs(total * jnp.mean(probs[:, j, :s], axis=0) - one[j])) / 4.0
        for clique, y, std in log:
            m = probs[:, clique[0], :sizes[clique[0]]]
            for a in clique[1:]:
                m = (m[:, :, None] * probs[:, a, None, :sizes[a]]).reshape(m.shape[0], -1)
            out = out + jnp.sum(jnp.abs(total * jnp.mean(m, axis=0) - y)) / std
        return out

    want, state = params, opt.init(params)
    for _ in range(3):
        upd, state = opt.update(jax.grad(whole)(want), state, want)
        want = optax.apply_updates(want, upd)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
