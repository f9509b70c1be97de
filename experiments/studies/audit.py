"""Empirical privacy audits: DP-auto-GAN's autoencoder on Adult (one run), and many-run audits of
one DP-SGD step, the generator-side sanitiser, the Gaussian histograms and DP-EM.

Usage::

    python -m experiments.studies.audit --epsilons 1 4 --variants sound noise_off no_clip --out runs/audit
    python -m experiments.studies.audit --mechanism sanitizer --epsilons 1 4 --seed 0 --out runs/audit-san
    python -m experiments.studies.audit --mechanism dp-em --epsilons 4 --variants half_noise --seed 0 \\
        --out runs/audit-dp-em

``--mechanism autoencoder`` (the default): the autoencoder phase of DP-auto-GAN (the
synthesizer's loss, networks, optimizer, batch over Adult's 32,561 rows, the paper-joint clip
norm and its 10,000-step schedule; noise calibrated to the claim at delta with the PLD accountant)
trained once per row with 1,000 gradient canaries and audited in one run
(``dpgen_jax.audit.audit_dp_auto_gan_autoencoder``). ``--quick`` runs 2,000 steps.

``--mechanism dpsgd-step | sanitizer | histograms-independent | histograms-dp-sactgan | dp-em``:
the library's mechanism run ``--runs`` times under ``jax.vmap``, the canary in half of the runs,
bounded with jax-privacy's Clopper-Pearson test (``dpgen_jax.audit.audit_dpsgd_step``,
``audit_sanitizer``, ``audit_histograms``, ``audit_dp_em``).

Every row is one (variant, claimed epsilon): ``sound`` or a broken variant (``noise_off``,
``half_noise``, ``no_clip``: arguments of the real functions; the claim stays the sound one's).
With ``--seed`` a row's key depends only on the seed, the variant and the claim, so a row
re-run alone (the command printed beside it in ``summary.md``) gives the same numbers. Writes
``report.json`` and ``summary.md`` into ``--out``. See ``docs/audit.md``.
UCI Adult: Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import time

from dpgen_jax import _validate as _v
from experiments import _common

MECHANISMS = ("autoencoder", "dpsgd-step", "sanitizer", "histograms-independent",
              "histograms-dp-sactgan", "dp-em")
VARIANTS = ("sound", "noise_off", "half_noise", "no_clip")
DEFAULT_RUNS = {"dpsgd-step": 1_000_000, "sanitizer": 1_000_000,
                "histograms-independent": 1_000_000, "histograms-dp-sactgan": 1_000_000,
                "dp-em": 2_000_000}
"""Runs per row of the docs tables (half with the canary)."""


def _family(mechanism: str) -> str:
    return {"autoencoder": "dpsgd", "histograms-independent": "histograms",
            "histograms-dp-sactgan": "histograms"}.get(mechanism, mechanism)


def variants_of(mechanism: str) -> tuple[str, ...]:
    """``sound`` and the broken variants the mechanism's audit accepts."""
    from dpgen_jax import audit

    if mechanism == "autoencoder":
        return ("sound",) + audit.BROKEN_VARIANTS
    return ("sound",) + audit.MANY_RUN_BROKEN[_family(mechanism)]


def row_key(root, variant: str, epsilon: float):
    """The row's key: the root key folded with the variant and the claim (milli-epsilon)."""
    import jax

    return jax.random.fold_in(jax.random.fold_in(root, VARIANTS.index(variant)),
                              int(round(epsilon * 1000)))


def row_command(args, variant: str, epsilon: float) -> str:
    """The command that re-runs one row alone (same numbers when seeded)."""
    parts = ["python -m experiments.studies.audit", f"--mechanism {args.mechanism}",
             f"--epsilons {epsilon:g}", f"--variants {variant}"]
    if args.mechanism == "autoencoder":
        if args.steps is not None:
            parts.append(f"--steps {args.steps}")
        elif args.quick:
            parts.append("--quick")
        if args.canaries != 1000:
            parts.append(f"--canaries {args.canaries}")
    else:
        parts.append(f"--runs {args.runs}")
    if args.delta != 1e-5:
        parts.append(f"--delta {args.delta:g}")
    if args.canary_scale is not None:
        parts.append(f"--canary-scale {args.canary_scale:g}")
    if args.seed is not None:
        parts.append(f"--seed {args.seed}")
    parts.append(f"--out runs/audit-{args.mechanism}")
    return " ".join(parts)


def _row(variant: str, res, command: str) -> dict:
    s = res.summary()
    s.update(variant=variant if variant == "sound" else f"broken ({variant})",
             minutes=s["seconds"] / 60.0, command=command)
    return s


