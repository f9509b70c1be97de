"""Random-forest helpers shared by the predictive metrics: deterministic forest votes, convergence
bookkeeping and the flags that record both in a result, and the collection of the warnings a
metric's fits raise (:func:`warnings_once`: attributed to the metric, third-party text withheld)."""

from __future__ import annotations

import contextlib
import os
import sys
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


#: The sentence that stands in for a third-party warning's own message (see :func:`warnings_once`).
WITHHELD = "message withheld: it may hold data-derived numbers"

_OWN_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../dpgen_jax
_collecting = [0]  # how many warnings_once are open (a nested one leaves its warnings to the outermost)


def warning_library(category: type[Warning], filename: str) -> str:
    """The top-level package a warning comes from: the one that defines its category (``sklearn``
    for a ConvergenceWarning), or, for a built-in category (a numpy ``RuntimeWarning``), the package
    of the file that raised it (``"dpgen_jax"`` for this library's own)."""
    module = category.__module__.split(".")[0]
    if module != "builtins":
        return module
    path = os.path.abspath(filename)
    if path.startswith(_OWN_PACKAGE + os.sep):
        return "dpgen_jax"
    roots = [os.path.abspath(entry or os.curdir) for entry in sys.path]
    root = max((r for r in roots if path.startswith(r + os.sep)), key=len, default=None)
    if root is None:
        return os.path.basename(filename) or "an unknown module"
    return path[len(root) + 1:].split(os.sep)[0].removesuffix(".py")


@contextlib.contextmanager
def warnings_once(source: str) -> Iterator[None]:
    """Collects the warnings raised inside (by scikit-learn's many fits, in any thread) and re-issues
    them on exit, attributed to ``source`` (``"metric tstr_auroc"``), under the caller's own filters
    (so ``"error"`` or ``"ignore"`` still apply; the category is kept).

    A third-party warning (:func:`warning_library` other than ``dpgen_jax``) is re-issued without
    its message, which may quote numbers computed from the rows (scikit-learn's "Duality gap:
    2.6e+10"): one warning per category and library with a count, ``"<source>: ConvergenceWarning
    from sklearn, 12 times (message withheld: ...)"``. This library's own warnings are re-issued
    as they are, each distinct one (category and text) once. A use nested in another leaves its
    warnings to the outermost, which attributes them."""
    if _collecting[0]:
        yield
        return
    _collecting[0] += 1
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        _collecting[0] -= 1
    groups: dict[tuple[type, str, str | None], list[warnings.WarningMessage]] = {}
    for w in caught:
        library = warning_library(w.category, w.filename)
        own = str(w.message) if library == "dpgen_jax" else None  # its own text, else withheld
        groups.setdefault((w.category, library, own), []).append(w)
    for (category, library, own), group in groups.items():
        first = group[0]
        if own is not None:
            text: Any = first.message
        else:
            times = f"{len(group)} times" if len(group) > 1 else "once"
            text = f"{source}: {category.__name__} from {library}, {times} ({WITHHELD})"
        warnings.warn_explicit(text, category, first.filename, first.lineno)


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
