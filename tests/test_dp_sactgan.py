"""DP-SACTGAN: the hook's bounds and single release, the generator's dependence on private data
only through the hook, the composed accounting against dp_accounting and the paper's numbers (docs/dp-sactgan.md), DP
or public modes, training by sampling inside a shard, the column-token models' padding, bad
input, and the synthesizer contract.

Oracles: ``dpsgd.sanitize_rows`` and ``jax.vjp`` written out by hand, dp_accounting's own
accountants on hand-built events, published calibration values (docs/dp-sactgan.md), ``dp_em_ssp``
called directly, statistics of many draws (chi-square).
"""

from __future__ import annotations

import dataclasses
import math
import types
import warnings

import dp_accounting as dpa
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant as plda
from dp_accounting.rdp import rdp_privacy_accountant as rdpa
from scipy import stats

from dpgen_jax import data, dpsgd, privacy, synthesizers
from dpgen_jax.synthesizers import _dp_em, _shards
from dpgen_jax.synthesizers import dp_sactgan as ds
from tests._contract import DELTA, SynthesizerContract


TINY = dict(mechanism="hook", batch_size=8, generator_steps=6, noise_dim=8, d_model=8, num_heads=2, num_layers=1,
            n_modes=3, em_iterations=2, aux_hidden=(8,))
CFG = ds.DPSACTGANConfig(**TINY)
FLAGS = dict(chunk_size=3)  # speed settings (synthesizers.Flags): several compiled chunks

LABELLED = data.Schema.from_dict({"columns": [
    {"name": "a", "kind": "categorical", "categories": ["x", "y", "z"]},
    {"name": "c", "kind": "continuous", "lower": 0, "upper": 10},
    {"name": "y", "kind": "binary", "categories": ["no", "yes"], "label": True}]})


def _labelled_rows(n=200, seed=0):
    r = np.random.default_rng(seed)
    import pandas as pd

    frame = pd.DataFrame({"a": r.choice(["x", "y", "z"], n), "c": r.uniform(0, 10, n),
                          "y": r.choice(["no", "yes"], n).astype(object)})
    return frame, jnp.asarray(data.TableEncoder(LABELLED).encode(frame))


def _train_phase(phases):
    """The training phase of a plan's phases (the last one, the matching stage's one-way
    release aside)."""
    return [p for p in phases if p.name != "one-way"][-1]


def functional_preprocessing(cfg, schema, frame, key, phases):
    """The class's preprocessing written out with the functional API, with the noise of the
    calibrated ``phases`` (the contract's, built with the functional API): ``(layout, the seven keys
    of a fit, rows, codes, modes, condition counts, training log-probabilities)``."""
    sigma = {p.name: p.noise_multiplier_or_none for p in phases}
    lay = ds.build_layout(schema, cfg)
    x = jnp.asarray(data.TableEncoder(schema).encode(frame))
    keys = jax.random.split(key, 7)
    k_modes, k_assign, k_hist = keys[:3]
    _, u = ds.split_columns(lay, x)
    modes = ds.fit_modes(u, k_modes, cfg, sigma["dp-em"])
    rows, codes = ds.encode_rows(lay, x, modes, cfg.mode_assignment, k_assign)
    counts = ds.release_conditional_counts(codes, lay, k_hist, sigma["histograms"],
                                           ds.histogram_columns(lay, cfg))
    j = 0
    for c in range(lay.n_cols):
        if lay.continuous[c]:
            counts = counts.at[c, :cfg.n_modes].set(modes.weights[j] * len(frame))
            j += 1
    return lay, keys, rows, codes, modes, counts, ds.cond_log_probs(lay, counts, training=True)


