"""The privacy report: a JSON-serialisable account of every phase and what was assumed.

The report lists every phase (mechanism, sampling rate, noise multiplier,
steps, epsilon alone), the accountant, conversion, neighbouring relation, delta, the composed
epsilon, and every assumption the guarantee rests on, as plain sentences.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._accounting import (
    RDP_ORDERS,
    Accountant,
    Conversion,
    _as_phases,
    _check_args,
    _check_pld_interval,
    _epsilon_and_interval,
    _is_paper,
    _is_proven,
    _rdp_epsilon_and_order,
    branches,
    flat_phases,
    neighbouring_relation,
    pld_supported,
)
from dpgen_jax.privacy._phases import (
    DPSGDPhase,
    ExponentialMechanismPhase,
    GaussianPhase,
    NeighboringRelation,
    NonPrivatePhase,
    ParallelPhases,
    Phase,
    relation_name,
)
from dpgen_jax.privacy._sharded_phase import ASSUMED_SHARD_SENTENCE, ShardedSanitizerPhase

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


def _module_assumptions(
    phases: tuple[Phase, ...],
    relation: NeighboringRelation,
    accountant: str,
    conversion: str,
    pld_interval: float | None,
    non_private: bool,
) -> list[str]:
    out: list[str] = []
    if relation == NeighboringRelation.ADD_OR_REMOVE_ONE:
        out.append(
            "Neighbouring datasets differ by adding or removing one record (add/remove-one); "
            "the unit of privacy is one record (one row)."
        )
    else:
        out.append(
            "Neighbouring datasets differ by replacing one record (replace-one), with the "
            "dataset size public, as in the GS-WGAN paper's accounting."
        )
    parallel = [p for p in phases if isinstance(p, ParallelPhases)]
    for p in parallel:
        out.append(
            f"Phase {p.name!r} composes its groups {[g for g, _ in p.groups]} in parallel: each "
            "group's phases read only the records of that group, and a record's group is decided "
            "by its own values, so adding or removing one record changes one group's data; epsilon "
            "is the maximum over the groups of the other phases composed with that group's phases "
            "(each group's epsilon is listed)."
        )
    phases = flat_phases(phases)
    out.append(
        "Only the listed phases touch the private records; anything else (schema and "
        "preprocessing, hyperparameter and checkpoint selection, repeated runs) is covered only "
        "if an assumption below says so."
    )
    dpsgd = [p.name for p in phases if isinstance(p, DPSGDPhase)]
    if dpsgd:
        out.append(
            f"DP-SGD phases {dpsgd} sample every record independently with probability "
            "sample_rate at every step (Poisson sampling, as realised by dpgen_jax.dpsgd with "
            "padded batches whose overflow is processed, never truncated or resampled), clip each "
            "example's gradient to the clip norm C and add Gaussian noise of standard deviation "
            "noise_multiplier * C to the sum; the number of steps is the count actually executed."
        )
    gaussian = [p.name for p in phases if isinstance(p, GaussianPhase)]
    if gaussian:
        out.append(
            f"Gaussian phases {gaussian} release statistics of the whole dataset (no subsampling) "
            "with Gaussian noise of standard deviation noise_multiplier * sensitivity per "
            "coordinate, where sensitivity is the statistic's L2 sensitivity to adding or removing "
            "one record; steps counts the releases."
        )
    selections = [p.name for p in phases if isinstance(p, ExponentialMechanismPhase)]
    if selections:
        out.append(
            f"Exponential-mechanism phases {selections} select steps times among candidates whose "
            "scores change by at most sensitivity when one record is added or removed, each with "
            "probability proportional to exp(epsilon_per_step * score / (2 * sensitivity)); each "
            "selection is accounted as (epsilon_per_step^2 / 8)-zCDP (the bounded-range bound of "
            "Cesar and Rogers 2021), which only the RDP accountant interprets, so the PLD "
            "epsilon is not reported."
        )
    proven = [p.name for p in phases if isinstance(p, ShardedSanitizerPhase) and p.accounting == "proven"]
    if proven:
        out.append(
            f"Sharded phases {proven} (proven, selection-conditioned bound): each step queries one of "
            "num_shards disjoint shards chosen uniformly and independently, and shard membership "
            "comes from data-independent randomness. The bound reveals every step's shard choice and "
            "the record's shard to the adversary: a step on another shard does not depend on the "
            "record, and each of the c ~ Binomial(steps, 1 / num_shards) steps on its shard is "
            "bounded by one Gaussian of noise multiplier noise_multiplier / sqrt(rows_per_step) "
            "whatever state the discriminator carries; delta(eps) is the exact average over c. It "
            "makes no assumption about the discriminators' state between steps; it assumes that no "
            "state is shared across shards (no shared temporary generator, no batch statistics "
            "across shards) and that the discriminators are never released."
        )
    assumed = [p.name for p in phases if isinstance(p, ShardedSanitizerPhase) and p.accounting == "assumed"]
    if assumed:
        out.append(
            f"Sharded phases {assumed} (assumed accounting: {ASSUMED_SHARD_SENTENCE}): each step is "
            "treated as a fresh Poisson subsample of rate 1 / num_shards releasing one Gaussian of "
            "noise multiplier noise_multiplier / sqrt(rows_per_step), although a discriminator "
            "keeps the records it has seen in its state for every later step on its shard."
        )
    paper = [p.name for p in phases if isinstance(p, ShardedSanitizerPhase) and p.accounting == "paper"]
    if paper:
        out.append(
            f"Sharded phases {paper} use the GS-WGAN paper's accounting (each of steps * "
            "rows_per_step rows treated as an independent release sampled without replacement "
            "at rate 1 / num_shards, replace-one, integer RDP orders 2..256, classic conversion). "
            "It reproduces the published number but is NOT a valid bound: the rows of a step "
            "share one shard selection, and it understates epsilon many times over; use the proven "
            "accounting for any claim."
        )
    if accountant == "pld" and _is_proven(phases):
        out.append(
            "Epsilon is the exact selection-conditioned bound: delta(eps) = sum over c of "
            "Binomial(c; steps, 1 / num_shards) * delta_Gauss(eps; mu_c), with mu_c^2 = c * "
            "rows_per_step / noise_multiplier^2 plus the mu^2 of the other Gaussian phases, summed "
            "over every c (no truncation, no discretisation), inverted by bisection rounding up."
        )
    elif accountant == "pld":
        out.append(
            "Epsilon comes from dp_accounting's PLD accountant with pessimistic discretisation "
            f"(value_discretization_interval={pld_interval:.3g}), an upper bound on the exact "
            "epsilon."
            if pld_interval is not None
            else "Epsilon comes from dp_accounting's PLD accountant."
        )
    else:
        grid = "integers 2..256" if _is_paper(phases) else f"{len(RDP_ORDERS)} orders from 1.001 to 1024"
        conv = (
            "the classic conversion eps = min_a r(a) + log(1/delta)/(a-1) used by the papers"
            if conversion == "classic"
            else "dp_accounting's improved conversion"
        )
        out.append(f"Epsilon comes from dp_accounting's RDP accountant over {grid}, with {conv}.")
    if non_private:
        names = [p.name for p in phases if isinstance(p, NonPrivatePhase) and p.spends_privacy]
        out.append(
            f"Phases {names} trained on the private data without differential privacy, so the "
            "composed epsilon is infinite: this run has no privacy guarantee (non_private: true)."
        )
    return out


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
            (``UserWarning``) and adds an assumption sentence.
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
    ps = _as_phases(phases)
    d = _v.delta(delta)
    _check_args(accountant, conversion)
    fixed = _check_pld_interval(pld_discretization)
    relation = neighbouring_relation(ps)
    if dataset_size is not None:
        n = _v.count(dataset_size, "dataset_size", 1)
    if isinstance(assumptions, str) or not all(isinstance(s, str) for s in assumptions):
        raise TypeError(f"expected assumptions to be a sequence of strings, got {assumptions!r}.")
    if not isinstance(seeded, bool):
        raise TypeError(f"expected seeded to be a bool, got {seeded!r}.")

    headline, interval = _epsilon_and_interval(ps, d, accountant, conversion, fixed)
    paper = _is_paper(ps)
    by_acc: dict[str, float | None] = {}
    if paper or not pld_supported(ps):
        by_acc["pld"] = None
        pld_interval = interval
    elif accountant == "pld":
        by_acc["pld"] = headline
        pld_interval = interval
    else:
        by_acc["pld"], pld_interval = _epsilon_and_interval(ps, d, "pld", "improved", fixed)
    spends = any(p.spends_privacy for p in ps)
    orders: dict[str, float | None] = {"improved": None, "classic": None}
    for conv in ("improved", "classic"):
        if spends:
            eps, order = _rdp_epsilon_and_order(ps, d, conv)
        else:
            eps, order = 0.0, None
        by_acc[f"rdp_{conv}"] = eps
        orders[conv] = order if eps is not None and math.isfinite(eps) else None

    def entry_of(p: Phase) -> dict[str, Any]:
        alone = _epsilon_and_interval((p,), d, accountant, conversion, fixed)[0]
        entry: dict[str, Any] = {"name": p.name, "mechanism": p.mechanism}
        entry.update(p._parameters())
        entry["steps"] = p.steps
        rel = p.neighbouring_relation
        entry["neighbouring_relation"] = None if rel is None else relation_name(rel)
        entry["epsilon_alone"] = _finite_or_none(alone)
        if isinstance(p, ParallelPhases):
            by_group = dict(branches(ps))
            entry["groups"] = [
                {"group": g, "epsilon": _finite_or_none(
                    _epsilon_and_interval(by_group[g], d, accountant, conversion, fixed)[0]),
                 "phases": [entry_of(q) for q in inner]}
                for g, inner in p.groups]
        return entry

    phase_entries = [entry_of(p) for p in ps]
    sharded = None
    if _is_proven(ps):
        as_assumed = tuple(dataclasses.replace(p, accounting="assumed")
                           if isinstance(p, ShardedSanitizerPhase) and p.accounting == "proven" else p
                           for p in ps)
        assumed_eps = _epsilon_and_interval(as_assumed, d, accountant, conversion, fixed)[0]
        sharded = {"proven": _finite_or_none(headline), "assumed": _finite_or_none(assumed_eps),
                   "assumed_label": ASSUMED_SHARD_SENTENCE}

    non_private = math.isinf(headline)
    sentences = _module_assumptions(ps, relation, accountant, conversion, pld_interval, non_private)
    if dataset_size is not None and d >= 1.0 / n:
        msg = (
            f"delta={d:g} is not smaller than 1/n = {1.0 / n:.3g} for dataset_size n={n}: a "
            "mechanism that publishes one random record outright meets such a delta, so the "
            "guarantee is meaningless; use delta well below 1/n."
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
        "rdp_orders": "integers 2..256" if paper else "dpgen_jax.privacy.RDP_ORDERS",
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


def format_report(report: Mapping[str, Any], *, title: str) -> str:
    """A privacy report (``privacy.report`` / ``privacy_report()``) as a console table.

    One row per phase (mechanism, sampling rate, noise multiplier, steps, epsilon of the phase
    alone), then epsilon by each accountant, the paper's accounting when the report has it, and
    every assumption.
    """
    rows = [("phase", "mechanism", "sample rate", "noise mult.", "steps", "eps alone")]
    for ph in report["phases"]:
        rows.append((ph["name"], ph["mechanism"], format_number(ph.get("sample_rate")),
                     format_number(ph.get("noise_multiplier"), 5), str(ph["steps"]), format_number(ph["epsilon_alone"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [title]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    by = report["epsilon_by_accountant"]
    headline = report["accountant"].upper()
    if report.get("conversion") and report["accountant"] != "pld":
        headline += f" {report['conversion']}"
    if report["non_private"]:
        lines.append("  epsilon: inf (non-private run: no privacy guarantee)")
    else:
        lines.append(f"  epsilon: {format_number(report['epsilon'])} ({headline}, headline)"
                     f" | RDP improved {format_number(by.get('rdp_improved'))} | RDP classic "
                     f"{format_number(by.get('rdp_classic'))}   at delta = {report['delta']:g}, "
                     f"{report['neighbouring_relation']} neighbours")
    if report.get("sharded_accounting") and not report["non_private"]:
        headline = "proven, selection-conditioned bound, exact"
        sharded = report["sharded_accounting"]
        lines[-1] = lines[-1].replace("(PLD, headline)", f"({headline})")
        lines.append(f"  assumed accounting: {format_number(sharded.get('assumed'))} ({sharded['assumed_label']})")
    paper = report.get("paper_accounting")
    if paper:
        lines.append(f"  paper's accounting: {format_number(paper.get('epsilon'))} ({paper.get('label')})")
    lines.append("  assumptions:")
    lines += [f"   - {a}" for a in report["assumptions"]]
    return "\n".join(lines)
