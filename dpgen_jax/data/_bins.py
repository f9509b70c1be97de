"""Public bins of a continuous column, built from its schema bounds alone.

Histograms of continuous columns (the marginal metrics) and discretisations (marginal-based
synthesizers) use these edges. They depend on the public bounds and the number of bins only,
never on the rows, so using them costs no privacy.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal

import numpy as np

from dpgen_jax.data._schema import Column

BinSpacing = Literal["equal", "log"]
_SPACINGS = ("equal", "log")


def bin_edges(column: Column, n_bins: int, spacing: BinSpacing = "equal") -> np.ndarray:
    """Edges of ``n_bins`` public bins over a continuous column's bounds ``[lower, upper]``.

    ``"equal"``: equal widths, ``(upper - lower) / n_bins``.
    ``"log"``: widths that grow geometrically with the distance from ``lower``: the edges are
    ``lower + u * expm1(t)`` for ``t`` equally spaced over ``[0, log1p((upper - lower) / u)]``,
    ``u`` the column's :attr:`~dpgen_jax.data.Column.log_unit` (a thousandth of the span for a
    column declared ``scale="log"``, 1 otherwise). For a heavy-tailed column such as UCI Adult's
    capital-gain (0 to 99999, not declared log) the first bins are narrow (with 20 bins the first
    holds [0, 0.78), i.e. the zeros) and the last ones wide; an income declared log over 0 to
    500,000 gets 20 bins from [0, 207) up, half of them below 15,300.

    A value ``v`` belongs to bin ``i`` when ``edges[i] <= v < edges[i + 1]``; the last bin also
    holds ``upper`` (as ``numpy.histogram`` counts). :func:`bin_index` assigns values.

    Args:
        column: A continuous :class:`Column`.
        n_bins: Number of bins, >= 1.
        spacing: ``"equal"`` or ``"log"``.

    Returns:
        ``(n_bins + 1,)`` float64, increasing, ``edges[0] == lower`` and ``edges[-1] == upper``.

    Raises:
        TypeError: if ``column`` is not a Column.
        ValueError: if the column is not continuous, ``n_bins`` is not an integer >= 1, or
            ``spacing`` is unknown.

    Example:
        >>> bin_edges(Column("x", "continuous", lower=0, upper=10), 4).tolist()
        [0.0, 2.5, 5.0, 7.5, 10.0]
    """
    if not isinstance(column, Column):
        raise TypeError(f"column must be a dpgen_jax.data.Column, got {type(column).__name__}.")
    if column.kind != "continuous":
        raise ValueError(f"column {column.name!r} is {column.kind}; bin edges need a continuous column.")
    if isinstance(n_bins, (bool, np.bool_)) or not isinstance(n_bins, numbers.Integral) or n_bins < 1:
        raise ValueError(f"n_bins={n_bins!r}; expected an integer >= 1.")
    if spacing not in _SPACINGS:
        raise ValueError(f"spacing={spacing!r}; expected one of {_SPACINGS}.")
    lo, hi = column.lower, column.upper
    if spacing == "equal":
        edges = np.linspace(lo, hi, int(n_bins) + 1)
    else:
        unit = column.log_unit
        edges = lo + unit * np.expm1(np.linspace(0.0, np.log1p((hi - lo) / unit), int(n_bins) + 1))
    edges[0], edges[-1] = lo, hi
    return edges


def bin_index(values: Any, edges: np.ndarray) -> np.ndarray:
    """The bin of each value under ``edges`` (as made by :func:`bin_edges`).

    Args:
        values: ``(n,)`` real numbers inside ``[edges[0], edges[-1]]``.
        edges: ``(k + 1,)`` increasing edges.

    Returns:
        ``(n,)`` int64 in ``0 .. k - 1``; ``edges[-1]`` falls in the last bin.

    Raises:
        ValueError: if a value lies outside the edges or is not finite (naming how many).
    """
    v = np.asarray(values, dtype=np.float64)
    e = np.asarray(edges, dtype=np.float64)
    outside = ~((v >= e[0]) & (v <= e[-1]))
    if outside.any():
        raise ValueError(
            f"{int(outside.sum())} value(s) outside the bin range [{e[0]:g}, {e[-1]:g}] or not finite."
        )
    return np.minimum(np.searchsorted(e, v, side="right") - 1, e.size - 2).astype(np.int64)
