"""Missing values in continuous columns: the model schema and the frames on either side of it.

A continuous column declared ``missing=True`` (a public fact: the column may be missing) is
modelled as two columns of the *model schema*: the value itself (no longer missing) and, right
after it, a binary missingness indicator named :func:`indicator_name` (``False``/``True``). A
missing value becomes ``indicator=True`` with the column's lower bound as its value (a public
constant: the value is never read where the indicator is set); decoding puts the missing value
back wherever the indicator is ``True``. Every synthesizer fits and samples on the model schema,
so each method learns the indicator as a column of its own, and the metrics compare the
indicator like any binary column ("missing" is a value). ``docs/data.md`` ("Missing values").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgen_jax.data._check import check_frame
from dpgen_jax.data._schema import Column, Schema, indicator_name

__all__ = ["from_model_frame", "has_missing", "indicator_name", "model_schema", "to_model_frame"]


def _declared(schema: Schema) -> list[Column]:
    return [c for c in schema.columns if c.kind == "continuous" and c.missing]


def has_missing(schema: Schema) -> bool:
    """Whether ``schema`` has a continuous column declared ``missing=True``."""
    return bool(_declared(schema))


def model_schema(schema: Schema) -> Schema:
    """The schema the methods model: each continuous column declared ``missing=True`` followed by
    its binary indicator ``indicator_name(column)`` (categories ``(False, True)``).

    A schema without such a column is returned as it is (the same object).

    Example:
        >>> s = Schema.from_dict({"columns": [
        ...     {"name": "hours", "kind": "continuous", "lower": 1, "upper": 99, "missing": True}]})
        >>> model_schema(s).names
        ['hours', 'hours [missing]']
    """
    if not isinstance(schema, Schema):
        raise TypeError(f"schema must be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
    if not has_missing(schema):
        return schema
    columns: list[Column] = []
    for c in schema.columns:
        if c.kind == "continuous" and c.missing:
            columns.append(Column(c.name, "continuous", lower=c.lower, upper=c.upper, integer=c.integer,
                                  label=c.label))
            columns.append(Column(indicator_name(c.name), "binary", categories=(False, True)))
        else:
            columns.append(c)
    return Schema(tuple(columns), source=schema.source, notes=schema.notes)


def to_model_frame(df: pd.DataFrame, schema: Schema, name: str = "df") -> pd.DataFrame:
    """``df`` (the schema's columns) as a frame of :func:`model_schema`'s columns.

    For each continuous column declared ``missing=True``: its indicator is ``True`` where the value
    is NaN, None or ``pd.NA``, and those values become the column's lower bound. Other columns are
    passed on untouched (their values are checked where they are encoded). A frame whose schema
    declares no such column is returned as it is.

    Args:
        df: A frame with exactly the schema's columns (any order).
        schema: The public schema.
        name: What to call the frame in messages.

    Raises:
        TypeError, ValueError: as :func:`~dpgen_jax.data.check_frame`.
    """
    check_frame(df, schema, name)
    if not has_missing(schema):
        return df
    out: dict[str, object] = {}
    for c in schema.columns:
        s = df[c.name]
        if c.kind == "continuous" and c.missing:
            isna = s.isna().to_numpy(dtype=bool)
            out[c.name] = s.where(~isna, c.lower).infer_objects() if isna.any() else s
            out[indicator_name(c.name)] = isna
        else:
            out[c.name] = s
    return pd.DataFrame(out, index=df.index)


def from_model_frame(df: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """The inverse of :func:`to_model_frame` on decoded rows: where a column's indicator is
    ``True`` its value becomes missing (NaN in a float64 column; ``pd.NA`` in a nullable ``Int64``
    column for an integer column), and the indicators are dropped.

    Args:
        df: A frame with :func:`model_schema`'s columns.
        schema: The public (user's) schema.

    Raises:
        ValueError: if ``df`` does not have the model schema's columns.
    """
    if not has_missing(schema):
        return df
    check_frame(df, model_schema(schema), "the model's rows")
    out: dict[str, object] = {}
    for c in schema.columns:
        if c.kind == "continuous" and c.missing:
            flag = df[indicator_name(c.name)].to_numpy(dtype=bool)
            if c.integer:
                values = pd.array(df[c.name].to_numpy(dtype=np.int64), dtype="Int64")
                values[flag] = pd.NA
            else:
                values = np.where(flag, np.nan, df[c.name].to_numpy(dtype=np.float64))
            out[c.name] = values
        else:
            out[c.name] = df[c.name]
    return pd.DataFrame(out, index=df.index)
