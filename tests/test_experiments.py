"""The experiment entry points, end to end on tiny schedules.

Each run writes real files; the checks are on their structure and consistency: exactly the
report keys of the experiment contract (``experiments._common.REPORT_KEYS``), per-seed folders and a summary whose medians are the medians of the
per-seed values, a privacy report equal to the saved model's, synthetic rows that re-encode under
the schema, and JSON that a strict parser (no NaN / Infinity) accepts.
"""

from __future__ import annotations

import json
import math
import pathlib
import statistics
import subprocess
import sys

import pandas as pd
import pytest

from dpgen_jax import data, metrics, privacy

ROOT = pathlib.Path(__file__).resolve().parents[1]

from experiments import _common

ADULT_REPORT_KEYS = set(_common.REPORT_KEYS) | {"synthetic_rows"}
MIMIC_REPORT_KEYS = ADULT_REPORT_KEYS | {
    "probability_mean_abs_diff", "prediction_mean_abs_diff", "prediction_features_scored", "excluded"}
THROUGHPUT_ROW_KEYS = {
    "framework", "method", "model", "batch_size", "ms_per_step_median", "ms_per_step_p10",
    "ms_per_step_p90", "compile_seconds", "includes_sampling",
}


def _reject_constant(name: str):
    raise ValueError(f"non-standard JSON constant {name!r}")


def _strict_load(path: pathlib.Path):
    """json.loads that refuses NaN, Infinity and -Infinity."""
    return json.loads(path.read_text(), parse_constant=_reject_constant)


def _all_json_strict(folder: pathlib.Path) -> list[pathlib.Path]:
    files = sorted(folder.rglob("*.json"))
    for f in files:
        _strict_load(f)
    return files


def _check_summary(out: pathlib.Path, seeds: list[int], reports: dict[int, dict], keys) -> dict:
    summary = _strict_load(out / "summary.json")
    assert summary["seeds"] == seeds
    for key in keys:
        per_seed = summary["per_seed"][key]
        assert set(per_seed) == {str(s) for s in seeds}
        for s in seeds:
            node = reports[s]
            for part in key.split("."):
                node = node[part]
            assert per_seed[str(s)] == node, (key, s)
        values = [v for v in per_seed.values() if v is not None]
        expected = statistics.median(values) if values else None
        assert summary["median"][key] == expected, key
    return summary


# --------------------------------------------------------------------------------------------
# MIMIC-like binary data (slow): non-private, two seeds
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mimic_run(tmp_path_factory, xla_cache_home):
    from experiments import reproduce

    out = tmp_path_factory.mktemp("mimic_like")
    summary = reproduce.main([
        "dp-auto-gan", "mimic-like", "--quick", "--epsilon", "inf", "--seeds", "0", "1",
        "--set", "ae_steps=4", "--set", "critic-steps=5", "--no-progress", "--out", str(out)])
    return out, summary


@pytest.mark.slow  # an experiment run (two seeds with their evaluation)
def test_mimic_like_experiment_writes_its_outputs(mimic_run):
    out, summary = mimic_run
    files = _all_json_strict(out)
    assert out / "summary.json" in files
    schema = data.binary_schema(12)
    reports = {}
    for seed in (0, 1):
        d = out / f"seed-{seed}"
        report = _strict_load(d / "report.json")
        assert set(report) == MIMIC_REPORT_KEYS
        assert report["method"] == "dp-auto-gan" and report["seed"] == seed
        assert report["dataset"] == "mimic-like (quick)"  # 1,000 rows x 12 columns
        assert report["rf_salary_accuracy"] is None and report["tstr_auroc"] is None
        assert report["paper_accounting"] is None
        # Non-private: every epsilon is null, never Infinity.
        assert report["target_epsilon"] is None and report["epsilon"] is None
        assert report["epsilon_paper_accounting"] is None
        assert report["privacy"]["non_private"] is True
        assert [(p["name"], p["steps"]) for p in report["privacy"]["phases"]] == [
            ("autoencoder", 4), ("critic", 5), ("one-way", 1)]
        assert set(report["train_seconds"]) == {"autoencoder", "gan"}
        assert report["wall_seconds"] >= sum(report["train_seconds"].values()) > 0
        assert 0 <= report["probability_mean_abs_diff"] <= 1
        synthetic = pd.read_csv(d / "synthetic.csv")
        assert len(synthetic) == 200  # as many as the test split: the next 20 % of 1,000 rows
        assert data.TableEncoder(schema).encode(synthetic).shape == (200, 12)
        assert "dimension_wise_probability" in _strict_load(d / "metrics.json")
        assert {"dimension_wise.png", "dimension_wise_probability.png"} <= {
            p.name for p in d.glob("*.png")}
        reports[seed] = report
    s = _check_summary(out, [0, 1], reports, (
        "epsilon", "probability_mean_abs_diff", "prediction_mean_abs_diff", "wall_seconds"))
    assert s["median"]["epsilon"] is None
    assert summary == s


