"""Diversity of discrete features: mixture Jensen-Shannon divergence and mu-smoothed KL.

Both follow the DP-auto-GAN code that produced the paper's Tables 2, 5, 6 and 7 (``docs/metrics.md``): natural logarithms, sums over the categories present in the *real* distribution, and the
real distribution taken over every real row given (the paper uses train + test, 48,842 rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpgen_jax import _validate as _v
from dpgen_jax.data import Schema
from dpgen_jax.data._check import show_values
from dpgen_jax.metrics._inputs import Table, check_features, check_schema, prepare, missing_as_value
from dpgen_jax.metrics._marginals import DEFAULT_HISTOGRAM_BINS, one_way_marginals_from_tables
from dpgen_jax.metrics._registry import (BoardColumn, Headline, Metric, MetricInputs, Option, positive_count,
                                         register_metric)

#: The eight features summed into the "All" rows of the DP-auto-GAN paper's Tables 2 and 5-7.
PAPER_DIVERSITY_FEATURES: tuple[str, ...] = (
    "workclass",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "native-country",
    "salary",
)

Support = Literal["real", "union"]


def _check_prob(p: Any, name: str) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D probability vector, got shape {arr.shape}.")
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise ValueError(f"{name} must hold finite non-negative probabilities, got {arr.tolist()[:8]}.")
    total = float(arr.sum())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"{name} must sum to 1, got {total!r}.")
    return arr


def _check_pair(p: Any, q: Any) -> tuple[np.ndarray, np.ndarray]:
    pa, qa = _check_prob(p, "p"), _check_prob(q, "q")
    if pa.shape != qa.shape:
        raise ValueError(
            f"p and q must have the same length (one entry per category), got {pa.size} and {qa.size}."
        )
    return pa, qa


def _xlogy_ratio(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise x * log(x / y) with 0 * log(0 / y) = 0 (y > 0 wherever x > 0)."""
    out = np.zeros_like(x)
    pos = x > 0
    out[pos] = x[pos] * np.log(x[pos] / y[pos])
    return out


def jensen_shannon(p: Any, q: Any, *, support: Support = "real") -> float:
    """Mixture Jensen-Shannon divergence in nats, as the DP-auto-GAN code computes it.

    ``JSD(P, Q) = sum_c [ p_c/2 log(p_c/m_c) + q_c/2 log(q_c/m_c) ]`` with
    ``m_c = (p_c + q_c)/2`` and ``0 log 0 = 0``.

    Args:
        p: ``(k,)`` the real distribution over the schema's categories.
        q: ``(k,)`` the synthetic distribution over the same categories.
        support: ``"real"`` (default, the paper's code ``get_JS_score``): the sum runs over the
            categories with ``p_c > 0`` only, so synthetic mass on categories absent from the
            real data contributes only through the ``p`` terms; the value lies in
            ``[0, ln 2]`` and equals ``ln(2)/2`` when the supports are disjoint.
            ``"union"``: the textbook JSD over all categories, ``ln 2`` for disjoint supports.

    Returns:
        The divergence (0 iff ``p == q`` on the summed categories).

    Raises:
        ValueError: if ``p`` or ``q`` is not a probability vector, their lengths differ, or
            ``support`` is unknown.

    References:
        Tantipongpipat et al. 2021, section 4.2 (the paper's formula is the Jeffreys divergence; its code,
        which made the tables, computes this one).

    Example:
        >>> round(jensen_shannon([1.0, 0.0], [0.0, 1.0], support="union"), 6) == round(math.log(2), 6)
        True
    """
    pa, qa = _check_pair(p, q)
    _v.one_of(("real", "union"), support=support)
    keep = pa > 0 if support == "real" else (pa > 0) | (qa > 0)
    pa, qa = pa[keep], qa[keep]
    m = 0.5 * (pa + qa)
    return float(0.5 * _xlogy_ratio(pa, m).sum() + 0.5 * _xlogy_ratio(qa, m).sum())


