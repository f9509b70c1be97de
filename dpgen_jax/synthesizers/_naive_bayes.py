"""The naive-Bayes log-likelihoods by which one-way matching chooses the rows it moves.

Matching (``synthesizers._matching``) takes the columns of a table of codes in order; before column
``j`` moves any row it asks, for every row and every class ``a`` of the column (a code, or a state
of a continuous column: in a bin, at an atom, missing), how well the row's codes in the other
columns are explained by ``a``: the log-likelihood, under a naive-Bayes model counted on the
current rows with add-one smoothing,

    ll[i, a] = sum over c != j of log((N_a(c, v_ic) + 1) / (n_a + m_c)),

where ``v_ic`` is row ``i``'s current code in column ``c``, ``N_a(c, v)`` the number of rows of
class ``a`` with code ``v`` in column ``c``, ``n_a`` the rows of class ``a`` and ``m_c`` one more
than the largest code present in column ``c``. The rows of the columns already matched count with
their new codes.

:class:`Likelihoods` computes it without a loop over the other columns. The counts are products
of a one-hot matrix of the codes (each column's code 0 dropped: its counts follow from the
others'), ``N = X_j^T X``, and the log-likelihoods ``ll = const + X @ coef^T``; both are done for a
batch of consecutive columns at once (one matrix product each, about ``BATCH_CODES`` one-hot
columns wide) and corrected, column by column, for the rows that the batch's earlier columns
moved (only their blocks change). On a table of d binary columns and n rows this is about
``2 n d^2`` multiply-adds in a few large products instead of d^2 loops over the rows. The
arithmetic differs from a sum over the columns in turn only in rounding (about 1e-12), far below
the random tie-break that matching adds (1e-9).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["BATCH_CODES", "Likelihoods"]

#: One-hot columns (codes after each column's first) per batch of columns whose counts and
#: log-likelihoods are computed by one matrix product each.
BATCH_CODES = 128


class Likelihoods:
    """Naive-Bayes log-likelihoods of each column's classes given the other columns' current codes.

    Columns are taken in order: :meth:`log_likelihoods` of column ``j`` and then, once its rows
    have moved, :meth:`update` of column ``j``, for ``j = 0, 1, ...`` (a column may skip either).

    Args:
        codes: ``(n, d)`` integer codes, ``0 <= codes[:, c] < sizes[c]`` (copied).
        sizes: Codes per column.
        classes: Per column, the class of each of its codes (``(sizes[c],)`` integers from 0,
            e.g. ``arange(sizes[c])`` for a discrete column), or None for a column whose
            log-likelihoods are never asked for.
    """

    def __init__(self, codes: np.ndarray, sizes: Sequence[int], classes: Sequence[np.ndarray | None]):
        self.codes = np.array(codes, dtype=np.int64)
        n, d = self.codes.shape
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.classes = [None if c is None else np.asarray(c, dtype=np.int64) for c in classes]
        reduced = np.maximum(self.sizes - 1, 0)
        self.stops = np.cumsum(reduced)
        self.starts = self.stops - reduced
        self.width = int(reduced.sum())
        self.column_of = np.repeat(np.arange(d), reduced)  # the column of each one-hot column
        self.x = np.zeros((n, self.width))
        rows, cols = np.nonzero(self.codes > 0)
        self.x[rows, self.starts[cols] + self.codes[rows, cols] - 1] = 1.0
        # counts are exact in float32 below 2**24 rows (a product twice as fast as in float64)
        self.x_counts = self.x.astype(np.float32) if n < 2**24 else self.x
        self.present = self.x.sum(axis=0)  # rows per one-hot column
        self.m = self.codes.max(axis=0, initial=0) + 1 if n else np.ones(d, np.int64)
        self.batch = (0, 0)  # the columns of the current batch

    def _coefficients(self, j: int, counts: np.ndarray, c0: int, c1: int) -> tuple[np.ndarray, np.ndarray]:
        """``(coef, log0)`` of column ``j`` over the context columns ``c0 .. c1 - 1``, as
        differences from class 0: ``coef`` ``(k - 1, one-hot columns of c0 .. c1 - 1)`` and
        ``log0`` ``(k - 1, c1 - c0)`` (the log-likelihood terms of code 0), so that
        ``ll = log0.sum(1) + x @ coef.T`` over those columns (column ``j`` contributes 0); from
        ``counts``: the co-occurrences of column ``j``'s codes after the first with every one-hot
        column."""
        cls = self.classes[j]
        k = int(cls.max()) + 1
        lo, hi = int(self.starts[c0]), int(self.stops[c1 - 1])
        part = counts[:, lo:hi]
        full = np.concatenate([(self.present[lo:hi] - part.sum(axis=0))[None], part])  # code 0 too
        onehot = np.zeros((cls.size, k))
        onehot[np.arange(cls.size), cls] = 1.0
        joint = onehot.T @ full  # (k, hi - lo): rows of class a with each code v >= 1 of each column
        n_a = np.bincount(cls[self.codes[:, j]], minlength=k).astype(np.float64)
        cum = np.concatenate([np.zeros((k, 1)), np.cumsum(joint, axis=1)], axis=1)
        first = n_a[:, None] - (cum[:, self.stops[c0:c1] - lo] - cum[:, self.starts[c0:c1] - lo])  # code 0
        denominator = n_a[:, None] + self.m[None, c0:c1]
        log0 = np.log((first + 1.0) / denominator)
        owner = self.column_of[lo:hi] - c0
        coef = np.log((joint + 1.0) / denominator[:, owner]) - log0[:, owner]
        if c0 <= j < c1:
            coef[:, self.starts[j] - lo:self.stops[j] - lo] = 0.0
            log0[:, j - c0] = 0.0
        return coef[1:] - coef[0], log0[1:] - log0[0]

    def _start_batch(self, j: int) -> None:
        """Counts and log-likelihoods of the columns from ``j`` on, up to ``BATCH_CODES`` one-hot
        columns (at least column ``j``), as the codes stand now."""
        stop = max(int(np.searchsorted(self.stops, self.starts[j] + BATCH_CODES, side="right")), j + 1)
        lo, hi = int(self.starts[j]), int(self.stops[stop - 1])
        self.batch = (j, stop)
        self.counts = (np.ascontiguousarray(self.x_counts[:, lo:hi].T) @ self.x_counts).astype(np.float64)
        self.x_start = self.x[:, lo:hi].copy()
        asked = [c for c in range(j, stop) if self.classes[c] is not None]
        self.start = {c: self._coefficients(c, self._counts(c), 0, len(self.sizes)) for c in asked}
        self.slots, at = {}, 0
        for c in asked:
            self.slots[c] = slice(at, at + self.start[c][0].shape[0])
            at += self.start[c][0].shape[0]
        stacked = (np.concatenate([self.start[c][0] for c in asked]) if asked
                   else np.zeros((0, self.width)))
        self.y_start = self.x @ stacked.T

    def _counts(self, j: int) -> np.ndarray:
        lo = self.starts[self.batch[0]]
        return self.counts[self.starts[j] - lo:self.stops[j] - lo]

    def log_likelihoods(self, j: int) -> np.ndarray:
        """``(n, k)``: each row's log-likelihood under each class ``a`` of column ``j`` given its
        other columns, less that under class 0 (the column-0 entries are 0): the differences
        between classes, which are all that matching compares."""
        if self.classes[j] is None:
            raise ValueError(f"column {j} was given no classes; expected classes for every column asked.")
        first, stop = self.batch
        if not first <= j < stop:
            self._start_batch(j)
            first = j
        coef_start, log0_start = self.start[j]
        out = self.y_start[:, self.slots[j]] + log0_start.sum(axis=1)
        if j > first:  # the rows of the batch's columns before j may have moved since it started
            coef, log0 = self._coefficients(j, self._counts(j), first, j)
            lo, hi = int(self.starts[first]), int(self.starts[j])
            out += (log0.sum(axis=1) - log0_start[:, first:j].sum(axis=1)
                    + self.x[:, lo:hi] @ coef.T - self.x_start[:, :hi - lo] @ coef_start[:, lo:hi].T)
        return np.concatenate([np.zeros((out.shape[0], 1)), out], axis=1)

    def update(self, j: int, new: np.ndarray) -> None:
        """Column ``j``'s codes are now ``new`` (``(n,)``)."""
        new = np.asarray(new, dtype=np.int64)
        rows = np.flatnonzero(new != self.codes[:, j])
        if not rows.size:
            return
        s, e = int(self.starts[j]), int(self.stops[j])
        delta = np.zeros((rows.size, e - s))
        old_codes, new_codes = self.codes[rows, j], new[rows]
        delta[old_codes > 0, old_codes[old_codes > 0] - 1] -= 1.0
        delta[new_codes > 0, new_codes[new_codes > 0] - 1] += 1.0
        first, stop = self.batch
        if first <= j < stop:  # the batch's later columns count their rows with these codes
            lo, hi = int(self.starts[first]), int(self.stops[stop - 1])
            self.counts[:, s:e] += self.x[rows, lo:hi].T @ delta
        self.x[rows, s:e] += delta
        if self.x_counts is not self.x:
            self.x_counts[rows, s:e] += delta
        self.present[s:e] += delta.sum(axis=0)
        self.codes[:, j] = new
        self.m[j] = int(new.max()) + 1
