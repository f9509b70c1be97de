"""Training phases as ``dp_accounting`` events.

A phase is a frozen dataclass holding the public parameters of one way of touching the private
data (sampling rate, noise multiplier, steps, ...). ``phase.event()`` turns it into the
``dp_accounting`` event an accountant interprets; :mod:`dpgen_jax.privacy._accounting` composes the
events of all phases of a run before one conversion to (epsilon, delta).

References:
    docs/privacy.md; Abadi et al. (2016), "Deep Learning with Differential Privacy" (DP-SGD);
    Chen, Orekondy and Fritz (2020), "GS-WGAN: A Gradient-Sanitized Approach for Learning
    Differentially Private Generators" (sharded phases).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any


import dp_accounting as dpa

from dpgen_jax import _validate as _v

NeighboringRelation = dpa.NeighboringRelation

_RELATION_NAMES = {
    NeighboringRelation.ADD_OR_REMOVE_ONE: "add_or_remove_one",
    NeighboringRelation.REPLACE_ONE: "replace_one",
    NeighboringRelation.REPLACE_SPECIAL: "replace_special",
}


def relation_name(relation: NeighboringRelation) -> str:
    """The report spelling of a neighbouring relation, e.g. ``"add_or_remove_one"``."""
    return _RELATION_NAMES[relation]


def _batch_rate(batch_size: int, num_records: int, ctx: str) -> float:
    """q = B / N, checked (1 <= B <= N): the one place a sampling rate is derived from a batch size."""
    n = _v.count(num_records, "num_records", 1, ctx)
    b = _v.count(batch_size, "batch_size", 1, ctx)
    if b > n:
        raise ValueError(f"{ctx}: expected batch_size <= num_records={n} (a sampling rate <= 1), got {b}.")
    return b / n


class Phase(abc.ABC):
    """Base class of all phases. Subclasses are frozen dataclasses with a ``name`` and ``steps``."""

    name: str
    steps: int

    @abc.abstractmethod
    def event(self) -> dpa.DpEvent:
        """The ``dp_accounting`` event of the whole phase (``NoOpDpEvent`` when ``steps == 0``)."""

    @property
    @abc.abstractmethod
    def neighbouring_relation(self) -> NeighboringRelation | None:
        """The neighbouring relation the event is stated under (None: compatible with any)."""

    @property
    @abc.abstractmethod
    def mechanism(self) -> str:
        """A short name of the mechanism, as written in the privacy report."""

    @property
    def noise_multiplier_or_none(self) -> float | None:
        """The noise multiplier that :func:`calibrate` scales, or None for a noiseless phase."""
        return None

    @property
    def spends_privacy(self) -> bool:
        """Whether the phase touches the private data at all (``steps > 0``)."""
        return self.steps > 0

    def _with_noise_multiplier(self, noise_multiplier: float) -> Phase:
        raise TypeError(f"{type(self).__name__} {self.name!r} has no noise multiplier to scale.")

    @abc.abstractmethod
    def _parameters(self) -> dict[str, Any]:
        """The public parameters of the phase for the report (JSON-serialisable)."""


@dataclasses.dataclass(frozen=True)
class DPSGDPhase(Phase):
    """A DP-SGD phase: Poisson-sampled batches, per-example clipping, Gaussian noise.

    Every step includes each record independently with probability ``sample_rate``, clips every
    example's gradient to L2 norm C, sums, and adds Gaussian noise with standard deviation
    ``noise_multiplier * C`` per coordinate (``dpgen_jax.dpsgd`` realises exactly this, with padded
    batches whose overflow is processed, never truncated).

    Args:
        name: Name of the phase in the report, e.g. ``"autoencoder"``.
        sample_rate: Poisson sampling probability q in (0, 1] (expected batch / dataset size).
        noise_multiplier: Noise standard deviation divided by the clip norm; finite and > 0.
        steps: Number of steps actually executed; an integer >= 0 (0 spends nothing).
        clip_norm: The per-example clip norm C, when known; reported as a number, it does not
            enter the event (epsilon depends on the noise multiplier alone).
        batch_size: The expected batch size q * N, when the phase was built from one (reported).

    Raises:
        TypeError: If an argument has the wrong type (e.g. ``steps=10.0``).
        ValueError: If an argument is outside its range.

    Privacy:
        ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)`` under
        add/remove-one neighbours (one record added or removed).

    Example:
        >>> phase = DPSGDPhase("critic", sample_rate=128 / 32561, noise_multiplier=7.5, steps=15000)
        >>> phase.event().count
        15000
    """

    name: str
    sample_rate: float
    noise_multiplier: float
    steps: int
    clip_norm: float | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        _v.name(self.name, "DPSGDPhase")
        ctx = f"DPSGDPhase {self.name!r}"
        object.__setattr__(self, "sample_rate", _v.sample_rate(self.sample_rate, "sample_rate", ctx))
        object.__setattr__(
            self, "noise_multiplier", _v.positive_finite(self.noise_multiplier, "noise_multiplier", ctx)
        )
        object.__setattr__(self, "steps", _v.count(self.steps, "steps", 0, ctx))
        if self.clip_norm is not None:
            object.__setattr__(self, "clip_norm", _v.positive_finite(self.clip_norm, "clip_norm", ctx))
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", _v.count(self.batch_size, "batch_size", 1, ctx))

    @classmethod
    def from_batch_size(
        cls,
        name: str,
        batch_size: int,
        num_records: int,
        noise_multiplier: float,
        steps: int,
        *,
        clip_norm: float | None = None,
    ) -> DPSGDPhase:
        """The phase of a DP-SGD schedule given as an expected batch size B over N records.

        q = B / N is derived here (and, for a non-private schedule, by
        :meth:`NonPrivatePhase.from_batch_size` with the same rule); the engine reads q, sigma, C
        and B from the phase (``dpsgd.make_dp_step``), so what runs is what is accounted.

        Args:
            name: Name of the phase in the report.
            batch_size: Expected batch size B, an integer with 1 <= B <= N.
            num_records: The (public) number of records N the rate refers to.
            noise_multiplier: sigma, finite and > 0.
            steps: Steps executed (or planned), an integer >= 0.
            clip_norm: The clip norm C, reported as a number.

        Example:
            >>> DPSGDPhase.from_batch_size("critic", 128, 32561, 7.5, 15000).sample_rate == 128 / 32561
            True
        """
        return cls(name, _batch_rate(batch_size, num_records, f"DPSGDPhase {name!r}"), noise_multiplier,
                   steps, clip_norm=clip_norm, batch_size=int(batch_size))

    def with_clip_norm(self, clip_norm: float) -> DPSGDPhase:
        """The phase with its clip norm C set (a norm chosen on public rows at train time is
        resolved into the phase this way, before the phase's first step)."""
        return dataclasses.replace(self, clip_norm=clip_norm)

    @property
    def noise_std(self) -> float:
        """sigma * C, the standard deviation of the noise added to the clipped sum per coordinate.

        Raises:
            ValueError: If the clip norm is not known yet (a rule resolved at train time).
        """
        if self.clip_norm is None:
            raise ValueError(f"DPSGDPhase {self.name!r} has no clip_norm yet; resolve it "
                             "(with_clip_norm) before running the phase.")
        return self.noise_multiplier * self.clip_norm

    def normaliser(self, scan_rows: int) -> float:
        """What the noised sum of a step is divided by: the public expected batch size B of a phase
        built from one (``from_batch_size``), else q times the ``scan_rows`` the sampler scans."""
        return float(self.batch_size) if self.batch_size is not None else self.sample_rate * scan_rows

    def event(self) -> dpa.DpEvent:
        """``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)``."""
        if self.steps == 0:
            return dpa.NoOpDpEvent()
        step = dpa.PoissonSampledDpEvent(self.sample_rate, dpa.GaussianDpEvent(self.noise_multiplier))
        return dpa.SelfComposedDpEvent(step, self.steps)

    @property
    def neighbouring_relation(self) -> NeighboringRelation:
        """Add/remove-one: Poisson sampling is analysed with one record added or removed."""
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def mechanism(self) -> str:
        return "poisson_subsampled_gaussian"

    @property
    def noise_multiplier_or_none(self) -> float:
        return self.noise_multiplier

    def _with_noise_multiplier(self, noise_multiplier: float) -> DPSGDPhase:
        return dataclasses.replace(self, noise_multiplier=noise_multiplier)

    def _parameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sample_rate": self.sample_rate, "noise_multiplier": self.noise_multiplier}
        if self.batch_size is not None:
            out["batch_size"] = self.batch_size
        out["clip_norm"] = self.clip_norm
        return out


@dataclasses.dataclass(frozen=True)
class GaussianPhase(Phase):
    """The Gaussian mechanism on the whole dataset (no subsampling), applied ``steps`` times.

    Each application releases a statistic whose L2 sensitivity under add/remove-one is
    ``sensitivity`` (public), plus Gaussian noise of standard deviation
    ``noise_multiplier * sensitivity`` per coordinate: a noisy histogram (sensitivity 1 for one
    histogram, sqrt(d) for d histograms of the same rows), DP-EM's noisy sufficient statistics, ...

    Args:
        name: Name of the phase in the report.
        noise_multiplier: Noise standard deviation divided by the sensitivity; finite and > 0.
        steps: Number of releases; an integer >= 0.
        sensitivity: The L2 sensitivity the noise is scaled to, when known; reported as a number,
            it does not enter the event (the noise multiplier is relative to it).

    Privacy:
        ``SelfComposedDpEvent(GaussianDpEvent(sigma), steps)`` under add/remove-one neighbours.

    Example:
        >>> GaussianPhase("histograms", noise_multiplier=5.0, steps=1).event()
        SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=5.0), count=1)
    """

    name: str
    noise_multiplier: float
    steps: int = 1
    sensitivity: float | None = None

    def __post_init__(self) -> None:
        _v.name(self.name, "GaussianPhase")
        ctx = f"GaussianPhase {self.name!r}"
        object.__setattr__(
            self, "noise_multiplier", _v.positive_finite(self.noise_multiplier, "noise_multiplier", ctx)
        )
        object.__setattr__(self, "steps", _v.count(self.steps, "steps", 0, ctx))
        if self.sensitivity is not None:
            object.__setattr__(self, "sensitivity", _v.positive_finite(self.sensitivity, "sensitivity", ctx))

    def event(self) -> dpa.DpEvent:
        """``SelfComposedDpEvent(GaussianDpEvent(sigma), steps)`` (``NoOpDpEvent`` for 0 steps)."""
        if self.steps == 0:
            return dpa.NoOpDpEvent()
        return dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(self.noise_multiplier), self.steps)

    @property
    def neighbouring_relation(self) -> NeighboringRelation:
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def mechanism(self) -> str:
        return "gaussian"

    @property
    def noise_multiplier_or_none(self) -> float:
        return self.noise_multiplier

    def _with_noise_multiplier(self, noise_multiplier: float) -> GaussianPhase:
        return dataclasses.replace(self, noise_multiplier=noise_multiplier)

    @property
    def noise_std(self) -> float:
        """sigma * sensitivity, the standard deviation of the noise per coordinate of a release.

        Raises:
            ValueError: If the phase states no sensitivity.
        """
        if self.sensitivity is None:
            raise ValueError(f"GaussianPhase {self.name!r} states no sensitivity, so no noise std.")
        return self.noise_multiplier * self.sensitivity

    def _parameters(self) -> dict[str, Any]:
        return {"noise_multiplier": self.noise_multiplier, "sensitivity": self.sensitivity}


