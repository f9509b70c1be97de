"""Encoded rows drawn from the public schema alone (no private row is read)."""

from __future__ import annotations

import functools
import numbers

import jax
import jax.numpy as jnp

from dpgen_jax.data._check import check_key
from dpgen_jax.data._encoder import TableEncoder
from dpgen_jax.data._schema import Schema


def uniform_rows(schema: Schema, n: int, key: jax.Array) -> jax.Array:
    """``n`` encoded rows whose columns are independent and uniform over the public schema.

    Per column, in the layout of ``TableEncoder(schema)``: a categorical block is the one-hot
    vector of a category drawn uniformly from the schema's list; a binary column is
    Bernoulli(1/2); a continuous column is uniform on [0, 1] in the scaled space, i.e. uniform
    between the bounds (an integer column then decodes to each inner integer with probability
    1 / (upper - lower) and to each bound with half that, by rounding).

    Column ``i`` (schema order) draws from ``jax.random.fold_in(key, i)``, so a column's draws do
    not depend on the other columns.

    Args:
        schema: The public schema.
        n: Number of rows, an integer >= 0 (a static shape under ``jax.jit``).
        key: A ``jax.random`` key (typed or legacy); there is no default randomness.

    Returns:
        ``(n, TableEncoder(schema).width)`` float32 JAX array.

    Raises:
        TypeError: if ``schema`` is not a Schema or ``key`` not a JAX key.
        ValueError: if ``n`` is not an integer >= 0, or ``key`` is None or a batch of keys.

    Privacy:
        Reads nothing but the public schema: rows made this way (e.g. to choose a clip norm or to
        measure throughput) cost no privacy.

    Example:
        >>> from dpgen_jax.data import binary_schema
        >>> uniform_rows(binary_schema(3), 4, jax.random.key(0)).shape
        (4, 3)
    """
    if not isinstance(schema, Schema):
        raise TypeError(f"schema must be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"n={n!r}; expected an integer >= 0.")
    check_key(key, "uniform_rows")
    layout = tuple((b.kind, b.width) for b in TableEncoder(schema).blocks)
    return _uniform_rows(layout, int(n), key)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _uniform_rows(layout: tuple[tuple[str, int], ...], n: int, key: jax.Array) -> jax.Array:
    """The draws of :func:`uniform_rows`, one compiled call per (layout, n)."""
    cols = []
    for i, (kind, width) in enumerate(layout):
        k = jax.random.fold_in(key, i)
        if kind == "categorical":
            cols.append(jax.nn.one_hot(jax.random.randint(k, (n,), 0, width), width, dtype=jnp.float32))
        elif kind == "binary":
            cols.append(jax.random.bernoulli(k, 0.5, (n, 1)).astype(jnp.float32))
        else:
            cols.append(jax.random.uniform(k, (n, 1), dtype=jnp.float32))
    return jnp.concatenate(cols, axis=1)
