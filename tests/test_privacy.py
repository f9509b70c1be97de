"""dpgen_jax.privacy phases, argument checks and the JSON report."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import dp_accounting as dpa
import pytest
from dp_accounting.pld import PLDAccountant

from dpgen_jax import privacy
from dpgen_jax.privacy import DPSGDPhase, NonPrivatePhase, ShardedSanitizerPhase, calibrate, epsilon, report
from dpgen_jax.privacy._prose import FLOATING_POINT, PROSE, PhaseProse
from tests._oracles import float32_not_above

DELTA = 1e-5
ADD_REMOVE = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE


def _adult_b():
    return [DPSGDPhase("autoencoder", 64 / 32561, 2.5, 10000), DPSGDPhase("critic", 128 / 32561, 7.5, 15000)]


# -- phases and events -------------------------------------------------------------------------


def test_dpsgd_phase_event_and_relation():
    p = DPSGDPhase("critic", 0.01, 1.5, 200)
    assert p.event() == dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.5)), 200)
    assert p.neighbouring_relation == ADD_REMOVE
    assert DPSGDPhase("x", 0.01, 1.5, 0).event() == dpa.NoOpDpEvent()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.steps = 3  # type: ignore[misc]
    assert hash(p) == hash(DPSGDPhase("critic", 0.01, 1.5, 200))


def test_numpy_scalars_are_accepted_as_builtin_numbers():
    np = pytest.importorskip("numpy")
    p = DPSGDPhase("a", np.float64(0.5), np.float32(2.0), np.int64(7))
    assert type(p.sample_rate) is float and type(p.steps) is int
    assert p == DPSGDPhase("a", 0.5, 2.0, 7)


def test_non_private_phase_event():
    assert NonPrivatePhase("pre", 10).event() == dpa.NonPrivateDpEvent()
    assert NonPrivatePhase("pre", 0).event() == dpa.NoOpDpEvent()
    assert NonPrivatePhase("pre", 10).neighbouring_relation is None


def test_sharded_phase_events_all_modes():
    proven = ShardedSanitizerPhase("g", 250, 100, 32, 1.07, 70000)
    assert proven.accounting == "proven" and proven.neighbouring_relation == ADD_REMOVE
    assert proven.event() == privacy._sharded.ShardedMixtureDpEvent(100, 1 / 250, 1.07 / math.sqrt(32))
    strict = dataclasses.replace(proven, accounting="assumed")
    assert strict.neighbouring_relation == ADD_REMOVE
    assert strict.event() == dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(1 / 250, dpa.GaussianDpEvent(1.07 / math.sqrt(32))), 100
    )
    paper = dataclasses.replace(strict, accounting="paper")
    assert paper.neighbouring_relation == dpa.NeighboringRelation.REPLACE_ONE
    assert paper.event() == dpa.SelfComposedDpEvent(
        dpa.SampledWithoutReplacementDpEvent(280 * 250, 280, dpa.GaussianDpEvent(1.07)), 100 * 32
    )
    assert dataclasses.replace(strict, steps=0).event() == dpa.NoOpDpEvent()


def test_mixed_neighbouring_relations_raise():
    paper = ShardedSanitizerPhase("g", 10, 5, 2, 1.0, 100, accounting="paper")
    with pytest.raises(ValueError, match="neighbouring relation"):
        privacy.epsilon([paper, DPSGDPhase("a", 0.1, 1.0, 5)], DELTA, "rdp")
    with pytest.raises(ValueError, match="neighbouring relation"):
        privacy.composed_event([paper, ShardedSanitizerPhase("s", 10, 5, 2, 1.0, 100)])
    # a non-private phase has no relation and composes with either
    assert privacy.neighbouring_relation([NonPrivatePhase("n", 0), paper]) == dpa.NeighboringRelation.REPLACE_ONE
    assert privacy.neighbouring_relation([NonPrivatePhase("n", 1)]) == ADD_REMOVE


# -- bad input ---------------------------------------------------------------------------------

BAD_PHASES = [
    (lambda: DPSGDPhase("a", 0.0, 1.0, 1), ValueError, r"sample_rate in \(0, 1\]"),
    (lambda: DPSGDPhase("a", 1.3, 1.0, 1), ValueError, r"sample_rate in \(0, 1\], got sample_rate=1.3"),
    (lambda: DPSGDPhase("a", -0.1, 1.0, 1), ValueError, "sample_rate"),
    (lambda: DPSGDPhase("a", math.nan, 1.0, 1), ValueError, "sample_rate"),
    (lambda: DPSGDPhase("a", "0.1", 1.0, 1), TypeError, "sample_rate"),
    (lambda: DPSGDPhase("a", 0.1, 0.0, 1), ValueError, "noise_multiplier to be a finite number > 0"),
    (lambda: DPSGDPhase("a", 0.1, -1.0, 1), ValueError, "noise_multiplier"),
    (lambda: DPSGDPhase("a", 0.1, math.inf, 1), ValueError, "noise_multiplier"),
    (lambda: DPSGDPhase("a", 0.1, math.nan, 1), ValueError, "noise_multiplier"),
    (lambda: DPSGDPhase("a", 0.1, 1.0, -1), ValueError, "steps to be an integer >= 0, got steps=-1"),
    (lambda: DPSGDPhase("a", 0.1, 1.0, 10.0), TypeError, "steps to be an integer"),
    (lambda: DPSGDPhase("a", 0.1, 1.0, True), TypeError, "steps"),
    (lambda: DPSGDPhase("", 0.1, 1.0, 1), ValueError, "name"),
    (lambda: DPSGDPhase(3, 0.1, 1.0, 1), ValueError, "name"),
    (lambda: NonPrivatePhase("n", -2), ValueError, "steps"),
    (lambda: NonPrivatePhase("n", 2.5), TypeError, "steps"),
    (lambda: ShardedSanitizerPhase("g", 0, 5, 2, 1.0, 100), ValueError, "num_shards to be an integer >= 1"),
    (lambda: ShardedSanitizerPhase("g", 10, -5, 2, 1.0, 100), ValueError, "steps"),
    (lambda: ShardedSanitizerPhase("g", 10, 5, 0, 1.0, 100), ValueError, "rows_per_step to be an integer >= 1"),
    (lambda: ShardedSanitizerPhase("g", 10, 5, 2, 0.0, 100), ValueError, "noise_multiplier"),
    (lambda: ShardedSanitizerPhase("g", 10, 5, 2, 1.0, 9), ValueError, "dataset_size to be an integer >= num_shards"),
    (lambda: ShardedSanitizerPhase("g", 10, 5, 2, 1.0, 100.0), TypeError, "dataset_size"),
    (lambda: ShardedSanitizerPhase("g", 10, 5, 2, 1.0, 100, "loose"), ValueError, r"accounting to be one of \['proven', 'assumed', 'paper'\]"),
]


@pytest.mark.parametrize("make, error, message", BAD_PHASES)
def test_bad_phase_arguments(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_bad_epsilon_calibrate_report_arguments():
    ok = [DPSGDPhase("a", 0.01, 1.0, 10)]
    for bad in (0.0, 1.0, -1e-5, math.nan):
        with pytest.raises(ValueError, match=r"delta in \(0, 1\)"):
            privacy.epsilon(ok, bad)
    with pytest.raises(TypeError, match="delta"):
        privacy.epsilon(ok, "1e-5")
    with pytest.raises(ValueError, match=r"accountant to be one of \['pld', 'rdp'\]"):
        privacy.epsilon(ok, DELTA, accountant="moments")
    with pytest.raises(ValueError, match=r"conversion to be one of \['improved', 'classic'\]"):
        privacy.epsilon(ok, DELTA, "rdp", conversion="tight")
    with pytest.raises(ValueError, match="conversion='classic' applies only to accountant='rdp'"):
        privacy.epsilon(ok, DELTA, "pld", "classic")
    with pytest.raises(ValueError, match="pld_discretization"):
        privacy.epsilon(ok, DELTA, pld_discretization=0.0)
    with pytest.raises(TypeError, match="list or tuple"):
        privacy.epsilon(ok[0], DELTA)
    with pytest.raises(ValueError, match="at least one phase"):
        privacy.epsilon([], DELTA)
    with pytest.raises(TypeError, match=r"phases\[1\]"):
        privacy.epsilon([ok[0], dpa.GaussianDpEvent(1.0)], DELTA)
    with pytest.raises(ValueError, match="paper accounting is RDP-only"):
        privacy.epsilon([ShardedSanitizerPhase("g", 10, 5, 2, 1.0, 100, "paper")], DELTA)
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ValueError, match="target_epsilon"):
            privacy.calibrate(ok, bad, DELTA)
    with pytest.raises(ValueError, match="max_noise_multiplier"):
        privacy.calibrate(ok, 1.0, DELTA, max_noise_multiplier=0.0)
    with pytest.raises(ValueError, match="dataset_size to be an integer >= 1"):
        privacy.report(ok, DELTA, dataset_size=0)
    with pytest.raises(TypeError, match="assumptions"):
        privacy.report(ok, DELTA, assumptions="one sentence")
    with pytest.raises(TypeError, match="seeded"):
        privacy.report(ok, DELTA, seeded="yes")
    with pytest.raises(ValueError, match=r"expected orders\[0\] in \(1, inf\], got orders\[0\]=1\.0"):
        privacy.rdp_curve(ok, orders=[1.0, 2.0])
    with pytest.raises(ValueError, match="order > 1"):
        privacy.classic_conversion([0.5], [1.0], DELTA)


# -- report ------------------------------------------------------------------------------------


def test_report_structure_and_json():
    rep = privacy.report(_adult_b(), DELTA, assumptions=["The schema is public."])
    text = json.dumps(rep, allow_nan=False)
    assert json.loads(text) == rep
    for key in (
        "delta", "accountant", "conversion", "neighbouring_relation", "epsilon",
        "epsilon_by_accountant", "phases", "assumptions", "non_private",
    ):
        assert key in rep
    assert rep["accountant"] == "pld" and rep["conversion"] is None and rep["non_private"] is False
    assert rep["neighbouring_relation"] == "add_or_remove_one"
    assert rep["epsilon"] == pytest.approx(privacy.epsilon(_adult_b(), DELTA), rel=1e-12)
    by = rep["epsilon_by_accountant"]
    assert set(by) == {"pld", "rdp_improved", "rdp_classic"}
    assert by["rdp_classic"] == pytest.approx(0.508439, abs=1e-3)
    assert by["pld"] < by["rdp_improved"] < by["rdp_classic"]
    ae, critic = rep["phases"]
    assert ae["name"] == "autoencoder" and ae["mechanism"] == "poisson_subsampled_gaussian"
    assert ae["sample_rate"] == 64 / 32561 and ae["noise_multiplier"] == 2.5 and ae["steps"] == 10000
    assert ae["epsilon_alone"] == pytest.approx(privacy.epsilon(_adult_b()[:1], DELTA), rel=1e-12)
    assert rep["epsilon"] < ae["epsilon_alone"] + critic["epsilon_alone"]
    assert rep["assumptions"][-1] == "The schema is public."  # the caller's come last
    assert any("adding or removing" in s for s in rep["assumptions"][:-1])
    assert any("Poisson" in s and "dpgen_jax.dpsgd" in s for s in rep["assumptions"])
    assert not any("seeded" in s for s in rep["assumptions"])


def test_report_rdp_classic_headline():
    rep = privacy.report(_adult_b(), DELTA, accountant="rdp", conversion="classic")
    assert rep["conversion"] == "classic"
    assert rep["epsilon"] == rep["epsilon_by_accountant"]["rdp_classic"]
    # the DP-auto-GAN Adult schedule at the paper's epsilon 0.51 (docs/dp-auto-gan.md, "Presets")
    assert rep["rdp_optimal_order"]["classic"] == 47.0
    assert rep["phases"][0]["epsilon_alone"] == pytest.approx(0.400401, abs=2e-3)  # as the code prints


def test_report_non_private_is_json_safe():
    phases = [NonPrivatePhase("encoder", 500), DPSGDPhase("critic", 0.01, 2.0, 100)]
    rep = privacy.report(phases, DELTA)
    json.dumps(rep, allow_nan=False)
    assert rep["epsilon"] is None and rep["non_private"] is True
    assert all(v is None for v in rep["epsilon_by_accountant"].values())
    assert rep["phases"][0]["epsilon_alone"] is None
    assert rep["phases"][1]["epsilon_alone"] > 0
    assert any("no privacy guarantee" in s and "encoder" in s for s in rep["assumptions"])


def test_report_seeded_sentence_and_small_delta_warning():
    phases = [DPSGDPhase("a", 0.01, 2.0, 100)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # delta < 1/n: no warning
        rep = privacy.report(phases, DELTA, dataset_size=70000, seeded=True)
    assert privacy.seeded_assumption() in rep["assumptions"]
    assert "not fit for release" in privacy.seeded_assumption()
    with pytest.warns(UserWarning, match="1/n"):
        rep = privacy.report(phases, 1e-3, dataset_size=1000, assumptions=["mine"])
    assert any("dataset_size n=1000" in s for s in rep["assumptions"])
    assert rep["assumptions"][-1] == "mine"
    # without a public record count, delta above 1e-3 warns (1/n cannot be checked without n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        privacy.report(phases, 1e-3, seeded=True)  # at the bound: no warning
    with pytest.warns(UserWarning, match="no public record count"):
        rep = privacy.report(phases, 0.5)
    assert any("fewer than 1/delta = 2 rows" in s for s in rep["assumptions"])


def test_report_paper_mode_has_no_pld_and_flags_the_bound():
    phase = [ShardedSanitizerPhase("generator", 1500, 21000, 32, 1.07, 70000, accounting="paper")]
    rep = privacy.report(phase, DELTA, "rdp", "classic")
    json.dumps(rep, allow_nan=False)
    assert rep["neighbouring_relation"] == "replace_one"
    assert rep["epsilon"] == pytest.approx(6.469, abs=1e-3)
    assert rep["epsilon_by_accountant"]["pld"] is None
    assert rep["phases"][0]["row_releases"] == 21000 * 32
    assert any("NOT a valid bound" in s for s in rep["assumptions"])
    with pytest.raises(ValueError, match="RDP-only"):
        privacy.report(phase, DELTA)


def test_report_assumed_mode_parameters():
    phase = [ShardedSanitizerPhase("generator", 1500, 21000, 32, 1.07, 70000, accounting="assumed")]
    rep = privacy.report(phase, DELTA)
    entry = rep["phases"][0]
    assert entry["accounting"] == "assumed" and entry["num_shards"] == 1500
    assert "not a proven bound" in entry["assumption"]
    assert entry["effective_noise_multiplier"] == pytest.approx(1.07 / math.sqrt(32))
    assert entry["sample_rate"] == pytest.approx(1 / 1500)
    assert rep["epsilon"] == pytest.approx(252.0, abs=0.5)
    assert any("assumed accounting" in s and "not a proven bound" in s for s in rep["assumptions"])
    # dp_accounting's PLDAccountant with the interval the report states gives the same number
    interval = rep["pld_value_discretization_interval"]
    assert interval == pytest.approx(privacy.pld_discretization_interval(277.0), rel=0.05)
    direct = PLDAccountant(value_discretization_interval=interval).compose(phase[0].event())
    assert direct.get_epsilon(DELTA) == pytest.approx(rep["epsilon"], rel=1e-9)


# --------------------------------------------------------------------------------------------
# DPSGDPhase.from_batch_size, clip norms in the report, calibration with fixed phases
# --------------------------------------------------------------------------------------------


def test_from_batch_size_is_the_one_place_q_is_computed():
    p = DPSGDPhase.from_batch_size("critic", 128, 32561, 7.5, 15000, clip_norm=0.022)
    assert p.sample_rate == 128 / 32561 and p.batch_size == 128 and p.clip_norm == 0.022
    assert p.event() == DPSGDPhase("critic", 128 / 32561, 7.5, 15000).event()
    entry = report([p], 1e-5)["phases"][0]
    assert (entry["batch_size"], entry["clip_norm"]) == (128, 0.022)
    assert report([DPSGDPhase("a", 0.01, 1.0, 10)], 1e-5)["phases"][0]["clip_norm"] is None
    with pytest.raises(ValueError, match=r"expected batch_size <= num_records=100"):
        DPSGDPhase.from_batch_size("a", 128, 100, 1.0, 10)
    with pytest.raises(ValueError, match="clip_norm"):
        DPSGDPhase("a", 0.01, 1.0, 10, clip_norm=0.0)


@pytest.mark.parametrize("batch, rows", [(128, 32561), (16, 150.0), (16, 500.0), (16, 32561 / 2),
                                         (64, 32561 * 0.24), (1, 3), (7, 7), (250, 1e6 / 3)])
def test_batch_rate_is_b_over_n_and_its_float32_form_the_largest_float32_not_above(batch, rows):
    assert privacy.batch_rate(batch, rows) == batch / rows
    q = privacy.batch_rate(batch, rows, float32=True)
    assert q == float32_not_above(batch, rows)  # exact rationals: never above B / N
    with pytest.raises(ValueError, match="batch_size <= num_records"):
        privacy.batch_rate(batch + math.ceil(rows), rows, "test")
    with pytest.raises(TypeError, match="batch_size"):
        privacy.batch_rate(float(batch), rows)
    with pytest.raises(TypeError, match="num_records"):
        DPSGDPhase.from_batch_size("a", batch, float(rows) + 0.5, 1.0, 10)  # a record count is whole


def test_calibrate_holds_fixed_phases():
    phases = [DPSGDPhase("em", 1.0, 30.0, 10), DPSGDPhase("ae", 0.01, 1.0, 1000)]
    out = calibrate(phases, 2.0, 1e-5, fixed=["em"])
    assert out[0] == phases[0] and out[1].noise_multiplier != 1.0
    assert epsilon(out, 1e-5) <= 2.0
    assert epsilon([out[0], out[1].with_noise_multiplier(0.99 * out[1].noise_multiplier)], 1e-5) > 2.0
    with pytest.raises(ValueError, match=r"unknown \['nope'\]"):
        calibrate(phases, 2.0, 1e-5, fixed=["nope"])
    with pytest.raises(ValueError, match="not held fixed"):
        calibrate(phases, 2.0, 1e-5, fixed=["em", "ae"])
    with pytest.raises(TypeError, match="sequence of phase names"):
        calibrate(phases, 2.0, 1e-5, fixed="em")


def test_gaussian_phase_is_the_gaussian_mechanism():
    from dpgen_jax.privacy import GaussianPhase

    p = GaussianPhase("histograms", 4.0, steps=3, sensitivity=2.0)
    assert p.event() == dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(4.0), 3)
    direct = PLDAccountant(ADD_REMOVE, value_discretization_interval=1e-4).compose(
        dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(4.0), 3)).get_epsilon(DELTA)
    assert epsilon([p], DELTA, pld_discretization=1e-4) == pytest.approx(direct, rel=1e-9)
    rep = report([p, DPSGDPhase("ae", 0.01, 1.0, 100)], DELTA)
    assert rep["phases"][0]["mechanism"] == "gaussian" and rep["phases"][0]["sensitivity"] == 2.0
    assert any("Gaussian phases ['histograms']" in a for a in rep["assumptions"])
    calibrated = calibrate([p], 1.0, DELTA)
    assert 1.0 - 1e-3 <= epsilon(calibrated, DELTA) <= 1.0
    assert GaussianPhase("x", 1.0, 0).event() == dpa.NoOpDpEvent()
    with pytest.raises(ValueError, match="noise_multiplier"):
        GaussianPhase("x", 0.0)


# --------------------------------------------------------------------------------------------
# Phases own their facts; the PLD memo
# --------------------------------------------------------------------------------------------


def test_noise_std_is_sigma_times_the_sensitivity_each_phase_kind_owns():
    from dpgen_jax.privacy import ExponentialMechanismPhase, GaussianPhase

    assert DPSGDPhase("a", 0.01, 1.5, 10, clip_norm=0.3).noise_std == 1.5 * 0.3
    assert GaussianPhase("h", 4.0, 1, sensitivity=2.0).noise_std == 4.0 * 2.0
    sharded = ShardedSanitizerPhase("g", 10, 5, 4, 1.07, 100, clip_norm=0.5)
    assert sharded.noise_std == 2.0 * 0.5 * 1.07  # per-row replacement sensitivity 2C
    assert sharded.noise_std == 1.07 * (2 * 0.5)
    assert privacy.noise_std_of(3.0, 0.25) == 0.75
    for phase, words in ((DPSGDPhase("a", 0.01, 1.5, 10), "no clip_norm yet"),
                         (GaussianPhase("h", 4.0), "states no sensitivity"),
                         (dataclasses.replace(sharded, clip_norm=None), "no clip_norm yet"),
                         (NonPrivatePhase("n", 3), "adds no Gaussian noise"),
                         (ExponentialMechanismPhase("s", 0.5), "adds no Gaussian noise")):
        with pytest.raises(ValueError, match=words):
            phase.noise_std  # noqa: B018


def test_a_new_phase_kind_needs_only_its_own_module(monkeypatch):
    """A phase kind defined here, outside dpgen_jax.privacy, is accounted and calibrated from its own
    methods (its event, its supported accountants) and reported with the default prose: its KIND as
    the mechanism and the sentence that the report does not describe it, no floating-point one; with
    its own entry in the prose table, with that entry's words and floating-point sentence."""

    @dataclasses.dataclass(frozen=True)
    class LaplaceCounts(privacy.Phase):
        KIND = "laplace-counts"
        name: str
        epsilon_per_step: float
        steps: int = 1

        def event(self):
            return dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(1 / self.epsilon_per_step), self.steps)

        neighbouring_relation = ADD_REMOVE

        @property
        def noise_multiplier_or_none(self):
            return 1 / self.epsilon_per_step

        def with_noise_multiplier(self, noise_multiplier):
            return dataclasses.replace(self, epsilon_per_step=1 / noise_multiplier)

        def unsupported_reason(self, accountant):
            return None if accountant == "rdp" or self.steps < 3 else "Laplace x3 is RDP-only here."

        def report_parameters(self):
            return {"epsilon_per_step": self.epsilon_per_step}

    phases = [LaplaceCounts("counts", 0.5, 2), DPSGDPhase("ae", 0.01, 1.0, 100)]
    direct = PLDAccountant(ADD_REMOVE, value_discretization_interval=1e-4).compose(
        privacy.composed_event(phases)).get_epsilon(DELTA)
    assert epsilon(phases, DELTA, pld_discretization=1e-4) == pytest.approx(direct, rel=1e-12)
    rep = report(phases, DELTA)
    assert rep["epsilon_by_accountant"]["rdp_improved"] is not None
    assert [p["mechanism"] for p in rep["phases"]] == ["laplace-counts", "poisson_subsampled_gaussian"]
    dpsgd_at = next(i for i, a in enumerate(rep["assumptions"]) if a.startswith("DP-SGD phases"))
    assert rep["assumptions"][dpsgd_at + 1] == (
        "Phases ['counts'] are of a phase kind defined outside dpgen_jax ('laplace-counts'), which "
        "this report does not describe: it states neither their mechanism nor how their noise is "
        "realised, only their epsilon from their own dp_accounting event.")
    assert rep["assumptions"][dpsgd_at + 2].startswith("Training phases ['ae'] compute gradients")
    assert not any("'counts'" in a for a in rep["assumptions"][dpsgd_at + 2:])

    # A kind defined outside may add its entry to PROSE under its KIND: a declared realisation
    # names its phases in that floating-point sentence; a key FLOATING_POINT lacks is refused,
    # naming the phase.
    class RoundedLaplaceCounts(LaplaceCounts):
        KIND = "rounded-laplace-counts"

    class SamplerUnknown(LaplaceCounts):
        KIND = "laplace-sampler"

    laplace = "Laplace phases {names} add Laplace noise of scale 1 / epsilon_per_step."
    monkeypatch.setitem(PROSE, RoundedLaplaceCounts.KIND, PhaseProse("laplace", 25, laplace, "integers"))
    monkeypatch.setitem(PROSE, SamplerUnknown.KIND, PhaseProse("laplace", 25, laplace, "laplace"))
    rounded = report([RoundedLaplaceCounts("counts", 0.5, 2)], DELTA)
    assert [p["mechanism"] for p in rounded["phases"]] == ["laplace"]
    assert laplace.replace("{names}", "['counts']") in rounded["assumptions"]
    assert [a for a in rounded["assumptions"] if "floating point" in a] == [
        FLOATING_POINT["integers"].replace("{names}", "['counts']")]
    with pytest.raises(ValueError, match="SamplerUnknown 'counts': .*realisation='laplace'.*add one there"):
        report([SamplerUnknown("counts", 0.5, 2)], DELTA)
    assert epsilon(calibrate(phases, 2.0, DELTA), DELTA) <= 2.0
    refused = [LaplaceCounts("counts", 0.5, 3)] + phases[1:]
    with pytest.raises(ValueError, match="does not support phase 'counts'.*Laplace x3 is RDP-only here"):
        epsilon(refused, DELTA)
    assert not privacy.pld_supported(refused)
    assert report(refused, DELTA, accountant="rdp")["epsilon_by_accountant"]["pld"] is None


