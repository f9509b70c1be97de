"""How much of the budget the neural generators' one-way marginal matching should take.

The matching stage (docs/matching.md) spends ``matching_share * epsilon`` on a one-way
release and matches every sampled batch to it; the training phases get the rest. The share is a
public choice, so it is chosen here on generated tables only (``data.adult_like`` and
``data.cardio_like`` at several sizes), never on the scored benchmark tables (Adult, cardio).

Usage::

    python -m experiments.studies.matching_share --out runs/matching-share \\
        --methods dp-auto-gan dp-syn dp-vae --shares 0 0.1 0.2 0.35 --epsilons 1 3 --seeds 0 1 2

Every share is one run of ``experiments.benchmark`` over the generated datasets registered here
(``OUT/share-<s>/``, resumable; ``independent`` is run once as the reference, in ``share-0``), and
``OUT/summary.md`` / ``summary.json`` hold the median over seeds of the 3-way marginal L1, TSTR
AUROC, RF accuracy and continuous one-way TV per (dataset, epsilon, method, share).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics

from dpgen_jax import _validate as _v
from experiments import benchmark
from experiments._datasets import DATASETS, Dataset, register_dataset

# name -> (generator, train rows, test rows); the test rows use the next seed
SIZES = {"adult-like-3k": ("adult_like", 3_000, 2_000), "adult-like-12k": ("adult_like", 12_000, 4_000),
         "cardio-like-6k": ("cardio_like", 6_000, 2_000)}
METRICS = ("l1_3way", "tstr_auroc", "rf_accuracy", "tv_continuous")


def _register() -> None:
    from dpgen_jax import data

    schemas = {"adult_like": data.adult_schema, "cardio_like": data.cardio_schema}
    labels = {"adult_like": "salary", "cardio_like": "cardio"}
    for name, (gen, n_train, n_test) in SIZES.items():
        if name in DATASETS:
            continue

        def load(data_dir, quick, gen=gen, n_train=n_train, n_test=n_test):
            make = getattr(data, gen)
            rows = (300, 200) if quick else (n_train, n_test)
            return make(rows[0], seed=0), make(rows[1], seed=1)

        register_dataset(Dataset(name, f"data.{gen}, train {n_train:,} / test {n_test:,} rows (seeds 0 / 1)",
                                 schemas[gen](), load, labels[gen]))


_register()


def _cells(out: pathlib.Path) -> list[dict]:
    found = []
    for path in sorted(out.glob("share-*/*/*/eps-*/seed-*/report.json")):
        share = float(path.parts[-6].removeprefix("share-"))
        rep = json.loads(path.read_text())
        board = rep.get("board") or {}
        rf = next((v for k, v in rep.items() if k.startswith("rf_") and k.endswith("_accuracy")), None)
        found.append({"share": share, "dataset": path.parts[-5], "method": path.parts[-4],
                      "epsilon": float(path.parts[-3].removeprefix("eps-")), "l1_3way": board.get("l1_3way"),
                      "tstr_auroc": board.get("tstr_auroc"), "tv_continuous": board.get("tv_continuous"),
                      "rf_accuracy": rf})
    return found


def summarise(out: pathlib.Path) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for c in _cells(out):
        share = 0.0 if c["method"] == "independent" else c["share"]
        groups.setdefault((c["dataset"], c["epsilon"], c["method"], share), []).append(c)
    rows = []
    for (ds, eps, method, share), cells in sorted(groups.items()):
        row = {"dataset": ds, "epsilon": eps, "method": method, "share": share, "seeds": len(cells)}
        for m in METRICS:
            vals = [c[m] for c in cells if c[m] is not None]
            row[m] = statistics.median(vals) if vals else None
        rows.append(row)
    lines = ["| dataset | epsilon | method | share | seeds | 3-way L1 | TSTR AUROC | RF acc. | TV cont. |",
             "|---|---|---|---|---|---|---|---|---|"]
    fmt = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    for r in rows:
        lines.append(f"| {r['dataset']} | {r['epsilon']:g} | {r['method']} | {r['share']:g} | {r['seeds']} | "
                     + " | ".join(fmt(r[m]) for m in METRICS) + " |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    (out / "summary.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))
    return rows


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.matching_share", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", nargs="+", default=["dp-auto-gan", "dp-syn", "dp-vae"])
    p.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.35])
    p.add_argument("--datasets", nargs="+", default=list(SIZES), choices=list(SIZES))
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0], action=_v.flag(_v.positive))
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--quick", action="store_true", help="tiny tables and schedules (a smoke run)")
    p.add_argument("--out", type=pathlib.Path, required=True)
    args = p.parse_args(argv)
    for s in args.shares:
        if not 0.0 <= s < 1.0:
            p.error(f"--shares: expected values in [0, 1), got {s}")
    for s in args.shares:
        methods = list(args.methods) + (["independent"] if s == 0.0 else [])
        sets = [x for m in args.methods for x in ("--set", f"{m}:matching_share={s:g}")]
        benchmark.main(["--methods", *methods, "--datasets", *args.datasets,
                        "--epsilons", *map(str, args.epsilons), "--seeds", *map(str, args.seeds),
                        "--dataset-module", "experiments.studies.matching_share", *sets, *(["--quick"] if args.quick else []),
                        "--out", str(args.out / f"share-{s:g}")])
    return summarise(args.out)


if __name__ == "__main__":
    main()