@dataclasses.dataclass(frozen=True)
class ExponentialMechanismPhase(Phase):
    """``steps`` selections by the exponential mechanism, each epsilon-DP, accounted as zCDP.

    Each selection draws one candidate with probability proportional to
    ``exp(epsilon * score / (2 * sensitivity))``, where every candidate's score changes by at
    most ``sensitivity`` when one record is added or removed. Such a selection is epsilon-DP and
    epsilon-bounded-range, hence (epsilon^2 / 8)-zCDP (Cesar and Rogers 2021, "Bounding, Concentrating,
    and Truncating: Unifying Privacy Loss Composition for Data Analytics"), the bound MST
    (McKenna, Miklau and Sheldon 2021) accounts with. ``dp_accounting`` represents exactly that
    bound as ``ZCDpEvent(rho)``, whose RDP is ``rho * alpha`` at every order; only the RDP
    accountant interprets it (the PLD accountant has no event for the exponential mechanism),
    so runs with this phase report RDP epsilons (see docs/privacy.md).

    For calibration the phase exposes the noise multiplier of the Gaussian mechanism with the same
    zCDP cost: ``noise_multiplier = 2 / epsilon`` (rho = epsilon^2 / 8 = 1 / (2 sigma^2)), so one
    common factor on every noise multiplier keeps a zCDP budget split between Gaussian phases and
    this one.

    Args:
        name: Name of the phase in the report.
        epsilon: Epsilon of each selection; finite and > 0.
        steps: Number of selections; an integer >= 0.
        sensitivity: The scores' sensitivity the mechanism is scaled to, when known; reported as a
            number, it does not enter the event.

    Privacy:
        ``SelfComposedDpEvent(ZCDpEvent(epsilon**2 / 8), steps)`` under add/remove-one
        neighbours (RDP accountant only).

    Example:
        >>> ExponentialMechanismPhase("selection", epsilon=0.4, steps=2).event()
        SelfComposedDpEvent(event=ZCDpEvent(rho=0.020000000000000004, xi=0.0), count=2)
    """

    name: str
    epsilon: float
    steps: int = 1
    sensitivity: float | None = None

    def __post_init__(self) -> None:
        _v.name(self.name, "ExponentialMechanismPhase")
        ctx = f"ExponentialMechanismPhase {self.name!r}"
        object.__setattr__(self, "epsilon", _v.positive_finite(self.epsilon, "epsilon", ctx))
        object.__setattr__(self, "steps", _v.count(self.steps, "steps", 0, ctx))
        if self.sensitivity is not None:
            object.__setattr__(self, "sensitivity", _v.positive_finite(self.sensitivity, "sensitivity", ctx))

    @classmethod
    def from_noise_multiplier(cls, name: str, noise_multiplier: float, steps: int = 1,
                              sensitivity: float | None = None) -> ExponentialMechanismPhase:
        """The phase whose zCDP cost per selection equals a Gaussian of ``noise_multiplier``."""
        sigma = _v.positive_finite(noise_multiplier, "noise_multiplier", f"ExponentialMechanismPhase {name!r}")
        return cls(name, 2.0 / sigma, steps, sensitivity)

    @property
    def rho(self) -> float:
        """zCDP of one selection, epsilon^2 / 8."""
        return self.epsilon**2 / 8.0

    @property
    def noise_multiplier(self) -> float:
        """2 / epsilon: the Gaussian noise multiplier with the same zCDP cost per selection."""
        return 2.0 / self.epsilon

    def event(self) -> dpa.DpEvent:
        """``SelfComposedDpEvent(ZCDpEvent(epsilon**2 / 8), steps)`` (``NoOpDpEvent`` for 0 steps)."""
        if self.steps == 0:
            return dpa.NoOpDpEvent()
        return dpa.SelfComposedDpEvent(dpa.ZCDpEvent(self.rho), self.steps)

    @property
    def neighbouring_relation(self) -> NeighboringRelation:
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def mechanism(self) -> str:
        return "exponential_mechanism"

    @property
    def noise_multiplier_or_none(self) -> float:
        return self.noise_multiplier

    def _with_noise_multiplier(self, noise_multiplier: float) -> ExponentialMechanismPhase:
        return dataclasses.replace(self, epsilon=2.0 / noise_multiplier)

    def _parameters(self) -> dict[str, Any]:
        return {"epsilon_per_step": self.epsilon, "rho_per_step": self.rho,
                "noise_multiplier": self.noise_multiplier, "sensitivity": self.sensitivity}


