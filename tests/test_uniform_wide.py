"""``data.uniform_rows`` on wide tables: the vectorised draw equals a per-column loop exactly, and its
compiled program does not grow with the number of columns (``docs/scaling.md``, "Wide tables")."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpgen_jax import data
from dpgen_jax.data import Column, Schema, TableEncoder


def interleaved_schema() -> Schema:
    """Categorical columns of several widths, binary and continuous columns, kinds interleaved."""
    return Schema((
        Column("c3", "categorical", categories=("a", "b", "c")),
        Column("y", "binary", categories=("no", "yes")),
        Column("v", "continuous", lower=-2.0, upper=3.0),
        Column("c5", "categorical", categories=(1, 2, 3, 4, 5)),
        Column("z", "binary", categories=(0, 1)),
        Column("c2", "categorical", categories=("p", "q")),
        Column("n", "continuous", lower=10, upper=14, integer=True),
        Column("c7", "categorical", categories=tuple("abcdefg")),
        Column("c3b", "categorical", categories=(7, 8, 9)),
        Column("w", "binary", categories=("f", "t")),
    ))


def per_column_reference(schema: Schema, n: int, key: jax.Array) -> np.ndarray:
    """The documented contract written out, one eager draw per column: column i from fold_in(key, i)."""
    parts = []
    for i, b in enumerate(TableEncoder(schema).blocks):
        k = jax.random.fold_in(key, i)
        if b.kind == "categorical":
            idx = np.asarray(jax.random.randint(k, (n,), 0, b.width))
            parts.append(np.eye(b.width, dtype=np.float32)[idx])
        elif b.kind == "binary":
            parts.append(np.asarray(jax.random.bernoulli(k, 0.5, (n, 1)), np.float32))
        else:
            parts.append(np.asarray(jax.random.uniform(k, (n, 1), dtype=jnp.float32)))
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("n", [0, 1, 37])
@pytest.mark.parametrize("legacy", [False, True])
def test_equals_a_per_column_loop_exactly(n, legacy):
    schema = interleaved_schema()
    key = jax.random.PRNGKey(11) if legacy else jax.random.key(11)
    got = data.uniform_rows(schema, n, key)
    assert got.dtype == jnp.float32 and got.shape == (n, TableEncoder(schema).width)
    np.testing.assert_array_equal(np.asarray(got), per_column_reference(schema, n, key))


def _operations(schema: Schema, n: int = 64) -> int:
    """The number of operations in the lowered program of ``uniform_rows(schema, n, key)``."""
    text = jax.jit(lambda k: data.uniform_rows(schema, n, k)).lower(jax.random.key(0)).as_text()
    return sum(" = " in line for line in text.splitlines())


def test_compiled_program_does_not_grow_with_the_columns():
    """The lowered program of 1,071 binary columns (``mimic_like``'s schema) has as many operations as
    that of 100 (the per-column unrolled form had about eight times as many, and compiled for
    minutes); the same for a mixed schema repeated a hundred times. Only the index constants grow,
    linearly."""
    assert _operations(data.binary_schema(1071)) <= 1.1 * _operations(data.binary_schema(100))
    wide = Schema(tuple(dataclasses.replace(c, name=f"{c.name}_{j}")
                        for j in range(100) for c in interleaved_schema().columns))
    assert _operations(wide) <= 1.1 * _operations(interleaved_schema())


def test_mimic_like_schema_draws_follow_the_contract():
    """At mimic_like's width the draws still come from each column's own key (spot checks), and the
    rows are valid 0/1 rows."""
    schema = data.binary_schema(1071)
    key = jax.random.key(5)
    x = np.asarray(data.uniform_rows(schema, 16, key))
    assert x.shape == (16, 1071) and set(np.unique(x).tolist()) == {0.0, 1.0}
    for i in (0, 1, 535, 1070):
        want = np.asarray(jax.random.bernoulli(jax.random.fold_in(key, i), 0.5, (16, 1)), np.float32)
        np.testing.assert_array_equal(x[:, i:i + 1], want)
