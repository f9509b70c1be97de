"""Randomness: OS entropy unless the user asks for a reproducible, seeded run.

With no seed, every key (initialisation, sampling, noise) is derived from
OS entropy; a user seed makes the run reproducible for research, and the privacy report then says
the noise was seeded and the run is not fit for release. There is never a fixed default key.
"""

from __future__ import annotations

import secrets
from typing import NamedTuple

import jax
import numpy as np


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
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"Expected seed={seed!r} to be an int or None.")
    return RunKey(jax.random.key(seed), True)
