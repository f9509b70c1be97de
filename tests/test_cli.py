"""The ``dpgen-jax`` command line on small generated tables.

The round trip of the README (schema draft -> edit -> fit -> sample -> evaluate) runs once on
``data.adult_like`` rows with a tiny schedule; every error a user can cause must exit with
status 2 and one line on stderr, without a traceback. The commands run ``cli.main`` in this
process with stdout and stderr captured (:func:`run`; each command in a subprocess would import
JAX and compile its programs again); :func:`run_process` runs the real ``python -m
dpgen_jax.cli`` for the tests of the entry point itself. CSVs, schema drafts and metadata files
are tested in test_cli_schemas.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys
import tomllib
import warnings

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import advice, cli, data, privacy, synthesizers

ROOT = pathlib.Path(__file__).resolve().parents[1]
N_TRAIN, N_TEST = 400, 200
# A tiny schedule (the defaults are the paper's 10,000 + 15,000 steps) and a fixed clip norm.
TINY = ["--set", "ae_steps=8", "--set", "critic_steps=10", "--set", "ae_clip_norm=0.05"]
FIT = ["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--num-records", str(N_TRAIN),
       "--no-progress", *TINY]


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("xla")
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    out = dict(os.environ, PYTHONPATH=path, JAX_PLATFORMS="cpu", MPLBACKEND="Agg",
               JAX_COMPILATION_CACHE_DIR=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    out.pop("DPGEN_TRACEBACK", None)
    return out


def run_process(env, cwd, *args: str) -> subprocess.CompletedProcess:
    """``python -m dpgen_jax.cli ARGS`` in ``cwd``: the entry point a user runs."""
    return subprocess.run([sys.executable, "-m", "dpgen_jax.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def run(env, cwd, *args: str) -> subprocess.CompletedProcess:
    """``cli.main(ARGS)`` in ``cwd`` in this process, its exit status, stdout and stderr as
    :func:`run_process` returns them (``env`` is the environment such a process would get: the
    test process has the same settings). Warnings start from a fresh registry, as in a new process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            warnings.catch_warnings():
        warnings.simplefilter("default")
        try:
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse's --help and usage errors
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return subprocess.CompletedProcess(["dpgen-jax", *args], code, out.getvalue(), err.getvalue())


def assert_user_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit status 2, exactly one line on stderr starting with 'dpgen-jax: error:', no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpgen-jax: error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def mixed_frame(n: int = 60, seed: int = 0) -> pd.DataFrame:
    """Every dtype a CSV can lose: str codes with leading zeros and digit strings, int and bool
    categories, a missing-value category whose text is 'NA', integer and float numbers."""
    r = np.random.default_rng(seed)
    return pd.DataFrame({
        "zip": r.choice(["01", "10", "2"], n).astype(object),
        "code": r.choice([10, 20, 30], n),
        "flag": r.choice([False, True], n),
        "note": r.choice(["a", "NA", " b"], n).astype(object),
        "age": r.integers(0, 100, n),
        "score": r.uniform(-1, 1, n),
        "y": r.choice(["no", "yes"], n).astype(object),
    })


MIXED_SCHEMA = data.Schema.from_dict({"columns": [
    {"name": "zip", "kind": "categorical", "categories": ["01", "10", "2"]},
    {"name": "code", "kind": "categorical", "categories": [10, 20, 30]},
    {"name": "flag", "kind": "binary", "categories": [False, True]},
    {"name": "note", "kind": "categorical", "categories": [" b", "NA", "a"], "missing": "NA"},
    {"name": "age", "kind": "continuous", "lower": 0, "upper": 99, "integer": True},
    {"name": "score", "kind": "continuous", "lower": -1, "upper": 1},
    {"name": "y", "kind": "binary", "categories": ["no", "yes"], "label": True}]})


# ----------------------------------------------------------------------------- the round trip


def edit_to_public(draft: dict) -> dict:
    """What the user does to a draft: replace each data-derived fact by public knowledge (here
    Adult's codebook lists and documented bounds), then mark the schema public."""
    public = data.adult_schema()
    edited = dict(draft, source="public", notes=["Categories from adult.names; bounds documented."])
    for col in edited["columns"]:
        ref = public[col["name"]]
        if col["kind"] == "continuous" and ref.kind == "continuous":
            col["lower"], col["upper"] = ref.lower, ref.upper
        elif col["kind"] != "continuous":
            col["categories"] = list(ref.categories)
            col["missing"] = ref.missing
    return edited


