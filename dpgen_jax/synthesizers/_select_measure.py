"""Select and measure: the kit the marginal-based methods share (MST, AIM, GEM).

* ``counts``, ``onehot_gram``, ``pair_l1``: marginals of the private codes on the public bins (a
  record adds one to one cell); ``measure``: several marginals released with one Gaussian.
* ``exponential_mechanism``: one choice among scored candidates, probability proportional to
  exp(epsilon q / (2 Delta)); a thin wrapper of ``dpsgd.exponential_mechanism_exact`` (the exact
  sampler, the one implementation) that adds only the non-private choice (``epsilon=None``: the
  best score). ``select_many``: several distinct choices, one such draw each.
* ``workload``, ``candidates``, ``scores``, ``select``, ``check_degree``: AIM's workload of k-way
  marginals on the public bins (all of them, or a public random subset of a stated size), its
  candidates (the downward closure, with the paper's weights) and its quality score; AIM and GEM
  select with them.
* ``unit_noise_multipliers``, ``unit_phases``, ``round_units``: AIM's budget units (one Gaussian
  measurement and one selection each, and the one-way release), shared by AIM and GEM.
* ``tick``: a progress bar's count through a fit's ``hooks.progress`` (the rounds of MST, AIM, GEM).

The methods' base (configuration, binning, ``mbi``, ``MarginalSynthesizer``) is
``synthesizers._marginal``; the papers' zCDP accounting is ``privacy.zcdp_rho`` and
``privacy.cks_epsilon``. Nothing here needs ``mbi``. See ``docs/mst.md``, ``docs/aim.md`` and
``docs/gem.md``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy

Clique = tuple[int, ...]
BIAS = math.sqrt(2.0 / math.pi)  # E|N(0, 1)|: expected L1 noise per cell is BIAS * sigma
ENUMERATE_LIMIT = 500_000  # more k-subsets of the columns than this: a random workload is drawn


def counts(codes: np.ndarray, sizes: Sequence[int], clique: Clique) -> np.ndarray:
    """The flattened ``clique`` marginal of ``codes`` (rows of per-column codes), int64.

    Privacy: adding or removing one record changes one cell by one (L1 and L2 sensitivity 1).
    """
    shape = tuple(sizes[j] for j in clique)
    flat = np.ravel_multi_index(tuple(codes[:, j] for j in clique), shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(np.int64)


def onehot_gram(codes: np.ndarray, sizes: Sequence[int], chunk: int = 8192) -> np.ndarray:
    """``(B, B)`` float64, B = sum(sizes): for every two bins a and b (of any columns), how many
    rows have both: the Gram matrix of the rows' one-hot codes. Block (i, j) is the (i, j)
    marginal's table, so every 2-way marginal comes out of one matrix product (a record adds one
    to one cell of each block)."""
    sizes = np.asarray(sizes, np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    width = int(sizes.sum())
    out = np.zeros((width, width))
    for start in range(0, len(codes), chunk):  # float32 products are exact below 2^24 rows
        hot = np.zeros((min(chunk, len(codes) - start), width), np.float32)
        np.put_along_axis(hot, np.asarray(codes[start:start + chunk], np.int64) + offsets, 1.0, axis=1)
        out += hot.T @ hot
    return out


def pair_l1(gram_a: np.ndarray, gram_b: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """``(d, d)``: the L1 distance between the (i, j) marginals held in two :func:`onehot_gram`
    matrices (the sums of the blocks of ``|gram_a - gram_b|``)."""
    offsets = np.concatenate([[0], np.cumsum(np.asarray(sizes, np.int64))[:-1]])
    diff = np.abs(np.asarray(gram_a) - np.asarray(gram_b))
    return np.add.reduceat(np.add.reduceat(diff, offsets, axis=0), offsets, axis=1)


def measure(codes: np.ndarray, sizes: Sequence[int], cliques: Sequence[Clique],
            noise_std: float | None, key: jax.Array) -> list[np.ndarray]:
    """The flattened marginals of ``cliques``, each cell plus integer Gaussian noise of std
    ``noise_std`` (``dpsgd.noisy_counts``; None: exact). Returns int64 arrays.

    Privacy: one Gaussian release; a record adds one to one cell of each marginal, so the L2
    sensitivity is sqrt(len(cliques)) and ``noise_std`` must be sigma * sqrt(len(cliques)). The
    counts leave as integers (rounding the noise is post-processing; ``docs/privacy.md``).
    """
    tables = {f"{i:06d}": counts(codes, sizes, c) for i, c in enumerate(cliques)}
    released = dpsgd.noisy_counts(tables, None if noise_std is None else float(noise_std), key)
    return [released[k] for k in sorted(released)]


def exponential_mechanism(quality: np.ndarray, epsilon: float | None, rng: np.random.Generator,
                          sensitivity: float = 1.0) -> int:
    """The index of one candidate, chosen with probability proportional to
    ``exp(epsilon * quality / (2 * sensitivity))``, exactly.

    A thin wrapper: the draw is ``dpsgd.exponential_mechanism_exact`` (the one sampler: rejection
    with exact Bernoulli(exp(-gamma)) draws; Gumbel-max in float64 gives probability 0 to
    candidates whose scaled score trails by more than about 40, ``docs/privacy.md``); the wrapper
    adds only ``epsilon=None``, which returns the best score (a non-private run). ``sensitivity`` bounds how much
    any one score moves when one record is added or removed. Accounted as
    ``privacy.ExponentialMechanismPhase(epsilon)``: (epsilon, 0)-DP and epsilon^2 / 8-zCDP.
    """
    q = np.asarray(quality, np.float64)
    if epsilon is None:
        return int(np.argmax(q))
    return dpsgd.exponential_mechanism_exact(q, epsilon, sensitivity, rng)


def select_many(quality: np.ndarray, count: int, epsilon: float | None, rng: np.random.Generator,
                sensitivity: float = 1.0) -> list[int]:
    """``count`` distinct indices, each by :func:`exponential_mechanism` among the candidates not
    chosen before it (adaptive composition of ``count`` selections, each (epsilon, 0)-DP: which
    candidates remain depends only on released choices)."""
    q = np.array(quality, np.float64)
    _v.whole("select_many", minimum=1, maximum=q.size, count=count)  # at most one per candidate
    chosen = []
    for _ in range(count):
        i = exponential_mechanism(q, epsilon, rng, sensitivity)
        chosen.append(i)
        q[i] = -np.inf
    return chosen

# ----------------------------------------------------------------------------- workload and selection


def workload(sizes: Sequence[int], degree: int, max_cells: int, *, size: int | None = None,
             seed: int = 0) -> list[Clique]:
    """The ``degree``-way marginals (sorted column indices) whose table has at most ``max_cells``
    cells, in lexicographic order: all of them, or, with ``size`` and more of them than that, a
    random subset of ``size`` drawn from ``seed`` (public: it depends on the schema's bin counts and
    the seed only, never on the data). On wide tables (more than ``ENUMERATE_LIMIT`` subsets) the
    subset is drawn without listing every subset; it then needs ``size``.

    Raises:
        ValueError: a wide table without ``size``, or one where ``size`` eligible marginals were
            not found in 100 draws per wanted marginal.
    """
    d = len(sizes)
    if math.comb(d, degree) <= ENUMERATE_LIMIT:
        every = [c for c in itertools.combinations(range(d), degree)
                 if math.prod(sizes[j] for j in c) <= max_cells]
        if size is None or len(every) <= size:
            return every
        pick = np.random.default_rng(seed).choice(len(every), size=size, replace=False)
        return [every[i] for i in sorted(pick)]
    if size is None:
        raise ValueError(f"{d} columns have {math.comb(d, degree):,} {degree}-way marginals, more than "
                         f"the {ENUMERATE_LIMIT:,} that are listed; give the configuration's "
                         "workload_size (a public random subset of that many, drawn from "
                         "workload_seed; dpgen-jax: --set workload_size=N).")
    rng = np.random.default_rng(seed)
    chosen: set[Clique] = set()
    for _ in range(100):
        draws = np.sort(np.argsort(rng.random((4 * size, d)), axis=1)[:, :degree], axis=1)
        for row in draws:
            c = tuple(int(a) for a in row)
            if c not in chosen and math.prod(sizes[j] for j in c) <= max_cells:
                chosen.add(c)
                if len(chosen) == size:
                    return sorted(chosen)
    raise ValueError(f"found only {len(chosen)} of size={size} {degree}-way marginals with at most "
                     f"max_cells={max_cells} cells.")


def candidates(work: Sequence[Clique]) -> dict[Clique, float]:
    """The downward closure of the workload, each marginal r with its weight
    w_r = sum over workload marginals s of |r & s| (AIM's, every workload weight 1), computed as
    the sum over r's columns of how many workload marginals hold the column (the same number)."""
    closure = sorted({s for c in work for k in range(1, len(c) + 1)
                      for s in itertools.combinations(c, k)}, key=lambda c: (len(c), c))
    holding: dict[int, int] = {}
    for c in work:
        for j in c:
            holding[j] = holding.get(j, 0) + 1
    return {r: float(sum(holding[j] for j in r)) for r in closure}


def scores(cands: Mapping[Clique, float], answers: Mapping[Clique, np.ndarray],
           estimates: Mapping[Clique, np.ndarray], sizes: Sequence[int],
           sigma: float | None) -> dict[Clique, float]:
    """w_r (||M_r(D) - M_r(model)||_1 - sqrt(2 / pi) sigma n_r) per candidate r (sigma None:
    no noise term). Each changes by at most w_r when one record is added or removed: the model
    depends only on released measurements."""
    out = {}
    for r, w in cands.items():
        bias = 0.0 if sigma is None else BIAS * sigma * math.prod(sizes[j] for j in r)
        out[r] = w * (float(np.abs(np.ravel(answers[r]) - np.ravel(estimates[r])).sum()) - bias)
    return out


def select(quality: Mapping[Clique, float], weights: Mapping[Clique, float], epsilon: float | None,
           key: jax.Array) -> Clique:
    """One candidate by the exponential mechanism: probability proportional to
    exp(epsilon q_r / (2 Delta)) with Delta the largest weight among the candidates (the scores
    divided by Delta have sensitivity 1), sampled exactly. None: the best score."""
    keys = list(quality)
    q = np.array([quality[r] for r in keys], np.float64)
    i = exponential_mechanism(q, epsilon, dpsgd.host_rng(key), sensitivity=max(weights[r] for r in keys))
    return keys[i]


# ----------------------------------------------------------------------------- budget units


UNIT_PHASES = ("one_way", "selection", "measure")


def unit_noise_multipliers(d: int, rounds: int, measure_share: float,
                           one_way_share: float | None = None) -> dict[str, float]:
    """AIM's split of a total zCDP of 1 into units: T = R + alpha d units of rho 1 / T; a
    measurement (sensitivity 1) spends alpha / T, a selection (1 - alpha) / T, the one-way
    release of the d histograms (sensitivity sqrt(d)) alpha d / T. With ``one_way_share`` s the
    one-way release spends s instead and the R units share 1 - s (AIM's split is the case
    s = alpha d / T). Returns the zCDP-equivalent noise multipliers ``{"one_way_noise_multiplier",
    "measure_noise_multiplier", "selection_noise_multiplier"}`` (rho = 1 / (2 sigma^2))."""
    a = measure_share
    s = a * d / (a * d + rounds) if one_way_share is None else float(one_way_share)
    unit = (1.0 - s) / rounds
    return {"one_way_noise_multiplier": 1.0 / math.sqrt(2.0 * s),
            "measure_noise_multiplier": 1.0 / math.sqrt(2.0 * a * unit),
            "selection_noise_multiplier": 1.0 / math.sqrt(2.0 * (1.0 - a) * unit)}


def round_units(level: int, remaining: int) -> tuple[int, bool]:
    """The units of the next round and whether it is the last: ``level`` units, or every
    remaining unit when fewer than ``2 * level`` remain (AIM's last round;
    GEM's annealed schedule uses the same rule)."""
    _v.whole(minimum=1, level=level)
    _v.whole(minimum=1, remaining=remaining)
    return (remaining, True) if remaining < 2 * level else (level, False)


def unit_phases(d: int, rounds: int, one_way: float, selection: float, measure: float, *,
                steps: Mapping[str, int] | None = None, private: bool = True) -> list:
    """The one-way Gaussian release (sensitivity sqrt(d)), ``rounds`` unit selections and
    ``rounds`` unit Gaussian measurements (sensitivity 1), with these noise multipliers
    (``steps``: the units executed instead)."""
    n = {"one_way": 1, "selection": rounds, "measure": rounds, **dict(steps or {})}
    if not private:
        return [privacy.NonPrivatePhase(name, n[name]) for name in UNIT_PHASES]
    return [
        privacy.GaussianPhase("one_way", one_way, n["one_way"], sensitivity=math.sqrt(d)),
        privacy.ExponentialMechanismPhase.from_noise_multiplier(
            "selection", selection, n["selection"], sensitivity=1.0),
        privacy.GaussianPhase("measure", measure, n["measure"], sensitivity=1.0),
    ]



def tick(progress: Callable[..., Callable[[int, int], None] | None] | None, phase: str,
         done: int, total: int, runs: tuple[str, ...] = ()) -> None:
    """Moves the progress bar of accounted phase ``phase`` to ``done`` of ``total`` steps;
    ``progress`` is a fit's ``hooks.progress`` (None, or one returning None: no bars). A bar's
    epsilon composes the steps reported so far of every phase, so a method ticks each of its
    phases (e.g. the one-way release as 1 of 1) for the last bar to end at the epsilon spent.
    ``runs``: other planned phases the bar's units count too (the rounds' "measure" bar runs the
    "selection" phase: one selection per unit; a time budget's cap of the bar cuts both)."""
    update = None if progress is None else (progress(phase, phases=runs) if runs else progress(phase))
    if update is not None:
        update(int(done), int(total))


def check_degree(workload_degree: int, d: int) -> None:
    """Refuses a workload of ``workload_degree``-way marginals on ``d`` columns when d is smaller."""
    if workload_degree > d:
        raise ValueError(f"workload_degree={workload_degree} exceeds the {d} columns of the schema.")
