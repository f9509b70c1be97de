"""DP-auto-GAN: the synthesizer contract, a pinned output, configuration and presets.

Per-example references of the two phases are in ``test_dp_auto_gan_reference.py``; the privacy
report against ``dp_accounting`` and the papers' accounting in ``test_dp_auto_gan_privacy.py``.
"""

from __future__ import annotations

import pathlib

import jax
import numpy as np
import pytest

from dpgen_jax import _migrate, data, synthesizers
from dpgen_jax.synthesizers import DPAutoGAN, DPAutoGANConfig
from dpgen_jax.synthesizers import dp_auto_gan as dag
from tests import _tables
from tests._contract import SynthesizerContract

PIN = pathlib.Path(__file__).parent / "data" / "pin_dp_auto_gan.npy"
TINY = DPAutoGAN.SMOKE  # the method's smoke schedule


class TestDPAutoGANContract(SynthesizerContract):
    METHOD = "dp-auto-gan"
    OVERRIDES = {**TINY, "continuous_encoding": "bins", "bins": 10}  # the default encoding, 10 bins
    EPSILON = 4.0

    def zero_steps(self):
        return dict(ae_steps=0, critic_steps=0)

    # Not marked xla_default: test_pinned_encoded_sample is DP-auto-GAN's fit at XLA's defaults.
    def test_functional_api_agrees_with_the_class(self, fitted, table):
        super().test_functional_api_agrees_with_the_class(fitted, table)

    def functional_phases(self, config, schema, num_records):
        return dag.privacy_phases(config, num_records)

    def functional_released(self, model, frame, schema, phases):
        """fit(seed=0) redone with the public functions and the key splits of the class."""
        cfg = model.fitted_config
        x = jax.numpy.asarray(dag.encoder(cfg, schema).encode(frame))
        k_init, _k_clip, k_ae, k_gan = jax.random.split(self.train_key(cfg), 4)
        params = dag.init(cfg, x.shape[1], k_init)
        ae_phase, critic_phase = phases[:2]  # (the one-way release, if any, last)
        ae = dag.train_autoencoder(cfg, params.autoencoder, x, k_ae, ae_phase)
        gan = dag.train_gan(cfg, params, ae.params["decoder"], x, k_gan, critic_phase)
        return {"generator": gan.generator.params, "decoder": ae.params["decoder"]}

    def test_continuous_columns_on_public_bins(self, fitted, table, tmp_path):
        """The contract's fit encodes its continuous columns on 10 public bins (an Adult-shaped
        fit with the default encoding runs in test_cli.py's round trip)."""
        _, schema = table
        binned = data.BinnedEncoder(schema, 10)
        widths = {leaf.shape[-1] for leaf in jax.tree_util.tree_leaves(fitted.released["decoder"])}
        assert binned.width in widths and data.TableEncoder(schema).width not in widths
        assert dag.encoder(fitted.fitted_config, schema).width == binned.width
        rows = fitted.sample(500, seed=1)
        data.TableEncoder(schema).encode(rows)  # every value valid for the schema
        codes = data.Discretizer(schema, 10).codes(rows)
        assert codes.shape == (500, len(schema.columns))
        fitted.save(tmp_path / "m.npz")
        again = synthesizers.load(tmp_path / "m.npz")
        assert again.fitted_config.continuous_encoding == "bins"
        assert again.sample(50, seed=2).equals(fitted.sample(50, seed=2))


