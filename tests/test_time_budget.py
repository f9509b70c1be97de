"""Time budgets that hold.

``fit(max_seconds=...)`` without ``checkpoint_dir`` fixes the units each phase may run before any
private row is read (``_budget.measure`` sets a ``_progress.TimeBudget``, docs/privacy.md "Time
budget"). Checked here:

* every registered method, its schedule enlarged, under a budget a second above its minimum: the
  cut schedule is planned before any row is read and runs as planned, its noise calibrated to it
  so that the epsilon of the executed phases is the target (MST's cut is its final estimate);
  a preset keeps its noise (the tests of every method refuse a budget below the minimum);
* two private tables of different row counts with the same public facts (schema, N, method,
  budget) execute the same steps, those the budget fixed in advance;
* the allocation of the budget (earlier phases first, chunks shortened) against a hand count;
* the host loop asks its stop test once the chunk has run, not when it was dispatched (the cause
  of a budget that did not stop DP-auto-GAN on a wide table);
* the progress bar of a phase that counts rounds, stopped early, ends at the epsilon given.
"""

from __future__ import annotations

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import pytest

from dpgen_jax import data, dpsgd, privacy, synthesizers
from dpgen_jax.synthesizers import _budget, _progress
from tests import _tables

pytestmark = pytest.mark.usefixtures("persistent_compilation_cache")  # tests/conftest.py

# The contract tests' mixed table with a label (DP-SYN partitions by it).
SCHEMA = data.Schema(tuple(dataclasses.replace(c, label=(c.name == "b"))
                           for c in _tables.MIXED_SCHEMA.columns))
FRAME = _tables.mixed_frame(300, 3)
EPSILON = 10.0
STOPPED_BY = "before any private row was read"

# Each method's SMOKE schedule, enlarged so that a budget a little above its minimum cuts it.
ENLARGED = {
    "aim": dict(max_rounds=60),
    "dp-auto-gan": dict(ae_steps=100_000, critic_steps=100_000),
    "dp-sactgan": dict(generator_steps=20_000),
    "dp-syn": dict(epochs=5_000.0),
    "dp-vae": dict(steps=100_000),
    "dp-wgan": dict(critic_steps=100_000),
    "gem": dict(max_rounds=200),
    "gs-wgan": dict(pretrain_iterations=6_000, generator_steps=100_000),
    "independent": {},
    "mst": dict(estimation_iters=100_000),
}


def test_every_method_has_an_enlarged_schedule():
    assert sorted(ENLARGED) == sorted(synthesizers.available())


# One method with a DP-SGD phase, and MST, run in the default suite; the others with -m slow.
SLOW = {m for m in ENLARGED if m not in ("dp-vae", "mst")}


def _planned(model) -> dict:
    return {p.name: p.steps for p in privacy.flat_phases(list(model.fitted_plan.phases))}


def _minimum(model, plan) -> float:
    """The least budget of ``plan`` (its stand-in timed once, kept for the process)."""
    return _budget.minimum(model, plan)


@pytest.mark.parametrize("method", [pytest.param(m, marks=[pytest.mark.slow] if m in SLOW else [])
                                    for m in sorted(synthesizers.available())])
def test_a_cut_schedule_runs_as_planned_and_spends_the_target(method):
    # A budget a second above the minimum: the cut is planned before any row is read, the noise
    # calibrated to it; the executed steps are the cut plan's, and the epsilon recomputed from the
    # executed phases (dp_accounting, through privacy.epsilon) is the target.
    cls = synthesizers.get(method)
    model = synthesizers.create(method, **{**cls.SMOKE, **ENLARGED[method]})
    plan = model._plan(SCHEMA, synthesizers.RecordCount(len(FRAME), public=False), epsilon=EPSILON,
                       delta=1e-5, preset=None, max_seconds=1.0, seeded=True)
    uncut = {p.name: p.steps for p in privacy.flat_phases(list(plan.phases))}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(FRAME, SCHEMA, epsilon=EPSILON, seed=0, max_seconds=_minimum(model, plan) + 1.0)
    executed = {p.name: p.steps for p in privacy.flat_phases(model.fitted_phases())}
    planned, report = _planned(model), model.privacy_report()
    assert executed == planned  # the cut plan ran as planned
    assert report["epsilon"] == pytest.approx(EPSILON, rel=1e-4)
    assert privacy.epsilon(model.fitted_phases(), report["delta"], accountant=report["accountant"]) \
        == pytest.approx(EPSILON, rel=1e-4)
    cut = model.fitted_plan.uncut_steps
    if cut:
        assert all(planned[n] < steps == uncut[n] for n, steps in cut.items())
        assert any("noise was calibrated to the cut schedule" in a for a in report["assumptions"])
        assert any("cut the schedule" in str(w.message) for w in caught)
    if method == "mst":  # one pass of measurements: the budget cuts its final estimate only
        assert not cut
        assert any("estimate" in str(w.message) and "cut unaccounted work" in str(w.message)
                   for w in caught)
        assert any("'estimate': (" in a for a in report["assumptions"])


