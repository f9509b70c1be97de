"""DP-SACTGAN's critic mechanism (``mechanism="critic"``): the per-example term reads one record,
critic and classifier are clipped jointly, real rows condition on their own values, the
accounting is the composition of the listed events, the configuration's refusals, the contract,
and (slow) that a non-private fit learns the label rate.

Oracles: a Python loop of single-example gradients clipped by hand, dp_accounting's own
accountants on hand-built events, statistics of many draws (chi-square).
"""

from __future__ import annotations

import math

import dp_accounting as dpa
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant as plda
from scipy import stats

from dpgen_jax import data, dpsgd, privacy, synthesizers
from dpgen_jax.synthesizers import dp_sactgan as ds
from dpgen_jax.synthesizers._dpsgd_phases import averaged_params
from dpgen_jax.synthesizers.dp_sactgan import _critic
from tests.test_dp_sactgan import LABELLED, TINY, SACTGANContract, _labelled_rows, _train_phase, functional_preprocessing

CRITIC = dict(TINY, mechanism="critic")
CFG = ds.DPSACTGANConfig(**CRITIC)
# the contract fits release the average of the generator's iterates (generator_average)
AVERAGED = dict(CRITIC, generator_average=0.9)


def _batch(n=12, seed=0):
    _, x = _labelled_rows(60, seed)
    lay = ds.build_layout(LABELLED, CFG)
    modes = ds.public_modes(LABELLED, CFG)
    rows, codes = ds.encode_rows(lay, x, modes, "argmax", jax.random.key(1))
    # compiled whole: run eagerly, the networks' initialisation and forward pass dispatch hundreds
    # of small programs, each compiled on first use (the values are the same)
    critic_params, g_params = jax.jit(_critic.init_params, static_argnums=(0, 1))(CFG, lay, jax.random.key(2))
    idx = jnp.arange(n)
    batch = jax.jit(_critic.critic_batch_fn(CFG, lay))({"rows": rows, "codes": codes.astype(jnp.int32)}, idx,
                                                       jax.random.key(3), (g_params, None))
    return lay, critic_params, batch


def test_each_example_term_reads_its_own_row_only():
    lay, params, batch = _batch()
    loss = jax.jit(_critic.critic_terms(CFG, lay))  # one compile per batch shape, not eager ops
    together = np.asarray(loss(params, batch))
    rows = jax.tree_util.tree_map(np.asarray, batch)  # sliced in NumPy: no program per slice
    alone = [float(loss(params, jax.tree_util.tree_map(lambda a, i=i: a[i:i + 1], rows))[0])
             for i in range(together.shape[0])]
    np.testing.assert_allclose(together, alone, rtol=2e-5, atol=2e-6)
    # changing row 0's real values changes row 0's term only
    moved = dict(batch, real=batch["real"].at[0].set(batch["real"][5]))
    changed = np.asarray(loss(params, moved)) != together
    assert changed[0] and not changed[1:].any()


@pytest.mark.parametrize("how", ["vmap", "the mechanism's"])
def test_critic_and_classifier_are_clipped_jointly_as_a_loop_of_single_examples(how):
    lay, params, batch = _batch()
    loss = _critic.critic_terms(CFG, lay)
    clip = 0.05
    method = "vmap" if how == "vmap" else _critic.clip_method(CFG, lay)
    if how != "vmap":
        assert method == {"critic": "map", "aux": "ghost"}
    fn = dpsgd.clipped_grad_sum(loss, clip, method=method, fallback="error")
    got, aux = jax.jit(fn)(params, batch, None)
    total = jax.tree_util.tree_map(lambda a: np.zeros(a.shape, np.float64), params)
    single = jax.jit(jax.grad(lambda p, one: loss(p, one)[0]))  # one example's gradient, compiled once
    rows = jax.tree_util.tree_map(np.asarray, batch)  # the loop in NumPy: no program per slice or sum
    for i in range(batch["real"].shape[0]):
        one = jax.tree_util.tree_map(lambda a, i=i: a[i:i + 1], rows)
        g = jax.tree_util.tree_map(lambda v: np.asarray(v, np.float64), single(params, one))
        norm = math.sqrt(sum(float(np.sum(v * v)) for v in jax.tree_util.tree_leaves(g)))
        aux_norm = math.sqrt(sum(float(np.sum(v * v)) for v in jax.tree_util.tree_leaves(g["aux"])))
        assert aux_norm > 0 and norm > aux_norm  # both networks in the one clipped vector
        assert float(aux["norms"][i]) == pytest.approx(norm, rel=1e-4)
        total = jax.tree_util.tree_map(lambda t, v, s=min(1.0, clip / norm): t + s * v, total, g)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(total), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-7)


