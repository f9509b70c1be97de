"""The advice checked on its own grid: leave-one-dataset-out, the time models' errors, the collapse
rules' false alarms and misses, and a picture of the grid's coverage.

Reads the shipped evidence (``dpgen_jax/advice/_evidence.json``, written from the committed
leaderboard by ``advice.write_evidence``); no fit runs::

    python -m experiments.studies.advice_validation --out runs/advice   # summary.md, coverage.png

docs/recommend.md quotes ``summary.md`` and shows ``coverage.png``.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics

from dpgen_jax import advice


def coverage_plot(path: pathlib.Path) -> pathlib.Path:
    """The grid's (N, columns) points, one marker per column mix, labelled with their epsilons."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ev = advice.load_evidence()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    marks = {"binary": ("s", "tab:blue"), "mixed": ("o", "tab:orange"), "continuous": ("^", "tab:green")}
    seen = set()
    for i, (name, facts) in enumerate(sorted(ev["datasets"].items(), key=lambda kv: kv[1]["num_records"])):
        kinds = facts["kinds"]
        mix = ("binary" if kinds["binary"] == facts["columns"] else
               "continuous" if kinds["continuous"] == facts["columns"] else "mixed")
        eps = sorted({c["epsilon"] for c in ev["cells"] if c["dataset"] == name})
        methods = len({c["method"] for c in ev["cells"] if c["dataset"] == name})
        m, colour = marks[mix]
        ax.scatter(facts["num_records"], facts["columns"], marker=m, color=colour, s=40 + 12 * len(eps),
                   label=None if mix in seen else f"{mix} columns", zorder=3)
        seen.add(mix)
        ax.annotate(f"{name}\neps {', '.join(f'{e:g}' for e in eps)}; {methods} methods",
                    (facts["num_records"], facts["columns"]), fontsize=6.5,
                    xytext=(5, 4 if i % 2 == 0 else -22), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(7, 2000)
    ax.set_xlabel("training rows N")
    ax.set_ylabel("columns")
    ax.set_title("The advice's evidence grid (dpgen_jax/advice/_evidence.json)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _f(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def summary(max_minutes: float = advice.DEFAULT_MAX_MINUTES) -> str:
    """The three checks as markdown."""
    lines = ["## Leave-one-dataset-out", "",
             f"First choice of `recommend` with the table's cells left out of the evidence, the collapse rules and "
             f"the time models (limit {max_minutes:g} min), against the table's measured medians of 3-way L1.", "",
             "| table | eps | first choice | its L1 | best measured | best L1 | independent L1 | within 10 % of best "
             "| within 5 % of independent | extrapolated | passed over (not run there) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = advice.leave_one_out(max_minutes)
    errors = advice.time_model_errors(rows)
    for r in rows:
        lines.append(f"| {r.dataset} | {r.epsilon:g} | {r.first} | {r.first_l1:.4f} | {r.best} | {r.best_l1:.4f} | "
                     f"{r.reference_l1:.4f} | {'yes' if r.within_best else 'no (+%.1f %%)' % (100 * (r.first_l1 / r.best_l1 - 1))} | "
                     f"{'yes' if r.within_reference else 'no (+%.1f %%)' % (100 * (r.first_l1 / r.reference_l1 - 1))} | "
                     f"{'yes' if r.extrapolated else 'no'} | {', '.join(r.passed_over) or '-'} |")
    lines += ["", f"{sum(r.within_best for r in rows)} of {len(rows)} within 10 % of the best; "
              f"{sum(r.within_reference for r in rows)} of {len(rows)} within 5 % of independent. Methods ranked "
              f"feasible whose measured fit took longer than {max_minutes:g} min: "
              + (", ".join(f"{m} on {r.dataset} at {r.epsilon:g}" for r in rows for m in r.overran) or "none") + ".",
              "", "## Time models", "",
              "Predicted / measured median fit seconds per (dataset, epsilon) group (fits under 1 s counted as 1 s). "
              "Held out: as `recommend` predicts with the group's dataset left out of the evidence and the time "
              "models (the model, corrected by its error on the nearest remaining cells). In sample: the "
              "uncorrected model on the groups it was fitted on.", "",
              "| method | held-out groups | median factor | worst factor | within 2x | under-predicted more than 2x | "
              "in-sample worst |", "|---|---|---|---|---|---|---|"]
    for m, e in errors.items():
        held = [max(r, 1 / r) for r in e.held_out]
        lines.append(f"| {m} | {len(held)} | {_f(statistics.median(held) if held else None)}x | "
                     f"{_f(e.worst(e.held_out))}x | {sum(h <= 2 for h in held)} of {len(held)} | "
                     f"{sum(r < 0.5 for r in e.held_out)} | {_f(e.worst(e.in_sample))}x |")
    lines += ["", "## Collapse rules", "",
              "| family | grid groups | collapsed | false alarms (held out) | misses (held out) | "
              "false alarms (in sample) | misses (in sample) |", "|---|---|---|---|---|---|---|"]
    for fam, c in advice.collapse_rates().items():
        lines.append(f"| {fam} | {c.groups} | {c.collapsed} | {c.false_alarms} | {c.misses} | "
                     f"{c.in_sample_false_alarms} | {c.in_sample_misses} |")
    for fam, rule in advice.collapse_rules().items():
        lines += ["", f"{fam}: {rule.describe()}", "", "| method | dataset | epsilon | statistic | outcome | flagged |",
                  "|---|---|---|---|---|---|"]
        for pt in sorted(rule.points, key=lambda q: q.value):
            lines.append(f"| {pt.method} | {pt.dataset} | {pt.epsilon:g} | {pt.value:.3g} | "
                         f"{'collapsed' if pt.collapsed else 'learned'} | {'yes' if rule.flags(pt.value) else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=pathlib.Path, required=True)
    p.add_argument("--max-minutes", type=float, default=advice.DEFAULT_MAX_MINUTES)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    text = summary(args.max_minutes)
    (args.out / "summary.md").write_text(text)
    coverage_plot(args.out / "coverage.png")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

