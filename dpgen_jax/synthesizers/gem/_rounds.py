"""GEM's rounds on the private codes (:func:`fit_released`): the one-way release, then each round
one or more exponential-mechanism selections, Gaussian measurements and a fit of the generator.
See ``docs/gem.md``."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers._signal import Split, released_split
from dpgen_jax.synthesizers.gem._config import GEMConfig, privacy_phases
from dpgen_jax.synthesizers.gem._generator import (
    bin_index, bin_mask, draw_codes, fit_one_way_bias, fit_steps, init, measured, mixture_marginal, network, optimizer)
from dpgen_jax.synthesizers.gem._refinement import Refinement, coarse_histograms
from dpgen_jax.synthesizers.gem._sampling import decouple, measured_graph, one_way_probabilities

Clique = sm.Clique


class Round(NamedTuple):
    cliques: tuple[Clique, ...]  # the marginals selected and measured, in order
    seconds: float               # the round's wall time (selections, measurements, fit)
    units: int = 1               # budget units of each selection and measurement (``anneal``)
    annealed: bool = False       # the next rounds spend 4 times the units


class Fitted(NamedTuple):
    """What :func:`fit_released` returns (post-processing of the released measurements)."""

    params: dict                  # the generator's parameters
    total: float                  # the released total (the mean sum of the noisy one-way histograms)
    rounds: list                  # the rounds executed (:class:`Round`)
    one_way: np.ndarray           # (d, S) the one-way probabilities on the model's bins
    fine: np.ndarray | None       # the same on the finer bins (None without ``fine``)
    noise: jax.Array | None       # the mixture's fixed noise vectors (None: fresh noise)
    split: Split | None = None    # the units' split the released total decided (``follow_total``)


def fit_released(config: GEMConfig, codes: np.ndarray, sizes: Sequence[int], key: jax.Array, *,
                 private: bool = True, max_units: int | None = None,
                 should_stop: Callable[[], bool] | None = None, phases: Sequence | None = None, progress: Callable[[str], object] | None = None,
                 fine: tuple[np.ndarray, Refinement] | None = None, follow_total: bool = False):
    """The whole of GEM on the private codes (:class:`Fitted`).
    ``fine``: ``(codes on the finer bins, refinement)`` (``one_way_refine``): the one-way
    release is measured on the finer bins (one record still adds one to one cell of each
    column's histogram) and summed onto the model's.
    The candidates of two or more columns are those of at most ``candidate_cells`` cells (when
    set: the signal-to-noise rule's largest measurable marginal, ``GEMConfig.for_sizes``).
    ``private=False``: exact counts and the best candidate each round. ``max_units``: a public cap
    on the units (with ``anneal``; on the rounds without), fixed before any row is read (a fit's
    time budget, ``_progress.round_budget``, or its cut schedule); the annealed rounds then spend
    exactly min(max_rounds, max_units) units, no round overshooting it, whatever the released
    values. ``should_stop`` is asked
    before every round after the first (units not spent are not spent at all; with ``anneal``
    where it stops may follow released values, so the caller accounts for the whole cap). ``phases``: the
    accounted phases the noise is read from (default: :func:`privacy_phases` of ``config``).
    ``config``: the user's configuration or one :meth:`GEMConfig.for_sizes` resolved (its unset
    schedule is decided here from ``sizes``).
    ``progress``: a fit's ``hooks.progress``: the one-way release, then the units of the
    measurements made after every round (bar "measure", of ``config.units()``), then
    "selection" at the same count (``_select_measure.tick``).
    ``follow_total`` (a private fit of one marginal a round, without ``anneal``): after the
    one-way release, the units (``max_rounds``, or ``max_units`` when smaller) are split into
    rounds by the signal-to-noise rule on its released total (``_signal.released_split``), and the
    largest candidate is the rule's unless ``candidate_cells`` is set; a round of m units measures
    with noise sigma_u / sqrt(m) and selects with epsilon_u sqrt(m), so exactly the units are spent
    whatever the split (post-processing; ``Fitted.split``)."""
    d = len(sizes)
    config = config.for_sizes(sizes)  # the schedule left unset, from the public bin counts
    if follow_total and (not private or config.anneal or config.measurements_per_round != 1):
        raise ValueError("follow_total needs a private fit of measurements_per_round=1 without anneal, "
                         f"got private={private}, measurements_per_round={config.measurements_per_round}, "
                         f"anneal={config.anneal}.")
    work = sm.workload(sizes, config.workload_degree, config.max_cells, size=config.workload_size,
                       seed=config.workload_seed)
    if not work:
        raise ValueError(f"max_cells={config.max_cells} leaves no {config.workload_degree}-way "
                         "marginal in the workload.")
    phases = {p.name: p for p in (privacy_phases(config, sizes) if phases is None else phases)}
    sigma = phases["measure"].noise_multiplier if private else None
    eps = phases["selection"].epsilon if private else None

    k_one, k_init, k_rounds = jax.random.split(key, 3)
    std1 = phases["one_way"].noise_std if private else None
    singles = [(j,) for j in range(d)]
    if fine is None:
        one, fine_probs = sm.measure(codes, sizes, singles, std1, k_one), None
    else:
        fine_one = sm.measure(fine[0], fine[1].sizes, singles, std1, k_one)
        one = coarse_histograms(fine_one, fine[1], sizes)
        fine_probs = one_way_probabilities(fine_one, fine[1].sizes)
    sm.tick(progress, "one_way", 1, 1)
    total = max(1.0, float(np.mean([y.sum() for y in one])))  # post-processing of the release
    one_probs = one_way_probabilities(one, sizes)

    budget = config.max_rounds  # public: the units of every path, decided before the rounds
    if max_units is not None:
        budget = min(budget, max(1, _v.whole(minimum=0, max_units=max_units)))  # 0 rounds stay 0
    split = (released_split(total, config.candidate_sizes(sizes), sigma, budget)
             if follow_total and budget > 0 else None)  # post-processing of the released total
    largest = config.max_cells if config.candidate_cells is None else min(config.max_cells, config.candidate_cells)
    if split is not None and config.candidate_cells is None:
        largest = min(largest, max(1, split.max_cells))
    cands = {r: w for r, w in sm.candidates(work).items() if len(r) == 1 or math.prod(sizes[j] for j in r) <= largest}
    pairs = None
    if config.scores_pairs(sizes):  # every pair, scored from Gram matrices; every weight 1
        cands = {r: 1.0 for r in cands if len(r) != 2}
        size = np.asarray(sizes, np.int64)
        pairs = np.argwhere(np.triu(np.outer(size, size) <= largest, 1))
        pair_cells = (size[pairs[:, 0]] * size[pairs[:, 1]]).astype(np.float64)
        real_gram = sm.onehot_gram(codes, sizes)
    keys = list(cands)
    answers = {r: sm.counts(codes, sizes, r).astype(np.float64) for r in keys}
    sensitivity = max(cands.values())
    log: list[tuple[Clique, np.ndarray, float]] = []

    index = jnp.asarray(bin_index(sizes))
    net, opt = network(config, sum(sizes)), optimizer(config)
    params = init(config, sum(sizes), k_init, one_probs[bin_mask(sizes)] if config.one_way_init else None)
    state = opt.init(params)
    noise = (jax.random.normal(jax.random.fold_in(k_init, 1), (config.batch_size, config.noise_dim))
             if config.fixed_noise else None)  # public randomness, drawn before any row is read
    static = dict(net=net, opt=opt, batch_size=config.batch_size, noise_dim=config.noise_dim)

    def fit(p, s, k, steps):
        return fit_steps(p, s, measured(one, std1 or 1.0, log, sizes), index,
                         jnp.float32(total), k, jnp.int32(steps), noise=noise, **static)

    per_round = min(config.measurements_per_round, len(keys) + (0 if pairs is None else len(pairs)))
    params, state = fit(params, state, jax.random.fold_in(k_rounds, 10**6), config.round_steps)
    rounds: list[Round] = []
    anneal = bool(private and config.anneal)
    z_moved = (noise if noise is not None else jax.random.normal(
        jax.random.fold_in(k_rounds, 10**6 + 3), (config.batch_size, config.noise_dim))) if anneal else None
    sigma_u, eps_u = sigma, eps
    level, spent, t, used = 1, 0, 0, 0  # used: the units of every selection and measurement
    while spent < budget:
        if rounds and should_stop is not None and should_stop():
            break
        if split is not None:
            m, last = split.units[t], t == len(split.units) - 1
        else:
            m, last = sm.round_units(level, budget - spent) if anneal else (1, False)
        sigma = None if sigma_u is None else sigma_u / math.sqrt(m)
        eps = None if eps_u is None else eps_u * math.sqrt(m)
        t0 = time.perf_counter()
        k_sample, k_sel, k_meas, k_fit = jax.random.split(jax.random.fold_in(k_rounds, t), 4)
        sample = np.asarray(draw_codes(params, index, k_sample, net=net, n=config.score_samples,
                                       noise_dim=config.noise_dim, noise=noise))
        if config.graphical_sampling:  # the sampler's rows (post-processing of the log)
            sample = decouple(sample, measured_graph([c for c, _, _ in log], d),
                              dpsgd.host_rng(jax.random.fold_in(k_sample, 1)), one_probs)
        scale = total / config.score_samples
        est = {r: sm.counts(sample, sizes, r) * scale for r in keys}
        quality = sm.scores(cands, answers, est, sizes, sigma)
        q = np.array([quality[r] for r in keys], np.float64)
        if pairs is not None:
            l1 = sm.pair_l1(real_gram, sm.onehot_gram(sample, sizes) * scale, sizes)
            bias = 0.0 if sigma is None else sm.BIAS * sigma
            q = np.concatenate([q, l1[pairs[:, 0], pairs[:, 1]] - bias * pair_cells])
        chosen = sm.select_many(q, per_round, eps, dpsgd.host_rng(k_sel), sensitivity=sensitivity)
        picked = tuple(keys[i] if i < len(keys) else tuple(int(a) for a in pairs[i - len(keys)])
                       for i in chosen)
        for j, r in enumerate(picked):
            k_j = k_meas if j == 0 else jax.random.fold_in(k_meas, j)  # one per round: as before k
            (y,) = sm.measure(codes, sizes, [r], sigma, k_j)
            log.append((r, y, sigma or 1.0))
        if anneal:
            before = mixture_marginal(net, params, z_moved, index, picked[0], sizes)
        params, state = fit(params, state, k_fit, config.round_steps)
        jax.block_until_ready(params)
        annealed = False
        if anneal and not last:  # AIM's rule, on the generator's marginal (post-processing)
            moved = total * float(np.abs(mixture_marginal(net, params, z_moved, index, picked[0], sizes)
                                         - before).sum())
            annealed = moved <= sm.BIAS * sigma * math.prod(sizes[a] for a in picked[0])
            level = 4 * level if annealed else level
        rounds.append(Round(picked, time.perf_counter() - t0, m, annealed))
        spent, t = spent + m, t + 1
        used += m * len(picked)
        sm.tick(progress, "measure", used, config.units(), runs=("selection",))
    sm.tick(progress, "selection", used, config.units())
    params, _ = fit(params, state, jax.random.fold_in(k_rounds, 10**6 + 1), config.final_steps)
    if config.calibrate_iterations:
        columns = np.ones(d, bool)
        if config.graphical_sampling:  # a column no round measured is drawn from its histogram
            columns = measured_graph([c for r in rounds for c in r.cliques], d).any(axis=1)
        params = fit_one_way_bias(params, index, jnp.asarray(one_probs), jnp.asarray(columns),
                                  jax.random.fold_in(k_rounds, 10**6 + 2), net=net,
                                  noise_dim=config.noise_dim, n=config.score_samples,
                                  iterations=config.calibrate_iterations, noise=noise)
    return Fitted(params, total, rounds, one_probs, fine_probs, noise, split)
