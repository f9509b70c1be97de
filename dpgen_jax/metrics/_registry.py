"""The metric registry: every metric :func:`~dpgen_jax.metrics.evaluate` computes, registered once.

A :class:`Metric` names the result keys it writes, says whether it applies to a schema and its
inputs (or why not: each of its keys is then null with that reason), computes its values, and
lists the rows it contributes to the report's headline (:class:`Headline`) and to the
benchmark's leaderboard (:class:`BoardColumn`). ``evaluate``, ``write_report``'s summary, the
leaderboard and ``docs/metrics.md`` (a test checks that it has a section for every key) all read
:data:`METRICS`. A metric registers itself in the module of its function (the adapter from
:class:`MetricInputs` and one :func:`register_metric` call at the end of that module); adding a
metric touches that module, its test and its docs section. ``dpgen_jax.metrics`` imports every
metric module, and ``evaluate`` imports those it runs, so the table is complete wherever it is read.

The order of :data:`METRICS` (by ``Metric.rank``, whatever the order in which the modules are
imported) is the order of evaluation, of ``timings_s`` and of the headline rows. Every metric draws
its randomness from ``inputs.seed`` alone, so the order changes no value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from dpgen_jax.data import Schema
from dpgen_jax.metrics._inputs import LabelRows, Table


@dataclasses.dataclass(frozen=True)
class MetricInputs:
    """What every metric may read: the three prepared tables (R, T, S), the reference R + T, the
    schema, the label and ``evaluate``'s options; ``prior`` is a reused result (its real-data
    scores are not refitted). ``marginal_pairs`` / ``marginal_triples``: given marginals of the
    2-way / 3-way L1 (tuples of column names; None: the default choice). ``label_rows``: the rows
    the label metrics read when the label is declared ``missing=True`` (:meth:`labelled`).
    ``label_protocol`` (a ``LabelAccuracyProtocol``) and ``marginal_spacing`` (a ``Spacing``) are
    typed by the metric modules that read them, which import this one (so it names neither)."""

    train: Table
    test: Table
    synthetic: Table
    reference: Table
    schema: Schema
    label: str | None
    seed: int
    n_jobs: int | None
    n_triples: int
    histogram_bins: int
    tune_tstr: bool
    label_protocol: Any
    marginal_bins: int
    marginal_spacing: Any
    max_3way_triples: int
    prior: dict[str, Any] | None
    max_2way_pairs: int
    marginal_pairs: tuple[tuple[str, ...], ...] | None = None
    marginal_triples: tuple[tuple[str, ...], ...] | None = None
    label_rows: LabelRows | None = None

    def labelled(self) -> tuple[Table, Table, Table, Schema]:
        """(R, T, S, schema) of the label metrics: the rows where the label is present, the label
        as its own kind, when it is declared ``missing=True``; else the three tables."""
        v = self.label_rows
        if v is None:
            return self.train, self.test, self.synthetic, self.schema
        return v.train, v.test, v.synthetic, v.schema


@dataclasses.dataclass(frozen=True)
class Headline:
    """A row of the report's headline: ``title`` (``str.format`` fields ``n``, ``p``, ``t``,
    ``nist``, ``label``), the result path of the synthetic number, of the real-data number (or
    None); the row is left out when the metric's key is null, or when ``path`` is null and
    ``optional``."""

    title: str
    path: str
    real_path: str | None = None
    optional: bool = False


@dataclasses.dataclass(frozen=True)
class BoardColumn:
    """A column of the benchmark's leaderboard: its key, the result path, its heading and whether
    higher is better (None: no direction)."""

    key: str
    path: str
    heading: str
    higher_is_better: bool | None


@dataclasses.dataclass(frozen=True)
class Metric:
    """One entry of the table.

    Attributes:
        name: the entry's name (its ``timings_s`` key).
        keys: the result keys it writes.
        applies: ``inputs -> None`` when it applies, else the reason every key is null.
        compute: ``(inputs, nulls) -> {key: value}``; it may add ``nulls[path] = reason`` for an
            undefined part of its result.
        headlines: its rows of the report's headline.
        board: its columns of the leaderboard.
        rank: its place in :data:`METRICS` (ascending; ties keep the order of registration).
    """

    name: str
    keys: tuple[str, ...]
    compute: Callable[[MetricInputs, dict[str, str]], dict[str, Any]]
    applies: Callable[[MetricInputs], str | None] = lambda inputs: None
    headlines: tuple[Headline, ...] = ()
    board: tuple[BoardColumn, ...] = ()
    rank: float = 0.0


METRICS: list[Metric] = []
"""The registered metrics, in evaluation order."""


def register_metric(metric: Metric) -> Metric:
    """Adds ``metric`` to :data:`METRICS` at its rank (a name or a result key already taken is an
    error)."""
    taken = {k for m in METRICS for k in m.keys}
    if any(m.name == metric.name for m in METRICS) or taken & set(metric.keys):
        raise ValueError(f"metric {metric.name!r} (keys {metric.keys}) clashes with a registered one.")
    METRICS.append(metric)
    METRICS.sort(key=lambda m: m.rank)  # stable: ties keep the order of registration
    return metric


def lookup(result: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of an ``evaluate`` result (None where absent)."""
    node: Any = result
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def result_keys() -> list[str]:
    """Every result key a metric of the table writes, in table order."""
    return [k for m in METRICS for k in m.keys]


# ----------------------------------------------------------------------------- shared conditions


def needs_label(inputs: MetricInputs) -> str | None:
    """``Metric.applies`` of a metric of the label: None, or why there is none to score."""
    if inputs.label is None:
        return "no label: pass label= or declare a label column in the schema"
    return inputs.label_rows.reason if inputs.label_rows is not None else None


def needs_binary_label(inputs: MetricInputs, what: str) -> str | None:
    """As :func:`needs_label`, and the label must be binary (``what`` names the metric)."""
    reason = needs_label(inputs)
    if reason is not None:
        return reason
    k = len(inputs.labelled()[3][inputs.label].categories)
    return None if k == 2 else f"the label {inputs.label!r} has {k} categories; {what} needs a binary label"


def needs_three_columns(inputs: MetricInputs) -> str | None:
    """``Metric.applies`` of a 3-way marginal metric."""
    n = len(inputs.schema)
    return None if n >= 3 else f"the schema has {n} columns; a 3-way marginal needs 3"


__all__ = ["METRICS", "BoardColumn", "Headline", "Metric", "MetricInputs", "lookup", "needs_binary_label",
           "needs_label", "needs_three_columns", "register_metric", "result_keys"]
