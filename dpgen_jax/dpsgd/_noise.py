"""Gaussian noise whose tails reach beyond 9 sigma, from a cryptographic counter-based generator.

``jax.random.normal`` maps one float32 uniform (23 random bits) through the inverse error function,
so in float32 it can only return values in about [-5.42, 5.22]. For DP-SGD that truncation matters:
with a record present, outputs beyond the truncation point on one side become reachable that are
unreachable without it, which adds roughly ``T * q * P(Z > 5.2 - 1/sigma)`` to delta over T steps.

Here every coordinate uses 64 random bits:

* **Generator.** Threefry-2x32 with the standard 20 rounds (Salmon, Moraes, Dror, Shaw 2011,
  "Parallel random numbers: as easy as 1, 2, 3"), the generator behind ``jax.random``, written out
  (unrolled) in ``jax.numpy`` so that XLA fuses it with the transform and the addition into one
  loop per parameter array. Its output is bit-identical to ``jax.random``'s Threefry primitive.
  Coordinate ``j`` of a draw is the block at counter ``j`` under a 64-bit key derived from the
  caller's key (one Threefry block at a counter ``jax.random`` itself never uses); both output
  words are used. Without the key the noise is unpredictable; no
  non-cryptographic generator (xorshift and the like) is involved.
* **Transform.** One bit is the sign; the other 63 bits give ``p = (K + 1/2) 2^-64`` in (0, 1/2),
  and ``1/2 - p`` is formed from the complemented bits, so both are exact to float32 rounding
  however close they are to 0. The magnitude is the normal quantile of ``p`` by Wichura's algorithm
  AS 241 (PPND7; Wichura 1988, "The percentage points of the normal distribution", Applied
  Statistics 37(3)), accurate to about 1e-7 relative. The smallest ``p`` is 2^-65 (``K = 0``), so
  the reachable extremes are +-9.155.
* **Cost.** One Threefry block (two 32-bit words) per value, a logarithm, a square root and one
  rational function, fused with the addition: about half the cost of ``jax.random.normal`` on
  CPU, near torch's ``normal_`` (see ``docs/engine.md`` for measurements).
"""

from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from dpgen_jax._typing import PyTree


_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)
_TWO_POW_32 = 2**32
_SCALE = np.float32(2.0**-32)

# AS 241 (PPND7) coefficients, lowest order first; the denominators' constant terms are 1.
_CENTRAL_NUM = (3.3871327179, 50.434271938, 159.29113202, 59.109374720)
_CENTRAL_DEN = (1.0, 17.895169469, 78.757757664, 67.187563600)
_TAIL_NUM = (1.4234372777, 2.7568153900, 1.3067284816, 0.17023821103)
_TAIL_DEN = (1.0, 0.73700164250, 0.12021132975)
_FAR_NUM = (6.6579051150, 3.0812263860, 0.42868294337, 0.017337203997)
_FAR_DEN = (1.0, 0.24197894225, 0.012258202635)

#: The largest magnitude the sampler can return, in units of the standard deviation (p = 2^-65).
MAX_ABS_VALUE = 9.155


