"""The exponential mechanism as a phase kind, accounted by its zCDP bound.

References:
    docs/privacy.md; Cesar and Rogers (2021), "Bounding, Concentrating, and Truncating: Unifying
    Privacy Loss Composition for Data Analytics"; McKenna, Miklau and Sheldon (2021) (MST).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import dp_accounting as dpa

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._phases import NeighboringRelation, Phase


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
    KIND: ClassVar[str] = "exponential-mechanism"

    name: str
    epsilon: float
    steps: int = 1
    sensitivity: float | None = None

    def __post_init__(self) -> None:
        _v.non_empty("ExponentialMechanismPhase", name=self.name)
        ctx = f"ExponentialMechanismPhase {self.name!r}"
        object.__setattr__(self, "epsilon", _v.positive(ctx, epsilon=self.epsilon))
        object.__setattr__(self, "steps", _v.whole(ctx, minimum=0, steps=self.steps))
        if self.sensitivity is not None:
            object.__setattr__(self, "sensitivity", _v.positive(ctx, sensitivity=self.sensitivity))

    @classmethod
    def from_noise_multiplier(cls, name: str, noise_multiplier: float, steps: int = 1,
                              sensitivity: float | None = None) -> ExponentialMechanismPhase:
        """The phase whose zCDP cost per selection equals a Gaussian of ``noise_multiplier``."""
        sigma = _v.positive(f"ExponentialMechanismPhase {name!r}", noise_multiplier=noise_multiplier)
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

    def unsupported_reason(self, accountant: str) -> str | None:
        if accountant == "rdp":
            return None
        return ("The exponential mechanism is accounted by its zCDP bound (ZCDpEvent), which "
                "only the RDP accountant interprets; use accountant='rdp'.")

    @property
    def noise_multiplier_or_none(self) -> float:
        return self.noise_multiplier

    def with_noise_multiplier(self, noise_multiplier: float) -> ExponentialMechanismPhase:
        return dataclasses.replace(self, epsilon=2.0 / noise_multiplier)

    def report_parameters(self) -> dict[str, Any]:
        return {"epsilon_per_step": self.epsilon, "rho_per_step": self.rho,
                "noise_multiplier": self.noise_multiplier, "sensitivity": self.sensitivity}
