"""The neural sampling benchmark (experiments/speed/neural_sampling.py): no timed assertion; its
quick run writes one row per method, GEM's first, with the documented keys, and every ratio is the
method's median over GEM's median of the same run."""

from __future__ import annotations

import json

import pytest

from experiments.speed import neural_sampling

ROW_KEYS = {"method", "fit_seconds", "first_seconds", "seconds", "new_size_seconds", "median_seconds",
            "p10_seconds", "p90_seconds", "ratio"}


@pytest.mark.slow  # four short fits
def test_quick_run_writes_a_row_per_method_with_ratios_to_gem(tmp_path):
    report = neural_sampling.main(["--quick", "--out", str(tmp_path), "--methods", "dp-vae", "dp-wgan"])
    assert json.loads((tmp_path / "report.json").read_text()) == report
    rows = report["rows"]
    assert [r["method"] for r in rows] == ["gem", "dp-vae", "dp-wgan"]
    for r in rows:
        assert set(r) == ROW_KEYS and len(r["seconds"]) == report["repeats"]
        assert r["p10_seconds"] <= r["median_seconds"] <= r["p90_seconds"]
        assert r["ratio"] == r["median_seconds"] / rows[0]["median_seconds"]
    assert (tmp_path / "summary.md").read_text().count("\n| dp-") == 2
