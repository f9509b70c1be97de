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

from dpgen_jax.data import Schema, TableEncoder, check_frame, has_missing, model_schema, to_model_frame
from dpgen_jax.data._check import show_values


def check_schema(schema: Any) -> Schema:
    """Return ``schema`` if it is a :class:`~dpgen_jax.data.Schema`, else raise TypeError."""
    if not isinstance(schema, Schema):
        raise TypeError(f"schema must be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
    return schema


def missing_as_value(fn: Callable) -> Callable:
    """Lets a public metric read a schema with continuous columns declared ``missing=True``.

    The wrapped function receives ``data.model_schema(schema)`` and every DataFrame argument as
    its model frame (``data.to_model_frame``, named by the argument in messages; a list of frames
    frame by frame): each such column
    is compared as its value and its binary missingness indicator, so "missing" is a value of its
    own (``docs/metrics.md``). Other calls pass through unchanged.
    """
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        schema = bound.arguments.get("schema")
        if isinstance(schema, Schema) and has_missing(schema):
            for name, value in bound.arguments.items():
                if isinstance(value, pd.DataFrame):
                    bound.arguments[name] = to_model_frame(value, schema, name)
                elif isinstance(value, (list, tuple)) and value and all(isinstance(v, pd.DataFrame) for v in value):
                    bound.arguments[name] = type(value)(to_model_frame(v, schema, name) for v in value)
            bound.arguments["schema"] = model_schema(schema)
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
