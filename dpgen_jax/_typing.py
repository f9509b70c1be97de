"""Type names shared by every layer (a leaf module: it imports nothing of ours)."""

from __future__ import annotations

from typing import Any

#: A JAX pytree: nested tuples, lists, dicts and NamedTuples of arrays (parameters, states).
PyTree = Any

__all__ = ["PyTree"]
