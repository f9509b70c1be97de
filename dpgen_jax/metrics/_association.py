"""Diff-Cor: the Frobenius distance between the real and synthetic association matrices.

The association matrix is the mixed-type one of the CTAB-GAN+ evaluation code (via the dython
package's ``associations`` with its defaults), which the DP-SACTGAN paper (Li and Wang 2023, "A
self-attention-based differentially private tabular GAN with high data utility") reports as
Diff Cor. It is reimplemented here from its definition (``docs/metrics.md``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency

from dpgen_jax.data import Schema
from dpgen_jax.metrics._inputs import Table, prepare_frames, missing_as_value

#: ``evaluate`` computes Diff-Cor for schemas with at most this many columns (the cost grows with
#: the number of column pairs); call :func:`diff_cor` directly for wider tables.
DIFF_COR_MAX_COLUMNS = 60


def cramers_v(x: np.ndarray, y: np.ndarray) -> float:
    """Bias-corrected Cramér's V of two nominal columns given as non-negative integer codes.

    The chi-squared statistic is ``scipy.stats.chi2_contingency`` of the table of observed
    category pairs (codes that do not occur are left out; 2 x 2 tables get Yates' continuity
    correction, scipy's default), and the bias correction is Bergsma's (2013, "A bias-correction
    for Cramér's V and Tschuprow's T"): ``phi2 = max(0, chi2/n - (r-1)(k-1)/(n-1))``,
    ``r~ = r - (r-1)^2/(n-1)``, ``k~ = k - (k-1)^2/(n-1)``,
    ``V = sqrt(phi2 / min(r~ - 1, k~ - 1))``.

    Returns:
        V in [0, 1]; NaN when the correction is undefined (``min(r~ - 1, k~ - 1) <= 0``).
    """
    xi, yi = np.asarray(x).astype(np.int64), np.asarray(y).astype(np.int64)
    kx, ky = int(xi.max()) + 1, int(yi.max()) + 1
    table = np.bincount(xi * ky + yi, minlength=kx * ky).reshape(kx, ky)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    r, k = table.shape
    n = xi.size
    if r < 2 or k < 2:
        return math.nan
    chi2 = float(chi2_contingency(table)[0])
    phi2 = max(0.0, chi2 / n - (k - 1) * (r - 1) / (n - 1))
    denom = min(k - (k - 1) ** 2 / (n - 1) - 1, r - (r - 1) ** 2 / (n - 1) - 1)
    if denom <= 0:
        return math.nan
    return min(1.0, math.sqrt(phi2 / denom))


def correlation_ratio(categories: np.ndarray, values: np.ndarray) -> float:
    """Correlation ratio eta of a numeric column given a nominal one (non-negative integer codes).

    ``eta = sqrt(sum_c n_c (mean_c - mean)^2 / sum_i (v_i - mean)^2)`` over the categories that
    occur, in [0, 1]; 0 when the category means are all equal.
    """
    ci = np.asarray(categories).astype(np.int64)
    v = np.asarray(values, dtype=np.float64)
    n_c = np.bincount(ci).astype(np.float64)
    sums = np.bincount(ci, weights=v)
    seen = n_c > 0
    mean = v.mean()
    between = float((n_c[seen] * (sums[seen] / n_c[seen] - mean) ** 2).sum())
    if between == 0.0:
        return 0.0
    total = float(((v - mean) ** 2).sum())
    return min(1.0, math.sqrt(between / total))


def association_matrix(table: Table, schema: Schema) -> np.ndarray:
    """The ``(d, d)`` mixed-type association matrix of a prepared table (schema order).

    Pearson's r between two continuous columns, the correlation ratio between a continuous and
    a discrete column, bias-corrected Cramér's V between two discrete (binary or categorical)
    columns, 1 on the diagonal. A column with a single value in the table has a row and column
    of zeros (diagonal included); an undefined value is 0. These are the dython defaults.
    """
    d = len(schema)
    codes = table.codes
    nominal = [c.kind != "continuous" for c in schema.columns]
    single = [np.unique(codes[:, j]).size == 1 for j in range(d)]
    out = np.zeros((d, d))
    for i in range(d):
        if single[i]:
            continue
        out[i, i] = 1.0
        for j in range(i + 1, d):
            if single[j]:
                continue
            a, b = codes[:, i], codes[:, j]
            if nominal[i] and nominal[j]:
                v = cramers_v(a, b)
            elif nominal[i]:
                v = correlation_ratio(a, b)
            elif nominal[j]:
                v = correlation_ratio(b, a)
            else:
                v = float(np.corrcoef(a, b)[0, 1])
            out[i, j] = out[j, i] = v if math.isfinite(v) else 0.0
    return out


def diff_cor_from_tables(reference: Table, synthetic: Table, schema: Schema) -> dict[str, Any]:
    """:func:`diff_cor` on prepared tables."""
    real = association_matrix(reference, schema)
    syn = association_matrix(synthetic, schema)
    return {
        "value": float(np.linalg.norm(real - syn)),
        "columns": schema.names,
        "real": real.tolist(),
        "synthetic": syn.tolist(),
    }


@missing_as_value
def diff_cor(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> dict[str, Any]:
    """Diff-Cor: ``|| A(real) - A(synthetic) ||_F`` of the mixed-type association matrices.

    ``A`` (:func:`association_matrix`) holds Pearson's r for continuous pairs (raw values; r
    does not depend on the scaling), the correlation ratio for continuous-discrete pairs and
    bias-corrected Cramér's V for discrete pairs (binary and categorical columns as their
    categories), over all ``d x d`` entries. 0 for identical association structure; at most
    ``2 d`` (a Pearson entry can differ by 2, the others by 1), so it grows with the width.

    Args:
        real: The real reference rows.
        synthetic: The synthetic rows.
        schema: The schema of both frames.

    Returns:
        ``{"value": the Frobenius norm, "columns": schema order, "real": A(real) as nested
        lists, "synthetic": A(synthetic)}``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema.
    """
    return diff_cor_from_tables(*prepare_frames(schema, real=real, synthetic=synthetic), schema)
