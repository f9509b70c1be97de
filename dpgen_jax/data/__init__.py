"""Data layer: public schema, table encoder/decoder and dataset loaders.

- :class:`Schema` / :class:`Column`: public column metadata (kinds, ordered categories, bounds)
  with its source and notes for privacy reports; :func:`adult_schema`, :func:`binary_schema`,
  :func:`infer_schema` (data-derived, not end-to-end DP).
- :class:`TableEncoder`: DataFrame <-> float32 matrix (one-hot, 0/1, [0, 1]-scaled), per-column
  :class:`Block` layout, argmax/sample decoding, integer codes; strict errors on bad input.
- :func:`load_adult` / :func:`fetch_adult`: UCI Adult (doi:10.24432/C5XW20, CC BY 4.0).
- :func:`mimic_like`: a seeded, licence-free stand-in for the MIMIC-III diagnosis matrix.

This sub-package imports nothing else from dpgen_jax.
"""

from dpgen_jax.data._adult import (
    ADULT_COLUMNS,
    adult_cache_dir,
    adult_schema,
    clean_adult_test,
    fetch_adult,
    load_adult,
)
from dpgen_jax.data._encoder import Block, TableEncoder
from dpgen_jax.data._mimic import mimic_like, mimic_like_marginals
from dpgen_jax.data._schema import (
    Column,
    DataDerivedSchemaWarning,
    Schema,
    binary_schema,
    infer_schema,
)

__all__ = [
    "ADULT_COLUMNS",
    "Block",
    "Column",
    "DataDerivedSchemaWarning",
    "Schema",
    "TableEncoder",
    "adult_cache_dir",
    "adult_schema",
    "binary_schema",
    "clean_adult_test",
    "fetch_adult",
    "infer_schema",
    "load_adult",
    "mimic_like",
    "mimic_like_marginals",
]
