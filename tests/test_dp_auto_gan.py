"""DP-auto-GAN (``dpgen_jax.synthesizers``) on short schedules and small data.

Oracles, all independent of the code under test:

* each phase's DP steps against a slow reference: the Poisson batches re-derived from the same key
  splits as ``dpsgd.make_dp_step`` (and ``run_phase`` / the GAN runner around it), per-example
  gradients from a Python loop over rows (a hand-written single-row loss under ``jax.grad``),
  clipping by min(1, C/||g||), the sum, the same Gaussian noise, division by the *expected* batch
  size, and Adam / torch-style RMSProp written out in NumPy (float64), the critic's weight clamp
  included. Parameters and the optimizers' moment estimates (which carry the gradient's scale,
  which the Adam / RMSProp update alone hides) are compared;
* the privacy report against ``dp_accounting`` called directly (PLD with the report's own
  discretisation interval, RDP) for the phases and the step counts actually run, and the presets
  against the paper's published accounting (spec dp-auto-gan §2.3);
* the released file against the structure of the networks (only generator and decoder arrays),
  and loading against corrupt, foreign and incompatible files;
* the class against the public functional API reproducing its key splits.

Cost: compilation dominates (each distinct network shape pays ~10 s for its eager
initialisation; each phase runner a few seconds). So one Adult model is fitted (module fixture),
reproduced once with the functional API, and that reproduction's phases are replayed by the
references; the other networks share the Adult shapes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re

import dp_accounting as dpa
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpgen_jax import data, dpsgd, privacy
from dpgen_jax.synthesizers import DPAutoGAN, DPAutoGANConfig
from dpgen_jax.synthesizers import dp_auto_gan as dag

DELTA = 1e-5
ADULT_ROWS = 2000
ADULT_N, MIMIC_N = 32561, 27912
MIMIC_FEATURES = 40
SEED = 0
AE_STEPS, CRITIC_STEPS = 3, 2
TARGET_EPSILON = 0.25  # large noise for a 3 + 2 step schedule: cheap PLD accounting


def _tiny_adult(**overrides) -> DPAutoGANConfig:
    base = dict(ae_steps=AE_STEPS, critic_steps=CRITIC_STEPS, critic_steps_per_generator_step=1,
                chunk_size=16, ae_clip_norm=0.05, clip_calibration_steps=5)
    base.update(overrides)
    return DPAutoGANConfig.adult(**base)


def _strict_json(obj) -> str:
    return json.dumps(obj, allow_nan=False)


# --------------------------------------------------------------------------------------------
# Reference helpers (float64 NumPy; per-example gradients one row at a time)
# --------------------------------------------------------------------------------------------


def _flat(tree) -> np.ndarray:
    return np.concatenate([np.asarray(x, np.float64).ravel() for x in jax.tree_util.tree_leaves(tree)])


def _unflat(vec: np.ndarray, like):
    leaves, treedef = jax.tree_util.tree_flatten(like)
    out, start = [], 0
    for x in leaves:
        out.append(np.asarray(vec[start:start + x.size], np.float32).reshape(x.shape))
        start += x.size
    return jax.tree_util.tree_unflatten(treedef, out)


def _assert_close(got, want, what: str, rtol: float = 1e-5, grad=None) -> None:
    """max |got - want| <= rtol * max |want|.

    With ``grad``, coordinates whose reference gradient is tiny (< 1e-6 of the largest) are left
    out: there Adam / RMSProp divide by ~eps, so float32 rounding of a near-zero gradient moves
    the update by O(lr). Their moment estimates are still compared in full.
    """
    got, want = _flat(got), np.asarray(want, np.float64)
    keep = np.ones(want.shape, bool)
    if grad is not None:
        keep = np.abs(grad) >= 1e-6 * np.max(np.abs(grad))
    scale = max(np.max(np.abs(want)), 1e-12)
    err = np.max(np.abs(got - want)[keep])
    assert err <= rtol * scale, f"{what}: max error {err:.3g} vs scale {scale:.3g}"


def _clip_between(norms) -> float:
    """A clip norm between two observed per-example norms, so some rows are clipped, some not."""
    u = np.unique(np.round(np.asarray(norms), 9))
    assert len(u) >= 2, "all probe norms are equal"
    k = len(u) // 2
    return float(0.5 * (u[k - 1] + u[k]))


_chunk = jax.jit(dpsgd.poisson_chunk, static_argnums=(2, 3, 4))
_unit_noise = jax.jit(lambda zeros, key: dpsgd.add_gaussian_noise(zeros, key, 1.0))


def _noisy(total: np.ndarray, like, key, std: float) -> np.ndarray:
    """total + the engine's N(0, std^2) draw for ``key`` (one per coordinate of ``like``)."""
    zeros = jax.tree_util.tree_map(jnp.zeros_like, like)
    return total + std * _flat(_unit_noise(zeros, key))


