"""The benchmark's datasets: the one table of their public facts (:data:`BENCHMARK_DATASETS`).

Each entry says what a dataset is (name, one-line description, public schema) and, for the
datasets of the committed grid, the facts the advice's evidence records: the training rows N (a
published size) and the majority rate of the test label. The sizes and seeds the benchmark's
loaders draw with (``experiments/_datasets.py``, which pairs each entry with its loader) are the
constants below, so that each is written once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from dpgen_jax import data as data_lib

QUICK_ROWS = (600, 400)
"""The benchmark's quick mode: (train, test) rows."""

ADULT_ROWS = (32_561, 16_281)
"""UCI Adult: (train, test) rows, of ``adult.data`` and ``adult.test``."""

ADULT_SMALL_ROWS, ADULT_SMALL_SEED = 1_000, 0
"""adult-small: the rows drawn from Adult's training rows, and the numpy seed of the draw."""

MIMIC_LIKE_SHAPE = (46_520, 1071)
"""mimic-like: (rows, columns) of ``data.mimic_like`` (seed 0) before the split."""

PLANTED_SHAPE, PLANTED_QUICK_SHAPE = (2000, 1000), (400, 60)
"""planted-binary: (rows, columns) of ``data.planted_binary``, before the split; in quick mode."""

PLANTED_SEED, PLANTED_TRAIN = 0, 0.8
"""planted-binary: the table's and the split's numpy seed; the training share."""


ADULT_LIKE_TEST_ROWS, CARDIO_LIKE_TEST_ROWS, CARDIO_LIKE_HEAPING = 16_281, 7_000, 0.6
"""The generated tables' test rows (``adult_like`` seed 1, ``cardio_like`` seed 1) and the heaped
blood pressures' share of the ``cardio-like`` tables (as on real clinical records)."""


@dataclasses.dataclass(frozen=True)
class GeneratedTable:
    """How a generated table of the evidence grid is drawn (``experiments/_datasets.py`` loads it).

    ``adult_like`` and ``cardio_like``: ``train_rows`` drawn with seed 0, ``test_rows`` with seed 1.
    ``planted_binary`` and ``mimic_like``: one table of ``train_rows + test_rows`` rows and
    ``columns`` columns (seed 0), its first ``train_rows`` rows the training split (its rows are
    independent draws, so the order splits at random).
    """

    generator: str
    train_rows: int
    test_rows: int
    columns: int | None = None


GENERATED: dict[str, GeneratedTable] = {
    "adult-like-500": GeneratedTable("adult_like", 500, ADULT_LIKE_TEST_ROWS),
    "adult-like-5k": GeneratedTable("adult_like", 5_000, ADULT_LIKE_TEST_ROWS),
    "adult-like-200k": GeneratedTable("adult_like", 200_000, ADULT_LIKE_TEST_ROWS),
    "adult-like-1m": GeneratedTable("adult_like", 1_000_000, ADULT_LIKE_TEST_ROWS),
    "cardio-like-3k": GeneratedTable("cardio_like", 3_000, CARDIO_LIKE_TEST_ROWS),
    "planted-binary-30": GeneratedTable("planted_binary", 1_600, 400, 30),
    "planted-binary-100": GeneratedTable("planted_binary", 1_600, 400, 100),
    "planted-binary-300": GeneratedTable("planted_binary", 1_600, 400, 300),
    "mimic-like-100": GeneratedTable("mimic_like", 10_000, 2_000, 100),
}
"""The generated tables of the evidence grid by name: the row counts and widths the benchmark
datasets do not cover (500 to 10^6 rows; 30, 100 and 300 binary columns)."""

# The majority rate of each generated table's test label (``adult_like(16_281, seed=1)``: 12,537
# of 16,281 <=50K; ``cardio_like(7_000, seed=1, heaping=0.6)``: 3,716 of 7,000 cardio = 1); a test
# draws them again.
_ADULT_LIKE_MAJORITY, _CARDIO_LIKE_MAJORITY = 12_537 / ADULT_LIKE_TEST_ROWS, 3_716 / CARDIO_LIKE_TEST_ROWS


def _generated(name: str) -> BenchmarkDataset:
    g = GENERATED[name]
    if g.generator == "adult_like":
        return BenchmarkDataset(
            name, f"data.adult_like: train {g.train_rows:,} rows (seed 0), test {g.test_rows:,} (seed 1); not Adult",
            data_lib.adult_schema(), g.train_rows, _ADULT_LIKE_MAJORITY,
            f"generated: data.adult_like({g.train_rows}, seed=0); its test rows adult_like({g.test_rows}, seed=1) "
            f"hold 12,537 of {g.test_rows:,} with salary <=50K")
    if g.generator == "cardio_like":
        return BenchmarkDataset(
            name, f"data.cardio_like with {CARDIO_LIKE_HEAPING:.0%} heaped blood pressures: train "
            f"{g.train_rows:,} rows (seed 0), test {g.test_rows:,} (seed 1); not cardio",
            data_lib.cardio_schema(), g.train_rows, _CARDIO_LIKE_MAJORITY,
            f"generated: data.cardio_like({g.train_rows}, seed=0, heaping={CARDIO_LIKE_HEAPING}); its test rows "
            f"(seed 1) hold 3,716 of {g.test_rows:,} with cardio = 1")
    return BenchmarkDataset(
        name, f"data.{g.generator}({g.train_rows + g.test_rows:,} rows, {g.columns} columns, seed 0): first "
        f"{g.train_rows:,} rows train, the rest test; no label", data_lib.binary_schema(g.columns), g.train_rows,
        None, f"generated: data.{g.generator}, the first {g.train_rows:,} of {g.train_rows + g.test_rows:,} rows")


