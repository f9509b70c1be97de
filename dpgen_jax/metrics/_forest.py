"""Random-forest helpers shared by the predictive metrics: deterministic forest votes, convergence
bookkeeping and the flags that record both in a result."""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import joblib
import numpy as np
from joblib import Parallel, delayed
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning


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
    """``model.fit(x, y)``; a ConvergenceWarning is caught and returned as False (then flagged)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(x, y)
    return not any(issubclass(w.category, ConvergenceWarning) for w in caught)


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