@dataclasses.dataclass(frozen=True)
class NonPrivatePhase(Phase):
    """A phase that trains on the private data without any DP mechanism (epsilon = infinity).

    Use it for ``epsilon=inf`` runs so that the report still lists the phase: any composition that
    contains a non-private phase with ``steps > 0`` has epsilon = inf, and the report says
    ``non_private: true``.

    A non-private phase of a sampled schedule also carries its sampling rate and expected batch
    size, so that the engine runs it from the phase like a private one (``dpsgd.make_dp_step``:
    no noise; plain gradients, or per-example gradients clipped to ``clip_norm`` when one is
    given, which is still no guarantee). They are schedule facts, not reported.

    Args:
        name: Name of the phase in the report.
        steps: Number of steps executed; an integer >= 0 (0: the data was never touched).
        sample_rate: The Poisson rate q of the steps, or None for a phase that samples nothing.
        batch_size: The expected batch size q * N when built from one (``from_batch_size``).
        clip_norm: A per-example clip norm the steps apply without noise, or None (no clipping).

    Privacy:
        ``NonPrivateDpEvent()`` (``NoOpDpEvent()`` when ``steps == 0``); compatible with any
        neighbouring relation.
    """

    name: str
    steps: int
    sample_rate: float | None = None
    batch_size: int | None = None
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        _v.name(self.name, "NonPrivatePhase")
        ctx = f"NonPrivatePhase {self.name!r}"
        object.__setattr__(self, "steps", _v.count(self.steps, "steps", 0, ctx))
        if self.sample_rate is not None:
            object.__setattr__(self, "sample_rate", _v.sample_rate(self.sample_rate, "sample_rate", ctx))
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", _v.count(self.batch_size, "batch_size", 1, ctx))
        if self.clip_norm is not None:
            object.__setattr__(self, "clip_norm", _v.positive_finite(self.clip_norm, "clip_norm", ctx))

    @classmethod
    def from_batch_size(cls, name: str, batch_size: int, num_records: int, steps: int) -> NonPrivatePhase:
        """The non-private phase of a schedule with expected batch size B over N records (q = B / N)."""
        return cls(name, steps, _batch_rate(batch_size, num_records, f"NonPrivatePhase {name!r}"),
                   int(batch_size))

    def normaliser(self, scan_rows: int) -> float:
        """As :meth:`DPSGDPhase.normaliser`: B when built from one, else q times ``scan_rows``."""
        if self.sample_rate is None:
            raise ValueError(f"NonPrivatePhase {self.name!r} has no sample_rate: it is not a sampled schedule.")
        return float(self.batch_size) if self.batch_size is not None else self.sample_rate * scan_rows

    def event(self) -> dpa.DpEvent:
        """``NonPrivateDpEvent()``, or ``NoOpDpEvent()`` when no step was run."""
        return dpa.NonPrivateDpEvent() if self.steps > 0 else dpa.NoOpDpEvent()

    @property
    def neighbouring_relation(self) -> None:
        return None

    @property
    def mechanism(self) -> str:
        return "non_private"

    def _parameters(self) -> dict[str, Any]:
        return {}