def test_experiment_arguments_are_checked(tmp_path, capsys):
    from experiments import reproduce

    for argv in (["--epsilon", "0", "--out", str(tmp_path)],
                 ["--epsilon", "-1", "--out", str(tmp_path)],
                 ["--epsilon", "1", "--preset", "paper-1.01", "--out", str(tmp_path)],
                 ["--preset", "paper-0.81", "--out", str(tmp_path)],  # a binary preset
                 ["--epsilon", "1"],                                  # no --out
                 ["--epsilon", "1", "--set", "critic_stepz=4", "--out", str(tmp_path)],
                 ["--epsilon", "1", "--set", "critic_steps", "--out", str(tmp_path)]):
        with pytest.raises(SystemExit) as info:
            reproduce.main(["dp-auto-gan", "adult", *argv])
        assert info.value.code == 2
    for argv in (["dp-auto-gan", "mimic-like", "--preset", "paper-1.01"],  # an Adult preset
                 ["dp-gan", "adult", "--epsilon", "1"], ["dp-vae", "mimic", "--epsilon", "1"],
                 ["dp-vae", "adult", "--epsilon", "1", "--set", "critic_steps=3"]):
        with pytest.raises(SystemExit) as info:
            reproduce.main([*argv, "--out", str(tmp_path)])
        assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error: expected --epsilon to be a number > 0 or inf, got --epsilon=0.0." in err
    assert "got --epsilon=-1.0." in err
    assert "not allowed with argument" in err
    assert "invalid choice: 'paper-0.81'" in err and "invalid choice: 'paper-1.01'" in err
    assert "invalid choice: 'dp-gan'" in err and "invalid choice: 'mimic'" in err
    assert "has no field 'critic_stepz'" in err and "expected FIELD=VALUE" in err
    assert "has no field 'critic_steps'" in err
    assert not any(tmp_path.iterdir())  # nothing was written


def test_quick_reproduction_reads_the_smoke_schedule(tmp_path, xla_cache_home):
    """``--quick``: the method's smoke schedule (its SMOKE, the user's --set on top) on the
    dataset's quick rows; published numbers beside ours where the paper reports the pair."""
    from dpgen_jax import synthesizers
    from experiments import reproduce

    out = tmp_path / "vae"
    rep = reproduce.main(["dp-vae", "adult-like", "--quick", "--epsilon", "1", "--seeds", "0",
                          "--set", "steps=6", "--no-progress", "--out", str(out)])
    smoke = synthesizers.get("dp-vae").SMOKE
    assert [p["steps"] for p in rep["privacy"]["phases"]] == [6, 1]  # and the one-way release
    assert rep["privacy"]["phases"][0]["batch_size"] == smoke["batch_size"]
    assert rep["dataset"] == "adult-like (quick)" and rep["columns"] == data.adult_schema().names
    assert len(pd.read_csv(out / "synthetic.csv")) == 600
    assert rep["synthetic_rows"]["n"] == 600 and rep["synthetic_rows"]["public"] is False  # quick rows
    assert rep["argmax_decoding"]["jsd"]["total"] >= 0
    assert reproduce.published_record("dp-vae", "adult") is metrics.published.DP_VAE_ADULT
    assert reproduce.published_record("dp-auto-gan", "adult") is metrics.published.DP_AUTO_GAN_ADULT
    assert reproduce.published_record("dp-vae", "adult-like") is None


