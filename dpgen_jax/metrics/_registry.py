"""The metric registry: every metric :func:`~dpgen_jax.metrics.evaluate` computes, registered once.

A :class:`Metric` names the result keys it writes, declares its options (:class:`Option`: the
``evaluate`` keywords it reads, their defaults and checks; ``evaluate`` routes each keyword to the
metrics that declare it, :func:`route_options`), says whether it applies to a schema and its
inputs (or why not: each of its keys is then null with that reason), computes its values, and
lists the rows it contributes to the report's headline (:class:`Headline`) and to the
benchmark's leaderboard (:class:`BoardColumn`). ``evaluate``, ``write_report``'s summary, the
leaderboard and ``docs/metrics.md`` (a test checks that it has a section for every key) all read
:data:`METRICS`. A metric registers itself in the module of its function (the adapter from
:class:`MetricInputs` and one :func:`register_metric` call at the end of that module). ``evaluate``
imports every metric module on one line, so the table is complete wherever it is read: adding a
metric touches its module, that line, its test and its docs section; this module names no metric
and no option.

The order of :data:`METRICS` (by ``Metric.rank``, whatever the order in which the modules are
imported) is the order of evaluation, of ``timings_s`` and of the headline rows. Every metric draws
its randomness from ``inputs.seed`` alone, so the order changes no value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax.data import Schema
from dpgen_jax.metrics._inputs import LabelRows, Table


@dataclasses.dataclass(frozen=True)
class Option:
    """An option of a metric, passed to :func:`~dpgen_jax.metrics.evaluate` as a keyword of its name.

    Attributes:
        name: the keyword (several metrics may declare one name: the keyword then sets each).
        default: its value when not given.
        check: ``(name, value, schema) -> value``: the checked (and normalised) value; it raises
            naming ``name`` on a bad one. None: taken as given.
        fingerprint: ``value -> (key, JSON value)`` for an option the real-data scores depend on:
            it enters ``meta.real_fingerprint`` under ``key`` (so ``reuse_real`` holds only for the
            same value). None: the real-data scores do not depend on it.
    """

    name: str
    default: Any
    check: Callable[[str, Any, Schema], Any] | None = None
    fingerprint: Callable[[Any], tuple[str, Any]] | None = None


@dataclasses.dataclass(frozen=True)
class MetricInputs:
    """What every metric may read: the three prepared tables (R, T, S), the reference R + T, the
    schema, the label, the seed and the checked options of every metric (``options[metric
    name][option name]``, each metric's :attr:`Metric.options` with ``evaluate``'s keywords
    routed in: :func:`route_options`); ``prior`` is a reused result (its real-data scores are
    not refitted). ``label_rows``: the rows the label metrics read when the label is declared
    ``missing=True`` (:meth:`labelled`)."""

    train: Table
    test: Table
    synthetic: Table
    reference: Table
    schema: Schema
    label: str | None
    seed: int
    prior: dict[str, Any] | None
    options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
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
    """A row of the report's headline: ``title`` (``str.format`` fields: ``label`` and those the
    metrics declare in :attr:`Metric.title_fields`), the result path of the synthetic number, of the real-data number (or
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
        options: the options it reads (``inputs.options[name]``), each an ``evaluate`` keyword.
        title_fields: ``(field, result -> value)``: the ``str.format`` fields it gives the titles of
            the report's headline (e.g. how many pairs a mean is over).
    """

    name: str
    keys: tuple[str, ...]
    compute: Callable[[MetricInputs, dict[str, str]], dict[str, Any]]
    applies: Callable[[MetricInputs], str | None] = lambda inputs: None
    headlines: tuple[Headline, ...] = ()
    board: tuple[BoardColumn, ...] = ()
    rank: float = 0.0
    options: tuple[Option, ...] = ()
    title_fields: tuple[tuple[str, Callable[[dict[str, Any]], Any]], ...] = ()


METRICS: list[Metric] = []
"""The registered metrics, in evaluation order."""


def register_metric(metric: Metric) -> Metric:
    """Adds ``metric`` to :data:`METRICS` at its rank (a name or a result key already taken is an
    error, and so is an option another metric declares with another default: one keyword sets
    both)."""
    taken = {k for m in METRICS for k in m.keys}
    if any(m.name == metric.name for m in METRICS) or taken & set(metric.keys):
        raise ValueError(f"metric {metric.name!r} (keys {metric.keys}) clashes with a registered one.")
    defaults = {o.name: (m.name, o.default) for m in METRICS for o in m.options}
    for option in metric.options:
        other, default = defaults.get(option.name, (None, option.default))
        if default is not option.default and default != option.default:
            raise ValueError(f"metric {metric.name!r} declares the option {option.name!r} with the default "
                             f"{option.default!r}; metric {other!r} declares it with {default!r}.")
    METRICS.append(metric)
    METRICS.sort(key=lambda m: m.rank)  # stable: ties keep the order of registration
    return metric


def positive_count(name: str, value: Any, schema: Schema) -> int:
    """:attr:`Option.check` of a count: a whole number of at least 1."""
    return _v.whole(minimum=1, **{name: value})


def lookup(result: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of an ``evaluate`` result (None where absent)."""
    node: Any = result
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def route_options(given: Mapping[str, Any], schema: Schema) -> dict[str, dict[str, Any]]:
    """``{metric name: {option: checked value}}``: each keyword of ``given`` routed to every metric
    that declares it (:attr:`Metric.options`), the others at their defaults.

    Raises:
        TypeError: on a keyword no metric declares, naming it and every option with its metrics.
        TypeError, ValueError: as an option's check, naming the option.
    """
    owners: dict[str, list[str]] = {}
    for metric in METRICS:
        for option in metric.options:
            owners.setdefault(option.name, []).append(metric.name)
    unknown = [name for name in given if name not in owners]
    if unknown:
        known = "; ".join(f"{name} ({', '.join(ms)})" for name, ms in sorted(owners.items()))
        raise TypeError(f"evaluate got the unknown option{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(map(repr, unknown))}; the options (and the metrics that read them) "
                        f"are: {known}.")
    checked: dict[str, Any] = {}  # an option shared by several metrics is checked once
    out: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        for option in metric.options:
            if option.name not in checked:
                value = given.get(option.name, option.default)
                checked[option.name] = value if option.check is None else option.check(option.name, value, schema)
        out[metric.name] = {option.name: checked[option.name] for option in metric.options}
    return out


def real_settings(options: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The routed options the real-data scores depend on (:attr:`Option.fingerprint`), by their
    fingerprint key."""
    out: dict[str, Any] = {}
    for metric in METRICS:
        for option in metric.options:
            if option.fingerprint is not None:
                key, value = option.fingerprint(options[metric.name][option.name])
                out[key] = value
    return out


def fingerprint_options() -> list[str]:
    """The names of the options that enter ``meta.real_fingerprint``."""
    return list(dict.fromkeys(o.name for m in METRICS for o in m.options if o.fingerprint is not None))


def result_keys() -> list[str]:
    """Every result key a metric of the table writes, in table order."""
    return [k for m in METRICS for k in m.keys]


# ----------------------------------------------------------------------------- shared conditions


def needs_label(inputs: MetricInputs) -> str | None:
    """``Metric.applies`` of a metric of the label: None, or why there is none to score."""
    if inputs.label is None:
        return "no label: pass label= (dpgen-jax evaluate: --label) or declare a label column in the schema"
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


__all__ = ["METRICS", "BoardColumn", "Headline", "Metric", "MetricInputs", "Option", "fingerprint_options",
           "lookup", "needs_binary_label", "needs_label", "needs_three_columns", "positive_count", "real_settings",
           "register_metric", "result_keys", "route_options"]
