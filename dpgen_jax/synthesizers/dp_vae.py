"""DP-VAE, the variational-autoencoder baseline of DP-auto-GAN (the DP variational autoencoder of
SAP's differential-privacy tutorial, after Kingma and Welling 2014; as run by Tantipongpipat et
al. 2021). See ``docs/dp-vae.md``.

One phase touches the private rows: the encoder and the decoder are trained *jointly* with
DP-SGD (exact Poisson sampling, one clipped per-example gradient over all their parameters,
Gaussian noise) on the negative ELBO of each row: the mixed-type reconstruction loss summed over
the encoder's column blocks (:mod:`dpgen_jax.synthesizers._losses`) plus the KL divergence of the
row's Gaussian code from the N(0, I) prior. The per-example reparameterisation noise is drawn by
the step's batch builder. Sampling draws z ~ N(0, I), decodes it, and draws each discrete column
from the decoder's output probabilities (the model's own p(x | z)). Only the decoder is released.

Functional API: :func:`init`, :func:`elbo_loss_fn`, :func:`reparameterised_batch`,
:func:`resolve_clip_norm`, :func:`train_vae`, :func:`sample_encoded`, :func:`privacy_phases`.
Class API: :class:`DPVAE` (``synthesizers.create("dp-vae")``).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, models
from dpgen_jax.synthesizers import _losses, _dpsgd_phases
from dpgen_jax.synthesizers._base import Flags, Synthesizer, Release, register
from dpgen_jax.synthesizers._config import GeneratorConfig

# The paper's noise multipliers for epsilon 0.36 / 0.51 / 1.01 (Tantipongpipat et al. 2021, App. E.3)
# at the default batch size; each step count is the largest whose epsilon under the paper's
# accounting (RDP, classic conversion, delta 1e-5) stays at or below the paper's epsilon for
# Adult's 32,561 training rows (tests/test_dp_vae.py recomputes them).
PAPER_BATCH_SIZE = 64
PAPER_PRESETS: dict[str, dict[str, Any]] = {
    "paper-0.36": {"batch_size": PAPER_BATCH_SIZE, "noise_multiplier": 5.0, "steps": 34955},
    "paper-0.51": {"batch_size": PAPER_BATCH_SIZE, "noise_multiplier": 4.0, "steps": 44097},
    "paper-1.01": {"batch_size": PAPER_BATCH_SIZE, "noise_multiplier": 2.0, "steps": 38167},
}
CLIP_NORM_RULES = ("public-median",)
# The speed settings this method reads and their defaults (synthesizers.Flags).
FLAGS = Flags(clip_method="ghost", chunk_size=5000)


@dataclasses.dataclass(frozen=True)
class DPVAEConfig(GeneratorConfig):
    """Hyperparameters of DP-VAE. All fields are public and go into the privacy report.

    The defaults are the ``"paper-1.01"`` schedule and the tutorial's network (sigmoid encoder,
    ReLU decoder, one hidden layer) widened to 64 units and an 8-dimensional latent code (the
    tutorial's 32 and 2 learned no dependence between the columns of public Adult-like data);
    ``docs/dp-vae.md`` says where every value comes from. ``clip_norm="public-median"``: see :func:`resolve_clip_norm` (no private row is read).
    """


    hidden: tuple[int, ...] = (64,)               # the tutorial: (32,)
    latent_dim: int = 8                           # the tutorial: 2
    encoder_activation: str = "sigmoid"
    decoder_activation: str = "relu"
    continuous_loss: str = "mse"
    batch_size: int = PAPER_BATCH_SIZE
    steps: int = PAPER_PRESETS["paper-1.01"]["steps"]
    learning_rate: float = 1e-3
    noise_multiplier: float = PAPER_PRESETS["paper-1.01"]["noise_multiplier"]
    clip_norm: float | str = "public-median"

    def validate(self) -> DPVAEConfig:
        _v.one_of(_losses.CONTINUOUS_LOSSES, continuous_loss=self.continuous_loss)
        models.get_activation(self.encoder_activation)
        models.get_activation(self.decoder_activation)
        for name in ("latent_dim", "batch_size"):
            _v.whole(minimum=1, **{name: getattr(self, name)})
        _v.whole(minimum=0, steps=self.steps)
        _v.widths(allow_empty=True, hidden=self.hidden)
        if isinstance(self.clip_norm, str):
            _v.one_of(CLIP_NORM_RULES, clip_norm=self.clip_norm)
        else:
            _v.positive(clip_norm=self.clip_norm)  # a number, or one of the rules above
        for name in ("noise_multiplier", "learning_rate"):
            _v.positive(**{name: getattr(self, name)})
        return super().validate()


def network(config: DPVAEConfig, width: int) -> models.VAE:
    return models.VAE(width, hidden=config.hidden, latent_dim=config.latent_dim,
                      encoder_activation=config.encoder_activation,
                      decoder_activation=config.decoder_activation)


@functools.partial(jax.jit, static_argnums=(0, 1))
def init(config: DPVAEConfig, width: int, key: jax.Array) -> PyTree:
    """Initial parameters (PyTorch-style initialisation) of the encoder and the decoder."""
    return network(config, width).init(key, jnp.zeros((1, width)),
                                       jnp.zeros((1, config.latent_dim)))["params"]


def elbo_loss_fn(config: DPVAEConfig, blocks: tuple) -> Callable[[PyTree, PyTree], jax.Array]:
    """Per-example negative ELBO ``loss(params, {"x": (B, width), "eps": (B, latent)}) -> (B,)``:
    the mixed-type reconstruction loss summed over blocks plus KL(q(z | x) || N(0, I))."""
    width = max(b.stop for b in blocks)
    vae = network(config, width)
    recon = _losses.reconstruction_loss(blocks, config.continuous_loss)

    def loss(params, batch):
        logits, mean, log_var = vae.apply({"params": params}, batch["x"], batch["eps"])
        return recon(logits, batch["x"]) + models.gaussian_kl(mean, log_var)

    return loss


def reparameterised_batch(latent_dim: int):
    """The batch builder of the DP-SGD step: the sampled rows and one N(0, I) draw per row."""

    def batch_fn(data, idx, key, extra):
        del extra
        return {"x": jnp.take(data, idx, axis=0), "eps": jax.random.normal(key, (idx.shape[0], latent_dim))}

    return batch_fn


def train_vae(config: DPVAEConfig, blocks: tuple, params, data: jax.Array, key: jax.Array, phase, *,
              progress=None, should_stop=None, checkpoint=None,
              flags: Flags = FLAGS) -> dpsgd.TrainState:
    """The ``phase.steps`` steps of the accounted ``phase`` (from :func:`privacy_phases`, its clip
    norm resolved; a ``NonPrivatePhase``: non-private) on the joint encoder and decoder."""
    return _dpsgd_phases.run_private_phase(
        elbo_loss_fn(config, blocks), _dpsgd_phases.torch_adam(config.learning_rate), params, data, key,
        phase, method=flags.clip_method,
        chunk_size=flags.chunk_size, progress=progress, should_stop=should_stop,
        batch_fn=reparameterised_batch(config.latent_dim), checkpoint=checkpoint)


def resolve_clip_norm(config: DPVAEConfig, schema: data_lib.Schema, params,
                      key: jax.Array) -> tuple[float, str]:
    """The clip norm and the report sentence saying how it was chosen (no private row is read).

    ``"public-median"``: the median per-example gradient norm of the negative ELBO at the
    initial parameters over rows drawn uniformly from the public schema (``docs/dp-vae.md``).
    """
    if not isinstance(config.clip_norm, str):
        value = float(config.clip_norm)
        return value, f"The clip norm C={value} is a fixed configuration value."
    blocks = tuple(data_lib.TableEncoder(schema).blocks)
    k_rows, k_eps = jax.random.split(key)
    batch = {"x": data_lib.uniform_rows(schema, 1024, k_rows),
             "eps": jax.random.normal(k_eps, (1024, config.latent_dim))}
    value = _dpsgd_phases.median_grad_norm(elbo_loss_fn(config, blocks), params, batch)
    return value, (
        f"The clip norm C={value:.6g} was chosen without the private rows: the median per-example "
        "gradient norm of the initial networks on rows drawn uniformly from the public schema.")


@functools.partial(jax.jit, static_argnums=(0, 1, 4))
def _sample_jit(config, blocks, dec_params, key, n: int):
    width = max(b.stop for b in blocks)
    decoder = models.vae_decoder(network(config, width))
    logits = decoder.apply({"params": dec_params}, jax.random.normal(key, (n, config.latent_dim)))
    return _losses.output_activation(blocks)(logits)


def sample_encoded(config: DPVAEConfig, schema: data_lib.Schema, dec_params, n: int,
                   key: jax.Array) -> np.ndarray:
    """``n`` rows decoded from z ~ N(0, I), in the encoded layout (probabilities in [0, 1])."""
    blocks = tuple(data_lib.TableEncoder(schema).blocks)
    return np.asarray(_sample_jit(config, blocks, dec_params, key, int(n)))


def privacy_phases(config: DPVAEConfig, num_records: int, *, steps: Mapping[str, int] | None = None,
                   private: bool = True) -> list:
    """One phase: the joint encoder-decoder Poisson-subsampled Gaussian DP-SGD (or non-private)."""
    return [_dpsgd_phases.dpsgd_phase(
        "vae", batch_size=config.batch_size, num_records=num_records,
        noise_multiplier=config.noise_multiplier, steps=dict(steps or {}).get("vae", config.steps),
        clip_norm=config.clip_norm, private=private)]


@register
class DPVAE(Synthesizer):
    """DP-VAE with a scikit-learn-like interface.

    ``sample`` draws z ~ N(0, I) and each discrete column from the decoder's output probabilities
    by default (``mode="sample"``, the model's p(x | z)); ``mode="argmax"`` takes the most likely
    category instead.

    Example:
        >>> model = DPVAE().fit(train_df, data.adult_schema(), preset="paper-0.51")  # doctest: +SKIP
        >>> model.sample(1000)                                                     # doctest: +SKIP
    """

    METHOD = "dp-vae"
    DESCRIPTION = ("variational autoencoder trained with DP-SGD on the ELBO, sampled from the prior "
                   "(SAP's DP-VAE tutorial), the baseline of Tantipongpipat et al. 2021")
    CONFIG = DPVAEConfig
    SMOKE = dict(steps=12, batch_size=16, chunk_size=4, clip_norm=0.5)
    PRESETS = PAPER_PRESETS
    DECODE_MODE = "sample"
    CHECKPOINTS = True
    FLAGS = FLAGS

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, num_records, private=private)

    def _train(self, plan, x, key, hooks) -> Release:
        config = plan.config
        blocks = tuple(data_lib.TableEncoder(plan.model_schema).blocks)
        k_init, k_clip, k_train = jax.random.split(key, 3)
        params = init(config, x.shape[1], k_init)
        t0 = time.perf_counter()
        notes, phase, clip_norms = [], plan.phase("vae"), {}
        if plan.private:
            clip, note = resolve_clip_norm(config, plan.model_schema, params, k_clip)
            config, phase = config.replace(clip_norm=clip), phase.with_clip_norm(clip)
            clip_norms["vae"] = clip
            notes += [note, "Encoder and decoder are clipped together (one per-example gradient over "
                      "both) and both get noise; only the decoder is released."]
            if plan.preset is not None:
                notes.append("The preset's noise multiplier is the paper's, which its authors chose "
                             "by validation accuracy on the real data; that search is not accounted.")
        t1 = time.perf_counter()
        state = train_vae(config, blocks, params, x, k_train, phase, **hooks.phase_args("vae"))
        jax.block_until_ready(state.params)
        t2 = time.perf_counter()
        return Release(arrays={"decoder": state.params["decoder"]},
                           steps={"vae": int(state.steps)}, clip_norms=clip_norms, seconds={"clip_norm": t1 - t0, "vae": t2 - t1},
                           notes=tuple(notes))

    def _sample_encoded(self, n, key):
        return sample_encoded(self.fitted_config, self.model_schema, self.released["decoder"], n, key)

    def _release_shapes(self, config, schema, statistics):
        width = data_lib.TableEncoder(schema).width
        return {"decoder": jax.eval_shape(lambda k: init(config, width, k), jax.random.key(0))["decoder"]}
