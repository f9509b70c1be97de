"""MST (McKenna, Miklau and Sheldon 2021, "Winning the NIST Contest: A scalable and general approach
to differentially private synthetic data", Journal of Privacy and Confidentiality 11(3)).
See ``docs/mst.md``.

The table is discretised on public bins (``data.Discretizer``). Three mechanisms touch the private
rows, with the zCDP budget split in thirds (``budget_split``):

1. **One-way measurements.** Every column's histogram with Gaussian noise, released together
   (L2 sensitivity sqrt(d) under add/remove-one). Values whose noisy count is below three noise
   standard deviations are then merged into one value per column (post-processing, the paper's
   domain compression).
2. **Selection.** A model is estimated from the one-way measurements alone (independent columns);
   every pair of columns is scored by the L1 distance between its data 2-way marginal and the
   model's. A spanning tree is grown Kruskal-style: d - 1 times, one pair that joins two
   components is chosen by the exponential mechanism on those scores (sensitivity 1).
3. **Two-way measurements.** The tree's d - 1 two-way marginals with Gaussian noise, released
   together (L2 sensitivity sqrt(d - 1)).

A graphical model is estimated from all the measurements with the ``mbi`` package (private-pgm,
mirror descent; post-processing) and released as its tree marginals on the public bins; sampling
runs through the tree from column 0. Accounting: the Gaussian releases are ``GaussianDpEvent``s and
each selection is (epsilon^2 / 8)-zCDP (``privacy.ExponentialMechanismPhase``), composed by the RDP
accountant with the improved conversion (the headline; the PLD accountant has no event for the
exponential mechanism).

``mbi`` (>= 2.0) is an optional dependency (``pip install "dpgen-jax[baselines]"``); without it
``fit`` raises with that instruction, while a saved MST model still loads and samples.

Functional API: :func:`discretizer`, :func:`privacy_phases` (given d, the number of coded columns:
``len(discretizer(config, schema).sizes)``), :func:`measure`, :func:`compress`,
:func:`pair_scores`, :func:`select_tree`, :func:`estimate`, :func:`fit_released`,
:func:`sample_codes`. Class API: :class:`MST` (``synthesizers.create("mst")``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy
from dpgen_jax.data._discrete import SPACINGS
from dpgen_jax.synthesizers import _marginal
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers._base import Release, register

PHASES = ("one_way", "selection", "two_way")
PAPER_ACCOUNTING = ("zCDP of the three mechanisms summed and converted with the bound of Canonne, "
                    "Kamath and Steinke (2020) over real orders, as in McKenna et al. (2021)")


@dataclasses.dataclass(frozen=True)
class MSTConfig(_marginal.MarginalConfig):
    """Hyperparameters of MST (all public).

    The three noise multipliers are zCDP-equivalent Gaussian noise multipliers (rho = 1 / (2
    sigma^2) per release; for the selection, per choice, epsilon = 2 / sigma). Left None they
    follow ``budget_split`` (shares of the total zCDP for one-way, selection and two-way) on the
    schema's d columns (:meth:`noise_multipliers`, derived in the phases; the configuration keeps
    None); calibration to a target epsilon then scales all three by one factor, keeping the split.

    Attributes:
        bins, bin_spacing: the public discretisation of continuous columns (``data.Discretizer``).
        budget_split: zCDP shares of the three mechanisms, positive, summing to 1 (the paper: thirds).
        one_way_noise_multiplier, selection_noise_multiplier, two_way_noise_multiplier: see above.
        compress: merge each column's values whose noisy count is below 3 noise standard
            deviations into one value (the paper's domain compression).
        estimation_iters: mirror-descent iterations of the final ``mbi`` estimate (post-processing).
        selection_iters: iterations of the one-way estimate used to score pairs.
    """


    bins: int = 100
    bin_spacing: str = "auto"
    budget_split: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)
    one_way_noise_multiplier: float | None = None
    selection_noise_multiplier: float | None = None
    two_way_noise_multiplier: float | None = None
    compress: bool = True
    estimation_iters: int = 3000
    selection_iters: int = 1000

    def validate(self) -> MSTConfig:
        _v.whole(minimum=1, bins=self.bins)
        _v.one_of(SPACINGS, bin_spacing=self.bin_spacing)
        split = tuple(self.budget_split)
        if len(split) != 3 or not all(s > 0 for s in split) or abs(sum(split) - 1.0) > 1e-9:
            raise ValueError(f"budget_split={self.budget_split!r} is not 3 positive shares summing to 1: "
                             "pass the (one-way, selection, two-way) shares of the budget.")
        for name in ("one_way_noise_multiplier", "selection_noise_multiplier", "two_way_noise_multiplier"):
            v = getattr(self, name)
            if v is not None:
                _v.positive(**{name: v})
        _v.boolean(compress=self.compress)
        for name in ("estimation_iters", "selection_iters"):
            _v.whole(minimum=1, **{name: getattr(self, name)})
        return self

    def noise_multipliers(self, d: int) -> dict[str, float]:
        """The three noise multipliers on ``d`` columns: the configured ones, each unset one from
        ``budget_split`` (a total rho of 1; the d - 1 selections share theirs)."""
        s1, s2, s3 = self.budget_split
        return _marginal.configured_noise(self, {"one_way_noise_multiplier": 1 / math.sqrt(2 * s1),
                                          "selection_noise_multiplier": math.sqrt(max(d - 1, 1) / (2 * s2)),
                                          "two_way_noise_multiplier": 1 / math.sqrt(2 * s3)})


discretizer = _marginal.discretizer


def privacy_phases(config: MSTConfig, d: int, *, steps: Mapping[str, int] | None = None,
                   private: bool = True) -> list:
    """Gaussian one-way release, d - 1 exponential-mechanism selections, Gaussian two-way release
    on ``d`` columns (``len(discretizer(config, schema).sizes)``), with the configured noise
    multipliers, each unset one from ``budget_split`` (:meth:`MSTConfig.noise_multipliers`)."""
    d = _v.whole(minimum=1, d=d)
    n = {"one_way": 1, "selection": d - 1, "two_way": int(d > 1), **dict(steps or {})}
    if not private:
        return [privacy.NonPrivatePhase(name, n[name]) for name in PHASES]
    noise = config.noise_multipliers(d)
    return [
        privacy.GaussianPhase("one_way", noise["one_way_noise_multiplier"], n["one_way"],
                              sensitivity=math.sqrt(d)),
        privacy.ExponentialMechanismPhase.from_noise_multiplier(
            "selection", noise["selection_noise_multiplier"], n["selection"], sensitivity=1.0),
        privacy.GaussianPhase("two_way", noise["two_way_noise_multiplier"], n["two_way"],
                              sensitivity=math.sqrt(d - 1) if d > 1 else None),
    ]


# ----------------------------------------------------------------------------- mechanisms


def compress(one_way: Sequence[np.ndarray], threshold: float | None) -> list[np.ndarray]:
    """Per column, original code -> compressed code: values with noisy count >= threshold keep a
    code each (in order), the others share one last code. Identity when fewer than two values
    fall below the threshold (nothing to merge) or threshold is None."""
    out = []
    for y in one_way:
        keep = np.ones(y.size, bool) if threshold is None else y >= threshold
        if (~keep).sum() < 2:
            out.append(np.arange(y.size))
            continue
        m = np.full(y.size, int(keep.sum()))
        m[keep] = np.arange(int(keep.sum()))
        out.append(m)
    return out


def pair_scores(codes: np.ndarray, sizes: Sequence[int], one_way_model: Sequence[np.ndarray],
                total: float) -> np.ndarray:
    """``(d, d)`` L1 distances between every data 2-way marginal and the independent model's
    (``total * p_a outer p_b``). Each score has sensitivity 1 under add/remove-one."""
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    onehot = np.zeros((codes.shape[0], int(offsets[-1])), dtype=np.float32)
    for j in range(len(sizes)):
        onehot[np.arange(codes.shape[0]), offsets[j] + codes[:, j]] = 1.0
    gram = (onehot.T @ onehot).astype(np.float64)  # every 2-way contingency table, blockwise
    p = np.concatenate([np.asarray(m, np.float64) / max(float(np.sum(m)), 1e-300) for m in one_way_model])
    dist = np.abs(gram - total * np.outer(p, p))
    return np.add.reduceat(np.add.reduceat(dist, offsets[:-1], axis=0), offsets[:-1], axis=1)


def select_tree(scores: np.ndarray, epsilon: float | None, key: jax.Array,
                progress: Callable[[int, int], None] | None = None) -> list[tuple[int, int]]:
    """d - 1 edges of a spanning tree: each round, among pairs joining two components, one chosen
    with probability proportional to exp(epsilon * score / 2) (sampled exactly; None: the largest).
    ``progress(done, d - 1)`` is called after each selection."""
    d = scores.shape[0]
    a, b = np.triu_indices(d, 1)
    comp = np.arange(d)
    rng = dpsgd.host_rng(key)
    edges = []
    for _ in range(d - 1):
        open_ = np.flatnonzero(comp[a] != comp[b])
        q = scores[a[open_], b[open_]]
        i = open_[sm.exponential_mechanism(q, epsilon, rng)]
        edges.append((int(a[i]), int(b[i])))
        comp[comp == comp[b[i]]] = comp[a[i]]
        if progress is not None:
            progress(len(edges), d - 1)
    return edges


#: Mirror-descent iterations per call of a final estimate that a time budget may cut (a multiple
#: of mbi's fused block of 50 iterations).
ESTIMATE_CHUNK = 100


def estimate(sizes: Sequence[int], maps: Sequence[np.ndarray],
             one_way: Sequence[tuple[np.ndarray, float]],
             two_way: Sequence[tuple[tuple[int, int], np.ndarray, float]], iters: int,
             warm_start=None):
    """An ``mbi`` graphical model (mirror descent) on the compressed domain from noisy marginals.

    Args:
        sizes: codes per column before compression.
        maps: per column, original code -> compressed code (:func:`compress`).
        one_way: per column, (noisy counts on the original codes, noise std); compressed columns
            are re-expressed by ``mbi``'s own measurement compression (merged cells summed, with
            the weights that keep the noise i.i.d.).
        two_way: (pair, noisy flattened counts on the compressed codes, noise std).
        iters: mirror-descent iterations.
        warm_start: a previous model of the same measurements to continue from.
    """
    mbi = _marginal.load_mbi("MST")
    names = [str(j) for j in range(len(sizes))]
    full = mbi.Domain(names, list(sizes))
    merged = {names[j]: np.asarray(m) for j, m in enumerate(maps) if m.max() + 1 < sizes[j]}
    if any(m.max() + 1 == sizes[j] and (np.asarray(m) != np.arange(sizes[j])).any() for j, m in enumerate(maps)):
        raise ValueError("a compression map that merges nothing must be the identity.")
    out = [mbi.LinearMeasurement(np.asarray(y, np.float64), (names[j],), float(std)).compress(merged, full)
           for j, (y, std) in enumerate(one_way)]
    out += [mbi.LinearMeasurement(np.asarray(y, np.float64), (names[a], names[b]), float(std))
            for (a, b), y, std in two_way]
    small = mbi.Domain(names, [int(m.max()) + 1 for m in maps])
    return mbi.estimation.MirrorDescent().estimate(small, out, iters=iters, warm_start=warm_start)


class Released(NamedTuple):
    edges: np.ndarray      # (d - 1, 2) int32
    pairs: np.ndarray      # (d - 1, K, K) float32, the tree's 2-way marginals on the public bins
    marginals: np.ndarray  # (d, K) float32, every 1-way marginal on the public bins


def _expand(table: np.ndarray, maps: Sequence[np.ndarray]) -> np.ndarray:
    """A compressed marginal back on the original codes, each merged value's mass spread evenly."""
    out = np.asarray(table, np.float64)
    for axis, m in enumerate(maps):
        group = np.bincount(m)
        out = np.take(out, m, axis=axis) / np.expand_dims(group[m], tuple(i for i in range(out.ndim) if i != axis))
    return out / max(out.sum(), 1e-300)