@dataclasses.dataclass(frozen=True)
class ParallelPhases(Phase):
    """Phases run on disjoint groups of the records: parallel composition under add/remove-one.

    Each group's phases read only the records of that group, and which group a record belongs to
    is decided by the record's own values (e.g. its label), so adding or removing one record
    changes the data of exactly one group. The other phases of the run (``shared``: those outside
    this object, e.g. a noisy count of the groups) see every record. Epsilon is then the maximum,
    over the groups, of the shared phases composed with that group's phases
    (:func:`~dpgen_jax.privacy.epsilon` computes each composition with one accountant and takes the
    maximum); :func:`~dpgen_jax.privacy.calibrate` calibrates each group on its own, so that every
    group meets the target.

    Args:
        name: Name of the phase in the report.
        groups: ``((group name, (phase, ...)), ...)``: at least one group; inner phases must be
            stated under add/remove-one (or no relation) and must not nest another
            ``ParallelPhases``. Phase names must be unique across groups.

    Privacy:
        No single ``dp_accounting`` event: :meth:`event` raises, and the accounting functions of
        :mod:`dpgen_jax.privacy` handle this phase themselves. Valid under add/remove-one only
        (under replace-one a record may move between two groups).
    """

    name: str
    groups: tuple

    def __post_init__(self) -> None:
        _v.name(self.name, "ParallelPhases")
        ctx = f"ParallelPhases {self.name!r}"
        if isinstance(self.groups, (str, bytes)) or not isinstance(self.groups, (tuple, list)) \
                or not self.groups:
            raise ValueError(f"{ctx}: expected groups to be a non-empty sequence of (name, phases), "
                             f"got groups={self.groups!r}.")
        groups, seen = [], set()
        for item in self.groups:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise ValueError(f"{ctx}: expected each group to be (name, phases), got {item!r}.")
            group, phases = item
            _v.name(group, ctx)
            phases = tuple(phases)
            for q in phases:
                if not isinstance(q, Phase) or isinstance(q, ParallelPhases):
                    raise TypeError(f"{ctx}: group {group!r} holds {q!r}; expected privacy phases "
                                    "(not another ParallelPhases).")
                if q.neighbouring_relation not in (None, NeighboringRelation.ADD_OR_REMOVE_ONE):
                    raise ValueError(f"{ctx}: phase {q.name!r} of group {group!r} is stated under "
                                     f"{relation_name(q.neighbouring_relation)}; parallel "
                                     "composition holds under add/remove-one only.")
                if q.name in seen:
                    raise ValueError(f"{ctx}: phase name {q.name!r} appears twice.")
                seen.add(q.name)
            groups.append((group, phases))
        if len({g for g, _ in groups}) != len(groups):
            raise ValueError(f"{ctx}: group names must be unique, got {[g for g, _ in groups]}.")
        object.__setattr__(self, "groups", tuple(groups))

    @property
    def steps(self) -> int:
        """The most steps any group ran (0 when no group touched its records)."""
        return max((q.steps for _, qs in self.groups for q in qs), default=0)

    @property
    def inner(self) -> tuple[Phase, ...]:
        """Every group's phases, in order."""
        return tuple(q for _, qs in self.groups for q in qs)

    def event(self) -> dpa.DpEvent:
        raise TypeError(f"ParallelPhases {self.name!r} has no single dp_accounting event: "
                        "privacy.epsilon, report and calibrate account it as the maximum over its "
                        "groups.")

    @property
    def neighbouring_relation(self) -> NeighboringRelation:
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def mechanism(self) -> str:
        return "parallel_composition"

    @property
    def spends_privacy(self) -> bool:
        return any(q.spends_privacy for q in self.inner)

    def _parameters(self) -> dict[str, Any]:
        return {"groups": [g for g, _ in self.groups]}
