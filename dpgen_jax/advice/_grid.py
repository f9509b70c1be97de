"""The grid's cells as the advice reads them: grouped by (dataset, method, epsilon), and the median
of a group's values (a leaf of ``advice``: the evidence's writer and its readers all use it)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from typing import Any


def groups(cells: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, float], list[Mapping[str, Any]]]:
    """The cells of each (dataset, method, epsilon) group, in the order given."""
    out: dict[tuple[str, str, float], list] = {}
    for c in cells:
        out.setdefault((c["dataset"], c["method"], c["epsilon"]), []).append(c)
    return out


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that were measured (None: none was)."""
    xs = [float(x) for x in values if x is not None]
    return statistics.median(xs) if xs else None


__all__ = ["groups", "median"]