def _poisson_chunks(k_sample, m: int, q: float):
    """[(chunk index, selected record indices, their slots)] exactly as make_dp_step draws them."""
    cap = dpsgd.default_capacity(m, q)
    out, pos, i = [], jnp.int32(0), 0
    while int(pos) < m:
        c = _chunk(jax.random.fold_in(k_sample, i), pos, m, q, cap)
        mask = np.asarray(c.mask)
        out.append((i, np.asarray(c.indices)[mask], np.flatnonzero(mask)))
        pos, i = c.next_position, i + 1
    return out, cap


def _clipped_sum(grad_one, params, examples, clip_norm):
    """sum_i min(1, C / ||g_i||) g_i over ``examples``, and the norms ||g_i||."""
    total, norms = 0.0, []
    for ex in examples:
        g = _flat(grad_one(params, *ex))
        n = np.linalg.norm(g)
        norms.append(n)
        total = total + g * min(1.0, clip_norm / n)
    return total, np.array(norms)


def _adam(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mhat, vhat = m / (1 - b1**t), v / (1 - b2**t)
    return p - lr * mhat / (np.sqrt(vhat) + eps), m, v


def _rmsprop(p, g, v, lr, alpha=0.99, eps=1e-8):
    """torch.optim.RMSprop(alpha=0.99, eps=1e-8), no momentum, no centering."""
    v = alpha * v + (1 - alpha) * g * g
    return p - lr * g / (np.sqrt(v) + eps), v


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


# --------------------------------------------------------------------------------------------
# Fixtures: one fitted Adult model, its functional reproduction, a non-private model
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _persistent_compilation_cache(tmp_path_factory):
    """JAX's persistent compilation cache in a temporary folder for this module only.

    The functional reproduction and the released model's sampler compile exactly the programs
    the fit compiled (new closures, same code), so with the cache they are loaded instead of
    recompiled. Results are unaffected: a cached program is the same executable. The previous
    settings are restored afterwards.
    """
    from jax.experimental.compilation_cache import compilation_cache as cc

    saved = (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)
    jax.config.update("jax_compilation_cache_dir", str(tmp_path_factory.mktemp("xla_cache")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.3)
    cc.reset_cache()
    yield
    jax.config.update("jax_compilation_cache_dir", saved[0])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])
    cc.reset_cache()


@pytest.fixture(scope="module")
def adult_train(adult_dir) -> pd.DataFrame:
    train, _ = data.load_adult(adult_dir)
    return train.iloc[:ADULT_ROWS].reset_index(drop=True)


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


@pytest.fixture(scope="module")
def adult_sample(adult_model) -> pd.DataFrame:
    return adult_model.sample(np.int64(257), seed=5)  # numpy integers are accepted


@pytest.fixture(scope="module")
def functional_run(adult_model, adult_x):
    """fit(seed=0) redone with the public functions and the key splits of ``DPAutoGAN.fit``."""
    cfg = adult_model.config  # the configuration the fit used (calibrated noise multipliers)
    x = jnp.asarray(adult_x)
    k_init, _k_clip, k_ae, k_gan = jax.random.split(jax.random.key(SEED), 4)
    params = dag.init(cfg, x.shape[1], k_init)
    ae = dag.train_autoencoder(cfg, params.autoencoder, x, k_ae, clip_norm=float(cfg.ae_clip_norm),
                               noise_multiplier=cfg.ae_noise_multiplier, steps=cfg.ae_steps)
    gan = dag.train_gan(cfg, params, ae.params["decoder"], x, k_gan, private=True,
                        noise_multiplier=cfg.critic_noise_multiplier, critic_steps=cfg.critic_steps)
    return dict(cfg=cfg, params=params, ae=ae, gan=gan, k_ae=k_ae, k_gan=k_gan)


