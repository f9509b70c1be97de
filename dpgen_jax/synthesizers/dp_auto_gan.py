"""DP-auto-GAN (Tantipongpipat et al.; seeds 000/002, spec ``dp-auto-gan.md``).

Two phases touch the private rows, both DP-SGD with exact Poisson sampling:

1. **Autoencoder.** Encoder and decoder are privatised *together*: one clipped per-example
   gradient over all their parameters and noise on both (the sound variant of spec §1.3; the
   published Alg. 3 trains the encoder without noise, which is not private, §1.4).
2. **GAN in the latent space.** A generator maps N(0, I) noise to latent codes; the frozen decoder
   maps them to data space; a critic compares decoded fakes with real rows. The critic is trained
   with DP-SGD (per-example term pairing each real row with one fresh fake row, as the paper does;
   or, optionally, clipping only the real-data term, DESIGN privacy rule 7). The generator takes
   one step every ``critic_steps_per_generator_step`` critic steps; it sees no real row, so it is
   post-processing. Standard WGAN signs (§1.7) and the ±0.01 critic weight clamp of the authors'
   code.

Privacy is the composition of the two subsampled Gaussian phases (``privacy.DPSGDPhase``), with the
steps actually executed. Only the generator and the decoder are released.

Functional API: :func:`init`, :func:`train_autoencoder`, :func:`train_gan`, :func:`sample_encoded`,
:func:`privacy_phases`. Class API: :class:`DPAutoGAN`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd

from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, models, privacy
from dpgen_jax.dpsgd._validate import check_choice, check_steps

PyTree = Any

PAPER_PRESETS: dict[str, dict[str, Any]] = {
    # Adult (dp-auto-gan spec §5.2): (AE sigma, critic sigma); eps by RDP + classic conversion.
    "paper-0.36": {"family": "adult", "ae_noise_multiplier": 5.0, "critic_noise_multiplier": 8.0},
    "paper-0.51": {"family": "adult", "ae_noise_multiplier": 2.5, "critic_noise_multiplier": 7.5},
    "paper-1.01": {"family": "adult", "ae_noise_multiplier": 1.5, "critic_noise_multiplier": 3.5},
    # MIMIC (spec §5.1): same sigma in both phases; 6000/7000/7000 critic steps.
    "paper-0.81": {"family": "binary", "ae_noise_multiplier": 3.5, "critic_noise_multiplier": 3.5,
                   "critic_steps": 6000},
    "paper-1.33": {"family": "binary", "ae_noise_multiplier": 2.3, "critic_noise_multiplier": 2.3,
                   "critic_steps": 7000},
    "paper-2.70": {"family": "binary", "ae_noise_multiplier": 1.3, "critic_noise_multiplier": 1.3,
                   "critic_steps": 7000},
}
CLIP_NORM_RULES = ("paper-joint", "public-median")
# The paper's decoder-only autoencoder clip norms (spec §5): Adult on the mean-BCE scale, MIMIC on
# the summed-BCE scale. "paper-joint" scales them by sqrt(2) for the joint encoder+decoder norm.
PAPER_DECODER_CLIP = {"adult": 0.012, "binary": 0.8157}


@dataclasses.dataclass(frozen=True)
class DPAutoGANConfig:
    """Hyperparameters of DP-auto-GAN. All fields are public and go into the privacy report.

    The defaults are the paper's Adult settings (spec §3.1, §5.2) at its epsilon-1.01 noise
    levels; :meth:`binary` gives the MIMIC settings (§3.2, §5.1). Noise multipliers are replaced
    by calibration when ``fit(epsilon=...)`` is used (their ratio is kept) and by the preset's
    when ``fit(preset=...)`` is used.

    The joint autoencoder clip norm ``ae_clip_norm`` is chosen without the private rows:

    * ``"paper-joint"`` (default): the paper's published decoder-only clip norm (0.012 for Adult
      on the mean-BCE scale, 0.8157 for MIMIC on the summed-BCE scale; spec §5) times sqrt(2), the
      norm of two parameter groups (encoder, decoder) whose gradients are of comparable size. It
      uses only published numbers (which the authors tuned on the real data; the report says so).
    * ``"public-median"``: the median per-example gradient norm of the joint loss after
      ``clip_calibration_steps`` non-private steps on rows drawn uniformly from the public schema
      (the paper's rule, "median norm in a non-private loop", on public rows). Uniform rows are
      harder to reconstruct than real ones, so this rule gives a larger norm (0.27 on Adult,
      where "paper-joint" gives 0.017) and more noise relative to the signal.
    * a float: a fixed value.
    """

    family: str = "adult"
    latent_dim: int = 15
    ae_hidden: tuple[int, ...] | None = None      # None: ((width + latent) // 2,)
    encoder_activation: str = "leaky_relu"
    ae_loss: str = "mean"                         # BCE "mean" or "sum" over coordinates
    noise_dim: int = 64
    generator_hidden: tuple[int, ...] = (64, 64)  # residual blocks before the latent block
    generator_activation: str = "leaky_relu"
    critic_hidden: tuple[int, ...] | None = None  # None: (2 * width // 3, width // 3)
    ae_batch_size: int = 64
    ae_steps: int = 10_000
    ae_learning_rate: float = 0.005
    ae_clip_norm: float | str = "paper-joint"
    ae_noise_multiplier: float = 1.5
    clip_calibration_steps: int = 300
    critic_batch_size: int = 128
    critic_steps: int = 15_000
    critic_learning_rate: float = 0.005
    critic_clip_norm: float = 0.022
    critic_noise_multiplier: float = 3.5
    critic_clipping: str = "paired"               # or "real_only" (DESIGN privacy rule 7)
    weight_clamp: float | None = 0.01
    critic_steps_per_generator_step: int = 15
    generator_batch_size: int = 128
    generator_learning_rate: float = 0.005
    method: str = "ghost"
    chunk_size: int = 1000

    @classmethod
    def adult(cls, **overrides) -> "DPAutoGANConfig":
        """The paper's Adult configuration (mixed-type data)."""
        return cls(**overrides)

    @classmethod
    def binary(cls, **overrides) -> "DPAutoGANConfig":
        """The paper's MIMIC configuration (all-binary data, spec §3.2 / §5.1)."""
        base = dict(
            family="binary", latent_dim=128, ae_hidden=(), encoder_activation="tanh",
            ae_loss="sum", generator_activation="tanh", ae_batch_size=100, ae_steps=15_000,
            ae_learning_rate=1e-3, ae_noise_multiplier=1.3, critic_batch_size=128,
            critic_steps=7000, critic_learning_rate=1e-3, critic_clip_norm=0.35,
            critic_noise_multiplier=1.3, critic_steps_per_generator_step=2,
            generator_learning_rate=1e-3,
        )
        base.update(overrides)
        return cls(**base)

    def validate(self) -> "DPAutoGANConfig":
        check_choice(self.family, ("adult", "binary"), "family")
        check_choice(self.ae_loss, ("mean", "sum"), "ae_loss")
        check_choice(self.critic_clipping, ("paired", "real_only"), "critic_clipping")
        check_choice(self.method, dpsgd.METHODS, "method")
        for name in ("latent_dim", "noise_dim", "ae_batch_size", "critic_batch_size",
                     "critic_steps_per_generator_step", "generator_batch_size", "chunk_size"):
            if check_steps(getattr(self, name), name) < 1:
                raise ValueError(f"Expected {name}={getattr(self, name)!r} to be >= 1.")
        for name in ("ae_steps", "critic_steps", "clip_calibration_steps"):
            check_steps(getattr(self, name), name)
        if isinstance(self.ae_clip_norm, str):
            check_choice(self.ae_clip_norm, CLIP_NORM_RULES, "ae_clip_norm")
        elif not (float(self.ae_clip_norm) > 0 and math.isfinite(self.ae_clip_norm)):
            raise ValueError(f"Expected ae_clip_norm={self.ae_clip_norm!r} > 0 or one of {CLIP_NORM_RULES}.")
        if not (self.critic_clip_norm > 0 and math.isfinite(self.critic_clip_norm)):
            raise ValueError(f"Expected critic_clip_norm={self.critic_clip_norm!r} to be finite and > 0.")
        for name in ("ae_noise_multiplier", "critic_noise_multiplier"):
            v = getattr(self, name)
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"Expected {name}={v!r} to be finite and > 0.")
        if self.weight_clamp is not None and not self.weight_clamp > 0:
            raise ValueError(f"Expected weight_clamp={self.weight_clamp!r} > 0 or None.")
        if any(h != self.noise_dim for h in self.generator_hidden):
            raise ValueError(
                f"generator_hidden={self.generator_hidden!r}: residual blocks need width "
                f"noise_dim={self.noise_dim}."
            )
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DPAutoGANConfig":
        d = dict(d)
        for k in ("ae_hidden", "critic_hidden", "generator_hidden"):
            if d.get(k) is not None:
                d[k] = tuple(d[k])
        return cls(**d)


