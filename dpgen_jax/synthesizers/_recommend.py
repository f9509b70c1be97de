"""Method advice from evidence and public facts only: :func:`recommend`.

``recommend(schema, num_records, epsilon)`` ranks every registered method for a table of that
public shape and privacy budget, with a reason in numbers for each. Two sources, neither of which
reads a private row:

* **The benchmark grid** (``docs/results/leaderboard.json``), shipped as package data in
  ``_evidence.json`` (:func:`build_evidence` / :func:`write_evidence` write it from the committed
  leaderboard; a test checks that the two agree). For each method the grid cells (dataset,
  epsilon) nearest to the query in (log N, log number of columns, log epsilon) are its evidence:
  the median over their seeds of the 3-way marginal L1 ranks the methods, divided by the
  reference method's (``independent``) median in the same cells so that evidence from different
  datasets compares; TSTR AUROC, random-forest accuracy and fit seconds are reported beside it.
* **Each method's plan** (``Synthesizer.plan``: the calibrated phases, data-free). For a DP-SGD
  phase the noise-to-signal ratio of the mean clipped gradient, sigma * C / (B * C) = sigma / B
  (B the expected batch q * N), and its steps T; for a sharded sanitiser phase (GS-WGAN,
  DP-SACTGAN's hook) the calibrated noise multiplier. A plan is flagged as likely to collapse when
  its statistic lies where the grid's own plans collapsed (:func:`collapse_rules`).

``num_records`` is a public number the user states (a published size, or a public bound); nothing
here reads it from the data. See ``docs/recommend.md`` for the rule, its numbers and the
measured acceptance.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import json
import math
import pathlib
import statistics
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax import privacy
from dpgen_jax.synthesizers._registry import available, create, get

EVIDENCE_FILE = "_evidence.json"
"""The shipped evidence, a package data file next to this module."""

REFERENCE_METHOD = "independent"
"""The grid's reference floor: a method's 3-way L1 is scored relative to this method's in the same
cells (every grid cell has it; it is cheap and its L1 reflects the dataset's own difficulty)."""

DEFAULT_DELTA = 1e-5
"""The delta of the plans when none is given: the benchmark's (and ``Synthesizer.plan``'s) default."""

TSTR_FLOOR = 0.60
"""A grid cell collapsed when its median TSTR AUROC is below this ..."""

RF_MARGIN = 0.01
"""... or its median random-forest accuracy is less than this above the dataset's majority rate (the
issue's bar for a model that learned the label: 0.774 on Adult, whose majority rate is 0.764)."""

DPSGD, SHARDED = "dp-sgd", "sharded"
FAMILIES: tuple[str, ...] = (DPSGD, SHARDED)
"""The plan statistics a collapse rule is derived for: ``"dp-sgd"``, the largest
sigma / (B * sqrt(T)) over the plan's DP-SGD phases (the noise on the mean of the T noisy mean
clipped gradients of a phase, relative to the clip norm); ``"sharded"``, the largest noise
multiplier of its sharded sanitiser phases."""

_STATISTIC_WORDS = {DPSGD: "DP-SGD noise-to-signal sigma/(B sqrt(T))", SHARDED: "sharded noise multiplier"}


# ----------------------------------------------------------------------------- the benchmark's public facts


@dataclasses.dataclass(frozen=True)
class BenchmarkDataset:
    """The public facts of one benchmark dataset that the evidence records.

    Attributes:
        name: the benchmark's name of the dataset (``experiments/_datasets.py``).
        schema: a function returning its public schema.
        num_records: the training rows N the benchmark fits on (a published size).
        majority_rate: the share of the most frequent label in the benchmark's test rows (what a
            classifier that always predicts that label scores).
        source: where these facts come from, in words.
    """

    name: str
    schema: Callable[[], data_lib.Schema]
    num_records: int
    majority_rate: float
    source: str


BENCHMARK_DATASETS: dict[str, BenchmarkDataset] = {
    d.name: d for d in (
        BenchmarkDataset(
            "adult", data_lib.adult_schema, 32_561, 12_435 / 16_281,
            "UCI Adult: the 32,561 rows of adult.data; its test rows adult.test hold 12,435 of 16,281 "
            "with salary <=50K"),
        BenchmarkDataset(
            "adult-small", data_lib.adult_schema, 1_000, 12_435 / 16_281,
            "1,000 of Adult's training rows (numpy seed 0), tested on Adult's 16,281 test rows"),
        BenchmarkDataset(
            "cardio", data_lib.cardio_schema, 56_000, 3_502 / 7_000,
            "Kaggle's cardiovascular table (70,000 rows) in the GS-WGAN thesis's stratified split: "
            "56,000 training rows; 3,502 of the 7,000 test rows have cardio = 0"),
    )
}
"""The datasets of the committed grid (``experiments/_datasets.py`` defines how each is loaded)."""


def _kinds(schema: data_lib.Schema) -> dict[str, int]:
    return {k: sum(c.kind == k for c in schema.columns) for k in ("binary", "categorical", "continuous")}


# ----------------------------------------------------------------------------- plans


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
        _v.choice(family, "family", FAMILIES)
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
            b = p.normaliser(plan.num_records)
            phases.append(PhaseSummary(p.name, DPSGD, p.steps, p.noise_multiplier, b, p.noise_multiplier / b))
        elif isinstance(p, privacy.ShardedSanitizerPhase):
            phases.append(PhaseSummary(p.name, SHARDED, p.steps, p.noise_multiplier, p.rows_per_step,
                                       num_shards=p.num_shards))
        else:
            phases.append(PhaseSummary(p.name, p.mechanism, p.steps, p.noise_multiplier_or_none))
    return PlanSummary(method, plan.num_records, float(plan.target_epsilon), plan.delta, plan.accountant,
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
    delta = DEFAULT_DELTA if delta is None else _v.delta(delta)
    key = json.dumps(dict(overrides or {}), sort_keys=True)
    try:
        return _cached_plan(method, schema, int(num_records), float(epsilon), float(delta), key)
    except TypeError as exc:  # a configuration value of the wrong type
        raise ValueError(str(exc)) from None


# ----------------------------------------------------------------------------- the evidence file


def build_evidence(board: Mapping[str, Any], *, datasets: Mapping[str, BenchmarkDataset] | None = None,
                   delta: float = DEFAULT_DELTA, plans: bool = True) -> dict[str, Any]:
    """The evidence :func:`recommend` reads, from a leaderboard (``docs/results/leaderboard.json``).

    Keeps, per dataset, its public facts (N, number of columns, kinds, label, majority rate) and,
    per grid cell (quick-mode cells left out), the method, target epsilon, seed, 3-way marginal L1,
    TSTR AUROC, random-forest accuracy and fit seconds. With ``plans``, also every (dataset, method,
    epsilon) group's plan statistics (:data:`FAMILIES`), planned with the code installed now: run it
    where the grid was run, so that they describe the plans the grid's cells trained with.

    Args:
        board: the parsed leaderboard (its ``cells``).
        datasets: the public facts of the grid's datasets (default :data:`BENCHMARK_DATASETS`).
        delta: the grid's delta (the benchmark's default).
        plans: whether to plan every group (seconds to minutes; False gives the grid part only).

    Returns:
        A JSON-serialisable dict (``datasets``, ``cells``, ``plans`` and provenance).

    Raises:
        ValueError: a cell of a dataset without public facts, or a cell without a field.
    """
    facts = BENCHMARK_DATASETS if datasets is None else datasets
    cells, used = [], set()
    for c in board["cells"]:
        if c.get("quick"):  # a smoke run on a few hundred rows: not evidence
            continue
        if c["dataset"] not in facts:
            raise ValueError(f"The leaderboard has cells of dataset {c['dataset']!r}, whose public facts "
                             f"(N, majority rate) are not known; add them to BENCHMARK_DATASETS "
                             f"(known: {sorted(facts)}).")
        used.add(c["dataset"])
        cells.append({"dataset": c["dataset"], "method": c["method"], "epsilon": float(c["target_epsilon"]),
                      "seed": int(c["seed"]),
                      **{k: c[k] for k in ("l1_3way", "tstr_auroc", "rf_accuracy", "fit_seconds")}})
    cells.sort(key=lambda c: (c["dataset"], c["method"], c["epsilon"], c["seed"]))
    described = {}
    for name in sorted(used):
        d, schema = facts[name], facts[name].schema()
        described[name] = {"num_records": d.num_records, "columns": len(schema.columns), "kinds": _kinds(schema),
                           "label": schema.label, "majority_rate": d.majority_rate, "source": d.source}
    out: dict[str, Any] = {
        "about": "Generated by dpgen_jax.synthesizers._recommend.write_evidence from the committed benchmark "
                 "leaderboard (docs/results/leaderboard.json); do not edit by hand.",
        "leaderboard_generated": board.get("generated"),
        "delta": float(delta),
        "datasets": described,
        "cells": cells,
    }
    if plans:
        out["plans"] = _grid_plans(cells, facts, delta)
    return out


def _groups(cells: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, float], list[Mapping[str, Any]]]:
    out: dict[tuple[str, str, float], list] = {}
    for c in cells:
        out.setdefault((c["dataset"], c["method"], c["epsilon"]), []).append(c)
    return out


def _grid_plans(cells: list[dict], facts: Mapping[str, BenchmarkDataset], delta: float) -> list[dict]:
    rows = []
    for (ds, method, eps) in sorted(_groups(cells)):
        row: dict[str, Any] = {"dataset": ds, "method": method, "epsilon": eps}
        try:
            summary = plan_summary(method, facts[ds].schema(), facts[ds].num_records, eps, delta)
        except ValueError as exc:  # an unknown method, or a plan the code can no longer make
            row.update({f: None for f in FAMILIES}, error=str(exc))
        else:
            row.update({f: summary.statistic(f) for f in FAMILIES}, error=None)
        rows.append(row)
    return rows


def evidence_path() -> pathlib.Path:
    """Where the shipped evidence file lives (inside the installed package)."""
    return pathlib.Path(str(importlib.resources.files("dpgen_jax.synthesizers") / EVIDENCE_FILE))


def write_evidence(board: Mapping[str, Any] | str | pathlib.Path, path: str | pathlib.Path | None = None,
                   **options) -> pathlib.Path:
    """Writes :func:`build_evidence` of a leaderboard to ``path`` (default: the package's file).

    The benchmark's README-regeneration step calls it after the leaderboard changed:
    ``write_evidence("docs/results/leaderboard.json")``.

    Args:
        board: the leaderboard, parsed or as a path to its JSON file.
        path: the file to write (default :func:`evidence_path`).
        **options: passed to :func:`build_evidence`.

    Returns:
        The path written.
    """
    if isinstance(board, (str, pathlib.Path)):
        board = json.loads(pathlib.Path(board).read_text())
    target = pathlib.Path(path) if path is not None else evidence_path()
    target.write_text(json.dumps(build_evidence(board, **options), indent=1, allow_nan=False) + "\n")
    _shipped.cache_clear()
    return target


@functools.cache
def _shipped() -> dict[str, Any]:
    return json.loads(evidence_path().read_text())


def load_evidence() -> dict[str, Any]:
    """The shipped evidence (:func:`build_evidence` of the committed leaderboard), parsed once."""
    return _shipped()


# ----------------------------------------------------------------------------- collapse rules


def _median(values: Iterable[float | None]) -> float | None:
    xs = [float(x) for x in values if x is not None]
    return statistics.median(xs) if xs else None


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
    its statistic is the plan's (:meth:`PlanSummary.statistic`) as stored in the evidence.

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
            if key not in groups or row.get(family) is None:
                continue
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


# ----------------------------------------------------------------------------- recommendations


@dataclasses.dataclass(frozen=True)
class Evidence:
    """A method's grid evidence for a query: its nearest cells and their medians over seeds.

    Attributes:
        groups: the (dataset, epsilon) groups used (all at the smallest distance).
        distance: their distance to the query in (log N, log columns, log epsilon).
        cells: the number of cells (seeds) the medians pool.
        l1_3way: the median 3-way marginal L1 (lower is better).
        reference_l1: the reference method's median 3-way L1 in the same groups.
        score: ``l1_3way / reference_l1``, what ranks the methods (lower is better).
        tstr_auroc: the median TSTR AUROC (None when not measured).
        rf_accuracy: the median random-forest accuracy (None when not measured).
        fit_seconds: the median fit time on the benchmark's machine.
    """

    groups: tuple[tuple[str, float], ...]
    distance: float
    cells: int
    l1_3way: float
    reference_l1: float
    score: float
    tstr_auroc: float | None
    rf_accuracy: float | None
    fit_seconds: float | None

    def describe(self, datasets: Mapping[str, Mapping[str, Any]]) -> str:
        """The evidence in a sentence with its numbers."""
        where = ", ".join(f"{ds} at epsilon {eps:g} (N {datasets[ds]['num_records']:,}, "
                          f"{datasets[ds]['columns']} columns)" for ds, eps in self.groups)
        return (f"grid: median 3-way L1 {_g(self.l1_3way)} = {_g(self.score)} x {REFERENCE_METHOD}'s "
                f"{_g(self.reference_l1)}, TSTR AUROC {_g(self.tstr_auroc)}, RF accuracy {_g(self.rf_accuracy)}, "
                f"fit {_g(self.fit_seconds)} s ({self.cells} seeds of {where}; distance {self.distance:.2f})")


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """One method's place in :func:`recommend`'s ranking.

    Attributes:
        method: the registry name.
        rank: 1 for the first choice.
        usable: False when the method cannot be planned or fitted here (then ``unavailable`` says why).
        flagged: the plan lies in the region where the grid's plans collapsed.
        evidence: the grid evidence, or None when the grid has no comparable cell of the method.
        plan: the plan's summary, or None when no plan could be made.
        reason: why the method is at this place, in numbers.
        unavailable: why the method cannot be used here, or None.
    """

    method: str
    rank: int
    usable: bool
    flagged: bool
    evidence: Evidence | None
    plan: PlanSummary | None
    reason: str
    unavailable: str | None = None

    @property
    def score(self) -> float | None:
        """The ranking score (relative 3-way L1), None without evidence."""
        return None if self.evidence is None else self.evidence.score

    def __str__(self) -> str:
        tag = " [likely to collapse]" if self.flagged else " [cannot be used here]" if not self.usable else ""
        return f"{self.rank}. {self.method}{tag}: {self.reason}"


def _check_schema(schema: Any) -> data_lib.Schema:
    if not isinstance(schema, data_lib.Schema):
        raise TypeError(f"expected schema to be a dpgen_jax.data.Schema, got schema={schema!r} "
                        f"({type(schema).__name__}).")
    return schema


def _check_excluded(exclude_datasets: Iterable[str], evidence: Mapping[str, Any]) -> frozenset[str]:
    if isinstance(exclude_datasets, (str, bytes)) or not isinstance(exclude_datasets, Iterable):
        raise TypeError(f"expected exclude_datasets to be a sequence of dataset names, e.g. ('adult',), got "
                        f"exclude_datasets={exclude_datasets!r}.")
    names = tuple(exclude_datasets)
    unknown = [n for n in names if n not in evidence["datasets"]]
    if unknown:
        raise ValueError(f"expected exclude_datasets to name datasets of the evidence "
                         f"{sorted(evidence['datasets'])}, got exclude_datasets={names!r}.")
    return frozenset(names)


def _distance(query: tuple[float, float, float], facts: Mapping[str, Any], epsilon: float) -> float:
    point = (math.log(facts["num_records"]), math.log(facts["columns"]), math.log(epsilon))
    return math.dist(query, point)


def _method_evidence(method: str, query: tuple[float, float, float], groups: Mapping, datasets: Mapping
                     ) -> Evidence | None:
    """The method's nearest groups that the reference method also ran in, and their medians."""
    options = []
    for (ds, m, eps), cells in groups.items():
        if m != method or _median(c["l1_3way"] for c in cells) is None:
            continue
        ref = groups.get((ds, REFERENCE_METHOD, eps))
        if ref is None or not _median(c["l1_3way"] for c in ref):
            continue
        options.append((_distance(query, datasets[ds], eps), ds, eps))
    if not options:
        return None
    nearest = min(d for d, _, _ in options)
    chosen = sorted((ds, eps) for d, ds, eps in options if d <= nearest + 1e-9)
    cells = [c for ds, eps in chosen for c in groups[(ds, method, eps)]]
    ref_cells = [c for ds, eps in chosen for c in groups[(ds, REFERENCE_METHOD, eps)]]
    l1, ref_l1 = _median(c["l1_3way"] for c in cells), _median(c["l1_3way"] for c in ref_cells)
    return Evidence(tuple(chosen), nearest, len(cells), l1, ref_l1, l1 / ref_l1,
                    _median(c["tstr_auroc"] for c in cells), _median(c["rf_accuracy"] for c in cells),
                    _median(c["fit_seconds"] for c in cells))


def _check_query(schema, num_records, epsilon, delta) -> tuple[data_lib.Schema, int, float, float]:
    schema = _check_schema(schema)
    n = _v.count(num_records, "num_records", 1)
    eps = _v.positive_finite(epsilon, "epsilon")
    return schema, n, eps, DEFAULT_DELTA if delta is None else _v.delta(delta)


def recommend(schema: data_lib.Schema, num_records: int, epsilon: float, *, delta: float | None = None,
              exclude_datasets: Iterable[str] = ()) -> list[Recommendation]:
    """Every registered method ranked for a table of this public shape and budget, with reasons.

    Reads no data: the schema, ``num_records`` and the budget are public, the evidence is the
    committed benchmark grid, and each method's plan is computed from public values only.

    Order: usable methods that are not flagged, by their evidence's score (the median 3-way
    marginal L1 of their nearest grid cells divided by ``independent``'s there; ties by distance
    and name), those without evidence after them; then the flagged ones (the plan lies where the
    grid's plans collapsed, :func:`collapse_rules`) in the same order; last, the methods that
    cannot be used here (a missing optional package, a schema they cannot model, an unreachable
    epsilon), each with the reason.

    Args:
        schema: the public schema of the table.
        num_records: the number of records N, a positive integer. It must be public (the user
            states it: a published size or a public bound); nothing reads it from the data.
        epsilon: the target epsilon, finite and > 0.
        delta: the target delta (default :data:`DEFAULT_DELTA`, the grid's).
        exclude_datasets: grid datasets whose cells are left out of the evidence and of the collapse
            rules (to evaluate the advice on a dataset it has not seen).

    Returns:
        One :class:`Recommendation` per registered method, ranked (``rank`` 1 first).

    Raises:
        TypeError: a schema that is not a ``data.Schema``, a non-integer ``num_records``, a
            non-number ``epsilon`` or ``delta``, a bare string as ``exclude_datasets``.
        ValueError: ``num_records`` < 1, ``epsilon`` not finite or <= 0, ``delta`` outside (0, 1),
            an ``exclude_datasets`` name the evidence does not hold.
    """
    schema, n, eps, delta = _check_query(schema, num_records, epsilon, delta)
    ev = load_evidence()
    excluded = _check_excluded(exclude_datasets, ev)
    rules = collapse_rules(excluded, evidence=ev)
    groups = _groups(c for c in ev["cells"] if c["dataset"] not in excluded)
    query = (math.log(n), math.log(len(schema.columns)), math.log(eps))
    rows = []
    for method in available():
        evidence = _method_evidence(method, query, groups, ev["datasets"])
        reason = get(method).unavailable_reason()
        plan = None
        if reason is None:
            try:
                plan = plan_summary(method, schema, n, eps, delta)
            except ValueError as exc:
                reason = f"no plan: {str(exc).rstrip('.')}"
        else:
            reason = f"cannot fit here: {reason.rstrip('.')}"
        hits = _hits(plan, rules)
        rows.append((method, evidence, plan, reason, hits))

    def order(row) -> tuple:
        method, evidence, plan, reason, hits = row
        group = 3 if reason is not None else (2 if hits else 0) + (evidence is None)
        return (group, math.inf if evidence is None else evidence.score,
                math.inf if evidence is None else evidence.distance, method)

    out = []
    for rank, (method, evidence, plan, reason, hits) in enumerate(sorted(rows, key=order), start=1):
        parts = [evidence.describe(ev["datasets"]) if evidence else
                 f"grid: no cell of {method} beside {REFERENCE_METHOD}'s (nothing to compare)"]
        if reason is not None:
            parts.insert(0, reason)
        else:
            parts.append(f"plan at N {n:,}, epsilon {eps:g}: {plan.describe()}")
            parts.append(_flag_sentence(plan, rules, hits))
        out.append(Recommendation(method, rank, reason is None, bool(hits), evidence, plan, "; ".join(parts),
                                  reason))
    return out


def _hits(plan: PlanSummary | None, rules: Mapping[str, CollapseRule]) -> list[str]:
    """The families whose collapse rule flags the plan."""
    return [] if plan is None else [f for f in FAMILIES if rules[f].flags(plan.statistic(f))]


def _collapse_words(plan: PlanSummary, rules: Mapping[str, CollapseRule], hits: Sequence[str]) -> str:
    return "; ".join(f"its {_STATISTIC_WORDS[f]} is {_g(plan.statistic(f))}; the grid's collapse rule: "
                     f"{rules[f].describe()}" for f in hits)


def _flag_sentence(plan: PlanSummary, rules: Mapping[str, CollapseRule], hits: Sequence[str]) -> str:
    stats = {f: plan.statistic(f) for f in FAMILIES}
    if hits:
        return "likely to collapse: " + _collapse_words(plan, rules, hits)
    said = [f"{_STATISTIC_WORDS[f]} {_g(stats[f])} is below the grid's collapse threshold "
            f"{_g(rules[f].threshold)}" if rules[f].threshold is not None else
            f"{_STATISTIC_WORDS[f]} {_g(stats[f])}: the grid shows no collapse region for it"
            for f in FAMILIES if stats[f] is not None]
    return "; ".join(said) if said else "no DP-SGD or sharded phase: the collapse rules do not apply"


def format_recommendations(recommendations: Sequence[Recommendation]) -> str:
    """The ranking as console text: a summary table, then each method's reason.

    Args:
        recommendations: the output of :func:`recommend`.

    Returns:
        Lines for a terminal (no trailing newline).
    """
    head = ("rank", "method", "L1 3-way", "x ref", "TSTR", "RF acc.", "status")
    rows = [head]
    for r in recommendations:
        e = r.evidence
        status = "cannot be used" if not r.usable else "likely to collapse" if r.flagged else "ok"
        rows.append((str(r.rank), r.method, _g(e and e.l1_3way), _g(e and e.score), _g(e and e.tstr_auroc),
                     _g(e and e.rf_accuracy), status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.append("")
    lines += [str(r) for r in recommendations]
    return "\n".join(lines)


def choose_method(schema: data_lib.Schema, num_records: int, epsilon: float, *,
                  delta: float | None = None) -> str:
    """:func:`recommend`'s first choice (what ``dpgen-jax fit --method auto`` fits).

    Args:
        schema, num_records, epsilon, delta: as for :func:`recommend` (``num_records`` public).

    Returns:
        The registry name of the first usable method.

    Raises:
        ValueError: no registered method can be used here (the message lists each reason), or a bad
            argument (as :func:`recommend`).
    """
    ranked = recommend(schema, num_records, epsilon, delta=delta)
    for r in ranked:
        if r.usable:
            return r.method
    raise ValueError("No registered method can be used here: " + "; ".join(f"{r.method}: {r.unavailable}"
                                                                             for r in ranked))


def warn_if_flagged(method: str, schema: data_lib.Schema, num_records: int, epsilon: float, *,
                    delta: float | None = None, overrides: Mapping[str, Any] | None = None) -> str | None:
    """The warning ``fit`` prints when ``method``'s plan lies where the grid's plans collapsed.

    Only ``method``'s plan is made unless it is flagged; then :func:`recommend` ranks the others
    to name a better choice.

    Args:
        method: a registered method.
        schema, num_records, epsilon, delta: as for :func:`recommend`; ``num_records`` must be
            public (the warning states it; the CLI checks only with ``--num-records``).
        overrides: the fit's configuration overrides (``--set``), planned as the fit plans them.

    Returns:
        The warning text, naming the plan's statistic, the grid's rule and the first method of
        :func:`recommend` that is usable and not flagged; None when the plan is not flagged or
        cannot be made (the fit then reports why itself).

    Raises:
        TypeError, ValueError: an unknown method or a bad argument (as :func:`recommend`).
    """
    get(method)  # an unknown method fails here
    schema, n, eps, delta = _check_query(schema, num_records, epsilon, delta)
    try:
        plan = plan_summary(method, schema, n, eps, delta, overrides=overrides)
    except ValueError:
        return None
    rules = collapse_rules()
    hits = _hits(plan, rules)
    if not hits:
        return None
    ranked = recommend(schema, n, eps, delta=delta)
    better = next((r for r in ranked if r.usable and not r.flagged and r.method != method), None)
    advice = (f"A better choice: {better.method}, first in `dpgen-jax recommend` for this shape and budget "
              f"({better.evidence.describe(load_evidence()['datasets']) if better.evidence else 'no grid cell'})."
              if better else "No other registered method outside the collapse region can be used here.")
    return (f"{method} at N {n:,} and epsilon {eps:g} is likely to collapse (to rows with no usable relation "
            f"between the columns): {_collapse_words(plan, rules, hits)}. {advice}")


def _g(x: float | None, digits: int = 3) -> str:
    """A number for a reason: ``-`` for None, else ``digits`` significant digits."""
    return "-" if x is None else f"{x:.{digits}g}"
