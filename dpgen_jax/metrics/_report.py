"""``write_report``: metrics.json, headless PNG plots and a markdown summary beside the papers."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence
from typing import Any

import pandas as pd

from dpgen_jax.data import Schema, TableEncoder
from dpgen_jax.metrics import _published as pub
from dpgen_jax.metrics._marginals import pca_projection_from_arrays
from dpgen_jax.metrics._plots import (
    plot_diversity,
    plot_dimension_wise,
    plot_dimension_wise_probability,
    plot_marginals,
    plot_pca,
)
from dpgen_jax.metrics._validate import check_same_columns, check_schema, prepare


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "null"
    if isinstance(v, float) and (abs(v) >= 1e-3 or v == 0):
        return f"{v:.{digits}f}"
    if isinstance(v, float):
        return f"{v:.2e}"
    return str(v)


def _is_adult(result: dict[str, Any]) -> bool:
    return set(result.get("meta", {}).get("columns", [])) == set(pub.ADULT_COLUMNS)


def _published_diversity() -> dict[float, dict[str, dict[str, float]]]:
    return {
        eps: {"jsd": dict(pub.JSD["value"][eps]), "kl_mu": dict(pub.KL_MU["value"][eps])}
        for eps in pub.DP_AUTO_GAN_EPSILONS
    }


def _as_frame(x: pd.DataFrame | Sequence[pd.DataFrame], name: str) -> pd.DataFrame:
    if isinstance(x, pd.DataFrame):
        return x
    if isinstance(x, (list, tuple)) and x and all(isinstance(f, pd.DataFrame) for f in x):
        check_same_columns({f"{name}[{i}]": f for i, f in enumerate(x)})
        return pd.concat(list(x), ignore_index=True)
    raise TypeError(
        f"{name} must be a DataFrame or a non-empty sequence of DataFrames, got {type(x).__name__}."
    )


def _row(*cells: Any) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _header(meta: dict[str, Any], adult: bool, epsilon: float | None) -> list[str]:
    n = meta.get("n_rows", {})
    lines = [
        "# Evaluation report",
        "",
        f"Rows: real train {n.get('real_train')}, real test {n.get('real_test')}, "
        f"synthetic {n.get('synthetic')}; reference for diversity and marginals: "
        f"{meta.get('reference', 'n/a')} ({n.get('reference')} rows). "
        f"Label: {meta.get('label')}. Seed: {meta.get('seed')}."
        + (f" Synthetic data made at ε = {epsilon}." if epsilon is not None else ""),
        "",
    ]
    if adult:
        eps = " / ".join(map(str, pub.DP_AUTO_GAN_EPSILONS))
        lines += [f"Published columns: DP-auto-GAN on Adult at ε = {eps} (δ = 1e-5).", ""]
    return lines


def _headline(result: dict[str, Any], adult: bool) -> list[str]:
    eps_cols = pub.DP_AUTO_GAN_EPSILONS
    lines = ["## Headline", "", _row("metric", "real data", "synthetic", "published"), "|---|---|---|---|"]
    la = result.get("label_accuracy")
    if la:
        protocol = la.get("protocol", {})
        full = protocol.get("size") is None and protocol.get("shuffle_seed") is None
        split = (
            "full split"
            if full
            else f"SIZE {protocol.get('size')}, shuffle seed {protocol.get('shuffle_seed')}"
        )
        published = ""
        if adult and la.get("label") == "salary":
            real_full = pub.LABEL_ACCURACY["real_full_split"]["value"]
            real_4000 = pub.LABEL_ACCURACY["real_size_4000"]["value"]
            ours = " / ".join(f"{pub.LABEL_ACCURACY['dp_auto_gan']['value'][e]:.4f}" for e in eps_cols)
            published = (
                f"real: {real_full:.4f} (full split, §6.7 rerun), {real_4000:.4f} (paper, SIZE 4000); "
                f"DP-auto-GAN: {ours}"
            )
        model = protocol.get("model", "")
        forest = "Table 3 forest" if "n_estimators=800, random_state=0" in model else model
        title = f"RF accuracy on {la['label']} ({forest}, {split})"
        lines.append(_row(title, _num(la["real"]), _num(la["synthetic"]), published))
    for key, title, src in (("jsd", "JSD total", pub.JSD), ("kl_mu", "D_KL^μ total", pub.KL_MU)):
        block = result.get(key)
        if block:
            n_feats = len(result.get("diversity_total_features") or [])
            published = " / ".join(f"{src['value'][e]['total']:.2f}" for e in eps_cols) if adult else ""
            lines.append(_row(f"{title} ({n_feats} features)", "—", _num(block.get("total")), published))
    twm = result.get("three_way_marginal")
    if twm:
        title = f"3-way marginal L1, mean of {twm['n_triples']} triples (0 best, 2 worst)"
        lines.append(_row(title, "—", f"{_num(twm['mean'])} (sd {_num(twm['std'])})", "not published"))
    ts = result.get("tstr_auroc")
    if ts:
        title = f"LR AUROC on {ts['label']} (train on data, test on real)"
        lines.append(_row(title, _num(ts.get("real")), _num(ts.get("synthetic")), ""))
    summ = result.get("dimension_wise_summary")
    if summ:
        d = ", ".join(f"{m} {_num(v)}" for m, v in summ["mean_distance_from_diagonal"].items())
        counts = f"scored {summ['n_scored']}, excluded {summ['n_excluded']}, flagged {summ['n_flagged']}"
        lines.append(_row("dimension-wise: mean distance from y = x", "—", d, counts))
    lines.append("")
    if adult:
        sources = [pub.LABEL_ACCURACY["real_size_4000"]["source"], pub.JSD["source"], pub.KL_MU["source"]]
        lines += ["Sources: " + "; ".join(sources) + ".", ""]
    return lines


def _diversity_table(result: dict[str, Any], adult: bool) -> list[str]:
    jsd, kl, mu = result.get("jsd"), result.get("kl_mu"), result.get("mu") or {}
    if not jsd or not kl:
        return []
    eps_cols = pub.DP_AUTO_GAN_EPSILONS
    cells = ["feature", "μ", "JSD", "D_KL^μ"]
    if adult:
        eps = "/".join(map(str, eps_cols))
        cells += [f"published JSD {eps}", f"published D_KL^μ {eps}"]
    lines = [
        "## Diversity per feature (reference: all real rows)",
        "",
        _row(*cells),
        "|---" * len(cells) + "|",
    ]
    for f in [k for k in jsd if k != "total"]:
        row = [f, _num(mu.get(f), 6), _num(jsd[f]), _num(kl[f])]
        if adult:
            for src in (pub.JSD, pub.KL_MU):
                values = [src["value"][e].get(f) for e in eps_cols]
                row.append(" / ".join(_num(v, 3) for v in values) if values[0] is not None else "")
        lines.append(_row(*row))
    return lines + [""]


def _dimension_wise_table(result: dict[str, Any], adult: bool, limit: int = 60) -> list[str]:
    dwp = result.get("dimension_wise_prediction") or {}
    if not dwp:
        return []
    ref = pub.DIMENSION_WISE_REAL["value"] if adult else {}
    cells = ["feature", "metric", "real", "synthetic", "flag"] + (["spec §6.2 real"] if adult else [])
    lines = [
        "## Dimension-wise prediction (train on real or synthetic, test on real)",
        "",
        _row(*cells),
        "|---" * len(cells) + "|",
    ]
    for f, s in list(dwp.items())[:limit]:
        row = [f, s["metric"], _num(s["real"]), _num(s["synthetic"]), s["flag"] or ""]
        lines.append(_row(*row, *([_num(ref.get(f), 3)] if adult else [])))
    if len(dwp) > limit:
        lines.append(f"\n{len(dwp) - limit} more features in metrics.json.")
    return lines + [""]


def summary_markdown(result: dict[str, Any], epsilon: float | None = None) -> str:
    """The markdown summary of an ``evaluate`` result, with published numbers beside ours.

    Published numbers (dp-auto-gan §7) appear only when the result's columns are the Adult
    schema's; each table names its source.

    Args:
        result: The dict returned by :func:`evaluate`.
        epsilon: The synthetic data's ε, if known (shown in the header).

    Returns:
        Markdown text.
    """
    adult = _is_adult(result)
    lines = _header(result.get("meta", {}), adult, epsilon)
    lines += _headline(result, adult)
    lines += _diversity_table(result, adult)
    lines += _dimension_wise_table(result, adult)
    if result.get("excluded"):
        lines += ["## Excluded features", ""] + [f"- {f}: {r}" for f, r in result["excluded"].items()] + [""]
    if result.get("nulls"):
        lines += ["## Undefined values (null in metrics.json)", ""]
        lines += [f"- `{p}`: {r}" for p, r in result["nulls"].items()] + [""]
    t = result.get("timings_s", {}).get("total")
    if t is not None:
        lines += [f"Evaluation time: {t:.1f} s.", ""]
    return "\n".join(lines)


def write_report(
    result: dict[str, Any],
    out_dir: str | pathlib.Path,
    *,
    real: pd.DataFrame | Sequence[pd.DataFrame] | None = None,
    synthetic: pd.DataFrame | None = None,
    schema: Schema | None = None,
    epsilon: float | None = None,
) -> dict[str, pathlib.Path]:
    """Write ``metrics.json``, PNG plots and ``summary.md`` for an :func:`evaluate` result.

    Plots (matplotlib object API, no display needed): ``dimension_wise.png`` (real vs synthetic
    score per feature, with y = x), ``dimension_wise_probability.png`` (all-binary data),
    ``marginals.png`` (1-way marginals), ``diversity.png`` (JSD and D_KL^μ bars, published
    DP-auto-GAN values as markers for Adult) and, when ``real``, ``synthetic`` and ``schema``
    are given, ``pca.png`` (the 2-way PCA scatter, which needs the rows themselves).

    Args:
        result: The dict returned by :func:`evaluate`.
        out_dir: Folder to write into (created if needed; files of the same name are replaced).
        real: The real reference rows for the PCA plot: a frame, or a sequence of frames that
            are concatenated (e.g. ``(train, test)``, matching ``evaluate``'s reference).
        synthetic: The synthetic rows for the PCA plot.
        schema: The schema of those frames.
        epsilon: The synthetic data's ε, shown in the summary (optional).

    Returns:
        ``{name: path}`` of every file written.

    Raises:
        TypeError: if ``result`` is not a dict, or the frames/schema have the wrong types.
        ValueError: if ``result`` is not JSON-serialisable without NaN, or only some of
            ``real``/``synthetic``/``schema`` are given, or the frames do not match the schema.
    """
    if not isinstance(result, dict):
        raise TypeError(f"result must be the dict returned by evaluate, got {type(result).__name__}.")
    given = {"real": real is not None, "synthetic": synthetic is not None, "schema": schema is not None}
    if any(given.values()) and not all(given.values()):
        missing = [k for k, v in given.items() if not v]
        raise ValueError(f"the PCA plot needs real, synthetic and schema together; missing {missing}.")
    try:
        text = json.dumps(result, indent=2, allow_nan=False)
    except ValueError as err:
        raise ValueError(
            f"result holds NaN or infinity ({err}); pass the dict returned by evaluate."
        ) from None
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, pathlib.Path] = {}
    (out / "metrics.json").write_text(text + "\n")
    written["metrics.json"] = out / "metrics.json"
    published = _published_diversity() if _is_adult(result) else None
    for name, fn in (
        ("dimension_wise.png", lambda p: plot_dimension_wise(result, p)),
        ("dimension_wise_probability.png", lambda p: plot_dimension_wise_probability(result, p)),
        ("marginals.png", lambda p: plot_marginals(result, p)),
        ("diversity.png", lambda p: plot_diversity(result, p, published)),
    ):
        path = fn(out / name)
        if path is not None:
            written[name] = path
    md = summary_markdown(result, epsilon)
    if schema is not None:
        check_schema(schema)
        enc = TableEncoder(schema)
        ref = prepare(_as_frame(real, "real"), schema, "real", enc)
        syn = prepare(synthetic, schema, "synthetic", enc)
        written["pca.png"] = plot_pca(pca_projection_from_arrays(ref.encoded, syn.encoded), out / "pca.png")
    else:
        md += "\nThe PCA plot was not drawn: pass real=, synthetic= and schema= to write_report.\n"
    md += "\n## Files\n\n" + "\n".join(f"- {n}" for n in list(written) + ["summary.md"]) + "\n"
    (out / "summary.md").write_text(md)
    written["summary.md"] = out / "summary.md"
    return written
