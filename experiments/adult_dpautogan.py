"""DP-auto-GAN on UCI Adult: the paper's schedule, evaluation and privacy report (Tables 2, 3, 6).

Usage::

    python -m experiments.adult_dpautogan --epsilon 1.01 --out runs/adult
    python -m experiments.adult_dpautogan --preset paper-0.51 --seeds 0 1 2 --out runs/adult-0.51

Trains on the 32,561 ``adult.data`` rows (10,000 autoencoder + 15,000 critic steps), samples
32,561 rows, evaluates against the 16,281 ``adult.test`` rows and writes ``report.json``,
``synthetic.csv``, ``metrics.json`` and plots (per seed under ``seed-S/`` when several seeds are
given, with ``summary.json``). Missing Adult files are fetched with ``data.fetch_adult``.
UCI Adult: Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import time

from experiments import _common

SUMMARY_KEYS = ("epsilon", "epsilon_paper_accounting", "rf_salary_accuracy", "jsd.total",
                "kl_mu.total", "train_seconds.autoencoder", "train_seconds.gan", "wall_seconds")


def _load(data_dir):
    from dpgen_jax import data

    try:
        return data.load_adult(data_dir)
    except FileNotFoundError:
        if data_dir is not None:
            raise
        print("Adult files not found locally: fetching them with data.fetch_adult() ...")
        return data.load_adult(data.fetch_adult())


def run_one(args, seed, out: pathlib.Path) -> dict:
    from dpgen_jax import data, metrics
    from dpgen_jax.synthesizers import DPAutoGAN, DPAutoGANConfig
    from dpgen_jax.synthesizers._release import library_versions

    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    train, test = _load(args.data_dir)
    schema = data.adult_schema()
    config = DPAutoGANConfig.adult(**_common.config_overrides(args))
    model = DPAutoGAN(config).fit(train, schema, epsilon=args.epsilon, delta=args.delta,
                                  preset=args.preset, seed=seed, progress=not args.no_progress)
    synthetic = model.sample(len(train), seed=None if seed is None else seed + 10_000)
    synthetic.to_csv(out / "synthetic.csv", index=False)
    model.save(out / "model.npz")
    result = metrics.evaluate(train, test, synthetic, schema, label="salary",
                              seed=0 if seed is None else seed)
    privacy = model.privacy_report()
    metrics.write_report(result, out, real=[train, test], synthetic=synthetic, schema=schema,
                         epsilon=privacy["epsilon"])
    report = {
        "method": "DP-auto-GAN",
        "target_epsilon": _common.finite_or_none(args.epsilon),
        "epsilon": _common.finite_or_none(privacy["epsilon"]),
        "epsilon_paper_accounting": _common.finite_or_none(
            privacy["epsilon_by_accountant"].get("rdp_classic")),
        "delta": args.delta,
        "privacy": privacy,
        "rf_salary_accuracy": result["label_accuracy"]["synthetic"],
        "jsd": result["jsd"],
        "kl_mu": result["kl_mu"],
        "train_seconds": model.train_seconds,
        "wall_seconds": time.perf_counter() - t0,
        "seed": seed,
        "versions": library_versions(),
    }
    _common.write_json(out / "report.json", report)
    _common.print_privacy(privacy)
    print(f"[{out}] RF salary accuracy {report['rf_salary_accuracy']:.4f} (real "
          f"{result['label_accuracy']['real']:.4f}); JSD total {report['jsd']['total']:.4f}; "
          f"KL_mu total {report['kl_mu']['total']:.4f}; training "
          f"{sum(model.train_seconds.values()):.1f} s; wall {report['wall_seconds']:.1f} s")
    return report


def main(argv=None):
    from dpgen_jax.synthesizers.dp_auto_gan import PAPER_PRESETS

    p = argparse.ArgumentParser(prog="python -m experiments.adult_dpautogan",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    _common.add_common_args(p, [k for k, v in PAPER_PRESETS.items() if v["family"] == "adult"])
    p.add_argument("--data-dir", type=pathlib.Path, default=None,
                   help="folder with adult.data and adult.test (default: $DPGEN_ADULT_DIR, cache)")
    args = p.parse_args(argv)
    if args.epsilon is not None and not (args.epsilon > 0 or math.isinf(args.epsilon)):
        p.error(f"--epsilon={args.epsilon} must be > 0 or inf")
    _common.enable_compilation_cache()
    return _common.run_seeds(args, lambda s, out: run_one(args, s, out), SUMMARY_KEYS)


if __name__ == "__main__":
    main()
