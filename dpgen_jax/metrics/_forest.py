"""Random-forest helpers shared by the predictive metrics: deterministic forest votes, convergence
bookkeeping and the flags that record both in a result."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple

import joblib
import numpy as np
from joblib import Parallel, delayed
from sklearn.ensemble import RandomForestClassifier


class Score(NamedTuple):
    """One model score: ``value`` (None when undefined), an optional ``flag`` and ``reason``."""

    value: float | None
    flag: str | None = None
    reason: str | None = None


def forest_predict(rf: RandomForestClassifier, x: np.ndarray, n_jobs: int | None) -> np.ndarray:
    """``rf.predict(x)``, but deterministic under parallelism.

    sklearn sums the trees' class probabilities in whatever order its threads finish, so two
    identical forests can break a vote tie differently. Here each chunk of rows is predicted by
    one thread that adds the trees in their fixed order, and chunks run in parallel.
    """
    rf.set_params(n_jobs=1)
    n_chunks = max(1, min(len(x) // 2048, joblib.effective_n_jobs(n_jobs)))
    chunks = np.array_split(np.arange(len(x)), n_chunks)
    parts = Parallel(n_jobs=len(chunks), prefer="threads")(delayed(rf.predict_proba)(x[c]) for c in chunks)
    return rf.classes_[np.argmax(np.concatenate(parts), axis=1)]


def fit_recording_convergence(model: Any, x: np.ndarray, y: np.ndarray) -> bool:
    """``model.fit(x, y)``; returns whether the solver stopped before ``max_iter`` (then flagged).

    That is the test behind scikit-learn's ConvergenceWarning for liblinear, lbfgs and coordinate
    descent (Lasso). It is read from ``n_iter_`` rather than by catching the warning: the fits of
    the dimension-wise metrics run in threads, and ``warnings.catch_warnings`` is not thread-safe
    (each use also resets the once-per-location registry, so a warning printed once printed once
    per fit). The warning itself goes to :func:`warnings_once`.
    """
    model.fit(x, y)
    return bool(np.max(np.ravel(model.n_iter_)) < model.max_iter)


@contextlib.contextmanager
def warnings_once() -> Iterator[None]:
    """Collects the warnings raised inside (by scikit-learn's many fits, in any thread) and re-issues
    each distinct one (category and the line that raised it: a solver's message may quote numbers
    that differ from fit to fit) once on exit, under the caller's own filters (so ``"error"`` or
    ``"ignore"`` still apply). Nested uses collect into the outermost."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    seen: set[tuple[type, str, int]] = set()
    for w in caught:
        key = (w.category, w.filename, w.lineno)
        if key not in seen:
            seen.add(key)
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def source_flag(source: str, note: str | None) -> str | None:
    """``constant_real_target``, ``synthetic_fit_not_converged``, ... (or None)."""
    if note is None:
        return None
    return f"constant_{source}_target" if note == "constant_target" else f"{source}_fit_{note}"


def note_from_flag(flag: str | None, source: str) -> str | None:
    """Inverse of :func:`source_flag` for one source, from a (comma-joined) flag string."""
    for part in (flag or "").split(","):
        if part == f"constant_{source}_target":
            return "constant_target"
        if part == f"{source}_fit_not_converged":
            return "not_converged"
    return None
