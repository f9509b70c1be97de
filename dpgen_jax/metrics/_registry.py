"""The metric registry: every metric :func:`~dpgen_jax.metrics.evaluate` computes, registered once.

A :class:`Metric` names the result keys it writes, says whether it applies to a schema and its
inputs (or why not: each of its keys is then null with that reason), computes its values, and
lists the rows it contributes to the report's headline (:class:`Headline`) and to the
benchmark's leaderboard (:class:`BoardColumn`). ``evaluate``, ``write_report``'s summary, the
leaderboard and ``docs/metrics.md`` (a test checks that it has a section for every key) all read
:data:`METRICS`; adding a metric is one entry here (:func:`register_metric`), its function, its
test and its docs section.

The order of :data:`METRICS` is the order of evaluation, of ``timings_s`` and of the headline
rows. Every metric draws its randomness from ``inputs.seed`` alone, so the order changes no value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpgen_jax.data import Schema
from dpgen_jax.metrics._association import DIFF_COR_MAX_COLUMNS, diff_cor_from_tables
from dpgen_jax.metrics._dimension_wise import (
    dimension_wise_prediction_from_tables,
    dimension_wise_probability_from_tables,
    is_all_binary,
)
from dpgen_jax.metrics._divergence import diversity_from_tables
from dpgen_jax.metrics._downstream import (
    LabelAccuracyProtocol,
    label_accuracy_from_tables,
    lr_utility_from_tables,
    tstr_auroc_from_tables,
)
from dpgen_jax.metrics._fidelity import (
    MAX_2WAY_PAIRS,
    Spacing,
    js_distance_mean_from_tables,
    marginal_l1_2way_from_tables,
    marginal_l1_3way_from_tables,
    total_variation_1way_from_tables,
    wasserstein_mean_from_tables,
)
from dpgen_jax.metrics._marginals import (
    one_way_marginals_from_tables,
    pca_projection_from_arrays,
    three_way_marginal_from_tables,
)
from dpgen_jax.metrics._forest import Score, note_from_flag, source_flag
from dpgen_jax.metrics._inputs import LabelRows, Table


@dataclasses.dataclass(frozen=True)
class MetricInputs:
    """What every metric may read: the three prepared tables (R, T, S), the reference R + T, the
    schema, the label and ``evaluate``'s options; ``prior`` is a reused result (its real-data
    scores are not refitted). ``marginal_pairs`` / ``marginal_triples``: given marginals of the
    2-way / 3-way L1 (tuples of column names; None: the default choice). ``label_rows``: the rows
    the label metrics read when the label is declared ``missing=True`` (:meth:`labelled`)."""

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
    label_protocol: LabelAccuracyProtocol
    marginal_bins: int
    marginal_spacing: Spacing
    max_3way_triples: int
    prior: dict[str, Any] | None
    max_2way_pairs: int = MAX_2WAY_PAIRS
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
    """

    name: str
    keys: tuple[str, ...]
    compute: Callable[[MetricInputs, dict[str, str]], dict[str, Any]]
    applies: Callable[[MetricInputs], str | None] = lambda inputs: None
    headlines: tuple[Headline, ...] = ()
    board: tuple[BoardColumn, ...] = ()


METRICS: list[Metric] = []
"""The registered metrics, in evaluation order."""


def register_metric(metric: Metric) -> Metric:
    """Appends ``metric`` to :data:`METRICS` (a name or a result key already taken is an error)."""
    taken = {k for m in METRICS for k in m.keys}
    if any(m.name == metric.name for m in METRICS) or taken & set(metric.keys):
        raise ValueError(f"metric {metric.name!r} (keys {metric.keys}) clashes with a registered one.")
    METRICS.append(metric)
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


# ----------------------------------------------------------------------------- the entries


def _no_label(inputs: MetricInputs) -> str | None:
    if inputs.label is None:
        return "no label: pass label= or declare a label column in the schema"
    return inputs.label_rows.reason if inputs.label_rows is not None else None


