"""``write_report``: metrics.json, headless PNG plots and a markdown summary beside the papers."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Sequence
from typing import Any

import pandas as pd

from dpgen_jax.data import Schema, TableEncoder
from dpgen_jax.metrics._marginals import pca_projection_from_arrays
from dpgen_jax.metrics._plots import (
    plot_diversity,
    plot_dimension_wise,
    plot_dimension_wise_probability,
    plot_marginals,
    plot_pca,
)
from dpgen_jax.metrics._published import PublishedResults
from dpgen_jax.metrics._registry import METRICS, lookup
from dpgen_jax.metrics._inputs import check_same_columns, check_schema, prepare, missing_as_value


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "null"
    if isinstance(v, float) and (abs(v) >= 1e-3 or v == 0):
        return f"{v:.{digits}f}"
    if isinstance(v, float):
        return f"{v:.2e}"
    return str(v)


def why_null(result: dict[str, Any], path: str) -> str | None:
    """Why the value at ``path`` is null: the reason ``nulls`` holds for it or its nearest parent."""
    nulls, parts = result.get("nulls") or {}, path.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in nulls:
            return nulls[".".join(parts[:k])]
    return None


def _cell(result: dict[str, Any], path: str) -> str:
    """The number at ``path``, or ``undefined: <reason>`` (``null`` without a recorded reason)."""
    value = lookup(result, path)
    if value is None and why_null(result, path):
        return f"undefined: {why_null(result, path)}"
    return _num(value)


def _records(published: Any) -> tuple[PublishedResults, ...]:
    """None, one record or a sequence of records, as a tuple."""
    if published is None:
        return ()
    if isinstance(published, PublishedResults):
        return (published,)
    if isinstance(published, (list, tuple)) and all(isinstance(r, PublishedResults) for r in published):
        return tuple(published)
    raise TypeError(
        "published must be None, a metrics.published.PublishedResults record or a sequence of them, "
        f"got {type(published).__name__}."
    )


def _check_records(records: tuple[PublishedResults, ...], result: dict[str, Any]) -> None:
    columns = result.get("meta", {}).get("columns", [])
    for r in records:
        if r.columns is not None and set(r.columns) != set(columns):
            raise ValueError(
                f"published record {r.label} on {r.dataset} refers to the columns {list(r.columns)}, "
                f"but the result has {list(columns)}; pass records for the dataset that was evaluated."
            )


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


def _published_cell(records: tuple[PublishedResults, ...], path: str, real_path: str | None = None) -> str:
    """Every record's numbers at ``path`` ("method: a / b / c (ε x / y / z)"), and its real-data number."""
    parts = []
    for r in records:
        values = r.at(path)
        real = r.real.get(real_path) if real_path else None
        if all(v is None for v in values) and real is None:
            continue
        text = f"{r.method}"
        if any(v is not None for v in values):
            eps = "/".join(f"{e:g}" for e in r.epsilons)
            text += ": " + " / ".join(_num(v) for v in values) + f" (ε {eps})"
        if real is not None:
            text += f"; real data {_num(real)}"
        parts.append(text)
    return "; ".join(parts)


def _header(meta: dict[str, Any], records: tuple[PublishedResults, ...], epsilon: float | None) -> list[str]:
    n = meta.get("n_rows", {})
    lines = [
        "# Evaluation report",
        "",
        f"Rows: real train {n.get('real_train')}, real test {n.get('real_test')}, "
        f"synthetic {n.get('synthetic')}; reference for the distribution metrics: "
        f"{meta.get('reference', 'n/a')} ({n.get('reference')} rows). "
        f"Label: {meta.get('label')}. Seed: {meta.get('seed')}."
        + (f" Synthetic data made at ε = {epsilon}." if epsilon is not None else ""),
        "",
    ]
    for r in records:
        eps = " / ".join(f"{e:g}" for e in r.epsilons)
        delta = f", δ = {r.delta:g}" if r.delta is not None else ""
        lines += [
            f"Published numbers beside ours: {r.method} on {r.dataset} ({r.short_citation}) at ε = {eps}{delta}.",
            "",
        ]
    return lines


