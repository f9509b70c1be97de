"""Versions of dpgen-jax and of the libraries a result depends on, for reports and release files."""

from __future__ import annotations

from importlib import metadata

_DISTRIBUTIONS = ("dpgen-jax", "jax", "jaxlib", "flax", "optax", "dp-accounting", "numpy", "pandas",
                  "scikit-learn")


def library_versions() -> dict[str, str | None]:
    """``{distribution: version}`` for dpgen-jax and its main dependencies (None: not installed)."""
    out: dict[str, str | None] = {}
    for dist in _DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out
