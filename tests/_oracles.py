"""Independent references shared by the synthesizer tests.

Everything here is a slow, separate implementation of what the library computes: per-example
gradients one row at a time, clipping by min(1, C / ||g||), optimizers written out in float64
NumPy, epsilons from ``dp_accounting`` called directly, and checks of sampled frames against the
schema.
"""

from __future__ import annotations

import json

import dp_accounting as dpa
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpgen_jax import data, dpsgd, privacy


def strict_json(obj) -> str:
    return json.dumps(obj, allow_nan=False)


def flat(tree) -> np.ndarray:
    return np.concatenate([np.asarray(x, np.float64).ravel() for x in jax.tree_util.tree_leaves(tree)])


def unflat(vec: np.ndarray, like):
    leaves, treedef = jax.tree_util.tree_flatten(like)
    out, start = [], 0
    for x in leaves:
        out.append(np.asarray(vec[start:start + x.size], np.float32).reshape(x.shape))
        start += x.size
    return jax.tree_util.tree_unflatten(treedef, out)


def assert_close(got, want, what: str, rtol: float = 1e-5, grad=None, tiny: float = 1e-6) -> None:
    """max |got - want| <= rtol * max |want|.

    With ``grad``, coordinates whose reference gradient is tiny (< ``tiny`` of the largest) are left
    out: there Adam / RMSProp divide by ~eps, so float32 rounding of a near-zero gradient moves
    the update by O(lr). Their moment estimates are still compared in full.
    """
    got, want = flat(got), np.asarray(want, np.float64)
    keep = np.ones(want.shape, bool)
    if grad is not None:
        keep = np.abs(grad) >= tiny * np.max(np.abs(grad))
    scale = max(np.max(np.abs(want)), 1e-12)
    diff = np.where(keep, np.abs(got - want), 0.0)
    i = int(np.argmax(diff))
    err = diff[i]
    detail = "" if grad is None else f", gradient there {grad[i]:.3g} (largest {np.max(np.abs(grad)):.3g})"
    assert err <= rtol * scale, (f"{what}: max error {err:.3g} vs scale {scale:.3g} at coordinate {i} "
                                 f"(got {got[i]:.8g}, want {want[i]:.8g}{detail})")


def clip_between(norms) -> float:
    """A clip norm between two observed per-example norms, so some rows are clipped, some not."""
    u = np.unique(np.round(np.asarray(norms), 9))
    assert len(u) >= 2, "all probe norms are equal"
    k = len(u) // 2
    return float(0.5 * (u[k - 1] + u[k]))


def clipped_sum(grad_one, params, examples, clip_norm):
    """sum_i min(1, C / ||g_i||) g_i over ``examples``, and the norms ||g_i||."""
    total, norms = 0.0, []
    for ex in examples:
        g = flat(grad_one(params, *ex))
        n = np.linalg.norm(g)
        norms.append(n)
        total = total + g * min(1.0, clip_norm / n)
    return total, np.array(norms)


def adam(p, g, m, v, t, lr, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mhat, vhat = m / (1 - b1**t), v / (1 - b2**t)
    return p - lr * mhat / (np.sqrt(vhat) + eps), m, v


def rmsprop(p, g, v, lr, alpha=0.99, eps=1e-8):
    """torch.optim.RMSprop(alpha=0.99, eps=1e-8), no momentum, no centering."""
    v = alpha * v + (1 - alpha) * g * g
    return p - lr * g / (np.sqrt(v) + eps), v


_chunk = jax.jit(dpsgd.poisson_chunk, static_argnums=(2, 3, 4))
_unit_noise = jax.jit(lambda zeros, key: dpsgd.add_gaussian_noise(zeros, key, 1.0))


def poisson_chunks(k_sample, m: int, q: float):
    """[(chunk index, selected record indices, their slots)] as ``make_dp_step`` draws them."""
    cap = dpsgd.default_capacity(m, q)
    out, pos, i = [], jnp.int32(0), 0
    while int(pos) < m:
        c = _chunk(jax.random.fold_in(k_sample, i), pos, m, q, cap)
        mask = np.asarray(c.mask)
        out.append((i, np.asarray(c.indices)[mask], np.flatnonzero(mask)))
        pos, i = c.next_position, i + 1
    return out, cap


def noisy(total: np.ndarray, like, key, std: float) -> np.ndarray:
    """total + the N(0, std^2) draw of the step's noise key (one per coordinate of ``like``)."""
    zeros = jax.tree_util.tree_map(jnp.zeros_like, like)
    return total + std * flat(_unit_noise(zeros, key))


def reference_epsilons(phases: list[tuple[float, float, int]], delta: float, pld_interval: float):
    """(pld, rdp_improved) of DP-SGD phases ``(q, sigma, steps)`` from dp_accounting directly."""
    event = dpa.ComposedDpEvent([
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(s)), t)
        for q, s, t in phases if t > 0])
    pld = PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
                        value_discretization_interval=pld_interval).compose(event).get_epsilon(delta)
    rdp = RdpAccountant(list(privacy.RDP_ORDERS), dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    return pld, rdp.compose(event).get_epsilon(delta)


def check_valid_sample(frame: pd.DataFrame, schema: data.Schema, n: int) -> np.ndarray:
    """Asserts ``frame`` holds ``n`` rows of ``schema`` (strict encoding); returns the encoding."""
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
