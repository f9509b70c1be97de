"""DP-auto-GAN's two phases against per-example references (no data files needed).

Each phase's DP steps are recomputed by a slow reference: the Poisson batches of the step's
sampling key, per-example gradients from a Python loop over rows (a hand-written single-row loss
under ``jax.grad``), clipping by min(1, C/||g||), the sum, the step's Gaussian noise, division by
the *expected* batch size, and Adam / torch-style RMSProp written out in NumPy (float64), the
critic's weight clamp included. Parameters and the optimizers' moment estimates (which carry the
gradient's scale, which the Adam / RMSProp update alone hides) are compared. The data are rows
drawn uniformly from the public Adult schema (the Adult shapes, no Adult file).
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
import pytest

from dpgen_jax import data, dpsgd
from dpgen_jax.synthesizers import DPAutoGAN, DPAutoGANConfig
from dpgen_jax.synthesizers import dp_auto_gan as dag
from tests import _tables
from tests._oracles import (
    adam as _adam,
    assert_close as _assert_close,
    clip_between as _clip_between,
    clipped_sum as _clipped_sum,
    flat as _flat,
    noisy as _noisy,
    poisson_chunks as _poisson_chunks,
    rmsprop as _rmsprop,
    unflat as _unflat,
)


ADULT_ROWS = 2000
SEED = 0
AE_STEPS, CRITIC_STEPS = 3, 2
TARGET_EPSILON = 0.25  # large noise for a 3 + 2 step schedule


def _tiny_adult(**overrides) -> DPAutoGANConfig:
    base = dict(ae_steps=AE_STEPS, critic_steps=CRITIC_STEPS, critic_steps_per_generator_step=1,
                ae_clip_norm=0.05, clip_calibration_steps=5,
                matching_share=0.0)  # the paper's two phases and key splits (docs/matching.md)
    base.update(overrides)
    return DPAutoGANConfig.adult(**base)


@functools.partial(jax.jit, static_argnums=0)
def _ae_row_grad(nets, p, row):
    """Gradient of one row's joint autoencoder loss: mean BCE over its coordinates (logits)."""
    def loss(p):
        logits = nets.autoencoder.apply({"params": p}, row[None])[0]
        return jnp.mean(jnp.logaddexp(0.0, logits) - logits * row)
    return jax.grad(loss)(p)


def _D(nets, p, rows):
    return nets.critic.apply({"params": p}, rows)


@functools.partial(jax.jit, static_argnums=0)
def _critic_pair_grad(nets, p, real, fake):
    return jax.grad(lambda p: -_D(nets, p, real[None])[0] + _D(nets, p, fake[None])[0])(p)


@functools.partial(jax.jit, static_argnums=0)
def _critic_real_grad(nets, p, real):
    return jax.grad(lambda p: -_D(nets, p, real[None])[0])(p)


@functools.partial(jax.jit, static_argnums=0)
def _critic_fake_grad(nets, p, fake):
    return jax.grad(lambda p: _D(nets, p, fake[None])[0])(p)


@functools.partial(jax.jit, static_argnums=(0, 4, 5))
def _fakes(nets, gen, dec, key, n, noise_dim):
    """n decoded fake rows from z ~ N(0, I) drawn with ``key``."""
    z = jax.random.normal(key, (n, noise_dim))
    return nn.sigmoid(nets.decoder.apply({"params": dec}, nets.generator.apply({"params": gen}, z)))


@functools.partial(jax.jit, static_argnums=(0, 5, 6))
def _generator_grad(nets, critic, gen, dec, key, n, noise_dim):
    return jax.grad(lambda g: -jnp.mean(_D(nets, critic, _fakes(nets, g, dec, key, n, noise_dim))))(gen)


