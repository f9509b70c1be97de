"""The independent-marginals reference: contract, the Gaussian release against its definition,
post-processing and independent sampling."""

from __future__ import annotations

import math

import dp_accounting as dpa
import jax
import numpy as np
import pandas as pd
import pytest
from dp_accounting.pld import PLDAccountant
from scipy import stats

from dpgen_jax import data, synthesizers
from dpgen_jax.synthesizers import IndependentConfig
from dpgen_jax.synthesizers import independent as ind
from tests import _tables
from tests._oracles import rounded_gaussian_pvalue
from tests._contract import SynthesizerContract

SCHEMA = _tables.MIXED_SCHEMA


class TestIndependentContract(SynthesizerContract):
    METHOD = "independent"
    OVERRIDES = ind.Independent.SMOKE
    EPSILON = 2.0

    def zero_steps(self):
        return {}

    def functional_phases(self, config, schema, num_records):
        return ind.privacy_phases(config, len(schema))  # d: one histogram per column

    def functional_released(self, model, frame, schema, phases):
        cfg = model.fitted_config
        disc = ind.discretizer(cfg, schema)
        counts = ind.release_histograms(disc.codes(frame), disc.sizes, phases[0].noise_std,
                                  jax.random.key(self.SEED))
        return {"counts": counts}


def test_sensitivity_is_sqrt_d_for_add_remove_neighbours():
    """Adding one record moves the d exact histograms by exactly sqrt(d) in L2."""
    cfg = synthesizers.create("independent").resolve_config(SCHEMA)
    disc = ind.discretizer(cfg, SCHEMA)
    frame = _tables.mixed_frame(200, 3)
    a = ind.release_histograms(disc.codes(frame), disc.sizes, None, jax.random.key(0))
    b = ind.release_histograms(disc.codes(frame.iloc[:-1]), disc.sizes, None, jax.random.key(0))
    diff = np.concatenate([np.asarray(a[k]) - np.asarray(b[k]) for k in a])
    assert np.linalg.norm(diff) == pytest.approx(math.sqrt(len(SCHEMA)))
    assert privacy_phase(cfg).sensitivity == pytest.approx(math.sqrt(4))


def privacy_phase(cfg):
    (phase,) = ind.privacy_phases(cfg, len(SCHEMA))
    return phase


def test_noise_has_the_reported_standard_deviation():
    """The released counts minus the exact ones, over 4 x 5000 cells, are integers: a chi-square
    test accepts the rounded Gaussian of the report's noise_multiplier * sensitivity and rejects
    0.85 and 1.15 times it."""
    cats = [f"v{i}" for i in range(5000)]
    schema = data.Schema.from_dict({"columns": [
        {"name": n, "kind": "categorical", "categories": cats} for n in "wxyz"]})
    frame = pd.DataFrame({n: np.random.default_rng(0).choice(cats[:50], 200) for n in "wxyz"})
    model = synthesizers.create("independent").fit(frame, schema, epsilon=2.0, seed=4)
    (phase,) = model.privacy_report()["phases"]
    disc = ind.discretizer(model.fitted_config, schema)
    exact = ind.release_histograms(disc.codes(frame), disc.sizes, None, jax.random.key(0))
    z = np.concatenate([np.asarray(model.released["counts"][k]) - np.asarray(exact[k]) for k in exact])
    std = phase["noise_multiplier"] * phase["sensitivity"]
    assert phase["sensitivity"] == 2.0
    assert z.dtype == np.int64
    assert rounded_gaussian_pvalue(z, std) > 1e-3
    assert rounded_gaussian_pvalue(z, 0.85 * std) < 1e-6
    assert rounded_gaussian_pvalue(z, 1.15 * std) < 1e-6


