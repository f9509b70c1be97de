"""What the privacy report writes for each phase kind, keyed by the kind's stable ``KIND``.

A phase (:mod:`dpgen_jax.privacy._phases` and its siblings) holds the accounting and engine facts;
the words live here: per kind, the mechanism's name as the report writes it, the kind's assumption
sentence with its rank among the report's sentences, and how its noise is realised in floating
point (:data:`FLOATING_POINT`). :mod:`dpgen_jax.privacy._report` reads them through
:func:`prose_of`.

A phase kind defined outside the package may add its entry to :data:`PROSE` under its ``KIND``;
without one it is still reported: its mechanism is written as its ``KIND`` (its class name when
it sets none), and one sentence says that the report describes neither its mechanism nor how its
noise is realised (:func:`prose_of`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from dpgen_jax.privacy._phases import Phase
from dpgen_jax.privacy._sharded_phase import ASSUMED_SHARD_SENTENCE


@dataclasses.dataclass(frozen=True)
class PhaseProse:
    """The report's words for one phase.

    Attributes:
        mechanism: The mechanism's short name in the report (each phase entry's ``mechanism``).
        rank: The place of ``sentence`` among the report's sentences (increasing; rank 0 is the
            sentence that only the listed phases touch the data, 80 the floating-point sentences,
            90 the accountant's).
        sentence: What the report assumes of the phase, ``{names}`` standing for the names of the
            phases that share the sentence; None: no sentence.
        realisation: The key of :data:`FLOATING_POINT` that says how the phase's noise is realised;
            None for a phase that adds no noise, or a composition whose phases say it.
    """

    mechanism: str
    rank: int
    sentence: str | None
    realisation: str | None


FLOATING_POINT = {  # how each kind of phase's noise is realised (docs/privacy.md, "Floating point")
    "integers": (
        "Phases {names} release integer counts: each count plus round(s Z) (s the noise standard "
        "deviation), the noise drawn (Z a float64 normal from 63-bit uniforms) and rounded on its "
        "own before it meets the count, so the output is an exact integer shift of a "
        "data-independent integer variable (post-processing of the accounted Gaussian mechanism); "
        "floating point reaches only the sampler's approximation of the normal law."),
    "snapped": (
        "Phases {names} release real-valued sums computed exactly in fixed point, plus Gaussian "
        "noise, rounded in exact arithmetic to a public power-of-two grid (snapping): the output "
        "is post-processing of the accounted Gaussian mechanism; floating point reaches only the "
        "sampler's approximation of the normal law."),
    "exponential_mechanism": (
        "Selections {names} are drawn exactly with the exponential mechanism's probabilities "
        "(rational arithmetic and uniform integers; no floating-point Gumbel-max)."),
    "dpsgd": (
        "Training phases {names} compute gradients, clipping and noise in floating point "
        "(float32); as in Opacus, TF Privacy and jax-privacy, the accounting treats the trained "
        "parameters as post-processing of the Gaussian mechanism on real numbers: what rounding "
        "could reveal through them is assumed negligible, not proven."),
}
FLOATING_POINT_RANK = 80

_SHARDED = {  # by the phase's accounting ({names}: the phases' names)
    "proven": PhaseProse("sharded_gaussian_selection_conditioned", 50, (
        "Sharded phases {names} (proven, selection-conditioned bound): each step queries one of "
        "num_shards disjoint shards chosen uniformly and independently, and shard membership "
        "comes from data-independent randomness. The bound reveals every step's shard choice and "
        "the record's shard to the adversary: a step on another shard does not depend on the "
        "record, and each of the c ~ Binomial(steps, 1 / num_shards) steps on its shard is "
        "bounded by one Gaussian of noise multiplier noise_multiplier / sqrt(rows_per_step) "
        "whatever state the discriminator carries; delta(eps) is the exact average over c. It "
        "makes no assumption about the discriminators' state between steps; it assumes that no "
        "state is shared across shards (no shared temporary generator, no batch statistics "
        "across shards) and that the discriminators are never released."), "dpsgd"),
    "assumed": PhaseProse("sharded_poisson_subsampled_gaussian_joint_rows_assumed_fresh", 51, (
        "Sharded phases {names} (assumed accounting: " + ASSUMED_SHARD_SENTENCE + "): each step is "
        "treated as a fresh Poisson subsample of rate 1 / num_shards releasing one Gaussian of "
        "noise multiplier noise_multiplier / sqrt(rows_per_step), although a discriminator "
        "keeps the records it has seen in its state for every later step on its shard."), "dpsgd"),
    "paper": PhaseProse("sharded_per_row_sampled_without_replacement_gaussian_paper", 52, (
        "Sharded phases {names} use the GS-WGAN paper's accounting (each of steps * "
        "rows_per_step rows treated as an independent release sampled without replacement "
        "at rate 1 / num_shards, replace-one, integer RDP orders 2..256, classic conversion). "
        "It reproduces the published number but is NOT a valid bound: the rows of a step "
        "share one shard selection, and it understates epsilon many times over; use the proven "
        "accounting for any claim."), "dpsgd"),
}

_GAUSSIAN = (
    "Gaussian phases {names} release statistics of the whole dataset (no subsampling) with Gaussian "
    "noise of standard deviation noise_multiplier * sensitivity per coordinate, where sensitivity "
    "is the statistic's L2 sensitivity to adding or removing one record; steps counts the releases.")
_NON_PRIVATE = (
    "Phases {names} trained on the private data without differential privacy, so the composed "
    "epsilon is infinite: this run has no privacy guarantee (non_private: true).")
_PARALLEL = (
    "Phase {name!r} composes its groups {groups} in parallel: each group's phases read only the "
    "records of that group, and a record's group is decided by its own values, so adding or "
    "removing one record changes one group's data; epsilon is the maximum over the groups of the "
    "other phases composed with that group's phases (each group's epsilon is listed).")

PROSE: dict[str, PhaseProse | Callable[[Any], PhaseProse]] = {
    "dpsgd": PhaseProse("poisson_subsampled_gaussian", 10, (
        "DP-SGD phases {names} sample every record independently with probability sample_rate at "
        "every step (Poisson sampling, as realised by dpgen_jax.dpsgd with padded batches whose "
        "overflow is processed, never truncated or resampled), clip each example's gradient to the "
        "clip norm C and add Gaussian noise of standard deviation noise_multiplier * C to the sum; "
        "the number of steps is the count actually executed."), "dpsgd"),
    "gaussian": lambda p: PhaseProse("gaussian", 20, _GAUSSIAN, p.output),
    "exponential-mechanism": PhaseProse("exponential_mechanism", 30, (
        "Exponential-mechanism phases {names} select steps times among candidates whose scores "
        "change by at most sensitivity when one record is added or removed, each with probability "
        "proportional to exp(epsilon_per_step * score / (2 * sensitivity)); each selection is "
        "accounted as (epsilon_per_step^2 / 8)-zCDP (the bounded-range bound of Cesar and Rogers "
        "2021), which only the RDP accountant interprets, so the PLD epsilon is not reported."),
        "exponential_mechanism"),
    "sharded-sanitizer": lambda p: _SHARDED[p.accounting],
    "non-private": lambda p: PhaseProse("non_private", 100, _NON_PRIVATE if p.spends_privacy else None,
                                        None),
    "parallel": lambda p: PhaseProse("parallel_composition", -10, _PARALLEL.format(
        name=p.name, groups=[g for g, _ in p.parallel_groups]), None),
}
"""Per ``KIND``: the kind's :class:`PhaseProse`, or a function of the phase giving it where the
words depend on the phase's public fields (a Gaussian phase's output, a sharded phase's
accounting, whether a non-private phase ran, a parallel composition's name and groups)."""

