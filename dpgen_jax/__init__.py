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

from dpgen_jax._versions import library_versions

__version__ = "0.1.0"

__all__ = ["library_versions"]
