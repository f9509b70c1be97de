"""The networks against the papers' specification (Tantipongpipat et al. 2021 and the authors' code; docs/dp-auto-gan.md) and numpy forward passes.

Parameter counts are those of the authors' released networks; initialisation is PyTorch's nn.Linear default
U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases; forward passes are re-implemented in
float64 numpy from the architecture's description (LayerNorm eps 1e-5, skips on the first two generator
blocks only, LeakyReLU(0.2)), with random parameters so that every weight matters.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpgen_jax import models
from tests._compile import FAST_COMPILE


def _count(net, width: int) -> int:
    shapes = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((1, width)))
    return sum(int(np.prod(s.shape)) for s in jax.tree_util.tree_leaves(shapes))


def _random_params(net, width: int, seed: int, scale: float = 1.0):
    shapes = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((1, width)))
    r = np.random.default_rng(seed)
    return jax.tree_util.tree_map(
        lambda s: (scale * r.normal(size=s.shape) / np.sqrt(s.shape[0] if len(s.shape) > 1 else 4))
        .astype(np.float32), shapes)


def _apply(net, params, x, **kwargs):
    fn = jax.jit(functools.partial(net.apply, **kwargs), compiler_options=FAST_COMPILE)
    return np.asarray(fn(params, x), np.float64)


def _leaky(x):
    return np.where(x >= 0, x, 0.2 * x)


def _dense(p, x):
    out = x @ np.asarray(p["kernel"], np.float64)
    return out + np.asarray(p["bias"], np.float64) if "bias" in p else out


def _layernorm(p, x, eps):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * np.asarray(p["scale"]) + np.asarray(p["bias"])


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, width, expected",
    [
        (models.adult_autoencoder, 106, 14_761),  # the authors' released Adult autoencoder
        (models.adult_generator, 64, 9_438),
        (models.adult_critic, 106, 10_011),
        (models.mimic_critic, 1071, 1_021_021),  # the authors' code's 1071-714-357-1 critic
        # 1071-128 tanh encoder and 128-1071 decoder, as in the authors' code.
        (models.mimic_autoencoder, 1071, 1071 * 128 + 128 + 128 * 1071 + 1071),
        # 64 -> 64 -> 64 -> 128 blocks, Dense without bias + LayerNorm(scale, bias).
        (models.mimic_generator, 64, 2 * (64 * 64 + 2 * 64) + 64 * 128 + 2 * 128),
    ],
)
def test_parameter_counts(make, width, expected):
    assert _count(make(), width) == expected


def test_output_shapes():
    ae, gen, crit = models.adult_autoencoder(), models.adult_generator(), models.adult_critic()
    assert jax.eval_shape(lambda x: ae.init_with_output(jax.random.key(0), x)[0],
                          jnp.zeros((5, 106))).shape == (5, 106)
    assert jax.eval_shape(lambda x: gen.init_with_output(jax.random.key(0), x)[0],
                          jnp.zeros((5, 64))).shape == (5, 15)
    assert jax.eval_shape(lambda x: crit.init_with_output(jax.random.key(0), x)[0],
                          jnp.zeros((5, 106))).shape == (5,)


# --------------------------------------------------------------------------------------------
# PyTorch initialisation
# --------------------------------------------------------------------------------------------


def test_torch_style_initialisation():
    net = models.MLP((300, 40))
    init = jax.jit(net.init, compiler_options=FAST_COMPILE)
    params = init(jax.random.key(0), jnp.zeros((1, 200)))["params"]
    for layer, fan_in in (("layer_0", 200), ("layer_1", 300)):
        bound = 1.0 / np.sqrt(fan_in)
        p = params[layer]["Dense_0"]
        for name in ("kernel", "bias"):
            w = np.asarray(p[name]).ravel()
            assert np.all(np.abs(w) <= bound), (layer, name)
            # Uniform on (-bound, bound): KS test, and the spread really reaches the bound.
            ks = stats.kstest(w, stats.uniform(-bound, 2 * bound).cdf)
            assert ks.pvalue > 1e-4, (layer, name)
            assert np.abs(w).max() > 0.9 * bound
    # The bias is not Flax's default (zeros), the kernel not lecun_normal (unbounded).
    assert np.asarray(params["layer_0"]["Dense_0"]["bias"]).std() > 0.5 / np.sqrt(3 * 200)


def test_generator_initialisation():
    gen = models.adult_generator()
    params = jax.jit(gen.init, compiler_options=FAST_COMPILE)(jax.random.key(1),
                                                              jnp.zeros((1, 64)))["params"]
    for i in range(3):
        dense = params[f"block_{i}_dense"]["Dense_0"]
        assert set(dense) == {"kernel"}  # no bias
        assert np.all(np.abs(np.asarray(dense["kernel"])) <= 1 / np.sqrt(64))
        norm = params[f"block_{i}_norm"]
        np.testing.assert_array_equal(np.asarray(norm["scale"]), 1.0)
        np.testing.assert_array_equal(np.asarray(norm["bias"]), 0.0)


# --------------------------------------------------------------------------------------------
# Forward passes against numpy
# --------------------------------------------------------------------------------------------


def _generator_numpy(params, z, eps, skips, act):
    x = np.asarray(z, np.float64)
    for i, skip in enumerate(skips):
        h = _dense(params[f"block_{i}_dense"]["Dense_0"], x)
        h = act(_layernorm(params[f"block_{i}_norm"], h, eps))
        x = h + x if skip else h
    return x


@pytest.mark.parametrize("make, act", [(models.adult_generator, _leaky),
                                       (models.mimic_generator, np.tanh)], ids=["adult", "mimic"])
def test_generator_forward_layernorm_eps_and_residual_wiring(make, act):
    gen = make()
    params = _random_params(gen, 64, 2)
    p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params["params"])
    r = np.random.default_rng(3)

    def far(out, other):
        return np.max(np.abs(out - other)) > 1e-2

    # Unit-scale noise: the wiring (skips on blocks 0 and 1 only) shows.
    z = r.normal(size=(16, 64)).astype(np.float32)
    out = _apply(gen, params, z)
    expected = _generator_numpy(p, z, 1e-5, (True, True, False), act)
    np.testing.assert_allclose(out, expected, rtol=2e-4, atol=2e-5)
    for wrong in ((False, False, False), (True, False, False), (False, True, False)):
        assert far(out, _generator_numpy(p, z, 1e-5, wrong, act)), wrong
    # Tiny noise: the pre-norm variance of block 0 is comparable to eps, so 1e-5 vs Flax's
    # default 1e-6 shows.
    z = (1e-3 * r.normal(size=(16, 64))).astype(np.float32)
    out = _apply(gen, params, z)
    np.testing.assert_allclose(out, _generator_numpy(p, z, 1e-5, (True, True, False), act),
                               rtol=2e-4, atol=2e-5)
    assert far(out, _generator_numpy(p, z, 1e-6, (True, True, False), act))


def test_autoencoder_and_critic_forward():
    r = np.random.default_rng(4)
    x = r.uniform(size=(10, 106)).astype(np.float32)
    ae = models.adult_autoencoder()
    params = _random_params(ae, 106, 5)
    p = params["params"]
    enc = lambda v: _leaky(_dense(p["encoder"]["layer_1"]["Dense_0"],  # noqa: E731
                                  _leaky(_dense(p["encoder"]["layer_0"]["Dense_0"], v))))
    dec = lambda v: _dense(p["decoder"]["layer_1"]["Dense_0"],  # noqa: E731
                           _leaky(_dense(p["decoder"]["layer_0"]["Dense_0"], v)))
    z = enc(x.astype(np.float64))
    assert z.shape == (10, 15) and np.any(z < 0)  # the latent ends in LeakyReLU, not ReLU
    np.testing.assert_allclose(_apply(ae, params, x), dec(z), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_apply(ae, params, x, method=models.Autoencoder.encode), z,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_apply(ae, params, z.astype(np.float32),
                                      method=models.Autoencoder.decode),
                               1 / (1 + np.exp(-dec(z))), rtol=1e-4, atol=1e-5)

    crit = models.adult_critic()
    params = _random_params(crit, 106, 6)
    p = params["params"]["MLP_0"]
    h = _leaky(_dense(p["layer_1"]["Dense_0"], _leaky(_dense(p["layer_0"]["Dense_0"], x))))
    np.testing.assert_allclose(_apply(crit, params, x), _dense(p["layer_2"]["Dense_0"], h)[:, 0],
                               rtol=1e-4, atol=1e-5)


def test_mimic_autoencoder_encoder_is_tanh():
    ae = models.mimic_autoencoder(n_features=20, latent=6)
    params = _random_params(ae, 20, 7, scale=3.0)
    x = np.random.default_rng(8).uniform(size=(4, 20)).astype(np.float32)
    p = params["params"]["encoder"]["layer_0"]["Dense_0"]
    np.testing.assert_allclose(_apply(ae, params, x, method=models.Autoencoder.encode),
                               np.tanh(_dense(p, x.astype(np.float64))), rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------------
# Loss and small helpers
# --------------------------------------------------------------------------------------------


def test_bce_with_logits_matches_direct_formula():
    r = np.random.default_rng(9)
    logits = r.uniform(-8, 8, size=500)
    targets = np.concatenate([r.integers(0, 2, 250), r.uniform(0, 1, 250)])
    p = 1 / (1 + np.exp(-logits))
    direct = -(targets * np.log(p) + (1 - targets) * np.log(1 - p))
    got = np.asarray(models.bce_with_logits(jnp.asarray(logits, jnp.float32),
                                            jnp.asarray(targets, jnp.float32)), np.float64)
    np.testing.assert_allclose(got, direct, rtol=1e-5, atol=1e-6)
    # Stable where the direct formula saturates in float32.
    big = np.asarray(models.bce_with_logits(jnp.array([100.0, -100.0, 100.0, -100.0]),
                                            jnp.array([0.0, 1.0, 1.0, 0.0])))
    np.testing.assert_allclose(big, [100.0, 100.0, 0.0, 0.0], atol=1e-6)


def test_leaky_relu_slope_and_activation_lookup():
    x = jnp.array([-2.0, 0.0, 3.0])
    np.testing.assert_allclose(np.asarray(models.leaky_relu(x)), [-0.4, 0.0, 3.0], rtol=1e-6)
    assert models.get_activation("tanh") is jnp.tanh
    with pytest.raises(ValueError, match="swish"):
        models.get_activation("swish")


def test_generator_rejects_bad_skip_configuration():
    with pytest.raises(ValueError, match="skip"):
        jax.eval_shape(models.ResidualGenerator(features=(4, 4), skip=(True,)).init,
                       jax.random.key(0), jnp.zeros((1, 4)))
    with pytest.raises(ValueError, match="block 0"):
        jax.eval_shape(models.ResidualGenerator(features=(5,), skip=(True,)).init,
                       jax.random.key(0), jnp.zeros((1, 4)))