def test_every_phase_kind_has_its_report_prose():
    """Every phase kind of the package (a Phase subclass setting a KIND, found by walking the
    subclasses) has its entry in the prose table, and the report writes the mechanism, sentence and
    rank documented for it (docs/privacy.md); a kind without a KIND is named by its class."""
    from dpgen_jax.privacy._prose import UNDESCRIBED_RANK, prose_of

    kinds, todo = {}, [privacy.Phase]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("dpgen_jax.") and "KIND" in sub.__dict__:
                kinds[sub.__dict__["KIND"]] = sub
    assert len(kinds) >= 6 and set(kinds) == set(PROSE), (sorted(kinds), sorted(PROSE))
    gaussian = privacy.GaussianPhase("h", 4.0, output="snapped")
    sharded = {a: ShardedSanitizerPhase("g", 10, 5, 4, 2.0, 100, accounting=a) for a in ("proven", "assumed", "paper")}
    expected = [  # (phase, mechanism, rank, the sentence's first words, realisation)
        (DPSGDPhase("a", 0.01, 1.0, 3), "poisson_subsampled_gaussian", 10, "DP-SGD phases {names} sample", "dpsgd"),
        (gaussian, "gaussian", 20, "Gaussian phases {names} release", "snapped"),
        (privacy.ExponentialMechanismPhase("s", 0.5), "exponential_mechanism", 30,
         "Exponential-mechanism phases {names} select", "exponential_mechanism"),
        (sharded["proven"], "sharded_gaussian_selection_conditioned", 50, "Sharded phases {names} (proven", "dpsgd"),
        (sharded["assumed"], "sharded_poisson_subsampled_gaussian_joint_rows_assumed_fresh", 51,
         "Sharded phases {names} (assumed", "dpsgd"),
        (sharded["paper"], "sharded_per_row_sampled_without_replacement_gaussian_paper", 52,
         "Sharded phases {names} use the GS-WGAN paper's", "dpsgd"),
        (NonPrivatePhase("n", 2), "non_private", 100, "Phases {names} trained on the private data", None),
        (privacy.ParallelPhases("by", (("x", (gaussian,)), ("y", ()))), "parallel_composition", -10,
         "Phase 'by' composes its groups ['x', 'y'] in parallel", None),
    ]
    assert {type(p) for p, *_ in expected} == set(kinds.values())
    for phase, mechanism, rank, opening, realisation in expected:
        said = prose_of(phase)
        assert (said.mechanism, said.rank, said.realisation) == (mechanism, rank, realisation), phase
        assert said.sentence.startswith(opening), (phase, said.sentence)
    assert prose_of(privacy.GaussianPhase("h", 4.0)).realisation == "integers"
    assert prose_of(NonPrivatePhase("n", 0)).sentence is None  # never ran: nothing to say

    @dataclasses.dataclass(frozen=True)
    class Unnamed(privacy.Phase):  # a phase kind without a KIND
        name: str
        steps: int = 1

        def event(self):
            return dpa.NoOpDpEvent()

        neighbouring_relation = None

        def report_parameters(self):
            return {}

    said = prose_of(Unnamed("u"))
    assert (said.mechanism, said.rank, said.realisation) == ("Unnamed", UNDESCRIBED_RANK, None)
    assert "defined outside dpgen_jax ('Unnamed')" in said.sentence


