"""The ranking: :func:`recommend`, :func:`choose_method`, :func:`warn_if_flagged`,
:func:`format_recommendations`.

For each method the grid cells (dataset, epsilon) nearest to the query in (log N, log number of
columns, log epsilon) are its evidence: the median over their seeds of the 3-way marginal L1 ranks
the methods, divided by the reference method's (``independent``) median in the same cells so that
evidence from different datasets compares; TSTR AUROC, random-forest accuracy and fit seconds are
reported beside it. Each method's plan is summarised and checked against the collapse rules.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax.advice._collapse import CollapseRule, _check_excluded, _median, collapse_rules
from dpgen_jax.advice._evidence import _groups, load_evidence
from dpgen_jax.advice._plans import (_STATISTIC_WORDS, DEFAULT_DELTA, FAMILIES, PlanSummary, _g,
                                     plan_summary)
from dpgen_jax.synthesizers import available, get

REFERENCE_METHOD = "independent"
"""The grid's reference floor: a method's 3-way L1 is scored relative to this method's in the same
cells (every grid cell has it; it is cheap and its L1 reflects the dataset's own difficulty)."""


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

