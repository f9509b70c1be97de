"""A seeded, licence-free stand-in for the MIMIC-III diagnosis matrix of DP-auto-GAN / medGAN.

MIMIC-III is credentialed (PhysioNet data use agreement) and cannot be shipped, fetched in CI
or committed. The papers use a binary patient x diagnosis matrix: 46,520 patients x 1,071
three-digit ICD-9 codes, in which 146 codes have no 1s, 706 more have under 1 % ones, 219 have
at least 1 %, 127 at least 2.5 % and 64 at least 5 % (Tantipongpipat et al. 2021, §4.2). This module
draws a matrix of the same shape from a known model so that pipelines and metrics can be run
and tuned on public data.

Model (all parameters drawn from ``seed``; the defaults are assumptions, not MIMIC facts):

* Prevalence. Feature prevalences follow a piecewise power law in rank (Zipf-like) through the
  anchor points above: 0.45 for the most common code, 0.20 at rank 10, 5 % at rank 64,
  2.5 % at rank 127, 1 % at rank 219, 1e-5 at rank 1,050; the last 2 % of features never
  occur. With ``n_features != 1071`` the ranks are rescaled. Features are placed in a random
  column order. The mean number of codes per row is about 11.8. At the default size
  this gives about 146 features without a 1, about 700 more under 1 %, and 219 / 127 / 64 at
  >= 1 / 2.5 / 5 %, close to the real data.
* Correlation. Every row belongs to one of 30 latent patient classes (Dirichlet(1) weights)
  and has a severity ``u ~ N(0, 1)``. Features belong to one of 40 code groups; every class
  favours 4 groups. Feature j is 1 with probability
  ``sigmoid(b_j + lam_j * A[class, group_j] + eta[class, j] + c_j * u)``; the intercepts ``b_j``
  are solved (by bisection, Gauss-Hermite quadrature over ``u``) so that the marginal
  prevalence equals the target exactly (see :func:`mimic_like_marginals`). Codes of one group
  therefore co-occur, and common codes are predictable from the others (logistic-regression
  AUROC about 0.65-0.85 for the ten most common codes at the default size), which the papers'
  dimension-wise prediction metric needs.
"""

from __future__ import annotations


import numpy as np
import pandas as pd

from dpgen_jax import _validate as _v
from dpgen_jax.data._schema import binary_schema

_REAL_FEATURES = 1071
# (rank among the real 1,071 features, prevalence); beyond the last rank: never 1.
_ANCHOR_RANKS = np.array([1.0, 10.0, 64.0, 127.0, 219.0, 1050.0])
_ANCHOR_PREVALENCE = np.array([0.45, 0.20, 0.05, 0.025, 0.01, 1e-5])
_N_CLASSES = 30
_N_GROUPS = 40
_FOCUS_GROUPS = 4
_FOCUS_BOOST = 3.0
_CHUNK = 2048  # rows per generator chunk; fixed so that outputs are prefix-stable in n_rows


def _target_prevalence(n_features: int) -> np.ndarray:
    """Prevalence by rank (most common first), rescaled to ``n_features`` ranks."""
    x = (np.arange(n_features) + 0.5) * _REAL_FEATURES / n_features
    p = np.exp(np.interp(np.log(x), np.log(_ANCHOR_RANKS), np.log(_ANCHOR_PREVALENCE)))
    p[x > _ANCHOR_RANKS[-1]] = 0.0
    return p


