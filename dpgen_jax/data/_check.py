"""The one frame-vs-schema check of the library (its messages format values with ``_schema.show_values``).

:class:`~dpgen_jax.data.TableEncoder` and every metric call :func:`check_frame`, so a frame that
does not match its schema is refused with the same words wherever it enters the library.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import pandas as pd

from dpgen_jax.data._schema import Schema, show_values  # noqa: F401  (show_values: re-exported)


def check_frame(df: Any, schema: Schema, name: str = "df") -> None:
    """Check that ``df`` is a non-empty DataFrame with exactly the schema's columns (any order).

    Only the column names and the row count are checked here; the values are checked where
    they are read (``TableEncoder.encode`` and ``codes``), naming the column.

    Args:
        df: The frame to check.
        schema: The public schema it must match.
        name: What to call the frame in messages (an argument name such as ``"synthetic"``).

    Raises:
        TypeError: if ``df`` is not a pandas DataFrame.
        ValueError: on duplicate column names, missing or undeclared columns (all of them named
            in one message, with the columns that were expected), or zero rows.

    Example:
        >>> from dpgen_jax.data import binary_schema
        >>> check_frame(pd.DataFrame({"x1": [0], "x0": [1]}), binary_schema(2))
        >>> check_frame(pd.DataFrame({"x0": [1], "z": [0]}), binary_schema(2), "train")
        Traceback (most recent call last):
        ...
        ValueError: train is missing schema column(s) 'x1' and has column(s) not declared in the schema: 'z'; expected exactly the schema's columns 'x0', 'x1' (in any order).
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame, got {type(df).__name__}.")
    cols = list(df.columns)
    dupes = sorted({str(c) for c in cols if cols.count(c) > 1})
    if dupes:
        raise ValueError(f"{name} has duplicate column names {dupes}; expected each schema column once.")
    names = schema.names
    present, declared = set(cols), set(names)
    missing = [n for n in names if n not in present]
    extra = [c for c in cols if c not in declared]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"is missing schema column(s) {show_values(missing, 10)}")
        if extra:
            parts.append(f"has column(s) not declared in the schema: {show_values(extra, 10)}")
        raise ValueError(
            f"{name} {' and '.join(parts)}; expected exactly the schema's columns "
            f"{show_values(names, 20)} (in any order)."
        )
    if len(df) == 0:
        raise ValueError(f"{name} is empty (0 rows); expected at least one row.")


def check_key(key: Any, user: str) -> None:
    """Accept a typed JAX key or a legacy ``uint32[2]`` key; refuse anything else.

    Args:
        key: The candidate key.
        user: What needs the key, for messages (e.g. ``"uniform_rows"``).

    Raises:
        ValueError: if ``key`` is None or a batch of keys.
        TypeError: if ``key`` is not a JAX key.
    """
    hint = f"pass key=jax.random.key(seed) ({user} has no default randomness)"
    if key is None:
        raise ValueError(f"{user} needs a key: {hint}.")
    if not isinstance(key, jax.Array):
        raise TypeError(f"key must be a jax.random key, got {type(key).__name__} {key!r}; {hint}.")
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"key must be a single key (shape ()), got shape {key.shape}.")
    elif not (key.dtype == jnp.uint32 and key.shape == (2,)):
        raise TypeError(
            f"key must be a jax.random key, got an array of dtype {key.dtype} and shape {key.shape}; {hint}."
        )