def test_harnesses_sample_the_public_n_and_say_when_the_count_is_not_public(tmp_path, xla_cache_home):
    """Synthetic rows as many as the training rows would publish n: a run samples the public N
    given to the fit, else the dataset's documented training rows, else says the count is not
    public (issue 63, item 6)."""
    import argparse

    from experiments import reproduce
    from experiments.studies import missing_values

    spec = _common.RunSpec("independent", epsilon=1.0)
    assert _common.documented_records("adult") == 32561 and _common.documented_records("adult", quick=True) is None
    assert _common.documented_records("mimic-like") is None
    assert _common.synthetic_rows(spec, 123, 32561) == {
        "n": 32561, "public": True, "source": "the dataset's documented number of training rows"}
    given = _common.synthetic_rows(_common.RunSpec("independent", num_records=40000), 123, 32561)
    assert given["n"] == 40000 and given["public"] is True
    hidden = _common.synthetic_rows(spec, 123)
    assert hidden["n"] == 123 and hidden["public"] is False and "not declared public" in hidden["source"]
    # a generated table with a documented size (full mode, no fit): its N, not a count of rows
    run = reproduce.reproduction(spec, "adult-like-500", None, quick=False)
    assert len(run.train) == 500 and run.n_samples == 500 and run.synthetic_rows["public"] is True
    args = argparse.Namespace(dataset="adult-like", adult_like_rows=900, gaps=0.0, columns=None, data_dir=None)
    assert missing_values.train_rows(args) == len(missing_values.load(args)[0]) == 600
    assert missing_values.train_rows(argparse.Namespace(dataset="adult")) == 32561
    # end to end: --num-records N samples N rows (not the 600 quick rows) and the report says so
    out = tmp_path / "n"
    rep = reproduce.main(["independent", "adult-like", "--quick", "--epsilon", "1", "--seeds", "0",
                          "--num-records", "700", "--no-progress", "--out", str(out)])
    assert len(pd.read_csv(out / "synthetic.csv")) == 700
    assert rep["synthetic_rows"] == {"n": 700, "public": True, "source": "the public num_records N given to the fit"}
    assert _strict_load(out / "report.json")["synthetic_rows"] == rep["synthetic_rows"]


