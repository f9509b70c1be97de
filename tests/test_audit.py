"""The empirical privacy audit: jax-privacy's one-run bound, canary inclusion, a tiny audited phase."""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.special

pytest.importorskip("jax_privacy")
from jax_privacy import auditing  # noqa: E402

from dpgen_jax import audit  # noqa: E402


def _kth(scores_in, scores_out, k):
    return float(np.sort(np.concatenate([scores_in, scores_out]))[::-1][k - 1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_equals_jax_privacy_for_one_rule(seed):
    rng = np.random.default_rng(seed)
    s_in, s_out = rng.normal(1.0, 1.0, 300), rng.normal(0.0, 1.0, 300)
    for k in (20, 100):
        ours = audit.epsilon_lower_bound(s_in, s_out, 1e-5, significance=0.05, guesses=[k])
        t = _kth(s_in, s_out, k)
        ref = auditing.CanaryScoreAuditor(s_in, s_out).epsilon_one_run(
            0.05, 1e-5, threshold_strategy=auditing.Explicit(t))
        assert ours.epsilon == pytest.approx(float(ref), abs=1e-12)
        assert ours.guesses == np.sum(np.concatenate([s_in, s_out]) >= t)
        assert ours.correct == np.sum(s_in >= t)
        # the library's own search over every threshold, reported beside
        assert ours.epsilon_all_thresholds == pytest.approx(
            float(auditing.CanaryScoreAuditor(s_in, s_out).epsilon_one_run(0.05, 1e-5)), abs=1e-12)


def test_grid_is_a_union_bound_over_jax_privacy_bounds():
    rng = np.random.default_rng(3)
    s_in, s_out = rng.normal(2.0, 1.0, 500), rng.normal(0.0, 1.0, 500)
    grid = audit.guess_grid(1000)
    ours = audit.epsilon_lower_bound(s_in, s_out, 1e-5)
    each = [float(auditing.CanaryScoreAuditor(s_in, s_out).epsilon_one_run(
        0.05 / len(grid), 1e-5, threshold_strategy=auditing.Explicit(_kth(s_in, s_out, k))))
        for k in grid]
    assert ours.epsilon == pytest.approx(max(each), abs=1e-12)
    assert grid == (450, 250, 125, 62, 31)
    assert audit.guess_grid(40) == (18, 10)


@pytest.mark.parametrize("r", [50, 400])
def test_perfect_separation_matches_closed_form(r):
    # All r guesses correct: at delta -> 0 the one-run p-value is sigmoid(eps)^r (Steinke et al.
    # 2023), so the bound is logit(significance^(1/r)), about ln(r / 3) at 5%.
    b = audit.epsilon_lower_bound(np.ones(r), np.zeros(r), 1e-12, significance=0.05, guesses=[r])
    expected = scipy.special.logit(0.05 ** (1.0 / r))
    assert b.epsilon == pytest.approx(expected, rel=1e-4)
    assert b.guesses == r and b.correct == r
    assert abs(b.epsilon - np.log(r / 3)) < 0.1
    assert audit.max_certifiable_epsilon(r, 2 * r, 1e-12) == pytest.approx(expected, rel=1e-4)


def test_many_separated_canaries_give_a_large_bound_random_scores_near_zero():
    rng = np.random.default_rng(4)
    big = audit.epsilon_lower_bound(rng.normal(10, 1, 5000), rng.normal(0, 1, 5000), 1e-8)
    assert big.epsilon > 6.0 and big.correct == big.guesses == 4500
    for seed in range(5):
        r = np.random.default_rng(seed).normal(size=2000)
        noise = audit.epsilon_lower_bound(r[:1000], r[1000:], 1e-5)
        assert noise.epsilon < 0.35


def test_bound_rejects_bad_input():
    with pytest.raises(ValueError, match="in_scores"):
        audit.epsilon_lower_bound([], [1.0], 1e-5)
    with pytest.raises(ValueError, match="out_scores"):
        audit.epsilon_lower_bound([1.0], [np.nan], 1e-5)
    with pytest.raises(ValueError, match="delta"):
        audit.epsilon_lower_bound([1.0], [0.0], 0.0)
    with pytest.raises(ValueError, match="guesses"):
        audit.epsilon_lower_bound([1.0], [0.0], 1e-5, guesses=[3])


def test_inclusion_is_bernoulli_half_and_secret_keyed():
    m = 40_000
    a = audit.include_canaries(jax.random.key(0), m)
    assert a.dtype == bool and a.shape == (m,)
    assert abs(a.mean() - 0.5) < 4 * 0.5 / np.sqrt(m)
    # independence: the next bit agrees with the previous one half of the time
    assert abs(np.mean(a[1:] == a[:-1]) - 0.5) < 4 * 0.5 / np.sqrt(m)
    # the key decides: the same key repeats, another key gives unrelated bits
    assert np.array_equal(a, audit.include_canaries(jax.random.key(0), m))
    b = audit.include_canaries(jax.random.key(1), m)
    assert abs(np.mean(a == b) - 0.5) < 4 * 0.5 / np.sqrt(m)
    # per-canary frequency over many keys
    freq = np.mean([audit.include_canaries(jax.random.key(s), 50) for s in range(400)], axis=0)
    assert np.all(np.abs(freq - 0.5) < 5 * 0.5 / np.sqrt(400))


def test_canary_loss_gradient_is_the_fixed_direction():
    params = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.ones(3)}
    u = audit.canary_directions(jax.random.key(0), 4, 9)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(u), axis=1), 1.0, rtol=1e-6)
    loss = audit.canary_loss(lambda p, x: jnp.sum((x @ p["w"] + p["b"]) ** 2, axis=1), u, 0.5)
    batch = {"rows": jnp.ones((1, 2)), "canary": jnp.array([2], jnp.int32)}
    g = jax.grad(lambda p: loss(p, batch)[0])(params)
    flat = jnp.concatenate([g["b"].ravel(), g["w"].ravel()])  # ravel_pytree order: sorted keys
    np.testing.assert_allclose(np.asarray(flat), 0.5 * np.asarray(u[2]), rtol=1e-6, atol=1e-7)