class Networks(NamedTuple):
    """The four Flax modules for a data width (pure structure, no parameters)."""

    autoencoder: models.Autoencoder
    decoder: models.MLP
    generator: models.ResidualGenerator
    critic: models.Critic


def networks(config: DPAutoGANConfig, width: int) -> Networks:
    hidden = config.ae_hidden if config.ae_hidden is not None else ((width + config.latent_dim) // 2,)
    critic_hidden = config.critic_hidden or (2 * width // 3, width // 3)
    ae = models.Autoencoder(
        encoder_features=tuple(hidden) + (config.latent_dim,),
        decoder_features=tuple(reversed(hidden)) + (width,),
        encoder_activation=config.encoder_activation,
    )
    decoder = models.MLP(ae.decoder_features, activation=ae.decoder_activation)
    gen = models.ResidualGenerator(
        features=tuple(config.generator_hidden) + (config.latent_dim,),
        skip=(True,) * len(config.generator_hidden) + (False,),
        activation=config.generator_activation,
    )
    return Networks(ae, decoder, gen, models.Critic(hidden=tuple(critic_hidden)))


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


def schema_uniform_rows(encoder: data_lib.TableEncoder, n: int, key: jax.Array) -> jax.Array:
    """Encoded rows drawn from the public schema alone: uniform categories and values."""
    cols = []
    for i, b in enumerate(encoder.blocks):
        k = jax.random.fold_in(key, i)
        if b.kind == "categorical":
            cols.append(jax.nn.one_hot(jax.random.randint(k, (n,), 0, b.width), b.width))
        elif b.kind == "binary":
            cols.append(jax.random.bernoulli(k, 0.5, (n, 1)).astype(jnp.float32))
        else:
            cols.append(jax.random.uniform(k, (n, b.width)))
    return jnp.concatenate(cols, axis=1)


def public_clip_norm(config: DPAutoGANConfig, encoder: data_lib.TableEncoder, ae_params, key) -> float:
    """The ``"public-median"`` joint AE clip norm; touches no private row (see the config)."""
    width = encoder.width
    loss = ae_loss_fn(config, width)
    k_rows, k_train, k_eval = jax.random.split(key, 3)
    public = schema_uniform_rows(encoder, 4096, k_rows)
    opt = optax.adam(config.ae_learning_rate)
    step = dpsgd.make_dp_step(loss, opt, num_records=public.shape[0],
                              sample_rate=config.ae_batch_size / public.shape[0],
                              clip_norm=None, noise_multiplier=0.0)
    state = dpsgd.run_phase(step, dpsgd.init_state(ae_params, opt), public, k_train,
                            config.clip_calibration_steps, chunk_size=max(1, config.clip_calibration_steps))
    rows = schema_uniform_rows(encoder, 1024, k_eval)
    _, aux = jax.jit(dpsgd.clipped_grad_sum(loss, 1e30, method="vmap"))(state.params, rows)
    return float(np.median(np.asarray(aux["norms"])))


def make_ae_step(config, width: int, num_records: int, clip_norm: float | None, noise_multiplier: float):
    opt = optax.adam(config.ae_learning_rate, b1=0.9, b2=0.999, eps=1e-8)
    step = dpsgd.make_dp_step(
        ae_loss_fn(config, width), opt, num_records=num_records,
        sample_rate=config.ae_batch_size / num_records, clip_norm=clip_norm,
        noise_multiplier=noise_multiplier, method=config.method,
    )
    return step, opt


def train_autoencoder(config, ae_params, data: jax.Array, key: jax.Array, *, clip_norm: float | None,
                      noise_multiplier: float, steps: int, progress=None) -> dpsgd.TrainState:
    """Phase 1: ``steps`` DP-SGD steps of the joint autoencoder (``clip_norm=None``: non-private)."""
    m, width = data.shape
    step, opt = make_ae_step(config, width, m, clip_norm, noise_multiplier)
    return dpsgd.run_phase(step, dpsgd.init_state(ae_params, opt), data, key, steps,
                           chunk_size=config.chunk_size, progress=progress)


# ----------------------------------------------------------------------------- phase 2


def _rmsprop(lr: float) -> optax.GradientTransformation:
    """``torch.optim.RMSprop(alpha=0.99, eps=1e-8)`` in optax (spec §3.3)."""
    return optax.rmsprop(lr, decay=0.99, eps=1e-8, eps_in_sqrt=False)


def fake_rows(nets: Networks, gen_params, dec_params, key, n: int, noise_dim: int) -> jax.Array:
    """Decoded synthetic rows in [0, 1]: sigmoid(decoder(generator(z))), z ~ N(0, I)."""
    z = jax.random.normal(key, (n, noise_dim))
    latent = nets.generator.apply({"params": gen_params}, z)
    return nn.sigmoid(nets.decoder.apply({"params": dec_params}, latent))


class GANState(NamedTuple):
    critic: dpsgd.TrainState
    generator: dpsgd.TrainState


def make_gan_runner(config: DPAutoGANConfig, width: int, num_records: int, *, private: bool,
                    noise_multiplier: float):
    """Compiles ``run(state, data, dec_params, key, n_iterations, total_critic_steps) -> state``.

    One iteration = up to ``critic_steps_per_generator_step`` critic steps (never beyond
    ``total_critic_steps`` in all), then one generator step.
    """
    nets = networks(config, width)
    m = num_records
    q = config.critic_batch_size / m
    critic = nets.critic
    nd = config.noise_dim

    def critic_value(params, x):
        return critic.apply({"params": params}, x)

    if config.critic_clipping == "paired":
        def batch_fn(data, idx, key, extra):
            gen_params, dec_params = extra
            fake = jax.lax.stop_gradient(fake_rows(nets, gen_params, dec_params, key, idx.shape[0], nd))
            return {"real": jnp.take(data, idx, axis=0), "fake": fake}

        def loss(params, batch):
            return -critic_value(params, batch["real"]) + critic_value(params, batch["fake"])

        public_grad_fn = None
    else:
        def batch_fn(data, idx, key, extra):
            return jnp.take(data, idx, axis=0)

        def loss(params, batch):
            return -critic_value(params, batch)

        n_fake = config.critic_batch_size
        if private:
            # Not for privacy (fake rows touch no private record, so they get no noise): each
            # fake row's gradient is clipped to the same C3 as the real rows', so that the two
            # terms keep the balance they have in the paired form. Without it the unclipped fake
            # term dominates the clipped real term and the GAN collapses.
            fake_sum = dpsgd.clipped_grad_sum(critic_value, config.critic_clip_norm,
                                              method=config.method)
        else:
            fake_sum = dpsgd.grad_sum(critic_value)

        def public_grad_fn(params, key, extra):
            gen_params, dec_params = extra
            fake = jax.lax.stop_gradient(fake_rows(nets, gen_params, dec_params, key, n_fake, nd))
            # Scaled so that after the division by q*m it is the mean over the fake rows.
            g, _ = fake_sum(params, fake, None)
            return jax.tree_util.tree_map(lambda x: x * (q * m / n_fake), g)

    clamp = None
    if config.weight_clamp is not None:
        w = config.weight_clamp
        clamp = lambda p: jax.tree_util.tree_map(lambda x: jnp.clip(x, -w, w), p)  # noqa: E731

    critic_opt = _rmsprop(config.critic_learning_rate)
    critic_step = dpsgd.make_dp_step(
        loss, critic_opt, num_records=m, sample_rate=q,
        clip_norm=config.critic_clip_norm if private else None,
        noise_multiplier=noise_multiplier if private else 0.0,
        method=config.method, batch_fn=batch_fn, post_update=clamp, public_grad_fn=public_grad_fn,
    )
    gen_opt = _rmsprop(config.generator_learning_rate)
    b2 = config.generator_batch_size

    def generator_step(gen_state, critic_params, dec_params, key):
        def gen_loss(gp):
            return -jnp.mean(critic_value(critic_params, fake_rows(nets, gp, dec_params, key, b2, nd)))

        g = jax.grad(gen_loss)(gen_state.params)
        updates, opt_state = gen_opt.update(g, gen_state.opt_state, gen_state.params)
        return dpsgd.TrainState(optax.apply_updates(gen_state.params, updates), opt_state,
                                gen_state.steps + 1)

    t_d = config.critic_steps_per_generator_step

    def run(state: GANState, data, dec_params, key, n_iterations, total_critic_steps):
        k_critic, k_gen = jax.random.split(key)

        def iteration(_, s: GANState):
            n_c = jnp.clip(total_critic_steps - s.critic.steps, 0, t_d)

            def critic_body(_, cs):
                new, _ = critic_step(cs, data, jax.random.fold_in(k_critic, cs.steps),
                                     (s.generator.params, dec_params))
                return new

            cs = jax.lax.fori_loop(0, n_c, critic_body, s.critic)
            gs = generator_step(s.generator, cs.params, dec_params,
                                jax.random.fold_in(k_gen, s.generator.steps))
            return GANState(cs, gs)

        return jax.lax.fori_loop(0, n_iterations, iteration, state)

    return jax.jit(run), critic_opt, gen_opt


def train_gan(config, params: Params, dec_params, data: jax.Array, key: jax.Array, *,
              private: bool, noise_multiplier: float, critic_steps: int, progress=None) -> GANState:
    """Phase 2: ``critic_steps`` critic steps (DP when ``private``) with interleaved generator steps."""
    m, width = data.shape
    run, critic_opt, gen_opt = make_gan_runner(config, width, m, private=private,
                                               noise_multiplier=noise_multiplier)
    state = GANState(dpsgd.init_state(params.critic, critic_opt),
                     dpsgd.init_state(params.generator, gen_opt))
    t_d = config.critic_steps_per_generator_step
    total_iters = -(-critic_steps // t_d)
    per_chunk = max(1, config.chunk_size // t_d)
    done = 0
    while done < total_iters:
        n = min(per_chunk, total_iters - done)
        state = run(state, data, dec_params, key, jnp.int32(n), jnp.int32(critic_steps))
        done += n
        if progress is not None:
            progress(int(state.critic.steps), critic_steps)
    return state


# ----------------------------------------------------------------------------- sampling


@functools.partial(jax.jit, static_argnums=(0, 4, 5))
def _sample_jit(nets: Networks, gen_params, dec_params, key, n: int, noise_dim: int):
    return fake_rows(nets, gen_params, dec_params, key, n, noise_dim)


def sample_encoded(config, width: int, gen_params, dec_params, n: int, key: jax.Array) -> np.ndarray:
    """``n`` synthetic rows in the encoded layout, values in [0, 1] (compiled once per shape)."""
    nets = networks(config, width)
    return np.asarray(_sample_jit(nets, gen_params, dec_params, key, int(n), config.noise_dim))


# ----------------------------------------------------------------------------- privacy


def privacy_phases(config, num_records: int, *, ae_steps: int, critic_steps: int,
                   private: bool = True) -> list:
    """The accounted phases: two Poisson-subsampled Gaussian DP-SGD phases (or non-private)."""
    if not private:
        return [privacy.NonPrivatePhase("autoencoder", ae_steps),
                privacy.NonPrivatePhase("critic", critic_steps)]
    return [
        privacy.DPSGDPhase("autoencoder", config.ae_batch_size / num_records,
                           config.ae_noise_multiplier, ae_steps),
        privacy.DPSGDPhase("critic", config.critic_batch_size / num_records,
                           config.critic_noise_multiplier, critic_steps),
    ]


def config_for(schema: data_lib.Schema, config: DPAutoGANConfig | None, epsilon, preset):
    """The configuration a fit uses: family default, then preset or calibration inputs."""
    if (epsilon is None) == (preset is None):
        raise ValueError("Give exactly one of epsilon=<target or inf> or preset=<name> "
                         f"(got epsilon={epsilon!r}, preset={preset!r}).")
    all_binary = all(c.kind == "binary" for c in schema.columns)
    if config is None:
        config = DPAutoGANConfig.binary() if all_binary else DPAutoGANConfig.adult()
    if preset is not None:
        if preset not in PAPER_PRESETS:
            raise ValueError(f"Unknown preset={preset!r}; expected one of {sorted(PAPER_PRESETS)}.")
        p = dict(PAPER_PRESETS[preset])
        family = p.pop("family")
        if family != config.family:
            raise ValueError(f"preset={preset!r} is for {family!r} data but the configuration is "
                             f"{config.family!r}.")
        default = DPAutoGANConfig.binary() if family == "binary" else DPAutoGANConfig.adult()
        for field in [f for f in p if f == "critic_steps"]:
            if getattr(config, field) != getattr(default, field):
                # An explicitly configured schedule is kept; the paper's epsilon then differs.
                warnings.warn(f"preset={preset!r} keeps the configured {field}="
                              f"{getattr(config, field)} instead of the paper's {p[field]}; its "
                              "paper-accounting epsilon differs from the published one.", stacklevel=3)
                p.pop(field)
        config = dataclasses.replace(config, **p)
    return config.validate()


class DPAutoGAN:
    """DP-auto-GAN with a scikit-learn-like interface.

    Example:
        >>> model = DPAutoGAN().fit(train_df, data.adult_schema(), epsilon=1.0)  # doctest: +SKIP
        >>> synthetic = model.sample(1000)                                       # doctest: +SKIP
        >>> model.privacy_report()["epsilon"]                                    # doctest: +SKIP
    """

    METHOD = "DPAutoGAN"

    def __init__(self, config: DPAutoGANConfig | None = None):
        self.config = config.validate() if config is not None else None
        self.schema: data_lib.Schema | None = None
        self._gen = self._dec = None
        self._report: dict | None = None
        self.train_seconds: dict[str, float] = {}

    # -- training -------------------------------------------------------------------------
    def fit(self, df: pd.DataFrame, schema: data_lib.Schema, epsilon: float | None = None,
            delta: float = 1e-5, preset: str | None = None, seed: int | None = None,
            progress: bool = False) -> "DPAutoGAN":
        """Trains both phases on ``df`` under (epsilon, delta)-DP.

        Args:
            df: the private table; its columns must match ``schema``.
            schema: public schema (``data.Schema``); never fitted on ``df``.
            epsilon: target epsilon under the headline accountant (PLD): the noise multipliers
                are scaled together (ratio kept) before training. ``math.inf``: non-private.
            delta: target delta.
            preset: instead of ``epsilon``, one of the paper's exact settings
                (``paper-0.36|0.51|1.01`` for Adult, ``paper-0.81|1.33|2.70`` for binary data).
            seed: makes the run reproducible (the report then says it is not fit for release);
                None draws every key from OS entropy.
            progress: show a progress bar with the phase, step and epsilon spent (RDP).

        Raises:
            ValueError: bad arguments, a frame that does not match the schema, or an unreachable
                epsilon (the message states the epsilon the schedule can reach).
        """
        config = config_for(schema, self.config, epsilon, preset)
        encoder = data_lib.TableEncoder(schema)
        x = jnp.asarray(encoder.encode(df))
        m, width = x.shape
        private = not (epsilon is not None and math.isinf(epsilon))
        if epsilon is not None and not (epsilon > 0):
            raise ValueError(f"Expected epsilon={epsilon!r} to be > 0 (or math.inf).")
        if not (0 < delta < 1):
            raise ValueError(f"Expected delta={delta!r} in (0, 1).")
        if private and epsilon is not None:
            phases = privacy.calibrate(
                privacy_phases(config, m, ae_steps=config.ae_steps, critic_steps=config.critic_steps),
                target_epsilon=epsilon, delta=delta)
            config = dataclasses.replace(config, ae_noise_multiplier=phases[0].noise_multiplier,
                                         critic_noise_multiplier=phases[1].noise_multiplier)
        run_key = dpsgd.make_key(seed)
        k_init, k_clip, k_ae, k_gan = jax.random.split(run_key.key, 4)
        params = init(config, width, k_init)
        t0 = time.perf_counter()
        clip_note = None
        ae_clip = None
        if private:
            if config.ae_clip_norm == "paper-joint":
                ae_clip = PAPER_DECODER_CLIP[config.family] * math.sqrt(2.0)
                clip_note = (
                    f"The joint autoencoder clip norm C1={ae_clip:.6g} is the paper's published "
                    f"decoder-only clip norm ({PAPER_DECODER_CLIP[config.family]}) times sqrt(2) for "
                    "the joint encoder+decoder gradient; no private row was used to choose it, but "
                    "the authors tuned their value on the real data (not accounted, spec §2.5). The "
                    f"critic clip norm C3={config.critic_clip_norm} is the paper's value (same caveat).")
            elif config.ae_clip_norm == "public-median":
                ae_clip = public_clip_norm(config, encoder, params.autoencoder, k_clip)
                clip_note = (
                    f"The joint autoencoder clip norm C1={ae_clip:.6g} was chosen without the private "
                    f"rows: the median per-example gradient norm after {config.clip_calibration_steps} "
                    "non-private steps on rows drawn uniformly from the public schema. The critic clip "
                    f"norm C3={config.critic_clip_norm} is the paper's value (tuned by the authors on "
                    "the real data; that tuning is not accounted, spec §2.5).")
            else:
                ae_clip = float(config.ae_clip_norm)
                clip_note = (f"The joint autoencoder clip norm C1={ae_clip} and the critic clip norm "
                             f"C3={config.critic_clip_norm} are fixed configuration values.")
        bar = _Progress(progress, config, m, delta, private)
        ae_state = train_autoencoder(
            config, params.autoencoder, x, k_ae, clip_norm=ae_clip,
            noise_multiplier=config.ae_noise_multiplier if private else 0.0,
            steps=config.ae_steps, progress=bar.phase("autoencoder", 0))
        jax.block_until_ready(ae_state.params)
        t1 = time.perf_counter()
        ae_done = int(ae_state.steps)
        gan = train_gan(config, params, ae_state.params["decoder"], x, k_gan, private=private,
                        noise_multiplier=config.critic_noise_multiplier,
                        critic_steps=config.critic_steps, progress=bar.phase("critic", ae_done))
        jax.block_until_ready(gan.generator.params)
        t2 = time.perf_counter()
        bar.close()
        self.train_seconds = {"autoencoder": t1 - t0, "gan": t2 - t1}
        phases = privacy_phases(config, m, ae_steps=ae_done, critic_steps=int(gan.critic.steps),
                                private=private)
        assumptions = list(schema.assumptions())
        assumptions.append(
            f"The number of private rows (n={m}) is treated as public: it sets the sampling rates "
            "q = expected batch size / n.")
        if clip_note:
            assumptions.append(clip_note)
        if private:
            assumptions.append(
                "Critic per-example term: " + (
                    "each real row paired with one fresh fake row and clipped together (the paper's "
                    "form)." if config.critic_clipping == "paired" else
                    "only the real-data term is clipped and noised; the fake-data term depends on no "
                    "private row (generator and decoder are DP outputs, z is fresh noise)."))
            assumptions.append(
                "Hyperparameters (architecture, learning rates, schedule, critic clip norm) are the "
                "paper's, which its authors tuned on the real data; that search is not accounted.")
        report = privacy.report(phases, delta, dataset_size=m, assumptions=assumptions,
                                seeded=run_key.seeded)
        report["preset"] = preset
        report["target_epsilon"] = None if epsilon is None or math.isinf(epsilon) else float(epsilon)
        report["released"] = ["generator", "decoder", "schema", "config"]
        self.config, self.schema, self._report = config, schema, report
        self._gen, self._dec = gan.generator.params, ae_state.params["decoder"]
        return self

    # -- release ----------------------------------------------------------------------------
    def _require_fitted(self):
        if self._gen is None:
            raise RuntimeError("This DPAutoGAN is not fitted; call fit() or DPAutoGAN.load() first.")

    def sample(self, n: int, seed: int | None = None, mode: str = "argmax") -> pd.DataFrame:
        """``n`` synthetic rows decoded to the schema (post-processing of the released model)."""
        self._require_fitted()
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
            raise ValueError(f"Expected n={n!r} to be a positive integer.")
        key = dpsgd.make_key(seed).key
        k_z, k_dec = jax.random.split(key)
        encoder = data_lib.TableEncoder(self.schema)
        arr = sample_encoded(self.config, encoder.width, self._gen, self._dec, int(n), k_z)
        return encoder.decode(arr, mode=mode, key=k_dec if mode == "sample" else None)

    def privacy_report(self) -> dict:
        self._require_fitted()
        return self._report

    def save(self, path) -> None:
        """Writes generator, decoder, schema, config, privacy report and versions (no key)."""
        from dpgen_jax.synthesizers._release import save_release

        self._require_fitted()
        save_release(path, self.METHOD, {"generator": self._gen, "decoder": self._dec}, {
            "config": self.config.to_dict(), "schema": self.schema.to_dict(),
            "privacy_report": self._report})

    @classmethod
    def load(cls, path) -> "DPAutoGAN":
        from dpgen_jax.synthesizers._release import load_release

        groups, meta = load_release(path, cls.METHOD)
        try:
            config = DPAutoGANConfig.from_dict(meta["config"]).validate()
            schema = data_lib.Schema.from_dict(meta["schema"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{str(path)!r} has an invalid DPAutoGAN record: {exc}") from exc
        model = cls(config)
        width = data_lib.TableEncoder(schema).width
        expected = jax.eval_shape(lambda k: init(config, width, k), jax.random.key(0))
        dec_expected = expected.autoencoder["decoder"]
        for name, got, want in (("generator", groups.get("generator"), expected.generator),
                                ("decoder", groups.get("decoder"), dec_expected)):
            if got is None or jax.tree_util.tree_structure(got) != jax.tree_util.tree_structure(want) or any(
                    np.shape(a) != np.shape(b) for a, b in zip(jax.tree_util.tree_leaves(got),
                                                                jax.tree_util.tree_leaves(want))):
                raise ValueError(f"{str(path)!r}: the saved {name} does not match its configuration.")
        model.schema, model._report = schema, meta["privacy_report"]
        model._gen = jax.tree_util.tree_map(jnp.asarray, groups["generator"])
        model._dec = jax.tree_util.tree_map(jnp.asarray, groups["decoder"])
        return model


class _Progress:
    """A tqdm bar per phase showing the step and the epsilon spent so far (RDP, for display)."""

    def __init__(self, enabled: bool, config, m, delta, private):
        self.enabled, self.config, self.m, self.delta, self.private = enabled, config, m, delta, private
        self.bar = None

    def phase(self, name: str, ae_done: int):
        if not self.enabled:
            return None
        from tqdm.auto import tqdm

        total = self.config.ae_steps if name == "autoencoder" else self.config.critic_steps

        def update(done: int, _total: int):
            if self.bar is None or self.bar.desc != name:
                if self.bar is not None:
                    self.bar.close()
                self.bar = tqdm(total=total, desc=name, unit="step")
            self.bar.n = done
            if self.private:
                ae, cr = (done, 0) if name == "autoencoder" else (ae_done, done)
                eps = privacy.epsilon(privacy_phases(self.config, self.m, ae_steps=ae, critic_steps=cr),
                                      self.delta, accountant="rdp")
                self.bar.set_postfix_str(f"eps(rdp)={eps:.3f}")
            self.bar.refresh()

        return update

    def close(self):
        if self.bar is not None:
            self.bar.close()
