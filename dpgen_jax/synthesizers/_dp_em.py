"""DP-EM for a Gaussian mixture by sufficient-statistics perturbation (SSP), in exact arithmetic.

Each EM iteration releases three statistics of the rows with Gaussian noise and then does the
M-step on the released values alone:

- soft counts ``n_k = sum_i r_ik``,
- first moments ``S1_k = sum_i r_ik x_i``,
- second moments ``S2_k = sum_i r_ik x_i x_i^T`` (the upper triangle with the diagonal released,
  then mirrored).

**Fixed point.** Rows are clipped (never rescaled by a data-dependent factor) to ``||x|| <= 1`` in
float64 and truncated toward zero to the public fixed point ``2^-b``, ``b = FRAC_BITS = 12``:
``X = trunc(x 2^b)`` (int64), with the integer check ``sum_j X_j^2 <= 2^(2b)`` on every row (a
row that float clipping left just outside the ball has its largest ``|X_j|`` decremented until it
holds). The responsibilities ``r`` (n, K) of the rows ``X 2^-b`` under the current mixture (public:
it is the M-step of earlier releases) are computed in float32 (any deterministic function of the
data would do) and truncated the same way, ``R = floor(r 2^b)``, clipped to [0, 2^b] with each
row's sum brought to at most ``2^b`` in integers; padding rows (``mask`` 0) get ``R = 0``. The
statistics are then exact int64 sums on the host: ``counts = sum_i R_i`` (fraction bits b),
``S1 = sum_i R_ik X_i`` (2b), ``S2 = sum_i R_ik X_ij X_il`` for ``j <= l`` (3b). int64 holds them
while ``n 2^(3b) < 2^63``: at most ``MAX_ROWS = 2^27 - 1`` rows per mixture (b = 12 keeps the
truncation, at most 2^-12 per coordinate, far below any noise in use while leaving 134 million
rows of room; b = 14 would leave 2 million).

**Sensitivity, exactly.** Adding or removing one row i changes, over all components jointly:
the counts by ``R_i 2^-b``, of L2 norm ``||R_i|| 2^-b <= ||R_i||_1 2^-b <= 1``; S1 by
``R_i (x) X_i 2^-2b``, of norm ``||R_i|| ||X_i|| 2^-2b <= 1``; the upper triangle of S2 by at
most the Frobenius norm of ``R_i (x) X_i X_i^T 2^-3b``, ``||R_i|| ||X_i||^2 2^-3b <= 1``. These
are integer facts (``sum_k R_ik <= 2^b``, ``sum_j X_ij^2 <= 2^(2b)``), not float ones.

**Snapped release.** Each statistic is released by ``dpsgd.snapped_gaussian`` (the one noise
home): the value plus ``W = float64(z Z)``, rounded in exact arithmetic to the public grid
``2^g``, ``g = grid_exponent(z)``: the largest power of two at most ``z / 64``, and never finer
than ``2^-25`` (float64's spacing at ``2^27``, the largest value a statistic takes), so every
output is a float64 multiple of ``2^g`` below ``2^53`` grid units and the low bits carry nothing.
The rounding adds at most ``(z/64)^2 / 12`` to the noise variance (0.002%). The noise of iteration
t comes from the run key's stream at counters ``[t B M, (t + 1) B M)`` (B mixtures of M
``= K (1 + d + d(d+1)/2)`` cells each; :func:`release_statistics`). The M-step on the released
float64 values is post-processing. ``noise_multiplier = 0`` (non-private) releases the exact
statistics.

With standard deviation ``z`` on each statistic, an iteration is three Gaussian mechanisms of
sensitivity 1: J iterations are accounted as
``privacy.GaussianPhase(name, z, steps=3 * J, sensitivity=1.0)``, for the ideal mechanism (the
exact Gaussian, then the grid: post-processing). What the sampler leaves (``Z`` is the float64
``ndtri`` of a 63-bit uniform) is an extra delta: per released cell the output's law is within
total variation ``TAU_PER_CELL = 2.3e-12`` of the ideal snapped Gaussian, so a fit of C cells is
(epsilon, delta + (1 + e^epsilon) C 2.3e-12)-DP; ``docs/dp-syn.md`` derives it (2.3e-8 for
DP-SYN's defaults on Adult at epsilon 1, against delta 1e-5).

The number of components, the initialisation (drawn from the key) and the floors are public.
Post-processing: counts floored at ``min_count``, means projected to the unit ball, covariances
``S2/n - mu mu^T`` projected to the positive semi-definite cone with eigenvalues at least
``eig_floor``. This replaces the DP-EM of Park et al. (2017), whose sensitivities divide by the
private soft counts and whose rows are scaled by a factor computed from the private data (not
end-to-end DP); see ``docs/privacy.md``. DP-SYN (Abay et al. 2018) fits one such mixture per label
group, DP-SACTGAN one per continuous column for its modes: both pass their mixtures stacked on a
batch axis (one compiled responsibility step per iteration for the whole batch).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax.dpsgd import snapped_gaussian

#: Fixed-point fraction bits b of the rows and responsibilities (public).
FRAC_BITS = 12
#: The most rows per mixture whose sums int64 holds exactly (``n 2^(3b) < 2^63``).
MAX_ROWS = 2 ** (63 - 3 * FRAC_BITS) - 1
#: The grid is the largest power of two at most ``noise_multiplier / GRID_RATIO`` ...
GRID_RATIO = 64
#: ... and never finer than float64's spacing at 2^27 (> MAX_ROWS, the largest |statistic|).
GRID_FLOOR = -25
#: The total-variation distance per released cell between the sampler's snapped output and the
#: ideal snapped Gaussian (docs/dp-syn.md, "Floating point").
TAU_PER_CELL = 2.3e-12
_MAX_NOISE = 2.0**40  # dpsgd's MAX_STD: beyond it float64 z * Z is coarser than any grid here


class Mixture(NamedTuple):
    """A Gaussian mixture: ``weights`` (K,), ``means`` (K, d), ``covariances`` (K, d, d) (with a
    leading batch axis when several mixtures are fitted at once)."""

    weights: jax.Array
    means: jax.Array
    covariances: jax.Array


def init_mixture(key: jax.Array, num_components: int, dim: int) -> Mixture:
    """A data-independent start: means uniform in [-0.5, 0.5]^d / sqrt(d), covariances
    (0.1 / d) I, equal weights (a broad start such as I makes the means collapse to the origin)."""
    k = _v.whole(minimum=1, num_components=num_components)
    d = _v.whole(minimum=1, dim=dim)
    means = jax.random.uniform(key, (k, d), minval=-0.5, maxval=0.5) / math.sqrt(d)
    covs = jnp.broadcast_to((0.1 / d) * jnp.eye(d), (k, d, d))
    return Mixture(jnp.full((k,), 1.0 / k), means, covs)


def clip_rows(x: jax.Array) -> jax.Array:
    """Each row scaled down to L2 norm at most 1 (float; :func:`fixed_point_rows` is what DP-EM sums)."""
    return x / jnp.maximum(1.0, jnp.linalg.norm(x, axis=-1, keepdims=True))


def responsibilities(x: jax.Array, mixture: Mixture) -> jax.Array:
    """(n, K) posterior component probabilities of each row (rows sum to 1)."""
    w, mu, cov = mixture
    d = x.shape[-1]
    chol = jnp.linalg.cholesky(cov)
    diff = x[:, None, :] - mu[None]                                    # (n, K, d)
    sol = jax.vmap(lambda c, dk: jax.scipy.linalg.solve_triangular(c, dk.T, lower=True).T,
                   in_axes=(0, 1), out_axes=1)(chol, diff)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)), axis=1)
    ll = -0.5 * (jnp.sum(sol**2, -1) + logdet + d * jnp.log(2 * jnp.pi)) + jnp.log(w)
    return jax.nn.softmax(ll, axis=1)


# ----------------------------------------------------------------------------- fixed point


def fixed_point_rows(x) -> np.ndarray:
    """int64 ``X = trunc(x_clipped 2^b)`` of rows ``x`` (..., n, d): each row clipped to the unit
    ball in float64, truncated toward zero, then decremented (largest ``|X_j|`` first, toward
    zero) until ``sum_j X_j^2 <= 2^(2b)`` holds in integers."""
    x64 = np.asarray(x, np.float64)
    if x64.ndim < 2 or x64.shape[-1] < 1:
        raise ValueError(f"x has shape {x64.shape}: pass rows of at least one value, shape (..., n, d).")
    if not np.all(np.isfinite(x64)):
        raise ValueError("x holds NaN or inf, which DP-EM cannot clip: pass finite rows.")
    norm = np.hypot.reduce(np.abs(x64), axis=-1)[..., None]
    big = np.trunc(x64 / np.maximum(1.0, norm) * 2.0**FRAC_BITS).astype(np.int64)
    rows = big.reshape(-1, big.shape[-1])
    over = np.flatnonzero(np.sum(rows * rows, axis=1) > 4**FRAC_BITS)
    while over.size:  # float clipping left the row just outside the ball (rare)
        j = np.argmax(np.abs(rows[over]), axis=1)
        rows[over, j] -= np.sign(rows[over, j])
        over = over[np.sum(rows[over] ** 2, axis=1) > 4**FRAC_BITS]
    return rows.reshape(big.shape)


@jax.jit
def _quantised_responsibilities(xq, weights, means, covs):
    r = jax.vmap(lambda x, w, m, c: responsibilities(x, Mixture(w, m, c)))(xq, weights, means, covs)
    r = jnp.clip(jnp.where(jnp.isfinite(r), r, 0.0), 0.0, 1.0)
    return jnp.floor(r * 2.0**FRAC_BITS).astype(jnp.int32)


def _fixed_responsibilities(xq: jax.Array, mixture: Mixture, mask: np.ndarray | None) -> np.ndarray:
    """(B, n, K) int64 ``R``: rows ``xq`` (B, n, d) on the device, ``mixture`` batched."""
    m = [jnp.asarray(a, jnp.float32) for a in mixture]
    r = np.asarray(_quantised_responsibilities(xq, *m)).astype(np.int64)
    if mask is not None:
        r *= mask[..., None]
    flat = r.reshape(-1, r.shape[-1])
    excess = flat.sum(axis=1) - 2**FRAC_BITS
    idx = np.flatnonzero(excess > 0)
    while idx.size:  # a float32 softmax summing above 1: take the excess off the largest
        j = np.argmax(flat[idx], axis=1)
        cut = np.minimum(excess[idx], flat[idx, j])
        flat[idx, j] -= cut
        excess[idx] -= cut
        idx = idx[excess[idx] > 0]
    return r


def fixed_point_responsibilities(X: np.ndarray, mixture: Mixture, mask=None) -> np.ndarray:
    """int64 ``R = floor(r 2^b)`` (..., n, K) of fixed-point rows ``X`` (:func:`fixed_point_rows`)
    under ``mixture``: each entry in [0, 2^b], each row summing to at most ``2^b``, rows with
    ``mask`` 0 all zero. Batched like ``X``."""
    X = np.asarray(X)
    single = X.ndim == 2
    xb = X[None] if single else X
    mix = Mixture(*(np.asarray(a)[None] if single else np.asarray(a) for a in mixture))
    mk = None if mask is None else np.asarray(mask, np.int64).reshape(xb.shape[:2])
    r = _fixed_responsibilities(jnp.asarray(xb, jnp.float32) * 2.0**-FRAC_BITS, mix, mk)
    return r[0] if single else r


def _features(X: np.ndarray) -> np.ndarray:
    """(..., n, 1 + d + P) int64 at 3b fraction bits: ``2^2b``, ``X 2^b``, ``X_j X_l`` (j <= l)."""
    iu, ju = np.triu_indices(X.shape[-1])
    one = np.full(X.shape[:-1] + (1,), 4**FRAC_BITS, np.int64)
    return np.concatenate([one, X * 2**FRAC_BITS, X[..., iu] * X[..., ju]], axis=-1)


def sufficient_statistics(X: np.ndarray, R: np.ndarray) -> np.ndarray:
    """The exact statistics as int64 numerators at ``3b`` fraction bits, packed per component:
    ``(..., K, 1 + d + P)`` = ``[counts 2^2b, S1 2^b, S2 upper triangle]`` (row-major ``j <= l``,
    ``P = d(d+1)/2``). ``X`` (..., n, d) from :func:`fixed_point_rows`, ``R`` (..., n, K) from
    :func:`fixed_point_responsibilities`; at most ``MAX_ROWS`` rows."""
    X, R = np.asarray(X, np.int64), np.asarray(R, np.int64)
    _check_rows(X.shape[-2])
    return np.swapaxes(R, -1, -2) @ _features(X)


def _check_rows(n: int) -> None:
    if n > MAX_ROWS:
        raise ValueError(f"DP-EM sums the rows exactly in int64 at the fixed point 2^-{FRAC_BITS}, "
                         f"which holds at most {MAX_ROWS:,} rows per mixture; got x with {n:,} rows.")


def grid_exponent(noise_multiplier: float) -> int:
    """g of the public release grid ``2^g``: the largest power of two at most
    ``noise_multiplier / 64``, and at least ``GRID_FLOOR`` (a function of the noise alone)."""
    z = _v.positive(noise_multiplier=noise_multiplier)
    return max(math.frexp(z / GRID_RATIO)[1] - 1, GRID_FLOOR)


def release_statistics(numerators: np.ndarray, key: jax.Array, noise_multiplier: float, *,
                       offset: int = 0) -> np.ndarray:
    """The release of packed statistics (:func:`sufficient_statistics`): float64 of their shape.

    ``dpsgd.snapped_gaussian`` with std ``noise_multiplier`` on the grid ``2^grid_exponent(z)``,
    cell i drawing the counter ``offset + i`` of ``key``'s stream (row-major over the array);
    ``noise_multiplier`` 0 returns the exact values (non-private)."""
    nums = np.asarray(numerators, np.int64)
    z = _v.non_negative(noise_multiplier=noise_multiplier)
    if z == 0.0:
        return nums.astype(np.float64) * 2.0 ** (-3 * FRAC_BITS)
    return snapped_gaussian(nums, 3 * FRAC_BITS, z, grid_exponent(z), key, offset=offset)


def unpack_statistics(released: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(counts (..., K), S1 (..., K, d), S2 (..., K, d, d))`` from packed values, S2 mirrored
    from its upper triangle."""
    rel = np.asarray(released, np.float64)
    iu, ju = np.triu_indices(dim)
    s2 = np.zeros(rel.shape[:-1] + (dim, dim))
    s2[..., iu, ju] = rel[..., 1 + dim:]
    s2[..., ju, iu] = rel[..., 1 + dim:]
    return rel[..., 0], rel[..., 1:1 + dim], s2


