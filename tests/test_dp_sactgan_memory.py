"""DP-SACTGAN on a wide table: the attention between columns is refused before any row is read
when its estimated allocation passes the machine's memory, and ``recommend`` says so."""

from __future__ import annotations

import pytest

from dpgen_jax import advice, data, synthesizers
from dpgen_jax.synthesizers import dp_sactgan


def test_estimate_scales_the_measured_point():
    m = dp_sactgan.ATTENTION_MEASURED
    assert dp_sactgan.attention_bytes(m["columns"], m["batch_size"], m["num_heads"]) == m["bytes"]
    assert dp_sactgan.attention_bytes(2 * m["columns"], m["batch_size"], m["num_heads"]) == 4 * m["bytes"]
    assert dp_sactgan.attention_bytes(m["columns"], 32, 8) == m["bytes"]


def test_a_wide_plan_is_refused_by_name_and_a_smaller_batch_is_not(monkeypatch):
    monkeypatch.setattr(dp_sactgan, "physical_memory", lambda: 24e9)
    schema = data.binary_schema(1071)
    with pytest.raises(ValueError, match=r"1071 columns needs about 40 GB .*batch_size=64.*24 GB"):
        synthesizers.create("dp-sactgan").plan(schema, 2000, epsilon=3.0)
    plan = synthesizers.create("dp-sactgan", batch_size=16).plan(schema, 2000, epsilon=3.0)
    assert plan.epsilon() == pytest.approx(3.0, rel=1e-3)
    monkeypatch.setattr(dp_sactgan, "physical_memory", lambda: None)  # unknown: no refusal
    synthesizers.create("dp-sactgan").plan(schema, 2000, epsilon=3.0)


def test_recommend_ranks_it_unusable_on_a_wide_table(monkeypatch):
    monkeypatch.setattr(dp_sactgan, "physical_memory", lambda: 24e9)
    ranked = advice.recommend(data.binary_schema(1071), 2000, 3.0)
    row = next(r for r in ranked if r.method == "dp-sactgan")
    assert not row.usable and "attention" in row.unavailable
    assert all(not r.usable for r in ranked[ranked.index(row):])
    narrow = next(r for r in advice.recommend(data.adult_schema(), 32_561, 1.0) if r.method == "dp-sactgan")
    assert narrow.usable
