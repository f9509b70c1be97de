"""Skewed columns: does every method put a log-normal column's median where the data has it?

Usage::

    python -m experiments.studies.skewed_columns --out runs/skewed-columns \\
        [--methods M ...] [--epsilons 1 3] [--seeds 0 1 2] [--scale log|linear] [--rows 800] \\
        [--cap dp-sactgan gs-wgan --max-seconds 120]

The check of ``scale="log"`` (``docs/data.md``): a generated table of the kind
users bring (:func:`table`: ``--rows`` rows per seed of an income drawn log-normal around
exp(10 + 0.15 x education) and clipped to its public bounds 0-500,000, an age, a sex, an
education and a label ``high`` that rises with the income) is fitted by every method of
``--methods`` (default: every registered one) at each epsilon and seed with the income declared
``scale=--scale``; as many rows as the table are sampled (seed + 10,000, the experiments'
convention) and each cell records the synthetic income median beside the real 30th, 50th and 70th
percentiles, whether it lies between the 30th and the 70th ("inside"), the seconds, and the time
budget (``--max-seconds``, applied only to the methods named in ``--cap``). A method that cannot
fit (e.g. a missing optional dependency) is recorded as an error, with its message.

Every finished cell is one line of ``OUT/cells.jsonl`` (a rerun with the same ``--out`` skips the
cells already there; errors are tried again), and ``OUT/summary.md`` / ``summary.json`` are
rewritten after each cell: per method and epsilon the medians of the seeds and "k/n inside".
The table is generated: its percentiles are not private numbers.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
import warnings

from dpgen_jax import _validate as _v
from experiments import _common

EDU = ("HS", "Some-college", "Bachelors", "Masters", "Doctorate")
LOWER, UPPER = 0.0, 500_000.0
COLUMN = "income"
TABLE_SEED = 1000
"""The table of seed ``s`` is drawn from ``numpy.random.default_rng(TABLE_SEED + s)``."""
KEY = ("method", "epsilon", "seed", "scale", "rows", "max_seconds")
"""What identifies a cell of ``cells.jsonl`` (a rerun skips the cells it finds finished)."""


def table(seed: int, rows: int = 800):
    """The generated table of ``seed``: income lognormal(10 + 0.15 x education index, 1) clipped to
    [0, 500,000], age 18-90, sex 0/1, education (:data:`EDU`), and ``high`` (1 with probability
    sigmoid(1.5 (log income - 10.2)))."""
    import numpy as np
    import pandas as pd

    r = np.random.default_rng(TABLE_SEED + seed)
    edu = r.choice(len(EDU), rows, p=[0.35, 0.25, 0.25, 0.1, 0.05])
    age = r.integers(18, 91, rows)
    income = np.clip(r.lognormal(10 + 0.15 * edu, 1, rows), LOWER, UPPER)
    sex = r.integers(0, 2, rows)
    p = 1 / (1 + np.exp(-(np.log(income) - 10.2) * 1.5))
    high = (r.random(rows) < p).astype(int)
    return pd.DataFrame({COLUMN: income, "age": age, "sex": sex,
                         "education": [EDU[i] for i in edu], "high": high})


def schema(scale: str = "log"):
    """The public schema of :func:`table`, the income declared ``scale``."""
    from dpgen_jax import data

    return data.Schema([
        data.Column(COLUMN, "continuous", lower=LOWER, upper=UPPER, scale=scale),
        data.Column("age", "continuous", lower=17, upper=90, integer=True),
        data.Column("sex", "binary", categories=(0, 1)),
        data.Column("education", "categorical", categories=EDU),
        data.Column("high", "binary", categories=(0, 1), label=True)])


def run_cell(method: str, epsilon: float, seed: int, scale: str, rows: int,
             max_seconds: float | None) -> dict:
    """One fit of ``method`` on :func:`table` (``seed``) and its income median against the real
    percentiles; an exception is recorded as ``status: "error"`` with its message."""
    import numpy as np

    from dpgen_jax import synthesizers

    frame = table(seed, rows)
    p30, p50, p70 = (float(v) for v in np.percentile(frame[COLUMN], [30, 50, 70]))
    cell = {"method": method, "epsilon": epsilon, "seed": seed, "scale": scale, "rows": rows,
            "max_seconds": max_seconds, "p30": p30, "p50": p50, "p70": p70}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a cut schedule's warning: the cell records max_seconds
            model = synthesizers.create(method).fit(frame, schema(scale), epsilon=epsilon, seed=seed,
                                                    num_records=rows, max_seconds=max_seconds)
            synthetic = model.sample(rows, seed=seed + 10_000)
        median = _common.finite_or_none(np.nanmedian(synthetic[COLUMN].astype(float)))
        cell.update(status="ok", median=median, inside=median is not None and p30 <= median <= p70,
                    epsilon_spent=_common.finite_or_none(model.privacy_report()["epsilon"]))
    except Exception as exc:  # noqa: BLE001 -- every method's failure is a result of the study
        cell.update(status="error", error=f"{type(exc).__name__}: {exc}"[:500])
    cell["seconds"] = round(time.perf_counter() - t0, 1)
    return cell


def read_cells(path: pathlib.Path) -> dict[tuple, dict]:
    """The cells of ``cells.jsonl`` by :data:`KEY` (the last line of a key wins)."""
    cells: dict[tuple, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                cell = json.loads(line)
                cells[tuple(cell[k] for k in KEY)] = cell
    return cells


def summarise(cells: list[dict], out: pathlib.Path) -> list[dict]:
    """Per (method, epsilon, scale, rows, time budget): the seeds' medians, the real percentiles, "k/n inside";
    writes ``summary.json`` and ``summary.md`` and returns the rows."""
    groups: dict[tuple, list[dict]] = {}
    for c in cells:
        groups.setdefault(tuple(c[k] for k in KEY if k != "seed"), []).append(c)
    rows = []
    for (method, epsilon, scale, n_rows, max_seconds), cs in groups.items():
        cs = sorted(cs, key=lambda c: c["seed"])
        ok = [c for c in cs if c["status"] == "ok"]
        rows.append({"method": method, "epsilon": epsilon, "scale": scale, "rows": n_rows, "seeds": [c["seed"] for c in cs],
                     "medians": [c.get("median") for c in cs], "p30": [c["p30"] for c in cs],
                     "p70": [c["p70"] for c in cs], "inside": sum(c["inside"] for c in ok), "runs": len(cs),
                     "errors": [c["error"] for c in cs if c["status"] == "error"],
                     "max_seconds": max_seconds, "seconds": [c["seconds"] for c in cs]})
    _common.write_json(out / "summary.json", rows)
    money = lambda v: "error" if v is None else f"{v:,.0f}"  # noqa: E731
    lines = ["Income median of the synthetic rows against the real 30th-70th percentiles "
             "(`experiments.studies.skewed_columns`); real p30-p70 per seed: "
             + "; ".join(f"seed {s}: {money(a)}-{money(b)}" for s, a, b in _real_ranges(cells)) + ".", "",
             "| method | epsilon | scale | medians (per seed) | inside | s per fit | cap s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        cap = "-" if r["max_seconds"] is None else f"{r['max_seconds']:g}"
        lines.append(f"| {r['method']} | {r['epsilon']:g} | {r['scale']} | "
                     + ", ".join(money(m) for m in r["medians"])
                     + f" | {r['inside']}/{r['runs']} | {max(r['seconds']):.0f} | {cap} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return rows


def _real_ranges(cells: list[dict]) -> list[tuple]:
    return sorted({(c["seed"], c["p30"], c["p70"]) for c in cells})


def main(argv=None) -> list[dict]:
    from dpgen_jax import synthesizers

    names = sorted(synthesizers.available())
    p = argparse.ArgumentParser(prog="python -m experiments.studies.skewed_columns", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", nargs="+", default=names, choices=names)
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0], action=_v.flag(_v.positive))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--scale", choices=("log", "linear"), default="log", help="the income column's scale")
    p.add_argument("--rows", type=int, default=800, action=_v.flag(_v.whole, minimum=2),
                   help="rows of the generated table (and of the sample)")
    p.add_argument("--cap", nargs="+", default=[], choices=names, metavar="METHOD",
                   help="methods fitted under --max-seconds (the others run their full schedules)")
    p.add_argument("--max-seconds", type=float, default=None, action=_v.flag(_v.positive),
                   help="the time budget of a fit of a method named in --cap")
    p.add_argument("--out", type=pathlib.Path, required=True)
    args = p.parse_args(argv)
    if args.cap and args.max_seconds is None:
        p.error("--cap names methods to fit under a time budget; expected --max-seconds too.")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "cells.jsonl"
    done = read_cells(path)
    for method in args.methods:
        max_seconds = args.max_seconds if method in args.cap else None
        for epsilon in args.epsilons:
            for seed in args.seeds:
                key = (method, epsilon, seed, args.scale, args.rows, max_seconds)
                if done.get(key, {}).get("status") == "ok":
                    continue
                cell = run_cell(method, epsilon, seed, args.scale, args.rows, max_seconds)
                with path.open("a") as f:
                    f.write(json.dumps(cell, allow_nan=False) + "\n")
                done[key] = cell
                print(json.dumps(cell), flush=True)
                summarise(list(done.values()), args.out)
    rows = summarise(list(done.values()), args.out)
    print((args.out / "summary.md").read_text())
    return rows


if __name__ == "__main__":
    _common.enable_compilation_cache()
    main()
