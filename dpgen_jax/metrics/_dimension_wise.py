"""Dimension-wise metrics of the DP-auto-GAN paper (``docs/metrics.md``): per-feature proportions and per-feature
prediction, trained on real or on synthetic rows and tested on the real held-out rows, so the
two scores of a feature are directly comparable."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import Lasso, LogisticRegression
from sklearn.metrics import f1_score, r2_score, roc_auc_score
from threadpoolctl import threadpool_limits

from dpgen_jax.data import Schema, TableEncoder
from dpgen_jax.metrics._forest import fit_recording_convergence, forest_predict, note_from_flag, source_flag
from dpgen_jax.metrics._inputs import Table, check_features, check_schema, prepare, missing_as_value
from dpgen_jax.metrics._registry import BoardColumn, MetricInputs, Option, register_metric
from dpgen_jax.metrics._registry import Metric as RegisteredMetric

Metric = Literal["auroc", "f1_binary", "f1_micro", "r2"]

#: Trees of the dimension-wise random forests (the DP-auto-GAN code's ``n_estimators=10``).
DIMENSION_WISE_TREES = 10


def _fmt(v: float) -> str:
    return repr(int(v)) if float(v).is_integer() else repr(float(v))


def is_all_binary(schema: Schema) -> bool:
    """True when every column of the schema is binary (the paper's MIMIC setting)."""
    return all(c.kind == "binary" for c in schema.columns)


def feature_metric(schema: Schema, name: str) -> Metric:
    """The dimension-wise score of a feature (as in the DP-auto-GAN code).

    All-binary schema: ``"auroc"`` (logistic regression). Mixed schema: ``"f1_binary"`` for a
    discrete column with two categories (positive = the second), ``"f1_micro"`` for one with
    more, ``"r2"`` (Lasso) for a continuous column.
    """
    col = schema[name]
    if is_all_binary(schema):
        return "auroc"
    if col.kind == "continuous":
        return "r2"
    return "f1_binary" if len(col.categories) == 2 else "f1_micro"


# -- dimension-wise probability -----------------------------------------------------------------
def dimension_wise_probability_from_tables(
    real: Table, synthetic: Table, schema: Schema
) -> dict[str, dict[str, float]]:
    """:func:`dimension_wise_probability` on prepared tables."""
    out = {}
    for j, col in enumerate(schema.columns):
        if col.kind == "binary":
            out[col.name] = {
                "real": float(real.codes[:, j].mean()),
                "synthetic": float(synthetic.codes[:, j].mean()),
            }
    return out


@missing_as_value
def dimension_wise_probability(
    real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema
) -> dict[str, dict[str, float]]:
    """Per binary feature, the proportion of the positive (second) category in real and synthetic.

    Args:
        real: Real rows (the paper uses the training rows R; its MIMIC code the validation rows).
        synthetic: Synthetic rows (already decoded to the schema's values).
        schema: The schema of both frames.

    Returns:
        ``{feature: {"real": proportion, "synthetic": proportion}}`` for every binary column.

    Raises:
        ValueError: if the schema has no binary column, or a frame does not match it.

    References:
        Tantipongpipat et al. 2021, appendix C; ``docs/metrics.md``.
    """
    check_schema(schema)
    if not any(c.kind == "binary" for c in schema.columns):
        raise ValueError("dimension_wise_probability needs at least one binary column; the schema has none.")
    return dimension_wise_probability_from_tables(
        prepare(real, schema, "real"), prepare(synthetic, schema, "synthetic"), schema
    )


# -- dimension-wise prediction ------------------------------------------------------------------
def _constant_score(metric: Metric, constant: float, y_test: np.ndarray) -> float:
    """The score of a model whose training target is constant, i.e. predicts ``constant``."""
    if metric == "auroc":
        return 0.5  # a constant score ranks nothing: the DP-auto-GAN MIMIC code's 0.5
    pred = np.full(y_test.shape, constant)
    if metric == "r2":
        return float(r2_score(y_test, pred))
    return _f1(metric, y_test, pred)


def _f1(metric: Metric, y_test: np.ndarray, pred: np.ndarray) -> float:
    """Binary F1 (positive = code 1) for two-category targets, micro F1 otherwise (as the paper's code)."""
    average = "binary" if metric == "f1_binary" else "micro"
    return float(f1_score(y_test, pred, average=average, pos_label=1, zero_division=0))


def _fit_score(
    metric: Metric,
    x: np.ndarray,
    y: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    seed: int,
    n_jobs: int | None,
) -> tuple[float, bool]:
    """Fit the feature's model and score it; returns (score, whether the solver converged)."""
    if metric in ("auroc", "r2"):
        model = (
            LogisticRegression(solver="liblinear", max_iter=100, random_state=0)
            if metric == "auroc"
            else Lasso(alpha=1.0)
        )
        converged = fit_recording_convergence(model, x, y)
        if metric == "auroc":
            return float(roc_auc_score(y_test, model.predict_proba(x_test)[:, 1])), converged
        return float(r2_score(y_test, model.predict(x_test))), converged
    rf = RandomForestClassifier(n_estimators=DIMENSION_WISE_TREES, random_state=seed, n_jobs=n_jobs)
    rf.fit(x, y.astype(np.int64))
    pred = forest_predict(rf, x_test, n_jobs)
    return _f1(metric, y_test.astype(np.int64), pred), True


def _score_source(
    metric: Metric,
    x: np.ndarray,
    y: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    seed: int,
    n_jobs: int | None,
) -> tuple[float, str | None]:
    """Score one training source; returns (score, None | "constant_target" | "not_converged")."""
    values = np.unique(y)
    if values.size == 1:
        return _constant_score(metric, float(values[0]), y_test), "constant_target"
    score, converged = _fit_score(metric, x, y, x_test, y_test, seed, n_jobs)
    return score, None if converged else "not_converged"


def _one_feature(
    name: str,
    categories: tuple | None,
    metric: Metric,
    cols: np.ndarray,
    j: int,
    train: Table,
    test: Table,
    synthetic: Table,
    seed: int,
    n_jobs: int | None,
    known_real: tuple[float, str | None] | None = None,
) -> tuple[str, dict[str, Any] | None, str | None]:
    y_test = test.codes[:, j]
    classes = np.unique(y_test)
    if classes.size < 2:
        cats = categories
        shown = _fmt(classes[0]) if cats is None else repr(cats[int(classes[0])])
        what = "value" if cats is None else "class"
        return (
            name,
            None,
            (
                f"the real test rows of {name!r} hold a single {what} ({shown}), so its "
                f"{metric} is undefined; excluded as in the DP-auto-GAN code"
            ),
        )
    x_test = test.encoded[:, cols]
    if known_real is not None:
        real, real_note = known_real
    else:
        real, real_note = _score_source(
            metric, train.encoded[:, cols], train.codes[:, j], x_test, y_test, seed, n_jobs
        )
    syn, syn_note = _score_source(
        metric, synthetic.encoded[:, cols], synthetic.codes[:, j], x_test, y_test, seed, n_jobs
    )
    flags = [f for f in (source_flag("real", real_note), source_flag("synthetic", syn_note)) if f]
    return name, {"metric": metric, "real": real, "synthetic": syn, "flag": ",".join(flags) or None}, None


def dimension_wise_prediction_from_tables(
    train: Table,
    test: Table,
    synthetic: Table,
    schema: Schema,
    *,
    seed: int = 0,
    n_jobs: int | None = -1,
    features: Sequence[str] | None = None,
    known_real: dict[str, tuple[float, str | None]] | None = None,
) -> dict[str, Any]:
    """:func:`dimension_wise_prediction` on prepared tables.

    ``known_real`` maps a feature to its already computed real-data ``(score, note)`` (note as
    returned by the scorer: None, ``"constant_target"`` or ``"not_converged"``); those fits are
    skipped.
    """
    feats = check_features(features, schema)
    known = known_real or {}
    blocks = TableEncoder(schema).blocks
    width = synthetic.encoded.shape[1]
    jobs = []
    for b in blocks:
        if b.name not in feats:
            continue
        cols = np.concatenate([np.arange(0, b.start), np.arange(b.stop, width)])
        jobs.append((b.name, b.categories, feature_metric(schema, b.name), cols, schema.names.index(b.name)))
    # Linear models get single-threaded BLAS (small problems; threaded BLAS thrashes on a loaded
    # machine). The limit is process-wide, so it is set once here, around any worker threads.
    with threadpool_limits(limits=1, user_api="blas"):
        if is_all_binary(schema) and n_jobs not in (None, 1):
            # Many small liblinear fits (one per feature): parallel over features in threads.
            results = Parallel(n_jobs=n_jobs, prefer="threads")(
                delayed(_one_feature)(*job, train, test, synthetic, seed, 1, known.get(job[0]))
                for job in jobs
            )
        else:
            # Random forests parallelise inside each fit.
            results = [
                _one_feature(*job, train, test, synthetic, seed, n_jobs, known.get(job[0])) for job in jobs
            ]
    scores = {n: s for n, s, _ in results if s is not None}
    excluded = {n: r for n, _, r in results if r is not None}
    return {"scores": scores, "excluded": excluded}


@missing_as_value
def dimension_wise_prediction(
    real_train: pd.DataFrame,
    real_test: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    *,
    seed: int = 0,
    n_jobs: int | None = -1,
    features: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Dimension-wise prediction: for each feature, predict it from all the others.

    A model is fitted on the real training rows and, separately, on the synthetic rows; both
    are scored on the real test rows. Predictors are the other columns in the data layer's
    encoding (one-hot, 0/1, min-max by the schema bounds). Models and scores (the paper's code):

    - all-binary schema: ``LogisticRegression(solver="liblinear", max_iter=100)``, AUROC;
    - mixed schema, discrete target (integer codes): ``RandomForestClassifier(n_estimators=10,
      random_state=seed)``, F1 (binary F1 with positive = second category for two categories,
      micro-averaged F1, i.e. accuracy, for more);
    - mixed schema, continuous target (raw scale): ``Lasso(alpha=1.0)``, R^2.

    Edge cases (never a crash, never a silent drop):

    - real test target with a single class (or value): the score is undefined; the feature is
      left out of ``scores`` and listed in ``excluded`` with the reason.
    - constant training target (synthetic or real): the model predicts that constant, scored as
      the paper's code does (AUROC 0.5; F1 or R^2 of the constant prediction), and ``flag`` says which
      source was constant (``"constant_synthetic_target"``, ``"constant_real_target"``).
    - a linear model whose solver stopped before converging (sklearn's ConvergenceWarning) keeps
      its score and is flagged ``"real_fit_not_converged"`` / ``"synthetic_fit_not_converged"``.

    Several flags of one feature are joined by commas.

    Args:
        real_train: Real training rows (R).
        real_test: Real held-out rows (T).
        synthetic: Synthetic rows (S).
        schema: The schema of all three frames.
        seed: ``random_state`` of the forests (the paper's code leaves them unseeded).
        n_jobs: Parallel jobs (forest trees; features for the all-binary case). -1 = all cores.
        features: Targets to score (default: every column).

    Returns:
        ``{"scores": {feature: {"metric", "real", "synthetic", "flag"}}, "excluded": {feature:
        reason}}``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema (naming the frame and the
            column) or unknown feature names.

    References:
        Tantipongpipat et al. 2021, appendix C; ``docs/metrics.md``.
    """
    check_schema(schema)
    enc = TableEncoder(schema)
    return dimension_wise_prediction_from_tables(
        prepare(real_train, schema, "real_train", enc),
        prepare(real_test, schema, "real_test", enc),
        prepare(synthetic, schema, "synthetic", enc),
        schema,
        seed=seed,
        n_jobs=n_jobs,
        features=features,
    )


# ----------------------------------------------------------------------------- registered in evaluate


def _dimension_wise(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    known = None
    if inputs.prior is not None:
        known = {f: (s["real"], note_from_flag(s["flag"], "real"))
                 for f, s in inputs.prior["dimension_wise_prediction"].items()}
    dwp = dimension_wise_prediction_from_tables(inputs.train, inputs.test, inputs.synthetic, inputs.schema,
                                                seed=inputs.seed, n_jobs=inputs.options["dimension_wise_prediction"]["n_jobs"],
                                                known_real=known)
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


register_metric(RegisteredMetric(
    "dimension_wise_prediction", ("dimension_wise_prediction", "excluded", "dimension_wise_summary",
                                  "dimension_wise_probability"), _dimension_wise,
    board=(BoardColumn("dimwise_f1", "dimension_wise_summary.mean_distance_from_diagonal.f1_micro",
                       "dim-wise F1 dist.", False),
           BoardColumn("dimwise_auroc", "dimension_wise_summary.mean_distance_from_diagonal.auroc",
                       "dim-wise AUROC dist.", False)), rank=10, options=(Option("n_jobs", -1),)))