def mimic_shape(quick: bool) -> tuple[int, int]:
    """mimic-like's (rows, columns) before the split (quick mode: the quick rows, 12 columns)."""
    return (QUICK_ROWS[0] + QUICK_ROWS[1], 12) if quick else MIMIC_LIKE_SHAPE


def planted_shape(quick: bool) -> tuple[int, int]:
    """planted-binary's (rows, columns) before the split."""
    return PLANTED_QUICK_SHAPE if quick else PLANTED_SHAPE


@dataclasses.dataclass(frozen=True)
class BenchmarkDataset:
    """The public facts of one benchmark dataset.

    Attributes:
        name: the name used on the command line, in the grid's folders and in the evidence.
        description: one line for the leaderboard.
        schema: the public schema, or a function ``quick -> schema`` when the benchmark's quick
            mode changes it.
        num_records: the training rows N the benchmark fits on (a published size); None when the
            evidence does not record the dataset.
        majority_rate: the share of the most frequent label in the benchmark's test rows (what a
            classifier that always predicts that label scores); None as ``num_records``.
        source: where ``num_records`` and ``majority_rate`` come from, in words.
    """

    name: str
    description: str
    schema: data_lib.Schema | Callable[[bool], data_lib.Schema]
    num_records: int | None = None
    majority_rate: float | None = None
    source: str | None = None

    def schema_for(self, quick: bool = False) -> data_lib.Schema:
        """The public schema (of quick mode's table with ``quick``)."""
        return self.schema(quick) if callable(self.schema) else self.schema

    @property
    def label(self) -> str | None:
        """The label column of the predictive metrics: the full schema's label (None: no label)."""
        return self.schema_for(False).label


_ADULT_TEST_MAJORITY = 12_435  # adult.test rows with salary <=50K

BENCHMARK_DATASETS: dict[str, BenchmarkDataset] = {
    d.name: d for d in (
        BenchmarkDataset(
            "adult", f"UCI Adult, train {ADULT_ROWS[0]:,} / test {ADULT_ROWS[1]:,} rows", data_lib.adult_schema(),
            ADULT_ROWS[0], _ADULT_TEST_MAJORITY / ADULT_ROWS[1],
            f"UCI Adult: the {ADULT_ROWS[0]:,} rows of adult.data; its test rows adult.test hold "
            f"{_ADULT_TEST_MAJORITY:,} of {ADULT_ROWS[1]:,} with salary <=50K"),
        BenchmarkDataset(
            "adult-small", f"{ADULT_SMALL_ROWS:,} rows drawn from Adult's training rows (numpy seed "
            f"{ADULT_SMALL_SEED}), tested on Adult's {ADULT_ROWS[1]:,} test rows", data_lib.adult_schema(),
            ADULT_SMALL_ROWS, _ADULT_TEST_MAJORITY / ADULT_ROWS[1],
            f"{ADULT_SMALL_ROWS:,} of Adult's training rows (numpy seed {ADULT_SMALL_SEED}), tested on Adult's "
            f"{ADULT_ROWS[1]:,} test rows"),
        BenchmarkDataset(
            "mimic-like", f"MIMIC-like binary stand-in ({MIMIC_LIKE_SHAPE[0]:,} x {MIMIC_LIKE_SHAPE[1]:,}, seed 0), "
            "first 60 % train, next 20 % test", lambda quick: data_lib.binary_schema(mimic_shape(quick)[1])),
        BenchmarkDataset(
            "adult-like", "a licence-free stand-in with Adult's format (data.adult_like; not Adult)",
            data_lib.adult_schema()),
        BenchmarkDataset(
            "cardio", "Kaggle cardiovascular disease (GS-WGAN's thesis table), the thesis's stratified split: "
            "train 56,000 / test 7,000 rows (validation 7,000 unused)", data_lib.cardio_schema(),
            56_000, 3_502 / 7_000,
            "Kaggle's cardiovascular table (70,000 rows) in the GS-WGAN thesis's stratified split: "
            "56,000 training rows; 3,502 of the 7,000 test rows have cardio = 0"),
        BenchmarkDataset(
            "planted-binary", f"all-binary {PLANTED_SHAPE[0]:,} x {PLANTED_SHAPE[1]:,} with 50 planted pairs and "
            f"50 planted triples (data.planted_binary, seed {PLANTED_SEED}), rows split "
            f"{round(100 * PLANTED_TRAIN)} / {round(100 * (1 - PLANTED_TRAIN))} at random (seed {PLANTED_SEED})",
            lambda quick: data_lib.binary_schema(planted_shape(quick)[1]), round(PLANTED_TRAIN * PLANTED_SHAPE[0]),
            None, f"generated: data.planted_binary({PLANTED_SHAPE[0]}, {PLANTED_SHAPE[1]}, seed={PLANTED_SEED}), "
            f"{round(100 * PLANTED_TRAIN)} % of its rows; no label"),
        *(_generated(name) for name in GENERATED),
    )
}
"""The built-in benchmark datasets by name; ``experiments/_datasets.py`` loads each (its loader and the
papers' published numbers beside it). The evidence (``build_evidence``) needs ``num_records`` and
``majority_rate`` of every dataset of the grid."""