class SACTGANContract(SynthesizerContract):
    """The contract for DP-SACTGAN under either mechanism (not collected: no ``Test`` prefix)."""

    METHOD = "dp-sactgan"
    EPSILON = 3.0

    def zero_steps(self):
        return dict(generator_steps=0)

    def functional_phases(self, config, schema, num_records):
        return ds.privacy_phases(config, ds.build_layout(schema, config), num_records)

    def functional_calibration(self, config, schema, phases, fixed=()):  # preprocessing first, then training
        return ds.calibrate(config, ds.build_layout(schema, config), phases, self.EPSILON, DELTA, fixed=fixed)

    # Three contract tests that refit the transformer (about 7 s each): run for every other
    # method by default, for DP-SACTGAN in the slow set (CI time).
    @pytest.mark.slow
    def test_public_num_records(self, table):
        super().test_public_num_records(table)

    @pytest.mark.slow
    def test_time_budget_reports_the_executed_steps(self, table):
        super().test_time_budget_reports_the_executed_steps(table)

    @pytest.mark.slow
    def test_non_private_fit_reports_null_epsilon(self, table, tmp_path):
        super().test_non_private_fit_reports_null_epsilon(table, tmp_path)


class TestDPSACTGANContract(SACTGANContract):
    OVERRIDES = {**TINY, **FLAGS}

    def functional_released(self, model, frame, schema, phases):
        # K as accounted (the configuration holds the user's choice, None: K from N)
        cfg = model.fitted_config.replace(num_discriminators=_train_phase(phases).num_shards)
        lay, keys, rows, codes, modes, counts, log_probs = functional_preprocessing(cfg, schema, frame, self.train_key(cfg),
                                                                                    phases)
        _, _, _, k_part, _, k_init, k_run = keys
        train_data = ds.prepare(lay, rows, codes, k_part, cfg.num_discriminators)
        state = ds.init_state(cfg, lay, cfg.num_discriminators, k_init)
        state = ds.train(cfg, lay, state, train_data, log_probs, k_run, _train_phase(phases))
        return {"generator": state.generator.params, "modes": modes._asdict(), "cond": {"counts": counts}}

    def test_report_lists_every_mechanism_and_no_secret(self, fitted, table):
        rep = fitted.privacy_report()
        names = [p["name"] for p in rep["phases"]]
        assert names == ["histograms", "dp-em", "generator", "one-way"]
        hist, em, gen, _one_way = rep["phases"]
        assert hist["steps"] == 2  # the two discrete columns of the mixed table
        assert em["steps"] == 3 * TINY["em_iterations"] * 2  # two continuous columns
        assert gen["accounting"] == "proven" and gen["num_shards"] == 300 // 8
        assert "NOT a valid bound" in rep["paper_accounting"]["label"]
        assert set(fitted.released) == {"generator", "modes", "cond"}  # no critic, classifier or shard
        text = " ".join(rep["assumptions"])
        assert "secret key" in text and "never leave the process" in text and "no state is shared across shards" in text
        assert rep["sharded_accounting"]["proven"] == rep["epsilon"]
        assert "not a proven bound" in rep["sharded_accounting"]["assumed_label"]


# ----------------------------------------------------------------------------- the hook


@pytest.fixture(scope="module")
def hook_setup():
    frame, x = _labelled_rows()
    cfg = CFG.replace(noise_multiplier=0.7, clip_norm=1.5)
    lay = ds.build_layout(LABELLED, cfg)
    rows, codes = ds.encode_rows(lay, x, ds.public_modes(LABELLED, cfg))
    lp = ds.cond_log_probs(lay, jnp.ones((lay.n_cols, lay.max_width)), training=True)
    train_data = ds.prepare(lay, rows, codes, jax.random.key(1), 3)
    g = ds.init_generator(cfg, lay, jax.random.key(2))
    return cfg, lay, train_data, lp, g


def _hook(cfg):
    """The sanitiser of a generator phase with ``cfg``'s clip norm and noise multiplier."""
    return _shards.sanitizer_hook(privacy.ShardedSanitizerPhase(
        "generator", num_shards=3, steps=1, rows_per_step=cfg.batch_size, noise_multiplier=cfg.noise_multiplier,
        dataset_size=300, clip_norm=cfg.clip_norm))


