"""Distribution distances on public bins: 1-way total variation, mean 2-way and 3-way marginal
L1, the per-column Wasserstein distance and the Jensen-Shannon distance (``docs/metrics.md``).

Discrete columns are compared over the schema's categories. Continuous columns are compared
on public bins (:func:`~dpgen_jax.data.bin_edges`: ``bins`` equal-width or log-spaced bins
over the schema bounds) for the marginal distances, and on values scaled to [0, 1] by the
schema bounds for the Wasserstein distance. Nothing about the binning is read from the rows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import wasserstein_distance

from dpgen_jax import _validate as _v
from dpgen_jax.data import BinSpacing, Schema, bin_edges, bin_index
from dpgen_jax.data._check import show_values
from dpgen_jax.metrics._divergence import distribution_from_codes, jensen_shannon
from dpgen_jax.metrics._inputs import Table, prepare_frames, missing_as_value
from dpgen_jax.metrics._association import DIFF_COR_MAX_COLUMNS, diff_cor_from_tables
from dpgen_jax.metrics._registry import (BoardColumn, Headline, Metric, MetricInputs, Option, needs_three_columns,
                                         positive_count, register_metric)

#: Default number of public bins of a continuous column in the marginal distances.
MARGINAL_BINS = 20
#: Default cap on the number of column pairs of :func:`marginal_l1_2way` (all when fewer).
MAX_2WAY_PAIRS = 1000
#: Default cap on the number of feature triples of :func:`marginal_l1_3way` (all when fewer).
MAX_3WAY_TRIPLES = 1000
#: Joint histograms with at most this many cells are counted with ``bincount``; more, by sorting.
_DENSE_CELLS = 2_000_000

Spacing = BinSpacing | Mapping[str, BinSpacing]


def resolve_spacing(schema: Schema, spacing: Spacing) -> dict[str, BinSpacing]:
    """Spacing per continuous column: one value for all, or a mapping (absent columns: equal).

    Raises:
        ValueError: on an unknown spacing, or a mapping key that is not a continuous column.
    """
    continuous = [c.name for c in schema.columns if c.kind == "continuous"]
    if isinstance(spacing, str):
        if spacing not in ("equal", "log"):
            raise ValueError(f"spacing={spacing!r}; expected 'equal', 'log' or a {{column: spacing}} mapping.")
        return dict.fromkeys(continuous, spacing)
    if not isinstance(spacing, Mapping):
        raise TypeError(f"spacing must be 'equal', 'log' or a mapping, got {type(spacing).__name__}.")
    unknown = [k for k in spacing if k not in continuous]
    if unknown:
        raise ValueError(
            f"spacing names {show_values(unknown, 8)}, which are not continuous columns of the schema "
            f"(continuous: {show_values(continuous, 20)})."
        )
    bad = {k: v for k, v in spacing.items() if v not in ("equal", "log")}
    if bad:
        raise ValueError(f"spacing has unknown values {bad}; expected 'equal' or 'log'.")
    return {c: spacing.get(c, "equal") for c in continuous}


def discretise(table: Table, schema: Schema, bins: int, spacing: Mapping[str, BinSpacing]) -> tuple[np.ndarray, list[int]]:
    """Every column as small integers: category index, or public bin of a continuous value.

    Returns:
        ``(codes, sizes)``: ``(n, d)`` int64 and the number of values per column.
    """
    codes = np.empty(table.codes.shape, dtype=np.int64)
    sizes = []
    for j, col in enumerate(schema.columns):
        if col.kind == "continuous":
            codes[:, j] = bin_index(table.codes[:, j], bin_edges(col, bins, spacing[col.name]))
            sizes.append(bins)
        else:
            codes[:, j] = table.codes[:, j].astype(np.int64)
            sizes.append(len(col.categories))
    return codes, sizes


def _l1(ref_key: np.ndarray, syn_key: np.ndarray, n_cells: int) -> float:
    """L1 distance between the normalised histograms of two integer key arrays over ``n_cells``."""
    if n_cells <= _DENSE_CELLS:
        fr = np.bincount(ref_key, minlength=n_cells) / ref_key.size
        fs = np.bincount(syn_key, minlength=n_cells) / syn_key.size
        return float(np.abs(fr - fs).sum())
    cells, inv = np.unique(np.concatenate([ref_key, syn_key]), return_inverse=True)
    nr = ref_key.size
    fr = np.bincount(inv[:nr], minlength=cells.size) / nr
    fs = np.bincount(inv[nr:], minlength=cells.size) / syn_key.size
    return float(np.abs(fr - fs).sum())


def _mean_or_none(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


# -- 1-way total variation -------------------------------------------------------------------
def total_variation_1way_from_tables(
    reference: Table, synthetic: Table, schema: Schema, bins: int = MARGINAL_BINS, spacing: Spacing = "equal"
) -> dict[str, Any]:
    """:func:`total_variation_1way` on prepared tables."""
    spacing_by_col = resolve_spacing(schema, spacing)
    rc, sizes = discretise(reference, schema, bins, spacing_by_col)
    sc, _ = discretise(synthetic, schema, bins, spacing_by_col)
    per = {col.name: 0.5 * _l1(rc[:, j], sc[:, j], sizes[j]) for j, col in enumerate(schema.columns)}
    cont = [per[c.name] for c in schema.columns if c.kind == "continuous"]
    disc = [per[c.name] for c in schema.columns if c.kind != "continuous"]
    return {
        "per_column": per,
        "mean": float(np.mean(list(per.values()))),
        "mean_continuous": _mean_or_none(cont),
        "mean_discrete": _mean_or_none(disc),
        "bins": bins,
        "spacing": spacing_by_col,
    }


@missing_as_value
def total_variation_1way(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    *,
    bins: int = MARGINAL_BINS,
    spacing: Spacing = "equal",
) -> dict[str, Any]:
    """Total variation distance between the real and synthetic 1-way marginal of every column.

    ``TV(p, q) = 0.5 * sum_i |p_i - q_i|``, in [0, 1]: 0 for identical marginals, 1 for disjoint
    ones. Binary and categorical columns use their schema categories; a continuous column uses
    ``bins`` public bins over its schema bounds (``spacing="equal"``: equal widths, the
    default; ``"log"``: widths growing geometrically from the lower bound, for heavy tails such
    as capital-gain; or a ``{column: spacing}`` mapping, other columns equal).

    Args:
        real: The real reference rows (``evaluate`` uses every real row, train + test).
        synthetic: The synthetic rows.
        schema: The schema of both frames.
        bins: Public bins per continuous column (default 20).
        spacing: ``"equal"``, ``"log"`` or a ``{continuous column: spacing}`` mapping.

    Returns:
        ``{"per_column": {column: TV}, "mean": over all columns, "mean_continuous": over the
        continuous columns (None without any), "mean_discrete": over binary and categorical
        columns (None without any), "bins", "spacing": {continuous column: spacing}}``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema, ``bins < 1`` or an
            unknown spacing or column.

    Example:
        >>> from dpgen_jax.data import binary_schema
        >>> a = pd.DataFrame({"x0": [0, 0, 1, 1]})
        >>> total_variation_1way(a, pd.DataFrame({"x0": [1, 1, 1, 1]}), binary_schema(1))["mean"]
        0.5
    """
    ref, syn = prepare_frames(schema, real=real, synthetic=synthetic)
    return total_variation_1way_from_tables(ref, syn, schema, _v.whole(minimum=1, bins=bins), spacing)


# -- k-way marginal L1 (k = 2, 3) ------------------------------------------------------------
#: What a k-way marginal is called in results, arguments and messages.
_SUBSETS = {2: "pairs", 3: "triples"}


def choose_subsets(d: int, k: int, max_subsets: int, seed: int) -> tuple[list[tuple[int, ...]], bool]:
    """All ``k``-column subsets in lexicographic order when there are at most ``max_subsets``;
    else ``max_subsets`` distinct subsets drawn by ``numpy.random.default_rng(seed)``, sorted.

    Returns:
        ``(subsets, all_subsets)``: each subset a tuple of ascending column indices.
    """
    if math.comb(d, k) <= max_subsets:
        return list(itertools.combinations(range(d), k)), True
    rng = np.random.default_rng(seed)
    chosen: set[tuple[int, ...]] = set()
    while len(chosen) < max_subsets:
        chosen.add(tuple(int(i) for i in np.sort(rng.choice(d, size=k, replace=False))))
    return sorted(chosen), False


def resolve_marginals(schema: Schema, given: Any, k: int, arg: str | None = None) -> list[tuple[int, ...]]:
    """Column indices of given ``k``-way marginals: a non-empty sequence of ``k``-tuples of column
    names (``pairs=`` for k = 2, ``triples=`` for k = 3), each of distinct columns, no marginal
    twice (in any column order). The tuples keep their order and their column order; ``arg``
    names the argument in messages (default ``"pairs"`` or ``"triples"``).

    Raises:
        TypeError: if ``given`` or one of its items is not a sequence (a string is not one).
        ValueError: on an empty sequence, a tuple of the wrong length, a name that is not a column
            of the schema (named in the message), a repeated column or a repeated marginal.
    """
    arg = arg or _SUBSETS[k]
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise TypeError(f"{arg} must be a sequence of {k}-tuples of column names, got {type(given).__name__}.")
    if len(given) == 0:
        raise ValueError(f"{arg} is empty; expected at least one tuple of {k} column names (or None).")
    index = {name: j for j, name in enumerate(schema.names)}
    out: list[tuple[int, ...]] = []
    seen: dict[frozenset[int], int] = {}
    for i, item in enumerate(given):
        if isinstance(item, (str, bytes)) or not isinstance(item, Sequence):
            raise TypeError(f"{arg}[{i}]={item!r}; expected a tuple of {k} column names.")
        if len(item) != k:
            raise ValueError(f"{arg}[{i}]={tuple(item)!r} has {len(item)} column(s); expected {k} column names.")
        unknown = [c for c in item if not isinstance(c, str) or c not in index]
        if unknown:
            raise ValueError(
                f"{arg}[{i}] names {show_values(unknown, k)}, which the schema does not have; expected "
                f"column names ({show_values(schema.names, 20)})."
            )
        cols = tuple(index[c] for c in item)
        if len(set(cols)) != k:
            raise ValueError(f"{arg}[{i}]={tuple(item)!r} repeats a column; expected {k} distinct columns.")
        key = frozenset(cols)
        if key in seen:
            raise ValueError(
                f"{arg}[{i}]={tuple(item)!r} is the marginal of {arg}[{seen[key]}] again; expected each once."
            )
        seen[key] = i
        out.append(cols)
    return out


def _marginal_l1_from_tables(
    reference: Table,
    synthetic: Table,
    schema: Schema,
    k: int,
    *,
    bins: int,
    spacing: Spacing,
    max_subsets: int,
    seed: int,
    given: Sequence[Sequence[str]] | None,
) -> dict[str, Any]:
    """The mean ``k``-way marginal L1 behind :func:`marginal_l1_2way` and :func:`marginal_l1_3way`."""
    word = _SUBSETS[k]
    d = len(schema)
    if d < k:
        raise ValueError(f"a {k}-way marginal needs at least {k} columns; the schema has {d}.")
    if given is None:
        subsets, all_subsets = choose_subsets(d, k, max_subsets, seed)
    else:
        subsets = resolve_marginals(schema, given, k)
        all_subsets = len(subsets) == math.comb(d, k)
    spacing_by_col = resolve_spacing(schema, spacing)
    rc, sizes = discretise(reference, schema, bins, spacing_by_col)
    sc, _ = discretise(synthetic, schema, bins, spacing_by_col)
    names = schema.names
    scores = np.empty(len(subsets))
    for t, cols in enumerate(subsets):
        ref_key, syn_key, n_cells = rc[:, cols[0]], sc[:, cols[0]], sizes[cols[0]]
        for j in cols[1:]:  # mixed-radix cell index, first column most significant
            ref_key = ref_key * sizes[j] + rc[:, j]
            syn_key = syn_key * sizes[j] + sc[:, j]
            n_cells *= sizes[j]
        scores[t] = _l1(ref_key, syn_key, n_cells)
    worst = np.argsort(-scores, kind="stable")[:5]
    out = {
        "mean": float(scores.mean()),
        "std": float(scores.std()),
        "min": float(scores.min()),
        "max": float(scores.max()),
        f"n_{word}": len(subsets),
        f"all_{word}": all_subsets,
        "seed": None if all_subsets or given is not None else seed,
        "bins": bins,
        "spacing": spacing_by_col,
        "worst": [{"features": [names[i] for i in subsets[w]], "l1": float(scores[w])} for w in worst],
    }
    if given is not None:
        out["given"] = [{"features": [names[i] for i in cols], "l1": float(s)} for cols, s in zip(subsets, scores)]
    return out


def _marginal_l1(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    k: int,
    *,
    bins: int,
    spacing: Spacing,
    max_subsets: int,
    seed: int,
    given: Sequence[Sequence[str]] | None,
) -> dict[str, Any]:
    """Checks the frames and options of the public k-way functions, then computes."""
    ref, syn = prepare_frames(schema, real=real, synthetic=synthetic)
    return _marginal_l1_from_tables(
        ref,
        syn,
        schema,
        k,
        bins=_v.whole(minimum=1, bins=bins),
        spacing=spacing,
        max_subsets=_v.whole(minimum=1, **{f"max_{_SUBSETS[k]}": max_subsets}),
        seed=_v.whole(seed=seed),
        given=given,
    )


def marginal_l1_2way_from_tables(
    reference: Table,
    synthetic: Table,
    schema: Schema,
    *,
    bins: int = MARGINAL_BINS,
    spacing: Spacing = "equal",
    max_pairs: int = MAX_2WAY_PAIRS,
    seed: int = 0,
    pairs: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """:func:`marginal_l1_2way` on prepared tables."""
    return _marginal_l1_from_tables(reference, synthetic, schema, 2, bins=bins, spacing=spacing,
                                    max_subsets=max_pairs, seed=seed, given=pairs)


def marginal_l1_3way_from_tables(
    reference: Table,
    synthetic: Table,
    schema: Schema,
    *,
    bins: int = MARGINAL_BINS,
    spacing: Spacing = "equal",
    max_triples: int = MAX_3WAY_TRIPLES,
    seed: int = 0,
    triples: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """:func:`marginal_l1_3way` on prepared tables."""
    return _marginal_l1_from_tables(reference, synthetic, schema, 3, bins=bins, spacing=spacing,
                                    max_subsets=max_triples, seed=seed, given=triples)


@missing_as_value
def marginal_l1_2way(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    *,
    bins: int = MARGINAL_BINS,
    spacing: Spacing = "equal",
    max_pairs: int = MAX_2WAY_PAIRS,
    seed: int = 0,
    pairs: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Mean L1 distance between real and synthetic 2-way marginals on public bins.

    For a pair of distinct columns, the score is ``sum_cells |p_cell - q_cell|`` over the joint
    histogram of the two columns (discrete columns by category, continuous ones by the public
    bins of :func:`total_variation_1way`): 0 for identical marginals, 2 for disjoint ones. The
    mean runs over every pair of columns when there are at most ``max_pairs`` (78 for UCI
    Adult's 13 columns), else over ``max_pairs`` distinct pairs drawn with ``seed``, or over
    the given ``pairs``. It sees dependence between two columns that the 1-way total variation
    misses; :func:`marginal_l1_3way` is the same distance one degree higher.

    Args:
        real: The real reference rows.
        synthetic: The synthetic rows.
        schema: The schema of both frames (at least 2 columns).
        bins: Public bins per continuous column (default 20).
        spacing: ``"equal"``, ``"log"`` or a ``{continuous column: spacing}`` mapping.
        max_pairs: Cap on the number of pairs (default 1,000).
        seed: Seed of the pair draw when the cap applies.
        pairs: The pairs to score instead, as tuples of two column names, e.g.
            ``[("age", "salary"), ("sex", "relationship")]`` (``max_pairs`` and ``seed`` are then
            unused). None (the default): the choice above.

    Returns:
        ``{"mean", "std", "min", "max", "n_pairs", "all_pairs" (every pair of columns scored),
        "seed" (None when every pair is used or pairs are given), "bins", "spacing", "worst":
        the five highest pairs as [{"features": [a, b], "l1": score}]}``; with ``pairs`` also
        ``"given"``: every given pair, in order, as ``{"features", "l1"}``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema, fewer than 2 columns,
            invalid options, or given pairs that are not 2 distinct column names of the schema
            (the message names the unknown column).

    Example:
        >>> from dpgen_jax.data import binary_schema
        >>> a = pd.DataFrame({"x0": [0, 1], "x1": [0, 1]})
        >>> marginal_l1_2way(a, pd.DataFrame({"x0": [0, 1], "x1": [1, 0]}), binary_schema(2))["mean"]
        2.0
    """
    return _marginal_l1(real, synthetic, schema, 2, bins=bins, spacing=spacing, max_subsets=max_pairs,
                        seed=seed, given=pairs)


