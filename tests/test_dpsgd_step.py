"""Noise, the DP step and the phase runner, checked against definitions.

The central device is a *record-revealing* model: record j is the row s_j e_j of an m x m
diagonal matrix and the loss is the output of a bias-free Dense(1), so example j's gradient is
s_j e_j with norm s_j. After one SGD step with learning rate 1 from zero parameters, coordinate j
of -(q m) * params is min(s_j, C) if record j was sampled and 0 otherwise (plus noise when
sigma > 0). A step therefore reveals its own Poisson sample, its clipping and its normaliser, and
these can be checked against the definitions without knowing how the engine uses its key.
"""

from __future__ import annotations

import functools
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from scipy import stats

from dpgen_jax import dpsgd, privacy
from tests._compile import FAST_COMPILE

P_ACCEPT = 1e-4
P_REJECT = 1e-6

M, Q, C, SIGMA = 96, 0.125, 1.5, 1.3  # expected batch q m = 12
N_KEYS = 3000

S = np.random.default_rng(0).permutation(np.linspace(0.3, 3.0, M)).astype(np.float32)
DATA = np.diag(S)
CLIPPED = np.minimum(S, C).astype(np.float64)

_DENSE = nn.Dense(1, use_bias=False)
_TRACES = {"count": 0}


def _revealing_loss(params, x):
    _TRACES["count"] += 1  # Python side effect: runs once per trace, never at run time
    return _DENSE.apply(params, x)[:, 0]


def _zero_params():
    return {"params": {"kernel": jnp.zeros((M, 1), jnp.float32)}}


def _accounted(noise_multiplier=0.0, clip_norm=C, sample_rate=Q, batch_size=None):
    """The phase a test step runs: a DPSGDPhase, or for noise 0 the clipped, noiseless
    NonPrivatePhase of the same schedule (which reveals the clipped sum)."""
    if noise_multiplier == 0.0:
        return privacy.NonPrivatePhase("step", 1, sample_rate, batch_size, clip_norm=clip_norm)
    return privacy.DPSGDPhase("step", sample_rate, noise_multiplier, 1, clip_norm=clip_norm,
                              batch_size=batch_size)


def _step(method="ghost", capacity=None, noise_multiplier=0.0, batch_size=None, **kw):
    return dpsgd.make_dp_step(_revealing_loss, optax.sgd(1.0), _accounted(noise_multiplier, batch_size=batch_size),
                              scan_rows=M, method=method, capacity=capacity, **kw)


def _keys(seed: int, n: int = N_KEYS) -> jax.Array:
    return jax.random.split(jax.random.key(seed), n)


@functools.lru_cache(maxsize=None)
def _revealed(method: str, capacity: int | None):
    """For N_KEYS keys: (q m) * gradient with sigma = 0 and with sigma = SIGMA, and metrics.

    The noisy half is only computed for the default capacity (the noise tests use it)."""
    quiet, noisy = _step(method, capacity), _step(method, capacity, SIGMA)
    state = dpsgd.init_state(_zero_params(), optax.sgd(1.0))
    with_noise = capacity is None

    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    def run(keys):
        def one(key):
            s0, m0 = quiet(state, DATA, key)
            g0 = -s0.params["params"]["kernel"][:, 0]
            g1 = -noisy(state, DATA, key)[0].params["params"]["kernel"][:, 0] if with_noise else g0
            return g0, g1, m0

        return jax.vmap(one)(keys)

    g0, g1, metrics = run(_keys(1))
    qm = Q * M
    return (np.asarray(g0, np.float64) * qm, np.asarray(g1, np.float64) * qm,
            {k: np.asarray(v) for k, v in metrics.items()})


def _binomial_pvalue(sizes, m, q):
    expected = sizes.size * stats.binom.pmf(np.arange(m + 1), m, q)
    observed = np.bincount(sizes, minlength=m + 1).astype(float)
    obs, exp, ao, ae = [], [], 0.0, 0.0
    for o, e in zip(observed, expected):
        ao, ae = ao + o, ae + e
        if ae >= 5:
            obs.append(ao)
            exp.append(ae)
            ao, ae = 0.0, 0.0
    obs[-1] += ao
    exp[-1] += ae
    obs, exp = np.array(obs), np.array(exp)
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


