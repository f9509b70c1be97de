"""DP-SYN: the synthesizer contract, parallel composition per label group, the vmapped group
autoencoders against a per-group loop, bad input.

Oracles: ``privacy.epsilon`` / dp_accounting on the phases rebuilt from the fitted configuration;
the engine's static single-group step run group by group with the same keys.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpgen_jax import data, dpsgd, privacy, synthesizers
from dpgen_jax.synthesizers import dp_syn as ds
from tests import _tables
from tests._oracles import float32_not_above
from tests._contract import DELTA, SynthesizerContract

LABELLED = data.Schema(tuple(dataclasses.replace(c, label=(c.name == "b"))
                             for c in _tables.MIXED_SCHEMA.columns))
TINY = {**ds.DPSYN.SMOKE, "epochs": 2.0}  # the smoke schedule, with several chunks per group
TINY_CONFIG = {k: v for k, v in TINY.items() if k != "chunk_size"}  # chunk_size: a speed setting


def _frame():
    return _tables.mixed_frame(300, 0)


class TestDPSYNContract(SynthesizerContract):
    """Sequential composition and public group counts: the plan then equals the fit exactly."""

    METHOD = "dp-syn"
    COUNTS = tuple(float(c) for c in _frame()["b"].value_counts().reindex(["p", "q"]))
    OVERRIDES = {**TINY, "group_composition": "sequential", "group_counts": COUNTS}

    @pytest.fixture(scope="class")
    @classmethod
    def table(cls):
        return _frame(), LABELLED

    def zero_steps(self):
        return dict(epochs=0.0, em_iterations=0)

    def functional_phases(self, config, schema, num_records):
        return ds.privacy_phases(config, num_records)

    def functional_calibration(self, config, schema, phases, fixed=()):
        return ds.calibrate(config, phases, self.EPSILON, DELTA, fixed=fixed)  # DP-EM's share first, then each group

    def functional_released(self, model, frame, schema, phases):
        cfg = model.fitted_config
        x = ds.encoder_for(cfg, schema).encode(frame)
        codes, feats = ds.split_label(schema, x, ds.encoder_for(cfg, schema))
        _k_cnt, k_init, k_ae, k_em = jax.random.split(self.train_key(cfg), 4)
        blocks = tuple(ds.encoder_for(cfg, ds.feature_schema(schema)).blocks)
        states = ds.train_autoencoders(cfg, blocks, codes, feats, k_init, k_ae,
                                       ds.autoencoder_phases(phases))
        sigma = {p.name: p.noise_multiplier for p in privacy.flat_phases(phases)}
        mixtures = ds.fit_mixtures(cfg, blocks, codes, feats, states.params, k_em,
                                   sigma[f"dp-em/{cfg.groups[0]}"])
        return {"decoder": states.params["decoder"], "mixture": dict(mixtures._asdict())}


@pytest.fixture(scope="module")
def parallel_fit():
    """The default composition (parallel groups, released counts) and encoding (public bins, 8 of
    them here; test_continuous_columns_on_public_bins)."""
    return synthesizers.create("dp-syn", **TINY, bins=8).fit(_frame(), LABELLED, epsilon=2.0, seed=0)


@pytest.fixture(scope="module")
def uncalibrated_fit():
    """As ``parallel_fit``, without the matching stage: the label's share is DP-SYN's own."""
    return synthesizers.create("dp-syn", **TINY, bins=8, matching_share=0.0).fit(
        _frame(), LABELLED, epsilon=2.0, seed=0)


def test_groups_compose_in_parallel_and_each_meets_the_target(parallel_fit):
    rep = parallel_fit.privacy_report()
    assert [p["name"] for p in rep["phases"]] == ["counts", "groups", "one-way"]
    groups = rep["phases"][1]["groups"]
    assert [g["group"] for g in groups] == ["p", "q"]
    for g in groups:  # every group calibrated to the target
        assert 2.0 - 2e-2 <= g["epsilon"] <= 2.0
    assert rep["epsilon"] == pytest.approx(max(g["epsilon"] for g in groups), rel=1e-9)
    steps = {p["name"]: p["steps"] for g in groups for p in g["phases"]}
    phases = privacy.with_steps(parallel_fit.fitted_phases(), steps)
    assert rep["epsilon"] == pytest.approx(privacy.epsilon(phases, 1e-5), rel=1e-9)
    # the counts are released (noisy), but the rates use only public values: B / (N / k)
    true = _frame()["b"].value_counts().reindex(["p", "q"]).to_numpy()
    counts = parallel_fit.fitted_release.statistics["released_counts"]
    assert counts is not None and not np.allclose(counts, true)
    rates = [p["sample_rate"] for g in groups for p in g["phases"] if "sample_rate" in p]
    assert rates == [float32_not_above(16, 150.0)] * 2
    assert all(np.float32(r) == r and r <= 16 / 150 for r in rates)  # float32, rounded down
    assert [steps["autoencoder/p"], steps["autoencoder/q"]] == [round(2.0 * 150 / 16)] * 2
    # the DP-EM noise spends em_share of the target alone
    em = [p for g in groups for p in g["phases"] if p["name"].startswith("dp-em/")]
    alone = privacy.epsilon([privacy.GaussianPhase("e", em[0]["noise_multiplier"], em[0]["steps"])], 1e-5)
    assert alone == pytest.approx(0.5 * 2.0, rel=1e-3)
    assert any("in parallel" in a for a in rep["assumptions"])
    assert any("fixed before any row was read" in a for a in rep["assumptions"])


def test_samples_follow_the_released_proportions(uncalibrated_fit):
    rows = uncalibrated_fit.sample(1000, seed=1)
    c = uncalibrated_fit.fitted_release.statistics["released_counts"]
    share = (rows["b"] == "p").mean()
    assert share == pytest.approx(c[0] / sum(c), abs=2e-3)
    data.TableEncoder(LABELLED).encode(rows)  # valid under the schema


def test_vmapped_group_autoencoders_equal_a_loop_over_groups():
    # declared group counts: the groups get different rates and steps
    cfg = ds.for_schema(ds.DPSYNConfig(**{**TINY_CONFIG, "epochs": 3.0}), LABELLED).replace(
        ae_noise_multipliers=(0.8, 1.3), group_counts=(140.5, 170.25))
    enc = ds.encoder_for(cfg, LABELLED)
    codes, feats = ds.split_label(LABELLED, enc.encode(_frame()), enc)
    blocks = tuple(ds.encoder_for(cfg, ds.feature_schema(LABELLED)).blocks)
    k_init, k_ae = jax.random.key(1), jax.random.key(2)
    phases = ds.autoencoder_phases(ds.privacy_phases(cfg, 300))
    got = ds.train_autoencoders(cfg, blocks, codes, feats, k_init, k_ae, phases)
    rates, planned = ds.group_schedule(cfg, 300)
    assert rates[0] != rates[1] and planned[0] != planned[1]
    # reference: the engine's static step, one group at a time, with the same per-step keys
    data_, sizes = ds.stack_groups(codes, feats, 2)
    big = int(sizes.max())
    cap = dpsgd.default_capacity(big, max(rates))
    ae = ds.networks(cfg, feats.shape[1])
    from dpgen_jax.synthesizers import _losses, _dpsgd_phases
    recon = _losses.reconstruction_loss(blocks, cfg.continuous_loss)
    opt = _dpsgd_phases.torch_adam(cfg.learning_rate)
    params = ds.init(cfg, feats.shape[1], 2, k_init)
    for j in range(2):
        q = rates[j]
        phase = privacy.DPSGDPhase("group", q, cfg.ae_noise_multipliers[j], planned[j], clip_norm=cfg.clip_norm,
                                   batch_size=cfg.batch_size)
        step = jax.jit(dpsgd.make_dp_step(
            lambda p, b: recon(ae.apply({"params": p}, b), b), opt, phase, scan_rows=int(sizes[j]),
            capacity=cap))
        state = dpsgd.init_state(jax.tree_util.tree_map(lambda a, j=j: a[j], params), opt)
        rows = jnp.asarray(data_[j])
        for t in range(planned[j]):
            state, _ = step(state, rows, jax.random.fold_in(jax.random.fold_in(k_ae, t), j))
        want = jax.tree_util.tree_leaves(state.params)
        have = jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda a, j=j: a[j], got.params))
        for a, b in zip(have, want):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-6)
        assert int(got.steps[j]) == planned[j]


@pytest.mark.parametrize("overrides, match", [
    (dict(em_share=0.0), "em_share"), (dict(em_components=0), "em_components"),
    (dict(group_composition="mixed"), "group_composition"), (dict(latent_dim=0), "latent_dim"),
])
def test_bad_configuration_is_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        synthesizers.create("dp-syn", **overrides)


def test_a_schema_without_a_label_is_refused():
    with pytest.raises(ValueError, match="label"):
        synthesizers.create("dp-syn").fit(_frame(), _tables.MIXED_SCHEMA, epsilon=1.0, seed=0)


def test_a_batch_above_the_assumed_group_size_is_refused():
    with pytest.raises(ValueError, match="batch_size=200"):  # 300 / 2 rows assumed per group
        synthesizers.create("dp-syn", **{**TINY, "batch_size": 200}).fit(
            _frame(), LABELLED, epsilon=1.0, seed=0)


@pytest.mark.slow
def test_adult_experiment_end_to_end(adult_dir, tmp_path):
    from experiments import reproduce

    out = tmp_path / "dpsyn"
    reproduce.main(["dp-syn", "adult", "--epsilon", "1.4", "--seeds", "0", "--set", "epochs=1", "--no-progress",
                    "--data-dir", str(adult_dir), "--out", str(out)])
    import json
    rep = json.loads((out / "report.json").read_text())
    assert rep["method"] == "dp-syn" and 1.4 - 1e-2 <= rep["epsilon"] <= 1.4
    assert rep["jsd"]["total"] >= 0 and 0 < rep["rf_salary_accuracy"] < 1


def test_original_budget_split_for_comparison():
    model = synthesizers.create("dp-syn", **{**TINY, "budget_split": "original", "matching_share": 0.0}).fit(
        _frame(), LABELLED, epsilon=2.0, seed=0)
    rep = model.privacy_report()
    flat = {p["name"]: p for g in rep["phases"][1]["groups"] for p in g["phases"]}
    for name, p in flat.items():  # each phase alone spends (epsilon / 2, delta / 2)
        phase = (privacy.GaussianPhase(name, p["noise_multiplier"], p["steps"]) if name.startswith("dp-em")
                 else privacy.DPSGDPhase(name, p["sample_rate"], p["noise_multiplier"], p["steps"]))
        assert privacy.epsilon([phase], 0.5e-5) == pytest.approx(1.0, rel=5e-3), name
    assert rep["paper_accounting"]["epsilon"] == pytest.approx(2.0, rel=1e-2)
    assert "basic composition" in rep["paper_accounting"]["label"]
    assert rep["epsilon"] < 2.0  # the honest composition of the same noise is tighter


def test_too_many_components_for_a_group_are_refused():
    with pytest.raises(ValueError, match="em_components=200"):
        synthesizers.create("dp-syn", **{**TINY, "em_components": 200}).fit(
            _frame(), LABELLED, epsilon=1.0, seed=0)


def test_continuous_columns_on_public_bins(parallel_fit):
    model = parallel_fit  # TINY with bins=8
    assert model.fitted_config.continuous_encoding == "bins" and model.fitted_config.bins == 8
    rows = model.sample(200, seed=1)
    data.TableEncoder(LABELLED).encode(rows)  # valid under the schema
    codes = data.Discretizer(ds.feature_schema(LABELLED), bins=8).codes(rows[["a", "c", "d"]])
    assert codes.shape == (200, 3)
    width = data.BinnedEncoder(ds.feature_schema(LABELLED), 8).width
    assert {leaf.shape[-1] for leaf in jax.tree_util.tree_leaves(model.released["decoder"])} == {width}


@pytest.mark.slow  # the non-default encoding; the default (public bins) runs by default
def test_continuous_columns_scaled_by_their_bounds():
    model = synthesizers.create("dp-syn", **{**TINY, "continuous_encoding": "scaled"}).fit(
        _frame(), LABELLED, epsilon=2.0, seed=0)
    width = data.TableEncoder(ds.feature_schema(LABELLED)).width
    assert {leaf.shape[-1] for leaf in jax.tree_util.tree_leaves(model.released["decoder"])} == {width}
    data.TableEncoder(LABELLED).encode(model.sample(100, seed=1))


def test_the_autoencoders_progress_bar_shows_their_spent_epsilon(monkeypatch):
    import tqdm.auto

    shown = []

    class Bar:  # records what the fit's bars display
        def __init__(self, total=None, desc=None, unit=None):
            self.desc, self.total, self.n = desc, total, 0

        def set_postfix_str(self, text, refresh=True):
            shown.append((self.desc, text))

        def refresh(self):
            pass

        def close(self):
            pass

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    synthesizers.create("dp-syn", **TINY, bins=8, matching_share=0.0).fit(
        _frame(), LABELLED, epsilon=2.0, seed=0, progress=True)
    during = [float(t.split("=")[1]) for d, t in shown if d == "autoencoders" and not t.endswith("spent")]
    assert during and during[-1] > 0.0
