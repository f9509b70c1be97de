"""The benchmark's datasets: a small registry (:data:`DATASETS`, :func:`register_dataset`) and the
built-in datasets (Adult, adult-small, mimic-like, adult-like, cardio, planted-binary).
``docs/benchmark.md`` shows how to add one; ``experiments.benchmark`` and
``experiments._leaderboard`` read it.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

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

    def schema_for(self, quick: bool):
        return self.schema(quick) if callable(self.schema) else self.schema


DATASETS: dict[str, Dataset] = {}


def register_dataset(dataset: Dataset) -> Dataset:
    """Adds a dataset to the suite (a name already taken is an error)."""
    if dataset.name in DATASETS and DATASETS[dataset.name] is not dataset:
        raise ValueError(f"a benchmark dataset named {dataset.name!r} is already registered.")
    DATASETS[dataset.name] = dataset
    return dataset


QUICK_ROWS = (600, 400)  # quick mode: (train, test) rows
ADULT_SMALL_ROWS, ADULT_SMALL_SEED = 1000, 0


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


def _mimic_shape(quick):
    return (QUICK_ROWS[0] + QUICK_ROWS[1], 12) if quick else (46_520, 1071)


def _mimic_like(data_dir, quick):
    from dpgen_jax import data

    n_rows, n_features = _mimic_shape(quick)
    frame = data.mimic_like(n_rows=n_rows, n_features=n_features, seed=0)
    n_train, n_valid = round(0.6 * n_rows), round(0.2 * n_rows)
    return (frame.iloc[:n_train].reset_index(drop=True),
            frame.iloc[n_train:n_train + n_valid].reset_index(drop=True))


def _adult_like(data_dir, quick):
    from dpgen_jax import data

    n_train, n_test = QUICK_ROWS if quick else (32_561, 16_281)
    return data.adult_like(n_train, seed=0), data.adult_like(n_test, seed=1)


PLANTED_SHAPE, PLANTED_QUICK_SHAPE = (2000, 1000), (400, 60)  # (rows, columns), before the split
PLANTED_SEED, PLANTED_TRAIN = 0, 0.8  # the table's and the split's numpy seed; training share


def _planted_shape(quick):
    return PLANTED_QUICK_SHAPE if quick else PLANTED_SHAPE


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
    from experiments import cardio_gswgan

    train, _validation, test = cardio_gswgan.load_split(None)
    if quick:
        return train.iloc[:QUICK_ROWS[0]].reset_index(drop=True), test.iloc[:QUICK_ROWS[1]].reset_index(drop=True)
    return train, test


def _register_builtin() -> None:
    from dpgen_jax import data, metrics

    adult_published = {"dp-auto-gan": metrics.published.DP_AUTO_GAN_ADULT,
                       "dp-sactgan": metrics.published.DP_SACTGAN_ADULT}
    register_dataset(Dataset("adult", "UCI Adult, train 32,561 / test 16,281 rows", data.adult_schema(),
                             _adult, "salary", adult_published))
    register_dataset(Dataset(
        "adult-small", f"{ADULT_SMALL_ROWS:,} rows drawn from Adult's training rows (numpy seed "
        f"{ADULT_SMALL_SEED}), tested on Adult's 16,281 test rows", data.adult_schema(), _adult_small,
        "salary"))
    register_dataset(Dataset(
        "mimic-like", "MIMIC-like binary stand-in (46,520 x 1,071, seed 0), first 60 % train, next "
        "20 % test", lambda quick: data.binary_schema(_mimic_shape(quick)[1]), _mimic_like))
    register_dataset(Dataset(
        "adult-like", "a licence-free stand-in with Adult's format (data.adult_like; not Adult)",
        data.adult_schema(), _adult_like, "salary"))
    register_dataset(Dataset(
        "cardio", "Kaggle cardiovascular disease (GS-WGAN's thesis table), the thesis's stratified split: "
        "train 56,000 / test 7,000 rows (validation 7,000 unused)", data.cardio_schema(), _cardio, "cardio"))
    register_dataset(Dataset(
        "planted-binary", "all-binary 2,000 x 1,000 with 50 planted pairs and 50 planted triples "
        "(data.planted_binary, seed 0), rows split 80 / 20 at random (seed 0)",
        lambda quick: data.binary_schema(_planted_shape(quick)[1]), _planted_binary))


_register_builtin()