@pytest.mark.xla_default  # also at XLA's default optimisation (.ci/run)
def test_pinned_encoded_sample(tmp_path):
    """A short fixed-seed schedule gives exactly the encoded sample pinned before the toolkit
    refactor (any change to the keys, the engine or the networks shows up here; a deliberate
    change re-pins it and says so in the commit). The comparison allows a few float32 ulps: XLA's
    CPU code differs between processors (e.g. fused multiply-adds), and a clean CI machine gave
    values one ulp away from the pinned ones; any change of keys or arithmetic moves far more.
    Pinned in the paper's form (its encoding: width 6 on this schema)."""
    model = synthesizers.create("dp-auto-gan", **TINY, continuous_encoding="paper", matching_share=0.0).fit(
        _tables.mixed_frame(300, 0), _tables.MIXED_SCHEMA, epsilon=4.0, seed=0)
    cfg, r = model.fitted_config, model.released
    assert tuple(p.noise_multiplier for p in model.fitted_phases()) == pytest.approx(
        (0.7205543911270007, 1.6812935792963348), rel=1e-9)
    got = dag.sample_encoded(cfg, 6, r["generator"], r["decoder"], 8, jax.random.key(1))
    np.testing.assert_allclose(got, np.load(PIN), rtol=1e-6, atol=1e-7)


def test_released_file_holds_only_generator_and_decoder(tmp_path):
    model = synthesizers.create("dp-auto-gan", **{**TINY, "ae_steps": 0, "critic_steps": 0}).fit(
        _tables.mixed_frame(50, 1), _tables.MIXED_SCHEMA, epsilon=4.0, seed=0)
    model.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        groups = {k.split("/")[0] for k in npz.files if k != "__meta__"}
    assert groups == {"generator", "decoder"}
    # the matching stage's noisy one-way counts are released too (a statistic in the file's record)
    assert model.privacy_report()["released"] == ["decoder", "generator", "one_way", "schema", "config"]
    assert synthesizers.load(tmp_path / "m.npz").privacy_report()["released"] == model.privacy_report()["released"]


@pytest.mark.slow  # two fits
def test_second_fit_starts_from_the_user_configuration():
    """A preset's schedule from a first fit is not mistaken for a user setting by a second fit
    (a time budget a second above the minimum cuts both fits short)."""
    import warnings

    from tests._budgets import above_minimum

    frame = data.mimic_like(n_rows=300, n_features=6, seed=0)
    schema = data.binary_schema(6)
    user = DPAutoGANConfig.binary(ae_steps=0)
    model = DPAutoGAN(user, chunk_size=4)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*keeps the configured.*")
        warnings.filterwarnings("ignore", message=".*cut the schedule.*")
        for preset in ("paper-0.81", "paper-1.33"):
            seconds = above_minimum(model, frame, schema, preset=preset, seed=0)
            model.fit(frame, schema, preset=preset, seed=0, max_seconds=seconds)
            first = first if preset == "paper-1.33" else model.fitted_config
    assert first.critic_steps == 6000 and model.fitted_config.critic_steps == 7000
    assert model.fitted_config.critic_noise_multiplier == 2.3
    assert model.config == user


def test_preset_keeps_an_explicit_setting_with_a_warning():
    with pytest.warns(UserWarning, match="keeps the configured critic_steps=50"):
        cfg = DPAutoGAN(DPAutoGANConfig.binary(critic_steps=50)).resolve_config(
            data.binary_schema(7), "paper-0.81")
    assert cfg.critic_steps == 50 and cfg.critic_noise_multiplier == 3.5
    with pytest.warns(UserWarning, match="keeps the configured critic_steps=40"):
        cfg = synthesizers.create("dp-auto-gan", critic_steps=40).resolve_config(
            data.binary_schema(7), "paper-0.81")
    assert cfg.critic_steps == 40


def test_default_configuration_follows_the_schema():
    model = synthesizers.create("dp-auto-gan")
    assert model.resolve_config(data.binary_schema(5)) == DPAutoGANConfig.binary()
    assert model.resolve_config(data.adult_schema()) == DPAutoGANConfig()
    assert synthesizers.create("dp-auto-gan", latent_dim=8).resolve_config(
        data.adult_schema()).latent_dim == 8