def _no_binary_label(inputs: MetricInputs, what: str) -> str | None:
    reason = _no_label(inputs)
    if reason is not None:
        return reason
    k = len(inputs.labelled()[3][inputs.label].categories)
    return None if k == 2 else f"the label {inputs.label!r} has {k} categories; {what} needs a binary label"


def _dimension_wise(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    known = None
    if inputs.prior is not None:
        known = {f: (s["real"], note_from_flag(s["flag"], "real"))
                 for f, s in inputs.prior["dimension_wise_prediction"].items()}
    dwp = dimension_wise_prediction_from_tables(inputs.train, inputs.test, inputs.synthetic, inputs.schema,
                                                seed=inputs.seed, n_jobs=inputs.n_jobs, known_real=known)
    out = {"dimension_wise_prediction": dwp["scores"], "excluded": dwp["excluded"],
           "dimension_wise_summary": _dimension_wise_summary(dwp, len(inputs.schema))}
    if is_all_binary(inputs.schema):
        out["dimension_wise_probability"] = dimension_wise_probability_from_tables(
            inputs.train, inputs.synthetic, inputs.schema)
    return out


def _dimension_wise_summary(dwp: dict[str, Any], n_features: int) -> dict[str, Any]:
    scores = dwp["scores"]
    by_metric: dict[str, list[float]] = {}
    for s in scores.values():
        by_metric.setdefault(s["metric"], []).append(abs(s["real"] - s["synthetic"]) / math.sqrt(2.0))
    return {
        "n_features": n_features,
        "n_scored": len(scores),
        "n_excluded": len(dwp["excluded"]),
        "n_flagged": sum(1 for s in scores.values() if s["flag"]),
        "mean_distance_from_diagonal": {m: float(np.mean(v)) for m, v in by_metric.items()},
    }


def _label_accuracy(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    train, test, synthetic, schema = inputs.labelled()
    args = (test, schema, inputs.label, inputs.label_protocol, inputs.n_jobs)
    real = (inputs.prior["label_accuracy"]["real"] if inputs.prior is not None
            else label_accuracy_from_tables(train, *args))
    return {"label_accuracy": {"label": inputs.label, "real": real,
                               "synthetic": label_accuracy_from_tables(synthetic, *args),
                               "protocol": inputs.label_protocol.describe()}}


def _diversity_marginals(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if any(c.kind != "continuous" for c in inputs.schema.columns):
        div = diversity_from_tables(inputs.reference, inputs.synthetic, inputs.schema)
        out["jsd"], out["kl_mu"], out["mu"] = div["jsd"], div["kl_mu"], div["mu"]
        out["diversity_total_features"] = div["total_features"]
        for f, v in div["kl_mu"].items():
            if not math.isfinite(v):
                nulls[f"kl_mu.{f}"] = (
                    "infinite: the real column is constant (mu = 0) and the synthetic rows miss its value"
                    if f != "total" else "a summed feature is infinite")
    else:
        for key in ("jsd", "kl_mu", "mu"):
            out[key] = None
            nulls[key] = "the schema has no binary or categorical column"
    out["marginals"] = one_way_marginals_from_tables(inputs.reference, inputs.synthetic, inputs.schema,
                                                     inputs.histogram_bins)
    return out


def _pca(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    return {"pca": pca_projection_from_arrays(inputs.reference.encoded, inputs.synthetic.encoded).summary()}


def _three_columns(inputs: MetricInputs) -> str | None:
    n = len(inputs.schema)
    return None if n >= 3 else f"the schema has {n} columns; a 3-way marginal needs 3"


def _tv_and_l1_3way(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    tv = total_variation_1way_from_tables(inputs.reference, inputs.synthetic, inputs.schema,
                                          inputs.marginal_bins, inputs.marginal_spacing)
    for key in ("mean_continuous", "mean_discrete"):
        if tv[key] is None:
            nulls[f"tv_1way.{key}"] = f"the schema has no {key.split('_')[1]} column"
    out = {"tv_1way": tv}
    reason = _three_columns(inputs)
    if reason is None:
        out["marginal_l1_3way"] = marginal_l1_3way_from_tables(
            inputs.reference, inputs.synthetic, inputs.schema, bins=inputs.marginal_bins,
            spacing=inputs.marginal_spacing, max_triples=inputs.max_3way_triples, seed=inputs.seed,
            triples=inputs.marginal_triples)
    else:
        out["marginal_l1_3way"] = None
        nulls["marginal_l1_3way"] = reason
    return out


def _l1_2way(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    return {"marginal_l1_2way": marginal_l1_2way_from_tables(
        inputs.reference, inputs.synthetic, inputs.schema, bins=inputs.marginal_bins,
        spacing=inputs.marginal_spacing, max_pairs=inputs.max_2way_pairs, seed=inputs.seed,
        pairs=inputs.marginal_pairs)}


def _three_way_marginal(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    return {"three_way_marginal": three_way_marginal_from_tables(
        inputs.reference, inputs.synthetic, inputs.schema, n_triples=inputs.n_triples, seed=inputs.seed)}


def _similarity(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    ref, syn, schema = inputs.reference, inputs.synthetic, inputs.schema
    out: dict[str, Any] = {"wasserstein_mean": wasserstein_mean_from_tables(ref, syn, schema)}
    if out["wasserstein_mean"]["mean"] is None:
        nulls["wasserstein_mean.mean"] = "the schema has no continuous column"
    out["js_distance_mean"] = js_distance_mean_from_tables(ref, syn, schema)
    if out["js_distance_mean"]["mean"] is None:
        nulls["js_distance_mean.mean"] = "the schema has no binary or categorical column"
    if len(schema) <= DIFF_COR_MAX_COLUMNS:
        out["diff_cor"] = diff_cor_from_tables(ref, syn, schema)
    else:
        out["diff_cor"] = None
        nulls["diff_cor"] = (
            f"skipped: the schema has {len(schema)} columns (more than {DIFF_COR_MAX_COLUMNS}; the cost "
            "grows with the number of column pairs); call metrics.diff_cor directly")
    return out


def _tstr(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    train, test, synthetic, schema = inputs.labelled()
    label, prior = inputs.label, inputs.prior
    entry: dict[str, Any] = {
        "label": label,
        "protocol": {
            "model": "LogisticRegression(solver='liblinear')",
            "selection": ("C over logspace(-4, 0, 20) x {l1, l2} on a 1/9 validation split"
                          if inputs.tune_tstr else "C = 1, l2"),
            "positive": schema[label].categories[1],
        },
    }
    flags = []
    for key, table in (("real", train), ("synthetic", synthetic)):
        if key == "real" and prior is not None:
            old = prior["tstr_auroc"]
            note = note_from_flag(old.get("flag"), "real")
            score = Score(old["real"], flag=note, reason=prior["nulls"].get("tstr_auroc.real"))
        else:
            score = tstr_auroc_from_tables(table, test, schema, label, tune=inputs.tune_tstr,
                                           seed=inputs.seed)
        entry[key] = score.value
        if score.value is None:
            nulls[f"tstr_auroc.{key}"] = score.reason
        if score.flag:
            flags.append(source_flag(key, score.flag))
    entry["flag"] = ",".join(flags) or None
    return {"tstr_auroc": entry}


def _lr_utility(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    known = None
    old = (inputs.prior or {}).get("lr_utility")
    if old:
        known = (old["real"], note_from_flag(old.get("flag"), "real"))
    entry = lr_utility_from_tables(*inputs.labelled(), inputs.label, known_real=known)
    if isinstance(entry, Score):
        nulls["lr_utility"] = entry.reason
        return {"lr_utility": None}
    return {"lr_utility": entry}


register_metric(Metric(
    "dimension_wise_prediction", ("dimension_wise_prediction", "excluded", "dimension_wise_summary",
                                  "dimension_wise_probability"), _dimension_wise,
    board=(BoardColumn("dimwise_f1", "dimension_wise_summary.mean_distance_from_diagonal.f1_micro",
                       "dim-wise F1 dist.", False),
           BoardColumn("dimwise_auroc", "dimension_wise_summary.mean_distance_from_diagonal.auroc",
                       "dim-wise AUROC dist.", False))))
register_metric(Metric("label_accuracy", ("label_accuracy",), _label_accuracy, applies=_no_label))
register_metric(Metric(
    "diversity_marginals", ("jsd", "kl_mu", "mu", "diversity_total_features", "marginals"),
    _diversity_marginals,
    headlines=(Headline("JSD total ({n} features, nats)", "jsd.total"),
               Headline("D_KL^μ total ({n} features, nats)", "kl_mu.total")),
    board=(BoardColumn("jsd_total", "jsd.total", "JSD total", False),
           BoardColumn("kl_mu_total", "kl_mu.total", "D_KL^mu total", False))))
register_metric(Metric(
    "pca", ("pca",), _pca,
    applies=lambda i: None if i.reference.encoded.shape[1] >= 2 else "the schema encodes to fewer than 2 columns"))
register_metric(Metric(
    "tv_1way_marginal_l1_3way", ("tv_1way", "marginal_l1_3way"), _tv_and_l1_3way,
    headlines=(Headline("1-way TV, mean over all columns", "tv_1way.mean"),
               Headline("1-way TV, mean over continuous columns", "tv_1way.mean_continuous", optional=True),
               Headline("3-way marginal L1 on public bins, mean of {t} triples (0 best, 2 worst)",
                        "marginal_l1_3way.mean")),
    board=(BoardColumn("tv_mean", "tv_1way.mean", "TV mean", False),
           BoardColumn("tv_continuous", "tv_1way.mean_continuous", "TV cont.", False),
           BoardColumn("l1_3way", "marginal_l1_3way.mean", "3-way L1", False))))
register_metric(Metric(
    "marginal_l1_2way", ("marginal_l1_2way",), _l1_2way,
    applies=lambda i: None if len(i.schema) >= 2 else "the schema has 1 column; a 2-way marginal needs 2",
    headlines=(Headline("2-way marginal L1 on public bins, mean of {p} pairs (0 best, 2 worst)",
                        "marginal_l1_2way.mean"),)))
register_metric(Metric(
    "three_way_marginal", ("three_way_marginal",), _three_way_marginal, applies=_three_columns,
    headlines=(Headline("NIST 3-way marginal L1, mean of {nist} random triples", "three_way_marginal.mean"),)))
register_metric(Metric(
    "wasserstein_js_distance_diff_cor", ("wasserstein_mean", "js_distance_mean", "diff_cor"), _similarity,
    headlines=(Headline("Wasserstein distance, mean over continuous columns (scaled)", "wasserstein_mean.mean"),
               Headline("JS distance (base 2), mean over discrete columns", "js_distance_mean.mean"),
               Headline("Diff-Cor (Frobenius distance of association matrices)", "diff_cor.value"))))
register_metric(Metric(
    "tstr_auroc", ("tstr_auroc",), _tstr,
    applies=lambda i: _no_binary_label(i, "AUROC"),
    headlines=(Headline("LR AUROC on {label} (TSTR, liblinear)", "tstr_auroc.synthetic", "tstr_auroc.real"),),
    board=(BoardColumn("tstr_auroc", "tstr_auroc.synthetic", "TSTR AUROC", True),)))
register_metric(Metric(
    "lr_utility", ("lr_utility",), _lr_utility,
    applies=lambda i: _no_binary_label(i, "the LR utility"),
    headlines=(Headline("LR accuracy on {label} (max_iter 500)", "lr_utility.synthetic.accuracy",
                        "lr_utility.real.accuracy"),
               Headline("LR accuracy difference (real − synthetic)", "lr_utility.difference.accuracy"),
               Headline("LR AUROC difference (real − synthetic)", "lr_utility.difference.auroc"),
               Headline("LR macro F1 difference (real − synthetic)", "lr_utility.difference.f1_macro"))))


__all__ = ["METRICS", "BoardColumn", "Headline", "Metric", "MetricInputs", "lookup", "register_metric",
           "result_keys"]
