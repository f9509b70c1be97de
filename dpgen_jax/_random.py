"""Host randomness from JAX keys (a leaf module: it imports nothing of ours, so every layer,
``data`` included, draws its host-side random numbers here).

Device randomness is ``jax.random`` under the keys of :mod:`dpgen_jax.dpsgd` (``make_key``,
``shared_key``) and the Gaussian sampler of ``dpsgd.gaussian_noise``; host draws (the exponential
mechanism's uniform integers, values inside public bins, categories drawn at decoding) come from a
numpy generator built from a JAX key by :func:`host_rng`, which ``dpgen_jax.dpsgd`` re-exports.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def host_rng(key: jax.Array) -> np.random.Generator:
    """A numpy generator seeded with 128 bits drawn from a JAX key (one small compiled call):
    ``PCG64(SeedSequence(words))`` with ``words`` the four uint32 of ``jax.random.bits(key, (4,))``.
    """
    words = np.asarray(jax.random.bits(key, (4,), dtype=jnp.uint32)).tolist()
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


__all__ = ["host_rng"]
