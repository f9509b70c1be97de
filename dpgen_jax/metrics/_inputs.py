"""Input checks for the metrics; every message names the argument or column and what was expected.

Numbers (counts, seeds, bins) are checked by ``dpgen_jax._validate`` (``_validate.whole``), as
everywhere else; this module checks frames, schemas, labels and feature lists.

Frames are checked against the schema by the data layer's ``check_frame`` (columns, emptiness;
the same check and wording as the encoder's), and their values by
:class:`~dpgen_jax.data.TableEncoder` (categories, bounds, missing values), whose error is
re-raised with the name of the frame in front.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpgen_jax.data import Schema, TableEncoder, check_frame, has_model_columns, model_schema, to_model_frame
from dpgen_jax.data._check import show_values
from dpgen_jax.metrics._forest import warnings_once


def check_schema(schema: Any) -> Schema:
    """Return ``schema`` if it is a :class:`~dpgen_jax.data.Schema`, else raise TypeError."""
    if not isinstance(schema, Schema):
        raise TypeError(f"schema must be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
    return schema


def label_present(schema: Schema, label: str | None, frames: dict[str, Any]) -> tuple[Schema, dict[str, Any]]:
    """The schema and frames the label metrics read. When the label column is declared
    ``missing=True``, the rows of each frame where the label is present and the label as its own
    kind, no longer missing (a binary label stays binary: ``docs/metrics.md``, "Labels with
    gaps"); otherwise the arguments unchanged. Frames are checked against ``schema`` first."""
    if label is None or label not in schema or schema[label].missing is not True:
        return schema, frames
    for name, df in frames.items():
        check_frame(df, schema, name)
    columns = tuple(dataclasses.replace(c, missing=None) if c.name == label else c for c in schema.columns)
    present = {name: df[df[label].notna().to_numpy(dtype=bool)] for name, df in frames.items()}
    return dataclasses.replace(schema, columns=columns), present


def as_model(schema: Schema, frames: dict[str, Any]) -> tuple[Schema, dict[str, Any]]:
    """``data.model_schema(schema)`` and each DataFrame of ``frames`` (or list of DataFrames) as its
    model frame (``data.to_model_frame``, named by its key in messages); other values are left out."""
    out: dict[str, Any] = {}
    for name, value in frames.items():
        if isinstance(value, pd.DataFrame):
            out[name] = to_model_frame(value, schema, name)
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, pd.DataFrame) for v in value):
            out[name] = type(value)(to_model_frame(v, schema, name) for v in value)
    return model_schema(schema), out


@dataclasses.dataclass(frozen=True)
class LabelRows:
    """What the label metrics of ``evaluate`` read when the label is declared ``missing=True``: the
    prepared rows of each frame where the label is present, under the schema in which the label is
    its own kind (:func:`label_present`), or ``reason`` why they are undefined (tables None)."""

    schema: Schema
    train: Table | None = None
    test: Table | None = None
    synthetic: Table | None = None
    reason: str | None = None


def label_rows(schema: Schema, label: str | None, **frames: pd.DataFrame) -> LabelRows | None:
    """:class:`LabelRows` of ``frames`` (keys ``real_train``, ``real_test``, ``synthetic``) for a label
    declared ``missing=True``; None for any other label (the label metrics read every row)."""
    if label is None or schema[label].missing is not True:
        return None
    present_schema, present = label_present(schema, label, frames)
    empty = [name for name, df in present.items() if len(df) == 0]
    if empty:
        return LabelRows(present_schema, reason=f"the label {label!r} is missing in every row of "
                                                f"{' and '.join(empty)}")
    model, frames = as_model(present_schema, present) if has_model_columns(present_schema) else (present_schema, present)
    enc = TableEncoder(model)
    tables = {name: prepare(df, model, name, enc) for name, df in frames.items()}
    return LabelRows(model, tables["real_train"], tables["real_test"], tables["synthetic"])


def missing_as_value(fn: Callable | None = None, *, label_rows: bool = False) -> Callable:
    """Lets a public metric read a schema with columns declared ``missing=True``.

    The wrapped function receives ``data.model_schema(schema)`` and every DataFrame argument as
    its model frame (``data.to_model_frame``, named by the argument in messages; a list of frames
    frame by frame): a continuous column is compared as its value and its binary missingness
    indicator, a discrete one with the gap as one more category, so "missing" is a value of its
    own (``docs/metrics.md``). With ``label_rows`` (the label metrics), a label declared
    ``missing=True`` is first reduced to the rows where it is present (:func:`label_present`).
    Other calls pass through unchanged. Every call re-issues the warnings of its model fits once,
    attributed to the function, a third-party one without its message
    (:func:`~dpgen_jax.metrics._forest.warnings_once`).
    """
    if fn is None:
        return functools.partial(missing_as_value, label_rows=label_rows)
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        schema = bound.arguments.get("schema")
        if label_rows and isinstance(schema, Schema):
            label = bound.arguments.get("label")
            frames = {k: v for k, v in bound.arguments.items() if isinstance(v, pd.DataFrame)}
            schema, present = label_present(schema, label if label is not None else schema.label, frames)
            bound.arguments.update(present, schema=schema)
        if isinstance(schema, Schema) and has_model_columns(schema):
            model, frames = as_model(schema, bound.arguments)
            bound.arguments.update(frames, schema=model)
        with warnings_once(fn.__name__):
            return fn(*bound.args, **bound.kwargs)

    return wrapper


