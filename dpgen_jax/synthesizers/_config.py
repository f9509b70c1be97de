"""What a fit computes and how fast it runs, kept apart.

* :class:`SynthesizerConfig`: the base of every method's configuration, a frozen dataclass of the
  public hyperparameters that decide the result (they are accounted, reported, released and part
  of a checkpoint's identity).
* :class:`Flags`: the speed settings, which change how a fit is compiled and run but not what it
  computes (a step's key is ``fold_in(key, step)``, so chunking does not change a draw; the
  clipping methods give the same clipped sum). They are not part of the configuration, the
  report, the release file or a checkpoint's identity; a method declares the flags it reads and
  their defaults (``Synthesizer.FLAGS``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd
from dpgen_jax._migrate import FLAGS_FROM_CONFIG


@dataclasses.dataclass(frozen=True)
class SynthesizerConfig:
    """Base of every method's configuration (a frozen dataclass of public hyperparameters).

    Noise multipliers in a configuration are the configured values: with a target epsilon the
    plan's phases carry the calibrated noise (one common factor on the configured values, unless
    the method calibrates otherwise), and the configuration is not changed.
    """

    def validate(self) -> SynthesizerConfig:
        """Checks every field; returns ``self``. Subclasses extend it."""
        return self

    def replace(self, **changes) -> SynthesizerConfig:
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"{type(self).__name__} has no field(s) {unknown}; expected some of "
                             f"{sorted(names)}.{moved_hint(unknown)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SynthesizerConfig:
        """Inverse of :meth:`to_dict` (JSON lists become tuples where the field holds a tuple); a
        field ``d`` lacks takes its default (a stored configuration of an earlier release format
        is brought to the current one by ``dpgen_jax._migrate`` before it gets here)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"{cls.__name__} has no field(s) {unknown}.")
        out = {}
        for k, v in d.items():
            out[k] = tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
        return cls(**out)


# The budget share of the neural generators' one-way marginal matching in the library's configurations
# (docs/matching.md: chosen on generated tables, never on the scored ones).
MATCHING_SHARE = 0.35
MATCHING_BINS = 20


@dataclasses.dataclass(frozen=True)
class GeneratorConfig(SynthesizerConfig):
    """Base of the neural generators' configurations: their shared one-way matching stage
    (``synthesizers._matching``, docs/matching.md).

    Attributes:
        matching_share: the share of the target epsilon spent on a Gaussian release of every
            column's one-way histogram (a phase ``"one-way"`` of the plan, its noise set so that
            alone it spends ``matching_share * epsilon``; the training phases are then
            calibrated with it held fixed so that the composition meets the target). Every sampled
            batch is then matched to the released marginals. 0 turns the stage off (the paper
            presets do).
        matching_bins: public bins per continuous column of the one-way release
            (``data.Discretizer``, automatic spacing).
    """

    matching_share: float = MATCHING_SHARE
    matching_bins: int = MATCHING_BINS

    def validate(self) -> GeneratorConfig:
        if self.matching_share != 0:
            _v.fraction(matching_share=self.matching_share)
        _v.whole(minimum=2, matching_bins=self.matching_bins)
        return super().validate()


@dataclasses.dataclass(frozen=True)
class Flags:
    """Speed settings of a fit: how it is compiled and run, never what it computes.

    A field left None takes the method's default (``Synthesizer.FLAGS``); a method that does not
    read a flag refuses a value for it. Set them with ``create(name, chunk_size=...)`` (keywords
    are sorted into configuration fields and flags), ``create(name, flags=Flags(...))`` or
    ``--set chunk_size=...`` on the command line.

    Attributes:
        clip_method: how the per-example clipped gradient sum is computed in DP-SGD phases
            (``dpsgd.METHODS``: ``"ghost"`` norms, ``"vmap"`` per-example gradients, ``"map"``
            the same by a compiled loop over the examples).
        chunk_size: training steps per compiled call (progress, the time budget and checkpoints
            act between calls).
        shard_group: for the sharded methods, how many shards one ``lax.map`` iteration ``vmap``-s.
        pretrain_chunk: GS-WGAN's pretraining iterations per compiled call.
    """

    clip_method: str | None = None
    chunk_size: int | None = None
    shard_group: int | None = None
    pretrain_chunk: int | None = None

    def validate(self) -> Flags:
        if self.clip_method is not None:
            _v.one_of(dpsgd.METHODS, clip_method=self.clip_method)
        for name in ("chunk_size", "shard_group", "pretrain_chunk"):
            if getattr(self, name) is not None:
                _v.whole(minimum=1, **{name: getattr(self, name)})
        return self

    def replace(self, **changes) -> Flags:
        unknown = sorted(set(changes) - FLAG_NAMES)
        if unknown:
            raise ValueError(f"Flags has no field(s) {unknown}; expected some of {sorted(FLAG_NAMES)}."
                             f"{moved_hint(unknown)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def over(self, defaults: Flags, method: str) -> Flags:
        """These flags on top of a method's ``defaults``; a flag the method does not read (None
        in its defaults) is refused, naming the ones it reads."""
        used = {k for k, v in dataclasses.asdict(defaults).items() if v is not None}
        extra = sorted(k for k, v in dataclasses.asdict(self).items() if v is not None and k not in used)
        if extra:
            raise ValueError(f"{method} has no speed setting(s) {extra}; it reads "
                             f"{sorted(used) or 'none'}.")
        return dataclasses.replace(defaults, **self.to_dict()).validate()


FLAG_NAMES = frozenset(f.name for f in dataclasses.fields(Flags))


def moved_hint(names) -> str:
    """The sentence for names that were configuration fields and are flags now ('' if none)."""
    moved = [n for n in names if n in FLAGS_FROM_CONFIG]
    if not moved:
        return ""
    pairs = ", ".join(f"{n!r} -> {FLAGS_FROM_CONFIG[n]!r}" for n in moved)
    return (f" Speed settings are flags now, outside the configuration ({pairs}): pass them as "
            "keywords of create() or in flags=Flags(...), or as --set NAME=VALUE (docs/architecture.md).")


def split_overrides(overrides: Mapping[str, Any], config_cls: type[SynthesizerConfig]
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword overrides sorted into configuration fields and flags. A renamed flag (``method``,
    now ``clip_method``) is refused with its new name."""
    fields = {f.name for f in dataclasses.fields(config_cls)}
    config, flags = {}, {}
    for name, value in overrides.items():
        if name in fields:
            config[name] = value
        elif name in FLAG_NAMES:
            flags[name] = value
        elif name in FLAGS_FROM_CONFIG:
            raise ValueError(f"{config_cls.__name__} has no field {name!r}.{moved_hint([name])}")
        else:
            config[name] = value  # refused by the configuration's replace, naming its fields
    return config, flags


__all__ = ["Flags", "SynthesizerConfig", "split_overrides"]
