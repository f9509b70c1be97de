"""DP-SACTGAN on the DP-SACTGAN paper's Adult table, beside DP-auto-GAN and independent marginals.

Usage::

    python -m experiments.adult_dpsactgan --epsilon 1 --seeds 0 1 2 --out runs/sactgan-1
    python -m experiments.adult_dpsactgan --preset paper --methods dp-sactgan --out runs/sactgan-paper
    python -m experiments.adult_dpsactgan --quick --epsilon 1 --seeds 0 --out runs/sactgan-quick

Every method of ``--methods`` (default: dp-sactgan, dp-auto-gan, independent) is fitted, in turn
and seed after seed, on the 39,073 training rows of the paper's table (``data.load_adult_ctab``:
all 48,842 UCI Adult rows, ``education-num`` dropped, split 80/20 stratified on income with
``random_state=42``), samples 39,073 rows and is evaluated against the 9,769 held-out rows. Each
method writes the files of the experiment contract (``experiments/_common.py``;
``docs/experiments.md``) into ``OUT/<method>/`` (``OUT/<method>/seed-S/`` and
``OUT/<method>/summary.json`` for several seeds). With ``--epsilon`` every method is calibrated to
that epsilon; with ``--preset`` (a preset of the first method) the other methods are calibrated
to the epsilon the first method's fit reached, so that every row of the comparison is at the same
epsilon.

Besides the common keys, ``report.json`` holds the paper's metrics (``metrics.evaluate``; spec in
``docs/metrics.md``): ``lr_utility`` (logistic-regression accuracy, AUROC and macro F1 trained on
real and on synthetic rows, tested on the real held-out rows, and their differences),
``wasserstein_mean``, ``js_distance_mean`` (the paper's JSD: a mean Jensen-Shannon distance,
beside the project's summed ``jsd``) and ``diff_cor``, plus ``fit_seconds``, ``sample_seconds``,
``evaluate_seconds`` and ``protocol``. ``OUT/comparison.json`` and ``OUT/comparison.md`` put the
medians over seeds (and every seed) of each method beside the paper's Tables 1 and 3 (every model
at its published epsilon 1, which the paper does not account for soundly; ``docs/dp-sactgan.md``)
and say which of the issue's goals hold. All evaluations use one evaluation seed (0), so the
real-data scores are computed once (``OUT/real_scores.json``) and differences between rows come
from the synthetic rows. ``--set FIELD=VALUE`` sets a field of the first method,
``--set METHOD:FIELD=VALUE`` one of any method. ``--resume`` loads the ``report.json`` of a
method and seed already finished in ``OUT`` with the same settings instead of fitting it again
(so methods can be added to a finished comparison). ``--plan-only`` writes each method's planned
phases and epsilon (``Synthesizer.plan``, no training) to ``OUT/plan.json``. ``--quick`` runs tiny schedules on 600 training
and 400 test rows (seconds per method; for CI), with a 50-tree forest for the label accuracy.

DP-SACTGAN: Li and Wang (2023), arXiv:2312.13031. DP-auto-GAN: Tantipongpipat et al. (2021). UCI
Adult: Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any

from experiments import _common

METHODS = ("dp-sactgan", "dp-auto-gan", "independent")
DATASET = "adult-ctab"
EVAL_SEED = 0
LABEL = "income"
TRAIN_ROWS = 39_073
"""The training rows of ``data.load_adult_ctab``'s documented split (80 % of Adult's 48,842 rows):
the public N the runs sample (``--num-records`` replaces it; quick mode's rows are not declared)."""

#: The paper's metrics in report.json (result paths of ``metrics.evaluate``), in Table 1/3 order.
SEED_METRICS = (
    "lr_utility.difference.accuracy", "lr_utility.difference.auroc", "lr_utility.difference.f1_macro",
    "wasserstein_mean.mean", "js_distance_mean.mean", "diff_cor.value",
)  # fmt: skip
SEED_METRIC_TITLES = ("ACC diff (pp)", "AUC diff", "F1 diff", "WD", "JSD (mean JS distance)", "Diff-Cor")
SUMMARY_KEYS = (*_common.SUMMARY_KEYS, *SEED_METRICS, "fit_seconds")
#: Methods the issue's goals compare DP-SACTGAN against.
GOAL_RIVALS = ("dp-auto-gan", "independent")



def published() -> tuple:
    """The paper's Tables 1 and 3 on Adult as ``metrics.PublishedResults`` records, DP-SACTGAN
    first (``metrics.published.DP_SACTGAN_ADULT``), then its four comparison models
    (``metrics.published.DP_SACTGAN_PAPER_RIVALS``)."""
    from dpgen_jax.metrics import published as pub

    return (pub.DP_SACTGAN_ADULT, *pub.DP_SACTGAN_PAPER_RIVALS)


def load(data_dir, quick: bool):
    """(train, test) of the paper's table; fetched when missing; quick: the first 600 / 400 rows."""
    from dpgen_jax import data
    from experiments._datasets import QUICK_ROWS

    try:
        train, test = data.load_adult_ctab(data_dir)
    except FileNotFoundError:
        if data_dir is not None:
            raise
        print("Adult files not found locally: fetching them with data.fetch_adult() ...")
        train, test = data.load_adult_ctab(data.fetch_adult())
    if quick:
        return train.iloc[:QUICK_ROWS[0]].reset_index(drop=True), test.iloc[:QUICK_ROWS[1]].reset_index(drop=True)
    return train, test


def split_sets(pairs: Sequence[str], methods: Sequence[str]) -> dict[str, list[str]]:
    """``--set`` values by method: ``FIELD=VALUE`` belongs to the first method,
    ``METHOD:FIELD=VALUE`` to METHOD (``experiments.benchmark.parse_sets``)."""
    from experiments.benchmark import parse_sets

    qualified = [p for p in pairs if ":" in p.partition("=")[0]]
    out = parse_sets(qualified, methods)
    out[methods[0]] = [p for p in pairs if p not in qualified] + out[methods[0]]
    return out


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What every method's runs of one comparison share."""

    split: tuple  # (train, test)
    root: pathlib.Path  # OUT: real_scores.json, comparison.json
    dataset: str  # the name in report.json
    command: str
    quick: bool
    resume: bool


def _finished(comp: Comparison, spec: _common.RunSpec, seed, out: pathlib.Path) -> dict | None:
    """With ``--resume``: the ``report.json`` of a finished run of the same method, data, seed,
    target epsilon (or preset), delta, quick mode and configuration overrides; else None."""
    path = out / "report.json"
    if not comp.resume or not path.exists():
        return None
    rep = json.loads(path.read_text())
    proto = rep.get("protocol") or {}
    same = (rep.get("method") == spec.method and rep.get("dataset") == comp.dataset
            and rep.get("seed") == seed and rep.get("delta") == spec.delta
            and rep.get("target_epsilon") == _common.finite_or_none(spec.epsilon)
            and (rep.get("privacy") or {}).get("preset") == spec.preset
            and proto.get("quick") == comp.quick
            and proto.get("overrides") == json.loads(json.dumps(dict(spec.overrides))))
    if same:
        print(f"[{out}] resumed: {spec.method} seed {seed} is done with the same settings")
    return rep if same else None


def run_one(comp: Comparison, spec: _common.RunSpec, seed, out: pathlib.Path) -> dict:
    """One method and seed: fit, sample, evaluate, ``report.json`` (or a finished run's, with
    ``--resume``)."""
    from dpgen_jax import data

    done = _finished(comp, spec, seed, out)
    if done is not None:
        return done
    from experiments._leaderboard import machine

    at_start = machine()  # the load of the machine the timings were taken on
    t0 = time.perf_counter()
    train, test = comp.split
    cache = comp.root / "real_scores.json"
    prior = json.loads(cache.read_text()) if cache.exists() else None
    options = _common.quick_evaluate_options() if comp.quick else {}
    timings: dict[str, float] = {}
    rows = _common.synthetic_rows(spec, len(train), None if comp.quick else TRAIN_ROWS)
    model, _, result, privacy = _common.fit_sample_evaluate(
        spec, seed, out, train=train, test=test, schema=data.adult_ctab_schema(), n_samples=rows["n"],
        label=LABEL, published=published(), eval_seed=EVAL_SEED, reuse_real=prior,
        evaluate_options=options, timings=timings)
    if prior is None:
        _common.write_json(cache, result)
    diff_cor = result.get("diff_cor") or {}
    return _common.finish(out, _common.report(
        spec, dataset=comp.dataset, seed=seed, model=model, result=result, t0=t0,
        lr_utility=result.get("lr_utility"), wasserstein_mean=result.get("wasserstein_mean"),
        js_distance_mean=result.get("js_distance_mean"),
        diff_cor={"value": diff_cor.get("value"), "columns": diff_cor.get("columns")},
        fit_seconds=timings["fit"], sample_seconds=timings["sample"],
        evaluate_seconds=timings["evaluate"], synthetic_rows=rows,
        protocol={"eval_seed": EVAL_SEED, "quick": comp.quick, "n_train": len(train),
                  "n_test": len(test), "n_synthetic": rows["n"], "overrides": dict(spec.overrides),
                  "accountant": privacy["accountant"], "command": comp.command,
                  "machine_at_start": at_start}))


def _per_method(result: dict, seeds: list) -> tuple[dict, dict]:
    """(per_seed, median) of SUMMARY_KEYS from ``_common.run``'s return (a summary for several
    seeds, the report itself for one)."""
    if "per_seed" in result:
        return result["per_seed"], result["median"]
    values = {key: _common.lookup(result, key) for key in SUMMARY_KEYS}
    return {key: {str(seeds[0]): v} for key, v in values.items()}, values


def goals(medians: dict[str, dict]) -> dict[str, Any]:
    """Whether DP-SACTGAN's median beats each rival's median on each of the paper's metrics.

    The LR differences are compared by absolute value (the closer the synthetic-trained score to
    the real-trained one, the better); the distances as they are (lower is better).
    """
    if "dp-sactgan" not in medians:
        return {"evaluated": False, "reason": "dp-sactgan was not among --methods"}
    rivals = [m for m in GOAL_RIVALS if m in medians]
    out: dict[str, Any] = {"evaluated": bool(rivals), "rivals": rivals, "metrics": {}}
    for key in SEED_METRICS:
        ours = medians["dp-sactgan"].get(key)
        row = {}
        for rival in rivals:
            theirs = medians[rival].get(key)
            if ours is None or theirs is None:
                row[rival] = None
            else:
                row[rival] = abs(ours) < abs(theirs) if key.startswith("lr_utility") else ours < theirs
        out["metrics"][key] = row
    verdicts = [v for row in out["metrics"].values() for v in row.values()]
    out["all_met"] = bool(verdicts) and all(v is True for v in verdicts)
    return out


#: The reproduction's tolerances against the paper's DP-SACTGAN row: the distances at or below the
#: published values; the LR differences no more than this much larger in size (ACC as a fraction).
REPRODUCTION_SLACK = {
    "lr_utility.difference.accuracy": 0.015, "lr_utility.difference.auroc": 0.05,
    "lr_utility.difference.f1_macro": 0.05, "wasserstein_mean.mean": 0.0, "js_distance_mean.mean": 0.0,
}  # fmt: skip


def reproduction_goals(ours: dict, paper: dict) -> dict[str, Any]:
    """DP-SACTGAN's medians against the paper's own row (its Tables 1 and 3): per metric of
    :data:`REPRODUCTION_SLACK`, ``{"ours", "paper", "gap", "met"}`` with ``gap = |ours| - |paper|``
    (how much larger in size ours is; distances are non-negative) and ``met = gap <= slack``;
    Diff-Cor is listed, with no goal. ``all_met`` over the goals."""
    out: dict[str, Any] = {"metrics": {}}
    for key in SEED_METRICS:
        mine, theirs = ours.get(key), paper.get(key)
        gap = None if mine is None or theirs is None else abs(mine) - abs(theirs)
        slack = REPRODUCTION_SLACK.get(key)
        met = None if slack is None or gap is None else gap <= slack
        out["metrics"][key] = {"ours": mine, "paper": theirs, "gap": gap, "slack": slack, "met": met}
    verdicts = [v["met"] for k, v in out["metrics"].items() if k in REPRODUCTION_SLACK]
    out["all_met"] = bool(verdicts) and all(v is True for v in verdicts)
    return out


def _fmt(v, scale=1.0, digits=4) -> str:
    return "n/a" if v is None else f"{v * scale:.{digits}f}"


def comparison_markdown(comp: dict) -> str:
    """``comparison.md``: our medians (and every seed) beside the paper's Tables 1 and 3."""
    scales = (100.0, 1, 1, 1, 1, 1)
    head = "| row | epsilon | " + " | ".join(SEED_METRIC_TITLES) + " | jsd total (nats) | fit s |"
    lines = [f"# DP-SACTGAN comparison on {comp['dataset']}", "",
             f"Command: `{comp['command']}`", "",
             "Lower is better everywhere. LR differences are real-trained minus synthetic-trained "
             "(ACC in percentage points), tested on the real held-out rows. Our rows: median over "
             f"seeds {comp['seeds']} at the headline (PLD) epsilon; the paper's rows: its Tables 1 "
             "and 3, labelled epsilon 1 (not soundly accounted).", "",
             "## Medians", "", head, "|" + "---|" * (len(SEED_METRICS) + 4)]
    for method, m in comp["methods"].items():
        med = m["median"]
        cells = [_fmt(med.get(k), s) for k, s in zip(SEED_METRICS, scales, strict=True)]
        eps = "inf (non-private)" if med.get("epsilon") is None else _fmt(med.get("epsilon"), digits=3)
        lines.append(f"| {method} (ours) | {eps} | " + " | ".join(cells)
                     + f" | {_fmt(med.get('jsd.total'))} | {_fmt(med.get('fit_seconds'), digits=1)} |")
    for model, row in comp["published"].items():
        cells = [_fmt(row.get(k), s) for k, s in zip(SEED_METRICS, scales, strict=True)]
        lines.append(f"| {model} (paper) | 1 (claimed) | " + " | ".join(cells) + " | — | — |")
    lines += ["", "## Every seed", "", "| method | seed | epsilon | " + " | ".join(SEED_METRIC_TITLES)
              + " | fit s | wall s |", "|" + "---|" * (len(SEED_METRICS) + 5)]
    for method, m in comp["methods"].items():
        for seed in m["per_seed"]["epsilon"]:
            get = lambda k, s=seed, m=m: m["per_seed"][k].get(s)  # noqa: E731
            cells = [_fmt(get(k), sc) for k, sc in zip(SEED_METRICS, scales, strict=True)]
            lines.append(f"| {method} | {seed} | {_fmt(get('epsilon'), digits=3)} | " + " | ".join(cells)
                         + f" | {_fmt(get('fit_seconds'), digits=1)} | {_fmt(get('wall_seconds'), digits=1)} |")
    rep = comp.get("reproduction")
    if rep is not None:
        lines += ["", "## The paper's DP-SACTGAN row reproduced", ""]
        if rep["non_private"]:
            lines += ["This run trained without noise (epsilon infinite): it shows the quality of the "
                      "published setting and carries **no privacy guarantee**.", ""]
        lines += ["| metric | ours (median) | paper | gap (size, ours minus paper) | goal | met |",
                  "|---|---|---|---|---|---|"]
        for key, title in zip(SEED_METRICS, SEED_METRIC_TITLES, strict=True):
            row, sc = rep["metrics"][key], (100.0 if key == SEED_METRICS[0] else 1.0)
            goal = "—" if row["slack"] is None else f"gap <= {_fmt(row['slack'], sc, 3)}"
            met = {True: "yes", False: "no", None: "—"}[row["met"]]
            lines.append(f"| {title} | {_fmt(row['ours'], sc)} | {_fmt(row['paper'], sc)} | "
                         f"{_fmt(row['gap'], sc)} | {goal} | {met} |")
        lines += ["", f"All met: {'yes' if rep['all_met'] else 'no'}."]
    g = comp["goals"]
    lines += ["", "## Goals (DP-SACTGAN's median beats each rival's median)", ""]
    if not g.get("evaluated"):
        lines.append(f"Not evaluated: {g.get('reason', 'no rival among --methods')}.")
    else:
        lines += ["| metric | " + " | ".join(g["rivals"]) + " |", "|---|" + "---|" * len(g["rivals"])]
        for key, title in zip(SEED_METRICS, SEED_METRIC_TITLES, strict=True):
            row = g["metrics"][key]
            lines.append(f"| {title} | " + " | ".join(
                {True: "yes", False: "no", None: "n/a"}[row[r]] for r in g["rivals"]) + " |")
        lines += ["", f"All met: {'yes' if g['all_met'] else 'no'}."]
    return "\n".join(lines) + "\n"


def plan_only(args, methods: Sequence[str], sets: dict[str, list[str]], n: int) -> dict:
    """``--plan-only``: each method's planned phases and epsilon (``Synthesizer.plan``: public
    values only, no training, no private row read), written to ``OUT/plan.json``."""
    from dpgen_jax import data, privacy, synthesizers

    schema = data.adult_ctab_schema()
    out: dict[str, Any] = {"dataset": DATASET, "num_records": n, "delta": args.delta,
                           "target_epsilon": _common.finite_or_none(args.epsilon),
                           "preset": args.preset, "methods": {}}
    for i, m in enumerate(methods):
        model = synthesizers.create(m, None, **synthesizers.config_overrides(m, sets[m]))
        preset = args.preset if i == 0 else None
        epsilon = args.epsilon if preset is None else None
        if i > 0 and args.preset is not None:
            first = out["methods"][methods[0]]["report"]["epsilon"]
            epsilon = math.inf if first is None else first
        plan = model.plan(schema, n, epsilon=epsilon, delta=args.delta, preset=preset)
        rep = privacy.report(plan.phases, plan.delta, accountant=plan.accountant)
        classic = privacy.epsilon(plan.phases, plan.delta, accountant="rdp", conversion="classic") \
            if plan.private else math.inf
        out["methods"][m] = {"preset": preset, "target_epsilon": _common.finite_or_none(epsilon),
                             "report": rep, "epsilon_rdp_classic": _common.finite_or_none(classic)}
        print(f"{m}: planned epsilon {rep['epsilon']} ({plan.accountant}), RDP classic "
              f"{_common.finite_or_none(classic)}, at delta {plan.delta}")
        _common.print_privacy(rep)
    _common.write_json(args.out / "plan.json", out)
    return out


def main(argv=None) -> dict:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--methods", nargs="+", default=list(METHODS))
    methods = pre.parse_known_args(argv)[0].methods
    from dpgen_jax import synthesizers

    unknown = [m for m in methods if m not in synthesizers.available()]
    first = methods[0] if methods and not unknown else "independent"
    p = _common.parser("python -m experiments.adult_dpsactgan", __doc__, first)
    p.add_argument("--methods", nargs="+", default=list(METHODS),
                   help="methods to run, in order; --preset names a preset of the first")
    p.add_argument("--quick", action="store_true",
                   help="tiny schedules on 600 training / 400 test rows (seconds per method; CI)")
    p.add_argument("--plan-only", action="store_true",
                   help="write each method's planned phases and epsilon to OUT/plan.json; no training")
    p.add_argument("--resume", action="store_true",
                   help="load the report of a method and seed already finished in --out with the "
                        "same settings instead of fitting it again")
    args = p.parse_args(argv)
    if unknown or len(set(methods)) != len(methods):
        p.error(f"--methods {methods}: expected distinct methods among {sorted(synthesizers.available())}")
    try:
        sets = split_sets(args.overrides, methods)
    except ValueError as exc:
        p.error(str(exc))
    # every --set (and the common flags) checked before anything is written; --quick: the
    # method's smoke schedule (none: its defaults under a time budget)
    specs = {m: _common.spec_from_args(args, p, method=m, sets=sets[m], quick=args.quick,
                                       preset=args.preset if i == 0 else None)
             for i, m in enumerate(methods)}
    command = "python -m experiments.adult_dpsactgan " + " ".join(sys.argv[1:] if argv is None else argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.plan_only:
        n = args.num_records if args.num_records is not None else len(load(args.data_dir, args.quick)[0])
        return plan_only(args, methods, sets, n)
    split = load(args.data_dir, args.quick)
    dataset = DATASET + (f" (quick: first {len(split[0])} train / {len(split[1])} test rows)" if args.quick else "")
    seeds = args.seeds or [None]
    comp: dict[str, Any] = {"dataset": dataset, "command": command, "delta": args.delta,
                            "target_epsilon": _common.finite_or_none(args.epsilon),
                            "preset": args.preset, "seeds": seeds, "methods": {}}
    epsilon, preset = args.epsilon, args.preset
    shared = Comparison(split=split, root=args.out, dataset=dataset, command=command, quick=args.quick,
                        resume=args.resume)
    for i, m in enumerate(methods):
        spec = dataclasses.replace(specs[m], epsilon=epsilon)
        print(f"== {m} on {dataset}: " + (f"preset {spec.preset}" if spec.preset else f"epsilon {epsilon}"))
        per_seed, median = _per_method(_common.run(
            spec, args.seeds, args.out / m, functools.partial(run_one, shared), SUMMARY_KEYS), seeds)
        comp["methods"][m] = {"per_seed": per_seed, "median": median}
        if i == 0 and preset is not None:  # the rivals at the epsilon the preset reached
            eps = median.get("epsilon")
            epsilon = math.inf if eps is None else eps
            comp["comparison_epsilon"] = _common.finite_or_none(epsilon)
    comp["published"] = {r.method: {k: r.at(k)[0] for k in SEED_METRICS} for r in published()}
    comp["published_citation"] = published()[0].citation
    comp["goals"] = goals({m: v["median"] for m, v in comp["methods"].items()})
    if "dp-sactgan" in comp["methods"]:
        med = comp["methods"]["dp-sactgan"]["median"]
        comp["reproduction"] = {**reproduction_goals(med, comp["published"]["DP-SACTGAN"]),
                                "non_private": med.get("epsilon") is None}
    _common.write_json(args.out / "comparison.json", comp)
    (args.out / "comparison.md").write_text(comparison_markdown(comp))
    print(comparison_markdown(comp))
    return comp


if __name__ == "__main__":
    _common.enable_compilation_cache()  # command-line runs only: it sets global JAX config
    main()