@pytest.fixture(scope="module")
def trip(env, tmp_path_factory):
    """schema draft -> edit -> fit -> sample, as the README documents it."""
    d = tmp_path_factory.mktemp("trip")
    data.adult_like(N_TRAIN, seed=0).to_csv(d / "train.csv", index=False)
    data.adult_like(N_TEST, seed=1).to_csv(d / "test.csv", index=False)
    procs = {"draft": run(env, d, "schema", "draft", "train.csv", "--label", "salary", "-o", "draft.json")}
    draft = json.loads((d / "draft.json").read_text())
    (d / "schema.json").write_text(json.dumps(edit_to_public(draft), indent=2))
    procs["fit"] = run(env, d, *FIT, "--data", "train.csv", "--schema", "schema.json", "--seed", "0",
                       "--report", "report.json", "--out", "model.npz")
    procs["sample"] = run(env, d, "sample", "model.npz", "-n", "150", "-o", "synthetic.csv", "--seed", "1")
    return d, procs, draft


def test_schema_draft_is_marked_data_derived_with_a_loud_warning(trip):
    d, procs, draft = trip
    assert procs["draft"].returncode == 0, procs["draft"].stderr
    assert "DATA-DERIVED" in procs["draft"].stderr and "--allow-data-derived-schema" in procs["draft"].stderr
    assert draft["source"] == "data-derived"
    assert draft["notes"][0].startswith(data.DRAFT_NOTE_PREFIX) and "train.csv" in draft["notes"][0]
    schema = data.Schema.from_dict(draft)
    assert schema.names == data.adult_schema().names and schema.label == "salary"
    assert "NOT end-to-end" in " ".join(schema.assumptions())


def test_fit_prints_the_privacy_report_and_writes_a_release_file(trip):
    d, procs, _ = trip
    fit = procs["fit"]
    assert fit.returncode == 0, fit.stderr
    report = json.loads((d / "report.json").read_text())
    model = synthesizers.load(d / "model.npz")
    assert model.privacy_report() == report
    assert 0.99 <= report["epsilon"] <= 1.0
    assert [(p["name"], p["steps"]) for p in report["phases"]] == [("autoencoder", 8), ("critic", 10), ("one-way", 1)]
    # The printed table holds the report's numbers: every phase, the headline and the paper's.
    for p in report["phases"]:
        assert p["name"] in fit.stdout and str(p["steps"]) in fit.stdout
    assert f"epsilon: {report['epsilon']:.4g} (PLD, headline)" in fit.stdout
    assert f"paper's accounting: {report['paper_accounting']['epsilon']:.4g}" in fit.stdout
    assert all(a in fit.stdout for a in report["assumptions"])
    assert any(f"public number of records N={N_TRAIN}" in a for a in report["assumptions"])
    assert model.schema == data.load_schema(d / "schema.json")


def test_sample_writes_rows_that_read_back_under_the_schema(trip):
    d, procs, _ = trip
    assert procs["sample"].returncode == 0, procs["sample"].stderr
    schema = data.load_schema(d / "schema.json")
    rows = data.read_csv(d / "synthetic.csv", schema)
    assert list(rows.columns) == schema.names and len(rows) == 150
    assert rows["age"].dtype == np.int64  # drafted integer
    assert set(rows["education-num"]) <= set(schema["education-num"].categories)  # drafted as a code
    assert data.TableEncoder(schema).encode(rows).shape == (150, data.TableEncoder(schema).width)
    # seeded sampling is post-processing of the saved model: the same rows again
    again = synthesizers.load(d / "model.npz").sample(150, seed=1)
    pd.testing.assert_frame_equal(rows.astype(object), again.astype(object))


