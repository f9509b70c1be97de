"""AIM (McKenna, Mullins, Sheldon and Miklau 2022, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data", PVLDB 15(11)). See ``docs/aim.md``.

The table is discretised on public bins (``data.Discretizer``, as for MST). With a total zCDP
budget rho, a measurement share alpha (the paper's 0.9) and a round budget R (``max_rounds``; the
paper's T is R + alpha d), the budget is cut into *units* before any row is read: a unit is one
Gaussian measurement of one marginal at noise multiplier sigma_u (zCDP alpha rho / T) plus one
exponential-mechanism selection at epsilon_u (zCDP (1 - alpha) rho / T).

1. **One-way measurements.** Every column's histogram at noise standard deviation sigma_u, released
   together (L2 sensitivity sqrt(d)): zCDP alpha d rho / T.
2. **Rounds**, until the R units are spent (or B < R, a time budget's cap fixed before any row
   is read: every path then spends exactly B). A round at level m (m units: sigma_u / sqrt(m),
   epsilon_u sqrt(m); m = 1 at first) selects one marginal r of the workload's downward closure
   whose junction tree fits the model-size limit (``max_model_size`` times the share of the budget
   spent), by the exponential mechanism on the score w_r (||M_r(D) - M_r(model)||_1 - sqrt(2 / pi)
   sigma_t n_r), normalised by the largest weight among the candidates (sensitivity 1); measures it
   with Gaussian noise; re-estimates the model with ``mbi`` (warm-started mirror descent). When the
   new estimate moved the measured marginal by less than the expected noise (sqrt(2 / pi) sigma_t
   n_r in L1), the next rounds run at 4 m (sigma halved, epsilon doubled: the paper's annealing).
   When fewer than 2 m units remain, one last round spends all of them (no round overshoots).
3. **Estimation** (post-processing): a final ``mbi`` estimate from every measurement, released as
   the maximal-clique marginals of its junction tree on the public bins.

Accounting: a round at m units costs exactly m unit Gaussian measurements and m unit selections
(RDP alpha / (2 sigma^2) and rho alpha are linear in the budget), so the report composes the
one-way release, R unit selections (``privacy.ExponentialMechanismPhase``, steps = units) and R unit
measurements (``privacy.GaussianPhase``, steps = units) with the RDP accountant: the same for every
path of the algorithm, decided before data is touched, and calibrated by one common factor (under
a time budget: B units of each, the cap, whatever the path; never a stop that follows the rounds). How the
units were grouped into rounds (adaptive, as in the paper) is listed in the report's assumptions.

``mbi`` (>= 2.0) is an optional dependency (``pip install "dpgen-jax[baselines]"``); without it
``fit`` raises with that instruction, while a saved AIM model still loads and samples.

Functional API: :func:`discretizer`, :func:`privacy_phases` (given d, the number of coded columns:
``len(discretizer(config, schema).sizes)``), :func:`workload`,
:func:`candidates`, :func:`model_marginal`, :func:`model_size`, :func:`filter_candidates`,
:func:`scores`, :func:`select`, :func:`round_units`, :func:`estimate`, :func:`maximal_cliques`,
:func:`fit_released`, :func:`sample_codes`.
Class API: :class:`AIM` (``synthesizers.create("aim")``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd
from dpgen_jax.data._discrete import SPACINGS
from dpgen_jax.synthesizers import _progress
from dpgen_jax.synthesizers import _marginal
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers._base import Release, register

PHASES = sm.UNIT_PHASES
PAPER_ROUNDS_PER_COLUMN = 16  # the paper's T = 16 d
DEFAULT_MAX_ROUNDS = 32
BIAS = sm.BIAS
PAPER_ACCOUNTING = ("zCDP of the one-way release and of every round summed and converted with the "
                    "bound of Canonne, Kamath and Steinke (2020) over real orders, as in McKenna "
                    "et al. (2022)")

Clique = sm.Clique
workload, candidates, scores, select = sm.workload, sm.candidates, sm.scores, sm.select


def paper_rounds(d: int, measure_share: float = 0.9) -> int:
    """The round units of the paper's schedule, T = 16 d: R = round(16 d - alpha d), at least 1."""
    return max(1, round(PAPER_ROUNDS_PER_COLUMN * d - measure_share * d))


