"""One method on one dataset, as the papers' tables were made: fit, sample, evaluate, report.

Usage::

    python -m experiments.reproduce dp-auto-gan adult --epsilon 1.01 --out runs/adult
    python -m experiments.reproduce dp-auto-gan adult --preset paper-0.51 --seeds 0 1 2 --out runs/adult-0.51
    python -m experiments.reproduce dp-auto-gan mimic-like --preset paper-1.33 --out runs/mimic-like
    python -m experiments.reproduce dp-wgan adult --preset paper-0.36 --set preprocessing=paper \\
        --seeds 0 1 2 --out runs/wgan-0.36
    python -m experiments.reproduce dp-vae adult --preset paper-0.51 --seeds 0 1 2 --out runs/vae-0.51
    python -m experiments.reproduce dp-syn adult --epsilon 1.4 --seeds 0 1 2 --out runs/dpsyn-1.4
    python -m experiments.reproduce gs-wgan adult --epsilon 10 --seeds 0 1 2 --out runs/gswgan-10
    python -m experiments.reproduce gs-wgan cardio --preset thesis-M250 --data-dir PATH --out runs/cardio
    python -m experiments.reproduce dp-auto-gan adult --quick --epsilon 1 --out runs/quick  # seconds

METHOD is any registered method (``synthesizers.available()``), DATASET any dataset of the
benchmark's registry (``experiments/_datasets.py``: adult, adult-small, adult-like, mimic-like,
cardio, planted-binary). The method is fitted on the dataset's training rows, samples a public
number of rows: ``--num-records N`` when given, else the dataset's documented number of training
rows (``advice.BENCHMARK_DATASETS``), else as many as its training rows, which ``report.json``'s
``synthetic_rows`` then says are not declared public (for a dataset without a label, as many as its
test rows, the MIMIC protocol of DP-auto-GAN's paper), is evaluated against its test rows and writes the files of the experiment contract
(``experiments/_common.py``; ``docs/experiments.md``), with the paper's published numbers beside
ours where the paper reports this method on this dataset (``metrics.published``). ``--quick`` runs
the method's smoke schedule (``SMOKE``; a method without one: its defaults under a 5-second
budget) on the dataset's quick rows (600 training / 400 test rows), with a 50-tree forest.

What a paper's protocol adds (:data:`PROTOCOLS`, by method; label-less datasets by dataset):

- DP-WGAN, DP-VAE (Tantipongpipat et al. 2021, Tables 2, 6, 7): ``columns`` (DP-WGAN's
  ``preprocessing=paper`` models Adult's nine discrete columns, and the evaluation covers those)
  and ``argmax_decoding`` (JSD and D_KL^mu of as many rows decoded by argmax, DP-auto-GAN's
  decoding, instead of drawn from the output probabilities).
- GS-WGAN (Chen et al. 2020, for tables after a master's thesis; ``docs/gs-wgan.md``): the
  thesis's TSTR (``metrics.evaluate(tune_tstr=True)``: C and penalty chosen on synthetic
  validation rows), ``tstr_real_auroc``, ``tstr_gap`` and ``thesis_reference`` (the thesis's
  numbers on cardio with its published, unsound epsilons). On ``cardio``: the thesis's 80/10/10
  split of ``cardio_train.csv`` (``--data-dir``: the file or its folder; default
  ``data.find_cardio``'s lookup), 63,000 samples (the thesis's 0.9 N), and the generator kept every
  500 steps (``snapshot_every``; ``--set snapshot_every=0`` turns it off) scored by a plain
  logistic regression's AUROC on the 7,000 real validation rows, never the test rows; the best
  samples the evaluated rows (``checkpoint_selection``; not accounted, as any tuning on held-out
  rows; ``model.npz`` is the last step's generator).
- Datasets without a label (mimic-like, planted-binary): dimension-wise probability and
  prediction (``probability_mean_abs_diff``, ``prediction_mean_abs_diff``,
  ``prediction_features_scored``, ``excluded``).

UCI Adult: Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0. Cardio: Ulianova (2019),
Kaggle "Cardiovascular Disease dataset". MIMIC-like: ``data.mimic_like``, a licence-free stand-in
with MIMIC-III's shape.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from experiments import _common
from experiments._datasets import DATASETS, QUICK_ROWS

PROG = "python -m experiments.reproduce"
CARDIO_SAMPLES = 63_000
SELECT_EVERY = 500
SELECT_SAMPLES = 7_000
DIMENSION_WISE_KEYS = ("probability_mean_abs_diff", "prediction_mean_abs_diff")

#: The published record of (dataset, method) beside the benchmark registry's own.
PUBLISHED = {("adult", "dp-wgan"): "DP_WGAN_ADULT", ("adult", "dp-vae"): "DP_VAE_ADULT",
             ("adult", "dp-syn"): "DP_SYN_ADULT"}


@dataclasses.dataclass(frozen=True)
class Reproduction:
    """The rows and evaluation of one (method, dataset) run; a protocol replaces what it changes.

    ``sampler``: ``sampler(record) -> sampler(model, n, seed)`` in place of ``model.sample``, which
    writes what it decides into ``record`` (GS-WGAN's checkpoint selection), a fresh dict per seed
    that the protocols' extras read. ``synthetic_rows``: ``n_samples`` and where it comes from
    (``_common.synthetic_rows``), written to ``report.json``."""

    spec: _common.RunSpec
    dataset: str
    train: Any
    test: Any
    schema: Any
    label: str | None
    n_samples: int
    published: Any = None
    validation: Any = None
    evaluate_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    sampler: Callable[[dict], Callable] | None = None
    record: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    synthetic_rows: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def sampling(self, n: int, public: bool, source: str) -> Reproduction:
        """The run sampling ``n`` rows, with where the number comes from."""
        return dataclasses.replace(self, n_samples=n, synthetic_rows={"n": n, "public": public, "source": source})


@dataclasses.dataclass(frozen=True)
class Protocol:
    """What a paper's protocol adds to fit, sample, evaluate: ``prepare(run) -> run`` before the
    fit, ``extras(run, model, result, seed) -> report keys`` after it."""

    prepare: Callable[[Reproduction], Reproduction] = lambda run: run
    extras: Callable[..., dict] = lambda run, model, result, seed: {}


# ------------------------------------------------------------------------- the protocols


def _argmax_decoding(run: Reproduction, model, result, seed) -> dict:
    """DP-WGAN and DP-VAE: the modelled columns, and JSD and D_KL^mu of as many rows (the run's
    public N, as sampled) decoded with ``mode="argmax"`` (DP-auto-GAN's decoding) instead of drawn
    from the output probabilities."""
    import pandas as pd

    from dpgen_jax import metrics

    names = model.schema.names
    rows = model.sample(run.n_samples, seed=None if seed is None else seed + 10_000, mode="argmax")
    d = metrics.diversity(pd.concat([run.train[names], run.test[names]], ignore_index=True), rows, model.schema)
    return {"columns": names, "argmax_decoding": {"jsd": d["jsd"], "kl_mu": d["kl_mu"]}}


def validation_sampler(validation, schema, label: str, record: dict):
    """``sampler(model, n, seed)`` for :func:`_common.fit_sample_evaluate`: scores every generator
    the fit kept (``model.snapshots``) by a plain logistic regression's TSTR AUROC on the real
    ``validation`` rows (``SELECT_SAMPLES`` rows each, the same sampling seed) and samples ``n`` rows
    from the best (ties: the later step); without snapshots, ``model.sample``. Fills ``record``."""
    from dpgen_jax import metrics

    def sample(model, n, seed):
        kept = model.snapshots
        if not kept:
            record.update(chosen_step=None, note="no snapshots kept: the last step's generator")
            return model.sample(n, seed=seed)
        scores = {step: metrics.tstr_auroc(model.sample_snapshot(step, SELECT_SAMPLES, seed=seed),
                                           validation, schema, label) for step in sorted(kept)}
        best = max(scores, key=lambda step: (scores[step], step))
        record.update(
            every=model.fitted_config.snapshot_every, validation_rows=len(validation),
            samples_per_snapshot=SELECT_SAMPLES, validation_auroc={str(k): v for k, v in scores.items()},
            chosen_step=best, last_step=max(kept),
            note=("the generator kept at chosen_step, chosen by plain-LR TSTR AUROC on the real "
                  "validation rows (never the test rows); the choice is not accounted"))
        return model.sample_snapshot(best, n, seed=seed)

    return sample


def _gs_wgan_prepare(run: Reproduction) -> Reproduction:
    changes: dict[str, Any] = {"evaluate_options": {**run.evaluate_options, "tune_tstr": True}}
    if run.validation is not None:  # cardio: the checkpoint chosen on the validation rows
        spec = run.spec
        changes["spec"] = dataclasses.replace(
            spec, overrides={"snapshot_every": SELECT_EVERY, **spec.overrides})
        changes["sampler"] = lambda record: validation_sampler(run.validation, run.schema, run.label, record)
        if not run.dataset.endswith("(quick)"):  # the thesis's protocol, a public number
            run = run.sampling(CARDIO_SAMPLES, True, "the GS-WGAN thesis's 63,000 samples (0.9 of its N)")
    return dataclasses.replace(run, **changes)


def thesis_reference() -> dict:
    """GS-WGAN's thesis numbers on cardio (``metrics.published.GS_WGAN_THESIS_CARDIO``) as a dict."""
    from dpgen_jax.metrics import published

    return {k: dict(v) if isinstance(v, Mapping) else v for k, v in published.GS_WGAN_THESIS_CARDIO.items()}


def _gs_wgan_extras(run: Reproduction, model, result, seed) -> dict:
    tstr = result.get("tstr_auroc") or {}
    real, syn = tstr.get("real"), tstr.get("synthetic")
    reference = thesis_reference()
    if not run.dataset.startswith("cardio"):
        reference["dataset"] += f"; not {run.dataset}"
    extra = {"tstr_real_auroc": real, "tstr_gap": None if real is None or syn is None else real - syn,
             "thesis_reference": reference}
    if run.validation is not None:
        extra["checkpoint_selection"] = dict(run.record)
    return extra


def _dimension_wise_extras(run: Reproduction, model, result, seed) -> dict:
    """The MIMIC protocol of DP-auto-GAN's paper: mean absolute differences of the dimension-wise
    probability and prediction (logistic-regression AUROC) between real and synthetic rows."""
    import numpy as np

    prob = result["dimension_wise_probability"]
    pred = result["dimension_wise_prediction"]
    pairs = [(v["real"], v["synthetic"]) for v in pred.values()
             if v.get("real") is not None and v.get("synthetic") is not None]
    return {"probability_mean_abs_diff": float(np.mean([abs(v["real"] - v["synthetic"]) for v in prob.values()])),
            "prediction_mean_abs_diff": float(np.mean([abs(a - b) for a, b in pairs])) if pairs else None,
            "prediction_features_scored": len(pairs), "excluded": result.get("excluded", {})}


BASELINE = Protocol(extras=_argmax_decoding)
PROTOCOLS: dict[str, Protocol] = {
    "dp-wgan": BASELINE,
    "dp-vae": BASELINE,
    "gs-wgan": Protocol(prepare=_gs_wgan_prepare, extras=_gs_wgan_extras),
}
"""A paper's protocol by method; any other method: fit, sample, evaluate only."""
DIMENSION_WISE = Protocol(
    prepare=lambda run: run.sampling(len(run.test), False, "as many as the test rows (the MIMIC protocol of "
                                     "DP-auto-GAN's paper), not the training rows"),
    extras=_dimension_wise_extras)
"""The protocol of a dataset without a label (as many samples as test rows, dimension-wise scores)."""


# ------------------------------------------------------------------------------ the driver


def load_split(dataset: str, data_dir, quick: bool):
    """``(train, validation, test)`` of a registry dataset (validation None but for cardio: the
    thesis's 80/10/10 split of the file at ``data_dir``, or ``data.find_cardio``'s lookup)."""
    if dataset != "cardio":
        train, test = DATASETS[dataset].load(data_dir, quick)
        return train, None, test
    from dpgen_jax import data

    train, validation, test = data.cardio_split(data.load_cardio(data_dir))
    if quick:
        train, validation, test = (f.iloc[:n].reset_index(drop=True) for f, n in (
            (train, QUICK_ROWS[0]), (validation, QUICK_ROWS[1]), (test, QUICK_ROWS[1])))
    return train, validation, test


def protocols(method: str, dataset: str) -> list[Protocol]:
    """The protocols of (method, dataset), in order: the method's, then the dataset's."""
    label = DATASETS[dataset].label
    return [p for p in (PROTOCOLS.get(method), DIMENSION_WISE if label is None else None) if p is not None]


def published_record(method: str, dataset: str):
    """The published record of ``method`` on ``dataset`` (``metrics.published``), or None."""
    from dpgen_jax.metrics import published

    name = PUBLISHED.get((dataset, method))
    return getattr(published, name) if name else DATASETS[dataset].published.get(method)


def reproduction(spec: _common.RunSpec, dataset: str, data_dir, quick: bool) -> Reproduction:
    """The run of ``spec`` on ``dataset`` before its fit, every protocol prepared."""
    ds = DATASETS[dataset]
    train, validation, test = load_split(dataset, data_dir, quick)
    rows = _common.synthetic_rows(spec, len(train), _common.documented_records(dataset, quick))
    run = Reproduction(
        spec=spec, dataset=dataset + (" (quick)" if quick else ""), train=train, test=test,
        schema=ds.schema_for(quick), label=ds.label, n_samples=rows["n"], synthetic_rows=rows,
        published=published_record(spec.method, dataset), validation=validation,
        evaluate_options=_common.quick_evaluate_options() if quick else {})
    for protocol in protocols(spec.method, dataset):
        run = protocol.prepare(run)
    return run


def run_one(run: Reproduction, extras: list[Callable], seed, out: pathlib.Path) -> dict:
    """One seed: fit, sample, evaluate, and ``report.json`` with the protocols' keys."""
    t0 = time.perf_counter()
    record: dict = {}
    run = dataclasses.replace(run, record=record)  # this seed's own record
    model, _, result, _ = _common.fit_sample_evaluate(
        run.spec, seed, out, train=run.train, test=run.test, schema=run.schema, n_samples=run.n_samples,
        label=run.label, published=run.published, evaluate_options=dict(run.evaluate_options),
        sampler=None if run.sampler is None else run.sampler(record))
    extra: dict[str, Any] = {"synthetic_rows": dict(run.synthetic_rows)}
    for fn in extras:
        extra.update(fn(run, model, result, seed))
    return _common.finish(out, _common.report(run.spec, dataset=run.dataset, seed=seed, model=model,
                                              result=result, t0=t0, **extra))


def _presets(method: str, dataset: str) -> list[str]:
    """The method's presets for the dataset: a preset tied to a family of tables (DP-auto-GAN's
    ``adult`` and ``binary`` settings) only on a table of that family."""
    from dpgen_jax import synthesizers

    schema = DATASETS[dataset].schema_for(False)
    family = "binary" if all(c.kind == "binary" for c in schema) else "adult"
    return sorted(k for k, v in synthesizers.get(method).PRESETS.items() if v.get("family") in (None, family))


def main(argv=None):
    from dpgen_jax import synthesizers

    methods = sorted(synthesizers.available())
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("method", nargs="?")
    pre.add_argument("dataset", nargs="?")
    known = pre.parse_known_args(argv)[0]
    method = known.method if known.method in methods else methods[0]
    presets = _presets(method, known.dataset) if known.dataset in DATASETS else None
    p = _common.parser(PROG, __doc__, method, presets)
    p.add_argument("method", choices=methods, help="a registered method")
    p.add_argument("dataset", choices=sorted(DATASETS), help="a dataset of experiments/_datasets.py")
    p.add_argument("--quick", action="store_true",
                   help="the method's smoke schedule on the dataset's quick rows (seconds; CI)")
    args = p.parse_args(argv)
    spec = _common.spec_from_args(args, p, quick=args.quick)
    run = reproduction(spec, args.dataset, args.data_dir, args.quick)
    chosen = protocols(spec.method, args.dataset)
    keys = _common.SUMMARY_KEYS + (DIMENSION_WISE_KEYS if DIMENSION_WISE in chosen else ())
    extras = [p.extras for p in chosen]
    return _common.run(run.spec, args.seeds, args.out, lambda _, seed, out: run_one(run, extras, seed, out), keys)


if __name__ == "__main__":
    _common.enable_compilation_cache()  # command-line runs only: it sets global JAX config
    main()
