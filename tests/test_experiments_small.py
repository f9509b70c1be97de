"""``experiments.studies.small_tables``: the small-table search writes every fit and the medians, scored on
held-out generated rows only."""

from __future__ import annotations

import json

import pytest

from experiments.studies import small_tables


def test_small_tables_search_writes_every_fit_and_the_medians(tmp_path):
    runs = small_tables.main(["--method", "independent", "--rows", "300", "--seeds", "0", "--variants", "{}",
                              '{"bins": 8}', "--out", str(tmp_path)])
    assert [r["variant"] for r in runs] == [{}, {"bins": 8}]
    for r in runs:
        assert r["epsilon"] == pytest.approx(3.0, rel=1e-3)
        assert 0.0 <= r["rf_accuracy"] <= 1.0 and 0.0 < r["l1_3way"] <= 2.0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["majority_rate"] == pytest.approx(0.764, abs=0.01) and len(report["runs"]) == 2
    summary = (tmp_path / "summary.md").read_text()
    assert "Majority rate" in summary and '`{"bins": 8}`' in summary and "3-way L1" in summary


def test_small_tables_refuses_a_variant_that_is_not_a_json_object(tmp_path):
    with pytest.raises(SystemExit):
        small_tables.main(["--method", "independent", "--variants", "[1]", "--out", str(tmp_path)])



def test_a_list_in_a_variant_is_a_tuple_field():
    # JSON has no tuples: network widths come as lists and are read as `--set` reads them
    from dpgen_jax import data, synthesizers

    variant = {"hidden": [8, 4], "critic_steps": 4}
    config = synthesizers.create("dp-wgan", **small_tables.settings(variant)).resolve_config(data.adult_schema())
    assert config.hidden == (8, 4) and config.critic_steps == 4
    hash(config)  # the compiled runners are cached by configuration
    assert variant == {"hidden": [8, 4], "critic_steps": 4}  # the report keeps the variant as given
