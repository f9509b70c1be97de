"""The contenders of the GS-WGAN pretraining benchmark and their checks: the generated tables'
rows, (v) ``gs_wgan.pretrain`` compiled ahead of time, (a) the shards one after another through
one compiled single-shard function with the keys ``pretrain`` gives them, the difference between
the two, XLA's flop count of one discriminator-iteration, and the parity of the critic loss and
its gradient with the torch reference. JAX and torch are imported inside the functions, after the
threads are pinned; ``experiments/speed/gswgan_pretrain.py`` times them.
"""

from __future__ import annotations

import time

TABLES = {"adult-like": 32561, "cardio-like": 56000}  # rows: Adult's training rows, cardio's split
PARITY_RTOL = 1e-4


def adult_like_rows(seed: int = 0):
    """Adult-shaped rows in the generator's range [-1, 1], ``(32561, 106)`` float32."""
    return table_rows("adult-like", seed)


def table_rows(table: str, seed: int = 0):
    """``table``'s generated rows (:data:`TABLES`) encoded and scaled to [-1, 1], float32."""
    import jax.numpy as jnp

    from dpgen_jax import data

    make, schema = {"adult-like": (data.adult_like, data.adult_schema),
                    "cardio-like": (data.cardio_like, data.cardio_schema)}[table]
    x = data.TableEncoder(schema()).encode(make(TABLES[table], seed=seed))
    return 2.0 * jnp.asarray(x, jnp.float32) - 1.0


def _first(shards, k):
    from dpgen_jax.synthesizers import gs_wgan

    return gs_wgan.Shards(shards.starts[:k], shards.sizes[:k])


def vmapped_runner(config, x_sorted, shards, iterations, mesh=None):
    """``(call(key) -> PretrainState, compile_seconds)``: ``gs_wgan.pretrain`` over all of
    ``shards``, compiled once ahead of time; with a ``mesh``, ``pretrain(mesh=mesh)`` (its cached
    runner; compile_seconds is then its first call, compilation and one run)."""
    import jax

    from dpgen_jax.synthesizers import gs_wgan

    cfg, flags = config, gs_wgan.FLAGS.replace(pretrain_chunk=iterations)
    if mesh is not None:
        def call_mesh(key):
            return jax.block_until_ready(gs_wgan.pretrain(cfg, x_sorted, shards, key,
                                                          iterations=iterations, mesh=mesh, flags=flags))

        t0 = time.perf_counter()
        call_mesh(jax.random.key(0))
        return call_mesh, time.perf_counter() - t0

    def run(x, starts, sizes, key):
        return gs_wgan.pretrain(cfg, x, gs_wgan.Shards(starts, sizes), key, iterations=iterations, flags=flags)

    t0 = time.perf_counter()
    compiled = jax.jit(run).lower(x_sorted, shards.starts, shards.sizes, jax.random.key(0)).compile()
    compile_s = time.perf_counter() - t0

    def call(key):
        return jax.block_until_ready(compiled(x_sorted, shards.starts, shards.sizes, key))

    return call, compile_s


