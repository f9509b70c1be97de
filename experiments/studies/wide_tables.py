"""Wide tables: how far each marginal method follows a table of about a thousand binary columns.

Runs every method on ``planted-binary`` (``data.planted_binary(2000, 1000)``, 50 planted XOR pairs
and 50 pairwise-independent XOR triples; ``experiments/_datasets.py``) and ``mimic-like``
(46,520 x 1,071 binary columns) at one epsilon, each fit in its own process under a time limit,
and scores the synthetic rows against the training rows::

    python -m experiments.studies.wide_tables --epsilon 3 --seeds 0 1 2 --methods independent gem mst aim \\
        --timeout 1800 --out runs/wide

Per cell: ``fit_seconds`` (or ``status: "timeout"`` with the limit, or ``"error"`` with its last
line), and mean L1 distances of normalised marginals on the binary columns: the planted pairs
(``l1_planted_2way``), the planted triples (``l1_planted_3way``), a public random set of 1,000
triples drawn by ``metrics.choose_subsets(d, 3, 1000, seed=0)`` (``l1_random_3way``) and their pooled
mean over all those marginals (``l1_pooled``: the issue's yardstick; on ``mimic-like``, which has
no planted structure, the random triples alone). Each cell samples the dataset's documented number of
training rows where ``advice.BENCHMARK_DATASETS`` records one (planted-binary's 1,600), else as many
as the training rows, which its ``synthetic_rows`` says are not declared public. ``report.json``
holds every cell and the medians over seeds; ``summary.md`` the table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

from experiments import _common

DATASETS = ("planted-binary", "mimic-like")
RANDOM_TRIPLES = 1000
METRICS = ("l1_planted_2way", "l1_planted_3way", "l1_random_3way", "l1_pooled")


def planted_groups(quick: bool):
    """The planted pairs and triples (column names) of the benchmark's ``planted-binary`` table."""
    from dpgen_jax import data
    from experiments import _datasets

    n_rows, n_features = _datasets._planted_shape(quick)
    table = data.planted_binary(n_rows, n_features, seed=_datasets.PLANTED_SEED)
    return [list(p) for p in table.pairs], [list(t) for t in table.triples]


def score(train, synthetic, schema, pairs, triples) -> dict:
    """The cell's L1 distances (see the module docstring)."""
    from dpgen_jax import metrics

    names = schema.names
    random, _ = metrics.choose_subsets(len(names), 3, RANDOM_TRIPLES, 0)
    random = [tuple(names[i] for i in t) for t in random]
    out, pooled = {}, []
    for key, k, given in (("l1_planted_2way", 2, pairs), ("l1_planted_3way", 3, triples),
                          ("l1_random_3way", 3, random)):
        if not given:
            out[key] = None
            continue
        fn = metrics.marginal_l1_2way if k == 2 else metrics.marginal_l1_3way
        res = fn(train, synthetic, schema, **({"pairs": given} if k == 2 else {"triples": given}))
        out[key] = res["mean"]
        pooled += [res["mean"]] * len(given)
    out["l1_pooled"] = float(sum(pooled) / len(pooled))
    return out


def run_cell(dataset: str, method: str, epsilon: float, seed: int, quick: bool) -> dict:
    """One fit and its scores (runs in the child process)."""
    from dpgen_jax import synthesizers
    from experiments import _common, _datasets

    ds = _datasets.DATASETS[dataset]
    schema = ds.schema_for(quick)
    train, _test = ds.load(None, quick)
    overrides, max_seconds = _common.quick_schedule(method) if quick else ({}, None)
    t0 = time.perf_counter()
    model = synthesizers.create(method, **overrides).fit(train, schema, epsilon=epsilon, seed=seed,
                                                         max_seconds=max_seconds)
    fit_seconds = time.perf_counter() - t0
    rows = _common.synthetic_rows(_common.RunSpec(method), len(train), _common.documented_records(dataset, quick))
    synthetic = model.sample(rows["n"], seed=seed)
    pairs, triples = planted_groups(quick) if dataset == "planted-binary" else ([], [])
    return {"dataset": dataset, "method": method, "seed": seed, "target_epsilon": epsilon,
            "epsilon": model.privacy_report()["epsilon"], "status": "done",
            "fit_seconds": round(fit_seconds, 2), "rows": len(train), "columns": len(schema), "synthetic_rows": rows,
            **score(train, synthetic, schema, pairs, triples)}


def _child(args) -> None:
    cell = run_cell(args.dataset, args.method, args.epsilon, args.seed, args.quick)
    pathlib.Path(args.cell_out).write_text(json.dumps(cell, indent=1))


def run(args) -> dict:
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cells = []
    for dataset in args.datasets:
        for method in args.methods:
            for seed in args.seeds:
                path = out / dataset / method / f"seed-{seed}.json"
                if path.exists():
                    cells.append(json.loads(path.read_text()))
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                cmd = [sys.executable, "-m", "experiments.studies.wide_tables", "--child", "--dataset", dataset,
                       "--method", method, "--seed", str(seed), "--epsilon", str(args.epsilon),
                       "--cell-out", str(path)] + (["--quick"] if args.quick else [])
                cell = _common.run_child(cmd, path, args.timeout, dataset=dataset, method=method, seed=seed)
                print(f"[{dataset} {method} seed {seed}] {cell['status']}"
                      + (f" fit {cell['fit_seconds']} s, pooled L1 {cell['l1_pooled']:.3f}"
                         if cell["status"] == "done" else f" ({cell.get('error') or cell.get('seconds')})"),
                      flush=True)
                cells.append(cell)
    summary = []
    for dataset in args.datasets:
        for method in args.methods:
            done = [c for c in cells if c["dataset"] == dataset and c["method"] == method and c["status"] == "done"]
            row = {"dataset": dataset, "method": method, "seeds": len(done),
                   "statuses": sorted({c["status"] for c in cells if c["dataset"] == dataset and c["method"] == method})}
            for key in ("fit_seconds",) + METRICS:
                vals = [c[key] for c in done if c.get(key) is not None]
                row[key] = statistics.median(vals) if vals else None
            summary.append(row)
    rep = {"epsilon": args.epsilon, "seeds": args.seeds, "timeout": args.timeout, "quick": args.quick,
           "cells": cells, "medians": summary}
    (out / "report.json").write_text(json.dumps(rep, indent=1))
    lines = ["| dataset | method | seeds done | fit s | planted 2-way L1 | planted 3-way L1 | random 3-way L1 | pooled L1 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in summary:
        def f(v):
            return "-" if v is None else f"{v:.3f}"
        note = "" if r["seeds"] == len(args.seeds) else f" ({', '.join(r['statuses'])})"
        lines.append(f"| {r['dataset']} | {r['method']} | {r['seeds']}{note} | "
                     f"{'-' if r['fit_seconds'] is None else round(r['fit_seconds'], 1)} | "
                     + " | ".join(f(r[k]) for k in METRICS) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return rep


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.wide_tables", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epsilon", type=float, default=3.0)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--methods", nargs="+", default=["independent", "gem", "mst", "aim"])
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per cell before it is recorded as a timeout")
    p.add_argument("--quick", action="store_true", help="the datasets' quick shapes and tiny schedules (tests)")
    p.add_argument("--out", default=None)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dataset", help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    p.add_argument("--cell-out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args)
        return
    if args.out is None:
        p.error("--out is required")
    run(args)


if __name__ == "__main__":
    main()