# --------------------------------------------------------------------------------------------
# Adult (slow: the full evaluation fits an 800-tree forest on 32,561 rows per seed)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_adult_experiment_end_to_end(adult_dir, tmp_path, xla_cache_home):
    from dpgen_jax import synthesizers
    from experiments import reproduce

    out = tmp_path / "adult"
    reproduce.main([
        "dp-auto-gan", "adult", "--epsilon", "1.0", "--seeds", "0", "1", "--set", "ae_steps=20", "--set", "critic_steps=20",
        "--set", "ae_clip_norm=0.05", "--no-progress", "--data-dir", str(adult_dir), "--out", str(out)])
    _all_json_strict(out)
    schema = data.adult_schema()
    reports = {}
    for seed in (0, 1):
        d = out / f"seed-{seed}"
        report = _strict_load(d / "report.json")
        assert set(report) == ADULT_REPORT_KEYS
        assert report["method"] == "dp-auto-gan" and report["seed"] == seed
        assert report["dataset"] == "adult" and 0 <= report["tstr_auroc"] <= 1
        assert "classic" in report["paper_accounting"]
        assert report["target_epsilon"] == 1.0 and report["delta"] == 1e-5
        assert 0.99 <= report["epsilon"] <= 1.0
        privacy_report = report["privacy"]
        assert report["epsilon"] == privacy_report["epsilon"]
        assert report["epsilon_paper_accounting"] == privacy_report["epsilon_by_accountant"]["rdp_classic"]
        phases = [privacy.DPSGDPhase(p["name"], p["sample_rate"], p["noise_multiplier"], p["steps"])
                  for p in privacy_report["phases"]]
        assert [p.steps for p in phases] == [20, 20]
        assert [p.sample_rate for p in phases] == [64 / 32561, 128 / 32561]
        assert report["epsilon_paper_accounting"] == pytest.approx(
            privacy.epsilon(phases, 1e-5, accountant="rdp", conversion="classic"), rel=1e-9)
        assert 0 < report["rf_salary_accuracy"] < 1
        for key in ("jsd", "kl_mu"):
            # Per feature, and "total" = the sum over the paper's eight (Tantipongpipat et al. 2021, Tables 2 and 6).
            eight = metrics.PAPER_DIVERSITY_FEATURES
            assert len(eight) == 8 and set(eight) <= set(report[key])
            assert report[key]["total"] == pytest.approx(sum(report[key][f] for f in eight), rel=1e-9)
        assert set(report["train_seconds"]) == {"autoencoder", "gan"}
        assert report["wall_seconds"] >= sum(report["train_seconds"].values()) > 0
        assert report["versions"]["jax"] and report["versions"]["dp-accounting"]
        synthetic = pd.read_csv(d / "synthetic.csv", dtype={"education-num": str})
        assert list(synthetic.columns) == schema.names and len(synthetic) == 32561
        assert report["synthetic_rows"]["n"] == 32561 and report["synthetic_rows"]["public"] is True
        model = synthesizers.load(d / "model.npz")
        assert model.privacy_report() == privacy_report
        assert (d / "metrics.json").exists()
        assert {"marginals.png", "diversity.png"} <= {p.name for p in d.glob("*.png")}
        reports[seed] = report
    _check_summary(out, [0, 1], reports, (
        "epsilon", "epsilon_paper_accounting", "rf_salary_accuracy", "jsd.total", "kl_mu.total",
        "wall_seconds"))


# --------------------------------------------------------------------------------------------
# GS-WGAN on the cardio table (slow: the thesis's tuned TSTR on 63,000 synthetic rows)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_cardio_gswgan_experiment_end_to_end(cardio_path, tmp_path, xla_cache_home):
    from dpgen_jax import synthesizers
    from experiments import reproduce

    out = tmp_path / "cardio"
    reproduce.main([
        "gs-wgan", "cardio", "--epsilon", "10", "--seeds", "0", "--set", "generator_steps=20", "--set", "num_shards=50",
        "--set", "snapshot_every=10", "--no-progress", "--data-dir", str(cardio_path), "--out", str(out)])
    _all_json_strict(out)
    report = _strict_load(out / "report.json")  # one seed: the run's files sit in --out itself
    assert set(report) == ADULT_REPORT_KEYS | {"tstr_real_auroc", "tstr_gap", "thesis_reference",
                                               "checkpoint_selection"}
    selection = report["checkpoint_selection"]  # chosen on the 7,000 validation rows
    assert set(selection["validation_auroc"]) == {"10", "20"} and selection["validation_rows"] == 7000
    assert selection["validation_auroc"][str(selection["chosen_step"])] == max(selection["validation_auroc"].values())
    assert report["dataset"] == "cardio" and report["thesis_reference"]["M1500"]["auroc"] == 0.717
    assert 0.78 <= report["tstr_real_auroc"] <= 0.81  # the thesis: 0.795 on real rows
    phase = report["privacy"]["phases"][0]
    assert phase["num_shards"] == 50 and phase["steps"] == 20 and 9.9 <= report["epsilon"] <= 10.0
    synthetic = pd.read_csv(out / "synthetic.csv")
    assert list(synthetic.columns) == data.cardio_schema().names and len(synthetic) == 63_000
    assert synthesizers.load(out / "model.npz").privacy_report() == report["privacy"]


