"""The contract every synthesizer honours, as a test class each method's tests subclass.

A subclass sets ``METHOD``, ``OVERRIDES`` (a tiny schedule: the method's ``SMOKE`` where the
contract needs nothing else), ``EPSILON`` and implements
:meth:`SynthesizerContract.functional_phases` (the method's ``privacy_phases``) and
:meth:`SynthesizerContract.functional_released` (the released parameters of ``fit(seed=0)``
recomputed with the method's public functional API, trained with the phases the functional API
built); a method that splits its budget also overrides
:meth:`SynthesizerContract.functional_calibration` with its documented calibration function. Everything runs on a small generated table
(``tests/_tables.py``) unless the subclass overrides the ``table`` fixture.

Oracles: the privacy report against ``privacy.epsilon`` of the phases rebuilt from the executed
steps (and against the data-free plan), samples against the schema, the release file against a
reload, the class against the functional API (phases built and calibrated without the class, then
trained with).

One contract test (``test_functional_api_agrees_with_the_class``) is marked ``xla_default``: CI
also runs it, for every method, at XLA's default optimisation (``.ci/run``; the suite otherwise
compiles with the test-only flags of ``tests/conftest.py``), except where a subclass overrides it
unmarked: a method's second contract class, and DP-auto-GAN, whose release pin
(``test_pinned_encoded_sample``) is its fit at XLA's defaults.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data, privacy, synthesizers
from tests import _oracles, _tables

DELTA = 1e-5


class SynthesizerContract:
    METHOD: str = ""
    OVERRIDES: dict = {}
    EPSILON: float = 3.0
    SEED = 0
    N_SAMPLE = 64

    # -- fixtures ------------------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def table(cls):
        return _tables.mixed_frame(300, 0), _tables.MIXED_SCHEMA

    @pytest.fixture(scope="class")
    @classmethod
    def fitted(cls, table):
        frame, schema = table
        model = synthesizers.create(cls.METHOD, **cls.OVERRIDES)
        return model.fit(frame, schema, epsilon=cls.EPSILON, delta=DELTA, seed=cls.SEED)

    @pytest.fixture(scope="class")
    @classmethod
    def saved(cls, fitted, tmp_path_factory):
        path = tmp_path_factory.mktemp(cls.METHOD) / "model.npz"
        fitted.save(path)
        return path

    def functional_phases(self, config, schema, num_records: int) -> list:
        """The planned phases of a fit with ``config`` on ``num_records`` rows of ``schema``, from
        the method's functional API (its ``privacy_phases``), before calibration."""
        raise NotImplementedError

    def functional_calibration(self, config, schema, phases: list, fixed=()) -> list:
        """``phases`` calibrated to ``EPSILON`` as the method documents, the phases named in
        ``fixed`` held. Default: one common factor on every other noise multiplier
        (``privacy.calibrate``) under the method's headline accountant; a method that splits its
        budget overrides this with its own function."""
        return privacy.calibrate(phases, target_epsilon=self.EPSILON, delta=DELTA,
                                 accountant=synthesizers.get(self.METHOD).ACCOUNTANT, fixed=fixed)

    def calibrated_phases(self, config, schema, num_records: int) -> list:
        """The fit's phases rebuilt without the class: the method's own (:meth:`functional_phases`)
        and, for a neural method with the matching stage on (docs/matching.md), the one-way
        release written out here: d Gaussian histograms of L2 sensitivity sqrt(d), its noise
        calibrated alone to ``matching_share * EPSILON`` and held while the method calibrates
        the rest."""
        phases = self.functional_phases(config, schema, num_records)
        share = getattr(config, "matching_share", 0.0)
        if not share:
            return self.functional_calibration(config, schema, phases)
        d = len(data.Discretizer(data.model_schema(schema), config.matching_bins).sizes)
        one = privacy.calibrate([privacy.GaussianPhase("one-way", 1.0, 1, sensitivity=math.sqrt(d))],
                                share * self.EPSILON, DELTA, synthesizers.get(self.METHOD).ACCOUNTANT,
                                max_noise_multiplier=1e7)
        return self.functional_calibration(config, schema, [*phases, *one], fixed=("one-way",))

    def train_key(self, config) -> jax.Array:
        """The key a fit with ``seed=SEED`` hands the method's training (the library's own split,
        ``synthesizers.training_key``, of the seed's key)."""
        return synthesizers.training_key(config, jax.random.key(self.SEED))

    def functional_released(self, model, frame, schema, phases: list) -> dict:
        """The released pytrees of ``model``'s fit, recomputed with the functional API and the
        calibrated ``phases`` it built (:meth:`functional_phases`, :meth:`functional_calibration`)."""
        raise NotImplementedError

    # -- tests ---------------------------------------------------------------------------------
    def test_registered(self, fitted):
        assert self.METHOD in synthesizers.available()
        assert isinstance(synthesizers.create(self.METHOD), type(fitted))
        assert type(fitted).METHOD == self.METHOD

    def test_samples_decode_to_the_schema(self, fitted, table):
        frame = fitted.sample(np.int64(self.N_SAMPLE), seed=3)  # numpy integers are accepted
        x = _oracles.check_valid_sample(frame, table[1], self.N_SAMPLE)
        assert len(np.unique(x, axis=0)) > 1, "all sampled rows are identical"
        pd.testing.assert_frame_equal(fitted.sample(self.N_SAMPLE, seed=3), frame)

    def test_report_equals_the_accountant_on_the_executed_steps(self, fitted, table):
        rep = fitted.privacy_report()
        _oracles.strict_json(rep)
        assert rep["method"] == self.METHOD and rep["target_epsilon"] == self.EPSILON
        steps = {p["name"]: p["steps"] for p in rep["phases"]}
        frame, schema = table  # another object's plan: the phases come from public values alone
        plan = synthesizers.create(self.METHOD, **self.OVERRIDES).plan(schema, len(frame), epsilon=self.EPSILON,
                                                                       delta=DELTA)
        phases = privacy.with_steps(plan.phases, steps)
        assert [p.name for p in phases] == [p["name"] for p in rep["phases"]]
        assert rep["accountant"] == type(fitted).ACCOUNTANT
        assert rep["epsilon"] == pytest.approx(privacy.epsilon(phases, DELTA, rep["accountant"]), rel=1e-9)
        assert rep["epsilon"] <= self.EPSILON
        for entry, phase in zip(rep["phases"], phases):
            assert entry["noise_multiplier"] == phase.noise_multiplier
            bound = entry.get("clip_norm", entry.get("sensitivity"))
            assert bound is not None, f"{phase.name}: clip norm (or sensitivity) not reported"

    def test_report_says_how_every_noisy_phase_is_realised(self, fitted, table):
        """Integer counts, snapped sums (DP-EM), exact selections, or the floating-point sentence
        of DP-SGD: each noisy phase of the plan has its realisation in its kind's report prose
        (``privacy.prose_of(phase).realisation``; a Gaussian phase: snapped sums for DP-EM, integer
        counts otherwise) and is named in that realisation's sentence."""
        from dpgen_jax.privacy._prose import FLOATING_POINT

        rep = fitted.privacy_report()
        phases = privacy.with_steps(synthesizers.create(self.METHOD, **self.OVERRIDES).plan(
            table[1], len(table[0]), epsilon=self.EPSILON, delta=DELTA).phases,
            {p["name"]: p["steps"] for p in rep["phases"]})
        for leaf in (q for p in phases for q in p.leaves()):
            if leaf.noise_multiplier_or_none is None:
                continue
            kind = privacy.prose_of(leaf).realisation
            assert kind in FLOATING_POINT, (leaf.name, kind)
            if leaf.KIND == "gaussian":
                assert kind == ("snapped" if leaf.name.split("/")[0] in ("dp-em", "em") else "integers"), leaf.name
            head = FLOATING_POINT[kind].split("{names}")[1][:40]
            said = [a for a in rep["assumptions"] if head in a]
            assert len(said) == 1 and repr(leaf.name) in said[0], (leaf.name, kind)

    def test_calibrated_samples_have_the_released_one_way_marginals(self, fitted, table):
        """A neural method with the matching stage on (docs/matching.md): its one-way release
        alone spends ``matching_share * EPSILON``, and every sampled batch has, per column, the
        released marginal's counts up to the rounding to the batch's rows (at most one row per
        code), read on the release's public bins."""
        config = fitted.fitted_config
        if not getattr(config, "matching_share", 0.0):
            pytest.skip("no matching stage in this configuration")
        one = next(p for p in fitted.fitted_phases() if p.name == "one-way")
        alone = privacy.epsilon([one], DELTA, synthesizers.get(self.METHOD).ACCOUNTANT)
        assert alone == pytest.approx(config.matching_share * self.EPSILON, rel=1e-3)
        counts = fitted.fitted_release.statistics["one_way"]
        disc = data.Discretizer(data.model_schema(table[1]), config.matching_bins)
        assert [len(c) for c in counts] == list(disc.sizes)
        n = 257
        codes = disc.codes(data.to_model_frame(fitted.sample(n, seed=4), table[1]))
        for j, c in enumerate(counts):
            v = np.asarray(c, np.float64)  # the least-squares projection onto the simplex, by bisection
            lo, hi = v.min() - abs(v.sum()) - 1.0, v.max()
            for _ in range(200):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if np.clip(v - mid, 0, None).sum() > v.sum() else (lo, mid)
            p = np.clip(v - hi, 0, None)
            p = p / p.sum() if v.sum() > 0 and p.sum() > 0 else np.full(v.size, 1 / v.size)
            got = np.bincount(codes[:, j], minlength=v.size)
            assert np.all(np.abs(got - n * p) <= 1.0 + 1e-9), (j, got, n * p)

    def test_plan_is_data_free_and_matches_the_fit(self, fitted, table):
        frame, schema = table
        plan = synthesizers.create(self.METHOD, **self.OVERRIDES).plan(
            schema, len(frame), epsilon=self.EPSILON, delta=DELTA)
        rep = fitted.privacy_report()
        assert [p.name for p in plan.phases] == [p["name"] for p in rep["phases"]]
        assert [p.noise_multiplier for p in plan.phases] == [p["noise_multiplier"] for p in rep["phases"]]
        assert [p.steps for p in plan.phases] == [p["steps"] for p in rep["phases"]]
        assert plan.epsilon() == pytest.approx(rep["epsilon"], rel=1e-9)

    def test_save_load_round_trip(self, fitted, saved):
        for loaded in (type(fitted).load(saved), synthesizers.load(saved)):
            assert type(loaded) is type(fitted)
            pd.testing.assert_frame_equal(loaded.sample(self.N_SAMPLE, seed=5),
                                          fitted.sample(self.N_SAMPLE, seed=5))
            assert loaded.privacy_report() == fitted.privacy_report()
            assert loaded.fitted_config == fitted.fitted_config and loaded.schema == fitted.schema

    def test_load_refuses_another_method(self, saved):
        others = [m for m in synthesizers.available() if m != self.METHOD]
        for name in others:
            with pytest.raises(ValueError, match=f"holds a '{self.METHOD}' model, not '{name}'"):
                synthesizers.get(name).load(saved)

    @pytest.mark.xla_default
    def test_functional_api_agrees_with_the_class(self, fitted, table):
        """The phases from the functional API, calibrated to the same target, are the fit's (its
        whole schedule ran: executed = planned steps); trained with them and the same keys, the
        functional API releases the class's arrays."""
        frame, schema = table
        config = fitted.fitted_config
        phases = self.calibrated_phases(config, schema, len(frame))
        assert phases == fitted.fitted_phases(), (
            f"the functional API's calibrated phases {phases} are not the fit's {fitted.fitted_phases()}")
        released = self.functional_released(fitted, frame, schema, phases)
        assert set(released) == set(fitted.released)
        for name in released:
            np.testing.assert_array_equal(_oracles.flat(released[name]), _oracles.flat(fitted.released[name]))

    def test_public_num_records(self, table):
        """num_records=N: rates use N, the real row count appears nowhere in the report."""
        frame, schema = table
        zero = {**self.OVERRIDES, **self.zero_steps()}
        rep = synthesizers.create(self.METHOD, **zero).fit(
            frame, schema, epsilon=self.EPSILON, num_records=5000, seed=1).privacy_report()
        text = _oracles.strict_json(rep)
        assert rep["num_records_public"] is True
        assert not any("treated as public" in a for a in rep["assumptions"])
        assert any("N=5000" in a for a in rep["assumptions"])
        assert f"={len(frame)}" not in text and f"n={len(frame)}" not in text
        plan = synthesizers.create(self.METHOD, **zero).plan(schema, 5000, epsilon=self.EPSILON)
        assert [p.sample_rate for p in plan.phases if hasattr(p, "sample_rate")] == [
            p["sample_rate"] for p in rep["phases"] if "sample_rate" in p]

    def zero_steps(self) -> dict:
        """Configuration overrides that run no training step (cheap fits)."""
        raise NotImplementedError

    def test_a_budget_below_the_minimum_is_refused_before_any_row_is_read(self, table):
        # The stand-in (public rows) is timed first: a budget the stand-in alone passes is refused
        # as soon as it passes it; one below the measured minimum (minimum_seconds) is refused with
        # that minimum. (tests/test_time_budget.py checks the cut schedules and their noise.)
        frame, schema = table
        model = synthesizers.create(self.METHOD, **self.OVERRIDES)
        below = r"is below (the [0-9.]+ s .* Pass max_seconds >= \d+|what .* alone passed it)"
        with pytest.raises(ValueError, match="max_seconds=0 " + below):
            model.fit(frame, schema, epsilon=self.EPSILON, seed=2, max_seconds=0)
        n = len(frame) if model.USES_NUM_RECORDS else None
        least = model.minimum_seconds(schema, n, epsilon=self.EPSILON)
        with pytest.raises(ValueError, match=below):
            model.fit(frame, schema, epsilon=self.EPSILON, seed=2, max_seconds=least * 0.9)
        assert model.fitted_release is None

    @pytest.mark.parametrize("kwargs, match", [
        (dict(), "exactly one of epsilon"),
        (dict(epsilon=1.0, preset="x"), "exactly one of epsilon"),
        (dict(preset="no-such-preset"), "Unknown preset='no-such-preset'"),
        (dict(epsilon=0.0), "epsilon=0.0"),
        (dict(epsilon=float("nan")), "epsilon=nan"),
        (dict(epsilon=1.0, delta=1.0), "delta=1.0"),
        (dict(epsilon=1.0, num_records=0), "num_records=0"),
        (dict(epsilon=1.0, max_seconds=-1), "max_seconds=-1"),
    ])
    def test_bad_fit_arguments_are_refused(self, table, kwargs, match):
        import re

        with pytest.raises(ValueError, match=re.escape(match)):
            synthesizers.create(self.METHOD, **self.OVERRIDES).fit(*table, seed=0, **kwargs)

    def test_frame_not_matching_the_schema_is_refused(self, table):
        frame, schema = table
        model = synthesizers.create(self.METHOD, **self.OVERRIDES)
        with pytest.raises(ValueError, match=schema.names[0]):
            model.fit(frame.drop(columns=schema.names[0]), schema, epsilon=1.0)

    @pytest.mark.parametrize("n", [0, -3, 2.5, True, "10", None, np.float64(4.0)])
    def test_bad_sample_count_is_refused(self, fitted, n):
        with pytest.raises(ValueError, match=r"n=.* is not a positive integer"):
            fitted.sample(n)

    def test_unfitted_model_refuses_to_sample_report_or_save(self, tmp_path):
        model = synthesizers.create(self.METHOD)
        for call in (lambda: model.sample(5), model.privacy_report,
                     lambda: model.save(tmp_path / "m.npz")):
            with pytest.raises(RuntimeError, match="not fitted"):
                call()
        assert not (tmp_path / "m.npz").exists()

    def test_unknown_configuration_field_is_refused(self):
        with pytest.raises(ValueError, match="no field"):
            synthesizers.create(self.METHOD, no_such_field=1)

    def test_non_private_fit_reports_null_epsilon(self, table, tmp_path):
        frame, schema = table
        model = synthesizers.create(self.METHOD, **self.OVERRIDES).fit(frame, schema,
                                                                        epsilon=math.inf, seed=0)
        rep = model.privacy_report()
        text = _oracles.strict_json(rep)
        assert rep["epsilon"] is None and rep["target_epsilon"] is None and rep["non_private"]
        assert all(v is None for v in rep["epsilon_by_accountant"].values())
        assert rep["paper_accounting"] is None and "Infinity" not in text
        assert {p["mechanism"] for p in rep["phases"]} == {"non_private"}
        model.save(tmp_path / "np.npz")
        assert synthesizers.load(tmp_path / "np.npz").privacy_report() == rep