def test_a_preset_keeps_its_noise_when_the_budget_cuts():
    model = synthesizers.create("dp-vae", steps=100_000, batch_size=16)
    full = model._plan(SCHEMA, synthesizers.RecordCount(len(FRAME), public=False), epsilon=None,
                       delta=1e-5, preset="paper-1.01", max_seconds=1.0, seeded=True)
    with pytest.warns(UserWarning, match="cut the schedule"):
        model.fit(FRAME, SCHEMA, preset="paper-1.01", seed=0, max_seconds=_minimum(model, full) + 1.0)
    noise = {p.name: p.noise_multiplier for p in privacy.flat_phases(list(full.phases))
             if hasattr(p, "noise_multiplier")}
    assert {p.name: p.noise_multiplier for p in model.fitted_phases() if p.name in noise} == noise
    report = model.privacy_report()
    assert report["epsilon"] < full.epsilon()
    assert any("preset's noise multipliers were kept" in a for a in report["assumptions"])


def test_the_executed_steps_do_not_depend_on_the_private_row_count():
    # Same public facts (schema, public N, method, configuration, budget), two private tables of
    # 240 and 420 rows: the budget fixes the same steps before either is read.
    n_public = 500
    model = synthesizers.create("dp-vae", steps=100_000, batch_size=16, clip_norm=0.5)
    plan = dataclasses.replace(model.plan(SCHEMA, n_public, epsilon=EPSILON), max_seconds=1.0)
    budget_seconds = _minimum(model, plan) + 0.5  # half a second of steps
    budget, flags = _budget.measure(model, plan, budget_seconds)
    (name, cap), = budget.caps.items()
    assert name == "vae" and 0 < cap < 100_000
    assert flags.chunk_size < synthesizers.get("dp-vae").FLAGS.chunk_size  # a twentieth at most
    executed = []
    for rows, seed in ((240, 1), (420, 2)):
        with pytest.warns(UserWarning, match="cut the schedule"):
            model.fit(_tables.mixed_frame(rows, seed), SCHEMA, epsilon=EPSILON, seed=seed,
                      num_records=n_public, max_seconds=budget_seconds)
        executed.append(model.fitted_release.steps["vae"])
        assert any(STOPPED_BY in a for a in model.privacy_report()["assumptions"])
        assert model.privacy_report()["epsilon"] == pytest.approx(EPSILON, rel=1e-4)
    assert executed == [cap, cap]


def test_the_budget_runs_earlier_phases_first_and_shortens_chunks():
    measured = _budget._Measurement(
        phases=(_budget._PhaseTiming("a", first=1.0, per_unit=0.01, total=100),
                _budget._PhaseTiming("b", first=1.0, per_unit=0.1, total=50),
                _budget._PhaseTiming("c", first=0.5, per_unit=0.1, total=None)),
        fixed=2.0, probe=1.0)
    flags = synthesizers.Flags(chunk_size=1000)
    # 5 s: 2 s after the probe and the fixed costs; "a" takes 100 x 0.01 = 1 s, "b" 10 of its 50
    # units with the second, "c" none. The slowest unit is 0.1 s: chunks of 0.05 x 5 / 0.1 = 2.
    budget, run_flags = measured.budget(5.0, flags)
    assert budget.caps == {"b": 10, "c": 0}
    assert run_flags == synthesizers.Flags(chunk_size=2)
    # A budget the probe alone exceeds: every phase stops after its first chunk.
    budget, _ = measured.budget(2.5, flags)
    assert budget.caps == {"a": 0, "b": 0, "c": 0}
    # A generous budget cuts nothing that reports its total.
    budget, run_flags = measured.budget(100.0, flags)
    assert "a" not in budget.caps and "b" not in budget.caps
    assert run_flags == synthesizers.Flags(chunk_size=50)


