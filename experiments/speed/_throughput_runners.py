"""What the throughput benchmark times and checks on the JAX side: the models' losses, the fused
DP-SGD step of ``dpgen_jax.dpsgd`` and a step built from jax-privacy's ``clipped_grad`` and
``gaussian_privatizer``, each as a runner of ``n`` steps per compiled call, and the parity check of
every method's clipped gradient sum (torch's included). The settings both frameworks share are
defined here. JAX is imported inside the functions, after the threads are pinned
(``_harness._configure_threads``); ``experiments/speed/throughput.py`` runs them.
"""

from __future__ import annotations

import time

FULL_MODELS = ("adult_autoencoder", "adult_critic", "mimic_autoencoder")
JAX_PRIVACY_METHOD = "clipped_grad"
DATASET_SIZE = {"adult_autoencoder": 32561, "adult_critic": 32561, "mimic_autoencoder": 27912}
CLIP_NORM = 0.012
NOISE_MULTIPLIER = 2.5
LEARNING_RATE = 1e-3
PARITY_BATCH = 64
PARITY_RTOL = 2e-4  # torch and Opacus clip with C/(norm + 1e-6), dpgen_jax with C/max(norm, C)


def _jax_setup(model_name: str):
    """(flax module, per-example loss, forward-order param paths) for a benchmark model."""
    from dpgen_jax import models

    if model_name == "adult_autoencoder":
        net = models.adult_autoencoder()
        paths = [("encoder", "layer_0"), ("encoder", "layer_1"), ("decoder", "layer_0"),
                 ("decoder", "layer_1")]

        def loss(params, batch):
            return models.bce_with_logits(net.apply({"params": params}, batch), batch).mean(-1)
    elif model_name == "mimic_autoencoder":
        net = models.mimic_autoencoder()
        paths = [("encoder", "layer_0"), ("decoder", "layer_0")]

        def loss(params, batch):
            return models.bce_with_logits(net.apply({"params": params}, batch), batch).sum(-1)
    elif model_name == "adult_critic":
        net = models.adult_critic()
        paths = [("MLP_0", "layer_0"), ("MLP_0", "layer_1"), ("MLP_0", "layer_2")]

        def loss(params, batch):
            return -net.apply({"params": params}, batch)
    else:
        raise ValueError(f"Unknown model {model_name!r}; expected one of {FULL_MODELS}.")
    return net, loss, paths


def _to_flax(paths, weights):
    import jax.numpy as jnp

    params: dict = {}
    for path, (kernel, bias) in zip(paths, weights):
        node = params
        for name in path:
            node = node.setdefault(name, {})
        node["Dense_0"] = {"kernel": jnp.asarray(kernel), "bias": jnp.asarray(bias)}
    return params


def _from_flax(paths, params):
    import numpy as np

    out = []
    for path in paths:
        node = params
        for name in path:
            node = node[name]
        out.append((np.asarray(node["Dense_0"]["kernel"]), np.asarray(node["Dense_0"]["bias"])))
    return out


def _jax_runner(model_name, method, batch_size, params, data):
    import jax
    import jax.numpy as jnp
    import optax

    from dpgen_jax import dpsgd, privacy

    _, loss, _ = _jax_setup(model_name)
    m = data.shape[0]
    opt = optax.sgd(LEARNING_RATE)
    private = method != "nonprivate"
    phase = (privacy.DPSGDPhase.from_batch_size("throughput", batch_size, m, NOISE_MULTIPLIER, 0,
                                                clip_norm=CLIP_NORM) if private
             else privacy.NonPrivatePhase.from_batch_size("throughput", batch_size, m, 0))
    step = dpsgd.make_dp_step(loss, opt, phase, scan_rows=m,
                              method=method if private else "ghost", fallback="error")
    runner = dpsgd.make_phase_runner(step, donate=False)
    state = dpsgd.init_state(params, opt)
    key = jax.random.key(0)
    t0 = time.perf_counter()
    jax.block_until_ready(runner(state, data, key, None, jnp.int32(1)))
    compile_s = time.perf_counter() - t0

    def call(n: int, seed: int) -> float:
        t = time.perf_counter()
        jax.block_until_ready(runner(state, data, jax.random.key(seed), None, jnp.int32(n)))
        return (time.perf_counter() - t) * 1e3 / n

    return call, compile_s


def jax_privacy_available() -> tuple[bool, str]:
    try:
        import jax_privacy  # noqa: F401
        from jax_privacy import clipping, noise_addition  # noqa: F401
    except ImportError as exc:
        return False, f"jax-privacy is not importable ({exc}); install the 'bench' extra"
    return True, ""


def _jax_privacy_grad(model_name, clip_norm):
    """jax_privacy's clipped_grad of our per-example loss: sum of clipped per-example gradients."""
    from jax_privacy import clipping

    _, loss, _ = _jax_setup(model_name)
    return clipping.clipped_grad(lambda p, x: loss(p, x)[0], l2_clip_norm=clip_norm,
                                 batch_argnums=1, keep_batch_dim=True)