def _random_private_side(cfg, lay, train_data, lp, seed, scale):
    """A critic and classifier with arbitrary (scaled random) weights and a batch of real rows."""
    key = jax.random.key(100 + seed)
    k_d, k_a, k_b = jax.random.split(key, 3)
    rescale = lambda t: jax.tree_util.tree_map(lambda a: a * scale, t)  # noqa: E731
    d = rescale(_init_critic(cfg, lay, k_d))
    a = rescale(_init_aux(cfg, lay, k_a))
    batch = _draw_batch(cfg, lay, train_data, seed % 3, lp, k_b)
    return d, a, batch


# The library's functions compiled whole (static: the configuration, the layout and the hook):
# run eagerly, the transformer's gradients dispatch several hundred small programs, each compiled
# on first use, which cost most of these tests' time. The computations are the same.
_init_critic = jax.jit(ds.init_critic, static_argnums=(0, 1))
_init_aux = jax.jit(ds.init_aux, static_argnums=(0, 1))
_draw_batch = jax.jit(ds.draw_batch, static_argnums=(0, 1))
_hooked_grad = jax.jit(jax.grad(ds.hooked_loss, argnums=2), static_argnums=(0, 1, 7))
_private_grad = jax.jit(jax.grad(ds.private_terms, argnums=2), static_argnums=(0, 1))
_generator_grads = jax.jit(ds.generator_grads, static_argnums=(0, 1, 7))
_gen_rows = jax.jit(lambda cfg, lay, g, z, key: ds.activate(lay, ds.networks(cfg, lay).generator.apply(
    {"params": g}, z), key, cfg.tau), static_argnums=(0, 1))


def test_hook_clips_each_row_and_adds_noise_once_for_all_three_terms(hook_setup):
    """The cotangent leaving the hook equals ``sanitize_rows`` of the summed cotangent of the
    adversarial, information and classifier terms (one clip, one noise draw), and every row's
    clipped part has norm <= C/B whatever the critic and classifier."""
    cfg, lay, train_data, lp, g = hook_setup
    b, c, sigma = cfg.batch_size, cfg.clip_norm, cfg.noise_multiplier
    key = jax.random.key(7)
    noise = np.asarray(dpsgd.gaussian_noise(key, (b, lay.width)), np.float64) * 2 * c * sigma / b
    for seed, scale in enumerate((0.1, 1.0, 10.0, 100.0)):
        d, a, batch = _random_private_side(cfg, lay, train_data, lp, seed, scale)
        gen_rows = _gen_rows(cfg, lay, g, batch.z, jax.random.key(8))
        got = _hooked_grad(cfg, lay, gen_rows, batch, d, a, key, _hook(cfg))
        raw = _private_grad(cfg, lay, gen_rows, batch.cond, batch.real, d, a)
        want = dpsgd.sanitize_rows(raw, key, clip_norm=c, noise_std=2 * c * sigma, scale=1 / b)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)
        clipped = np.asarray(got, np.float64) - noise  # noise off: the clipped rows alone
        assert np.all(np.linalg.norm(clipped, axis=1) <= c / b * (1 + 1e-4))
        big = np.linalg.norm(np.asarray(raw), axis=1) > c
        if scale >= 10:  # large weights: rows beyond the bound are clipped exactly to it
            assert big.any()
        np.testing.assert_allclose(np.linalg.norm(clipped, axis=1)[big], c / b, rtol=1e-3)
    # the aux classifier and the information loss do contribute (they are not silently dropped)
    d, a, batch = _random_private_side(cfg, lay, train_data, lp, 0, 1.0)
    no_aux = _private_grad(cfg.replace(aux_classifier=False), lay, gen_rows, batch.cond, batch.real, d, None)
    with_aux = _private_grad(cfg, lay, gen_rows, batch.cond, batch.real, d, a)
    assert not np.allclose(np.asarray(no_aux), np.asarray(with_aux))


def test_noise_std_of_the_hook_is_2_C_sigma_over_B(hook_setup):
    cfg, lay, train_data, lp, g = hook_setup
    cfg = cfg.replace(noise_multiplier=50.0)
    d, a, batch = _random_private_side(cfg, lay, train_data, lp, 1, 1.0)
    rows = jnp.zeros((cfg.batch_size, lay.width))
    draws = np.concatenate([np.asarray(_hooked_grad(cfg, lay, rows, batch, d, a, jax.random.key(s), _hook(cfg))).ravel()
                            for s in range(40)])
    assert np.std(draws) == pytest.approx(2 * cfg.clip_norm * 50.0 / cfg.batch_size, rel=0.03)