# --------------------------------------------------------------------------------------------
# Gaussian noise
# --------------------------------------------------------------------------------------------


def test_add_gaussian_noise_statistics():
    std = 0.7
    tree = {"a": jnp.zeros((2001,)), "b": jnp.zeros((30, 7)), "c": jnp.full((3,), 5.0)}
    draw = jax.jit(jax.vmap(lambda k: dpsgd.add_gaussian_noise(tree, k, std)),
                   compiler_options=FAST_COMPILE)
    out = draw(_keys(2, 16))
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(tree)
    assert all(out[k].shape == (16,) + tree[k].shape and out[k].dtype == jnp.float32 for k in tree)
    noise = np.concatenate([np.asarray(out["a"]).ravel(), np.asarray(out["b"]).ravel(),
                            np.asarray(out["c"]).ravel() - 5.0])
    n = noise.size
    assert abs(noise.mean()) < 5 * std / math.sqrt(n)
    assert abs(noise.std() / std - 1) < 5 / math.sqrt(2 * n)
    assert stats.kstest(noise, stats.norm(0, std).cdf).pvalue > P_ACCEPT
    assert stats.kstest(noise, stats.norm(0, std * 2 / 3).cdf).pvalue < P_REJECT
    assert stats.kstest(noise, stats.norm(0, std * 3 / 2).cdf).pvalue < P_REJECT
    # Arrays get independent noise (no reused slice), and so do different keys.
    a, b = np.asarray(out["a"])[:, :210].ravel(), np.asarray(out["b"]).reshape(16, -1).ravel()
    assert abs(np.corrcoef(a, b)[0, 1]) < 5 / math.sqrt(a.size)
    k0, k1 = np.asarray(out["b"][0]).ravel(), np.asarray(out["b"][1]).ravel()
    assert abs(np.corrcoef(k0, k1)[0, 1]) < 5 / math.sqrt(k0.size)


def test_add_gaussian_noise_zero_std_is_identity():
    tree = {"w": jnp.arange(6.0).reshape(2, 3)}
    out = dpsgd.add_gaussian_noise(tree, jax.random.key(0), 0.0)
    np.testing.assert_array_equal(np.asarray(out["w"]), np.asarray(tree["w"]))


# --------------------------------------------------------------------------------------------
# One DP step: its sample, its clipping, its normaliser, its noise
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method, capacity", [("ghost", None), ("vmap", None), ("ghost", 4)],
                         ids=["ghost", "vmap", "ghost_capacity4"])
def test_step_is_clipped_sum_over_a_poisson_sample_divided_by_qm(method, capacity):
    g0, _, metrics = _revealed(method, capacity)
    selected = g0 != 0.0
    sizes = selected.sum(1)
    # Each sampled record contributes exactly its clipped gradient, divided by q m (not by the
    # realised batch size, which differs from q m in most steps); unsampled records nothing.
    np.testing.assert_allclose(g0[selected], np.broadcast_to(CLIPPED, g0.shape)[selected],
                               rtol=1e-5)
    assert np.mean(sizes != round(Q * M)) > 0.8
    np.testing.assert_array_equal(sizes, metrics["batch_size"])
    # The samples are Poisson: Binomial sizes, uniform inclusion (record 0, the padding index,
    # included), whatever the capacity.
    assert _binomial_pvalue(sizes, M, Q) > P_ACCEPT
    counts = selected.sum(0)
    chi = np.sum((counts - N_KEYS * Q) ** 2) / (N_KEYS * Q * (1 - Q))
    assert stats.chi2.sf(chi, df=M) > P_ACCEPT
    assert abs(counts[0] / N_KEYS - Q) < 5 * math.sqrt(Q * (1 - Q) / N_KEYS)
    if capacity == 4:
        assert np.all(metrics["chunks"] >= np.ceil(sizes / 4)) and metrics["chunks"].mean() > 3
    else:
        assert np.all(metrics["chunks"] == 1)


