"""DP-auto-GAN's privacy: the report against dp_accounting, calibration, the papers' presets.

Oracles: ``dp_accounting`` called directly for the phases and step counts actually run, and the
paper's published epsilons (Tantipongpipat et al. 2021: Adult 0.36 / 0.51 / 1.01 and MIMIC-III
0.81 / 1.33 / 2.70 under RDP with the classic conversion, which the paper rounds up).
"""

from __future__ import annotations

import math
import re

import pytest

from dpgen_jax import data, privacy, synthesizers
from dpgen_jax.synthesizers import DPAutoGAN, DPAutoGANConfig
from dpgen_jax.synthesizers import dp_auto_gan as dag
from tests import _oracles, _tables

DELTA = 1e-5
ADULT_N, MIMIC_N = 32561, 27912
ZERO = dict(ae_steps=0, critic_steps=0)
TINY = dict(ae_steps=3, critic_steps=2, critic_steps_per_generator_step=1, chunk_size=4,
            ae_batch_size=16, critic_batch_size=16, generator_batch_size=16, ae_clip_norm=0.05,
            matching_share=0.0)  # the paper's two phases (the stage: tests/test_matching_stage.py)


@pytest.fixture(scope="module")
def tiny_model():
    return synthesizers.create("dp-auto-gan", **TINY).fit(
        _tables.mixed_frame(300, 0), _tables.MIXED_SCHEMA, epsilon=2.0, seed=0)


def test_report_matches_dp_accounting_for_the_steps_run(tiny_model):
    rep, cfg, n = tiny_model.privacy_report(), tiny_model.fitted_config, 300
    noise = {p.name: p.noise_multiplier for p in tiny_model.fitted_phases()}  # the calibrated noise
    assert rep["delta"] == DELTA and rep["accountant"] == "pld" and not rep["non_private"]
    assert rep["neighbouring_relation"] == "add_or_remove_one"
    expected = [("autoencoder", 16 / n, noise["autoencoder"], 3, 0.05),
                ("critic", 16 / n, noise["critic"], 2, cfg.critic_clip_norm)]
    for entry, (name, q, sigma, steps, clip) in zip(rep["phases"], expected, strict=True):
        assert entry["name"] == name and entry["mechanism"] == "poisson_subsampled_gaussian"
        assert (entry["steps"], entry["batch_size"], entry["clip_norm"]) == (steps, 16, clip)
        assert entry["sample_rate"] == pytest.approx(q, rel=1e-12)
        assert entry["noise_multiplier"] == sigma
    pld, rdp = _oracles.reference_epsilons([e[1:4] for e in expected], DELTA,
                                           rep["pld_value_discretization_interval"])
    by = rep["epsilon_by_accountant"]
    assert rep["epsilon"] == by["pld"] == pytest.approx(pld, rel=1e-9)
    assert by["rdp_improved"] == pytest.approx(rdp, rel=1e-9)
    phases = dag.privacy_phases(cfg.replace(ae_noise_multiplier=noise["autoencoder"],
                                            critic_noise_multiplier=noise["critic"]),
                                n, steps={"autoencoder": 3, "critic": 2})
    assert by["rdp_classic"] == pytest.approx(
        privacy.epsilon(phases, DELTA, accountant="rdp", conversion="classic"), rel=1e-9)
    assert rep["paper_accounting"] == {"label": dag.PAPER_ACCOUNTING, "epsilon": by["rdp_classic"]}
    text = " ".join(rep["assumptions"])
    assert "seed" in text and "C1=0.05" in text and "treated as public" in text


def test_calibration_is_tight_and_keeps_the_noise_ratio(tiny_model):
    rep, cfg = tiny_model.privacy_report(), tiny_model.fitted_config
    sigma = {p.name: p.noise_multiplier for p in tiny_model.fitted_phases()}  # the calibrated noise
    assert rep["target_epsilon"] == 2.0 and rep["preset"] is None
    assert 2.0 - 4e-3 <= rep["epsilon"] <= 2.0
    assert sigma["autoencoder"] / sigma["critic"] == pytest.approx(1.5 / 3.5, rel=1e-9)
    less = cfg.replace(ae_noise_multiplier=0.99 * sigma["autoencoder"],
                       critic_noise_multiplier=0.99 * sigma["critic"])
    assert privacy.epsilon(dag.privacy_phases(less, 300), DELTA) > 2.0


