"""GS-WGAN's networks for tables (Chen, Orekondy and Fritz 2020, as adapted to tabular data in the
thesis the project follows; ``docs/gs-wgan.md``).

* Generator: ``z -> 128 -> 256 -> width`` with ReLU between layers and ``tanh`` on the output
  (rows are scaled to [-1, 1]).
* Critic: ``width -> 128 -> 1`` with LeakyReLU(0.2) and a linear score.

Both take a normalisation after each hidden Dense layer: ``"layer"`` (LayerNorm), ``"none"`` or
``"batch"`` (normalisation by the statistics of the batch the network is called on, with no
running averages, as the thesis's BatchNorm in training mode; GS-WGAN's sampler then generates in
batches of B, as in training). Initialisation is
PyTorch's default (``"torch"``) or the thesis's literal N(0, 1) weights with zero biases
(``"normal"``).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from dpgen_jax import _validate as _v
from dpgen_jax.models._layers import TorchDense, leaky_relu

NORMS = ("layer", "none", "batch")
INITS = ("torch", "normal")


def _dense(features: int, init: str) -> nn.Module:
    if init == "torch":
        return TorchDense(features)
    return nn.Dense(features, kernel_init=nn.initializers.normal(1.0), bias_init=nn.initializers.zeros)


def _normalise(x: jax.Array, norm: str) -> jax.Array:
    if norm == "layer":
        return nn.LayerNorm(epsilon=1e-5)(x)
    if norm == "batch":  # batch statistics (biased variance, torch's epsilon); affine in _BatchAffine
        mean = jnp.mean(x, axis=0, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=0, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5)
    return x


class _BatchAffine(nn.Module):
    @nn.compact
    def __call__(self, x):
        gamma = self.param("scale", nn.initializers.ones, (x.shape[-1],))
        beta = self.param("bias", nn.initializers.zeros, (x.shape[-1],))
        return _normalise(x, "batch") * gamma + beta


class GSWGANMLP(nn.Module):
    """Dense layers with a normalisation and an activation after each hidden layer.

    Attributes:
        widths: every layer's output width, the last one included.
        activation: ``"relu"`` or ``"leaky_relu"`` (slope 0.2) after each hidden layer.
        norm: one of :data:`NORMS`, applied before each hidden activation.
        initializer: one of :data:`INITS`.
        output: ``"tanh"`` or ``"linear"`` on the last layer.
    """

    widths: Sequence[int]
    activation: str = "relu"
    norm: str = "layer"
    initializer: str = "torch"
    output: str = "linear"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = nn.relu if self.activation == "relu" else leaky_relu
        for w in self.widths[:-1]:
            x = _dense(w, self.initializer)(x)
            if self.norm == "batch":
                x = _BatchAffine()(x)
            else:
                x = _normalise(x, self.norm)
            x = act(x)
        x = _dense(self.widths[-1], self.initializer)(x)
        return jnp.tanh(x) if self.output == "tanh" else x


class GSWGANNetworks(NamedTuple):
    generator: GSWGANMLP
    critic: GSWGANMLP


def gs_wgan_networks(width: int, *, generator_hidden: Sequence[int] = (128, 256),
                     critic_hidden: Sequence[int] = (128,), generator_norm: str = "layer",
                     critic_norm: str = "layer", init: str = "torch") -> GSWGANNetworks:
    """The generator (noise -> rows in (-1, 1)) and critic (rows -> one score per row).

    Raises:
        ValueError: an unknown normalisation or initialisation.
    """
    _v.one_of(NORMS, generator_norm=generator_norm)
    _v.one_of(NORMS, critic_norm=critic_norm)
    _v.one_of(INITS, init=init)
    gen = GSWGANMLP(tuple(generator_hidden) + (width,), "relu", generator_norm, init, "tanh")
    critic = GSWGANMLP(tuple(critic_hidden) + (1,), "leaky_relu", critic_norm, init, "linear")
    return GSWGANNetworks(gen, critic)


__all__ = ["GSWGANMLP", "GSWGANNetworks", "INITS", "NORMS", "gs_wgan_networks"]
