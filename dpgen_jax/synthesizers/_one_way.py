"""The one-way release: every column's histogram on public codes with Gaussian noise, one mechanism.

``independent`` releases it as its whole model, GEM as its first measurement and every neural
generator as its matching stage (:mod:`~dpgen_jax.synthesizers._matching`); all of them use
this module (``docs/independent.md``, ``docs/matching.md``).

The mechanism: the d histograms of a table's codes (``data.Discretizer``: discrete columns over the
schema's categories, continuous ones over public bins, a gap as a code of its own) with
``N(0, (noise_multiplier * sqrt(d))^2)`` noise per cell. Adding or removing one record changes one
cell of every histogram by one, so the joint release has L2 sensitivity sqrt(d).

Post-processing (:func:`probabilities`): each noisy histogram projected onto the probability
simplex in the least-squares sense. The counts are shifted down by one common amount and clipped
at 0 so that they sum to their own noisy total (the Euclidean projection onto the non-negative
vectors with that sum; "Norm-Sub" of Wang et al., NDSS 2020), then normalised. Clipping alone would
keep the positive noise of every empty cell and so move mass from the populated cells to the empty
ones (a column with a few large cells among many bins loses a share of each; a rare gap code is
under-drawn); the projection removes that bias on average and keeps the noisy total's scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from dpgen_jax import dpsgd, privacy

__all__ = ["phase", "probabilities", "project_counts", "release_histograms"]


def phase(name: str, num_columns: int, private: bool = True, noise_multiplier: float = 1.0):
    """The accounted phase of one release of ``num_columns`` histograms: a Gaussian mechanism of
    L2 sensitivity sqrt(d) (noise std ``noise_multiplier * sqrt(d)``), or a non-private phase."""
    if not private:
        return privacy.NonPrivatePhase(name, 1)
    return privacy.GaussianPhase(name, noise_multiplier, 1, sensitivity=math.sqrt(num_columns))


def release_histograms(codes: np.ndarray, sizes: Sequence[int], noise_std: float | None,
                       key: jax.Array) -> dict[str, np.ndarray]:
    """The d histograms of ``codes`` with the integer Gaussian noise of ``dpsgd.noisy_counts``.

    Args:
        codes: ``(m, d)`` integer codes (``Discretizer.codes``) of the private rows.
        sizes: codes per column.
        noise_std: the noise standard deviation per cell, the phase's ``noise_std`` (sigma
            times the sensitivity sqrt(d), :func:`phase`); None: exact counts (non-private).
        key: the noise key.

    Returns:
        ``{str(j): (sizes[j],) int64}``, the released counts of column j: ``count + round(std Z)``.

    Privacy: one Gaussian mechanism with L2 sensitivity sqrt(d) under add/remove-one (a record
    adds one to one cell of each of the d histograms), released as integers (rounding is
    post-processing; ``docs/privacy.md``, "Floating point").
    """
    c = np.asarray(codes)
    counts = {str(j): np.bincount(c[:, j], minlength=k) for j, k in enumerate(sizes)}
    return dpsgd.noisy_counts(counts, noise_std, key)


def project_counts(v: Any) -> np.ndarray:
    """``v`` (noisy counts) projected onto the non-negative vectors with the same sum: ``max(v - c, 0)``
    with the one shift ``c`` that keeps the total (float64). A total <= 0 leaves no mass to place:
    the counts are clipped at 0 instead."""
    v = np.asarray(v, dtype=np.float64)
    total = v.sum()
    if total <= 0.0:
        return np.clip(v, 0.0, None)
    s = np.sort(v)[::-1]  # the shift: the largest k whose top-k mean minus total/k stays below s[k-1]
    shifts = (np.cumsum(s) - total) / np.arange(1, s.size + 1)
    k = int(np.flatnonzero(s - shifts > 0)[-1])
    return np.clip(v - shifts[k], 0.0, None)


def probabilities(counts: Mapping[str, Any]) -> list[np.ndarray]:
    """Post-processing: each column's noisy counts projected onto the simplex (:func:`project_counts`,
    then normalised). A column with no mass left gets the uniform distribution over its codes.
    Returns a list in column order (float64)."""
    out = []
    for j in range(len(counts)):
        v = project_counts(counts[str(j)])
        total = v.sum()
        out.append(v / total if total > 0 else np.full(v.size, 1.0 / v.size))
    return out