def _tiny_phase():
    # Gradient canaries need many more parameters than canaries (nearly orthogonal directions):
    # a linear model with 4,800 weights on 512 rows.
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(512, 6)), jnp.float32)
    y = jnp.asarray(rng.normal(size=(512,)), jnp.float32)
    params = {"w": jnp.zeros((6, 800)), "b": jnp.zeros(())}

    def loss(p, batch):
        return (jnp.mean(batch["x"] @ p["w"], axis=-1) + p["b"] - batch["y"]) ** 2

    return loss, params, {"x": x, "y": y}


@pytest.mark.parametrize("seed", [0])
def test_tiny_phase_broken_is_detected_sound_stays_below(seed):
    loss, params, data = _tiny_phase()
    kwargs = dict(batch_size=64, num_records=512, steps=120, clip_norm=1.0, delta=1e-5,
                  canaries=300, chunk_size=120)
    sigma = audit.calibrated_noise(64, 512, 120, 1.0, 1e-5)
    key = jax.random.key(seed)
    sound = audit.audit_dpsgd(loss, optax.sgd(0.05), params, data, key, noise_multiplier=sigma,
                              **kwargs)
    broken = audit.audit_dpsgd(loss, optax.sgd(0.05), params, data, key, noise_multiplier=sigma,
                               broken="noise_off", **kwargs)
    assert sound.claimed_epsilon == pytest.approx(1.0, abs=1e-3)
    assert sound.steps == 120 and broken.steps == 120
    assert sound.included + (sound.canaries - sound.included) == 300
    assert sound.lower_bound.epsilon < sound.claimed_epsilon
    assert broken.lower_bound.epsilon > broken.claimed_epsilon
    no_clip = audit.audit_dpsgd(loss, optax.sgd(0.05), params, data, key, noise_multiplier=sigma,
                                broken="no_clip", canary_scale=20.0, **kwargs)
    assert no_clip.lower_bound.epsilon > no_clip.claimed_epsilon


def test_audit_rejects_bad_options():
    loss, params, data = _tiny_phase()
    kwargs = dict(batch_size=64, num_records=512, steps=2, clip_norm=1.0, noise_multiplier=1.0,
                  delta=1e-5, canaries=10)
    with pytest.raises(ValueError, match="broken"):
        audit.audit_dpsgd(loss, optax.sgd(0.1), params, data, jax.random.key(0), broken="off",
                          **kwargs)
    with pytest.raises(ValueError, match="score"):
        audit.audit_dpsgd(loss, optax.sgd(0.1), params, data, jax.random.key(0), score="loss",
                          **kwargs)


def test_no_synthesizer_imports_the_audit():
    root = pathlib.Path(audit.__file__).parent
    for path in list((root / "synthesizers").glob("*.py")) + [root / "cli.py"]:
        text = path.read_text()
        assert "audit" not in text, path
    # the many-run audits (and their broken variants) are reachable only through dpgen_jax.audit
    for path in root.rglob("*.py"):
        if path.name not in ("audit.py", "_audit_mechanisms.py"):
            assert "_audit_mechanisms" not in path.read_text(), path


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tiny_phase_over_several_keys(seed):
    """The fast test's two claims again under other secret keys (the bound is a random variable)."""
    test_tiny_phase_broken_is_detected_sound_stays_below(seed)


@pytest.mark.slow
def test_experiment_writes_report_and_table(adult_dir, tmp_path):
    from experiments.studies import audit as experiment

    rep = experiment.main(["--epsilons", "4", "--broken-epsilons", "4", "--steps", "30",
                           "--canaries", "200", "--seed", "0", "--data-dir", str(adult_dir),
                           "--out", str(tmp_path)])
    assert [r["variant"] for r in rep["runs"]] == ["sound", "broken (noise_off)"]
    for r in rep["runs"]:
        assert r["steps"] == 30 and r["canaries"] == 200
        assert r["claimed_epsilon"] == pytest.approx(4.0, abs=1e-3)
        assert 0 <= r["correct_guesses"] <= r["guesses"] <= 200
    assert (tmp_path / "report.json").is_file()
    assert "| sound | 4.000 |" in (tmp_path / "summary.md").read_text()
