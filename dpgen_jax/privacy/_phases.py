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
from collections.abc import Callable
from typing import Any, ClassVar

import dp_accounting as dpa
import numpy as np

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


def batch_rate(batch_size: int, num_records: float, context: str = "", *, float32: bool = False) -> float:
    """q = B / N, checked (B an integer, 1 <= B <= N): the one place a sampling rate is derived from
    a batch size. N is the public number of rows the rate refers to: the records (an integer, as
    :meth:`DPSGDPhase.from_batch_size` requires) or the rows a schedule assumes (real: DP-SYN's N
    times a group's public share). ``float32``: the largest float32 not above B / N instead, for a
    rate the engine reads as a traced float32 (DP-SYN's), so that the accounted rate is the one the
    compiled sampler realises; ``context`` names the caller in an error.

    Example:
        >>> q = batch_rate(1, 3, float32=True)  # float32(1 / 3) is above 1 / 3
        >>> batch_rate(1, 3) == 1 / 3 and q < 1 / 3 < float(np.float32(1 / 3)) == q + 2**-25
        True
    """
    n = _v.positive(context, num_records=num_records)
    b = _v.whole(context, minimum=1, batch_size=batch_size)
    if b > n:
        raise ValueError(f"{context}: expected batch_size <= num_records={n:g} (a sampling rate <= 1), "
                         f"got {b}.")
    q = b / n
    if not float32:
        return q
    q32 = np.float32(q)
    return float(np.nextafter(q32, np.float32(0)) if float(q32) > q else q32)


def noise_std_of(noise_multiplier: float, sensitivity: float) -> float:
    """sigma * sensitivity: the standard deviation of Gaussian noise scaled to an L2 sensitivity.

    The one place a noise std is computed from a noise multiplier; :attr:`Phase.noise_std` (and
    through it every phase kind's) calls it, with the sensitivity the phase kind owns.
    """
    return noise_multiplier * sensitivity


