"""DP-WGAN, the GAN baseline of DP-auto-GAN (Frigerio, Santana de Oliveira, Gomez and Duverger
2019, "Differentially Private Generative Adversarial Networks for Time Series, Continuous, and
Discrete Open Data", IFIP SEC; as run by Tantipongpipat et al. 2021). See ``docs/dp-wgan.md``.

A generator maps N(0, I) noise straight to encoded rows (a softmax per categorical block, a
sigmoid per binary or continuous column) and a critic compares them with real rows. Only the
critic touches the private rows: one DP-SGD phase with exact Poisson sampling, each real row
paired with one fresh generated row and the pair's critic term clipped as a whole (or only the
real term, ``critic_clipping="real_only"``), Gaussian noise, and the WGAN weight clamp. The
generator steps every ``critic_steps_per_generator_step`` critic steps and sees no real row
(post-processing). Only the generator is released.

Preprocessing: ``"mixed"`` (default) models every column of the schema; ``"paper"`` deletes the
continuous columns first and models only the discrete ones, as the reference implementation
does (it handles categorical data only). The fitted model's schema, its samples and its release
file then have only those columns, and the privacy report says which columns were deleted.

Functional API: :func:`working_schema`, :func:`init`, :func:`fake_rows`,
:func:`resolve_clip_norm`, :func:`make_gan_runner`, :func:`train_gan`, :func:`sample_encoded`,
:func:`privacy_phases`. Class API: :class:`DPWGAN` (``synthesizers.create("dp-wgan")``).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax import models
from dpgen_jax.synthesizers import _gan, _losses, _dpsgd_phases
from dpgen_jax.synthesizers._base import Flags, Synthesizer, Release, register
from dpgen_jax.synthesizers._config import GeneratorConfig

PREPROCESSINGS = ("mixed", "paper")
# The paper's noise multipliers for epsilon 0.36 / 0.51 / 1.01 (Tantipongpipat et al. 2021, App. E.2)
# at the default batch size; each step count is the largest whose epsilon under the paper's
# accounting (RDP, classic conversion, delta 1e-5) stays at or below the paper's epsilon for
# Adult's 32,561 training rows (tests/test_dp_wgan.py recomputes them).
PAPER_BATCH_SIZE = 2048
PAPER_PRESETS: dict[str, dict[str, Any]] = {
    "paper-0.36": {"batch_size": PAPER_BATCH_SIZE, "noise_multiplier": 27.5, "critic_steps": 1053},
    "paper-0.51": {"batch_size": PAPER_BATCH_SIZE, "noise_multiplier": 19.0, "critic_steps": 999},
    "paper-1.01": {"batch_size": PAPER_BATCH_SIZE, "noise_multiplier": 9.0, "critic_steps": 849},
}
CLIP_NORM_RULES = ("public-median",)
# The speed settings this method reads and their defaults (synthesizers.Flags).
FLAGS = Flags(clip_method="ghost", chunk_size=200)


@dataclasses.dataclass(frozen=True)
class DPWGANConfig(GeneratorConfig):
    """Hyperparameters of DP-WGAN. All fields are public and go into the privacy report.

    The defaults are the ``"paper-1.01"`` schedule; ``fit(epsilon=...)`` calibrates the noise
    multiplier for the configured steps, ``fit(preset=...)`` uses a published noise multiplier.
    ``docs/dp-wgan.md`` says where every value comes from. ``clip_norm="public-median"``: see
    :func:`resolve_clip_norm` (no private row is read).
    """


    preprocessing: str = "mixed"
    noise_dim: int | None = None                  # None: the encoded width (the reference's choice)
    hidden: tuple[int, ...] = (64, 64, 64)        # generator hidden widths
    critic_hidden: tuple[int, ...] | None = None  # None: the generator's
    batch_size: int | None = None                 # None: min(2048, N // 10), see batch_size_for
    critic_steps: int = PAPER_PRESETS["paper-1.01"]["critic_steps"]
    noise_multiplier: float = PAPER_PRESETS["paper-1.01"]["noise_multiplier"]
    clip_norm: float | str = "public-median"
    critic_clipping: str = "paired"
    weight_clamp: float | None = 0.01
    critic_steps_per_generator_step: int = 5
    generator_batch_size: int | None = None       # None: batch_size
    critic_learning_rate: float = 0.001
    generator_learning_rate: float = 0.001

    def validate(self) -> DPWGANConfig:
        _v.one_of(PREPROCESSINGS, preprocessing=self.preprocessing)
        _v.one_of(_gan.CRITIC_CLIPPINGS, critic_clipping=self.critic_clipping)
        _v.whole(minimum=1, critic_steps_per_generator_step=self.critic_steps_per_generator_step)
        for name in ("batch_size", "noise_dim", "generator_batch_size"):
            v = getattr(self, name)
            if v is not None:
                _v.whole(minimum=1, **{name: v})
        _v.whole(minimum=0, critic_steps=self.critic_steps)
        for name, widths in (("hidden", self.hidden), ("critic_hidden", self.critic_hidden or (1,))):
            _v.widths(**{name: widths})
        if isinstance(self.clip_norm, str):
            _v.one_of(CLIP_NORM_RULES, clip_norm=self.clip_norm)
        else:
            _v.positive(clip_norm=self.clip_norm)  # a number, or one of the rules above
        for name in ("noise_multiplier", "critic_learning_rate", "generator_learning_rate"):
            _v.positive(**{name: getattr(self, name)})
        if self.weight_clamp is not None:
            _v.positive(allow_inf=True, weight_clamp=self.weight_clamp)  # or None: no clamp
        return super().validate()


# ----------------------------------------------------------------------------- structure


def working_schema(preprocessing: str, schema: data_lib.Schema) -> data_lib.Schema:
    """The schema the model is trained on: ``schema`` itself, or (``"paper"``) its discrete
    columns, with a note (copied into the privacy report) naming the deleted columns.

    Raises:
        ValueError: ``"paper"`` preprocessing of a schema without discrete columns.
    """
    dropped = [c.name for c in schema.columns if c.kind == "continuous"]
    _v.one_of(PREPROCESSINGS, preprocessing=preprocessing)
    if preprocessing == "mixed" or not dropped:
        return schema
    kept = tuple(c for c in schema.columns if c.kind != "continuous")
    if not kept:
        raise ValueError("preprocessing='paper' keeps only the discrete columns, and the schema "
                         f"has none (all of {schema.names} are continuous).")
    note = (f"Preprocessing 'paper' (DP-WGAN as run by Tantipongpipat et al. 2021): the continuous "
            f"column(s) {dropped} were deleted before training; the model, its samples and its "
            "release cover only the discrete columns.")
    return data_lib.Schema(kept, source=schema.source, notes=schema.notes + (note,))


def networks(config: DPWGANConfig, width: int) -> models.DPWGANNetworks:
    return models.dp_wgan_networks(width, hidden=config.hidden, critic_hidden=config.critic_hidden)


class Params(NamedTuple):
    generator: PyTree
    critic: PyTree


def noise_dim(config: DPWGANConfig, width: int) -> int:
    return config.noise_dim or width


@functools.partial(jax.jit, static_argnums=(0, 1))
def init(config: DPWGANConfig, width: int, key: jax.Array) -> Params:
    """Initial parameters (PyTorch-style initialisation) of the generator and the critic."""
    nets = networks(config, width)
    k1, k2 = jax.random.split(key)
    return Params(nets.generator.init(k1, jnp.zeros((1, noise_dim(config, width))))["params"],
                  nets.critic.init(k2, jnp.zeros((1, width)))["params"])


def fake_rows(config: DPWGANConfig, blocks: tuple, gen_params, key: jax.Array, n: int) -> jax.Array:
    """``n`` generated rows in the encoded layout: softmax per categorical block, sigmoid elsewhere."""
    width = max(b.stop for b in blocks)
    z = jax.random.normal(key, (n, noise_dim(config, width)))
    logits = networks(config, width).generator.apply({"params": gen_params}, z)
    return _losses.output_activation(blocks)(logits)


_sample_jit = functools.partial(jax.jit, static_argnums=(0, 1, 4))(fake_rows)


# ----------------------------------------------------------------------------- training


def make_gan_runner(config: DPWGANConfig, blocks: tuple, num_rows: int, phase, *,
                    flags: Flags = FLAGS) -> _gan.GANRunner:
    """The compiled GAN phase ``run(state, data, None, key, n_iterations, total) -> state`` and
    its optimizers (``_gan.rmsprop_gan_runner``); the critic's steps realise ``phase`` (from
    :func:`privacy_phases`, its clip norm resolved; a ``NonPrivatePhase``: a non-private critic)."""
    critic = networks(config, max(b.stop for b in blocks)).critic
    return _gan.rmsprop_gan_runner(
        lambda p, x: critic.apply({"params": p}, x),
        lambda gp, _frozen, k, n: fake_rows(config, blocks, gp, k, n),
        critic_learning_rate=config.critic_learning_rate,
        generator_learning_rate=config.generator_learning_rate,
        weight_clamp_bound=config.weight_clamp, phase=phase, scan_rows=num_rows,
        clipping=config.critic_clipping,
        critic_steps_per_generator_step=config.critic_steps_per_generator_step,
        generator_batch_size=config.generator_batch_size or phase.batch_size,
        method=flags.clip_method)


def train_gan(config: DPWGANConfig, blocks: tuple, params: Params, data: jax.Array, key: jax.Array,
              phase, *, progress=None, should_stop=None, checkpoint=None,
              flags: Flags = FLAGS) -> _gan.GANState:
    """The ``phase.steps`` critic steps of the accounted ``phase`` (a ``NonPrivatePhase``:
    non-private) with interleaved generator steps, from ``params`` (``_gan.train_gan``)."""
    runner = make_gan_runner(config, blocks, data.shape[0], phase, flags=flags)
    return _gan.train_gan(runner, params.critic, params.generator, data, None, key,
                          critic_steps=phase.steps, chunk_size=flags.chunk_size,
                          critic_steps_per_generator_step=config.critic_steps_per_generator_step,
                          progress=progress, should_stop=should_stop, checkpoint=checkpoint)


def resolve_clip_norm(config: DPWGANConfig, schema: data_lib.Schema, params: Params,
                      key: jax.Array) -> tuple[float, str]:
    """The critic clip norm and the report sentence saying how it was chosen (no private row).

    ``"public-median"``: the median per-example gradient norm of the critic term at the start of
    training (initial critic after the weight clamp, initial generator) over rows drawn uniformly
    from the public schema, each paired with one generated row. The critic's gradients grow as it
    trains, so nearly every private example is clipped: DP-SGD then follows the normalised
    per-example gradients, whose scale RMSProp ignores (``docs/dp-wgan.md``).
    """
    if not isinstance(config.clip_norm, str):
        value = float(config.clip_norm)
        return value, f"The critic clip norm C={value} is a fixed configuration value."
    blocks = tuple(data_lib.TableEncoder(schema).blocks)
    width = max(b.stop for b in blocks)
    critic = networks(config, width).critic
    clamp = _dpsgd_phases.weight_clamp(config.weight_clamp) or (lambda p: p)
    k_rows, k_fake = jax.random.split(key)
    batch = {"real": data_lib.uniform_rows(schema, 1024, k_rows),
             "fake": _sample_jit(config, blocks, params.generator, k_fake, 1024)}
    value = _dpsgd_phases.median_grad_norm(
        _gan.paired_critic_loss(lambda p, x: critic.apply({"params": p}, x)), clamp(params.critic), batch)
    return value, (
        f"The critic clip norm C={value:.6g} was chosen without the private rows: the median "
        "per-example critic-term gradient norm of the initial networks on rows drawn uniformly "
        "from the public schema.")


# ----------------------------------------------------------------------------- sampling, privacy


def sample_encoded(config: DPWGANConfig, schema: data_lib.Schema, gen_params, n: int,
                   key: jax.Array) -> np.ndarray:
    """``n`` generated rows of the (working) ``schema`` in the encoded layout, values in [0, 1]."""
    blocks = tuple(data_lib.TableEncoder(schema).blocks)
    return np.asarray(_sample_jit(config, blocks, gen_params, key, int(n)))


def batch_size_for(config: DPWGANConfig, num_records: int) -> int:
    """The expected batch: ``batch_size``, or by default the paper's 2,048 capped at a tenth of
    the N records (a sampling rate of at most 0.1), so that the default works on small tables;
    on Adult (N = 32,561) it is the paper's 2,048."""
    if config.batch_size is not None:
        return config.batch_size
    return max(1, min(PAPER_BATCH_SIZE, _v.whole(minimum=0, num_records=num_records) // 10))


def privacy_phases(config: DPWGANConfig, num_records: int, *, steps: Mapping[str, int] | None = None,
                   private: bool = True) -> list:
    """One phase: the critic's Poisson-subsampled Gaussian DP-SGD (or non-private)."""
    return [_dpsgd_phases.dpsgd_phase(
        "critic", batch_size=batch_size_for(config, num_records), num_records=num_records,
        noise_multiplier=config.noise_multiplier, steps=dict(steps or {}).get("critic", config.critic_steps),
        clip_norm=config.clip_norm, private=private)]


@register
class DPWGAN(Synthesizer):
    """DP-WGAN with a scikit-learn-like interface.

    ``sample`` draws each discrete column from the generator's output probabilities by default
    (``mode="sample"``, as the reference implementation decodes); ``mode="argmax"`` takes the most
    likely category. With ``preprocessing="paper"`` the samples have only the discrete columns.

    Example:
        >>> model = DPWGAN(preprocessing="paper").fit(train_df, data.adult_schema(),
        ...                                           preset="paper-0.51")        # doctest: +SKIP
        >>> model.sample(1000).columns                                          # doctest: +SKIP
    """

    METHOD = "dp-wgan"
    DESCRIPTION = ("WGAN in data space with a DP-SGD critic (Frigerio et al. 2019), the baseline of "
                   "Tantipongpipat et al. 2021")
    CONFIG = DPWGANConfig
    SMOKE = dict(critic_steps=10, critic_steps_per_generator_step=5, chunk_size=4, batch_size=16,
                 hidden=(16, 16), clip_norm=0.01)
    PRESETS = PAPER_PRESETS
    DECODE_MODE = "sample"
    CHECKPOINTS = True
    FLAGS = FLAGS

    def _preprocessing(self) -> str:
        base = self.config if self.config is not None else DPWGANConfig()
        return self.overrides.get("preprocessing", base.preprocessing)

    def fit(self, df, schema, **kwargs) -> DPWGAN:
        """As :meth:`Synthesizer.fit`; with ``preprocessing="paper"`` the frame must still have
        every column of ``schema``, and the continuous ones are deleted before training."""
        if self._preprocessing() == "paper" and isinstance(schema, data_lib.Schema):
            data_lib.check_frame(df, schema)
            schema = working_schema("paper", schema)
            df = df[schema.names]
        return super().fit(df, schema, **kwargs)

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, num_records, private=private)

    def _train(self, plan, x, key, hooks) -> Release:
        config = plan.config
        config = config.replace(batch_size=plan.phase("critic").batch_size)  # the plan's expected batch
        blocks = tuple(data_lib.TableEncoder(plan.model_schema).blocks)
        k_init, k_clip, k_gan = jax.random.split(key, 3)
        params = init(config, x.shape[1], k_init)
        t0 = time.perf_counter()
        notes, phase, clip_norms = [], plan.phase("critic"), {}
        if plan.private:
            clip, note = resolve_clip_norm(config, plan.model_schema, params, k_clip)
            config, phase = config.replace(clip_norm=clip), phase.with_clip_norm(clip)
            clip_norms["critic"] = clip
            notes += [note, _gan.critic_term_note(config.critic_clipping, "the generator is a DP output")]
            if plan.preset is not None:
                notes.append("The preset's noise multiplier is the paper's, which its authors chose "
                             "by evaluating synthetic data against the real data; that search is not "
                             "accounted.")
        t1 = time.perf_counter()
        state = train_gan(config, blocks, params, x, k_gan, phase, **hooks.phase_args("critic"))
        jax.block_until_ready(state.generator.params)
        t2 = time.perf_counter()
        return Release(arrays={"generator": state.generator.params},
                           steps={"critic": int(state.critic.steps)}, clip_norms=clip_norms,
                           seconds={"clip_norm": t1 - t0, "gan": t2 - t1}, notes=tuple(notes))

    def _sample_encoded(self, n, key):
        return sample_encoded(self.fitted_config, self.model_schema, self.released["generator"], n, key)

    def _release_shapes(self, config, schema, statistics):
        width = data_lib.TableEncoder(schema).width
        return {"generator": jax.eval_shape(lambda k: init(config, width, k), jax.random.key(0)).generator}
