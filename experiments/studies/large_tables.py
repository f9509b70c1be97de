"""A million rows: fit time, peak memory and the privacy report of each method on ``data.adult_like``.

Usage::

    python -m experiments.studies.large_tables --rows 1000000 --epsilon 1 --seed 0 \\
        --methods dp-auto-gan dp-syn --out runs/million

Each method fits in its own process (so its peak memory is its own) on ``data.adult_like(rows,
seed=0)`` (a licence-free table in Adult's format; its row count is public here, so the fit is
given ``num_records=rows``), with its default configuration, under a time limit. Per method
``report.json`` records: the fit's wall seconds; the process's peak resident memory after loading
the table, after encoding it and after the fit (``resource.getrusage``, so "beyond the table" is the
difference); the size of the encoded table; the epsilon of the privacy report against the target;
the planned and executed steps per phase with their batch; and, on 100,000 sampled rows against
100,000 held-out rows (``adult_like(100000, seed=1)``), the 3-way marginal L1 and TSTR AUROC.
``summary.md`` has the table. No n x n object is built anywhere: the test rows and the samples are
scored by histograms and a logistic regression.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import sys
import time

from dpgen_jax import _validate as _v
from experiments import _common

EVAL_ROWS = 100_000


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: kilobytes


def run_cell(method: str, rows: int, epsilon: float, seed: int, overrides: dict) -> dict:
    """One fit and its measurements (runs in the child process)."""
    from dpgen_jax import data, metrics, synthesizers

    schema = data.adult_schema()
    t0 = time.perf_counter()
    train = data.adult_like(rows, seed=0)
    load_seconds = time.perf_counter() - t0
    peak_loaded = _peak_mb()
    encoded_mb = rows * data.TableEncoder(schema).width * 4 / 2**20
    model = synthesizers.create(method, **overrides)
    t0 = time.perf_counter()
    model.fit(train, schema, epsilon=epsilon, num_records=rows, seed=seed)
    fit_seconds = time.perf_counter() - t0
    peak_fit = _peak_mb()
    report = model.privacy_report()
    test = data.adult_like(EVAL_ROWS, seed=1)
    synthetic = model.sample(EVAL_ROWS, seed=seed + 10_000)
    l1 = metrics.marginal_l1_3way(test, synthetic, schema)["mean"]
    tstr = metrics.tstr_auroc(synthetic, test, schema, label="salary", seed=seed)
    phases = [{k: ph.get(k) for k in ("name", "mechanism", "steps", "executed_steps", "batch_size",
                                      "sampling_rate", "noise_multiplier") if k in ph}
              for ph in report.get("phases", [])]
    return {"method": method, "rows": rows, "seed": seed, "status": "done", "target_epsilon": epsilon,
            "epsilon": report["epsilon"], "accountant": report["accountant"],
            "load_seconds": round(load_seconds, 1), "fit_seconds": round(fit_seconds, 1),
            "encoded_table_mb": round(encoded_mb, 1), "peak_mb_after_load": round(peak_loaded, 1),
            "peak_mb_after_fit": round(peak_fit, 1), "peak_mb_beyond_load": round(peak_fit - peak_loaded, 1),
            "train_seconds": dict(model.train_seconds), "phases": phases,
            "l1_3way": l1, "tstr_auroc": tstr, "eval_rows": EVAL_ROWS}


def run(args) -> dict:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cells = []
    for method in args.methods:
        path = out / f"{method}.json"
        cmd = [sys.executable, "-m", "experiments.studies.large_tables", "--child", "--method", method,
               "--rows", str(args.rows), "--epsilon", str(args.epsilon), "--seed", str(args.seed),
               "--cell-out", str(path)] + [x for kv in args.overrides for x in ("--set", kv)]
        cell = _common.run_child(cmd, path, args.timeout, method=method)
        print(json.dumps(cell, indent=1), flush=True)
        cells.append(cell)
    (out / "report.json").write_text(json.dumps({"rows": args.rows, "epsilon": args.epsilon, "seed": args.seed,
                                                 "timeout": args.timeout, "cells": cells}, indent=1))
    lines = ["| method | status | fit s | peak MB after load | peak MB after fit | encoded table MB | epsilon "
             "| 3-way L1 | TSTR AUROC |", "|---|---|---|---|---|---|---|---|---|"]
    for c in cells:
        if c["status"] != "done":
            lines.append(f"| {c['method']} | {c['status']} ({c.get('error') or c.get('seconds')}) |"
                         " | | | | | | |")
            continue
        lines.append(f"| {c['method']} | done | {c['fit_seconds']} | {c['peak_mb_after_load']} | "
                     f"{c['peak_mb_after_fit']} | {c['encoded_table_mb']} | {c['epsilon']:.3f} | "
                     f"{c['l1_3way']:.3f} | {c['tstr_auroc']:.3f} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return cells


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.large_tables", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000, action=_v.flag(_v.whole, minimum=2))
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", nargs="+", default=["dp-auto-gan", "dp-syn"])
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help="a configuration field or speed flag for every method (JSON values)")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per method")
    p.add_argument("--out", default=None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    p.add_argument("--cell-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        from dpgen_jax import synthesizers

        overrides = synthesizers.config_overrides(args.method, args.overrides)
        cell = run_cell(args.method, args.rows, args.epsilon, args.seed, overrides)
        pathlib.Path(args.cell_out).write_text(json.dumps(cell, indent=1, default=float))
        return
    if args.out is None:
        p.error("--out is required")
    run(args)


if __name__ == "__main__":
    main()
