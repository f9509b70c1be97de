"""The shared synthesizer skeleton: registry, release files, progress, planning."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from dpgen_jax import privacy, synthesizers
from dpgen_jax.synthesizers import _hooks, _progress
from tests import _tables

ZERO = dict(ae_steps=0, critic_steps=0, ae_batch_size=16, critic_batch_size=16, ae_clip_norm=0.05)


def test_registry_lists_and_creates_methods():
    methods = synthesizers.available()
    assert "dp-auto-gan" in methods and all(isinstance(v, str) and v for v in methods.values())
    assert isinstance(synthesizers.create("dp-auto-gan"), synthesizers.DPAutoGAN)
    with pytest.raises(ValueError, match=r"Unknown method 'gan-9000'; expected one of \["):
        synthesizers.create("gan-9000")
    with pytest.raises(TypeError, match="expected config to be a DPAutoGANConfig"):
        synthesizers.create("dp-auto-gan", config={"ae_steps": 3})


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = synthesizers.create("dp-auto-gan", **ZERO).fit(
        _tables.mixed_frame(100, 0), _tables.MIXED_SCHEMA, epsilon=1.0, seed=0)
    path = tmp_path_factory.mktemp("release") / "model.npz"
    model.save(path)
    return path


def _npz_arrays(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _write_npz(path, arrays) -> None:
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _with_meta(src, dst, **changes):
    arrays = _npz_arrays(src)
    meta = json.loads(str(arrays["__meta__"]))
    meta.update(changes)
    arrays["__meta__"] = np.asarray(json.dumps(meta))
    _write_npz(dst, arrays)
    return dst


def test_release_file_metadata(saved):
    meta = json.loads(str(_npz_arrays(saved)["__meta__"]))
    assert meta["method"] == "dp-auto-gan" and meta["format_version"] == 3
    assert meta["groups"] == ["decoder", "generator"]
    assert {"config", "schema", "privacy_report", "versions"} <= set(meta)
    assert "seed" not in meta and "key" not in meta


def test_load_refuses_bad_files(saved, tmp_path):
    load = synthesizers.load
    raw = saved.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable dpgen_jax model file"):
        load(truncated)
    text = tmp_path / "model.txt"
    text.write_text("generator = [1, 2, 3]\n")
    with pytest.raises(ValueError, match="not a readable dpgen_jax model file"):
        load(text)
    plain = tmp_path / "plain.npz"
    _write_npz(plain, {"w": np.zeros(3)})
    with pytest.raises(ValueError, match="no '__meta__' record"):
        load(plain)
    bad_json = tmp_path / "bad_json.npz"
    arrays = _npz_arrays(saved)
    arrays["__meta__"] = np.asarray("{not json")
    _write_npz(bad_json, arrays)
    with pytest.raises(ValueError, match="corrupt '__meta__'"):
        load(bad_json)
    with pytest.raises(ValueError, match=r"release format version 1 .*reads versions 2 to 3"):
        load(_with_meta(saved, tmp_path / "v1.npz", format_version=1))
    with pytest.raises(ValueError, match="Unknown method 'gs-wgan-9'"):
        load(_with_meta(saved, tmp_path / "other.npz", method="gs-wgan-9"))
    with pytest.raises(ValueError, match="holds a 'gs-wgan-9' model, not 'dp-auto-gan'"):
        synthesizers.DPAutoGAN.load(tmp_path / "other.npz")
    with pytest.raises(ValueError, match="not a dpgen_jax model file"):
        load(_with_meta(saved, tmp_path / "foreign.npz", format="something.else"))
    with pytest.raises(ValueError, match="invalid dp-auto-gan record"):
        load(_with_meta(saved, tmp_path / "badcfg.npz", config={"ae_steps": -1}))
    missing_leaf = tmp_path / "missing_leaf.npz"
    arrays = _npz_arrays(saved)
    del arrays[sorted(k for k in arrays if k.startswith("decoder/"))[0]]
    _write_npz(missing_leaf, arrays)
    with pytest.raises(ValueError, match="saved decoder does not match"):
        load(missing_leaf)
    wrong_shape = tmp_path / "wrong_shape.npz"
    arrays = _npz_arrays(saved)
    k = sorted(k for k in arrays if k.startswith("generator/"))[0]
    arrays[k] = np.zeros(arrays[k].shape + (1,), arrays[k].dtype)
    _write_npz(wrong_shape, arrays)
    with pytest.raises(ValueError, match="saved generator does not match"):
        load(wrong_shape)
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "absent.npz")


def test_progress_shows_the_headline_epsilon_spent():
    """The bar's epsilon is PLD of the steps run so far, ending at the report's headline (at or
    below the target), not RDP (which ends above it)."""
    plan = synthesizers.create("dp-auto-gan", ae_steps=500, critic_steps=900).plan(
        _tables.MIXED_SCHEMA, 3000, epsilon=1.0)
    bar = _progress.Progress(False, plan)
    assert bar.epsilon_spent() == 0.0
    bar.executed = {"autoencoder": 500}
    ae_only = privacy.epsilon([plan.phases[0]], plan.delta)
    assert bar.epsilon_spent() == pytest.approx(ae_only, rel=1e-9)
    bar.executed = {"autoencoder": 500, "critic": 900, "one-way": 1}  # and the matching stage's release
    done = bar.epsilon_spent()
    assert done == pytest.approx(plan.epsilon(), rel=1e-12) and done <= 1.0
    assert privacy.epsilon(plan.phases, plan.delta, accountant="rdp") > done


def test_plan_needs_no_data_and_refuses_bad_arguments():
    model = synthesizers.create("dp-auto-gan")
    plan = model.plan(_tables.MIXED_SCHEMA, 32561, epsilon=1.0)
    assert plan.private and plan.records.n == 32561 and plan.epsilon() <= 1.0
    # the default AE batch is N // 32; the matching stage's one-way release last
    assert [(p.name, p.steps) for p in plan.phases] == [("autoencoder", 629), ("critic", 15_000), ("one-way", 1)]
    nonprivate = model.plan(_tables.MIXED_SCHEMA, 100, epsilon=float("inf"))
    assert not nonprivate.private and {p.KIND for p in nonprivate.phases} == {"non-private"}
    with pytest.raises(ValueError, match="num_records=0"):
        model.plan(_tables.MIXED_SCHEMA, 0, epsilon=1.0)
    with pytest.raises(TypeError, match="schema"):
        model.plan({"columns": []}, 10, epsilon=1.0)


def test_the_plan_is_a_value_that_carries_its_paper_accounting():
    # The method's published accounting is handed to the plan by the synthesizer that builds it
    # (no lookup in the registry from the plan); it is not part of the plan's value.
    model = synthesizers.create("dp-auto-gan")
    plan = model.plan(_tables.MIXED_SCHEMA, 32561, epsilon=1.0)
    report = {"epsilon_by_accountant": {"rdp_classic": 1.25}}
    paper = plan.paper_accounting(list(plan.phases), report)
    assert paper == model._paper_accounting(plan.config, list(plan.phases), plan.delta, report)
    assert paper["epsilon"] == 1.25
    bare = dataclasses.replace(plan, paper_accountant=None)
    assert bare == plan and repr(bare) == repr(plan)
    assert bare.paper_accounting(list(plan.phases), report) is None
    nonprivate = model.plan(_tables.MIXED_SCHEMA, 100, epsilon=float("inf"))
    assert nonprivate.paper_accounting(list(nonprivate.phases), report) is None


def test_one_seam_runs_the_one_way_stage_and_nothing_for_other_methods():
    vae = synthesizers.create("dp-vae")
    plan = vae.plan(_tables.MIXED_SCHEMA, 1000, epsilon=1.0)
    stage = vae._stage(plan.config)
    assert stage.releases_one_way and [p.name for p in plan.phases][-1] == "one-way"
    assert stage.preset({"steps": 3}) == {"matching_share": 0.0, "steps": 3}
    off = vae._stage(plan.config.replace(matching_share=0.0))
    assert not off.releases_one_way
    assert off.plan(plan.model_schema, ["x"], private=True, epsilon=1.0, delta=1e-5,
                    accountant="pld") == (["x"], ())
    indep = synthesizers.create("independent")
    none = indep._stage(indep.plan(_tables.MIXED_SCHEMA, 1000, epsilon=1.0).config)
    assert type(none) is _hooks.Stage and not none.releases_one_way
    assert none.train(None, None, "key", synthesizers.Hooks(), lambda key: key) == "key"
    assert none.sample(None, {}, "key", lambda key: key) == "key"


def test_training_key_is_the_split_fit_uses():
    """The key a method's training gets: the fit's key whole without the one-way stage, else its
    first half (the stage's release gets the second), as ``fit`` splits it."""
    key = jax.random.key(7)
    first, second = jax.random.split(key)
    vae = synthesizers.create("dp-vae")
    on = vae.plan(_tables.MIXED_SCHEMA, 1000, epsilon=1.0).config
    off = on.replace(matching_share=0.0)
    same = lambda a, b: bool((jax.random.key_data(a) == jax.random.key_data(b)).all())  # noqa: E731
    assert same(synthesizers.training_key(on, key), first)
    assert same(synthesizers.training_key(off, key), key)
    k_train, k_stage = vae._stage(on).keys(key)
    assert same(k_train, first) and same(k_stage, second)
    indep = synthesizers.create("independent")
    cfg = indep.plan(_tables.MIXED_SCHEMA, 1000, epsilon=1.0).config
    assert same(synthesizers.training_key(cfg, key), key)


def test_config_round_trips_through_its_dict():
    cfg = synthesizers.DPAutoGANConfig.binary(ae_hidden=(5, 4), ae_clip_norm=0.3)
    assert synthesizers.DPAutoGANConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    with pytest.raises(ValueError, match="no field"):
        synthesizers.DPAutoGANConfig.from_dict({"nope": 1})