def test_the_stop_test_counts_reported_units_or_questions():
    budget = _progress.TimeBudget({"steps": 8, "rounds": 2})
    report, stop = budget.progress("steps", None), budget.stop("steps")
    report(4, 20)
    assert not stop()
    report(8, 20)
    assert stop()
    rounds = budget.stop("rounds")  # a phase that reports nothing: its questions count
    assert [rounds(), rounds()] == [False, True]
    unnamed = budget.stop()  # asks for the phase that last reported
    assert unnamed()


def test_the_host_loop_asks_its_stop_test_once_the_chunk_has_run():
    @jax.jit
    def slow(x):
        return jax.lax.fori_loop(0, 40, lambda _, y: jnp.tanh(y @ y), x)

    outputs, ready = [], []

    def run_chunk(state, done, n):
        outputs.append(slow(state))
        return outputs[-1]

    def should_stop():
        ready.append(outputs[-1].is_ready())
        return False

    slow(jnp.eye(400)).block_until_ready()  # compiled
    dpsgd.run_chunks(run_chunk, jnp.eye(400) * 0.5, 4, 1, should_stop=should_stop)
    assert ready == [True, True, True]


def test_a_progress_bar_of_rounds_stopped_early_ends_at_the_epsilon_given(capsys):
    plan = synthesizers.create("dp-vae", **synthesizers.get("dp-vae").SMOKE).plan(
        SCHEMA, 400, epsilon=EPSILON)
    bar = _progress.Progress(True, plan)
    update = bar.phase("measure", unit="round")
    update(1, 10)
    update(3, 10)  # the method stopped after 3 of its 10 rounds
    bar.close(epsilon=0.25)
    err = capsys.readouterr().err
    assert "3/10" in err and "round" in err
    assert "eps(pld)=0.250 spent" in err
    # No open bar: the epsilon spent gets a line of its own.
    bar.close(epsilon=0.5)
    assert "eps(pld)=0.500 spent" in capsys.readouterr().err


def _four_columns(correlated: bool, rows: int = 2000, seed: int = 0):
    """Four categorical columns of 4 values: independent uniform, or four copies of one column."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    first = rng.integers(0, 4, rows)
    cols = [first if correlated else rng.integers(0, 4, rows) for _ in range(4)]
    schema = data.Schema.from_dict({"columns": [
        {"name": f"c{j}", "kind": "categorical", "categories": [str(v) for v in range(4)]}
        for j in range(4)]})
    return pd.DataFrame({f"c{j}": c.astype(str) for j, c in enumerate(cols)}), schema


@pytest.mark.parametrize("method, config", [
    ("aim", dict(bins=4, max_rounds=12, round_iters=100, estimation_iters=100)),
    ("gem", dict(max_rounds=12, anneal=True, measurements_per_round=1, round_steps=20,
                 final_steps=20, calibrate_iterations=0)),
    # no max_rounds and no num_records: the units split by the one-way release's released total
    ("gem", dict(round_steps=20, final_steps=20, calibrate_iterations=0)),
])
def test_annealed_rounds_under_a_cap_spend_the_same_units_on_every_table(monkeypatch, method, config):
    """A round's units follow earlier DP outputs (AIM's annealing quadruples them; GEM's split
    follows the released total), so a stop test
    between rounds would make the units spent, and the printed epsilon, follow the data. Under a
    public cap of 2 units the rounds must spend exactly 2 on an independent table and on a
    correlated one (where the old loop ran [1, 4] on one and [1, 1] on the other), and print the
    same epsilon, never above the target."""
    monkeypatch.setattr(_budget, "measure", lambda model, plan, max_seconds, mesh=None:
                        (_progress.TimeBudget({"measure": 2}), plan.flags))
    epsilons, rounds = [], []
    for correlated in (False, True):
        frame, schema = _four_columns(correlated)
        model = synthesizers.create(method, **config)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(frame, schema, epsilon=1.0, seed=0, max_seconds=5.0)
        steps = model.fitted_release.steps
        assert steps["selection"] == steps["measure"] == 2
        executed = model.fitted_release.diagnostics["rounds"]
        assert sum(r.units for r in executed) == 2
        rounds.append([r.units for r in executed])
        epsilons.append(model.privacy_report()["epsilon"])
        assert any("capped" in a for a in model.fitted_release.notes)
    assert epsilons[0] == epsilons[1] <= 1.0
