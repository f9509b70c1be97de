"""Plan summaries: what the advice reads from a method's plan (``Synthesizer.plan``; no data).

For a DP-SGD phase the noise-to-signal ratio of the mean clipped gradient, sigma * C / (B * C) =
sigma / B (B the expected batch q * N), and its steps T; for a sharded sanitiser phase (GS-WGAN,
DP-SACTGAN's hook) the calibrated noise multiplier. :data:`FAMILIES` names the two statistics a
collapse rule is derived for (``_collapse``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax import privacy
from dpgen_jax.synthesizers import create

DEFAULT_DELTA = 1e-5
"""The delta of the plans when none is given: the benchmark's (and ``Synthesizer.plan``'s) default."""

DPSGD, SHARDED = "dp-sgd", "sharded"
FAMILIES: tuple[str, ...] = (DPSGD, SHARDED)
"""The plan statistics a collapse rule is derived for: ``"dp-sgd"``, the largest
sigma / (B * sqrt(T)) over the plan's DP-SGD phases (the noise on the mean of the T noisy mean
clipped gradients of a phase, relative to the clip norm); ``"sharded"``, the largest noise
multiplier of its sharded sanitiser phases."""

_STATISTIC_WORDS = {DPSGD: "DP-SGD noise-to-signal sigma/(B sqrt(T))", SHARDED: "sharded noise multiplier"}


@dataclasses.dataclass(frozen=True)
class PhaseSummary:
    """One phase of a plan, as the advice reads it.

    Attributes:
        name: the phase's name in the privacy report.
        mechanism: ``"dp-sgd"``, ``"sharded"`` or the phase's report mechanism (``"gaussian"``,
            ``"exponential_mechanism"``, ...).
        steps: planned steps T.
        noise_multiplier: the calibrated sigma (for the exponential mechanism, the Gaussian sigma
            of the same zCDP cost); None for a phase without noise.
        batch_size: DP-SGD: the expected batch B = q * N that the noised sum is divided by;
            sharded: the rows sanitised per step. None otherwise.
        noise_to_signal: DP-SGD: sigma / B, the standard deviation of the noise on the mean
            clipped gradient relative to the clip norm, per step. None otherwise.
        num_shards: sharded: the number of shards K. None otherwise.
    """

    name: str
    mechanism: str
    steps: int
    noise_multiplier: float | None
    batch_size: float | None = None
    noise_to_signal: float | None = None
    num_shards: int | None = None

    @property
    def phase_noise_to_signal(self) -> float | None:
        """DP-SGD: sigma / (B * sqrt(T)), the noise on the mean of the phase's T noisy mean
        gradients relative to the clip norm (None for other phases or T = 0)."""
        if self.noise_to_signal is None or self.steps < 1:
            return None
        return self.noise_to_signal / math.sqrt(self.steps)

    def describe(self) -> str:
        """The phase in a few words and numbers."""
        if self.mechanism == DPSGD:
            return (f"{self.name}: sigma/B = {_g(self.noise_multiplier)}/{_g(self.batch_size, 5)} = "
                    f"{_g(self.noise_to_signal)} per step x {self.steps:,} steps "
                    f"({_g(self.phase_noise_to_signal)} over the phase)")
        if self.mechanism == SHARDED:
            return (f"{self.name}: noise multiplier {_g(self.noise_multiplier)} on each of "
                    f"{int(self.batch_size or 0):,} rows per step x {self.steps:,} steps, "
                    f"{self.num_shards:,} shards")
        noise = "" if self.noise_multiplier is None else f" sigma {_g(self.noise_multiplier)}"
        return f"{self.name}: {self.mechanism}{noise} x {self.steps:,}"


@dataclasses.dataclass(frozen=True)
class PlanSummary:
    """What the advice reads from a method's plan (``Synthesizer.plan``; no data).

    Attributes:
        method: the registry name.
        num_records: the public N the plan's rates refer to.
        epsilon: the target epsilon the noise was calibrated to.
        delta: the target delta.
        accountant: the plan's headline accountant.
        phases: every accounted phase (the groups of a parallel composition flattened).
        warnings: the warnings the method raised while planning (kept here, not re-raised).
    """

    method: str
    num_records: int
    epsilon: float
    delta: float
    accountant: str
    phases: tuple[PhaseSummary, ...]
    warnings: tuple[str, ...] = ()

    def statistic(self, family: str) -> float | None:
        """The plan's statistic of ``family`` (:data:`FAMILIES`), None when it has no such phase."""
        _v.one_of(FAMILIES, family=family)
        if family == DPSGD:
            values = [p.phase_noise_to_signal for p in self.phases if p.mechanism == DPSGD]
        else:
            values = [p.noise_multiplier for p in self.phases if p.mechanism == SHARDED and p.steps > 0]
        values = [x for x in values if x is not None]
        return max(values) if values else None

    def describe(self) -> str:
        """Every phase in a few words and numbers."""
        return "; ".join(p.describe() for p in self.phases) or "no phase"


