"""DP-SACTGAN's configuration, its choices and the paper's preset (``docs/dp-sactgan.md``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax.synthesizers._config import Flags, GeneratorConfig

MODE_SOURCES = ("dp-em", "public")
MODE_ASSIGNMENTS = ("argmax", "sample")
COND_SOURCES = ("noisy", "uniform")
#: "hook": the paper's sanitiser on the generator's output (K sharded critics); "critic": DP-SGD on
#: one critic and classifier, the generator trained on their outputs only (docs/dp-sactgan.md).
MECHANISMS = ("hook", "critic")
# The speed settings this method reads and their defaults (synthesizers.Flags): generator steps
# (hook) or iterations of critic steps and a generator step (critic) per compiled call; shards
# vmapped together in pretraining.
FLAGS = Flags(chunk_size=100, shard_group=32)
#: Below this per-step signal-to-noise bound, sqrt(B) / (2 sigma sqrt(width)), a calibration warns.
ABSURD_SNR = 1e-3

PAPER_PRESETS: dict[str, dict[str, Any]] = {
    # the paper's single discriminator on CTAB-GAN+'s schedule: B = 500, 150 epochs
    "paper": {"mechanism": "hook", "num_discriminators": 1, "batch_size": 500, "epochs": 150.0},
}


@dataclasses.dataclass(frozen=True)
class DPSACTGANConfig(GeneratorConfig):
    """Hyperparameters of DP-SACTGAN (all public; ``docs/dp-sactgan.md`` says where each comes from).

    ``num_discriminators`` (K): None chooses ``min(max_discriminators, N // batch_size)`` (every
    shard holds a batch on average); an explicit K must leave N / K >= batch_size. K = 1 is the
    paper's single discriminator. ``epochs`` (if set) gives ``epochs * (N // batch_size)``
    generator steps (CTAB-GAN+'s schedule) instead of ``generator_steps``.

    ``mechanism``: ``"critic"`` (the default, chosen on generated tables: ``docs/dp-sactgan.md``)
    or ``"hook"`` (the paper's). ``"hook"`` releases one sanitised gradient of the generator's
    output per step, with K critics on secret shards; ``"critic"`` trains one critic and the
    auxiliary classifier with DP-SGD (real rows Poisson-sampled at ``batch_size / N``, each real
    row's critic and classifier terms clipped jointly to ``clip_norm``, Gaussian noise of std
    ``noise_multiplier * clip_norm``, ``critic_steps`` DP steps per generator step) and the
    generator on their outputs only; K is 1, nothing is pretrained, the information loss is not
    used (it reads real rows' critic features). ``generator_average`` (critic mechanism only): the
    released generator is the bias-corrected exponential moving average of its iterates with this
    decay (post-processing); None releases the last iterate.

    ``preprocessing_share``: ``fit(epsilon=...)`` first scales the histogram and DP-EM noise so
    that those mechanisms alone spend this share of epsilon, then calibrates the generator noise
    with them held fixed; None keeps ``hist_noise_multiplier`` and ``em_noise_multiplier`` as given.
    """


    mechanism: str = "critic"

    num_discriminators: int | None = None
    max_discriminators: int = 100
    batch_size: int = 64
    generator_steps: int = 2000
    epochs: float | None = None
    critic_steps: int = 1
    pretrain_iterations: int = 0
    noise_dim: int = 100
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    aux_hidden: tuple[int, ...] = (256, 256, 256, 256)
    aux_classifier: bool = True
    info_loss: bool = True
    modes: str = "dp-em"
    n_modes: int = 10
    em_iterations: int = 10
    mode_assignment: str = "argmax"
    cond: str = "noisy"
    hist_noise_multiplier: float = 100.0
    em_noise_multiplier: float = 100.0
    preprocessing_share: float | None = 0.1
    noise_multiplier: float = 1.0
    clip_norm: float = 1.0
    gradient_penalty: float = 10.0
    learning_rate: float = 2e-4
    beta1: float = 0.5
    beta2: float = 0.9
    adam_eps: float = 1e-3
    weight_decay: float = 1e-5
    tau: float = 0.2
    generator_average: float | None = None

    def validate(self) -> DPSACTGANConfig:
        for name in ("max_discriminators", "batch_size", "critic_steps", "noise_dim", "d_model",
                     "num_heads", "num_layers", "n_modes"):
            _v.whole(minimum=1, **{name: getattr(self, name)})
        for name in ("generator_steps", "pretrain_iterations", "em_iterations"):
            _v.whole(minimum=0, **{name: getattr(self, name)})
        if self.num_discriminators is not None:
            _v.whole(minimum=1, num_discriminators=self.num_discriminators)
        if self.epochs is not None:
            _v.positive(epochs=self.epochs)
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not a multiple of num_heads={self.num_heads}: "
                             "pick a d_model that num_heads divides.")
        _v.widths(aux_hidden=self.aux_hidden)
        for name in ("aux_classifier", "info_loss"):
            _v.boolean(**{name: getattr(self, name)})
        _v.one_of(MECHANISMS, mechanism=self.mechanism)
        if self.mechanism == "critic":
            if self.num_discriminators not in (None, 1):
                raise ValueError(f"mechanism='critic' trains one critic with DP-SGD on every record; "
                                 f"num_discriminators={self.num_discriminators} must be None or 1.")
            if self.pretrain_iterations:
                raise ValueError(f"mechanism='critic' releases the generator trained on a DP critic; "
                                 f"pretrain_iterations={self.pretrain_iterations} would train that critic "
                                 "on private rows without noise: use 0.")
        if self.generator_average is not None:
            if self.mechanism != "critic":
                raise ValueError(f"generator_average={self.generator_average!r} averages the critic mechanism's "
                                 "generator iterates; mechanism='hook' releases its last iterate: use None.")
            _v.fraction(generator_average=self.generator_average)
        _v.one_of(MODE_SOURCES, modes=self.modes)
        _v.one_of(MODE_ASSIGNMENTS, mode_assignment=self.mode_assignment)
        _v.one_of(COND_SOURCES, cond=self.cond)
        for name in ("hist_noise_multiplier", "em_noise_multiplier", "noise_multiplier", "clip_norm",
                     "learning_rate", "adam_eps", "tau"):
            _v.positive(**{name: getattr(self, name)})
        for name in ("gradient_penalty", "weight_decay"):
            _v.non_negative(**{name: getattr(self, name)})
        for name in ("beta1", "beta2"):
            _v.between(low=0, high=1, high_open=True, **{name: getattr(self, name)})
        if self.preprocessing_share is not None:
            _v.fraction(preprocessing_share=self.preprocessing_share)
        return super().validate()