@missing_as_value
def marginal_l1_3way(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    *,
    bins: int = MARGINAL_BINS,
    spacing: Spacing = "equal",
    max_triples: int = MAX_3WAY_TRIPLES,
    seed: int = 0,
    triples: Sequence[Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Mean L1 distance between real and synthetic 3-way marginals on public bins.

    For a triple of distinct columns, the score is ``sum_cells |p_cell - q_cell|`` over the
    joint histogram of the three columns (discrete columns by category, continuous ones by the
    public bins of :func:`total_variation_1way`), i.e. twice the total variation: 0 for
    identical marginals, 2 for disjoint ones. The mean runs over every triple of columns when
    there are at most ``max_triples`` (286 for UCI Adult's 13 columns), else over
    ``max_triples`` distinct triples drawn with ``seed``, or over the given ``triples``.

    This is the workload error of marginal-based synthesizers (McKenna, Miklau and Sheldon
    2021, "Winning the NIST Contest: A scalable and general approach to differentially private
    synthetic data"). It differs from :func:`three_way_marginal`, the NIST challenge score of
    the DP-auto-GAN paper, which bins every column into 100 bins between the *real* minimum and
    maximum and averages over random triples drawn with replacement.

    Args:
        real: The real reference rows.
        synthetic: The synthetic rows.
        schema: The schema of both frames (at least 3 columns).
        bins: Public bins per continuous column (default 20).
        spacing: ``"equal"``, ``"log"`` or a ``{continuous column: spacing}`` mapping.
        max_triples: Cap on the number of triples (default 1,000).
        seed: Seed of the triple draw when the cap applies.
        triples: The triples to score instead, as tuples of three column names (``max_triples``
            and ``seed`` are then unused). None (the default): the choice above.

    Returns:
        ``{"mean", "std", "min", "max", "n_triples", "all_triples", "seed" (None when all
        triples are used or triples are given), "bins", "spacing", "worst": the five highest
        triples as [{"features": [a, b, c], "l1": score}]}``; with ``triples`` also ``"given"``:
        every given triple, in order, as ``{"features", "l1"}``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema, fewer than 3 columns,
            invalid options, or given triples that are not 3 distinct column names of the schema
            (the message names the unknown column).
    """
    return _marginal_l1(real, synthetic, schema, 3, bins=bins, spacing=spacing, max_subsets=max_triples,
                        seed=seed, given=triples)


# -- Wasserstein and Jensen-Shannon distance (the DP-SACTGAN paper's similarity metrics) -------
def wasserstein_mean_from_tables(reference: Table, synthetic: Table, schema: Schema) -> dict[str, Any]:
    """:func:`wasserstein_mean` on prepared tables."""
    per = {}
    for j, col in enumerate(schema.columns):
        if col.kind == "continuous":
            span = col.upper - col.lower
            per[col.name] = float(
                wasserstein_distance(
                    (reference.codes[:, j] - col.lower) / span, (synthetic.codes[:, j] - col.lower) / span
                )
            )
    return {"per_column": per, "mean": _mean_or_none(list(per.values()))}


@missing_as_value
def wasserstein_mean(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> dict[str, Any]:
    """1-Wasserstein distance per continuous column on values scaled by the public bounds, and its mean.

    Each value is mapped to ``(v - lower) / (upper - lower)`` with the schema bounds, and the
    distance between the two empirical distributions is ``scipy.stats.wasserstein_distance``
    (the area between the two CDFs), in [0, 1]. The DP-SACTGAN paper (Li and Wang 2023, "A
    self-attention-based differentially private tabular GAN with high data utility") reports its
    mean over the continuous columns as WD, following the CTAB-GAN+ evaluation code, which
    scales with a min-max scaler fitted on the real rows; here the public bounds replace the
    fitted range.

    Returns:
        ``{"per_column": {continuous column: distance}, "mean": their mean (None without
        continuous columns)}``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema.
    """
    return wasserstein_mean_from_tables(*prepare_frames(schema, real=real, synthetic=synthetic), schema)


def js_distance_mean_from_tables(reference: Table, synthetic: Table, schema: Schema) -> dict[str, Any]:
    """:func:`js_distance_mean` on prepared tables."""
    per = {}
    for j, col in enumerate(schema.columns):
        if col.kind != "continuous":
            k = len(col.categories)
            p = distribution_from_codes(reference.codes[:, j], k)
            q = distribution_from_codes(synthetic.codes[:, j], k)
            per[col.name] = math.sqrt(max(jensen_shannon(p, q, support="union"), 0.0) / math.log(2.0))
    return {"per_column": per, "mean": _mean_or_none(list(per.values()))}


@missing_as_value
def js_distance_mean(real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema) -> dict[str, Any]:
    """Jensen-Shannon *distance* (base 2) per discrete column, and its mean.

    The distance is the square root of the textbook Jensen-Shannon divergence in bits over all
    of the schema's categories (absent categories count as 0), as
    ``scipy.spatial.distance.jensenshannon(p, q, base=2)`` computes it: in [0, 1], 1 for
    disjoint supports. This is the JSD of the DP-SACTGAN paper (Li and Wang 2023), averaged over
    every binary and categorical column, label included. It is not :func:`jensen_shannon` (the
    DP-auto-GAN paper's divergence in nats over the real categories, summed over eight
    features as ``jsd.total``).

    Returns:
        ``{"per_column": {discrete column: distance}, "mean": their mean (None without discrete
        columns)}``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema.
    """
    return js_distance_mean_from_tables(*prepare_frames(schema, real=real, synthetic=synthetic), schema)


# ----------------------------------------------------------------------------- registered in evaluate


_BINS = (Option("marginal_bins", MARGINAL_BINS, positive_count),  # the options of both marginal L1 metrics
         Option("marginal_spacing", "equal", lambda name, v, schema: (resolve_spacing(schema, v), v)[1]))
_SUBSETS_GIVEN = {k: Option(f"marginal_{_SUBSETS[k]}", None, lambda name, v, schema, k=k: None if v is None else
                            (resolve_marginals(schema, v, k, name), tuple(map(tuple, v)))[1]) for k in (2, 3)}


def _tv_and_l1_3way(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    o = inputs.options["tv_1way_marginal_l1_3way"]
    tv = total_variation_1way_from_tables(inputs.reference, inputs.synthetic, inputs.schema,
                                          o["marginal_bins"], o["marginal_spacing"])
    for key in ("mean_continuous", "mean_discrete"):
        if tv[key] is None:
            nulls[f"tv_1way.{key}"] = f"the schema has no {key.split('_')[1]} column"
    out = {"tv_1way": tv}
    reason = needs_three_columns(inputs)
    if reason is None:
        out["marginal_l1_3way"] = marginal_l1_3way_from_tables(
            inputs.reference, inputs.synthetic, inputs.schema, bins=o["marginal_bins"], spacing=o["marginal_spacing"],
            max_triples=o["max_3way_triples"], seed=inputs.seed, triples=o["marginal_triples"])
    else:
        out["marginal_l1_3way"] = None
        nulls["marginal_l1_3way"] = reason
    return out


def _l1_2way(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    o = inputs.options["marginal_l1_2way"]
    return {"marginal_l1_2way": marginal_l1_2way_from_tables(
        inputs.reference, inputs.synthetic, inputs.schema, bins=o["marginal_bins"], spacing=o["marginal_spacing"],
        max_pairs=o["max_2way_pairs"], seed=inputs.seed, pairs=o["marginal_pairs"])}


def _similarity(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    ref, syn, schema = inputs.reference, inputs.synthetic, inputs.schema
    out: dict[str, Any] = {"wasserstein_mean": wasserstein_mean_from_tables(ref, syn, schema)}
    if out["wasserstein_mean"]["mean"] is None:
        nulls["wasserstein_mean.mean"] = "the schema has no continuous column"
    out["js_distance_mean"] = js_distance_mean_from_tables(ref, syn, schema)
    if out["js_distance_mean"]["mean"] is None:
        nulls["js_distance_mean.mean"] = "the schema has no binary or categorical column"
    if len(schema) <= DIFF_COR_MAX_COLUMNS:
        out["diff_cor"] = diff_cor_from_tables(ref, syn, schema)
    else:
        out["diff_cor"] = None
        nulls["diff_cor"] = (
            f"skipped: the schema has {len(schema)} columns (more than {DIFF_COR_MAX_COLUMNS}; the cost "
            "grows with the number of column pairs); call metrics.diff_cor directly")
    return out


register_metric(Metric(
    "tv_1way_marginal_l1_3way", ("tv_1way", "marginal_l1_3way"), _tv_and_l1_3way,
    headlines=(Headline("1-way TV, mean over all columns", "tv_1way.mean"),
               Headline("1-way TV, mean over continuous columns", "tv_1way.mean_continuous", optional=True),
               Headline("3-way marginal L1 on public bins, mean of {t} triples (0 best, 2 worst)",
                        "marginal_l1_3way.mean")),
    board=(BoardColumn("tv_mean", "tv_1way.mean", "TV mean", False),
           BoardColumn("tv_continuous", "tv_1way.mean_continuous", "TV cont.", False),
           BoardColumn("l1_3way", "marginal_l1_3way.mean", "3-way L1", False)), rank=50,
    options=(*_BINS, Option("max_3way_triples", MAX_3WAY_TRIPLES, positive_count), _SUBSETS_GIVEN[3]),
    title_fields=(("t", lambda result: (result.get("marginal_l1_3way") or {}).get("n_triples")),)))


register_metric(Metric(
    "marginal_l1_2way", ("marginal_l1_2way",), _l1_2way,
    applies=lambda i: None if len(i.schema) >= 2 else "the schema has 1 column; a 2-way marginal needs 2",
    headlines=(Headline("2-way marginal L1 on public bins, mean of {p} pairs (0 best, 2 worst)",
                        "marginal_l1_2way.mean"),), rank=60,
    options=(*_BINS, Option("max_2way_pairs", MAX_2WAY_PAIRS, positive_count), _SUBSETS_GIVEN[2]),
    title_fields=(("p", lambda result: (result.get("marginal_l1_2way") or {}).get("n_pairs")),)))


register_metric(Metric(
    "wasserstein_js_distance_diff_cor", ("wasserstein_mean", "js_distance_mean", "diff_cor"), _similarity,
    headlines=(Headline("Wasserstein distance, mean over continuous columns (scaled)", "wasserstein_mean.mean"),
               Headline("JS distance (base 2), mean over discrete columns", "js_distance_mean.mean"),
               Headline("Diff-Cor (Frobenius distance of association matrices)", "diff_cor.value")), rank=80))