@pytest.mark.parametrize("method", ["ghost", "vmap"])
def test_step_noise_is_gaussian_with_std_sigma_c(method):
    g0, g1, _ = _revealed(method, None)
    noise = (g1 - g0)[:1000].ravel()  # the sample does not depend on sigma, only the noise
    std = SIGMA * C
    assert abs(noise.mean()) < 5 * std / math.sqrt(noise.size)
    assert stats.kstest(noise, stats.norm(0, std).cdf).pvalue > P_ACCEPT
    assert stats.kstest(noise, stats.norm(0, std * 2 / 3).cdf).pvalue < P_REJECT
    assert stats.kstest(noise, stats.norm(0, std * 3 / 2).cdf).pvalue < P_REJECT


@functools.lru_cache(maxsize=None)
def _revealed_multichunk():
    """(q m) * gradient without and with noise for N_KEYS keys, capacity 4 (3-4 chunks a step)."""
    quiet, noisy = _step("ghost", 4), _step("ghost", 4, SIGMA)
    state = dpsgd.init_state(_zero_params(), optax.sgd(1.0))

    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    def run(keys):
        def one(key):
            g0 = -quiet(state, DATA, key)[0].params["params"]["kernel"][:, 0]
            s1, m1 = noisy(state, DATA, key)
            return g0, -s1.params["params"]["kernel"][:, 0], m1["chunks"]
        return jax.vmap(one)(keys)

    g0, g1, chunks = run(_keys(12))
    return np.asarray(g0, np.float64) * Q * M, np.asarray(g1, np.float64) * Q * M, np.asarray(chunks)


def test_multi_chunk_step_adds_noise_exactly_once():
    g0, g1, chunks = _revealed_multichunk()
    assert chunks.mean() > 3 and np.mean(chunks >= 2) > 0.95  # overflowing 4-slot chunks
    noise = (g1 - g0).ravel()
    std = SIGMA * C
    # Once per step: N(0, (sigma C)^2) per coordinate, not sqrt(chunks) times that (noise per
    # chunk), and not zero; independent coordinates.
    assert abs(noise.std() / std - 1) < 5 / math.sqrt(2 * noise.size)
    assert stats.kstest(noise, stats.norm(0, std).cdf).pvalue > P_ACCEPT
    assert stats.kstest(noise, stats.norm(0, std * math.sqrt(2)).cdf).pvalue < P_REJECT
    per_coordinate = (g1 - g0)
    assert abs(np.corrcoef(per_coordinate[:, 0], per_coordinate[:, 1])[0, 1]) < 5 / math.sqrt(N_KEYS)
    # The noise does not depend on how many chunks the sample took.
    few, many = chunks <= np.median(chunks), chunks > np.median(chunks)
    assert stats.ks_2samp((g1 - g0)[few].ravel(), (g1 - g0)[many].ravel()).pvalue > P_ACCEPT


def test_expected_batch_size_replaces_q_times_m_as_normaliser():
    # A public dataset size N: q = B / N, the noised sum is divided by B = q N, while the sampler
    # scans the M real rows.
    public_n = 160
    phase = privacy.NonPrivatePhase.from_batch_size("step", 20, public_n, 1)
    assert phase.sample_rate == Q
    public = phase.normaliser(M)
    assert public == pytest.approx(Q * public_n)
    step = _step("ghost", None, batch_size=20)
    state = dpsgd.init_state(_zero_params(), optax.sgd(1.0))
    run = jax.jit(jax.vmap(lambda k: step(state, DATA, k)), compiler_options=FAST_COMPILE)
    new_state, metrics = run(_keys(1, 200))
    g = -np.asarray(new_state.params["params"]["kernel"][..., 0], np.float64) * public
    selected = g != 0.0
    np.testing.assert_allclose(g[selected], np.broadcast_to(CLIPPED, g.shape)[selected], rtol=1e-5)
    np.testing.assert_array_equal(selected.sum(1), np.asarray(metrics["batch_size"]))
    # The same keys give the same samples as the default normaliser, scaled by q m / (q N).
    g_default, _, _ = _revealed("ghost", None)
    np.testing.assert_array_equal(selected, g_default[:200] != 0.0)


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-1, ValueError), (2.5, TypeError),
                                        (float("inf"), TypeError), ("12", TypeError), (True, TypeError)])
