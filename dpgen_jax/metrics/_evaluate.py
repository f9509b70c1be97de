"""``evaluate``: every metric of the registry (``metrics/_registry.py``) on one (real train, real test,
synthetic) triple."""

from __future__ import annotations

import hashlib
import json
import math
import time
import warnings
from typing import Any

import numpy as np
import pandas as pd

from dpgen_jax import _validate as _v
from dpgen_jax.data import Schema, TableEncoder
# The metric modules register their metrics, with their options, when imported
# (metrics/_registry.py): one line per module, so the table is complete whatever imported first.
from dpgen_jax.metrics import _dimension_wise, _divergence, _downstream, _fidelity, _marginals  # noqa: F401
from dpgen_jax.metrics._forest import warnings_once
from dpgen_jax.metrics._registry import METRICS, MetricInputs, fingerprint_options, lookup, real_settings, route_options
from dpgen_jax.metrics._dimension_wise import DIMENSION_WISE_TREES, is_all_binary
from dpgen_jax.data import has_model_columns
from dpgen_jax.metrics._downstream import majority_rate
from dpgen_jax.metrics._inputs import (
    Table,
    as_model,
    check_label,
    check_same_columns,
    check_schema,
    concat_tables,
    label_rows,
    prepare,
)

#: Format version of the result dict (bump on incompatible changes).
RESULT_VERSION = 1


