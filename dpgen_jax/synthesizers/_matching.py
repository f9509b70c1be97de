"""Rows matched to released one-way marginals with the least change (post-processing).

A generator may learn the relations between columns and still get each column's own distribution
wrong. Given released one-way marginals on a :class:`~dpgen_jax.data.Discretizer`'s
codes (DP outputs, e.g. ``independent``'s noisy histograms), :func:`match_one_way` moves the
fewest rows it must so that every column's codes have the released counts (rounded to the number
of rows), and keeps the rest of each row:

- a **discrete column** (binary or categorical, its gap a category of its own) is unordered: only
  surplus rows of over-represented categories move, and each under-represented category takes the
  surplus rows whose other columns it explains best relative to their own category (a naive-Bayes
  log-likelihood ratio counted on the same synthetic rows), so a moved row fits its new value;
  every other row keeps its category (no row changes that need not);
- a **continuous column** is ordered: its gap code is matched first as above (present against
  missing, newly present rows placed at random ranks), then the present rows are sorted by their
  value and handed the released bin counts in that order (quantile transport: the rows' order in
  the column is kept, so the joint order with the other columns is too). A row whose bin does not
  change keeps its value exactly; a row moved to another bin takes the value at its rank inside that
  bin (``Discretizer.decode_at``).

Matching reads the generator's rows and the released marginals only: it is post-processing, with
no privacy cost.

The stage around it, shared by every neural generator (``GeneratorConfig.matching_share``,
docs/matching.md), is :class:`OneWayStage`, which the base runs through its one seam
(``Synthesizer._stage``, a ``synthesizers._hooks.Stage``): at plan time it puts the one-way release
into the plan as the phase ``"one-way"`` (the shared mechanism of ``synthesizers._one_way``, d
histograms on ``matching_bins`` public bins, L2 sensitivity sqrt(d)) with its noise set so that
alone it spends ``matching_share * epsilon``, held fixed while the method calibrates its training
phases to the target; at train time it measures it on the private rows after the method's training
and stores the noisy counts in the release's statistics (saved with the model); at sample time it
matches every batch that ``sample`` draws to them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
import pandas as pd

from dpgen_jax import privacy
from dpgen_jax._random import host_rng
from dpgen_jax.data import Discretizer, Schema, atom_name, indicator_name
from dpgen_jax.synthesizers import _one_way
from dpgen_jax.synthesizers._config import GeneratorConfig
from dpgen_jax.synthesizers._hooks import Hooks, Stage
from dpgen_jax.synthesizers._naive_bayes import Likelihoods

__all__ = ["PHASE", "STATISTIC", "OneWayStage", "match_one_way", "rounded_counts", "share", "stage",
           "training_key"]

PHASE = "one-way"
STATISTIC = "one_way"  # the key of the released counts in Release.statistics


def rounded_counts(p: np.ndarray, n: int) -> np.ndarray:
    """``n`` split in proportion to the probabilities ``p`` (largest remainders; the counts sum
    to ``n`` exactly; negative entries count as 0)."""
    q = np.clip(np.asarray(p, dtype=np.float64), 0.0, None)
    total = q.sum()
    q = q / total if total > 0 else np.full(q.size, 1.0 / q.size)
    raw = q * n
    counts = np.floor(raw).astype(np.int64)
    short = n - int(counts.sum())
    if short:
        counts[np.argsort(-(raw - counts), kind="stable")[:short]] += 1
    return counts


def _reassign(codes: np.ndarray, target: np.ndarray, rng: np.random.Generator,
              likelihoods: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """Codes with the ``target`` counts, changing only surplus rows. Without ``likelihoods`` the
    rows that move and their new codes are drawn at random; with it (called once, when some row
    must move: ``(n, k)`` log-likelihoods of each row's other columns under each code, or their
    differences from code 0, ``synthesizers._naive_bayes``) each under-drawn code takes, among the
    surplus rows not moved yet, those whose other columns it explains best relative to their own
    code (the log-likelihood ratio), so a moved row fits its new value."""
    out = codes.copy()
    current = np.bincount(codes, minlength=target.size)
    surplus = np.clip(current - target, 0, None)
    deficit = np.clip(target - current, 0, None)
    if likelihoods is None:
        movers = [rng.permutation(np.flatnonzero(codes == k))[:surplus[k]] for k in np.flatnonzero(surplus)]
        pool = np.concatenate(movers) if movers else np.empty(0, dtype=np.int64)
        out[pool] = rng.permutation(np.repeat(np.arange(target.size), deficit))
        return out
    ties = rng.random((codes.size, target.size))  # ties at random (drawn whether or not a row moves)
    if not deficit.any():
        return out
    ll = likelihoods()
    ratio = ll - ll[np.arange(codes.size), codes][:, None]  # gain of each code over the row's own
    ratio += 1e-9 * ties
    left = surplus.copy()
    free = surplus[codes] > 0  # rows of over-drawn codes may move
    single = np.count_nonzero(surplus) == 1  # one code gives every row: its quota never binds
    for b in np.argsort(-deficit, kind="stable"):
        need = int(deficit[b])
        while need:
            cand = np.flatnonzero(free)
            if not cand.size:  # pragma: no cover - the surpluses sum to the deficits
                raise RuntimeError("no surplus row left to move")
            take = cand[np.argsort(-ratio[cand, b], kind="stable")[:need]]
            # no code gives up more rows than its surplus: keep the best rows within each code's quota
            ok = take if single else take[_within_quota(codes[take], left)]
            left -= np.bincount(codes[ok], minlength=left.size)
            out[ok] = b
            free[take] = False
            free &= left[codes] > 0
            need -= ok.size
    return out


def _within_quota(owners: np.ndarray, quota: np.ndarray) -> np.ndarray:
    """Whether each entry of ``owners`` (codes, in order of preference) is among the first
    ``quota[code]`` entries of its code."""
    order = np.argsort(owners, kind="stable")
    sorted_owners = owners[order]
    first = np.searchsorted(sorted_owners, sorted_owners, side="left")
    keep = np.empty(owners.size, dtype=bool)
    keep[order] = np.arange(owners.size) - first < quota[sorted_owners]
    return keep


def _transport(keys: np.ndarray, target: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, positions)`` of rows sorted by ``keys`` (ties at random) handed the ``target``
    counts in order; ``positions`` is each row's place inside its new bin, in (0, 1)."""
    n = keys.size
    order = np.lexsort((rng.random(n), keys))
    codes = np.empty(n, dtype=np.int64)
    positions = np.empty(n, dtype=np.float64)
    codes[order] = np.repeat(np.arange(target.size), target)
    starts = np.concatenate([[0], np.cumsum(target)[:-1]])
    rank = np.arange(n) - np.repeat(starts, target)
    positions[order] = (rank + 0.5) / np.repeat(np.maximum(target, 1), target)
    return codes, positions