@dataclasses.dataclass(frozen=True)
class AIMConfig(_marginal.MarginalConfig):
    """Hyperparameters of AIM (all public).

    The three noise multipliers are zCDP-equivalent Gaussian noise multipliers of one *unit*
    (rho = 1 / (2 sigma^2); for the selection, epsilon_u = 2 / sigma): ``one_way`` for the d
    histograms released together (sensitivity sqrt(d)), ``measure`` for one marginal
    (sensitivity 1), ``selection`` for one choice. Left None they follow the paper's split
    (``measure_share`` alpha, total rho 1): unit rho 1 / T with T = R + alpha d, alpha / T per
    measurement, (1 - alpha) / T per selection, alpha d / T for the one-way release
    (:meth:`noise_multipliers`: derived in the phases from the schema's d, d =
    ``len(discretizer(config, schema).sizes)``; the configuration keeps None). Calibration to a
    target epsilon then scales all three by one factor.

    Attributes:
        bins, bin_spacing: the public discretisation of continuous columns (``data.Discretizer``).
        workload_degree: the workload is every ``workload_degree``-way marginal (weight 1) whose
            table has at most ``max_cells`` cells; candidates are its downward closure. Default 3,
            the paper's "all 3-way marginals" workload.
        max_cells: see above (the authors' code: 10,000).
        workload_size, workload_seed: with more eligible marginals than ``workload_size``, a
            public random subset of that many, drawn from ``workload_seed`` (None: all of them,
            the paper's workload; a wide table, with more subsets than are listed, needs a size).
        max_rounds: R, the budget units of the rounds: the number of rounds when none is annealed,
            and the most there can be (an annealed round spends 4, 16, ... units). None: the
            paper's T = 16 d (R = round(16 d - alpha d), :meth:`rounds`, derived from the schema
            where it is used; the configuration keeps None). Default 32, a round budget that fits the
            project's 2-core machine (docs/aim.md).
        measure_share: alpha, the share of a unit spent on the Gaussian measurement (paper: 0.9).
        max_model_size: the junction-tree size limit in megabytes (8-byte cells) at the end of
            the budget; a candidate is allowed while its model would stay under this limit times
            the share of the budget spent (paper: 80).
        round_iters: mirror-descent iterations of the estimate after each round, warm-started.
        estimation_iters: iterations of the final estimate (paper: 2500 at the end).
        one_way_noise_multiplier, selection_noise_multiplier, measure_noise_multiplier: see above.

    The released model's maximal cliques (in sampling order, column indices) are a released
    statistic of the fit (``Release.statistics["model_cliques"]``), not configuration; they fix
    the shapes of the release file.
    """


    bins: int = 100
    bin_spacing: str = "auto"
    workload_degree: int = 3
    max_cells: int = 10_000
    workload_size: int | None = None
    workload_seed: int = 0
    max_rounds: int | None = DEFAULT_MAX_ROUNDS
    measure_share: float = 0.9
    max_model_size: float = 80.0
    round_iters: int = 1000
    estimation_iters: int = 2500
    one_way_noise_multiplier: float | None = None
    selection_noise_multiplier: float | None = None
    measure_noise_multiplier: float | None = None

    def validate(self) -> AIMConfig:
        _v.whole(minimum=1, bins=self.bins)
        _v.one_of(SPACINGS, bin_spacing=self.bin_spacing)
        _v.whole(minimum=1, workload_degree=self.workload_degree)
        _v.whole(minimum=1, max_cells=self.max_cells)
        if self.workload_size is not None:
            _v.whole(minimum=1, workload_size=self.workload_size)
        _v.whole(workload_seed=self.workload_seed)
        if self.max_rounds is not None:
            _v.whole(minimum=1, max_rounds=self.max_rounds)
        _v.fraction(measure_share=self.measure_share)  # of each unit spent on the measurement (paper: 0.9)
        _v.positive(max_model_size=self.max_model_size)
        for name in ("round_iters", "estimation_iters"):
            _v.whole(minimum=1, **{name: getattr(self, name)})
        for name in ("one_way_noise_multiplier", "selection_noise_multiplier", "measure_noise_multiplier"):
            v = getattr(self, name)
            if v is not None:
                _v.positive(**{name: v})
        return self

    def rounds(self, d: int) -> int:
        """R, the budget units of the rounds on ``d`` columns: ``max_rounds``, or the paper's
        (:func:`paper_rounds`) for None."""
        if self.max_rounds is not None:
            return int(self.max_rounds)
        return paper_rounds(d, self.measure_share)

    def noise_multipliers(self, d: int) -> dict[str, float]:
        """The three unit noise multipliers on ``d`` columns: the configured ones, each unset one
        from the paper's split of a total rho of 1 (``_select_measure.unit_noise_multipliers``)."""
        return _marginal.configured_noise(self, sm.unit_noise_multipliers(d, self.rounds(d), self.measure_share))


