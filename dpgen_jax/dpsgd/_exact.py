"""The one home of every released noisy statistic: integer counts and snapped sums.

A noisy histogram released as ``float32(count + noise)`` leaks through rounding (Mironov 2012, "On
significance of the least significant bits for differential privacy"): for a true count of 1 every
small output is ``1 + y`` rounded to float32, a multiple of 2^-24, while for a count of 0 it is
``y`` itself, whose bits are finer, so the low bits tell the two apart. Here nothing released ever
meets the private value in floating point:

* **Integer counts** (:func:`noisy_counts`): the released count is ``count + N``, both integers,
  with ``N = round(std * Z)`` drawn on its own (:func:`integer_gaussian`) before it meets the count.
  Since ``round(c + y) = c + round(y)`` for an integer ``c``, the output is the post-processing
  (rounding) of the accounted Gaussian mechanism ``c + std * Z``, and an exact integer shift of a
  data-independent integer variable: neighbouring counts give shifted copies of one law.
* **Snapped sums** (:func:`snapped_gaussian`): a real-valued statistic given exactly, as integers
  times ``2^-frac_bits``, plus ``W = float64(std * Z)`` and rounded to the public grid ``2^grid_exp``
  in exact integer arithmetic: again the rounding of the value plus a data-independent variable.

``Z`` (:func:`host_normal`) is the standard normal quantile of a 63-bit uniform from the engine's
Threefry stream (``dpsgd.gaussian_noise``'s generator, under a key derived for this use), computed
in float64 by ``scipy.special.ndtri``; one bit is the sign. Its law differs from N(0, 1) only by the
discreteness of the 63-bit uniform (atoms of 2^-64) and the float64 quantile; the tails end at
+-9.16 (``p = 2^-65``), as the engine's noise does. docs/privacy.md states the assumption and the
bound of what it leaves.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from scipy import special

from dpgen_jax import _validate as _v
from dpgen_jax.dpsgd._noise import _key_words, threefry2x32

_TWO_POW_32 = 2**32
_BLOCK = 1 << 20          # counters drawn per compiled call (larger draws take several calls)
_STREAM = 0x696E74        # "int": folded into the caller's key, so this stream is never the float one
#: The largest |Z| the sampler returns (p = 2^-65), as in the engine's float32 noise.
MAX_ABS_VALUE = 9.16
#: The largest noise standard deviation for which ``round(std * Z)`` reaches every integer of its
#: range (float64 spacing of ``std * Z`` below 1/64 everywhere).
MAX_STD = 2.0**40


@functools.partial(jax.jit, static_argnames="block")
def _words(key: jax.Array, lo_start: jax.Array, hi_start: jax.Array, *, block: int):
    lo = lax.iota(jnp.uint32, block) + lo_start
    hi = hi_start + (lo < lo_start).astype(jnp.uint32)  # carry
    return threefry2x32(_key_words(jax.random.fold_in(key, _STREAM)), (hi, lo))


def _block(size: int) -> int:
    return min(_BLOCK, 1 << max(10, (int(size) - 1).bit_length()))


def host_normal(key: jax.Array, shape: Sequence[int] | int, *, offset: int = 0) -> np.ndarray:
    """Standard normal float64 draws of ``shape`` (host array), one 64-bit Threefry block each.

    Coordinate ``j`` is the block at counter ``offset + j``: its top bit is the sign and its other
    63 bits ``K`` give ``p = (K + 1/2) 2^-64``; the value is ``-/+ ndtri(p)``. Two calls with the
    same key and disjoint counter ranges are independent; the value of a coordinate depends only on
    ``(key, offset + j)``, not on how the draw is cut.
    """
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    size = math.prod(shape)
    start = _v.whole(maximum=2**64 - size, offset=offset)
    hi_parts, lo_parts, done = [], [], 0
    while done < size:
        block = _block(size - done)
        pos = start + done
        hi, lo = _words(key, np.uint32(pos % _TWO_POW_32), np.uint32(pos // _TWO_POW_32), block=block)
        take = min(block, size - done)
        hi_parts.append(np.asarray(hi)[:take])
        lo_parts.append(np.asarray(lo)[:take])
        done += take
    hi = np.concatenate(hi_parts).astype(np.uint64) if hi_parts else np.zeros(0, np.uint64)
    lo = np.concatenate(lo_parts).astype(np.uint64) if lo_parts else np.zeros(0, np.uint64)
    k = ((hi & np.uint64(0x7FFFFFFF)) << np.uint64(32)) | lo
    p = (k.astype(np.float64) + 0.5) * 2.0**-64          # in (0, 1/2], relative error 2^-53
    magnitude = -special.ndtri(p)
    z = np.where((hi >> np.uint64(31)) == 1, -magnitude, magnitude)
    return (z + 0.0).reshape(shape)  # + 0.0: no negative zero


def _std(std) -> float:
    s = _v.non_negative(std=std)
    if s > MAX_STD:
        raise ValueError(f"std={std!r} is above 2^40, where round(std * Z) no longer reaches every "
                         "integer in float64: pass a std of at most 2^40.")
    return s


def integer_gaussian(key: jax.Array, shape: Sequence[int] | int, std: float, *, offset: int = 0) -> np.ndarray:
    """``round(std * Z)`` per coordinate (int64): the rounded Gaussian, drawn before it meets any
    private value (:func:`host_normal`; ``std`` 0 gives zeros)."""
    s = _std(std)
    return np.rint(s * host_normal(key, shape, offset=offset)).astype(np.int64)


def _integer_table(name: str, table) -> np.ndarray:
    a = np.asarray(table)
    if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a))):
        raise TypeError(f"The counts of table {name!r} are not integers (dtype {a.dtype}): pass integer counts.")
    return a.astype(np.int64)


def noisy_counts(tables: Mapping[str, np.ndarray], std: float | None, key: jax.Array) -> dict[str, np.ndarray]:
    """The one release of noisy counts: every table plus independent integer Gaussian noise.

    Args:
        tables: name -> integer counts (any shape; a count is a number of records, so integer).
        std: the noise standard deviation, the accounted Gaussian's sigma times its L2
            sensitivity (``privacy.GaussianPhase.noise_std``); None releases the exact counts
            (a non-private run).
        key: the noise key (secret). The tables draw disjoint ranges of one stream, in the
            mapping's sorted name order.

    Returns:
        ``{name: int64 array}`` of the same shapes: ``count + round(std * Z)``.

    Privacy: exactly the accounted Gaussian mechanism on the counts, followed by rounding
    (post-processing): see the module docstring.
    """
    out = {name: _integer_table(name, tables[name]) for name in sorted(tables)}
    if std is None:
        return out
    s, offset = _std(std), 0
    for name, counts in out.items():
        out[name] = counts + integer_gaussian(key, counts.shape, s, offset=offset)
        offset += counts.size
    return out


def _integer_numerators(numerators) -> tuple[np.ndarray, np.ndarray | None]:
    """``(n64, exact)``: the numerators as int64 where they lie in (-2^62, 2^62) (0 elsewhere), and
    an object array of Python ints when some do not (None otherwise)."""
    a = np.asarray(numerators)
    if a.dtype.kind == "b":
        a = a.astype(np.int64)
    if a.dtype.kind == "i":
        return a.astype(np.int64), None
    if a.dtype.kind == "u" and not np.any(a >= np.uint64(2**62)):
        return a.astype(np.int64), None
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.all(a == np.floor(a)):
            raise TypeError("numerators holds non-integral or non-finite floats: pass integers (the "
                            "statistic times 2^frac_bits).")
    elif a.dtype.kind not in "uO":
        raise TypeError(f"numerators has dtype {a.dtype}: pass integers (the statistic times 2^frac_bits).")
    flat = a.reshape(-1).tolist()
    for v in flat:
        if isinstance(v, bool) or not (isinstance(v, numbers.Integral) or
                                       (isinstance(v, float) and v.is_integer())):
            raise TypeError(f"numerators holds a {type(v).__name__} that is not an integer: pass Python "
                            "or numpy ints.")
    exact = np.empty(len(flat), dtype=object)
    exact[:] = [int(v) for v in flat]
    small = np.fromiter(((-(2**62) < v < 2**62) for v in exact), bool, len(flat))
    n64 = np.fromiter((v if ok else 0 for v, ok in zip(exact, small)), np.int64, len(flat))
    return n64.reshape(a.shape), exact.reshape(a.shape)


def _snap_one(n: int, f: int, g: int, w: float) -> float:
    """The exact scalar path: ``round((n 2^-f + w) / 2^g) 2^g`` (ties up) in Python integers."""
    a, b = float(w).as_integer_ratio()               # W = a / b, b a power of two
    num = int(n) * b + a * (1 << f)                  # (v + W) * 2^f * b
    den = (1 << f) * b
    if g >= 0:
        den <<= g
    else:
        num <<= -g
    q = (2 * num + den) // (2 * den)                 # round half up of (v + W) / 2^g
    if abs(q) >= 2**53:
        raise ValueError(f"A snapped value needs more than 53 bits on the grid 2^{g}; "
                         "expected a coarser grid_exp.")
    return math.ldexp(float(q), g)


def _snap(numerators, f: int, g: int, w: np.ndarray) -> np.ndarray:
    """``round((v + w) / 2^g) 2^g`` elementwise, ``v = numerators 2^-f``, ties up, exactly.

    Vectorised with error-free float64 steps: ``v / 2^g = a + F`` with ``a = n >> (f + g)`` and
    ``F`` the remainder times ``2^-(f+g)`` (exact while ``f + g <= 53``); ``w / 2^g = t`` (a power
    of two: exact unless it under- or overflows) ``= floor(t) + t_f``; then ``F + t_f`` in [0, 2)
    by TwoSum (``s + err`` exactly) and ``floor(F + t_f + 1/2)`` decided by comparing ``s`` with
    1/2 and 3/2 (``s`` is the rounded exact sum, so ``s > c`` or ``s == c and err >= 0`` is
    ``F + t_f >= c`` exactly). Elements outside these ranges (huge numerators, ``f + g > 53``,
    ``t`` subnormal or beyond 2^61) take :func:`_snap_one`.
    """
    n64, exact = _integer_numerators(numerators)
    w = np.asarray(w, np.float64)
    if w.shape != n64.shape:
        raise ValueError(f"The noise has shape {w.shape}, the numerators {n64.shape}: pass one noise value "
                         "per numerator.")
    n64, wf = n64.reshape(-1), w.reshape(-1)
    fast = np.ones(n64.size, bool)
    if exact is not None:
        fast &= np.fromiter(((-(2**62) < v < 2**62) for v in exact.reshape(-1)), bool, n64.size)
    e = f + g
    if e <= 0:
        lim = 2 ** max(0, 61 + e)                   # n << -e stays below 2^61
        fast &= (n64 > -lim) & (n64 < lim) if -e <= 61 else n64 == 0
        a = np.where(fast, n64, 0) << np.int64(min(-e, 62))
        frac = np.zeros(n64.size)
    elif e <= 53:
        a = n64 >> np.int64(e)                       # floor, also for negative n
        frac = np.ldexp((n64 & np.int64((1 << e) - 1)).astype(np.float64), -e)
    else:
        fast[:] = False
        a, frac = np.zeros(n64.size, np.int64), np.zeros(n64.size)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        t = np.ldexp(wf, -g)
        fast &= np.isfinite(t) & (np.ldexp(t, g) == wf) & (np.abs(t) < 2.0**61)
        t = np.where(fast, t, 0.0)
    ti = np.floor(t)
    tf = t - ti                                      # exact: both are multiples of ulp(t) <= 1
    s = frac + tf
    bb = s - frac
    err = (frac - (s - bb)) + (tf - bb)              # TwoSum: frac + tf == s + err exactly
    up = ((s > 0.5) | ((s == 0.5) & (err >= 0))).astype(np.int64) + \
        ((s > 1.5) | ((s == 1.5) & (err >= 0))).astype(np.int64)
    fast &= (a > -(2**61)) & (a < 2**61)
    q = np.where(fast, a, 0) + ti.astype(np.int64) + up
    if np.any(fast & (np.abs(q) >= 2**53)):
        raise ValueError(f"A snapped value needs more than 53 bits on the grid 2^{g}; "
                         "expected a coarser grid_exp.")
    out = np.ldexp(q.astype(np.float64), g)
    slow = np.flatnonzero(~fast)
    if slow.size:
        src = exact.reshape(-1) if exact is not None else n64
        for i in slow.tolist():
            out[i] = _snap_one(int(src[i]), f, g, float(wf[i]))
    return out.reshape(w.shape)


def snapped_gaussian(numerators, frac_bits: int, std: float, grid_exp: int, key: jax.Array, *,
                     offset: int = 0) -> np.ndarray:
    """A real-valued statistic released on a public grid: ``round((v + W) / 2^grid_exp) 2^grid_exp``.

    Args:
        numerators: the exact statistic as integers (array-like of Python or numpy ints),
            ``v = numerators * 2^-frac_bits``.
        frac_bits: the statistic's fixed-point fraction bits (public).
        std: the accounted Gaussian's noise standard deviation.
        grid_exp: the public grid ``2^grid_exp`` (an integer, may be negative).
        key: the noise key (secret); ``offset`` as in :func:`host_normal`.

    Returns:
        float64 array of multiples of ``2^grid_exp``, the same shape as ``numerators``. Ties round
        up. Exact: ``W = float64(std * Z)`` is a binary rational, so ``v + W`` and its rounding are
        decided exactly (error-free float64 steps, vectorised, with Python-integer arithmetic for
        the elements outside their range; :func:`_snap`); nothing the statistic touches is rounded
        in floating point.

    Raises:
        TypeError: non-integer numerators. ValueError: a snapped value beyond 2^53 grid units.
    """
    f = _v.whole(frac_bits=frac_bits)
    g = _v.integral(grid_exp=grid_exp)
    shape = np.shape(numerators)
    w = _std(std) * host_normal(key, shape, offset=offset)
    return _snap(numerators, f, g, w)


__all__ = ["MAX_ABS_VALUE", "MAX_STD", "host_normal", "integer_gaussian", "noisy_counts", "snapped_gaussian"]
