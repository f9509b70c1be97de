"""The engine's Gaussian noise against independent references.

* The generator is Threefry-2x32-20: published known-answer vectors (Salmon et al. 2011, the
  Random123 test vectors) and JAX's own Threefry primitive on random inputs.
* The transform from 64 random bits to a value is the normal quantile: against
  ``scipy.special.ndtri`` in float64, over random words and words whose uniform lies deep in the
  tails; the published AS 241 coefficients are checked against Wichura's transcription hash sums.
* The reachable extremes exceed 9 sigma (the extreme words are constructed).
* A large draw (2^29 values, counted inside jit) has values beyond 5.5 sigma at the normal rate,
  and the counts in the bands between 4 and 5.5 sigma match the normal probabilities.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend.random import threefry_2x32
from scipy import special, stats

from dpgen_jax import dpsgd
from dpgen_jax.dpsgd import _noise

P_ACCEPT = 1e-4


def _words(*values):
    return [jnp.uint32(v) for v in values]


@pytest.mark.parametrize(
    "key, counter, expected",
    [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
     ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
     ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))],
)
def test_threefry_known_answers(key, counter, expected):
    out = _noise.threefry2x32(_words(*key), _words(*counter))
    assert tuple(int(x) for x in out) == expected


def test_threefry_equals_jax_threefry_on_random_inputs():
    r = np.random.default_rng(0)
    key = r.integers(0, 2**32, size=2, dtype=np.uint64).astype(np.uint32)
    counter = r.integers(0, 2**32, size=(2, 1000), dtype=np.uint64).astype(np.uint32)
    ours = jax.jit(lambda k, c: _noise.threefry2x32((k[0], k[1]), (c[0], c[1])))(key, counter)
    theirs = threefry_2x32(jnp.asarray(key), jnp.asarray(counter).ravel())  # count halves = (x0, x1)
    np.testing.assert_array_equal(np.concatenate([np.asarray(o) for o in ours]), np.asarray(theirs))


def test_quantile_coefficients_match_wichura_hash_sums():
    # AS 241 prints, for each coefficient set, the sum of the mantissas (value / 10^exponent) as a
    # transcription check: ab 32.3184577772, cd 15.7614929821, ef 19.4052910204.
    def mantissa_sum(*sets):
        vals = [v for s in sets for v in s if v != 1.0]
        return sum(v / 10.0 ** math.floor(math.log10(v)) for v in vals)

    assert mantissa_sum(_noise._CENTRAL_NUM, _noise._CENTRAL_DEN) == pytest.approx(32.3184577772, abs=1e-9)
    assert mantissa_sum(_noise._TAIL_NUM, _noise._TAIL_DEN) == pytest.approx(15.7614929821, abs=1e-9)
    assert mantissa_sum(_noise._FAR_NUM, _noise._FAR_DEN) == pytest.approx(19.4052910204, abs=1e-9)


def _reference(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """The value the words code: sign from the top bit, -Phi^{-1}((K + 1/2) 2^-64) magnitude."""
    k = (hi & 0x7FFFFFFF).astype(np.float64) * 2.0**32 + lo.astype(np.float64)
    mag = -special.ndtri((k + 0.5) * 2.0**-64)
    return np.where(hi >= 2**31, -mag, mag)


def test_transform_is_the_normal_quantile_everywhere():
    r = np.random.default_rng(1)
    n = 400_000
    hi = r.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    lo = r.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    # Deep tails on both sides: the top 1..31 bits below the sign are zero.
    zeros = r.integers(1, 32, size=20_000)
    hi[:20_000] = (hi[:20_000] >> zeros).astype(np.uint32) | (r.integers(0, 2, 20_000) << 31).astype(np.uint32)
    hi[20_000:20_100] = r.integers(0, 2, 100).astype(np.uint32) << 31  # K < 2^32
    lo[20_000:20_010] = np.arange(10, dtype=np.uint32)                     # K < 10: beyond 9 sigma
    got = np.asarray(jax.jit(_noise.normal_from_words)(hi, lo), np.float64)
    want = _reference(hi, lo)
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-2)
    assert rel.max() < 1e-6, (rel.max(), want[rel.argmax()])
    assert np.abs(got).max() > 9.0  # the deep-tail words were exercised


def test_reachable_extremes_exceed_nine_sigma():
    # The smallest uniform the sampler can form is 2^-64 (all 63 magnitude bits zero) on either
    # sign: the largest reachable values, constructed directly.
    hi = np.array([0, 0x80000000, 0, 0x80000000], np.uint32)
    lo = np.array([0, 0, 1, 1], np.uint32)
    ext = np.asarray(_noise.normal_from_words(jnp.asarray(hi), jnp.asarray(lo)), np.float64)
    assert ext[0] > 9.0 and ext[1] < -9.0
    assert ext[0] == pytest.approx(-special.ndtri(2.0**-65), rel=1e-6)
    assert ext[0] == pytest.approx(_noise.MAX_ABS_VALUE, abs=1e-3)
    assert np.all(np.abs(ext[2:]) < np.abs(ext[:2]))  # monotone in the words
    # Analytically: a float32 uniform with 23 random bits (jax.random.normal) cannot go past
    # Phi^{-1}(2^-24) = 5.3; 64 bits reach Phi^{-1}(2^-65) = 9.16.
    assert -special.ndtri(2.0**-24) < 5.5 < 9.0 < -special.ndtri(2.0**-65)


def test_gaussian_noise_shape_dtype_offsets_and_keys():
    key = jax.random.key(3)
    a = dpsgd.gaussian_noise(key, (4, 5))
    assert a.shape == (4, 5) and a.dtype == jnp.float32
    b = dpsgd.gaussian_noise(key, (30,))
    np.testing.assert_array_equal(np.asarray(a).ravel(), np.asarray(b)[:20])  # a stream
    c = dpsgd.gaussian_noise(key, (10,), offset=20)
    np.testing.assert_array_equal(np.asarray(c), np.asarray(b)[20:])
    # Offsets beyond 2^32 carry into the high counter word.
    d = dpsgd.gaussian_noise(key, (4,), offset=2**32 - 2)
    assert np.all(np.isfinite(np.asarray(d))) and len(set(np.asarray(d).tolist())) == 4
    assert not np.array_equal(np.asarray(dpsgd.gaussian_noise(jax.random.key(4), (30,))), np.asarray(b))


def test_host_draws_are_the_stream_whatever_the_sizes():
    """Outside a trace ``add_gaussian_noise`` draws a power-of-two block of counters per array with
    one compiled program per block size and cuts it: the values are the stream's coordinates (as
    ``gaussian_noise`` at the array's offset and the traced call, up to float32 rounding of the
    compiled arithmetic), and a repeated draw is the same to the bit."""
    key = jax.random.key(11)
    sizes = {"a": 3, "b": 1025}  # blocks of 1,024 and 2,048 counters
    tree = {k: jnp.zeros((n,), jnp.float32) for k, n in sizes.items()}
    host = dpsgd.add_gaussian_noise(tree, key, 2.0)
    offset = 0
    for k in sorted(sizes):  # the tree's leaf order
        want = 2.0 * np.asarray(dpsgd.gaussian_noise(key, (sizes[k],), offset=offset))
        np.testing.assert_allclose(np.asarray(host[k]), want, rtol=0, atol=4e-6)
        offset += sizes[k]
    traced = jax.jit(lambda t, kk: dpsgd.add_gaussian_noise(t, kk, 2.0))(tree, key)
    for k in sizes:  # compiled, the same arithmetic may round differently in the last bit
        np.testing.assert_allclose(np.asarray(traced[k]), np.asarray(host[k]), rtol=0, atol=4e-6)
    again = dpsgd.add_gaussian_noise({"a": np.zeros(3, np.float32)}, key, 2.0)["a"]
    np.testing.assert_array_equal(np.asarray(again), np.asarray(host["a"]))
    assert _noise._eager_block(1) == 1024 and _noise._eager_block(1025) == 2048


# Bands in units of sigma and their probabilities (both signs).
_EDGES = (4.0, 4.5, 5.0, 5.5, np.inf)
_CHUNK = 2**22
_N_CHUNKS = 128  # 2^29 values


# 2^29 draws: compiled with XLA's full optimisation (the suite's default is fast compilation, see
# tests/conftest.py), which runs them several times faster.
@functools.partial(jax.jit, static_argnums=1, compiler_options={"xla_backend_optimization_level": 3})
def _tail_counts(key, n_chunks):
    edges = jnp.asarray(_EDGES[:-1], jnp.float32)

    def body(i, counts):
        z = dpsgd.add_gaussian_noise({"z": jnp.zeros((_CHUNK,), jnp.float32)},
                                     jax.random.fold_in(key, i), 1.0)["z"]
        band = jnp.sum(jnp.abs(z)[:, None] >= edges[None, :], axis=0, dtype=jnp.int32)
        return counts + band

    return jax.lax.fori_loop(0, n_chunks, body, jnp.zeros((len(_EDGES) - 1,), jnp.int32))


def test_tail_beyond_five_and_a_half_sigma_occurs_at_the_normal_rate():
    n = _CHUNK * _N_CHUNKS
    beyond = np.asarray(_tail_counts(jax.random.key(11), _N_CHUNKS)).astype(np.int64)
    counts = -np.diff(np.append(beyond, 0))           # per band, the last one open-ended
    probs = np.array([2 * (special.ndtr(-a) - special.ndtr(-b)) for a, b in zip(_EDGES, _EDGES[1:])])
    expected = n * probs
    assert expected[-1] > 20  # the open band beyond 5.5 sigma expects ~20 values
    # Beyond 5.5 sigma: an exact Poisson test against the normal rate (a truncated sampler,
    # which returns none there, is rejected at p ~ 1e-9).
    k, lam = int(counts[-1]), float(expected[-1])
    p_two_sided = 2 * min(stats.poisson.cdf(k, lam), stats.poisson.sf(k - 1, lam))
    assert p_two_sided > P_ACCEPT, (k, lam)
    # All bands together: chi-square against the normal probabilities.
    chi = float(np.sum((counts - expected) ** 2 / expected))
    assert stats.chi2.sf(chi, df=len(counts)) > P_ACCEPT, (counts, expected)


@pytest.mark.parametrize("kwargs, argument", [({"shape": (2, -1)}, "shape"), ({"shape": (2.5,)}, "shape"),
                                              ({"offset": -1}, "offset"), ({"offset": 2**64}, "offset")])
def test_gaussian_noise_bad_arguments(kwargs, argument):
    args = dict(shape=(3,), offset=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=argument):
        dpsgd.gaussian_noise(jax.random.key(0), args["shape"], offset=args["offset"])
