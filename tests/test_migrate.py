"""``dpgen_jax._migrate``: release-file metadata of format version 2 brought to version 3, step by
step, as pure functions of JSON (the committed version-2 files: tests/test_release_integrity.py)."""

from __future__ import annotations

import copy
import json

import pytest

from dpgen_jax import _migrate, privacy
from dpgen_jax.synthesizers import _release

REPORT = {"delta": 1e-5, "epsilon": 1.0}
DPSGD_2 = {"phase": "DPSGDPhase", "fields": {"name": "vae", "sample_rate": 0.08, "noise_multiplier": 1.1,
                                             "steps": 12, "clip_norm": 0.5}}
ONE_WAY_2 = {"phase": "GaussianPhase", "fields": {"name": "one-way", "noise_multiplier": 9.0, "steps": 1,
                                                  "sensitivity": 2.0}}
PLAN_2 = {"phases": [DPSGD_2, ONE_WAY_2], "delta": 1e-5, "target_epsilon": {"float": "inf"}, "preset": None,
          "private": True, "accountant": "pld", "uses_records": True, "num_records": 300,
          "num_records_public": False, "max_seconds": None, "seeded": True}
RUN_2 = {"steps": {"vae": 12, "one-way": 1}, "clip_norms": {}, "statistics": {"one_way": [[1, 2]]},
         "notes": ["a note"]}


def _v2(method: str, config: dict, **more) -> dict:
    return {"format": "dpgen_jax.release", "format_version": 2, "method": method, "groups": ["decoder"],
            "versions": {"dpgen-jax": "0.1"}, "config": config, "schema": {"columns": []},
            "privacy_report": REPORT, **more}


def test_the_library_writes_the_version_it_upgrades_to_and_reads_it_unchanged():
    assert _release.FORMAT_VERSION == _migrate.CURRENT == 3
    assert sorted(_migrate.STEPS) == [2]  # one step per version read, keyed by the version it upgrades
    current = {**_v2("dp-vae", {"matching_share": 0.35}), "format_version": 3, "plan": {"phases": []}}
    out = _migrate.upgrade(current)
    assert out == current and out is not current


def test_a_version_2_configuration_takes_the_current_names_and_drops_what_moved():
    meta = _v2("dp-vae", {"steps": 12, "calibration_share": 0.35, "calibration_bins": 7, "method": "vmap",
                          "chunk_size": 4}, plan=PLAN_2, run=RUN_2)
    before = copy.deepcopy(meta)
    out = _migrate.upgrade(meta)
    assert meta == before  # the input is not changed
    assert out["format_version"] == 3
    assert out["config"] == {"steps": 12, "matching_share": 0.35, "matching_bins": 7}
    for key in ("method", "groups", "schema", "privacy_report", "versions"):
        assert out[key] == meta[key]
    assert out["run"] == RUN_2


@pytest.mark.parametrize(("method", "filled"), [
    ("dp-vae", {"matching_share": 0.0}),  # before the one-way stage existed: off, as fitted
    ("gs-wgan", {"matching_share": 0.0}),
    ("dp-syn", {"matching_share": 0.0}),
    ("dp-auto-gan", {"matching_share": 0.0, "decode": "argmax", "continuous_encoding": "paper"}),
    ("gem", {"fixed_noise": False}),  # before the fixed noise batch: fresh noise
    ("mst", {}),
    ("independent", {}),
])
def test_absent_version_2_fields_take_what_they_meant_then(method, filled):
    out = _migrate.upgrade(_v2(method, {"steps": 3}, plan=PLAN_2, run=RUN_2))
    assert out["config"] == {**filled, "steps": 3}
    # a field the file holds keeps its value (the stage's share under its version-2 name)
    held = {"calibration_share" if k == "matching_share" else k: "held" for k in filled}
    out = _migrate.upgrade(_v2(method, {**held, "steps": 3}, plan=PLAN_2, run=RUN_2))
    assert out["config"] == {**{k: "held" for k in filled}, "steps": 3}


def test_a_version_2_plan_keys_its_phases_by_kind_nested_phases_included():
    parallel = {"phase": "ParallelPhases", "fields": {"name": "groups", "phases": [DPSGD_2, ONE_WAY_2]}}
    plan = {**PLAN_2, "phases": [parallel, {"phase": "NonPrivatePhase", "fields": {"name": "n", "steps": 2}}]}
    out = _migrate.upgrade(_v2("dp-syn", {}, plan=plan, run=RUN_2))["plan"]
    kinds = json.dumps(out["phases"])
    assert '"phase"' not in kinds
    assert [p["kind"] for p in out["phases"]] == ["parallel", "non-private"]
    assert [p["kind"] for p in out["phases"][0]["fields"]["phases"]] == ["dpsgd", "gaussian"]
    assert out["phases"][0]["fields"]["phases"][0]["fields"] == DPSGD_2["fields"]
    assert {k: v for k, v in out.items() if k != "phases"} == {"uncut_steps": None, **{k: v for k, v in PLAN_2.items() if k != "phases"}}
    with pytest.raises(ValueError, match="Unknown privacy phase 'LaplacePhase' in a version-2 plan"):
        _migrate.upgrade(_v2("dp-vae", {}, plan={**PLAN_2, "phases": [{"phase": "LaplacePhase", "fields": {}}]},
                             run=RUN_2))


def test_version_2_phase_names_are_the_library_classes_of_those_kinds():
    classes = [privacy.DPSGDPhase, privacy.GaussianPhase, privacy.ExponentialMechanismPhase,
               privacy.NonPrivatePhase, privacy.ParallelPhases, privacy.ShardedSanitizerPhase]
    assert _migrate._PHASE_KINDS_2 == {c.__name__: c.KIND for c in classes}


def test_a_file_from_before_plans_and_run_facts_gets_an_unchecked_plan_and_its_statistics():
    cliques = [[0, 1], [2]]
    out = _migrate.upgrade(_v2("aim", {"rounds": 2, "model_cliques": cliques, "num_columns": 3}))
    assert out["config"] == {"rounds": 2}  # d is the schema's; the cliques are a released statistic
    assert out["run"] == {"steps": {}, "clip_norms": {}, "statistics": {"model_cliques": cliques}, "notes": []}
    plan = out["plan"]
    assert plan["phases"] is None and plan["delta"] == REPORT["delta"] and plan["num_records"] is None
    empty = _migrate.upgrade(_v2("dp-syn", {"released_counts": None}))
    assert empty["run"]["statistics"] == {} and "released_counts" not in empty["config"]


@pytest.mark.parametrize("version", [1, 4, None])
def test_versions_it_does_not_read_are_refused_naming_the_version(version):
    with pytest.raises(ValueError, match=rf"release format version {version} \(dpgen-jax 0.1\); this "
                                         r"dpgen-jax reads versions 2 to 3"):
        _migrate.upgrade({**_v2("dp-vae", {}), "format_version": version})
