"""DP-auto-GAN (Tantipongpipat, Waites, Boob, Siva, Cummings 2021, "Differentially Private
Synthetic Mixed-Type Data Generation For Unsupervised Learning"). See ``docs/dp-auto-gan.md``.

Two phases touch the private rows, both DP-SGD with exact Poisson sampling:

1. **Autoencoder.** Encoder and decoder are privatised *together*: one clipped per-example
   gradient over all their parameters and noise on both. (The published algorithm trains the
   encoder without noise, which is not private; ``docs/dp-auto-gan.md`` explains why.)
2. **GAN in the latent space.** A generator maps N(0, I) noise to latent codes, the frozen decoder
   maps them to data space, and a critic trained with DP-SGD compares them with real rows
   (:mod:`dpgen_jax.synthesizers._gan`): each real row paired with one fresh generated row (the
   paper's form, default) or only the real term clipped. The generator steps every
   ``critic_steps_per_generator_step`` critic steps and sees no real row.

Only the generator and the decoder are released. Functional API: :func:`init`,
:func:`train_autoencoder`, :func:`make_gan_runner`, :func:`train_gan`, :func:`sample_encoded`,
:func:`privacy_phases`, :func:`resolve_ae_clip_norm`. Class API: :class:`DPAutoGAN`
(``synthesizers.create("dp-auto-gan")``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, models
from dpgen_jax.synthesizers import _gan, _dpsgd_phases
from dpgen_jax.synthesizers._base import Flags, Synthesizer, Release, register
from dpgen_jax.synthesizers._config import GeneratorConfig


# The paper's settings by its epsilon (RDP + classic conversion): family, autoencoder and critic
# sigma, steps. Adult: 10,000 autoencoder and 15,000 critic steps on any table size, with the
# paper's encoding, decoding and clip norm; MIMIC-III (binary data): one sigma for both phases and
# the published critic steps.
PAPER_ADULT_FORM = {"continuous_encoding": "paper", "decode": "argmax", "ae_clip_norm": "paper-joint",
                    "critic_steps_per_generator_step": 15, "ae_batch_size": 64}
_ADULT_STEPS = {"ae_steps": 10_000, "critic_steps": 15_000, **PAPER_ADULT_FORM}
PAPER_PRESETS: dict[str, dict[str, Any]] = {
    f"paper-{eps}": {"family": family, "ae_noise_multiplier": ae, "critic_noise_multiplier": critic, **steps}
    for eps, family, ae, critic, steps in (
        ("0.36", "adult", 5.0, 8.0, _ADULT_STEPS),
        ("0.51", "adult", 2.5, 7.5, _ADULT_STEPS),
        ("1.01", "adult", 1.5, 3.5, _ADULT_STEPS),
        ("0.81", "binary", 3.5, 3.5, {"critic_steps": 6000}),
        ("1.33", "binary", 2.3, 2.3, {"critic_steps": 7000}),
        ("2.70", "binary", 1.3, 1.3, {"critic_steps": 7000}))
}
# The speed settings this method reads and their defaults (synthesizers.Flags).
FLAGS = Flags(clip_method="ghost", chunk_size=1000)
CLIP_NORM_RULES = ("paper-joint", "public-median")
CONTINUOUS_ENCODINGS = ("paper", "bins")
# The paper's decoder-only autoencoder clip norms: Adult on the mean-BCE scale, MIMIC on the
# summed-BCE scale. "paper-joint" scales them by sqrt(2) for the joint encoder+decoder norm.
PAPER_DECODER_CLIP = {"adult": 0.012, "binary": 0.8157}
# The paper's Adult schedule in epochs: 10,000 steps of batch 64 and 15,000 of batch 128 over
# Adult's 32,561 training rows (about 19.7 and 59.0 epochs).
ADULT_N = 32_561
PAPER_AE_EPOCHS = 10_000 * 64 / ADULT_N
PAPER_CRITIC_EPOCHS = 15_000 * 128 / ADULT_N
PAPER_ACCOUNTING = ("RDP with the classic conversion eps = min_a r(a) + log(1/delta)/(a - 1), as "
                    "in Tantipongpipat et al. (2021)")


@dataclasses.dataclass(frozen=True)
class DPAutoGANConfig(GeneratorConfig):
    """Hyperparameters of DP-auto-GAN. All fields are public and go into the privacy report.

    The defaults are the paper's Adult architecture, epochs and noise ratio with five changes
    measured to work better (``docs/dp-auto-gan.md``): continuous columns on public bins
    (``continuous_encoding="bins"``), decoding by sampling (``decode="sample"``), a clip norm
    chosen on public rows (``ae_clip_norm="public-median"``), a generator step after every 2
    critic steps instead of 15 (``critic_steps_per_generator_step=2``; generator steps read no
    private row, so they cost no privacy) and an autoencoder batch that grows with the table
    (``ae_batch_size=None``: :func:`ae_batch_size_for`, N // 32 between 64 and 1,024, instead of
    64; on Adult the same epochs in about 630 steps instead of 10,000, so less noise in all).
    :meth:`adult` gives the paper's own Adult form (one scaled coordinate per continuous column,
    argmax decoding, the published clip norm, 15 critic steps per generator step, batch 64),
    :meth:`binary` its MIMIC-III settings. ``fit(epsilon=...)`` replaces both noise
    multipliers by one common factor (their ratio is kept); ``fit(preset=...)`` uses a published
    setting (always in the paper's form).

    The schedule is in epochs by default (``ae_steps=None``, ``critic_steps=None``): the steps
    are ``round(epochs * N / batch_size)`` for N the number of records the sampling rate refers to
    (the public ``num_records`` or the row count), so that a fit works on any table with at least
    as many rows as each batch (64 and 128 by default on small tables); on Adult's 32,561 rows the
    paper's batches give exactly its 10,000 + 15,000 steps (the default's autoencoder batch of
    1,017, 629 + 15,000). An epoch schedule takes at most ``max_epoch_steps`` steps per phase
    (30,000 by default, twice Adult's critic steps): above about 66,000 records the steps stop
    growing with N while the sampling rate B / N keeps falling, so the fit's time stays bounded and
    the noise per step falls (``docs/dp-auto-gan.md``). A step count set explicitly (or by a
    preset) is used as given.

    Continuous columns are one-hot over ``bins`` public bins of the schema bounds
    (``continuous_encoding="bins"``, default: ``data.BinnedEncoder``, log-spaced for heavy-tailed
    bounds under ``bin_spacing="auto"``, decoded uniformly inside the bin; the bins are public, so
    free) or one [0, 1] coordinate scaled by the bounds (``"paper"``).

    ``decode`` is how :meth:`DPAutoGAN.sample` turns the decoder's outputs into values by default:
    ``"sample"`` draws each categorical value (and bin) in proportion to its outputs and each
    binary value with its output as probability; ``"argmax"`` (the paper) takes the largest.
    Post-processing either way.

    The joint autoencoder clip norm ``ae_clip_norm`` is chosen without the private rows:
    ``"public-median"`` (default), the median per-example gradient norm after
    ``clip_calibration_steps`` non-private steps on rows drawn uniformly from the public schema;
    ``"paper-joint"``, the paper's published decoder-only clip norm times sqrt(2); or a number.
    """


    family: str = "adult"
    continuous_encoding: str = "bins"
    decode: str = "sample"
    bins: int = 20
    bin_spacing: str = "auto"
    latent_dim: int = 15
    ae_hidden: tuple[int, ...] | None = None      # None: ((width + latent) // 2,)
    encoder_activation: str = "leaky_relu"
    ae_loss: str = "mean"                         # BCE "mean" or "sum" over coordinates
    noise_dim: int = 64
    generator_hidden: tuple[int, ...] = (64, 64)  # residual blocks before the latent block
    generator_activation: str = "leaky_relu"
    critic_hidden: tuple[int, ...] | None = None  # None: (2 * width // 3, width // 3)
    ae_batch_size: int | None = None              # None: ae_batch_size_for(N); the paper: 64
    ae_steps: int | None = None                   # None: ae_epochs * N / ae_batch_size
    ae_epochs: float = PAPER_AE_EPOCHS
    ae_learning_rate: float = 0.005
    ae_clip_norm: float | str = "public-median"
    ae_noise_multiplier: float = 1.5
    clip_calibration_steps: int = 300
    critic_batch_size: int = 128
    critic_steps: int | None = None               # None: critic_epochs * N / critic_batch_size
    critic_epochs: float = PAPER_CRITIC_EPOCHS
    max_epoch_steps: int | None = 30_000          # an epoch schedule's cap per phase; None: no cap
    critic_learning_rate: float = 0.005
    critic_clip_norm: float = 0.022
    critic_noise_multiplier: float = 3.5
    critic_clipping: str = "paired"               # or "real_only"
    weight_clamp: float | None = 0.01
    critic_steps_per_generator_step: int = 2
    generator_batch_size: int = 128
    generator_learning_rate: float = 0.005

    @classmethod
    def adult(cls, **overrides) -> DPAutoGANConfig:
        """The paper's Adult configuration (mixed-type data): its encoding, argmax decoding and
        published clip norm, at its epsilon-1.01 noise levels."""
        return cls(**{**PAPER_ADULT_FORM, **overrides})

    @classmethod
    def binary(cls, **overrides) -> DPAutoGANConfig:
        """The paper's MIMIC-III configuration (all-binary data)."""
        base = dict(
            family="binary", decode="argmax", latent_dim=128, ae_hidden=(), encoder_activation="tanh",
            ae_loss="sum", generator_activation="tanh", ae_batch_size=100, ae_steps=15_000,
            ae_learning_rate=1e-3, ae_noise_multiplier=1.3, critic_batch_size=128,
            critic_steps=7000, critic_learning_rate=1e-3, critic_clip_norm=0.35,
            critic_noise_multiplier=1.3, critic_steps_per_generator_step=2,
            generator_learning_rate=1e-3,
        )
        base.update(overrides)
        return cls(**base)

    def validate(self) -> DPAutoGANConfig:
        for name, options in (("family", ("adult", "binary")), ("ae_loss", ("mean", "sum")),
                              ("continuous_encoding", CONTINUOUS_ENCODINGS), ("decode", data_lib.DECODE_MODES),
                              ("bin_spacing", data_lib.SPACINGS),
                              ("critic_clipping", _gan.CRITIC_CLIPPINGS)):
            _v.one_of(options, **{name: getattr(self, name)})
        for name in ("bins", "latent_dim", "noise_dim", "critic_batch_size",
                     "critic_steps_per_generator_step", "generator_batch_size"):
            _v.whole(minimum=1, **{name: getattr(self, name)})
        if self.ae_batch_size is not None:
            _v.whole(minimum=1, ae_batch_size=self.ae_batch_size)
        _v.whole(minimum=0, clip_calibration_steps=self.clip_calibration_steps)
        for name in ("ae_steps", "critic_steps"):
            if getattr(self, name) is not None:
                _v.whole(minimum=0, **{name: getattr(self, name)})
        if self.max_epoch_steps is not None:
            _v.whole(minimum=1, max_epoch_steps=self.max_epoch_steps)
        if isinstance(self.ae_clip_norm, str):
            _v.one_of(CLIP_NORM_RULES, ae_clip_norm=self.ae_clip_norm)
        else:
            _v.positive(ae_clip_norm=self.ae_clip_norm)
        if self.weight_clamp is not None:
            _v.positive(weight_clamp=self.weight_clamp)
        for name in ("ae_epochs", "critic_epochs", "critic_clip_norm", "ae_noise_multiplier",
                     "critic_noise_multiplier"):
            _v.positive(**{name: getattr(self, name)})
        if any(h != self.noise_dim for h in self.generator_hidden):
            raise ValueError(f"generator_hidden={self.generator_hidden!r}: residual blocks need width "
                             f"noise_dim={self.noise_dim}.")
        return super().validate()


def encoder(config: DPAutoGANConfig, schema: data_lib.Schema):
    """The row encoding of ``config.continuous_encoding`` (``TableEncoder`` or ``BinnedEncoder``)."""
    if config.continuous_encoding == "bins":
        return data_lib.BinnedEncoder(schema, config.bins, config.bin_spacing)
    return data_lib.TableEncoder(schema)


def networks(config: DPAutoGANConfig, width: int) -> models.DPAutoGANNetworks:
    """The four Flax modules for a data width (pure structure, no parameters)."""
    return models.dp_auto_gan_networks(
        width, latent_dim=config.latent_dim, ae_hidden=config.ae_hidden,
        encoder_activation=config.encoder_activation, generator_hidden=config.generator_hidden,
        generator_activation=config.generator_activation, critic_hidden=config.critic_hidden)


class Params(NamedTuple):
    autoencoder: PyTree
    generator: PyTree
    critic: PyTree


def init(config: DPAutoGANConfig, width: int, key: jax.Array) -> Params:
    """Initial parameters (PyTorch-style initialisation) of all networks."""
    nets = networks(config, width)
    k1, k2, k3 = jax.random.split(key, 3)
    return Params(
        nets.autoencoder.init(k1, jnp.zeros((1, width)))["params"],
        nets.generator.init(k2, jnp.zeros((1, config.noise_dim)))["params"],
        nets.critic.init(k3, jnp.zeros((1, width)))["params"],
    )


# ----------------------------------------------------------------------------- phase 1


def ae_loss_fn(config: DPAutoGANConfig, width: int) -> Callable:
    """Per-example reconstruction loss: BCE over the coordinates (mean or sum), from logits."""
    ae = networks(config, width).autoencoder
    reduce = jnp.mean if config.ae_loss == "mean" else jnp.sum

    def loss(params, batch):
        return reduce(models.bce_with_logits(ae.apply({"params": params}, batch), batch), axis=-1)

    return loss


def _ae_optimizer(config: DPAutoGANConfig):
    return _dpsgd_phases.torch_adam(config.ae_learning_rate)


def ae_clip_value(config: DPAutoGANConfig) -> float | None:
    """The autoencoder clip norm when it is known without training (None for "public-median")."""
    if config.ae_clip_norm == "paper-joint":
        return PAPER_DECODER_CLIP[config.family] * math.sqrt(2.0)
    return None if config.ae_clip_norm == "public-median" else float(config.ae_clip_norm)


def resolve_ae_clip_norm(config: DPAutoGANConfig, schema: data_lib.Schema, ae_params,
                         key: jax.Array) -> tuple[float, str]:
    """The joint autoencoder clip norm and the report sentence saying how it was chosen.

    No private row is used: ``"paper-joint"`` uses published numbers, ``"public-median"`` trains
    a copy of the autoencoder without privacy on rows drawn uniformly from the public schema.
    """
    value = ae_clip_value(config)
    critic = (f"The critic clip norm C3={config.critic_clip_norm} is the paper's value (tuned by its "
              "authors on the real data; that tuning is not accounted).")
    if config.ae_clip_norm == "paper-joint":
        return value, (
            f"The joint autoencoder clip norm C1={value:.6g} is the paper's published decoder-only "
            f"clip norm ({PAPER_DECODER_CLIP[config.family]}) times sqrt(2) for the joint "
            "encoder+decoder gradient; no private row was used to choose it, but the authors tuned "
            "their value on the real data (not accounted; see docs/dp-auto-gan.md). " + critic)
    if value is not None:
        return value, (f"The joint autoencoder clip norm C1={value} and the critic clip norm "
                       f"C3={config.critic_clip_norm} are fixed configuration values.")
    enc = encoder(config, schema)
    loss = ae_loss_fn(config, enc.width)
    k_rows, k_train, k_eval = jax.random.split(key, 3)

    def uniform(n, k):  # rows drawn uniformly from the public schema, in the model's encoding
        rows = data_lib.uniform_rows(schema, n, k)
        if config.continuous_encoding == "paper":
            return rows
        return jnp.asarray(enc.encode(data_lib.TableEncoder(schema).decode(rows)))

    value = _dpsgd_phases.median_grad_norm_after(
        loss, _ae_optimizer(config), ae_params, uniform(4096, k_rows), uniform(1024, k_eval), k_train,
        steps=config.clip_calibration_steps, batch_size=config.ae_batch_size)
    return value, (
        f"The joint autoencoder clip norm C1={value:.6g} was chosen without the private rows: the "
        f"median per-example gradient norm after {config.clip_calibration_steps} non-private "
        "steps on rows drawn uniformly from the public schema. " + critic)


def train_autoencoder(config: DPAutoGANConfig, ae_params, data: jax.Array, key: jax.Array, phase, *,
                      progress=None, should_stop=None, checkpoint=None,
                      flags: Flags = FLAGS) -> dpsgd.TrainState:
    """Phase 1: the ``phase.steps`` steps of the joint autoencoder's accounted ``phase`` (from
    :func:`privacy_phases`, its clip norm resolved; a ``NonPrivatePhase``: non-private)."""
    return _dpsgd_phases.run_private_phase(
        ae_loss_fn(config, data.shape[1]), _ae_optimizer(config), ae_params, data, key, phase,
        method=flags.clip_method, chunk_size=flags.chunk_size,
        progress=progress, should_stop=should_stop, checkpoint=checkpoint)


# ----------------------------------------------------------------------------- phase 2


def fake_rows(nets: models.DPAutoGANNetworks, gen_params, dec_params, key, n: int,
              noise_dim: int) -> jax.Array:
    """Decoded synthetic rows in [0, 1]: sigmoid(decoder(generator(z))), z ~ N(0, I)."""
    z = jax.random.normal(key, (n, noise_dim))
    latent = nets.generator.apply({"params": gen_params}, z)
    return nn.sigmoid(nets.decoder.apply({"params": dec_params}, latent))


def make_gan_runner(config: DPAutoGANConfig, width: int, num_rows: int, phase, *,
                    flags: Flags = FLAGS) -> _gan.GANRunner:
    """The compiled GAN phase ``run(state, data, dec_params, key, n_iterations, total) -> state``
    and its optimizers (``_gan.rmsprop_gan_runner``); the critic's steps realise ``phase`` (a
    ``NonPrivatePhase``: a non-private critic)."""
    nets = networks(config, width)
    return _gan.rmsprop_gan_runner(
        lambda p, x: nets.critic.apply({"params": p}, x),
        lambda gp, dec, k, n: fake_rows(nets, gp, dec, k, n, config.noise_dim),
        critic_learning_rate=config.critic_learning_rate,
        generator_learning_rate=config.generator_learning_rate,
        weight_clamp_bound=config.weight_clamp, phase=phase, scan_rows=num_rows,
        clipping=config.critic_clipping,
        critic_steps_per_generator_step=config.critic_steps_per_generator_step,
        generator_batch_size=config.generator_batch_size, method=flags.clip_method)


def train_gan(config: DPAutoGANConfig, params: Params, dec_params, data: jax.Array, key: jax.Array,
              phase, *, progress=None, should_stop=None, checkpoint=None,
              flags: Flags = FLAGS) -> _gan.GANState:
    """Phase 2: the ``phase.steps`` critic steps of the critic's accounted ``phase`` (a
    ``NonPrivatePhase``: non-private, no noise) with interleaved generator steps
    (``_gan.train_gan``)."""
    runner = make_gan_runner(config, data.shape[1], data.shape[0], phase, flags=flags)
    return _gan.train_gan(runner, params.critic, params.generator, data, dec_params, key,
                          critic_steps=phase.steps, chunk_size=flags.chunk_size,
                          critic_steps_per_generator_step=config.critic_steps_per_generator_step,
                          progress=progress, should_stop=should_stop, checkpoint=checkpoint)


# ----------------------------------------------------------------------------- sampling, privacy


_sample_jit = functools.partial(jax.jit, static_argnums=(0, 4, 5))(fake_rows)


def sample_encoded(config: DPAutoGANConfig, width: int, gen_params, dec_params, n: int,
                   key: jax.Array) -> np.ndarray:
    """``n`` synthetic rows in the encoded layout, values in [0, 1] (compiled once per shape)."""
    return np.asarray(_sample_jit(networks(config, width), gen_params, dec_params, key, int(n),
                                  config.noise_dim))


def ae_batch_size_for(config: DPAutoGANConfig, num_records: int) -> int:
    """The autoencoder's expected batch: ``ae_batch_size``, or by default N // 32 between 64 and
    1,024 (``docs/dp-auto-gan.md``). With the epoch schedule that is about 630 autoencoder steps
    on any table of 2,048 to 32,768 records (1,017 on Adult), and the paper's batch of 64 below.
    N is the public ``num_records`` or the row count, as for the schedule."""
    if config.ae_batch_size is not None:
        return config.ae_batch_size
    return min(1024, max(64, _v.whole(minimum=0, num_records=num_records) // 32))


def schedule(config: DPAutoGANConfig, num_records: int) -> dict[str, int]:
    """Planned steps per phase: the configured counts, or ``round(epochs * N / batch)`` (at least 1,
    at most ``max_epoch_steps``)."""
    n = _v.whole(minimum=0, num_records=num_records)
    cap = config.max_epoch_steps if config.max_epoch_steps is not None else float("inf")

    def steps(explicit, epochs, batch):
        return explicit if explicit is not None else int(min(cap, max(1, round(epochs * n / batch))))

    return {"autoencoder": steps(config.ae_steps, config.ae_epochs, ae_batch_size_for(config, n)),
            "critic": steps(config.critic_steps, config.critic_epochs, config.critic_batch_size)}


def privacy_phases(config: DPAutoGANConfig, num_records: int, *,
                   steps: Mapping[str, int] | None = None, private: bool = True) -> list:
    """The accounted phases: two Poisson-subsampled Gaussian DP-SGD phases (or non-private).

    ``steps``: phase name -> executed steps (default: :func:`schedule`).
    """
    steps = {**schedule(config, num_records), **(steps or {})}
    config = config.replace(ae_batch_size=ae_batch_size_for(config, num_records))
    if private:  # q = B / N must be a probability
        for name in ("ae_batch_size", "critic_batch_size"):
            batch = getattr(config, name)
            if batch > num_records:
                raise ValueError(
                    f"{name}={batch} is larger than the {num_records} records (an expected batch "
                    f"must be at most the number of records); set {name} to at most {num_records}, "
                    f"e.g. {name}={max(1, num_records // 4)}.")
    return [_dpsgd_phases.dpsgd_phase(name, batch_size=batch, num_records=num_records,
                                      noise_multiplier=sigma, steps=steps[name], clip_norm=clip,
                                      private=private)
            for name, batch, sigma, clip in (
                ("autoencoder", config.ae_batch_size, config.ae_noise_multiplier, ae_clip_value(config)),
                ("critic", config.critic_batch_size, config.critic_noise_multiplier,
                 config.critic_clip_norm))]


@register
class DPAutoGAN(Synthesizer):
    """DP-auto-GAN with a scikit-learn-like interface.

    Example:
        >>> model = DPAutoGAN().fit(train_df, data.adult_schema(), epsilon=1.0)  # doctest: +SKIP
        >>> synthetic = model.sample(1000)                                       # doctest: +SKIP
        >>> model.privacy_report()["epsilon"]                                    # doctest: +SKIP
    """

    METHOD = "dp-auto-gan"
    DESCRIPTION = ("DP autoencoder, then a WGAN in its latent space with a DP-SGD critic "
                   "(Tantipongpipat et al. 2021)")
    CONFIG = DPAutoGANConfig
    SMOKE = dict(ae_steps=12, critic_steps=10, critic_steps_per_generator_step=5, chunk_size=4,
                 ae_batch_size=16, critic_batch_size=16, generator_batch_size=16, ae_clip_norm=0.05)
    PRESETS = PAPER_PRESETS
    CHECKPOINTS = True
    FLAGS = FLAGS

    def _default_config(self, schema):
        if all(c.kind == "binary" for c in schema.columns):
            return DPAutoGANConfig.binary()
        return DPAutoGANConfig()

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, num_records, private=private)

    def _paper_accounting(self, config, phases, delta, report):
        return {"label": PAPER_ACCOUNTING, "epsilon": report["epsilon_by_accountant"].get("rdp_classic")}

    def _train(self, plan, x, key, hooks) -> Release:
        config = plan.config
        m, width = x.shape
        # The schedule is the plan's (each phase's steps and expected batch); the public clip-norm
        # rule trains on the autoencoder phase's expected batch.
        config = config.replace(ae_batch_size=plan.phase("autoencoder").batch_size)
        k_init, k_clip, k_ae, k_gan = jax.random.split(key, 4)
        params = init(config, width, k_init)
        t0 = time.perf_counter()
        notes, ae_phase, clip_norms = [], plan.phase("autoencoder"), {}
        if plan.private:
            ae_clip, note = resolve_ae_clip_norm(config, plan.model_schema, params.autoencoder, k_clip)
            config, ae_phase = config.replace(ae_clip_norm=ae_clip), ae_phase.with_clip_norm(ae_clip)
            clip_norms["autoencoder"] = ae_clip
            notes += [note, _gan.critic_term_note(config.critic_clipping, "generator and decoder "
                                                  "are DP outputs", " (the paper's form)"),
                      "Hyperparameters (architecture, learning rates, schedule, critic clip norm) are "
                      "the paper's, which its authors tuned on the real data, and the library's "
                      "defaults (encoding, decoding, generator steps, autoencoder batch rule) were "
                      "chosen by measurements on UCI Adult (docs/dp-auto-gan.md); neither search is "
                      "accounted."]
        ae_state = train_autoencoder(config, params.autoencoder, x, k_ae, ae_phase,
                                     **hooks.phase_args("autoencoder"))
        jax.block_until_ready(ae_state.params)
        t1 = time.perf_counter()
        gan = train_gan(config, params, ae_state.params["decoder"], x, k_gan, plan.phase("critic"),
                        **hooks.phase_args("critic"))
        jax.block_until_ready(gan.generator.params)
        t2 = time.perf_counter()
        return Release(arrays={"generator": gan.generator.params, "decoder": ae_state.params["decoder"]},
            steps={"autoencoder": int(ae_state.steps), "critic": int(gan.critic.steps)}, clip_norms=clip_norms,
            seconds={"autoencoder": t1 - t0, "gan": t2 - t1}, notes=tuple(notes))

    def _encoder(self, schema, config):
        return encoder(config, schema)

    def _sample_encoded(self, n, key):
        width = encoder(self.fitted_config, self.model_schema).width
        r = self.released
        return sample_encoded(self.fitted_config, width, r["generator"], r["decoder"], n, key)

    def _release_shapes(self, config, schema, statistics):
        width = encoder(config, schema).width
        shapes = jax.eval_shape(lambda k: init(config, width, k), jax.random.key(0))
        return {"generator": shapes.generator, "decoder": shapes.autoencoder["decoder"]}
