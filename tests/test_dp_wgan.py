"""DP-WGAN: the synthesizer contract, the paper's categorical-only preprocessing, the generator's
output layout, the clip-norm rule, and the paper's presets against dp_accounting.

The GAN runner itself (paired and real-only critic terms, weight clamp, generator steps) is
checked step by step against per-example references in ``test_dp_auto_gan_reference.py``; here
the checks are what DP-WGAN adds on top of it.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data, synthesizers
from dpgen_jax.synthesizers import DPWGAN, DPWGANConfig
from dpgen_jax.synthesizers import dp_wgan as dw
from tests import _oracles, _tables
from tests._contract import SynthesizerContract
from tests._presets import check_paper_presets

TINY = DPWGAN.SMOKE  # the method's smoke schedule




class TestDPWGANContract(SynthesizerContract):
    METHOD = "dp-wgan"
    OVERRIDES = TINY
    EPSILON = 4.0

    def zero_steps(self):
        return dict(critic_steps=0)

    def functional_phases(self, config, schema, num_records):
        return dw.privacy_phases(config, num_records)

    def functional_released(self, model, frame, schema, phases):
        """fit(seed=0) redone with the public functions and the key splits of the class."""
        cfg = model.fitted_config
        enc = data.TableEncoder(schema)
        x = jnp.asarray(enc.encode(frame))
        k_init, _k_clip, k_gan = jax.random.split(self.train_key(cfg), 3)
        state = dw.train_gan(cfg, tuple(enc.blocks), dw.init(cfg, enc.width, k_init), x, k_gan, phases[0])
        return {"generator": state.generator.params}


# ----------------------------------------------------------------------------- preprocessing


@pytest.fixture(scope="module")
def paper_model():
    return synthesizers.create("dp-wgan", **TINY, preprocessing="paper").fit(
        _tables.mixed_frame(300, 0), _tables.MIXED_SCHEMA, epsilon=4.0, seed=0)


def test_paper_preprocessing_models_and_samples_only_the_discrete_columns(paper_model, tmp_path):
    discrete = [c.name for c in _tables.MIXED_SCHEMA.columns if c.kind != "continuous"]
    assert paper_model.schema.names == discrete == ["a", "b"]
    frame = paper_model.sample(40, seed=1)
    _oracles.check_valid_sample(frame, paper_model.schema, 40)
    notes = [a for a in paper_model.privacy_report()["assumptions"] if "Preprocessing 'paper'" in a]
    assert len(notes) == 1 and "['c', 'd'] were deleted" in notes[0]
    assert paper_model.released["generator"]["layer_2"]["Dense_0"]["kernel"].shape[-1] == 4  # 3 + 1
    paper_model.save(tmp_path / "m.npz")
    loaded = synthesizers.load(tmp_path / "m.npz")
    assert loaded.schema == paper_model.schema
    pd.testing.assert_frame_equal(loaded.sample(20, seed=2), paper_model.sample(20, seed=2))


def test_default_preprocessing_keeps_every_column():
    model = synthesizers.create("dp-wgan", **{**TINY, "critic_steps": 0}).fit(
        _tables.mixed_frame(100, 0), _tables.MIXED_SCHEMA, epsilon=4.0, seed=0)
    assert model.fitted_config.preprocessing == "mixed"
    assert list(model.sample(10, seed=0).columns) == _tables.MIXED_SCHEMA.names
    assert not any("Preprocessing" in a for a in model.privacy_report()["assumptions"])


def test_paper_preprocessing_still_checks_the_whole_frame():
    model = synthesizers.create("dp-wgan", **TINY, preprocessing="paper")
    with pytest.raises(ValueError, match="missing schema column.*'d'"):
        model.fit(_tables.mixed_frame(50, 0).drop(columns="d"), _tables.MIXED_SCHEMA, epsilon=1.0)


def test_paper_preprocessing_needs_a_discrete_column():
    schema = data.Schema.from_dict({"columns": [{"name": "v", "kind": "continuous", "lower": 0, "upper": 1}]})
    with pytest.raises(ValueError, match="preprocessing='paper' keeps only the discrete columns"):
        dw.working_schema("paper", schema)
    assert dw.working_schema("mixed", schema) is schema


def test_adult_paper_schema_is_the_nine_discrete_columns():
    schema = dw.working_schema("paper", data.adult_schema())
    assert schema.names == ["workclass", "education-num", "marital-status", "occupation",
                            "relationship", "race", "sex", "native-country", "salary"]
    assert data.TableEncoder(schema).width == 102


# ----------------------------------------------------------------------------- generator, clip norm


def test_generated_rows_are_probabilities_per_block():
    cfg = DPWGANConfig(hidden=(8,))
    enc = data.TableEncoder(_tables.MIXED_SCHEMA)
    params = dw.init(cfg, enc.width, jax.random.key(0))
    rows = np.asarray(dw.fake_rows(cfg, tuple(enc.blocks), params.generator, jax.random.key(1), 500))
    a = enc.block("a")
    np.testing.assert_allclose(rows[:, a.start:a.stop].sum(axis=1), 1.0, rtol=1e-6)
    assert np.all((rows >= 0) & (rows <= 1))
    assert rows[:, a.start:a.stop].std(axis=0).min() > 0  # the noise reaches the output
    assert dw.noise_dim(cfg, enc.width) == enc.width  # the reference's noise width


def test_public_clip_norm_reads_no_private_row():
    over = dict(critic_steps=0, batch_size=16, hidden=(8,), chunk_size=5)
    fits = [synthesizers.create("dp-wgan", **over).fit(frame, _tables.MIXED_SCHEMA, epsilon=2.0, seed=0)
            for frame in _unlike_frames()]
    clips = [m.fitted_release.clip_norms["critic"] for m in fits]
    assert clips[0] == clips[1] and clips[0] > 0
    rep = fits[0].privacy_report()
    assert rep["phases"][0]["clip_norm"] == clips[0]
    assert any("rows drawn uniformly from the public schema" in a for a in rep["assumptions"])


def _unlike_frames():
    """Two private tables with nothing in common but the schema."""
    a = _tables.mixed_frame(200, 1)
    b = a.assign(a="z", b="q", c=99, d=-1.0).iloc[:50]
    return a, b


# ----------------------------------------------------------------------------- presets, configuration


def test_paper_presets_are_the_longest_schedules_within_the_papers_epsilons():
    check_paper_presets(DPWGAN, "critic", {"paper-0.36": (27.5, 0.36), "paper-0.51": (19.0, 0.51),
                                           "paper-1.01": (9.0, 1.01)})


def test_presets_leave_the_preprocessing_to_the_user():
    model = DPWGAN(preprocessing="paper")
    assert model.resolve_config(data.adult_schema(), "paper-0.36").preprocessing == "paper"
    assert DPWGAN().resolve_config(data.adult_schema(), "paper-0.36").preprocessing == "mixed"


@pytest.mark.parametrize("bad, match", [
    (dict(preprocessing="categorical"), "preprocessing='categorical'"),
    (dict(hidden=()), "hidden=()"),
    (dict(critic_hidden=(4, 0)), "critic_hidden=(4, 0)"),
    (dict(clip_norm="median"), "clip_norm='median'"),
    (dict(clip_norm=0.0), "clip_norm=0.0"),
    (dict(noise_multiplier=float("inf")), "noise_multiplier=inf"),
    (dict(weight_clamp=0.0), "weight_clamp=0.0"),
    (dict(critic_clipping="both"), "critic_clipping='both'"),
    (dict(noise_dim=0), "noise_dim=0"),
    (dict(batch_size=0), "batch_size=0"),
])
def test_bad_configuration_is_refused(bad, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        synthesizers.create("dp-wgan", **bad)


def test_the_default_batch_fits_small_tables():
    from dpgen_jax.synthesizers import dp_wgan
    schema = data.adult_schema()
    adult = synthesizers.create("dp-wgan").plan(schema, 32_561, epsilon=1.0)
    assert adult.phases[0].sample_rate == pytest.approx(2048 / 32_561)  # the paper's batch
    small = synthesizers.create("dp-wgan").plan(schema, 1000, epsilon=3.0)
    assert small.phases[0].sample_rate == pytest.approx(0.1)  # 2,048 would exceed the table
    assert dp_wgan.batch_size_for(dp_wgan.DPWGANConfig(batch_size=64), 1000) == 64
    with pytest.raises(ValueError, match="batch_size"):  # an explicit batch is used as given
        synthesizers.create("dp-wgan", batch_size=2048).plan(schema, 1000, epsilon=3.0)