def _rotl(x: jax.Array, r: int) -> jax.Array:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(key: Sequence[jax.Array], counter: Sequence[jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32-20 of counter words ``(x0, x1)`` under key words ``(k0, k1)`` (all uint32).

    Broadcasts like any elementwise operation and is written without loops, so XLA fuses it with
    whatever consumes its output.
    """
    k0, k1 = key
    x0, x1 = counter
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def _horner(x, coeffs):
    acc = coeffs[-1]
    for c in coeffs[-2::-1]:
        acc = acc * x + c
    return acc


def normal_from_words(hi: jax.Array, lo: jax.Array) -> jax.Array:
    """The standard normal value coded by the 64 bits ``(hi, lo)`` (uint32 arrays) as float32.

    The top bit of ``hi`` is the sign, the other 63 bits ``K`` give ``p = (K + 1/2) 2^-64`` and
    the value is ``-/+ Phi^{-1}(p)``. Uniform words give exactly N(0, 1) up to the float32
    rounding of ``p`` and the 1e-7 accuracy of the quantile approximation.
    """
    sign = hi & np.uint32(0x80000000)
    p = ((hi & np.uint32(0x7FFFFFFF)).astype(jnp.int32).astype(jnp.float32)
         + (lo.astype(jnp.float32) + np.float32(0.5)) * _SCALE) * _SCALE
    c = ((~hi & np.uint32(0x7FFFFFFF)).astype(jnp.int32).astype(jnp.float32)
         + ((~lo).astype(jnp.float32) + np.float32(0.5)) * _SCALE) * _SCALE  # 1/2 - p
    central = c <= np.float32(0.425)
    r = jnp.sqrt(-jnp.log(p))
    far = r > np.float32(5.0)
    s = r - jnp.where(far, np.float32(5.0), np.float32(1.6))

    def tail(a, b):
        return [jnp.where(far, np.float32(y), np.float32(x)) for x, y in zip(a, b)]

    c2 = np.float32(0.180625) - c * c
    num = jnp.where(central, c * _horner(c2, [np.float32(v) for v in _CENTRAL_NUM]),
                    _horner(s, tail(_TAIL_NUM, _FAR_NUM)))
    den = jnp.where(central, _horner(c2, [np.float32(v) for v in _CENTRAL_DEN]),
                    _horner(s, tail(_TAIL_DEN, _FAR_DEN)))
    magnitude = num / den
    bits = lax.bitcast_convert_type(magnitude, jnp.uint32) ^ sign
    return lax.bitcast_convert_type(bits, jnp.float32)


# Counter of the block that derives the noise key from a Threefry key: its high word ("nois") is
# never used by jax.random's own split / fold_in / bits on arrays of fewer than 2^32 elements.
_DERIVE_COUNTER = (np.uint32(0x6E6F6973), np.uint32(0x65000000))


def _key_words(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A 64-bit Threefry key for the noise stream, derived from any ``jax.random`` key."""
    data = jax.random.key_data(key)
    if data.shape == (2,) and data.dtype == jnp.uint32 and "threefry" in str(jax.random.key_impl(key)):
        return threefry2x32((data[0], data[1]), _DERIVE_COUNTER)
    words = jax.random.bits(key, (2,), jnp.uint32)
    return words[0], words[1]


def _block_counters(offset: int, size: int) -> tuple[jax.Array, jax.Array]:
    """Counter words (hi, lo) of coordinates ``offset ... offset + size - 1`` (64-bit index)."""
    lo_start = np.uint32(offset % _TWO_POW_32)
    lo = lax.iota(jnp.uint32, size) + lo_start
    hi = np.uint32(offset // _TWO_POW_32) + (lo < lo_start).astype(jnp.uint32)  # carry
    return hi, lo


def gaussian_noise(key: jax.Array, shape: Sequence[int], *, offset: int = 0) -> jax.Array:
    """Standard normal float32 noise of ``shape`` whose tails reach +-9.155 (see module docstring).

    Args:
        key: a ``jax.random`` key (secret when the noise protects privacy).
        shape: output shape.
        offset: index of the first coordinate in the key's stream (static); two calls with the
            same key and disjoint index ranges give independent noise.

    Returns:
        float32 array of ``shape``.
    """
    shape = tuple(shape)
    if any(isinstance(d, bool) or int(d) != d or d < 0 for d in shape):
        raise ValueError(f"shape={shape!r} is not a tuple of integers >= 0.")
    size = int(np.prod(shape, dtype=np.int64))
    if isinstance(offset, bool) or int(offset) != offset or offset < 0 or offset + size > 2**64:
        raise ValueError(f"offset={offset!r} is not an integer in [0, 2^64 - size] (size={size}).")
    hi, lo = threefry2x32(_key_words(key), _block_counters(int(offset), size))
    return normal_from_words(hi, lo).reshape(tuple(shape))


def add_gaussian_noise(tree: PyTree, key: jax.Array, std: float) -> PyTree:
    """Adds independent N(0, std^2) noise to every coordinate of every array in ``tree``.

    One draw per call: coordinate j of the flattened tree is block j of one keyed Threefry stream,
    so arrays never share noise. Each array's noise is generated in the same fused loop that adds
    it (no intermediate noise buffer). Computed in float32 and cast to each array's dtype.

    Args:
        tree: a pytree of arrays.
        key: a ``jax.random`` key (secret: whoever knows it can subtract the noise).
        std: standard deviation: a Python number (0 returns ``tree`` unchanged) or a traced
            float32 scalar (e.g. one value per group under ``vmap``).
    """
    traced = isinstance(std, jax.Array)
    if not traced and std == 0.0:
        return tree
    scale = jnp.asarray(std, jnp.float32) if traced else np.float32(std)
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    # Outside a trace every operation would run (and be compiled) on its own, once per array
    # size: a host caller measuring tables of many sizes (the marginal methods) compiled them
    # anew for every table. There the stream is drawn by one compiled program per power-of-two
    # block of counters (:func:`_host_block`), cut and added on the host: coordinate j's value
    # depends only on (key, j), so the noise is the stream's (as a traced draw's, up to the float32
    # rounding of compiled arithmetic) whatever the block, and the same to the bit when repeated.
    if not any(isinstance(x, jax.core.Tracer) for x in leaves + [scale, key]):
        out, offset = [], 0
        for x in leaves:
            z = np.asarray(_host_block(key, np.uint32(offset % _TWO_POW_32), np.uint32(offset // _TWO_POW_32),
                                       block=_eager_block(x.size)))[:x.size].reshape(np.shape(x))
            out.append(jnp.asarray((np.asarray(x, np.float32) + scale * z).astype(x.dtype)))
            offset += x.size
        return jax.tree_util.tree_unflatten(treedef, out)
    words = _key_words(key)
    out, offset = [], 0
    for x in leaves:
        hi, lo = threefry2x32(words, _block_counters(offset, x.size))
        z = normal_from_words(hi, lo).reshape(x.shape)
        out.append((x + scale * z).astype(x.dtype))
        offset += x.size
    return jax.tree_util.tree_unflatten(treedef, out)


@functools.partial(jax.jit, static_argnames="block")
def _host_block(key: jax.Array, lo_start: jax.Array, hi_start: jax.Array, *, block: int) -> jax.Array:
    """The stream's ``block`` values from the coordinate ``hi_start * 2^32 + lo_start`` (the
    counters of :func:`_block_counters`, the start traced so one program serves every offset)."""
    lo = lax.iota(jnp.uint32, block) + lo_start
    hi = hi_start + (lo < lo_start).astype(jnp.uint32)  # carry
    return normal_from_words(*threefry2x32(_key_words(key), (hi, lo)))


def _eager_block(size: int) -> int:
    """The counters drawn outside a trace for an array of ``size`` coordinates: the next power of
    two, at least 1,024 (a few cached programs serve every size)."""
    return 1 << max(10, (int(size) - 1).bit_length())


__all__ = ["MAX_ABS_VALUE", "add_gaussian_noise", "gaussian_noise", "normal_from_words", "threefry2x32"]
