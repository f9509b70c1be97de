"""Collapse rules: where the grid's plans collapsed, from the evidence's cells and plan statistics.

A (dataset, method, epsilon) group of the grid collapsed when its median TSTR AUROC is below
:data:`TSTR_FLOOR` or its median random-forest accuracy is less than :data:`RF_MARGIN` above the
dataset's majority rate. A plan is flagged as likely to collapse when its statistic
(:data:`~dpgen_jax.advice._plans.FAMILIES`) lies where the grid's own plans collapsed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax.advice._evidence import load_evidence
from dpgen_jax.advice._grid import groups as _groups
from dpgen_jax.advice._grid import median as _median
from dpgen_jax.advice._plans import _STATISTIC_WORDS, FAMILIES, _g

TSTR_FLOOR = 0.60
"""A grid cell collapsed when its median TSTR AUROC is below this ..."""

RF_MARGIN = 0.01
"""... or its median random-forest accuracy is less than this above the dataset's majority rate (the
bar for a model that learned the label: 0.774 on Adult, whose majority rate is 0.764)."""


def _collapsed(cells: Sequence[Mapping[str, Any]], majority_rate: float) -> bool | None:
    """Whether a group of grid cells collapsed: median TSTR AUROC below :data:`TSTR_FLOOR` or median
    random-forest accuracy below the majority rate plus :data:`RF_MARGIN` (None: neither measured)."""
    tstr = _median(c["tstr_auroc"] for c in cells)
    rf = _median(c["rf_accuracy"] for c in cells)
    if tstr is None and rf is None:
        return None
    return bool((tstr is not None and tstr < TSTR_FLOOR) or (rf is not None and rf < majority_rate + RF_MARGIN))


@dataclasses.dataclass(frozen=True)
class GridPoint:
    """One (dataset, method, epsilon) group of the grid with its plan statistic and outcome."""

    dataset: str
    method: str
    epsilon: float
    value: float
    collapsed: bool

    def label(self) -> str:
        """The group in words, e.g. ``"gs-wgan on cardio at epsilon 10"``."""
        return f"{self.method} on {self.dataset} at epsilon {self.epsilon:g}"


@dataclasses.dataclass(frozen=True)
class CollapseRule:
    """Where the grid's plans of one family collapsed.

    The threshold separates, in log scale, the largest statistic of a group that learned
    (``learned_max``) from the smallest of a group that collapsed above it (``collapsed_min``): their
    geometric mean; the smallest collapse when no group learned; None (nothing flagged) when no group
    collapsed above every group that learned. A plan is flagged when its statistic is at least the
    threshold.

    Attributes:
        family: ``"dp-sgd"`` or ``"sharded"`` (:data:`FAMILIES`).
        threshold: the statistic from which a plan is flagged, or None.
        learned_max: the group that learned with the largest statistic, or None.
        collapsed_min: the group that collapsed with the smallest statistic above ``learned_max``.
        points: every group of the family the rule was derived from.
    """

    family: str
    threshold: float | None
    learned_max: GridPoint | None
    collapsed_min: GridPoint | None
    points: tuple[GridPoint, ...]

    def flags(self, value: float | None) -> bool:
        """Whether a plan statistic lies in the collapse region."""
        return value is not None and self.threshold is not None and value >= self.threshold

    def describe(self) -> str:
        """The rule and the grid numbers it rests on."""
        words = _STATISTIC_WORDS[self.family]
        n_col = sum(p.collapsed for p in self.points)
        if self.threshold is None:
            top = f"; the largest that learned: {_g(self.learned_max.value)}, {self.learned_max.label()}" \
                if self.learned_max else ""
            return (f"no {words} threshold: none of the grid's {len(self.points)} plans of this kind collapsed "
                    f"above every one that learned{top}")
        low = (f"the largest that learned: {_g(self.learned_max.value)}, {self.learned_max.label()}; "
               f"the smallest that collapsed above it" if self.learned_max else
               f"none of the grid's {len(self.points)} plans of this kind learned; the smallest that collapsed")
        span = [p.value for p in self.points if p.collapsed]
        return (f"{words} >= {_g(self.threshold)} ({low}: {_g(self.collapsed_min.value)}, "
                f"{self.collapsed_min.label()}; {n_col} of {len(self.points)} grid plans of this kind "
                f"collapsed, from {_g(min(span))} to {_g(max(span))})")


def collapse_rules(exclude_datasets: Iterable[str] = (), *,
                   evidence: Mapping[str, Any] | None = None) -> dict[str, CollapseRule]:
    """The collapse rule of every family (:data:`FAMILIES`), derived from the grid's plans.

    A group (dataset, method, epsilon) collapsed when its median TSTR AUROC is below
    :data:`TSTR_FLOOR` or its median random-forest accuracy is less than :data:`RF_MARGIN` above the
    dataset's majority rate;
    its statistic is the plan's (:meth:`PlanSummary.statistic`) as stored in the evidence. Groups
    with a capped cell (a time budget cut the fit) are left out: they did not run that plan.

    Args:
        exclude_datasets: datasets whose groups are left out.
        evidence: the evidence (default: the shipped file).

    Returns:
        family -> :class:`CollapseRule`.
    """
    ev = load_evidence() if evidence is None else evidence
    excluded = _check_excluded(exclude_datasets, ev)
    groups = _groups(c for c in ev["cells"] if c["dataset"] not in excluded)
    rules = {}
    for family in FAMILIES:
        points = []
        for row in ev.get("plans", []):
            key = (row["dataset"], row["method"], row["epsilon"])
            if key not in groups or row.get(family) is None or any(c.get("capped") for c in groups[key]):
                continue  # a capped fit did not run the plan its statistic describes
            collapsed = _collapsed(groups[key], ev["datasets"][row["dataset"]]["majority_rate"])
            if collapsed is not None:
                points.append(GridPoint(*key, float(row[family]), collapsed))
        rules[family] = _derive_rule(family, points)
    return rules


def _derive_rule(family: str, points: list[GridPoint]) -> CollapseRule:
    learned = [p for p in points if not p.collapsed]
    top = max(learned, key=lambda p: p.value) if learned else None
    above = [p for p in points if p.collapsed and (top is None or p.value > top.value)]
    low = min(above, key=lambda p: p.value) if above else None
    if low is None:
        threshold = None
    elif top is None:
        threshold = low.value
    else:
        threshold = math.sqrt(top.value * low.value)
    return CollapseRule(family, threshold, top, low, tuple(points))


def _check_excluded(exclude_datasets: Iterable[str], evidence: Mapping[str, Any]) -> frozenset[str]:
    if isinstance(exclude_datasets, (str, bytes)) or not isinstance(exclude_datasets, Iterable):
        raise TypeError(f"exclude_datasets={exclude_datasets!r} is not a sequence of dataset names: pass "
                        "e.g. ('adult',).")
    names = tuple(exclude_datasets)
    for i, name in enumerate(names):
        _v.one_of(sorted(evidence["datasets"]), **{f"exclude_datasets[{i}]": name})
    return frozenset(names)

