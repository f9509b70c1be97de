"""How good the advice is on the grid itself, each table held out in turn.

* :func:`leave_one_out`: for every grid dataset and epsilon, :func:`recommend` with that dataset's
  cells removed from the evidence, the collapse rules and the time models; its first choice (the
  first usable, feasible method that the grid measured there) against the best measured method and
  ``independent`` on that table.
* :func:`time_model_errors`: each method's time model against the measured fit seconds, on the
  groups it was fitted on and on each dataset held out.
* :func:`collapse_rates`: the collapse rules' false alarms and misses, in sample and held out.

docs/recommend.md reports all three; ``experiments/studies/advice_validation.py`` prints them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from dpgen_jax.advice._collapse import _median, collapse_rules
from dpgen_jax.advice._datasets import BENCHMARK_DATASETS
from dpgen_jax.advice._evidence import load_evidence
from dpgen_jax.advice._feasibility import DEFAULT_MAX_MINUTES, MIN_SECONDS, time_models
from dpgen_jax.advice._recommend import REFERENCE_METHOD, recommend

BEST_MARGIN, REFERENCE_MARGIN = 0.10, 0.05
"""The acceptance: the held-out first choice's median 3-way L1 within 10 % of the best measured
method's, and at most 5 % above ``independent``'s."""


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """One (dataset, epsilon) of the grid with the dataset held out of the evidence.

    Attributes:
        dataset, epsilon: the grid group.
        first: the held-out advice's first choice among the methods measured there.
        passed_over: methods ranked above it (usable, feasible) that the grid did not run there.
        first_l1: its measured median 3-way L1 there.
        best: the best measured method there; best_l1 its median 3-way L1.
        reference_l1: ``independent``'s median 3-way L1 there.
        extrapolated: the first choice's evidence lies beyond the extrapolation distance.
        overran: methods ranked feasible whose measured median fit took longer than the limit.
        times: (method, predicted, measured) fit seconds of every method with a prediction and an
            uncapped measured fit there (measured at least ``MIN_SECONDS``).
    """

    dataset: str
    epsilon: float
    first: str
    passed_over: tuple[str, ...]
    first_l1: float
    best: str
    best_l1: float
    reference_l1: float
    extrapolated: bool
    overran: tuple[str, ...]
    times: tuple[tuple[str, float, float], ...] = ()

    @property
    def within_best(self) -> bool:
        return self.first_l1 <= (1 + BEST_MARGIN) * self.best_l1

    @property
    def within_reference(self) -> bool:
        return self.first_l1 <= (1 + REFERENCE_MARGIN) * self.reference_l1


def _medians(cells) -> dict[str, float]:
    by: dict[str, list] = {}
    for c in cells:
        by.setdefault(c["method"], []).append(c)
    return {m: v for m, cs in by.items() if (v := _median(c["l1_3way"] for c in cs)) is not None}


def leave_one_out(max_minutes: float | None = DEFAULT_MAX_MINUTES, datasets: Iterable[str] | None = None
                  ) -> list[HeldOut]:
    """The held-out advice on every (dataset, epsilon) of the shipped evidence where ``independent`` ran
    (of ``datasets`` only, when given)."""
    ev = load_evidence()
    limit = math.inf if max_minutes is None else 60.0 * max_minutes
    out = []
    for ds in sorted(ev["datasets"] if datasets is None else datasets):
        facts = BENCHMARK_DATASETS[ds]
        schema = facts.schema_for(False)
        for eps in sorted({c["epsilon"] for c in ev["cells"] if c["dataset"] == ds}):
            here = [c for c in ev["cells"] if c["dataset"] == ds and c["epsilon"] == eps]
            medians = _medians(here)
            if REFERENCE_METHOD not in medians:
                continue
            seconds = {m: _median(c["fit_seconds"] for c in here if c["method"] == m) for m in medians}
            capped = {c["method"] for c in here if c["capped"]}
            everything = recommend(schema, facts.num_records, eps, exclude_datasets=(ds,), max_minutes=max_minutes)
            times = tuple((r.method, r.cost.seconds, max(seconds[r.method], MIN_SECONDS)) for r in everything
                          if r.cost is not None and r.cost.seconds is not None and r.method in seconds
                          and r.method not in capped)
            ranked = [r for r in everything if r.usable and r.feasible]
            first = next(r for r in ranked if r.method in medians)
            passed = tuple(r.method for r in ranked[:ranked.index(first)])
            best = min(medians, key=medians.get)
            overran = tuple(r.method for r in ranked if seconds.get(r.method) is not None
                            and seconds[r.method] > limit)
            out.append(HeldOut(ds, eps, first.method, passed, medians[first.method], best, medians[best],
                               medians[REFERENCE_METHOD],
                               bool(first.evidence is not None and first.evidence.extrapolated), overran, times))
    return out


@dataclasses.dataclass(frozen=True)
class TimeError:
    """A method's predicted against measured fit seconds.

    Attributes:
        method: the registry name.
        in_sample: predicted / measured of the uncorrected model on every group it was fitted on.
        held_out: predicted / measured as :func:`recommend` predicts with the group's dataset left out
            of the evidence and the time models (from :func:`leave_one_out`'s rows).
    """

    method: str
    in_sample: tuple[float, ...]
    held_out: tuple[float, ...]

    @staticmethod
    def worst(ratios) -> float | None:
        """The largest factor between prediction and measurement, max(r, 1/r)."""
        return max((max(r, 1 / r) for r in ratios), default=None)


def time_model_errors(held_out: Sequence[HeldOut] | None = None) -> dict[str, TimeError]:
    """Every time model's error on the grid: in sample, and held out (``held_out``: the rows of
    :func:`leave_one_out`, computed when not given)."""
    rows = leave_one_out() if held_out is None else held_out
    held: dict[str, list[float]] = {}
    for r in rows:
        for m, predicted, measured in r.times:
            held.setdefault(m, []).append(predicted / measured)
    full = time_models(load_evidence())
    return {m: TimeError(m, full[m].ratios() if m in full else (), tuple(held.get(m, ())))
            for m in sorted(set(full) | set(held))}


@dataclasses.dataclass(frozen=True)
class CollapseRates:
    """A family's collapse rule against the grid's outcomes.

    Attributes:
        family: ``"dp-sgd"`` or ``"sharded"``.
        groups: the grid groups with a plan statistic of the family and a measured outcome.
        collapsed: how many of them collapsed.
        false_alarms: groups flagged that learned (rule derived with their dataset held out).
        misses: groups not flagged that collapsed (the same).
        in_sample_false_alarms, in_sample_misses: the same with the rule derived from every group.
    """

    family: str
    groups: int
    collapsed: int
    false_alarms: int
    misses: int
    in_sample_false_alarms: int
    in_sample_misses: int


def collapse_rates() -> dict[str, CollapseRates]:
    """The false alarms and misses of every family's collapse rule on the grid."""
    ev = load_evidence()
    full = collapse_rules(evidence=ev)
    out = {}
    for family, rule in full.items():
        fa = miss = 0
        for p in rule.points:
            held = collapse_rules((p.dataset,), evidence=ev)[family]
            flagged = held.flags(p.value)
            fa += flagged and not p.collapsed
            miss += p.collapsed and not flagged
        out[family] = CollapseRates(
            family, len(rule.points), sum(p.collapsed for p in rule.points), fa, miss,
            sum(rule.flags(p.value) and not p.collapsed for p in rule.points),
            sum(p.collapsed and not rule.flags(p.value) for p in rule.points))
    return out
