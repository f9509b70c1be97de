"""Empirical privacy audit of DP-auto-GAN's autoencoder phase on UCI Adult (one training run each).

Usage::

    python -m experiments.audit --epsilons 1 4 8 --out runs/audit
    python -m experiments.audit --epsilons 1 4 8 --quick --out runs/audit-quick

For every claimed epsilon the autoencoder phase (the synthesizer's loss, networks, optimizer,
batch 64 over Adult's 32,561 rows, the paper-joint clip norm and its 10,000-step schedule; noise
calibrated to the claim at delta with the PLD accountant) is trained once with gradient canaries
and audited (``dpgen_jax.audit``): the sound phase, and a deliberately broken variant (noise off
by default) whose claim is the sound phase's. Writes ``report.json`` and ``summary.md`` (claimed
epsilon, empirical lower bound, canaries, guesses, correct guesses, minutes) into ``--out``.
``--quick`` runs 2,000 steps (a smoke test; its bounds are weaker). See ``docs/audit.md``.
UCI Adult: Becker & Kohavi (1996), doi:10.24432/C5XW20, CC BY 4.0.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import time

from experiments import _common


def _row(variant: str, res) -> dict:
    s = res.summary()
    s.update(variant=variant, minutes=s["seconds"] / 60.0)
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
    """The markdown table of the runs (and the one-run limit per number of canaries)."""
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
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.audit", description=__doc__.split("\n\n")[0])
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 4.0, 8.0])
    p.add_argument("--broken-epsilons", type=float, nargs="*", default=None,
                   help="claims at which the broken variant is audited (default: --epsilons)")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--canaries", type=int, default=1000)
    p.add_argument("--broken", choices=["noise_off", "no_clip"], default="noise_off")
    p.add_argument("--canary-scale", type=float, default=None,
                   help="canary gradient norm in units of the clip norm, in every run (default 1; "
                        "10 with --broken no_clip, which only a canary above the clip norm shows)")
    p.add_argument("--steps", type=int, default=None, help="override the 10,000-step schedule")
    p.add_argument("--quick", action="store_true", help="2,000 steps")
    p.add_argument("--significance", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=None,
                   help="seeded, reproducible run (default: OS entropy)")
    p.add_argument("--data-dir", type=pathlib.Path, default=None)
    p.add_argument("--out", type=pathlib.Path, required=True)
    args = p.parse_args(argv)
    for e in args.epsilons + (args.broken_epsilons or []):
        if not e > 0:
            p.error(f"--epsilons: {e} must be > 0")

    import jax

    from dpgen_jax import audit, data, dpsgd, library_versions

    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    train, _ = _common.load_adult(args.data_dir)
    x = data.TableEncoder(data.adult_schema()).encode(train)
    steps = args.steps if args.steps is not None else (2000 if args.quick else None)
    root = dpsgd.make_key(args.seed).key
    broken_eps = args.epsilons if args.broken_epsilons is None else args.broken_epsilons
    runs = [(None, e) for e in args.epsilons] + [(args.broken, e) for e in broken_eps]
    scale = args.canary_scale or (10.0 if args.broken == "no_clip" else 1.0)
    rows = []
    for i, (broken, eps) in enumerate(runs):
        res = audit.audit_dp_auto_gan_autoencoder(
            x, jax.random.fold_in(root, i), target_epsilon=eps, delta=args.delta, steps=steps,
            canaries=args.canaries, broken=broken, significance=args.significance,
            canary_scale=scale)
        row = _row("sound" if broken is None else f"broken ({broken})", res)
        rows.append(row)
        print(f"{row['variant']}: claimed eps {row['claimed_epsilon']:.3f}, lower bound "
              f"{row['epsilon_lower_bound']:.3f} ({row['correct_guesses']}/{row['guesses']} "
              f"correct, score {row['score']}), {row['minutes']:.2f} min", flush=True)
    limits = one_run_limits(args.canaries, args.delta, args.significance, args.epsilons)
    rep = {"experiment": "audit", "target": "dp-auto-gan autoencoder phase on adult",
           "delta": args.delta, "significance": args.significance, "canaries": args.canaries,
           "steps": rows[0]["steps"] if rows else None, "canary_scale": scale, "seeded": args.seed is not None,
           "threat_model": "all iterates (white-box gradient canaries; the observer sees every "
                           "privatised gradient)",
           "runs": rows, "one_run_limits": limits, "wall_seconds": time.perf_counter() - t0,
           "versions": library_versions()}
    _common.write_json(args.out / "report.json", rep)
    md = table(rows, limits)
    (args.out / "summary.md").write_text(md)
    print(md)
    return rep


if __name__ == "__main__":
    _common.enable_compilation_cache()
    main()