def _reference_critic_step(nets, cfg, like, critic_p, critic_v, gen_p, dec, x, key, sigma):
    """One DP critic step (make_dp_step with the GAN runner's batch and loss) in float64.

    ``like`` gives the parameter structures (critic, generator); ``critic_p`` / ``gen_p`` are flat.
    """
    m = x.shape[0]
    q = cfg.critic_batch_size / m
    k_sample, k_batch, k_noise, k_public = jax.random.split(key, 4)
    chunks, cap = _poisson_chunks(k_sample, m, q)
    params, gen = _unflat(critic_p, like[0]), _unflat(gen_p, like[1])
    examples = []
    for i, idx, slots in chunks:
        f = np.asarray(_fakes(nets, gen, dec, jax.random.fold_in(k_batch, i), cap, cfg.noise_dim))
        examples += [(x[r], f[s]) for r, s in zip(idx, slots)]  # one fake per padded slot
    if cfg.critic_clipping == "paired":
        grad_one = functools.partial(_critic_pair_grad, nets)
    else:
        grad_one = lambda p, real, fake: _critic_real_grad(nets, p, real)  # noqa: E731
    total, norms = _clipped_sum(grad_one, params, examples, cfg.critic_clip_norm)
    noisy = _noisy(total, params, k_noise, sigma * cfg.critic_clip_norm)
    g = noisy / (q * m)
    if cfg.critic_clipping == "real_only":
        # The fake-data term touches no private row and gets no noise: the mean over
        # critic_batch_size fresh fake rows (key k_public) of each fake row's critic gradient,
        # clipped to the same C3 (make_gan_runner's balance of the two terms).
        f = np.asarray(_fakes(nets, gen, dec, k_public, cfg.critic_batch_size, cfg.noise_dim))
        fake_sum, _ = _clipped_sum(lambda p, row: _critic_fake_grad(nets, p, row), params,
                                   [(row,) for row in f], cfg.critic_clip_norm)
        g = g + fake_sum / cfg.critic_batch_size
    p, v = _rmsprop(critic_p, g, critic_v, cfg.critic_learning_rate)
    if cfg.weight_clamp is not None:
        p = np.clip(p, -cfg.weight_clamp, cfg.weight_clamp)
    return p, v, g, norms


def _reference_generator_step(nets, cfg, like, gen_p, gen_v, critic_p, dec, key):
    """One generator step: RMSProp on -mean D(fake) through the frozen decoder (float64)."""
    g = _flat(_generator_grad(nets, _unflat(critic_p, like[0]), _unflat(gen_p, like[1]), dec, key,
                              cfg.generator_batch_size, cfg.noise_dim))
    p, v = _rmsprop(gen_p, g, gen_v, cfg.generator_learning_rate)
    return p, v, g


@pytest.fixture(scope="module")
def adult_train() -> pd.DataFrame:
    return _tables.adult_shaped_frame(ADULT_ROWS, seed=11)


@pytest.fixture(scope="module")
def adult_x(adult_train) -> np.ndarray:
    return data.TableEncoder(data.adult_schema()).encode(adult_train)


@pytest.fixture(scope="module")
def adult_config(adult_x) -> DPAutoGANConfig:
    """Tiny Adult schedule whose clip norms sit inside the per-example norms at initialisation
    (probed on the fit's own initial networks), so that the phases clip some rows and not others."""
    cfg = _tiny_adult()
    nets = dag.networks(cfg, adult_x.shape[1])
    k_init = jax.random.split(jax.random.key(SEED), 4)[0]
    p0 = dag.init(cfg, adult_x.shape[1], k_init)
    n = cfg.generator_batch_size  # a fake-row count the references compile for anyway
    ae_norms = [np.linalg.norm(_flat(_ae_row_grad(nets, p0.autoencoder, adult_x[i]))) for i in range(n)]
    fakes = np.asarray(_fakes(nets, p0.generator, p0.autoencoder["decoder"], jax.random.key(7), n,
                              cfg.noise_dim))
    critic_norms = [np.linalg.norm(_flat(_critic_pair_grad(nets, p0.critic, adult_x[i], fakes[i])))
                    for i in range(n)]
    return dataclasses.replace(cfg, ae_clip_norm=float(np.median(ae_norms)),
                               critic_clip_norm=float(np.median(critic_norms)))


@pytest.fixture(scope="module")
def adult_model(adult_train, adult_config) -> DPAutoGAN:
    """Adult, calibrated to TARGET_EPSILON (PLD), paired critic clipping, seeded."""
    return DPAutoGAN(adult_config).fit(adult_train, data.adult_schema(), epsilon=TARGET_EPSILON,
                                       seed=SEED)


def test_functional_reproduction_is_the_fit(adult_model, functional_run):
    run = functional_run
    assert int(run["ae"].steps) == AE_STEPS
    assert int(run["gan"].critic.steps) == CRITIC_STEPS == int(run["gan"].generator.steps)
    r = adult_model.released
    jax.tree_util.tree_map(np.testing.assert_array_equal, run["gan"].generator.params, r["generator"])
    jax.tree_util.tree_map(np.testing.assert_array_equal, run["ae"].params["decoder"], r["decoder"])