discretizer = _marginal.discretizer


def privacy_phases(config: AIMConfig, d: int, *, steps: Mapping[str, int] | None = None,
                   private: bool = True) -> list:
    """The one-way Gaussian release, R unit selections and R unit Gaussian measurements on ``d``
    columns (``len(discretizer(config, schema).sizes)``; R = ``config.rounds(d)``, the noise
    multipliers ``config.noise_multipliers(d)``; ``steps``: the units executed; a round at m
    units counts m of each)."""
    d = _v.whole(minimum=1, d=d)
    noise = config.noise_multipliers(d)
    return sm.unit_phases(d, config.rounds(d), noise["one_way_noise_multiplier"],
                          noise["selection_noise_multiplier"], noise["measure_noise_multiplier"],
                          steps=steps, private=private)


# ----------------------------------------------------------------------------- workload


# ----------------------------------------------------------------------------- model marginals


def _align(attrs: Clique, table: np.ndarray, target: Clique, sizes: Sequence[int]) -> np.ndarray:
    """``table`` over ``attrs`` as an array broadcastable over ``target`` (a superset)."""
    order = sorted(range(len(attrs)), key=lambda i: target.index(attrs[i]))
    t = np.transpose(table, order) if attrs else np.asarray(table)
    return t.reshape([sizes[a] if a in attrs else 1 for a in target])


def model_marginal(potentials: Sequence[tuple[Clique, np.ndarray]], sizes: Sequence[int],
                   query: Clique, total: float) -> np.ndarray:
    """The marginal over ``query`` (in its order) of the graphical model with log-potentials
    ``(clique, table)``, scaled to ``total``: variable elimination in float64, greedy order (the
    variable whose eliminated factor is smallest first). Post-processing of released values."""
    factors = [(tuple(c), np.asarray(t, np.float64)) for c, t in potentials]
    elim = sorted({a for c, _ in factors for a in c} - set(query))
    while elim:
        def cost(a):
            return math.prod(sizes[b] for b in set().union(*[c for c, _ in factors if a in c]))
        z = min(elim, key=lambda a: (cost(a), a))
        elim.remove(z)
        touching = [f for f in factors if z in f[0]]
        factors = [f for f in factors if z not in f[0]]
        union = tuple(sorted(set().union(*[c for c, _ in touching])))
        s = sum(_align(c, t, union, sizes) for c, t in touching)
        ax = union.index(z)
        peak = np.max(s, axis=ax, keepdims=True)
        peak = np.where(np.isfinite(peak), peak, 0.0)
        summed = np.log(np.sum(np.exp(s - peak), axis=ax)) + np.squeeze(peak, axis=ax)
        factors.append((union[:ax] + union[ax + 1:], summed))
    query = tuple(query)
    log_p = np.zeros([sizes[a] for a in query])
    for c, t in factors:
        log_p = log_p + _align(c, t, query, sizes)
    p = np.exp(log_p - np.max(log_p))
    return p * (total / p.sum())


