"""Many-run audits (dpgen_jax.audit): the Clopper-Pearson bound at pre-registered thresholds, and
the DP-SGD step, the sanitiser, the histograms and DP-EM audited at claimed epsilon 4 (close to
one-run auditing's ceiling of about 4.4 with 1,000 canaries): the sound mechanism's bound
stays below the claim, every broken variant's bound exceeds it. Keys are fixed, so every bound
is deterministic; the sizes leave a margin of at least 0.5 in epsilon (measured values in
the comments)."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

pytest.importorskip("jax_privacy")
from jax_privacy import auditing  # noqa: E402

from dpgen_jax import audit  # noqa: E402

DELTA = 1e-5


# ----------------------------------------------------------------------------- the bound


@pytest.mark.parametrize("seed", [0, 1])
def test_many_run_bound_equals_jax_privacy_at_one_threshold(seed):
    rng = np.random.default_rng(seed)
    s_in, s_out = rng.normal(1.0, 0.5, 5000), rng.normal(0.0, 0.5, 5000)
    b = audit.epsilon_lower_bound_many_runs(s_in, s_out, DELTA, thresholds=[1.5])
    ref = auditing.CanaryScoreAuditor(s_in, s_out).epsilon_clopper_pearson(
        0.05, DELTA, threshold_strategy=auditing.Explicit(1.5))
    assert b.epsilon == pytest.approx(float(ref), abs=1e-12)
    assert b.threshold == 1.5
    assert b.true_positives == np.sum(s_in >= 1.5) and b.false_positives == np.sum(s_out >= 1.5)


def test_many_run_bound_is_a_union_bound_over_the_thresholds():
    rng = np.random.default_rng(2)
    s_in, s_out = rng.normal(1.0, 0.5, 5000), rng.normal(0.0, 0.5, 5000)
    ts = audit.many_run_thresholds(0.5)
    assert ts == tuple(0.5 + k * 0.5 for k in audit.THRESHOLD_STEPS)
    b = audit.epsilon_lower_bound_many_runs(s_in, s_out, DELTA, thresholds=ts)
    each = [float(auditing.CanaryScoreAuditor(s_in, s_out).epsilon_clopper_pearson(
        0.05 / len(ts), DELTA, threshold_strategy=auditing.Explicit(t))) for t in ts]
    assert b.epsilon == pytest.approx(max(each), abs=1e-12)
    assert b.threshold == ts[int(np.argmax(each))]


def test_many_run_ceiling_and_noise_scores():
    # Perfect separation: about ln(n_out / ln(2 rules / significance)).
    cap = audit.max_certifiable_epsilon_many_runs(50_000, 50_000, DELTA)
    assert abs(cap - math.log(50_000 / math.log(2 * 10 / 0.05))) < 0.05
    perfect = audit.epsilon_lower_bound_many_runs(np.ones(50_000), np.zeros(50_000), DELTA,
                                                  thresholds=audit.many_run_thresholds(1.0))
    assert perfect.epsilon == pytest.approx(cap, abs=1e-9)
    # Identical distributions: no claim is falsified (bound near 0).
    for seed in range(3):
        r = np.random.default_rng(seed).normal(size=40_000)
        b = audit.epsilon_lower_bound_many_runs(r[:20_000], r[20_000:], DELTA,
                                                thresholds=audit.many_run_thresholds(1.0))
        assert b.epsilon < 0.3


def test_many_run_bound_rejects_bad_input():
    with pytest.raises(ValueError, match="in_scores"):
        audit.epsilon_lower_bound_many_runs([], [0.0], DELTA, thresholds=[0.5])
    with pytest.raises(ValueError, match="out_scores"):
        audit.epsilon_lower_bound_many_runs([1.0], [np.inf], DELTA, thresholds=[0.5])
    with pytest.raises(ValueError, match="thresholds"):
        audit.epsilon_lower_bound_many_runs([1.0], [0.0], DELTA, thresholds=[])
    with pytest.raises(ValueError, match="significance"):
        audit.epsilon_lower_bound_many_runs([1.0], [0.0], DELTA, thresholds=[0.5],
                                            significance=0.5)


def test_audits_reject_bad_options():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="broken"):
        audit.audit_histograms(key, target_epsilon=1.0, runs=10, broken="no_clip")
    with pytest.raises(ValueError, match="broken"):
        audit.audit_dp_em(key, target_epsilon=1.0, runs=10, broken="no_clip")
    with pytest.raises(ValueError, match="mechanism"):
        audit.audit_histograms(key, target_epsilon=1.0, runs=10, mechanism="aim")
    with pytest.raises(ValueError, match="base_rows"):
        audit.audit_dp_em(key, target_epsilon=1.0, runs=10, base_rows=7)
    with pytest.raises(ValueError, match="runs"):
        audit.audit_sanitizer(key, target_epsilon=1.0, runs=1)


# ----------------------------------------------------------------------------- the mechanisms


def _check(res, claim, broken):
    assert res.claimed_epsilon == pytest.approx(claim, abs=1e-3)
    assert res.claimed_epsilon <= claim
    assert res.broken == broken
    assert res.runs_in + res.runs_out == res.in_scores.size + res.out_scores.size
    if broken is None:
        assert res.lower_bound.epsilon < res.claimed_epsilon
    else:
        assert res.lower_bound.epsilon > res.claimed_epsilon
    return res.lower_bound.epsilon


# Runs per variant: a sound audit needs few runs to stay below the claim (more runs only raise
# its bound towards the truth); noise off and no clipping separate perfectly; half the noise
# needs a few hundred thousand runs to certify more than 4.
RUNS = {None: 50_000, "noise_off": 20_000, "no_clip": 50_000, "half_noise": 200_000}


@pytest.mark.parametrize("broken,scale", [(None, 1.0), ("noise_off", 1.0), ("half_noise", 1.0),
                                          ("no_clip", 10.0)])
def test_sanitizer(broken, scale):
    # measured with key 0: sound 1.99, noise_off 7.42, half_noise 4.86, no_clip 8.34
    res = audit.audit_sanitizer(jax.random.key(0), target_epsilon=4.0, runs=RUNS[broken],
                                canary_scale=scale, broken=broken)
    _check(res, 4.0, broken)
    assert res.setting["rows_per_step"] == 4
    # the score is normalised: the canary adds 1, the claimed noise is sigma / sqrt(B)
    assert res.score_noise == pytest.approx(res.noise_multiplier / 2.0)
    if broken is None:
        assert np.mean(res.in_scores) - np.mean(res.out_scores) == pytest.approx(1.0, abs=0.03)
        assert np.std(res.out_scores) == pytest.approx(res.score_noise, rel=0.03)


@pytest.mark.parametrize("broken", [None, "half_noise"])
def test_sanitizer_at_claim_one(broken):
    # measured with key 1: sound 0.39, half_noise 1.52
    res = audit.audit_sanitizer(jax.random.key(1), target_epsilon=1.0,
                                runs=1_000_000 if broken else 50_000, broken=broken)
    _check(res, 1.0, broken)


@pytest.mark.parametrize("mechanism,broken", [("independent", None),
                                              ("independent", "half_noise"),
                                              ("independent", "noise_off"),
                                              ("dp-sactgan", "half_noise")])
def test_histograms(mechanism, broken):
    # measured with key 0: independent 2.18 / 5.19 / 7.42, dp-sactgan 4.78
    res = audit.audit_histograms(jax.random.key(0), target_epsilon=4.0, runs=RUNS[broken],
                                 mechanism=mechanism, broken=broken)
    _check(res, 4.0, broken)
    # independent: one Gaussian of sensitivity sqrt(d); dp-sactgan: d Gaussians of sensitivity 1
    assert res.setting["releases"] == (1 if mechanism == "independent" else 4)


@pytest.mark.parametrize("broken", [None, "half_noise", "noise_off"])
def test_dp_em(broken):
    # measured with key 0: sound 1.83, half_noise 4.76, noise_off 7.42
    runs = {None: 50_000, "half_noise": 400_000, "noise_off": 20_000}[broken]
    res = audit.audit_dp_em(jax.random.key(0), target_epsilon=4.0, runs=runs, base_rows=200,
                            broken=broken)
    _check(res, 4.0, broken)
    assert res.setting["releases"] == 3
    if broken is None:  # the observer's noise model: about sigma / 1.62 (sigma / sqrt(3) at best)
        assert res.score_noise == pytest.approx(res.noise_multiplier / 1.62, rel=0.01)
        assert np.std(res.out_scores) == pytest.approx(res.score_noise, rel=0.03)
        assert np.mean(res.in_scores) - np.mean(res.out_scores) == pytest.approx(1.0, abs=0.05)


def test_dp_em_runs_are_the_mixtures_of_one_batched_dp_em_ssp():
    """The audit releases the statistics once per table for all runs; its scores are those of
    ``dp_em_ssp`` fitted on every run's table (in-runs first, the canary masked in the out-runs)
    with the run key, scored from the float32 mixtures it returns."""
    from dpgen_jax._audit_mechanisms import _dp_em_observer
    from dpgen_jax.synthesizers import _dp_em

    key, runs, n, j = jax.random.key(3), 8, 10, 2
    res = audit.audit_dp_em(key, target_epsilon=4.0, runs=runs, base_rows=n, iterations=j, chunk=3)
    b, a = res.setting["base_centre"], res.setting["base_spread"]
    x = np.concatenate([np.full((n // 2, 1), b + a), np.full((n // 2, 1), b - a), np.ones((1, 1))])
    mask = np.ones((runs, n + 1))
    mask[runs // 2:, n] = 0
    init = _dp_em.init_mixture(jax.random.key(0), 1, 1)
    inits = _dp_em.Mixture(*(np.broadcast_to(np.asarray(f), (runs,) + f.shape) for f in init))
    mix = _dp_em.dp_em_ssp(np.broadcast_to(x.astype(np.float32), (runs, n + 1, 1)), jax.random.split(key)[1],
                           inits, iterations=j, noise_multiplier=res.noise_multiplier, mask=mask)
    base = np.trunc(x[:n, 0].astype(np.float32).astype(np.float64) * 4096) / 4096
    _, _, w, _ = _dp_em_observer(a * a)
    mu = np.asarray(mix.means[:, 0, 0], np.float64)
    m2 = np.asarray(mix.covariances[:, 0, 0, 0], np.float64) + mu * mu
    want = n * (w[0] * (mu - base.mean()) + w[1] * (m2 - np.mean(base * base)))
    got = np.concatenate([res.in_scores, res.out_scores])
    np.testing.assert_allclose(got, want, atol=1e-4 * res.noise_multiplier)


@pytest.mark.parametrize("broken,scale", [(None, 1.0), ("no_clip", 10.0)])
def test_dpsgd_step(broken, scale):
    # measured with key 0: sound 1.76, no_clip 7.62 (noise off and no clipping of the one-run
    # audit at claim 1: tests/test_audit.py)
    res = audit.audit_dpsgd_step(jax.random.key(0), target_epsilon=4.0, runs=RUNS[broken],
                                 canary_scale=scale, broken=broken)
    _check(res, 4.0, broken)
    assert res.setting["sample_rate"] == pytest.approx(0.5)


@pytest.mark.slow
@pytest.mark.parametrize("claim", [1.0, 4.0])
@pytest.mark.parametrize("family", ["dpsgd-step", "sanitizer", "histograms/independent",
                                    "histograms/dp-sactgan", "dp-em"])
def test_every_family_and_variant_at_both_claims(family, claim):
    """The docs table's claims at the docs' sizes, under another key."""
    key = jax.random.key(7)
    name, _, mech = family.partition("/")
    for broken in (None,) + audit.MANY_RUN_BROKEN[name]:
        scale = 10.0 if broken == "no_clip" else 1.0
        if name == "dpsgd-step":
            res = audit.audit_dpsgd_step(key, target_epsilon=claim, runs=1_000_000,
                                         canary_scale=scale, broken=broken)
        elif name == "sanitizer":
            res = audit.audit_sanitizer(key, target_epsilon=claim, runs=1_000_000,
                                        canary_scale=scale, broken=broken)
        elif name == "histograms":
            res = audit.audit_histograms(key, target_epsilon=claim, runs=1_000_000,
                                         mechanism=mech, broken=broken)
        else:
            res = audit.audit_dp_em(key, target_epsilon=claim, runs=2_000_000, broken=broken)
        _check(res, claim, broken)


def test_experiment_many_run_rows_and_commands(tmp_path):
    from experiments.studies import audit as experiment

    rep = experiment.main(["--mechanism", "histograms-independent", "--epsilons", "4",
                           "--variants", "sound", "noise_off", "--runs", "2000", "--seed", "0",
                           "--out", str(tmp_path)])
    assert [r["variant"] for r in rep["runs"]] == ["sound", "broken (noise_off)"]
    assert rep["runs"][1]["epsilon_lower_bound"] > 4.0 > rep["runs"][0]["epsilon_lower_bound"]
    text = (tmp_path / "summary.md").read_text()
    assert "| broken (noise_off) | 4.000 |" in text
    # a row re-run alone by its printed command gives the same numbers
    cmd = rep["runs"][0]["command"].split()
    assert cmd[:3] == ["python", "-m", "experiments.studies.audit"]
    alone = experiment.main(cmd[3:-1] + [str(tmp_path / "alone")])
    assert alone["runs"][0]["epsilon_lower_bound"] == rep["runs"][0]["epsilon_lower_bound"]