def _jsonable(obj: Any, path: str, nulls: dict[str, str]) -> Any:
    """Convert numpy scalars/arrays to Python; replace NaN and infinities by None, noting why."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v, f"{path}.{k}" if path else str(k), nulls) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v, f"{path}[{i}]", nulls) for i, v in enumerate(obj)]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist(), path, nulls)
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if not math.isfinite(v):
            nulls.setdefault(path, f"the computed value was {v!r}, which JSON cannot hold")
            return None
        return v
    return obj


def evaluate(
    real_train: pd.DataFrame,
    real_test: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    *,
    label: str | None = None,
    seed: int = 0,
    reuse_real: dict[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Every metric of ``docs/metrics.md`` for one synthetic table.

    The papers' metrics (the DP-auto-GAN paper's section 4 and appendix C, the GS-WGAN thesis's
    TSTR AUROC, the DP-SACTGAN paper's utility and similarity metrics) and the benchmark's
    distances on public bins.

    Conventions (each recorded in the result's ``meta``):

    - R = ``real_train``, T = ``real_test``, S = ``synthetic``. Predictive scores train on R
      (the "real" score) or on S (the "synthetic" score) and test on T.
    - The *reference* distribution of every distribution metric (diversity, marginals, TV,
      3-way L1, Wasserstein, JS distance, Diff-Cor) is every real row given, R + T, as the
      DP-auto-GAN code does (48,842 rows for Adult).
    - JSD is the mixture form summed over the real categories (the code behind the DP-auto-GAN
      paper's Tables 2 and 6, so a synthetic table disjoint from the real one scores ln(2)/2;
      see ``jensen_shannon``).
    - Dimension-wise probability (all-binary schemas only) compares R with S (the paper's
      choice; its MIMIC code used the validation split).
    - Label accuracy is the paper's Table 3 forest, by default on the full split (all of R or S
      against all of T); ``label_protocol`` selects the notebook's SIZE protocol.
    - Continuous columns enter TV and the 2-way and 3-way L1 through ``marginal_bins`` public
      bins over their schema bounds (``data.bin_edges``).

    Args:
        real_train: Real training rows (the rows the synthesizer was fitted on).
        real_test: Real held-out rows.
        synthetic: Synthetic rows, decoded to the schema's values.
        schema: The public schema; all three frames must have exactly its columns.
        label: The label column (default: the schema's label). Without one, the label metrics
            are null and ``nulls`` says why. A label declared ``missing=True`` is scored on the
            rows where it is present, as its own kind (``meta.label_rows``; ``docs/metrics.md``,
            "Labels with gaps").
        seed: Seed of the dimension-wise forests, of the 3-way marginals' triples and of the 2-way
            L1's pairs.
        reuse_real: A previous result of ``evaluate`` on the same real rows with the same
            settings (schema, label, seed and the options the real-data scores depend on:
            :func:`~dpgen_jax.metrics._registry.fingerprint_options`). Its real-data scores
            (models trained on ``real_train``: dimension-wise, label accuracy, TSTR
            and LR utility) are reused instead of refitted, which roughly halves the cost of
            evaluating several synthetic tables. Checked by ``meta.real_fingerprint``; a
            mismatch raises ValueError.
        **options: Each metric's options (``Metric.options`` of :data:`METRICS`), by name: each is
            routed to every metric that declares it; the others keep their defaults.
            ``docs/metrics.md`` ("Options of evaluate") lists each with its metric and default,
            e.g. ``n_jobs=1``, ``n_triples=50`` or
            ``label_protocol=LabelAccuracyProtocol(size=4000, shuffle_seed=0)``.

    Returns:
        A JSON-serialisable dict (no NaN or infinities; an undefined number is ``None`` and
        ``nulls[path]`` says why) with the keys, where they apply:

        - ``dimension_wise_prediction``: ``{feature: {"metric", "real", "synthetic", "flag"}}``;
        - ``dimension_wise_summary``: counts and the mean distance from the y = x line per metric;
        - ``dimension_wise_probability`` (all-binary schemas): ``{feature: {"real", "synthetic"}}``;
        - ``label_accuracy``: ``{"label", "real", "synthetic", "protocol"}``;
        - ``jsd``, ``kl_mu``: ``{feature: value, ..., "total": sum}``; ``mu``: ``{feature: mu}``;
          ``diversity_total_features``: the features in ``total``;
        - ``marginals``: 1-way marginals (see ``one_way_marginals``);
        - ``pca``: explained variance and the mean/std of both projected clouds;
        - ``three_way_marginal``: mean L1 and per-triple scores;
        - ``tstr_auroc``: ``{"label", "real", "synthetic", "protocol", "flag"}``;
        - ``tv_1way``: total variation of every 1-way marginal, with ``mean``,
          ``mean_continuous`` and ``mean_discrete`` (see ``total_variation_1way``);
        - ``marginal_l1_2way``, ``marginal_l1_3way``: mean L1 of 2-way and 3-way marginals on
          public bins (``marginal_l1_2way``, ``marginal_l1_3way``);
        - ``wasserstein_mean``, ``js_distance_mean``: per column and ``mean``; ``diff_cor``:
          ``value`` and both association matrices (schemas of at most 60 columns);
        - ``lr_utility``: accuracy, AUROC and macro F1 of the DP-SACTGAN paper's logistic
          regression trained on R and on S, and their differences (binary labels);
        - ``excluded``: ``{feature: reason}`` for dimension-wise prediction;
        - ``nulls``: ``{path: reason}``; ``meta`` (with ``label_majority_rate``, the majority-class
          share of the test rows); ``timings_s`` (seconds per metric);
        - ``warnings``: ``{path: message}`` for each synthetic-trained score at or below chance
          (:data:`CHANCE_SCORES`), each also issued as a ``UserWarning``.

        The warnings raised while a metric runs (scikit-learn's model fits) are re-issued once
        per call, each attributed to the metric; a third-party one without its message, which
        may quote data-derived numbers (one warning per metric, category and library, with a
        count: :func:`~dpgen_jax.metrics._forest.warnings_once`).

    Raises:
        TypeError: if a frame is not a DataFrame or ``schema`` not a Schema, or on an option no
            metric declares (the message lists every option with its metrics).
        ValueError: naming the frame and column, on mismatched or undeclared columns, an empty
            frame, values outside the schema (unknown category, missing value, out of bounds), an
            unknown or continuous label, or invalid options.

    Privacy:
        Not a DP mechanism: every number is computed from the real rows. Treat the result and
        any report built from it as private unless the real data is public.

    References:
        ``docs/metrics.md`` (each metric, its definition and source paper).
    """
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    check_schema(schema)
    seed = _v.whole(seed=seed)
    routed = route_options(options, schema)  # every option checked before any work
    frames = {"real_train": real_train, "real_test": real_test, "synthetic": synthetic}
    check_same_columns(frames)
    label_name = check_label(schema, label, required=False)
    labelled = label_rows(schema, label_name, **frames)
    if has_model_columns(schema):  # every metric compares gaps and atoms as values of their own
        schema, frames = as_model(schema, frames)
        real_train, real_test, synthetic = frames["real_train"], frames["real_test"], frames["synthetic"]
    enc = TableEncoder(schema)
    train = prepare(real_train, schema, "real_train", enc)
    test = prepare(real_test, schema, "real_test", enc)
    syn = prepare(synthetic, schema, "synthetic", enc)
    reference = concat_tables(train, test, "reference")
    fingerprint = _real_fingerprint(train, test, schema, label_name, seed, real_settings(routed))
    prior = _check_reuse(reuse_real, fingerprint)
    timings["validate_encode"] = time.perf_counter() - t0

    out: dict[str, Any] = {"version": RESULT_VERSION}
    nulls: dict[str, str] = {}
    out["meta"] = {
        "columns": schema.names,
        "label": label_name,
        "seed": seed,
        "schema_source": schema.source,
        "real_fingerprint": fingerprint,
        "real_scores_reused": prior is not None,
        "n_rows": {
            "real_train": len(train),
            "real_test": len(test),
            "synthetic": len(syn),
            "reference": len(reference),
        },
        "reference": "real_train + real_test (every real row given), as the DP-auto-GAN code",
        "dimension_wise_models": (
            "LogisticRegression(liblinear) AUROC"
            if is_all_binary(schema)
            else f"RandomForestClassifier(n_estimators={DIMENSION_WISE_TREES}, random_state=seed) F1; "
            "Lasso(alpha=1) R^2"
        ),
    }

    inputs = MetricInputs(train=train, test=test, synthetic=syn, reference=reference, schema=schema,
                          label=label_name, seed=seed, prior=prior, options=routed, label_rows=labelled)
    if label_name is not None and (labelled is None or labelled.reason is None):
        out["meta"]["label_majority_rate"] = majority_rate(*inputs.labelled()[1::2], label_name)
        if labelled is not None:
            out["meta"]["label_rows"] = (f"the label {label_name!r} is declared missing=True: the label metrics "
                                         "use the rows where it is present, the label as its own kind")
    for metric in METRICS:
        t = time.perf_counter()
        with warnings_once(f"metric {metric.name}"):  # each metric's warnings, attributed to it
            reason = metric.applies(inputs)
            if reason is not None:
                for key in metric.keys:
                    out[key] = None
                    nulls[key] = reason
            else:
                out.update(metric.compute(inputs, nulls))
        timings[metric.name] = time.perf_counter() - t

    timings["total"] = time.perf_counter() - t0
    out["timings_s"] = timings
    result = _jsonable(out, "", nulls)
    result["nulls"] = nulls
    result["warnings"] = score_warnings(result)
    for text in result["warnings"].values():
        warnings.warn(text, UserWarning, stacklevel=2)
    return result