UNDESCRIBED_RANK = 60  # after every described kind's sentence, before the floating-point ones


def prose_of(phase: Phase) -> PhaseProse:
    """The report's words for ``phase``: its kind's entry of :data:`PROSE`.

    A kind without an entry (defined outside the package) gets its ``KIND`` (else its class name)
    as the mechanism's name and a sentence saying that the report describes neither its mechanism
    nor how its noise is realised, so nothing about it is left unsaid.

    Raises:
        ValueError: the entry's ``realisation`` is not a key of :data:`FLOATING_POINT`, naming the
            phase.

    Example:
        >>> from dpgen_jax.privacy._phases import DPSGDPhase
        >>> prose_of(DPSGDPhase("critic", 0.01, 1.0, 10)).mechanism
        'poisson_subsampled_gaussian'
    """
    kind = getattr(type(phase), "KIND", None)
    entry = PROSE.get(kind) if isinstance(kind, str) else None
    if entry is None:
        named = kind if isinstance(kind, str) else type(phase).__name__
        return PhaseProse(named, UNDESCRIBED_RANK, (
            "Phases {names} are of a phase kind defined outside dpgen_jax (" + repr(named) + "), "
            "which this report does not describe: it states neither their mechanism nor how their "
            "noise is realised, only their epsilon from their own dp_accounting event."), None)
    prose = entry(phase) if callable(entry) else entry
    if prose.realisation is not None and prose.realisation not in FLOATING_POINT:
        raise ValueError(f"{type(phase).__name__} {phase.name!r}: its report prose (privacy._prose.PROSE"
                         f"[{kind!r}]) declares realisation={prose.realisation!r}, for which "
                         f"privacy._prose.FLOATING_POINT has no sentence: add one there, or declare one of "
                         f"{sorted(FLOATING_POINT)}.")
    return prose
