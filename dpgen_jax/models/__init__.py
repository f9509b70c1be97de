"""Flax modules: MLPs, autoencoders, critics and generators of the reimplemented papers.

All modules are per-example (no BatchNorm), initialised like their PyTorch originals.
"""

from dpgen_jax.models._layers import ACTIVATIONS, TorchDense, get_activation, leaky_relu, torch_bias_init
from dpgen_jax.models._networks import (
    MLP,
    Autoencoder,
    Critic,
    ResidualGenerator,
    adult_autoencoder,
    adult_critic,
    adult_generator,
    bce_with_logits,
    mimic_autoencoder,
    mimic_critic,
    mimic_generator,
)

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "Autoencoder",
    "Critic",
    "ResidualGenerator",
    "TorchDense",
    "adult_autoencoder",
    "adult_critic",
    "adult_generator",
    "bce_with_logits",
    "get_activation",
    "leaky_relu",
    "mimic_autoencoder",
    "mimic_critic",
    "mimic_generator",
    "torch_bias_init",
]
