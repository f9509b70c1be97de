"""DP-auto-GAN on UCI Adult: the paper's schedule, evaluation and privacy report.

Usage::

    python -m experiments.adult_dpautogan --epsilon 1.01 --out runs/adult
    python -m experiments.adult_dpautogan --preset paper-0.51 --seeds 0 1 2 --out runs/adult-0.51
    python -m experiments.adult_dpautogan --epsilon 1.01 --set critic_clipping=real_only --out runs/ro

Trains on the 32,561 ``adult.data`` rows (the default configuration: 629 autoencoder steps of
batch 1,017 + 15,000 critic steps; a ``paper-*`` preset: the paper's 10,000 + 15,000), samples
32,561 rows, evaluates them against the 16,281 ``adult.test`` rows and writes the files of the
experiment contract (``experiments/_common.py``; ``docs/experiments.md``). Missing Adult files
are fetched with ``data.fetch_adult``. Reproduces Tables 2, 3 and 6 of Tantipongpipat et al.
(2021); UCI Adult: Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0.
"""

from __future__ import annotations

import pathlib
import time

from experiments import _common

METHOD = "dp-auto-gan"


def run_one(args, seed, out: pathlib.Path) -> dict:
    from dpgen_jax import data, metrics

    t0 = time.perf_counter()
    train, test = _common.load_adult(args.data_dir)
    model, _, result, _ = _common.fit_sample_evaluate(
        args, seed, out, train=train, test=test, schema=data.adult_schema(),
        n_samples=len(train), label="salary", published=metrics.published.DP_AUTO_GAN_ADULT)
    return _common.finish(out, _common.report(args, dataset="adult", seed=seed, model=model,
                                              result=result, t0=t0))


def main(argv=None):
    from dpgen_jax.synthesizers import PAPER_PRESETS

    presets = [k for k, v in PAPER_PRESETS.items() if v["family"] == "adult"]
    p = _common.parser("python -m experiments.adult_dpautogan", __doc__, METHOD, presets)
    return _common.run(p.parse_args(argv), p, run_one)


if __name__ == "__main__":
    _common.enable_compilation_cache()  # command-line runs only: it sets global JAX config
    main()
