"""GEM's sampler: the released one-way histograms as probabilities, the measured marginals' graph
and its triangulation, and the rows made to follow it (``graphical_sampling``; post-processing).
See ``docs/gem.md``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from dpgen_jax.synthesizers import _one_way
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers import independent

Clique = sm.Clique


def measured_graph(cliques: Sequence[Clique], d: int) -> np.ndarray:
    """``(d, d)`` booleans: True where two columns are joined by a measured marginal, and on the
    diagonal for every column of a measured marginal (a one-way one too). Public: the selections
    are released."""
    graph = np.zeros((d, d), bool)
    for c in cliques:
        idx = np.asarray(c, np.int64)
        graph[np.ix_(idx, idx)] = True
    return graph


class Elimination(NamedTuple):
    """A triangulation of the measured marginals' graph by greedy elimination (fewest fill-in
    edges first, then fewest neighbours, then the lowest column).

    Attributes:
        order: the columns in elimination order (a column of no measured marginal first).
        neighbours: per column, its neighbours when it is eliminated (eliminated after it): the
            columns it is conditioned on; ``{column} + neighbours`` are the triangulation's cliques,
            and every measured marginal lies in one of them.
        parent: per column, the first-eliminated of its neighbours (-1: none, a root): the
            elimination tree.
    """

    order: tuple[int, ...]
    neighbours: tuple[tuple[int, ...], ...]
    parent: tuple[int, ...]


def eliminate(graph: np.ndarray) -> Elimination:
    """The greedy triangulation of ``graph`` (``(d, d)`` booleans, :func:`measured_graph`; the
    diagonal is not read)."""
    d = graph.shape[0]
    adj = [set(np.flatnonzero(graph[v]).tolist()) - {v} for v in range(d)]
    order = [v for v in range(d) if not adj[v]]  # nothing to condition on, nothing fills in
    alive = {v for v in range(d) if adj[v]}
    neighbours: list[tuple[int, ...]] = [()] * d

    def fill(v: int) -> int:
        nb = sorted(adj[v])
        return sum(1 for i, a in enumerate(nb) for b in nb[i + 1:] if b not in adj[a])

    while alive:
        v = min(alive, key=lambda u: (fill(u), len(adj[u]), u))
        nb = adj[v]
        neighbours[v] = tuple(sorted(nb))
        for a in nb:
            adj[a] |= nb - {a}
            adj[a].discard(v)
        alive.discard(v)
        order.append(v)
    position = {v: i for i, v in enumerate(order)}
    parent = tuple(min(nb, key=position.__getitem__) if nb else -1 for nb in neighbours)
    return Elimination(tuple(order), tuple(neighbours), parent)


def one_way_probabilities(one_way: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """``(d, S)`` the noisy one-way histograms as probabilities (``_one_way.probabilities``:
    projected onto the simplex; 0 on the padding bins). Post-processing of the one-way release."""
    probs = _one_way.probabilities({str(j): y for j, y in enumerate(one_way)})
    out = np.zeros((len(sizes), max(sizes)), np.float32)
    for j, p in enumerate(probs):
        out[j, :sizes[j]] = p
    return out


def decouple(codes: np.ndarray, graph: np.ndarray, rng: np.random.Generator,
             one_way: np.ndarray | None = None) -> np.ndarray:
    """The sampler's rows (``graphical_sampling``): ``codes`` (n, d) drawn by the generator, made
    to follow the measured marginals' graph (``graph``, :func:`measured_graph`): each column
    independent of the columns no measurement joins it to, given its neighbours in the
    triangulation (:func:`eliminate`), as in a graphical model fitted to the same measurements.
    In elimination order, each column together with the columns below it in the elimination tree
    is permuted across the rows that agree on its neighbours' values (one permutation per column;
    the neighbours are not moved). Every clique of the triangulation, so every measured marginal,
    keeps the rows' values exactly (the multiset of its tuples; a stratum holds rows that agree on
    the neighbours, and the columns below move together); dependence the generator put between
    columns that no clique joins is removed (with few rows per stratum, little is moved). A column
    no round measured (False on its row of ``graph``, diagonal included) is drawn from ``one_way``
    (the released histogram, ``(d, S)`` probabilities) when given, else permuted. Post-processing
    of the released selections.
    A graph of no edge and no ``one_way`` permutes every column on its own."""
    graph = np.asarray(graph, bool)
    tree = eliminate(graph)
    out = np.array(codes, copy=True)
    n, d = out.shape
    below: list[list[int]] = [[] for _ in range(d)]  # the columns under each, in elimination order
    for v in tree.order:
        if tree.parent[v] >= 0:
            below[tree.parent[v]] += [v] + below[v]
    for v in tree.order:
        nb = tree.neighbours[v]
        if one_way is not None and not graph[v].any():
            out[:, v] = independent.draw_codes(one_way[v], n, rng)
            continue
        block = [v] + below[v]
        keys = [out[:, a] for a in reversed(nb)]  # lexsort's last key is the primary one
        moved = np.lexsort([rng.random(n)] + keys)  # the rows by stratum, random within each
        kept = np.lexsort([np.arange(n)] + keys) if nb else np.arange(n)
        values = out[:, block]
        values[kept] = out[np.ix_(moved, block)]  # the block's columns only, not every column
        out[:, block] = values
    return out