class _Params:
    """The generator's parameters for (n_features, seed)."""

    def __init__(self, n_features: int, seed: int) -> None:
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(0,))))
        j = n_features
        target = _target_prevalence(j)
        order = rng.permutation(j)  # column order[r] gets rank r
        self.marginals = np.empty(j)
        self.marginals[order] = target
        self.class_weights = rng.dirichlet(np.ones(_N_CLASSES))
        group = rng.integers(0, _N_GROUPS, size=j)
        affinity = rng.normal(0.0, 0.5, size=(_N_CLASSES, _N_GROUPS))
        for k in range(_N_CLASSES):
            affinity[k, rng.choice(_N_GROUPS, size=_FOCUS_GROUPS, replace=False)] += _FOCUS_BOOST
        loading = rng.uniform(0.5, 1.5, size=j)
        self.class_effect = loading * affinity[:, group] + rng.normal(0.0, 0.5, size=(_N_CLASSES, j))
        self.severity = rng.uniform(0.3, 0.8, size=j)
        self.never = self.marginals == 0.0
        self.intercept = self._solve_intercepts()

    def _marginal(self, b: np.ndarray) -> np.ndarray:
        """Exact (quadrature) marginal prevalence for intercepts ``b``."""
        nodes, weights = np.polynomial.hermite_e.hermegauss(16)
        weights = weights / weights.sum()
        logit = (
            b[None, None, :]
            + self.class_effect[:, None, :]
            + self.severity[None, None, :] * nodes[None, :, None]
        )
        prob = 0.5 * (1.0 + np.tanh(0.5 * logit))  # stable sigmoid
        return np.einsum("k,q,kqj->j", self.class_weights, weights, prob)

    def _solve_intercepts(self) -> np.ndarray:
        lo = np.full(self.marginals.shape, -60.0)
        hi = np.full(self.marginals.shape, 20.0)
        target = np.where(self.never, 0.5, self.marginals)
        for _ in range(48):
            mid = 0.5 * (lo + hi)
            above = self._marginal(mid) > target
            hi = np.where(above, mid, hi)
            lo = np.where(above, lo, mid)
        return 0.5 * (lo + hi)


def mimic_like_marginals(n_features: int = 1071, seed: int = 0) -> np.ndarray:
    """The exact per-feature prevalence of :func:`mimic_like` for ``(n_features, seed)``.

    Returns:
        ``(n_features,)`` float64, in column order (0 for features that never occur).
    """
    n_features = _v.whole(minimum=1, n_features=n_features)
    seed = _v.whole(minimum=0, seed=seed)
    return _Params(n_features, seed).marginals.copy()


def mimic_like(n_rows: int = 46520, n_features: int = 1071, seed: int = 0) -> pd.DataFrame:
    """A MIMIC-like binary patient x diagnosis-code table (licence-free stand-in for MIMIC-III).

    See the module docstring for the model. The same ``(n_features, seed)`` gives the same
    model, and the rows are prefix-stable: ``mimic_like(m, j, s)`` equals the first ``m`` rows
    of ``mimic_like(n, j, s)`` for ``m <= n``. At the default size it takes about 1.5 s of CPU
    time (measured on the project's 2-core CI machine).

    Args:
        n_rows: Number of rows (patients), >= 1. Default: the papers' 46,520.
        n_features: Number of binary features (codes), >= 1. Default: the papers' 1,071.
        seed: Non-negative integer seed (numpy PCG64). It fixes both the model and the rows.

    Returns:
        A frame of int8 0/1 values with columns ``binary_schema(n_features).names``
        (``x0``, ``x1``, ...).

    Raises:
        ValueError: on a non-integer or out-of-range argument.
    """
    n_rows = _v.whole(minimum=1, n_rows=n_rows)
    n_features = _v.whole(minimum=1, n_features=n_features)
    seed = _v.whole(minimum=0, seed=seed)
    params = _Params(n_features, seed)
    intercept = params.intercept.astype(np.float32)
    class_effect = params.class_effect.astype(np.float32)
    severity = params.severity.astype(np.float32)
    cum_weights = np.cumsum(params.class_weights)
    out = np.empty((n_rows, n_features), dtype=np.int8)
    for chunk, start in enumerate(range(0, n_rows, _CHUNK)):
        m = min(_CHUNK, n_rows - start)

        streams = [
            np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(1, chunk, i))))
            for i in range(3)
        ]
        cls = np.minimum(np.searchsorted(cum_weights, streams[0].random(m), side="right"), _N_CLASSES - 1)
        u = streams[1].standard_normal(m).astype(np.float32)
        logit = intercept + class_effect[cls] + u[:, None] * severity
        with np.errstate(over="ignore"):
            prob = 1.0 / (1.0 + np.exp(-logit))
        prob[:, params.never] = 0.0
        out[start : start + m] = streams[2].random((m, n_features), dtype=np.float32) < prob
    # Fortran order: pandas stores the block transposed, so every column is contiguous.
    return pd.DataFrame(np.asfortranarray(out), columns=binary_schema(n_features).names, copy=False)
