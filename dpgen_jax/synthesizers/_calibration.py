"""Rows matched to released one-way marginals with the least change (post-processing).

A generator may learn the relations between columns and still get each column's own distribution
wrong (issue 49). Given released one-way marginals on a :class:`~dpgen_jax.data.Discretizer`'s
codes (DP outputs, e.g. ``independent``'s noisy histograms), :func:`match_one_way` moves the
fewest rows it must so that every column's codes have the released counts (rounded to the number
of rows), and keeps the rest of each row:

- a **discrete column** (binary or categorical, its gap a category of its own) is unordered: the
  surplus rows of an over-represented category, chosen at random, take the under-represented
  categories; every other row keeps its category (no row changes that need not);
- a **continuous column** is ordered: its gap code is matched first as above (present against
  missing, newly present rows placed at random ranks), then the present rows are sorted by their
  value and handed the released bin counts in that order (quantile transport: the rows' order in
  the column is kept, so the joint order with the other columns is too). A row whose bin does not
  change keeps its value exactly; a row moved to another bin takes the value at its rank inside that
  bin (``Discretizer.decode_at``).

Everything here reads the generator's rows and the released marginals only: it is
post-processing, with no privacy cost. It is the toolkit of a calibration stage for the neural
methods (a one-way release accounted as a phase of their plans, then this on every sampled batch);
no method applies it yet (``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from dpgen_jax.data import Discretizer

__all__ = ["match_one_way", "rounded_counts"]


def rounded_counts(p: np.ndarray, n: int) -> np.ndarray:
    """``n`` split in proportion to the probabilities ``p`` (largest remainders; the counts sum
    to ``n`` exactly; negative entries count as 0)."""
    q = np.clip(np.asarray(p, dtype=np.float64), 0.0, None)
    total = q.sum()
    q = q / total if total > 0 else np.full(q.size, 1.0 / q.size)
    raw = q * n
    counts = np.floor(raw).astype(np.int64)
    short = n - int(counts.sum())
    if short:
        counts[np.argsort(-(raw - counts), kind="stable")[:short]] += 1
    return counts


def _reassign(codes: np.ndarray, target: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Codes with the ``target`` counts, changing only surplus rows (chosen at random)."""
    out = codes.copy()
    current = np.bincount(codes, minlength=target.size)
    movers = [rng.permutation(np.flatnonzero(codes == k))[:current[k] - target[k]]
              for k in np.flatnonzero(current > target)]
    pool = np.concatenate(movers) if movers else np.empty(0, dtype=np.int64)
    deficit = np.clip(target - current, 0, None)
    out[pool] = rng.permutation(np.repeat(np.arange(target.size), deficit))
    return out


def _transport(keys: np.ndarray, target: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, positions)`` of rows sorted by ``keys`` (ties at random) handed the ``target``
    counts in order; ``positions`` is each row's place inside its new bin, in (0, 1)."""
    n = keys.size
    order = np.lexsort((rng.random(n), keys))
    codes = np.empty(n, dtype=np.int64)
    positions = np.empty(n, dtype=np.float64)
    codes[order] = np.repeat(np.arange(target.size), target)
    starts = np.concatenate([[0], np.cumsum(target)[:-1]])
    rank = np.arange(n) - np.repeat(starts, target)
    positions[order] = (rank + 0.5) / np.repeat(np.maximum(target, 1), target)
    return codes, positions


def match_one_way(frame: pd.DataFrame, disc: Discretizer, probs: Sequence[np.ndarray],
                  rng: np.random.Generator) -> pd.DataFrame:
    """``frame`` (rows of ``disc.user_schema``) with each column matched to ``probs``.

    Args:
        frame: Synthetic rows of the user's schema (gaps as NaN / ``pd.NA``).
        disc: The public binning the marginals were released on.
        probs: Per coded column of ``disc`` (its ``schema`` order), the released probabilities of
            its codes (clipped at 0 and renormalised here).
        rng: Randomness of the ties and of the surplus rows chosen.

    Returns:
        A frame with the same columns, index and dtypes, whose codes have exactly the counts
        ``rounded_counts(probs[j], len(frame))``.

    Raises:
        ValueError: if ``probs`` does not give one vector of ``disc.sizes[j]`` entries per column.
    """
    sizes = disc.sizes
    if len(probs) != len(sizes) or any(np.asarray(p).shape != (k,) for p, k in zip(probs, sizes, strict=False)):
        raise ValueError(f"probs must hold one vector per coded column with sizes {sizes}, got shapes "
                         f"{[np.asarray(p).shape for p in probs]}.")
    n = len(frame)
    codes = disc.codes(frame)
    new = codes.copy()
    positions = np.full(codes.shape, 0.5)
    for j, col in enumerate(disc.schema.columns):
        target = rounded_counts(probs[j], n)
        if col.kind != "continuous":
            new[:, j] = _reassign(codes[:, j], target, rng)
            continue
        gap = disc.missing_codes.get(col.name)
        present = np.ones(n, dtype=bool)
        if gap is not None:
            is_gap = _reassign((codes[:, j] == gap).astype(np.int64),
                               np.array([n - target[gap], target[gap]]), rng).astype(bool)
            new[is_gap, j] = gap
            present = ~is_gap
        values = pd.to_numeric(frame[col.name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        keys = values[present]
        unknown = np.isnan(keys)  # rows made present: a random rank among the present values
        if unknown.any():
            known = keys[~unknown]
            keys[unknown] = (np.quantile(known, rng.random(int(unknown.sum()))) if known.size
                             else rng.random(int(unknown.sum())))
        bins = target if gap is None else np.delete(target, gap)
        c, pos = _transport(keys, bins, rng)
        new[present, j], positions[present, j] = c, pos
    out = disc.decode_at(new, positions)
    result = frame.copy()
    for j, col in enumerate(disc.schema.columns):  # a row whose code is unchanged keeps its value
        keep = new[:, j] == codes[:, j]
        if not keep.all():
            result[col.name] = _merge(frame[col.name], out[col.name], keep)
    return result


def _merge(old: pd.Series, new: pd.Series, keep: np.ndarray) -> pd.Series:
    """``old`` where ``keep``, else ``new``, in ``old``'s dtype."""
    merged = new.copy()
    merged.index = old.index
    merged[keep] = old[keep]
    return merged.astype(old.dtype)
