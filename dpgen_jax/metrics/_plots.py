"""Headless matplotlib figures of an ``evaluate`` result (object API only: no pyplot state)."""

from __future__ import annotations

import math
import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from dpgen_jax.metrics._marginals import PCAProjection
from dpgen_jax.metrics._published import PublishedResults

_REAL, _SYN = "tab:blue", "tab:orange"
_METRIC_LABEL = {
    "auroc": "AUROC",
    "f1_binary": "F1 (binary)",
    "f1_micro": "F1 (micro)",
    "r2": "R$^2$ (Lasso)",
}
#: Columns drawn on a log scale (as the DP-auto-GAN paper draws native-country).
_LOG_SCALE = ("native-country",)
#: Points per cloud drawn in the PCA scatter (a seeded subsample keeps the PNG small and fast).
PCA_MAX_POINTS = 5000


def _save(fig: Figure, path: pathlib.Path, tight: bool = True) -> pathlib.Path:
    # bbox_inches="tight" measures every text artist once more; large grids use fixed margins.
    fig.savefig(path, dpi=100, bbox_inches="tight" if tight else None)
    return path


def plot_dimension_wise(result: dict[str, Any], path: pathlib.Path) -> pathlib.Path | None:
    """Scatter of (real score, synthetic score) per feature with the y = x line, one panel per metric."""
    scores = result.get("dimension_wise_prediction") or {}
    by_metric: dict[str, list[tuple[str, float, float]]] = {}
    for name, s in scores.items():
        if s.get("real") is not None and s.get("synthetic") is not None:
            by_metric.setdefault(s["metric"], []).append((name, s["real"], s["synthetic"]))
    if not by_metric:
        return None
    fig = Figure(figsize=(5 * len(by_metric), 4.8))
    for i, (metric, pts) in enumerate(sorted(by_metric.items())):
        ax = fig.add_subplot(1, len(by_metric), i + 1)
        x = np.array([p[1] for p in pts])
        y = np.array([p[2] for p in pts])
        lo = min(0.0, float(x.min()), float(y.min()))
        hi = max(1.0, float(x.max()), float(y.max()))
        ax.plot([lo, hi], [lo, hi], color="grey", lw=1, ls="--", label="y = x")
        ax.scatter(x, y, s=18, color=_SYN, zorder=3)
        if len(pts) <= 40:
            for name, a, b in pts:
                ax.annotate(name, (a, b), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(f"real-trained {_METRIC_LABEL.get(metric, metric)}")
        ax.set_ylabel(f"synthetic-trained {_METRIC_LABEL.get(metric, metric)}")
        ax.set_title(f"Dimension-wise prediction ({len(pts)} features)")
        ax.legend(loc="upper left", fontsize=8)
    return _save(fig, path)


def plot_dimension_wise_probability(result: dict[str, Any], path: pathlib.Path) -> pathlib.Path | None:
    """Scatter of per-feature proportions of ones, real vs synthetic, with y = x."""
    probs = result.get("dimension_wise_probability")
    if not probs:
        return None
    x = np.array([v["real"] for v in probs.values()])
    y = np.array([v["synthetic"] for v in probs.values()])
    fig = Figure(figsize=(4.8, 4.8))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="y = x")
    ax.scatter(x, y, s=10, color=_SYN, zorder=3)
    ax.set_xlabel("real proportion of ones")
    ax.set_ylabel("synthetic proportion of ones")
    ax.set_title(f"Dimension-wise probability ({len(x)} features)")
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, path)


