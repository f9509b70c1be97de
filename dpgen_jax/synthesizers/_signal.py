"""A public signal-to-noise rule for the schedules of the marginal methods: how many rounds are
worth running, and how large a marginal may be measured, on a table of N records under a target
(epsilon, delta). See ``docs/gem.md``.

A round measures one marginal with Gaussian noise of standard deviation sigma per cell. A marginal
of n_r cells holds N / n_r records per cell on average (its expected count per cell); it is
*measurable* when that count is at least ``THRESHOLD`` times sigma. The rounds share the budget, so
sigma grows with their number R: :func:`signal_schedule` takes the largest R (up to the method's
default) for which at least R k candidates of two or more columns are measurable at the noise of R
rounds (k marginals a round), and the largest marginal allowed at that noise: the most cells whose
expected count per cell is still ``CELL_THRESHOLD`` times sigma (a larger marginal's noise would
exceed its counts). Where not one round is worth it (too few marginals of two or more columns are
measurable even by a single round), the schedule has zero rounds: the whole budget goes to the
one-way release, which is what ``independent`` releases.

Without a public N, :func:`released_split` applies the same rule after the one-way release, to its
released total (a DP output: post-processing): the planned units stay fixed (the plan, the
calibration and the total spend do not change) and are shared out into the rounds worth running, a
round of m units measuring with the unit noise over sqrt(m); where not one round is worth it, one
round spends every unit.

Everything :func:`signal_schedule` reads is public: N (the user's ``num_records``, or the row count a method treats as
public and says so in its report), epsilon, delta, the candidates' cell counts (from the schema's
bins) and the method's unit noise multipliers. No private row is read. sigma is that of the paper's
zCDP accounting (``privacy.cks_epsilon``: rho such that its conversion gives epsilon); the
calibration's RDP conversion gives a noise within a few per cent of it, and a public rule needs no
more precision than that.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from collections.abc import Callable, Sequence

from dpgen_jax import _validate as _v
from dpgen_jax import privacy

# A marginal is measurable when its expected count per cell is at least THRESHOLD noise standard
# deviations: its measurement's expected L1 noise (sqrt(2 / pi) sigma per cell) is then at most
# sqrt(2 / pi) / THRESHOLD, 16 %, of the total, each cell's count known to within a fifth; a round
# is worth running when it has such a marginal. A candidate is allowed while its expected count per
# cell is at least CELL_THRESHOLD sigma (its noise below its counts): a round may still select a
# larger, noisier marginal than a measurable one when the scores say so. Both chosen on generated
# tables (docs/gem.md): GEM's defaults stay whole on Adult-sized tables and on the wide planted
# table they were chosen on, and drop to a few rounds (or none) on a few hundred rows.
THRESHOLD = 5.0
CELL_THRESHOLD = 1.0


@dataclasses.dataclass(frozen=True)
class Target:
    """The public values the rule reads besides the schema: N, epsilon and delta of a private fit."""

    n: int
    epsilon: float
    delta: float

    def __post_init__(self):
        _v.whole(minimum=1, n=self.n)
        _v.positive(epsilon=self.epsilon)
        _v.fraction(delta=self.delta)


@dataclasses.dataclass(frozen=True)
class Schedule:
    """What :func:`signal_schedule` decides.

    Attributes:
        rounds: R, the rounds worth running (0: the whole budget on the one-way release; then not
            even one round's k marginals are measurable).
        max_cells: the largest marginal (cells) allowed at the noise of ``rounds`` rounds (of one
            round when ``rounds`` is 0): N / (``cell_threshold`` sigma).
        sigma: the noise standard deviation per cell of one measurement at that noise.
        measurable: the candidates of two or more columns measurable at that noise (N / cells at
            least ``threshold`` sigma).
        rho: the zCDP budget of the target (the paper's conversion).
    """

    rounds: int
    max_cells: int
    sigma: float
    measurable: int
    rho: float

    def note(self, target: Target, default: int) -> str:
        """The report's sentence on the rule (public values only)."""
        head = (f"The rounds follow a public signal-to-noise rule (N={target.n}, epsilon={target.epsilon:g}, "
                f"delta={target.delta:g}, the schema's bins; no private row is read): a round runs only "
                "when it has a marginal of two or more columns whose expected count per cell, "
                f"N / cells, is at least {THRESHOLD:g} times the noise standard deviation of its "
                "measurement")
        if self.rounds == 0:
            return (head + f"; too few marginals are (at a single round's sigma {self.sigma:.3g}: "
                    f"{self.measurable} candidates), so no round ran: the whole "
                    "budget went to the one-way release and every column is drawn independently from "
                    "its released histogram, as independent releases it.")
        return (head + f"; {self.rounds} of the default {default} rounds (sigma {self.sigma:.3g} per cell: "
                f"{self.measurable} measurable candidates of two or more columns), and candidates of "
                f"at most {self.max_cells} cells, whose expected count per cell is at least "
                f"{CELL_THRESHOLD:g} sigma.")


@functools.lru_cache(maxsize=256)
def zcdp_budget(epsilon: float, delta: float) -> float:
    """rho such that rho-zCDP converts to (``epsilon``, ``delta``) by ``cks_epsilon`` (bisection on
    log rho; the conversion grows with rho)."""
    _v.positive(epsilon=epsilon)
    _v.fraction(delta=delta)
    lo, hi = -30.0, 10.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if privacy.cks_epsilon(math.exp(mid), delta) > epsilon:
            hi = mid
        else:
            lo = mid
    return math.exp(lo)


def signal_schedule(target: Target, cells: Sequence[int], noise_at: Callable[[int], float],
                    default_rounds: int, per_round: int = 1, threshold: float = THRESHOLD,
                    cell_threshold: float = CELL_THRESHOLD) -> Schedule:
    """The rounds worth running and the largest marginal allowed (:class:`Schedule`).

    Args:
        target: N, epsilon and delta (public).
        cells: the cell counts of the candidates of two or more columns (from the schema's bins).
        noise_at: R -> the noise multiplier of one measurement (sensitivity 1) when the budget is
            split over R rounds, for a total zCDP of 1 (the method's unit split).
        default_rounds: the most rounds (the method's default schedule).
        per_round: k, the marginals measured per round.
        threshold: a marginal is measurable when N / cells >= threshold * sigma.
        cell_threshold: the largest marginal allowed has N / cells >= cell_threshold * sigma.

    Monotone: a larger N or epsilon never gives fewer rounds nor a smaller largest marginal at
    the same rounds.
    """
    _v.whole(minimum=0, default_rounds=default_rounds)
    _v.whole(minimum=1, per_round=per_round)
    _v.positive(threshold=threshold)
    _v.positive(cell_threshold=cell_threshold)
    rho = zcdp_budget(target.epsilon, target.delta)
    ordered = sorted(int(c) for c in cells)

    def at(rounds: int) -> Schedule:
        sigma = noise_at(rounds) / math.sqrt(rho)
        return Schedule(rounds, _largest(target.n, sigma, cell_threshold), sigma,
                        _measurable(ordered, target.n, sigma, threshold), rho)

    for rounds in range(default_rounds, 0, -1):
        rule = at(rounds)
        if rule.measurable >= rounds * per_round:
            return rule
    return dataclasses.replace(at(1), rounds=0)


def _measurable(ordered: Sequence[int], n: float, sigma: float, threshold: float) -> int:
    """How many of the sorted cell counts ``ordered`` have N / cells >= threshold sigma."""
    return bisect.bisect_right(ordered, math.floor(n / (threshold * sigma)))


def _largest(n: float, sigma: float, cell_threshold: float) -> int:
    """The most cells whose expected count per cell N / cells is at least cell_threshold sigma."""
    return math.floor(n / (cell_threshold * sigma))


@dataclasses.dataclass(frozen=True)
class Split:
    """What :func:`released_split` decides: how a fixed number of units is spent.

    Attributes:
        units: the units of each round, in order (their sum is the units given; every round but
            the last spends ``units // rounds``, the last the remainder).
        rule_rounds: the rounds the rule found worth running (0: not one marginal of two or more
            columns measurable even with every unit on it; then one round spends them all).
        max_cells: the largest marginal (cells) allowed at the noise of a round of ``units[0]``
            units: N / (``cell_threshold`` sigma).
        sigma: the noise standard deviation per cell of a round of ``units[0]`` units.
        measurable: the candidates of two or more columns measurable at that noise.
    """

    units: tuple[int, ...]
    rule_rounds: int
    max_cells: int
    sigma: float
    measurable: int

    def note(self, caps: bool = True) -> str:
        """The report's sentence on the split (no private value; the released total is not
        printed); ``caps``: the candidates' cap is the split's (not the user's)."""
        spread = ", ".join(str(m) for m in self.units)
        head = (f"The {sum(self.units)} planned units were split after the one-way release by the "
                "signal-to-noise rule on its released total (post-processing of a DP output; the plan, "
                "the calibration and the total spend are those of the planned units whatever the split): "
                f"{len(self.units)} round{'' if len(self.units) == 1 else 's'} of {spread} units "
                f"(sigma {self.sigma:.3g} per cell: {self.measurable} measurable candidates of two or more "
                f"columns, whose expected count per cell is at least {THRESHOLD:g} sigma)")
        if self.rule_rounds == 0:
            head += ("; not one such candidate was measurable even with every unit, so a single round "
                     "spent them all (the budget is committed; one well-measured marginal beats none)")
        return head + (f"; candidates of at most {self.max_cells} cells (expected count per cell at least "
                       f"{CELL_THRESHOLD:g} sigma)." if caps else ".")


def split_units(units: int, rounds: int) -> tuple[int, ...]:
    """``rounds`` rounds spending exactly ``units`` units: ``units // rounds`` each, the last the
    remainder (0 rounds: one round of every unit)."""
    _v.whole(minimum=1, units=units)
    _v.whole(minimum=0, rounds=rounds)
    rounds = min(max(rounds, 1), units)
    m = units // rounds
    return (m,) * (rounds - 1) + (units - m * (rounds - 1),)


def released_split(n: float, cells: Sequence[int], unit_sigma: float, units: int,
                   threshold: float = THRESHOLD, cell_threshold: float = CELL_THRESHOLD) -> Split:
    """How ``units`` units, each a measurement of noise ``unit_sigma`` (per cell), are best spent
    on a table of about ``n`` records (the one-way release's released total: a DP output, so the
    split is post-processing and spends exactly ``units`` whatever it is).

    A round of m units measures with noise sigma_u / sqrt(m). The rounds R are the most (up to
    ``units``) for which at least R candidates of two or more columns (``cells``) are measurable
    at the noise of a round of ``units // R`` units (N / cells >= ``threshold`` sigma), as
    :func:`signal_schedule` decides on a public N; none measurable even at one round of every unit
    gives one round of every unit (:func:`split_units`). Monotone: a larger n never gives fewer
    rounds.
    """
    _v.positive(n=n)
    _v.positive(unit_sigma=unit_sigma)
    _v.whole(minimum=1, units=units)
    _v.positive(threshold=threshold)
    _v.positive(cell_threshold=cell_threshold)
    ordered = sorted(int(c) for c in cells)
    rule, measurable = 0, 0
    for rounds in range(units, 0, -1):
        sigma = unit_sigma / math.sqrt(units // rounds)
        measurable = _measurable(ordered, n, sigma, threshold)
        if measurable >= rounds:
            rule = rounds
            break
    spread = split_units(units, rule)
    sigma = unit_sigma / math.sqrt(spread[0])
    return Split(spread, rule, _largest(n, sigma, cell_threshold), sigma, _measurable(ordered, n, sigma, threshold))


__all__ = ["CELL_THRESHOLD", "THRESHOLD", "Schedule", "Split", "Target", "released_split", "signal_schedule",
           "split_units", "zcdp_budget"]
