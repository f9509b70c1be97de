"""A loaded release's privacy report is checked against its stored plan (issue 63, item 6).

Oracle: the epsilon the stored plan's phases compose to (``privacy.epsilon`` with the plan's
accountant), against which an edited file (the epsilon of its report, its RDP epsilon, its delta)
must refuse to load; unedited files, non-private ones and the committed files written before plans
were saved still load.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import privacy, synthesizers
from dpgen_jax.synthesizers import _plan
from tests import _tables

DATA = pathlib.Path(__file__).resolve().parent / "data"


def _fit(method, epsilon=1.0, **overrides):
    return synthesizers.create(method, **overrides).fit(_tables.mixed_frame(200, 0), _tables.MIXED_SCHEMA,
                                                        epsilon=epsilon, seed=0)


def _edit(path, change):
    """Rewrites the ``__meta__`` record of the release file at ``path`` with ``change(meta)``."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(str(arrays["__meta__"]))
    change(meta)
    arrays["__meta__"] = np.asarray(json.dumps(meta, allow_nan=False))
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


@pytest.fixture(scope="module")
def vae_file(tmp_path_factory):
    model = _fit("dp-vae", epsilon=10.0, steps=3, batch_size=16, clip_norm=0.5)
    path = tmp_path_factory.mktemp("release") / "vae.npz"
    model.save(path)
    return model, path


def test_an_unedited_release_loads_with_its_report(vae_file):
    model, path = vae_file
    loaded = synthesizers.load(path)
    assert loaded.privacy_report() == model.privacy_report()
    assert loaded.privacy_report()["epsilon"] == pytest.approx(10.0, rel=1e-3)


def test_a_release_whose_report_epsilon_was_edited_refuses_to_load(vae_file, tmp_path):
    model, path = vae_file
    edited = tmp_path / "edited.npz"
    edited.write_bytes(path.read_bytes())
    _edit(edited, lambda meta: meta["privacy_report"].update(epsilon=0.01))
    want = privacy.epsilon(model.fitted_phases(), 1e-5)
    assert want > 9
    with pytest.raises(ValueError) as info:
        synthesizers.load(edited)
    msg = str(info.value)
    assert str(edited) in msg and "epsilon = 0.01" in msg and repr(want) in msg
    # the loaded class's own load checks the same
    with pytest.raises(ValueError, match="refusing to load"):
        type(model).load(edited)


def test_a_change_beyond_float_round_trips_is_caught(vae_file, tmp_path):
    _, path = vae_file
    stored = synthesizers.load(path).privacy_report()["epsilon"]
    for factor, loads in ((1 + 1e-12, True), (1 + 1e-6, False)):
        edited = tmp_path / f"edited_{factor}.npz"
        edited.write_bytes(path.read_bytes())
        _edit(edited, lambda meta: meta["privacy_report"].update(epsilon=stored * factor))
        if loads:
            synthesizers.load(edited)
        else:
            with pytest.raises(ValueError, match="refusing to load"):
                synthesizers.load(edited)


@pytest.mark.parametrize("field", ["rdp_improved", "rdp_classic"])
def test_an_edited_rdp_epsilon_refuses_to_load(vae_file, tmp_path, field):
    _, path = vae_file
    edited = tmp_path / "edited.npz"
    edited.write_bytes(path.read_bytes())
    _edit(edited, lambda meta: meta["privacy_report"]["epsilon_by_accountant"].update({field: 0.5}))
    with pytest.raises(ValueError, match=re.escape(f"epsilon_by_accountant[{field!r}] = 0.5")):
        synthesizers.load(edited)


def test_an_edited_delta_refuses_to_load(vae_file, tmp_path):
    _, path = vae_file
    edited = tmp_path / "edited.npz"
    edited.write_bytes(path.read_bytes())
    _edit(edited, lambda meta: meta["privacy_report"].update(delta=1e-9))
    with pytest.raises(ValueError, match=r"delta=1e-09.*refusing"):
        synthesizers.load(edited)


def test_edited_steps_change_the_recomputed_epsilon(vae_file, tmp_path):
    # the run's executed steps are part of what the plan's phases compose to
    _, path = vae_file
    edited = tmp_path / "edited.npz"
    edited.write_bytes(path.read_bytes())
    _edit(edited, lambda meta: meta["run"]["steps"].update({k: 1 for k in meta["run"]["steps"]}))
    with pytest.raises(ValueError, match="refusing to load"):
        synthesizers.load(edited)