def test_paper_form_is_adult_and_every_adult_preset():
    """The library's default departs from the paper in encoding, decoding, clip rule, critic
    steps per generator step and autoencoder batch;
    ``adult()`` and every Adult preset keep the paper's form so that the reproduction stays
    reproducible, and binary data keeps the paper's threshold decoding."""
    paper = {"continuous_encoding": "paper", "decode": "argmax", "ae_clip_norm": "paper-joint",
             "critic_steps_per_generator_step": 15, "ae_batch_size": 64}
    default = DPAutoGANConfig()
    assert {k: getattr(default, k) for k in paper} == {
        "continuous_encoding": "bins", "decode": "sample", "ae_clip_norm": "public-median",
        "critic_steps_per_generator_step": 2, "ae_batch_size": None}
    assert {k: getattr(DPAutoGANConfig.adult(), k) for k in paper} == paper
    assert DPAutoGANConfig.binary().decode == "argmax"
    model = synthesizers.create("dp-auto-gan")
    for name in ("paper-0.36", "paper-0.51", "paper-1.01"):
        cfg = model.resolve_config(data.adult_schema(), name)
        assert {k: getattr(cfg, k) for k in paper} == paper, name
    with pytest.raises(ValueError, match="decode"):
        DPAutoGANConfig(decode="mode").validate()


@pytest.mark.slow  # three fits; the release pins cover the default decoding
def test_decode_field_sets_sampling_default_and_old_files_keep_argmax(tmp_path):
    """``sample()`` decodes as the fitted configuration's ``decode`` says (an explicit ``mode``
    wins), and a file saved before the field existed loads as argmax-decoded."""
    import json

    frame = _tables.mixed_frame(200, 3)
    model = synthesizers.create("dp-auto-gan", **{**TINY, "ae_steps": 2, "critic_steps": 2}).fit(
        frame, _tables.MIXED_SCHEMA, epsilon=4.0, seed=0)
    assert model.default_decode_mode() == "sample"
    by_default, explicit = model.sample(400, seed=5), model.sample(400, seed=5, mode="sample")
    assert by_default.equals(explicit)
    assert not by_default.equals(model.sample(400, seed=5, mode="argmax"))
    legacy = model.fitted_config.to_dict()  # a release file (format version 2) without the field
    del legacy["decode"]
    meta = _migrate.upgrade({"format_version": 2, "method": "dp-auto-gan", "config": legacy,
                             "privacy_report": {"delta": 1e-5}})
    assert DPAutoGANConfig.from_dict(meta["config"]).decode == "argmax"
    assert DPAutoGANConfig.from_dict(json.loads(json.dumps(model.fitted_config.to_dict()))) == \
        model.fitted_config


def test_preset_of_the_other_family_is_refused():
    with pytest.raises(ValueError, match="preset='paper-1.01' is for 'adult' data"):
        DPAutoGAN().plan(data.binary_schema(4), 100, preset="paper-1.01")
    with pytest.raises(ValueError, match="preset='paper-0.81' is for 'binary' data"):
        DPAutoGAN().plan(data.adult_schema(), 100, preset="paper-0.81")


def test_networks_are_the_models_networks():
    """One definition: the configuration's networks are ``models.dp_auto_gan_networks``."""
    from dpgen_jax import models

    assert dag.networks(DPAutoGANConfig.adult(), 106).autoencoder == models.adult_autoencoder()
    assert dag.networks(DPAutoGANConfig.adult(), 106).critic == models.adult_critic()
    assert dag.networks(DPAutoGANConfig.binary(), 1071).autoencoder == models.mimic_autoencoder()
    assert dag.networks(DPAutoGANConfig.binary(), 1071).generator == models.mimic_generator()


@pytest.mark.parametrize("overrides, match", [
    (dict(critic_clipping="both"), "critic_clipping"),
    (dict(ae_clip_norm=-0.1), "ae_clip_norm"),
    (dict(ae_clip_norm="private-median"), "ae_clip_norm"),
    (dict(critic_noise_multiplier=0.0), "critic_noise_multiplier"),
    (dict(ae_batch_size=0), "ae_batch_size"),
    (dict(weight_clamp=0.0), "weight_clamp"),
    (dict(generator_hidden=(32, 32)), "generator_hidden"),
])
def test_bad_configuration_is_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        DPAutoGAN(DPAutoGANConfig.adult(**overrides))
    with pytest.raises(ValueError, match=match):
        synthesizers.create("dp-auto-gan", **overrides)
