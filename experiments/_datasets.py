"""The benchmark's datasets: a small registry (:data:`DATASETS`, :func:`register_dataset`) and the
loaders of the built-in datasets (Adult, adult-small, mimic-like, adult-like, cardio, planted-binary).
Their public facts (description, schema, sizes, seeds) are the advice's table,
``dpgen_jax.advice.BENCHMARK_DATASETS``; this module pairs each with its loader (and the papers'
published numbers). ``docs/benchmark.md`` shows how to add one; ``experiments.benchmark`` and
``experiments._leaderboard`` read it.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

from dpgen_jax.advice import BENCHMARK_DATASETS, BenchmarkDataset
from dpgen_jax.advice._datasets import (  # noqa: F401  (read by experiments.studies.wide_tables, adult_dpsactgan)
    ADULT_ROWS,
    ADULT_SMALL_ROWS,
    ADULT_SMALL_SEED,
    CARDIO_LIKE_HEAPING,
    GENERATED,
    PLANTED_SEED,
    PLANTED_TRAIN,
    QUICK_ROWS,
    mimic_shape as _mimic_shape,
    planted_shape as _planted_shape,
)
from experiments import _common


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A benchmark dataset: a loader plus a public schema.

    Attributes:
        name: the name used on the command line and in the folders.
        description: one line for the leaderboard.
        schema: the public schema, or a function ``quick -> schema`` when quick mode changes it.
        load: ``(data_dir, quick) -> (train, test)`` frames of the schema; quick mode returns a few
            hundred rows.
        label: the label column of the predictive metrics (None: those metrics are null).
        published: method -> ``metrics.PublishedResults`` of its paper on this dataset.
    """

    name: str
    description: str
    schema: Any
    load: Callable[[pathlib.Path | None, bool], tuple[Any, Any]]
    label: str | None = None
    published: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    schema_for = BenchmarkDataset.schema_for  # the same rule: a schema, or a function quick -> schema


DATASETS: dict[str, Dataset] = {}


def register_dataset(dataset: Dataset) -> Dataset:
    """Adds a dataset to the suite (a name already taken is an error)."""
    if dataset.name in DATASETS and DATASETS[dataset.name] is not dataset:
        raise ValueError(f"a benchmark dataset named {dataset.name!r} is already registered.")
    DATASETS[dataset.name] = dataset
    return dataset


def _adult(data_dir, quick):
    train, test = _common.load_adult(data_dir)
    if quick:
        return train.iloc[:QUICK_ROWS[0]].reset_index(drop=True), test.iloc[:QUICK_ROWS[1]].reset_index(drop=True)
    return train, test


def _adult_small(data_dir, quick):
    import numpy as np

    train, test = _common.load_adult(data_dir)
    n = QUICK_ROWS[0] // 2 if quick else ADULT_SMALL_ROWS
    rows = np.sort(np.random.default_rng(ADULT_SMALL_SEED).choice(len(train), n, replace=False))
    return train.iloc[rows].reset_index(drop=True), test.iloc[:QUICK_ROWS[1]].reset_index(drop=True) if quick else test


def _mimic_like(data_dir, quick):
    from dpgen_jax import data

    n_rows, n_features = _mimic_shape(quick)
    frame = data.mimic_like(n_rows=n_rows, n_features=n_features, seed=0)
    n_train, n_valid = round(0.6 * n_rows), round(0.2 * n_rows)
    return (frame.iloc[:n_train].reset_index(drop=True),
            frame.iloc[n_train:n_train + n_valid].reset_index(drop=True))


def _adult_like(data_dir, quick):
    from dpgen_jax import data

    n_train, n_test = QUICK_ROWS if quick else ADULT_ROWS
    return data.adult_like(n_train, seed=0), data.adult_like(n_test, seed=1)


def _planted_binary(data_dir, quick):
    """``data.planted_binary`` (seed 0), its rows split 80 / 20 by a permutation drawn with
    ``numpy.random.default_rng(0)``."""
    import numpy as np

    from dpgen_jax import data

    n_rows, n_features = _planted_shape(quick)
    frame = data.planted_binary(n_rows, n_features, seed=PLANTED_SEED).frame
    rows = np.random.default_rng(PLANTED_SEED).permutation(n_rows)
    n_train = round(PLANTED_TRAIN * n_rows)
    return (frame.iloc[np.sort(rows[:n_train])].reset_index(drop=True),
            frame.iloc[np.sort(rows[n_train:])].reset_index(drop=True))


def _cardio(data_dir, quick):
    """The thesis's split of the cardio file found by ``data.find_cardio`` (``$DPGEN_CARDIO_PATH`` or
    the user cache; ``--data-dir`` names Adult's folder): train on 56,000 rows, test on 7,000."""
    from dpgen_jax import data

    train, _validation, test = data.cardio_split(data.load_cardio(None))
    if quick:
        return train.iloc[:QUICK_ROWS[0]].reset_index(drop=True), test.iloc[:QUICK_ROWS[1]].reset_index(drop=True)
    return train, test


def _generated(name):
    """The loader of a generated table of ``advice._datasets.GENERATED`` (quick mode: its first rows)."""
    def load(data_dir, quick):
        from dpgen_jax import data

        g = GENERATED[name]
        if g.generator in ("adult_like", "cardio_like"):
            draw = (data.adult_like if g.generator == "adult_like" else
                    functools.partial(data.cardio_like, heaping=CARDIO_LIKE_HEAPING))
            rows = QUICK_ROWS if quick else (g.train_rows, g.test_rows)
            return draw(rows[0], seed=0), draw(rows[1], seed=1)
        n = g.train_rows + g.test_rows
        frame = (data.planted_binary(n, g.columns, seed=0).frame if g.generator == "planted_binary"
                 else data.mimic_like(n_rows=n, n_features=g.columns, seed=0))
        if quick:
            frame = frame.iloc[:sum(QUICK_ROWS)]
        n_train = QUICK_ROWS[0] if quick else g.train_rows
        return frame.iloc[:n_train].reset_index(drop=True), frame.iloc[n_train:].reset_index(drop=True)
    return load


LOADERS = {"adult": _adult, "adult-small": _adult_small, "mimic-like": _mimic_like, "adult-like": _adult_like,
           "cardio": _cardio, "planted-binary": _planted_binary, **{name: _generated(name) for name in GENERATED}}
"""The loader of each built-in dataset (its facts: ``advice.BENCHMARK_DATASETS``)."""


def _register_builtin() -> None:
    from dpgen_jax import metrics

    published = {"adult": {"dp-auto-gan": metrics.published.DP_AUTO_GAN_ADULT,
                           "dp-sactgan": metrics.published.DP_SACTGAN_ADULT}}
    for name, load in LOADERS.items():
        facts = BENCHMARK_DATASETS[name]
        register_dataset(Dataset(name, facts.description, facts.schema, load, facts.label,
                                 published.get(name, {})))


_register_builtin()
