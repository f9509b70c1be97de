"""Independent references shared by the synthesizer tests.

Everything here is a slow, separate implementation of what the library computes: per-example
gradients one row at a time, clipping by min(1, C / ||g||), optimizers written out in float64
NumPy, the engine's Poisson sampler and Gaussian noise re-implemented in NumPy/SciPy from the same
random words, epsilons from ``dp_accounting`` called directly, and checks of sampled frames against
the schema.
"""

from __future__ import annotations

import json
from fractions import Fraction

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


# ---------------------------------------------------------------------------------- sampler and noise
# Independent re-implementations in NumPy/SciPy (float64) of the documented algorithms, from the
# same random words: the engine's Poisson gaps (docs/engine.md: Geometric(q) gaps by inversion of a
# 96-bit uniform) and its Gaussian noise (Threefry-2x32-20 blocks, sign bit + 63-bit uniform through
# the normal quantile, here scipy's ``ndtri``). Only ``jax.random.bits`` / ``key_data`` are shared
# with the engine: they are JAX's own primitives, the source of the randomness.

_MASK32 = 0xFFFFFFFF


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & np.uint64(_MASK32)


def threefry2x32(k0: int, k1: int, x0: np.ndarray, x1: np.ndarray):
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), uint32 arithmetic in uint64 NumPy."""
    m = np.uint64(_MASK32)
    ks = [np.uint64(k0), np.uint64(k1), np.uint64(k0 ^ k1 ^ 0x1BD11BDA)]
    x0 = (np.asarray(x0, np.uint64) + ks[0]) & m
    x1 = (np.asarray(x1, np.uint64) + ks[1]) & m
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    for i in range(5):
        for r in rotations[i % 2]:
            x0 = (x0 + x1) & m
            x1 = _rotl(x1, r) ^ x0
        x0 = (x0 + ks[(i + 1) % 3]) & m
        x1 = (x1 + ks[(i + 2) % 3] + np.uint64(i + 1)) & m
    return x0, x1


def reference_normals(key, n: int) -> np.ndarray:
    """The engine's n standard normal values for ``key``, computed independently (float64)."""
    from scipy.special import ndtri

    data = np.asarray(jax.random.key_data(key)).astype(np.uint64)
    d0, d1 = threefry2x32(int(data[0]), int(data[1]), np.array([0x6E6F6973]), np.array([0x65000000]))
    j = np.arange(n, dtype=np.uint64)
    hi, lo = threefry2x32(int(d0[0]), int(d1[0]), j >> np.uint64(32), j & np.uint64(_MASK32))
    k = ((hi & np.uint64(0x7FFFFFFF)) << np.uint64(32)) | lo  # 63 bits
    p = (k.astype(np.float64) + 0.5) * 2.0**-64                # in (0, 1/2)
    z = -ndtri(p)                                              # >= 0
    return np.where((hi >> np.uint64(31)) == 1, -z, z)


def reference_integer_noise(key, n: int, std: float) -> np.ndarray:
    """The integer noise ``dpsgd.noisy_counts`` adds to n counts under ``key``, computed
    independently: ``round(std * Z)`` with Z the engine's normals under the key folded with the
    stream constant ("int")."""
    return np.rint(std * reference_normals(jax.random.fold_in(key, 0x696E74), n)).astype(np.int64)


def rounded_gaussian_pvalue(z: np.ndarray, std: float) -> float:
    """Chi-square p-value of integer draws ``z`` against the law of ``round(std * Z)``, Z ~ N(0, 1)
    (cells with fewer than 20 expected draws merged into the two tails)."""
    from scipy import stats

    z = np.asarray(z)
    if not np.issubdtype(z.dtype, np.integer):
        raise TypeError(f"expected integer draws, got {z.dtype}")
    half = int(np.ceil(10 * std)) + 2
    ks = np.arange(-half, half + 1)
    pmf = stats.norm.cdf((ks + 0.5) / std) - stats.norm.cdf((ks - 0.5) / std)
    pmf[0], pmf[-1] = stats.norm.cdf((-half + 0.5) / std), stats.norm.sf((half - 0.5) / std)
    keep = pmf * z.size >= 20
    lo, hi = ks[keep][0], ks[keep][-1]
    cells = np.arange(lo, hi + 1)
    observed = np.array([np.sum(z <= lo)] + [np.sum(z == k) for k in cells[1:-1]] + [np.sum(z >= hi)])
    expected = np.array([stats.norm.cdf((lo + 0.5) / std)]
                        + list(pmf[(ks > lo) & (ks < hi)]) + [stats.norm.sf((hi - 0.5) / std)]) * z.size
    return float(stats.chisquare(observed, expected).pvalue)


def noisy(total: np.ndarray, like, key, std: float) -> np.ndarray:
    """total + the N(0, std^2) noise the engine draws with the step's noise key."""
    n = sum(x.size for x in jax.tree_util.tree_leaves(like))
    return total + std * reference_normals(key, n)


def poisson_chunks(k_sample, m: int, q: float):
    """[(chunk index, selected record indices, their slots)] of one step's Poisson sample.

    Chunk i uses the 3 x capacity words of ``fold_in(k_sample, i)``; gap = floor(E / lambda) + 1
    (capped at m + 1) with lambda = -log(1 - q) and E = -log(U) for the 96-bit uniform U, which is
    the inverse CDF of Geometric(q).
    """
    cap = dpsgd.default_capacity(m, q)
    lam = -np.log1p(-q)
    out, pos, i = [], 0, 0
    while pos < m:
        w = np.asarray(jax.random.bits(jax.random.fold_in(k_sample, i), (3, cap), jnp.uint32))
        w = w.astype(np.uint64)
        k = (w[0] << np.uint64(32)) | w[1]
        lower = w[0] < 2**31
        u = (k.astype(np.float64) + (w[2].astype(np.float64) + 0.5) * 2.0**-32) * 2.0**-64
        v = ((~k).astype(np.float64) + ((w[2] ^ np.uint64(_MASK32)).astype(np.float64) + 0.5)
             * 2.0**-32) * 2.0**-64
        e = np.where(lower, -np.log(u), -np.log1p(-v))
        gaps = np.floor(np.minimum(e / lam, m)).astype(np.int64) + 1
        idx = np.minimum(pos - 1 + np.cumsum(gaps), m)
        mask = idx < m
        out.append((i, idx[mask], np.flatnonzero(mask)))
        pos, i = int(min(idx[-1] + 1, m)), i + 1
    return out, cap


def float32_not_above(numerator: float, denominator: float) -> float:
    """The largest float32 whose exact value is at most ``numerator / denominator`` (both read as
    the exact rationals they are), found by stepping through float32 neighbours."""
    exact = Fraction(numerator) / Fraction(denominator)
    x = np.float32(float(exact))
    while Fraction(float(x)) > exact:
        x = np.nextafter(x, np.float32(-np.inf))
    while Fraction(float(np.nextafter(x, np.float32(np.inf)))) <= exact:
        x = np.nextafter(x, np.float32(np.inf))
    return float(x)


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
