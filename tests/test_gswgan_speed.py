"""The GS-WGAN pretraining speed benchmark (experiments/speed/gswgan_pretrain.py) and its torch reference.

No timed assertions: these tests check that the contenders compute the same thing (the Python
loop of single-shard JIT calls against ``gs_wgan.pretrain``'s vmap; torch's critic loss against
JAX's with the same weights), that the torch loop keeps to its shard, and that the CLI writes its
report.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpgen_jax.synthesizers import gs_wgan
from experiments.speed import gswgan_pretrain as bench
from experiments.speed import torch_reference as tr

ROOT = pathlib.Path(__file__).resolve().parents[1]
WIDTH = 12


@pytest.fixture(scope="module")
def table():
    """400 rows in [-1, 1] of width 12, partitioned into 8 shards (about 50 rows each)."""
    x = jax.random.uniform(jax.random.key(7), (400, WIDTH), minval=-1.0, maxval=1.0)
    return gs_wgan.partition(x, jax.random.key(8), 8)


@pytest.fixture
def torch_ref():
    ok, reason = tr.gswgan_available()
    if not ok:
        pytest.skip(reason)
    return tr


@pytest.mark.slow  # K single-shard calls; test_gs_wgan's vmap-vs-loop test runs by default
def test_loop_of_single_shard_calls_computes_what_pretrain_computes(table):
    x_sorted, shards = table
    config = gs_wgan.GSWGANConfig()
    first = bench._first(shards, 3)
    vmapped, _ = bench.vmapped_runner(config, x_sorted, first, 2)
    loop, prepare, _ = bench.loop_runner(config, x_sorted, first, 2)
    key = jax.random.key(3)
    state, out = vmapped(key), loop(prepare(key))
    assert int(state.steps) == 2 and len(out) == 3
    assert bench.loop_vs_vmap_difference(state, out) < 1e-5
    # and not trivially: the critics moved, and differ between shards
    fresh = jax.vmap(lambda k: gs_wgan.init_critic(config, WIDTH, k))(
        jax.random.split(jax.random.split(jax.random.split(key)[0])[0], 3))
    moved = jax.tree_util.tree_map(lambda a, b: float(jnp.max(jnp.abs(a - b))), state.critics.params, fresh)
    assert max(jax.tree_util.tree_leaves(moved)) > 1e-5
    k0 = out[0][0].params["TorchDense_0"]["Dense_0"]["kernel"]
    k1 = out[1][0].params["TorchDense_0"]["Dense_0"]["kernel"]
    assert float(jnp.max(jnp.abs(k0 - k1))) > 1e-3


def test_flop_count_covers_every_critic_update(table):
    x_sorted, shards = table
    config = gs_wgan.GSWGANConfig()
    five = bench.flops_per_discriminator_iteration(config, x_sorted, shards)
    if five is None:
        pytest.skip("no XLA cost analysis on this backend")
    one = bench.flops_per_discriminator_iteration(
        config.replace(critic_steps_per_generator_step=1), x_sorted, shards)
    assert five > 2.0 * one > 0  # four more critic updates; the generator step is the rest


@pytest.mark.parametrize("overrides", [{}, {"gradient_penalty": 3.0, "drift": 0.25},
                                       {"generator_norm": "batch", "critic_norm": "batch"}])
def test_torch_critic_loss_matches_jax_with_the_same_weights(torch_ref, table, overrides):
    x_sorted, _ = table
    config = gs_wgan.GSWGANConfig().replace(**overrides)
    result = bench.parity(config, x_sorted, torch_ref, seed=4)
    assert result["loss_rel_diff"] <= 1e-4, result
    assert result["critic_grad_max_excess"] <= 0.0, result
    assert result["generator_max_abs_diff"] <= 1e-5, result
    bench.check_parity(result)


def test_torch_nets_from_jax_have_the_jax_layout(torch_ref):
    import torch

    config = gs_wgan.GSWGANConfig()
    g = gs_wgan.init_generator(config, WIDTH, jax.random.key(0))
    d = gs_wgan.init_critic(config, WIDTH, jax.random.key(1))
    net_g, net_d = torch_ref.gswgan_nets_from_jax(jax.device_get(g), jax.device_get(d))
    kinds = [type(m).__name__ for m in net_g]
    assert kinds == ["Linear", "LayerNorm", "ReLU", "Linear", "LayerNorm", "ReLU", "Linear", "Tanh"]
    assert [type(m).__name__ for m in net_d] == ["Linear", "LayerNorm", "LeakyReLU", "Linear"]
    assert net_d[2].negative_slope == 0.2 and net_d[1].eps == 1e-5
    z = np.array(jax.random.normal(jax.random.key(2), (5, config.noise_dim)))
    with torch.no_grad():
        rows = net_g(torch.from_numpy(z)).numpy()
        scores = net_d(torch.from_numpy(rows))[:, 0].numpy()
    np.testing.assert_allclose(rows, np.asarray(gs_wgan.generate(config, WIDTH, g, jnp.asarray(z))), atol=1e-5)
    np.testing.assert_allclose(scores, np.asarray(gs_wgan.critic_scores(config, d, jnp.asarray(rows))),
                               rtol=1e-4, atol=1e-5)
    no_norm = gs_wgan.init_critic(config.replace(critic_norm="none"), WIDTH, jax.random.key(1))
    with pytest.raises(ValueError, match="LayerNorm"):
        torch_ref.gswgan_nets_from_jax(jax.device_get(g), jax.device_get(no_norm))


def test_fresh_torch_networks_use_pytorch_default_init(torch_ref):
    net_g, net_d = torch_ref.gswgan_networks(WIDTH)
    first = net_d[0]
    bound = 1.0 / np.sqrt(WIDTH)
    assert first.weight.shape == (128, WIDTH)
    assert float(first.weight.detach().abs().max()) <= bound and float(first.bias.detach().abs().max()) <= bound
    assert net_g[0].in_features == 32 and net_g[-2].out_features == WIDTH


@pytest.mark.parametrize("start,size", [(50, 46), (50, 10), (50, 0)])
def test_torch_pretrain_shard_reads_only_its_shard(torch_ref, start, size):
    import torch

    x = np.full((200, WIDTH), np.nan, np.float32)
    x[start:start + size] = np.random.default_rng(0).uniform(-1, 1, (size, WIDTH))
    gen = torch.Generator().manual_seed(0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        _, fresh = torch_ref.gswgan_networks(WIDTH)
        torch.manual_seed(0)
        net_g, net_d = torch_ref.gswgan_pretrain_shard(torch.from_numpy(x), start, size, iterations=2,
                                                       generator=gen)
    for p in list(net_g.parameters()) + list(net_d.parameters()):
        assert torch.isfinite(p).all()  # a row outside the shard would have put NaN here
    assert all(p.requires_grad for p in net_d.parameters())
    moved = max(float((a - b).detach().abs().max()) for a, b in zip(net_d.parameters(), fresh.parameters()))
    assert moved > 1e-5


def test_time_gswgan_pretrain_returns_seconds_and_restores_threads(torch_ref, table):
    import torch

    x_sorted, shards = table
    before = torch.get_num_threads()
    seconds = torch_ref.time_gswgan_pretrain(np.asarray(x_sorted), np.asarray(shards.starts),
                                             np.asarray(shards.sizes), discriminators=2, iterations=1,
                                             threads=1, seed=0)
    assert seconds > 0.0 and torch.get_num_threads() == before
    with pytest.raises(ValueError, match="discriminators"):
        torch_ref.time_gswgan_pretrain(np.asarray(x_sorted), [0], [50], discriminators=2, iterations=1,
                                       threads=1)
    with pytest.raises(TypeError):
        torch_ref.time_gswgan_pretrain(np.asarray(x_sorted, np.float64), [0], [50], iterations=1, threads=1)


def test_torch_batch_normalised_networks_match_jax(torch_ref):
    """The thesis's normalisation: BatchNorm1d on the batch's own statistics, as norm="batch"."""
    import torch

    config = gs_wgan.GSWGANConfig(generator_norm="batch", critic_norm="batch")
    g = gs_wgan.init_generator(config, WIDTH, jax.random.key(0))
    d = gs_wgan.init_critic(config, WIDTH, jax.random.key(1))
    g = jax.tree_util.tree_map(lambda a: a + 0.1 * jax.random.normal(jax.random.key(5), a.shape), g)
    net_g, net_d = torch_ref.gswgan_nets_from_jax(jax.device_get(g), jax.device_get(d))
    assert [type(m).__name__ for m in net_d] == ["Linear", "BatchNorm1d", "LeakyReLU", "Linear"]
    z = np.array(jax.random.normal(jax.random.key(2), (16, config.noise_dim)))
    with torch.no_grad():
        rows = net_g(torch.from_numpy(z)).numpy()  # training mode: the batch's statistics
    np.testing.assert_allclose(rows, np.asarray(gs_wgan.generate(config, WIDTH, g, jnp.asarray(z))), atol=1e-5)
    layer = gs_wgan.init_critic(config.replace(critic_norm="layer"), WIDTH, jax.random.key(1))
    with pytest.raises(ValueError, match="one normalisation"):
        torch_ref.gswgan_nets_from_jax(jax.device_get(g), jax.device_get(layer))


@pytest.mark.slow
def test_cli_on_cardios_shape_with_the_theses_normalisation_on_two_devices(tmp_path):
    out = tmp_path / "speed"
    cmd = [sys.executable, "-m", "experiments.speed.gswgan_pretrain", "--quick", "--out", str(out),
           "--table", "cardio-like", "--norm", "batch", "--devices", "2",
           "--discriminators", "2", "--full-k", "9", "--iterations", "1", "--full-k-iterations", "1"]
    if not tr.gswgan_available()[0]:
        cmd.append("--no-torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "gswgan_pretrain.json").read_text())
    assert result["width"] == 16 and result["settings"]["num_records"] == 56000
    assert result["settings"]["norm"] == "batch" and result["settings"]["devices"] == 2
    full = next(r for r in result["rows"] if r["contender"] == "vmap_full")
    assert full["discriminators"] == 9 and full["label"].endswith("2 devices")
    assert bench.default_full_k("cardio-like") == 1500 and bench.default_full_k() == 698


@pytest.mark.slow
def test_cli_writes_the_report(tmp_path):
    out = tmp_path / "speed"
    cmd = [sys.executable, "-m", "experiments.speed.gswgan_pretrain", "--quick", "--out", str(out),
           "--discriminators", "2", "--full-k", "8", "--iterations", "1", "--full-k-iterations", "1"]
    torch_ok = tr.gswgan_available()[0]
    if not torch_ok:
        cmd.append("--no-torch")
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "gswgan_pretrain.json").read_text())
    contenders = [r["contender"] for r in result["rows"]]
    assert contenders == ["vmap", "vmap_full", "loop"] + (["torch"] if torch_ok else [])
    assert result["threads"] == 1 and result["mode"] == "quick"
    assert len(result["load_average"]["start"]) == 3
    assert {r["discriminators"] for r in result["rows"]} == {2, 8}
    for clock in ("wall", "cpu"):
        assert {"loop/vmap", "loop/vmap_full"} <= set(result["ratios"][clock])
    assert result["loop_vs_vmap_max_abs_diff"] < 1e-5
    for r in result["rows"]:
        assert len(r["seconds_per_round"]) == 3 and r["ms_per_discriminator_iteration"] > 0
        assert len(r["cpu_seconds_per_round"]) == 3 and r["cpu_ms_per_discriminator_iteration"] > 0
    text = (out / "gswgan_pretrain.md").read_text()
    assert "(a) JAX loop / (v)" in text and text in proc.stdout
