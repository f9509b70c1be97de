"""Two benchmark datasets registered from outside the suite (``--dataset-module tests._bench_datasets``):
how a user adds a table in a few lines, and a broken one whose cells must fail cleanly."""

from experiments import benchmark
from tests import _tables

benchmark.register_dataset(benchmark.Dataset(
    name="tiny-mixed", description="300 + 150 generated mixed rows (tests/_tables.py)",
    schema=_tables.MIXED_SCHEMA,
    load=lambda data_dir, quick: (_tables.mixed_frame(300, 0), _tables.mixed_frame(150, 1))))

benchmark.register_dataset(benchmark.Dataset(
    name="broken", description="a loader whose frames lack column 'd' of the schema",
    schema=_tables.MIXED_SCHEMA,
    load=lambda data_dir, quick: (_tables.mixed_frame(50, 0).drop(columns="d"),
                                  _tables.mixed_frame(20, 1).drop(columns="d"))))