def test_generator_update_depends_on_private_data_only_through_the_hook(hook_setup):
    """G's gradient is the VJP of (params -> activated rows) at the sanitised cotangent plus the
    conditional term: once that cotangent is fixed, another critic, classifier and real batch
    cannot change the update."""
    cfg, lay, train_data, lp, g = hook_setup
    key = jax.random.key(11)
    k_g, k_noise = jax.random.split(key)
    gen = ds.networks(cfg, lay).generator
    d1, a1, batch = _random_private_side(cfg, lay, train_data, lp, 0, 1.0)
    got = _generator_grads(cfg, lay, g, batch, d1, a1, key, _hook(cfg))

    def act(p):
        return ds.activate(lay, gen.apply({"params": p}, batch.z), k_g, cfg.tau)

    rows, vjp = jax.vjp(act, g)
    sanitised = _hooked_grad(cfg, lay, rows, batch, d1, a1, k_noise, _hook(cfg))
    cond = jax.grad(lambda p: ds.cond_loss(lay, gen.apply({"params": p}, batch.z), batch.col, batch.cat))(g)
    # rebuilt from the sanitised cotangent alone, with no critic, classifier or real row in scope
    (want,) = vjp(sanitised)
    want = jax.tree_util.tree_map(jnp.add, want, cond)
    for x, y in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-6)
    # a different private side gives a different sanitised cotangent (the oracle is not vacuous)
    d2, a2, batch2 = _random_private_side(cfg, lay, train_data, lp, 1, 3.0)
    other = _hooked_grad(cfg, lay, rows, batch._replace(real=batch2.real), d2, a2, k_noise, _hook(cfg))
    assert not np.allclose(np.asarray(other), np.asarray(sanitised))


@pytest.mark.slow  # structural; the privacy tests of the step stay in the default run
def test_step_trains_only_the_chosen_critic_and_classifier(hook_setup):
    cfg, lay, train_data, lp, _ = hook_setup
    state = ds.init_state(cfg, lay, 3, jax.random.key(3))
    key = jax.random.key(4)
    hook = _shards.sanitizer_hook(ds.privacy_phases(cfg.replace(num_discriminators=3), lay,
                                                    int(train_data.rows.shape[0]))[-1])
    new, _ = jax.jit(ds.train_step(cfg, lay, hook))(state, train_data, key, lp)
    chosen = int(jax.random.randint(jax.random.split(key, 4)[0], (), 0, 3))
    for old_t, new_t in ((state.critics.params, new.critics.params), (state.aux.params, new.aux.params)):
        pairs = list(zip(jax.tree_util.tree_leaves(old_t), jax.tree_util.tree_leaves(new_t)))
        for k in range(3):
            same = all(np.array_equal(np.asarray(x)[k], np.asarray(y)[k]) for x, y in pairs)
            assert same == (k != chosen)
    assert int(new.steps) == 1


# ----------------------------------------------------------------------------- accounting

SPEC_ORDERS = [1 + x / 10 for x in range(1, 100)] + list(range(12, 64)) + [128, 256, 512, 1024, 4096]


def _adult_like_schema(n_cat=9, n_cont=4):
    cols = [{"name": f"k{i}", "kind": "categorical", "categories": ["a", "b", "c"]} for i in range(n_cat)]
    cols += [{"name": f"v{i}", "kind": "continuous", "lower": 0, "upper": 1} for i in range(n_cont)]
    return data.Schema.from_dict({"columns": cols})