#: The scores ``evaluate`` compares with what a model without information scores: result path,
#: the rate it is held against ("majority": the majority-class share of the real test rows, in
#: ``meta.label_majority_rate``; a number: that value), and its name.
CHANCE_SCORES: tuple[tuple[str, str | float, str], ...] = (
    ("label_accuracy.synthetic", "majority", "random-forest accuracy (trained on synthetic rows)"),
    ("lr_utility.synthetic.accuracy", "majority", "logistic-regression accuracy (trained on synthetic rows)"),
    ("tstr_auroc.synthetic", 0.5, "TSTR AUROC (logistic regression trained on synthetic rows)"),
)


def score_warnings(result: dict[str, Any]) -> dict[str, str]:
    """``{path: message}`` for each synthetic-trained score of :data:`CHANCE_SCORES` at or below
    what always predicting the majority class scores (0.5 for an AUROC): the synthetic rows taught
    the model nothing about the label."""
    out: dict[str, str] = {}
    majority = (result.get("meta") or {}).get("label_majority_rate")
    label = (result.get("meta") or {}).get("label")
    for path, rate, what in CHANCE_SCORES:
        value, bound = lookup(result, path), majority if rate == "majority" else rate
        if value is None or bound is None or value > bound:
            continue
        against = (f"the majority-class share {bound:.4g} of the real test rows" if rate == "majority"
                   else f"chance ({bound:g})")
        out[path] = (f"{path}: the {what} on {label!r} is {value:.4g}, at or below {against}: the synthetic "
                     "rows carry no usable signal about the label (often a budget too small for the method "
                     "at this table size; see dpgen-jax recommend, or a larger epsilon).")
    return out



def _real_fingerprint(
    train: Table,
    test: Table,
    schema: Schema,
    label: str | None,
    seed: int,
    options: dict[str, Any],
) -> str:
    """sha256 of everything the real-data scores depend on (rows, schema, label, seed and the
    options of :func:`~dpgen_jax.metrics._registry.real_settings`)."""
    h = hashlib.sha256()
    settings = {"label": label, "seed": seed, **options}
    h.update(json.dumps(settings, sort_keys=True).encode())
    h.update(schema.to_json().encode())
    for table in (train, test):
        h.update(str(table.codes.shape).encode())
        h.update(np.ascontiguousarray(table.codes).tobytes())
    return h.hexdigest()


class RealScoresMismatch(ValueError):
    """``reuse_real`` was computed on other real rows or settings than the call's."""


def _check_reuse(reuse_real: Any, fingerprint: str) -> dict[str, Any] | None:
    if reuse_real is None:
        return None
    if not isinstance(reuse_real, dict) or not isinstance(reuse_real.get("meta"), dict):
        raise TypeError(f"reuse_real must be a dict returned by evaluate, got {type(reuse_real).__name__}.")
    theirs = reuse_real["meta"].get("real_fingerprint")
    if theirs != fingerprint:
        raise RealScoresMismatch(
            "reuse_real was computed on different real rows or settings (meta.real_fingerprint "
            f"{str(theirs)[:12]}... != {fingerprint[:12]}...); the real-data rows, schema, label, seed, "
            f"and the options {', '.join(fingerprint_options())} must all be the same."
        )
    return reuse_real
