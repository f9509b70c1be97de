"""GEM's configuration: :class:`GEMConfig`, its defaults (AIM's schedule and the wide-table one),
the public binnings and the accounted phases. See ``docs/gem.md``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax import privacy
from dpgen_jax.data._discrete import SPACINGS
from dpgen_jax.synthesizers import _marginal
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers._signal import Schedule, Target, signal_schedule


@dataclasses.dataclass(frozen=True)
class GEMConfig(_marginal.MarginalConfig):
    """Hyperparameters of GEM (all public).

    Attributes:
        bins, bin_spacing: the public discretisation of continuous columns (``data.Discretizer``).
        workload_degree, max_cells: the workload is the ``workload_degree``-way marginals with at
            most ``max_cells`` cells (AIM's default: every 3-way marginal up to 10,000 cells).
        workload_size, workload_seed: with more eligible marginals than ``workload_size``, a
            public random subset of that many, drawn from ``workload_seed`` (None: all).
        max_rounds: R, the rounds; each selects and measures ``measurements_per_round`` marginals
            (one budget unit each), then fits the generator. 0: none (the whole budget on the
            one-way release). None (auto): the default's (below), cut by the public
            signal-to-noise rule of a private fit with a public N (:meth:`signal`,
            ``_signal.signal_schedule``: the rounds for which enough candidates of two or more
            columns have an expected count per cell of at least ``_signal.THRESHOLD`` times their
            measurement's noise; zero on a table too small for its budget); without a public N,
            one marginal a round and no ``anneal``, the default's units are planned and shared
            into rounds after the one-way release by the same rule on its released total
            (``_signal.released_split``, ``gem.follows_total``).
        candidate_cells: the largest candidate of two or more columns (cells) a round may
            select, below ``max_cells``. None (auto): with ``max_rounds`` auto in a private fit,
            the largest marginal the signal-to-noise rule allows (expected count per cell at least
            ``_signal.CELL_THRESHOLD`` times its measurement's noise; without a public N, decided
            with the split by the released total); else no limit.
        measurements_per_round: k, the marginals selected (each by its own exponential
            mechanism, among those not yet chosen in the round) and measured per round.
        measure_share: alpha, the share of a unit spent on the measurement (AIM's 0.9).
        one_way_share: the share of the total budget spent on the one-way release (None: AIM's
            alpha d / (alpha d + R k), every unit the same budget as the one-way release's per
            column); the R k units share the rest.
            These four left None take ``DEFAULTS`` (AIM's schedule: R 32, k 1, alpha 0.9), or
            ``WIDE_DEFAULTS`` when pairs are candidates (R 8, k 8, alpha 0.5, one-way 0.88), as
            does ``output_init_scale``.
        pair_candidates: every 2-way marginal (up to ``max_cells`` cells) is a candidate, scored
            at once from the one-hot Gram matrices of the real and generated rows, beside the
            workload's other marginals; every candidate then has weight 1. None (auto): when the
            workload is a random subset (a wide table, where the workload's closure holds few of
            the pairs) and the columns have at most ``PAIR_WIDTH_LIMIT`` bins in all.
        noise_dim, hidden: the generator (noise width, hidden widths, ReLU).
        output_init_scale: the last layer's He-normal kernel is multiplied by this at
            initialisation: below 1 the initial mixture is closer to one product distribution,
            so columns nothing measured start (and tend to stay) closer to independent. None:
            1 (``DEFAULTS``), 0.1 with pair candidates (``WIDE_DEFAULTS``).
        one_way_init: the last layer's bias starts at the log of the released one-way
            probabilities (``one_way_probabilities``, floored at ``1e-5``), so the initial mixture
            is close to the independent model of the one-way release instead of uniform (an
            Adam step moves a logit by about the learning rate, so from a uniform start a code of
            rate 1 % takes thousands of steps to reach; ``docs/gem.md``). None: False
            (``DEFAULTS``), True with pair candidates (``WIDE_DEFAULTS``).
        graphical_sampling: make the generator's rows follow the measured marginals' graph
            (``_sampling.decouple``): the graph triangulated by greedy elimination, each column is
            independent of the columns no measurement joins it to, given its neighbours (a
            stratified permutation of the rows along the elimination tree; every measured
            marginal's rows are kept exactly), as in a graphical model fitted to the same
            measurements (MST, AIM): the mixture no longer invents dependence between columns
            nothing measured jointly. A column no round measured (not even on its own) is drawn
            from its released one-way histogram. The rounds' scores read the same sampler. None: True (both
            defaults; chosen on generated tables, ``docs/gem.md``).
        calibrate_iterations: after the last fit, the generator's output bias is shifted this many
            times by the log ratio of the released one-way probabilities to the generator's own
            (mean softmax over ``score_samples`` noise vectors), for every column of a measured
            marginal (every column without ``graphical_sampling``): each column's
            rates move to the one-way release's while the rows' dependence (the kernels) is kept,
            a raking of the generator to its one-way measurement (post-processing). 0: none.
            None: 0 (``DEFAULTS``), 4 with pair candidates (``WIDE_DEFAULTS``).
        anneal: AIM's annealing of the units (needs ``measurements_per_round`` 1): when a round's
            fit moved the generator's marginal of the measured clique by at most the expected noise
            (sqrt(2 / pi) sigma_t n_r in L1, total times the mixture's marginal over
            ``batch_size`` fixed noise vectors, before the measurement and after the fit), the
            next rounds spend 4 times the units (sigma halved, the selection's epsilon doubled);
            when fewer than twice a round's units remain, one last round spends them all
            (``_select_measure.round_units``). A round of m units costs exactly m unit selections
            and m unit measurements, so the plan and the accounting are those of R units whatever
            the path. None: False.
        one_way_refine: the one-way release of each continuous column is measured on this many
            times finer bins nested in the model's (``bins`` times this; an integer column at
            most one bin per integer); the fit reads their sums on the model's bins, and sampling
            draws a value inside its bin from the finer histogram instead of uniformly
            (post-processing; the release's sensitivity is unchanged). 4 (default): values heaped
            on round numbers (blood pressures at 120/80 mmHg, 40 hours a week) keep their heaps,
            at the price of a noisier one-way count per model bin (the sum of 4 noisy cells;
            chosen on generated tables, ``docs/gem.md``, step 10); 1: off.
        batch_size: noise vectors per gradient step; with ``fixed_noise`` the mixture's K.
        fixed_noise: the generator's noise vectors are drawn once (``batch_size`` of them, from
            the fit's key) and kept: the model is the finite mixture of K = ``batch_size`` product
            distributions, every Adam step computes its exact marginals (a deterministic loss, no
            batch-to-batch noise in the gradient), and sampling draws one of the K vectors
            uniformly for each row, so rows come from the distribution that was fitted (the
            vectors are stored in the release; they are public randomness). False: a fresh batch
            every step, rows from fresh noise (the paper's design). None: True (both defaults; chosen on
            generated tables, ``docs/gem.md``: a closer fit in a seventh of the steps).
        round_steps: Adam steps before the first round and after each round's measurements;
            ``final_steps`` (300) more at the end. None: 50 (``DEFAULTS``, with ``fixed_noise``;
            chosen on generated tables, ``docs/gem.md``), 200 with pair candidates
            (``WIDE_DEFAULTS``).
        learning_rate: Adam's.
        score_samples: rows drawn from the generator to estimate the candidates' marginals.
        one_way_noise_multiplier, selection_noise_multiplier, measure_noise_multiplier: as AIM's
            (zCDP-equivalent Gaussian noise multipliers of one unit); None: AIM's split of a total
            rho of 1 (:meth:`noise_multipliers`), scaled together by the calibration.

    A field left None (auto) stays None in the configuration (it holds what the user chose): its
    value follows from the schema's bin counts and is derived where it is used, in the phases, the
    training and sampling (:meth:`for_sizes`, :meth:`noise_multipliers`; the sizes are
    ``discretizer(config, schema).sizes``).
    """

    bins: int = 32
    bin_spacing: str = "auto"
    workload_degree: int = 3
    max_cells: int = 10_000
    workload_size: int | None = 2000
    workload_seed: int = 0
    max_rounds: int | None = None
    candidate_cells: int | None = None
    measurements_per_round: int | None = None
    measure_share: float | None = None
    one_way_share: float | None = None
    pair_candidates: bool | None = None
    noise_dim: int = 64
    hidden: tuple[int, ...] = (256, 256)
    output_init_scale: float | None = None
    one_way_init: bool | None = None
    graphical_sampling: bool | None = None
    calibrate_iterations: int | None = None
    anneal: bool | None = None
    one_way_refine: int = 4
    batch_size: int = 512
    fixed_noise: bool | None = None
    round_steps: int | None = None
    final_steps: int = 300
    learning_rate: float = 1e-3
    score_samples: int = 10_000
    one_way_noise_multiplier: float | None = None
    selection_noise_multiplier: float | None = None
    measure_noise_multiplier: float | None = None

    def validate(self) -> GEMConfig:
        _v.one_of(SPACINGS, bin_spacing=self.bin_spacing)
        for name in ("bins", "workload_degree", "max_cells", "noise_dim", "batch_size", "score_samples",
                     "one_way_refine"):
            _v.whole(minimum=1, **{name: getattr(self, name)})
        for name in ("measurements_per_round", "candidate_cells"):
            if getattr(self, name) is not None:
                _v.whole(minimum=1, **{name: getattr(self, name)})
        for name in ("max_rounds", "round_steps", "calibrate_iterations"):
            if getattr(self, name) is not None:
                _v.whole(minimum=0, **{name: getattr(self, name)})
        for name in ("final_steps", "workload_seed"):
            _v.whole(minimum=0, **{name: getattr(self, name)})
        if self.workload_size is not None:
            _v.whole(minimum=1, workload_size=self.workload_size)
        if self.measure_share is not None:
            _v.fraction(measure_share=self.measure_share)
        if self.one_way_share is not None:
            _v.fraction(one_way_share=self.one_way_share)
        if self.anneal and self.measurements_per_round not in (None, 1):
            raise ValueError(f"anneal=True needs measurements_per_round=1 (AIM's rounds of one "
                             f"marginal), got measurements_per_round={self.measurements_per_round}.")
        for name in ("pair_candidates", "one_way_init", "graphical_sampling", "anneal", "fixed_noise"):
            if getattr(self, name) is not None:  # None: auto
                _v.boolean(**{name: getattr(self, name)})
        _v.positive(learning_rate=self.learning_rate)
        if self.output_init_scale is not None:
            _v.positive(output_init_scale=self.output_init_scale)
        _v.widths(hidden=self.hidden)
        for name in ("one_way_noise_multiplier", "selection_noise_multiplier", "measure_noise_multiplier"):
            if getattr(self, name) is not None:
                _v.positive(**{name: getattr(self, name)})
        return self

    def for_sizes(self, sizes: Sequence[int], target: Target | None = None) -> GEMConfig:
        """The configuration as it runs on columns of these bin counts (public):
        ``pair_candidates`` decided (:meth:`scores_pairs`), every unset schedule field from
        ``WIDE_DEFAULTS`` when pairs are scored and from ``DEFAULTS`` otherwise; with a
        ``target`` (the public N, epsilon and delta of a private fit) and ``max_rounds`` unset,
        the rounds and ``candidate_cells`` left unset from the signal-to-noise rule
        (:meth:`signal`). Derived where it is used (the phases, the training, sampling), never
        kept as the plan's configuration; the noise multipliers stay as configured
        (:meth:`noise_multipliers`).

        Raises:
            ValueError: a workload degree above the number of columns, ``pair_candidates=True``
                on too many bins, or a schedule that is invalid once filled in.
        """
        sm.check_degree(self.workload_degree, len(sizes))
        pairs = self.scores_pairs(sizes)
        base = WIDE_DEFAULTS if pairs else DEFAULTS
        fill = {k: v for k, v in base.items() if getattr(self, k) is None}
        cfg = self.replace(pair_candidates=pairs, **fill).validate()
        if target is None or self.max_rounds is not None:
            return cfg
        rule = cfg.signal(sizes, target)
        cells = rule.max_cells if self.candidate_cells is None else self.candidate_cells
        return cfg.replace(max_rounds=rule.rounds, candidate_cells=max(1, cells)).validate()

    def signal(self, sizes: Sequence[int], target: Target) -> Schedule:
        """The signal-to-noise rule (``_signal.signal_schedule``) on columns of these bin counts
        for ``target``: the candidates of two or more columns (:meth:`candidate_sizes`), the unit
        split of this configuration's schedule at every number of rounds up to its
        ``max_rounds`` (a configuration :meth:`for_sizes` filled in)."""
        def noise_at(rounds: int) -> float:  # one measurement's multiplier for a total rho of 1
            phases = privacy_phases(self.replace(max_rounds=rounds), sizes)
            measure = next(p for p in phases if p.name == "measure")
            return measure.noise_multiplier * math.sqrt(privacy.zcdp_rho(phases))

        return signal_schedule(target, self.candidate_sizes(sizes), noise_at, self.max_rounds,
                               self.measurements_per_round)

    def candidate_sizes(self, sizes: Sequence[int]) -> list[int]:
        """The cell counts of the round candidates of two or more columns (public): the
        workload's closure, and every 2-way marginal of at most ``max_cells`` cells when pairs
        are scored (``_rounds.fit_released`` selects among these)."""
        work = sm.workload(sizes, self.workload_degree, self.max_cells, size=self.workload_size,
                           seed=self.workload_seed)
        pairs = self.scores_pairs(sizes)
        out = [math.prod(sizes[j] for j in r) for r in sm.candidates(work) if len(r) > (2 if pairs else 1)]
        if pairs:
            size = np.asarray(sizes, np.int64)
            cells = np.outer(size, size)[np.triu_indices(len(sizes), 1)]
            out.extend(int(c) for c in cells[cells <= self.max_cells])
        return out

    def noise_multipliers(self, sizes: Sequence[int], target: Target | None = None) -> dict[str, float]:
        """The three unit noise multipliers on columns of these bin counts: the configured ones,
        each unset one from the split of a total rho of 1 (AIM's, or ``one_way_share``) over the
        units of :meth:`for_sizes`; with no unit (zero rounds) the whole rho goes to the one-way
        release (the round phases, of no step, keep one unit's multipliers)."""
        cfg = self.for_sizes(sizes, target)
        split = sm.unit_noise_multipliers(len(sizes), max(cfg.units(), 1), cfg.measure_share, cfg.one_way_share)
        if cfg.units() == 0:
            split["one_way_noise_multiplier"] = 1.0 / math.sqrt(2.0)
        return _marginal.configured_noise(cfg, split)

    def units(self) -> int:
        """R k: the budget units (one selection and one measurement each) of a configuration whose
        schedule is set (:meth:`for_sizes`)."""
        if self.max_rounds is None or self.measurements_per_round is None:
            raise ValueError("max_rounds or measurements_per_round is None (auto): the units follow "
                             "from the schema's bins, GEMConfig.for_sizes(sizes).units().")
        return self.max_rounds * self.measurements_per_round

    def scores_pairs(self, sizes: Sequence[int]) -> bool:
        """Whether every 2-way marginal is a candidate (``pair_candidates``; None: auto, see the
        attribute). Public: it reads the schema's bin counts and the configuration only.

        Raises:
            ValueError: ``pair_candidates=True`` with more than ``PAIR_WIDTH_LIMIT`` bins in all.
        """
        width = int(sum(sizes))
        if self.pair_candidates is True and width > PAIR_WIDTH_LIMIT:
            raise ValueError(f"pair_candidates=True needs at most {PAIR_WIDTH_LIMIT} bins in all "
                             f"(a {width} x {width} Gram matrix); these columns have {width}.")
        if self.pair_candidates is not None:
            return self.pair_candidates
        if width > PAIR_WIDTH_LIMIT or self.workload_size is None or len(sizes) < 2:
            return False
        d, k = len(sizes), self.workload_degree
        if math.comb(d, k) > sm.ENUMERATE_LIMIT:
            return True
        return len(sm.workload(sizes, k, self.max_cells)) > self.workload_size


discretizer = _marginal.discretizer
PAIR_WIDTH_LIMIT = 4096  # bins in all for pair_candidates: a (bins x bins) Gram matrix per round
# The schedule left unset: AIM's (one marginal a round, 32 rounds, 90 % of a unit on its
# measurement, the one-way release as large as alpha d units), 50 Adam steps a round on fixed noise ...
DEFAULTS = dict(max_rounds=32, measurements_per_round=1, measure_share=0.9, one_way_share=None,
                output_init_scale=1.0, one_way_init=False, graphical_sampling=True,
                round_steps=50, calibrate_iterations=0, anneal=False, fixed_noise=True)
# ... and, when every pair is a candidate (a wide table), fewer rounds of several marginals, more
# of each unit on its selection (hundreds of thousands of candidates) and a fixed one-way share
# (chosen on a generated table, data.planted_binary(2000, 1000, seed=7): docs/gem.md).
WIDE_DEFAULTS = dict(max_rounds=8, measurements_per_round=8, measure_share=0.5, one_way_share=0.88,
                     output_init_scale=0.1, one_way_init=True, graphical_sampling=True,
                     round_steps=200, calibrate_iterations=4, anneal=False, fixed_noise=True)


def privacy_phases(config: GEMConfig, sizes: Sequence[int], *, steps: Mapping[str, int] | None = None,
                   private: bool = True, target: Target | None = None) -> list:
    """The one-way Gaussian release, R k unit selections and R k unit measurements (AIM's units)
    on columns of these bin counts (``discretizer(config, schema).sizes``: they decide the
    schedule left unset, :meth:`GEMConfig.for_sizes`, and d); ``target``: the public N, epsilon
    and delta of a private fit, for the signal-to-noise rule of an unset ``max_rounds``."""
    noise = config.noise_multipliers(sizes, target)
    return sm.unit_phases(len(sizes), config.for_sizes(sizes, target).units(), noise["one_way_noise_multiplier"],
                          noise["selection_noise_multiplier"], noise["measure_noise_multiplier"],
                          steps=steps, private=private)

