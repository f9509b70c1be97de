"""Sampling speed of the neural generators on a wide binary table, against GEM's, side by side.

Usage::

    python -m experiments.speed.neural_sampling --out runs/neural-sampling
    python -m experiments.speed.neural_sampling --quick --out runs/neural-sampling-quick

Fits GEM and each neural method (``--methods``, default DP-VAE, DP-WGAN and DP-auto-GAN) on
``data.planted_binary(--rows, --columns)`` (default 1,670 x 1,000, the shape of the wide binary
table the sampling question was asked on) with a short training schedule and the default networks
and matching stage (sampling cost does not depend on how long a model trained), then times
``model.sample(--rows)`` in one process: one untimed first call (it compiles; reported as
``first_seconds``), then ``--repeats`` interleaved rounds over the methods (the order rotates every
round), each ``sample(rows, seed=round)``. Per method: the median and p10/p90 seconds, the
``ratio`` of its median to GEM's median in the same run (the claim: neural sampling at most 3x
GEM's), and ``new_size_seconds``: the first call of another row count (``--other-rows``), which
recompiles only where a program is keyed on the row count. Threads are pinned as every speed
benchmark pins them (``experiments.speed._harness``, default 1). Writes ``report.json`` and
``summary.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from experiments.speed import _harness

METHODS = ("dp-vae", "dp-wgan", "dp-auto-gan")
#: Short schedules: the networks keep their defaults (what sampling runs), training is cut.
SCHEDULES = {
    "gem": dict(max_rounds=2, round_steps=10, final_steps=10, score_samples=300),
    "dp-vae": dict(steps=4, batch_size=16, chunk_size=4),
    "dp-wgan": dict(critic_steps=10, critic_steps_per_generator_step=5, chunk_size=5, batch_size=16),
    "dp-auto-gan": dict(ae_steps=4, critic_steps=10, critic_steps_per_generator_step=5, chunk_size=5),
}


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=pathlib.Path)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=sorted(set(SCHEDULES) - {"gem"}))
    p.add_argument("--rows", type=int, default=1670)
    p.add_argument("--columns", type=int, default=1000)
    p.add_argument("--other-rows", type=int, default=100)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--epsilon", type=float, default=3.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="200 x 40, two repeats (a smoke run)")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.columns, args.other_rows, args.repeats = 200, 40, 50, 2
    return args


def main(argv=None) -> dict:
    args = parse(argv)
    _harness._configure_threads(args.threads, "cpu")
    import warnings

    with warnings.catch_warnings():  # a short schedule's degenerate-release warnings say nothing here
        warnings.simplefilter("ignore")
        return _run(args)


def _run(args: argparse.Namespace) -> dict:
    from dpgen_jax import data, synthesizers

    table = data.planted_binary(args.rows, args.columns, seed=0)
    names = ["gem", *args.methods]
    models, rows = {}, {}
    for name in names:
        t0 = time.perf_counter()
        models[name] = synthesizers.create(name, **SCHEDULES[name]).fit(
            table.frame, table.schema, epsilon=args.epsilon, delta=1e-5, seed=0)
        t1 = time.perf_counter()
        models[name].sample(args.rows, seed=0)
        t2 = time.perf_counter()
        rows[name] = {"method": name, "fit_seconds": t1 - t0, "first_seconds": t2 - t1, "seconds": []}
    for r in range(args.repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            models[name].sample(args.rows, seed=r + 1)
            rows[name]["seconds"].append(time.perf_counter() - t0)
    for name in names:
        t0 = time.perf_counter()
        models[name].sample(args.other_rows, seed=0)
        rows[name]["new_size_seconds"] = time.perf_counter() - t0
        median, p10, p90 = _harness._stats(rows[name]["seconds"])
        rows[name].update(median_seconds=median, p10_seconds=p10, p90_seconds=p90)
    for name in names:
        rows[name]["ratio"] = rows[name]["median_seconds"] / rows["gem"]["median_seconds"]
    report = {"table": f"planted_binary({args.rows}, {args.columns}, seed=0)", "rows_sampled": args.rows,
              "other_rows": args.other_rows, "repeats": args.repeats, "epsilon": args.epsilon,
              "machine": _harness._machine(args.threads), "rows": [rows[n] for n in names]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    lines = [f"Sampling {args.rows} rows of {report['table']} ({args.threads} thread(s), median of "
             f"{args.repeats})", "", "| method | median s | p10-p90 s | ratio to GEM | first call s | "
             f"first call of {args.other_rows} rows s |", "|---|---|---|---|---|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['method']} | {r['median_seconds']:.3f} | {r['p10_seconds']:.3f}-{r['p90_seconds']:.3f} "
                     f"| {r['ratio']:.2f} | {r['first_seconds']:.2f} | {r['new_size_seconds']:.2f} |")
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