@pytest.mark.parametrize("preset, expected", [
    ("paper-1.01", 1.006176), ("paper-0.51", 0.508439), ("paper-0.36", 0.350319)])
def test_adult_presets_reproduce_the_papers_accounting(preset, expected):
    plan = DPAutoGAN().plan(data.adult_schema(), ADULT_N, preset=preset)
    cfg = plan.config
    assert (cfg.ae_steps, cfg.critic_steps, cfg.ae_batch_size, cfg.critic_batch_size) == (
        10_000, 15_000, 64, 128)
    eps = plan.epsilon(accountant="rdp", conversion="classic")
    assert eps == pytest.approx(expected, abs=1e-3)
    assert math.ceil(eps * 100) / 100 == float(preset.split("-")[1])  # the paper rounds up


@pytest.mark.parametrize("preset, expected", [
    ("paper-0.81", 0.807631), ("paper-1.33", 1.321593), ("paper-2.70", 2.697568)])
def test_binary_presets_reproduce_the_papers_accounting(preset, expected):
    plan = DPAutoGAN().plan(data.binary_schema(7), MIMIC_N, preset=preset)
    assert plan.config.family == "binary" and plan.config.ae_steps == 15_000
    eps = plan.epsilon(accountant="rdp", conversion="classic")
    assert eps == pytest.approx(expected, abs=1e-3)
    assert math.ceil(eps * 100) / 100 == float(preset.split("-")[1])


def test_fit_with_a_preset_uses_its_noise_and_the_paper_joint_clip_norm():
    model = synthesizers.create("dp-auto-gan", **ZERO).fit(
        _tables.adult_shaped_frame(200), data.adult_schema(), preset="paper-0.51", seed=0)
    rep = model.privacy_report()
    assert rep["preset"] == "paper-0.51" and rep["target_epsilon"] is None
    assert [(p["noise_multiplier"], p["steps"]) for p in rep["phases"]] == [(2.5, 0), (7.5, 0)]
    assert rep["epsilon"] == 0.0 and rep["non_private"] is False
    # "paper-joint": the paper's decoder-only Adult clip norm 0.012 times sqrt(2), no data used.
    assert rep["phases"][0]["clip_norm"] == pytest.approx(0.012 * math.sqrt(2), rel=1e-12)
    (sentence,) = [a for a in rep["assumptions"] if "clip norm C1=" in a]
    assert f"C1={0.012 * math.sqrt(2):.6g}" in sentence
    assert model.fitted_release.clip_norms["autoencoder"] == pytest.approx(0.012 * math.sqrt(2))
    assert model.fitted_config == model.fitted_plan.config  # the configuration is not rewritten


def test_unreachable_target_states_the_reachable_epsilon():
    model = synthesizers.create("dp-auto-gan", **TINY)
    with pytest.raises(ValueError, match="unreachable") as info:
        model.fit(_tables.mixed_frame(300, 0), _tables.MIXED_SCHEMA, epsilon=1e-4, seed=0)
    msg = str(info.value)
    assert "target_epsilon=0.0001" in msg
    reached = float(re.search(r"epsilon is ([0-9.eE+-]+)", msg).group(1))
    top = DPAutoGANConfig.adult(**{k: v for k, v in TINY.items() if k != "chunk_size"}).replace(ae_noise_multiplier=100 * 1.5 / 3.5,
                                                critic_noise_multiplier=100.0)
    assert reached == pytest.approx(privacy.epsilon(dag.privacy_phases(top, 300), DELTA), rel=1e-4)


def test_public_num_records_sets_the_rates_and_the_normaliser():
    """With num_records=N the rate is B/N and the step divides by B (the engine's normaliser)."""
    plan = synthesizers.create("dp-auto-gan", **TINY).plan(_tables.MIXED_SCHEMA, 4000, epsilon=2.0)
    assert [p.sample_rate for p in plan.phases] == [16 / 4000, 16 / 4000]
    assert [p.batch_size for p in plan.phases] == [16, 16]


