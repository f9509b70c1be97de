"""Layer constructors with PyTorch-equivalent initialisation.

The papers' reference code is PyTorch, whose ``nn.Linear`` draws weight and bias from
U(-1/sqrt(fan_in), 1/sqrt(fan_in)) and whose ``nn.LayerNorm`` uses epsilon 1e-5. Reproducing
those defaults matters for DP-auto-GAN: the critic's +-0.01 weight clamp interacts with the
initial scale (see ``docs/dp-auto-gan.md``).

The constructors return plain ``flax.linen.Dense`` / ``LayerNorm`` modules, so that the
ghost-norm clipping of :mod:`dpgen_jax.dpsgd` recognises them.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import flax.linen as nn

Activation = Callable[[jax.Array], jax.Array]


def torch_bias_init(fan_in: int):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for a bias vector, as ``torch.nn.Linear``."""
    bound = 1.0 / float(fan_in) ** 0.5

    def init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return init


class TorchDense(nn.Module):
    """``nn.Dense`` with ``torch.nn.Linear`` initialisation (kernel and bias U(+-1/sqrt(fan_in))).

    The bias initialiser needs the fan-in, which is known only at the first call, so this thin
    wrapper creates the inner ``nn.Dense`` lazily. Parameters live at ``<name>/Dense_0``.
    """

    features: int
    use_bias: bool = True

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        fan_in = x.shape[-1]
        return nn.Dense(
            self.features,
            use_bias=self.use_bias,
            kernel_init=nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform"),
            bias_init=torch_bias_init(fan_in),
        )(x)


def leaky_relu(x: jax.Array) -> jax.Array:
    """LeakyReLU with negative slope 0.2, the slope every DP-auto-GAN network uses."""
    return nn.leaky_relu(x, negative_slope=0.2)


ACTIVATIONS: dict[str, Activation] = {
    "leaky_relu": leaky_relu,
    "tanh": jnp.tanh,
    "relu": nn.relu,
    "sigmoid": nn.sigmoid,
    "identity": lambda x: x,
}


def get_activation(name: str) -> Activation:
    """Look an activation up by name; raises ValueError naming the valid choices."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"Unknown activation {name!r}; expected one of {sorted(ACTIVATIONS)}."
        ) from None