def m_step(counts, s1, s2, *, min_count: float = 1.0, eig_floor: float = 1e-3) -> Mixture:
    """The mixture (float64 host arrays) from released statistics, with the projections described
    in the module; any leading batch axes."""
    n = np.maximum(np.asarray(counts, np.float64), min_count)
    mu = np.asarray(s1, np.float64) / n[..., None]
    mu = mu / np.maximum(1.0, np.linalg.norm(mu, axis=-1, keepdims=True))
    cov = np.asarray(s2, np.float64) / n[..., None, None] - mu[..., :, None] * mu[..., None, :]
    cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
    vals, vecs = np.linalg.eigh(cov)
    cov = np.einsum("...ij,...j,...lj->...il", vecs, np.maximum(vals, eig_floor), vecs)
    return Mixture(n / n.sum(axis=-1, keepdims=True), mu, cov)


def _batched(x, init, mask):
    xa = np.asarray(x)
    if xa.ndim not in (2, 3):
        raise ValueError(f"x has shape {xa.shape}: pass (n, d) rows, or (batch, n, d) for stacked mixtures.")
    single = xa.ndim == 2
    xb = xa[None] if single else xa
    b, n, d = xb.shape
    mix = Mixture(*(np.asarray(a, np.float64) for a in init))
    if single:
        mix = Mixture(*(a[None] for a in mix))
    k = mix.weights.shape[-1] if mix.weights.ndim == 2 else -1
    if (mix.weights.shape != (b, k) or mix.means.shape != (b, k, d) or
            mix.covariances.shape != (b, k, d, d)):
        raise ValueError(f"init has shapes {[tuple(a.shape) for a in init]}: pass "
                         f"{'one mixture' if single else f'{b} mixtures'} in dimension {d} (weights (K,), "
                         f"means (K, {d}), covariances (K, {d}, {d}){'' if single else ' each'}).")
    mk = None
    if mask is not None:
        mk = np.asarray(mask)
        if mk.shape != (b, n) and not (single and mk.shape == (n,)):
            raise ValueError(f"mask has shape {mk.shape}, not {(n,) if single else (b, n)}: pass one flag per row.")
        if not np.all((mk == 0) | (mk == 1)):
            raise ValueError("mask holds values other than 0 and 1: flag each padding row with 0 and each row with 1.")
        mk = mk.reshape(b, n).astype(np.int64)
    return single, xb, mix, mk


