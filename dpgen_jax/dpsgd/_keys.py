"""Randomness: OS entropy unless the user asks for a reproducible, seeded run.

With no seed, every key (initialisation, sampling, noise) is derived from
OS entropy; a user seed makes the run reproducible for research, and the privacy report then says
the noise was seeded and the run is not fit for release. There is never a fixed default key.

This module, :mod:`dpgen_jax.dpsgd._noise` (the Gaussian noise of DP-SGD),
:mod:`dpgen_jax.dpsgd._exact` (released noisy statistics) and :mod:`dpgen_jax.dpsgd._selection`
(the exponential mechanism) own the library's randomness:

- :func:`make_key`: the root key of a run; :func:`shared_key`: the same key on every process;
- :func:`host_rng`: a numpy generator from a JAX key, for draws made on the host (the marginal
  methods' selections and decoding).
"""

from __future__ import annotations

import secrets
from typing import NamedTuple

import jax
import numpy as np

from dpgen_jax._random import host_rng
from dpgen_jax import _validate as _v


class RunKey(NamedTuple):
    """A root key and whether it came from a user seed."""

    key: jax.Array
    seeded: bool


def make_key(seed: int | None = None) -> RunKey:
    """Root key for a run: ``jax.random.key(seed)`` when given, otherwise OS entropy.

    Without a seed every word of the key is drawn from OS entropy (``secrets``) and wrapped with
    ``jax.random.wrap_key_data``: 64 bits for the default Threefry key (an integer seed would keep
    only 32 of them unless 64-bit mode is on). The entropy is never returned or logged.
    """
    if seed is None:
        template = jax.random.key_data(jax.random.key(0))
        words = np.frombuffer(secrets.token_bytes(4 * template.size), dtype=np.uint32)
        return RunKey(jax.random.wrap_key_data(words.reshape(template.shape).copy()), False)
    return RunKey(jax.random.key(_v.integral(seed=seed)), True)


def shared_key(key: jax.Array) -> jax.Array:
    """``key`` as drawn by process 0, on every process (the key itself when there is one process).

    A multi-host run must use one key everywhere: each process samples the batch and draws the
    noise itself, and the copies must agree. With OS-entropy keys (no seed) every process draws a
    different key, so process 0's is broadcast to all (``multihost_utils.broadcast_one_to_all``).
    """
    if jax.process_count() == 1:
        return key
    from jax.experimental import multihost_utils

    data = multihost_utils.broadcast_one_to_all(np.asarray(jax.random.key_data(key)))
    return jax.random.wrap_key_data(np.asarray(data), impl=jax.random.key_impl(key))


__all__ = ["RunKey", "host_rng", "make_key", "shared_key"]
