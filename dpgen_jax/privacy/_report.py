"""The privacy report: a JSON-serialisable account of every phase and what was assumed.

The report lists every phase (mechanism, sampling rate, noise multiplier,
steps, epsilon alone), the accountant, conversion, neighbouring relation, delta, the composed
epsilon, and every assumption the guarantee rests on, as plain sentences.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._accounting import (
    Accountant,
    Conversion,
    accountant_sentence,
    as_phases,
    branches,
    check_accounting,
    epsilon_and_interval,
    flat_phases,
    map_phases,
    neighbouring_relation,
    orders_name,
    pld_supported,
    rdp_epsilon_and_order,
)
from dpgen_jax.privacy._phases import NeighboringRelation, Phase, relation_name
from dpgen_jax.privacy._prose import FLOATING_POINT, FLOATING_POINT_RANK, prose_of
from dpgen_jax.privacy._sharded import MixtureAnalyticAccountant

SEEDED_ASSUMPTION = (
    "The noise was seeded: a user-given seed makes the sampling and noise reproducible by anyone "
    "who knows it, so this run is for research and not fit for release."
)


def seeded_assumption() -> str:
    """The one sentence every synthesizer puts in its report when the run was seeded.

    ``report(..., seeded=True)`` appends it for you; this helper is for callers that build their
    own list of assumptions.
    """
    return SEEDED_ASSUMPTION


def _finite_or_none(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


_RELATION_SENTENCES = (
    "Neighbouring datasets differ by adding or removing one record (add/remove-one); "
    "the unit of privacy is one record (one row).",
    "Neighbouring datasets differ by replacing one record (replace-one), with the "
    "dataset size public, as in the GS-WGAN paper's accounting.",
)

_ONLY_LISTED = (
    "Only the listed phases touch the private records; anything else (schema and "
    "preprocessing, hyperparameter and checkpoint selection, repeated runs) is covered only "
    "if an assumption below says so."
)

#: Above this delta, without a public record count, the report warns (delta >= 1/N cannot be
#: checked without N, and a delta this large is meaningless on any table under 1/delta rows).
LOOSE_DELTA = 1e-3
_ACCOUNTANT_RANK = 90  # after every phase kind's sentence (:func:`prose_of`), before 100


def _module_assumptions(phases: tuple[Phase, ...], relation: NeighboringRelation, accountant: str,
                        conversion: str, pld_interval: float | None) -> list[str]:
    """The relation's sentence, then by rank: each phase kind's (:func:`prose_of`, once per
    sentence with the names of its phases, a parallel composition's included), how each phase's
    noise is realised in floating point (:data:`FLOATING_POINT`), the sentence that only the listed
    phases touch the data (rank 0), and how epsilon was computed."""
    names: dict[str, list[str]] = {}
    ranks: dict[str, int] = {}
    for p in phases:
        for q in dict.fromkeys((p, *p.leaves())):  # a parallel composition and its phases
            prose = prose_of(q)
            realised = None if prose.realisation is None else FLOATING_POINT[prose.realisation]
            said = ((prose.rank, prose.sentence), (FLOATING_POINT_RANK, realised))
            for rank, sentence in said:
                if sentence is not None:
                    ranks.setdefault(sentence, rank)
                    names.setdefault(sentence, []).append(q.name)
    ranked = [(rank, sentence.replace("{names}", str(names[sentence]))) for sentence, rank in ranks.items()]
    ranked += [(0, _ONLY_LISTED),
               (_ACCOUNTANT_RANK, accountant_sentence(phases, accountant, conversion, pld_interval))]
    first = _RELATION_SENTENCES[0 if relation == NeighboringRelation.ADD_OR_REMOVE_ONE else 1]
    return [first] + [sentence for _, sentence in sorted(ranked, key=lambda rs: rs[0])]


def report(
    phases: Sequence[Phase],
    delta: float,
    accountant: Accountant = "pld",
    conversion: Conversion = "improved",
    *,
    dataset_size: int | None = None,
    assumptions: Sequence[str] = (),
    seeded: bool = False,
    pld_discretization: float | None = None,
) -> dict[str, Any]:
    """A JSON-serialisable privacy report of all phases composed.

    Infinite epsilons are written as ``None`` (JSON ``null``), so ``json.dumps(report,
    allow_nan=False)`` always works.

    Args:
        phases: The phases of the run.
        delta: Target delta in (0, 1).
        accountant: Headline accountant, ``"pld"`` (default) or ``"rdp"``.
        conversion: For ``"rdp"``: ``"improved"`` or ``"classic"``.
        dataset_size: Number n of private records, if known; ``delta >= 1/n`` then warns
            (``UserWarning``) and adds an assumption sentence; without it, so does
            ``delta > LOOSE_DELTA``.
        assumptions: The caller's own sentences (schema, preprocessing, ...), appended after the
            module's.
        seeded: Whether the run's noise was seeded; appends :func:`seeded_assumption`.
        pld_discretization: Fixed PLD interval; default as in :func:`epsilon`.

    Returns:
        A dict with keys ``delta``, ``accountant``, ``conversion`` (None for PLD),
        ``neighbouring_relation``, ``epsilon`` (None if infinite), ``non_private``,
        ``epsilon_by_accountant`` (``{"pld", "rdp_improved", "rdp_classic"}``; None where infinite
        or unsupported, e.g. PLD for paper-mode or exponential-mechanism phases), ``rdp_optimal_order``
        (``{"improved", "classic"}``), ``pld_value_discretization_interval``, ``phases`` (each:
        ``name``, ``mechanism``, its parameters, ``steps``, ``epsilon_alone`` at the full delta
        under the headline accountant), ``sharded_accounting`` (None, or for a run with a proven
        sharded phase ``{"proven", "assumed", "assumed_label"}``: the headline and the number of the
        same run with each step's shard choice assumed fresh, labelled) and ``assumptions`` (list
        of sentences).

    Raises:
        TypeError, ValueError: As :func:`epsilon`, and for a bad ``dataset_size``, ``assumptions``
            or ``seeded``.
    """
    ps = as_phases(phases)
    d = _v.fraction(delta=delta)
    fixed = check_accounting(accountant, conversion, pld_discretization)
    relation = neighbouring_relation(ps)
    if dataset_size is not None:
        n = _v.whole(minimum=1, dataset_size=dataset_size)
    if isinstance(assumptions, str) or not all(isinstance(s, str) for s in assumptions):
        raise TypeError(f"assumptions={assumptions!r} is not a sequence of strings: pass one sentence per "
                        "assumption.")
    seeded = _v.boolean(seeded=seeded)

    headline, interval = epsilon_and_interval(ps, d, accountant, conversion, fixed)
    by_acc: dict[str, float | None] = {}
    if not pld_supported(ps):
        by_acc["pld"] = None
        pld_interval = interval
    elif accountant == "pld":
        by_acc["pld"] = headline
        pld_interval = interval
    else:
        by_acc["pld"], pld_interval = epsilon_and_interval(ps, d, "pld", "improved", fixed)
    spends = any(p.spends_privacy for p in ps)
    orders: dict[str, float | None] = {"improved": None, "classic": None}
    for conv in ("improved", "classic"):
        if spends:
            eps, order = rdp_epsilon_and_order(ps, d, conv)
        else:
            eps, order = 0.0, None
        by_acc[f"rdp_{conv}"] = eps
        orders[conv] = order if eps is not None and math.isfinite(eps) else None

    def entry_of(p: Phase) -> dict[str, Any]:
        alone = epsilon_and_interval((p,), d, accountant, conversion, fixed)[0]
        entry: dict[str, Any] = {"name": p.name, "mechanism": prose_of(p).mechanism}
        entry.update(p.report_parameters())
        entry["steps"] = p.steps
        rel = p.neighbouring_relation
        entry["neighbouring_relation"] = None if rel is None else relation_name(rel)
        entry["epsilon_alone"] = _finite_or_none(alone)
        if p.parallel_groups is not None:
            by_group = dict(branches(ps))
            entry["groups"] = [
                {"group": g, "epsilon": _finite_or_none(
                    epsilon_and_interval(by_group[g], d, accountant, conversion, fixed)[0]),
                 "phases": [entry_of(q) for q in inner]}
                for g, inner in p.parallel_groups]
        return entry

    phase_entries = [entry_of(p) for p in ps]
    sharded = None
    labels = [q.assumed_accounting()[1] for q in flat_phases(ps)
              if q.spends_privacy and q.assumed_accounting() is not None]
    if labels:  # the same run with each phase's assumed accounting, labelled (DESIGN rule 9)
        as_assumed = tuple(map_phases(ps, lambda q: (q.assumed_accounting() or (q,))[0]))
        assumed_eps = epsilon_and_interval(as_assumed, d, accountant, conversion, fixed)[0]
        sharded = {"proven": _finite_or_none(headline), "assumed": _finite_or_none(assumed_eps),
                   "assumed_label": labels[0]}

    non_private = math.isinf(headline)
    sentences = _module_assumptions(ps, relation, accountant, conversion, pld_interval)
    if dataset_size is not None and d >= 1.0 / n:
        msg = (
            f"delta={d:g} is not smaller than 1/n = {1.0 / n:.3g} for dataset_size n={n}: a "
            "mechanism that publishes one random record outright meets such a delta, so the "
            "guarantee is meaningless; use delta well below 1/n."
        )
        warnings.warn(msg, UserWarning, stacklevel=2)
        sentences.append(msg)
    elif dataset_size is None and d > LOOSE_DELTA:
        msg = (
            f"delta={d:g} is above {LOOSE_DELTA:g} and no public record count was given: on any "
            f"table of fewer than 1/delta = {1.0 / d:,.0f} rows, a mechanism that publishes one "
            "random record outright meets such a delta, so the guarantee may be meaningless; give "
            "the public number of records (num_records, --num-records) or use delta well below 1/N."
        )
        warnings.warn(msg, UserWarning, stacklevel=2)
        sentences.append(msg)
    if seeded:
        sentences.append(SEEDED_ASSUMPTION)
    sentences.extend(assumptions)

    return {
        "delta": d,
        "accountant": accountant,
        "conversion": None if accountant == "pld" else conversion,
        "neighbouring_relation": relation_name(relation),
        "epsilon": _finite_or_none(headline),
        "non_private": non_private,
        "epsilon_by_accountant": {k: _finite_or_none(v) for k, v in by_acc.items()},
        "rdp_optimal_order": orders,
        "rdp_orders": orders_name(ps),
        "pld_value_discretization_interval": pld_interval,
        "phases": phase_entries,
        "sharded_accounting": sharded,
        "assumptions": sentences,
    }


def format_number(v: Any, digits: int = 4) -> str:
    """A number for a console line: ``-`` for None, ``inf``, else ``digits`` significant digits."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.{digits}g}"
    return str(v)


def _headline_label(report: Mapping[str, Any]) -> str:
    """The epsilon line's label of the headline: the exact accountant's for a PLD headline beside a
    labelled assumed accounting (a proven sharded phase), else the accountant and conversion."""
    if report.get("sharded_accounting") and report["accountant"] == "pld":
        return MixtureAnalyticAccountant.HEADLINE_LABEL
    label = report["accountant"].upper()
    if report.get("conversion") and report["accountant"] != "pld":
        label += f" {report['conversion']}"
    return f"{label}, headline"


def _epsilon_lines(report: Mapping[str, Any]) -> list[str]:
    """The headline beside the RDP numbers, then the assumed and the paper's accountings."""
    if report["non_private"]:
        lines = ["  epsilon: inf (non-private run: no privacy guarantee)"]
    else:
        by = report["epsilon_by_accountant"]
        lines = [f"  epsilon: {format_number(report['epsilon'])} ({_headline_label(report)})"
                 f" | RDP improved {format_number(by.get('rdp_improved'))} | RDP classic "
                 f"{format_number(by.get('rdp_classic'))}   at delta = {report['delta']:g}, "
                 f"{report['neighbouring_relation']} neighbours"]
        sharded = report.get("sharded_accounting")
        if sharded:
            lines.append(f"  assumed accounting: {format_number(sharded.get('assumed'))} ({sharded['assumed_label']})")
    paper = report.get("paper_accounting")
    if paper:
        lines.append(f"  paper's accounting: {format_number(paper.get('epsilon'))} ({paper.get('label')})")
    return lines


def format_report(report: Mapping[str, Any], *, title: str) -> str:
    """A privacy report (``privacy.report`` / ``privacy_report()``) as a console table.

    One row per phase (mechanism, sampling rate, noise multiplier, steps, epsilon of the phase
    alone), then epsilon by each accountant, the assumed accounting and the paper's when the report
    has them, and every assumption; every line is rendered from the report's fields.
    """
    rows = [("phase", "mechanism", "sample rate", "noise mult.", "steps", "eps alone")]
    for ph in report["phases"]:
        rows.append((ph["name"], ph["mechanism"], format_number(ph.get("sample_rate")),
                     format_number(ph.get("noise_multiplier"), 5), str(ph["steps"]), format_number(ph["epsilon_alone"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [title]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines += _epsilon_lines(report)
    lines.append("  assumptions:")
    lines += [f"   - {a}" for a in report["assumptions"]]
    return "\n".join(lines)