def loop_runner(config, x_sorted, shards, iterations):
    """``(call(prepare(key)) -> [(critic, generator)], prepare, compile_seconds)``: the shards one
    after another, each through ONE compiled single-shard function with the keys ``pretrain``
    would give it.

    ``pretrain(key)`` initialises critic k from ``split(k_d, K)[k]`` and generator k from
    ``split(k_g, K)[k]`` (``k_d, k_g = split(k_init)``, ``k_init, k_run = split(key)``) and runs
    iteration t of shard k with ``fold_in(fold_in(k_run, t), k)``; the keys are derived before the
    clock starts (``prepare``), the per-shard calls are timed.
    """
    import jax
    import jax.numpy as jnp
    from jax import lax

    from dpgen_jax.synthesizers import gs_wgan

    width = x_sorted.shape[1]
    opt = gs_wgan.optimizer(config)
    k_total = int(shards.starts.shape[0])

    def one(x, start, size, k_d, k_g, k_run, index):
        d = gs_wgan.init_critic(config, width, k_d)
        g = gs_wgan.init_generator(config, width, k_g)
        carry = (gs_wgan.Net(d, opt.init(d)), gs_wgan.Net(g, opt.init(g)))

        def body(t, c):
            key = jax.random.fold_in(jax.random.fold_in(k_run, t), index)
            return gs_wgan.pretrain_iteration(config, c[0], c[1], x, start, size, key)

        return lax.fori_loop(0, iterations, body, carry)

    starts = [shards.starts[i] for i in range(k_total)]
    sizes = [shards.sizes[i] for i in range(k_total)]
    indices = [jnp.uint32(i) for i in range(k_total)]
    k0 = jax.random.key(0)
    t0 = time.perf_counter()
    compiled = jax.jit(one).lower(x_sorted, starts[0], sizes[0], k0, k0, k0, indices[0]).compile()
    compile_s = time.perf_counter() - t0

    def prepare(key):
        k_init, k_run = jax.random.split(key)
        k_d, k_g = jax.random.split(k_init)
        kd, kg = jax.random.split(k_d, k_total), jax.random.split(k_g, k_total)
        kd, kg = [kd[i] for i in range(k_total)], [kg[i] for i in range(k_total)]
        return jax.block_until_ready((kd, kg, k_run))

    def call(prepared):
        kd, kg, k_run = prepared
        out = [compiled(x_sorted, starts[i], sizes[i], kd[i], kg[i], k_run, indices[i])
               for i in range(k_total)]
        return jax.block_until_ready(out)

    return call, prepare, compile_s


def loop_vs_vmap_difference(vmapped_state, loop_out) -> float:
    """Max |critic parameter difference| between (v) and (a) run with the same key."""
    import jax
    import numpy as np

    worst = 0.0
    for i, (critic, _) in enumerate(loop_out):
        stacked = jax.tree_util.tree_map(lambda a: a[i], vmapped_state.critics.params)
        for a, b in zip(jax.tree_util.tree_leaves(stacked), jax.tree_util.tree_leaves(critic.params)):
            worst = max(worst, float(np.max(np.abs(np.asarray(a) - np.asarray(b)))))
    return worst


def flops_per_discriminator_iteration(config, x_sorted, shards) -> float | None:
    """XLA's flop count of one pretraining iteration of one shard (HLO cost analysis).

    The analysis counts a loop body once, so the count is taken from ``pretrain_iteration`` with
    one critic update plus ``critic_steps - 1`` times ``critic_update``; this holds however loops
    are counted. None when the backend gives no cost analysis.
    """
    import jax

    from dpgen_jax.synthesizers import gs_wgan

    width = x_sorted.shape[1]
    start, size = shards.starts[0], shards.sizes[0]

    def cost(cfg, fn):
        opt = gs_wgan.optimizer(cfg)
        d = gs_wgan.init_critic(cfg, width, jax.random.key(1))
        g = gs_wgan.init_generator(cfg, width, jax.random.key(2))
        args = (gs_wgan.Net(d, opt.init(d)), gs_wgan.Net(g, opt.init(g)), jax.random.key(3))
        ca = jax.jit(fn).lower(*args).cost_analysis()
        ca = ca[0] if isinstance(ca, (list, tuple)) else ca
        return float(ca["flops"])

    one = config.replace(critic_steps_per_generator_step=1)
    try:
        first = cost(one, lambda c, g, k: gs_wgan.pretrain_iteration(one, c, g, x_sorted, start, size, k))
        update = cost(config, lambda c, g, k: gs_wgan.critic_update(config, c, g.params, x_sorted, start,
                                                                     size, k))
    except (KeyError, TypeError, IndexError, NotImplementedError):
        return None
    return first + (config.critic_steps_per_generator_step - 1) * update