@pytest.fixture(scope="module")
def nonprivate_model(adult_train) -> DPAutoGAN:
    """Adult, epsilon = inf: two plain autoencoder steps, no critic step (nothing else compiled)."""
    cfg = _tiny_adult(ae_steps=2, critic_steps=0)
    return DPAutoGAN(cfg).fit(adult_train, data.adult_schema(), epsilon=math.inf, seed=2)


# --------------------------------------------------------------------------------------------
# Samples decode to the schema
# --------------------------------------------------------------------------------------------


def _check_valid_sample(frame: pd.DataFrame, schema: data.Schema, n: int) -> np.ndarray:
    assert list(frame.columns) == schema.names
    assert len(frame) == n
    enc = data.TableEncoder(schema)
    x = enc.encode(frame)  # strict: unknown categories and out-of-bounds values raise
    assert x.shape == (n, enc.width)
    for col in schema.columns:
        s = frame[col.name]
        assert not s.isna().any(), col.name
        if col.kind == "continuous":
            v = s.to_numpy(dtype=float)
            assert np.all((v >= col.lower) & (v <= col.upper)), col.name
            if col.integer:
                np.testing.assert_array_equal(v, np.round(v))
        else:
            assert set(s.tolist()) <= set(col.categories), col.name
    return x


def test_samples_are_valid_rows_of_the_schema(adult_model, adult_sample):
    x = _check_valid_sample(adult_sample, data.adult_schema(), 257)
    assert len(np.unique(x, axis=0)) > 1, "all sampled rows are identical"


# --------------------------------------------------------------------------------------------
# The functional API reproduces the class; the phases equal the per-example references
# --------------------------------------------------------------------------------------------


def test_functional_api_reproduces_fit(adult_model, adult_sample, functional_run):
    run = functional_run
    cfg, ae, gan = run["cfg"], run["ae"], run["gan"]
    assert int(ae.steps) == AE_STEPS
    assert int(gan.critic.steps) == CRITIC_STEPS and int(gan.generator.steps) == CRITIC_STEPS
    jax.tree_util.tree_map(np.testing.assert_array_equal, gan.generator.params, adult_model._gen)
    jax.tree_util.tree_map(np.testing.assert_array_equal, ae.params["decoder"], adult_model._dec)
    width = data.TableEncoder(adult_model.schema).width
    k_z, _ = jax.random.split(jax.random.key(5))  # DPAutoGAN.sample(seed=5)
    enc = dag.sample_encoded(cfg, width, gan.generator.params, ae.params["decoder"], 257, k_z)
    assert enc.shape == (257, width) and np.all((enc >= 0) & (enc <= 1))
    pd.testing.assert_frame_equal(data.TableEncoder(adult_model.schema).decode(enc), adult_sample)
    # Training moved the released networks away from their initialisation.
    for trained, initial in ((gan.generator.params, run["params"].generator),
                             (ae.params["decoder"], run["params"].autoencoder["decoder"])):
        assert not np.allclose(_flat(trained), _flat(initial))


