"""The oracle and the loss cases of the tests of clipped gradient sums (test_dpsgd_clipping*.py).

The oracle is the definition: for each kept example i, g_i = jax.grad of the single-example loss
(batch of one row), c_i = min(1, C / ||g_i||) over all parameters, and the result is sum_i c_i g_i,
accumulated in float64 in Python (:func:`per_example_loop`, :func:`loop_clipped_sum`). The cases
are networks with Dense (with and without bias) and LayerNorm, networks called twice per example,
two sub-modules of one model, frozen networks around the trained one, token inputs, and a loss
whose parameters are in groups; :func:`clipped` runs the engine on a case at any clip norm with
one compilation per (case, method).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import dpsgd, models
from tests._compile import FAST_COMPILE

B = 8


# --------------------------------------------------------------------------------------------
# Oracle
# --------------------------------------------------------------------------------------------


def flat64(tree) -> np.ndarray:
    leaves = jax.tree_util.tree_leaves(tree)
    return np.concatenate([np.asarray(x, np.float64).ravel() for x in leaves])


def per_example_loop(loss_fn, params, batch):
    """Per-example gradients, one example at a time (flattened, float64), and their norms."""
    grad_one = jax.jit(jax.grad(lambda p, ex: loss_fn(p, ex)[0]), compiler_options=FAST_COMPILE)
    n = jax.tree_util.tree_leaves(batch)[0].shape[0]
    grads = []
    for i in range(n):
        example = jax.tree_util.tree_map(lambda x: x[i:i + 1], batch)
        grads.append(flat64(grad_one(params, example)))
    grads = np.stack(grads)
    return grads, np.linalg.norm(grads, axis=1)


def loop_clipped_sum(grads, norms, clip_norm, mask):
    keep = np.ones(len(norms), bool) if mask is None else np.asarray(mask)
    total = np.zeros(grads.shape[1])
    for g, n, k in zip(grads, norms, keep):
        if k:
            total += g * min(1.0, clip_norm / n) if n > 0 else g
    return total


def close(result, expected, clip_norm, rtol=2e-4):
    """float32 engine vs float64 oracle: error relative to the scale of the sum."""
    got = flat64(result)
    scale = max(np.linalg.norm(expected), 1e-3 * clip_norm)
    err = np.linalg.norm(got - expected)
    assert np.all(np.isfinite(got))
    assert err <= rtol * scale, f"|ghost/vmap - loop| = {err:.3g}, scale {scale:.3g}"


# --------------------------------------------------------------------------------------------
# Cases: (loss_fn, params, batch). Parameters are random (numpy), not the networks' init, so no
# initialiser is compiled and LayerNorm scales/biases are non-trivial.
# --------------------------------------------------------------------------------------------


class DenseNormNet(nn.Module):
    """Dense -> LayerNorm -> LeakyReLU -> Dense(no bias) -> LayerNorm(no bias) -> tanh -> Dense."""

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm(epsilon=1e-5)(nn.Dense(9)(x))
        h = nn.Dense(7, use_bias=False)(nn.leaky_relu(h, 0.2))
        h = jnp.tanh(nn.LayerNorm(use_bias=False)(h))
        return nn.Dense(2)(h)


class TokenNet(nn.Module):
    """Dense and LayerNorm applied to every token of a (B, T, d) input, then mean-pooled."""

    @nn.compact
    def __call__(self, x):
        h = jnp.tanh(nn.LayerNorm()(nn.Dense(6)(x))).mean(axis=1)
        return nn.Dense(1)(h)[..., 0]


def rng(seed):
    return np.random.default_rng(seed)


def random_params(net: nn.Module, x, seed: int, **apply_kwargs):
    """Parameters of ``net`` with random values: kernels ~ N(0, 1/fan_in), vectors ~ N(0, 0.5^2),
    LayerNorm scales ~ 1 + N(0, 0.3^2)."""
    shapes = jax.eval_shape(lambda k: net.init(k, x, **apply_kwargs), jax.random.key(0))
    r = rng(seed)

    def fill(path, s):
        name = jax.tree_util.keystr(path)
        if len(s.shape) >= 2:
            return (r.normal(size=s.shape) / np.sqrt(s.shape[0])).astype(np.float32)
        if "scale" in name:
            return (1.0 + 0.3 * r.normal(size=s.shape)).astype(np.float32)
        return (0.5 * r.normal(size=s.shape)).astype(np.float32)

    return jax.tree_util.tree_map_with_path(fill, shapes)


def normal(r, *shape, scale=1.0):
    return (scale * r.normal(size=shape)).astype(np.float32)


def case_dense_layernorm():
    # Dense with and without bias, LayerNorm with and without bias; rows of very different norms.
    net, r = DenseNormNet(), rng(2)
    batch = {"x": normal(r, B, 5) * np.arange(1, B + 1, dtype=np.float32)[:, None],
             "y": normal(r, B, 2)}
    params = random_params(net, batch["x"][:1], 2)
    return lambda p, b: jnp.sum((net.apply(p, b["x"]) - b["y"]) ** 2, -1), params, batch


def case_generator():
    # DP-auto-GAN's generator shape: Dense(no bias) + LayerNorm blocks with residual skips.
    net, r = models.ResidualGenerator(features=(6, 6, 3), skip=(True, True, False)), rng(3)
    batch = {"z": normal(r, B, 6), "t": normal(r, B, 3)}
    params = random_params(net, batch["z"][:1], 3)
    return lambda p, b: jnp.sum((net.apply(p, b["z"]) - b["t"]) ** 2, -1), params, batch


def case_critic_twice():
    # The WGAN critic loss: models.Critic (an MLP) applied to a fake row and a real row.
    net, r = models.Critic(hidden=(6, 4)), rng(4)
    batch = {"real": normal(r, B, 5), "fake": normal(r, B, 5, scale=2.0)}
    params = random_params(net, batch["real"][:1], 4)
    return lambda p, b: net.apply(p, b["fake"]) - net.apply(p, b["real"]), params, batch


def case_autoencoder_submodules():
    # encode and decode_logits called separately; reconstruction loss is BCE from logits.
    net, r = models.Autoencoder(encoder_features=(5, 3), decoder_features=(5, 6)), rng(5)
    batch = {"x": r.uniform(size=(B, 6)).astype(np.float32)}
    params = random_params(net, batch["x"][:1], 5)

    def loss(p, b):
        z = net.apply(p, b["x"], method=models.Autoencoder.encode)
        logits = net.apply(p, z, method=models.Autoencoder.decode_logits)
        return jnp.sum(models.bce_with_logits(logits, b["x"]), -1)

    return loss, params, batch


def case_generator_through_frozen_nets():
    # Only the generator is differentiated; a frozen decoder and critic (closed over, not
    # parameters) follow it, and their Dense layers must not be mistaken for trained ones.
    gen = models.ResidualGenerator(features=(4, 4, 3), skip=(True, True, False))
    dec, crit, r = models.MLP((5, 6)), models.Critic(hidden=(4,)), rng(6)
    batch = {"z": normal(r, B, 4)}
    pg = random_params(gen, batch["z"][:1], 6)
    pd = random_params(dec, np.zeros((1, 3), np.float32), 7)
    pc = random_params(crit, np.zeros((1, 6), np.float32), 8)

    def loss(p, b):
        return -crit.apply(pc, jax.nn.sigmoid(dec.apply(pd, gen.apply(p, b["z"]))))

    return loss, pg, batch


def case_tokens():
    # Several tokens per example through one Dense/LayerNorm call (the Gram-form norms).
    net, r = TokenNet(), rng(7)
    batch = {"x": normal(r, B, 3, 4), "y": normal(r, B)}
    params = random_params(net, batch["x"][:1], 9)
    return lambda p, b: (net.apply(p, b["x"]) - b["y"]) ** 2, params, batch


def case_penalty_and_classifier():
    # DP-SACTGAN's critic mechanism in small: a critic's pair term with its gradient penalty (a
    # double backward) and a classifier's term on the real row, parameters in two groups.
    crit, clf, r = models.Critic(hidden=(6, 4)), DenseNormNet(), rng(10)
    batch = {"real": normal(r, B, 5), "fake": normal(r, B, 5, scale=2.0),
             "t": r.uniform(size=(B, 1)).astype(np.float32), "y": normal(r, B, 2)}
    params = {"critic": random_params(crit, batch["real"][:1], 10),
              "aux": random_params(clf, batch["real"][:1], 11)}

    def loss(p, b):
        score = lambda v: crit.apply(p["critic"], v)  # noqa: E731
        mid = b["t"] * b["real"] + (1.0 - b["t"]) * b["fake"]
        g = jax.grad(lambda v: jnp.sum(score(v)))(mid)
        penalty = (jnp.sqrt(jnp.sum(g * g, axis=1) + 1e-12) - 1.0) ** 2
        return (score(b["fake"]) - score(b["real"]) + 10.0 * penalty
                + jnp.sum((clf.apply(p["aux"], b["real"]) - b["y"]) ** 2, -1))

    return loss, params, batch


#: The critic mechanism's split: per-example gradients for the critic (a gradient penalty has no
#: ghost rule), ghost norms for the classifier, one clip over both.
GROUPED = {"critic": "vmap", "aux": "ghost"}

CASES: dict[str, Callable[[], tuple]] = {
    "dense_layernorm": case_dense_layernorm,
    "generator": case_generator,
    "critic_twice": case_critic_twice,
    "autoencoder_submodules": case_autoencoder_submodules,
    "generator_frozen_nets": case_generator_through_frozen_nets,
    "tokens": case_tokens,
}
# Cases whose parameters are in groups (a mapping of group to method, or one method for all).
GROUP_CASES: dict[str, Callable[[], tuple]] = {"penalty_and_classifier": case_penalty_and_classifier}


@dataclasses.dataclass
class Prepared:
    loss: Callable
    params: Any
    batch: Any
    grads: np.ndarray
    norms: np.ndarray
    fns: dict


_PREPARED: dict[str, Prepared] = {}


def prepared(name: str) -> Prepared:
    if name not in _PREPARED:
        loss, params, batch = {**CASES, **GROUP_CASES}[name]()
        grads, norms = per_example_loop(loss, params, batch)
        assert np.all(norms > 0)
        _PREPARED[name] = Prepared(loss, params, batch, grads, norms, {})
    return _PREPARED[name]


def clipped(prep: Prepared, method: str, clip_norm: float, mask) -> tuple[np.ndarray, dict]:
    """The engine's clipped sum at threshold ``clip_norm``, one compilation per (case, method).

    The engine runs at clip norm 1 on the loss scaled by s = 1/clip_norm (a per-example input, so
    no recompilation): grad(s L_i) = s g_i and min(1, 1/||s g_i||) s g_i = s min(1, C/||g_i||) g_i,
    so the sum times C is the clipped sum at C. Norms in ``aux`` are divided by s likewise.
    """
    tag = method if isinstance(method, str) else repr(sorted(method.items()))
    if tag not in prep.fns:
        scaled = lambda p, b: b["scale"] * prep.loss(p, b["data"])  # noqa: E731
        fn = dpsgd.clipped_grad_sum(scaled, 1.0, method=method, fallback="error")
        prep.fns[tag] = jax.jit(fn, compiler_options=FAST_COMPILE)
    batch = {"data": prep.batch, "scale": np.full(B, 1.0 / clip_norm, np.float32)}
    got, aux = prep.fns[tag](prep.params, batch, jnp.asarray(mask))
    aux = dict(aux, norms=np.asarray(aux["norms"]) * clip_norm)
    return flat64(got) * clip_norm, aux


def clip_norms(norms: np.ndarray) -> dict[str, float]:
    return {
        "tiny": float(norms.min()) * 1e-3,   # every example clipped
        "medium": float(np.median(norms)),   # about half clipped
        "huge": float(norms.max()) * 1e3,    # none clipped
    }


MASK = np.array([True, False, True, True, False, True, True, False])
ALL = np.ones(B, bool)