def parity(config, x_sorted, torch_ref, *, seed: int = 0) -> dict:
    """The critic loss of one batch, and its gradient, with the same weights in JAX and torch.

    Critic and generator from ``gs_wgan.init_critic`` / ``init_generator``; real rows are the first
    B rows of ``x_sorted``, fake rows the JAX generator's output (also compared with torch's), one
    ``alpha`` per row. Returns the relative loss difference, the max generator-output difference
    and the worst gradient excess over ``PARITY_RTOL``; the caller decides what fails.
    """
    import jax
    import numpy as np
    import torch

    from dpgen_jax.synthesizers import gs_wgan

    width, b = x_sorted.shape[1], config.batch_size
    keys = jax.random.split(jax.random.key(seed), 4)
    d = gs_wgan.init_critic(config, width, keys[0])
    g = gs_wgan.init_generator(config, width, keys[1])
    real = x_sorted[:b]
    z = jax.random.normal(keys[2], (b, config.noise_dim))
    fake = gs_wgan.generate(config, width, g, z)
    alpha = jax.random.uniform(keys[3], (b, 1))
    loss_j, grads_j = jax.value_and_grad(gs_wgan.critic_loss, argnums=1)(config, d, real, fake, alpha)

    net_g, net_d = torch_ref.gswgan_nets_from_jax(jax.device_get(g), jax.device_get(d))
    t = lambda a: torch.from_numpy(np.array(a, dtype=np.float32))  # noqa: E731
    with torch.no_grad():
        fake_t = net_g(t(z))
    loss_t = torch_ref.gswgan_critic_loss(net_d, t(real), t(fake), t(alpha),
                                          gradient_penalty=config.gradient_penalty, drift=config.drift)
    loss_t.backward()
    linears = [m for m in net_d if isinstance(m, torch.nn.Linear)]
    norms = [m for m in net_d if isinstance(m, (torch.nn.LayerNorm, torch.nn.BatchNorm1d))]
    norm_node = "_BatchAffine" if config.critic_norm == "batch" else "LayerNorm"
    pairs = []
    for i, lin in enumerate(linears):
        node = grads_j[f"TorchDense_{i}"]["Dense_0"]
        pairs += [(node["kernel"], lin.weight.grad.T), (node["bias"], lin.bias.grad)]
    for i, ln in enumerate(norms):
        node = grads_j[f"{norm_node}_{i}"]
        pairs += [(node["scale"], ln.weight.grad), (node["bias"], ln.bias.grad)]
    scale = max(float(np.max(np.abs(np.asarray(a)))) for a, _ in pairs)
    grad_abs, grad_excess = 0.0, 0.0
    for a, tt in pairs:
        a, tt = np.asarray(a), tt.detach().numpy()
        diff = np.abs(a - tt)
        grad_abs = max(grad_abs, float(np.max(diff)))
        grad_excess = max(grad_excess, float(np.max(diff - PARITY_RTOL * np.abs(a) - 1e-6 * scale)))
    lj, lt = float(loss_j), float(loss_t.detach())
    return {
        "batch_size": b, "loss_jax": lj, "loss_torch": lt,
        "loss_rel_diff": abs(lj - lt) / max(abs(lj), 1e-12),
        "generator_max_abs_diff": float(np.max(np.abs(np.asarray(fake) - fake_t.numpy()))),
        "critic_grad_max_abs_diff": grad_abs, "critic_grad_max_excess": grad_excess,
        "rtol": PARITY_RTOL,
    }


def check_parity(result: dict) -> None:
    if not (result["loss_rel_diff"] <= PARITY_RTOL and result["critic_grad_max_excess"] <= 0.0
            and result["generator_max_abs_diff"] <= 1e-5):
        raise RuntimeError(f"GS-WGAN parity check failed (JAX vs torch, rtol {PARITY_RTOL}): {result}")
