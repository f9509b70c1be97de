"""Data layer: public schema, table encoder/decoder and dataset loaders.

- :class:`Schema` / :class:`Column`: public column metadata (kinds, ordered categories, bounds)
  with its source and notes for privacy reports; :func:`adult_schema`, :func:`binary_schema`,
  :func:`infer_schema` (data-derived, not end-to-end DP; gaps, id-like and skewed columns noted).
- :class:`TableEncoder`: DataFrame <-> float32 matrix (one-hot, 0/1, [0, 1]-scaled), per-column
  :class:`Block` layout, argmax/sample decoding, integer codes; strict errors on bad input.
  :func:`check_frame` is the one frame-vs-schema check the library uses.
- :func:`uniform_rows`: encoded rows drawn from the public schema alone.
- :func:`model_schema` / :func:`to_model_frame` / :func:`from_model_frame`: a column declared
  ``missing=True`` as the methods model it: a continuous one as its value plus a binary missingness
  indicator (:func:`indicator_name`), a discrete one with one more category for the gap
  (:func:`missing_category`); a continuous column with atoms (point masses) as its value plus a
  state column (:func:`atom_name`, one category per atom).
- :func:`bin_edges` / :func:`bin_index`: public bins of a continuous column from its bounds.
- :class:`BinnedEncoder`: rows one-hot on the same public bins (continuous columns as bin blocks).
- :class:`Discretizer`: every column as a small integer code on public bins, and back (values
  drawn uniformly inside their bin); the domain of marginal-based synthesizers.
- :func:`load_adult` / :func:`fetch_adult` / :func:`find_adult`: UCI Adult
  (doi:10.24432/C5XW20, CC BY 4.0); :func:`adult_ctab_schema` / :func:`load_adult_ctab` /
  :func:`adult_ctab_table`: the same files as the DP-SACTGAN paper's 14-column table (all 48,842
  rows, split 80/20 stratified on income).
- :func:`load_cardio` / :func:`cardio_schema` / :func:`cardio_split` / :func:`find_cardio`: the
  Kaggle cardiovascular-disease table of GS-WGAN's thesis (read from a path, never downloaded);
  :func:`cardio_like`: a seeded stand-in in its format.
- :func:`adult_like`: a seeded, licence-free table in Adult's exact format (a stand-in, not Adult).
- :func:`mimic_like`: a seeded, licence-free stand-in for the MIMIC-III diagnosis matrix.
- :func:`planted_binary`: a seeded all-binary table with planted pairs and triples
  (:class:`PlantedTable`), for wide-table benchmarks.

``docs/data.md`` describes the layer and how to add a dataset.

This sub-package imports nothing else from dpgen_jax.
"""

from dpgen_jax.data._adult import (
    ADULT_COLUMNS,
    ADULT_CTAB_COLUMNS,
    adult_cache_dir,
    adult_ctab_schema,
    adult_ctab_table,
    adult_schema,
    clean_adult_test,
    fetch_adult,
    find_adult,
    load_adult,
    load_adult_ctab,
)
from dpgen_jax.data._adult_like import adult_like
from dpgen_jax.data._bins import BinSpacing, bin_edges, bin_index
from dpgen_jax.data._cardio import (
    CARDIO_COLUMNS,
    cardio_cache_path,
    cardio_like,
    cardio_schema,
    cardio_split,
    find_cardio,
    load_cardio,
)
from dpgen_jax.data._check import check_frame
from dpgen_jax.data._discrete import LOG_SPAN, SPACINGS, BinnedEncoder, Discretizer, auto_spacing
from dpgen_jax.data._files import DRAFT_NOTE_PREFIX, Draft, draft_schema, load_schema, read_csv, read_metadata_yaml, write_csv
from dpgen_jax.data._encoder import (DECODE_MODES, EXACT_INTEGER_SPAN, Block, IntegerResolutionWarning,
                                     TableEncoder)
from dpgen_jax.data._infer import infer_schema
from dpgen_jax.data._missing import (atom_label, from_model_frame, has_missing, has_model_columns, missing_category,
                                     model_schema, off_atoms, to_model_frame)
from dpgen_jax.data._mimic import mimic_like, mimic_like_marginals
from dpgen_jax.data._planted import PlantedTable, planted_binary
from dpgen_jax.data._schema import (
    LOG_RESOLUTION,
    SCALES,
    Column,
    DataDerivedSchemaWarning,
    Schema,
    atom_name,
    binary_schema,
    indicator_name,
)
from dpgen_jax.data._uniform import uniform_rows

__all__ = [
    "ADULT_COLUMNS",
    "ADULT_CTAB_COLUMNS",
    "DECODE_MODES",
    "EXACT_INTEGER_SPAN",
    "BinSpacing",
    "CARDIO_COLUMNS",
    "Block",
    "Column",
    "DRAFT_NOTE_PREFIX",
    "Draft",
    "DataDerivedSchemaWarning",
    "BinnedEncoder",
    "Discretizer",
    "SPACINGS",
    "SCALES",
    "IntegerResolutionWarning",
    "LOG_RESOLUTION",
    "LOG_SPAN",
    "PlantedTable",
    "Schema",
    "TableEncoder",
    "adult_cache_dir",
    "adult_ctab_schema",
    "adult_ctab_table",
    "adult_like",
    "adult_schema",
    "auto_spacing",
    "bin_edges",
    "bin_index",
    "cardio_cache_path",
    "cardio_like",
    "cardio_schema",
    "cardio_split",
    "binary_schema",
    "check_frame",
    "clean_adult_test",
    "draft_schema",
    "fetch_adult",
    "find_adult",
    "find_cardio",
    "infer_schema",
    "load_adult",
    "load_adult_ctab",
    "load_cardio",
    "load_schema",
    "mimic_like",
    "mimic_like_marginals",
    "planted_binary",
    "read_csv",
    "read_metadata_yaml",
    "uniform_rows",
    "atom_label",
    "atom_name",
    "from_model_frame",
    "has_missing",
    "has_model_columns",
    "indicator_name",
    "missing_category",
    "model_schema",
    "off_atoms",
    "to_model_frame",
    "write_csv",
]
