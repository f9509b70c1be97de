"""Column-token transformers for DP-SACTGAN: one token per table column.

The DP-SACTGAN paper (Li and Wang 2023, arXiv:2312.13031) names self-attention and LayerNorm but
its architecture figures are missing; these modules are this project's reading (docs/dp-sactgan.md):
every original column of the table is one token, so attention runs between columns.

* :class:`ColumnTokenGenerator` maps ``noise (+) conditional vector`` to ``n_cols`` tokens (one
  Dense, then learned column embeddings), runs pre-LN transformer blocks and returns per-column
  logits padded to the widest column, ``(B, n_cols, max_width)``. The caller activates and
  scatters them to the flat encoding with static index arrays (slots past a column's width are
  never read).
* :class:`ColumnTokenCritic` gathers each column's slice of ``row (+) conditional vector`` with a
  static ``(n_cols, max_in)`` index table into a zero-padded token input (padded slots point at a
  constant 0, so they are inert), embeds each column with its own Dense, prepends a [CLS] token,
  and returns the [CLS] score and the [CLS] feature vector (the information loss compares them).
* :class:`AuxClassifier`: four hidden layers of 256 with LeakyReLU(0.2) and a logits layer.

No BatchNorm anywhere (per-example independence); shapes are static.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from dpgen_jax.models._layers import leaky_relu


class PreLNBlock(nn.Module):
    """A pre-LN transformer block: ``x + MHA(LN(x))``, then ``x + MLP(LN(x))`` (MLP x2, GELU)."""

    d_model: int
    num_heads: int
    mlp_ratio: int = 2

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.LayerNorm(epsilon=1e-5)(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.num_heads, qkv_features=self.d_model,
                                                out_features=self.d_model)(h, h)
        h = nn.LayerNorm(epsilon=1e-5)(x)
        h = nn.Dense(self.mlp_ratio * self.d_model)(h)
        return x + nn.Dense(self.d_model)(nn.gelu(h))


class ColumnTokenGenerator(nn.Module):
    """Noise and conditional vector -> padded per-column logits ``(B, n_cols, max_width)``.

    Attributes:
        n_cols: number of columns (tokens).
        max_width: the widest column's number of encoded slots.
        d_model, num_heads, num_layers: transformer size.
    """

    n_cols: int
    max_width: int
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2

    @nn.compact
    def __call__(self, z: jax.Array) -> jax.Array:
        b = z.shape[0]
        tokens = nn.Dense(self.n_cols * self.d_model, name="to_tokens")(z).reshape(b, self.n_cols, self.d_model)
        tokens = tokens + self.param("column_embedding", nn.initializers.normal(0.02),
                                     (self.n_cols, self.d_model))
        for i in range(self.num_layers):
            tokens = PreLNBlock(self.d_model, self.num_heads, name=f"block_{i}")(tokens)
        tokens = nn.LayerNorm(epsilon=1e-5, name="final_norm")(tokens)
        # one head per column: (n_cols, d_model, max_width) weights
        w = self.param("head_kernel", nn.initializers.lecun_normal(batch_axis=(0,)),
                       (self.n_cols, self.d_model, self.max_width))
        bias = self.param("head_bias", nn.initializers.zeros, (self.n_cols, self.max_width))
        return jnp.einsum("bcd,cdw->bcw", tokens, w) + bias


class ColumnTokenCritic(nn.Module):
    """A row (+) conditional vector -> ``(score (B,), features (B, d_model))``.

    Attributes:
        index: ``(n_cols, max_in)`` positions into ``concat(row, cond)`` of each column's inputs;
            a position equal to ``len(row) + len(cond)`` is padding (reads a constant 0).
        d_model, num_heads, num_layers: transformer size.
    """

    index: tuple[tuple[int, ...], ...]
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2

    @nn.compact
    def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        b = x.shape[0]
        idx = jnp.asarray(self.index, jnp.int32)
        n_cols, max_in = idx.shape
        padded = jnp.concatenate([x, jnp.zeros((b, 1), x.dtype)], axis=1)
        slots = padded[:, idx]                                           # (B, n_cols, max_in)
        w = self.param("embed_kernel", nn.initializers.lecun_normal(batch_axis=(0,)),
                       (n_cols, max_in, self.d_model))
        bias = self.param("embed_bias", nn.initializers.zeros, (n_cols, self.d_model))
        tokens = jnp.einsum("bci,cid->bcd", slots, w) + bias
        tokens = tokens + self.param("column_embedding", nn.initializers.normal(0.02),
                                     (n_cols, self.d_model))
        cls = jnp.broadcast_to(self.param("cls", nn.initializers.normal(0.02), (1, 1, self.d_model)),
                               (b, 1, self.d_model))
        tokens = jnp.concatenate([cls, tokens], axis=1)
        for i in range(self.num_layers):
            tokens = PreLNBlock(self.d_model, self.num_heads, name=f"block_{i}")(tokens)
        feat = nn.LayerNorm(epsilon=1e-5, name="final_norm")(tokens[:, 0])
        score = nn.Dense(1, name="score")(feat)[:, 0]
        return score, feat


class AuxClassifier(nn.Module):
    """Hidden layers (default four of 256) with LeakyReLU(0.2), then ``num_classes`` logits."""

    num_classes: int
    hidden: Sequence[int] = (256, 256, 256, 256)

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        for i, width in enumerate(self.hidden):
            x = leaky_relu(nn.Dense(width, name=f"hidden_{i}")(x))
        return nn.Dense(self.num_classes, name="logits")(x)


__all__ = ["AuxClassifier", "ColumnTokenCritic", "ColumnTokenGenerator", "PreLNBlock"]
