"""Composition and conversion to (epsilon, delta) on top of ``dp_accounting``.

All phases of a run are composed into one ``ComposedDpEvent`` that a single accountant
interprets, and only then converted to (epsilon, delta). Nothing is computed by hand where
``dp_accounting`` has it; the RDP accountants (every run's, and the papers' *classic* conversion,
Mironov 2017, Prop. 3) are in :mod:`~dpgen_jax.privacy._rdp`.
Nothing here names a phase kind: each phase states its event, relation, supported accountants,
RDP grid and exact accountant (:class:`~dpgen_jax.privacy.Phase`).

Public beyond :mod:`dpgen_jax.privacy` (re-exported there): :func:`epsilon`, :func:`rdp_curve`,
:func:`branches`, :func:`flat_phases`, :func:`map_phases`,
:func:`with_steps`, :func:`neighbouring_relation`, :func:`composed_event`, :func:`pld_supported`.
Shared with :mod:`~dpgen_jax.privacy._calibrate` and :mod:`~dpgen_jax.privacy._report` (inputs
checked once by the caller): :func:`as_phases`, :func:`check_accounting`, :func:`make_accountant`,
:func:`epsilon_and_interval`, :func:`rdp_epsilon_and_order`, :func:`orders_for`,
:func:`orders_name`, :func:`accountant_sentence`.

References:
    docs/privacy.md; Mironov (2017), "Renyi Differential Privacy"; Balle et al. (2020),
    "Hypothesis Testing Interpretations and Renyi Differential Privacy".
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import dp_accounting as dpa
import numpy as np
from dp_accounting import privacy_accountant as _pa
from dp_accounting.rdp import RdpAccountant, compute_epsilon

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._phases import NeighboringRelation, Phase, relation_name
from dpgen_jax.privacy._prose import prose_of
from dpgen_jax.privacy._pld import ScaledPLDAccountant, quiet_unconverged_orders
from dpgen_jax.privacy._rdp import ClassicRdpAccountant, MixtureRdpAccountant, classic_conversion

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


# -- phases, relation, events ------------------------------------------------------------------


def as_phases(phases: object) -> tuple[Phase, ...]:
    """``phases`` as a tuple, checked: a non-empty list or tuple of :class:`Phase` values.

    Raises:
        TypeError: If ``phases`` is not a list or tuple of phases.
        ValueError: If it is empty.
    """
    _v.instance((list, tuple), "a list or tuple of privacy phases (subclasses of dpgen_jax.privacy.Phase)",
                phases=phases)
    if not phases:
        raise ValueError("phases is empty: pass at least one phase.")
    for i, p in enumerate(phases):
        _v.instance(Phase, "a privacy phase", **{f"phases[{i}]": p})
    return tuple(phases)


def branches(phases: Sequence[Phase]) -> list[tuple[str | None, tuple[Phase, ...]]]:
    """The compositions a run's epsilon is the maximum of.

    Without a :class:`ParallelPhases`: one branch, ``(None, phases)``. With one: a branch per
    group, ``(group, shared phases + the group's phases)``, the shared phases being every other
    phase of the run. At most one ``ParallelPhases`` per run.
    """
    ps = as_phases(phases)
    parallel = [p for p in ps if p.parallel_groups is not None]
    if not parallel:
        return [(None, ps)]
    if len(parallel) > 1:
        raise ValueError(f"The run has {len(parallel)} ParallelPhases {[p.name for p in parallel]}: "
                         "put at most one ParallelPhases in a run.")
    shared = tuple(p for p in ps if p.parallel_groups is None)
    return [(group, shared + inner) for group, inner in parallel[0].parallel_groups]


def flat_phases(phases: Sequence[Phase]) -> tuple[Phase, ...]:
    """The phases with a :class:`ParallelPhases` replaced by every group's phases."""
    return tuple(q for p in as_phases(phases) for q in p.leaves())


def with_steps(phases: Sequence[Phase], steps: Mapping[str, int]) -> list[Phase]:
    """The phases with the step counts of ``steps`` (phase name -> steps executed), inside a
    :class:`ParallelPhases` too; a phase not named keeps its count. What a report accounts for
    after a run: the planned phases with the steps actually executed.

    Raises:
        ValueError: If ``steps`` names a phase that is not among ``phases``.
    """
    phases = as_phases(phases)
    unknown = sorted(set(steps) - {p.name for p in flat_phases(phases)})
    if unknown:
        raise ValueError(f"with_steps: no phase named {unknown}; the phases are "
                         f"{[p.name for p in flat_phases(phases)]}.")
    return map_phases(phases, lambda p: dataclasses.replace(p, steps=steps[p.name]) if p.name in steps else p)


def map_phases(phases: Sequence[Phase], fn: Callable[[Phase], Phase]) -> list[Phase]:
    """``fn`` applied to every phase, inside a :class:`ParallelPhases` too (its groups kept)."""
    return [p.map(fn) for p in as_phases(phases)]


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
    ps = as_phases(phases)
    found: dict[NeighboringRelation, list[str]] = {}
    for p in ps:
        rel = p.neighbouring_relation
        if rel is not None:
            found.setdefault(rel, []).append(p.name)
    if len(found) > 1:
        detail = "; ".join(f"{relation_name(r)}: {names}" for r, names in found.items())
        raise ValueError(
            "The phases are stated under different neighbouring relations (" + detail + "): "
            "account phases under different relations separately."
        )
    return next(iter(found), NeighboringRelation.ADD_OR_REMOVE_ONE)


def composed_event(phases: Sequence[Phase]) -> dpa.ComposedDpEvent:
    """``ComposedDpEvent`` of every phase's event, after checking their neighbouring relations.

    Raises:
        ValueError: If the phases have different neighbouring relations.
    """
    ps = as_phases(phases)
    neighbouring_relation(ps)
    parallel = [p.name for p in ps if p.parallel_groups is not None]
    if parallel:
        raise ValueError(f"phases {parallel} compose in parallel: there is no single event; "
                         "compose privacy.branches(phases) one by one.")
    return dpa.ComposedDpEvent([p.event() for p in ps])


def _exact_accountant(phases: Sequence[Phase]) -> type | None:
    """The accountant a phase prescribes for an exact headline (:attr:`Phase.exact_accountant`)."""
    return next((p.exact_accountant for p in flat_phases(phases) if p.exact_accountant is not None), None)


def pld_supported(phases: Sequence[Phase]) -> bool:
    """Whether the headline accountant of ``accountant="pld"`` interprets every phase: dp_accounting's
    PLD accountant, or the exact mixture accountant for a run with a proven sharded phase (False
    for paper-mode sharded phases and exponential-mechanism phases, which only the RDP accountant
    accounts, and for a proven sharded phase composed with anything but Gaussian releases)."""
    return all(_make_accountant(b, "pld", "improved", None).supports(composed_event(b))
               and all(p.unsupported_reason("pld") is None for p in b)
               for _, b in branches(phases))


def orders_for(phases: Sequence[Phase]) -> tuple[float, ...]:
    """The RDP orders the phases are accounted over: a phase's own grid (:attr:`Phase.rdp_orders`,
    e.g. :data:`PAPER_RDP_ORDERS`), else :data:`RDP_ORDERS`."""
    return next((p.rdp_orders for p in flat_phases(phases) if p.rdp_orders is not None), RDP_ORDERS)


def check_accounting(accountant: str, conversion: str, pld_discretization: float | None) -> float | None:
    """Checks an accountant, conversion and fixed PLD interval; returns the interval (or None).

    Raises:
        ValueError: For an unknown accountant or conversion, ``"classic"`` with ``"pld"``, or an
            interval that is not finite and > 0.
    """
    _v.one_of(ACCOUNTANTS, accountant=accountant)
    _v.one_of(CONVERSIONS, conversion=conversion)
    if accountant == "pld" and conversion == "classic":
        raise ValueError(
            "conversion='classic' applies only to accountant='rdp'; the PLD accountant converts "
            "directly (use conversion='improved', the default, with accountant='pld')."
        )
    if pld_discretization is None:
        return None
    return _v.positive(pld_discretization=pld_discretization)


def _make_accountant(
    phases: tuple[Phase, ...],
    accountant: str,
    conversion: str,
    pld_discretization: float | None,
) -> _pa.PrivacyAccountant:
    relation = neighbouring_relation(phases)
    if accountant == "pld":
        exact = _exact_accountant(phases)
        return exact(relation) if exact is not None else ScaledPLDAccountant(relation, pld_discretization)
    cls = ClassicRdpAccountant if conversion == "classic" else MixtureRdpAccountant
    return cls(list(orders_for(phases)), relation)


def make_accountant(
    phases: Sequence[Phase],
    accountant: str,
    conversion: str,
    pld_discretization: float | None,
) -> _pa.PrivacyAccountant:
    """A fresh accountant for the phases (arguments checked by :func:`check_accounting`), after
    checking that it interprets every phase.

    ``"pld"``: :class:`~dpgen_jax.privacy._pld.ScaledPLDAccountant`, or the exact accountant a
    phase prescribes (:attr:`Phase.exact_accountant`); ``"rdp"``: dp_accounting's RDP accountant
    over :func:`orders_for` with the improved or the classic conversion.

    Raises:
        ValueError: If the accountant does not support a phase, with the reason (the accountant's
            or the phase's :meth:`Phase.unsupported_reason`).
    """
    ps = as_phases(phases)
    acc = _make_accountant(ps, accountant, conversion, pld_discretization)
    for p in ps:
        reason = p.unsupported_reason(accountant)
        if reason is not None or not acc.supports(p.event()):
            why = getattr(acc, "UNSUPPORTED_HINT", None) or reason
            raise ValueError(
                f"accountant={accountant!r} does not support phase {p.name!r} "
                f"(mechanism {prose_of(p).mechanism}).{'' if why is None else ' ' + why}"
            )
    return acc


@functools.lru_cache(maxsize=64)
def _rdp_accountant(phases: tuple[Phase, ...], orders: tuple[float, ...]) -> RdpAccountant:
    relation = neighbouring_relation(phases)
    make_accountant(phases, "rdp", "improved", None)  # the support check
    with quiet_unconverged_orders():
        return MixtureRdpAccountant(list(orders), relation).compose(composed_event(phases))


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
    ps = as_phases(phases)
    if orders is None:
        grid = orders_for(ps)
    else:
        grid = tuple(_v.between(low=1, high=math.inf, low_open=True, **{f"orders[{i}]": a})
                     for i, a in enumerate(orders))
        if not grid:
            raise ValueError("orders is empty: pass at least one order > 1, or None for the default grid.")
    acc = _rdp_accountant(ps, grid)
    return acc.orders, acc.rdp


def rdp_epsilon_and_order(phases: tuple[Phase, ...], delta: float, conversion: str) -> tuple[float, float]:
    """RDP epsilon and its optimal order with the ``"improved"`` or ``"classic"`` conversion
    (inputs already checked); with a :class:`ParallelPhases`, those of the worst group."""
    bs = branches(phases)
    if bs[0][0] is not None:  # the maximum over the groups
        return max((rdp_epsilon_and_order(b, delta, conversion) for _, b in bs), key=lambda eo: eo[0])
    acc = _rdp_accountant(bs[0][1], orders_for(phases))
    if conversion == "classic":
        return classic_conversion(acc.orders, acc.rdp, delta)
    eps, order = compute_epsilon(acc.orders, acc.rdp, delta)
    return float(eps), float(order)


def epsilon_and_interval(
    phases: tuple[Phase, ...],
    delta: float,
    accountant: str,
    conversion: str,
    pld_discretization: float | None,
) -> tuple[float, float | None]:
    """:func:`epsilon` and the PLD interval it used (None for RDP or an exact accountant), inputs
    already checked (:func:`as_phases`, :func:`check_accounting`)."""
    neighbouring_relation(phases)
    bs = branches(phases)
    if bs[0][0] is not None:  # the maximum over the groups
        return max((epsilon_and_interval(b, delta, accountant, conversion, pld_discretization)
                    for _, b in bs), key=lambda ei: ei[0])
    if not any(p.spends_privacy for p in phases):
        return 0.0, None
    if any(not p.differentially_private and p.spends_privacy for p in phases):
        return math.inf, None  # what both accountants return for a NonPrivateDpEvent
    if accountant == "rdp":
        return rdp_epsilon_and_order(phases, delta, conversion)[0], None
    acc = make_accountant(phases, "pld", conversion, pld_discretization)
    eps = acc.compose(composed_event(phases)).get_epsilon(delta)
    return float(eps), acc.last_interval


def accountant_sentence(phases: Sequence[Phase], accountant: str, conversion: str,
                        pld_interval: float | None) -> str:
    """The report's sentence on how the headline epsilon was computed."""
    if accountant == "pld":
        exact = _exact_accountant(phases)
        if exact is not None:
            return exact.REPORT_SENTENCE
        if pld_interval is None:
            return "Epsilon comes from dp_accounting's PLD accountant."
        return ("Epsilon comes from dp_accounting's PLD accountant with pessimistic discretisation "
                f"(value_discretization_interval={pld_interval:.3g}), an upper bound on the exact "
                "epsilon.")
    conv = ("the classic conversion eps = min_a r(a) + log(1/delta)/(a-1) used by the papers"
            if conversion == "classic" else "dp_accounting's improved conversion")
    grid = orders_name(phases, long=True)
    return f"Epsilon comes from dp_accounting's RDP accountant over {grid}, with {conv}."


def orders_name(phases: Sequence[Phase], *, long: bool = False) -> str:
    """The report's name of :func:`orders_for`: ``"dpgen_jax.privacy.RDP_ORDERS"`` (``long``: how
    many, from and to) or, for a grid of consecutive integers, ``"integers a..b"``."""
    grid = orders_for(phases)
    if grid == RDP_ORDERS and not long:
        return "dpgen_jax.privacy.RDP_ORDERS"
    if grid == RDP_ORDERS:
        return f"{len(grid)} orders from {grid[0]:g} to {grid[-1]:g}"
    return f"integers {int(grid[0])}..{int(grid[-1])}"


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
    ps = as_phases(phases)
    d = _v.fraction(delta=delta)
    fixed = check_accounting(accountant, conversion, pld_discretization)
    return epsilon_and_interval(ps, d, accountant, conversion, fixed)[0]