def test_sample_decodes_with_the_methods_own_mode_by_default(trip, tmp_path, monkeypatch, capsys):
    """Without --mode, sample decodes as the method does (``DECODE_MODE``: "sample" for dp-wgan,
    dp-vae and dp-syn), not argmax for every method. DP-auto-GAN decodes with argmax; here its
    class is given "sample", so the default must follow it (in-process, the same ``main``)."""
    d, _, _ = trip
    assert synthesizers.get("dp-vae").DECODE_MODE == "sample"  # a method the default matters for
    monkeypatch.setattr(synthesizers.DPAutoGAN, "DECODE_MODE", "sample")
    schema = data.load_schema(d / "schema.json")
    model = synthesizers.load(d / "model.npz")
    cases = [([], "sample"), (["--mode", "argmax"], "argmax"), (["--mode", "sample"], "sample")]
    for flags, mode in cases:
        out = tmp_path / f"rows-{mode}-{len(flags)}.csv"
        assert cli.main(["sample", str(d / "model.npz"), "-n", "300", "-o", str(out), "--seed", "2",
                         *flags]) == 0, capsys.readouterr().err
        rows = data.read_csv(out, schema).astype(object)
        pd.testing.assert_frame_equal(rows, model.sample(300, seed=2, mode=mode).astype(object))
    argmax = model.sample(300, seed=2, mode="argmax").astype(object)
    default = data.read_csv(tmp_path / "rows-sample-0.csv", schema).astype(object)
    assert not default.equals(argmax)  # the two modes differ on these rows, so the check has teeth


def test_evaluate_writes_metrics_plots_and_summary(trip, env):
    d, _, _ = trip
    proc = run(env, d, "evaluate", "--real", "train.csv", "--test", "test.csv", "--synthetic",
               "synthetic.csv", "--schema", "schema.json", "--model", "model.npz", "--out", "eval")
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((d / "eval" / "metrics.json").read_text())
    assert metrics["label_accuracy"]["label"] == "salary"
    assert 0 <= metrics["label_accuracy"]["synthetic"] <= 1
    assert {"summary.md", "marginals.png", "pca.png"} <= {p.name for p in (d / "eval").iterdir()}
    assert "not private" in proc.stdout


def test_fit_refuses_a_data_derived_schema_unless_the_user_opts_out(trip, env):
    d, _, draft = trip
    refused = run(env, d, *FIT, "--data", "train.csv", "--schema", "draft.json", "--out", "derived.npz")
    assert_user_error(refused, "draft.json is data-derived", "--allow-data-derived-schema")
    assert not (d / "derived.npz").exists()
    # The edited schema with its source put back to data-derived. The opt-out is the CLI's and
    # the schema's, not the method's (the warning and the report's sentence come from the
    # schema): the cheapest method fits it, in a second rather than a GAN's compilation.
    derived = dict(json.loads((d / "schema.json").read_text()), source="data-derived")
    (d / "derived.json").write_text(json.dumps(derived))
    ok = run(env, d, "fit", "--method", "independent", "--epsilon", "1", "--no-progress", "--data",
             "train.csv", "--schema", "derived.json", "--seed", "0", "--allow-data-derived-schema",
             "--out", "derived.npz")
    assert ok.returncode == 0, ok.stderr
    assert "NOT end-to-end differentially private" in ok.stderr  # the warning
    report = synthesizers.load(d / "derived.npz").privacy_report()
    assert any("NOT end-to-end differentially private" in a for a in report["assumptions"])


def test_the_library_refuses_a_data_derived_schema_without_the_opt_out():
    df = mixed_frame()
    derived = data.Schema.from_dict({**MIXED_SCHEMA.to_dict(), "source": "data-derived"})
    model = synthesizers.create("dp-auto-gan", ae_steps=1, critic_steps=1)
    with pytest.raises(ValueError, match="allow_data_derived_schema=True"):
        model.fit(df, derived, epsilon=1.0)
    with pytest.raises(ValueError, match="allow_data_derived_schema=True"):
        model.fit(df, derived, epsilon=1.0, allow_data_derived_schema="yes")  # only True opts out


# ----------------------------------------------------------------------------- user errors


def test_each_user_error_is_one_line_and_exit_status_2(trip, env):
    """The four errors of the issue, in subprocesses: missing file, schema mismatch, unreachable
    epsilon, unknown method. (More cases run in-process below, through the same ``main``.)"""
    d, _, _ = trip
    base = ["--schema", "schema.json", "--out", "never.npz"]
    assert_user_error(run(env, d, *FIT, "--data", "missing.csv", *base),
                      "data file 'missing.csv' not found")
    frame = pd.read_csv(d / "train.csv", dtype=str, keep_default_na=False)
    frame.assign(ssn="123").to_csv(d / "extra.csv", index=False)
    assert_user_error(run(env, d, *FIT, "--data", "extra.csv", *base),
                      "extra.csv has column(s) not declared in the schema: 'ssn'")
    unreachable = [a if a != "1" else "1e-7" for a in FIT]  # refused before any training
    assert_user_error(run(env, d, *unreachable, "--data", "train.csv", *base), "unreachable")
    assert_user_error(run(env, d, "fit", "--method", "dp-magic", "--epsilon", "1", "--data",
                          "train.csv", *base), "Unknown method 'dp-magic'", "dp-auto-gan")
    assert not (d / "never.npz").exists()