def test_composed_epsilon_equals_dp_accounting_on_the_listed_events():
    schema = data.adult_schema()
    cfg = ds.DPSACTGANConfig(mechanism="hook", noise_multiplier=17.0, hist_noise_multiplier=80.0, em_noise_multiplier=120.0)
    lay = ds.build_layout(schema, cfg)
    n = 39_073
    proven = ds.privacy_phases(cfg, lay, n)
    # the assumed accounting is a composition of dp_accounting events, checked event by event
    phases = [dataclasses.replace(p, accounting="assumed") if p.name == "generator" else p for p in proven]
    n_cat = sum(not c for c in lay.continuous)
    n_cont = lay.n_continuous
    events = [dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(80.0), n_cat),
              dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(120.0), 3 * 10 * n_cont),
              dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(
                  1 / 100, dpa.GaussianDpEvent(17.0 / math.sqrt(64))), 2000)]
    assert [p.steps for p in phases] == [n_cat, 30 * n_cont, 2000]
    pld = plda.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dpa.ComposedDpEvent(events))
    assert privacy.epsilon(phases, 1e-5, "pld", pld_discretization=1e-4) == pytest.approx(
        pld.get_epsilon(1e-5), rel=1e-9)
    rdp = rdpa.RdpAccountant(orders=privacy.RDP_ORDERS)
    rdp.compose(dpa.ComposedDpEvent(events))
    assert privacy.epsilon(phases, 1e-5, "rdp") == pytest.approx(rdp.get_epsilon(1e-5), rel=1e-9)
    # the proven headline: the histograms and DP-EM are Gaussians whose mu^2 adds to every count's
    other = n_cat / 80.0 ** 2 + 30 * n_cont / 120.0 ** 2
    gen = proven[-1].event()
    assert privacy.epsilon(proven, 1e-5) == pytest.approx(
        privacy._sharded.mixture_epsilon(1e-5, gen, other), rel=1e-9)
    assert privacy.epsilon(proven, 1e-5) > privacy.epsilon(phases, 1e-5)


def test_single_discriminator_is_the_unsubsampled_composition():
    cfg = ds.DPSACTGANConfig(mechanism="hook", num_discriminators=1, batch_size=500, epochs=150.0,
                             noise_multiplier=9784.5,
                             cond="uniform", modes="public")
    lay = ds.build_layout(data.adult_schema(), cfg)
    (gen,) = ds.privacy_phases(cfg, lay, 39_073)
    assert gen.steps == 11_700 and gen.num_shards == 1
    acc = rdpa.RdpAccountant(orders=SPEC_ORDERS)
    acc.compose(dpa.SelfComposedDpEvent(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(9784.5), 500), 11_700))
    direct = acc.get_epsilon(1e-5)
    assert direct == pytest.approx(1.0, abs=2e-3)  # docs/dp-sactgan.md: z = 9784.5 at epsilon 1
    mine = privacy._rdp.MixtureRdpAccountant(orders=SPEC_ORDERS)  # the proven event, K = 1
    mine.compose(gen.event())
    assert mine.get_epsilon(1e-5) == pytest.approx(direct, rel=1e-9)


def test_sharded_default_schedule_gives_the_published_epsilon_under_the_assumed_accounting():
    """SC(PS(0.01, SC(G(15.85), 64)), 2000) -> epsilon 1.000 (RDP)."""
    cfg = ds.DPSACTGANConfig(mechanism="hook", noise_multiplier=15.85, cond="uniform", modes="public")
    lay = ds.build_layout(data.adult_schema(), cfg)
    (gen,) = ds.privacy_phases(cfg, lay, 39_073)
    assert gen.num_shards == 100 and gen.rows_per_step == 64 and gen.steps == 2000
    acc = rdpa.RdpAccountant(orders=SPEC_ORDERS)
    acc.compose(dataclasses.replace(gen, accounting="assumed").event())
    assert acc.get_epsilon(1e-5) == pytest.approx(1.000, abs=2e-3)