def test_autoencoder_phase_matches_per_example_reference(functional_run, adult_x):
    """The AE phase: AE_STEPS joint DP-Adam steps, step t keyed fold_in(k_ae, t) (run_phase)."""
    run = functional_run
    cfg, ae, params0 = run["cfg"], run["ae"], run["params"].autoencoder
    nets = dag.networks(cfg, adult_x.shape[1])
    m = adult_x.shape[0]
    q, clip, sigma = cfg.ae_batch_size / m, float(cfg.ae_clip_norm), cfg.ae_noise_multiplier
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
                                                  cfg.critic_noise_multiplier)
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

    run, critic_opt, gen_opt = dag.make_gan_runner(cfg, width, m, private=True, noise_multiplier=sigma)
    state0 = dag.GANState(dpsgd.init_state(critic0, critic_opt), dpsgd.init_state(gen0, gen_opt))
    out = run(state0, x, dec, key, jnp.int32(1), jnp.int32(1))
    assert int(out.critic.steps) == 1 and int(out.generator.steps) == 1

    cp, cv, _, norms = _reference_critic_step(nets, cfg, like, _flat(critic0), 0.0, _flat(gen0), dec,
                                              x, jax.random.fold_in(k_critic, 0), sigma)
    assert np.any(norms > cfg.critic_clip_norm) and np.any(norms < cfg.critic_clip_norm)
    _assert_close(optax.tree_utils.tree_get(out.critic.opt_state, "nu"), cv, "critic RMSProp nu",
                  rtol=2e-5)
    _assert_close(out.critic.params, cp, "critic parameters")
    assert 0 < np.mean(np.abs(cp) < cfg.weight_clamp) < 1  # the clamp bit for some weights only
    gp, gv, gg = _reference_generator_step(nets, cfg, like, _flat(gen0), 0.0, cp, dec,
                                           jax.random.fold_in(k_gen, 0))
    _assert_close(optax.tree_utils.tree_get(out.generator.opt_state, "nu"), gv,
                  "generator RMSProp nu", rtol=1e-4)
    _assert_close(out.generator.params, gp, "generator parameters", rtol=1e-4, grad=gg)

    # Step accounting of the same compiled runner: t_D = 2, at most total_critic_steps in all.
    out = run(state0, x, dec, key, jnp.int32(2), jnp.int32(3))
    assert (int(out.critic.steps), int(out.generator.steps)) == (3, 2)  # 2 + 1 critic steps
    out = run(out, x, dec, key, jnp.int32(1), jnp.int32(3))
    assert (int(out.critic.steps), int(out.generator.steps)) == (3, 3)  # no critic step beyond 3


# --------------------------------------------------------------------------------------------
# Privacy report
# --------------------------------------------------------------------------------------------


