"""``experiments.studies.wide_tables``: cells run in their own processes, a cell past its time limit is
recorded as a timeout (not lost), the planted groups are the ones scored, and the report and
summary are written."""

from __future__ import annotations

import argparse
import json

from experiments.studies import wide_tables


def _args(tmp_path, **kw):
    base = dict(epsilon=3.0, seeds=[0], methods=["independent"], datasets=["planted-binary"],
                timeout=600.0, quick=True, out=str(tmp_path))
    base.update(kw)
    return argparse.Namespace(**base)


def test_quick_cells_and_timeouts_are_recorded(tmp_path):
    rep = wide_tables.run(_args(tmp_path))
    (cell,) = rep["cells"]
    assert cell["status"] == "done" and cell["columns"] == 60 and cell["rows"] == 320
    assert cell["synthetic_rows"]["n"] == 320 and cell["synthetic_rows"]["public"] is False  # quick rows
    pairs, triples = wide_tables.planted_groups(quick=True)
    assert pairs and triples and all(len(p) == 2 for p in pairs) and all(len(t) == 3 for t in triples)
    for key in wide_tables.METRICS:
        assert 0.0 <= cell[key] <= 2.0
    # the planted relations are what independent columns cannot reproduce
    assert cell["l1_planted_2way"] > 3 * cell["l1_random_3way"] / 2
    assert (tmp_path / "summary.md").read_text().count("| planted-binary | independent | 1 |") == 1
    # a cell past its limit is recorded, and a second run resumes from the files
    late = wide_tables.run(_args(tmp_path / "late", methods=["gem"], timeout=0.01))
    assert late["cells"][0]["status"] == "timeout"
    again = wide_tables.run(_args(tmp_path))
    assert again["cells"] == rep["cells"]
    assert json.loads((tmp_path / "report.json").read_text())["medians"][0]["seeds"] == 1
