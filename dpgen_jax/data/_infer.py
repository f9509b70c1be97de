"""A schema read from the data itself, for review: :func:`infer_schema` and the advice of a draft.

Nothing here is differentially private: kinds, categories, bounds, which columns have gaps, which
look like identifiers and which are skewed are all read from the rows. The result is marked
``data-derived`` and its notes say what to review (``docs/data.md``, "Drafting a schema").
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from dpgen_jax.data._schema import (Column, DataDerivedSchemaWarning, Schema, _category_type,
                                    _normalise_category, show_values)

#: A column name that looks like an identifier (case-insensitive): ``id``, ``pid``, ``uuid``,
#: ``guid``, ``key``, a name ending in ``_id``/``-id``/``.id``/`` id`` (or ``key``), or a word such
#: as ``person``/``patient``/``user`` followed by ``id``.
ID_NAME = re.compile(
    r"(id|pid|uuid|guid|key|.*[_\-. ](id|key)|(person|patient|user|customer|client|member|subject|household"
    r"|record|row|case|account|employee|student|respondent|visit)_?id)",
    re.IGNORECASE,
)
#: A column whose present values are at least this share distinct (and more than
#: ``ID_MIN_DISTINCT`` of them) integers or strings looks like an identifier.
ID_DISTINCT_SHARE = 0.95
ID_MIN_DISTINCT = 20
#: A non-negative continuous column whose upper bound is at least this many times
#: ``max(lower, smallest positive present value)`` spans more than three orders of magnitude: the
#: draft sets ``scale="log"``.
LOG_SUGGEST_RATIO = 1000.0
#: A numeric column whose present values are whole numbers with at most this many distinct values
#: is a coded column: the draft makes it categorical (binary with two) with those values.
CODED_MAX_DISTINCT = 20
#: A continuous column with at least this share of its present values (and two of them) exactly at
#: its minimum or maximum gets that bound as an atom (a point mass, ``Column.atoms``) in the draft.
ATOM_SUGGEST_SHARE = 0.05

_PROVENANCE = "The schema was produced by infer_schema from the table's own values."


def _camel_id(name: str) -> bool:
    """``userId``, ``personID``: a lower-case letter followed by ``Id``/``ID`` at the end."""
    return re.search(r"[a-z](Id|ID)$", name) is not None


def looks_like_id(name: str, s: pd.Series) -> bool:
    """Whether column ``name`` looks like an identifier: by its name (:data:`ID_NAME`, or camel case
    ending in ``Id``), or because its present values are integers or strings of which at least
    :data:`ID_DISTINCT_SHARE` are distinct and more than :data:`ID_MIN_DISTINCT` (floats and bools
    are never flagged by their values)."""
    if ID_NAME.fullmatch(name) or _camel_id(name):
        return True
    present = s.dropna()
    if pd.api.types.is_bool_dtype(s) or pd.api.types.is_float_dtype(s) or len(present) == 0:
        return False
    if not pd.api.types.is_integer_dtype(s):
        kinds = {type(v) for v in present.head(1000)}
        if not kinds or not kinds <= {str, int, np.int64}:
            return False
    distinct = present.nunique()
    return distinct > ID_MIN_DISTINCT and distinct >= ID_DISTINCT_SHARE * len(present)


def gap_columns(df: pd.DataFrame) -> list[str]:
    """The columns of ``df`` with at least one gap (NaN, None or ``pd.NA``), in order."""
    return [str(n) for n in df.columns if df[n].isna().any()]


def coded(s: pd.Series) -> bool:
    """Whether a numeric (not bool) column holds only whole numbers, at most
    :data:`CODED_MAX_DISTINCT` distinct ones and each (on average) at least twice: a code, such as
    a 0/1 flag written as ``1.0``, not a count read off a handful of rows."""
    if pd.api.types.is_bool_dtype(s.dtype) or not pd.api.types.is_numeric_dtype(s.dtype):
        return False
    present = s.dropna().to_numpy(dtype=np.float64)
    distinct = len(np.unique(present))
    return bool(len(present)) and bool((present == np.round(present)).all()) and (
        distinct <= CODED_MAX_DISTINCT and 2 * distinct <= len(present))


def advice(gaps: Sequence[str], ids: Sequence[str], logs: Sequence[str], atoms: Sequence[str] = (),
           codes: Sequence[str] = ()) -> list[str]:
    """The review sentences of a draft: every column with gaps, id-like columns (with the unit of
    privacy), columns set to ``scale="log"``, columns given atoms and numeric columns drafted as
    codes. Column names only, no counts or values."""
    out = []
    if gaps:
        out.append(
            f"Column(s) {show_values(gaps, 50)} have gaps (empty cells, NaN, None or pd.NA) in the data: "
            "each is declared missing=True, so every method models its gaps and the synthetic rows have "
            "gaps there too (docs/data.md, \"Missing values\")."
        )
    if ids:
        out.append(
            f"Column(s) {show_values(ids, 50)} look like identifiers (an id-like name, or nearly every value "
            "distinct): drop them from the table before synthesis. An identifier carries no statistical "
            "content, and a synthesizer that learns it can re-identify people."
        )
        out.append(
            "Protection is per row: if a person has several rows, their protection is that of a group of "
            "rows, which is weaker. Group each person's rows into one row, or divide epsilon by the largest "
            "number of rows a person can have."
        )
    if logs:
        out.append(
            f"Column(s) {show_values(logs, 50)} span more than three orders of magnitude in the data: the "
            "draft sets scale=\"log\" (encoded and binned on the logarithm of the distance from the lower "
            "bound). Keep it only if the skew is public knowledge (incomes, counts)."
        )
    if atoms:
        out.append(
            f"Column(s) {show_values(atoms, 50)} hold exactly their minimum or maximum in at least "
            f"{ATOM_SUGGEST_SHARE:.0%} of the rows: the draft declares that bound an atom (a point mass, "
            "modelled as a category of its own, so synthetic rows hold it exactly). Keep it only if the "
            "point mass is public knowledge (incomes of 0, capped values)."
        )
    if codes:
        out.append(
            f"Column(s) {show_values(codes, 50)} hold numbers, all whole and at most {CODED_MAX_DISTINCT} "
            "distinct: the draft makes them categorical (binary with two values) with those values as "
            "int categories (a file written by pandas writes such a column with gaps as 1.0/0.0). If a "
            "column is a count or a measurement, declare it continuous with public bounds instead."
        )
    return out


def infer_column(name: str, s: pd.Series, label: bool = False) -> Column:
    """One column read from its present values (gaps ignored; a column with gaps gets
    ``missing=True``). Rules as :func:`infer_schema`.

    Raises:
        ValueError: naming the column, when it has no present value, a numeric column is
            constant, or it mixes value types. No value of the column is quoted.
    """
    if not isinstance(name, str):
        raise ValueError(f"column name {name!r} is not a string.")
    gaps = bool(s.isna().any())
    present = s.dropna()
    if len(present) == 0:
        raise ValueError(f"column {name!r} has no value (every cell is a gap); declare it by hand or drop it.")
    missing = True if gaps else None
    if pd.api.types.is_bool_dtype(s.dtype):
        return Column(name, "binary", categories=(False, True), label=label, missing=missing)
    if coded(s):
        cats = tuple(int(v) for v in np.unique(present.to_numpy(dtype=np.float64)))
        if len(cats) == 1:
            raise ValueError(f"column {name!r} is constant (one distinct value); declare it by hand.")
        return Column(name, "binary" if len(cats) == 2 else "categorical", categories=cats, label=label,
                      missing=missing)
    if pd.api.types.is_integer_dtype(s.dtype) or pd.api.types.is_float_dtype(s.dtype):
        integer = bool(pd.api.types.is_integer_dtype(s.dtype))
        values = present.to_numpy(dtype=np.int64 if integer else np.float64)
        lo, hi = values.min(), values.max()
        if lo == hi:
            raise ValueError(f"column {name!r} is constant (one distinct value); declare its bounds by hand.")
        if set(np.unique(values).tolist()) <= {0, 1}:  # a 0/1 flag, also from a handful of rows
            return Column(name, "binary", categories=(0, 1), label=label, missing=missing)
        positive = values[values > 0]
        log = lo >= 0 and len(positive) and hi >= LOG_SUGGEST_RATIO * max(float(lo), float(positive.min()))
        atoms = tuple(float(b) for b in (lo, hi)
                      if (values == b).mean() >= ATOM_SUGGEST_SHARE and (values == b).sum() >= 2)
        return Column(name, "continuous", lower=float(lo), upper=float(hi), integer=integer, label=label,
                      missing=missing, scale="log" if log else "linear", atoms=atoms)
    uniques = pd.unique(present.to_numpy(dtype=object))
    try:
        kinds = {_category_type(v) for v in uniques}
    except TypeError as err:
        raise ValueError(f"column {name!r}: {err}.") from None
    if len(kinds) > 1:
        raise ValueError(f"column {name!r} mixes value types {sorted(k.__name__ for k in kinds)}.")
    cats = sorted_categories(_normalise_category(v) for v in uniques)
    kind = "binary" if len(cats) == 2 else "categorical"
    return Column(name, kind, categories=cats, label=label, missing=missing)


def is_number(text: str) -> bool:
    """Whether a text spells a number as ``float`` reads it (``"1"``, ``"-2.5"``, ``"1e3"``, ``"nan"``)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def sorted_categories(values: Iterable[str | int | bool]) -> tuple[str | int | bool, ...]:
    """Distinct categories in their order: by value when every one is a string that spells a finite
    number (codes such as ``"2"`` before ``"10"``, equal values by their text: ``"01"`` before ``"1"``),
    else sorted as they are (text alphabetically, numbers by value)."""
    cats = list(values)
    if cats and all(isinstance(c, str) and is_number(c) and math.isfinite(float(c)) for c in cats):
        return tuple(sorted(cats, key=lambda c: (float(c), c)))
    return tuple(sorted(cats))