def _jax_privacy_runner(model_name, batch_size, params, data):
    """A DP-SGD step built from jax_privacy's clipped_grad + gaussian_privatizer, fused like ours.

    Sampling is our in-graph Poisson sampler with the same capacity (overflow chunks included);
    padded rows are marked with ``is_padding_example``; the privatizer (an optax transformation
    whose state is its key) adds N(0, (sigma C)^2); the sum is divided by q m; SGD.
    """
    import jax
    import jax.numpy as jnp
    import optax
    from jax_privacy import noise_addition

    from dpgen_jax import dpsgd

    m = data.shape[0]
    q = batch_size / m
    cap = dpsgd.default_capacity(m, q)
    grad_fn = _jax_privacy_grad(model_name, CLIP_NORM)
    opt = optax.sgd(LEARNING_RATE)

    def make(key):
        privatizer = noise_addition.gaussian_privatizer(stddev=NOISE_MULTIPLIER * CLIP_NORM,
                                                        prng_key=key)
        return privatizer, (params, opt.init(params), privatizer.init(params))

    def run(state, data, key, n):
        privatizer, _ = make(jax.random.key(0))

        def step(t, st):
            p, opt_state, noise_state = st
            k_sample = jax.random.fold_in(jax.random.fold_in(key, t), 0)

            def body(carry):
                pos, gsum, i = carry
                chunk = dpsgd.poisson_chunk(jax.random.fold_in(k_sample, i), pos, m, q, cap)
                batch = jnp.take(data, chunk.indices, axis=0)
                g = grad_fn(p, batch, is_padding_example=~chunk.mask)
                return chunk.next_position, jax.tree_util.tree_map(jnp.add, gsum, g), i + 1

            zeros = jax.tree_util.tree_map(jnp.zeros_like, p)
            _, gsum, _ = jax.lax.while_loop(lambda c: c[0] < m, body, (jnp.int32(0), zeros, jnp.int32(0)))
            noisy, noise_state = privatizer.update(gsum, noise_state)
            grads = jax.tree_util.tree_map(lambda g: g / (q * m), noisy)
            updates, opt_state = opt.update(grads, opt_state, p)
            return optax.apply_updates(p, updates), opt_state, noise_state

        return jax.lax.fori_loop(0, n, step, state)

    runner = jax.jit(run)
    _, state = make(jax.random.key(1))
    t0 = time.perf_counter()
    jax.block_until_ready(runner(state, data, jax.random.key(0), jnp.int32(1)))
    compile_s = time.perf_counter() - t0

    def call(n: int, seed: int) -> float:
        t = time.perf_counter()
        jax.block_until_ready(runner(state, data, jax.random.key(seed), jnp.int32(n)))
        return (time.perf_counter() - t) * 1e3 / n

    return call, compile_s


# --------------------------------------------------------------------------- parity


def _parity(model_name, weights, data, torch_ref, jax_privacy=False) -> dict:
    """Clipped gradient sums of one batch (noise off) from every method; raises on mismatch."""
    import jax.numpy as jnp
    import numpy as np

    from dpgen_jax import dpsgd

    _, loss, paths = _jax_setup(model_name)
    params = _to_flax(paths, weights)
    batch = data[:PARITY_BATCH]
    # A clip norm at the median per-example gradient norm: about half of the rows are clipped.
    _, aux = dpsgd.clipped_grad_sum(loss, 1e9, method="vmap")(params, jnp.asarray(batch))
    clip = float(np.median(np.asarray(aux["norms"])))
    results = {}
    for method in ("ghost", "vmap"):
        g, _ = dpsgd.clipped_grad_sum(loss, clip, method=method, fallback="error")(
            params, jnp.asarray(batch))
        results[("jax", method)] = _from_flax(paths, g)
    if jax_privacy:
        g = _jax_privacy_grad(model_name, clip)(params, jnp.asarray(batch))
        results[("jax-privacy", JAX_PRIVACY_METHOD)] = _from_flax(paths, g)
    if torch_ref is not None:
        for method in ("loop", "opacus_hooks", "opacus_ghost"):
            results[("torch", method)] = torch_ref.clipped_grad_sum(
                model_name, method, weights, batch, clip)
    reference = results[("jax", "vmap")]
    scale = max(float(np.max(np.abs(a))) for pair in reference for a in pair)
    worst = {}
    for key, grads in results.items():
        err = 0.0
        for (ka, ba), (kr, br) in zip(grads, reference):
            for a, r in ((ka, kr), (ba, br)):
                excess = np.abs(a - r) - PARITY_RTOL * np.abs(r) - 1e-5 * scale
                err = max(err, float(np.max(np.abs(a - r))))
                if np.any(excess > 0):
                    raise RuntimeError(
                        f"Parity check failed for {model_name} {key[0]}/{key[1]}: clipped gradient "
                        f"sum differs from JAX vmap by up to {float(np.max(np.abs(a - r))):.3g} "
                        f"(rtol {PARITY_RTOL}, atol {1e-5 * scale:.3g})."
                    )
        worst["/".join(key)] = err
    return {"model": model_name, "batch_size": PARITY_BATCH, "clip_norm": clip,
            "max_abs_diff_vs_jax_vmap": worst, "rtol": PARITY_RTOL, "atol": 1e-5 * scale}


def _fallback_weights(model_name):
    """PyTorch-style U(+-1/sqrt(fan_in)) weights when torch_reference is unavailable."""
    import numpy as np

    dims = {"adult_autoencoder": (106, 60, 15, 60, 106), "adult_critic": (106, 70, 35, 1),
            "mimic_autoencoder": (1071, 128, 1071)}[model_name]
    rng = np.random.default_rng(0)
    out = []
    for i, o in zip(dims[:-1], dims[1:]):
        b = 1.0 / np.sqrt(i)
        out.append((rng.uniform(-b, b, (i, o)).astype(np.float32),
                    rng.uniform(-b, b, (o,)).astype(np.float32)))
    return out