def test_expected_batch_size_must_be_a_positive_integer(bad, error):
    with pytest.raises(error, match="batch_size"):
        _step("ghost", None, batch_size=bad)
    with pytest.raises(error, match="batch_size"):
        _step("ghost", None, SIGMA, batch_size=bad)


# --------------------------------------------------------------------------------------------
# Non-private equivalence and post_update
# --------------------------------------------------------------------------------------------


class _SmallNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = jnp.tanh(nn.LayerNorm(epsilon=1e-5)(nn.Dense(6)(x)))
        return nn.Dense(2)(h)


def test_zero_noise_huge_clip_equals_nonprivate_step_and_post_update_applies():
    net = _SmallNet()
    r = np.random.default_rng(3)
    data = {"x": r.normal(size=(64, 5)).astype(np.float32),
            "y": r.normal(size=(64, 2)).astype(np.float32)}
    loss = lambda p, b: jnp.sum((net.apply(p, b["x"]) - b["y"]) ** 2, -1)  # noqa: E731
    shapes = jax.eval_shape(net.init, jax.random.key(0), data["x"][:1])
    params = jax.tree_util.tree_map(lambda s: r.normal(size=s.shape).astype(np.float32), shapes)
    opt = optax.sgd(0.5)
    huge = _accounted(0.0, clip_norm=1e9, sample_rate=0.25)
    plain = privacy.NonPrivatePhase("step", 1, 0.25)
    clamp = lambda p: jax.tree_util.tree_map(lambda w: jnp.clip(w, -0.01, 0.01), p)  # noqa: E731
    steps = {
        "ghost": dpsgd.make_dp_step(loss, opt, huge, scan_rows=64, method="ghost"),
        "vmap": dpsgd.make_dp_step(loss, opt, huge, scan_rows=64, method="vmap"),
        "none": dpsgd.make_dp_step(loss, opt, plain, scan_rows=64),
        "clamped": dpsgd.make_dp_step(loss, opt, plain, scan_rows=64, post_update=clamp),
    }

    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    def run(key):
        out = {}
        for name, step in steps.items():
            state, metrics = step(dpsgd.init_state(params, opt), data, key)
            out[name] = (state.params, state.steps, metrics["batch_size"])
        return out

    out = run(jax.random.key(5))
    flat = lambda t: np.concatenate([np.asarray(x, np.float64).ravel()  # noqa: E731
                                     for x in jax.tree_util.tree_leaves(t)])
    start = flat(params)
    ref = flat(out["none"][0]) - start
    assert np.linalg.norm(ref) > 0.1  # the step really moved the parameters
    for name in ("ghost", "vmap"):
        update = flat(out[name][0]) - start
        assert np.linalg.norm(update - ref) <= 1e-4 * np.linalg.norm(ref), name
        assert int(out[name][1]) == 1 and int(out[name][2]) == int(out["none"][2])
    # post_update is applied after the update: the clamped step is the unclamped one, clamped.
    np.testing.assert_allclose(flat(out["clamped"][0]), np.clip(flat(out["none"][0]), -0.01, 0.01),
                               rtol=1e-6, atol=1e-7)
    assert np.mean(np.abs(flat(out["none"][0])) > 0.01) > 0.5  # the clamp had work to do


# --------------------------------------------------------------------------------------------
# The phase runner
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _phase():
    """One noisy ghost step and its compiled runner, shared by the runner tests."""
    step = _step("ghost", None, SIGMA)
    return step, dpsgd.make_phase_runner(step)