def _headline(result: dict[str, Any], records: tuple[PublishedResults, ...]) -> list[str]:
    lines = ["## Headline", "", _row("metric", "real data", "synthetic", "published"), "|---|---|---|---|"]
    la = result.get("label_accuracy")
    if la:
        protocol = la.get("protocol", {})
        full = protocol.get("size") is None and protocol.get("shuffle_seed") is None
        split = "full split" if full else f"SIZE {protocol.get('size')}, shuffle seed {protocol.get('shuffle_seed')}"
        model = protocol.get("model", "")
        forest = "800-tree forest" if "n_estimators=800, random_state=0" in model else model
        title = f"RF accuracy on {la['label']} ({forest}, {split})"
        published = _published_cell(records, "label_accuracy.synthetic", "label_accuracy.real")
        lines.append(_row(title, _num(la["real"]), _num(la["synthetic"]), published))
    elif (result.get("meta") or {}).get("label") is not None:
        lines.append(_row("RF accuracy on the label", "—", _cell(result, "label_accuracy"), ""))
    fill = {field: value(result) for metric in METRICS for field, value in metric.title_fields}
    label = (result.get("meta") or {}).get("label")
    fill["label"] = label if label is not None else "the label"  # a row of a metric without one says why
    for metric in METRICS:
        for i, row in enumerate(metric.headlines):
            value = lookup(result, row.path)
            if value is None and row.optional:
                continue
            if not result.get(row.path.split(".")[0]):
                # a null real-vs-synthetic score (a label metric) says why on its first row
                if i == 0 and row.real_path is not None and why_null(result, row.path):
                    lines.append(_row(row.title.format(**fill), "—", _cell(result, row.path), ""))
                continue
            real = _cell(result, row.real_path) if row.real_path else "—"
            lines.append(_row(row.title.format(**fill), real, _cell(result, row.path),
                              _published_cell(records, row.path, row.real_path)))
    summ = result.get("dimension_wise_summary")
    if summ:
        d = ", ".join(f"{m} {_num(v)}" for m, v in summ["mean_distance_from_diagonal"].items())
        counts = f"scored {summ['n_scored']}, excluded {summ['n_excluded']}, flagged {summ['n_flagged']}"
        lines.append(_row("dimension-wise: mean distance from y = x", "—", d, counts))
    return lines + [""]


def _published_section(result: dict[str, Any], records: tuple[PublishedResults, ...]) -> list[str]:
    """Per record: citation, every published number beside ours, sources and notes."""
    lines: list[str] = []
    for r in records:
        eps = [f"ε {e:g}" for e in r.epsilons]
        lines += [f"## Published: {r.method} on {r.dataset}", "", f"{r.citation}.", ""]
        lines += [_row("result key", *eps, "this run", "source"), "|---" * (len(eps) + 3) + "|"]
        for path in r.values:
            lines.append(_row(f"`{path}`", *(_num(v) for v in r.at(path)), _num(lookup(result, path)), r.source(path) or ""))
        for path, value in r.real.items():
            lines.append(
                _row(f"`{path}` (real data)", _num(value), *[""] * (len(eps) - 1), _num(lookup(result, path)),
                     r.source(path) or "")
            )
        lines += [""] + [f"- {n}" for n in r.notes] + ([""] if r.notes else [])
    return lines


def _diversity_table(result: dict[str, Any], records: tuple[PublishedResults, ...]) -> list[str]:
    jsd, kl, mu = result.get("jsd"), result.get("kl_mu"), result.get("mu") or {}
    if not jsd or not kl:
        return []
    with_jsd = [r for r in records if any(p.startswith("jsd.") or p.startswith("kl_mu.") for p in r.values)]
    cells = ["feature", "μ", "JSD", "D_KL^μ"]
    for r in with_jsd:
        eps = "/".join(f"{e:g}" for e in r.epsilons)
        cells += [f"{r.method} JSD ε {eps}", f"{r.method} D_KL^μ ε {eps}"]
    lines = [
        "## Diversity per feature (reference: all real rows)",
        "",
        _row(*cells),
        "|---" * len(cells) + "|",
    ]
    for f in [k for k in jsd if k != "total"]:
        row = [f, _num(mu.get(f), 6), _num(jsd[f]), _num(kl[f])]
        for r in with_jsd:
            for key in ("jsd", "kl_mu"):
                values = r.at(f"{key}.{f}")
                row.append(" / ".join(_num(v, 3) for v in values) if any(v is not None for v in values) else "")
        lines.append(_row(*row))
    return lines + [""]


def _marginal_table(result: dict[str, Any]) -> list[str]:
    tv = result.get("tv_1way")
    if not tv:
        return []
    spacing = tv.get("spacing", {})
    lines = [
        f"## 1-way total variation per column ({tv['bins']} public bins per continuous column)",
        "",
        _row("column", "TV", "bins"),
        "|---|---|---|",
    ]
    for name, value in tv["per_column"].items():
        lines.append(_row(name, _num(value), spacing.get(name, "categories")))
    return lines + [""]


def _dimension_wise_table(result: dict[str, Any], limit: int = 60) -> list[str]:
    dwp = result.get("dimension_wise_prediction") or {}
    if not dwp:
        return []
    cells = ["feature", "metric", "real", "synthetic", "flag"]
    lines = [
        "## Dimension-wise prediction (train on real or synthetic, test on real)",
        "",
        _row(*cells),
        "|---" * len(cells) + "|",
    ]
    for f, s in list(dwp.items())[:limit]:
        lines.append(_row(f, s["metric"], _num(s["real"]), _num(s["synthetic"]), s["flag"] or ""))
    if len(dwp) > limit:
        lines.append(f"\n{len(dwp) - limit} more features in metrics.json.")
    return lines + [""]


