"""Composition and conversion to (epsilon, delta) on top of ``dp_accounting``.

All phases of a run are composed into one ``ComposedDpEvent`` that a single accountant
interprets, and only then converted to (epsilon, delta). Nothing is computed by hand where
``dp_accounting`` has it; the one formula computed here is the *classic* RDP conversion
(Mironov 2017, Prop. 3) that the papers used, applied to the accountant's own RDP vector.

References:
    docs/privacy.md; Mironov (2017), "Renyi Differential Privacy"; Balle et al. (2020),
    "Hypothesis Testing Interpretations and Renyi Differential Privacy".
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import dp_accounting as dpa
import numpy as np
from dp_accounting import privacy_accountant as _pa
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant, compute_epsilon

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._phases import (
    DPSGDPhase,
    GaussianPhase,
    ExponentialMechanismPhase,
    NeighboringRelation,
    NonPrivatePhase,
    ParallelPhases,
    Phase,
    relation_name,
)
from dpgen_jax.privacy._sharded_phase import ShardedSanitizerPhase
from dpgen_jax.privacy._sharded import MixtureAnalyticAccountant, MixtureRdpAccountant

PHASE_TYPES = (DPSGDPhase, GaussianPhase, ExponentialMechanismPhase, NonPrivatePhase,
               ShardedSanitizerPhase, ParallelPhases)

Accountant = Literal["pld", "rdp"]
Conversion = Literal["improved", "classic"]
ACCOUNTANTS: tuple[str, ...] = ("pld", "rdp")
CONVERSIONS: tuple[str, ...] = ("improved", "classic")


def _build_rdp_orders() -> tuple[float, ...]:
    near_one = 1.0 + np.logspace(-3.0, 0.0, 100)  # 1.001 ... 2.0
    low = np.arange(11, 111) / 10.0  # 1.1, 1.2, ..., 11.0
    ints = np.concatenate(
        [
            np.arange(12, 65),  # every integer up to 64
            np.arange(68, 129, 4),
            np.arange(136, 257, 8),
            np.arange(288, 513, 32),
            np.arange(576, 1025, 64),
        ]
    )
    orders = np.unique(np.round(np.concatenate([near_one, low, ints.astype(float)]), 12))
    return tuple(float(a) for a in orders)


RDP_ORDERS: tuple[float, ...] = _build_rdp_orders()
"""The one RDP order grid (299 orders) used for every add/remove-one composition.

Fractional orders close to 1 (``1 + logspace(-3, 0, 100)``: assumed-accounting GS-WGAN optima sit at
1.04-1.2), 1.1 to 11.0 in steps of 0.1, every integer from 12 to 64, then 68-128 step 4,
136-256 step 8, 288-512 step 32 and 576-1024 step 64. The cost of an order grows linearly with
the integer order, so the sparse tail keeps one RDP evaluation of the two-phase DP-auto-GAN
settings at ~0.2-0.4 s of CPU on a 2-core machine. On this grid the classic conversion
reproduces the published DP-auto-GAN values (Tantipongpipat et al. 2021; integer grid 2..1024) to
< 6e-4: ADULT 0.350352 / 0.508439 / 1.006176 and
MIMIC 0.807631 / 1.321593 / 2.697044 (the last is lower because 9.8 is on the grid).
"""

PAPER_RDP_ORDERS: tuple[float, ...] = tuple(float(a) for a in range(2, 257))
"""Integer orders 2..256, autodp's grid, used only for ``ShardedSanitizerPhase(accounting="paper")``."""

PLD_VALUE_DISCRETIZATION: float = 1e-4
"""Base ``value_discretization_interval`` of the PLD accountant (used as is for epsilon <= 1).

Measured on the three Adult settings of DP-auto-GAN (docs/dp-auto-gan.md; delta = 1e-5), against 1e-5 as the
reference (0.239666 / 0.357875 / 0.744331): 1e-4 gives 0.240690 / 0.358606 / 0.744729 (error
<= 1.1e-3, i.e. <= 0.43 %) in 0.05-0.26 s; 1e-3 gives 0.328592 / 0.426458 / 0.783685 (errors of
0.04-0.09, up to 37 %), so 1e-3 is not usable for these many-step, small-q, large-sigma phases.
See :func:`pld_discretization_interval` for how the interval grows with epsilon.
"""

