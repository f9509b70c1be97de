"""``experiments.studies.skewed_columns`` (issue 48's acceptance study of ``scale="log"``): one line per
finished cell, a summary per method and epsilon, the real percentiles computed independently here, and a
rerun that skips the finished cells."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from experiments.studies import skewed_columns as study


@pytest.mark.slow  # two fits of fast methods (30-80 s on a shared core)
def test_the_study_records_each_cell_and_summarises_it(tmp_path):
    argv = ["--methods", "independent", "dp-vae", "--epsilons", "1", "--seeds", "0",
            "--cap", "independent", "--max-seconds", "60", "--out", str(tmp_path)]
    rows = study.main(argv)
    cells = [json.loads(line) for line in (tmp_path / "cells.jsonl").read_text().splitlines()]
    assert [(c["method"], c["epsilon"], c["seed"], c["scale"], c["max_seconds"]) for c in cells] == [
        ("independent", 1.0, 0, "log", 60.0), ("dp-vae", 1.0, 0, "log", None)]
    # the real percentiles, from the generator's own draw (numpy's default linear interpolation)
    real = study.table(0)["income"].to_numpy()
    assert real.min() >= study.LOWER and real.max() <= study.UPPER and len(real) == 800
    s = np.sort(real)
    for c in cells:
        assert c["status"] == "ok", c
        for q, key in ((30, "p30"), (50, "p50"), (70, "p70")):
            h = (len(s) - 1) * q / 100
            lo = int(math.floor(h))
            assert c[key] == pytest.approx(s[lo] + (h - lo) * (s[lo + 1] - s[lo]), rel=1e-12)
        assert isinstance(c["median"], float) and study.LOWER <= c["median"] <= study.UPPER
        assert c["inside"] == (c["p30"] <= c["median"] <= c["p70"])
        assert 0 < c["epsilon_spent"] <= 1.0 + 1e-6 and c["seconds"] > 0  # a cut schedule spends less
    assert [(r["method"], r["epsilon"], r["runs"], r["inside"]) for r in rows] == [
        (c["method"], 1.0, 1, int(c["inside"])) for c in cells]
    assert json.loads((tmp_path / "summary.json").read_text()) == rows
    summary = (tmp_path / "summary.md").read_text()
    for c in cells:
        assert f"| {c['method']} | 1 | log | {c['median']:,.0f} | {int(c['inside'])}/1 |" in summary
    # a rerun finds both cells finished and fits nothing
    assert study.main(argv) == rows
    assert len((tmp_path / "cells.jsonl").read_text().splitlines()) == 2


def test_the_schema_declares_the_income_log_and_the_flags_are_checked(tmp_path):
    assert study.schema()["income"].scale == "log" and study.schema("linear")["income"].scale == "linear"
    frame = study.table(1, 50)
    assert list(frame.columns) == study.schema().names
    assert frame.equals(study.table(1, 50)) and not frame.equals(study.table(2, 50))
    for bad in (["--cap", "gs-wgan"], ["--methods", "nope"], ["--epsilons", "0"], ["--scale", "sqrt"]):
        with pytest.raises(SystemExit):
            study.main(bad + ["--out", str(tmp_path)])
    assert not (tmp_path / "cells.jsonl").exists()