def test_calibration_holds_preprocessing_fixed_and_matches_the_published_noise():
    """9 histograms and 4 DP-EM fits at z = 100 held fixed, then K=100, B=64, T=2000 -> z = 17.54."""
    schema = _adult_like_schema()
    cfg = ds.DPSACTGANConfig(mechanism="hook", preprocessing_share=None)
    lay = ds.build_layout(schema, cfg)
    assumed = [dataclasses.replace(p, accounting="assumed") if p.name == "generator" else p
               for p in ds.privacy_phases(cfg, lay, 39_073)]
    phases = ds.calibrate(cfg, lay, assumed, 1.0, 1e-5, accountant="rdp")
    by = {p.name: p for p in phases}
    assert by["histograms"].noise_multiplier == 100.0 and by["dp-em"].noise_multiplier == 100.0
    assert by["histograms"].steps == 9 and by["dp-em"].steps == 120
    assert by["generator"].noise_multiplier == pytest.approx(17.54, rel=5e-3)
    assert privacy.epsilon(phases, 1e-5, "rdp") <= 1.0


def test_paper_mode_calibration_warns_of_absurd_noise():
    cfg = ds.DPSACTGANConfig(mechanism="hook", num_discriminators=1, batch_size=500, epochs=150.0,
                             cond="uniform", modes="public")
    lay = ds.build_layout(data.adult_schema(), cfg)
    with pytest.warns(UserWarning, match="essentially noise"):
        phases = ds.calibrate(cfg, lay, ds.privacy_phases(cfg, lay, 39_073), 1.0, 1e-5, accountant="rdp")
    assert phases[0].noise_multiplier == pytest.approx(9784.5, rel=2e-3)  # sigma_paper 19,569
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the sharded hook does not warn
        plan = synthesizers.create("dp-sactgan", mechanism="hook").plan(data.adult_schema(), 39_073, epsilon=1.0)
    assert _train_phase(plan.phases).num_shards == 100 and plan.epsilon() <= 1.0


@pytest.mark.parametrize("mechanism", ["hook", "critic"])
def test_preprocessing_share_spends_its_share(mechanism):
    plan = synthesizers.create("dp-sactgan", mechanism=mechanism).plan(data.adult_schema(), 39_073, epsilon=1.0)
    pre = [p for p in plan.phases if p.name in ("histograms", "dp-em")]
    assert privacy.epsilon(pre, 1e-5, "pld") == pytest.approx(0.1, rel=1e-3)
    assert plan.epsilon() == pytest.approx(1.0, rel=1e-3)


# ----------------------------------------------------------------------------- modes


def test_public_modes_come_from_the_schema_alone():
    schema = data.Schema.from_dict({"columns": [{"name": "v", "kind": "continuous", "lower": 10, "upper": 20}]})
    cfg = CFG.replace(modes="public", n_modes=4)
    modes = ds.public_modes(schema, cfg)  # takes no rows at all
    np.testing.assert_allclose(np.asarray(modes.means[0]), [-0.75, -0.25, 0.25, 0.75], atol=1e-6)
    np.testing.assert_allclose(np.asarray(modes.stds[0]), [0.25] * 4, atol=1e-6)
    # round trip through the public modes (argmax): values come back
    x = jnp.asarray(np.linspace(0, 1, 11)[:, None], jnp.float32)
    lay = ds.build_layout(schema, cfg)
    rows, codes = ds.encode_rows(lay, x, modes)
    probs = jnp.zeros((11, 1, lay.max_width)).at[:, 0, 0].set(rows[:, 0])
    probs = probs.at[:, 0, 1:].set(jnp.where(rows[:, 1:] > 0.5, 0.0, -1e9))
    back = ds.decode_rows(lay, probs, modes, jax.random.key(0))
    np.testing.assert_allclose(np.asarray(back[:, 0]), np.asarray(x[:, 0]), atol=1e-5)


