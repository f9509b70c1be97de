"""Randomness: OS entropy unless the user asks for a reproducible, seeded run.

DESIGN privacy rule 5: with no seed, every key (initialisation, sampling, noise) is derived from
OS entropy; a user seed makes the run reproducible for research, and the privacy report then says
the noise was seeded and the run is not fit for release. There is never a fixed default key.
"""

from __future__ import annotations

import secrets
from typing import NamedTuple

import jax


class RunKey(NamedTuple):
    """A root key and whether it came from a user seed."""

    key: jax.Array
    seeded: bool


def make_key(seed: int | None = None) -> RunKey:
    """Root key for a run: from ``seed`` when given, otherwise 63 bits of OS entropy.

    The entropy-derived seed is never returned or logged.
    """
    if seed is None:
        return RunKey(jax.random.key(secrets.randbits(63)), False)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"Expected seed={seed!r} to be an int or None.")
    return RunKey(jax.random.key(seed), True)
