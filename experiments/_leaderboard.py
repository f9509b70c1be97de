"""The benchmark's leaderboard: every finished cell, medians over seeds, published numbers, plots.

:func:`write` reads every ``OUT/<dataset>/<method>/eps-<e>/seed-<s>/report.json`` (and the
``error.json`` of failed cells) and writes ``OUT/leaderboard.json``, ``OUT/leaderboard.md`` and
``OUT/plots/<dataset>-<metric>.png`` (each metric against epsilon, one line per method, published
numbers as markers) and ``OUT/plots/<dataset>-fit-seconds.png``. :func:`merge` adds a run folder's
cells to a committed leaderboard (``docs/results``) whose other run folders are gone.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import statistics
import subprocess
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from experiments import _common
from experiments._datasets import DATASETS

#: (column key, report path, heading, higher is better) of the main table: the benchmark's own
#: columns around the metric table's (``metrics.METRICS``, each metric's ``board``). A metric
#: column's value is the cell's ``board`` record (written from the table); cells written before
#: the table existed are read at the legacy paths of their report.
_OWN_FIRST = (("rf_accuracy", "rf_salary_accuracy", "RF acc.", True),)
_OWN_LAST = (("tv_max", None, "TV max", False), ("fit_seconds", "fit_seconds", "fit s", None))
LEGACY_PATHS = {"tstr_auroc": "tstr_auroc", "jsd_total": "jsd.total", "kl_mu_total": "kl_mu.total",
                "tv_mean": "tv_1way.mean", "tv_continuous": "tv_1way.mean_continuous",
                "l1_3way": "marginal_l1_3way.mean",
                "dimwise_f1": "dimension_wise_summary.mean_distance_from_diagonal.f1_micro",
                "dimwise_auroc": "dimension_wise_summary.mean_distance_from_diagonal.auroc"}


def _metric_columns() -> tuple[tuple[str, str | None, str, bool | None], ...]:
    from dpgen_jax import metrics

    return tuple((c.key, c.path, c.heading, c.higher_is_better) for m in metrics.METRICS for c in m.board)


_TABLE_COLUMNS = _metric_columns()
METRICS: tuple[tuple[str, str | None, str, bool | None], ...] = _OWN_FIRST + _TABLE_COLUMNS + _OWN_LAST
#: Published values: result path of a ``metrics.PublishedResults`` record -> our column key.
PUBLISHED_PATHS = {"label_accuracy.synthetic": "rf_accuracy", "jsd.total": "jsd_total",
                   "kl_mu.total": "kl_mu_total"}


def _get(report: dict, path: str):
    return _common.lookup(report, path)


def cell_row(rep: dict) -> dict[str, Any]:
    """One finished cell as a flat row."""
    row = {"dataset": rep["dataset"], "method": rep["method"], "seed": rep["seed"],
           "target_epsilon": rep["target_epsilon"], "epsilon": rep["epsilon"],
           # a sharded method's headline is the exact proven bound, not dp_accounting's PLD
           "accountant": ("proven" if rep["privacy"].get("sharded_accounting")
                          else rep.get("accountant") or rep["privacy"].get("accountant")),
           "epsilon_paper_accounting": rep["epsilon_paper_accounting"],
           "paper_accounting": rep["paper_accounting"], "wall_seconds": rep["wall_seconds"],
           "quick": (rep.get("benchmark") or {}).get("quick"),
           "capped": bool((rep.get("benchmark") or {}).get("capped")),
           "load_at_start": _load_average(((rep.get("benchmark") or {}).get("machine_at_start") or {}).get("uptime"))}
    board = rep.get("board")
    for key, path, _, _ in _OWN_FIRST + _OWN_LAST:
        if path is not None:
            row[key] = _get(rep, path)
    for key, _, _, _ in _TABLE_COLUMNS:
        row[key] = board.get(key) if board is not None else _get(rep, LEGACY_PATHS.get(key, key))
    per = ((rep.get("tv_1way") or {}).get("per_column")) or {}
    row["tv_per_column"] = per
    if per:
        worst = max(per, key=per.get)
        row["tv_max"], row["tv_max_column"] = per[worst], worst
    else:
        row["tv_max"], row["tv_max_column"] = None, None
    return row


def _seeds(row: dict) -> str:
    """A row's seed count, and how many of its fits a time budget cut (``benchmark
    --max-fit-seconds``)."""
    return str(len(row["seeds"])) + (f" ({row['capped']} capped)" if row.get("capped") else "")


def _load_average(uptime: str | None) -> float | None:
    """The 1-minute load average in an ``uptime`` line, or None."""
    if not uptime or "load average:" not in uptime:
        return None
    try:
        return float(uptime.split("load average:")[1].split(",")[0])
    except ValueError:
        return None


def _median(values):
    finite = [v for v in values if v is not None]
    return statistics.median(finite) if finite else None


def aggregate(cells: list[dict]) -> list[dict]:
    """Median over seeds per (dataset, method, target epsilon), with the seeds and the range."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        groups[(c["dataset"], c["method"], c["target_epsilon"])].append(c)
    rows = []
    for (ds, method, eps), cs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2] or 0, kv[0][1])):
        row = {"dataset": ds, "method": method, "target_epsilon": eps, "seeds": sorted(c["seed"] for c in cs),
               "accountant": cs[0]["accountant"], "paper_accounting": cs[0]["paper_accounting"],
               "quick": any(c["quick"] for c in cs), "capped": sum(bool(c.get("capped")) for c in cs)}
        for key in ["epsilon", "epsilon_paper_accounting", "wall_seconds"] + [m[0] for m in METRICS]:
            vals = [c.get(key) for c in cs]
            row[key] = _median(vals)
            finite = [v for v in vals if v is not None]
            row[f"{key}_range"] = [min(finite), max(finite)] if finite else None
        cols = sorted({k for c in cs for k in c["tv_per_column"]})
        row["tv_per_column"] = {k: _median([c["tv_per_column"].get(k) for c in cs]) for k in cols}
        worst = max(cols, key=lambda k: row["tv_per_column"][k] or 0.0) if cols else None
        row["tv_max"] = row["tv_per_column"][worst] if worst else None  # the worst column's median
        row["tv_max_column"] = worst
        worst_vals = [c["tv_per_column"].get(worst) for c in cs if worst]
        worst_vals = [v for v in worst_vals if v is not None]
        row["tv_max_range"] = [min(worst_vals), max(worst_vals)] if worst_vals else None
        rows.append(row)
    return rows


