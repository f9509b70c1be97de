"""GEM's sampler: the released one-way histograms as probabilities, the connected components of
the measured marginals' graph, and the rows' components made independent of each other
(``independent_components``; post-processing). See ``docs/gem.md``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dpgen_jax.synthesizers import _one_way
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers import independent

Clique = sm.Clique


def components(cliques: Sequence[Clique], d: int) -> np.ndarray:
    """``(d,)`` the connected component of each column in the graph whose edges join the columns
    of each clique (labels 0, 1, ... in order of each component's first column)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    edges = np.asarray([(c[0], a) for c in cliques for a in c[1:]], np.int64).reshape(-1, 2)
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(d, d))
    return connected_components(graph, directed=False)[1].astype(np.int32)


def one_way_probabilities(one_way: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """``(d, S)`` the noisy one-way histograms as probabilities (``_one_way.probabilities``:
    projected onto the simplex; 0 on the padding bins). Post-processing of the one-way release."""
    probs = _one_way.probabilities({str(j): y for j, y in enumerate(one_way)})
    out = np.zeros((len(sizes), max(sizes)), np.float32)
    for j, p in enumerate(probs):
        out[j, :sizes[j]] = p
    return out


def decouple(codes: np.ndarray, labels: np.ndarray, rng: np.random.Generator,
             one_way: np.ndarray | None = None) -> np.ndarray:
    """The sampler's rows: ``codes`` (n, d) drawn by the generator, with the components
    (``labels``, as :func:`components`) made independent of each other. A component of several
    columns keeps the generator's joint: its rows are permuted together (one permutation per
    component; the first is left in place). A column of its own is drawn from ``one_way`` (the
    released histogram, ``(d, S)`` probabilities) when given, else permuted. Nothing to do (one
    component of several columns): ``codes`` itself, no draw from ``rng``."""
    labels = np.asarray(labels)
    sizes = np.bincount(labels) if labels.size else np.zeros(0, np.int64)
    redraw_lone = one_way is not None and bool(np.any(sizes == 1))
    if sizes.size <= 1 and not redraw_lone:  # one component (or none): nothing to decouple
        return codes
    out = np.array(codes, copy=True)
    n = out.shape[0]
    for c, size in enumerate(sizes):
        cols = np.flatnonzero(labels == c)
        if size == 1 and one_way is not None:
            out[:, cols[0]] = independent.draw_codes(one_way[cols[0]], n, rng)
        elif c > 0:
            out[:, cols] = out[rng.permutation(n)[:, None], cols]
    return out
