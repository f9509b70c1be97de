"""DP-auto-GAN on MIMIC-like binary data with the paper's MIMIC-III settings (epsilon 0.81/1.33/2.70).

Usage::

    python -m experiments.mimic_like_dpautogan --preset paper-1.33 --out runs/mimic-like
    python -m experiments.mimic_like_dpautogan --epsilon 1.0 --n-rows 5000 --out runs/mimic-small

MIMIC-III is credentialed and cannot be shipped, so this runs on ``data.mimic_like`` (a seeded,
licence-free stand-in with the same shape: 46,520 patients x 1,071 codes). The split follows the
authors' code: the first 60 % train (27,912 rows at full size), the next 20 % validation, the rest
test. Synthetic rows (as many as the validation split) are compared with the data by
dimension-wise probability and dimension-wise prediction (logistic-regression AUROC, train on
real or synthetic, test on validation). Files as every experiment (``docs/experiments.md``).
"""

from __future__ import annotations

import pathlib
import time

from experiments import _common

METHOD = "dp-auto-gan"
SUMMARY_KEYS = ("epsilon", "epsilon_paper_accounting", "probability_mean_abs_diff",
                "prediction_mean_abs_diff", "train_seconds.autoencoder", "train_seconds.gan",
                "wall_seconds")


def run_one(args, seed, out: pathlib.Path) -> dict:
    import numpy as np

    from dpgen_jax import data

    t0 = time.perf_counter()
    frame = data.mimic_like(n_rows=args.n_rows, n_features=args.n_features, seed=args.data_seed)
    schema = data.binary_schema(args.n_features)
    n_train = int(round(0.6 * len(frame)))
    n_valid = int(round(0.2 * len(frame)))
    train = frame.iloc[:n_train].reset_index(drop=True)
    valid = frame.iloc[n_train:n_train + n_valid].reset_index(drop=True)
    model, _, result, _ = _common.fit_sample_evaluate(
        args, seed, out, train=train, test=valid, schema=schema, n_samples=len(valid))
    prob = result["dimension_wise_probability"]
    pred = result["dimension_wise_prediction"]
    prob_diff = float(np.mean([abs(v["real"] - v["synthetic"]) for v in prob.values()]))
    pairs = [(v["real"], v["synthetic"]) for v in pred.values()
             if v.get("real") is not None and v.get("synthetic") is not None]
    pred_diff = float(np.mean([abs(a - b) for a, b in pairs])) if pairs else None
    dataset = f"mimic_like(n_rows={args.n_rows}, n_features={args.n_features}, seed={args.data_seed})"
    rep = _common.report(
        args, dataset=dataset, seed=seed, model=model, result=result, t0=t0,
        probability_mean_abs_diff=prob_diff, prediction_mean_abs_diff=pred_diff,
        prediction_features_scored=len(pairs), excluded=result.get("excluded", {}))
    return _common.finish(out, rep)


def main(argv=None):
    from dpgen_jax.synthesizers import PAPER_PRESETS

    presets = [k for k, v in PAPER_PRESETS.items() if v["family"] == "binary"]
    p = _common.parser("python -m experiments.mimic_like_dpautogan", __doc__, METHOD, presets)
    p.add_argument("--n-rows", type=int, default=46_520)
    p.add_argument("--n-features", type=int, default=1071)
    p.add_argument("--data-seed", type=int, default=0, help="seed of the MIMIC-like generator")
    return _common.run(p.parse_args(argv), p, run_one, SUMMARY_KEYS)


if __name__ == "__main__":
    _common.enable_compilation_cache()  # command-line runs only: it sets global JAX config
    main()
