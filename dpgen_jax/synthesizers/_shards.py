"""Secret shards: the partition GS-WGAN and DP-SACTGAN's hook mechanism train their K
discriminators on, the rows a critic draws from its shard, and the shard drawn at each step.

Every private row gets an independent uniform label in {0..K-1} from the secret key (adding or
removing a row moves no other row: every sharded accounting rests on it); the rows are sorted by
label so that each shard is a contiguous slice. Labels, shard sizes and the per-step draws stay
inside the process: never saved, logged or reported. See ``docs/gs-wgan.md``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy


class Shards(NamedTuple):
    """Where each shard sits in the rows sorted by their secret labels (never released)."""

    starts: jax.Array  # (K,) int32
    sizes: jax.Array   # (K,) int32


@functools.partial(jax.jit, static_argnums=(2,))
def partition(x: jax.Array, key: jax.Array, num_shards: int) -> tuple[jax.Array, Shards]:
    """Independent uniform shard labels for the rows of ``x``; the rows sorted by label.

    Returns ``(x_sorted, shards)``: shard k is ``x_sorted[starts[k] : starts[k] + sizes[k]]``.
    Adding or removing a row changes no other row's label (every accounting assumes this).
    """
    labels = jax.random.randint(key, (x.shape[0],), 0, num_shards)
    order = jnp.argsort(labels, stable=True)
    sizes = jnp.bincount(labels, length=num_shards).astype(jnp.int32)
    starts = (jnp.cumsum(sizes) - sizes).astype(jnp.int32)
    return x[order], Shards(starts, sizes)


def shard_batch_indices(key: jax.Array, start: jax.Array, size: jax.Array, batch: int) -> jax.Array:
    """``batch`` row indices inside the shard ``[start, start + size)``, static shape.

    Distinct rows (a uniform random subset, Floyd's algorithm) when the shard holds at least
    ``batch`` rows; uniform draws with replacement inside the shard otherwise. An empty shard
    returns ``start`` (the caller masks those rows out).
    """
    size = jnp.asarray(size, jnp.int32)
    u = jax.random.uniform(key, (2, batch))
    # Floyd: for j = size - batch .. size - 1, t ~ U{0..j}; take t unless already taken, else j.
    j = size - batch + jnp.arange(batch, dtype=jnp.int32)
    t = jnp.minimum((u[0] * (j + 1).astype(jnp.float32)).astype(jnp.int32), j)

    def body(i, chosen):
        dup = jnp.any((chosen == t[i]) & (jnp.arange(batch) < i))
        return chosen.at[i].set(jnp.where(dup, j[i], t[i]))

    floyd = lax.fori_loop(0, batch, body, jnp.zeros(batch, jnp.int32))
    bound = jnp.maximum(size, 1)
    with_replacement = jnp.minimum((u[1] * bound.astype(jnp.float32)).astype(jnp.int32), bound - 1)
    return start + jnp.where(size >= batch, floyd, with_replacement)


def pad_shards(shards: Shards, size: int) -> Shards:
    """K shards padded to ``size`` with empty ones (start 0, size 0): their networks (copies of
    shard 0's, :func:`dpgen_jax.dpsgd.pad_stacked`) train and are dropped; an empty shard's critic sees no
    real row."""
    zeros = jnp.zeros((size - shards.starts.shape[0],), jnp.int32)
    return Shards(jnp.concatenate([shards.starts, zeros]), jnp.concatenate([shards.sizes, zeros]))



def step_keys(key: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``(shard, k_critic, k_z, k_noise)`` of one generator step: the shard is drawn uniformly from
    0..K-1, independently at every step (secret: never logged or released)."""
    k_sel, k_c, k_z, k_noise = jax.random.split(key, 4)
    return jax.random.randint(k_sel, (), 0, k), k_c, k_z, k_noise


def sanitizer_hook(phase) -> privacy.ShardedSanitizerPhase | None:
    """The sanitiser a sharded generator step applies: the accounted ``phase`` (its clip norm and
    noise std; ``steps`` set to 0 so that one compiled step serves a phase of any length),
    or None for a ``NonPrivatePhase`` (no clipping, no noise)."""
    if isinstance(phase, privacy.NonPrivatePhase):
        return None
    _v.instance(privacy.ShardedSanitizerPhase, "the generator's privacy.ShardedSanitizerPhase or a "
                "privacy.NonPrivatePhase", phase=phase)
    if phase.clip_norm is None:
        raise ValueError(f"ShardedSanitizerPhase {phase.name!r} has no clip norm: pass the generator's phase "
                         "with its clip_norm (the sanitiser clips each row to it).")
    return dataclasses.replace(phase, steps=0)


def hooked(rows: jax.Array, key: jax.Array, hook: privacy.ShardedSanitizerPhase | None,
           batch_size: int) -> tuple[jax.Array, float]:
    """``(rows, divisor)`` for a loss summed over the generated rows and divided by ``divisor``:
    with a ``hook`` the rows pass through ``dpsgd.sanitized`` (each row's cotangent clipped to the
    phase's C, Gaussian noise of the phase's ``noise_std``, sigma * 2C, scale 1/B) and the divisor
    is 1; without one the rows are unchanged and the divisor is B (the same mean, no clipping or
    noise)."""
    if hook is None:
        return rows, float(batch_size)
    return dpsgd.sanitized(rows, key, clip_norm=hook.clip_norm, noise_std=hook.noise_std,
                           scale=1.0 / batch_size), 1.0
