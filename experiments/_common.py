"""The contract every experiment module follows: one set of flags, one report, one summary.

Flags (every method, every dataset)::

    (--epsilon E | --preset P) [--delta D] [--seeds S ...] [--data-dir D] [--num-records N]
    [--set FIELD=VALUE ...] [--devices D] [--no-progress] --out DIR

One seed writes into ``DIR``; several write ``DIR/seed-S/`` each and ``DIR/summary.json`` with the
per-seed values and their medians. Every run writes ``report.json`` with the keys of
:data:`REPORT_KEYS` (and method-specific metrics under their own keys), ``synthetic.csv``,
``model.npz`` (the release file), ``metrics.json``, ``summary.md`` and plots.

A run's settings are one typed value, :class:`RunSpec` (built from the flags by
:func:`spec_from_args`, or directly by the benchmark); ``--quick`` modes read each method's smoke
schedule (:func:`quick_schedule`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import shutil
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dpgen_jax import _validate as _v  # every flag's range check (the CLI's too)


REPORT_KEYS = (
    "method", "dataset", "seed", "target_epsilon", "epsilon", "epsilon_paper_accounting",
    "paper_accounting", "delta", "privacy", "rf_salary_accuracy", "tstr_auroc", "jsd", "kl_mu",
    "train_seconds", "flags", "wall_seconds", "versions",
)
"""The keys of every experiment's ``report.json`` (docs/experiments.md)."""

SUMMARY_KEYS = ("epsilon", "epsilon_paper_accounting", "rf_salary_accuracy", "tstr_auroc",
                "jsd.total", "kl_mu.total", "wall_seconds")

PRIVACY_ARGS_HELP = "target epsilon under the headline accountant (PLD); 'inf' trains non-privately"

