"""Speed settings (``synthesizers.Flags``) live outside the configuration: they are sorted out of
``create``'s keywords and ``--set``, refused by name where they do not apply, change no result,
and release files written while they were configuration fields still load."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import jax
import numpy as np
import pandas as pd
import pytest

from dpgen_jax import synthesizers
from dpgen_jax._migrate import FLAGS_FROM_CONFIG
from dpgen_jax.synthesizers import Flags
from dpgen_jax.synthesizers._config import FLAG_NAMES
from tests import _tables

DATA = pathlib.Path(__file__).parent / "data"


@pytest.mark.parametrize("name", sorted(synthesizers.available()))
def test_no_configuration_holds_a_speed_setting(name):
    cls = synthesizers.get(name)
    fields = {f.name for f in dataclasses.fields(cls.CONFIG)}
    assert not fields & (FLAG_NAMES | set(FLAGS_FROM_CONFIG))
    assert cls.FLAGS.validate() is cls.FLAGS
    assert synthesizers.create(name).flags == cls.FLAGS  # defaults resolved


def test_keywords_are_sorted_into_configuration_and_flags():
    model = synthesizers.create("dp-vae", steps=3, chunk_size=7, clip_method="vmap")
    assert model.overrides == {"steps": 3}
    assert model.flags == Flags(clip_method="vmap", chunk_size=7)
    same = synthesizers.create("dp-vae", steps=3, flags=Flags(chunk_size=7, clip_method="vmap"))
    assert same.flags == model.flags
    assert synthesizers.config_overrides("gs-wgan", ["shard_group=4", "batch_size=8"]) == {
        "shard_group": 4, "batch_size": 8}


@pytest.mark.parametrize("call, words", [
    (lambda: synthesizers.create("dp-vae", method="vmap"), ["'method' -> 'clip_method'"]),
    (lambda: synthesizers.create("mst", chunk_size=3), ["mst", "chunk_size", "reads none"]),
    (lambda: synthesizers.create("dp-vae", shard_group=2), ["shard_group", "clip_method", "chunk_size"]),
    (lambda: synthesizers.create("dp-vae", chunk_size=0), ["chunk_size"]),
    (lambda: synthesizers.create("dp-wgan", clip_method="fast"), ["clip_method", "ghost"]),
    (lambda: synthesizers.config_overrides("dp-syn", ["method=vmap"]), ["--set 'method=vmap'", "clip_method"]),
    (lambda: synthesizers.config_overrides("dp-syn", ["shard_group=2"]), ["shard_group", "chunk_size"]),
    (lambda: synthesizers.DPVAEConfig().replace(chunk_size=3), ["'chunk_size' -> 'chunk_size'", "flags"]),
])
def test_misplaced_speed_settings_are_refused_by_name(call, words):
    with pytest.raises(ValueError) as info:
        call()
    for w in words:
        assert w in str(info.value)


def _fit(name, frame, **overrides):
    return synthesizers.create(name, **overrides).fit(frame, _tables.MIXED_SCHEMA, epsilon=3.0, seed=0)


def _leaves(model):
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(model.released)]


@pytest.mark.parametrize("name, base, variants", [
    ("dp-vae", dict(steps=9, batch_size=16, clip_norm=0.5),
     [dict(chunk_size=2, clip_method="ghost"), dict(chunk_size=5000, clip_method="vmap")]),
    pytest.param("gs-wgan", dict(num_shards=3, batch_size=8, noise_dim=4, generator_hidden=(8,), critic_hidden=(8,),
                                 pretrain_iterations=4, generator_steps=5),
                 [dict(chunk_size=2, pretrain_chunk=3, shard_group=1),
                  dict(chunk_size=500, pretrain_chunk=50, shard_group=32)],
                 marks=pytest.mark.slow),  # about a minute of compilation in CI; dp-vae runs by default
])
def test_flags_change_no_result(name, base, variants):
    frame = _tables.mixed_frame(200, seed=2)
    a, b = (_fit(name, frame, **base, **v) for v in variants)
    for x, y in zip(_leaves(a), _leaves(b), strict=True):
        np.testing.assert_allclose(x, y, rtol=2e-4, atol=2e-5)  # ghost and vmap: the same sum, rounded apart
    assert a.privacy_report() == b.privacy_report()
    assert a.fitted_config == b.fitted_config


def test_flags_are_not_released(tmp_path):
    model = _fit("dp-vae", _tables.mixed_frame(100, seed=1), steps=2, batch_size=16, clip_norm=0.5, chunk_size=1)
    model.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        meta = json.loads(str(npz["__meta__"]))
    assert not set(meta["config"]) & FLAG_NAMES
    assert "chunk_size" not in json.dumps(meta["privacy_report"])


@pytest.mark.xla_default  # a release pin: also at XLA's default optimisation (.ci/run)
@pytest.mark.parametrize("name", ["dp_vae", "gs_wgan"])
def test_release_files_with_speed_settings_in_their_configuration_still_load(name, tmp_path):
    # Written by the library (release format version 2, read through dpgen_jax._migrate) before the
    # speed settings left the configuration (their stored configurations hold method/chunk_size,
    # resp. chunk_size/shard_group/pretrain_chunk) and before the one-way stage existed.
    path = DATA / f"release_v2_{name}.npz"
    with np.load(path, allow_pickle=False) as npz:
        stored = json.loads(str(npz["__meta__"]))["config"]
    assert set(stored) & set(FLAGS_FROM_CONFIG)
    model = synthesizers.load(path)
    # a file from before the matching stage loads with it off (as it was fitted)
    assert dataclasses.asdict(model.fitted_config) == {"matching_share": 0.0, "matching_bins": 20,
                                                       **{k: (tuple(v) if isinstance(v, list) else v)
                                                          for k, v in stored.items()
                                                          if k not in FLAGS_FROM_CONFIG}}
    want = pd.DataFrame(json.loads((DATA / "release_v2_samples.json").read_text())[name])
    got = model.sample(5, seed=3)
    # float32 network outputs: XLA's CPU kernels may differ in the last bits between machines and
    # thread counts (seen: 1.2e-7 on a value of 7.8e-3, past assert_frame_equal's rtol of 1e-5)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_dtype=False, rtol=1e-4, atol=1e-6)
    # saved again, it is a file of the current format with the same model
    model.save(tmp_path / "again.npz")
    with np.load(tmp_path / "again.npz", allow_pickle=False) as npz:
        assert json.loads(str(npz["__meta__"]))["format_version"] == 3
    with pytest.warns(UserWarning, match="cannot be recomputed"):  # its plan still has no phases
        again = synthesizers.load(tmp_path / "again.npz")
    assert again.fitted_config == model.fitted_config
    pd.testing.assert_frame_equal(again.sample(5, seed=3), got)