def _potentials(model) -> list[tuple[Clique, np.ndarray]]:
    pots = model.potentials
    out = []
    for cl in pots.cliques:
        f = pots[cl]
        out.append((tuple(int(a) for a in f.domain.attributes), np.asarray(f.values, np.float64)))
    return out


def _closure(cliques: Sequence[Clique]) -> set[Clique]:
    return {tuple(sorted(s)) for c in cliques for k in range(1, len(c) + 1)
            for s in itertools.combinations(c, k)}


def _domain(sizes: Sequence[int]):
    mbi = _marginal.load_mbi("AIM")
    return mbi, mbi.Domain([str(j) for j in range(len(sizes))], list(sizes))


def model_size(sizes: Sequence[int], cliques: Sequence[Clique], _dom=None) -> float:
    """Megabytes (8-byte cells) of the junction tree of ``cliques`` (``mbi``'s measure)."""
    mbi, dom = _dom or _domain(sizes)
    return float(mbi.junction_tree.hypothetical_model_size(
        dom, [tuple(str(a) for a in c) for c in cliques]))


def filter_candidates(cands: Mapping[Clique, float], measured: Sequence[Clique],
                      sizes: Sequence[int], limit: float) -> dict[Clique, float]:
    """The candidates whose model (``measured`` + r) has a junction tree of at most ``limit`` MB,
    and every candidate already inside a measured clique (it does not grow the model)."""
    free = _closure(measured)
    base = list(dict.fromkeys(tuple(c) for c in measured))
    dom = _domain(sizes)
    return {r: w for r, w in cands.items() if r in free or model_size(sizes, base + [r], dom) <= limit}


# ----------------------------------------------------------------------------- estimation


def estimate(sizes: Sequence[int], log: Sequence[tuple[Clique, np.ndarray, float]], iters: int,
             warm_start=None):
    """An ``mbi`` graphical model (mirror descent) from the noisy marginals ``(clique, flattened
    counts, noise std)``; ``warm_start``: the previous model (its potentials extended)."""
    mbi, dom = _domain(sizes)
    names = list(dom.attributes)
    ms = [mbi.LinearMeasurement(np.asarray(y, np.float64), tuple(names[a] for a in c), float(std))
          for c, y, std in log]
    return mbi.estimation.MirrorDescent().estimate(dom, ms, iters=iters, warm_start=warm_start)


def maximal_cliques(sizes: Sequence[int], measured: Sequence[Clique]) -> list[Clique]:
    """The maximal cliques of the junction tree ``mbi`` builds for ``measured``, in breadth-first
    order per connected component (each clique's overlap with the earlier ones lies in one of
    them: the order sampling needs)."""
    import networkx as nx

    mbi, dom = _domain(sizes)
    tree, _ = mbi.junction_tree.make_junction_tree(dom, [tuple(str(a) for a in c) for c in measured])
    out: list[Clique] = []
    for comp in sorted(nx.connected_components(tree), key=lambda c: min(tuple(int(a) for a in n) for n in c)):
        root = min(comp, key=lambda n: tuple(int(a) for a in n))
        out += [tuple(int(a) for a in n) for n in [root] + [v for _, v in nx.bfs_edges(tree, root)]]
    return out


round_units = sm.round_units


class Round(NamedTuple):
    clique: Clique   # the selected marginal
    units: int       # budget units spent (sigma_u / sqrt(units), epsilon_u sqrt(units))
    candidates: int  # how many candidates the model-size limit allowed
    annealed: bool   # the next rounds spend 4x the units


