"""Checks that a release looks degenerate, run on the synthetic rows alone.

:func:`check_release` reads only synthetic rows (DP outputs), the public schema and, optionally,
released one-way shares (DP outputs too): no private row is read and no privacy is spent. Each
finding is one :class:`DegenerateReleaseWarning` naming the column and the likely cause, and the
function returns the messages. The findings (``docs/metrics.md``, "Degenerate releases"):

- a constant column (or label): every synthetic row holds the same value (a gap counts as a value);
- a continuous column with more than half of its present synthetic values in the first or the last
  of :data:`EDGE_BINS` public bins of its bounds (equal widths; log-spaced for ``scale="log"``,
  ``data.bin_edges``);
- an all-binary table whose mean synthetic row sum (the count of positive values per row) differs
  from the sum of the released one-way shares of the positive values by more than a factor
  :data:`ROW_SUM_FACTOR`.

A check on synthetic rows cannot tell a degenerate release from a real column that is piled at a
bound too (e.g. a capital-gain column that is mostly 0); the messages say so.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from dpgen_jax.data import Schema, bin_edges, bin_index

#: ``Synthesizer.sample`` checks draws of at least this many rows (fewer are too few to call a
#: column constant or piled at a bound).
MIN_ROWS = 100
#: Public bins of a continuous column's bounds for the piled-at-a-bound check.
EDGE_BINS = 20
#: Largest ratio (either way) of the mean synthetic row sum of an all-binary table to the released total.
ROW_SUM_FACTOR = 2.0


class DegenerateReleaseWarning(UserWarning):
    """A release whose synthetic rows look degenerate (a constant column, a column piled at a bound,
    row sums far from the released totals)."""


def _cause(method: str | None) -> str:
    who = f"{method}" if method else "the method"
    return (f"likely cause: a privacy budget too small for {who} at this table size; compare the methods "
            "with `dpgen-jax recommend` (advice.recommend) or use a larger epsilon")


#: More constant columns than this are warned about in one line with their count.
GROUP_AT = 3


def check_release(frame: pd.DataFrame, schema: Schema, *, one_way: Mapping[str, float] | None = None,
                  method: str | None = None, bounds: bool = True) -> list[str]:
    """Warns about a release that looks degenerate, from its synthetic rows alone (no privacy cost).

    Args:
        frame: Synthetic rows with the schema's columns (gaps as NaN / ``pd.NA``).
        schema: The public (user's) schema of the release.
        one_way: For an all-binary schema, the released one-way shares: column -> share of rows
            holding the column's positive (second) category; optional. Every column of the schema
            must be given.
        method: The method's name, for the messages.
        bounds: Whether to look for continuous columns piled at a bound (False for a method whose
            rows follow one-way marginals it released itself: a pile there is what the noisy
            release of the real column says, not a generator gone astray).

    Returns:
        The messages, one per finding, in schema order; each was also issued as a
        :class:`DegenerateReleaseWarning`, except that more than :data:`GROUP_AT` constant
        columns are issued as one warning with their count and the first names.

    Raises:
        TypeError: if ``frame`` is not a DataFrame or ``schema`` not a Schema.
        ValueError: if ``frame`` lacks a column of the schema or is empty, or ``one_way`` is given for
            a schema that is not all binary, misses a column or holds a share outside [0, 1].
    """
    if not isinstance(schema, Schema):
        raise TypeError(f"schema must be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}.")
    absent = [n for n in schema.names if n not in frame.columns]
    if absent or len(frame) == 0:
        raise ValueError(f"frame: expected synthetic rows with the schema's columns; "
                         f"{'missing columns ' + repr(absent) if absent else 'no rows'}.")
    shares = _check_one_way(one_way, schema)
    cause = _cause(method)
    found: list[str] = []
    for col in schema.columns:
        s = frame[col.name]
        possible = (len(col.categories) if col.kind != "continuous" else 2) + (col.missing is True)
        if possible > 1 and s.nunique(dropna=False) == 1:
            what = "the label" if col.label else "column"
            first = s.iloc[0]
            value = "a gap" if pd.isna(first) else repr(first.item() if isinstance(first, np.generic) else first)
            found.append(f"{what} {col.name!r} is constant in the synthetic rows (every row holds {value}); "
                         f"{cause}.")
        elif col.kind == "continuous" and bounds:
            found += _piled(col, s, cause)
    if shares is not None:
        found += _row_sums(frame, schema, shares, cause)
    constant = [t for t in found if " is constant in the synthetic rows" in t]
    shown = found
    if len(constant) > GROUP_AT:  # one line for many constant columns (a wide table), not one each
        names = [t.split("'")[1] for t in constant]
        shown = [t for t in found if t not in constant] + [
            f"{len(constant)} columns are constant in the synthetic rows (the first: "
            f"{', '.join(repr(n) for n in names[:GROUP_AT])}, ...; check_release returns them all); {cause}."]
    for text in shown:
        warnings.warn(text, DegenerateReleaseWarning, stacklevel=2)
    return found


def _piled(col, s: pd.Series, cause: str) -> list[str]:
    """The finding of a continuous column with more than half its present values in an end bin."""
    values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return []
    spacing = "log" if getattr(col, "scale", "linear") == "log" else "equal"
    edges = bin_edges(col, EDGE_BINS, spacing)
    shares = np.bincount(bin_index(np.clip(values, col.lower, col.upper), edges), minlength=EDGE_BINS) / values.size
    for i, end, bound in ((0, "first", col.lower), (EDGE_BINS - 1, "last", col.upper)):
        if shares[i] > 0.5:
            return [f"column {col.name!r}: {shares[i]:.0%} of its synthetic values lie in the {end} of "
                    f"{EDGE_BINS} {'log-spaced' if spacing == 'log' else 'equal-width'} bins of its public "
                    f"bounds (near {bound:g}); unless the real column is piled there too, {cause}."]
    return []


def _check_one_way(one_way: Mapping[str, float] | None, schema: Schema) -> dict[str, float] | None:
    if one_way is None:
        return None
    if not all(c.kind == "binary" for c in schema.columns):
        raise ValueError("one_way: the row-sum check applies to an all-binary schema only.")
    if not isinstance(one_way, Mapping):
        raise TypeError(f"one_way must be a mapping column -> share, got {type(one_way).__name__}.")
    absent = [n for n in schema.names if n not in one_way]
    if absent:
        raise ValueError(f"one_way: no released share for the column(s) {absent[:5]}"
                         f"{' ...' if len(absent) > 5 else ''}; expected every column of the schema.")
    bad = [n for n in schema.names if not 0.0 <= float(one_way[n]) <= 1.0]
    if bad:
        raise ValueError(f"one_way: the share of {bad[0]!r} is {one_way[bad[0]]!r}; expected a share in [0, 1].")
    return {n: float(one_way[n]) for n in schema.names}


def _row_sums(frame: pd.DataFrame, schema: Schema, shares: dict[str, float], cause: str) -> list[str]:
    """The finding of an all-binary table whose mean row sum is far from the released total."""
    positive = np.column_stack([frame[c.name].eq(c.categories[1]).fillna(False).to_numpy(dtype=bool)
                                for c in schema.columns])
    mean, total = float(positive.sum(axis=1).mean()), sum(shares.values())
    if total == 0.0 and mean == 0.0:
        return []
    if total == 0.0 or mean == 0.0 or not 1 / ROW_SUM_FACTOR <= mean / total <= ROW_SUM_FACTOR:
        return [f"the synthetic rows hold {mean:.3g} positive values per row on average, against "
                f"{total:.3g} from the released one-way shares (more than a factor {ROW_SUM_FACTOR:g} "
                f"apart, over all {len(schema)} binary columns); {cause}."]
    return []