@pytest.fixture(scope="module")
def functional_run(adult_model, adult_x):
    """fit(seed=0) redone with the public functions and the key splits of ``DPAutoGAN.fit``."""
    cfg = adult_model.fitted_config  # the configuration the fit used (noise: its phases)
    x = jnp.asarray(adult_x)
    k_init, _k_clip, k_ae, k_gan = jax.random.split(jax.random.key(SEED), 4)
    params = dag.init(cfg, x.shape[1], k_init)
    ae_phase, critic_phase = adult_model.fitted_phases()
    ae = dag.train_autoencoder(cfg, params.autoencoder, x, k_ae, ae_phase)
    gan = dag.train_gan(cfg, params, ae.params["decoder"], x, k_gan, critic_phase)
    sigma = {"autoencoder": ae_phase.noise_multiplier, "critic": critic_phase.noise_multiplier}
    return dict(cfg=cfg, params=params, ae=ae, gan=gan, k_ae=k_ae, k_gan=k_gan, sigma=sigma)


def test_autoencoder_phase_matches_per_example_reference(functional_run, adult_x):
    """The AE phase: AE_STEPS joint DP-Adam steps, step t keyed fold_in(k_ae, t) (run_phase)."""
    run = functional_run
    cfg, ae, params0 = run["cfg"], run["ae"], run["params"].autoencoder
    nets = dag.networks(cfg, adult_x.shape[1])
    m = adult_x.shape[0]
    q, clip, sigma = cfg.ae_batch_size / m, float(cfg.ae_clip_norm), run["sigma"]["autoencoder"]
    p, mu, nu = _flat(params0), 0.0, 0.0
    clipped = unclipped = 0
    for t in range(AE_STEPS):
        k_sample, _k_batch, k_noise, _k_public = jax.random.split(jax.random.fold_in(run["k_ae"], t), 4)
        chunks, _ = _poisson_chunks(k_sample, m, q)
        rows = [(adult_x[r],) for _, idx, _ in chunks for r in idx]
        total, norms = _clipped_sum(functools.partial(_ae_row_grad, nets), _unflat(p, params0),
                                    rows, clip)
        clipped, unclipped = clipped + np.sum(norms > clip), unclipped + np.sum(norms < clip)
        noisy = _noisy(total, params0, k_noise, sigma * clip)
        g = noisy / (q * m)  # the expected batch size, not the realised one
        p, mu, nu = _adam(p, g, mu, nu, t + 1, cfg.ae_learning_rate)
    assert clipped > 0 and unclipped > 0
    _assert_close(optax.tree_utils.tree_get(ae.opt_state, "mu"), mu, "Adam mu")
    _assert_close(optax.tree_utils.tree_get(ae.opt_state, "nu"), nu, "Adam nu", rtol=2e-5)
    _assert_close(ae.params, p, "autoencoder parameters", grad=g)


def test_gan_phase_matches_per_example_reference(functional_run, adult_x):
    """The GAN phase with paired clipping: CRITIC_STEPS iterations of (DP critic step, generator
    step), t_D = 1; critic step j keyed fold_in(k_critic, j), generator step j fold_in(k_gen, j)."""
    run = functional_run
    cfg, gan, params0 = run["cfg"], run["gan"], run["params"]
    assert cfg.critic_clipping == "paired" and cfg.critic_steps_per_generator_step == 1
    dec = run["ae"].params["decoder"]
    nets = dag.networks(cfg, adult_x.shape[1])
    k_critic, k_gen = jax.random.split(run["k_gan"])
    cp, cv = _flat(params0.critic), 0.0
    gp, gv = _flat(params0.generator), 0.0
    like = (params0.critic, params0.generator)
    all_norms = []
    for j in range(CRITIC_STEPS):
        cp, cv, _, norms = _reference_critic_step(nets, cfg, like, cp, cv, gp, dec, adult_x,
                                                  jax.random.fold_in(k_critic, j),
                                                  run["sigma"]["critic"])
        all_norms.extend(norms)
        gp, gv, gg = _reference_generator_step(nets, cfg, like, gp, gv, cp, dec,
                                               jax.random.fold_in(k_gen, j))
    all_norms = np.array(all_norms)
    assert np.any(all_norms > cfg.critic_clip_norm) and np.any(all_norms < cfg.critic_clip_norm)
    _assert_close(optax.tree_utils.tree_get(gan.critic.opt_state, "nu"), cv, "critic RMSProp nu",
                  rtol=1e-4)
    _assert_close(gan.critic.params, cp, "critic parameters")
    assert np.max(np.abs(cp)) <= cfg.weight_clamp
    _assert_close(optax.tree_utils.tree_get(gan.generator.opt_state, "nu"), gv,
                  "generator RMSProp nu", rtol=1e-4)
    _assert_close(gan.generator.params, gp, "generator parameters", rtol=1e-4, grad=gg)