_PLD_SCALE_CAP = 1e5
# A cheap grid for the rough epsilon that sets the PLD interval (about 10x cheaper than RDP_ORDERS).
_SCALE_ORDERS: tuple[float, ...] = (
    1.02, 1.05, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0,
    20.0, 24.0, 32.0, 40.0, 48.0, 64.0,
)


class _DropUnconvergedOrders(logging.Filter):
    """Drops dp_accounting's per-order "failed to converge ... Excluding this order" log lines.

    For large q or small sigma, dp_accounting's series for fractional orders close to 1 may not
    converge; the library then sets the RDP at that order to inf (the order is excluded, which is
    conservative) and logs one warning per order and per call. Calibration makes hundreds of such
    calls, so the lines are dropped while our own computations run; the values are unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("_compute_log_a_frac failed to converge")


@contextlib.contextmanager
def _quiet_unconverged_orders():
    logger = logging.getLogger("absl")
    flt = _DropUnconvergedOrders()
    logger.addFilter(flt)
    try:
        yield
    finally:
        logger.removeFilter(flt)


def pld_discretization_interval(epsilon_scale: float) -> float:
    """The PLD discretisation interval used for a composition whose epsilon is about ``epsilon_scale``.

    ``PLD_VALUE_DISCRETIZATION * min(max(1, epsilon_scale), 1e5)``. dp_accounting discretises
    privacy losses pessimistically, so every interval gives a valid upper bound; the interval only
    trades tightness for time. The PLD's cost grows with the range of privacy losses divided by the
    interval, and its error shrinks relative to epsilon as epsilon grows, so an interval
    proportional to epsilon keeps both roughly constant. Measured (delta = 1e-5, error against
    interval 1e-5): ADULT settings (epsilon < 1) 1e-4 -> error <= 1.1e-3; N=30k, B=256, sigma=1.1,
    10k steps (epsilon 4.32) 4.3e-4 -> ~5e-4; assumed-accounting GS-WGAN K=1500, T=21k (epsilon 252.0) 0.028
    -> ~0.2 in 0.05 s, where the fixed 1e-4 takes ~15 s. The cap is that high because absurd
    schedules must stay computable: DP-SACTGAN's paper preset (one critic, 11,700 steps of 500 rows
    at sigma 1; epsilon about 3e6) needs 24 GB of memory with an interval capped at 0.1, and 0.26 GB
    and 0.01 s at 10 (PLD 2.98e6 against RDP 2.96e6). Much larger intervals overflow inside
    dp_accounting.

    Args:
        epsilon_scale: A rough epsilon of the composition; :func:`epsilon` and :func:`calibrate`
            use dp_accounting's RDP epsilon (improved conversion) over a coarse grid of 23 orders
            up to 64, which costs ~10 % of an RDP evaluation. inf or nan are treated as the cap.

    Returns:
        The ``value_discretization_interval`` to give ``PLDAccountant``.
    """
    scale = float(epsilon_scale)
    if not math.isfinite(scale):
        scale = _PLD_SCALE_CAP
    return PLD_VALUE_DISCRETIZATION * min(max(1.0, scale), _PLD_SCALE_CAP)


def classic_conversion(orders: Sequence[float], rdp: Sequence[float], delta: float) -> tuple[float, float]:
    """The classic RDP-to-DP conversion: epsilon = min over orders of r(a) + log(1/delta) / (a - 1).

    This is the conversion of Mironov (2017, Prop. 3) used by DP-auto-GAN and GS-WGAN (autodp);
    ``dp_accounting``'s ``RdpAccountant.get_epsilon`` uses the tighter "improved" conversion.

    Args:
        orders: RDP orders, each > 1, shape (k,).
        rdp: RDP values at those orders (may contain inf), shape (k,).
        delta: Target delta in (0, 1).

    Returns:
        ``(epsilon, optimal_order)``; epsilon is inf if every RDP value is inf.

    Raises:
        ValueError: If the shapes differ, an order is <= 1, or delta is outside (0, 1).
    """
    d = _v.delta(delta)
    a = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    if a.ndim != 1 or a.shape != r.shape or a.size == 0:
        raise ValueError(
            f"expected orders and rdp to be 1-D of the same non-zero length, got shapes "
            f"{a.shape} and {r.shape}."
        )
    if np.any(a <= 1.0):
        raise ValueError(f"expected every order > 1, got min(orders)={a.min()}.")
    eps = r + math.log(1.0 / d) / (a - 1.0)
    i = int(np.argmin(eps))
    return float(eps[i]), float(a[i])


class _ClassicRdpAccountant(MixtureRdpAccountant):
    """``RdpAccountant`` whose ``get_epsilon`` applies the classic conversion to its RDP vector."""

    def get_epsilon_and_optimal_order(self, target_delta: float) -> tuple[float, float]:
        return classic_conversion(self.orders, self.rdp, target_delta)

    def get_epsilon(self, target_delta: float) -> float:
        return self.get_epsilon_and_optimal_order(target_delta)[0]


class _ScaledPLDAccountant(_pa.PrivacyAccountant):
    """``PLDAccountant`` with the discretisation interval of :func:`pld_discretization_interval`.

    It collects the composed events and, at query time, estimates epsilon with a quick RDP pass
    (orders <= 64, improved conversion), picks the interval from that estimate (unless one was
    fixed) and runs dp_accounting's ``PLDAccountant`` on the whole composition. Used by both
    :func:`epsilon` and :func:`calibrate`, so a calibrated result re-evaluates to the same number.
    """

    def __init__(self, neighboring_relation: NeighboringRelation, fixed_interval: float | None) -> None:
        super().__init__(neighboring_relation)
        self._fixed_interval = fixed_interval
        self._probe = PLDAccountant(neighboring_relation)
        self._events: list[dpa.DpEvent] = []
        self.last_interval: float | None = None

    def _maybe_compose(self, event: dpa.DpEvent, count: int, do_compose: bool):
        if not self._probe.supports(event):
            return _pa.PrivacyAccountant.CompositionErrorDetails(
                invalid_event=event, error_message="not supported by dp_accounting's PLDAccountant"
            )
        if do_compose:
            self._events.append(event if count == 1 else dpa.SelfComposedDpEvent(event, count))
        return None

    def _interval(self, scale_for_delta: float | None, scale: float | None) -> float:
        if self._fixed_interval is not None:
            return self._fixed_interval
        if scale is None:
            rdp = RdpAccountant(_SCALE_ORDERS, self.neighboring_relation)
            event = dpa.ComposedDpEvent(list(self._events))
            if rdp.supports(event):
                with _quiet_unconverged_orders():
                    scale = rdp.compose(event).get_epsilon(scale_for_delta)
            else:
                scale = 1.0
        return pld_discretization_interval(scale)

    def _pld(self, interval: float) -> PLDAccountant:
        self.last_interval = interval
        acc = PLDAccountant(self.neighboring_relation, value_discretization_interval=interval)
        return acc.compose(dpa.ComposedDpEvent(list(self._events)))

    def get_epsilon(self, target_delta: float) -> float:
        return float(self._pld(self._interval(target_delta, None)).get_epsilon(target_delta))

    def get_delta(self, target_epsilon: float) -> float:
        return float(self._pld(self._interval(None, target_epsilon)).get_delta(target_epsilon))


# -- phases, relation, events ------------------------------------------------------------------


def _as_phases(phases: object) -> tuple[Phase, ...]:
    if isinstance(phases, Phase) or not isinstance(phases, (list, tuple)):
        raise TypeError(
            f"expected phases to be a list or tuple of privacy phases "
            f"({', '.join(t.__name__ for t in PHASE_TYPES)}), got {type(phases).__name__}."
        )
    if not phases:
        raise ValueError("expected phases to contain at least one phase, got an empty sequence.")
    for i, p in enumerate(phases):
        if not isinstance(p, Phase):
            raise TypeError(f"expected phases[{i}] to be a privacy phase, got {type(p).__name__}.")
    return tuple(phases)


def branches(phases: Sequence[Phase]) -> list[tuple[str | None, tuple[Phase, ...]]]:
    """The compositions a run's epsilon is the maximum of.

    Without a :class:`ParallelPhases`: one branch, ``(None, phases)``. With one: a branch per
    group, ``(group, shared phases + the group's phases)``, the shared phases being every other
    phase of the run. At most one ``ParallelPhases`` per run.
    """
    ps = _as_phases(phases)
    parallel = [p for p in ps if isinstance(p, ParallelPhases)]
    if not parallel:
        return [(None, ps)]
    if len(parallel) > 1:
        raise ValueError(f"expected at most one ParallelPhases per run, got "
                         f"{[p.name for p in parallel]}.")
    shared = tuple(p for p in ps if not isinstance(p, ParallelPhases))
    return [(group, shared + inner) for group, inner in parallel[0].groups]


def flat_phases(phases: Sequence[Phase]) -> tuple[Phase, ...]:
    """The phases with a :class:`ParallelPhases` replaced by every group's phases."""
    return tuple(q for p in _as_phases(phases)
                 for q in (p.inner if isinstance(p, ParallelPhases) else (p,)))


def with_steps(phases: Sequence[Phase], steps: Mapping[str, int]) -> list[Phase]:
    """The phases with the step counts of ``steps`` (phase name -> steps executed), inside a
    :class:`ParallelPhases` too; a phase not named keeps its count. What a report accounts for
    after a run: the planned phases with the steps actually executed.

    Raises:
        ValueError: If ``steps`` names a phase that is not among ``phases``.
    """
    phases = _as_phases(phases)
    unknown = sorted(set(steps) - {p.name for p in flat_phases(phases)})
    if unknown:
        raise ValueError(f"with_steps: no phase named {unknown}; the phases are "
                         f"{[p.name for p in flat_phases(phases)]}.")
    return map_phases(phases, lambda p: dataclasses.replace(p, steps=steps[p.name]) if p.name in steps else p)


def map_phases(phases: Sequence[Phase], fn: Callable[[Phase], Phase]) -> list[Phase]:
    """``fn`` applied to every phase, inside a :class:`ParallelPhases` too (its groups kept)."""

    def one(p: Phase) -> Phase:
        if isinstance(p, ParallelPhases):
            return dataclasses.replace(p, groups=tuple((g, tuple(one(q) for q in inner)) for g, inner in p.groups))
        return fn(p)

    return [one(p) for p in _as_phases(phases)]


def neighbouring_relation(phases: Sequence[Phase]) -> NeighboringRelation:
    """The neighbouring relation shared by all phases (add/remove-one if no phase states one).

    Args:
        phases: The phases of one run.

    Returns:
        The common ``dp_accounting.NeighboringRelation``.

    Raises:
        ValueError: If two phases are stated under different relations (e.g. a paper-mode
            sharded phase, replace-one, with a DP-SGD phase, add/remove-one): their epsilons
            are not about the same neighbouring datasets and must not be composed.
    """
    ps = _as_phases(phases)
    found: dict[NeighboringRelation, list[str]] = {}
    for p in ps:
        rel = p.neighbouring_relation
        if rel is not None:
            found.setdefault(rel, []).append(p.name)
    if len(found) > 1:
        detail = "; ".join(f"{relation_name(r)}: {names}" for r, names in found.items())
        raise ValueError(
            "expected all phases to share one neighbouring relation, got " + detail + ". "
            "Account phases under different relations separately."
        )
    return next(iter(found), NeighboringRelation.ADD_OR_REMOVE_ONE)


def composed_event(phases: Sequence[Phase]) -> dpa.ComposedDpEvent:
    """``ComposedDpEvent`` of every phase's event, after checking their neighbouring relations.

    Raises:
        ValueError: If the phases have different neighbouring relations.
    """
    ps = _as_phases(phases)
    neighbouring_relation(ps)
    parallel = [p.name for p in ps if isinstance(p, ParallelPhases)]
    if parallel:
        raise ValueError(f"phases {parallel} compose in parallel: there is no single event; "
                         "compose privacy.branches(phases) one by one.")
    return dpa.ComposedDpEvent([p.event() for p in ps])


def _is_paper(phases: tuple[Phase, ...]) -> bool:
    return any(isinstance(p, ShardedSanitizerPhase) and p.accounting == "paper"
               for p in flat_phases(phases))


def _is_proven(phases: tuple[Phase, ...]) -> bool:
    """Whether a proven (selection-conditioned) sharded phase runs steps: the headline is then the
    exact mixture bound of :mod:`dpgen_jax.privacy._sharded` instead of dp_accounting's PLD."""
    return any(isinstance(p, ShardedSanitizerPhase) and p.accounting == "proven" and p.steps > 0
               for p in flat_phases(phases))


def pld_supported(phases: Sequence[Phase]) -> bool:
    """Whether the headline accountant of ``accountant="pld"`` interprets every phase: dp_accounting's
    PLD accountant, or the exact mixture accountant for a run with a proven sharded phase (False
    for paper-mode sharded phases and exponential-mechanism phases, which only the RDP accountant
    accounts, and for a proven sharded phase composed with anything but Gaussian releases)."""
    return all(_make_accountant(b, "pld", "improved", None).supports(composed_event(b))
               for _, b in branches(phases))


def _orders_for(phases: tuple[Phase, ...]) -> tuple[float, ...]:
    return PAPER_RDP_ORDERS if _is_paper(phases) else RDP_ORDERS


def _check_pld_interval(value: float | None) -> float | None:
    if value is None:
        return None
    return _v.positive_finite(value, "pld_discretization")


def _make_accountant(
    phases: tuple[Phase, ...],
    accountant: str,
    conversion: str,
    pld_discretization: float | None,
    orders: Sequence[float] | None = None,
) -> _pa.PrivacyAccountant:
    relation = neighbouring_relation(phases)
    if accountant == "pld":
        if _is_proven(phases):
            return MixtureAnalyticAccountant(relation)
        return _ScaledPLDAccountant(relation, pld_discretization)
    cls = _ClassicRdpAccountant if conversion == "classic" else MixtureRdpAccountant
    return cls(list(_orders_for(phases) if orders is None else orders), relation)


def _check_supported(phases: tuple[Phase, ...], acc: _pa.PrivacyAccountant, accountant: str) -> None:
    for p in phases:
        if not acc.supports(p.event()):
            why = ""
            if isinstance(p, ShardedSanitizerPhase) and p.accounting == "paper":
                why = (
                    " The paper accounting is RDP-only (sampling without replacement under "
                    "replace-one); use accountant='rdp', conversion='classic'."
                )
            elif _is_proven(phases) and accountant == "pld":
                why = (
                    " The proven bound of a sharded phase composes exactly only with Gaussian "
                    "releases (histograms, DP-EM); use accountant='rdp' for other phases."
                )
            elif isinstance(p, ExponentialMechanismPhase):
                why = (
                    " The exponential mechanism is accounted by its zCDP bound (ZCDpEvent), which "
                    "only the RDP accountant interprets; use accountant='rdp'."
                )
            raise ValueError(
                f"accountant={accountant!r} does not support phase {p.name!r} "
                f"(mechanism {p.mechanism}).{why}"
            )


def _check_args(accountant: str, conversion: str) -> None:
    _v.choice(accountant, "accountant", ACCOUNTANTS)
    _v.choice(conversion, "conversion", CONVERSIONS)
    if accountant == "pld" and conversion == "classic":
        raise ValueError(
            "conversion='classic' applies only to accountant='rdp'; the PLD accountant converts "
            "directly (use conversion='improved', the default, with accountant='pld')."
        )


@functools.lru_cache(maxsize=64)
def _rdp_accountant(phases: tuple[Phase, ...], orders: tuple[float, ...]) -> RdpAccountant:
    acc = MixtureRdpAccountant(list(orders), neighbouring_relation(phases))
    _check_supported(phases, acc, "rdp")
    with _quiet_unconverged_orders():
        return acc.compose(composed_event(phases))


def rdp_curve(
    phases: Sequence[Phase], orders: Sequence[float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The composed RDP of the phases at each order, from ``dp_accounting.rdp.RdpAccountant``.

    Args:
        phases: The phases of one run.
        orders: RDP orders (> 1); default :data:`RDP_ORDERS`, or :data:`PAPER_RDP_ORDERS` when a
            phase uses the paper accounting.

    Returns:
        ``(orders, rdp)``, two float64 arrays of shape (k,). Results are cached per phases/orders.

    Raises:
        ValueError: If the relations differ or an event is not supported by the RDP accountant.
    """
    ps = _as_phases(phases)
    if orders is None:
        grid = _orders_for(ps)
    else:
        grid = tuple(_v.real(a, "orders[i]") for a in orders)
        if not grid or min(grid) <= 1.0:
            raise ValueError(f"expected a non-empty list of orders > 1, got {list(orders)!r}.")
    acc = _rdp_accountant(ps, grid)
    return acc.orders, acc.rdp


def _rdp_epsilon_and_order(phases: tuple[Phase, ...], delta: float, conversion: str) -> tuple[float, float]:
    if any(isinstance(p, ParallelPhases) for p in phases):  # the maximum over the groups
        return max((_rdp_epsilon_and_order(b, delta, conversion) for _, b in branches(phases)),
                   key=lambda eo: eo[0])
    acc = _rdp_accountant(phases, _orders_for(phases))
    if conversion == "classic":
        return classic_conversion(acc.orders, acc.rdp, delta)
    eps, order = compute_epsilon(acc.orders, acc.rdp, delta)
    return float(eps), float(order)


def _epsilon_and_interval(
    phases: tuple[Phase, ...],
    delta: float,
    accountant: str,
    conversion: str,
    pld_discretization: float | None,
) -> tuple[float, float | None]:
    """Epsilon and the PLD interval used (None for RDP), inputs already validated."""
    neighbouring_relation(phases)
    if any(isinstance(p, ParallelPhases) for p in phases):  # the maximum over the groups
        return max((_epsilon_and_interval(b, delta, accountant, conversion, pld_discretization)
                    for _, b in branches(phases)), key=lambda ei: ei[0])
    if not any(p.spends_privacy for p in phases):
        return 0.0, None
    if any(isinstance(p, NonPrivatePhase) and p.spends_privacy for p in phases):
        return math.inf, None  # what both accountants return for a NonPrivateDpEvent
    if accountant == "rdp":
        return _rdp_epsilon_and_order(phases, delta, conversion)[0], None
    acc = _make_accountant(phases, "pld", conversion, pld_discretization)
    _check_supported(phases, acc, "pld")
    eps = acc.compose(composed_event(phases)).get_epsilon(delta)
    return float(eps), acc.last_interval


def epsilon(
    phases: Sequence[Phase],
    delta: float,
    accountant: Accountant = "pld",
    conversion: Conversion = "improved",
    *,
    pld_discretization: float | None = None,
) -> float:
    """Epsilon of all phases composed, at ``delta``.

    The phases' events are composed into one ``ComposedDpEvent`` that one accountant interprets
    (RDP: RDP vectors add up; PLD: loss distributions convolve), then converted once. With a
    :class:`ParallelPhases`, epsilon is the maximum over its groups of that composition for the
    other phases plus the group's phases (:func:`branches`).

    Args:
        phases: The phases of one run (list or tuple), all under one neighbouring relation.
        delta: Target delta in (0, 1).
        accountant: ``"pld"`` (default, the tightest valid bound) or ``"rdp"``.
        conversion: For ``"rdp"`` only: ``"improved"`` (dp_accounting's conversion, Balle et al.
            2020) or ``"classic"`` (min over orders of r(a) + log(1/delta)/(a - 1), the papers'
            conversion). ``"classic"`` with ``"pld"`` raises.
        pld_discretization: Fixed PLD ``value_discretization_interval``; default None uses
            :func:`pld_discretization_interval` of a quick RDP estimate.

    Returns:
        Epsilon as a float; ``math.inf`` if a non-private phase ran; 0.0 if no phase ran a step.

    Raises:
        TypeError: If ``phases`` is not a sequence of phases.
        ValueError: For a bad delta, accountant or conversion, mixed neighbouring relations, or a
            phase the accountant does not support (paper-mode sharded phases are RDP-only).

    Privacy:
        Valid (epsilon, delta)-DP under the phases' neighbouring relation, for the mechanisms the
        phases describe; paper-mode sharded phases are a reproduction, not a sound bound.

    Example:
        >>> from dpgen_jax.privacy import DPSGDPhase, epsilon
        >>> ae = DPSGDPhase("autoencoder", 64 / 32561, 2.5, 10_000)
        >>> critic = DPSGDPhase("critic", 128 / 32561, 7.5, 15_000)
        >>> round(epsilon([ae, critic], 1e-5, accountant="rdp", conversion="classic"), 4)
        0.5084
    """
    ps = _as_phases(phases)
    d = _v.delta(delta)
    _check_args(accountant, conversion)
    return _epsilon_and_interval(ps, d, accountant, conversion, _check_pld_interval(pld_discretization))[0]