def test_report_epsilon_is_one_gaussian_release():
    model = synthesizers.create("independent").fit(_tables.mixed_frame(300, 0), SCHEMA, epsilon=1.0, seed=0)
    rep = model.privacy_report()
    (phase,) = rep["phases"]
    assert phase["mechanism"] == "gaussian" and phase["steps"] == 1
    assert phase["sensitivity"] == pytest.approx(2.0)  # sqrt(4 columns)
    want = PLDAccountant(value_discretization_interval=rep["pld_value_discretization_interval"]).compose(
        dpa.GaussianDpEvent(phase["noise_multiplier"])).get_epsilon(1e-5)
    assert rep["epsilon"] == pytest.approx(want, rel=1e-9) and rep["epsilon"] <= 1.0
    assert rep["paper_accounting"]["epsilon"] is None
    assert any("No record count" in a for a in rep["assumptions"])
    assert not any("treated as public" in a for a in rep["assumptions"])


def test_probabilities_project_onto_the_simplex():
    """The least-squares projection onto the non-negative counts with the noisy total (one shift,
    then clipping at 0), normalised; checked against a direct minimisation."""
    from scipy.optimize import minimize

    probs = ind.probabilities({"0": np.array([3.0, -1.0, 1.0]), "1": np.array([-2.0, -0.5])})
    np.testing.assert_allclose(probs[0], [5 / 6, 0.0, 1 / 6])  # shift 1/3: (8/3, 0, 2/3) sums to 3
    np.testing.assert_allclose(probs[1], [0.5, 0.5])  # no mass: uniform
    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(2.0, 3.0, size=8)
        if v.sum() <= 0:
            continue
        best = minimize(lambda p: np.sum((p - v) ** 2), np.full(8, v.sum() / 8), method="SLSQP",
                        bounds=[(0, None)] * 8, constraints=[{"type": "eq", "fun": lambda p: p.sum() - v.sum()}])
        np.testing.assert_allclose(ind.probabilities({"0": v})[0], best.x / v.sum(), atol=1e-4)


def test_samples_follow_the_marginals_and_ignore_the_joint():
    """Non-private fit on a table where a and b are equal: the sample keeps each 1-way marginal
    and makes a and b independent."""
    r = np.random.default_rng(0)
    a = r.choice(["x", "y", "z"], 3000, p=[0.6, 0.3, 0.1])
    frame = pd.DataFrame({"a": a, "b": np.where(a == "x", "q", "p").astype(object),
                          "c": r.integers(0, 100, 3000), "d": r.uniform(-1, 1, 3000)})
    model = synthesizers.create("independent").fit(frame, SCHEMA, epsilon=math.inf, seed=0)
    s = model.sample(40_000, seed=1)
    freq = s["a"].value_counts(normalize=True)
    np.testing.assert_allclose(freq[["x", "y", "z"]], frame["a"].value_counts(normalize=True)[["x", "y", "z"]],
                               atol=0.01)
    table = pd.crosstab(s["a"], s["b"])
    assert stats.chi2_contingency(table).pvalue > 1e-3  # independent in the sample
    assert pd.crosstab(frame["a"], frame["b"]).to_numpy().min() == 0  # dependent in the data
    disc = ind.discretizer(model.fitted_config, SCHEMA)
    np.testing.assert_allclose(np.bincount(disc.codes(s)[:, 2], minlength=100) / len(s),
                               np.bincount(disc.codes(frame)[:, 2], minlength=100) / len(frame), atol=0.01)


def test_configuration_is_checked():
    with pytest.raises(ValueError, match="bin_spacing"):
        synthesizers.create("independent", bin_spacing="cubic")
    with pytest.raises(ValueError, match="bins"):
        synthesizers.create("independent", bins=0)
    with pytest.raises(ValueError, match=r"no field\(s\) \['num_columns'\]"):  # d is the schema's
        synthesizers.create("independent", num_columns=3)
    assert synthesizers.create("independent").resolve_config(SCHEMA) == IndependentConfig()
    with pytest.raises(ValueError, match="expected d to be an integer >= 1"):
        ind.privacy_phases(IndependentConfig(), 0)


def test_adult_shaped_fit_takes_the_schema_bins():
    model = synthesizers.create("independent").fit(data.adult_like(500, seed=0), data.adult_schema(),
                                                   epsilon=1.0, seed=0)
    shapes = {k: v.shape for k, v in model.released["counts"].items()}
    assert shapes["0"] == (74,) and shapes["11"] == (42,)  # age: one bin per integer 17..90
    assert model.sample(10, seed=0)["age"].between(17, 90).all()
