"""GEM (Liu, Vietri and Wu 2021, "Iterative Methods for Private Synthetic Data: Unifying Framework
and New Methods", NeurIPS): AIM's select-measure loop with a generator network in place of the
graphical model. See ``docs/gem.md``.

The table is discretised on public bins (``data.Discretizer``, as for MST and AIM). The budget is
AIM's, cut into units before any row is read (``_select_measure.unit_noise_multipliers``): the d
one-way histograms released together, then R rounds, each one exponential-mechanism selection and
one Gaussian measurement of a marginal.

1. **Workload** (public): the ``workload_degree``-way marginals with at most ``max_cells`` cells,
   all of them or a random subset of ``workload_size`` drawn from ``workload_seed`` (wide tables);
   the candidates are its downward closure with AIM's weights.
2. **Rounds.** Select the candidate whose marginal the generator approximates worst (AIM's score
   w_r (||M_r(D) - M_r(G)||_1 - sqrt(2 / pi) sigma n_r), sensitivity the largest weight; the
   generator's marginals are counts of ``score_samples`` rows it draws, scaled to the released
   total), measure it with Gaussian noise, then fit the generator to every measurement so far:
   ``round_steps`` Adam steps (:func:`fit_steps`). The auto schedule's rounds and largest
   candidate follow a public signal-to-noise rule on N and the target (``_signal``,
   :meth:`GEMConfig.signal`): fewer rounds, or none, on a table too small for its budget; without
   a public N the default units are planned and the same rule on the one-way release's released
   total shares them into fewer, larger rounds (:func:`follows_total`, post-processing).
3. **The generator**: an MLP from N(0, I) noise to one softmax per column over its bins, so each
   noise vector is a product distribution and the model is their mixture (GEM's). With
   ``fixed_noise`` (the default) the ``batch_size`` noise vectors are drawn once and kept: the
   model is their finite mixture, every step's loss is exact and sampling draws one of them per
   row (``fixed_noise=False``: a fresh batch every step, as in the paper). The marginal of
   a measured clique is the batch mean of the product of its columns' probabilities, so the loss
   (L1 between these marginals, scaled to the released total, and the noisy counts, each
   measurement weighted by 1 / its noise standard deviation) is differentiable. The network
   computes one logit per bin, gathered into d columns of S bins (S: the most bins of any column,
   padding bins masked), so the softmaxes, the one-way term and sampling are dense operations.
   Marginals whose columns' bin counts round up to the same powers of two are stacked and
   computed together (a Khatri-Rao product and one batched matmul; stacks hold at least
   ``MIN_STACK`` and grow by doubling), so a round compiles a new (small) program only when a new
   padded shape appears or a stack doubles: on fixed noise the network's step is compiled once and
   each stack's gradient on its own.
4. **Graphical sampling** (``graphical_sampling``, on by default): the generator's draws are made
   to follow the measured marginals' graph, triangulated by greedy elimination: each column is
   independent of the columns no measurement joins it to, given its neighbours (a stratified
   permutation of the rows along the elimination tree that keeps every measured marginal's rows
   exactly), as in a graphical model fitted to the same measurements (MST, AIM). The rounds' scores
   read the same sampler.
5. **Finer one-way release** (``one_way_refine``, 4 by default): continuous columns' one-way
   histograms on finer bins nested in the model's, summed for the fit and used at sampling to
   place a value inside its bin.

Accounting: the same units as AIM (every round one unit, or, by AIM's annealing with ``anneal``
or the split by the released total, a round of m units costs m of each): the one-way release,
R unit selections (``privacy.ExponentialMechanismPhase``) and R unit measurements
(``privacy.GaussianPhase``), composed with the RDP accountant (the exponential mechanism has no
PLD event); fixed before data is read, calibrated by one common factor. Everything else reads only
released values (post-processing).

Functional API (re-exported here): :func:`discretizer`, :func:`privacy_phases` (given the bin
counts ``discretizer(config, schema).sizes``, which decide the schedule left unset:
``GEMConfig.for_sizes``) (``_config``);
:func:`bin_mask`, :func:`bin_index`, :func:`probabilities`, :func:`measured`,
:func:`group_marginals`, :func:`fit_steps`, :func:`draw_codes`, :func:`fit_one_way_bias` (``_generator``);
:func:`fine_discretizer`, :func:`refinement`, :func:`coarse_histograms`, :func:`refine_codes`
(``_refinement``); :func:`measured_graph`, :func:`eliminate`, :func:`decouple`, :func:`one_way_probabilities`
(``_sampling``); :func:`fit_released` (``_rounds``).
Class API: :class:`GEM` (``synthesizers.create("gem")``), here.
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import dpsgd
from dpgen_jax.synthesizers import _progress
from dpgen_jax.synthesizers import _marginal
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers._base import Release, register
from dpgen_jax.synthesizers._signal import Target
from dpgen_jax.synthesizers.gem._config import (
    DEFAULTS, PAIR_WIDTH_LIMIT, WIDE_DEFAULTS, GEMConfig, discretizer, privacy_phases)
from dpgen_jax.synthesizers.gem._generator import (
    ONE_WAY_FLOOR, Group, Measured, bin_index, bin_mask, bucket, draw_codes, fit_one_way_bias, fit_steps,
    group_marginals, init, last_layer, measured, mixture_marginal, network, optimizer, probabilities)
from dpgen_jax.synthesizers.gem._refinement import (
    Refinement, coarse_histograms, fine_discretizer, refine_codes, refinement)
from dpgen_jax.synthesizers.gem._rounds import Fitted, Round, fit_released
from dpgen_jax.synthesizers.gem._sampling import (
    Elimination, decouple, eliminate, measured_graph, one_way_probabilities)

Clique = sm.Clique
PAPER_ACCOUNTING = ("zCDP of the one-way release and of every round summed and converted with the "
                    "bound of Canonne, Kamath and Steinke (2020), as AIM's reference code")


@register
class GEM(_marginal.MarginalSynthesizer):
    """GEM with a scikit-learn-like interface (no optional package needed).

    Example:
        >>> model = GEM().fit(train_df, data.adult_schema(), epsilon=1.0)  # doctest: +SKIP
        >>> model.sample(1000)                                             # doctest: +SKIP
    """

    METHOD = "gem"
    DESCRIPTION = ("AIM's rounds (a marginal chosen by the exponential mechanism, measured with "
                   "Gaussian noise) fitting a generator network instead of a graphical model "
                   "(Liu, Vietri and Wu 2021)")
    CONFIG = GEMConfig
    SMOKE = dict(bins=6, max_rounds=2, round_steps=10, final_steps=10, batch_size=32, hidden=(16,),
                 noise_dim=4, score_samples=300)
    DECODE_MODE = "sample"
    PAPER_ACCOUNTING = PAPER_ACCOUNTING
    NEEDS_MBI = False
    # The auto schedule's rounds follow N (the signal-to-noise rule) before any row is read only
    # when the user declares it (num_records); without it the default units are planned and split
    # into rounds after the one-way release by its released total (follows_total): the private row
    # count is never used (docs/gem.md).

    def resolve_config(self, schema, preset=None):
        """The user's configuration (as the base class resolves it), checked against the schema's
        bins (the schedule it runs, :meth:`GEMConfig.for_sizes`, must be valid and the workload
        hold a marginal). Nothing derived is written into it."""
        config = super().resolve_config(schema, preset)
        sizes = discretizer(config, schema).sizes
        config.for_sizes(sizes)  # a check: the schedule is derived again where it is used
        if len(sizes) >= config.workload_degree and not sm.workload(
                sizes, config.workload_degree, config.max_cells, size=config.workload_size,
                seed=config.workload_seed):
            raise ValueError(f"max_cells={config.max_cells} leaves no {config.workload_degree}-way "
                             "marginal of the schema in the workload.")
        return config

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, discretizer(config, schema).sizes, private=private)

    def _cut_steps(self, config, schema, cut):
        """A time budget's cut of the units in whole rounds (a multiple of the measurements per
        round, at least one round; annealed rounds spend any number of units)."""
        k = config.for_sizes(discretizer(config, schema).sizes).measurements_per_round
        if config.anneal:
            return dict(cut)
        return {name: max(k, steps // k * k) if name in ("measure", "selection") else steps
                for name, steps in cut.items()}

    def _target_phases(self, config, schema, records, private, epsilon, delta):
        return privacy_phases(config, discretizer(config, schema).sizes, private=private,
                              target=target(records, epsilon, delta, private))

    def _train(self, plan, x, key, hooks) -> Release:
        t0 = time.perf_counter()
        disc, finer = discretizer(plan.config, plan.model_schema), fine_discretizer(plan.config, plan.model_schema)
        goal = target(plan.records, plan.target_epsilon, plan.delta, plan.private)
        config = plan.config.for_sizes(disc.sizes, goal)  # the schedule left unset, from public values
        codes = disc.codes_from_encoded(x)
        fine = None if finer is None else (finer.codes_from_encoded(x), refinement(disc, finer))
        follow = follows_total(plan.config, config, goal, plan.private)
        annealed = bool((config.anneal or follow) and plan.private and config.max_rounds)
        stop = hooks.stop("measure")  # the rounds report their units under "measure"
        # the units of rounds of data-dependent size: public, fixed before any row is read
        cap = _progress.round_budget(plan.phase("measure").steps, stop) if annealed else None
        # the rounds of the planned schedule (one a time budget cut: a multiple of the round's units)
        rounds_cap = None if annealed else plan.phase("measure").steps // config.measurements_per_round
        fitted = fit_released(
            config, codes, disc.sizes, key, private=plan.private,
            max_units=cap if annealed else rounds_cap, should_stop=stop,
            phases=list(plan.phases) if plan.private else None, progress=hooks.progress, fine=fine,
            follow_total=follow)
        params, total, rounds = fitted.params, fitted.total, fitted.rounds
        names = disc.schema.names
        listing = ", ".join("-".join(names[a] for a in c) for r in rounds for c in r.cliques) or "none"
        units = sum(r.units * len(r.cliques) for r in rounds)
        pairs = config.scores_pairs(disc.sizes)
        rule = (None if goal is None or plan.config.max_rounds is not None else
                plan.config.for_sizes(disc.sizes).signal(disc.sizes, goal))
        notes = [
            _marginal.bins_note(disc),
            *([] if rule is None else [rule.note(goal, plan.config.for_sizes(disc.sizes).max_rounds)]),
            *([] if fitted.split is None else [fitted.split.note(plan.config.candidate_cells is None)]),
            (f"{len(rounds)} rounds ran, annealed as AIM's (units per round: "
             + ", ".join(str(r.units) for r in rounds) + f"; {units} of {config.max_rounds} units"
             if config.anneal and plan.private else
             f"{len(rounds)} rounds ran, split by the released total (units per round: "
             + ", ".join(str(r.units) for r in rounds) + f"; {units} of {config.max_rounds} units"
             if follow else
             f"{len(rounds)} of {config.max_rounds} rounds ran ({units} units")
            + ", each unit one selection and one Gaussian measurement); the candidates (the marginals scored) are public: "
            + ("every eligible marginal of the workload" if config.workload_size is None else
               f"the closure of at most {config.workload_size} eligible "
               f"{config.workload_degree}-way marginals drawn from the public seed "
               f"{config.workload_seed}")
            + (", and every 2-way marginal of at most "
               f"{config.max_cells} cells, all with weight 1 (sensitivity 1)" if pairs else "")
            + ("" if config.candidate_cells is None else
               f"; those of two or more columns of at most {config.candidate_cells} cells")
            + ". Selected marginals: " + listing + ".",
            *([] if cap is None or cap == config.max_rounds else [
                f"The time budget capped the {'split' if follow else 'annealed'} rounds at {cap} of "
                f"the {config.max_rounds} planned units, a cap fixed before any private row was read; "
                "no round overshoots it ("
                + ("the split shares out exactly the cap" if follow else
                   "a round's units are round_units(level, cap - spent)")
                + "), so every path spends exactly the cap and the report accounts for it, whatever "
                "the rounds."]),
            *([] if finer is None else [(
                f"The one-way release measures each continuous column on {config.one_way_refine} "
                f"times finer bins nested in the model's ({finer.describe()}); the fit reads their "
                "sums on the model's bins.")]),
            "Post-processing, not accounted because it reads only released values: the total "
            "(the mean sum of the noisy one-way histograms), "
            + ("the generator's initial output bias (the log of the one-way probabilities), "
               if config.one_way_init else "")
            + "the generator's fit "
            f"({config.round_steps} Adam steps per round, {config.final_steps} at the end), "
            + (f"its output bias moved {config.calibrate_iterations} times toward the one-way "
               "probabilities, " if config.calibrate_iterations else "")
            + "the scores' generator marginals and sampling"
            + ("" if finer is None else " (a value's finer bin inside its bin drawn from the finer "
               "one-way histogram, projected onto the simplex)") + ".",
        ]
        d = len(disc.sizes)
        graph = (measured_graph([c for r in rounds for c in r.cliques], d) if config.graphical_sampling
                 else np.zeros((d, d), bool))
        if config.graphical_sampling:
            widest = max(map(len, eliminate(graph).neighbours), default=0)
            lone = int(np.sum(~graph.any(axis=1)))
            notes.append(
                "Sampling (post-processing of the released selections): the generator's rows are made to "
                "follow the measured marginals' graph, triangulated by greedy elimination (largest "
                f"conditioning set: {widest} column{'' if widest == 1 else 's'}): each column is "
                "independent of the columns no measurement joins it to, given its neighbours, every "
                "measured marginal's rows kept as drawn"
                + (f"; {lone} columns no round measured are drawn from their released one-way "
                   "histograms" if lone else "") + ".")
        sampler = {"graph": jnp.asarray(graph), "one_way": jnp.asarray(fitted.one_way)}
        if fitted.fine is not None:
            sampler["fine"] = jnp.asarray(fitted.fine)
        if fitted.noise is not None:
            sampler["noise"] = fitted.noise
        released = {"generator": params, "sampler": sampler}
        return Release(arrays=released,
                           steps={"one_way": 1, "selection": cap or units, "measure": cap or units},
                           seconds={"gem": time.perf_counter() - t0}, notes=tuple(notes),
                           diagnostics={"rounds": rounds, "total": total})

    def _sample_frame(self, n, key, mode):
        del mode  # every column is drawn from its bins' probabilities
        k_codes, k_values = jax.random.split(key)
        disc = discretizer(self.fitted_config, self.model_schema)
        cfg = self.fitted_config.for_sizes(disc.sizes)  # the schedule the fit ran
        sampler = self.released["sampler"]
        codes = np.asarray(draw_codes(self.released["generator"], jnp.asarray(bin_index(disc.sizes)), k_codes,
                                      net=network(cfg, sum(disc.sizes)), n=n, noise_dim=cfg.noise_dim,
                                      noise=sampler.get("noise")))
        if cfg.graphical_sampling:
            codes = decouple(codes, np.asarray(sampler["graph"]),
                             dpsgd.host_rng(jax.random.fold_in(key, 1)), np.asarray(sampler["one_way"]))
        finer = fine_discretizer(cfg, self.model_schema)
        if finer is None:
            return disc.decode(codes, k_values)
        codes = refine_codes(codes, refinement(disc, finer), np.asarray(sampler["fine"]),
                             dpsgd.host_rng(jax.random.fold_in(key, 2)))
        return finer.decode(codes, k_values)

    def _release_shapes(self, config, schema, statistics):
        sizes = discretizer(config, schema).sizes
        d, widest = len(sizes), max(sizes)
        sampler = {"graph": jax.ShapeDtypeStruct((d, d), jnp.bool_),
                   "one_way": jax.ShapeDtypeStruct((d, widest), jnp.float32)}
        finer = fine_discretizer(config, schema)
        if finer is not None:
            sampler["fine"] = jax.ShapeDtypeStruct((d, max(finer.sizes)), jnp.float32)
        cfg = config.for_sizes(sizes)
        if cfg.fixed_noise:
            sampler["noise"] = jax.ShapeDtypeStruct((cfg.batch_size, cfg.noise_dim), jnp.float32)
        return {"generator": jax.eval_shape(lambda: init(config, sum(sizes), jax.random.key(0))),
                "sampler": sampler}


def follows_total(user: GEMConfig, config: GEMConfig, goal: Target | None, private: bool) -> bool:
    """Whether a fit's rounds split their units by the released total (``fit_released``'s
    ``follow_total``): a private fit of the auto rounds (``max_rounds`` unset) with no public N
    (``goal`` None: the rule then has no N before the one-way release), one marginal a round
    (``config``: ``user`` as it runs, ``GEMConfig.for_sizes``) and no ``anneal``."""
    return bool(private and goal is None and user.max_rounds is None and config.max_rounds
                and config.measurements_per_round == 1 and not config.anneal)


def target(records, epsilon: float | None, delta: float, private: bool) -> Target | None:
    """The public values of the signal-to-noise rule of a fit (``_signal.Target``): the public N
    (``records``, a ``RecordCount``: the user's num_records), epsilon and delta of a private fit to
    a finite target; None (the default schedule) otherwise, and always when N is not public: the
    private row count sets nothing."""
    if not private or not records.public or epsilon is None or not math.isfinite(epsilon):
        return None
    return Target(int(records.n), float(epsilon), float(delta))


__all__ = [
    "DEFAULTS",
    "GEM",
    "GEMConfig",
    "Group",
    "Measured",
    "ONE_WAY_FLOOR",
    "PAIR_WIDTH_LIMIT",
    "Round",
    "WIDE_DEFAULTS",
    "bin_index",
    "bin_mask",
    "Elimination",
    "Fitted",
    "decouple",
    "eliminate",
    "measured_graph",
    "one_way_probabilities",
    "discretizer",
    "fine_discretizer",
    "fit_one_way_bias",
    "refinement",
    "refine_codes",
    "coarse_histograms",
    "Refinement",
    "draw_codes",
    "fit_released",
    "follows_total",
    "fit_steps",
    "init",
    "bucket",
    "group_marginals",
    "last_layer",
    "measured",
    "mixture_marginal",
    "network",
    "optimizer",
    "privacy_phases",
    "probabilities",
    "target",
]
