"""The baselines' reproduction and the Table 2 assembly, end to end on tiny schedules.

``experiments.reproduce dp-wgan|dp-vae adult-like --quick`` runs on ``data.adult_like`` (the
public stand-in in Adult's format), so no Adult file is needed; the checks are on the files of the
experiment contract.
``experiments.adult_table2`` is run with ``--no-train`` on a finished run made here: it must
tabulate it without training (its data folder does not exist), leave the missing runs empty, and
refuse a folder holding another run.
"""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest

from dpgen_jax import data, metrics, synthesizers
from experiments import _common, adult_table2, reproduce

TRAIN_ROWS = 600  # the quick rows of adult-like
TINY = {"dp-vae": ["--set", "steps=4", "--set", "batch_size=32"],  # explicit values beat the preset
        "dp-wgan": ["--set", "critic_steps=4", "--set", "batch_size=32", "--set", "hidden=[8]",
                    "--set", "preprocessing=paper"]}


def _load(path):
    return json.loads(path.read_text(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


def _run(method, out, *extra, preset="paper-0.36", seeds=("0", "1")):
    return reproduce.main([method, "adult-like", "--quick", "--preset", preset, "--seeds", *seeds,
                           *TINY[method], *extra, "--no-progress", "--out", str(out)])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, xla_cache_home):
    """A finished tiny DP-WGAN run (paper preprocessing, two seeds) where Table 2 looks for it."""
    root = tmp_path_factory.mktemp("runs")
    with pytest.warns(UserWarning, match="keeps the configured"):
        _run("dp-wgan", root / "dp-wgan" / "paper-0.36")
    return root


def _check_run(folder, method):
    reports = {}
    for seed in (0, 1):
        d = folder / f"seed-{seed}"
        rep = _load(d / "report.json")
        assert set(rep) == set(_common.REPORT_KEYS) | {"columns", "argmax_decoding", "synthetic_rows"}
        assert rep["method"] == method and rep["seed"] == seed
        assert rep["dataset"] == "adult-like (quick)"
        assert rep["privacy"]["preset"] == folder.name and rep["target_epsilon"] is None
        assert any("preset's noise multiplier is the paper's" in a for a in rep["privacy"]["assumptions"])
        model = synthesizers.load(d / "model.npz")
        assert model.privacy_report() == rep["privacy"]
        assert rep["columns"] == model.schema.names
        synthetic = pd.read_csv(d / "synthetic.csv", dtype={"education-num": str})
        assert list(synthetic.columns) == rep["columns"] and len(synthetic) == TRAIN_ROWS
        data.TableEncoder(model.schema).encode(synthetic)
        assert _load(d / "metrics.json")["meta"]["columns"] == rep["columns"]
        for key in ("jsd", "kl_mu"):
            assert rep[key]["total"] == pytest.approx(sum(rep[key][f] for f in adult_table2.FEATURES))
            assert rep["argmax_decoding"][key]["total"] >= 0
        reports[seed] = rep
    summary = _load(folder / "summary.json")
    for key in ("jsd.total", "epsilon"):
        values = [reports[s] for s in (0, 1)]
        for part in key.split("."):
            values = [v[part] for v in values]
        assert summary["median"][key] == statistics.median(values)
    return reports


@pytest.mark.slow  # reads the experiment run of the runs fixture
def test_wgan_experiment_writes_the_contract_files_with_the_paper_columns(runs):
    reports = _check_run(runs / "dp-wgan" / "paper-0.36", "dp-wgan")
    assert reports[0]["columns"] == list(adult_table2._paper_columns())
    assert any("Preprocessing 'paper'" in a for a in reports[0]["privacy"]["assumptions"])


@pytest.mark.slow
def test_vae_experiment_writes_the_contract_files(tmp_path, xla_cache_home):
    with pytest.warns(UserWarning, match="keeps the configured"):
        _run("dp-vae", tmp_path / "paper-0.51", preset="paper-0.51")
    reports = _check_run(tmp_path / "paper-0.51", "dp-vae")
    assert reports[1]["columns"] == data.adult_schema().names


@pytest.mark.slow  # reads the experiment run of the runs fixture
def test_table2_reuses_finished_runs_without_training(runs, tmp_path):
    out = tmp_path / "table"
    results = adult_table2.main(["--out", str(out), "--runs", str(runs), "--seeds", "0", "1",
                                 "--methods", "dp-wgan", "--no-train",
                                 "--data-dir", str(tmp_path / "no-such-folder")])
    reps = [_load(runs / "dp-wgan" / "paper-0.36" / f"seed-{s}" / "report.json") for s in (0, 1)]
    med = results["dp-wgan"]["paper-0.36"]["median"]
    assert med["jsd.total"] == statistics.median(r["jsd"]["total"] for r in reps)
    assert med["kl_mu.marital-status"] == statistics.median(r["kl_mu"]["marital-status"] for r in reps)
    assert med["argmax_decoding.jsd.total"] == statistics.median(
        r["argmax_decoding"]["jsd"]["total"] for r in reps)
    assert results["dp-wgan"]["paper-0.51"] is None  # not run: nothing trained, nothing made up
    text = (out / "table2.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| jsd.total "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1].endswith("(1.29)") and cells[2] == "– (2.41)"  # ours (published)
    assert _load(out / "table2.json")["results"]["dp-wgan"]["paper-0.36"]["seeds"] == [0, 1]


@pytest.mark.slow  # reads the experiment run of the runs fixture
def test_table2_refuses_a_folder_holding_another_run(runs, tmp_path):
    wrong = tmp_path / "wrong"
    (wrong / "dp-vae").mkdir(parents=True)
    (wrong / "dp-vae" / "paper-0.36").symlink_to(runs / "dp-wgan" / "paper-0.36")
    with pytest.raises(ValueError, match="holds another run.*method 'dp-wgan'"):
        adult_table2.main(["--out", str(tmp_path / "t2"), "--runs", str(wrong), "--seeds", "0", "1",
                           "--methods", "dp-vae", "--no-train"])


def test_baseline_arguments_are_checked(tmp_path, capsys):
    for argv in (["--preset", "paper-0.36", "--out", str(tmp_path)],               # no method
                 ["dp-vae", "adult", "--preset", "paper-2", "--out", str(tmp_path)]):
        with pytest.raises(SystemExit) as info:
            reproduce.main(argv)
        assert info.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: method, dataset" in err
    assert "invalid choice: 'paper-2'" in err
    assert not any(tmp_path.iterdir())


def test_table2_reads_the_published_records_of_the_library():
    assert adult_table2.published_record("dp-wgan") is metrics.published.DP_WGAN_ADULT
    assert adult_table2.published_record("dp-syn").epsilons == (0.5, 0.8, 1.4)
    assert metrics.published.DP_WGAN_ADULT.at("jsd.total") == [1.29, 2.41, 0.73]