def check_same_columns(frames: dict[str, Any]) -> None:
    """Raise a ValueError naming the frames whose column sets differ from the first frame's."""
    items = [(k, v) for k, v in frames.items() if isinstance(v, pd.DataFrame)]
    if not items:
        return
    ref_name, ref = items[0]
    ref_cols = set(map(str, ref.columns))
    for other_name, other in items[1:]:
        cols = set(map(str, other.columns))
        if cols != ref_cols:
            only_ref = sorted(ref_cols - cols)
            only_other = sorted(cols - ref_cols)
            raise ValueError(
                f"{other_name} and {ref_name} have different columns: only in {ref_name}: {only_ref}, "
                f"only in {other_name}: {only_other}."
            )


@dataclasses.dataclass(frozen=True)
class Table:
    """A validated frame with its integer codes and its encoding.

    Attributes:
        name: The argument name, for messages.
        frame: The frame, columns in schema order.
        codes: ``(n, d)`` float64 array: category indices for discrete columns, raw values for
            continuous ones (``TableEncoder.codes``), columns in schema order.
        encoded: ``(n, width)`` float32 array (``TableEncoder.encode``).
    """

    name: str
    frame: pd.DataFrame
    codes: np.ndarray
    encoded: np.ndarray

    def __len__(self) -> int:
        return len(self.frame)


def prepare(df: Any, schema: Schema, name: str, encoder: TableEncoder | None = None) -> Table:
    """Validate ``df`` against ``schema`` and compute its codes and encoding once.

    Raises:
        TypeError, ValueError: as ``dpgen_jax.data.check_frame``, or the encoder's error (which
            names the column) prefixed with ``name``.
    """
    check_frame(df, schema, name)
    frame = df[schema.names]
    enc = encoder if encoder is not None else TableEncoder(schema)
    try:
        codes = enc.codes(frame).to_numpy(dtype=np.float64)
        encoded = enc.encode(frame)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None
    return Table(name=name, frame=frame, codes=codes, encoded=encoded)


def prepare_frames(schema: Any, **frames: Any) -> list[Table]:
    """Check ``schema``, then :func:`prepare` each frame under its argument name with one encoder.

    Example: ``real, syn = prepare_frames(schema, real=df1, synthetic=df2)``.
    """
    check_schema(schema)
    enc = TableEncoder(schema)
    return [prepare(df, schema, name, enc) for name, df in frames.items()]


def concat_tables(a: Table, b: Table, name: str) -> Table:
    """Row-wise concatenation of two prepared tables."""
    return Table(
        name=name,
        frame=pd.concat([a.frame, b.frame], ignore_index=True),
        codes=np.concatenate([a.codes, b.codes]),
        encoded=np.concatenate([a.encoded, b.encoded]),
    )


def check_label(
    schema: Schema, label: str | None, *, binary_only: bool = False, required: bool = True
) -> str | None:
    """Resolve the label column: ``label`` if given, else the schema's label.

    Args:
        schema: The schema.
        label: A column name or None (use ``schema.label``).
        binary_only: Require exactly two categories.
        required: Raise if no label can be resolved (otherwise return None).

    Raises:
        ValueError: if the label is not a discrete column of the schema (or not binary when
            ``binary_only``), or when none is given and the schema declares none.
    """
    name = label if label is not None else schema.label
    if name is None:
        if required:
            raise ValueError(
                "label=None and the schema declares no label column; pass label='<column name>'."
            )
        return None
    if not isinstance(name, str) or name not in schema:
        raise ValueError(
            f"label={name!r} is not a column of the schema; columns are {show_values(schema.names, 20)}."
        )
    col = schema[name]
    if col.kind == "continuous":
        raise ValueError(f"label={name!r} is a continuous column; expected a binary or categorical column.")
    if binary_only and len(col.categories) != 2:
        raise ValueError(
            f"label={name!r} has {len(col.categories)} categories; "
            "this metric needs a binary label (2 categories)."
        )
    return name


def check_features(features: Sequence[str] | None, schema: Schema, name: str = "features") -> list[str]:
    """Resolve a feature subset (None = all schema columns), in schema order."""
    if features is None:
        return schema.names
    if isinstance(features, str):
        raise TypeError(f"{name} must be a sequence of column names, not a single string {features!r}.")
    feats = list(features)
    unknown = [f for f in feats if f not in schema]
    if unknown:
        raise ValueError(f"{name} has names not in the schema: {show_values(unknown, 8)}.")
    if len(set(feats)) != len(feats):
        raise ValueError(f"{name} has duplicates: {show_values(sorted({f for f in feats if feats.count(f) > 1}), 8)}.")
    return [n for n in schema.names if n in set(feats)]