def fit_released(config: AIMConfig, codes: np.ndarray, sizes: Sequence[int], key: jax.Array, *,
                 private: bool = True, max_units: int | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 phases: Sequence | None = None,
                 progress: Callable[[str], Any] | None = None,
                 ) -> tuple[dict[str, np.ndarray], list[Clique], list[Round]]:
    """The whole of AIM on the private codes. Returns the released maximal-clique marginals
    (``{"c000": table, ...}``, probabilities on the public bins, float32), the cliques (column
    indices, sampling order) and the rounds executed. ``private=False``: exact counts, the best
    candidate each round, no annealing.

    ``max_units``: a public cap on the units of the rounds, fixed before any row is read (a fit's
    time budget, ``_progress.round_budget``); the rounds then spend exactly B = min(R, max_units)
    units (at least 1) whatever the annealing: no round overshoots B (its units are
    ``round_units(level, B - spent)``) and the model-size limit grows with the share of B spent.
    ``should_stop`` is asked before every round after the first (a stand-in's timing probe); if it
    ends the rounds before B, where it did may follow the released values, so such a run must
    still be accounted as B units (as :class:`AIM` does). ``phases``: the accounted phases the
    noise and budgets are read from (a fit's calibrated plan; default :func:`privacy_phases` of
    ``config`` on these columns). ``progress``: a fit's ``hooks.progress``: the one-way
    release, then the units spent after every round (bar "measure", of B), then "selection" at
    the same count (:func:`~dpgen_jax.synthesizers._select_measure.tick`)."""
    d = len(sizes)
    sm.check_degree(config.workload_degree, d)
    work = workload(sizes, config.workload_degree, config.max_cells, size=config.workload_size,
                    seed=config.workload_seed)
    if not work:
        raise ValueError(f"max_cells={config.max_cells} leaves no {config.workload_degree}-way "
                         "marginal in the workload.")
    cands = candidates(work)
    answers = {r: sm.counts(codes, sizes, r).astype(np.float64) for r in cands}
    phases = {p.name: p for p in (privacy_phases(config, d) if phases is None else phases)}
    sigma_u = phases["measure"].noise_multiplier
    eps_u = phases["selection"].epsilon
    rho_one = 1.0 / (2.0 * phases["one_way"].noise_multiplier ** 2)
    rho_unit = 1.0 / (2.0 * sigma_u ** 2) + phases["selection"].rho
    total_units = config.rounds(d)
    if max_units is not None:  # public: the budget of every path, decided before the rounds
        total_units = max(1, min(total_units, _v.whole(minimum=0, max_units=max_units)))
    rho_total = rho_one + total_units * rho_unit

    k_one, k_rounds = jax.random.split(key)
    std1 = phases["one_way"].noise_std if private else None
    one = sm.measure(codes, sizes, [(j,) for j in range(d)], std1, k_one)
    log: list[tuple[Clique, np.ndarray, float]] = [((j,), y, std1 or 1.0) for j, y in enumerate(one)]
    sm.tick(progress, "one_way", 1, 1)
    measured: list[Clique] = [(j,) for j in range(d)]
    model = estimate(sizes, log, config.round_iters)
    level, spent, rounds = 1, 0, []
    while spent < total_units:
        if rounds and should_stop is not None and should_stop():
            break
        m, last = round_units(level, total_units - spent)
        spent += m
        sigma = sigma_u / math.sqrt(m) if private else None
        limit = config.max_model_size * (rho_one + spent * rho_unit) / rho_total
        allowed = filter_candidates(cands, measured, sizes, limit)
        pots, total = _potentials(model), float(model.total)
        est = {r: model_marginal(pots, sizes, r, total) for r in allowed}
        quality = scores(allowed, answers, est, sizes, sigma)
        k_sel, k_meas = jax.random.split(jax.random.fold_in(k_rounds, len(rounds)))
        r = select(quality, allowed, eps_u * math.sqrt(m) if private else None, k_sel)
        (y,) = sm.measure(codes, sizes, [r], sigma, k_meas)
        log.append((r, y, sigma or 1.0))
        measured.append(r)
        model = estimate(sizes, log, config.round_iters, warm_start=model)
        moved = float(np.abs(model_marginal(_potentials(model), sizes, r, float(model.total))
                             - est[r]).sum())
        annealed = bool(private and not last and moved <= BIAS * sigma * math.prod(sizes[j] for j in r))
        if annealed:
            level *= 4
        rounds.append(Round(r, m, len(allowed), annealed))
        sm.tick(progress, "measure", spent, total_units, runs=("selection",))
    sm.tick(progress, "selection", spent, total_units)
    model = estimate(sizes, log, config.estimation_iters, warm_start=model)
    cliques = maximal_cliques(sizes, measured)
    pots, total = _potentials(model), float(model.total)
    tables = {}
    for i, c in enumerate(cliques):
        p = model_marginal(pots, sizes, c, 1.0)
        tables[f"c{i:03d}"] = np.asarray(p / p.sum(), np.float32)
    return tables, cliques, rounds


