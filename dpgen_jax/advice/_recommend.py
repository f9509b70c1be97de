"""The ranking: :func:`recommend`, :func:`choose_method`, :func:`warn_if_flagged`,
:func:`format_recommendations`, :func:`headline`.

A query and every grid group (dataset, epsilon) are points in (log N, log number of columns, column
mix, log epsilon), the column mix being :data:`MIX_WEIGHT` x the shares of binary and of continuous
columns. A method's evidence is its grid group at the query (distance below :data:`EXACT`) or else
its :data:`NEIGHBOURS` nearest groups, weighted by 1 / (distance + :data:`SOFTENING`)^2: the query
falls between them and the reason says which and how far. In each group the method's median 3-way
marginal L1 over seeds is divided by the reference method's (``independent``) in the same group,
so that evidence from different datasets compares; the weighted mean of these ratios ranks the
methods. Beyond :data:`EXTRAPOLATION_DISTANCE` the advice says it extrapolates. TSTR AUROC and
random-forest accuracy are the evidence tables' labels' scores (named as such), never the user's.
Each method's plan is summarised, checked against the collapse rules and against its predicted
cost (``_feasibility``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax.advice._collapse import CollapseRule, _check_excluded, collapse_rules
from dpgen_jax.advice._evidence import _kinds, load_evidence
from dpgen_jax.advice._grid import groups as _groups
from dpgen_jax.advice._grid import median as _median
from dpgen_jax.advice._feasibility import (DEFAULT_MAX_MINUTES, Feasibility, _minutes, correction, feasibility,
                                          time_models)
from dpgen_jax.advice._plans import (_STATISTIC_WORDS, DEFAULT_DELTA, FAMILIES, PlanSummary, _g,
                                     plan_summary)
from dpgen_jax.synthesizers import available, get

REFERENCE_METHOD = "independent"
"""The grid's reference floor: a method's 3-way L1 is scored relative to this method's in the same
cells (every grid cell has it; it is cheap and its L1 reflects the dataset's own difficulty)."""

MIX_WEIGHT = 2.0
"""The column mix's weight in the distance: a table of binary columns only is 2 from one of
continuous columns only, as far as a factor e^2 = 7.4 in N or in width."""

NEIGHBOURS = 2
"""How many nearest grid groups a method's evidence interpolates between."""

EXACT = 0.05
"""A grid group nearer than this is the query's own shape and budget: it alone is the evidence."""

SOFTENING = 0.25
"""The weight of a group is 1 / (distance + SOFTENING)^2 (inverse-distance weighting, power 2)."""

TIE = 0.02
"""Scores within 2 % of the best remaining one are tied (about the seeds' spread of a group's
median): the tied methods are ranked by predicted fit time, fastest first."""

EXTRAPOLATION_DISTANCE = 1.5
"""Beyond this distance from every grid group of a method the advice is an extrapolation (a factor
e^1.5 = 4.5 in N, width or epsilon, or a different column mix)."""


def _point(num_records: float, kinds: Mapping[str, int], epsilon: float) -> tuple[float, ...]:
    d = sum(kinds.values())
    return (math.log(num_records), math.log(d), MIX_WEIGHT * kinds["binary"] / d,
            MIX_WEIGHT * kinds["continuous"] / d, math.log(epsilon))


@dataclasses.dataclass(frozen=True)
class Evidence:
    """A method's grid evidence for a query: its nearest groups and their medians over seeds.

    Attributes:
        groups: the (dataset, epsilon) groups used, nearest first.
        distances: their distances to the query in (log N, log columns, column mix, log epsilon).
        weights: their weights (summing to 1).
        cells: the number of cells (seeds) the medians pool.
        l1_3way: the weighted mean of the groups' median 3-way marginal L1 (lower is better).
        reference_l1: the same of the reference method in the same groups.
        score: the weighted mean of the groups' ratios method / reference, what ranks the methods.
        tstr_auroc: the median TSTR AUROC on the evidence tables' labels (None when not measured).
        rf_accuracy: the median random-forest accuracy on the same labels (None when not measured).
        fit_seconds: the median fit time on the benchmark's machine.
        labels: the label column of each group's table (None: no label).
    """

    groups: tuple[tuple[str, float], ...]
    distances: tuple[float, ...]
    weights: tuple[float, ...]
    cells: int
    l1_3way: float
    reference_l1: float
    score: float
    tstr_auroc: float | None
    rf_accuracy: float | None
    fit_seconds: float | None
    labels: tuple[str | None, ...] = ()

    @property
    def distance(self) -> float:
        """The distance of the nearest group."""
        return self.distances[0]

    @property
    def extrapolated(self) -> bool:
        """The nearest group lies beyond :data:`EXTRAPOLATION_DISTANCE`."""
        return self.distance > EXTRAPOLATION_DISTANCE

    def describe(self, datasets: Mapping[str, Mapping[str, Any]]) -> str:
        """The evidence in a sentence with its numbers."""
        where = [f"{ds} at epsilon {eps:g} (N {datasets[ds]['num_records']:,}, {datasets[ds]['columns']} columns; "
                 f"distance {dist:.2f}" + (f", weight {w:.2f})" if len(self.groups) > 1 else ")")
                 for (ds, eps), dist, w in zip(self.groups, self.distances, self.weights)]
        place = (f"at {where[0]}" if len(where) == 1 else "between " + " and ".join(where))
        labels = sorted({f"{ds}'s {lab}" for (ds, _), lab in zip(self.groups, self.labels) if lab})
        scores = (f"TSTR AUROC {_g(self.tstr_auroc)}, RF accuracy {_g(self.rf_accuracy)} on "
                  f"{' and '.join(labels)} (the evidence tables' label, not yours)" if labels else
                  "no label in the evidence tables (no TSTR or RF)")
        tail = (f"; extrapolation: the nearest grid cell is {self.distance:.2f} away (beyond "
                f"{EXTRAPOLATION_DISTANCE:g})" if self.extrapolated else "")
        return (f"grid: 3-way L1 {_g(self.l1_3way)} = {_g(self.score)} x {REFERENCE_METHOD}'s {_g(self.reference_l1)}, "
                f"{scores}, fit {_g(self.fit_seconds)} s ({self.cells} seeds {place}){tail}")


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
        cost: the predicted fit time and memory (None when no plan could be made).
    """

    method: str
    rank: int
    usable: bool
    flagged: bool
    evidence: Evidence | None
    plan: PlanSummary | None
    reason: str
    unavailable: str | None = None
    cost: Feasibility | None = None

    @property
    def score(self) -> float | None:
        """The ranking score (relative 3-way L1), None without evidence."""
        return None if self.evidence is None else self.evidence.score

    @property
    def feasible(self) -> bool:
        """Predicted to finish within the time limit and to fit in memory (True without a prediction)."""
        return self.cost is None or self.cost.feasible

    def __str__(self) -> str:
        tag = (" [cannot be used here]" if not self.usable else " [infeasible]" if not self.feasible else
               " [likely to collapse]" if self.flagged else "")
        return f"{self.rank}. {self.method}{tag}: {self.reason}"


def _check_schema(schema: Any) -> data_lib.Schema:
    return _v.instance(data_lib.Schema, "a dpgen_jax.data.Schema", schema=schema)


def _method_evidence(method: str, query: tuple[float, ...], groups: Mapping, datasets: Mapping
                     ) -> Evidence | None:
    """The method's nearest groups that the reference method also ran in, and their weighted ratios."""
    options = []
    for (ds, m, eps), cells in groups.items():
        if m != method or _median(c["l1_3way"] for c in cells) is None:
            continue
        ref = groups.get((ds, REFERENCE_METHOD, eps))
        if ref is None or not _median(c["l1_3way"] for c in ref):
            continue
        facts = datasets[ds]
        options.append((math.dist(query, _point(facts["num_records"], facts["kinds"], eps)), ds, eps))
    if not options:
        return None
    options.sort()
    exact = [o for o in options if o[0] < EXACT]
    chosen = exact or options[:NEIGHBOURS]
    raw = [1.0 / (d + SOFTENING) ** 2 for d, _, _ in chosen]
    weights = [w / sum(raw) for w in raw]
    l1s = [_median(c["l1_3way"] for c in groups[(ds, method, eps)]) for _, ds, eps in chosen]
    refs = [_median(c["l1_3way"] for c in groups[(ds, REFERENCE_METHOD, eps)]) for _, ds, eps in chosen]
    cells = [c for _, ds, eps in chosen for c in groups[(ds, method, eps)]]

    def mean(xs):
        return sum(w * x for w, x in zip(weights, xs))

    return Evidence(tuple((ds, eps) for _, ds, eps in chosen), tuple(d for d, _, _ in chosen), tuple(weights),
                    len(cells), mean(l1s), mean(refs), mean([a / b for a, b in zip(l1s, refs)]),
                    _median(c["tstr_auroc"] for c in cells), _median(c["rf_accuracy"] for c in cells),
                    _median(c["fit_seconds"] for c in cells),
                    tuple(datasets[ds].get("label") for _, ds, _ in chosen))


def _check_query(schema, num_records, epsilon, delta) -> tuple[data_lib.Schema, int, float, float]:
    schema = _check_schema(schema)
    n = _v.whole(minimum=1, num_records=num_records)
    eps = _v.positive(epsilon=epsilon)
    return schema, n, eps, DEFAULT_DELTA if delta is None else _v.fraction(delta=delta)


def recommend(schema: data_lib.Schema, num_records: int, epsilon: float, *, delta: float | None = None,
              exclude_datasets: Iterable[str] = (), max_minutes: float | None = DEFAULT_MAX_MINUTES
              ) -> list[Recommendation]:
    """Every registered method ranked for a table of this public shape and budget, with reasons.

    Reads no data: the schema, ``num_records`` and the budget are public, the evidence is the
    committed benchmark grid, and each method's plan is computed from public values only.

    Order: usable, feasible methods that are not flagged, by their evidence's score (the weighted
    mean over their nearest grid groups of their median 3-way marginal L1 divided by
    ``independent``'s there; ties by distance and name), those without evidence after them; then
    the flagged ones (the plan lies where the grid's plans collapsed, :func:`collapse_rules`) in the
    same order; then the infeasible ones (predicted to take longer than ``max_minutes`` or more
    memory than the machine has, ``_feasibility``) with the predicted numbers; last, the methods
    that cannot be used here (a missing optional package, a schema they cannot model, an
    unreachable epsilon), each with the reason. When no method's evidence beats ``independent``,
    ``independent`` is first (its score is 1 by definition) and :func:`headline` says so.

    Args:
        schema: the public schema of the table.
        num_records: the number of records N, a positive integer. It must be public (the user
            states it: a published size or a public bound); nothing reads it from the data.
        epsilon: the target epsilon, finite and > 0.
        delta: the target delta (default :data:`DEFAULT_DELTA`, the grid's).
        exclude_datasets: grid datasets whose cells are left out of the evidence, the collapse
            rules and the time models (to evaluate the advice on a dataset it has not seen).
        max_minutes: the longest fit the user accepts, in minutes on a machine like the
            benchmark's (default 30); None: no time limit (memory is still checked).

    Returns:
        One :class:`Recommendation` per registered method, ranked (``rank`` 1 first).

    Raises:
        TypeError: a schema that is not a ``data.Schema``, a non-integer ``num_records``, a
            non-number ``epsilon``, ``delta`` or ``max_minutes``, a bare string as
            ``exclude_datasets``.
        ValueError: ``num_records`` < 1, ``epsilon`` or ``max_minutes`` not finite or <= 0,
            ``delta`` outside (0, 1), an ``exclude_datasets`` name the evidence does not hold.
    """
    schema, n, eps, delta = _check_query(schema, num_records, epsilon, delta)
    limit = math.inf if max_minutes is None else _v.positive(max_minutes=max_minutes)
    ev = load_evidence()
    excluded = _check_excluded(exclude_datasets, ev)
    rules = collapse_rules(excluded, evidence=ev)
    models = time_models(ev, excluded)
    groups = _groups(c for c in ev["cells"] if c["dataset"] not in excluded)
    query = _point(n, _kinds(schema), eps)
    rows = []
    for method in available():
        evidence = _method_evidence(method, query, groups, ev["datasets"])
        reason = get(method).unavailable_reason()
        plan = cost = None
        if reason is None:
            try:
                plan = plan_summary(method, schema, n, eps, delta)
            except ValueError as exc:
                reason = f"no plan: {str(exc).rstrip('.')}"
            else:
                factor = (1.0 if evidence is None else
                          correction(models.get(method), evidence.groups, evidence.weights))
                cost = feasibility(models.get(method), schema, n, eps, plan, limit, factor)
        else:
            reason = f"cannot fit here: {reason.rstrip('.')}"
        rows.append((method, evidence, plan, reason, _hits(plan, rules), cost))

    def order(row) -> tuple:
        method, evidence, plan, reason, hits, cost = row
        # near evidence first, then evidence beyond EXTRAPOLATION_DISTANCE, then none
        group = ((6 if reason is not None else 4 if not cost.feasible else 2 if hits else 0)
                 + (1.0 if evidence is None else 0.5 if evidence.extrapolated else 0.0))
        return (group, math.inf if evidence is None else evidence.score,
                math.inf if evidence is None else evidence.distance, method)

    out = []
    for rank, (method, evidence, plan, reason, hits, cost) in enumerate(_break_ties(sorted(rows, key=order), order),
                                                                      start=1):
        parts = [evidence.describe(ev["datasets"]) if evidence else
                 f"grid: no cell of {method} beside {REFERENCE_METHOD}'s (nothing to compare)"]
        if reason is not None:
            parts.insert(0, reason)
        else:
            if not cost.feasible:
                parts.insert(0, "infeasible here: " + cost.describe())
            else:
                parts.append(cost.describe())
            parts.append(f"plan at N {n:,}, epsilon {eps:g}: {plan.describe()}")
            parts.append(_flag_sentence(plan, rules, hits))
        out.append(Recommendation(method, rank, reason is None, bool(hits), evidence, plan, "; ".join(parts),
                                  reason, cost))
    return out


def _break_ties(rows: list, order) -> list:
    """Within each group of the order, a method whose score is within :data:`TIE` of the best
    remaining one is tied with it, and the tied are taken fastest first (predicted fit seconds)."""
    out, rest = [], list(rows)
    while rest:
        head = rest[0]
        group, score = order(head)[0], order(head)[1]
        tied = [r for r in rest if order(r)[0] == group and order(r)[1] <= score * (1 + TIE)]
        if math.isfinite(score) and len(tied) > 1:
            head = min(tied, key=lambda r: (math.inf if r[5] is None or r[5].seconds is None else r[5].seconds,
                                            order(r)))
        out.append(head)
        rest.remove(head)
    return out


def headline(recommendations: Sequence[Recommendation]) -> str:
    """The advice in a sentence: the first choice and its evidence, or that nothing beats ``independent``.

    Also says when the first choice's evidence is an extrapolation (beyond
    :data:`EXTRAPOLATION_DISTANCE` from every grid group of the method).
    """
    first = next((r for r in recommendations if r.usable and r.feasible), None)
    if first is None:
        return "No registered method can be used and finish here."
    scored = [r for r in recommendations if r.usable and r.feasible and r.score is not None
              and r.method != REFERENCE_METHOD]
    best = min(scored, key=lambda r: r.score, default=None)
    if first.method == REFERENCE_METHOD:
        text = (f"No method's grid evidence beats {REFERENCE_METHOD} at this shape and budget by more than "
                f"{TIE:.0%}" + (f" (the best, {best.method}, scores {_g(best.score)} x its 3-way L1)" if best else "")
                + f": {REFERENCE_METHOD} is the first choice.")
    else:
        text = (f"First choice: {first.method}" + (f", {_g(first.score)} x {REFERENCE_METHOD}'s 3-way L1 on the "
                f"nearest grid cells" if first.score is not None else ", no grid cell to compare") + ".")
    if first.evidence is not None and first.evidence.extrapolated:
        text += (f" This is an extrapolation: the nearest grid cell ({first.evidence.groups[0][0]} at epsilon "
                 f"{first.evidence.groups[0][1]:g}) is {first.evidence.distance:.2f} away, beyond "
                 f"{EXTRAPOLATION_DISTANCE:g} in (log N, log columns, column mix, log epsilon).")
    return text


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
    """The ranking as console text: the headline, a summary table, then each method's reason.

    Args:
        recommendations: the output of :func:`recommend`.

    Returns:
        Lines for a terminal (no trailing newline).
    """
    head = ("rank", "method", "L1 3-way", "x ref", "dist.", "TSTR*", "RF acc.*", "fit (pred.)", "status")
    rows = [head]
    for r in recommendations:
        e = r.evidence
        status = ("cannot be used" if not r.usable else "infeasible" if not r.feasible else
                  "likely to collapse" if r.flagged else "ok")
        pred = "-" if r.cost is None or r.cost.seconds is None else _minutes(r.cost.seconds)
        rows.append((str(r.rank), r.method, _g(e and e.l1_3way), _g(e and e.score),
                     "-" if e is None else f"{e.distance:.2f}", _g(e and e.tstr_auroc),
                     _g(e and e.rf_accuracy), pred, status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [headline(recommendations), ""]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.append("* TSTR AUROC and RF accuracy of the evidence tables' own labels (each reason names them), "
                 "not your table's label. dist.: to the nearest grid cell in (log N, log columns, column mix, "
                 f"log epsilon); beyond {EXTRAPOLATION_DISTANCE:g} the advice extrapolates.")
    lines.append("")
    lines += [str(r) for r in recommendations]
    return "\n".join(lines)


def choose_method(schema: data_lib.Schema, num_records: int, epsilon: float, *,
                  delta: float | None = None, max_minutes: float | None = DEFAULT_MAX_MINUTES) -> str:
    """:func:`recommend`'s first choice (what ``dpgen-jax fit --method auto`` fits).

    Args:
        schema, num_records, epsilon, delta, max_minutes: as for :func:`recommend` (``num_records``
            public).

    Returns:
        The registry name of the first method that is usable and feasible.

    Raises:
        ValueError: no registered method can be used here (the message lists each reason), or a bad
            argument (as :func:`recommend`).
    """
    ranked = recommend(schema, num_records, epsilon, delta=delta, max_minutes=max_minutes)
    for r in ranked:
        if r.usable and r.feasible:
            return r.method
    raise ValueError("No registered method can be used and finish here: " + "; ".join(
        f"{r.method}: {r.unavailable or r.cost.describe()}" for r in ranked))


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
    better = next((r for r in ranked if r.usable and r.feasible and not r.flagged and r.method != method), None)
    advice = (f"A better choice: {better.method}, first in `dpgen-jax recommend` for this shape and budget "
              f"({better.evidence.describe(load_evidence()['datasets']) if better.evidence else 'no grid cell'})."
              if better else "No other registered method outside the collapse region can be used here.")
    return (f"{method} at N {n:,} and epsilon {eps:g} is likely to collapse (to rows with no usable relation "
            f"between the columns): {_collapse_words(plan, rules, hits)}. {advice}")

