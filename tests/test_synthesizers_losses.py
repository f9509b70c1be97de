"""Mixed-type reconstruction losses against a per-row NumPy computation."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from dpgen_jax import data
from dpgen_jax.synthesizers import _losses
from tests import _tables


def _reference(logits, targets, blocks, continuous):
    out = []
    for row_l, row_t in zip(logits.astype(np.float64), targets.astype(np.float64)):
        total = 0.0
        for b in blocks:
            lg, tg = row_l[b.start:b.stop], row_t[b.start:b.stop]
            if b.kind == "categorical":
                logp = lg - np.log(np.sum(np.exp(lg)))
                total -= np.sum(tg * logp)
            else:
                p = 1 / (1 + np.exp(-lg[0]))
                if b.kind == "continuous" and continuous == "mse":
                    total += (p - tg[0]) ** 2
                else:
                    total -= tg[0] * np.log(p) + (1 - tg[0]) * np.log(1 - p)
        out.append(total)
    return np.array(out)


@pytest.mark.parametrize("continuous", ["mse", "bce"])
def test_reconstruction_loss_matches_a_row_loop(continuous):
    enc = data.TableEncoder(_tables.MIXED_SCHEMA)
    targets = enc.encode(_tables.mixed_frame(20, 3))
    logits = np.random.default_rng(0).normal(0, 2, targets.shape).astype(np.float32)
    got = _losses.reconstruction_loss(enc.blocks, continuous)(jnp.asarray(logits), jnp.asarray(targets))
    np.testing.assert_allclose(np.asarray(got), _reference(logits, targets, enc.blocks, continuous),
                               rtol=1e-5)


def test_output_activation_gives_the_decoder_layout():
    enc = data.TableEncoder(_tables.MIXED_SCHEMA)
    logits = np.random.default_rng(1).normal(0, 3, (50, enc.width)).astype(np.float32)
    out = np.asarray(_losses.output_activation(enc.blocks)(jnp.asarray(logits)))
    a = enc.block("a")
    np.testing.assert_allclose(out[:, a.slice].sum(1), 1.0, rtol=1e-6)
    assert np.all((out >= 0) & (out <= 1))
    frame = enc.decode(out)
    assert list(frame.columns) == _tables.MIXED_SCHEMA.names and len(frame) == 50
    with pytest.raises(ValueError, match="got continuous='l1'"):
        _losses.reconstruction_loss(enc.blocks, "l1")
