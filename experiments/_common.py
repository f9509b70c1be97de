"""Shared plumbing of the DP-auto-GAN experiment modules: arguments, seeds, JSON, summaries."""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import statistics
from typing import Any, Callable

PRIVACY_ARGS_HELP = "target epsilon under the headline accountant (PLD); 'inf' trains non-privately"


def add_common_args(p: argparse.ArgumentParser, presets: list[str]) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--epsilon", type=float, help=PRIVACY_ARGS_HELP)
    group.add_argument("--preset", choices=presets, help="the paper's exact noise and schedule")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--seeds", type=int, nargs="+", default=None,
                   help="seeded, reproducible runs (not fit for release); default: one run "
                        "with OS entropy")
    p.add_argument("--out", type=pathlib.Path, required=True, help="output folder")
    p.add_argument("--critic-clipping", choices=("paired", "real_only"), default="paired",
                   help="clip each real row with its paired fake row (paper) or the real term only")
    p.add_argument("--ae-steps", type=int, default=None, help="override the paper's AE steps")
    p.add_argument("--critic-steps", type=int, default=None, help="override the paper's critic steps")
    p.add_argument("--ae-clip-norm", default=None,
                   help="joint autoencoder clip norm: a number, or 'public-median' (the default rule)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def enable_compilation_cache() -> None:
    """JAX's persistent compilation cache under the user cache folder: repeated runs (seeds,
    settings with the same shapes and constants) skip XLA compilation."""
    import os

    import jax

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    jax.config.update("jax_compilation_cache_dir", os.path.join(base, "dpgen_jax", "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def config_overrides(args) -> dict[str, Any]:
    out: dict[str, Any] = {"critic_clipping": args.critic_clipping}
    if args.ae_steps is not None:
        out["ae_steps"] = args.ae_steps
    if args.critic_steps is not None:
        out["critic_steps"] = args.critic_steps
    if args.ae_clip_norm is not None:
        try:
            out["ae_clip_norm"] = float(args.ae_clip_norm)
        except ValueError:
            out["ae_clip_norm"] = args.ae_clip_norm
    return out


def finite_or_none(x):
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def write_json(path: pathlib.Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, allow_nan=False, default=_default))


def _default(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")


def run_seeds(args, run_one: Callable[[int | None, pathlib.Path], dict],
              summary_keys: tuple[str, ...]) -> dict:
    """Runs ``run_one(seed, out_dir)`` per seed; several seeds go to ``seed-S/`` with a summary."""
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds or [None]
    if len(seeds) == 1:
        return run_one(seeds[0], args.out)
    reports = {}
    for s in seeds:
        reports[s] = run_one(s, args.out / f"seed-{s}")
    summary: dict[str, Any] = {"seeds": seeds, "per_seed": {}, "median": {}}
    for key in summary_keys:
        values = {str(s): _lookup(r, key) for s, r in reports.items()}
        summary["per_seed"][key] = values
        finite = [v for v in values.values() if v is not None]
        summary["median"][key] = statistics.median(finite) if finite else None
    write_json(args.out / "summary.json", summary)
    print(json.dumps(summary["median"], indent=2))
    return summary


def _lookup(report: dict, dotted: str):
    node: Any = report
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return finite_or_none(node) if isinstance(node, (int, float)) else None


def print_privacy(report: dict) -> None:
    """The headline lines of a privacy report, for the console."""
    eps = report.get("epsilon")
    by = report.get("epsilon_by_accountant", {})
    print(f"privacy: epsilon={eps if eps is not None else 'inf (non-private)'} at delta="
          f"{report['delta']} ({report['accountant']}, {report['neighbouring_relation']}); "
          f"paper accounting (RDP, classic conversion): {by.get('rdp_classic')}")
    for ph in report.get("phases", []):
        params = {k: v for k, v in ph.items() if k not in ("name", "mechanism")}
        print(f"  phase {ph['name']}: {ph['mechanism']} {params}")
    for a in report.get("assumptions", []):
        print(f"  - {a}")


def fit_sample_evaluate(args, seed, out: pathlib.Path, config, train, test, schema, n_samples,
                        label=None):
    """Fits DP-auto-GAN, samples, saves the model and synthetic rows, evaluates and writes plots.

    Returns ``(model, synthetic, metrics_result, privacy_report)``.
    """
    from dpgen_jax import metrics
    from dpgen_jax.synthesizers import DPAutoGAN

    out.mkdir(parents=True, exist_ok=True)
    model = DPAutoGAN(config).fit(train, schema, epsilon=args.epsilon, delta=args.delta,
                                  preset=args.preset, seed=seed, progress=not args.no_progress)
    synthetic = model.sample(n_samples, seed=None if seed is None else seed + 10_000)
    synthetic.to_csv(out / "synthetic.csv", index=False)
    model.save(out / "model.npz")
    result = metrics.evaluate(train, test, synthetic, schema, label=label,
                              seed=0 if seed is None else seed)
    privacy = model.privacy_report()
    metrics.write_report(result, out, real=[train, test], synthetic=synthetic, schema=schema,
                         epsilon=privacy["epsilon"])
    return model, synthetic, result, privacy


def privacy_fields(args, privacy: dict) -> dict:
    """The privacy keys every experiment report starts with."""
    return {
        "method": "DP-auto-GAN",
        "target_epsilon": finite_or_none(args.epsilon),
        "epsilon": finite_or_none(privacy["epsilon"]),
        "epsilon_paper_accounting": finite_or_none(
            privacy["epsilon_by_accountant"].get("rdp_classic")),
        "delta": args.delta,
        "privacy": privacy,
    }


def parser(prog: str, doc: str, family: str) -> argparse.ArgumentParser:
    from dpgen_jax.synthesizers.dp_auto_gan import PAPER_PRESETS

    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_common_args(p, [k for k, v in PAPER_PRESETS.items() if v["family"] == family])
    return p


def run(args, p: argparse.ArgumentParser, run_one, summary_keys) -> dict:
    if args.epsilon is not None and not (args.epsilon > 0 or math.isinf(args.epsilon)):
        p.error(f"--epsilon={args.epsilon} must be > 0 or inf")
    return run_seeds(args, lambda s, out: run_one(args, s, out), summary_keys)
