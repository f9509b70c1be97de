"""The networks of the reimplemented papers, as Flax Linen modules.

Every module here is per-example: no BatchNorm or any other layer that mixes the rows of a
batch (docs/privacy.md), so per-example gradients are well defined and the ghost-norm
clipping of :mod:`dpgen_jax.dpsgd` applies to all of them.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import flax.linen as nn

from dpgen_jax import _validate as _v
from dpgen_jax.models._layers import TorchDense, get_activation


class MLP(nn.Module):
    """A stack of ``TorchDense`` layers.

    Attributes:
        features: output width of each layer.
        activation: name of the activation after every hidden layer.
        final_activation: name of the activation after the last layer ("identity" for logits).
        init_scheme: ``"torch"`` (``torch.nn.Linear``'s, ``TorchDense``) or ``"he"`` (He-normal kernels,
            zero biases: activations keep their scale through ReLU layers, so the outputs vary
            with the input from the start; GEM's generator needs that).
    """

    features: Sequence[int]
    activation: str = "leaky_relu"
    final_activation: str = "identity"
    init_scheme: str = "torch"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = get_activation(self.activation)
        _v.one_of(("torch", "he"), init_scheme=self.init_scheme)
        for i, width in enumerate(self.features):
            if self.init_scheme == "torch":
                x = TorchDense(width, name=f"layer_{i}")(x)
            else:
                x = nn.Dense(width, kernel_init=nn.initializers.he_normal(), name=f"layer_{i}")(x)
            last = i == len(self.features) - 1
            x = get_activation(self.final_activation)(x) if last else act(x)
        return x


class Autoencoder(nn.Module):
    """Encoder and decoder MLPs; ``__call__`` returns the decoder's logits.

    The decoder's final layer is linear (logits). Data space outputs are
    ``sigmoid(logits)``; losses use the logits for numerical stability.

    Attributes:
        encoder_features: widths of the encoder layers (the last is the latent dimension).
        decoder_features: widths of the decoder layers (the last is the data width).
        encoder_activation: activation after every encoder layer, the latent included
            (DP-auto-GAN: LeakyReLU(0.2) for Adult, tanh for MIMIC).
        decoder_activation: activation after the decoder's hidden layers.
    """

    encoder_features: Sequence[int]
    decoder_features: Sequence[int]
    encoder_activation: str = "leaky_relu"
    decoder_activation: str = "leaky_relu"

    def setup(self):
        self.encoder = MLP(
            self.encoder_features,
            activation=self.encoder_activation,
            final_activation=self.encoder_activation,
        )
        self.decoder = MLP(self.decoder_features, activation=self.decoder_activation)

    def encode(self, x: jax.Array) -> jax.Array:
        return self.encoder(x)

    def decode_logits(self, z: jax.Array) -> jax.Array:
        return self.decoder(z)

    def decode(self, z: jax.Array) -> jax.Array:
        return nn.sigmoid(self.decoder(z))

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.decoder(self.encoder(x))


class Critic(nn.Module):
    """WGAN critic: an MLP with LeakyReLU(0.2) hidden layers and one linear output."""

    hidden: Sequence[int]

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return MLP(tuple(self.hidden) + (1,), activation="leaky_relu")(x)[..., 0]


class ResidualGenerator(nn.Module):
    """DP-auto-GAN's generator: blocks of Dense(no bias) -> LayerNorm(eps 1e-5) -> activation.

    Block ``i`` adds its input to its output when ``skip[i]`` is true and the widths match
    (the authors' code: x = b0(x) + x; x = b1(x) + x; x = b2(x)). LayerNorm, not BatchNorm
    (Tantipongpipat et al. 2021, the authors' released code): the released models use LayerNorm, and BatchNorm would mix rows.

    Attributes:
        features: output width of each block (the last is the latent dimension).
        skip: whether each block has a residual connection.
        activation: activation name after each LayerNorm.
    """

    features: Sequence[int]
    skip: Sequence[bool]
    activation: str = "leaky_relu"

    @nn.compact
    def __call__(self, z: jax.Array) -> jax.Array:
        if len(self.skip) != len(self.features):
            raise ValueError(
                f"skip has {len(self.skip)} entries but features has {len(self.features)}; "
                "expected one skip flag per block."
            )
        act = get_activation(self.activation)
        x = z
        for i, (width, skip) in enumerate(zip(self.features, self.skip)):
            h = TorchDense(width, use_bias=False, name=f"block_{i}_dense")(x)
            h = nn.LayerNorm(epsilon=1e-5, name=f"block_{i}_norm")(h)
            h = act(h)
            if skip:
                if h.shape[-1] != x.shape[-1]:
                    raise ValueError(
                        f"block {i} has a skip connection but maps width {x.shape[-1]} to {width}."
                    )
                h = h + x
            x = h
        return x


class DPAutoGANNetworks(NamedTuple):
    """DP-auto-GAN's four networks for one data width (structure only, no parameters)."""

    autoencoder: Autoencoder
    decoder: MLP
    generator: ResidualGenerator
    critic: Critic


def dp_auto_gan_networks(
    width: int,
    *,
    latent_dim: int = 15,
    ae_hidden: Sequence[int] | None = None,
    encoder_activation: str = "leaky_relu",
    generator_hidden: Sequence[int] = (64, 64),
    generator_activation: str = "leaky_relu",
    critic_hidden: Sequence[int] | None = None,
) -> DPAutoGANNetworks:
    """The networks of DP-auto-GAN (Tantipongpipat et al. 2021) for data of ``width`` columns.

    Sizes follow the authors' code: autoencoder ``width - (width + latent) // 2 - latent`` and
    back (``ae_hidden`` overrides the hidden widths; ``()`` for none), a residual generator of
    LayerNorm blocks (``generator_hidden`` wide, equal to the noise width so the skips add up)
    ending in the latent width, and a critic
    ``width - 2 * width // 3 - width // 3 - 1``. The defaults are the paper's Adult settings.
    ``decoder`` is the autoencoder's decoder as a stand-alone module (same parameter layout as
    ``autoencoder.decoder``), used to decode generated latent codes.
    """
    hidden = tuple(ae_hidden) if ae_hidden is not None else ((width + latent_dim) // 2,)
    critic = tuple(critic_hidden) if critic_hidden is not None else (2 * width // 3, width // 3)
    ae = Autoencoder(
        encoder_features=hidden + (latent_dim,),
        decoder_features=tuple(reversed(hidden)) + (width,),
        encoder_activation=encoder_activation,
    )
    decoder = MLP(ae.decoder_features, activation=ae.decoder_activation)
    gen = ResidualGenerator(
        features=tuple(generator_hidden) + (latent_dim,),
        skip=(True,) * len(generator_hidden) + (False,),
        activation=generator_activation,
    )
    return DPAutoGANNetworks(ae, decoder, gen, Critic(hidden=critic))


def adult_autoencoder() -> Autoencoder:
    """DP-auto-GAN's Adult autoencoder: 106-60-15-60-106, LeakyReLU(0.2), sigmoid output."""
    return dp_auto_gan_networks(106).autoencoder


def adult_critic() -> Critic:
    """DP-auto-GAN's Adult critic: 106-70-35-1 with LeakyReLU(0.2)."""
    return dp_auto_gan_networks(106).critic


def adult_generator() -> ResidualGenerator:
    """DP-auto-GAN's Adult generator: noise 64 -> 64 (+skip) -> 64 (+skip) -> 15, LayerNorm."""
    return dp_auto_gan_networks(106).generator


def _mimic(n_features: int, latent: int) -> DPAutoGANNetworks:
    return dp_auto_gan_networks(n_features, latent_dim=latent, ae_hidden=(), encoder_activation="tanh",
                                generator_activation="tanh")


def mimic_autoencoder(n_features: int = 1071, latent: int = 128) -> Autoencoder:
    """DP-auto-GAN's MIMIC autoencoder: n-128 tanh encoder, 128-n sigmoid decoder."""
    return _mimic(n_features, latent).autoencoder


def mimic_critic(n_features: int = 1071) -> Critic:
    """DP-auto-GAN's MIMIC critic as in the authors' DP code: n-714-357-1."""
    return _mimic(n_features, 128).critic


def mimic_generator(latent: int = 128) -> ResidualGenerator:
    """DP-auto-GAN's MIMIC generator: 64 -> 64 (+skip) -> 64 (+skip) -> latent, LayerNorm + tanh."""
    return _mimic(2, latent).generator


def bce_with_logits(logits: jax.Array, targets: jax.Array) -> jax.Array:
    """Elementwise binary cross-entropy from logits (stable form)."""
    return jnp.maximum(logits, 0) - logits * targets + jnp.log1p(jnp.exp(-jnp.abs(logits)))