def _reference_epsilons(phases: list[tuple[float, float, int]], delta: float, pld_interval: float):
    """(pld, rdp_improved) from dp_accounting directly: one composed event, one conversion."""
    event = dpa.ComposedDpEvent([
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), t)
        for q, s, t in phases if t > 0])
    pld = PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
                        value_discretization_interval=pld_interval).compose(event).get_epsilon(delta)
    rdp = RdpAccountant(list(privacy.RDP_ORDERS), dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    return pld, rdp.compose(event).get_epsilon(delta)


def test_privacy_report_matches_the_accountant_for_the_steps_run(adult_model, functional_run):
    model, n = adult_model, ADULT_ROWS
    cfg, rep = model.config, model.privacy_report()
    assert _strict_json(rep)
    assert rep["delta"] == DELTA and rep["accountant"] == "pld" and not rep["non_private"]
    assert rep["neighbouring_relation"] == "add_or_remove_one"
    # The steps actually run (counted by the functional reproduction, which equals the fit).
    ran = (int(functional_run["ae"].steps), int(functional_run["gan"].critic.steps))
    assert ran == (cfg.ae_steps, cfg.critic_steps) == (AE_STEPS, CRITIC_STEPS)
    expected = [("autoencoder", cfg.ae_batch_size / n, cfg.ae_noise_multiplier, ran[0]),
                ("critic", cfg.critic_batch_size / n, cfg.critic_noise_multiplier, ran[1])]
    assert [p["name"] for p in rep["phases"]] == ["autoencoder", "critic"]
    for entry, (name, q, sigma, steps) in zip(rep["phases"], expected):
        assert entry["mechanism"] == "poisson_subsampled_gaussian"
        assert entry["steps"] == steps, f"{name}: report says {entry['steps']} steps, ran {steps}"
        assert entry["sample_rate"] == pytest.approx(q, rel=1e-12)
        assert entry["noise_multiplier"] == pytest.approx(sigma, rel=1e-12)
    phases = dag.privacy_phases(cfg, n, ae_steps=ran[0], critic_steps=ran[1])
    assert phases == [privacy.DPSGDPhase(*e) for e in expected]
    by = rep["epsilon_by_accountant"]
    assert rep["epsilon"] == pytest.approx(privacy.epsilon(phases, DELTA), rel=1e-9)
    assert by["pld"] == rep["epsilon"]
    assert by["rdp_classic"] == pytest.approx(
        privacy.epsilon(phases, DELTA, accountant="rdp", conversion="classic"), rel=1e-9)
    assert by["rdp_improved"] == pytest.approx(
        privacy.epsilon(phases, DELTA, accountant="rdp"), rel=1e-9)
    pld, rdp = _reference_epsilons([e[1:] for e in expected], DELTA,
                                   rep["pld_value_discretization_interval"])
    assert rep["epsilon"] == pytest.approx(pld, rel=1e-9)
    assert by["rdp_improved"] == pytest.approx(rdp, rel=1e-9)
    text = " ".join(rep["assumptions"])
    assert "seed" in text and f"C1={float(cfg.ae_clip_norm)}" in text
    assert rep["released"] == ["generator", "decoder", "schema", "config"]


def test_fit_to_target_epsilon_is_tight_and_keeps_the_noise_ratio(adult_model, adult_config):
    target = TARGET_EPSILON
    rep, cfg = adult_model.privacy_report(), adult_model.config
    assert rep["target_epsilon"] == target and rep["preset"] is None
    assert target - 2e-3 <= rep["epsilon"] <= target
    # The ratio of the configuration (the paper's epsilon-1.01 Adult setting, 1.5 : 3.5) is kept.
    assert (adult_config.ae_noise_multiplier, adult_config.critic_noise_multiplier) == (1.5, 3.5)
    assert cfg.ae_noise_multiplier / cfg.critic_noise_multiplier == pytest.approx(1.5 / 3.5, rel=1e-9)
    assert dataclasses.replace(cfg, ae_noise_multiplier=1.5, critic_noise_multiplier=3.5) == adult_config
    # Tight: 1 % less noise on both phases would exceed the target.
    less = dataclasses.replace(cfg, ae_noise_multiplier=0.99 * cfg.ae_noise_multiplier,
                               critic_noise_multiplier=0.99 * cfg.critic_noise_multiplier)
    assert privacy.epsilon(dag.privacy_phases(less, ADULT_ROWS, ae_steps=cfg.ae_steps,
                                              critic_steps=cfg.critic_steps), DELTA) > target


@pytest.mark.parametrize("preset, expected", [
    ("paper-1.01", 1.006176), ("paper-0.51", 0.508439), ("paper-0.36", 0.350319)])
def test_adult_presets_reproduce_the_papers_accounting(preset, expected):
    cfg = dag.config_for(data.adult_schema(), None, None, preset)
    assert (cfg.ae_steps, cfg.critic_steps) == (10_000, 15_000)
    assert (cfg.ae_batch_size, cfg.critic_batch_size) == (64, 128)
    phases = dag.privacy_phases(cfg, ADULT_N, ae_steps=cfg.ae_steps, critic_steps=cfg.critic_steps)
    eps = privacy.epsilon(phases, DELTA, accountant="rdp", conversion="classic")
    assert eps == pytest.approx(expected, abs=1e-3)
    assert math.ceil(eps * 100) / 100 == float(preset.split("-")[1])  # the paper rounds up


@pytest.mark.parametrize("preset, expected", [
    ("paper-0.81", 0.807631), ("paper-1.33", 1.321593), ("paper-2.70", 2.697568)])
def test_binary_presets_reproduce_the_papers_accounting(preset, expected):
    cfg = dag.config_for(data.binary_schema(7), None, None, preset)
    assert cfg.family == "binary" and cfg.ae_steps == 15_000
    assert (cfg.ae_batch_size, cfg.critic_batch_size) == (100, 128)
    phases = dag.privacy_phases(cfg, MIMIC_N, ae_steps=cfg.ae_steps, critic_steps=cfg.critic_steps)
    eps = privacy.epsilon(phases, DELTA, accountant="rdp", conversion="classic")
    assert eps == pytest.approx(expected, abs=1e-3)
    assert math.ceil(eps * 100) / 100 == float(preset.split("-")[1])


def test_fit_with_a_preset_uses_its_noise_and_reports_the_steps_run(adult_train):
    """Zero-step fit (nothing compiled, nothing spent): the preset's noise goes in the report."""
    cfg = _tiny_adult(ae_steps=0, critic_steps=0, ae_clip_norm="paper-joint")
    model = DPAutoGAN(cfg).fit(adult_train, data.adult_schema(), preset="paper-0.51", seed=0)
    rep = model.privacy_report()
    assert rep["preset"] == "paper-0.51" and rep["target_epsilon"] is None
    assert [(p["noise_multiplier"], p["steps"]) for p in rep["phases"]] == [(2.5, 0), (7.5, 0)]
    assert rep["epsilon"] == 0.0 and rep["non_private"] is False
    assert (model.config.ae_noise_multiplier, model.config.critic_noise_multiplier) == (2.5, 7.5)
    # "paper-joint": the paper's decoder-only Adult clip norm 0.012 times sqrt(2), no data used.
    (sentence,) = [a for a in rep["assumptions"] if "clip norm C1=" in a]
    assert f"C1={0.012 * math.sqrt(2):.6g}" in sentence
    _strict_json(rep)


def test_binary_preset_does_not_silently_override_the_configured_steps():
    cfg = DPAutoGANConfig.binary(critic_steps=50)
    try:
        with pytest.warns(UserWarning, match="critic_steps"):
            out = dag.config_for(data.binary_schema(7), cfg, None, "paper-0.81")
    except ValueError as exc:  # an explicit refusal is acceptable
        assert "critic_steps" in str(exc)
        return
    assert out.critic_steps == 50


def test_non_private_fit_reports_infinite_epsilon_as_null(nonprivate_model, tmp_path):
    rep = nonprivate_model.privacy_report()
    text = _strict_json(rep)
    assert rep["epsilon"] is None and rep["non_private"] is True
    assert rep["target_epsilon"] is None
    assert all(v is None for v in rep["epsilon_by_accountant"].values())
    assert [(p["name"], p["mechanism"], p["steps"]) for p in rep["phases"]] == [
        ("autoencoder", "non_private", 2), ("critic", "non_private", 0)]
    assert "NaN" not in text and "Infinity" not in text
    assert not any("clip norm C1" in a for a in rep["assumptions"])  # nothing was clipped
    path = tmp_path / "np.npz"
    nonprivate_model.save(path)
    assert DPAutoGAN.load(path).privacy_report() == rep


# --------------------------------------------------------------------------------------------
# Save / load
# --------------------------------------------------------------------------------------------


def _npz_arrays(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def _write_npz(path, arrays) -> None:
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def _param_keys(tree, prefix: str) -> set[str]:
    return {"/".join([prefix] + [str(p.key) for p in path])
            for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]}


@pytest.fixture(scope="module")
def saved_adult(adult_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("release") / "adult_model.npz"
    adult_model.save(path)
    return path


def test_save_load_round_trips_samples_exactly(adult_model, adult_sample, saved_adult):
    loaded = DPAutoGAN.load(saved_adult)
    pd.testing.assert_frame_equal(loaded.sample(257, seed=5), adult_sample)
    assert loaded.privacy_report() == adult_model.privacy_report()
    assert loaded.config == adult_model.config
    assert loaded.schema == adult_model.schema


def test_saved_file_holds_only_the_released_arrays(adult_model, saved_adult):
    arrays = _npz_arrays(saved_adult)
    width = data.TableEncoder(adult_model.schema).width
    ref = jax.eval_shape(lambda k: dag.init(adult_model.config, width, k), jax.random.key(0))
    expected = _param_keys(ref.generator, "generator") | _param_keys(ref.autoencoder["decoder"], "decoder")
    assert set(arrays) == expected | {"__meta__"}
    assert not any(("critic" in k or "encoder" in k or "key" in k.lower()) for k in arrays if k != "__meta__")
    for prefix, tree in (("generator", adult_model._gen), ("decoder", adult_model._dec)):
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            np.testing.assert_array_equal(arrays["/".join([prefix] + [str(p.key) for p in path])],
                                          np.asarray(leaf))
    meta = json.loads(str(arrays["__meta__"]))
    assert meta["method"] == "DPAutoGAN" and meta["groups"] == ["decoder", "generator"]
    assert {"config", "schema", "privacy_report", "versions", "format_version"} <= set(meta)
    assert "seed" not in meta and "key" not in meta


def _with_meta(src, dst, **changes):
    arrays = _npz_arrays(src)
    meta = json.loads(str(arrays["__meta__"]))
    meta.update(changes)
    arrays["__meta__"] = np.asarray(json.dumps(meta))
    _write_npz(dst, arrays)
    return dst


def test_load_refuses_bad_files(saved_adult, tmp_path):
    raw = saved_adult.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="not a readable dpgen_jax model file"):
        DPAutoGAN.load(truncated)

    text = tmp_path / "model.txt"
    text.write_text("generator = [1, 2, 3]\n")
    with pytest.raises(ValueError, match="not a readable dpgen_jax model file"):
        DPAutoGAN.load(text)

    other_npz = tmp_path / "plain.npz"
    _write_npz(other_npz, {"w": np.zeros(3)})
    with pytest.raises(ValueError, match="no '__meta__' record"):
        DPAutoGAN.load(other_npz)

    bad_json = tmp_path / "bad_json.npz"
    arrays = _npz_arrays(saved_adult)
    arrays["__meta__"] = np.asarray("{not json")
    _write_npz(bad_json, arrays)
    with pytest.raises(ValueError, match="corrupt '__meta__'"):
        DPAutoGAN.load(bad_json)

    with pytest.raises(ValueError, match=r"release format version 999.*reads version 1"):
        DPAutoGAN.load(_with_meta(saved_adult, tmp_path / "v999.npz", format_version=999))
    with pytest.raises(ValueError, match="holds a 'GSWGAN' model, not 'DPAutoGAN'"):
        DPAutoGAN.load(_with_meta(saved_adult, tmp_path / "gswgan.npz", method="GSWGAN"))
    with pytest.raises(ValueError, match="not a dpgen_jax model file"):
        DPAutoGAN.load(_with_meta(saved_adult, tmp_path / "foreign.npz", format="something.else"))

    missing_leaf = tmp_path / "missing_leaf.npz"
    arrays = _npz_arrays(saved_adult)
    del arrays[sorted(k for k in arrays if k.startswith("decoder/"))[0]]
    _write_npz(missing_leaf, arrays)
    with pytest.raises(ValueError, match="saved decoder does not match"):
        DPAutoGAN.load(missing_leaf)

    wrong_shape = tmp_path / "wrong_shape.npz"
    arrays = _npz_arrays(saved_adult)
    k = sorted(k for k in arrays if k.startswith("generator/"))[0]
    arrays[k] = np.zeros(arrays[k].shape + (1,), arrays[k].dtype)
    _write_npz(wrong_shape, arrays)
    with pytest.raises(ValueError, match="saved generator does not match"):
        DPAutoGAN.load(wrong_shape)

    with pytest.raises(FileNotFoundError):
        DPAutoGAN.load(tmp_path / "absent.npz")


# --------------------------------------------------------------------------------------------
# Public clip norm (slow: compiles the public calibration loop twice for another network shape)
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_public_clip_norm_does_not_depend_on_the_private_rows():
    """Zero-step fits on two disjoint frames of different size: the same C1 for the same seed."""
    frame = data.mimic_like(n_rows=600, n_features=MIMIC_FEATURES, seed=0)
    schema = data.binary_schema(MIMIC_FEATURES)
    cfg = DPAutoGANConfig.binary(ae_steps=0, critic_steps=0, ae_clip_norm="public-median",
                                 clip_calibration_steps=5)
    norms = []
    for part in (frame.iloc[:250], frame.iloc[250:].reset_index(drop=True)):
        rep = DPAutoGAN(cfg).fit(part, schema, epsilon=2.0, seed=8).privacy_report()
        (sentence,) = [a for a in rep["assumptions"] if "clip norm C1=" in a]
        assert "without the private rows" in sentence
        norms.append(float(re.search(r"C1=([0-9.eE+-]+)", sentence).group(1)))
    assert norms[0] == norms[1] and norms[0] > 0


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_adult(adult_train) -> pd.DataFrame:
    return adult_train.iloc[:200].reset_index(drop=True)


@pytest.fixture(scope="module")
def mimic_frame() -> pd.DataFrame:
    return data.mimic_like(n_rows=100, n_features=MIMIC_FEATURES, seed=0)


def test_frame_not_matching_the_schema_is_refused(small_adult, mimic_frame):
    schema = data.adult_schema()
    with pytest.raises(ValueError, match="missing schema column.*'occupation'"):
        DPAutoGAN(_tiny_adult()).fit(small_adult.drop(columns="occupation"), schema, epsilon=1.0)
    bad = small_adult.copy()
    bad.loc[3, "workclass"] = "Astronaut"
    with pytest.raises(ValueError, match=r"column 'workclass'.*'Astronaut'"):
        DPAutoGAN(_tiny_adult()).fit(bad, schema, epsilon=1.0)
    extra = small_adult.assign(ssn="x")
    with pytest.raises(ValueError, match="not declared in the schema.*'ssn'"):
        DPAutoGAN(_tiny_adult()).fit(extra, schema, epsilon=1.0)
    out = small_adult.copy()
    out["age"] = out["age"].astype(float)
    out.loc[0, "age"] = 150.0
    with pytest.raises(ValueError, match="'age'"):
        DPAutoGAN(_tiny_adult()).fit(out, schema, epsilon=1.0)
    binary = mimic_frame.copy()
    binary.loc[5, "x3"] = 2
    with pytest.raises(ValueError, match=r"column 'x3'.*not in the schema's categories"):
        DPAutoGAN().fit(binary, data.binary_schema(MIMIC_FEATURES), epsilon=1.0)


def test_unreachable_target_states_the_reachable_epsilon(adult_train):
    cfg = _tiny_adult()
    with pytest.raises(ValueError, match="unreachable") as info:
        DPAutoGAN(cfg).fit(adult_train, data.adult_schema(), epsilon=1e-4, seed=0)
    msg = str(info.value)
    assert "target_epsilon=0.0001" in msg
    reached = float(re.search(r"epsilon is ([0-9.eE+-]+)", msg).group(1))
    # The best the schedule can do: the largest noise multiplier at the cap (100), ratio kept.
    top = dataclasses.replace(cfg, ae_noise_multiplier=100 * 1.5 / 3.5, critic_noise_multiplier=100.0)
    best = privacy.epsilon(dag.privacy_phases(top, len(adult_train), ae_steps=AE_STEPS,
                                              critic_steps=CRITIC_STEPS), DELTA)
    assert reached == pytest.approx(best, rel=1e-4)
    assert reached > 1e-4


@pytest.mark.parametrize("kwargs, match", [
    (dict(), "exactly one of epsilon"),
    (dict(epsilon=1.0, preset="paper-1.01"), "exactly one of epsilon"),
    (dict(preset="paper-0.81"), "preset='paper-0.81' is for 'binary' data"),
    (dict(preset="paper-9.99"), "Unknown preset='paper-9.99'"),
    (dict(epsilon=0.0), "epsilon=0.0"),
    (dict(epsilon=-1.0), "epsilon=-1.0"),
    (dict(epsilon=float("nan")), "epsilon=nan"),
    (dict(epsilon=1.0, delta=0.0), "delta=0.0"),
    (dict(epsilon=1.0, delta=1.0), "delta=1.0"),
    (dict(epsilon=1.0, delta=-1e-5), "delta=-1e-05"),
    (dict(epsilon=math.inf, delta=2.0), "delta=2.0"),
])
def test_bad_privacy_arguments_are_refused(small_adult, kwargs, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        DPAutoGAN(_tiny_adult()).fit(small_adult, data.adult_schema(), seed=0, **kwargs)


def test_preset_of_the_other_family_is_refused(mimic_frame):
    with pytest.raises(ValueError, match="preset='paper-1.01' is for 'adult' data"):
        DPAutoGAN().fit(mimic_frame, data.binary_schema(MIMIC_FEATURES), preset="paper-1.01")


@pytest.mark.parametrize("n", [0, -3, 2.5, True, "10", None, np.float64(4.0)])
def test_bad_sample_count_is_refused(adult_model, n):
    with pytest.raises(ValueError, match=r"Expected n=.* positive integer"):
        adult_model.sample(n)


def test_unfitted_model_refuses_to_sample_report_or_save(tmp_path):
    model = DPAutoGAN(_tiny_adult())
    for call in (lambda: model.sample(5), model.privacy_report, lambda: model.save(tmp_path / "m.npz")):
        with pytest.raises(RuntimeError, match="not fitted"):
            call()
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("overrides, match", [
    (dict(critic_clipping="both"), "critic_clipping"),
    (dict(ae_clip_norm=-0.1), "ae_clip_norm"),
    (dict(ae_clip_norm="private-median"), "ae_clip_norm"),
    (dict(critic_noise_multiplier=0.0), "critic_noise_multiplier"),
    (dict(ae_batch_size=0), "ae_batch_size"),
    (dict(weight_clamp=0.0), "weight_clamp"),
    (dict(generator_hidden=(32, 32)), "generator_hidden"),
])
def test_bad_configuration_is_refused(overrides, match):
    with pytest.raises(ValueError, match=match):
        DPAutoGAN(DPAutoGANConfig.adult(**overrides))