def test_each_library_phase_kind_declares_how_its_noise_is_realised():
    """docs/privacy.md, "Floating point" (each kind's realisation in its report prose): DP-SGD and
    the sharded sanitiser are accounted on real numbers, Gaussian releases are integer counts or
    snapped sums as their ``output`` says, selections are exact; a phase without noise, and a
    parallel composition (its leaves say it), get no sentence. The report names each phase in its
    kind's sentence, and nowhere else."""
    dp = DPSGDPhase("ae", 0.01, 1.0, 10)
    kinds = {dp: "dpsgd", ShardedSanitizerPhase("g", 250, 10, 32, 5.0, 70000): "dpsgd",
             privacy.GaussianPhase("h", 5.0): "integers",
             privacy.GaussianPhase("em", 5.0, output="snapped"): "snapped",
             privacy.ExponentialMechanismPhase("sel", 0.5): "exponential_mechanism",
             NonPrivatePhase("free", 1): None, privacy.ParallelPhases("groups", (("a", (dp,)),)): None}
    for phase, key in kinds.items():
        assert privacy.prose_of(phase).realisation == key, phase
        if key is None:
            continue
        said = [a for a in report([phase], DELTA, accountant="rdp")["assumptions"]
                if any(a == v.replace("{names}", f"[{phase.name!r}]") for v in FLOATING_POINT.values())]
        assert said == [FLOATING_POINT[key].replace("{names}", f"[{phase.name!r}]")], phase


