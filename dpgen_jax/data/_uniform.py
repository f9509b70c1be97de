"""Encoded rows drawn from the public schema alone (no private row is read)."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax.data._check import check_key
from dpgen_jax.data._encoder import TableEncoder
from dpgen_jax.data._schema import Schema

_KINDS = ("categorical", "binary", "continuous")


class _Plan(NamedTuple):
    """Index arrays that drive one vectorised draw (host arrays, passed to the compiled call as data).

    The draws are grouped by kind, categorical first, then binary, then continuous (any other kind);
    within a kind in schema order. ``columns[k]`` holds the schema indices of kind ``k`` (the ``fold_in`` data) and
    ``categories`` the width of each categorical column. Encoded column ``j`` reads the grouped draw
    ``source[j]``; it is categorical when ``category[j] >= 0`` (then it is 1 where the drawn index
    equals ``category[j]``) and otherwise takes the draw itself.
    """

    columns: tuple[np.ndarray, np.ndarray, np.ndarray]
    categories: np.ndarray
    source: np.ndarray
    category: np.ndarray


def uniform_rows(schema: Schema, n: int, key: jax.Array) -> jax.Array:
    """``n`` encoded rows whose columns are independent and uniform over the public schema.

    Per column, in the layout of ``TableEncoder(schema)``: a categorical block is the one-hot
    vector of a category drawn uniformly from the schema's list; a binary column is
    Bernoulli(1/2); a continuous column is uniform on [0, 1] in the scaled space, i.e. uniform
    between the bounds (an integer column then decodes to each inner integer with probability
    1 / (upper - lower) and to each bound with half that, by rounding).

    Column ``i`` (schema order; block ``i`` of ``TableEncoder(schema).blocks``) draws from
    ``jax.random.fold_in(key, i)``, so a column's draws do not depend on the other columns.

    The columns of one kind are drawn together (``jax.vmap`` over their keys) and placed into the
    encoded layout with one gather, so the compiled program does not grow with the number of
    columns: a schema of a thousand columns compiles as fast as one of ten. The compiled call is
    shared by every schema with the same number of columns of each kind and the same width.

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
    _v.whole(minimum=0, n=n)
    check_key(key, "uniform_rows")
    plan = _plan(tuple((b.kind, b.width) for b in TableEncoder(schema).blocks))
    return _uniform_rows(int(n), key, plan)


@functools.lru_cache(maxsize=32)
def _plan(layout: tuple[tuple[str, int], ...]) -> _Plan:
    """The index arrays of :class:`_Plan` for a layout of ``(kind, width)`` blocks."""
    kinds = np.array([_KINDS.index(kind) if kind in _KINDS[:2] else 2 for kind, _ in layout], np.int32)
    widths = np.array([width for _, width in layout], np.int64)
    order = np.argsort(kinds, kind="stable")  # grouped position -> schema index
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))  # schema index -> grouped position
    source = np.repeat(rank, widths).astype(np.int32)
    starts = np.cumsum(widths) - widths
    inner = np.arange(int(widths.sum())) - np.repeat(starts, widths)
    category = np.where(np.repeat(kinds, widths) == 0, inner, -1).astype(np.int32)
    columns = tuple(np.flatnonzero(kinds == k).astype(np.uint32) for k in range(len(_KINDS)))
    return _Plan(columns, widths[kinds == 0].astype(np.int32), source, category)


@functools.partial(jax.jit, static_argnums=0)
def _uniform_rows(n: int, key: jax.Array, plan: _Plan) -> jax.Array:
    """The draws of :func:`uniform_rows`, one compiled call per ``n`` and plan shapes."""
    cat, binary, cont = plan.columns
    keys = functools.partial(jax.vmap(jax.random.fold_in, in_axes=(None, 0)), key)
    draws = []  # (columns of one kind, n) float32 each, in the kind order of the plan
    if cat.shape[0]:
        randint = jax.vmap(lambda k, w: jax.random.randint(k, (n,), 0, w))
        draws.append(randint(keys(cat), plan.categories).astype(jnp.float32))
    if binary.shape[0]:
        bernoulli = jax.vmap(lambda k: jax.random.bernoulli(k, 0.5, (n, 1))[:, 0])
        draws.append(bernoulli(keys(binary)).astype(jnp.float32))
    if cont.shape[0]:
        uniform = jax.vmap(lambda k: jax.random.uniform(k, (n, 1), dtype=jnp.float32)[:, 0])
        draws.append(uniform(keys(cont)))
    grouped = jnp.concatenate(draws, axis=0).T  # (n, number of columns)
    picked = grouped[:, plan.source]  # (n, width): each encoded column's draw
    one_hot = (picked == plan.category.astype(jnp.float32)).astype(jnp.float32)
    return jnp.where(plan.category >= 0, one_hot, picked)
