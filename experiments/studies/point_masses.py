"""Point masses: does a declared atom come back at its real share?

The table is ``skewed_columns.table`` (an 800-row census-like table, income log-normal, public
bounds 0-500,000) with a share of the incomes set to exactly 0, and the schema declares the income
``scale="log"`` with ``atoms: [0]`` (``docs/data.md``, "Point masses"). For each method and seed the
study fits at one epsilon and reports the share of exact zeros in the real rows, in as many
synthetic rows as the table has, and in ``--sample`` synthetic rows (the model's share, with little
sampling error), and the share of synthetic incomes strictly between 0 and the first log bin's
upper edge (what a model without the atom puts next to it).

    python -m experiments.studies.point_masses --methods independent mst aim gem --seeds 0 1 2
    python -m experiments.studies.point_masses --methods independent --no-atoms   # the baseline
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

from dpgen_jax import _validate as _v
from experiments.studies import skewed_columns

FIRST_BIN = 207.0
"""The upper edge of the first of 20 log bins of 0-500,000 with the log unit of a thousandth of
the span (``docs/data.md``, "Skewed columns")."""


def table(seed: int, rows: int = 800, zeros: float = 0.11):
    """``skewed_columns.table(seed, rows)`` with ``round(zeros * rows)`` incomes, chosen at random
    (from ``numpy.random.default_rng(5000 + seed)``), set to exactly 0."""
    import numpy as np

    df = skewed_columns.table(seed, rows)
    chosen = np.random.default_rng(5000 + seed).permutation(rows)[: int(round(zeros * rows))]
    df.loc[chosen, skewed_columns.COLUMN] = 0.0
    return df


def schema(atoms: bool = True):
    """``skewed_columns.schema("log")`` with the income's atom 0 declared (or not)."""
    import dataclasses

    from dpgen_jax import data

    s = skewed_columns.schema("log")
    return data.Schema(tuple(dataclasses.replace(c, atoms=(0.0,) if atoms else ())
                             if c.name == skewed_columns.COLUMN else c for c in s.columns))


def run_cell(method: str, seed: int, epsilon: float, atoms: bool, rows: int, sample: int,
             config: dict) -> dict:
    """One fit and its shares of exact zeros (real, ``rows`` and ``sample`` synthetic rows)."""
    from dpgen_jax import synthesizers

    df = table(seed, rows)
    income = skewed_columns.COLUMN
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = synthesizers.create(method, **config).fit(df, schema(atoms), epsilon=epsilon, seed=seed)
        same = model.sample(rows, seed=seed + 10_000)[income]
        many = model.sample(sample, seed=seed + 20_000)[income]
    real = float((df[income] == 0).mean())
    return {"method": method, "seed": seed, "epsilon": epsilon, "atoms": atoms, "config": config,
            "real": round(real, 4), "synthetic": round(float((same == 0).mean()), 4),
            "synthetic_many": round(float((many == 0).mean()), 4),
            "next_to_zero": round(float(((many > 0) & (many < FIRST_BIN)).mean()), 4),
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["independent", "mst", "aim", "gem"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epsilon", type=float, default=1.0, action=_v.flag(_v.positive))
    parser.add_argument("--rows", type=int, default=800, action=_v.flag(_v.whole, minimum=10))
    parser.add_argument("--sample", type=int, default=20_000, action=_v.flag(_v.whole, minimum=1))
    parser.add_argument("--bins", type=int, default=None, action=_v.flag(_v.whole, minimum=2),
                        help="the methods' bins (default: each method's own)")
    parser.add_argument("--no-atoms", action="store_true", help="declare no atom (the baseline)")
    args = parser.parse_args(argv)
    config = {} if args.bins is None else {"bins": args.bins}
    cells = []
    for method in args.methods:
        for seed in args.seeds:
            cell = run_cell(method, seed, args.epsilon, not args.no_atoms, args.rows, args.sample, config)
            print(json.dumps(cell), flush=True)
            cells.append(cell)
    return cells


if __name__ == "__main__":
    main()