def smoothing_mu(p: Any) -> float:
    """The smoothing constant ``mu = exp(-1 / (1 - p1))`` with ``p1 = max_c p_c``.

    Args:
        p: ``(k,)`` the real distribution.

    Returns:
        ``mu`` in ``[0, exp(-1))``; 0 for a constant real column (``p1 = 1``, the limit).

    References:
        Tantipongpipat et al. 2021, section 4.2 (the code's ``penalize = 1``); ``docs/metrics.md``
        lists the Adult values.

    Example:
        >>> round(smoothing_mu([0.5, 0.25, 0.25]), 6)  # exp(-2)
        0.135335
    """
    pa = _check_prob(p, "p")
    p1 = float(pa.max())
    if p1 >= 1.0:
        return 0.0
    return math.exp(-1.0 / (1.0 - p1))


def kl_mu(p: Any, q: Any, mu: float | None = None) -> float:
    """mu-smoothed KL divergence ``sum_{c: p_c > 0} (p_c + mu) log((p_c + mu) / (q_c + mu))``.

    The terms are not renormalised (as in the paper's code), so the value is 0 when ``p == q``
    but is not a KL divergence between probability vectors in general.

    Args:
        p: ``(k,)`` the real distribution.
        q: ``(k,)`` the synthetic distribution.
        mu: The smoothing constant; None uses :func:`smoothing_mu` of ``p``.

    Returns:
        The divergence in nats; ``inf`` only when ``mu == 0`` (constant real column) and the
        synthetic data misses a real category.

    Raises:
        ValueError: on invalid probability vectors or a negative or non-finite ``mu``.

    References:
        Tantipongpipat et al. 2021, section 4.2 (the code's ``get_divergence_score``).

    Example:
        >>> kl_mu([0.5, 0.5], [0.5, 0.5])
        0.0
        >>> round(kl_mu([1.0, 0.0], [0.0, 1.0], mu=0.1), 6)  # 1.1 * log(1.1 / 0.1)
        2.637685
    """
    pa, qa = _check_pair(p, q)
    mu_v = smoothing_mu(pa) if mu is None else _v.non_negative(mu=mu)
    keep = pa > 0
    a, b = pa[keep] + mu_v, qa[keep] + mu_v
    if (b == 0).any():
        return math.inf
    return float((a * np.log(a / b)).sum())


def distribution_from_codes(codes: np.ndarray, n_categories: int) -> np.ndarray:
    """Empirical distribution ``(n_categories,)`` of integer category codes."""
    idx = np.asarray(codes).astype(np.int64)
    return np.bincount(idx, minlength=n_categories).astype(np.float64) / idx.size


@missing_as_value
def categorical_distribution(df: pd.DataFrame, schema: Schema, column: str) -> np.ndarray:
    """Empirical distribution of a discrete column over the schema's categories.

    Args:
        df: A frame with the schema's columns.
        schema: The schema.
        column: A binary or categorical column.

    Returns:
        ``(k,)`` float64 probabilities in the order of ``schema[column].categories``.

    Raises:
        ValueError: if the column is continuous or unknown, or the frame does not match the
            schema (names the column).
    """
    check_schema(schema)
    if column not in schema or schema[column].kind == "continuous":
        raise ValueError(f"column={column!r} must be a binary or categorical column of the schema.")
    table = prepare(df, schema, "df")
    j = schema.names.index(column)
    return distribution_from_codes(table.codes[:, j], len(schema[column].categories))


def default_total_features(schema: Schema) -> list[str]:
    """The features summed into ``total``: the paper's eight if the schema has them all as discrete
    columns, otherwise every discrete column."""
    discrete = [c.name for c in schema.columns if c.kind != "continuous"]
    if all(f in discrete for f in PAPER_DIVERSITY_FEATURES):
        return list(PAPER_DIVERSITY_FEATURES)
    return discrete