def match_one_way(frame: pd.DataFrame, disc: Discretizer, probs: Sequence[np.ndarray],
                  rng: np.random.Generator) -> pd.DataFrame:
    """``frame`` (rows of ``disc.user_schema``) with each column matched to ``probs``.

    Args:
        frame: Synthetic rows of ``disc.user_schema``: the user's schema (gaps as NaN / ``pd.NA``)
            or the model schema (a continuous column's gap as its indicator, the value at the
            fill; a moved row's indicator is set with its code).
        disc: The public binning the marginals were released on.
        probs: Per coded column of ``disc`` (its ``schema`` order), the released probabilities of
            its codes (clipped at 0 and renormalised here).
        rng: Randomness of the ties and of the surplus rows chosen.

    Returns:
        A frame with the same columns, index and dtypes, whose codes have exactly the counts
        ``rounded_counts(probs[j], len(frame))``.

    Raises:
        ValueError: if ``probs`` does not give one vector of ``disc.sizes[j]`` entries per column.
    """
    sizes = disc.sizes
    if len(probs) != len(sizes) or any(np.asarray(p).shape != (k,) for p, k in zip(probs, sizes, strict=False)):
        raise ValueError(f"probs must hold one vector per coded column with sizes {sizes}, got shapes "
                         f"{[np.asarray(p).shape for p in probs]}.")
    n = len(frame)
    codes = disc.codes(frame)
    new = codes.copy()
    positions = np.full(codes.shape, 0.5)
    targets, classes, n_bins = [], [], []
    for j, col in enumerate(disc.schema.columns):  # what each column matches by likelihood, if anything
        targets.append(rounded_counts(probs[j], n))
        # a continuous column's codes after its bins (each atom's, then the gap's) are states like
        # categories, its bins one state
        n_bins.append(sizes[j] - len(disc.atom_codes.get(col.name, ())) - (col.name in disc.missing_codes)
                      if col.kind == "continuous" else 1)
        cls = np.maximum(np.arange(sizes[j]) - n_bins[j] + 1, 0)  # the class of each code
        moves = not np.array_equal(np.bincount(cls[codes[:, j]], minlength=cls[-1] + 1),
                                   np.bincount(cls, weights=targets[j], minlength=cls[-1] + 1))
        classes.append(cls if moves and (col.kind != "continuous" or n_bins[j] < sizes[j]) else None)
    context = Likelihoods(codes, sizes, classes) if len(sizes) > 1 else None
    for j, col in enumerate(disc.schema.columns):
        target = targets[j]
        likelihoods = None if context is None else functools.partial(context.log_likelihoods, j)
        if col.kind != "continuous":
            new[:, j] = _reassign(codes[:, j], target, rng, likelihoods)
            if context is not None:
                context.update(j, new[:, j])
            continue
        present = np.ones(n, dtype=bool)
        was_gap = np.zeros(n, dtype=bool)  # or at an atom: no rank among the present values
        if n_bins[j] < sizes[j]:
            state = np.maximum(codes[:, j] - n_bins[j] + 1, 0)
            was_gap = state > 0
            state = _reassign(state, np.concatenate([[target[:n_bins[j]].sum()], target[n_bins[j]:]]), rng,
                              likelihoods)
            new[state > 0, j] = n_bins[j] + state[state > 0] - 1
            present = state == 0
        values = pd.to_numeric(frame[col.name], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        keys = values[present]
        # rows made present (a gap holds NaN in the user's frame, the fill value in the model
        # frame; an atom's value would pile them next to it: none is a rank) take a random rank
        # among the present values
        unknown = np.isnan(keys) | was_gap[present]
        if unknown.any():
            known = keys[~unknown]
            keys[unknown] = (np.quantile(known, rng.random(int(unknown.sum()))) if known.size
                             else rng.random(int(unknown.sum())))
        c, pos = _transport(keys, target[:n_bins[j]], rng)
        new[present, j], positions[present, j] = c, pos
        if context is not None:
            context.update(j, new[:, j])
    out = disc.decode_at(new, positions)
    changed: dict[str, Any] = {}
    for j, col in enumerate(disc.schema.columns):  # a row whose code is unchanged keeps its value
        keep = new[:, j] == codes[:, j]
        if not keep.all():
            changed[col.name] = _merge(frame[col.name], out[col.name], keep)
            for flag in (indicator_name(col.name), atom_name(col.name)):  # the model frame's gap flag, state
                if col.kind == "continuous" and flag in frame.columns and flag not in disc.schema.names:
                    changed[flag] = _merge(frame[flag], out[flag], keep)
    if not changed:
        return frame.copy()
    return pd.DataFrame({name: changed.get(name, frame[name]) for name in frame.columns}, index=frame.index)


def _merge(old: pd.Series, new: pd.Series, keep: np.ndarray) -> np.ndarray | pd.Series:
    """``old`` where ``keep``, else ``new``, in ``old``'s dtype (an array for a numpy dtype, else
    a Series on ``old``'s index)."""
    if isinstance(old.dtype, np.dtype) and old.dtype != object and isinstance(new.dtype, np.dtype):
        return np.where(keep, old.to_numpy(), new.to_numpy()).astype(old.dtype, copy=False)
    merged = new.copy()
    merged.index = old.index
    merged[keep] = old[keep]
    return merged.astype(old.dtype)


# --------------------------------------------------------------------------- the stage of a plan


def share(config: Any) -> float:
    """The configuration's matching share (0 for a method without the stage)."""
    return float(getattr(config, "matching_share", 0.0) or 0.0)


def discretizer(config: Any, schema: Schema) -> Discretizer:
    """The public bins of the one-way release (``matching_bins`` per continuous column)."""
    return Discretizer(schema, config.matching_bins)


def training_key(config: Any, key: jax.Array) -> jax.Array:
    """The key the method's own training receives in a fit with ``config`` whose key is ``key``
    (``dpsgd.make_key(seed).key`` for ``fit(seed=...)``): the whole key, or its first half when
    the one-way stage takes the second (:meth:`Stage.keys` of :func:`stage`, the split ``fit``
    itself uses), so a test recomputing a fit with the functional API splits as ``fit`` does."""
    return stage(config).keys(key)[0]


def stage(config: Any) -> Stage:
    """The stage the base runs around a fit with ``config``: the one-way stage of a neural
    generator's configuration (a ``GeneratorConfig``), the empty :class:`Stage` of any other."""
    return OneWayStage(config) if isinstance(config, GeneratorConfig) else Stage()


@dataclasses.dataclass(frozen=True)
class OneWayStage(Stage):
    """The neural generators' one-way stage, as the base runs it (``Stage``): the release in the
    plan (:meth:`plan`), measured after training (:meth:`train`) and matched at sampling time
    (:meth:`sample`); ``matching_share=0`` leaves every step unchanged.

    Attributes:
        config: the resolved configuration (a ``GeneratorConfig``).
    """

    config: Any

    @property
    def releases_one_way(self) -> bool:
        return share(self.config) != 0.0

    def preset(self, values: dict[str, Any]) -> dict[str, Any]:
        """A paper's setting runs as published: without the stage unless the preset says so."""
        return {"matching_share": 0.0, **values}

    def plan(self, schema: Schema, phases: list, *, private: bool, epsilon: float | None, delta: float,
             accountant: str) -> tuple[list, tuple[str, ...]]:
        """``(phases with the one-way release, the names a calibration must hold fixed)``.

        The release's noise multiplier is set so that it alone spends ``share(config) * epsilon``
        under ``accountant``; the method then calibrates its own phases with it held fixed, so the
        composition meets ``epsilon``. Unchanged phases for a configuration without the stage.

        Raises:
            ValueError: the stage is on without a target epsilon (a preset fixes every noise).
        """
        s = share(self.config)
        if s == 0.0:
            return phases, ()
        if private and epsilon is None:
            raise ValueError(f"matching_share={s} needs a target epsilon to take its share of; a preset "
                             "fixes every noise multiplier. Set matching_share=0 with a preset, or fit "
                             "to epsilon=...")
        one = _one_way.phase(PHASE, len(discretizer(self.config, schema).sizes), private)
        if private:
            one = privacy.calibrate([one], s * float(epsilon), delta, accountant, max_noise_multiplier=1e7)[0]
        return [*phases, one], (PHASE,)

    def keys(self, key: jax.Array) -> tuple[jax.Array, jax.Array | None]:
        """``(the method's training key, the one-way release's key)``: the two halves of the fit's
        ``key`` when the stage is on (the release gets a key of its own), else ``(key, None)``."""
        if not share(self.config):
            return key, None
        k_train, k_one = jax.random.split(key)
        return k_train, k_one

    def train(self, plan: Any, frame: pd.DataFrame, key: jax.Array, hooks: Hooks,
              train: Callable[[jax.Array], Any]) -> Any:
        """The method's release (``train``, on the first half of ``key``) with the one-way release
        of ``frame`` (the private rows of the plan's model schema, the second half of ``key``)
        added: its noisy counts in the statistics, its step and a report note; the fit's progress
        is told of it."""
        key, k_one = self.keys(key)
        if k_one is None:  # the stage is off
            return train(key)
        fitted = train(key)
        disc = discretizer(plan.config, plan.model_schema)
        std = plan.phase(PHASE).noise_std if plan.private else None
        counts = _one_way.release_histograms(disc.codes(frame), disc.sizes, std, k_one)
        tick = hooks.progress(PHASE, "release")
        if tick is not None:
            tick(1, 1)
        note = ("Marginal matching: every column's one-way histogram (continuous columns on public bins, "
                f"{disc.describe()}; a gap as a code of its own) was released with Gaussian noise (phase "
                f"{PHASE!r}), and every batch of sampled rows is post-processed to match it (each column "
                "moved to the released marginal with the fewest changes, a continuous column by quantile "
                "transport that keeps the rows' order; docs/matching.md).")
        return dataclasses.replace(
            fitted, steps={**fitted.steps, PHASE: 1}, notes=(*fitted.notes, note),
            statistics={**fitted.statistics, STATISTIC: [np.asarray(counts[str(j)], np.int64).tolist()
                                                         for j in range(len(disc.sizes))]})

    def sample(self, schema: Schema, statistics: dict[str, Any], key: jax.Array,
               draw: Callable[[jax.Array], pd.DataFrame]) -> pd.DataFrame:
        """Rows drawn with the first half of ``key`` and matched (the second half) to the released
        one-way counts of ``statistics``; a release without them (the stage was off) as drawn."""
        counts = statistics.get(STATISTIC)
        if counts is None:
            return draw(key)
        key, k_match = jax.random.split(key)
        frame = draw(key)
        probs = _one_way.probabilities({str(j): c for j, c in enumerate(counts)})
        return match_one_way(frame, discretizer(self.config, schema), probs, host_rng(k_match))