def infer_schema(df: pd.DataFrame, label: str | None = None) -> Schema:
    """Read a schema from the data itself. For non-private use only.

    Rules, on each column's present values (gaps ignored): bool columns -> binary
    ``(False, True)``; numeric columns holding only whole numbers, at most
    :data:`CODED_MAX_DISTINCT` distinct (:func:`coded`; ``1.0``/``0.0`` included) -> categorical
    with those values as int categories (binary with two); other integer columns -> continuous
    integer with the observed min/max; float columns -> continuous with the observed min/max, and
    the min or max as an atom when at least :data:`ATOM_SUGGEST_SHARE` of the values (two or
    more) sit exactly on it; numeric columns holding only 0/1 -> binary ``(0, 1)``; other columns
    (strings) -> categorical with the sorted distinct values (by value when every one spells a
    number: :func:`sorted_categories`), or binary when there are exactly two. A column with gaps (NaN, None, ``pd.NA``) gets ``missing=True``. A
    non-negative continuous column whose maximum is at least :data:`LOG_SUGGEST_RATIO` times
    ``max(minimum, smallest positive value)`` gets ``scale="log"``.

    The notes list every column with gaps, the columns that look like identifiers
    (:func:`looks_like_id`, with a sentence on the unit of privacy), the log-scale columns, the
    columns given atoms and the numeric columns drafted as codes.

    Args:
        df: The table.
        label: Optional name of the label column.

    Returns:
        A schema with ``source="data-derived"``.

    Raises:
        ValueError: on an empty frame, a column without any value, a constant numeric column, a
            column of mixed types, or an unknown ``label``.

    Warns:
        DataDerivedSchemaWarning: always.

    Privacy:
        Category sets, bounds, kinds, gaps and the advice read from the rows are not
        differentially private (a category that occurs once reveals that row). Any privacy report
        built on this schema says the result is not end-to-end DP. Declare a public schema instead
        for real use.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}.")
    if len(df) == 0 or df.shape[1] == 0:
        raise ValueError("df is empty (no rows or no columns); cannot infer a schema.")
    if label is not None and label not in df.columns:
        raise ValueError(f"label={label!r} is not a column of df.")
    if len(set(df.columns)) != df.shape[1]:
        raise ValueError("df has duplicate column names.")
    warnings.warn(
        "infer_schema reads column kinds, categories and bounds from the data: the result is "
        "marked 'data-derived' and is not end-to-end differentially private.",
        DataDerivedSchemaWarning,
        stacklevel=2,
    )
    columns = tuple(infer_column(name, df[name], name == label) for name in df.columns)
    ids = [c.name for c in columns if looks_like_id(c.name, df[c.name])]
    notes = advice(gap_columns(df), ids, [c.name for c in columns if c.scale == "log"],
                   [c.name for c in columns if c.atoms], [c.name for c in columns if coded(df[c.name])])
    return Schema(columns, source="data-derived", notes=(_PROVENANCE, *notes))
