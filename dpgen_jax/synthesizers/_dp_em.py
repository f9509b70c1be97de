"""DP-EM for a Gaussian mixture by sufficient-statistics perturbation (SSP).

Each EM iteration releases three statistics of the rows with Gaussian noise and then does the
M-step on the noisy values alone:

- soft counts ``n_k = sum_i r_ik``,
- first moments ``S1_k = sum_i r_ik x_i``,
- second moments ``S2_k = sum_i r_ik x_i x_i^T`` (symmetric noise: the upper triangle and the
  diagonal drawn, then mirrored).

Rows are clipped (never rescaled by a data-dependent factor) to ``||x|| <= 1``, and each row's
responsibilities sum to 1, so adding or removing one row changes each statistic, over all
components jointly, by at most 1 in L2 (``||r|| <= 1``, ``||r (x) x|| = ||r|| ||x||``, and the
upper triangle of ``x x^T`` is part of a matrix of Frobenius norm ``||x||^2``). With noise
standard deviation ``noise_multiplier`` on each, an iteration is three Gaussian mechanisms of
sensitivity 1: a run of J iterations is accounted as
``privacy.GaussianPhase(name, noise_multiplier, steps=3 * J, sensitivity=1.0)``. The number of
components, the initialisation (drawn from the key) and the floors are public. Post-processing:
counts floored at ``min_count``, means projected to the unit ball, covariances ``S2/n - mu mu^T``
projected to the positive semi-definite cone with eigenvalues at least ``eig_floor``.

This replaces the DP-EM of Park et al. (2017), whose sensitivities divide by the private soft
counts and whose rows are scaled by a factor computed from the private data (not end-to-end DP);
see ``docs/privacy.md``. DP-SYN (Abay et al. 2018) fits one such mixture per label group;
DP-SACTGAN one per continuous column for its modes. A synthesizer piece, not part of the DP-SGD
engine: it uses the engine's noise (:func:`dpgen_jax.dpsgd.gaussian_noise`) and nothing else.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpgen_jax._validate import count, non_negative_finite, positive_finite
from dpgen_jax.dpsgd import gaussian_noise


class Mixture(NamedTuple):
    """A Gaussian mixture: ``weights`` (K,), ``means`` (K, d), ``covariances`` (K, d, d)."""

    weights: jax.Array
    means: jax.Array
    covariances: jax.Array


def init_mixture(key: jax.Array, num_components: int, dim: int) -> Mixture:
    """A data-independent start: means uniform in [-0.5, 0.5]^d / sqrt(d), covariances
    (0.1 / d) I, equal weights (a broad start such as I makes the means collapse to the origin)."""
    k = count(num_components, "num_components", 1)
    d = count(dim, "dim", 1)
    means = jax.random.uniform(key, (k, d), minval=-0.5, maxval=0.5) / math.sqrt(d)
    covs = jnp.broadcast_to((0.1 / d) * jnp.eye(d), (k, d, d))
    return Mixture(jnp.full((k,), 1.0 / k), means, covs)


def clip_rows(x: jax.Array) -> jax.Array:
    """Each row scaled down to L2 norm at most 1 (rows inside the unit ball are unchanged)."""
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


def sufficient_statistics(x: jax.Array, mixture: Mixture, mask: jax.Array | None = None):
    """``(n_k, S1_k, S2_k)`` of the (already clipped) rows; ``mask`` (n,) drops padding rows."""
    r = responsibilities(x, mixture)
    if mask is not None:
        r = r * mask[:, None].astype(r.dtype)
    return r.sum(0), r.T @ x, jnp.einsum("nk,ni,nj->kij", r, x, x)


def _symmetric_noise(key: jax.Array, shape) -> jax.Array:
    e = gaussian_noise(key, shape)
    return jnp.triu(e) + jnp.swapaxes(jnp.triu(e, 1), -1, -2)


def m_step(counts, s1, s2, *, min_count: float = 1.0, eig_floor: float = 1e-3) -> Mixture:
    """The mixture from (noisy) statistics, with the projections described in the module."""
    n = jnp.maximum(counts, min_count)
    mu = s1 / n[:, None]
    mu = mu / jnp.maximum(1.0, jnp.linalg.norm(mu, axis=1, keepdims=True))
    cov = s2 / n[:, None, None] - jnp.einsum("ki,kj->kij", mu, mu)
    cov = 0.5 * (cov + jnp.swapaxes(cov, 1, 2))
    vals, vecs = jnp.linalg.eigh(cov)
    cov = jnp.einsum("kij,kj,klj->kil", vecs, jnp.maximum(vals, eig_floor), vecs)
    return Mixture(n / n.sum(), mu, cov)


def dp_em_ssp(x: jax.Array, key: jax.Array, init: Mixture, *, iterations: int,
              noise_multiplier: float, mask: jax.Array | None = None, min_count: float = 1.0,
              eig_floor: float = 1e-3) -> Mixture:
    """``iterations`` DP-EM iterations from ``init`` (see the module docstring for the privacy).

    Args:
        x: (n, d) rows; clipped to the unit ball here.
        key: secret key of the noise (one split per iteration and statistic).
        init: a public start, e.g. :func:`init_mixture`.
        iterations: J, an integer >= 0 (static).
        noise_multiplier: the noise standard deviation on each statistic (sensitivity 1); 0 runs
            plain EM (no privacy).
        mask: optional (n,) 0/1 weights that drop padding rows (padding changes no sensitivity).

    Returns:
        The fitted :class:`Mixture`.
    """
    j = count(iterations, "iterations", 0)
    z = non_negative_finite(noise_multiplier, "noise_multiplier")
    positive_finite(min_count, "min_count")
    positive_finite(eig_floor, "eig_floor")
    x = clip_rows(jnp.asarray(x, jnp.float32))
    k, d = init.means.shape

    def body(mixture, step_key):
        counts, s1, s2 = sufficient_statistics(x, mixture, mask)
        if z > 0.0:
            k1, k2, k3 = jax.random.split(step_key, 3)
            counts = counts + z * gaussian_noise(k1, (k,))
            s1 = s1 + z * gaussian_noise(k2, (k, d))
            s2 = s2 + z * _symmetric_noise(k3, (k, d, d))
        return m_step(counts, s1, s2, min_count=min_count, eig_floor=eig_floor), None

    out, _ = jax.lax.scan(body, Mixture(*map(jnp.asarray, init)), jax.random.split(key, j))
    return out


def sample_mixture(mixture: Mixture, key: jax.Array, n: int) -> jax.Array:
    """``n`` draws from the mixture (post-processing: needs a fresh key, no private data)."""
    k_comp, k_norm = jax.random.split(key)
    comp = jax.random.categorical(k_comp, jnp.log(mixture.weights), shape=(int(n),))
    chol = jnp.linalg.cholesky(mixture.covariances)[comp]             # (n, d, d)
    eps = jax.random.normal(k_norm, (int(n), mixture.means.shape[1]))
    return mixture.means[comp] + jnp.einsum("nij,nj->ni", chol, eps)


__all__ = [
    "Mixture",
    "clip_rows",
    "dp_em_ssp",
    "init_mixture",
    "m_step",
    "responsibilities",
    "sample_mixture",
    "sufficient_statistics",
]
