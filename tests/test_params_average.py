"""``_dpsgd_phases.params_average``: the bias-corrected exponential moving average of a network's
iterates, kept in the optimizer state. Oracle: the average written out by hand over the iterates
of a plain loop of the same optimizer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from dpgen_jax.synthesizers._dpsgd_phases import averaged_params, params_average


def _iterates(opt, params, grads):
    state, out = opt.init(params), []
    for g in grads:
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
        out.append(params)
    return out, state


@pytest.mark.parametrize("decay", [0.5, 0.9, 0.999])
def test_average_is_the_weighted_mean_of_the_iterates_after_each_step(decay):
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.normal(size=(3, 2)), jnp.float32), "b": jnp.zeros(2)}
    grads = [jax.tree_util.tree_map(lambda p: jnp.asarray(rng.normal(size=p.shape), jnp.float32), params)
             for _ in range(7)]
    base = optax.adam(0.1)
    plain, _ = _iterates(base, params, grads)
    averaged, state = _iterates(optax.chain(base, params_average(decay)), params, grads)
    # the updates pass through unchanged: the same iterates as the plain optimizer
    for a, b in zip(plain, averaged):
        jax.tree_util.tree_map(lambda x, y: np.testing.assert_array_equal(x, y), a, b)
    # sum_t (1 - d) d^(T - t) p_t / (1 - d^T) over the iterates after steps 1..T; p_0 has no weight
    t = len(plain)
    weights = np.array([(1 - decay) * decay ** (t - i) for i in range(1, t + 1)]) / (1 - decay ** t)
    expect = jax.tree_util.tree_map(lambda *ps: sum(w * np.asarray(p, np.float64) for w, p in zip(weights, ps)),
                                    *plain)
    # float32 moments divided by 1 - d^T (0.007 at d = 0.999, T = 7): rounding grows to ~1e-5
    jax.tree_util.tree_map(lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6),
                           averaged_params(state), expect)


def test_one_step_average_is_the_first_iterate_and_compiles_in_a_loop():
    opt = optax.chain(optax.sgd(0.5), params_average(0.9))
    params = jnp.array([1.0, -2.0])
    state = opt.init(params)

    @jax.jit
    def run(params, state):
        def body(_, carry):
            p, s = carry
            u, s = opt.update(2.0 * p, s, p)  # gradient of sum p^2
            return optax.apply_updates(p, u), s
        return jax.lax.fori_loop(0, 1, body, (params, state))

    p1, s1 = run(params, state)
    np.testing.assert_allclose(averaged_params(s1), p1, rtol=1e-6)
    np.testing.assert_allclose(p1, [0.0, 0.0], atol=1e-7)


@pytest.mark.parametrize("decay", [0.0, 1.0, -0.5, 1.5])
def test_decay_outside_the_open_unit_interval_is_refused(decay):
    with pytest.raises(ValueError, match=f"decay={decay!r}"):
        params_average(decay)


def test_a_state_without_an_average_is_refused():
    with pytest.raises(ValueError, match="holds 0 params_average states"):
        averaged_params(optax.adam(0.1).init(jnp.zeros(2)))
    with pytest.raises(ValueError, match="needs the parameters"):
        params_average(0.9).update(jnp.zeros(2), params_average(0.9).init(jnp.zeros(2)))
