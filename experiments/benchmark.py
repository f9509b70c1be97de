"""The benchmark suite: every synthesizer on every dataset and epsilon, one leaderboard.

Usage::

    python -m experiments.benchmark --datasets adult --epsilons 0.36 0.51 1.01 --seeds 0 1 2 \\
        --out runs/benchmark
    python -m experiments.benchmark --datasets adult-small --epsilons 3 --seeds 0 1 2 --out runs/benchmark
    python -m experiments.benchmark --quick --out runs/benchmark-quick        # seconds per cell (CI)
    python -m experiments.benchmark --leaderboard-only --out runs/benchmark   # rebuild the tables

Every cell (dataset, method, epsilon, seed) fits the method at its default schedule (plus any
``--set METHOD:FIELD=VALUE``; with ``--quick``, its smoke schedule ``SMOKE`` on a few hundred rows,
or its defaults under a 5-second budget for a method without one), samples as many rows as the training split, evaluates them with
``metrics.evaluate`` and writes its folder ``OUT/<dataset>/<method>/eps-<epsilon>/seed-<seed>/``
with the files of the experiment contract (``report.json`` ...). A cell is done when its
``report.json`` exists: a rerun skips it, so the grid can be built over several sessions and a
method that lands later is added by running the suite again. A cell that fails writes
``error.json`` (retried by the next run). ``--max-fit-seconds S`` gives every fit the time budget
``max_seconds=S``; a cell whose schedule it cut says ``capped`` in its report (``benchmark.capped``),
its leaderboard row and the advice's evidence. After every cell ``OUT/leaderboard.json`` and
``OUT/leaderboard.md`` are rebuilt from every finished cell, and at the end of the run the plots in
``OUT/plots/`` (``experiments/_leaderboard.py``). Datasets are a small registry
(:data:`DATASETS`, :func:`register_dataset`, in ``experiments/_datasets.py``); ``docs/benchmark.md`` shows how to add one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from dpgen_jax import _validate as _v
from experiments import _common
from experiments._datasets import DATASETS, Dataset, register_dataset  # noqa: F401  (benchmark.register_dataset, docs/benchmark.md)

# ----------------------------------------------------------------------------- cells

EVAL_SEED = 0
"""One evaluation seed for every cell: the forests and triples of ``metrics.evaluate`` are the same
for every method and run seed, so differences between cells come from the synthetic rows."""


def cell_dir(out: pathlib.Path, dataset: str, method: str, epsilon: float, seed: int) -> pathlib.Path:
    return out / dataset / method / f"eps-{epsilon:g}" / f"seed-{seed}"


def _real_cache(out: pathlib.Path, dataset: str) -> pathlib.Path:
    return out / dataset / "real_scores.json"


def run_cell(ds: Dataset, split, spec: _common.RunSpec, seed: int, out: pathlib.Path, *,
             quick: bool, command: str) -> dict:
    """Fits, samples, evaluates and writes one cell (``spec``: the method, its target epsilon,
    delta and overrides); returns its ``report.json``."""
    from dpgen_jax import metrics

    train, test = split
    schema = ds.schema_for(quick)
    d = cell_dir(out, ds.name, spec.method, spec.epsilon, seed)
    cache = _real_cache(out, ds.name)
    prior = json.loads(cache.read_text()) if cache.exists() else None
    options = _common.quick_evaluate_options() if quick else {}
    from experiments._leaderboard import machine

    machine = machine()
    t0, timings = time.perf_counter(), {}
    rows = _common.synthetic_rows(spec, len(train), _common.documented_records(ds.name, quick))
    kwargs = dict(train=train, test=test, schema=schema, n_samples=rows["n"], label=ds.label,
                  published=ds.published.get(spec.method), eval_seed=EVAL_SEED,
                  evaluate_options=options, timings=timings)
    try:
        model, _, result, privacy = _common.fit_sample_evaluate(spec, seed, d, reuse_real=prior, **kwargs)
    except metrics.RealScoresMismatch:  # the cached real scores are another run's: recompute them
        model, _, result, privacy = _common.fit_sample_evaluate(spec, seed, d, **kwargs)
        prior = None
    if prior is None:
        _common.write_json(cache, result)
    rep = _common.report(
        spec, dataset=ds.name, seed=seed, model=model, result=result, t0=t0,
        accountant=privacy["accountant"], fit_seconds=timings["fit"],
        evaluate_seconds=timings["evaluate"], tv_1way=result.get("tv_1way"),
        marginal_l1_3way=result.get("marginal_l1_3way"),
        dimension_wise_summary=result.get("dimension_wise_summary"), synthetic_rows=rows,
        board={c.key: _common.lookup(result, c.path) for m in metrics.METRICS for c in m.board},
        benchmark={"quick": quick, "overrides": dict(spec.overrides), "eval_seed": EVAL_SEED,
                   "command": command, "machine_at_start": machine,
                   "fit_resumed": timings["resumed"], "max_fit_seconds": spec.max_seconds,
                   "capped": capped(model)})
    _common.write_json(d / "report.json", rep)
    (d / "error.json").unlink(missing_ok=True)
    return rep


def capped(model) -> bool:
    """Whether a time budget cut the fit's schedule (fewer steps executed than planned in some
    phase, ``Plan.cut_steps``; the privacy report accounts for the executed ones)."""
    return bool(model.fitted_plan.cut_steps(model.fitted_release))


def parse_sets(pairs: Sequence[str], methods: Sequence[str]) -> dict[str, list[str]]:
    """``["METHOD:FIELD=VALUE", ...]`` -> ``{method: ["FIELD=VALUE", ...]}``."""
    out: dict[str, list[str]] = {m: [] for m in methods}
    for pair in pairs:
        method, sep, rest = pair.partition(":")
        if not sep or method not in out:
            raise ValueError(f"--set {pair!r}: expected METHOD:FIELD=VALUE with METHOD one of {list(methods)}.")
        out[method].append(rest)
    return out


def main(argv=None) -> dict:
    from dpgen_jax import synthesizers

    p = argparse.ArgumentParser(prog="python -m experiments.benchmark", description=__doc__.split("\n\n")[0])
    p.add_argument("--methods", nargs="+", default=None,
                   help=f"registered methods (default: every one that can fit here): {sorted(synthesizers.available())}")
    p.add_argument("--datasets", nargs="+", default=None, help="default: adult (adult-like with --quick)")
    p.add_argument("--epsilons", type=float, nargs="+", default=None, action=_v.flag(_v.positive),
                   help="default: 0.36 0.51 1.01 (1.0 with --quick)")
    p.add_argument("--seeds", type=int, nargs="+", default=None, help="default: 0 1 2 (0 with --quick)")
    p.add_argument("--delta", type=float, default=1e-5, action=_v.flag(_v.fraction))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="METHOD:FIELD=VALUE",
                   help="a configuration field of one method, e.g. --set mst:bins=32")
    p.add_argument("--data-dir", type=pathlib.Path, default=None, help="folder of Adult's files")
    p.add_argument("--dataset-module", action="append", default=[],
                   help="a module to import first (it registers more datasets)")
    p.add_argument("--quick", action="store_true", help="tiny data and schedules: seconds per cell (CI)")
    p.add_argument("--progress", action="store_true", help="progress bars inside each fit too")
    p.add_argument("--leaderboard-only", action="store_true", help="only rebuild the leaderboard")
    p.add_argument("--resume-fits", action="store_true",
                   help="checkpoint the fits of methods that can (in the cell's folder, deleted once the fit "
                        "ends), so a run stopped mid-fit continues that fit when run again")
    p.add_argument("--max-fit-seconds", type=float, default=None, action=_v.flag(_v.positive),
                   help="a time budget for every fit (the method's max_seconds: the steps each phase may "
                        "run are fixed before training from a public stand-in; a cell cut short is marked "
                        "capped in its report, the leaderboard and the advice's evidence)")
    p.add_argument("--out", type=pathlib.Path, required=True)
    args = p.parse_args(argv)
    import importlib

    for module in args.dataset_module:
        importlib.import_module(module)
    from experiments import _leaderboard

    command = "python -m experiments.benchmark " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.leaderboard_only:
        return _leaderboard.write(args.out, command)
    datasets = args.datasets or (["adult-like"] if args.quick else ["adult"])
    unknown = [d for d in datasets if d not in DATASETS]
    methods = args.methods or [m for m in synthesizers.available()
                               if synthesizers.get(m).unavailable_reason() is None]
    unknown += [m for m in methods if m not in synthesizers.available()]
    if unknown:
        p.error(f"unknown dataset(s) or method(s) {unknown}; datasets: {sorted(DATASETS)}, methods: "
                f"{sorted(synthesizers.available())}")
    epsilons = args.epsilons or ([1.0] if args.quick else [0.36, 0.51, 1.01])
    seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1, 2])
    specs: dict[str, _common.RunSpec] = {}
    try:
        sets = parse_sets(args.overrides, methods)
        for m in methods:  # --quick: the method's smoke schedule (none: its defaults under a budget)
            smoke, max_seconds = _common.quick_schedule(m) if args.quick else ({}, None)
            max_seconds = max_seconds if args.max_fit_seconds is None else args.max_fit_seconds
            if args.resume_fits and max_seconds is not None and synthesizers.get(m).CHECKPOINTS:
                raise ValueError(f"--resume-fits: {m}'s fit runs under a time budget (--quick or "
                                 "--max-fit-seconds), which would pause a checkpointed fit; leave out one of them")
            specs[m] = _common.RunSpec(
                method=m, delta=args.delta, overrides={**smoke, **synthesizers.config_overrides(m, sets[m])},
                progress=args.progress, max_seconds=max_seconds)
    except ValueError as exc:
        p.error(str(exc))
    runnable = []
    for m in methods:
        reason = synthesizers.get(m).unavailable_reason()
        if reason is not None:
            print(f"benchmark: skipping {m}: {reason}")
        else:
            runnable.append(m)
    cells = [(ds, m, e, s) for ds in datasets for e in epsilons for m in runnable for s in seeds]
    todo = [c for c in cells if not (cell_dir(args.out, *c) / "report.json").exists()]
    print(f"benchmark: {len(cells)} cells, {len(cells) - len(todo)} already done, {len(todo)} to run "
          f"({'quick' if args.quick else 'full'} mode) into {args.out}")
    from tqdm.auto import tqdm

    splits: dict[str, Any] = {}
    bar = tqdm(todo, desc="cells", unit="cell")
    for ds_name, method, eps, seed in bar:
        bar.set_postfix_str(f"{ds_name} {method} eps={eps:g} seed={seed}")
        ds = DATASETS[ds_name]
        if ds_name not in splits:
            splits[ds_name] = ds.load(args.data_dir, args.quick)
        d = cell_dir(args.out, ds_name, method, eps, seed)
        resumable = args.resume_fits and synthesizers.get(method).CHECKPOINTS
        try:
            rep = run_cell(ds, splits[ds_name], dataclasses.replace(
                specs[method], epsilon=eps, checkpoint_dir=d / "checkpoint" if resumable else None), seed,
                args.out, quick=args.quick, command=command)
            bar.write(f"[{ds_name} {method} eps={eps:g} seed={seed}] RF {rep['rf_salary_accuracy']}, "
                      f"epsilon {rep['epsilon']} ({rep['accountant']}), fit {rep['fit_seconds']:.1f} s, "
                      f"cell {rep['wall_seconds']:.1f} s")
        except Exception as exc:  # noqa: BLE001 - a failed cell is recorded, the grid goes on
            d.mkdir(parents=True, exist_ok=True)
            _common.write_json(d / "error.json", {
                "dataset": ds_name, "method": method, "target_epsilon": eps, "seed": seed,
                "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(),
                "command": command})
            bar.write(f"[{ds_name} {method} eps={eps:g} seed={seed}] FAILED: {type(exc).__name__}: {exc}")
        _leaderboard.write(args.out, command, with_plots=False)  # the tables after every cell
    return _leaderboard.write(args.out, command)


if __name__ == "__main__":
    _common.enable_compilation_cache()  # command-line runs only: it sets global JAX config
    main()
