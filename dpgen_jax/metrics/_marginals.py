"""Marginal comparisons: 1-way marginals, the 2-way PCA projection and the NIST 3-way score.

The DP-auto-GAN paper (Tantipongpipat et al. 2021) draws 1-way marginals and the 2-way PCA
projection and defines the NIST 3-way score in its appendix; ``docs/metrics.md`` gives the details.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_limits

from dpgen_jax import _validate as _v
from dpgen_jax.data import Column, Schema, TableEncoder
from dpgen_jax.metrics._inputs import Table, check_schema, prepare, missing_as_value
from dpgen_jax.metrics._registry import (Headline, Metric, MetricInputs, Option, needs_three_columns, positive_count,
                                         register_metric)

#: Default number of equal-width histogram bins of a continuous column in the marginal plots (the
#: paper does not fix it).
DEFAULT_HISTOGRAM_BINS = 30
#: Integer columns whose range holds at most this many values get one bin per integer.
MAX_UNIT_BINS = 100
#: Default number of random feature triples of the NIST 3-way marginal score (the paper does not fix it).
DEFAULT_TRIPLES = 100


# -- 1-way marginals ----------------------------------------------------------------------------
def histogram_edges(col: Column, bins: int = DEFAULT_HISTOGRAM_BINS) -> np.ndarray:
    """Public histogram edges of a continuous column, from its schema bounds only.

    Integer columns with at most :data:`MAX_UNIT_BINS` values in range get one bin per integer
    (edges at half-integers); other columns get ``bins`` equal-width bins over
    ``[lower, upper]``.
    """
    if col.integer and col.upper - col.lower + 1 <= MAX_UNIT_BINS:
        return np.arange(np.floor(col.lower) - 0.5, np.ceil(col.upper) + 1.0, 1.0)
    return np.linspace(col.lower, col.upper, bins + 1)


def _freq(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    counts, _ = np.histogram(values, bins=edges)
    return counts.astype(np.float64) / values.size


def one_way_marginals_from_tables(
    reference: Table, synthetic: Table, schema: Schema, bins: int = DEFAULT_HISTOGRAM_BINS
) -> dict[str, Any]:
    """:func:`one_way_marginals` on prepared tables."""
    out: dict[str, Any] = {}
    for j, col in enumerate(schema.columns):
        r, s = reference.codes[:, j], synthetic.codes[:, j]
        if col.kind == "continuous":
            edges = histogram_edges(col, bins)
            fr, fs = _freq(r, edges), _freq(s, edges)
            entry: dict[str, Any] = {"kind": col.kind, "bin_edges": edges.tolist()}
        else:
            k = len(col.categories)
            fr = np.bincount(r.astype(np.int64), minlength=k) / r.size
            fs = np.bincount(s.astype(np.int64), minlength=k) / s.size
            entry = {"kind": col.kind, "categories": list(col.categories)}
        entry.update(
            real=fr.tolist(), synthetic=fs.tolist(), total_variation=float(0.5 * np.abs(fr - fs).sum())
        )
        out[col.name] = entry
    return out


@missing_as_value
def one_way_marginals(
    real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, *, bins: int = DEFAULT_HISTOGRAM_BINS
) -> dict[str, Any]:
    """1-way marginals of every feature, real vs synthetic (dp-auto-gan Figs 5-7).

    Args:
        real: The real reference rows (the paper: train + test, all 48,842 Adult rows).
        synthetic: Synthetic rows.
        schema: The schema of both frames.
        bins: Equal-width bins for continuous columns that are not short integer ranges
            (see :func:`histogram_edges`; the edges come from the schema bounds, never the data).

    Returns:
        ``{feature: {...}}``; discrete: ``kind``, ``categories`` (schema order), ``real`` and
        ``synthetic`` relative frequencies; continuous: ``kind``, ``bin_edges`` and the two
        histograms as relative frequencies. Each entry also has ``total_variation`` =
        ``0.5 * sum |real - synthetic|``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema or ``bins < 1``.
    """
    check_schema(schema)
    bins = _v.whole(minimum=1, bins=bins)
    enc = TableEncoder(schema)
    return one_way_marginals_from_tables(
        prepare(real, schema, "real", enc), prepare(synthetic, schema, "synthetic", enc), schema, bins
    )


# -- 2-way PCA ----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PCAProjection:
    """Real and synthetic rows projected on the first two principal axes of the real encoding.

    Attributes:
        components: ``(2, width)`` principal axes (rows), fitted on the real encoded rows.
        mean: ``(width,)`` mean of the real encoded rows (the centring).
        explained_variance_ratio: ``(2,)`` share of the real variance on each axis.
        real: ``(n_real, 2)`` projected real rows.
        synthetic: ``(n_synthetic, 2)`` projected synthetic rows.
    """

    components: np.ndarray
    mean: np.ndarray
    explained_variance_ratio: np.ndarray
    real: np.ndarray
    synthetic: np.ndarray

    def summary(self) -> dict[str, list[float]]:
        """JSON-ready numbers: explained variance, and mean and std of both point clouds."""
        return {
            "explained_variance_ratio": self.explained_variance_ratio.tolist(),
            "real_mean": self.real.mean(axis=0).tolist(),
            "synthetic_mean": self.synthetic.mean(axis=0).tolist(),
            "real_std": self.real.std(axis=0).tolist(),
            "synthetic_std": self.synthetic.std(axis=0).tolist(),
        }


def pca_projection_from_arrays(real_encoded: np.ndarray, synthetic_encoded: np.ndarray) -> PCAProjection:
    """:func:`pca_projection` on encoded arrays."""
    # The covariance route is one (n x d)^T (n x d) product and a d x d eigendecomposition: the
    # same axes as a full SVD (up to rounding) at a fraction of the cost. Single-threaded BLAS:
    # the problem is small, and threaded BLAS degrades badly on a loaded machine.
    with threadpool_limits(limits=1, user_api="blas"):
        pca = PCA(n_components=2, svd_solver="covariance_eigh")
        real = pca.fit_transform(real_encoded.astype(np.float64))
        syn = pca.transform(synthetic_encoded.astype(np.float64))
    return PCAProjection(pca.components_, pca.mean_, pca.explained_variance_ratio_, real, syn)


@missing_as_value
def pca_projection(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> PCAProjection:
    """2-way PCA marginal: sklearn ``PCA(2)`` (centred, unscaled) fitted on the real encoding.

    Both frames are encoded by the data layer (one-hot, 0/1, min-max by the schema bounds: 106
    columns for Adult) and projected with the same real-fitted axes (the sklearn-style variant of
    the DP-auto-GAN code; ``docs/metrics.md``).

    Args:
        real: Real rows the axes are fitted on (the paper: all real rows).
        synthetic: Synthetic rows.
        schema: The schema of both frames.

    Returns:
        A :class:`PCAProjection`.

    Raises:
        TypeError, ValueError: on frames that do not match the schema, or fewer than two
            encoded columns.
    """
    check_schema(schema)
    enc = TableEncoder(schema)
    if enc.width < 2:
        raise ValueError(
            f"pca_projection needs at least 2 encoded columns; the schema encodes to {enc.width}."
        )
    return pca_projection_from_arrays(
        prepare(real, schema, "real", enc).encoded, prepare(synthetic, schema, "synthetic", enc).encoded
    )


# -- 3-way marginal (NIST) ----------------------------------------------------------------------
def _bins(values: np.ndarray, lo: np.ndarray, span: np.ndarray, n_bins: int) -> np.ndarray:
    return np.floor((values - lo) * n_bins / span).astype(np.int64)


def three_way_marginal_from_tables(
    reference: Table,
    synthetic: Table,
    schema: Schema,
    *,
    n_triples: int = DEFAULT_TRIPLES,
    seed: int = 0,
    n_bins: int = 100,
) -> dict[str, Any]:
    """:func:`three_way_marginal` on prepared tables."""
    d = len(schema)
    if d < 3:
        raise ValueError(f"the 3-way marginal needs at least 3 columns; the schema has {d}.")
    lo = reference.codes.min(axis=0)
    span = reference.codes.max(axis=0) - lo
    span = np.where(span > 0, span, 1.0)  # a constant real column: unit-width bins from its value
    rb = _bins(reference.codes, lo, span, n_bins)
    sb = _bins(synthetic.codes, lo, span, n_bins)
    nr = rb.shape[0]
    # Dense ids per column over the bins seen in either table, so a triple packs into one int64.
    ids, sizes = [], []
    for j in range(d):
        uniq, inv = np.unique(np.concatenate([rb[:, j], sb[:, j]]), return_inverse=True)
        ids.append(inv.astype(np.int64))
        sizes.append(uniq.size)
    rng = np.random.default_rng(seed)
    names = schema.names
    per_triple = []
    for _ in range(n_triples):
        a, b, c = (int(i) for i in np.sort(rng.choice(d, size=3, replace=False)))
        key = (ids[a] * sizes[b] + ids[b]) * sizes[c] + ids[c]
        _, cell = np.unique(key, return_inverse=True)
        k = int(cell.max()) + 1
        fr = np.bincount(cell[:nr], minlength=k) / nr
        fs = np.bincount(cell[nr:], minlength=k) / (cell.size - nr)
        per_triple.append({"features": [names[a], names[b], names[c]], "l1": float(np.abs(fr - fs).sum())})
    scores = np.array([t["l1"] for t in per_triple])
    return {
        "mean": float(scores.mean()),
        "std": float(scores.std()),
        "min": float(scores.min()),
        "max": float(scores.max()),
        "n_triples": n_triples,
        "n_bins": n_bins,
        "seed": seed,
        "per_triple": per_triple,
    }


@missing_as_value
def three_way_marginal(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    *,
    n_triples: int = DEFAULT_TRIPLES,
    seed: int = 0,
    n_bins: int = 100,
) -> dict[str, Any]:
    """The NIST challenge 3-way marginal score of the DP-auto-GAN paper, averaged over random triples.

    Every column is taken in its integer-code / raw form (``TableEncoder.codes``) and binned as
    ``B = floor((v - R_min) * n_bins / (R_max - R_min))`` with the *real* min and max (so the
    real maximum falls in bin ``n_bins`` and synthetic values outside the real range fall in
    bins outside ``0..n_bins``; a constant real column uses ``R_max - R_min = 1``). For a triple
    of distinct columns the score is the L1 distance between the normalised 3-D bin histograms
    of real and synthetic rows (``2 x`` total variation; 0 = identical, 2 = disjoint).
    ``n_triples`` triples of distinct columns are drawn independently (with replacement across
    triples) by ``numpy.random.default_rng(seed)``, and the mean is reported.

    Args:
        real: The real reference rows.
        synthetic: Synthetic rows.
        schema: The schema of both frames (at least 3 columns).
        n_triples: Number of random triples (default 100; the paper does not fix it).
        seed: Seed of the triple draw.
        n_bins: Bin scale (100 in the NIST challenge).

    Returns:
        ``{"mean", "std", "min", "max", "n_triples", "n_bins", "seed", "per_triple": [{"features":
        [a, b, c], "l1": score}, ...]}``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema, fewer than 3 columns, or
            invalid counts.
    """
    check_schema(schema)
    n_triples = _v.whole(minimum=1, n_triples=n_triples)
    n_bins = _v.whole(minimum=1, n_bins=n_bins)
    seed = _v.whole(seed=seed)
    enc = TableEncoder(schema)
    return three_way_marginal_from_tables(
        prepare(real, schema, "real", enc),
        prepare(synthetic, schema, "synthetic", enc),
        schema,
        n_triples=n_triples,
        seed=seed,
        n_bins=n_bins,
    )


# ----------------------------------------------------------------------------- registered in evaluate


def _pca(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    return {"pca": pca_projection_from_arrays(inputs.reference.encoded, inputs.synthetic.encoded).summary()}


def _three_way_marginal(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    return {"three_way_marginal": three_way_marginal_from_tables(
        inputs.reference, inputs.synthetic, inputs.schema, n_triples=inputs.options["three_way_marginal"]["n_triples"],
        seed=inputs.seed)}


register_metric(Metric(
    "pca", ("pca",), _pca,
    applies=lambda i: None if i.reference.encoded.shape[1] >= 2 else "the schema encodes to fewer than 2 columns", rank=40))


register_metric(Metric(
    "three_way_marginal", ("three_way_marginal",), _three_way_marginal, applies=needs_three_columns,
    headlines=(Headline("NIST 3-way marginal L1, mean of {nist} random triples", "three_way_marginal.mean"),), rank=70,
    options=(Option("n_triples", DEFAULT_TRIPLES, positive_count),),
    title_fields=(("nist", lambda result: (result.get("three_way_marginal") or {}).get("n_triples")),)))
