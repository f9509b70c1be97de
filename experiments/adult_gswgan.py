"""GS-WGAN on UCI Adult: sharded discriminators, a sanitised generator, strict and paper accounting.

Usage::

    python -m experiments.adult_gswgan --epsilon 10 --seeds 0 1 2 --out runs/gswgan-10
    python -m experiments.adult_gswgan --preset thesis-M1500 --out runs/gswgan-M1500

Trains on the 32,561 ``adult.data`` rows, samples 32,561 rows, evaluates them against the 16,281
``adult.test`` rows and writes the files of the experiment contract (``experiments/_common.py``;
``docs/experiments.md``). The TSTR AUROC uses the GS-WGAN thesis's selection of the logistic
regression's C and penalty on synthetic validation rows (``metrics.evaluate(tune_tstr=True)``).
``report.json`` adds ``tstr_real_auroc`` (the same protocol trained on the real training rows),
``tstr_gap`` (real minus synthetic) and ``thesis_reference``: the thesis's own numbers, on the
Kaggle cardiovascular table (not Adult), with its published (unsound) epsilons.

GS-WGAN: Chen, Orekondy and Fritz (2020), NeurIPS; for tables after a master's thesis
(``docs/gs-wgan.md``). UCI Adult: Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0.
"""

from __future__ import annotations

import pathlib
import time

from experiments import _common, cardio_gswgan

METHOD = "gs-wgan"

def run_one(args, seed, out: pathlib.Path) -> dict:
    from dpgen_jax import data

    t0 = time.perf_counter()
    train, test = _common.load_adult(args.data_dir)
    return cardio_gswgan.run_tstr(args, seed, out, dataset="adult", train=train, test=test,
                                  schema=data.adult_schema(), n_samples=len(train), label="salary", t0=t0)


def main(argv=None):
    p = _common.parser("python -m experiments.adult_gswgan", __doc__, METHOD)
    return _common.run(p.parse_args(argv), p, run_one)


if __name__ == "__main__":
    _common.enable_compilation_cache()  # command-line runs only: it sets global JAX config
    main()
