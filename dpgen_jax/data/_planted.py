"""A seeded all-binary table with planted 2-way and 3-way dependences, for wide-table benchmarks.

:func:`planted_binary` draws an ``n_rows x n_features`` 0/1 table whose structure is known
exactly, so a benchmark can ask whether a synthesizer kept it:

* Background. Every column outside a planted group is an independent Bernoulli(``p_j``), with
  ``p_j`` drawn uniformly from ``p_range`` (default [0.1, 0.5]).
* Planted pairs. Two columns ``(a, b)`` with ``a ~ Bernoulli(1/2)`` and
  ``b = a XOR Bernoulli(flip)``: a strong 2-way dependence, correlation exactly
  ``1 - 2 flip`` in distribution (0.8 at the default ``flip`` = 0.1).
* Planted triples. Three columns ``(a, b, c)`` with ``a, b ~ Bernoulli(1/2)`` and
  ``c = a XOR b XOR Bernoulli(flip)``. Any two of the three are independent (both fair coins),
  so no 1-way or 2-way marginal shows the triple; only its 3-way marginal does
  (``a XOR b XOR c = 0`` in a fraction ``1 - flip`` of the rows, against 1/2 without it).

The groups sit on disjoint columns: a random order of the columns drawn from ``seed``, pairs
first, then triples. The model (that order and the background rates) depends on
``(n_features, seed)`` and the options, never on ``n_rows``; the rows come from their own numpy
streams, one draw per row and column, so ``planted_binary(m, d, s)`` is the first ``m`` rows of
``planted_binary(n, d, s)`` for ``m <= n``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from dpgen_jax import _validate as _v
from dpgen_jax.data._schema import Schema, binary_schema

#: One planted group per this many columns by default (50 pairs and 50 triples at 1,000 columns).
_COLUMNS_PER_GROUP = 20


class PlantedTable(NamedTuple):
    """A table of :func:`planted_binary` with its schema and its planted groups.

    Attributes:
        frame: The rows, int8 0/1, columns ``schema.names``.
        schema: ``binary_schema(n_features)``.
        pairs: The planted pairs, as tuples of two column names in schema order, sorted by their
            first column.
        triples: The planted triples, as tuples of three column names in schema order, sorted
            the same way.
    """

    frame: pd.DataFrame
    schema: Schema
    pairs: tuple[tuple[str, str], ...]
    triples: tuple[tuple[str, str, str], ...]


def planted_binary(
    n_rows: int,
    n_features: int,
    seed: int = 0,
    *,
    n_pairs: int | None = None,
    n_triples: int | None = None,
    flip: float = 0.1,
    p_range: tuple[float, float] = (0.1, 0.5),
) -> PlantedTable:
    """A seeded all-binary table with planted pairs and triples (see the module docstring).

    The default use is a wide benchmark table, ``planted_binary(2000, 1000)``: 2,000 rows, 1,000
    columns, 50 planted pairs and 50 planted triples on 250 of the columns. Score a synthetic
    table on the planted marginals with ``metrics.marginal_l1_2way(..., pairs=t.pairs)`` and
    ``metrics.marginal_l1_3way(..., triples=t.triples)``; the triples are invisible to every
    1-way and 2-way statistic.

    Args:
        n_rows: Number of rows, an integer >= 1.
        n_features: Number of binary columns, an integer >= 1.
        seed: Non-negative integer seed; it fixes the model and the rows.
        n_pairs: Number of planted pairs (default ``n_features // 20``).
        n_triples: Number of planted triples (default ``n_features // 20``).
        flip: Probability that a planted relation is broken in a row, in [0, 0.5): 0 makes it
            exact, values near 0.5 erase it.
        p_range: ``(low, high)``, 0 < low <= high < 1: the range of the background columns'
            rates of ones.

    Returns:
        A :class:`PlantedTable` ``(frame, schema, pairs, triples)``; the frame has int8 0/1
        columns ``binary_schema(n_features).names`` (``x0``, ``x1``, ...) and a RangeIndex.

    Raises:
        ValueError: on a non-integer or out-of-range argument, or when the planted groups do
            not fit in the columns (``2 n_pairs + 3 n_triples > n_features``; the message names
            ``n_pairs`` and ``n_triples``).

    Example:
        >>> t = planted_binary(100, 20, seed=1)
        >>> t.frame.shape, len(t.pairs), len(t.triples)
        ((100, 20), 1, 1)
    """
    n_rows = _v.whole(minimum=1, n_rows=n_rows)
    n_features = _v.whole(minimum=1, n_features=n_features)
    seed = _v.whole(minimum=0, seed=seed)
    default = n_features // _COLUMNS_PER_GROUP
    n_pairs = default if n_pairs is None else _v.whole(minimum=0, n_pairs=n_pairs)
    n_triples = default if n_triples is None else _v.whole(minimum=0, n_triples=n_triples)
    if 2 * n_pairs + 3 * n_triples > n_features:
        raise ValueError(
            f"n_pairs={n_pairs} and n_triples={n_triples} need 2 * {n_pairs} + 3 * {n_triples} = "
            f"{2 * n_pairs + 3 * n_triples} columns; n_features={n_features} has fewer. Expected "
            "2 n_pairs + 3 n_triples <= n_features."
        )
    flip = _v.number(flip=flip)
    if not 0.0 <= flip < 0.5:
        raise ValueError(f"flip={flip!r}; expected a probability in [0, 0.5).")
    if not isinstance(p_range, (tuple, list)) or len(p_range) != 2:
        raise ValueError(f"p_range={p_range!r}; expected a (low, high) pair.")
    low, high = (_v.number(p_range=p) for p in p_range)
    if not 0.0 < low <= high < 1.0:
        raise ValueError(f"p_range={tuple(p_range)!r}; expected 0 < low <= high < 1.")

    model, ones, pair_noise, triple_noise = (
        np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(seed).spawn(4)
    )
    order = model.permutation(n_features)
    split = 2 * n_pairs
    pair_cols = np.sort(order[:split].reshape(n_pairs, 2), axis=1)
    triple_cols = np.sort(order[split : split + 3 * n_triples].reshape(n_triples, 3), axis=1)
    pair_cols = pair_cols[np.argsort(pair_cols[:, 0])]
    triple_cols = triple_cols[np.argsort(triple_cols[:, 0])]
    rate = model.uniform(low, high, size=n_features)
    rate[order[: split + 3 * n_triples]] = 0.5  # planted columns are fair coins

    x = ones.random((n_rows, n_features), dtype=np.float32) < rate.astype(np.float32)
    if n_pairs:
        broken = pair_noise.random((n_rows, n_pairs), dtype=np.float32) < flip
        x[:, pair_cols[:, 1]] = x[:, pair_cols[:, 0]] ^ broken
    if n_triples:
        broken = triple_noise.random((n_rows, n_triples), dtype=np.float32) < flip
        x[:, triple_cols[:, 2]] = x[:, triple_cols[:, 0]] ^ x[:, triple_cols[:, 1]] ^ broken

    schema = binary_schema(n_features)
    names = schema.names
    # Fortran order: pandas stores the block transposed, so every column is contiguous.
    frame = pd.DataFrame(np.asfortranarray(x.astype(np.int8)), columns=names, copy=False)
    return PlantedTable(
        frame=frame,
        schema=schema,
        pairs=tuple((names[a], names[b]) for a, b in pair_cols),
        triples=tuple((names[a], names[b], names[c]) for a, b, c in triple_cols),
    )