def sample_codes(tables: Mapping[str, Any], cliques: Sequence[Clique], sizes: Sequence[int], n: int,
                 key: jax.Array) -> np.ndarray:
    """``(n, d)`` codes drawn from the released junction tree: the cliques in order, each one's
    new columns jointly given the columns already drawn (its separator), by inverse CDF per
    separator value (a zero row falls back to the new columns' marginal)."""
    d = len(sizes)
    rng = dpsgd.host_rng(key)
    out = np.full((n, d), -1, np.int64)
    done: list[int] = []
    for i, c in enumerate(cliques):
        c = tuple(int(a) for a in c)
        sep = [a for a in c if a in done]
        new = [a for a in c if a not in done]
        if not new:
            continue
        t = np.transpose(np.asarray(tables[f"c{i:03d}"], np.float64), [c.index(a) for a in sep + new])
        t = t.reshape(math.prod(sizes[a] for a in sep), math.prod(sizes[a] for a in new))
        fallback = t.sum(axis=0)
        groups = (np.ravel_multi_index(tuple(out[:, a] for a in sep), [sizes[a] for a in sep])
                  if sep else np.zeros(n, np.int64))
        flat = np.empty(n, np.int64)
        order = np.argsort(groups, kind="stable")
        values, starts = np.unique(groups[order], return_index=True)
        ends = np.append(starts[1:], n)
        u = rng.random(n)
        for g, s, e in zip(values, starts, ends):
            row = t[g] if t[g].sum() > 0 else fallback
            cdf = np.cumsum(row)
            rows = order[s:e]
            flat[rows] = np.minimum(np.searchsorted(cdf, u[rows] * cdf[-1], side="right"), row.size - 1)
        out[:, new] = np.stack(np.unravel_index(flat, [sizes[a] for a in new]), axis=1)
        done += new
    if (out < 0).any():
        raise ValueError("the released cliques do not cover every column.")
    return out


