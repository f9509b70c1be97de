"""Mixed-type reconstruction losses and output activations over the encoder's column blocks.

A network that reconstructs (or generates) encoded rows outputs one logit per encoded column. For
the table encoder's blocks (``data.TableEncoder.blocks``):

* categorical block: softmax over the block; loss = cross-entropy with the one-hot target;
* binary column: sigmoid; loss = binary cross-entropy;
* continuous column: sigmoid (the encoding is scaled to [0, 1] by the public bounds); loss = squared
  error of the sigmoid output (``continuous="mse"``) or binary cross-entropy (``"bce"``).

Every loss here is per example: the i-th output depends on row i only, so it can be clipped per
example (ghost or vmap).

The categorical blocks of one width are handled together (one gather, one softmax over the last
axis), so a compiled loss or activation has one group of operations per distinct block width, not
one per column: a table of a thousand categorical columns compiles about as fast as one of ten.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax import data as data_lib
from dpgen_jax.models import bce_with_logits as _bce_with_logits

CONTINUOUS_LOSSES = ("mse", "bce")


class BlockLayout:
    """Static column indices of each kind of block (built once from the encoder's blocks).

    Attributes:
        width: The encoded width.
        categorical: ``(start, stop)`` of every categorical block, in the encoder's order.
        categorical_groups: The categorical blocks grouped by width, narrowest first: per width a
            ``(number of blocks, width)`` int32 array whose row ``i`` lists the encoded columns of
            that width's ``i``-th block (in the encoder's order).
        binary: Encoded column of every binary block.
        continuous: Encoded column of every continuous block.
    """

    def __init__(self, blocks: Sequence[data_lib.Block]):
        self.width = max(b.stop for b in blocks)
        self.categorical = [(b.start, b.stop) for b in blocks if b.kind == "categorical"]
        starts: dict[int, list[int]] = {}
        for start, stop in self.categorical:
            starts.setdefault(stop - start, []).append(start)
        self.categorical_groups = tuple(np.asarray(starts[w], np.int32)[:, None] + np.arange(w, dtype=np.int32)
                                        for w in sorted(starts))
        self.binary = np.array([b.start for b in blocks if b.kind == "binary"], np.int32)
        self.continuous = np.array([b.start for b in blocks if b.kind == "continuous"], np.int32)


def reconstruction_loss(blocks: Sequence[data_lib.Block], continuous: str = "mse"):
    """``loss(logits, targets) -> (B,)``: the sum over blocks of each block's loss.

    Args:
        blocks: the encoder's blocks (``TableEncoder(schema).blocks``).
        continuous: ``"mse"`` or ``"bce"`` for continuous columns.
    """
    _v.one_of(CONTINUOUS_LOSSES, continuous=continuous)
    layout = BlockLayout(blocks)

    def loss(logits: jax.Array, targets: jax.Array) -> jax.Array:
        total = jnp.zeros(logits.shape[:-1], logits.dtype)
        for idx in layout.categorical_groups:  # (blocks, width): one log-softmax per block
            logp = jax.nn.log_softmax(logits[..., idx], axis=-1)
            total = total - jnp.sum(targets[..., idx] * logp, axis=(-2, -1))
        if layout.binary.size:
            idx = layout.binary
            total = total + jnp.sum(_bce_with_logits(logits[..., idx], targets[..., idx]), axis=-1)
        if layout.continuous.size:
            idx = layout.continuous
            if continuous == "mse":
                err = jax.nn.sigmoid(logits[..., idx]) - targets[..., idx]
                total = total + jnp.sum(err * err, axis=-1)
            else:
                total = total + jnp.sum(_bce_with_logits(logits[..., idx], targets[..., idx]), axis=-1)
        return total

    return loss


def output_activation(blocks: Sequence[data_lib.Block]):
    """``activate(logits) -> (B, width)`` in the encoded layout: softmax per categorical block,
    sigmoid elsewhere (what ``TableEncoder.decode`` expects). ``activate`` is jitted, so that a call
    outside compiled code (e.g. when sampling) is one compiled program per shape, not one dispatch
    per operation."""
    layout = BlockLayout(blocks)

    @jax.jit
    def activate(logits: jax.Array) -> jax.Array:
        out = jax.nn.sigmoid(logits)
        for idx in layout.categorical_groups:  # (blocks, width): one softmax per block
            out = out.at[..., idx].set(jax.nn.softmax(logits[..., idx], axis=-1))
        return out

    return activate


__all__ = ["CONTINUOUS_LOSSES", "BlockLayout", "output_activation", "reconstruction_loss"]