def test_run_phase_counts_steps_is_chunking_invariant_and_compiles_once():
    opt = optax.sgd(1.0)
    key = jax.random.key(7)
    step, runner = _phase()
    calls = []

    fresh = runner._cache_size() == 0
    before = _TRACES["count"]
    a = dpsgd.run_phase(step, dpsgd.init_state(_zero_params(), opt), DATA, key, 20, chunk_size=7,
                        progress=lambda done, total: calls.append((done, total)), runner=runner)
    traced = _TRACES["count"]
    assert (traced > before) == fresh  # the loss was traced for the first chunk only...
    b = dpsgd.run_phase(step, dpsgd.init_state(_zero_params(), opt), DATA, key, 20,
                        chunk_size=50, runner=runner)
    c = dpsgd.run_phase(step, dpsgd.init_state(_zero_params(), opt), DATA, key, 11, chunk_size=3,
                        runner=runner)
    assert _TRACES["count"] == traced  # ...and never again, for chunks of 7, 6, 20, 3, 2 steps
    assert runner._cache_size() == 1

    assert calls == [(7, 20), (14, 20), (20, 20)]
    assert int(a.steps) == 20 and int(b.steps) == 20 and int(c.steps) == 11
    ka, kb = np.asarray(a.params["params"]["kernel"]), np.asarray(b.params["params"]["kernel"])
    np.testing.assert_allclose(ka, kb, rtol=1e-6, atol=1e-6)

    # Step t uses fold_in(key, t): the same as a Python loop of single steps.
    one = jax.jit(step, compiler_options=FAST_COMPILE)
    state = dpsgd.init_state(_zero_params(), opt)
    for t in range(20):
        state, _ = one(state, DATA, jax.random.fold_in(key, t))
    np.testing.assert_allclose(np.asarray(state.params["params"]["kernel"]), ka,
                               rtol=1e-5, atol=1e-5)
    # Twenty noisy steps are far from zero and differ from a different phase key.
    assert float(np.abs(ka).max()) > 1.0
    d = dpsgd.run_phase(step, dpsgd.init_state(_zero_params(), opt), DATA, jax.random.key(8), 20,
                        chunk_size=20, runner=runner)
    assert not np.allclose(np.asarray(d.params["params"]["kernel"]), ka)


def test_run_phase_continues_the_step_count_and_zero_steps_is_a_no_op():
    step, runner = _phase()
    state = dpsgd.init_state(_zero_params(), optax.sgd(1.0))
    same = dpsgd.run_phase(step, state, DATA, jax.random.key(0), 0, runner=runner)
    assert same is state and int(same.steps) == 0
    state = state._replace(steps=jnp.int32(5))
    out = dpsgd.run_phase(step, state, DATA, jax.random.key(0), 4, chunk_size=3, runner=runner)
    assert int(out.steps) == 9


# --------------------------------------------------------------------------------------------
# Bad arguments
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"sample_rate": 0.0}, "sample_rate"),
        ({"sample_rate": 1.5}, "sample_rate"),
        ({"sample_rate": float("nan")}, "sample_rate"),
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"clip_norm": float("inf")}, "clip_norm"),
        ({"clip_norm": float("nan")}, "clip_norm"),
        ({"noise_multiplier": -1.0}, "noise_multiplier"),
        ({"noise_multiplier": float("nan")}, "noise_multiplier"),
        ({"noise_multiplier": float("inf")}, "noise_multiplier"),
        ({"scan_rows": 0}, "scan_rows"),
        ({"method": "opacus"}, "method"),
        ({"fallback": "ignore"}, "fallback"),
        ({"capacity": 0}, "capacity"),
        ({"clip_norm": None, "noise_multiplier": 1.0}, "clip_norm"),  # a private step needs its C
        ({"noise_multiplier": 0.0}, "noise_multiplier"),  # no noise: a NonPrivatePhase, not sigma 0
        ({"method": "nonprivate"}, "method"),  # non-private is the phase's kind, one way only
    ],
)
def test_make_dp_step_bad_arguments(kwargs, argument):
    phase_args = dict(sample_rate=Q, clip_norm=C, noise_multiplier=1.0)
    step_args = dict(scan_rows=M)
    for name, value in kwargs.items():
        (phase_args if name in phase_args else step_args)[name] = value
    with pytest.raises(ValueError, match=argument):
        phase = privacy.DPSGDPhase("step", phase_args["sample_rate"], phase_args["noise_multiplier"], 1,
                                   clip_norm=phase_args["clip_norm"])
        dpsgd.make_dp_step(_revealing_loss, optax.sgd(1.0), phase, **step_args)