def test_an_rdp_headline_and_a_non_private_release_are_checked(tmp_path):
    model = _fit("independent", epsilon=2.0)
    model.save(tmp_path / "ind.npz")
    assert synthesizers.load(tmp_path / "ind.npz").privacy_report() == model.privacy_report()
    _edit(tmp_path / "ind.npz", lambda meta: meta["privacy_report"].update(epsilon=None))  # "inf"
    with pytest.raises(ValueError, match="says epsilon = inf"):
        synthesizers.load(tmp_path / "ind.npz")

    free = _fit("independent", epsilon=math.inf)
    free.save(tmp_path / "free.npz")
    assert synthesizers.load(tmp_path / "free.npz").privacy_report()["epsilon"] is None
    _edit(tmp_path / "free.npz", lambda meta: meta["privacy_report"].update(epsilon=1.0))
    with pytest.raises(ValueError, match="compose to epsilon = inf"):
        synthesizers.load(tmp_path / "free.npz")

    pytest.importorskip("mbi")
    mst = _fit("mst", epsilon=2.0)
    assert mst.fitted_plan.accountant == "rdp"
    mst.save(tmp_path / "mst.npz")
    synthesizers.load(tmp_path / "mst.npz")
    _edit(tmp_path / "mst.npz", lambda meta: meta["privacy_report"].update(epsilon=1.0))
    with pytest.raises(ValueError, match=r"rdp, improved accountant"):
        synthesizers.load(tmp_path / "mst.npz")


@pytest.mark.parametrize("name", ["dp_vae", "gs_wgan"])
def test_files_written_before_plans_were_saved_load_with_a_warning(name):
    with pytest.warns(UserWarning, match="cannot be recomputed"):
        model = synthesizers.load(DATA / f"release_v2_{name}.npz")
    assert model.privacy_report()["epsilon"] > 1


def _library_phase_classes() -> list[type]:
    found, todo = [], [privacy.Phase]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("dpgen_jax."):
                found.append(sub)
    return found


def test_every_phase_kind_has_its_own_stable_name_in_files(vae_file):
    classes = _library_phase_classes()
    kinds = [c.__dict__.get("KIND") for c in classes]  # set on the class itself, not inherited
    assert len(classes) >= 6 and all(isinstance(k, str) and k for k in kinds), dict(zip(classes, kinds))
    assert len(set(kinds)) == len(kinds), kinds
    assert {k: c for k, c in _plan.phase_kinds().items() if c in classes} == dict(zip(kinds, classes))
    _, path = vae_file
    with np.load(path, allow_pickle=False) as npz:
        phases = json.loads(str(npz["__meta__"]))["plan"]["phases"]
    assert [p["kind"] for p in phases] == ["dpsgd", "gaussian"]  # the VAE's phase, the one-way release


def _as_version_2(meta: dict) -> None:
    """``meta`` rewritten as format version 2 wrote it: phases under their class names, the one-way
    stage's fields under their version-2 names (calibration_*), speed settings in the configuration."""
    classes = _plan.phase_kinds()

    def phases(value):
        if isinstance(value, dict) and set(value) == {"kind", "fields"}:
            return {"phase": classes[value["kind"]].__name__, "fields": phases(value["fields"])}
        if isinstance(value, dict):
            return {k: phases(v) for k, v in value.items()}
        return [phases(v) for v in value] if isinstance(value, list) else value

    meta["format_version"] = 2
    meta["plan"] = phases(meta["plan"])
    meta["config"] = {{"matching_share": "calibration_share", "matching_bins": "calibration_bins"}.get(k, k): v
                      for k, v in meta["config"].items()}
    meta["config"]["chunk_size"] = 2


def test_a_version_2_file_with_a_plan_loads_checked_and_samples_as_fitted(vae_file, tmp_path):
    model, path = vae_file
    assert model.fitted_config.matching_share > 0  # the one-way stage on: its fields were renamed
    old = tmp_path / "v2.npz"
    old.write_bytes(path.read_bytes())
    _edit(old, _as_version_2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its report is checked against its plan: no warning
        loaded = synthesizers.load(old)
    assert loaded.fitted_config == model.fitted_config
    assert loaded.fitted_phases() == model.fitted_phases()
    assert loaded.privacy_report() == model.privacy_report()
    pd.testing.assert_frame_equal(loaded.sample(50, seed=4), model.sample(50, seed=4))
    _edit(old, lambda meta: meta["privacy_report"].update(epsilon=0.01))  # still checked
    with pytest.raises(ValueError, match="says epsilon = 0.01"):
        synthesizers.load(old)
