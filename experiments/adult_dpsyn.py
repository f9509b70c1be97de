"""DP-SYN on UCI Adult: per-label DP autoencoders and DP-EM, evaluation and privacy report.

Usage::

    python -m experiments.adult_dpsyn --epsilon 1.4 --seeds 0 1 2 --out runs/dpsyn-1.4
    python -m experiments.adult_dpsyn --epsilon 0.5 --set latent_dim=16 --out runs/dpsyn-0.5

Trains on the 32,561 ``adult.data`` rows (label ``salary``: two groups), samples 32,561 rows,
evaluates them against the 16,281 ``adult.test`` rows and writes the files of the experiment
contract (``experiments/_common.py``; ``docs/experiments.md``), with DP-auto-GAN's published
DP-SYN numbers beside ours (Tantipongpipat et al. 2021, Table 2, epsilon 0.5 / 0.8 / 1.4; they
ran Abay et al.'s code with their own preprocessing). DP-SYN: Abay et al. (2018); UCI Adult:
Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0.
"""

from __future__ import annotations

import pathlib
import time

from experiments import _common, adult_baselines

METHOD = "dp-syn"


def run_one(args, seed, out: pathlib.Path) -> dict:
    from dpgen_jax import data

    t0 = time.perf_counter()
    train, test = _common.load_adult(args.data_dir)
    model, _, result, _ = _common.fit_sample_evaluate(
        args, seed, out, train=train, test=test, schema=data.adult_schema(),
        n_samples=len(train), label="salary", published=adult_baselines.published("DP-SYN"))
    return _common.finish(out, _common.report(args, dataset="adult", seed=seed, model=model,
                                              result=result, t0=t0))


def main(argv=None):
    p = _common.parser("python -m experiments.adult_dpsyn", __doc__, METHOD, [])
    return _common.run(p.parse_args(argv), p, run_one)


if __name__ == "__main__":
    _common.enable_compilation_cache()  # command-line runs only: it sets global JAX config
    main()
