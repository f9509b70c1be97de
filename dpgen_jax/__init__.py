"""dpgen_jax: differentially private synthetic tabular data in JAX/Flax.

Sub-packages (see ``DESIGN`` in the docs):

- :mod:`dpgen_jax.data`: public schema, table encoder, dataset loaders.
- :mod:`dpgen_jax.privacy`: ``dp_accounting`` events, composition, calibration, report.
- :mod:`dpgen_jax.dpsgd`: Poisson sampling, per-example clipping (ghost norms, vmap), DP steps.
- :mod:`dpgen_jax.models`: Flax modules.
- :mod:`dpgen_jax.synthesizers`: one module per method.
- :mod:`dpgen_jax.metrics`: the papers' evaluation metrics.
"""

__version__ = "0.1.0"
