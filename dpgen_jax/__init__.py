"""dpgen_jax: differentially private synthetic tabular data in JAX/Flax.

Sub-packages (see ``docs/architecture.md``):

- :mod:`dpgen_jax.data`: public schema, table encoder, dataset loaders.
- :mod:`dpgen_jax.privacy`: ``dp_accounting`` events, composition, calibration, report.
- :mod:`dpgen_jax.dpsgd`: Poisson sampling, per-example clipping (ghost norms, vmap), DP steps.
- :mod:`dpgen_jax.models`: Flax modules.
- :mod:`dpgen_jax.synthesizers`: one module per method.
- :mod:`dpgen_jax.advice`: which method to fit for a table's public shape and budget (``recommend``).
- :mod:`dpgen_jax.metrics`: the papers' evaluation metrics.
"""

__version__ = "0.1.0"

__all__ = ["library_versions"]


def __getattr__(name: str):
    """``library_versions`` on first use: importing the package (and so the ``dpgen-jax`` command
    line, whose ``--help`` and usage errors must answer at once) loads no module it does not need."""
    if name == "library_versions":
        from dpgen_jax._versions import library_versions

        return library_versions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
