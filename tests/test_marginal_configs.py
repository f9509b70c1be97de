"""The marginal methods' configurations hold only what the user chose (issue 47): d and what
follows from it (a budget split's noise multipliers, AIM's paper rounds, GEM's schedule) are
derived from the schema in the phases and the training, never written into the plan's
configuration; a release file written while the configuration held them still loads and samples
as before."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data, synthesizers
from dpgen_jax.synthesizers import mst
from dpgen_jax.synthesizers._plan import phase_kinds
from tests import _tables

METHODS = ("independent", "mst", "aim", "gem")
SCHEMA = _tables.MIXED_SCHEMA


def _available(method):
    reason = synthesizers.get(method).unavailable_reason()
    return pytest.param(method, marks=pytest.mark.skipif(reason is not None, reason=str(reason)))


@pytest.mark.parametrize("method", METHODS)
def test_the_plan_holds_the_users_configuration(method):
    cls = synthesizers.get(method)
    plan = synthesizers.create(method, **cls.SMOKE).plan(SCHEMA, 300, epsilon=2.0)
    assert plan.config == cls.CONFIG(**cls.SMOKE).validate()  # nothing derived written in
    assert "num_columns" not in plan.config.to_dict()
    with pytest.raises(ValueError, match=r"no field\(s\) \['num_columns'\]"):
        synthesizers.create(method, num_columns=len(SCHEMA))


def test_derived_values_are_the_schemas():
    """The derived values, written out from the papers' rules: AIM's R = round(16 d - 0.9 d) for
    max_rounds=None, GEM's wide-table schedule on a thousand binary columns."""
    plan = synthesizers.create("aim", max_rounds=None).plan(data.adult_schema(), 1000, epsilon=1.0)
    assert plan.config.max_rounds is None
    rounds = round(16 * 13 - 0.9 * 13)  # Adult: 13 columns
    assert [p.steps for p in plan.phases] == [1, rounds, rounds]
    wide = synthesizers.create("gem").plan(data.binary_schema(1000), 2000, epsilon=3.0)
    assert wide.config.max_rounds is None and wide.config.pair_candidates is None
    assert [p.steps for p in wide.phases] == [1, 8 * 8, 8 * 8]  # WIDE_DEFAULTS: 8 rounds of 8


def _old_config(method, config, schema):
    """The configuration as the library wrote it before: d and the derived values filled in."""
    sizes = mst.discretizer(config, data.model_schema(schema)).sizes  # every method's public bins
    d = len(sizes)
    if method == "independent":
        return {**config.to_dict(), "num_columns": d}
    if method == "mst":
        return {**config.to_dict(), "num_columns": d, **config.noise_multipliers(d)}
    if method == "aim":
        return {**config.to_dict(), "num_columns": d, "max_rounds": config.rounds(d),
                **config.noise_multipliers(d)}
    return {**config.for_sizes(sizes).to_dict(), "num_columns": d, **config.noise_multipliers(sizes)}


@pytest.mark.parametrize("method", [_available(m) for m in METHODS])
def test_a_file_whose_configuration_holds_derived_values_loads_and_samples_as_fitted(method, tmp_path):
    cls = synthesizers.get(method)
    model = synthesizers.create(method, **cls.SMOKE).fit(_tables.mixed_frame(300, 0), SCHEMA, epsilon=2.0, seed=0)
    path = tmp_path / "new.npz"
    model.save(path)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(str(arrays["__meta__"]))
    assert cls.CONFIG.from_dict(meta["config"]) == model.fitted_config and "num_columns" not in meta["config"]
    meta["config"] = _old_config(method, model.fitted_config, SCHEMA)
    # as release format version 2 wrote it (read through dpgen_jax._migrate): phases by class name
    meta["format_version"] = 2
    text = json.dumps(meta["plan"])
    for kind, phase_cls in phase_kinds().items():
        text = text.replace(f'{{"kind": "{kind}"', f'{{"phase": "{phase_cls.__name__}"')
    meta["plan"] = json.loads(text)
    arrays["__meta__"] = np.asarray(json.dumps(meta))
    old = tmp_path / "old.npz"
    with open(old, "wb") as fh:
        np.savez(fh, **arrays)
    loaded = synthesizers.load(old)
    assert "num_columns" not in loaded.fitted_config.to_dict()
    assert loaded.privacy_report() == model.privacy_report()
    assert loaded.fitted_phases() == model.fitted_phases()
    pd.testing.assert_frame_equal(loaded.sample(200, seed=5), model.sample(200, seed=5))