def test_make_dp_step_runs_only_a_sampled_phase():
    with pytest.raises(TypeError, match="DPSGDPhase"):
        dpsgd.make_dp_step(_revealing_loss, optax.sgd(1.0), privacy.GaussianPhase("g", 1.0, 1), scan_rows=M)
    with pytest.raises(ValueError, match="sample_rate"):  # a non-private phase without a schedule
        dpsgd.make_dp_step(_revealing_loss, optax.sgd(1.0), privacy.NonPrivatePhase("n", 1), scan_rows=M)


@pytest.mark.parametrize(
    "kwargs, argument",
    [({"num_steps": -1}, "num_steps"), ({"num_steps": 2.5}, "num_steps"),
     ({"chunk_size": 0}, "chunk_size"), ({"chunk_size": -2}, "chunk_size")],
)
def test_run_phase_bad_arguments(kwargs, argument):
    args = dict(num_steps=3, chunk_size=10)
    args.update(kwargs)
    state = dpsgd.init_state(_zero_params(), optax.sgd(1.0))
    error = TypeError if isinstance(kwargs.get("num_steps"), float) else ValueError
    with pytest.raises(error, match=argument):
        dpsgd.run_phase(_step(), state, DATA, jax.random.key(0), **args)


def test_normaliser_is_the_public_batch_or_q_times_the_scanned_rows():
    built = privacy.DPSGDPhase.from_batch_size("c", 1278, 27_912, 1.0, 1)
    assert built.normaliser(20_000) == 1278.0  # B, whatever the rows scanned
    assert privacy.DPSGDPhase("c", 0.0458, 1.0, 1).normaliser(27_912) == pytest.approx(27_912 * 0.0458)
    assert privacy.NonPrivatePhase.from_batch_size("c", 1278, 27_912, 1).normaliser(5) == 1278.0
    assert built.with_clip_norm(2.0).noise_std == 2.0
    with pytest.raises(ValueError, match="clip_norm"):
        built.noise_std  # noqa: B018  (a C not resolved yet has no noise std)


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------


def test_make_key_from_os_entropy_is_unseeded_and_fresh():
    a, b = dpsgd.make_key(None), dpsgd.make_key()
    assert a.seeded is False and b.seeded is False
    assert not np.array_equal(np.asarray(jax.random.key_data(a.key)),
                              np.asarray(jax.random.key_data(b.key)))


def test_make_key_from_os_entropy_fills_every_key_word():
    # A Threefry key is two 32-bit words; an integer seed without 64-bit mode fills only one.
    # Over 64 entropy keys each word takes (almost surely) 64 distinct values, and its bits are
    # balanced: each of the 64 key bits is set in 32 +- 5 sd of the keys.
    keys = np.stack([np.asarray(jax.random.key_data(dpsgd.make_key().key)) for _ in range(64)])
    assert keys.shape == (64, 2) and keys.dtype == np.uint32
    for word in range(2):
        assert len(set(keys[:, word].tolist())) == 64, word
    bits = (keys[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1
    ones = bits.sum(axis=0).ravel().astype(np.int64)
    assert np.all(np.abs(ones - 32) <= 5 * 4), ones
    # The keys are ordinary JAX keys of the default implementation.
    assert jax.random.key_impl(dpsgd.make_key().key) == jax.random.key_impl(jax.random.key(0))


def test_make_key_from_seed_is_jax_random_key_of_the_seed():
    for seed in (0, 3, 2**31 - 1):
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(dpsgd.make_key(seed).key)),
                                      np.asarray(jax.random.key_data(jax.random.key(seed))))


def test_make_key_from_seed_is_reproducible():
    a, b = dpsgd.make_key(3), dpsgd.make_key(3)
    assert a.seeded is True
    np.testing.assert_array_equal(np.asarray(jax.random.key_data(a.key)),
                                  np.asarray(jax.random.key_data(b.key)))
    assert not np.array_equal(np.asarray(jax.random.key_data(a.key)),
                              np.asarray(jax.random.key_data(dpsgd.make_key(4).key)))


@pytest.mark.parametrize("seed", ["3", 3.0, True, [3]])
def test_make_key_rejects_non_integer_seeds(seed):
    with pytest.raises(TypeError, match="seed"):
        dpsgd.make_key(seed)