def test_dp_em_modes_are_the_accounted_mechanism():
    """fit_modes is dp_em_ssp over the stacked columns with the configured noise (3 releases per
    iteration, as the 'dp-em' phase counts), not a silent fit."""
    r = np.random.default_rng(0)
    u = jnp.asarray(np.stack([np.concatenate([r.normal(-0.5, 0.05, 500), r.normal(0.5, 0.05, 500)]),
                              r.uniform(-1, 1, 1000)], 1), jnp.float32)
    cfg = CFG.replace(n_modes=2, em_iterations=5, em_noise_multiplier=3.0)
    key = jax.random.key(4)
    got = ds.fit_modes(u, key, cfg, cfg.em_noise_multiplier)
    k_init, k_fit = jax.random.split(key)
    inits = [_dp_em.init_mixture(kk, 2, 1) for kk in jax.random.split(k_init, 2)]
    stacked = _dp_em.Mixture(*(jnp.stack(f) for f in zip(*inits)))
    want = _dp_em.dp_em_ssp(np.asarray(u).T[:, :, None], k_fit, stacked, iterations=5, noise_multiplier=3.0)
    np.testing.assert_array_equal(np.asarray(got.means), np.asarray(want.means[..., 0]))
    np.testing.assert_array_equal(np.asarray(got.weights), np.asarray(want.weights))
    np.testing.assert_array_equal(np.asarray(got.stds), np.sqrt(np.asarray(want.covariances[..., 0, 0])))
    other = ds.fit_modes(u, jax.random.key(5), cfg, cfg.em_noise_multiplier)
    assert not np.allclose(np.asarray(other.means), np.asarray(got.means))  # noise is there
    plain = ds.fit_modes(u, key, cfg, 0.0)  # plain EM finds the two clusters
    np.testing.assert_allclose(np.sort(np.asarray(plain.means[0])), [-0.5, 0.5], atol=0.03)
    lay = ds.build_layout(_adult_like_schema(1, 2), cfg)
    (_, em, _) = ds.privacy_phases(cfg, lay, 1000)
    assert em.name == "dp-em" and em.steps == 3 * 5 * 2 and em.noise_multiplier == 3.0


# ----------------------------------------------------------------------------- training by sampling