QUICK_MAX_SECONDS = 5.0
"""The time budget of a ``--quick`` fit of a method without a smoke schedule."""


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What one experiment run fits: the method and the common flags, checked.

    Attributes:
        method: the registry name (``synthesizers.available()``).
        epsilon: the target epsilon (``inf``: non-private), or None with a ``preset``.
        preset: one of the method's published settings, or None.
        delta: delta.
        num_records: a public N for the sampling rates, or None (the row count, reported as
            treated as public).
        overrides: configuration fields and speed flags of the method (``synthesizers.create``).
        devices: fit on a mesh of this many devices (1: no mesh).
        progress: progress bars inside the fit.
        max_seconds: the fit's time budget, or None.
        checkpoint_dir: a directory for the fit's private checkpoints (``fit(checkpoint_dir=...)``,
            methods with ``CHECKPOINTS`` only): a fit that finds checkpoints there continues them
            (``resume=True``), so a run stopped mid-fit loses only the chunks since the last
            checkpoint; deleted once the fit is released. None: no checkpoints.
    """

    method: str
    epsilon: float | None = None
    preset: str | None = None
    delta: float = 1e-5
    num_records: int | None = None
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    devices: int = 1
    progress: bool = True
    max_seconds: float | None = None
    checkpoint_dir: pathlib.Path | None = None


def quick_schedule(method: str) -> tuple[dict[str, Any], float | None]:
    """``(overrides, max_seconds)`` of a ``--quick`` fit of ``method``: its smoke schedule
    (``synthesizers.get(method).SMOKE``) with no time budget, or, for a method without one, its
    defaults under :data:`QUICK_MAX_SECONDS`."""
    from dpgen_jax import synthesizers

    smoke = dict(synthesizers.get(method).SMOKE)
    return smoke, (None if smoke else QUICK_MAX_SECONDS)


def quick_evaluate_options() -> dict[str, Any]:
    """``metrics.evaluate`` options of a ``--quick`` run: a 50-tree forest for the label accuracy."""
    from dpgen_jax import metrics

    return {"label_protocol": metrics.LabelAccuracyProtocol(n_estimators=50)}


def spec_from_args(args, p: argparse.ArgumentParser, *, method: str | None = None,
                   sets: Sequence[str] | None = None, quick: bool = False, **changes) -> RunSpec:
    """The :class:`RunSpec` of the common flags of :func:`parser` (their ranges checked as they
    are parsed; a bad ``--set`` exits through ``p.error``, before anything is written): ``method``
    (default ``args.method``), its ``--set`` values (``sets``, default ``args.overrides``) over
    its smoke schedule with ``quick``, then any field in ``changes``."""
    from dpgen_jax import synthesizers  # the one parser of --set FIELD=VALUE (the CLI's too)

    method = args.method if method is None else method
    devices = getattr(args, "devices", 1)
    try:
        user = synthesizers.config_overrides(method, args.overrides if sets is None else sets)
    except ValueError as exc:
        p.error(str(exc))
    smoke, max_seconds = quick_schedule(method) if quick else ({}, None)
    spec = RunSpec(method=method, epsilon=args.epsilon, preset=args.preset, delta=args.delta,
                   num_records=args.num_records, overrides={**smoke, **user}, devices=devices,
                   progress=not args.no_progress, max_seconds=max_seconds)
    return dataclasses.replace(spec, **changes)


def parser(prog: str, doc: str, method: str, presets: Sequence[str] | None = None
           ) -> argparse.ArgumentParser:
    """The common flags for ``method`` (its presets, or the ``presets`` given)."""
    from dpgen_jax import synthesizers

    cls = synthesizers.get(method)
    choices = sorted(cls.PRESETS) if presets is None else list(presets)
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--epsilon", type=float, action=_v.flag(_v.positive, allow_inf=True),
                       help=PRIVACY_ARGS_HELP)
    group.add_argument("--preset", choices=choices or None, help="a published setting of the method")
    p.add_argument("--delta", type=float, default=1e-5, action=_v.flag(_v.fraction))
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="seeded, reproducible runs (not fit for release); default: one run with "
                        "OS entropy")
    p.add_argument("--data-dir", type=pathlib.Path, default=None,
                   help="folder of the dataset's files (default: the loader's own lookup)")
    p.add_argument("--num-records", type=int, default=None, action=_v.flag(_v.whole, minimum=1),
                   help="a public number of records N for the sampling rates (default: the row "
                        "count, reported as treated as public)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help=f"a {cls.CONFIG.__name__} field, e.g. --set critic_steps=5000, or a speed "
                        "flag the method reads, e.g. --set chunk_size=200 (JSON values: numbers, "
                        "strings, null, lists)")
    p.add_argument("--devices", type=int, default=1, action=_v.flag(_v.whole, minimum=1),
                   help="fit on a mesh of this many devices (fit(mesh=dpsgd.data_mesh(D)), "
                        "docs/scaling.md); on a CPU, D host devices, one per core")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--out", type=pathlib.Path, required=True, help="output folder")
    p.set_defaults(method=method)
    return p


def host_devices(count: int) -> None:
    """Asks XLA for ``count`` CPU host devices (``--xla_force_host_platform_device_count``), which
    works only before JAX has started its backends; raises if JAX then shows fewer devices (JAX
    already started, or a platform other than the CPU with fewer devices)."""
    import os

    flag = f"--xla_force_host_platform_device_count={count}"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    os.environ["XLA_FLAGS"] = " ".join([flag] + flags)
    import jax

    if len(jax.devices()) < count:
        raise RuntimeError(f"--devices={count}: JAX shows {len(jax.devices())} device(s); set "
                           f"XLA_FLAGS={flag} before JAX starts (docs/scaling.md).")


def device_mesh(count: int):
    """``dpsgd.data_mesh(count)`` for ``--devices`` above 1, else None (one device: no mesh)."""
    if count <= 1:
        return None
    from dpgen_jax import dpsgd

    return dpsgd.data_mesh(count)


def enable_compilation_cache() -> None:
    """JAX's persistent compilation cache under the user cache folder: repeated runs (seeds,
    settings with the same shapes and constants) skip XLA compilation."""
    import os

    import jax

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    jax.config.update("jax_compilation_cache_dir", os.path.join(base, "dpgen_jax", "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def run_child(cmd: Sequence[str], path: pathlib.Path, timeout: float, **identity) -> dict:
    """Runs one cell's child process, which writes its cell to ``path`` as JSON, under ``timeout``
    seconds; a failure is recorded in ``path`` instead (``identity`` plus ``status: "error"`` with the
    last line of stderr and the seconds, or ``status: "timeout"``). Returns the cell."""
    import subprocess

    t0 = time.perf_counter()
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            write_json(path, {**identity, "status": "error", "error": last,
                              "seconds": round(time.perf_counter() - t0, 1)})
    except subprocess.TimeoutExpired:
        write_json(path, {**identity, "status": "timeout", "seconds": timeout})
    return json.loads(path.read_text())


def finite_or_none(x):
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def write_json(path: pathlib.Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, allow_nan=False, default=_default))


def _default(o):
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def lookup(report: dict, dotted: str) -> float | None:
    """The finite number at the dotted path of ``report`` (e.g. ``"jsd.total"``), else None."""
    node: Any = report
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return finite_or_none(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def run(spec: RunSpec, seeds: Sequence[int | None] | None, out: pathlib.Path,
        run_one: Callable[[RunSpec, int | None, pathlib.Path], dict],
        summary_keys: Sequence[str] = SUMMARY_KEYS) -> dict:
    """``run_one(spec, seed, folder)`` per seed: one seed into ``out``, several into
    ``out/seed-S/`` with ``out/summary.json`` (per-seed values and medians)."""
    if spec.devices > 1:
        host_devices(spec.devices)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(seeds or [None])
    if len(seeds) == 1:
        return run_one(spec, seeds[0], out)
    reports = {s: run_one(spec, s, out / f"seed-{s}") for s in seeds}
    summary: dict[str, Any] = {"seeds": seeds, "per_seed": {}, "median": {}}
    for key in summary_keys:
        values = {str(s): lookup(r, key) for s, r in reports.items()}
        summary["per_seed"][key] = values
        finite = [v for v in values.values() if v is not None]
        summary["median"][key] = statistics.median(finite) if finite else None
    write_json(out / "summary.json", summary)
    print(json.dumps(summary["median"], indent=2))
    return summary


def print_privacy(report: dict) -> None:
    """The headline lines of a privacy report, for the console."""
    eps = report.get("epsilon")
    paper = report.get("paper_accounting") or {}
    print(f"privacy: epsilon={eps if eps is not None else 'inf (non-private)'} at delta="
          f"{report['delta']} ({report['accountant']}, {report['neighbouring_relation']}); "
          f"paper accounting: {paper.get('epsilon')} ({paper.get('label')})")
    sharded = report.get("sharded_accounting")
    if sharded:
        print(f"  the proven epsilon above; assumed accounting: {sharded['assumed']} "
              f"({sharded['assumed_label']})")
    for ph in report.get("phases", []):
        params = {k: v for k, v in ph.items() if k not in ("name", "mechanism")}
        print(f"  phase {ph['name']}: {ph['mechanism']} {params}")
    for a in report.get("assumptions", []):
        print(f"  - {a}")


def documented_records(dataset: str, quick: bool = False) -> int | None:
    """The documented number of training rows of a benchmark dataset (``advice.BENCHMARK_DATASETS``:
    a published size, e.g. Adult's 32,561), or None: a dataset the table does not record, or
    ``quick`` mode (its rows are a subset of the documented table)."""
    from dpgen_jax.advice import BENCHMARK_DATASETS

    facts = BENCHMARK_DATASETS.get(dataset)
    return None if quick or facts is None else facts.num_records


def synthetic_rows(spec: RunSpec, rows: int, documented: int | None = None) -> dict[str, Any]:
    """How many rows a run samples, and where the number comes from (the report's ``synthetic_rows``).

    As many synthetic rows as training rows would publish their count n in ``synthetic.csv``, a
    private number (privacy rule 10), so a run samples a public N: the ``num_records`` given to the
    fit (``--num-records``), else the dataset's ``documented`` number of training rows
    (:func:`documented_records`). Without either it samples ``rows``, the training rows' count, and
    says so (``public`` False: that count is not declared public and the synthetic rows reveal it).

    Returns:
        ``{"n", "public", "source"}``.
    """
    if spec.num_records is not None:
        return {"n": spec.num_records, "public": True, "source": "the public num_records N given to the fit"}
    if documented is not None:
        return {"n": documented, "public": True, "source": "the dataset's documented number of training rows"}
    return {"n": rows, "public": False,
            "source": "the number of training rows, not declared public (the synthetic rows reveal it; "
                      "--num-records N samples a public N)"}


def fit_sample_evaluate(spec: RunSpec, seed, out: pathlib.Path, *, train, test, schema, n_samples: int,
                        label: str | None = None, published=None, config=None,
                        eval_seed: int | None = None, reuse_real: dict | None = None,
                        evaluate_options: dict | None = None, timings: dict | None = None,
                        sampler=None):
    """Fits ``spec.method``, samples, saves the model and rows, evaluates and writes plots.

    When the fitted model covers only some of the schema's columns (``model.schema``, e.g.
    DP-WGAN's ``preprocessing="paper"``), the real rows are evaluated on those columns too.

    The keyword arguments after ``config`` are optional (the benchmark suite uses them):
    ``eval_seed`` the seed of ``metrics.evaluate``
    (default: the run's seed, 0 for an unseeded run); ``reuse_real`` a previous ``evaluate``
    result on the same real rows whose real-data scores are reused; ``evaluate_options`` more
    keyword arguments of ``metrics.evaluate``; ``timings``, a dict that receives the wall seconds
    of ``fit``, ``sample`` and ``evaluate``; ``sampler``, ``sampler(model, n, seed) -> rows`` in place
    of ``model.sample(n, seed=seed)`` (e.g. a checkpoint chosen on validation rows).

    Returns ``(model, synthetic, metrics_result, privacy_report)``.
    """
    from dpgen_jax import metrics, synthesizers

    out.mkdir(parents=True, exist_ok=True)
    timings = {} if timings is None else timings
    model = synthesizers.create(spec.method, config, **spec.overrides)
    t = time.perf_counter()
    mesh = device_mesh(spec.devices)
    ckpt = spec.checkpoint_dir
    resume = ckpt is not None and ckpt.is_dir() and any(ckpt.iterdir())
    model.fit(train, schema, epsilon=spec.epsilon, delta=spec.delta, preset=spec.preset,
              num_records=spec.num_records, seed=seed, progress=spec.progress,
              max_seconds=spec.max_seconds, mesh=mesh,
              **({} if ckpt is None else dict(checkpoint_dir=ckpt, resume=resume)))
    timings["fit"], timings["resumed"] = time.perf_counter() - t, resume
    if ckpt is not None:  # the checkpoints are secret and no longer needed: the fit is released
        shutil.rmtree(ckpt)
    if model.schema != schema:  # the method models a subset of the columns (e.g. DP-WGAN's "paper")
        schema = model.schema
        train, test = train[schema.names], test[schema.names]
        reuse_real = None  # real-data scores on the full schema do not apply to the subset
    t = time.perf_counter()
    sample_seed = None if seed is None else seed + 10_000
    synthetic = (model.sample(n_samples, seed=sample_seed) if sampler is None
                 else sampler(model, n_samples, sample_seed))
    timings["sample"] = time.perf_counter() - t
    synthetic.to_csv(out / "synthetic.csv", index=False)
    model.save(out / "model.npz")
    t = time.perf_counter()
    result = metrics.evaluate(train, test, synthetic, schema, label=label,
                              seed=(0 if seed is None else seed) if eval_seed is None else eval_seed,
                              reuse_real=reuse_real, **(evaluate_options or {}))
    timings["evaluate"] = time.perf_counter() - t
    privacy = model.privacy_report()
    metrics.write_report(result, out, real=[train, test], synthetic=synthetic, schema=schema,
                         epsilon=privacy["epsilon"], published=published)
    return model, synthetic, result, privacy


def report(spec: RunSpec, *, dataset: str, seed, model, result: dict, t0: float, **extra) -> dict:
    """The ``report.json`` of one run: :data:`REPORT_KEYS`, then method-specific ``extra`` keys."""
    from dpgen_jax import library_versions

    privacy = model.privacy_report()
    paper = privacy.get("paper_accounting") or {}
    label_acc = result.get("label_accuracy") or {}
    tstr = result.get("tstr_auroc") or {}
    out = {
        "method": model.METHOD,
        "dataset": dataset,
        "seed": seed,
        "target_epsilon": finite_or_none(spec.epsilon),
        "epsilon": finite_or_none(privacy["epsilon"]),
        "epsilon_paper_accounting": finite_or_none(paper.get("epsilon")),
        "paper_accounting": paper.get("label"),
        "delta": spec.delta,
        "privacy": privacy,
        "rf_salary_accuracy": label_acc.get("synthetic"),
        "tstr_auroc": tstr.get("synthetic"),
        "jsd": result.get("jsd"),
        "kl_mu": result.get("kl_mu"),
        "train_seconds": dict(model.train_seconds),
        "flags": model.flags.to_dict(),
        "wall_seconds": time.perf_counter() - t0,
        "versions": library_versions(),
    }
    clash = sorted(set(extra) & set(out))
    if clash:
        raise ValueError(f"method-specific report keys {clash} clash with the common keys.")
    out.update(extra)
    return out


def finish(out: pathlib.Path, rep: dict) -> dict:
    """Writes ``report.json`` and prints the privacy report and the headline scores."""
    write_json(out / "report.json", rep)
    print_privacy(rep["privacy"])

    def fmt(v):
        return "n/a" if v is None else f"{v:.4f}"

    jsd = (rep.get("jsd") or {}).get("total")
    print(f"[{out}] {rep['method']} on {rep['dataset']}: RF salary accuracy "
          f"{fmt(rep['rf_salary_accuracy'])}; TSTR AUROC {fmt(rep['tstr_auroc'])}; JSD total "
          f"{fmt(jsd)}; training {sum(rep['train_seconds'].values()):.1f} s; wall "
          f"{rep['wall_seconds']:.1f} s")
    return rep


def load_adult(data_dir):
    """Adult train/test from ``data_dir`` or the library's lookup; fetched when missing."""
    from dpgen_jax import data

    try:
        return data.load_adult(data_dir)
    except FileNotFoundError:
        if data_dir is not None:
            raise
        print("Adult files not found locally: fetching them with data.fetch_adult() ...")
        return data.load_adult(data.fetch_adult())
