"""GS-WGAN's configuration, presets, shard count and accounted phases (``docs/gs-wgan.md``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax import models, privacy
from dpgen_jax.synthesizers._config import Flags, GeneratorConfig

SAMPLE_FROM = ("ema", "raw")
CRITIC_SCHEDULES = ("all", "selected")
# The speed settings this method reads and their defaults (synthesizers.Flags).
FLAGS = Flags(chunk_size=500, shard_group=32, pretrain_chunk=50)
#: The smallest proven epsilon at which GS-WGAN's frontier on cardio reached TSTR AUROC 0.70
#: (experiments.studies.gswgan_frontier, docs/gs-wgan.md); below it a fit's report says what to expect.
LEARNS_FROM_EPSILON = 100.0

# The thesis's settings (sigma 1.07, B 32, C 1) at its five shard counts K: the thesis's K itself
# when the table's N records give shards of at least a batch on average (N / K >= B; on cardio's
# 56,000 training rows M1500 is K = 1500 shards of 37.3 rows, so the thesis's accounting gives its
# 6.45), else the thesis's shard size, K = round(N / (70,000 / K)) (Adult's 32,561 rows: M1500 is
# K = 698 shards of about 46.7 records). generator_steps are the checkpoints the
# thesis reported (docs/gs-wgan.md). The presets are the thesis's algorithm as published: 2,000
# pretraining iterations, only the drawn critic trains at each step ("selected"), BatchNorm in both
# networks (docs/gs-wgan.md, "Why sharded training collapses", says what that schedule does).
THESIS_ROWS = 70_000
THESIS_PRESETS: dict[str, dict[str, Any]] = {
    f"thesis-M{k}": {"records_per_shard": THESIS_ROWS / k, "thesis_shards": k, "generator_steps": t,
                     "num_shards": None,
                     "batch_size": 32, "noise_multiplier": 1.07, "clip_norm": 1.0,
                     "pretrain_iterations": 2000, "critic_schedule": "selected",
                     "generator_norm": "batch", "critic_norm": "batch"}
    for k, t in ((1500, 21_000), (1000, 39_000), (750, 20_000), (500, 38_000), (250, 21_000))
}


@dataclasses.dataclass(frozen=True)
class GSWGANConfig(GeneratorConfig):
    """Hyperparameters of GS-WGAN (all public; ``docs/gs-wgan.md`` says where each comes from).

    ``num_shards`` (K) fixes the number of discriminators; None derives it from the public
    number of records N as ``round(N / records_per_shard)`` (at least 1). ``critic_schedule``:
    ``"all"`` (default) gives every critic its ``critic_steps_per_generator_step`` updates on its
    own shard at every generator step, so that each critic keeps up with the generator, and the
    drawn critic's scores train the generator; ``"selected"`` is GS-WGAN's and the thesis's: only
    the drawn critic trains. Without noise the latter collapses every binary column to one value
    once K > 1 (``docs/gs-wgan.md``, "Why sharded training collapses"); the privacy analysis is the
    same for both. The defaults (shards of 160 records, no pretraining, 3,000 generator steps:
    about 15 steps per shard, as the thesis's M1500) keep the cost of ``"all"``, K x T x 5 critic
    updates, near the thesis's pretraining; the ``thesis-M*`` presets are the thesis's schedule.
    ``fit(epsilon=...)`` calibrates the noise multiplier under the proven bound (no cap short of
    1e7: a proven epsilon near 1 on Adult needs a noise multiplier far above 100).
    ``snapshot_every`` (0: off): keep a host copy of the moving-average generator after every that
    many generator steps, in memory only (:attr:`GSWGAN.snapshots`, :meth:`GSWGAN.sample_snapshot`),
    for choosing a checkpoint on held-out rows; each is a function of the sanitised steps before it,
    so the accounting of the executed steps covers it (the choice itself, on real rows, is not).
    """


    num_shards: int | None = None
    records_per_shard: float = 160.0
    thesis_shards: int | None = None
    batch_size: int = 32
    noise_dim: int = 32
    generator_hidden: tuple[int, ...] = (128, 256)
    critic_hidden: tuple[int, ...] = (128,)
    generator_norm: str = "layer"
    critic_norm: str = "layer"
    init: str = "torch"
    critic_steps_per_generator_step: int = 5
    pretrain_iterations: int = 0
    generator_steps: int = 3000
    noise_multiplier: float = 1.07
    clip_norm: float = 1.0
    gradient_penalty: float = 10.0
    drift: float = 1e-3
    learning_rate: float = 1e-4
    beta1: float = 0.0
    beta2: float = 0.9
    ema_decay: float = 0.999
    sample_from: str = "ema"
    critic_schedule: str = "all"
    snapshot_every: int = 0

    def validate(self) -> GSWGANConfig:
        for name in ("batch_size", "noise_dim", "critic_steps_per_generator_step"):
            _v.whole(minimum=1, **{name: getattr(self, name)})
        if self.num_shards is not None:
            _v.whole(minimum=1, num_shards=self.num_shards)
        if self.thesis_shards is not None:
            _v.whole(minimum=1, thesis_shards=self.thesis_shards)
        _v.whole(minimum=0, pretrain_iterations=self.pretrain_iterations)
        _v.whole(minimum=0, snapshot_every=self.snapshot_every)
        _v.whole(minimum=0, generator_steps=self.generator_steps)
        for name, widths in (("generator_hidden", self.generator_hidden),
                             ("critic_hidden", self.critic_hidden)):
            _v.widths(**{name: widths})
        _v.one_of(models._gswgan.NORMS, generator_norm=self.generator_norm)
        _v.one_of(models._gswgan.NORMS, critic_norm=self.critic_norm)
        _v.one_of(models._gswgan.INITS, init=self.init)
        _v.one_of(SAMPLE_FROM, sample_from=self.sample_from)
        _v.one_of(CRITIC_SCHEDULES, critic_schedule=self.critic_schedule)
        for name in ("records_per_shard", "noise_multiplier", "clip_norm", "learning_rate"):
            _v.positive(**{name: getattr(self, name)})
        for name in ("gradient_penalty", "drift"):
            _v.non_negative(**{name: getattr(self, name)})
        for name in ("beta1", "beta2", "ema_decay"):
            _v.between(low=0, high=1, high_open=True, **{name: getattr(self, name)})
        return super().validate()


def num_shards(config: GSWGANConfig, num_records: int) -> int:
    """K: ``num_shards``; else ``thesis_shards`` when N / thesis_shards >= B (the presets); else
    ``round(N / records_per_shard)``, all from the public number of records N.

    Raises:
        ValueError: K larger than N, or expected shards (N / K records) smaller than a batch.
    """
    n = _v.whole(minimum=1, num_records=num_records)
    if config.num_shards is not None:
        k, field = config.num_shards, "num_shards"
    elif config.thesis_shards is not None and n >= config.thesis_shards * config.batch_size:
        k, field = config.thesis_shards, "thesis_shards"
    else:
        k, field = max(1, round(n / config.records_per_shard)), "records_per_shard"
    value = getattr(config, field)
    _v.whole(f"{field}={value} on N={n} records", minimum=1, maximum=n, num_shards=k)
    if n / k < config.batch_size:
        raise ValueError(
            f"{field}={value} gives K={k} shards of N/K={n / k:.1f} records on average for N={n}, "
            f"fewer than batch_size={config.batch_size}; use fewer shards or a smaller batch.")
    return k


def privacy_phases(config: GSWGANConfig, num_records: int, *, steps: Mapping[str, int] | None = None,
                   private: bool = True, accounting: str = "proven") -> list:
    """The generator phase: :class:`privacy.ShardedSanitizerPhase` (pretraining releases nothing
    and has no event), or non-private."""
    t = dict(steps or {}).get("generator", config.generator_steps)
    if not private:
        return [privacy.NonPrivatePhase("generator", t)]
    return [privacy.ShardedSanitizerPhase(
        "generator", num_shards=num_shards(config, num_records), steps=t,
        rows_per_step=config.batch_size, noise_multiplier=config.noise_multiplier,
        dataset_size=num_records, accounting=accounting, clip_norm=config.clip_norm)]