def test_real_only_critic_step_matches_per_example_reference(functional_run, adult_x):
    """make_gan_runner with critic_clipping="real_only": -D(real) clipped and noised, the fake term
    added without noise; then the generator step. Also the runner's step accounting. The Adult
    data and the fit's batch sizes, so that the reference's compiled helpers are shared."""
    x = adult_x
    m, width = x.shape
    p0 = functional_run["params"]
    dec = functional_run["ae"].params["decoder"]
    cfg0 = dataclasses.replace(functional_run["cfg"], critic_clipping="real_only",
                               critic_learning_rate=1e-3, weight_clamp=0.1,
                               critic_steps_per_generator_step=2)
    nets = dag.networks(cfg0, width)
    like = (p0.critic, p0.generator)
    # Critic weights inside the clamp (as after earlier steps); the step moves them by ~0.01.
    critic0 = jax.tree_util.tree_map(lambda p: jnp.clip(p, -0.1, 0.1), p0.critic)
    gen0 = p0.generator
    q = cfg0.critic_batch_size / m
    key = jax.random.key(2024)
    k_critic, k_gen = jax.random.split(key)
    k_sample = jax.random.split(jax.random.fold_in(k_critic, 0), 4)[0]
    chunks, _ = _poisson_chunks(k_sample, m, q)
    probe = [np.linalg.norm(_flat(_critic_real_grad(nets, critic0, x[r])))
             for _, idx, _ in chunks for r in idx]
    cfg = dataclasses.replace(cfg0, critic_clip_norm=_clip_between(probe))
    sigma = 0.8

    critic_phase = dag.privacy_phases(cfg.replace(critic_noise_multiplier=sigma), m)[1]
    run, critic_opt, gen_opt = dag.make_gan_runner(cfg, width, m, critic_phase)
    state0 = dag._gan.GANState(dpsgd.init_state(critic0, critic_opt), dpsgd.init_state(gen0, gen_opt))
    out = run(state0, x, dec, key, jnp.int32(1), jnp.int32(1))
    assert int(out.critic.steps) == 1 and int(out.generator.steps) == 1

    cp, cv, cg, norms = _reference_critic_step(nets, cfg, like, _flat(critic0), 0.0, _flat(gen0), dec,
                                               x, jax.random.fold_in(k_critic, 0), sigma)
    assert np.any(norms > cfg.critic_clip_norm) and np.any(norms < cfg.critic_clip_norm)
    _assert_close(optax.tree_utils.tree_get(out.critic.opt_state, "nu"), cv, "critic RMSProp nu",
                  rtol=2e-5)
    # A first RMSProp step moves a weight by lr * g / (0.1 |g| + 1e-8): where |g| is within a few
    # float32 ulps of the summed gradient's scale (~1e-7 here) the rounding of g decides the
    # update, so coordinates under 1e-4 of the largest gradient are left out.
    _assert_close(out.critic.params, cp, "critic parameters", grad=cg, tiny=1e-4)
    assert 0 < np.mean(np.abs(cp) < cfg.weight_clamp) < 1  # the clamp bit for some weights only
    gp, gv, gg = _reference_generator_step(nets, cfg, like, _flat(gen0), 0.0, cp, dec,
                                           jax.random.fold_in(k_gen, 0))
    _assert_close(optax.tree_utils.tree_get(out.generator.opt_state, "nu"), gv,
                  "generator RMSProp nu", rtol=1e-4)
    _assert_close(out.generator.params, gp, "generator parameters", rtol=1e-4, grad=gg, tiny=1e-4)

    # Step accounting of the same compiled runner: t_D = 2, at most total_critic_steps in all.
    out = run(state0, x, dec, key, jnp.int32(2), jnp.int32(3))
    assert (int(out.critic.steps), int(out.generator.steps)) == (3, 2)  # 2 + 1 critic steps
    out = run(out, x, dec, key, jnp.int32(1), jnp.int32(3))
    assert (int(out.critic.steps), int(out.generator.steps)) == (3, 3)  # no critic step beyond 3
