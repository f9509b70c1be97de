"""The benchmark suite in quick mode: cells, resuming, failures, a user's dataset, the leaderboard."""

from __future__ import annotations

import json
import pathlib
import statistics

import pytest

from dpgen_jax import metrics, synthesizers
from experiments import _common, _leaderboard, benchmark

HAS_MST = synthesizers.get("mst").unavailable_reason() is None


def _load(path):
    return json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    methods = ["independent"] + (["mst"] if HAS_MST else [])
    benchmark.main(["--quick", "--methods", *methods, "--datasets", "tiny-mixed", "--dataset-module",
                    "tests._bench_datasets", "--seeds", "0", "1", "--epsilons", "2", "--out", str(out)])
    board = benchmark.main(["--quick", "--methods", "independent", "--datasets", "broken", "adult-like",
                            "--dataset-module", "tests._bench_datasets", "--epsilons", "1",
                            "--out", str(out)])
    return out, methods, board


def test_every_cell_writes_its_report(suite):
    out, methods, _ = suite
    for method in methods:
        for eps in (2,):
            for seed in (0, 1):
                d = benchmark.cell_dir(out, "tiny-mixed", method, eps, seed)
                rep = _load(d / "report.json")
                assert set(_common.REPORT_KEYS) <= set(rep)
                assert rep["method"] == method and rep["seed"] == seed and rep["target_epsilon"] == eps
                assert rep["epsilon"] <= eps and rep["accountant"] == synthesizers.get(method).ACCOUNTANT
                assert rep["benchmark"]["quick"] is True and rep["fit_seconds"] > 0
                assert set(rep["tv_1way"]["per_column"]) == {"a", "b", "c", "d"}
                assert {"synthetic.csv", "model.npz", "metrics.json"} <= {p.name for p in d.iterdir()}
    rep = _load(benchmark.cell_dir(out, "adult-like", "independent", 1, 0) / "report.json")
    assert 0 < rep["rf_salary_accuracy"] < 1 and rep["jsd"]["total"] >= 0


def test_failed_cells_are_recorded_and_listed(suite):
    out, methods, board = suite
    err = _load(benchmark.cell_dir(out, "broken", "independent", 1, 0) / "error.json")
    assert "ValueError" in err["error"] and "'d'" in err["error"]
    assert not (benchmark.cell_dir(out, "broken", "independent", 1, 0) / "report.json").exists()
    assert [(f["dataset"], f["method"]) for f in board["failed"]] == [("broken", "independent")]
    assert "## Failed cells" in (out / "leaderboard.md").read_text()


def test_leaderboard_medians_are_the_medians_of_the_cells(suite):
    out, methods, board = suite
    assert board == {**_load(out / "leaderboard.json"), "plots": board["plots"]}
    assert len(board["cells"]) == len(methods) * 2 + 1
    for row in board["rows"]:
        cells = [c for c in board["cells"] if (c["dataset"], c["method"], c["target_epsilon"]) ==
                 (row["dataset"], row["method"], row["target_epsilon"])]
        assert row["seeds"] == sorted(c["seed"] for c in cells)
        for key in ("epsilon", "tv_mean", "l1_3way", "fit_seconds"):
            assert row[key] == statistics.median(c[key] for c in cells), key
    md = (out / "leaderboard.md").read_text()
    assert "## tiny-mixed" in md and "## adult-like" in md and "CPU cores" in md
    assert "Commands that produced the cells" in md and "--dataset-module tests._bench_datasets" in md
    assert (out / "plots" / "tiny-mixed-tv_mean.png").exists()
    assert (out / "plots" / "adult-like-rf_accuracy.png").exists()


def test_a_rerun_resumes_from_finished_cells(suite, capsys):
    out, methods, _ = suite
    report = benchmark.cell_dir(out, "adult-like", "independent", 1, 0) / "report.json"
    before = report.stat().st_mtime_ns
    benchmark.main(["--quick", "--methods", "independent", "--datasets", "adult-like", "--epsilons", "1",
                    "--out", str(out)])
    assert "1 already done, 0 to run" in capsys.readouterr().out
    assert report.stat().st_mtime_ns == before


def test_published_rows_are_the_papers_numbers():
    rows = _leaderboard.published_rows({"adult"})
    dag = {r["target_epsilon"]: r for r in rows if r["method"] == "dp-auto-gan"}
    assert dag[0.36]["rf_accuracy"] == 0.7466 and dag[1.01]["jsd_total"] == 0.19
    assert dag[0.51]["kl_mu_total"] == metrics.published.DP_AUTO_GAN_ADULT.values["kl_mu.total"][0.51]


