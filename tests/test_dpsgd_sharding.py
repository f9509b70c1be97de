"""Data-parallel DP-SGD over several devices: the same step, the same sample, one noise draw.

The pytest process has initialised JAX with one CPU device, so the checks run in one subprocess
with ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` (four host devices). The worker
(``python -m tests.test_dpsgd_sharding``) computes every quantity with and without a mesh and
prints them as JSON; the assertions are made here, against the single-device engine and against
independent references (the Poisson sampler run on its own, the noise generator on its own,
``dp_accounting`` through ``privacy``). Meshes in this process, several processes and the
multi-device benchmark are tested in test_dpsgd_mesh.py.

The central model is the *record-revealing* one of ``tests/test_dpsgd_step.py``: record j is the
row s_j e_j of a diagonal matrix and the loss is a bias-free Dense(1), so after one SGD step with
learning rate 1 from zero parameters, coordinate j of -(q m) * params is min(s_j, C) when record
j was sampled and 0 otherwise, plus the noise: a step shows its own sample, clipping and noise.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests._compile import ROOT, host_devices_env

DEVICES = 4
SAMPLE_KEYS = (6, 8, 10)
M, Q, C, SIGMA = 96, 0.125, 1.5, 1.3  # expected batch q m = 12


# ----------------------------------------------------------------------------- the worker


def _worker(part: str) -> dict:  # runs in the subprocess, with DEVICES host devices
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax

    from dpgen_jax import dpsgd, privacy
    from dpgen_jax.data import TableEncoder
    from dpgen_jax.synthesizers import _dpsgd_phases
    from dpgen_jax.synthesizers import dp_syn
    from dpgen_jax.synthesizers import gs_wgan as gw
    from tests import _tables

    assert len(jax.devices()) == DEVICES, jax.devices()
    out: dict = {"devices": len(jax.devices())}
    if part == "fit":
        return _fit_worker(out)
    s = np.random.default_rng(0).permutation(np.linspace(0.3, 3.0, M)).astype(np.float32)
    diag = jnp.asarray(np.diag(s))
    dense = nn.Dense(1, use_bias=False)

    def revealing(params, x):
        return dense.apply(params, x)[:, 0]

    zero = {"params": {"kernel": jnp.zeros((M, 1), jnp.float32)}}
    state0 = dpsgd.init_state(zero, optax.sgd(1.0))
    compiled = {}

    def one_step(method, devices, *, sigma=SIGMA, capacity=None, data=diag, key=3):
        spec = (method, devices, sigma, capacity)
        if spec not in compiled:  # one compilation per configuration; data and key are arguments
            mesh = None if devices is None else dpsgd.data_mesh(devices)
            phase = (privacy.DPSGDPhase("step", Q, sigma, 1, clip_norm=C) if sigma else
                     privacy.NonPrivatePhase("step", 1, Q, clip_norm=C))
            compiled[spec] = jax.jit(dpsgd.make_dp_step(
                revealing, optax.sgd(1.0), phase, scan_rows=M, method=method, capacity=capacity, mesh=mesh))
        new, metrics = compiled[spec](state0, data, jax.random.key(key))
        revealed = -Q * M * np.asarray(new.params["params"]["kernel"][:, 0], np.float64)
        return revealed, int(metrics["batch_size"]), int(metrics["chunks"])

    # 1. One noised step, ghost and vmap, 1 (no mesh), 2 and 4 devices, two keys.
    steps = {}
    for method in ("ghost", "vmap"):
        for devices in (None, 2, 4):
            for key in (3, 4):
                r, b, ch = one_step(method, devices, key=key)
                steps[f"{method}/{devices}/{key}"] = {"revealed": r.tolist(), "batch": b, "chunks": ch}
    out["steps"] = steps

    # 2. The sampled set: no noise, so the revealed coordinates are the sample. A capacity of 10 on
    # 4 devices is rounded up to 12; keys 8 and 10 draw more than 12 records (a second chunk).
    samples = {}
    for key in SAMPLE_KEYS:
        for devices, cap in ((None, 12), (4, 10), (2, 12)):
            r, b, ch = one_step("ghost", devices, sigma=0.0, capacity=cap, key=key)
            samples[f"{devices}/{cap}/{key}"] = {"set": np.flatnonzero(r > 1e-6).tolist(),
                                                  "clipped": r.tolist(), "chunks": ch, "batch": b}
        k_sample = jax.random.split(jax.random.key(key), 4)[0]
        samples[f"reference/{key}"] = sorted(
            dpsgd.poisson_sample_indices(k_sample, M, Q, capacity=12).tolist())
    out["samples"] = samples
    out["capacity_default"] = dpsgd.default_capacity(M, Q)

    # 3. Noise drawn once: all-zero records make every clipped gradient 0, so the update is the
    # noise alone; the reference is the noise generator called once with the step's noise key.
    noise = {}
    zeros = jnp.zeros((M, M), jnp.float32)
    for devices in (None, 2, 4):
        noise[str(devices)] = one_step("vmap", devices, data=zeros, key=8)[0].tolist()
    k_noise = jax.random.split(jax.random.key(8), 4)[2]
    ref = dpsgd.add_gaussian_noise({"k": jnp.zeros((M, 1))}, k_noise, SIGMA * C)["k"][:, 0]
    noise["reference"] = np.asarray(ref, np.float64).tolist()
    out["noise"] = noise

    # 4. Several steps through run_phase (Adam, chunks of 3) on a network with LayerNorm, and
    # through _dpsgd_phases.run_private_phase with mesh= and with an ambient data_parallel block.
    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            h = nn.relu(nn.LayerNorm()(nn.Dense(16)(x)))
            return nn.Dense(x.shape[-1])(h)

    net = Net()
    x = jax.random.normal(jax.random.key(0), (200, 6))

    def mse(params, batch):
        return jnp.sum((net.apply(params, batch) - batch) ** 2, axis=-1)

    params0 = net.init(jax.random.key(1), x[:1])
    phases = {}
    for method, devices in (("ghost", None), ("ghost", 4), ("vmap", None), ("vmap", 2)):
        mesh = None if devices is None else dpsgd.data_mesh(devices)
        opt = optax.adam(1e-2)
        step = dpsgd.make_dp_step(mse, opt, privacy.DPSGDPhase("p", 0.2, 0.8, 7, clip_norm=0.5),
                                  scan_rows=200, method=method, mesh=mesh)
        state = dpsgd.init_state(params0, opt)
        if mesh is not None:
            state = dpsgd.replicate(state, mesh)
        got = dpsgd.run_phase(step, state, x, jax.random.key(2), 7, chunk_size=3)
        phases[f"run_phase/{method}/{devices}"] = _flat(got.params) + [int(got.steps)]
    # the same step as the phase of rate 0.2 above, through the synthesizers' helper
    got = _dpsgd_phases.run_private_phase(mse, optax.adam(1e-2), params0, x, jax.random.key(2),
                                          _dpsgd_phases.dpsgd_phase("p", batch_size=40, num_records=200,
                                                                    noise_multiplier=0.8, steps=7,
                                                                    clip_norm=0.5),
                                          mesh=dpsgd.data_mesh(4), chunk_size=3)
    phases["private_phase/4"] = _flat(got.params) + [int(got.steps)]
    # the accounted phase of each run, from its executed step count
    phases["epsilon"] = {
        name: privacy.epsilon([_dpsgd_phases.dpsgd_phase("p", batch_size=40, num_records=200,
                                                         noise_multiplier=0.8, steps=int(v[-1]),
                                                         clip_norm=0.5)], 1e-5)
        for name, v in phases.items()}
    out["phases"] = phases

    # 5. DP-SYN's grouped runner (vmap over groups of the step with traced rates), inside a mesh.
    cfg = dp_syn.DPSYNConfig(latent_dim=3)
    enc = TableEncoder(_tables.MIXED_SCHEMA)
    blk, width = tuple(enc.blocks), enc.width
    groups = {}
    for devices in (None, 4):
        with dpsgd.data_parallel(None if devices is None else dpsgd.data_mesh(devices)):
            run, opt = dp_syn.make_group_runner(
                cfg, blk, 16, privacy.DPSGDPhase("autoencoder/0", 0.5, 1.0, 4, clip_norm=cfg.clip_norm))
        p = dp_syn.init(cfg, width, 2, jax.random.key(0))
        states = jax.vmap(lambda pp: dpsgd.init_state(pp, opt))(p)
        data = jax.random.uniform(jax.random.key(1), (2, 16, width))
        rates = dpsgd.GroupRates(jnp.array([16, 11], jnp.int32), jnp.array([0.5, 0.7], jnp.float32),
                                 jnp.array([8.0, 7.7], jnp.float32), jnp.array([0.3, 0.4], jnp.float32))
        got = run(states, data, jax.random.key(2), rates, jnp.array([4, 4]), 0, 4)
        groups[str(devices)] = _flat(got.params)
    out["dp_syn_groups"] = groups

    if part != "ensembles":
        return out

    # 6. GS-WGAN pretraining: K = 3 shards over 4 devices (padded to 4, the padding dropped).
    gcfg = gw.GSWGANConfig(records_per_shard=30.0, batch_size=8, noise_dim=4,
                           generator_hidden=(16, 16), critic_hidden=(8,), pretrain_iterations=4)
    gflags = gw.FLAGS.replace(pretrain_chunk=3, shard_group=2, chunk_size=2)
    xg = 2 * jax.random.uniform(jax.random.key(0), (90, 5)) - 1
    xs, sh = gw.partition(xg, jax.random.key(1), 3)
    gs = {}
    for devices in (None, 4):
        mesh = None if devices is None else dpsgd.data_mesh(devices)
        pre = gw.pretrain(gcfg, xs, sh, jax.random.key(2), mesh=mesh, flags=gflags)
        gs[str(devices)] = {"critics": _flat(pre.critics.params), "generators": _flat(pre.generators.params),
                            "shape": list(jax.tree_util.tree_leaves(pre.critics.params)[0].shape),
                            "steps": int(pre.steps)}
    out["gswgan"] = gs
    # GS-WGAN's generator phase with every critic training ("all"): the K = 3 critics split over
    # the 4 devices (padded), the release and the critics those of the single-device run.
    acfg = gcfg.replace(critic_schedule="all", generator_steps=5)
    start = gw.init_generator_phase(acfg, 5, pre.critics.params, jax.random.key(3))
    gen = {}
    for devices in (None, 4):
        mesh = None if devices is None else dpsgd.data_mesh(devices)
        st = gw.train_generator(acfg, start, xs, sh, jax.random.key(4), gw.privacy_phases(acfg, 90)[0], mesh=mesh,
                                flags=gflags)
        gen[str(devices)] = {"released": _flat((st.generator.params, st.ema)), "critics": _flat(st.critics.params),
                             "shape": list(jax.tree_util.tree_leaves(st.critics.params)[0].shape),
                             "steps": int(st.steps)}
    out["gswgan_generator"] = gen

    # 7. DP-SACTGAN pretraining: K = 3 shards (with a label, so classifiers too) over 4 devices.
    import pandas as pd

    from dpgen_jax import data as data_lib
    from dpgen_jax.synthesizers import dp_sactgan as ds

    schema = data_lib.Schema.from_dict({"columns": [
        {"name": "a", "kind": "categorical", "categories": ["x", "y", "z"]},
        {"name": "c", "kind": "continuous", "lower": 0, "upper": 10},
        {"name": "y", "kind": "binary", "categories": ["no", "yes"], "label": True}]})
    r = np.random.default_rng(0)
    frame = pd.DataFrame({"a": r.choice(["x", "y", "z"], 120), "c": r.uniform(0, 10, 120),
                          "y": r.choice(["no", "yes"], 120).astype(object)})
    scfg = ds.DPSACTGANConfig(mechanism="hook", batch_size=8, noise_dim=4, d_model=8, num_heads=2, num_layers=1,
                              n_modes=3, aux_hidden=(8,), pretrain_iterations=4, num_discriminators=3,
                              modes="public")
    lay = ds.build_layout(schema, scfg)
    x = jnp.asarray(data_lib.TableEncoder(schema).encode(frame))
    rows, codes = ds.encode_rows(lay, x, ds.public_modes(schema, scfg), "argmax")
    counts = ds.release_conditional_counts(codes, lay, jax.random.key(3), 0.0,
                                           ds.histogram_columns(lay, scfg))
    lp = ds.cond_log_probs(lay, counts, training=True)
    sdata = ds.prepare(lay, rows, codes, jax.random.key(1), 3)
    sg = {}
    for devices in (None, 4):
        mesh = None if devices is None else dpsgd.data_mesh(devices)
        pre = ds.pretrain(scfg, lay, sdata, lp, jax.random.key(2), mesh=mesh,
                          flags=ds.FLAGS.replace(chunk_size=3, shard_group=2))
        sg[str(devices)] = {"critics": _flat(pre.critics.params), "aux": _flat(pre.aux.params),
                            "generators": _flat(pre.generators.params),
                            "shape": list(jax.tree_util.tree_leaves(pre.critics.params)[0].shape),
                            "steps": int(pre.steps)}
    out["sactgan"] = sg
    return out


def _fit_worker(out: dict) -> dict:
    import jax

    from dpgen_jax import data, dpsgd, privacy, synthesizers
    from dpgen_jax.synthesizers import dp_auto_gan as dag
    from tests import _tables

    # A whole fit: DP-auto-GAN (autoencoder phase, then the critic phase with its batch_fn)
    # with fit(mesh=), against the sample pinned for fit() with the same seed and schedule
    # (tests/test_dp_auto_gan.py::test_pinned_encoded_sample, the paper's encoding: width 6, no
    # one-way matching stage); and its accounting.
    smoke = synthesizers.get("dp-auto-gan").SMOKE  # the pinned fit's schedule and settings
    model = synthesizers.create("dp-auto-gan", **smoke, continuous_encoding="paper", matching_share=0.0).fit(
        _tables.mixed_frame(300, 0), _tables.MIXED_SCHEMA, epsilon=4.0, seed=0,
        mesh=dpsgd.data_mesh(4))
    cfg, rel = model.fitted_config, model.released
    rep = model.privacy_report()
    phases_run = [(p["name"], p["steps"], p["noise_multiplier"]) for p in rep["phases"]]
    out["fit"] = {
        "sample": np.asarray(dag.sample_encoded(cfg, 6, rel["generator"], rel["decoder"], 8,
                                                jax.random.key(1)), np.float64).tolist(),
        "noise": [p.noise_multiplier for p in model.fitted_phases()],  # calibrated (the plan's)
        "epsilon": rep["epsilon"], "phases": phases_run,
        "accountant": privacy.epsilon([privacy.DPSGDPhase.from_batch_size(n, 16, 300, nm, st)
                                       for n, st, nm in phases_run], 1e-5),
    }

    # Every other DP-SGD method (and GS-WGAN, whose pretraining is sharded along K): fit(mesh=)
    # against fit(), same seed, on small schedules.
    import dataclasses

    labelled = data.Schema(tuple(dataclasses.replace(c, label=(c.name == "b"))
                                 for c in _tables.MIXED_SCHEMA.columns))
    # Each method's smoke schedule (SMOKE), with what this comparison needs on top.
    methods = {
        "dp-vae": ({}, _tables.MIXED_SCHEMA),
        "dp-wgan": ({}, _tables.MIXED_SCHEMA),
        "dp-syn": ({"epochs": 2.0}, labelled),  # several chunks
        "gs-wgan": ({"records_per_shard": 50.0}, _tables.MIXED_SCHEMA),  # K = 6 shards over 4 devices
        "dp-sactgan": ({"mechanism": "hook", "num_discriminators": 3, "pretrain_iterations": 4}, labelled),
    }
    frame = _tables.mixed_frame(300, 0)
    out["methods"] = {}
    for name, (over, schema) in methods.items():
        got = {}
        for devices in (None, 4):
            mesh = None if devices is None else dpsgd.data_mesh(devices)
            model = synthesizers.create(name, **{**synthesizers.get(name).SMOKE, **over}).fit(
                frame, schema, epsilon=4.0, seed=0, mesh=mesh)
            got[str(devices)] = {"released": _flat(model.released),
                                 "epsilon": model.privacy_report()["epsilon"]}
        out["methods"][name] = got
    return out


def _flat(tree) -> list[float]:
    import jax

    return np.concatenate([np.ravel(np.asarray(a, np.float64))
                           for a in jax.tree_util.tree_leaves(tree)]).tolist()


# ----------------------------------------------------------------------------- the checks


def _run_worker(part: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "tests.test_dpsgd_sharding", part], cwd=ROOT,
                          env=host_devices_env(DEVICES),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results() -> dict:
    return _run_worker("steps")


@pytest.fixture(scope="module")
def ensemble_results() -> dict:  # the steps part plus GS-WGAN's and DP-SACTGAN's pretraining
    return _run_worker("ensembles")


@pytest.fixture(scope="module")
def fit_results() -> dict:
    return _run_worker("fit")


def test_the_worker_saw_several_devices(results):
    assert results["devices"] == DEVICES


@pytest.mark.parametrize("method", ["ghost", "vmap"])
@pytest.mark.parametrize("devices", [2, 4])
def test_sharded_step_equals_single_device_step(results, method, devices):
    for key in (3, 4):
        one = results["steps"][f"{method}/None/{key}"]
        got = results["steps"][f"{method}/{devices}/{key}"]
        assert got["batch"] == one["batch"] and got["chunks"] == one["chunks"]
        np.testing.assert_allclose(got["revealed"], one["revealed"], rtol=1e-5, atol=1e-5)
    # the two keys give different steps (the comparison is not between constants)
    assert not np.allclose(results["steps"][f"{method}/None/3"]["revealed"],
                           results["steps"][f"{method}/None/4"]["revealed"])


def test_sharded_sample_is_the_poisson_sample_of_the_padded_capacity(results):
    s = results["samples"]
    clipped = np.minimum(np.random.default_rng(0).permutation(
        np.linspace(0.3, 3.0, M)).astype(np.float32), C)
    assert results["capacity_default"] % DEVICES == 0  # the default needs no rounding for 2 or 4
    for key in SAMPLE_KEYS:
        ref = s[f"reference/{key}"]  # the sampler on its own, capacity 12
        assert len(ref) > 0
        # capacity 10 on 4 devices is rounded up to 12: the same sample as one device at 12
        for name in ("None/12", "4/10", "2/12"):
            assert s[f"{name}/{key}"]["set"] == ref, name
            assert s[f"{name}/{key}"]["batch"] == len(ref)
        # each sampled record contributes its clipped gradient exactly once (none twice, none lost)
        got = np.asarray(s[f"4/10/{key}"]["clipped"])
        np.testing.assert_allclose(got[ref], clipped[ref], rtol=1e-5)
        assert s[f"4/10/{key}"]["chunks"] == s[f"None/12/{key}"]["chunks"]
    # the overflow path (a second sampler chunk) is exercised
    assert any(s[f"4/10/{key}"]["chunks"] > 1 for key in SAMPLE_KEYS)


def test_noise_is_drawn_once_per_step(results):
    ref = np.asarray(results["noise"]["reference"])
    assert ref.std() == pytest.approx(SIGMA * C, rel=0.25)  # a real draw, of the right size
    for devices in ("None", "2", "4"):
        # equal to one draw with the step's noise key: not D independent draws, not sqrt(D) larger
        np.testing.assert_allclose(results["noise"][devices], ref, rtol=1e-5, atol=1e-5)


def test_run_phase_sharded_equals_single_device(results):
    ph = results["phases"]
    one = np.asarray(ph["run_phase/ghost/None"])
    assert one[-1] == 7
    np.testing.assert_allclose(ph["run_phase/ghost/4"], one, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ph["run_phase/vmap/2"], ph["run_phase/vmap/None"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ph["run_phase/vmap/None"], one, rtol=1e-4, atol=1e-5)
    # through the synthesizers' helper with mesh= (the ambient mesh is checked by the fit below)
    np.testing.assert_allclose(ph["private_phase/4"], one, rtol=1e-4, atol=1e-5)


def test_accounting_does_not_depend_on_the_mesh(results):
    eps = results["phases"]["epsilon"]
    assert len(set(eps.values())) == 1 and len(eps) == 5
    # dp_accounting called directly on the executed schedule (7 steps at q = 40 / 200, sigma 0.8)
    import dp_accounting as dpa

    acc = dpa.pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(dpa.PoissonSampledDpEvent(0.2, dpa.GaussianDpEvent(0.8)), 7)
    assert eps["private_phase/4"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-2)


def test_dp_syn_grouped_steps_under_a_mesh(results):
    np.testing.assert_allclose(results["dp_syn_groups"]["4"], results["dp_syn_groups"]["None"],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_fit_with_a_mesh_equals_fit_and_accounts_the_same(fit_results):
    f = fit_results["fit"]
    pin = np.load(ROOT / "tests" / "data" / "pin_dp_auto_gan.npy")  # fit() without a mesh
    np.testing.assert_allclose(f["sample"], pin, rtol=1e-4, atol=1e-5)
    # the calibrated noise and the report are those of the single-device fit
    assert f["noise"] == pytest.approx([0.7205543911270007, 1.6812935792963348], rel=1e-9)
    assert [p[1] for p in f["phases"]] == [12, 10]
    assert f["epsilon"] == pytest.approx(f["accountant"], rel=1e-9)
    assert f["epsilon"] <= 4.0


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dp-vae", "dp-wgan", "dp-syn", "gs-wgan", "dp-sactgan"])
def test_every_method_fits_the_same_with_a_mesh(fit_results, method):
    got = fit_results["methods"][method]
    assert len(got["None"]["released"]) > 0
    np.testing.assert_allclose(got["4"]["released"], got["None"]["released"], rtol=1e-3, atol=1e-4)
    assert got["4"]["epsilon"] == got["None"]["epsilon"]


@pytest.mark.slow
@pytest.mark.parametrize("phase, steps, compared", [
    ("gswgan", 4, ("critics", "generators")),          # pretraining
    ("gswgan_generator", 5, ("released", "critics")),  # generator phase, every critic training
])
def test_gswgan_sharded_along_k_equals_unsharded(ensemble_results, phase, steps, compared):
    g = ensemble_results[phase]
    assert g["4"]["shape"] == g["None"]["shape"] and g["4"]["shape"][0] == 3  # padding dropped
    assert g["4"]["steps"] == g["None"]["steps"] == steps
    for name in compared:
        np.testing.assert_allclose(g["4"][name], g["None"][name], rtol=1e-4, atol=1e-6)


@pytest.mark.slow
def test_dpsactgan_pretraining_sharded_along_k_equals_unsharded(ensemble_results):
    g = ensemble_results["sactgan"]
    assert g["4"]["shape"] == g["None"]["shape"] and g["4"]["shape"][0] == 3  # padding dropped
    assert g["4"]["steps"] == g["None"]["steps"] == 4
    for part in ("critics", "aux", "generators"):
        np.testing.assert_allclose(g["4"][part], g["None"][part], rtol=1e-4, atol=1e-5)


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1] if len(sys.argv) > 1 else "steps")))
