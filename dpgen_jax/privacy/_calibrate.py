"""Noise calibration: one common factor on every noise multiplier to meet a target epsilon.

References:
    docs/privacy.md; ``dp_accounting.calibrate_dp_mechanism``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import dp_accounting as dpa
from dp_accounting import privacy_accountant as _pa

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._accounting import (
    Accountant,
    Conversion,
    as_phases,
    branches,
    check_accounting,
    composed_event,
    epsilon_and_interval,
    flat_phases,
    make_accountant,
    neighbouring_relation,
)
from dpgen_jax.privacy._phases import Phase
from dpgen_jax.privacy._pld import quiet_unconverged_orders

_CALIBRATION_RTOL = 1e-6


class _MemoAccountant(_pa.PrivacyAccountant):
    """Wraps a fresh accountant per query and memoises epsilon by (event, delta).

    ``calibrate_dp_mechanism`` builds a fresh accountant for every trial value, and Brent's method
    re-evaluates the bracket's endpoints and the root; the memo (keyed by the event's ``repr``,
    which lists every parameter) spares those repeated evaluations without changing any value.
    """

    def __init__(self, factory, memo: dict[tuple[str, float], float]) -> None:
        self._inner = factory()
        super().__init__(self._inner.neighboring_relation)
        self._memo = memo
        self._events: list[dpa.DpEvent] = []

    def _maybe_compose(self, event: dpa.DpEvent, count: int, do_compose: bool):
        if not self._inner.supports(event):
            return _pa.PrivacyAccountant.CompositionErrorDetails(
                invalid_event=event, error_message="not supported by the wrapped accountant"
            )
        if do_compose:
            self._events.append(event if count == 1 else dpa.SelfComposedDpEvent(event, count))
        return None

    def get_epsilon(self, target_delta: float) -> float:
        event = dpa.ComposedDpEvent(list(self._events))
        key = (repr(event), float(target_delta))
        if key not in self._memo:
            with quiet_unconverged_orders():
                self._memo[key] = float(self._inner.compose(event).get_epsilon(target_delta))
        return self._memo[key]

    def get_delta(self, target_epsilon: float) -> float:  # pragma: no cover - not used
        return float(self._inner.compose(dpa.ComposedDpEvent(list(self._events))).get_delta(target_epsilon))


def _scaled(phases: tuple[Phase, ...], factor: float, fixed: frozenset[str] = frozenset()) -> list[Phase]:
    out = []
    for p in phases:
        sigma = p.noise_multiplier_or_none
        keep = sigma is None or p.name in fixed
        out.append(p if keep else p.with_noise_multiplier(sigma * factor))
    return out


def _check_fixed(phases: tuple[Phase, ...], fixed: object) -> frozenset[str]:
    if isinstance(fixed, str) or not all(isinstance(n, str) for n in fixed):
        raise TypeError(f"fixed={fixed!r} is not a sequence of phase names: pass e.g. ['em'].")
    names = [p.name for p in flat_phases(phases)]
    unknown = sorted(set(fixed) - set(names))
    if unknown:
        raise ValueError(f"fixed lists unknown {unknown}, not phases of this run: name phases among {names}.")
    return frozenset(fixed)


def _calibrate_groups(ps, target, d, accountant, conversion, cap, held, interval) -> list[Phase]:
    """Parallel composition: each group calibrated on its own with the shared phases held fixed."""
    branches(ps)  # at most one ParallelPhases
    par = next(p for p in ps if p.parallel_groups is not None)
    shared = [p for p in ps if p is not par]
    free = [p.name for p in shared if p.noise_multiplier_or_none is not None and p.name not in held]
    if free:
        raise ValueError(
            f"with ParallelPhases {par.name!r} every other phase must be held fixed (fixed=[...]), "
            f"because each group is calibrated on its own; {free} are not.")
    shared_names = [p.name for p in shared]
    groups = []
    for group, inner in par.parallel_groups:
        scalable = [q for q in inner if q.noise_multiplier_or_none is not None and q.name not in held]
        if not scalable or not any(q.spends_privacy for q in inner):
            groups.append((group, inner))
            continue
        fixed = shared_names + [q.name for q in inner if q.name in held]
        result = calibrate(shared + list(inner), target, d, accountant, conversion, cap,
                           fixed=fixed, pld_discretization=interval)
        groups.append((group, tuple(result[len(shared):])))
    out = [dataclasses.replace(par, groups=tuple(groups)) if p is par else p for p in ps]
    final = epsilon_and_interval(tuple(out), d, accountant, conversion, interval)[0]
    if not final <= target:
        raise ValueError(
            f"target_epsilon={target} is unreachable: a group whose phases are all held fixed "
            f"reaches epsilon {final:.6g} with the shared phases.")
    return out


def calibrate(
    phases: Sequence[Phase],
    target_epsilon: float,
    delta: float,
    accountant: Accountant = "pld",
    conversion: Conversion = "improved",
    max_noise_multiplier: float = 100.0,
    *,
    fixed: Sequence[str] = (),
    pld_discretization: float | None = None,
) -> list[Phase]:
    """Scales every noise multiplier by one common factor so that epsilon meets a target.

    With a :class:`ParallelPhases` (parallel composition over disjoint groups), every other phase
    must be held fixed, and each group gets its own factor, so that every group's composition
    meets the target (a smaller group, with a larger sampling rate, gets more noise).

    The factor s is solved with ``dp_accounting.calibrate_dp_mechanism`` (Brent's method, with a
    final check that guarantees epsilon <= target) over a bracket found here first: starting at
    s = 1 (the given multipliers), doubling or halving until epsilon crosses the target, never
    letting any multiplier exceed ``max_noise_multiplier``. The bracket is found by hand because
    epsilon is infinite at s = 0, which Brent's method cannot start from. The solver's tolerance
    is 1e-6 relative in s, so the result's epsilon is below the target by about that much.
    Each trial is a full :func:`epsilon` evaluation (~10 trials: a few seconds for DP-SGD phases;
    about two minutes for paper-mode sharded phases, whose RDP takes ~10 s per evaluation).

    Args:
        phases: The phases; every ``DPSGDPhase`` and ``ShardedSanitizerPhase`` noise multiplier
            is scaled (ratios kept); ``NonPrivatePhase`` is left alone.
        target_epsilon: Target epsilon, finite and > 0.
        delta: Target delta in (0, 1).
        accountant: ``"pld"`` or ``"rdp"``, as in :func:`epsilon`.
        conversion: As in :func:`epsilon`.
        max_noise_multiplier: Largest noise multiplier any phase may get; finite and > 0.
        fixed: Names of phases whose noise is held fixed (e.g. a preprocessing mechanism whose
            noise was set first); they count towards epsilon but are not scaled.
        pld_discretization: Fixed PLD interval; default None applies the same rule as
            :func:`epsilon`, so ``epsilon(result, ...)`` reproduces the calibrated value.

    Returns:
        New phase objects (``dataclasses.replace``), in the input order, with
        ``epsilon(result, delta, accountant, conversion) <= target_epsilon``. Phases that spend
        nothing are returned unchanged.

    Raises:
        ValueError: For bad arguments, or when the target is unreachable: the message states the
            epsilon reached with the largest allowed noise (inf if a non-private phase ran).

    Privacy:
        Calibration uses only public quantities (the schedule and the target); run it before
        training.
    """
    ps = as_phases(phases)
    target = _v.positive(target_epsilon=target_epsilon)
    d = _v.fraction(delta=delta)
    interval = check_accounting(accountant, conversion, pld_discretization)
    cap = _v.positive(max_noise_multiplier=max_noise_multiplier)
    neighbouring_relation(ps)
    held = _check_fixed(ps, fixed)
    if any(p.parallel_groups is not None for p in ps):
        return _calibrate_groups(ps, target, d, accountant, conversion, cap, held, interval)

    sigmas = [p.noise_multiplier_or_none for p in ps
              if p.noise_multiplier_or_none is not None and p.name not in held]
    if not sigmas:
        raise ValueError("calibrate needs at least one phase with a noise multiplier that is not "
                         "held fixed; got none.")
    if not any(p.spends_privacy for p in ps if p.name not in held):  # nothing left to scale
        return list(ps)
    nonprivate = [p.name for p in ps if not p.differentially_private and p.spends_privacy]
    if nonprivate:
        raise ValueError(
            f"target_epsilon={target} is unreachable: epsilon is inf at any noise, because the "
            f"non-private phases {nonprivate} ran steps."
        )
    make_accountant(ps, accountant, conversion, interval)  # refuses a phase it cannot interpret

    memo: dict[tuple[str, float], float] = {}

    def fresh_accountant() -> _pa.PrivacyAccountant:
        return _MemoAccountant(lambda: make_accountant(ps, accountant, conversion, interval), memo)

    def make_event(factor: float) -> dpa.DpEvent:
        return composed_event(_scaled(ps, factor, held))

    def eps_at(factor: float) -> float:
        return float(fresh_accountant().compose(make_event(factor)).get_epsilon(d))

    def unreachable(s_max: float, e_max: float) -> ValueError:
        return ValueError(
            f"target_epsilon={target} is unreachable: with every calibrated noise multiplier scaled by "
            f"{s_max:.6g} (the largest reaching max_noise_multiplier={cap}), epsilon is {e_max:.6g} "
            f"at delta={d} ({accountant}{'' if accountant == 'pld' else ', ' + conversion})."
        )

    s_max = cap / max(sigmas)
    lo: float | None = None
    hi = min(1.0, s_max)
    e_hi = eps_at(hi)
    if e_hi > target:
        if hi == s_max:
            raise unreachable(s_max, e_hi)
        lo = hi
        while True:  # double up to s_max
            hi = min(2.0 * lo, s_max)
            e_hi = eps_at(hi)
            if e_hi <= target:
                break
            if hi == s_max:
                raise unreachable(s_max, e_hi)
            lo = hi
    else:
        for _ in range(200):  # halve until epsilon exceeds the target
            trial = hi / 2.0
            if eps_at(trial) > target:
                lo = trial
                break
            hi = trial
        else:  # pragma: no cover - epsilon grows without bound as the noise vanishes
            raise RuntimeError("could not bracket the calibration: epsilon stays below the target.")
    factor = dpa.calibrate_dp_mechanism(
        fresh_accountant,
        make_event,
        target,
        d,
        bracket_interval=dpa.ExplicitBracketInterval(lo, hi),
        tol=_CALIBRATION_RTOL * lo,
    )
    result = _scaled(ps, float(factor), held)
    final = eps_at(float(factor))
    if not final <= target:  # pragma: no cover - calibrate_dp_mechanism guarantees this
        raise RuntimeError(f"calibration returned epsilon {final} > target {target}.")
    return result
