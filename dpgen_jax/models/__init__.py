"""Flax modules: MLPs, autoencoders, critics and generators of the reimplemented papers.

All modules are per-example (no BatchNorm), initialised like their PyTorch originals.
"""

from dpgen_jax.models._baselines import VAE, DPWGANNetworks, dp_wgan_networks, gaussian_kl, vae_decoder
from dpgen_jax.models._gswgan import GSWGANMLP, GSWGANNetworks, gs_wgan_networks
from dpgen_jax.models._sactgan import AuxClassifier, ColumnTokenCritic, ColumnTokenGenerator, PreLNBlock
from dpgen_jax.models._layers import ACTIVATIONS, TorchDense, get_activation, leaky_relu, torch_bias_init
from dpgen_jax.models._networks import (
    MLP,
    Autoencoder,
    Critic,
    DPAutoGANNetworks,
    ResidualGenerator,
    adult_autoencoder,
    adult_critic,
    adult_generator,
    bce_with_logits,
    dp_auto_gan_networks,
    mimic_autoencoder,
    mimic_critic,
    mimic_generator,
)

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "AuxClassifier",
    "Autoencoder",
    "ColumnTokenCritic",
    "ColumnTokenGenerator",
    "PreLNBlock",
    "Critic",
    "GSWGANMLP",
    "GSWGANNetworks",
    "DPAutoGANNetworks",
    "DPWGANNetworks",
    "ResidualGenerator",
    "TorchDense",
    "VAE",
    "adult_autoencoder",
    "adult_critic",
    "adult_generator",
    "bce_with_logits",
    "dp_auto_gan_networks",
    "dp_wgan_networks",
    "gaussian_kl",
    "gs_wgan_networks",
    "get_activation",
    "leaky_relu",
    "mimic_autoencoder",
    "mimic_critic",
    "mimic_generator",
    "torch_bias_init",
    "vae_decoder",
]