def summarize_plan(plan: Any, method: str, notes: Sequence[str] = ()) -> PlanSummary:
    """The :class:`PlanSummary` of a ``synthesizers.Plan`` of ``method``.

    Args:
        plan: a plan from ``Synthesizer.plan`` (calibrated to a target epsilon).
        method: the method's registry name.
        notes: the warnings raised while planning.

    Returns:
        The summary; a DP-SGD phase's B is ``phase.normaliser(N)``, what its noised sum is divided
        by (the phase's expected batch size, else q * N).
    """
    phases = []
    for p in privacy.flat_phases(plan.phases):
        if isinstance(p, privacy.DPSGDPhase):
            b = p.normaliser(plan.records.n)
            phases.append(PhaseSummary(p.name, DPSGD, p.steps, p.noise_multiplier, b, p.noise_multiplier / b))
        elif isinstance(p, privacy.ShardedSanitizerPhase):
            phases.append(PhaseSummary(p.name, SHARDED, p.steps, p.noise_multiplier, p.rows_per_step,
                                       num_shards=p.num_shards))
        else:
            phases.append(PhaseSummary(p.name, privacy.prose_of(p).mechanism, p.steps,
                                       p.noise_multiplier_or_none))
    return PlanSummary(method, plan.records.n, float(plan.target_epsilon), plan.delta, plan.accountant,
                       tuple(phases), tuple(notes))


@functools.lru_cache(maxsize=512)
def _cached_plan(method: str, schema: data_lib.Schema, num_records: int, epsilon: float,
                 delta: float, overrides: str) -> PlanSummary:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = create(method, **json.loads(overrides)).plan(schema, num_records, epsilon=epsilon, delta=delta)
    return summarize_plan(plan, method, [str(w.message) for w in caught])


def plan_summary(method: str, schema: data_lib.Schema, num_records: int, epsilon: float,
                 delta: float | None = None, *, overrides: Mapping[str, Any] | None = None) -> PlanSummary:
    """The summary of ``synthesizers.create(method, **overrides).plan(schema, num_records, epsilon=...)``.

    Plans are pure functions of public values, so they are cached in the process (the evidence
    writer, :func:`recommend` and :func:`warn_if_flagged` share them). Warnings the method raises
    while planning are kept in :attr:`PlanSummary.warnings` instead of being shown.

    Args:
        method: a registered method.
        schema: the public schema.
        num_records: the public number of records N.
        epsilon: the target epsilon (finite, > 0).
        delta: the target delta (default :data:`DEFAULT_DELTA`).
        overrides: configuration fields and flags for ``create`` (JSON values, as
            ``synthesizers.config_overrides`` parses them); None: the method's defaults.

    Raises:
        ValueError: an unknown method, a bad override, a schema the method cannot model, or an
            unreachable target (the method's own message).
    """
    delta = DEFAULT_DELTA if delta is None else _v.fraction(delta=delta)
    key = json.dumps(dict(overrides or {}), sort_keys=True)
    try:
        return _cached_plan(method, schema, int(num_records), float(epsilon), float(delta), key)
    except TypeError as exc:  # a configuration value of the wrong type
        raise ValueError(str(exc)) from None


def _g(x: float | None, digits: int = 3) -> str:
    """A number for a reason: ``-`` for None, else ``digits`` significant digits."""
    return "-" if x is None else f"{x:.{digits}g}"