@register
class AIM(_marginal.MarginalSynthesizer):
    """AIM with a scikit-learn-like interface (needs the optional ``mbi`` package to fit).

    Example:
        >>> model = AIM().fit(train_df, data.adult_schema(), epsilon=3.0)  # doctest: +SKIP
        >>> model.sample(1000)                                             # doctest: +SKIP
    """

    METHOD = "aim"
    DESCRIPTION = ("Adaptive rounds: the worst-approximated workload marginal chosen by the "
                   "exponential mechanism, measured with Gaussian noise, a graphical model "
                   "re-estimated (McKenna et al. 2022; needs mbi)")
    CONFIG = AIMConfig
    SMOKE = dict(bins=8, max_rounds=2, round_iters=200, estimation_iters=300)
    PAPER_ACCOUNTING = PAPER_ACCOUNTING

    def resolve_config(self, schema, preset=None):
        """The user's configuration (as the base class resolves it), checked against the schema's
        columns: the workload must hold a marginal. Nothing derived is written into it."""
        config = super().resolve_config(schema, preset)
        sizes = discretizer(config, schema).sizes  # a column declared missing is one coded column
        sm.check_degree(config.workload_degree, len(sizes))
        if not workload(sizes, config.workload_degree, config.max_cells, size=config.workload_size,
                        seed=config.workload_seed):
            smallest = min(math.prod(c) for c in itertools.combinations(sizes, config.workload_degree))
            raise ValueError(f"max_cells={config.max_cells} leaves no {config.workload_degree}-way "
                             f"marginal of the schema in the workload (smallest: {smallest} cells).")
        return config

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, len(discretizer(config, schema).sizes), private=private)

    def _train(self, plan, x, key, hooks) -> Release:
        config = plan.config
        t0 = time.perf_counter()
        disc = discretizer(config, plan.model_schema)
        codes = disc.codes_from_encoded(x)
        stop = hooks.stop("measure")  # the rounds report their units under "measure"
        planned = config.rounds(len(disc.sizes))
        units = _progress.round_budget(planned, stop)  # public: the cap fixed before any row is read
        tables, cliques, rounds = fit_released(config, codes, disc.sizes, key, private=plan.private,
                                               max_units=units, should_stop=stop,
                                               phases=list(plan.phases) if plan.private else None,
                                               progress=hooks.progress)
        names = disc.schema.names
        spent = sum(r.units for r in rounds)
        listing = ", ".join(f"{'-'.join(names[a] for a in r.clique)} ({r.units})" for r in rounds)
        notes = [
            _marginal.bins_note(disc),
            f"{len(rounds)} rounds spent {spent} of the {units} budget units (the "
            "selection and measure phases count units: a round at m units is accounted as m unit "
            "selections and m unit measurements, its noise standard deviation sigma_u / sqrt(m) "
            "and its epsilon epsilon_u sqrt(m)). Selected marginals (units): " + listing + ".",
            (f"The workload (public): every {config.workload_degree}-way marginal of at most "
             f"{config.max_cells} cells" if config.workload_size is None else
             f"The workload (public): at most {config.workload_size} eligible "
             f"{config.workload_degree}-way marginals drawn from the public seed {config.workload_seed}")
            + "; the candidates are its downward closure.",
            *([] if units == planned else [
                f"The time budget capped the rounds at {units} of the {planned} planned units, a "
                "cap fixed before any private row was read; no round overshoots it (a round's "
                "units are round_units(level, cap - spent), the last one taking what remains), "
                "so every path spends exactly the cap and the report accounts for it."]),
            *([] if spent == units else [
                f"A stop test ended the rounds after {spent} units; where it did may follow the "
                f"released values, so the report accounts for all {units} units."]),
            "The grouping of units into rounds is adaptive (the paper's annealing: the budget per "
            "round is quadrupled after a round whose measurement moved the model less than the "
            "expected noise), decided from released values only; every path spends the same "
            "units, so the composition above holds for all of them (the zCDP filter argument "
            "of McKenna et al. 2022).",
            "Post-processing, not accounted because it reads only released values: the mbi "
            f"estimates ({config.round_iters} warm-started mirror-descent iterations per round, "
            f"{config.estimation_iters} at the end), the model-size limit, the scores' model "
            "marginals and sampling.",
        ]
        return Release(arrays={"model": tables},
                           steps={"one_way": 1, "selection": units, "measure": units},
                           seconds={"aim": time.perf_counter() - t0}, notes=tuple(notes),
                           statistics={"model_cliques": [list(map(int, c)) for c in cliques]},
                           diagnostics={"rounds": rounds})

    def _sample_frame(self, n, key, mode):
        k_codes, k_values = jax.random.split(key)
        cfg = self.fitted_config
        disc = discretizer(cfg, self.model_schema)
        codes = sample_codes(self.released["model"], model_cliques(self.fitted_release.statistics),
                             disc.sizes, n, k_codes)
        return disc.decode(codes, k_values)

    def _release_shapes(self, config, schema, statistics):
        sizes = discretizer(config, schema).sizes
        d = len(sizes)
        cliques = model_cliques(statistics)
        if any(not c or any(not 0 <= a < d for a in c) for c in cliques):
            raise ValueError(f"The release's model_cliques={statistics.get('model_cliques')!r} are not "
                             f"non-empty lists of column indices in [0, {d}): load it with the schema and "
                             "configuration it was fitted with.")
        return {"model": {f"c{i:03d}": jax.ShapeDtypeStruct(tuple(sizes[a] for a in c), jnp.float32)
                          for i, c in enumerate(cliques)}}


def model_cliques(statistics) -> tuple[tuple[int, ...], ...]:
    """The released model's cliques (``Release.statistics["model_cliques"]``) as tuples."""
    return tuple(tuple(int(a) for a in c) for c in statistics.get("model_cliques", ()))