def dp_em_ssp(x, key: jax.Array, init: Mixture, *, iterations: int, noise_multiplier: float,
              mask=None, min_count: float = 1.0, eig_floor: float = 1e-3) -> Mixture:
    """``iterations`` DP-EM iterations from ``init`` (see the module docstring for the privacy).

    Args:
        x: (n, d) rows, or (B, n, d) for B mixtures fitted at once (DP-SYN's label groups,
            DP-SACTGAN's columns); clipped to the unit ball and put on the fixed point here.
        key: secret key of the noise (one stream: iteration t and mixture b draw the counters
            ``[(t B + b) M, (t B + b + 1) M)``, M cells per mixture).
        init: a public start, e.g. :func:`init_mixture` (stacked on a leading axis for a batch).
        iterations: J, an integer >= 0.
        noise_multiplier: the noise standard deviation on each statistic (sensitivity 1); 0 runs
            plain EM on the exact statistics (no privacy).
        mask: optional (n,) or (B, n) 0/1 flags; 0 drops a padding row (padding changes no
            sensitivity).

    Returns:
        The fitted :class:`Mixture` (float32 device arrays, batched like ``x``).

    The loop runs on the host over iterations: per iteration one compiled call computes the
    responsibilities of every mixture of the batch, then the exact sums, the snapped release
    and the M-step run in numpy.
    """
    j = _v.whole(iterations=iterations)
    z = _v.non_negative(noise_multiplier=noise_multiplier)
    if z > _MAX_NOISE:
        raise ValueError(f"noise_multiplier={noise_multiplier!r} is above 2^40, where float64 z * Z is coarser "
                         "than any grid here: pass a noise_multiplier of at most 2^40.")
    _v.positive(min_count=min_count)
    _v.positive(eig_floor=eig_floor)
    single, xb, mix, mk = _batched(x, init, mask)
    _check_rows(xb.shape[1])
    X = fixed_point_rows(xb)
    feats = _features(X)
    xq = jnp.asarray(X, jnp.float32) * 2.0**-FRAC_BITS
    for t in range(j):
        nums = np.swapaxes(_fixed_responsibilities(xq, mix, mk), -1, -2) @ feats
        released = release_statistics(nums, key, z, offset=t * nums.size)
        mix = m_step(*unpack_statistics(released, xb.shape[2]), min_count=min_count,
                     eig_floor=eig_floor)
    out = Mixture(*(jnp.asarray(a, jnp.float32) for a in mix))
    return Mixture(*(a[0] for a in out)) if single else out


def sample_mixture(mixture: Mixture, key: jax.Array, n: int) -> jax.Array:
    """``n`` draws from the mixture (post-processing: needs a fresh key, no private data)."""
    k_comp, k_norm = jax.random.split(key)
    comp = jax.random.categorical(k_comp, jnp.log(mixture.weights), shape=(int(n),))
    chol = jnp.linalg.cholesky(mixture.covariances)[comp]             # (n, d, d)
    eps = jax.random.normal(k_norm, (int(n), mixture.means.shape[1]))
    return mixture.means[comp] + jnp.einsum("nij,nj->ni", chol, eps)


__all__ = [
    "FRAC_BITS",
    "GRID_FLOOR",
    "GRID_RATIO",
    "MAX_ROWS",
    "Mixture",
    "TAU_PER_CELL",
    "clip_rows",
    "dp_em_ssp",
    "fixed_point_responsibilities",
    "fixed_point_rows",
    "grid_exponent",
    "init_mixture",
    "m_step",
    "release_statistics",
    "responsibilities",
    "sample_mixture",
    "sufficient_statistics",
    "unpack_statistics",
]