@pytest.mark.slow
def test_public_clip_norm_does_not_depend_on_the_private_rows():
    """Zero-step fits on two disjoint frames of different size: the same C1 for the same seed."""
    frame = data.mimic_like(n_rows=600, n_features=12, seed=0)
    schema = data.binary_schema(12)
    cfg = DPAutoGANConfig.binary(ae_steps=0, critic_steps=0, ae_clip_norm="public-median",
                                 clip_calibration_steps=5)
    norms = []
    for part in (frame.iloc[:250], frame.iloc[250:].reset_index(drop=True)):
        rep = DPAutoGAN(cfg).fit(part, schema, epsilon=2.0, seed=8).privacy_report()
        (sentence,) = [a for a in rep["assumptions"] if "clip norm C1=" in a]
        assert "without the private rows" in sentence
        norms.append(float(re.search(r"C1=([0-9.eE+-]+)", sentence).group(1)))
    assert norms[0] == norms[1] and norms[0] > 0


def test_the_default_schedule_is_the_papers_epochs_on_any_table_size():
    # The paper's batches give its step counts on Adult.
    paper_batches = DPAutoGAN(ae_batch_size=64, matching_share=0.0).plan(data.adult_schema(), ADULT_N, epsilon=1.0)
    assert dag.schedule(paper_batches.config, ADULT_N) == {"autoencoder": 10_000, "critic": 15_000}
    # The default AE batch grows with N: N // 32 between 64 and 1,024 (1,017 on Adult).
    assert [dag.ae_batch_size_for(DPAutoGANConfig(), n) for n in (100, 2_048, 2_080, ADULT_N, 10**6)] == [
        64, 64, 65, 1_017, 1_024]
    assert dag.ae_batch_size_for(DPAutoGANConfig(ae_batch_size=7), 10**6) == 7
    adult = DPAutoGAN(matching_share=0.0).plan(data.adult_schema(), ADULT_N, epsilon=1.0)
    (ae, critic) = adult.phases
    assert (ae.steps, critic.steps) == (round(10_000 * 64 / 1_017), 15_000) == (629, 15_000)
    assert ae.sample_rate == pytest.approx(1_017 / ADULT_N, rel=1e-12)
    # 800 rows: the paper's ~19.7 + ~59 epochs, not 800 + 2,400 of them; epsilon 1 is reachable.
    small = DPAutoGAN(matching_share=0.0).plan(data.adult_schema(), 800, epsilon=1.0)
    assert [p.steps for p in small.phases] == [round(10_000 * 64 / ADULT_N * 800 / 64),
                                               round(15_000 * 128 / ADULT_N * 800 / 128)] == [246, 369]
    assert small.epsilon() <= 1.0
    # A table smaller than a batch: an error naming the field, not a sampling rate above 1.
    with pytest.raises(ValueError, match=r"ae_batch_size=256 is larger than the 200 records"):
        DPAutoGAN(ae_batch_size=256).plan(data.adult_schema(), 200, epsilon=1.0)
    with pytest.raises(ValueError, match=r"critic_batch_size=128 is larger than the 100 records"):
        DPAutoGAN(ae_batch_size=50).plan(data.adult_schema(), 100, epsilon=1.0)
    assert DPAutoGAN(ae_batch_size=50, critic_batch_size=50).plan(
        data.adult_schema(), 200, epsilon=1.0).epsilon() <= 1.0
    with pytest.raises(ValueError, match="unreachable"):  # the paper's step counts on 800 rows
        DPAutoGAN(ae_steps=10_000, critic_steps=15_000).plan(data.adult_schema(), 800, epsilon=1.0)
    # Explicit counts and presets are used as given.
    assert [p.steps for p in DPAutoGAN(ae_steps=7, matching_share=0.0).plan(data.adult_schema(), 800, epsilon=1.0).phases] == [7, 369]
    preset = DPAutoGAN().plan(data.adult_schema(), 800, preset="paper-1.01")
    assert [p.steps for p in preset.phases] == [10_000, 15_000]
