"""Small generated tables for behaviour tests (no data files needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpgen_jax import data

MIXED_SCHEMA = data.Schema.from_dict({"columns": [
    {"name": "a", "kind": "categorical", "categories": ["x", "y", "z"]},
    {"name": "b", "kind": "binary", "categories": ["p", "q"]},
    {"name": "c", "kind": "continuous", "lower": 0, "upper": 99, "integer": True},
    {"name": "d", "kind": "continuous", "lower": -1, "upper": 1}]})


def mixed_frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """``n`` rows of :data:`MIXED_SCHEMA` (one categorical, one binary, two continuous columns)."""
    r = np.random.default_rng(seed)
    return pd.DataFrame({
        "a": r.choice(["x", "y", "z"], n), "b": r.choice(["p", "q"], n).astype(object),
        "c": r.integers(0, 100, n), "d": r.uniform(-1, 1, n)})


def adult_shaped_frame(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` rows of the public Adult schema (``data.adult_like``; no Adult file needed)."""
    return data.adult_like(n, seed=seed)
