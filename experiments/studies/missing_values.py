"""Missing values: does a method give them back at the real rate, and what do they cost?

Usage::

    python -m experiments.studies.missing_values --method dp-auto-gan --epsilon 1 --seeds 0 1 2 --out runs/missing-dpautogan
    python -m experiments.studies.missing_values --method independent --epsilon 1 --seeds 0 1 2 \
        --dataset adult-like --adult-like-rows 3000 --columns age workclass sex hours-per-week \
        --out runs/missing-independent
    python -m experiments.studies.missing_values --method independent --epsilon 1 --seeds 0 1 2 \
        --dataset adult-like --adult-like-rows 3000 --no-gaps --out runs/missing-independent-none

Takes UCI Adult (or ``--dataset adult-like``, the licence-free stand-in), removes a fraction
``--gaps`` (default 0.2) of the values of one column (``--column``, default hours-per-week) or of
several columns of any kind (``--columns``, e.g. ``age workclass sex hours-per-week``) completely
at random in the training and the test rows (the rows hit are fixed by ``--gap-seed`` and, with
``--columns``, the column's place in the schema: the same for every method and seed), declares
those columns ``missing=True`` in the public schema (``docs/data.md``, "Missing values"), fits the
method, samples a public number of rows (``--num-records N``; else Adult's documented 32,561
training rows, or the adult-like training rows' count, fixed by ``--adult-like-rows``;
``report.json``'s ``synthetic_rows``) and writes the files of the experiment contract
(``experiments/_common.py``) with, under ``missing``, the real and synthetic missing rates of each
column, their absolute difference and the largest one (the goal: within 0.03 per column),
and under ``marginal_l1_3way`` the mean 3-way marginal L1 (a gap counted as one more value).
``--no-gaps`` (or ``--gaps 0``) runs the same table with no value removed and nothing declared
missing: the baseline of the 3-way L1 (the goal: with gaps at most 10 % above it). UCI
Adult: Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import pathlib
import time

from dpgen_jax import _validate as _v
from experiments import _common

DATASETS = ("adult", "adult-like")
SUMMARY_KEYS = _common.SUMMARY_KEYS + ("missing.real_rate", "missing.synthetic_rate", "missing.abs_difference",
                                       "missing.max_abs_difference", "marginal_l1_3way")


def declare_missing(schema, columns):
    """``schema`` with each of ``columns`` (a name or names of columns of any kind) declared
    ``missing=True``."""
    from dpgen_jax import data

    columns = [columns] if isinstance(columns, str) else list(columns)
    unknown = [c for c in columns if c not in schema]
    if unknown:
        raise ValueError(f"--columns: {unknown} are not columns of the schema; its columns are {schema.names}.")
    cols = tuple(dataclasses.replace(c, missing=True) if c.name in columns else c for c in schema)
    return data.Schema(cols, source=schema.source, notes=schema.notes)


def punch_gaps(frame, column: str, rate: float, seed: int):
    """A copy of ``frame`` with about ``rate`` of ``column``'s values missing (completely at random;
    an integer column becomes pandas' nullable ``Int64``, any other non-float column ``object``
    with ``None`` in the gaps)."""
    import numpy as np
    import pandas as pd

    out = frame.copy()
    hit = np.random.default_rng(seed).random(len(out)) < rate
    dtype = out[column].dtype
    if pd.api.types.is_integer_dtype(dtype):
        out[column] = out[column].astype("Int64")
        out.loc[hit, column] = pd.NA
    elif pd.api.types.is_float_dtype(dtype):
        out.loc[hit, column] = np.nan
    else:
        out[column] = out[column].astype(object)
        out.loc[hit, column] = None
    return out


def gap_columns(args) -> list[str]:
    """The columns that get gaps: ``--columns``, else ``--column``; none with ``--gaps 0``."""
    if args.gaps == 0:
        return []
    return list(args.columns) if args.columns else [args.column]


def train_rows(args) -> int:
    """The number of training rows, a public fact of the table: Adult's documented 32,561, or
    two thirds of ``--adult-like-rows`` (the generated stand-in's split in :func:`load`)."""
    return _common.documented_records("adult") if args.dataset == "adult" else round(args.adult_like_rows * 2 / 3)


def load(args):
    """(train, test, schema, dataset name) with the gaps punched."""
    from dpgen_jax import data

    if args.dataset == "adult":
        (train, test), name = _common.load_adult(args.data_dir), "adult"
    else:
        frame = data.adult_like(args.adult_like_rows, seed=7)
        n_train = train_rows(args)
        train, test = frame.iloc[:n_train].reset_index(drop=True), frame.iloc[n_train:].reset_index(drop=True)
        name = f"adult_like(n_rows={args.adult_like_rows}, seed=7)"
    schema = data.adult_schema()
    columns = gap_columns(args)
    if not columns:
        return train, test, schema, f"{name} without gaps"
    schema = declare_missing(schema, columns)
    for column in columns:
        # --column: rows from --gap-seed (training) and --gap-seed + 1 (test), as before; --columns:
        # from --gap-seed + 2 i and + 2 i + 1, i the column's place in the schema (any order of names)
        k = 2 * schema.names.index(column) if args.columns else 0
        train = punch_gaps(train, column, args.gaps, args.gap_seed + k)
        test = punch_gaps(test, column, args.gaps, args.gap_seed + k + 1)
    return train, test, schema, f"{name} with {args.gaps:g} of {', '.join(columns)} missing"


def missing_rates(columns, train, synthetic, gaps: float, gap_seed: int) -> dict:
    """The ``missing`` entry of the report: per column the real (training rows) and synthetic
    missing rates and their absolute difference, and the largest difference."""
    per_column = {}
    for column in columns:
        real_rate = float(train[column].isna().mean())
        syn_rate = float(synthetic[column].isna().mean())
        per_column[column] = {"real_rate": real_rate, "synthetic_rate": syn_rate,
                              "abs_difference": abs(syn_rate - real_rate)}
        print(f"missing rate of {column}: real {real_rate:.4f}, synthetic {syn_rate:.4f}")
    out = {"columns": list(columns), "gaps": gaps, "gap_seed": gap_seed, "per_column": per_column,
           "max_abs_difference": max((r["abs_difference"] for r in per_column.values()), default=None)}
    if len(columns) == 1:  # the single-column report's keys, as before
        out.update(column=columns[0], **per_column[columns[0]])
    return out


def run_one(args, spec: _common.RunSpec, seed, out: pathlib.Path) -> dict:
    t0 = time.perf_counter()
    train, test, schema, dataset = load(args)
    rows = _common.synthetic_rows(spec, len(train), train_rows(args))
    model, synthetic, result, _ = _common.fit_sample_evaluate(
        spec, seed, out, train=train, test=test, schema=schema, n_samples=rows["n"], label="salary")
    missing = missing_rates(gap_columns(args), train, synthetic, args.gaps, args.gap_seed)
    l1_3way = (result.get("marginal_l1_3way") or {}).get("mean")
    print(f"3-way marginal L1: {l1_3way}")
    return _common.finish(out, _common.report(spec, dataset=dataset, seed=seed, model=model,
                                              result=result, t0=t0, missing=missing, synthetic_rows=rows,
                                              marginal_l1_3way=l1_3way))


def main(argv=None):
    from dpgen_jax import data, synthesizers

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--method", default="dp-auto-gan")
    method = pre.parse_known_args(argv)[0].method
    if method not in synthesizers.available():
        raise SystemExit(f"--method={method!r}; expected one of {sorted(synthesizers.available())}.")
    p = _common.parser("python -m experiments.studies.missing_values", __doc__, method)
    p.add_argument("--method", default="dp-auto-gan", choices=sorted(synthesizers.available()))
    p.add_argument("--dataset", choices=DATASETS, default="adult")
    p.add_argument("--adult-like-rows", type=int, default=48842, help="rows of data.adult_like")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--column", default="hours-per-week", help="the one column that gets gaps")
    which.add_argument("--columns", nargs="+", default=None,
                       help="several columns of any kind that get gaps (instead of --column)")
    p.add_argument("--gaps", type=float, default=0.2, action=_v.flag(_v.between, low=0, high=1, high_open=True),
                   help="fraction of each column's values removed, in [0, 1); 0: no gaps (as --no-gaps)")
    p.add_argument("--no-gaps", action="store_true",
                   help="the same table with no value removed and no column declared missing (--gaps 0)")
    p.add_argument("--gap-seed", type=int, default=0, help="which rows lose their value (public)")
    args = p.parse_args(argv)
    if args.no_gaps:
        args.gaps = 0.0
    try:  # a bad column name is a usage error, before anything is written
        declare_missing(data.adult_schema(), gap_columns(args))
    except ValueError as exc:
        p.error(str(exc))
    spec = _common.spec_from_args(args, p)
    return _common.run(spec, args.seeds, args.out, functools.partial(run_one, args), SUMMARY_KEYS)


if __name__ == "__main__":
    _common.enable_compilation_cache()
    main()