def plot_marginals(result: dict[str, Any], path: pathlib.Path, max_features: int = 36) -> pathlib.Path | None:
    """1-way marginals: grouped bars (discrete) or step histograms (continuous), real vs synthetic."""
    marginals = result.get("marginals") or {}
    names = list(marginals)[:max_features]
    if not names:
        return None
    ncols = min(4, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig = Figure(figsize=(4.2 * ncols, 3.2 * nrows))
    for i, name in enumerate(names):
        m = marginals[name]
        ax = fig.add_subplot(nrows, ncols, i + 1)
        real = np.array([np.nan if v is None else v for v in m["real"]], dtype=float)
        syn = np.array([np.nan if v is None else v for v in m["synthetic"]], dtype=float)
        if m["kind"] == "continuous":
            edges = np.array(m["bin_edges"], dtype=float)
            ax.stairs(real, edges, color=_REAL, label="real")
            ax.stairs(syn, edges, color=_SYN, label="synthetic")
        else:
            pos = np.arange(len(real))
            ax.bar(pos - 0.2, real, width=0.4, color=_REAL, label="real")
            ax.bar(pos + 0.2, syn, width=0.4, color=_SYN, label="synthetic")
            labels = [str(c) for c in m["categories"]]
            if len(labels) <= 16:
                ax.set_xticks(pos, labels, rotation=60, ha="right", fontsize=6)
            if name in _LOG_SCALE:
                ax.set_yscale("log")
        ax.set_title(f"{name} (TV {m['total_variation']:.3f})", fontsize=9)
        if i == 0:
            ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.08, top=0.95, hspace=0.75, wspace=0.25)
    return _save(fig, path, tight=False)


def plot_pca(projection: PCAProjection, path: pathlib.Path, seed: int = 0) -> pathlib.Path:
    """Real and synthetic rows on the real-fitted first two principal axes."""
    rng = np.random.default_rng(seed)

    def sub(a: np.ndarray) -> np.ndarray:
        return a if len(a) <= PCA_MAX_POINTS else a[rng.choice(len(a), PCA_MAX_POINTS, replace=False)]

    r, s = sub(projection.real), sub(projection.synthetic)
    evr = projection.explained_variance_ratio
    fig = Figure(figsize=(10, 4.6))
    for i, (pts, color, title) in enumerate(((r, _REAL, "real"), (s, _SYN, "synthetic"))):
        ax = fig.add_subplot(1, 2, i + 1)
        ax.scatter(pts[:, 0], pts[:, 1], s=3, alpha=0.3, color=color, rasterized=True)
        ax.set_title(f"2-way PCA: {title} ({len(pts)} points shown)")
        ax.set_xlabel(f"PC1 ({evr[0]:.1%} of real variance)")
        ax.set_ylabel(f"PC2 ({evr[1]:.1%})")
    lo = np.minimum(r.min(axis=0), s.min(axis=0))
    hi = np.maximum(r.max(axis=0), s.max(axis=0))
    for ax in fig.axes:
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
    return _save(fig, path)


def plot_diversity(
    result: dict[str, Any],
    path: pathlib.Path,
    published: Sequence[PublishedResults] = (),
) -> pathlib.Path | None:
    """Bars of JSD and mu-smoothed KL per discrete feature; published values as markers."""
    jsd, kl = result.get("jsd"), result.get("kl_mu")
    if not jsd or not kl:
        return None
    names = [n for n in jsd if n != "total"]
    fig = Figure(figsize=(max(6.0, 0.6 * len(names) + 2), 7))
    markers = "ov^sDP*"
    for i, (key, values, title) in enumerate(
        (("jsd", jsd, "JSD (nats)"), ("kl_mu", kl, "$D_{KL}^{\\mu}$ (nats)"))
    ):
        ax = fig.add_subplot(2, 1, i + 1)
        pos = np.arange(len(names))
        v = np.array([np.nan if values[n] is None else values[n] for n in names], dtype=float)
        ax.bar(pos, v, color=_SYN, label="this run")
        m = 0
        for record in published:
            for k, eps in enumerate(record.epsilons):
                pts = [(p, record.at(f"{key}.{n}")[k]) for p, n in zip(pos, names)]
                pts = [(p, q) for p, q in pts if q is not None]
                if pts:
                    ax.scatter(
                        [p for p, _ in pts],
                        [q for _, q in pts],
                        marker=markers[m % len(markers)],
                        color="k",
                        s=16,
                        zorder=3,
                        label=f"{record.method} ε={eps:g} (published)",
                    )
                    m += 1
        ax.set_xticks(pos, names, rotation=45, ha="right", fontsize=7)
        total = values.get("total")
        ax.set_title(
            f"{title}; total over {len(result.get('diversity_total_features') or [])} features = "
            + ("n/a" if total is None else f"{total:.3f}")
        )
        ax.legend(fontsize=7)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.94, hspace=0.6)
    return _save(fig, path, tight=False)
