"""The networks of DP-auto-GAN's two baselines: DP-WGAN and DP-VAE.

* DP-WGAN (Frigerio, Santana de Oliveira, Gomez and Duverger 2019, "Differentially Private
  Generative Adversarial Networks for Time Series, Continuous, and Discrete Open Data"): a
  generator and a critic in data space. The generator maps N(0, I) noise to one logit per
  encoded column (the synthesizer turns them into a softmax per categorical block and a sigmoid
  elsewhere); the critic is an MLP with one linear output.
* DP-VAE (the variational autoencoder of SAP's differential-privacy tutorial, after Kingma and
  Welling 2014, "Auto-Encoding Variational Bayes"): an encoder to the mean and log-variance of a
  Gaussian latent code and a decoder from the code to one logit per encoded column.

Every layer is a ``flax.linen.Dense`` (through :class:`~dpgen_jax.models.TorchDense`), so the
ghost-norm clipping of :mod:`dpgen_jax.dpsgd` applies to all of them.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from dpgen_jax.models._layers import TorchDense
from dpgen_jax.models._networks import MLP, Critic


class DPWGANNetworks(NamedTuple):
    """DP-WGAN's generator (noise -> logits of the encoded columns) and critic (rows -> scores)."""

    generator: MLP
    critic: Critic


def dp_wgan_networks(width: int, *, hidden: Sequence[int] = (64, 64, 64),
                     critic_hidden: Sequence[int] | None = None) -> DPWGANNetworks:
    """DP-WGAN's networks for encoded rows of ``width`` columns.

    The layout follows the reference implementation (SAP's ``models.py``): generator
    ``noise -> hidden... -> width`` and critic ``width -> critic_hidden... -> 1``, LeakyReLU(0.2)
    between layers. The reference uses three hidden layers of 512 units for both; the widths are
    parameters here (``docs/dp-wgan.md`` says which the presets use and why).

    Args:
        width: Encoded width of the rows (the generator's output, the critic's input).
        hidden: Hidden widths of the generator.
        critic_hidden: Hidden widths of the critic (default: ``hidden``).
    """
    critic = tuple(critic_hidden) if critic_hidden is not None else tuple(hidden)
    return DPWGANNetworks(MLP(tuple(hidden) + (width,), activation="leaky_relu"), Critic(hidden=critic))


class VAE(nn.Module):
    """A Gaussian-latent variational autoencoder over encoded rows; outputs are logits.

    ``__call__(x, eps)`` returns ``(logits, mean, log_var)`` with the latent code
    ``z = mean + exp(log_var / 2) * eps``: the reparameterisation noise ``eps`` (shape
    ``(B, latent_dim)``) is an input, so every call is deterministic and per-example (row i of
    every output depends only on row i of ``x`` and ``eps``).

    Attributes:
        width: Encoded width of the rows.
        hidden: Hidden widths of the encoder (the decoder mirrors them).
        latent_dim: Dimension of the latent code.
        encoder_activation: Activation after the encoder's hidden layers.
        decoder_activation: Activation after the decoder's hidden layers.
    """

    width: int
    hidden: Sequence[int] = (32,)
    latent_dim: int = 2
    encoder_activation: str = "sigmoid"
    decoder_activation: str = "relu"

    def setup(self):
        self.encoder = MLP(tuple(self.hidden), activation=self.encoder_activation,
                           final_activation=self.encoder_activation)
        self.mean_head = TorchDense(self.latent_dim)
        self.log_var_head = TorchDense(self.latent_dim)
        self.decoder = MLP(tuple(reversed(tuple(self.hidden))) + (self.width,),
                           activation=self.decoder_activation)

    def encode(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(mean, log_var)`` of q(z | x), each ``(B, latent_dim)``."""
        h = self.encoder(x)
        return self.mean_head(h), self.log_var_head(h)

    def decode(self, z: jax.Array) -> jax.Array:
        """Logits of p(x | z), ``(B, width)``."""
        return self.decoder(z)

    def __call__(self, x: jax.Array, eps: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        mean, log_var = self.encode(x)
        z = mean + jnp.exp(0.5 * log_var) * eps
        return self.decode(z), mean, log_var


def vae_decoder(vae: VAE) -> MLP:
    """The decoder of ``vae`` as a stand-alone module (same parameter layout as ``params["decoder"]``)."""
    return MLP(tuple(reversed(tuple(vae.hidden))) + (vae.width,), activation=vae.decoder_activation)


def gaussian_kl(mean: jax.Array, log_var: jax.Array) -> jax.Array:
    """KL(N(mean, exp(log_var)) || N(0, I)) per row, summed over the last axis: ``(B,)``."""
    return 0.5 * jnp.sum(jnp.square(mean) + jnp.exp(log_var) - 1.0 - log_var, axis=-1)


__all__ = ["DPWGANNetworks", "VAE", "dp_wgan_networks", "gaussian_kl", "vae_decoder"]