def test_training_by_sampling_draws_rows_of_the_category_inside_the_shard():
    r = np.random.default_rng(1)
    n, k = 600, 4
    frame_codes = r.choice(3, n, p=[0.6, 0.3, 0.1])
    schema = data.Schema.from_dict({"columns": [
        {"name": "a", "kind": "categorical", "categories": ["x", "y", "z"]},
        {"name": "i", "kind": "continuous", "lower": 0, "upper": n}]})
    enc = np.zeros((n, 4), np.float32)
    enc[np.arange(n), frame_codes] = 1
    enc[:, 3] = np.arange(n) / n  # the row's identity, recoverable from its alpha/mode
    cfg = CFG.replace(modes="public", n_modes=n // 10)
    lay = ds.build_layout(schema, cfg)
    rows, codes = ds.encode_rows(lay, jnp.asarray(enc), ds.public_modes(schema, cfg))
    td = ds.prepare(lay, rows, codes, jax.random.key(2), k)
    sizes = np.asarray(td.shards.sizes)
    starts = np.asarray(td.shards.starts)
    sorted_codes = np.argmax(np.asarray(td.rows[:, :3]), axis=1)
    draw = jax.jit(lambda key, kk, cat: ds.real_indices(td, lay, kk, jnp.zeros(4000, jnp.int32),
                                                        jnp.full(4000, cat, jnp.int32), key))
    for shard in range(k):
        for cat in range(3):
            idx = np.asarray(draw(jax.random.key(10 * shard + cat), shard, cat))
            assert idx.min() >= starts[shard] and idx.max() < starts[shard] + sizes[shard]
            assert np.all(sorted_codes[idx] == cat)
            members = np.flatnonzero((sorted_codes == cat) & (np.arange(n) >= starts[shard])
                                     & (np.arange(n) < starts[shard] + sizes[shard]))
            counts = np.array([np.sum(idx == m) for m in members])
            assert counts.sum() == 4000 and stats.chisquare(counts).pvalue > 1e-3


def test_a_category_absent_from_the_shard_falls_back_to_rows_of_the_shard():
    schema = data.Schema.from_dict({"columns": [{"name": "a", "kind": "categorical", "categories": ["x", "y"]}]})
    lay = ds.build_layout(schema, CFG)
    x = jnp.asarray(np.eye(2, dtype=np.float32)[np.zeros(50, int)])  # no "y" anywhere
    rows, codes = ds.encode_rows(lay, x, ds.Modes(*(jnp.zeros((0, 3)),) * 3))
    td = ds.prepare(lay, rows, codes, jax.random.key(0), 2)
    idx = np.asarray(ds.real_indices(td, lay, 1, jnp.zeros(500, jnp.int32), jnp.ones(500, jnp.int32),
                                     jax.random.key(1)))
    s, z = int(td.shards.starts[1]), int(td.shards.sizes[1])
    assert idx.min() >= s and idx.max() < s + z and len(np.unique(idx)) == z


# ----------------------------------------------------------------------------- models


@pytest.mark.slow  # structural; the privacy tests of the step stay in the default run
def test_padded_slots_are_inert(hook_setup):
    cfg, lay, train_data, lp, g = hook_setup
    assert len(set(lay.widths)) > 1  # the columns do have different widths
    d = ds.init_critic(cfg, lay, jax.random.key(0))
    critic = ds.networks(cfg, lay).critic
    inp = jax.random.normal(jax.random.key(1), (5, lay.width + lay.cond_width))
    index = np.asarray(lay.critic_index())
    pad = index == lay.width + lay.cond_width
    assert pad.any()
    w = d["embed_kernel"]
    d2 = dict(d, embed_kernel=jnp.where(jnp.asarray(pad)[..., None], 1e3, w))
    np.testing.assert_allclose(np.asarray(critic.apply({"params": d}, inp)[0]),
                               np.asarray(critic.apply({"params": d2}, inp)[0]), rtol=1e-6)
    gen = ds.networks(cfg, lay).generator
    z = jax.random.normal(jax.random.key(2), (5, cfg.noise_dim + lay.cond_width))
    logits = gen.apply({"params": g}, z)
    valid = np.arange(lay.max_width)[None, :] < np.asarray(lay.widths)[:, None]
    noisy = jnp.where(jnp.asarray(valid), logits, 1e3)
    np.testing.assert_array_equal(np.asarray(ds.activate(lay, logits, None, cfg.tau)),
                                  np.asarray(ds.activate(lay, noisy, None, cfg.tau)))
    out = ds.activate(lay, logits, jax.random.key(3), cfg.tau)
    assert out.shape == (5, lay.width)
    for c in range(lay.n_cols):  # every one-hot block sums to 1, alpha in (-1, 1)
        s = lay.starts[c] + lay.block_lo[c]
        np.testing.assert_allclose(np.asarray(out[:, s:s + lay.block_size[c]].sum(1)), 1.0, rtol=1e-5)
        if lay.continuous[c]:
            assert np.all(np.abs(np.asarray(out[:, lay.starts[c]])) < 1)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("field, value", [
    ("modes", "vgm"), ("mode_assignment", "max"), ("cond", "raw"), ("noise_multiplier", 0.0),
    ("clip_norm", -1.0), ("num_discriminators", 0), ("batch_size", 0), ("d_model", 10),
    ("preprocessing_share", 1.0),
])
def test_bad_configuration_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        synthesizers.create("dp-sactgan", **{field: value})


@pytest.mark.parametrize("overrides, n, match", [
    (dict(mechanism="hook", num_discriminators=10), 300, "too few rows per shard: num_discriminators=10 gives N/K=30.0"),
    (dict(mechanism="hook"), 40, "too few rows: N=40 records is fewer than batch_size=64"),
    (dict(), 40, "DPSGDPhase 'critic': expected batch_size <= num_records=40"),
])
def test_too_few_rows_are_refused_before_training(overrides, n, match):
    import re

    with pytest.raises(ValueError, match=re.escape(match)):
        synthesizers.create("dp-sactgan", **overrides).plan(data.adult_schema(), n, epsilon=1.0)


def test_small_tables_shrink_the_number_of_shards():
    plan = synthesizers.create("dp-sactgan", mechanism="hook").plan(data.adult_schema(), 1000, epsilon=1.0)
    assert _train_phase(plan.phases).num_shards == 1000 // 64


def test_a_continuous_column_without_public_bounds_is_refused():
    col = types.SimpleNamespace(name="income", lower=None, upper=5.0)
    with pytest.raises(ValueError, match="column 'income' is continuous and needs public bounds"):
        ds._encoding._check_bounds(col)
