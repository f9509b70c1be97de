"""Schema-driven output heads and losses on wide tables: grouped by block width, they equal a per-block
loop and their compiled programs do not grow with the number of columns (``docs/scaling.md``, "Wide
tables")."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpgen_jax import data
from dpgen_jax.synthesizers import _losses


def wide_schema(n_cols: int) -> data.Schema:
    """Categorical columns of widths 3 to 7, binary and continuous columns, interleaved."""
    cols = []
    for j in range(n_cols):
        if j % 3:
            cols.append(data.Column(f"c{j}", "categorical", categories=tuple(range(3 + j % 5))))
        elif j % 2:
            cols.append(data.Column(f"b{j}", "binary", categories=(0, 1)))
        else:
            cols.append(data.Column(f"v{j}", "continuous", lower=0.0, upper=1.0))
    return data.Schema(tuple(cols))


def loop_activation(blocks, logits):
    """One softmax per categorical block, sigmoid elsewhere: the per-block form."""
    out = jax.nn.sigmoid(logits)
    for b in blocks:
        if b.kind == "categorical":
            out = out.at[..., b.slice].set(jax.nn.softmax(logits[..., b.slice], axis=-1))
    return out


def loop_loss(blocks, logits, targets):
    """Cross-entropy per categorical block, BCE per binary column, squared error per continuous one."""
    total = jnp.zeros(logits.shape[:-1], logits.dtype)
    for b in blocks:
        lg, tg = logits[..., b.slice], targets[..., b.slice]
        if b.kind == "categorical":
            total = total - jnp.sum(tg * jax.nn.log_softmax(lg, axis=-1), axis=-1)
        elif b.kind == "binary":
            total = total + jnp.sum(jnp.maximum(lg, 0) - lg * tg + jnp.log1p(jnp.exp(-jnp.abs(lg))), axis=-1)
        else:
            total = total + jnp.sum((jax.nn.sigmoid(lg) - tg) ** 2, axis=-1)
    return total


def _inputs(schema, n=24, seed=0):
    """``(blocks, logits, targets)``: normal logits and encoded rows drawn from the schema."""
    blocks = tuple(data.TableEncoder(schema).blocks)
    rng = np.random.default_rng(seed)
    logits = jnp.asarray(rng.normal(0, 3, (n, max(b.stop for b in blocks))).astype(np.float32))
    return blocks, logits, data.uniform_rows(schema, n, jax.random.key(seed))


def test_grouped_activation_and_gradients_equal_the_per_block_loop():
    """The activation and the per-example gradients of the loss are bit-identical to the per-block
    form (so fits and pinned samples do not move); the loss value agrees to float rounding (its
    terms are summed in another order)."""
    blocks, logits, targets = _inputs(wide_schema(16))
    act = _losses.output_activation(blocks)
    np.testing.assert_array_equal(np.asarray(jax.jit(act)(logits)),
                                  np.asarray(jax.jit(lambda x: loop_activation(blocks, x))(logits)))
    loss = _losses.reconstruction_loss(blocks, "mse")
    np.testing.assert_allclose(np.asarray(loss(logits, targets)), np.asarray(loop_loss(blocks, logits, targets)),
                               rtol=1e-6)
    w = jnp.asarray(np.random.default_rng(1).normal(0, 0.1, (logits.shape[1],) * 2).astype(np.float32))

    def per_example(fn):
        return jax.jit(jax.vmap(jax.grad(lambda w, x: fn(x @ w, x)), (None, 0)))(w, targets)

    np.testing.assert_array_equal(np.asarray(per_example(loss)),
                                  np.asarray(per_example(lambda lg, t: loop_loss(blocks, lg, t))))
    np.testing.assert_array_equal(
        np.asarray(per_example(lambda lg, t: jnp.sum(act(lg) * t, -1))),
        np.asarray(per_example(lambda lg, t: jnp.sum(loop_activation(blocks, lg) * t, -1))))


def _operations(fn, *args) -> int:
    text = jax.jit(fn).lower(*args).as_text()
    return sum(" = " in line for line in text.splitlines())


@pytest.mark.parametrize("head", ["activation", "loss_gradients"])
def test_compiled_head_does_not_grow_with_the_columns(head):
    """Operations of the lowered program at 100 and 1,071 columns: the same number (the per-block form
    had about ten times as many at 1,071 columns, and compiled for two to five minutes)."""
    counts = []
    for n_cols in (100, 1071):
        blocks, logits, targets = _inputs(wide_schema(n_cols), n=8)
        if head == "activation":
            counts.append(_operations(_losses.output_activation(blocks), logits))
        else:
            loss = _losses.reconstruction_loss(blocks)
            counts.append(_operations(jax.vmap(jax.grad(loss), (0, 0)), logits, targets))
    assert counts[1] <= 1.1 * counts[0]


@pytest.mark.parametrize("step", ["encode_rows", "decode_rows"])
def test_dp_sactgan_conversions_do_not_grow_with_the_columns(step):
    """DP-SACTGAN's conversions to and from its layout lower to as many operations at 1,071 columns as
    at 100 (one group per kind; the per-column form had about forty times as many at 1,071)."""
    from dpgen_jax.synthesizers import dp_sactgan as ds

    counts = []
    for n_cols in (100, 1071):
        schema = wide_schema(n_cols)
        cfg = ds.DPSACTGANConfig(n_modes=3)
        lay, modes = ds.build_layout(schema, cfg), ds.public_modes(schema, cfg)
        if step == "encode_rows":
            x = data.uniform_rows(schema, 8, jax.random.key(0))
            counts.append(_operations(lambda x: ds.encode_rows(lay, x, modes, "sample", jax.random.key(1)), x))
        else:
            probs = jnp.zeros((8, lay.n_cols, lay.max_width))
            counts.append(_operations(lambda p: ds.decode_rows(lay, p, modes, jax.random.key(1)), probs))
    assert counts[1] <= 1.1 * counts[0]