def test_a_wrongly_typed_set_value_is_one_line_naming_the_field(env, tmp_path):
    proc = run(env, tmp_path, "privacy", "--method", "dp-auto-gan", "--num-records", "1000",
               "--epsilon", "1", "--set", "ae_steps=abc")
    assert_user_error(proc, "--set ae_steps=abc", "ae_steps", "integer")


def test_a_method_whose_optional_package_is_missing_is_one_line(tmp_path, monkeypatch, capsys):
    """fit --method mst without mbi (hidden in-process: ``sys.modules["mbi"] = None``), refused
    before any file is read; and a plan that needs a missing package (privacy)."""
    monkeypatch.setitem(sys.modules, "mbi", None)
    mst = synthesizers.get("mst")
    reason = mst.unavailable_reason()
    assert reason is not None and "mbi" in reason
    reason = " ".join(reason.split())  # as printed: on one line, whitespace collapsed
    schema_file = tmp_path / "s.json"
    schema_file.write_text(MIXED_SCHEMA.to_json())
    mixed_frame().to_csv(tmp_path / "d.csv", index=False)
    out = tmp_path / "m.npz"
    assert cli.main(["fit", "--method", "mst", "--epsilon", "1", "--data", str(tmp_path / "d.csv"),
                     "--schema", str(schema_file), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dpgen-jax: error: --method mst cannot fit here: {reason}"], err
    assert not out.exists()

    def plan_needing_a_package(self, *args, **kwargs):
        raise ImportError("No module named 'somepkg'")

    monkeypatch.setattr(mst, "plan", plan_needing_a_package)
    assert cli.main(["privacy", "--method", "mst", "--num-records", "1000", "--epsilon", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dpgen-jax: error: --method mst cannot plan here: {reason}"], err


def test_argument_errors_are_one_line_too(tmp_path, capsys):
    """In-process (the same ``main``): flags argparse refuses, --set, presets, existing outputs."""
    schema_file = tmp_path / "s.json"
    schema_file.write_text(MIXED_SCHEMA.to_json())
    csv, alien, derived = tmp_path / "d.csv", tmp_path / "alien.csv", tmp_path / "derived.json"
    mixed_frame().to_csv(csv, index=False)
    mixed_frame().assign(code=40).to_csv(alien, index=False)
    derived.write_text(json.dumps({**MIXED_SCHEMA.to_dict(), "source": "data-derived"}))
    cases = [
        (["fit", "--method", "dp-auto-gan"], "the following arguments are required"),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--preset", "paper-1.01", "--data",
          str(csv), "--schema", str(schema_file), "--out", "m.npz"], "not allowed with argument"),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "0", "--data", str(csv), "--schema",
          str(schema_file), "--out", str(tmp_path / "m.npz")],
         "expected --epsilon to be a number > 0 or inf, got --epsilon=0.0. (see dpgen-jax fit --help)"),
        # every numeric flag is checked as it is parsed, before any file is read or written
        (["fit", "--method", "dp-auto-gan", "--epsilon", "nan", "--data", str(csv), "--schema",
          str(schema_file), "--out", str(tmp_path / "m.npz")], "got --epsilon=nan."),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--delta", "1", "--data", str(csv),
          "--schema", str(schema_file), "--out", str(tmp_path / "m.npz")],
         "expected --delta in (0, 1), got --delta=1.0."),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--num-records", "0", "--data", str(csv),
          "--schema", str(schema_file), "--out", str(tmp_path / "m.npz")],
         "expected --num-records to be an integer >= 1, got --num-records=0."),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--max-seconds", "-1", "--data", str(csv),
          "--schema", str(schema_file), "--out", str(tmp_path / "m.npz")],
         "expected --max-seconds to be a finite number >= 0, got --max-seconds=-1.0."),
        (["sample", str(csv), "-n", "0", "-o", str(tmp_path / "o.csv")],
         "expected -n to be an integer >= 1, got -n=0."),
        (["privacy", "--method", "dp-vae", "--num-records", "-5", "--epsilon", "1"],
         "expected --num-records to be an integer >= 1, got --num-records=-5."),
        (["recommend", "--schema", str(schema_file), "--num-records", "100", "--epsilon", "inf"],
         "expected --epsilon to be a finite number > 0, got --epsilon=inf."),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--set", "critic_stepz=3", "--data",
          str(csv), "--schema", str(schema_file), "--out", str(tmp_path / "m.npz")],
         "has no field 'critic_stepz'"),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--set", "ae_steps=5", "--set",
          "critic_steps=1.5", "--data", str(csv), "--schema", str(schema_file), "--out",
          str(tmp_path / "m.npz")], "--set critic_steps=1.5: expected critic_steps to be an integer"),
        (["privacy", "--method", "dp-auto-gan", "--num-records", "100", "--preset", "paper-9"],
         "Unknown preset='paper-9'"),
        (["privacy", "--method", "dp-auto-gan", "--num-records", "46520", "--preset", "paper-0.81"],
         "pass --schema"),
        (["schema", "draft", str(csv), "-o", str(schema_file)], "exists; pass --force"),
        (["schema", "draft", "-o", str(tmp_path / "x.json")], "needs a data file, --from-yaml"),
        (["evaluate", "--real", str(csv), "--test", str(csv), "--synthetic", str(csv), "--schema",
          str(tmp_path / "nope.json"), "--out", str(tmp_path)], "schema file"),
        (["sample", str(csv), "-n", "3", "-o", str(tmp_path / "o.csv")], "not a readable dpgen_jax model"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["sample", str(tmp_path / "missing.npz"), "-n", "5", "-o", str(tmp_path / "o.csv")],
         "model file"),
        (["privacy", "--method", "dp-magic", "--num-records", "100", "--epsilon", "1"],
         "Unknown method 'dp-magic'"),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--data", str(alien), "--schema",
          str(schema_file), "--out", str(tmp_path / "m.npz")], "alien.csv: column 'code'"),
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--data", str(csv), "--schema",
          str(derived), "--out", str(tmp_path / "m.npz")], "--allow-data-derived-schema"),
        # with the opt-out, the data-derived schema passes and the next problem is reported
        (["fit", "--method", "dp-auto-gan", "--epsilon", "1", "--data", str(alien), "--schema",
          str(derived), "--allow-data-derived-schema", "--out", str(tmp_path / "m.npz")],
         "alien.csv: column 'code'"),
    ]
    for argv, needle in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("dpgen-jax: error: ") and needle in err[0], (argv, err)
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "o.csv").exists()


