"""Feasibility from the plan: each method's predicted fit time and memory on a query's shape.

A method's **time model** is a nonnegative sum of cost terms (:data:`TERMS`: a fixed cost and
products of the plan's public numbers, :func:`cost_features`: the rows N, the columns, the encoded
width, i.e. the one-hot width of the discrete columns plus one per continuous column, and the plan's
work, the sum over its phases of steps x rows per step: DP-SGD epochs x N, GEM's and AIM's rounds,
MST's measurements), fitted by nonnegative least squares of the relative error to the median fit
seconds of the grid's (dataset, method, epsilon) groups whose fits no time budget cut. Sums of
nonnegative terms grow with the table as fits do, so they extrapolate to wider and longer tables
without the wild slopes a log-linear fit takes from a handful of shapes. The model predicts the
benchmark machine's time (2 cores, the load of the grid's runs); its error on the grid itself is
reported per method, in sample and with each dataset held out (``time_model_errors``,
docs/recommend.md).

The **memory estimate** is not measured: :data:`BYTES_PER_CELL` x N x encoded width for a
gradient method (the encoded table in float32 held a few times over: the data, its device copy, a
batch's inputs), x N x columns for a marginal method (the integer codes), against the machine's
physical memory.

A method is **infeasible** for a query when its predicted time exceeds the user's limit
(``max_minutes``, default :data:`DEFAULT_MAX_MINUTES`) or its memory estimate exceeds the
machine's memory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpgen_jax import data as data_lib
from dpgen_jax._machine import physical_memory
from dpgen_jax.advice._grid import groups as _groups
from dpgen_jax.advice._grid import median as _median
from dpgen_jax.advice._plans import FAMILIES, PlanSummary, _g

DEFAULT_MAX_MINUTES = 30.0
"""The time a recommended fit may take unless the user states another (``--max-minutes``)."""

FEATURES = ("n", "columns", "width", "work", "shards", "epsilon")
"""The cost features :func:`cost_features` computes (public numbers of a fit)."""

TERMS = {
    "gradient": ("1", "work x width", "n x width", "work", "shards", "shards x width"),
    "marginal": ("1", "n x columns", "n x columns^2", "columns^3", "work x width", "n x epsilon"),
}
"""The cost terms of each family's time models: a model is a nonnegative combination of them.
Gradient methods: a fixed cost (compilation), the examples processed times the encoded width
(per-example gradients), the rows times the width (encoding, marginal matching, sampling), the steps'
work alone, and the sharded sanitisers' shards (GS-WGAN pretrains one discriminator per shard). Marginal methods: a fixed cost, counting one-way marginals (N x columns), counting the
candidate pairs (N x columns^2: MST's selection), the candidate triples' bookkeeping (columns^3:
AIM's and GEM's workloads), the plan's rounds of work on the encoded width (GEM's steps), and N x
epsilon (AIM admits larger cliques, whose models cost more, as N x epsilon grows)."""


def _term(name: str, f: Mapping[str, float]) -> float:
    n, d, w, work, k = f["n"], f["columns"], f["width"], f["work"], f["shards"]
    return {"1": 1.0, "work x width": work * w, "n x width": n * w, "work": work, "shards": k,
            "shards x width": k * w, "n x epsilon": n * f["epsilon"], "n x columns": n * d, "n x columns^2": n * d * d, "columns^3": d ** 3}[name]


MIN_SECONDS = 1.0
"""Measured fit times below this count as this (a sub-second fit's time is mostly noise)."""

MIN_GROUPS = 3
"""A method needs at least this many uncapped grid groups for a time model of its own; with fewer,
it borrows its family's growth terms (see :func:`fit_time_models`)."""

BYTES_PER_CELL = 16
"""Memory estimate: bytes per encoded cell (float32, four copies)."""


def encoded_width(schema: data_lib.Schema) -> int:
    """The encoded width: the sum of the columns' ``Column.width`` (one-hot k for a categorical column,
    one for a binary or continuous one)."""
    return sum(c.width for c in schema.columns)


def cost_features(schema: data_lib.Schema, num_records: int, epsilon: float, plan: PlanSummary
                  ) -> dict[str, float]:
    """The cost features of a fit of ``plan`` (:data:`FEATURES`), from public values only."""
    work = sum(p.steps * max(1.0, p.batch_size or 1.0) for p in plan.phases)
    shards = sum(p.num_shards or 0 for p in plan.phases)
    return {"n": float(num_records), "columns": float(len(schema.columns)), "width": float(encoded_width(schema)),
            "work": float(work), "shards": float(shards), "epsilon": float(epsilon)}


def predicted_bytes(schema: data_lib.Schema, num_records: int, plan: PlanSummary) -> int:
    """The memory estimate of a fit (not measured): :data:`BYTES_PER_CELL` x N x the encoded width
    (gradient methods) or the number of columns (marginal methods)."""
    stats = {f: plan.statistic(f) for f in FAMILIES}
    cells = encoded_width(schema) if family(stats) == "gradient" else len(schema.columns)
    return BYTES_PER_CELL * int(num_records) * cells


@dataclasses.dataclass(frozen=True)
class TimeModel:
    """A method's fitted time model: seconds = sum of coefficient x cost term (coefficients >= 0).

    Attributes:
        method: the registry name.
        terms: the cost terms it sums (:data:`TERMS` of its family).
        coefficients: one nonnegative coefficient per term.
        groups: the (dataset, epsilon) groups it was fitted on.
        measured: their median fit seconds (at least :data:`MIN_SECONDS`).
        fitted: the model's seconds for the same groups.
    """

    method: str
    terms: tuple[str, ...]
    coefficients: tuple[float, ...]
    groups: tuple[tuple[str, float], ...]
    measured: tuple[float, ...]
    fitted: tuple[float, ...]

    def predict(self, features: Mapping[str, float]) -> float:
        """Predicted fit seconds for a fit with these cost features."""
        return float(sum(c * _term(t, features) for c, t in zip(self.coefficients, self.terms)))

    def ratios(self) -> tuple[float, ...]:
        """Predicted / measured seconds on each group it was fitted on."""
        return tuple(f / m for f, m in zip(self.fitted, self.measured))


def family(statistics: Mapping[str, float | None]) -> str:
    """``"gradient"`` for a plan with a DP-SGD or sharded phase (its plan statistics, by family), else
    ``"marginal"`` (noisy measurements and selections only)."""
    return "gradient" if any(statistics.get(f) is not None for f in FAMILIES) else "marginal"


def _relative_nnls(x: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Nonnegative coefficients minimising the squared relative error sum_i ((x_i . c - t_i) / t_i)^2."""
    from scipy.optimize import nnls

    a = x / seconds[:, None]
    scale = np.linalg.norm(a, axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(a / scale, np.ones(len(seconds)))
    return coef / scale


def fit_time_models(rows: Sequence[tuple[str, tuple[str, float], Mapping[str, float], float]],
                    terms: Sequence[str]) -> dict[str, TimeModel]:
    """The time models of one family's methods from (method, group, features, median seconds) rows.

    Each method with at least :data:`MIN_GROUPS` groups: nonnegative least squares of the relative
    error over its groups. A method with fewer takes the family's model (the same fit over the rows
    of the methods that have their own model, or over every row when none has) times one scale
    fitted to its own groups, so that one or two measured shapes never make a flat model.
    """
    rows = [(m, g, f, max(float(s), MIN_SECONDS)) for m, g, f, s in rows if s is not None]
    terms = tuple(terms)
    by: dict[str, list] = {}
    for r in rows:
        by.setdefault(r[0], []).append(r)
    out: dict[str, TimeModel] = {}

    def model(m, coef, mine):
        x = np.array([[_term(t, f) for t in terms] for _, _, f, _ in mine])
        return TimeModel(m, terms, tuple(float(c) for c in coef), tuple(g for _, g, _, _ in mine),
                         tuple(s for _, _, _, s in mine), tuple(float(v) for v in x @ coef))

    for m, mine in sorted(by.items()):
        if len(mine) >= MIN_GROUPS:
            x = np.array([[_term(t, f) for t in terms] for _, _, f, _ in mine])
            out[m] = model(m, _relative_nnls(x, np.array([s for *_, s in mine])), mine)
    if len(rows) >= MIN_GROUPS and len(out) < len(by):
        pool = [r for r in rows if r[0] in out] or rows  # the modelled methods' rows, else every row
        shape = _relative_nnls(np.array([[_term(t, f) for t in terms] for _, _, f, _ in pool]),
                               np.array([s for *_, s in pool]))
        for m, mine in sorted(by.items()):
            if m not in out:
                x = np.array([[_term(t, f) for t in terms] for _, _, f, _ in mine]) @ shape
                seconds = np.array([s for *_, s in mine])
                scale = float(np.sum(x / seconds) / np.sum((x / seconds) ** 2))  # relative least squares
                out[m] = model(m, shape * scale, mine)
    return out


def time_models(evidence: Mapping[str, Any], excluded: frozenset[str] = frozenset()) -> dict[str, TimeModel]:
    """Every method's time model from the evidence's uncapped groups (datasets in ``excluded`` left out)."""
    groups = _groups(c for c in evidence["cells"] if c["dataset"] not in excluded)
    by_family: dict[str, list] = {}
    for row in evidence.get("plans", []):
        key = (row["dataset"], row["method"], row["epsilon"])
        cells = groups.get(key)
        if not cells or row.get("features") is None or any(c.get("capped") for c in cells):
            continue
        seconds = _median(c["fit_seconds"] for c in cells)
        by_family.setdefault(family(row), []).append(
            (row["method"], (row["dataset"], row["epsilon"]), row["features"], seconds))
    return {m: model for fam, rows in sorted(by_family.items())
            for m, model in fit_time_models(rows, TERMS[fam]).items()}


@dataclasses.dataclass(frozen=True)
class Feasibility:
    """A method's predicted cost on the query and whether it fits the user's limits.

    Attributes:
        seconds: the predicted fit seconds on the benchmark machine (None: no time model).
        bytes: the memory estimate.
        max_seconds: the user's time limit.
        memory: the machine's memory (None: unknown).
        factor: the correction applied to the model's prediction (its error on the nearest grid cells).
    """

    seconds: float | None
    bytes: int
    max_seconds: float
    memory: float | None
    factor: float = 1.0

    @property
    def feasible(self) -> bool:
        """Within the time limit (or no model) and the memory."""
        return ((self.seconds is None or self.seconds <= self.max_seconds)
                and (self.memory is None or self.bytes <= self.memory))

    def describe(self) -> str:
        """The prediction in words and numbers."""
        time = ("no time model (fewer than 3 measured grid shapes)" if self.seconds is None else
                f"predicted fit {_minutes(self.seconds)} on the benchmark's 2-core machine "
                f"(limit {_minutes(self.max_seconds)}; the time model x {self.factor:.2g}, its error on the "
                f"nearest grid cells)")
        mem = f"memory estimate {self.bytes / 2 ** 30:.2g} GiB" + (
            "" if self.memory is None else f" of {self.memory / 2 ** 30:.0f} GiB")
        return f"{time}; {mem}"


def _minutes(seconds: float) -> str:
    return f"{_g(seconds)} s" if seconds < 120 else f"{_g(seconds / 60)} min"


def correction(model: TimeModel | None, groups: Sequence[tuple[str, float]], weights: Sequence[float]) -> float:
    """The model's error on the query's evidence groups: the weighted geometric mean of measured /
    fitted seconds over those of ``groups`` the model was fitted on (1 when none was)."""
    if model is None:
        return 1.0
    pairs = [(w, m / f) for g, w in zip(groups, weights) for gg, m, f in zip(model.groups, model.measured, model.fitted)
             if gg == g and f > 0]
    if not pairs:
        return 1.0
    return float(np.exp(sum(w * np.log(r) for w, r in pairs) / sum(w for w, _ in pairs)))


def feasibility(model: TimeModel | None, schema: data_lib.Schema, num_records: int, epsilon: float,
                plan: PlanSummary, max_minutes: float, factor: float = 1.0) -> Feasibility:
    """The :class:`Feasibility` of a fit of ``plan`` under ``max_minutes``: the model's prediction
    times ``factor`` (:func:`correction`: its error on the nearest grid cells)."""
    seconds = None if model is None else factor * model.predict(cost_features(schema, num_records, epsilon, plan))
    return Feasibility(seconds, predicted_bytes(schema, num_records, plan), 60.0 * max_minutes, physical_memory(),
                       factor)