@pytest.mark.parametrize("argv, match", [
    (["--set", "independent:bins"], "expected FIELD=VALUE"),
    (["--set", "nosuch:bins=3"], "METHOD:FIELD=VALUE"),
    (["--datasets", "nosuch"], "unknown dataset"),
    (["--epsilons", "0"], "expected --epsilons to be a finite number > 0, got --epsilons=0.0."),
])
def test_bad_arguments_are_refused(tmp_path, capsys, argv, match):
    with pytest.raises(SystemExit):
        benchmark.main(["--quick", "--methods", "independent", *argv, "--out", str(tmp_path)])
    assert match in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_merge_adds_a_run_to_a_committed_leaderboard_without_the_other_runs(suite, tmp_path):
    """A committed board (its run folders gone) plus a new run folder gives the board of all the
    cells; a cell of the run replaces the committed one, and failed cells follow."""
    import shutil

    out, methods, _ = suite
    full = _load(out / "leaderboard.json")
    run = tmp_path / "run"  # the new run: the tiny-mixed independent cells only
    shutil.copytree(out / "tiny-mixed" / "independent", run / "tiny-mixed" / "independent")
    new = [c for c in full["cells"] if (c["dataset"], c["method"]) == ("tiny-mixed", "independent")]
    assert len(new) == 2
    stale = {**new[0], "rf_accuracy": -1.0}  # committed from an older run: replaced by the merge
    committed = tmp_path / "docs"
    committed.mkdir()
    old_cells = [c for c in full["cells"] if c not in new] + [stale]
    _common.write_json(committed / "leaderboard.json",
                       {**full, "cells": old_cells, "commands": ["an older command"]})
    board = _leaderboard.merge(committed, run, "merge-command")
    assert board == _load(committed / "leaderboard.json")
    assert board["cells"] == full["cells"] and board["rows"] == full["rows"]  # order and medians as write()
    assert board["failed"] == full["failed"] and board["published"] == full["published"]
    assert board["command"] == "merge-command" and board["commands"][0] == "an older command"
    assert set(board["commands"][1:]) == {c for c in full["commands"] if "tiny-mixed" in c}
    md = (committed / "leaderboard.md").read_text()
    assert "by `merge-command`" in md and "## tiny-mixed" in md and "## adult-like" in md
    (run / "broken" / "independent" / "eps-1" / "seed-0").mkdir(parents=True)  # a failed cell of the run
    shutil.copy(benchmark.cell_dir(out, "broken", "independent", 1, 0) / "error.json",
                run / "broken" / "independent" / "eps-1" / "seed-0" / "error.json")
    _common.write_json(committed / "leaderboard.json", {**full, "failed": []})
    again = _leaderboard.merge(committed, run, "merge-command")
    assert again["failed"] == full["failed"] and again["cells"] == full["cells"]


