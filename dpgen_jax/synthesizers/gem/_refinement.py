"""GEM's finer one-way release (``one_way_refine``): the finer binning, how its bins nest in the
model's, the finer histograms summed onto the model's bins, and a sampled value's finer bin drawn
inside its bin (post-processing). See ``docs/gem.md``, step 10."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from dpgen_jax.data._discrete import Discretizer
from dpgen_jax.synthesizers.gem._config import GEMConfig


def fine_discretizer(config: GEMConfig, schema) -> Discretizer | None:
    """The one-way release's finer binning (``one_way_refine`` times ``bins``, the same spacing,
    so its edges nest in :func:`discretizer`'s); None when ``one_way_refine`` is 1 or no column
    is continuous (nothing to refine)."""
    if config.one_way_refine == 1 or not any(c.kind == "continuous" for c in schema.columns):
        return None
    return Discretizer(schema, config.bins * config.one_way_refine, config.bin_spacing)


class Refinement(NamedTuple):
    """The finer one-way binning against the model's: ``sizes`` the finer bins per column,
    ``parents[j]`` the model's bin of each finer bin of column j (None: a discrete column, the
    same codes), ``fallback[j]`` the finer bin holding each model bin's first integer or
    midpoint (for a model bin no finer bin names, if rounding ever leaves one)."""

    sizes: tuple[int, ...]
    parents: tuple[np.ndarray | None, ...]
    fallback: tuple[np.ndarray | None, ...]


def refinement(coarse: Discretizer, fine: Discretizer) -> Refinement:
    """How ``fine``'s bins nest in ``coarse``'s (public: from the two binnings alone)."""
    up, down = fine.parents(coarse), coarse.parents(fine)
    names = coarse.schema.names
    return Refinement(tuple(fine.sizes), tuple(up.get(n) for n in names), tuple(down.get(n) for n in names))


def coarse_histograms(fine_hists: Sequence[np.ndarray], ref: Refinement,
                      sizes: Sequence[int]) -> list[np.ndarray]:
    """The finer (noisy) histograms summed onto the model's bins."""
    return [y if p is None else np.bincount(p, weights=y, minlength=sizes[j])
            for j, (y, p) in enumerate(zip(fine_hists, ref.parents, strict=True))]


def refine_codes(codes: np.ndarray, ref: Refinement, fine_probs: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """``codes`` (n, d) on the model's bins as codes on the finer bins: for a continuous column,
    each row's finer bin is drawn among the finer bins of its model bin with the released finer
    probabilities (uniformly among them where those are all 0). Post-processing."""
    out = np.array(codes, dtype=np.int64, copy=True)
    for j, parent in enumerate(ref.parents):
        if parent is None:
            continue
        w = np.asarray(fine_probs[j, :parent.size], np.float64)
        col = out[:, j].copy()
        for c in np.unique(col):
            rows = np.flatnonzero(col == c)
            kids = np.flatnonzero(parent == c)
            if kids.size == 0:
                kids = np.array([ref.fallback[j][c]])
            p = w[kids]
            p = np.full(kids.size, 1.0 / kids.size) if p.sum() <= 0 else p / p.sum()
            out[rows, j] = kids[rng.choice(kids.size, rows.size, p=p)]
    return out