@pytest.mark.slow
def test_gswgan_frontier_quick_chooses_on_validation_and_resumes(cardio_path, tmp_path, xla_cache_home):
    from experiments.studies import gswgan_frontier

    out = tmp_path / "frontier"
    argv = ["--quick", "--out", str(out), "--data-dir", str(cardio_path), "--epsilons", "10"]
    summary = gswgan_frontier.main(argv)
    fits, (chosen,) = summary["fits"], summary["chosen"]
    assert {f["config"] for f in fits} == {"default", "K1"}
    assert chosen["validation_auroc"] == max(f["validation_auroc"] for f in fits)  # chosen on validation
    assert 0.0 <= chosen["test_auroc_tuned"] <= 1.0 and 9.9 <= chosen["epsilon"] <= 10.0
    for f in fits:  # each fit is calibrated to the proven target; the assumed number is beside it
        assert 9.9 <= f["epsilon"] <= 10.0 and f["assumed_epsilon"] <= f["epsilon"] * (1 + 1e-5)  # K = 1: equal
    assert (out / "frontier.png").stat().st_size > 0 and "| 10 |" in (out / "frontier.md").read_text()
    floor = summary["floor"]  # the untrained generator's TSTR, two seeds in quick mode
    assert len(floor["fits"]) == 2 and floor["test_min"] <= floor["test_median"] <= floor["test_max"]
    assert "Floor: GS-WGAN's untrained generator" in (out / "frontier.md").read_text()
    stamps = {f: f.stat().st_mtime_ns for f in out.glob("eps-10/*/result.json")}
    again = gswgan_frontier.main(argv)  # every fit (and the chosen one's tuned score) is done
    assert [f["validation_auroc"] for f in again["fits"]] == [f["validation_auroc"] for f in fits]
    assert {f: f.stat().st_mtime_ns for f in stamps} == stamps and len(stamps) == 2


# --------------------------------------------------------------------------------------------
# Throughput benchmark (slow: ~45 s of compilation; CI runs the quick benchmark separately)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_throughput_quick_writes_rows_with_the_documented_keys(tmp_path):
    out = tmp_path / "tp"
    subprocess.run(
        [sys.executable, "-m", "experiments.speed.throughput", "--quick", "--out", str(out), "--no-torch",
         "--rounds", "3", "--target-seconds", "0.02"],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=600)
    result = _strict_load(out / "throughput.json")
    rows = result["rows"]
    assert rows and all(set(r) == THROUGHPUT_ROW_KEYS for r in rows)
    assert {(r["method"], r["batch_size"]) for r in rows} == {
        (m, b) for m in ("nonprivate", "ghost", "vmap") for b in (64, 256, 1024)}
    for r in rows:
        assert r["framework"] == "jax" and r["model"] == "adult_autoencoder"
        assert r["includes_sampling"] is True
        assert 0 < r["ms_per_step_p10"] <= r["ms_per_step_median"] <= r["ms_per_step_p90"]
        assert r["compile_seconds"] > 0 and math.isfinite(r["compile_seconds"])
    assert (out / "throughput.md").exists() and (out / "throughput.png").exists()


@pytest.mark.slow
def test_matching_share_study_writes_its_summary(tmp_path, xla_cache_home):
    """``experiments.studies.matching_share --quick``: one benchmark run per share into its own
    folder (``independent`` only with share 0), and a summary whose rows are the cells' medians."""
    from experiments.studies import matching_share

    out = tmp_path / "share"
    rows = matching_share.main(["--quick", "--methods", "dp-vae", "--shares", "0", "0.35",
                                   "--datasets", "adult-like-3k", "--epsilons", "1", "--out", str(out)])
    got = {(r["method"], r["share"]) for r in rows}
    assert got == {("dp-vae", 0.0), ("dp-vae", 0.35), ("independent", 0.0)}
    assert (out / "summary.md").exists() and json.loads((out / "summary.json").read_text()) == rows
    cal = json.loads(next((out / "share-0.35").glob("adult-like-3k/dp-vae/*/*/report.json")).read_text())
    assert [p["name"] for p in cal["privacy"]["phases"]][-1] == "one-way"
    plain = json.loads(next((out / "share-0").glob("adult-like-3k/dp-vae/*/*/report.json")).read_text())
    assert "one-way" not in [p["name"] for p in plain["privacy"]["phases"]]