def test_readme_tables_are_generated_from_the_committed_leaderboard():
    """The README's reproduction tables are exactly the committed grid's summary tables (regenerate
    with ``python -m experiments._leaderboard --readme README.md`` after a merge)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    board = json.loads((root / "docs" / "results" / "leaderboard.json").read_text())
    text = (root / "README.md").read_text()
    assert _leaderboard.README_START.format(dataset="adult") in text
    assert _leaderboard.update_readme(text, board) == text


def test_every_committed_epsilon_is_labelled_with_its_own_accountant():
    """Each row of the committed grid prints its epsilon with the accountant that produced it
    (a sharded method's exact proven bound is "proven", not "rdp")."""
    root = pathlib.Path(__file__).resolve().parents[1]
    board = json.loads((root / "docs" / "results" / "leaderboard.json").read_text())
    lines = (root / "docs" / "results" / "leaderboard.md").read_text().splitlines()
    assert {r["accountant"] for r in board["rows"]} >= {"pld", "rdp", "proven"}
    for r in board["rows"]:
        label = f"| {_leaderboard._fmt(r['epsilon'], 4)} ({r['accountant']}) |"
        assert any(line.startswith(f"| {r['method']} |") and label in line for line in lines), r["method"]


def test_update_readme_replaces_only_marked_tables_and_refuses_bad_markers():
    board = {"rows": [], "published": []}
    row = {"dataset": "toy", "method": "m", "target_epsilon": 1.0, "epsilon": 1.0, "accountant": "pld",
           "seeds": [0], "rf_accuracy": 0.5, "jsd_total": 0.1, "tv_continuous": None, "l1_3way": 0.2,
           "tstr_auroc": 0.6, "fit_seconds": 3.0}
    board["rows"].append(row)
    start, end = (m.format(dataset="toy") for m in (_leaderboard.README_START, _leaderboard.README_END))
    text = "\n".join(["intro", start, "| stale |", end, "outro | untouched |"])
    new = _leaderboard.update_readme(text, board)
    assert new.split("\n")[0] == "intro" and new.split("\n")[-1] == "outro | untouched |"
    assert "| stale |" not in new
    assert "| m | 1.00 | 1.000 (pld) | 1 | 0.500 | 0.100 | — | 0.200 | 0.600 | 3.0 |" in new
    assert _leaderboard.update_readme(new, board) == new
    with pytest.raises(ValueError, match="without its end marker"):
        _leaderboard.update_readme("\n".join([start, "| x |"]), board)
    other = _leaderboard.README_START.format(dataset="nope")
    with pytest.raises(ValueError, match="'nope'"):
        _leaderboard.update_readme("\n".join([other, _leaderboard.README_END.format(dataset="nope")]), board)


def test_resume_fits_continues_a_stopped_fit_to_the_rows_of_an_unstopped_one(tmp_path):
    """A cell whose fit stopped mid-way (here: paused by a time budget after its first chunk, as a
    killed run leaves its checkpoints) is continued by ``--resume-fits`` to the same release as a
    fit that ran through; the secret checkpoints are deleted once the fit ends."""
    import pandas as pd
    argv = ["--quick", "--methods", "dp-vae", "--datasets", "tiny-mixed", "--dataset-module",
            "tests._bench_datasets", "--epsilons", "2", "--seeds", "0"]
    benchmark.main([*argv, "--out", str(tmp_path / "through")])
    cell = benchmark.cell_dir(tmp_path / "stopped", "tiny-mixed", "dp-vae", 2, 0)
    ds = benchmark.DATASETS["tiny-mixed"]
    train, _ = ds.load(None, True)
    smoke, _ = _common.quick_schedule("dp-vae")
    with pytest.raises(synthesizers.FitPaused):
        synthesizers.create("dp-vae", **smoke).fit(train, ds.schema_for(True), epsilon=2.0, delta=1e-5,
                                                   seed=0, checkpoint_dir=cell / "checkpoint", max_seconds=1e-9)
    assert any((cell / "checkpoint").iterdir())
    benchmark.main([*argv, "--resume-fits", "--out", str(tmp_path / "stopped")])
    report = _load(cell / "report.json")
    assert report["benchmark"]["fit_resumed"] is True and not (cell / "checkpoint").exists()
    through = benchmark.cell_dir(tmp_path / "through", "tiny-mixed", "dp-vae", 2, 0)
    assert _load(through / "report.json")["benchmark"]["fit_resumed"] is False
    pd.testing.assert_frame_equal(pd.read_csv(cell / "synthetic.csv"), pd.read_csv(through / "synthetic.csv"))


def test_a_time_budget_marks_the_cells_it_cut(tmp_path):
    """``--max-fit-seconds`` gives every fit that budget (here over ``--quick``'s own); a cell whose schedule it cut says
    ``capped`` in its report, its leaderboard row and the advice's evidence, and a cell it did not
    cut does not."""
    from dpgen_jax.advice import _evidence
    from dpgen_jax.advice._datasets import BenchmarkDataset
    from tests import _bench_datasets  # noqa: F401  (registers tiny-mixed)
    from tests._budgets import above_minimum
    argv = ["--quick", "--datasets", "tiny-mixed", "--dataset-module", "tests._bench_datasets", "--epsilons", "2",
            "--seeds", "0", "--methods", "dp-vae"]
    # A budget two seconds above both methods' minimum (a smaller one is refused), which cuts
    # DP-VAE's long schedule; the minima are measured as the cells' fits measure them.
    train, _ = benchmark.DATASETS["tiny-mixed"].load(None, True)
    schema = benchmark.DATASETS["tiny-mixed"].schema_for(True)
    long_vae = {**_common.quick_schedule("dp-vae")[0], "steps": 300_000}
    budget = max(above_minimum(synthesizers.create(m, **overrides), train, schema, 2.0, epsilon=2.0,
                               delta=1e-5, seed=0)
                 for m, overrides in (("dp-vae", long_vae), ("independent", _common.quick_schedule("independent")[0])))
    benchmark.main([*argv, "independent", "--set", "dp-vae:steps=300000", "--max-fit-seconds", repr(budget),
                    "--out", str(tmp_path / "capped")])
    rep = _load(benchmark.cell_dir(tmp_path / "capped", "tiny-mixed", "dp-vae", 2, 0) / "report.json")
    assert rep["benchmark"]["capped"] is True and rep["benchmark"]["max_fit_seconds"] == budget
    assert any("noise was calibrated to the cut schedule" in a for a in rep["privacy"]["assumptions"])
    board = _load(tmp_path / "capped" / "leaderboard.json")
    board["cells"] = [c for c in board["cells"] if c["method"] == "dp-vae"]
    assert [c["capped"] for c in board["cells"]] == [True]
    assert "1 (1 capped)" in (tmp_path / "capped" / "leaderboard.md").read_text()
    facts = {"tiny-mixed": BenchmarkDataset("tiny-mixed", "", benchmark.DATASETS["tiny-mixed"].schema,
                                            num_records=300, majority_rate=0.5, source="a test")}
    cells = [{**c, "quick": False} for c in board["cells"]]  # quick cells are never evidence
    evidence = _evidence.build_evidence({**board, "cells": cells}, datasets=facts, plans=False)
    assert [c["capped"] for c in evidence["cells"]] == [True]
    # independent has nothing a budget can cut (one Gaussian release)
    assert _load(benchmark.cell_dir(tmp_path / "capped", "tiny-mixed", "independent", 2, 0)
                 / "report.json")["benchmark"]["capped"] is False
    with pytest.raises(SystemExit):  # the budget would pause a checkpointed fit instead of cutting it
        benchmark.main([*argv, "--resume-fits", "--max-fit-seconds", "5", "--out", str(tmp_path / "refused")])