def fit_released(config: MSTConfig, codes: np.ndarray, sizes: Sequence[int], key: jax.Array, *,
                 private: bool = True, phases: Sequence | None = None,
                 progress: Callable[[str], Any] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> tuple[Released, list[tuple[int, int]], int]:
    """The whole of MST on the private codes: one-way measurements, compression, selection,
    two-way measurements and the final estimate. Returns the released tree marginals (on the
    original public bins) and the selected edges. ``private=False``: exact counts and the maximum
    spanning tree. ``phases``: the accounted phases the noise and selection budgets are read from
    (a fit's calibrated plan; default :func:`privacy_phases` of ``config`` on these columns).
    ``progress``: a fit's ``hooks.progress``; each phase's bar moves as it runs (the selections
    one by one). ``should_stop``: a time budget's stop test of the final estimate (post-processing),
    which then runs in chunks of :data:`ESTIMATE_CHUNK` warm-started iterations, reported under
    "estimate", and may end after any chunk; None: one call of ``estimation_iters``. Also returns
    the iterations the final estimate ran."""
    d = len(sizes)
    k1, k_sel, k2 = jax.random.split(key, 3)
    # The noise scales come from the accounted phases themselves (noise multiplier x sensitivity).
    phases = {p.name: p for p in (privacy_phases(config, d) if phases is None else phases)}
    std1 = phases["one_way"].noise_std if private else None
    one = sm.measure(codes, sizes, [(j,) for j in range(d)], std1, k1)
    sm.tick(progress, "one_way", 1, 1)
    maps = compress(one, 3.0 * std1 if private and config.compress else None)
    small = [int(m.max()) + 1 for m in maps]
    ccodes = np.stack([maps[j][codes[:, j]] for j in range(d)], axis=1)
    log1 = [(y, std1 or 1.0) for y in one]
    edges: list[tuple[int, int]] = []
    log2: list = []
    if d > 1:
        model1 = estimate(sizes, maps, log1, [], config.selection_iters)
        ones = [np.asarray(model1.project((str(j),)).datavector()) for j in range(d)]
        scores = pair_scores(ccodes, small, ones, float(model1.total))
        selected = None if progress is None else progress("selection")
        edges = select_tree(scores, phases["selection"].epsilon if private else None, k_sel, selected)
        std2 = phases["two_way"].noise_std if private else None
        log2 = [(e, y, std2 or 1.0) for e, y in zip(edges, sm.measure(ccodes, small, edges, std2, k2))]
        sm.tick(progress, "two_way", 1, 1)
    iters = config.estimation_iters
    if should_stop is None:
        model, ran = estimate(sizes, maps, log1, log2, iters), iters
    else:
        done = [0]

        def run_chunk(model, start, n):
            done[0] = start + n
            return estimate(sizes, maps, log1, log2, n, warm_start=model)

        model = dpsgd.run_chunks(run_chunk, None, iters, ESTIMATE_CHUNK, should_stop=should_stop,
                                 after_chunk=lambda _, n: sm.tick(progress, "estimate", n, iters))
        ran = done[0]
    big = max(sizes)
    pairs = np.zeros((d - 1, big, big), np.float32)
    for i, (a, b) in enumerate(edges):
        t = np.asarray(model.project((str(a), str(b))).datavector(flatten=False))
        pairs[i, :sizes[a], :sizes[b]] = _expand(t, [maps[a], maps[b]])
    margs = np.zeros((d, big), np.float32)
    for j in range(d):
        margs[j, :sizes[j]] = _expand(np.asarray(model.project((str(j),)).datavector()), [maps[j]])
    return Released(np.asarray(edges, np.int32).reshape(-1, 2), pairs, margs), edges, ran


def sample_codes(released: Mapping[str, Any], sizes: Sequence[int], n: int, key: jax.Array) -> np.ndarray:
    """``(n, d)`` codes drawn from the released tree: column 0 from its marginal, then every column
    given its parent in breadth-first order (a zero row falls back to the column's marginal)."""
    d = len(sizes)
    edges = np.asarray(released["edges"]).reshape(-1, 2)
    pairs, margs = np.asarray(released["pairs"], np.float64), np.asarray(released["marginals"], np.float64)
    rng = dpsgd.host_rng(key)
    out = np.full((n, d), -1, np.int64)

    def draw(p: np.ndarray) -> np.ndarray:  # p: (n, k) nonnegative rows
        cdf = np.cumsum(p, axis=1)
        u = rng.random(n)[:, None] * cdf[:, -1:]
        return np.minimum((cdf <= u).sum(axis=1), p.shape[1] - 1)

    done = np.zeros(d, bool)
    for root in range(d):  # column 0 roots the tree; other roots only for a forest
        if done[root]:
            continue
        out[:, root], done[root] = draw(np.broadcast_to(margs[root, :sizes[root]], (n, sizes[root]))), True
        frontier = [root]
        while frontier:
            parent = frontier.pop(0)
            for i, (a, b) in enumerate(edges):
                if parent not in (a, b) or done[b if a == parent else a]:
                    continue
                table = pairs[i, :sizes[a], :sizes[b]]
                child, table = (b, table) if a == parent else (a, table.T)
                rows = table[out[:, parent]]
                rows[rows.sum(axis=1) <= 0] = margs[child, :sizes[child]]
                out[:, child], done[child] = draw(rows), True
                frontier.append(child)
    return out


@register
class MST(_marginal.MarginalSynthesizer):
    """MST with a scikit-learn-like interface (needs the optional ``mbi`` package to fit).

    Example:
        >>> model = MST().fit(train_df, data.adult_schema(), epsilon=1.0)  # doctest: +SKIP
        >>> model.sample(1000)                                             # doctest: +SKIP
    """

    METHOD = "mst"
    DESCRIPTION = ("Noisy 1-way marginals, a maximum spanning tree of 2-way marginals chosen with "
                   "the exponential mechanism, a graphical model (McKenna et al. 2021; needs mbi)")
    CONFIG = MSTConfig
    SMOKE = dict(bins=16, estimation_iters=200, selection_iters=100)
    PAPER_ACCOUNTING = PAPER_ACCOUNTING

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, len(discretizer(config, schema).sizes), private=private)

    def _train(self, plan, x, key, hooks) -> Release:
        config = plan.config
        t0 = time.perf_counter()
        disc = discretizer(config, plan.model_schema)
        codes = disc.codes_from_encoded(x)
        # A time budget (or its stand-in timing) may cut the final estimate, post-processing.
        released, edges, iters = fit_released(
            config, codes, disc.sizes, key, private=plan.private,
            phases=list(plan.phases) if plan.private else None, progress=hooks.progress,
            should_stop=None if hooks.stop_test is None else hooks.stop("estimate"))
        names = disc.schema.names
        notes = [
            _marginal.bins_note(disc),
            "Selected tree (from the exponential mechanism): "
            + (", ".join(f"{names[a]}-{names[b]}" for a, b in edges) or "none (one column)") + ".",
            "Post-processing, not accounted because it reads only released values: the domain "
            "compression of values with noisy one-way count below 3 noise standard deviations"
            f"{'' if config.compress else ' (disabled)'}, the mbi estimate "
            f"({iters} mirror-descent iterations"
            f"{'' if iters == config.estimation_iters else f' of the {config.estimation_iters} configured'}"
            ") and sampling.",
        ]
        return Release(arrays={"model": dict(released._asdict())},
                           steps={"one_way": 1, "selection": len(edges), "two_way": int(bool(edges))},
                           seconds={"mst": time.perf_counter() - t0}, notes=tuple(notes))

    def _sample_frame(self, n, key, mode):
        k_codes, k_values = jax.random.split(key)
        disc = discretizer(self.fitted_config, self.model_schema)
        codes = sample_codes(self.released["model"], disc.sizes, n, k_codes)
        return disc.decode(codes, k_values)

    def _release_shapes(self, config, schema, statistics):
        sizes = discretizer(config, schema).sizes
        d, big = len(sizes), max(sizes)
        return {"model": {"edges": jax.ShapeDtypeStruct((d - 1, 2), jnp.int32),
                          "pairs": jax.ShapeDtypeStruct((d - 1, big, big), jnp.float32),
                          "marginals": jax.ShapeDtypeStruct((d, big), jnp.float32)}}
