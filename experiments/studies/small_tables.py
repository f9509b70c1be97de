"""Small tables: a search of a method's settings on a public stand-in, never on a scored split.

Usage::

    python -m experiments.studies.small_tables --method dp-auto-gan --epsilon 3 --rows 1000 --seeds 0 1 2 \\
        --variants '{}' '{"critic_epochs": 300}' '{"ae_epochs": 100, "critic_epochs": 300}' \\
        --out runs/small-dpautogan

Fits ``--method`` on ``data.adult_like(--rows, seed=s)`` for each seed s (a licence-free table in
Adult's format: the shape of the benchmark's ``adult-small`` without its rows) with each variant
(a JSON object of configuration fields and speed flags, ``{}`` for the defaults), samples as many
rows and scores them against 16,281 held-out ``adult_like`` rows (seed 1,000): TSTR AUROC and the
random-forest salary accuracy of the DP-auto-GAN paper (the issue's bars: 0.60 and 0.774, the
majority rate of Adult's test split being 0.764) and the mean 3-way marginal L1 against the held-out
rows (the benchmark's). ``report.json`` holds every fit, ``summary.md``
the median per variant. This is where small-table defaults are chosen (``docs/recommend.md`` and
the methods' pages say what was searched); Adult's and adult-small's test rows are never read.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time

TEST_ROWS, TEST_SEED = 16_281, 1000


def settings(variant: dict) -> dict:
    """A variant's keyword arguments for ``synthesizers.create``: JSON has no tuples, so a list is
    a tuple field (network widths), as ``--set`` reads it."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in variant.items()}


def run_variant(method: str, variant: dict, rows: int, epsilon: float, seed: int, test) -> dict:
    """One fit of ``method`` with ``variant`` and its scores."""
    from dpgen_jax import data, metrics, synthesizers

    schema = data.adult_schema()
    train = data.adult_like(rows, seed=seed)
    t0 = time.perf_counter()
    model = synthesizers.create(method, **settings(variant)).fit(train, schema, epsilon=epsilon,
                                                                 num_records=rows, seed=seed)
    fit_seconds = time.perf_counter() - t0
    synthetic = model.sample(rows, seed=seed + 10_000)
    try:
        tstr = metrics.tstr_auroc(synthetic, test, schema, label="salary", seed=seed)
    except ValueError:  # a constant synthetic label: no classifier to score
        tstr = None
    rf = metrics.label_accuracy(synthetic, test, schema, label="salary", n_jobs=1)
    l1 = metrics.marginal_l1_3way(test, synthetic, schema)["mean"]
    return {"method": method, "variant": variant, "seed": seed, "rows": rows, "target_epsilon": epsilon,
            "epsilon": model.privacy_report()["epsilon"], "fit_seconds": round(fit_seconds, 1),
            "tstr_auroc": tstr, "rf_accuracy": rf, "l1_3way": l1}


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.small_tables", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--method", required=True)
    p.add_argument("--epsilon", type=float, default=3.0)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--variants", nargs="+", default=["{}"], help="JSON objects of settings ('{}': defaults)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    from dpgen_jax import data

    variants = []
    for text in args.variants:
        try:
            v = json.loads(text)
        except json.JSONDecodeError as exc:
            p.error(f"--variants {text!r} is not JSON: {exc}")
        if not isinstance(v, dict):
            p.error(f"--variants {text!r} must be a JSON object")
        variants.append(v)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    test = data.adult_like(TEST_ROWS, seed=TEST_SEED)
    runs = []
    for v in variants:
        for seed in args.seeds:
            r = run_variant(args.method, v, args.rows, args.epsilon, seed, test)
            print(json.dumps(r), flush=True)
            runs.append(r)
    majority = float(test["salary"].value_counts(normalize=True).max())
    lines = [f"Majority rate of the held-out rows: {majority:.3f}.", "",
             "| variant | TSTR AUROC (median) | RF accuracy (median) | 3-way L1 (median) | fit s |",
             "|---|---|---|---|---|"]
    for v in variants:
        rs = [r for r in runs if r["variant"] == v]
        tstr = [r["tstr_auroc"] for r in rs if r["tstr_auroc"] is not None]
        lines.append(f"| `{json.dumps(v)}` | {statistics.median(tstr) if tstr else float('nan'):.3f} | "
                     f"{statistics.median(r['rf_accuracy'] for r in rs):.3f} | "
                     f"{statistics.median(r['l1_3way'] for r in rs):.3f} | "
                     f"{statistics.median(r['fit_seconds'] for r in rs):.1f} |")
    (out / "report.json").write_text(json.dumps({"method": args.method, "epsilon": args.epsilon, "rows": args.rows,
                                                 "seeds": args.seeds, "majority_rate": majority, "runs": runs}, indent=1))
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return runs


if __name__ == "__main__":
    main()
