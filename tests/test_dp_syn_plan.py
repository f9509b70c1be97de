"""DP-SYN's plan is the mechanism: every group's rate, steps and noise are fixed from public values
before any row is read, so the data-free plan equals what the fit runs and accounts, for any table.

Oracles: ``Synthesizer.plan`` (no data) against the fitted privacy report; two tables with different
label counts and the same public inputs against each other; the rates and steps against
``batch_size / (N * share)`` and ``epochs * N * share / batch_size`` computed here.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dpgen_jax import data, privacy, synthesizers
from dpgen_jax.synthesizers import dp_syn as ds
from tests import _tables
from tests._oracles import float32_not_above

LABELLED = data.Schema(tuple(dataclasses.replace(c, label=(c.name == "b"))
                             for c in _tables.MIXED_SCHEMA.columns))
TINY = dict(latent_dim=3, batch_size=16, epochs=2.0, chunk_size=5, em_components=2, em_iterations=3)
EPS, DELTA = 2.0, 1e-5


def _frame(n=300, share_p=None, seed=0):
    """``n`` rows; with ``share_p`` the first round(n * share_p) rows are labelled "p", the rest "q"."""
    frame = _tables.mixed_frame(n, seed)
    if share_p is not None:
        m = round(n * share_p)
        frame["b"] = np.array(["p"] * m + ["q"] * (n - m), dtype=object)
    return frame


def _phases(report):
    """Every accounted phase of a report, flattened: name -> (rate, noise multiplier, steps)."""
    out = {}
    for entry in report["phases"]:
        for p in [q for g in entry["groups"] for q in g["phases"]] if "groups" in entry else [entry]:
            out[p["name"]] = (p.get("sample_rate"), p["noise_multiplier"], p["steps"])
    return out


def _plan_phases(plan):
    return {p.name: (getattr(p, "sample_rate", None), p.noise_multiplier, p.steps)
            for p in privacy.flat_phases(plan.phases)}


@pytest.fixture(scope="module")
def two_fits():
    """The default configuration (released counts, parallel groups) fitted on two tables of 300
    rows whose label counts differ (150 / 150 and 240 / 60), same seed and public inputs."""
    fits = [synthesizers.create("dp-syn", **TINY).fit(_frame(share_p=s), LABELLED, epsilon=EPS,
                                                       delta=DELTA, seed=0) for s in (0.5, 0.8)]
    return fits


def test_plan_equals_the_fitted_phases(two_fits):
    plan = synthesizers.create("dp-syn", **TINY).plan(LABELLED, 300, epsilon=EPS, delta=DELTA)
    for model in two_fits:
        rep = model.privacy_report()
        assert [p["name"] for p in rep["phases"]] == [p.name for p in plan.phases] == ["counts", "groups", "one-way"]
        assert _phases(rep) == _plan_phases(plan)
        assert rep["epsilon"] == pytest.approx(plan.epsilon(), rel=1e-9)
        assert EPS - 2e-2 <= rep["epsilon"] <= EPS
        # the fitted configuration is the plan's, never rewritten; the released counts (the
        # output's shares) are a statistic of the release
        assert model.fitted_config == plan.config
        assert model.fitted_release.statistics["released_counts"] is not None


def test_accounted_phases_do_not_depend_on_the_label_counts(two_fits):
    a, b = (m.privacy_report() for m in two_fits)
    assert a["phases"] == b["phases"] and a["epsilon"] == b["epsilon"]
    assert a["epsilon_by_accountant"] == b["epsilon_by_accountant"]
    # ... while the released counts, and so the output's label shares, follow each table
    ca, cb = (m.fitted_release.statistics["released_counts"] for m in two_fits)
    assert abs(ca[0] - 150) < 100 and abs(cb[0] - 240) < 100 and ca != cb


def test_accounted_phases_with_a_public_n_do_not_depend_on_the_table():
    """With num_records=N the phases are those of plan(N) for tables of any size and label split."""
    zero = {**TINY, "epochs": 0.0, "em_iterations": 0}  # no training step: cheap fits
    plan = synthesizers.create("dp-syn", **zero).plan(LABELLED, 1000, epsilon=EPS)
    reports = [synthesizers.create("dp-syn", **zero).fit(
        _frame(n, share_p=s), LABELLED, epsilon=EPS, num_records=1000, seed=1).privacy_report()
        for n, s in ((300, 0.5), (200, 0.9))]
    for rep in reports:
        assert _phases(rep) == _plan_phases(plan)
        assert rep["epsilon"] == pytest.approx(plan.epsilon(), rel=1e-9)
    assert reports[0]["phases"] == reports[1]["phases"]
    rates = {v[0] for k, v in _plan_phases(plan).items() if k.startswith("autoencoder/")}
    assert rates == {float32_not_above(16, 500.0)}  # batch_size / (N / k), never a table's count


@pytest.mark.parametrize("shares, counts", [(None, None), ((3.0, 1.0), None), (None, (200.0, 50.0))])
def test_group_schedule_from_public_values(shares, counts):
    cfg = ds.for_schema(ds.DPSYNConfig(batch_size=16, epochs=2.5, group_shares=shares,
                                       group_counts=counts), LABELLED)
    n = 1000
    sizes = counts or ((n / 2, n / 2) if shares is None else (750.0, 250.0))
    assert ds.assumed_sizes(cfg, n) == pytest.approx(sizes, rel=1e-12)
    rates, steps = ds.group_schedule(cfg, n)
    for q, t, s in zip(rates, steps, sizes):
        assert q == float32_not_above(16, s) == privacy.batch_rate(16, s, float32=True)
        assert t == round(2.5 * s / 16)
    phases = ds.privacy_phases(cfg, n)
    assert [p.name for p in phases] == (["counts"] if counts is None else []) + ["groups"]


def test_the_plan_reads_no_data_and_the_model_keeps_no_hidden_state(two_fits):
    model = two_fits[0]
    assert not hasattr(model, "_names") and not hasattr(model, "_split")
    rep = model.privacy_report()
    steps = {k: v[2] for k, v in _phases(rep).items()}
    fresh = synthesizers.create("dp-syn", **TINY)  # another object: the phases come from public values alone
    phases = privacy.with_steps(fresh.plan(LABELLED, 300, epsilon=EPS, delta=DELTA).phases, steps)
    assert rep["epsilon"] == pytest.approx(privacy.epsilon(phases, DELTA), rel=1e-9)
    assert model.fitted_config.groups == ("p", "q")


@pytest.mark.slow  # a cut fit; tests/test_time_budget.py checks the cut schedules of every method
def test_time_budget_cuts_the_plan_and_calibrates_its_noise():
    from tests._budgets import above_minimum

    model = synthesizers.create("dp-syn", **{**TINY, "epochs": 5_000.0})
    frame = _frame(share_p=0.7)
    seconds = above_minimum(model, frame, LABELLED, epsilon=EPS, seed=2)
    with pytest.warns(UserWarning, match="cut the schedule"):
        model.fit(frame, LABELLED, epsilon=EPS, seed=2, max_seconds=seconds)
    plan = synthesizers.create("dp-syn", **{**TINY, "epochs": 5_000.0}).plan(LABELLED, 300, epsilon=EPS)
    rep = model.privacy_report()
    planned, executed = _plan_phases(plan), _phases(rep)
    assert all(executed[k][2] <= planned[k][2] for k in planned)
    assert any(executed[k][2] < planned[k][2] for k in planned)
    assert all(executed[k][0] == planned[k][0] for k in planned)  # the same rates
    assert rep["epsilon"] == pytest.approx(EPS, rel=1e-4)  # the noise calibrated to the cut
    assert any("noise was calibrated to the cut schedule" in a for a in rep["assumptions"])


def test_a_batch_above_the_assumed_group_size_is_refused_before_any_data():
    model = synthesizers.create("dp-syn", **{**TINY, "batch_size": 200})
    with pytest.raises(ValueError, match=r"batch_size=200"):
        model.plan(LABELLED, 300, epsilon=1.0)  # 300 / 2 rows per group < 200: refused without data
    with pytest.raises(ValueError, match=r"\['q'\].*group_shares"):
        synthesizers.create("dp-syn", **{**TINY, "group_shares": (0.95, 0.05)}).plan(
            LABELLED, 300, epsilon=1.0)


def test_configured_groups_must_be_the_schema_labels():
    with pytest.raises(ValueError, match=r"groups=\['x', 'y'\]"):
        synthesizers.create("dp-syn", **TINY, groups=("x", "y")).plan(LABELLED, 300, epsilon=1.0)
    with pytest.raises(ValueError, match="group_shares"):
        synthesizers.create("dp-syn", groups=("p", "q"), group_shares=(1.0, 2.0, 3.0))


def test_adult_default_schedule():
    """The default on Adult's public schema and N = 32,561 (the schedule docs/dp-syn.md quotes)."""
    plan = synthesizers.create("dp-syn").plan(data.adult_schema(), 32561, epsilon=1.01)
    ae = [p for p in privacy.flat_phases(plan.phases) if p.name.startswith("autoencoder/")]
    assert [p.name for p in ae] == ["autoencoder/<=50K", "autoencoder/>50K"]
    for p in ae:
        assert p.sample_rate == float32_not_above(16, 32561 / 2) and p.steps == 10175
    assert ae[0].noise_multiplier == ae[1].noise_multiplier
    assert 1.01 - 1e-4 <= plan.epsilon() <= 1.01