def summary_markdown(
    result: dict[str, Any],
    epsilon: float | None = None,
    published: PublishedResults | Sequence[PublishedResults] | None = None,
) -> str:
    """The markdown summary of an ``evaluate`` result, with published numbers beside ours.

    Args:
        result: The dict returned by :func:`evaluate`.
        epsilon: The synthetic data's ε, if known (shown in the header).
        published: Records of published numbers (``metrics.published``) to show beside ours:
            one, a sequence, or None (no published columns). Each number is placed beside the
            result entry of the same path; every record also gets a section with its full
            citation, sources and notes.

    Returns:
        Markdown text.

    Raises:
        TypeError: if ``published`` is not None, a record or a sequence of records.
        ValueError: if a record refers to other columns than the result's.
    """
    records = _records(published)
    _check_records(records, result)
    lines = _header(result.get("meta", {}), records, epsilon)
    lines += _headline(result, records)
    lines += _published_section(result, records)
    lines += _diversity_table(result, records)
    lines += _marginal_table(result)
    lines += _dimension_wise_table(result)
    if result.get("excluded"):
        lines += ["## Excluded features", ""] + [f"- {f}: {r}" for f, r in result["excluded"].items()] + [""]
    if result.get("warnings"):
        lines += ["## Warnings", ""] + [f"- {text}" for text in result["warnings"].values()] + [""]
    if result.get("nulls"):
        lines += ["## Undefined values (null in metrics.json)", ""]
        lines += [f"- `{p}`: {r}" for p, r in result["nulls"].items()] + [""]
    lines += ["Definitions of every metric: the project's docs/metrics.md.", ""]
    t = result.get("timings_s", {}).get("total")
    if t is not None:
        lines += [f"Evaluation time: {t:.1f} s.", ""]
    return "\n".join(lines)


@missing_as_value
def write_report(
    result: dict[str, Any],
    out_dir: str | pathlib.Path,
    *,
    real: pd.DataFrame | Sequence[pd.DataFrame] | None = None,
    synthetic: pd.DataFrame | None = None,
    schema: Schema | None = None,
    epsilon: float | None = None,
    published: PublishedResults | Sequence[PublishedResults] | None = None,
) -> dict[str, pathlib.Path]:
    """Write ``metrics.json``, PNG plots and ``summary.md`` for an :func:`evaluate` result.

    Plots (matplotlib object API, no display needed): ``dimension_wise.png`` (real vs synthetic
    score per feature, with y = x), ``dimension_wise_probability.png`` (all-binary data),
    ``marginals.png`` (1-way marginals), ``diversity.png`` (JSD and D_KL^μ bars, with the
    published per-feature values of ``published`` as markers) and, when ``real``, ``synthetic`` and ``schema``
    are given, ``pca.png`` (the 2-way PCA scatter, which needs the rows themselves).

    Args:
        result: The dict returned by :func:`evaluate`.
        out_dir: Folder to write into (created if needed; files of the same name are replaced).
        real: The real reference rows for the PCA plot: a frame, or a sequence of frames that
            are concatenated (e.g. ``(train, test)``, matching ``evaluate``'s reference).
        synthetic: The synthetic rows for the PCA plot.
        schema: The schema of those frames.
        epsilon: The synthetic data's ε, shown in the summary (optional).
        published: Published numbers to show beside ours (see :func:`summary_markdown`): a
            ``metrics.published`` record such as ``published.DP_AUTO_GAN_ADULT``, a sequence of
            records, or None (the default: no published columns).

    Returns:
        ``{name: path}`` of every file written.

    Raises:
        TypeError: if ``result`` is not a dict, the frames/schema have the wrong types, or
            ``published`` is not a record or a sequence of records.
        ValueError: if ``result`` is not JSON-serialisable without NaN, or only some of
            ``real``/``synthetic``/``schema`` are given, the frames do not match the schema, or
            a published record refers to other columns than the result's.
    """
    if not isinstance(result, dict):
        raise TypeError(f"result must be the dict returned by evaluate, got {type(result).__name__}.")
    records = _records(published)
    _check_records(records, result)
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
    for name, fn in (
        ("dimension_wise.png", lambda p: plot_dimension_wise(result, p)),
        ("dimension_wise_probability.png", lambda p: plot_dimension_wise_probability(result, p)),
        ("marginals.png", lambda p: plot_marginals(result, p)),
        ("diversity.png", lambda p: plot_diversity(result, p, records)),
    ):
        path = fn(out / name)
        if path is not None:
            written[name] = path
    md = summary_markdown(result, epsilon, records)
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
