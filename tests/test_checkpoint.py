"""Resumable fits (``fit(checkpoint_dir=..., resume=True)``, docs/checkpoints.md).

Oracles: the uninterrupted fit with the same seed (released parameters, steps, epsilon), the
plan's epsilon of the full schedule, a run killed with SIGKILL in a subprocess, and the bytes of
the release file (no key in it).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from dpgen_jax import data, privacy, synthesizers
from dpgen_jax.synthesizers import _checkpoint
from tests import _tables


ROOT = pathlib.Path(__file__).resolve().parents[1]
GAN_TINY = dict(ae_steps=8, critic_steps=10, critic_steps_per_generator_step=5, chunk_size=4,
                ae_batch_size=16, critic_batch_size=16, generator_batch_size=16, ae_clip_norm=0.05)
SYN_TINY = dict(latent_dim=3, batch_size=16, epochs=2.0, chunk_size=10, em_components=2,
                em_iterations=3)
SYN_SCHEMA = data.Schema(tuple(dataclasses.replace(c, label=(c.name == "b"))
                               for c in _tables.MIXED_SCHEMA.columns))
EPS = 4.0


def _frame(seed=0):
    return _tables.mixed_frame(300, seed)


def _fit_with_pauses(method, overrides, schema, directory, **kwargs):
    """Fits with ``max_seconds=0`` (a pause after every chunk), resuming until done; returns the
    model and the pauses seen."""
    model, pauses, resume = synthesizers.create(method, **overrides), [], False
    while True:
        try:
            model.fit(_frame(), schema, epsilon=EPS, checkpoint_dir=directory, resume=resume,
                      max_seconds=0, checkpoint_every=1, **kwargs)
            return model, pauses
        except synthesizers.FitPaused as paused:
            pauses.append((paused.phase, paused.done, paused.total))
            with pytest.raises(RuntimeError, match="not fitted"):
                model.sample(5)  # a paused fit releases nothing
            resume = True
            assert len(pauses) < 20


def _assert_same_model(a, b):
    ra, rb = a.released, b.released
    assert jax.tree_util.tree_structure(ra) == jax.tree_util.tree_structure(rb)
    for x, y in zip(jax.tree_util.tree_leaves(ra), jax.tree_util.tree_leaves(rb)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6, atol=1e-7)
    pa, pb = a.privacy_report(), b.privacy_report()
    assert [p["steps"] for p in pa["phases"]] == [p["steps"] for p in pb["phases"]]
    assert pa["epsilon"] == pb["epsilon"]


@pytest.fixture(scope="module")
def gan_runs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ckpt") / "dp-auto-gan"
    reference = synthesizers.create("dp-auto-gan", **GAN_TINY).fit(
        _frame(), _tables.MIXED_SCHEMA, epsilon=EPS, seed=0)
    resumed, pauses = _fit_with_pauses("dp-auto-gan", GAN_TINY, _tables.MIXED_SCHEMA, directory,
                                       seed=0)
    return reference, resumed, pauses, directory


def test_paused_and_resumed_dp_auto_gan_equals_the_uninterrupted_fit(gan_runs):
    reference, resumed, pauses, directory = gan_runs
    # a pause in each phase: after the first autoencoder chunk, after the first GAN iteration
    assert pauses == [("autoencoder", 4, 8), ("critic", 1, 2)]
    _assert_same_model(reference, resumed)
    plan = reference.plan(_tables.MIXED_SCHEMA, 300, epsilon=EPS)
    assert [p["steps"] for p in resumed.privacy_report()["phases"]] == [p.steps for p in plan.phases]
    assert resumed.privacy_report()["epsilon"] <= EPS
    assert any("resumed from a private checkpoint" in a for a in resumed.privacy_report()["assumptions"])
    # a few checkpoints kept, the secret note beside them
    steps = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    assert 1 <= len(steps) <= _checkpoint.MAX_TO_KEEP
    assert "SECRET" in (directory / _checkpoint.README).read_text()
    with ocp.CheckpointManager(directory) as manager:
        manifest = manager.restore(steps[-1], args=ocp.args.Composite(
            manifest=ocp.args.JsonRestore()))["manifest"]
    assert manifest["secret"].startswith("SECRET") and manifest["current_phase"] == "critic"
    assert manifest["identity"]["method"] == "dp-auto-gan"
    assert manifest["identity"]["noise_multipliers"] == {
        p.name: p.noise_multiplier for p in plan.phases}
    assert all(p["complete"] for p in manifest["phases"].values())


def test_resume_of_another_training_is_refused(gan_runs):
    _, _, _, directory = gan_runs
    schema = _tables.MIXED_SCHEMA

    def resume(frame=None, overrides=GAN_TINY, **kwargs):
        args = {"epsilon": EPS, "seed": 0, **kwargs}
        synthesizers.create("dp-auto-gan", **overrides).fit(
            _frame() if frame is None else frame, schema, checkpoint_dir=directory, resume=True, **args)

    other = _frame()
    other.loc[7, "d"] = 0.123  # one value of one row
    with pytest.raises(ValueError, match="data: the encoded rows"):
        resume(frame=other)
    with pytest.raises(ValueError, match="data: the encoded rows"):
        resume(frame=_frame().iloc[::-1].reset_index(drop=True))  # same rows, other order
    with pytest.raises(ValueError, match=r"config: .*critic_steps=10 in the checkpoint, 20 now"):
        resume(overrides={**GAN_TINY, "critic_steps": 20})  # a larger step count
    with pytest.raises(ValueError, match=r"target_epsilon: 4.0 in the checkpoint, 8.0 now"):
        resume(epsilon=8.0)  # a larger target: smaller noise
    with pytest.raises(ValueError, match="seed: the seed given differs"):
        resume(seed=1)
    with pytest.raises(ValueError, match="seed: the checkpointed training was seeded"):
        resume(seed=None)
    with pytest.raises(ValueError, match="already holds checkpoints"):
        synthesizers.create("dp-auto-gan", **GAN_TINY).fit(
            _frame(), schema, epsilon=EPS, seed=0, checkpoint_dir=directory)


def test_bad_checkpoint_arguments_are_refused(tmp_path):
    schema = _tables.MIXED_SCHEMA
    model = synthesizers.create("dp-auto-gan", **GAN_TINY)
    with pytest.raises(ValueError, match="holds no checkpoint"):
        model.fit(_frame(), schema, epsilon=EPS, checkpoint_dir=tmp_path / "empty", resume=True)
    with pytest.raises(ValueError, match="resume=True needs checkpoint_dir"):
        model.fit(_frame(), schema, epsilon=EPS, resume=True)
    with pytest.raises(ValueError, match="checkpoint_every=0"):
        model.fit(_frame(), schema, epsilon=EPS, checkpoint_dir=tmp_path / "x", checkpoint_every=0)
    for method in ("independent", "mst", "aim"):
        with pytest.raises(ValueError, match=f"{method} does not take checkpoint_dir"):
            synthesizers.create(method).fit(_frame(), schema, epsilon=EPS,
                                            checkpoint_dir=tmp_path / method)


@pytest.mark.slow
def test_paused_and_resumed_dp_syn_replays_its_noisy_counts(tmp_path):
    reference = synthesizers.create("dp-syn", **SYN_TINY).fit(_frame(), SYN_SCHEMA, epsilon=EPS, seed=0)
    resumed, pauses = _fit_with_pauses("dp-syn", SYN_TINY, SYN_SCHEMA, tmp_path / "syn", seed=0)
    assert pauses and all(p[0] == "autoencoders" for p in pauses)
    # the count release ran in every run with the same key: the same noisy counts each time
    assert (resumed.fitted_release.statistics["released_counts"]
            == reference.fitted_release.statistics["released_counts"])
    _assert_same_model(reference, resumed)


CRASH_OVERRIDES = dict(ae_steps=2000, critic_steps=10, critic_steps_per_generator_step=5,
                       chunk_size=4, ae_batch_size=16, critic_batch_size=16,
                       generator_batch_size=16, ae_clip_norm=0.05)
CRASH_SCRIPT = textwrap.dedent(f"""
    import sys
    from dpgen_jax import synthesizers
    from tests import _tables
    synthesizers.create("dp-auto-gan", **{CRASH_OVERRIDES!r}).fit(
        _tables.mixed_frame(300, 0), _tables.MIXED_SCHEMA, epsilon={EPS!r},
        checkpoint_dir=sys.argv[1], resume=sys.argv[2] == "1", checkpoint_every=1)
