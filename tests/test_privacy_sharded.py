"""The proven (selection-conditioned) bound of sharded phases against references written out here.

The references compose with dp_accounting directly: for every count c of steps that read the
record's shard, the PLD (or RDP) accountant composes c Gaussian releases of noise multiplier
sigma / sqrt(B) with the run's other Gaussian releases, and the results are averaged with
scipy's binomial probabilities. The library computes the same average in closed form.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant
from scipy import stats

from dpgen_jax import data, privacy, synthesizers
from dpgen_jax.privacy import _rdp, _sharded

THESIS = dict(num_shards=1500, steps=21_000, rows_per_step=32, noise_multiplier=1.07, dataset_size=70_000)
# GS-WGAN's former Adult default (K = round(32,561 / (70,000 / 1500)) = 698, the thesis's M1500 schedule)
# with the noise multiplier that the assumed accounting calibrates to epsilon 1.01.
ADULT = dict(num_shards=698, steps=21_000, rows_per_step=32, noise_multiplier=5.764065711369743,
             dataset_size=32_561)


def _reference_delta(eps, phase, others=()):
    """sum_c Binomial(c; T, 1/K) * delta(eps) of c Gaussians plus ``others``, each composition by
    dp_accounting's PLD accountant; c runs over the counts whose probability exceeds 1e-30 and the
    rest of the probability mass is added (an upper bound, as each delta is at most 1). The PLD
    interval is eps / 1000 (pessimistic: an upper bound at any interval)."""
    interval = max(1e-4, eps * 1e-3)
    t, q = phase.steps, 1.0 / phase.num_shards
    s = phase.noise_multiplier / math.sqrt(phase.rows_per_step)
    total, mass = 0.0, 0.0
    for c in range(t + 1):
        p = stats.binom.pmf(c, t, q)
        if p < 1e-30:
            if c > t * q:
                break
            continue
        events = [e for e in others]
        if c:
            events.append(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(s), c))
        if events:
            acc = PLDAccountant(value_discretization_interval=interval)
            d = acc.compose(dpa.ComposedDpEvent(events)).get_delta(eps)
        else:
            d = 0.0
        total += p * d
        mass += p
    return total + max(0.0, 1.0 - mass)


@pytest.mark.parametrize("setting, eps", [(THESIS, 479.6), (THESIS, 300.0), (ADULT, 43.19), (ADULT, 20.0)])
def test_mixture_delta_matches_a_direct_dp_accounting_composition(setting, eps):
    phase = privacy.ShardedSanitizerPhase("g", **setting)
    ours = _sharded.mixture_delta(eps, phase.event())
    ref = _reference_delta(eps, phase)
    # dp_accounting's pessimistic discretisation makes its delta an upper bound of the exact one
    assert ours <= ref * (1 + 1e-9) + 1e-15
    assert ours == pytest.approx(ref, rel=1e-6, abs=1e-15)


def test_mixture_with_other_gaussian_releases_matches_the_direct_composition():
    phase = privacy.ShardedSanitizerPhase("g", **dict(ADULT, noise_multiplier=40.0, steps=4000))
    hist = privacy.GaussianPhase("histograms", 8.0, 14)
    ours = privacy.epsilon([hist, phase], 1e-5)
    ref = _reference_delta(ours, phase, others=[hist.event()])
    assert ref == pytest.approx(1e-5, rel=0.05)
    # the epsilon at which the reference reaches delta = 1e-5 is within a percent of ours
    lo = _reference_delta(0.99 * ours, phase, others=[hist.event()])
    hi = _reference_delta(1.01 * ours, phase, others=[hist.event()])
    assert hi < 1e-5 < lo


def test_headline_values_at_the_thesis_setting_and_the_adult_default():
    thesis = privacy.ShardedSanitizerPhase("g", **THESIS)
    assert thesis.accounting == "proven"
    assert privacy.epsilon([thesis], 1e-5) == pytest.approx(479.56, abs=0.05)
    assumed = dataclasses.replace(thesis, accounting="assumed")
    assert privacy.epsilon([assumed], 1e-5) == pytest.approx(252.0, rel=5e-3)
    adult = privacy.ShardedSanitizerPhase("g", **ADULT)
    assert privacy.epsilon([dataclasses.replace(adult, accounting="assumed")], 1e-5) == pytest.approx(1.01, rel=1e-3)
    assert privacy.epsilon([adult], 1e-5) == pytest.approx(43.19, abs=0.05)


@pytest.mark.parametrize("setting", [dict(THESIS, steps=600, num_shards=40), dict(ADULT, steps=800, num_shards=20)])
def test_mixture_rdp_matches_dp_accounting_per_count(setting):
    """At order a, exp((a-1) D_a) = sum_c p_c exp((a-1) r_c(a)), with r_c(a) the RDP of c Gaussians
    from dp_accounting; every c in 0..T (large c dominate at high orders, so none may be dropped)."""
    phase = privacy.ShardedSanitizerPhase("g", **setting)
    t, q = phase.steps, phase.sample_rate
    s = phase.effective_noise_multiplier
    orders = [1.05, 1.5, 2.0, 4.0, 16.0]
    cs = np.arange(0, t + 1)
    logp = stats.binom.logpmf(cs, t, q)
    ref = []
    for a in orders:
        terms = []
        for c, lp in zip(cs, logp):
            acc = RdpAccountant([a])
            if c:
                acc.compose(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(s), int(c)))
            terms.append(lp + (a - 1) * acc._rdp[0])
        ref.append(np.logaddexp.reduce(terms) / (a - 1))
    ours = _sharded.mixture_rdp(orders, phase.event())
    np.testing.assert_allclose(ours, ref, rtol=1e-9)


def test_one_shard_is_the_unsubsampled_gaussian():
    phase = privacy.ShardedSanitizerPhase("g", 1, 500, 16, 60.0, 1000)
    mu = math.sqrt(500 * 16) / 60.0
    direct = dpa.pld.PLDAccountant(value_discretization_interval=1e-4).compose(
        dpa.GaussianDpEvent(1.0 / mu)).get_epsilon(1e-5)
    assert privacy.epsilon([phase], 1e-5) == pytest.approx(direct, rel=1e-3)
    for acct in ("assumed",):
        same = dataclasses.replace(phase, accounting=acct)
        assert privacy.epsilon([same], 1e-5) == pytest.approx(direct, rel=2e-3)


def test_gaussian_delta_is_exact_and_stable_in_the_tails():
    # against the textbook formula where it is well conditioned, and no negative or nan far out
    for mu, eps in [(0.5, 0.3), (2.0, 1.0), (5.0, 3.0)]:
        exact = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
        assert _sharded.gaussian_delta(eps, np.array([mu]))[0] == pytest.approx(exact, rel=1e-9)
    far = _sharded.gaussian_delta(200.0, np.array([0.1, 1.0, 10.0, 1e-8]))
    assert np.all(far >= 0) and np.all(np.isfinite(far))
    assert _sharded.gaussian_delta(1.0, np.array([0.0]))[0] == 0.0


def test_epsilon_is_rounded_up_so_delta_never_exceeds_the_target():
    phase = privacy.ShardedSanitizerPhase("g", **ADULT)
    for delta in (1e-3, 1e-5, 1e-8):
        eps = _sharded.mixture_epsilon(delta, phase.event())
        assert _sharded.mixture_delta(eps, phase.event()) <= delta
        assert _sharded.mixture_delta(eps * (1 - 1e-6), phase.event()) > delta


def test_proven_bound_is_at_least_the_assumed_one_and_grows_with_steps():
    base = privacy.ShardedSanitizerPhase("g", **ADULT)
    for steps in (100, 2000, 21_000):
        p = dataclasses.replace(base, steps=steps)
        proven = privacy.epsilon([p], 1e-5)
        assumed = privacy.epsilon([dataclasses.replace(p, accounting="assumed")], 1e-5)
        assert proven >= assumed * (1 - 1e-3)
    eps = [privacy.epsilon([dataclasses.replace(base, steps=t)], 1e-5) for t in (100, 1000, 10_000)]
    assert eps[0] < eps[1] < eps[2]


def test_strict_is_a_warned_alias_of_assumed():
    with pytest.warns(FutureWarning, match="'strict' is now called 'assumed'"):
        phase = privacy.ShardedSanitizerPhase("g", 10, 5, 2, 1.0, 100, "strict")
    assert phase.accounting == "assumed"


def test_proven_bound_composes_with_dp_sgd_only_under_rdp():
    phase = privacy.ShardedSanitizerPhase("g", **ADULT)
    sgd = privacy.DPSGDPhase("ae", 0.01, 1.0, 100)
    with pytest.raises(ValueError, match="use accountant='rdp'"):
        privacy.epsilon([sgd, phase], 1e-5)
    both = privacy.epsilon([sgd, phase], 1e-5, accountant="rdp")
    alone = privacy.epsilon([phase], 1e-5, accountant="rdp")
    assert both > alone


def test_report_shows_the_proven_and_assumed_numbers_labelled():
    phase = privacy.ShardedSanitizerPhase("g", **ADULT)
    rep = privacy.report([phase], 1e-5)
    assert rep["epsilon"] == pytest.approx(43.19, abs=0.05)
    assert rep["sharded_accounting"]["proven"] == rep["epsilon"]
    assert rep["sharded_accounting"]["assumed"] == pytest.approx(1.01, rel=1e-3)
    assert "not a proven bound" in rep["sharded_accounting"]["assumed_label"]
    assert any("selection-conditioned" in s for s in rep["assumptions"])
    assert rep["phases"][0]["mechanism"] == "sharded_gaussian_selection_conditioned"
    assert "dataset_size" not in rep["phases"][0]
    plain = privacy.report([privacy.GaussianPhase("h", 3.0)], 1e-5)
    assert plain["sharded_accounting"] is None


@pytest.mark.parametrize("method, target", [("gs-wgan", 1.01), ("gs-wgan", 0.36), ("gs-wgan", 3.0),
                                            ("dp-sactgan", 1.01)])
def test_calibration_to_the_proven_headline_never_exceeds_the_target(method, target):
    schema = data.adult_schema()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # DP-SACTGAN warns that such updates are noise
        sharded = {"mechanism": "hook"} if method == "dp-sactgan" else {}  # the critic has no shards
        # the generator's own calibration (the numbers of docs/gs-wgan.md): no one-way stage
        plan = synthesizers.create(method, **sharded, matching_share=0.0).plan(schema, 32_561, epsilon=target)
    eps = plan.epsilon()
    assert target * 0.99 <= eps <= target
    gen = next(p for p in plan.phases if p.name == "generator")
    assert gen.accounting == "proven"
    if method == "gs-wgan" and target == 1.01:
        assert gen.noise_multiplier == pytest.approx(87.25, rel=1e-3)  # docs/gs-wgan.md
    if method == "gs-wgan" and target == 0.36:
        assert gen.noise_multiplier == pytest.approx(221.74, rel=1e-3)  # far above the old cap of 100


def test_rdp_of_gaussian_events_is_dp_accountings_to_the_bit_when_reused():
    """MixtureRdpAccountant keeps the RDP of each (subsampled) Gaussian event per process; the
    compositions it returns, first or reused, are dp_accounting's own bits, and what dp_accounting
    refuses it refuses."""
    wor = dpa.SampledWithoutReplacementDpEvent(70_000, 32, dpa.GaussianDpEvent(1.07))
    poisson = dpa.PoissonSampledDpEvent(0.013, dpa.GaussianDpEvent(0.9))
    cases = [
        (list(range(2, 40)), dpa.NeighboringRelation.REPLACE_ONE, [dpa.SelfComposedDpEvent(wor, 50)]),
        (list(range(2, 40)), dpa.NeighboringRelation.REPLACE_ONE, [dpa.SelfComposedDpEvent(wor, 7)]),
        ([1.5, 2.25, 8.0, 64.0], dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
         [dpa.SelfComposedDpEvent(poisson, 300), dpa.GaussianDpEvent(4.0),
          dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(4.0), 3)]),
    ]
    for _ in range(2):  # the second pass reads every leaf from the cache
        for orders, relation, events in cases:
            event = dpa.ComposedDpEvent(events)
            want = RdpAccountant(orders, relation).compose(event)
            got = _rdp.MixtureRdpAccountant(orders, relation).compose(event)
            assert np.array_equal(got._rdp, want._rdp)
            assert got.get_epsilon(1e-5) == want.get_epsilon(1e-5)
    refused = dpa.SelfComposedDpEvent(wor, 5)  # without replacement needs replace-one
    assert not RdpAccountant([2.0, 4.0]).supports(refused)
    assert not _rdp.MixtureRdpAccountant([2.0, 4.0]).supports(refused)