def test_help_on_every_subcommand(env, tmp_path):
    for sub in ([], ["schema"], ["schema", "draft"], ["fit"], ["sample"], ["evaluate"], ["privacy"],
                ["methods"]):
        proc = run(env, tmp_path, *sub, "--help")
        assert proc.returncode == 0 and proc.stdout.startswith(f"usage: dpgen-jax {' '.join(sub)}".strip())
        assert not proc.stderr


def test_the_console_script_is_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["dpgen-jax"] == "dpgen_jax.cli:main"
    extras = project["optional-dependencies"]
    assert any(d.startswith("pyyaml") for d in extras["yaml"])
    assert {d.split(">")[0] for d in extras["notebooks"]} == {"nbclient", "nbformat", "ipykernel"}


# ----------------------------------------------------------------------------- methods, privacy


def test_methods_lists_every_registered_method_on_one_line(env, tmp_path):
    proc = run_process(env, tmp_path, "methods")  # the module's entry point, in its own process
    assert proc.returncode == 0
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(synthesizers.available())
    for line, (name, description) in zip(lines, synthesizers.available().items()):
        assert line.startswith(name) and description in line


def test_privacy_accounts_a_preset_without_data(env, tmp_path):
    proc = run(env, tmp_path, "privacy", "--method", "dp-auto-gan", "--num-records", "32561",
               "--preset", "paper-0.51", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    # Independent reference: the published schedule through privacy.epsilon directly, and the
    # paper's own number (Tantipongpipat et al. 2021: epsilon 0.51 at delta 1e-5).
    phases = [privacy.DPSGDPhase.from_batch_size("autoencoder", 64, 32561, 2.5, 10_000),
              privacy.DPSGDPhase.from_batch_size("critic", 128, 32561, 7.5, 15_000)]
    assert report["epsilon"] == pytest.approx(privacy.epsilon(phases, 1e-5), rel=1e-9)
    classic = report["epsilon_by_accountant"]["rdp_classic"]
    assert classic == pytest.approx(0.5084, abs=1e-3) and round(classic, 2) == 0.51
    assert report["paper_accounting"]["epsilon"] == classic
    assert report["noise"] == {"autoencoder": 2.5, "critic": 7.5}  # phase name -> noise multiplier


def test_privacy_calibrates_the_noise_to_a_target(env, tmp_path):
    proc = run(env, tmp_path, "privacy", "--method", "dp-auto-gan", "--num-records", "32561",
               "--epsilon", "1", "--set", "critic_steps=5000")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "no data read" in out and "calibrated to the target" in out
    noise = dict(kv.split("=") for kv in out.split("calibrated to the target before training): ")[1].split(", "))
    sigma_ae, sigma_critic = float(noise["autoencoder"]), float(noise["critic"])
    assert sigma_critic / sigma_ae == pytest.approx(3.5 / 1.5, rel=1e-5)  # one common factor
    # The default's autoencoder batch N // 32 = 1,017 over the paper's epochs: 629 steps.
    # and the matching stage's one-way release (Adult: 15 histograms), alone at its share of the target
    one = privacy.calibrate([privacy.GaussianPhase("one-way", 1.0, 1, sensitivity=15 ** 0.5)],
                            synthesizers.DPAutoGANConfig().matching_share * 1.0, 1e-5, max_noise_multiplier=1e7)
    assert float(noise["one-way"]) == pytest.approx(one[0].noise_multiplier, rel=1e-5)
    phases = [privacy.DPSGDPhase.from_batch_size("autoencoder", 1_017, 32561, sigma_ae, 629),
              privacy.DPSGDPhase.from_batch_size("critic", 128, 32561, sigma_critic, 5_000), *one]
    assert 0.99 <= privacy.epsilon(phases, 1e-5) <= 1.0 + 1e-5  # the printed noise meets the target
    assert "5000" in out and "629" in out


@pytest.mark.parametrize("method", sorted(synthesizers.available()))
def test_privacy_accounts_every_registered_method(method, capsys):
    """Every registered method plans and is accounted under its own headline accountant (RDP for
    MST's exponential mechanism), in-process and without data; the table formats its report."""
    cls = synthesizers.get(method)
    n = 32561
    code = cli.main(["privacy", "--method", method, "--num-records", str(n), "--epsilon", "1", "--json"])
    out, err = capsys.readouterr()
    if code != 0 and cls.unavailable_reason() is not None:
        pytest.skip(f"{method} cannot plan here: {cls.unavailable_reason()}")
    assert code == 0, err
    report = json.loads(out)
    assert report["method"] == method and report["target_epsilon"] == 1.0
    assert report["accountant"] == cls.ACCOUNTANT
    headline = "pld" if cls.ACCOUNTANT == "pld" else f"rdp_{report['conversion']}"
    assert report["epsilon"] == report["epsilon_by_accountant"][headline]
    assert 0.9 <= report["epsilon"] <= 1.0 + 1e-6  # calibrated to the target under that accountant
    def noised(entries):  # every phase with a noise multiplier, inside parallel groups too
        for e in entries:
            yield from noised([q for g in e.get("groups", []) for q in g["phases"]])
            if e.get("noise_multiplier") is not None:
                yield e["name"], e["noise_multiplier"]
    assert report["noise"] == dict(noised(report["phases"]))
    says_rates_use_n = any(a.startswith(f"The sampling rates use N={n}") for a in report["assumptions"])
    assert says_rates_use_n == cls.USES_NUM_RECORDS
    if not cls.USES_NUM_RECORDS:
        assert any("No record count enters this method's mechanisms" in a for a in report["assumptions"])
    table = privacy.format_report(report, title=method)
    if report["sharded_accounting"]:  # GS-WGAN, DP-SACTGAN: the three numbers, each labelled
        assert f"epsilon: {report['epsilon']:.4g} (proven, selection-conditioned bound, exact)" in table
        assert f"assumed accounting: {report['sharded_accounting']['assumed']:.4g} (assumes" in table
        assert "not a proven bound" in table and "paper's accounting: " in table
    else:
        assert f"epsilon: {report['epsilon']:.4g} ({cls.ACCOUNTANT.upper()}" in table
    assert all(p["name"] in table for p in report["phases"])


def test_privacy_reports_mst_under_rdp(env, tmp_path):
    """The audit's command: MST's selection is an exponential mechanism, which only RDP accounts."""
    proc = run(env, tmp_path, "privacy", "--method", "mst", "--num-records", "1000", "--epsilon", "1")
    assert proc.returncode == 0, proc.stderr
    assert "(RDP improved, headline)" in proc.stdout and "selection" in proc.stdout
    assert "The sampling rates use N" not in proc.stdout
    assert "No record count enters this method's mechanisms" in proc.stdout


def test_recommend_ranks_every_method_and_needs_a_public_record_count(tmp_path, capsys):
    """``recommend`` reads no data: it needs --num-records (argparse refuses without it) and prints
    one line per registered method, the first being ``advice.choose_method``'s choice."""
    schema_path = tmp_path / "schema.json"
    schema_path.write_text(data.adult_schema().to_json())
    assert cli.main(["recommend", "--schema", str(schema_path), "--epsilon", "3"]) == 2
    assert "--num-records" in capsys.readouterr().err
    assert cli.main(["recommend", "--schema", str(schema_path), "--num-records", "1000", "--epsilon", "3"]) == 0
    out = capsys.readouterr().out
    assert "N=1000 (public" in out
    for method in synthesizers.available():
        assert method in out
    first = advice.choose_method(data.adult_schema(), 1000, 3.0)
    assert out.index(first) < min(out.index(m) for m in synthesizers.available() if m != first)


@pytest.mark.parametrize("extra, needle", [
    ([], "--method auto needs --num-records"),
    (["--num-records", "400", "--set", "bins=8"], "--method auto takes no --set"),
])
def test_fit_method_auto_refuses_without_a_public_record_count(tmp_path, capsys, extra, needle):
    schema_path, data_path = tmp_path / "schema.json", tmp_path / "d.csv"
    schema_path.write_text(data.adult_schema().to_json())
    data.write_csv(data.adult_like(50, seed=0), data_path)
    code = cli.main(["fit", "--method", "auto", "--data", str(data_path), "--schema", str(schema_path),
                     "--epsilon", "1", "--out", str(tmp_path / "m.npz"), *extra])
    assert code == 2
    assert needle in capsys.readouterr().err


# ----------------------------------------------------------------------------- a quick command line


def test_the_methods_table_is_the_registry(capsys):
    """`dpgen-jax methods` prints the registry itself: every method with its own description and
    presets (a method is described in its module only)."""
    from dpgen_jax import synthesizers

    assert cli.main(["methods"]) == 0
    out = capsys.readouterr().out
    for name, description in synthesizers.available().items():
        line = next(row for row in out.splitlines() if row.startswith(name + " "))
        assert description in line
        for preset in synthesizers.get(name).PRESETS:
            assert preset in line
    with pytest.raises(cli.UsageError, match=r"Unknown method 'dp-magic'; expected one of \["):
        cli._synthesizer("dp-magic", [])


@pytest.mark.parametrize("argv", [
    ["--help"], ["fit"], ["sample", "m.npz", "-n", "0", "-o", "x.csv"],
])
def test_help_and_usage_errors_load_no_heavy_module(env, tmp_path, argv):
    """The commands that read no data and name no method answer without importing JAX, pandas,
    scikit-learn or dp_accounting (seconds of imports): the modules loaded are listed by the
    process itself."""
    (tmp_path / "data.csv").write_text("a\n1\n")
    script = ("import sys\nfrom dpgen_jax import cli\ntry:\n    code = cli.main(sys.argv[1:])\n"
              "except SystemExit as e:\n    code = e.code\n"
              "heavy = [m for m in ('jax', 'pandas', 'sklearn', 'dp_accounting', 'flax') if m in sys.modules]\n"
              "print('HEAVY', heavy, code, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", script, *argv], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("HEAVY [] "), proc.stderr
    assert last.endswith(" 0") == (argv[0] == "--help"), proc.stderr