def test_real_rows_condition_on_their_own_value_in_a_uniform_column():
    lay = ds.build_layout(LABELLED, CFG)
    r = np.random.default_rng(0)
    n = 6000
    codes = jnp.asarray(np.stack([r.integers(0, s, n) for s in lay.block_size], 1), jnp.int32)
    cond, col, cat = _critic.real_conditions(lay, codes, jax.random.key(4))
    slot = np.asarray(jnp.argmax(cond, axis=1))
    col, cat = np.asarray(col), np.asarray(cat)
    np.testing.assert_array_equal(cat, np.asarray(codes)[np.arange(n), col])
    np.testing.assert_array_equal(slot, np.asarray(lay.cond_offsets)[col] + cat)
    assert np.asarray(cond).sum(axis=1).tolist() == [1.0] * n
    counts = np.bincount(col, minlength=lay.n_cols)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_epsilon_is_the_composition_of_the_listed_events():
    schema = data.adult_schema()
    cfg = ds.DPSACTGANConfig(mechanism="critic", noise_multiplier=1.3, hist_noise_multiplier=80.0,
                             em_noise_multiplier=120.0, critic_steps=2, generator_steps=700)
    lay = ds.build_layout(schema, cfg)
    n = 39_073
    phases = ds.privacy_phases(cfg, lay, n)
    n_cat = sum(not c for c in lay.continuous)
    assert [p.name for p in phases] == ["histograms", "dp-em", "critic"]
    assert _train_phase(phases).steps == 1400 and phases[-1].sample_rate == pytest.approx(64 / n, rel=1e-12)
    events = [dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(80.0), n_cat),
              dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(120.0), 3 * 10 * lay.n_continuous),
              dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(64 / n, dpa.GaussianDpEvent(1.3)), 1400)]
    pld = plda.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(dpa.ComposedDpEvent(events))
    assert privacy.epsilon(phases, 1e-5, "pld", pld_discretization=1e-4) == pytest.approx(
        pld.get_epsilon(1e-5), rel=1e-9)
    # calibration lands on the target with the preprocessing held at its share
    plan = synthesizers.create("dp-sactgan", mechanism="critic").plan(schema, n, epsilon=1.01)
    assert plan.epsilon() == pytest.approx(1.01, rel=1e-3)
    assert [p.name for p in plan.phases][-2:] == ["critic", "one-way"]


@pytest.mark.parametrize("kwargs, match", [
    ({"num_discriminators": 3}, "num_discriminators=3 must be None or 1"),
    ({"pretrain_iterations": 5}, "pretrain_iterations=5"),
    ({"mechanism": "both"}, "mechanism"),
    ({"generator_average": 1.0}, "expected generator_average in \\(0, 1\\), got generator_average=1.0"),
    ({"generator_average": 0.9, "mechanism": "hook"}, "mechanism='hook' releases its last iterate"),
])
def test_bad_critic_configurations_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        synthesizers.create("dp-sactgan", **{"mechanism": "critic", **kwargs})


class TestDPSACTGANCriticContract(SACTGANContract):
    OVERRIDES = AVERAGED

    def test_functional_api_agrees_with_the_class(self, fitted, table):  # not marked xla_default:
        super().test_functional_api_agrees_with_the_class(fitted, table)  # one class per method there

    def functional_released(self, model, frame, schema, phases):
        cfg = model.fitted_config
        lay, keys, rows, codes, modes, counts, log_probs = functional_preprocessing(cfg, schema, frame, self.train_key(cfg),
                                                                                    phases)
        state = _critic.train(cfg, lay, rows, codes, log_probs, keys[6], _train_phase(phases))
        last = state.generator.params
        average = averaged_params(state.generator.opt_state)
        # the release is the average of the iterates, not the last one
        assert any(not np.allclose(a, b) for a, b in zip(jax.tree_util.tree_leaves(average),
                                                         jax.tree_util.tree_leaves(last)))
        return {"generator": average, "modes": modes._asdict(), "cond": {"counts": counts}}

    def test_report_lists_the_critic_phase_and_no_paper_accounting(self, fitted, table):
        rep = fitted.privacy_report()
        assert [p["name"] for p in rep["phases"]] == ["histograms", "dp-em", "critic", "one-way"]
        critic = rep["phases"][-2]
        assert critic["steps"] == CRITIC["generator_steps"] * fitted.fitted_config.critic_steps
        assert rep["paper_accounting"] is None and not rep.get("sharded_accounting")
        assert set(fitted.released) == {"generator", "modes", "cond"}  # no critic or classifier
        text = " ".join(rep["assumptions"])
        assert "Poisson-sampled" in text and "clipped jointly" in text and "not used" in text
        assert "moving average (decay 0.9) of its iterates" in text


@pytest.mark.slow
def test_a_non_private_critic_fit_learns_the_label_rate():
    frame = data.adult_like(3000, seed=0)
    schema = data.adult_schema()
    model = synthesizers.create("dp-sactgan", mechanism="critic", generator_steps=600, d_model=32,
                                num_layers=1, aux_hidden=(64, 64)).fit(
        frame, schema, epsilon=math.inf, seed=0, progress=False)
    rows = model.sample(4000, seed=1)
    real = float((frame["salary"] == ">50K").mean())
    assert abs(float((rows["salary"] == ">50K").mean()) - real) < 0.1


def test_the_default_is_the_critic_and_the_paper_preset_the_hook():
    """docs/dp-sactgan.md: the critic mechanism learns where the hook does not (chosen on
    data.adult_like); the paper's preset keeps the paper's mechanism."""
    model, schema = synthesizers.create("dp-sactgan"), data.adult_schema()
    assert model.resolve_config(schema).mechanism == "critic"
    paper = model.resolve_config(schema, "paper")
    assert (paper.mechanism, paper.num_discriminators, paper.batch_size) == ("hook", 1, 500)
