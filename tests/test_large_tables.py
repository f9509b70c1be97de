"""Large tables: the epoch schedules stop growing past a step cap, and the million-row experiment's
cells record time, memory and the privacy report (``experiments/studies/large_tables.py``)."""

from __future__ import annotations

import json
import math

import pytest

from dpgen_jax import data, synthesizers
from dpgen_jax.synthesizers import dp_auto_gan, dp_syn


def _steps(method: str, n: int, **overrides) -> dict[str, int]:
    plan = synthesizers.create(method, **overrides).plan(data.adult_schema(), n, epsilon=math.inf)
    return {ph.name: ph.steps for ph in plan.phases if ph.name != "one-way"}  # the training phases


def test_dp_auto_gan_epoch_schedule_is_capped_and_unchanged_below_the_cap():
    cfg = dp_auto_gan.DPAutoGANConfig()
    # Adult, cardio-sized and adult-small tables: round(epochs * N / batch), as before the cap
    for n in (1000, 32_561, 56_000):
        want = {"autoencoder": round(cfg.ae_epochs * n / dp_auto_gan.ae_batch_size_for(cfg, n)),
                "critic": round(cfg.critic_epochs * n / cfg.critic_batch_size)}
        assert _steps("dp-auto-gan", n) == want
    big = _steps("dp-auto-gan", 1_000_000)
    assert big["critic"] == cfg.max_epoch_steps == 30_000
    assert big["autoencoder"] == round(cfg.ae_epochs * 1_000_000 / 1024)  # below the cap
    assert _steps("dp-auto-gan", 1_000_000, max_epoch_steps=None)["critic"] == round(
        cfg.critic_epochs * 1_000_000 / cfg.critic_batch_size)
    assert _steps("dp-auto-gan", 1_000_000, critic_steps=50_000)["critic"] == 50_000  # explicit: as given
    with pytest.raises(ValueError, match="max_epoch_steps"):
        synthesizers.create("dp-auto-gan", max_epoch_steps=0).plan(data.adult_schema(), 100, epsilon=math.inf)


def test_dp_syn_group_steps_are_capped_and_unchanged_below_the_cap():
    cfg = dp_syn.DPSYNConfig()
    for n in (1000, 32_561):
        steps = _steps("dp-syn", n)
        assert steps["autoencoder/>50K"] == round(cfg.epochs * (n / 2) / cfg.batch_size)
    assert _steps("dp-syn", 1_000_000)["autoencoder/>50K"] == cfg.max_steps == 20_000
    assert _steps("dp-syn", 1_000_000, max_steps=None)["autoencoder/>50K"] == round(
        cfg.epochs * 500_000 / cfg.batch_size)


def test_a_capped_schedule_needs_less_noise_at_a_larger_table():
    """The point of the cap: the same steps over more records sample at a lower rate, so the same
    epsilon needs a smaller noise multiplier (dp_accounting calibrates both plans)."""
    def sigma(n):
        plan = synthesizers.create("dp-syn").plan(data.adult_schema(), n, epsilon=1.0)
        groups = dict(next(ph for ph in plan.phases if ph.name == "groups").groups)
        autoencoder = groups[">50K"][0]
        assert autoencoder.steps == 20_000  # capped at both sizes
        return autoencoder.noise_multiplier

    assert sigma(1_000_000) < sigma(200_000)


@pytest.mark.slow  # a study cell with its evaluation (the study is run by hand, docs/scaling.md)
def test_large_tables_cell_records_time_memory_and_epsilon(tmp_path):
    from experiments.studies import large_tables

    cell = large_tables.run_cell("independent", 3000, 1.0, 0, {})
    json.dumps(cell)
    assert cell["status"] == "done" and cell["rows"] == 3000
    assert math.isclose(cell["epsilon"], 1.0, rel_tol=1e-3)
    assert cell["peak_mb_after_fit"] >= cell["peak_mb_after_load"] > 0
    assert cell["encoded_table_mb"] == round(3000 * data.TableEncoder(data.adult_schema()).width * 4 / 2**20, 1)
    assert 0 <= cell["l1_3way"] <= 2 and 0 <= cell["tstr_auroc"] <= 1