class Phase(abc.ABC):
    """Base class of all phases. Subclasses are frozen dataclasses with a ``name`` and ``steps``.

    A phase kind owns its accounting and engine facts: its event (:meth:`event`) and relation, its
    noise (:attr:`noise_multiplier_or_none`, :attr:`noise_sensitivity`, hence :attr:`noise_std`),
    the accountants that interpret it (:meth:`unsupported_reason`, :attr:`rdp_orders`,
    :attr:`exact_accountant`), its reported numbers (:meth:`report_parameters`) and a labelled
    assumed accounting beside the headline (:meth:`assumed_accounting`). The accounting and report
    code of :mod:`dpgen_jax.privacy` only calls these. The report's words for the kind (the
    mechanism's name, its assumption sentence and rank, how its noise is realised in floating
    point) are its entry in :data:`dpgen_jax.privacy._prose.PROSE`, under its ``KIND``. Adding a
    kind touches its own module, its prose entry, its import, its test and the docs
    (docs/architecture.md, "Adding a method, a metric, a phase kind, a noise sampler").
    """
    KIND: ClassVar[str]  # the stable name of the phase kind in saved files (each kind sets its own)

    name: str
    steps: int

    differentially_private: ClassVar[bool] = True
    """Whether the phase is a DP mechanism (False: its epsilon is infinite once it runs a step)."""

    @abc.abstractmethod
    def event(self) -> dpa.DpEvent:
        """The ``dp_accounting`` event of the whole phase (``NoOpDpEvent`` when ``steps == 0``)."""

    @property
    @abc.abstractmethod
    def neighbouring_relation(self) -> NeighboringRelation | None:
        """The neighbouring relation the event is stated under (None: compatible with any)."""

    @property
    def noise_multiplier_or_none(self) -> float | None:
        """The noise multiplier that :func:`calibrate` scales, or None for a noiseless phase."""
        return None

    @property
    def noise_sensitivity(self) -> float | None:
        """The L2 sensitivity the phase's Gaussian noise is scaled to (None: not known yet, or no
        Gaussian noise)."""
        return None

    @property
    def noise_std(self) -> float:
        """The standard deviation of the phase's Gaussian noise per coordinate,
        :func:`noise_std_of` (noise multiplier, :attr:`noise_sensitivity`); what the engine adds.

        Raises:
            ValueError: If the phase adds no Gaussian noise or its sensitivity is not known yet.
        """
        sigma, sensitivity = self.noise_multiplier_or_none, self.noise_sensitivity
        if sigma is None or sensitivity is None:
            raise ValueError(self._no_noise_std())
        return noise_std_of(sigma, sensitivity)

    def _no_noise_std(self) -> str:
        return f"{type(self).__name__} {self.name!r} adds no Gaussian noise, so it has no noise std."

    @property
    def spends_privacy(self) -> bool:
        """Whether the phase touches the private data at all (``steps > 0``)."""
        return self.steps > 0

    def with_noise_multiplier(self, noise_multiplier: float) -> Phase:
        """The phase with its noise multiplier replaced (what :func:`calibrate` scales)."""
        raise TypeError(f"{type(self).__name__} {self.name!r} has no noise multiplier to scale.")

    def unsupported_reason(self, accountant: str) -> str | None:
        """None when ``accountant`` (``"pld"`` or ``"rdp"``) interprets the phase, else the sentence
        saying why not and what to use (also refused: events the accountant itself cannot read)."""
        return None

    @property
    def rdp_orders(self) -> tuple[float, ...] | None:
        """The RDP order grid the phase's accounting prescribes (None: ``RDP_ORDERS``)."""
        return None

    @property
    def exact_accountant(self) -> type | None:
        """An accountant class that computes the headline (``accountant="pld"``) of any run holding
        this phase exactly, in place of dp_accounting's PLD accountant; None for PLD."""
        return None

    def assumed_accounting(self) -> tuple[Phase, str] | None:
        """``(phase, label)``: the same phase accounted under an unproven assumption, whose epsilon
        the report prints beside the headline with the label (DESIGN rule 9); None for none."""
        return None

    @property
    def parallel_groups(self) -> tuple | None:
        """``((group, phases), ...)`` for a phase that composes disjoint groups in parallel, else None."""
        return None

    def leaves(self) -> tuple[Phase, ...]:
        """The phases that run: ``(self,)``, or every group's phases of a parallel composition."""
        return (self,)

    def map(self, fn: Callable[[Phase], Phase]) -> Phase:
        """``fn`` applied to every phase that runs (:meth:`leaves`), the structure kept."""
        return fn(self)

    @abc.abstractmethod
    def report_parameters(self) -> dict[str, Any]:
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
    KIND: ClassVar[str] = "dpsgd"

    name: str
    sample_rate: float
    noise_multiplier: float
    steps: int
    clip_norm: float | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        _v.non_empty("DPSGDPhase", name=self.name)
        ctx = f"DPSGDPhase {self.name!r}"
        object.__setattr__(self, "sample_rate", _v.probability(ctx, sample_rate=self.sample_rate))
        object.__setattr__(
            self, "noise_multiplier", _v.positive(ctx, noise_multiplier=self.noise_multiplier)
        )
        object.__setattr__(self, "steps", _v.whole(ctx, minimum=0, steps=self.steps))
        if self.clip_norm is not None:
            object.__setattr__(self, "clip_norm", _v.positive(ctx, clip_norm=self.clip_norm))
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", _v.whole(ctx, minimum=1, batch_size=self.batch_size))

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
        ctx = f"DPSGDPhase {name!r}"
        rate = batch_rate(batch_size, _v.whole(ctx, minimum=1, num_records=num_records), ctx)
        return cls(name, rate, noise_multiplier,
                   steps, clip_norm=clip_norm, batch_size=int(batch_size))

    def with_clip_norm(self, clip_norm: float) -> DPSGDPhase:
        """The phase with its clip norm C set (a norm chosen on public rows at train time is
        resolved into the phase this way, before the phase's first step)."""
        return dataclasses.replace(self, clip_norm=clip_norm)

    @property
    def noise_sensitivity(self) -> float | None:
        """C: the noise std (:attr:`noise_std`) is sigma * C per coordinate of the clipped sum;
        None while the clip norm is a rule resolved at train time (``noise_std`` then raises)."""
        return self.clip_norm

    def _no_noise_std(self) -> str:
        return (f"DPSGDPhase {self.name!r} has no clip_norm yet; resolve it "
                "(with_clip_norm) before running the phase.")

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
    def noise_multiplier_or_none(self) -> float:
        return self.noise_multiplier

    def with_noise_multiplier(self, noise_multiplier: float) -> DPSGDPhase:
        return dataclasses.replace(self, noise_multiplier=noise_multiplier)

    def report_parameters(self) -> dict[str, Any]:
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
        output: How the release is realised (``OUTPUTS``; the report says it): ``"integers"``,
            counts released as integers (``dpsgd.noisy_counts``), or ``"snapped"``, real sums
            computed exactly and snapped to a public grid (``dpsgd.snapped_gaussian``).

    Privacy:
        ``SelfComposedDpEvent(GaussianDpEvent(sigma), steps)`` under add/remove-one neighbours.

    Example:
        >>> GaussianPhase("histograms", noise_multiplier=5.0, steps=1).event()
        SelfComposedDpEvent(event=GaussianDpEvent(noise_multiplier=5.0), count=1)
    """
    KIND: ClassVar[str] = "gaussian"

    name: str
    noise_multiplier: float
    steps: int = 1
    sensitivity: float | None = None
    output: str = "integers"
    OUTPUTS: ClassVar[tuple[str, ...]] = ("integers", "snapped")

    def __post_init__(self) -> None:
        _v.non_empty("GaussianPhase", name=self.name)
        _v.one_of(self.OUTPUTS, output=self.output)
        ctx = f"GaussianPhase {self.name!r}"
        object.__setattr__(
            self, "noise_multiplier", _v.positive(ctx, noise_multiplier=self.noise_multiplier)
        )
        object.__setattr__(self, "steps", _v.whole(ctx, minimum=0, steps=self.steps))
        if self.sensitivity is not None:
            object.__setattr__(self, "sensitivity", _v.positive(ctx, sensitivity=self.sensitivity))

    def event(self) -> dpa.DpEvent:
        """``SelfComposedDpEvent(GaussianDpEvent(sigma), steps)`` (``NoOpDpEvent`` for 0 steps)."""
        if self.steps == 0:
            return dpa.NoOpDpEvent()
        return dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(self.noise_multiplier), self.steps)

    @property
    def neighbouring_relation(self) -> NeighboringRelation:
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def noise_multiplier_or_none(self) -> float:
        return self.noise_multiplier

    def with_noise_multiplier(self, noise_multiplier: float) -> GaussianPhase:
        return dataclasses.replace(self, noise_multiplier=noise_multiplier)

    @property
    def noise_sensitivity(self) -> float | None:
        """``sensitivity``: the noise std (:attr:`noise_std`) is sigma * sensitivity per coordinate
        of a release; None when the phase states none (``noise_std`` then raises)."""
        return self.sensitivity

    def _no_noise_std(self) -> str:
        return f"GaussianPhase {self.name!r} states no sensitivity, so no noise std."

    def report_parameters(self) -> dict[str, Any]:
        return {"noise_multiplier": self.noise_multiplier, "sensitivity": self.sensitivity,
                "output": self.output}


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
    KIND: ClassVar[str] = "non-private"

    name: str
    steps: int
    sample_rate: float | None = None
    batch_size: int | None = None
    clip_norm: float | None = None

    differentially_private: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _v.non_empty("NonPrivatePhase", name=self.name)
        ctx = f"NonPrivatePhase {self.name!r}"
        object.__setattr__(self, "steps", _v.whole(ctx, minimum=0, steps=self.steps))
        if self.sample_rate is not None:
            object.__setattr__(self, "sample_rate", _v.probability(ctx, sample_rate=self.sample_rate))
        if self.batch_size is not None:
            object.__setattr__(self, "batch_size", _v.whole(ctx, minimum=1, batch_size=self.batch_size))
        if self.clip_norm is not None:
            object.__setattr__(self, "clip_norm", _v.positive(ctx, clip_norm=self.clip_norm))

    @classmethod
    def from_batch_size(cls, name: str, batch_size: int, num_records: int, steps: int) -> NonPrivatePhase:
        """The non-private phase of a schedule with expected batch size B over N records (q = B / N)."""
        ctx = f"NonPrivatePhase {name!r}"
        return cls(name, steps, batch_rate(batch_size, _v.whole(ctx, minimum=1, num_records=num_records), ctx),
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

    def report_parameters(self) -> dict[str, Any]:
        return {}
