"""Meshes in this process (the refusals, the ambient scope, one device as no mesh, the K-stack
padding), two processes under ``jax.distributed`` against one, and the multi-device benchmark.

The two-process run starts this module as its worker (``python -m tests.test_dpsgd_mesh
PROCESS_ID NUM_PROCESSES PORT``), each process with 2 CPU host devices. The sharded step itself is
tested against the single-device one in test_dpsgd_sharding.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests._compile import ROOT, host_devices_env


def _multihost_worker(process_id: int, num_processes: int, port: int) -> dict:
    """One process of a multi-process run (``jax.distributed``): a 7-step phase on a mesh over
    the devices of every process, with a key that differs per process until ``shared_key``."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if num_processes > 1:
        jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}",
                                   num_processes=num_processes, process_id=process_id)
    import flax.linen as nn
    import jax.numpy as jnp
    import optax

    from dpgen_jax import dpsgd, privacy

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(6)(nn.relu(nn.LayerNorm()(nn.Dense(16)(x))))

    net = Net()
    x = jax.random.normal(jax.random.key(0), (200, 6))  # the same data on every process

    def mse(params, batch):
        return jnp.sum((net.apply(params, batch) - batch) ** 2, axis=-1)

    opt = optax.adam(1e-2)
    mesh = dpsgd.data_mesh() if num_processes > 1 else None
    step = dpsgd.make_dp_step(mse, opt, privacy.DPSGDPhase("p", 0.2, 0.8, 7, clip_norm=0.5), scan_rows=200,
                              mesh=mesh)
    key = dpsgd.shared_key(jax.random.key(2 + 10 * process_id))  # process 0's key everywhere
    state, data = dpsgd.init_state(net.init(jax.random.key(1), x[:1]), opt), x
    if mesh is not None:
        state, data = dpsgd.replicate((state, data), mesh)
    got = dpsgd.run_phase(step, state, data, key, 7, chunk_size=3)
    leaves = [np.asarray(a.addressable_data(0), np.float64).ravel()
              for a in jax.tree_util.tree_leaves(got.params)]
    return {"devices": len(jax.devices()), "local_devices": len(jax.local_devices()),
            "steps": int(got.steps), "params": np.concatenate(leaves).tolist()}


@pytest.mark.slow
def test_two_processes_with_jax_distributed_equal_one_process():
    """Multi-host as on several machines, here two processes of 2 host devices each on this one
    (one 4-device mesh, CPU collectives over gloo): both processes end with the single-process
    result, although each starts from its own key (``shared_key`` makes them one)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "tests.test_dpsgd_mesh"]
    procs = [subprocess.Popen(cmd + [str(i), "2", str(port)], cwd=ROOT, env=host_devices_env(2),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-4000:]
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    single = subprocess.run(cmd + ["0", "1", "0"], cwd=ROOT, env=host_devices_env(1), capture_output=True,
                            text=True, timeout=600)
    assert single.returncode == 0, single.stderr[-4000:]
    ref = json.loads(single.stdout.strip().splitlines()[-1])
    assert ref["devices"] == 1 and ref["steps"] == 7
    for out in outs:
        assert (out["devices"], out["local_devices"], out["steps"]) == (4, 2, 7)
        np.testing.assert_allclose(out["params"], ref["params"], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(outs[0]["params"], outs[1]["params"])


# ----------------------------------------------------------------------------- in this process


def test_bad_meshes_are_refused_with_the_argument_named():
    import jax
    from jax.sharding import Mesh

    from dpgen_jax import dpsgd

    n = len(jax.devices())
    with pytest.raises(ValueError, match="devices=.*available devices"):
        dpsgd.data_mesh(n + 1)
    with pytest.raises(ValueError, match="devices"):
        dpsgd.data_mesh([])
    two_axes = Mesh(np.asarray(jax.devices()[:1], dtype=object).reshape(1, 1), ("a", "b"))
    with pytest.raises(ValueError, match="exactly one"):
        dpsgd.pad_to_devices(10, two_axes)
    with pytest.raises(ValueError, match="exactly one"):
        with dpsgd.data_parallel(two_axes):
            pass
    with pytest.raises(TypeError, match="mesh"):
        dpsgd.replicate({}, "data")


def test_ambient_mesh_is_scoped_and_one_device_is_no_mesh():
    import jax

    from dpgen_jax import dpsgd

    mesh = dpsgd.data_mesh(1)
    assert dpsgd.current_mesh() is None
    with dpsgd.data_parallel(mesh):
        assert dpsgd.current_mesh() is mesh
        with dpsgd.data_parallel(None):
            assert dpsgd.current_mesh() is None
        assert dpsgd.resolve_mesh(None) is None  # one device: the ordinary step
    assert dpsgd.current_mesh() is None
    assert dpsgd.pad_to_devices(10, mesh) == 10
    key = jax.random.key(3)
    assert dpsgd.shared_key(key) is key  # one process: the key itself


@pytest.mark.slow
def test_multidevice_benchmark_writes_its_rows(tmp_path):
    out = tmp_path / "md"
    subprocess.run([sys.executable, "-m", "experiments.speed.multidevice", "--out", str(out), "--quick",
                    "--devices", "1,2", "--batches", "64", "--rounds", "3", "--target-seconds", "0.02"],
                   cwd=ROOT, check=True, capture_output=True, text=True, timeout=900,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    result = json.loads((out / "multidevice.json").read_text())
    rows = {(r["devices"], r["batch_size"], r["method"]): r for r in result["rows"]}
    assert set(rows) == {(1, 64, "ghost"), (2, 64, "ghost")}
    assert rows[(1, 64, "ghost")]["ratio_vs_1_device"] == 1.0
    assert len(result["devices"]["2"]) == 2
    for r in rows.values():
        assert 0 < r["ms_per_step_p10"] <= r["ms_per_step_median"] <= r["ms_per_step_p90"]
        assert r["steps_per_second"] == pytest.approx(1e3 / r["ms_per_step_median"], rel=1e-2)
        assert r["compile_seconds"] > 0
    assert "| 2 | 64 | ghost |" in (out / "multidevice.md").read_text()


def test_pad_stacked_copies_entry_zero_and_refuses_shrinking():
    """The K-stack padding both sharded pretrainings use: entries K.. are copies of entry 0, the
    first K untouched, every leaf padded alike."""
    import jax.numpy as jnp

    from dpgen_jax import dpsgd

    tree = {"w": jnp.arange(6.0).reshape(3, 2), "b": jnp.array([7, 8, 9])}
    out = dpsgd.pad_stacked(tree, 5)
    np.testing.assert_array_equal(out["w"], [[0, 1], [2, 3], [4, 5], [0, 1], [0, 1]])
    np.testing.assert_array_equal(out["b"], [7, 8, 9, 7, 7])
    assert dpsgd.pad_stacked(tree, 3)["b"].shape == (3,)
    with pytest.raises(ValueError, match="size=2"):
        dpsgd.pad_stacked(tree, 2)


if __name__ == "__main__":
    print(json.dumps(_multihost_worker(*map(int, sys.argv[1:4]))))