""")


def _kill_while_saving(directory, resume: bool) -> list[str]:
    """Runs the fit in a subprocess and SIGKILLs it as soon as a checkpoint newer than the ones
    present at start is being written; returns the unfinished temporary entries left behind."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    before = {n for n in os.listdir(directory) if n.isdigit()} if directory.exists() else set()
    proc = subprocess.Popen([sys.executable, "-c", CRASH_SCRIPT, str(directory), "1" if resume else "0"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            names = os.listdir(directory) if directory.exists() else []
            finished = [n for n in names if n.isdigit() and int(n) >= 1 and n not in before]
            if finished and any("tmp" in n for n in names):  # a save is being written: kill now
                break
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    return [n for n in os.listdir(directory) if "tmp" in n]


@pytest.mark.slow
def test_a_run_killed_while_saving_resumes_to_the_full_schedule(tmp_path):
    """SIGKILL an unseeded fit while a checkpoint after the first is being written (the kill must
    leave an unfinished temporary directory; up to three tries, each resuming the last); the
    previous checkpoint must be usable, and the resumed fit (with the key from the checkpoint)
    ends with the planned steps and epsilon."""
    directory = tmp_path / "crash"
    for attempt in range(3):
        left = _kill_while_saving(directory, resume=attempt > 0)
        if left:
            break
    assert left, "no kill landed while a checkpoint was being written"
    # the previous, complete checkpoint is what a resume sees
    with ocp.CheckpointManager(directory) as manager:
        latest = manager.latest_step()
        assert latest is not None and latest >= 1
        manifest = manager.restore(latest, args=ocp.args.Composite(
            manifest=ocp.args.JsonRestore()))["manifest"]
        key = np.asarray(manager.restore(latest, args=ocp.args.Composite(
            key=ocp.args.StandardRestore()))["key"]["key"])
    assert manifest["current_phase"] == "autoencoder"
    assert not manifest["identity"]["seeded"]
    done_before = manifest["phases"]["autoencoder"]["done"]
    assert 0 < done_before < 2000

    model = synthesizers.create("dp-auto-gan", **CRASH_OVERRIDES)
    model.fit(_frame(), _tables.MIXED_SCHEMA, epsilon=EPS, checkpoint_dir=directory, resume=True)
    plan = model.plan(_tables.MIXED_SCHEMA, 300, epsilon=EPS)
    rep = model.privacy_report()
    assert [p["steps"] for p in rep["phases"]] == [p.steps for p in plan.phases] == [2000, 10]
    assert rep["epsilon"] == pytest.approx(plan.epsilon(), rel=1e-12)
    assert privacy.seeded_assumption() not in rep["assumptions"]  # the OS-entropy key came back

    # the release holds no key and nothing of the checkpoint
    path = tmp_path / "model.npz"
    model.save(path)
    raw = path.read_bytes()
    assert key.tobytes() not in raw
    with np.load(path, allow_pickle=False) as npz:
        names = set(npz.files)
        meta = json.loads(str(npz["__meta__"]))
    assert {n.split("/")[0] for n in names} == {"generator", "decoder", "__meta__"}
    text = json.dumps(meta)
    assert "key" not in {k.lower() for k in meta}
    assert str(directory) not in text and manifest["data_fingerprint"] not in text


@pytest.mark.slow
def test_paused_and_resumed_gs_wgan_skips_its_finished_pretraining(tmp_path):
    tiny = dict(records_per_shard=50.0, batch_size=8, noise_dim=4, generator_hidden=(16, 16),
                critic_hidden=(8,), pretrain_iterations=6, generator_steps=12, pretrain_chunk=3,
                chunk_size=4)
    schema = _tables.MIXED_SCHEMA
    reference = synthesizers.create("gs-wgan", **tiny).fit(_frame(), schema, epsilon=10.0, seed=0)
    model, pauses, resume = synthesizers.create("gs-wgan", **tiny), [], False
    while True:
        try:
            model.fit(_frame(), schema, epsilon=10.0, seed=0, checkpoint_dir=tmp_path / "gs",
                      resume=resume, max_seconds=0, checkpoint_every=1)
            break
        except synthesizers.FitPaused as paused:
            pauses.append((paused.phase, paused.done, paused.total))
            resume = True
    assert pauses == [("pretrain", 3, 6), ("generator", 4, 12), ("generator", 8, 12)]
    _assert_same_model(reference, model)


@pytest.mark.slow
def test_paused_and_resumed_dp_sactgan_replays_modes_and_skips_pretraining(tmp_path):
    # DP-EM modes and noisy condition counts are replayed with the same key; the finished
    # pretraining is restored, not run again; the generator phase continues from its chunk.
    tiny = dict(mechanism="hook", batch_size=8, generator_steps=6, noise_dim=8, d_model=8, num_heads=2,
                num_layers=1, n_modes=3, em_iterations=2, chunk_size=3, aux_hidden=(8,), num_discriminators=2,
                pretrain_iterations=6)
    schema = _tables.MIXED_SCHEMA
    reference = synthesizers.create("dp-sactgan", **tiny).fit(_frame(), schema, epsilon=EPS, seed=0)
    model, pauses = _fit_with_pauses("dp-sactgan", tiny, schema, tmp_path / "sact", seed=0)
    assert pauses == [("pretrain", 3, 6), ("generator", 3, 6)]
    _assert_same_model(reference, model)


@pytest.mark.slow
def test_paused_and_resumed_dp_sactgan_critic_keeps_the_generator_average(tmp_path):
    # the average of the generator's iterates lives in its optimizer state: a resumed fit
    # releases the same average as an uninterrupted one
    tiny = dict(mechanism="critic", batch_size=8, generator_steps=6, noise_dim=8, d_model=8, num_heads=2,
                num_layers=1, n_modes=3, em_iterations=2, chunk_size=3, aux_hidden=(8,), generator_average=0.5)
    schema = _tables.MIXED_SCHEMA
    reference = synthesizers.create("dp-sactgan", **tiny).fit(_frame(), schema, epsilon=EPS, seed=0)
    model, pauses = _fit_with_pauses("dp-sactgan", tiny, schema, tmp_path / "sact", seed=0)
    assert pauses == [("critic", 3, 6)]
    _assert_same_model(reference, model)
