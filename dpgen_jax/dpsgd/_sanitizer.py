"""The generator-side gradient sanitiser: an identity whose backward pass clips and noises rows.

GS-WGAN (Chen, Orekondy and Fritz 2020, "GS-WGAN: A Gradient-Sanitized Approach for Learning
Differentially Private Generators", NeurIPS) trains the generator without per-example parameter
gradients: the only signal from the private data into the generator is the gradient of the loss
with respect to the generated rows, and that gradient is sanitised where it leaves the
discriminator. :func:`sanitized` places that barrier on a generated batch ``x`` (B rows):

* forward: the identity;
* backward: the incoming cotangent ``g`` (B, ...) is clipped row by row to L2 norm ``clip_norm``
  (C), Gaussian noise of standard deviation ``noise_std`` is added to every coordinate (the
  accounted phase's sigma times the per-row replacement sensitivity 2C: two clipped rows differ by
  at most 2C), and the result is multiplied by ``scale`` (e.g. 1/B for a mean loss).

Every term of a loss that consumes ``x`` (an adversarial term, an information loss, an auxiliary
classifier) sums into one cotangent before the backward rule runs, so noise is added exactly once
per call however many terms there are. What flows on into the generator is a function of the
generator's parameters, its inputs and the sanitised cotangent only: the generator update is
post-processing of one Gaussian release per step. The accounting of that release (which rows a
step's discriminator could have seen) belongs to the caller; for GS-WGAN it is
:class:`dpgen_jax.privacy.ShardedSanitizerPhase` (``docs/gs-wgan.md``).

Noise is the engine's tail-safe generator (:func:`~dpgen_jax.dpsgd.gaussian_noise`), drawn inside
the compiled backward pass; its std is the accounted phase's
(:attr:`dpgen_jax.privacy.ShardedSanitizerPhase.noise_std`, sigma times the per-row sensitivity
2C), passed in by the caller and never computed here.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from dpgen_jax.dpsgd._noise import gaussian_noise
from dpgen_jax import _validate as _v


def sanitize_rows(g: jax.Array, key: jax.Array | None, *, clip_norm: float,
                  noise_std: float, scale: float = 1.0) -> jax.Array:
    """``scale * (clip_C(g_i) + N(0, noise_std^2 I))`` for every row ``g_i`` of ``g``.

    Args:
        g: ``(B, ...)`` per-row gradients (each row flattened for its norm).
        key: the secret noise key; None only with ``noise_std == 0``.
        clip_norm: C > 0.
        noise_std: the accounted phase's noise std, sigma * 2C, >= 0 (0: clipping only, no
            privacy).
        scale: a public factor applied last (1/B for a loss that averages the rows).
    """
    flat = g.reshape(g.shape[0], -1).astype(jnp.float32)
    norms = jnp.sqrt(jnp.sum(flat * flat, axis=1, keepdims=True))
    # min(1, C / norm) with the norm computed in float32; rows of norm 0 stay 0.
    factor = jnp.minimum(1.0, clip_norm / jnp.maximum(norms, jnp.finfo(jnp.float32).tiny))
    out = flat * factor
    if noise_std:
        if key is None:
            raise ValueError("sanitize_rows: a key is required when noise_std > 0.")
        out = out + noise_std * gaussian_noise(key, out.shape)
    return (out * scale).reshape(g.shape).astype(g.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _barrier(x, key_data, clip_norm, noise_std, scale):
    return x


def _barrier_fwd(x, key_data, clip_norm, noise_std, scale):
    return x, key_data


def _barrier_bwd(clip_norm, noise_std, scale, key_data, g):
    key = None if key_data is None else jax.random.wrap_key_data(key_data)
    out = sanitize_rows(g, key, clip_norm=clip_norm, noise_std=noise_std, scale=scale)
    return out, None if key_data is None else jnp.zeros_like(key_data, dtype=jax.dtypes.float0)


_barrier.defvjp(_barrier_fwd, _barrier_bwd)


def sanitized(x: jax.Array, key: jax.Array | None, *, clip_norm: float, noise_std: float,
              scale: float = 1.0) -> jax.Array:
    """``x`` unchanged, with a backward pass that sanitises the gradient per row (module docstring).

    Args:
        x: ``(B, ...)`` generated rows.
        key: the secret noise key of this step (a ``jax.random`` key); None only when
            ``noise_std`` is 0.
        clip_norm: the per-row clip norm C (a Python number > 0).
        noise_std: the std of the noise on each coordinate (a Python number >= 0): the accounted
            phase's ``noise_std``, sigma * 2C (:class:`dpgen_jax.privacy.ShardedSanitizerPhase`).
        scale: multiplies the sanitised cotangent (1/B turns a summed loss into a mean).

    Raises:
        ValueError: a bad clip norm, noise std or scale, or a missing key.
    """
    _v.positive(clip_norm=clip_norm)
    _v.non_negative(noise_std=noise_std)
    _v.positive(allow_inf=True, scale=scale)
    if key is None and noise_std:
        raise ValueError("No key given, but noise_std > 0 needs a secret noise key: pass key=.")
    key_data = None if key is None else jax.random.key_data(key)
    return _barrier(x, key_data, float(clip_norm), float(noise_std), float(scale))


__all__ = ["sanitize_rows", "sanitized"]