def test_format_report_labels_the_exact_headline_from_the_report_fields():
    rep = report([ShardedSanitizerPhase("g", 250, 100, 32, 5.0, 70000)], DELTA)
    text = privacy.format_report(rep, title="t").splitlines()
    assert text[3].startswith(f"  epsilon: {privacy.format_number(rep['epsilon'])} "
                              "(proven, selection-conditioned bound, exact) | RDP improved")
    assert text[4].startswith("  assumed accounting: ")
    rdp = privacy.format_report(report([ShardedSanitizerPhase("g", 250, 100, 32, 5.0, 70000)], DELTA,
                                       accountant="rdp"), title="t").splitlines()
    assert "(RDP improved, headline)" in rdp[3]


def test_pld_memo_returns_what_a_fresh_accountant_computes_and_is_bounded():
    from dpgen_jax.privacy import _pld

    phases = [DPSGDPhase("memo-check", 0.0123, 1.234, 321)]
    key_part = repr(dpa.ComposedDpEvent([privacy.composed_event(phases)]))  # as composed
    first = epsilon(phases, DELTA)  # computed (or found) and kept in the memo
    hits = [k for k in privacy.PLD_EPSILON_MEMO._items if k[0] == key_part]
    assert len(hits) == 1 and hits[0][1:] == (repr(ADD_REMOVE), None, DELTA)
    eps, interval = privacy.PLD_EPSILON_MEMO.get(hits[0])
    # a fresh dp_accounting PLDAccountant with the interval the memo kept gives the same epsilon
    fresh = PLDAccountant(ADD_REMOVE, value_discretization_interval=interval).compose(
        privacy.composed_event(phases)).get_epsilon(DELTA)
    assert first == eps == fresh
    # a second evaluation is the memo's, and restores the interval the evaluation used
    acc = _pld.ScaledPLDAccountant(ADD_REMOVE, None).compose(privacy.composed_event(phases))
    assert acc.get_epsilon(DELTA) == first and acc.last_interval == interval
    assert len(privacy.PLD_EPSILON_MEMO) <= privacy.PLD_EPSILON_MEMO.maxsize
    # bounded: the least recently used entry goes first
    memo = _pld.EpsilonMemo(maxsize=2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # "a" is now the most recently used
    memo.put("c", 3)
    assert len(memo) == 2 and memo.get("b") is None and (memo.get("a"), memo.get("c")) == (1, 3)
    with pytest.raises(ValueError, match="maxsize"):
        _pld.EpsilonMemo(maxsize=0)
