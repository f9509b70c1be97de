"""Argument checks shared by every layer (a leaf module: it imports nothing of ours).

Every check raises an error that names the argument, the value received and what was expected.
Numbers are returned as builtin ``float``/``int`` so that phases hash, compare and
serialise to JSON the same way whether the caller passed Python or NumPy scalars; the value itself
is never changed, clipped or rounded.
"""

from __future__ import annotations

import math
import numbers
import os
import pathlib
from typing import Any


class UsageError(ValueError):
    """A mistake the user can fix (a missing file, an unreadable CSV, a value its schema does not
    allow, a bad flag): the command line prints it as one line and exits with status 2."""


def _where(context: str) -> str:
    return f"{context}: " if context else ""


def real(value: Any, name: str, context: str = "") -> float:
    """Returns ``value`` as a float; raises TypeError for anything that is not a real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{_where(context)}expected {name} to be a real number, got {name}={value!r} "
            f"({type(value).__name__})."
        )
    return float(value)


def integer(value: Any, name: str, context: str = "") -> int:
    """Returns ``value`` as an int; raises TypeError for floats, bools and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{_where(context)}expected {name} to be an integer, got {name}={value!r} "
            f"({type(value).__name__})."
        )
    return int(value)


def sample_rate(value: Any, name: str = "sample_rate", context: str = "") -> float:
    """A sampling probability in (0, 1]."""
    q = real(value, name, context)
    if not (0.0 < q <= 1.0):
        raise ValueError(f"{_where(context)}expected {name} in (0, 1], got {name}={value!r}.")
    return q


def positive_finite(value: Any, name: str, context: str = "") -> float:
    """A real number in (0, inf)."""
    x = real(value, name, context)
    if not (math.isfinite(x) and x > 0.0):
        raise ValueError(
            f"{_where(context)}expected {name} to be a finite number > 0, got {name}={value!r}."
        )
    return x


def count(value: Any, name: str, minimum: int, context: str = "") -> int:
    """An integer >= ``minimum``."""
    n = integer(value, name, context)
    if n < minimum:
        raise ValueError(f"{_where(context)}expected {name} to be an integer >= {minimum}, got {name}={n}.")
    return n


def delta(value: Any, name: str = "delta") -> float:
    """A target delta in (0, 1)."""
    d = real(value, name)
    if not (0.0 < d < 1.0):
        raise ValueError(f"expected {name} in (0, 1), got {name}={value!r}.")
    return d


def choice(value: Any, name: str, options: tuple[str, ...]) -> str:
    """One of a closed set of strings."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"expected {name} to be one of {list(options)}, got {name}={value!r}.")
    return value


def name(value: Any, context: str) -> str:
    """A phase name: a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{_where(context)}expected name to be a non-empty string, got {value!r}.")
    return value


def non_negative_finite(value: Any, name: str, context: str = "") -> float:
    """A real number in [0, inf)."""
    x = real(value, name, context)
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(
            f"{_where(context)}expected {name} to be a finite number >= 0, got {name}={value!r}."
        )
    return x


def existing_file(path: os.PathLike | str, what: str) -> pathlib.Path:
    """``path`` as a Path, if it names an existing file (``what`` names it in the message)."""
    p = pathlib.Path(path)
    if not p.exists():
        raise UsageError(f"{what} {str(p)!r} not found.")
    if not p.is_file():
        raise UsageError(f"{what} {str(p)!r} is not a file.")
    return p


def new_file(path: os.PathLike | str, force: bool, what: str) -> pathlib.Path:
    """``path`` as a Path to write, its folder created; an existing file only with ``force``."""
    p = pathlib.Path(path)
    if p.exists() and not force:
        raise UsageError(f"{what} {str(p)!r} exists; pass --force to replace it.")
    if p.exists() and not p.is_file():
        raise UsageError(f"{what} {str(p)!r} is not a file.")
    p.parent.mkdir(parents=True, exist_ok=True)
    return p