def published_rows(datasets: set[str]) -> list[dict]:
    """The published numbers of each method's paper on each dataset of the suite."""
    out = []
    for ds in sorted(datasets):
        spec = DATASETS.get(ds)
        for method, record in sorted((spec.published if spec else {}).items()):
            for e in record.epsilons:
                row = {"dataset": ds, "method": method, "target_epsilon": e, "source": record.label,
                       "citation": record.citation, "accounting": "the paper's own"}
                for path, key in PUBLISHED_PATHS.items():
                    row[key] = record.values.get(path, {}).get(e)
                if any(row[k] is not None for k in PUBLISHED_PATHS.values()):
                    out.append(row)
    return out


def _fmt(v, digits=3):
    if v is None:
        return "—"
    if isinstance(v, float):
        if abs(v) >= 100:
            return f"{v:.0f}"
        return f"{v:.{digits}f}"
    return str(v)


def machine() -> dict[str, Any]:
    try:
        uptime = subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        uptime = None
    return {"uptime": uptime, "cpu_count": os.cpu_count(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine()}


SUMMARY = (("rf_accuracy", "RF salary acc."), ("jsd_total", "JSD total"), ("tv_continuous", "TV cont."),
           ("l1_3way", "3-way L1"), ("tstr_auroc", "TSTR AUROC"), ("fit_seconds", "fit s"))


def summary_table(board: dict, dataset: str) -> list[str]:
    """A compact table of one dataset (median over seeds; published values in parentheses), the
    form the README's reproduction table takes."""
    rows = [r for r in board["rows"] if r["dataset"] == dataset]
    pubs = {(r["method"], r["target_epsilon"]): r for r in board["published"] if r["dataset"] == dataset}
    lines = ["| method | target eps. | epsilon (acct.) | seeds | " + " | ".join(h for _, h in SUMMARY) + " |",
             "|" + "---|" * (4 + len(SUMMARY))]
    for r in sorted(rows, key=lambda r: (r["target_epsilon"], r["method"])):
        pub = pubs.get((r["method"], r["target_epsilon"]), {})
        cells = [r["method"], _fmt(r["target_epsilon"], 2), f"{_fmt(r['epsilon'], 3)} ({r['accountant']})",
                 _seeds(r)]
        for key, _ in SUMMARY:
            v = _fmt(r[key], 1 if key == "fit_seconds" else 3)
            cells.append(v + (f" ({_fmt(pub[key])})" if pub.get(key) is not None else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


#: The README's generated tables: the lines between these markers are :func:`summary_table` of the
#: committed leaderboard (``python -m experiments._leaderboard --readme README.md``).
README_START = "<!-- leaderboard table: {dataset} (generated from docs/results/leaderboard.json) -->"
README_END = "<!-- end of leaderboard table: {dataset} -->"


def update_readme(text: str, board: dict) -> str:
    """``text`` (a README) with every marked leaderboard table replaced by :func:`summary_table`.

    A table is marked by :data:`README_START` / :data:`README_END` lines naming its dataset.

    Raises:
        ValueError: a start marker without its end marker, or a dataset the board does not hold.
    """
    lines = text.split("\n")
    out, i = [], 0
    datasets = {r["dataset"] for r in board["rows"]}
    while i < len(lines):
        out.append(lines[i])
        ds = _marked_dataset(lines[i])
        if ds is None:
            i += 1
            continue
        if ds not in datasets:
            raise ValueError(f"README marks a leaderboard table for dataset {ds!r}, which the leaderboard "
                             f"does not hold (it has {sorted(datasets)}).")
        end = README_END.format(dataset=ds)
        try:
            j = lines.index(end, i + 1)
        except ValueError:
            raise ValueError(f"README has {lines[i]!r} without its end marker {end!r}.") from None
        out += summary_table(board, ds) + [end]
        i = j + 1
    return "\n".join(out)


def _marked_dataset(line: str) -> str | None:
    head, _, rest = README_START.partition("{dataset}")
    if line.startswith(head) and line.endswith(rest) and len(line) > len(head) + len(rest):
        return line[len(head):len(line) - len(rest)]
    return None


def _load_sentence(board: dict) -> str:
    loads = [c["load_at_start"] for c in board["cells"] if c.get("load_at_start") is not None]
    if not loads:
        return ""
    return (f" The 1-minute load average when the cells started ranged from {min(loads):.1f} to "
            f"{max(loads):.1f} (median {statistics.median(loads):.1f}) on {board['machine']['cpu_count']} "
            "cores: timings are inflated by other jobs and compare only within a row's seeds.")


def markdown(board: dict) -> str:
    lines = ["# Benchmark leaderboard", "",
             f"Generated {board['generated']} by `{board['command']}` from {len(board['cells'])} "
             f"finished cells ({len(board['failed'])} failed).", "",
             f"Machine: {board['machine']['cpu_count']} CPU cores ({board['machine']['platform']}); "
             f"`uptime` at generation: `{board['machine']['uptime']}`." + _load_sentence(board), "",
             "Each row is the median over the seeds listed (a seeded fit at the method's default "
             "schedule, calibrated to the target epsilon; synthetic rows as many as the training "
             "split; one evaluation seed for every cell). *epsilon* is the headline of the privacy "
             "report under the accountant named (PLD, or RDP with the improved conversion for "
             "methods with exponential-mechanism phases); *paper eps.* is the method's own paper's "
             "accounting of the same run. JSD and D_KL^mu are summed over the DP-auto-GAN paper's "
             "8 features on Adult (over every discrete feature elsewhere); TV is the total variation of 1-way marginals (continuous columns on 20 "
             "public equal-width bins; *TV max* is the worst column's median); 3-way L1 is the mean L1 distance of 3-way marginals; "
             "dim-wise distances are the mean |real score - synthetic score| / sqrt(2) of "
             "dimension-wise prediction. Published rows are the papers' own numbers.", ""]
    heads = ["method", "target eps.", "epsilon (acct.)", "paper eps.", "seeds"] + [m[2] for m in METRICS]
    for ds in sorted({r["dataset"] for r in board["rows"]} | {r["dataset"] for r in board["published"]}):
        desc = DATASETS[ds].description if ds in DATASETS else ""
        lines += [f"## {ds}", "", desc, ""]
        if any(r["dataset"] == ds for r in board["rows"]):
            lines += ["Summary (median over seeds; the paper's published value in parentheses):", ""]
            lines += summary_table(board, ds) + ["", "All metrics:", ""]
        lines += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        rows = [r for r in board["rows"] if r["dataset"] == ds]
        pubs = [r for r in board["published"] if r["dataset"] == ds]
        for eps in sorted({r["target_epsilon"] for r in rows + pubs}):
            for r in [r for r in rows if r["target_epsilon"] == eps]:
                acct = r["accountant"]  # pld, rdp or proven (a sharded method's exact bound)
                cells = [r["method"] + (" (quick)" if r["quick"] else ""), _fmt(eps, 2),
                         f"{_fmt(r['epsilon'], 4)} ({acct})", _fmt(r["epsilon_paper_accounting"], 4),
                         _seeds(r)]
                for key, _, _, _ in METRICS:
                    v = r[key]
                    cells.append(_fmt(v, 1 if key == "fit_seconds" else 3)
                                 + (f" ({r['tv_max_column']})" if key == "tv_max" and v is not None and "tv_max_column" in r else ""))
                lines.append("| " + " | ".join(cells) + " |")
            for r in [r for r in pubs if r["target_epsilon"] == eps]:
                cells = [f"*{r['method']}, published*", _fmt(eps, 2), "—", "paper's", "—"]
                cells += [_fmt(r.get(key)) for key, _, _, _ in METRICS]
                lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        cols = sorted({k for r in rows for k in r["tv_per_column"]})
        if cols:
            lines += [f"Total variation of every 1-way marginal ({ds}, median over seeds):", "",
                      "| method | target eps. | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 2)]
            for r in sorted(rows, key=lambda r: (r["target_epsilon"], r["method"])):
                lines.append(f"| {r['method']} | {_fmt(r['target_epsilon'], 2)} | "
                             + " | ".join(_fmt(r["tv_per_column"].get(c)) for c in cols) + " |")
            lines.append("")
    if board["published"]:
        lines += ["Published sources:", ""]
        for cit in sorted({(r["source"], r["citation"]) for r in board["published"]}):
            lines.append(f"- {cit[0]}: {cit[1]}.")
        lines.append("")
    if board["failed"]:
        lines += ["## Failed cells", "", "| dataset | method | target eps. | seed | error |", "|---|---|---|---|---|"]
        for f in board["failed"]:
            lines.append(f"| {f['dataset']} | {f['method']} | {_fmt(f['target_epsilon'], 2)} | {f['seed']} | "
                         f"{f['error'].splitlines()[0][:300]} |")
        lines.append("")
    commands = sorted({c for c in board["commands"] if c})
    if commands:
        lines += ["Commands that produced the cells (a cell run again by a later command replaces the "
                  "earlier one, so a command may have no cell left):", ""] + [f"    {c}" for c in commands] + [""]
    return "\n".join(lines)


def plots(board: dict, folder: pathlib.Path) -> list[pathlib.Path]:
    """Each metric against epsilon (one line per method, published numbers as markers), and fit
    seconds per method, per dataset."""
    from matplotlib.figure import Figure

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for ds in sorted({r["dataset"] for r in board["rows"]}):
        rows = [r for r in board["rows"] if r["dataset"] == ds]
        methods = sorted({r["method"] for r in rows})
        for key, _, head, _ in METRICS:
            if key == "fit_seconds" or all(r[key] is None for r in rows):
                continue
            fig = Figure(figsize=(5, 3.6))
            ax = fig.add_subplot()
            for m in methods:
                pts = sorted((r["target_epsilon"], r[key], r[f"{key}_range"]) for r in rows
                             if r["method"] == m and r[key] is not None)
                if not pts:
                    continue
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                err = [[max(y - p[2][0], 0.0) for y, p in zip(ys, pts)],
                       [max(p[2][1] - y, 0.0) for y, p in zip(ys, pts)]]
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=m)
            for r in board["published"]:
                if r["dataset"] == ds and r.get(key) is not None:
                    ax.plot([r["target_epsilon"]], [r[key]], "k*", markersize=9)
            if any(r["dataset"] == ds and r.get(key) is not None for r in board["published"]):
                ax.plot([], [], "k*", label="published")
            ax.set_xscale("log")
            ax.set_xlabel("target epsilon")
            ax.set_ylabel(head)
            ax.set_title(f"{ds}: {head} (median, range over seeds)")
            ax.legend(fontsize=8)
            path = folder / f"{ds}-{key}.png"
            fig.savefig(path, dpi=90, bbox_inches="tight")
            written.append(path)
        fig = Figure(figsize=(5, 3.2))
        ax = fig.add_subplot()
        secs = [_median([r["fit_seconds"] for r in rows if r["method"] == m]) or 0.0 for m in methods]
        ax.bar(methods, secs)
        ax.set_yscale("log")
        ax.set_ylabel("fit seconds (median over cells)")
        ax.set_title(f"{ds}: fit time per method")
        path = folder / f"{ds}-fit-seconds.png"
        fig.savefig(path, dpi=90, bbox_inches="tight")
        written.append(path)
    return written


def _cell_key(c: dict) -> tuple:
    return (c["dataset"], c["method"], c["target_epsilon"], c["seed"])


def _cell_order(c: dict) -> tuple:
    """The order :func:`write` lists cells in (its sorted folder paths, compared part by part)."""
    return (c["dataset"], c["method"], f"eps-{c['target_epsilon']:g}", f"seed-{c['seed']}")


def merge(committed: pathlib.Path, out: pathlib.Path, command: str,
          drop: Sequence[tuple[str, str]] = ()) -> dict:
    """Adds the cells of the run folder ``out`` to the leaderboard in the folder ``committed`` (its
    ``leaderboard.json``, e.g. ``docs/results``) and rewrites that folder's ``leaderboard.json`` and
    ``leaderboard.md`` (no plots).

    The committed ``leaderboard.json`` holds every cell's row, so the other cells are kept as they
    are (their run folders need not exist) and every row is aggregated again from all cells. A
    finished cell of ``out`` replaces a committed cell of the same (dataset, method, target
    epsilon, seed); a failed cell of ``out`` is listed unless that cell is finished. ``command``
    (this merge) heads the page; the commands that produced ``out``'s cells are appended to the
    committed list. ``drop`` lists (dataset, method) pairs whose committed cells are removed first
    (cells whose claim no longer holds, e.g. after an accounting change), unless ``out`` has them.
    """
    committed, out = pathlib.Path(committed), pathlib.Path(out)
    old = json.loads((committed / "leaderboard.json").read_text())
    gone = {tuple(pair) for pair in drop}
    old["cells"] = [c for c in old["cells"] if (c["dataset"], c["method"]) not in gone]
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("*/*/eps-*/seed-*/report.json"))]
    new = [cell_row(r) for r in reports]
    replaced = {_cell_key(c) for c in new}
    cells = sorted([c for c in old["cells"] if _cell_key(c) not in replaced] + new, key=_cell_order)
    finished = {_cell_key(c) for c in cells}
    failed = [f for f in old["failed"] if _cell_key(f) not in finished]
    for p in sorted(out.glob("*/*/eps-*/seed-*/error.json")):
        if not (p.parent / "report.json").exists():
            failed.append({k: v for k, v in json.loads(p.read_text()).items() if k != "traceback"})
    commands = {(r.get("benchmark") or {}).get("command") for r in reports} - {None}
    board = {
        "generated": time.strftime("%Y-%m-%d %H:%M %Z"),
        "command": command,
        "machine": machine(),
        "commands": old["commands"] + sorted(commands - set(old["commands"])),
        "cells": cells,
        "rows": aggregate(cells),
        "published": published_rows({c["dataset"] for c in cells}),
        "failed": failed,
    }
    _common.write_json(committed / "leaderboard.json", board)
    (committed / "leaderboard.md").write_text(markdown(board))
    return board


def write(out: pathlib.Path, command: str, with_plots: bool = True) -> dict:
    """Rebuilds ``leaderboard.json``, ``leaderboard.md`` and (``with_plots``) the plots from every
    finished cell."""
    out = pathlib.Path(out)
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("*/*/eps-*/seed-*/report.json"))]
    failed = []
    for p in sorted(out.glob("*/*/eps-*/seed-*/error.json")):
        if not (p.parent / "report.json").exists():
            failed.append({k: v for k, v in json.loads(p.read_text()).items() if k != "traceback"})
    cells = [cell_row(r) for r in reports]
    board = {
        "generated": time.strftime("%Y-%m-%d %H:%M %Z"),
        "command": command,
        "machine": machine(),
        "commands": sorted({(r.get("benchmark") or {}).get("command") for r in reports} - {None}),
        "cells": cells,
        "rows": aggregate(cells),
        "published": published_rows({c["dataset"] for c in cells}),
        "failed": failed,
    }
    out.mkdir(parents=True, exist_ok=True)
    _common.write_json(out / "leaderboard.json", board)
    (out / "leaderboard.md").write_text(markdown(board))
    board["plots"] = [str(p) for p in plots(board, out / "plots")] if with_plots else []
    return board



def main(argv: list[str] | None = None) -> int:
    """``python -m experiments._leaderboard --readme README.md [--board docs/results/leaderboard.json]``:
    regenerates the README's marked tables from the committed leaderboard."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m experiments._leaderboard", description=main.__doc__)
    parser.add_argument("--readme", type=pathlib.Path, required=True)
    parser.add_argument("--board", type=pathlib.Path, default=pathlib.Path("docs/results/leaderboard.json"))
    args = parser.parse_args(argv)
    board = json.loads(args.board.read_text())
    text = args.readme.read_text()
    new = update_readme(text, board)
    args.readme.write_text(new)
    print(f"{args.readme}: {'updated' if new != text else 'already up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
