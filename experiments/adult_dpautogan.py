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
    from dpgen_jax import data
    from dpgen_jax.synthesizers import DPAutoGANConfig
    from dpgen_jax.synthesizers._release import library_versions

    t0 = time.perf_counter()
    train, test = _load(args.data_dir)
    schema = data.adult_schema()
    config = DPAutoGANConfig.adult(**_common.config_overrides(args))
    model, _, result, privacy = _common.fit_sample_evaluate(
        args, seed, out, config, train, test, schema, len(train), label="salary")
    report = {
        **_common.privacy_fields(args, privacy),
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
    p = _common.parser("python -m experiments.adult_dpautogan", __doc__, "adult")
    p.add_argument("--data-dir", type=pathlib.Path, default=None,
                   help="folder with adult.data and adult.test (default: $DPGEN_ADULT_DIR, cache)")
    return _common.run(p.parse_args(argv), p, run_one, SUMMARY_KEYS)


if __name__ == "__main__":
    _common.enable_compilation_cache()  # command-line runs only: it sets global JAX config
    main()