def one_run_limits(canaries: int, delta: float, significance: float, claims) -> dict:
    """What a perfect attack could certify with this procedure, and what a claim would need.

    The audit tries 2 scores x ``guess_grid(m)`` rules; its largest rule guesses 45% of m.
    For each claim, the number of correct guesses r (with m = r / 0.45 canaries) that would
    certify it, found by doubling r (None above 10^7, where one-run auditing's delta term,
    2 m delta, alone exceeds the significance).
    """
    from dpgen_jax import audit

    grid = audit.guess_grid(canaries)
    rules = 2 * len(grid)
    cap = audit.max_certifiable_epsilon(grid[0], canaries, delta, significance=significance,
                                        rules=rules)
    out = {"max_guesses": grid[0], "rules": rules, "max_certifiable_epsilon": cap, "needed": {}}
    for claim in sorted(set(claims)):
        r, need = grid[0], None
        while r <= 10**7:
            m = math.ceil(r / 0.45)
            if audit.max_certifiable_epsilon(r, m, delta, significance=significance,
                                             rules=rules) > claim:
                need = {"correct_guesses": r, "canaries": m}
                break
            r *= 2
        out["needed"][str(claim)] = need
    return out


def limit_lines(limits: dict, canaries: int) -> list[str]:
    lines = [f"With {canaries} canaries the largest pre-registered guess is {limits['max_guesses']} "
             f"canaries; all correct, the procedure ({limits['rules']} score x guess rules at "
             f"significance 0.05) certifies at most eps = {limits['max_certifiable_epsilon']:.3f}: "
             "about ln(r / ln(rules / significance)), the ln(r/3) limit of one-run auditing."]
    for claim, need in limits["needed"].items():
        if need is None:
            lines.append(f"Claim {claim}: not certifiable by this procedure with up to 10^7 guesses.")
        else:
            lines.append(f"Claim {claim}: needs about {need['correct_guesses']} correct guesses "
                         f"(m = {need['canaries']} canaries, doubling search).")
    return lines


def table(rows: list[dict], limits: dict) -> str:
    """The markdown table of one-run audits (and the one-run limit per number of canaries)."""
    lines = ["| phase | claimed eps | empirical lower bound | bound > claim | canaries (in) | "
             "guesses | correct | best score | minutes |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['claimed_epsilon']:.3f} | {r['epsilon_lower_bound']:.3f} | "
            f"{'yes' if r['epsilon_lower_bound'] > r['claimed_epsilon'] else 'no'} | "
            f"{r['canaries']} ({r['included']}) | {r['guesses']} | {r['correct_guesses']} | "
            f"{r['score']} | {r['minutes']:.2f} |")
    lines.append("")
    for text in limit_lines(limits, rows[0]["canaries"] if rows else 0):
        lines.append(f"- {text}")
    lines += ["", "Commands (one row each):", ""]
    lines += [f"- {r['variant']}, eps {r['claimed_epsilon']:.0f}: `{r['command']}`" for r in rows]
    return "\n".join(lines) + "\n"


def many_run_table(rows: list[dict]) -> str:
    """The markdown table of many-run audits, with each row's command below it."""
    lines = ["| variant | claimed eps | empirical lower bound | bound > claim | runs (in / out) | "
             "threshold | TP | FP | ceiling | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['claimed_epsilon']:.3f} | {r['epsilon_lower_bound']:.3f} | "
            f"{'yes' if r['epsilon_lower_bound'] > r['claimed_epsilon'] else 'no'} | "
            f"{r['runs_in']:,} / {r['runs_out']:,} | {r['threshold']:.2f} | "
            f"{r['true_positives']:,} | {r['false_positives']:,} | "
            f"{r['max_certifiable_epsilon']:.2f} | {r['seconds']:.1f} |")
    lines += ["", "Commands (one row each):", ""]
    lines += [f"- {r['variant']}, eps {r['claimed_epsilon']:.0f}: `{r['command']}`" for r in rows]
    return "\n".join(lines) + "\n"