def diversity_from_tables(
    reference: Table,
    synthetic: Table,
    schema: Schema,
    features: Sequence[str] | None = None,
    total_features: Sequence[str] | None = None,
    support: Support = "real",
) -> dict[str, Any]:
    """:func:`diversity` on prepared tables (used by ``evaluate``)."""
    discrete = [c.name for c in schema.columns if c.kind != "continuous"]
    feats = [f for f in check_features(features, schema) if f in discrete]
    totals = (
        default_total_features(schema)
        if total_features is None
        else check_features(total_features, schema, "total_features")
    )
    bad = [f for f in totals if f not in feats]
    if bad:
        raise ValueError(
            f"total_features {show_values(bad, 8)} are not among the discrete features evaluated {show_values(feats, 8)}."
        )
    if "total" in feats:
        raise ValueError(
            "a discrete column is named 'total', which clashes with the key of the sum; rename it."
        )
    jsd: dict[str, float] = {}
    kl: dict[str, float] = {}
    mus: dict[str, float] = {}
    for f in feats:
        j = schema.names.index(f)
        k = len(schema[f].categories)
        p = distribution_from_codes(reference.codes[:, j], k)
        q = distribution_from_codes(synthetic.codes[:, j], k)
        mus[f] = smoothing_mu(p)
        jsd[f] = jensen_shannon(p, q, support=support)
        kl[f] = kl_mu(p, q, mus[f])
    jsd["total"] = float(sum(jsd[f] for f in totals))
    kl["total"] = float(sum(kl[f] for f in totals))
    return {"jsd": jsd, "kl_mu": kl, "mu": mus, "total_features": list(totals), "support": support}


@missing_as_value
def diversity(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    *,
    features: Sequence[str] | None = None,
    total_features: Sequence[str] | None = None,
    support: Support = "real",
) -> dict[str, Any]:
    """JSD and mu-smoothed KL per discrete feature, with their sums (dp-auto-gan Tables 2, 6, 7).

    Args:
        real: The real reference rows. The paper uses every real row (train + test, 48,842 for
            Adult); pass ``pd.concat([train, test])`` to match its tables.
        synthetic: The synthetic rows.
        schema: The schema of both frames.
        features: Discrete columns to score (default: every binary and categorical column).
        total_features: Columns summed into ``total`` (default: the paper's eight,
            :data:`PAPER_DIVERSITY_FEATURES`, when the schema has them; else every discrete
            column).
        support: Passed to :func:`jensen_shannon` (``"real"`` = the paper's).

    Returns:
        ``{"jsd": {feature: nats, ..., "total": sum}, "kl_mu": {...same...}, "mu": {feature:
        mu}, "total_features": [...], "support": support}``. A ``kl_mu`` value is ``inf`` only
        when the real column is constant and the synthetic one misses its value.

    Raises:
        TypeError, ValueError: on frames that do not match the schema (naming the frame and
            the column), unknown feature names, or a discrete column named ``"total"``.

    References:
        Tantipongpipat et al. 2021, Tables 2, 6 and 7; ``docs/metrics.md``.
    """
    check_schema(schema)
    ref = prepare(real, schema, "real")
    syn = prepare(synthetic, schema, "synthetic")
    return diversity_from_tables(ref, syn, schema, features, total_features, support)


# ----------------------------------------------------------------------------- registered in evaluate


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
                                                     inputs.options["diversity_marginals"]["histogram_bins"])
    return out


register_metric(Metric(
    "diversity_marginals", ("jsd", "kl_mu", "mu", "diversity_total_features", "marginals"),
    _diversity_marginals,
    headlines=(Headline("JSD total ({n} features, nats)", "jsd.total"),
               Headline("D_KL^μ total ({n} features, nats)", "kl_mu.total")),
    board=(BoardColumn("jsd_total", "jsd.total", "JSD total", False),
           BoardColumn("kl_mu_total", "kl_mu.total", "D_KL^mu total", False)), rank=30,
    options=(Option("histogram_bins", DEFAULT_HISTOGRAM_BINS, positive_count),),
    title_fields=(("n", lambda result: len(result.get("diversity_total_features") or [])),)))