def _audit_many(args, variant: str, eps: float, key):
    from dpgen_jax import audit

    broken = None if variant == "sound" else variant
    common = dict(target_epsilon=eps, delta=args.delta, runs=args.runs, broken=broken,
                  significance=args.significance)
    scale = args.canary_scale or (10.0 if variant == "no_clip" else 1.0)
    if args.mechanism == "dpsgd-step":
        return audit.audit_dpsgd_step(key, canary_scale=scale, **common)
    if args.mechanism == "sanitizer":
        return audit.audit_sanitizer(key, canary_scale=scale, **common)
    if args.mechanism.startswith("histograms-"):
        return audit.audit_histograms(key, mechanism=args.mechanism.split("-", 1)[1], **common)
    return audit.audit_dp_em(key, **common)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.studies.audit",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--mechanism", choices=MECHANISMS, default="autoencoder")
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0], action=_v.flag(_v.positive))
    p.add_argument("--variants", nargs="+", choices=VARIANTS, default=None,
                   help="rows per claim (default: sound and every broken variant of the "
                        "mechanism; for the autoencoder: sound and --broken)")
    p.add_argument("--broken", nargs="+", choices=["noise_off", "no_clip"], default=None,
                   help="autoencoder only, the older form of --variants: sound at --epsilons and "
                        "these variants at --broken-epsilons (default noise_off)")
    p.add_argument("--broken-epsilons", type=float, nargs="*", default=None, action=_v.flag(_v.positive),
                   help="claims at which --broken variants are audited (default: --epsilons)")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--canaries", type=int, default=1000, help="autoencoder: canaries per run")
    p.add_argument("--runs", type=int, default=None,
                   help="many-run mechanisms: runs per row (default: the docs' sizes)")
    p.add_argument("--canary-scale", type=float, default=None,
                   help="canary gradient norm in units of the clip norm, in every row (default 1; "
                        "10 for no_clip, which only a canary above the clip norm shows)")
    p.add_argument("--steps", type=int, default=None, help="autoencoder: override the schedule")
    p.add_argument("--quick", action="store_true", help="autoencoder: 2,000 steps")
    p.add_argument("--significance", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=None,
                   help="seeded, reproducible run (default: OS entropy)")
    p.add_argument("--data-dir", type=pathlib.Path, default=None)
    p.add_argument("--out", type=pathlib.Path, required=True)
    args = p.parse_args(argv)
    allowed = variants_of(args.mechanism)
    if args.variants is not None:
        if args.broken is not None or args.broken_epsilons is not None:
            p.error("--variants replaces --broken / --broken-epsilons; give one form")
        bad = [v for v in args.variants if v not in allowed]
        if bad:
            p.error(f"--variants {bad} not available for {args.mechanism}: choose from {allowed}")
        plan = [(v, e) for v in args.variants for e in args.epsilons]
    elif args.mechanism == "autoencoder":
        broken_eps = args.epsilons if args.broken_epsilons is None else args.broken_epsilons
        plan = [("sound", e) for e in args.epsilons] + [
            (b, e) for b in (args.broken or ["noise_off"]) for e in broken_eps]
    else:
        if args.broken is not None or args.broken_epsilons is not None:
            p.error("--broken / --broken-epsilons are for the autoencoder; use --variants")
        plan = [(v, e) for v in allowed for e in args.epsilons]
    if args.mechanism != "autoencoder" and args.runs is None:
        args.runs = DEFAULT_RUNS[args.mechanism]

    from dpgen_jax import data, dpsgd, library_versions

    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    root = dpsgd.make_key(args.seed).key
    rows = []
    if args.mechanism == "autoencoder":
        from dpgen_jax import audit

        train, _ = _common.load_adult(args.data_dir)
        x = data.TableEncoder(data.adult_schema()).encode(train)
        steps = args.steps if args.steps is not None else (2000 if args.quick else None)
        for variant, eps in plan:
            scale = args.canary_scale or (10.0 if variant == "no_clip" else 1.0)
            res = audit.audit_dp_auto_gan_autoencoder(
                x, row_key(root, variant, eps), target_epsilon=eps, delta=args.delta,
                steps=steps, canaries=args.canaries, significance=args.significance,
                broken=None if variant == "sound" else variant, canary_scale=scale)
            row = _row(variant, res, row_command(args, variant, eps))
            row["canary_scale"] = scale
            rows.append(row)
            print(f"{row['variant']}: claimed eps {row['claimed_epsilon']:.3f}, lower bound "
                  f"{row['epsilon_lower_bound']:.3f} ({row['correct_guesses']}/{row['guesses']} "
                  f"correct, score {row['score']}), {row['minutes']:.2f} min", flush=True)
        limits = one_run_limits(args.canaries, args.delta, args.significance, args.epsilons)
        extra = {"target": "dp-auto-gan autoencoder phase on adult", "canaries": args.canaries,
                 "steps": rows[0]["steps"] if rows else None, "one_run_limits": limits,
                 "threat_model": "all iterates (white-box gradient canaries; the observer sees "
                                 "every privatised gradient)"}
        md = table(rows, limits)
    else:
        for variant, eps in plan:
            res = _audit_many(args, variant, eps, row_key(root, variant, eps))
            row = _row(variant, res, row_command(args, variant, eps))
            rows.append(row)
            print(f"{row['variant']}: claimed eps {row['claimed_epsilon']:.3f}, lower bound "
                  f"{row['epsilon_lower_bound']:.3f} (threshold {row['threshold']:.2f}: "
                  f"{row['true_positives']} of {row['runs_in']} in-runs, {row['false_positives']} "
                  f"of {row['runs_out']} out-runs), {row['seconds']:.1f} s", flush=True)
        extra = {"target": args.mechanism, "runs_per_row": args.runs,
                 "threat_model": "the mechanism's release, many independent runs"}
        md = many_run_table(rows)
    rep = {"experiment": "audit", "mechanism": args.mechanism, "delta": args.delta,
           "significance": args.significance, "seeded": args.seed is not None, **extra,
           "runs": rows, "wall_seconds": time.perf_counter() - t0,
           "versions": library_versions()}
    _common.write_json(args.out / "report.json", rep)
    (args.out / "summary.md").write_text(md)
    print(md)
    return rep


if __name__ == "__main__":
    _common.enable_compilation_cache()
    main()
