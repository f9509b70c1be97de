"""The exponential mechanism, sampled exactly.

Gumbel-max in float64 is not the exponential mechanism to the bit: numpy's ``Generator.gumbel`` is
``-log(-log(U))`` with ``U = 1 - k 2^-53``, so every draw lies in [-3.604, 36.737]. A candidate whose
scaled score trails the best by more than 40.34 then has probability exactly 0, while a neighbouring
quality vector (each score moved by at most the sensitivity, the scaled gap by at most epsilon) can
give it a positive one: the supports differ and no epsilon bounds the privacy loss.

:func:`exponential_mechanism_exact` draws index ``i`` with probability exactly proportional to
``exp(epsilon * q_i / (2 * sensitivity))``, the float64 inputs read as the exact rationals they are:

* **Rejection.** Propose a candidate uniformly among those with a finite score; accept it with
  probability ``exp(-gamma_i)``, ``gamma_i = epsilon (q_max - q_i) / (2 sensitivity) >= 0`` (an exact
  rational). The first accepted proposal has the law ``exp(-gamma_i) / sum_j exp(-gamma_j)``.
* **Bernoulli(exp(-gamma)).** Canonne, Kamath and Steinke 2020 ("The Discrete Gaussian for
  Differential Privacy", Algorithm 1): ``floor(gamma)`` draws of Bernoulli(exp(-1)), stopping at the
  first failure, then one Bernoulli(exp(-f)), ``f = gamma - floor(gamma)``; for ``f`` in [0, 1) the
  loop ``K = 1; while Bernoulli(f / K): K += 1`` returns ``K`` odd. Each Bernoulli(f / K) is
  Bernoulli(1 / K) and Bernoulli(f), independent: ``rng.integers(K) == 0``, and ``U < f`` for a
  uniform ``U`` whose first 52 bits are one integer draw ``u`` and whose later bits are drawn only
  when ``u`` alone cannot decide (then exactly, by :func:`randbelow` on the rational remainder).
* **Vectorised, exactly.** A batch of proposals runs through these stages as numpy arrays. Each
  comparison with ``gamma_i`` (``s + 1 > gamma_i``, ``U < f_i``) is decided from a certified float64
  enclosure ``lo_i <= gamma_i <= hi_i`` when the enclosure settles it, and from the exact
  ``fractions.Fraction`` otherwise; floats never decide a comparison they cannot prove. Proposals
  after the first accepted one are discarded, which leaves the law of the output unchanged (the
  first success of an i.i.d. sequence). The batch size follows the scores only for speed.

All randomness is uniform integers from the numpy generator (``dpsgd.host_rng``). The law is exactly
the exponential mechanism's, so it is accounted as one: (epsilon, 0)-DP, and epsilon-bounded-range,
hence epsilon^2 / 8-zCDP (``privacy.ExponentialMechanismPhase``).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpgen_jax import _validate as _v

_WORD = 62                      # bits per integer draw of randbelow's multi-word path
_UBITS = 52                     # bits of U drawn at once (u < 2^52 compares exactly as float64)
_TWO_UBITS = float(2**_UBITS)
_MAX_BATCH = 1 << 16


# ----------------------------------------------------------------------------- exact scalar draws


def randbelow(rng: np.random.Generator, d: int) -> int:
    """A uniform integer in ``[0, d)`` for any Python int ``d >= 1``, from ``rng`` alone.

    Below 2^62 it is one ``rng.integers(0, d)`` (numpy's unbiased bounded draw); above, ``ceil(bits
    / 62)`` words of 62 uniform bits are joined, cut to ``d.bit_length()`` bits and rejected when the
    value is ``>= d`` (acceptance above 1/2 per try).
    """
    d = _v.whole(minimum=1, d=d)
    if d <= 1 << _WORD:
        return int(rng.integers(0, d))
    bits = d.bit_length()
    words = -(-bits // _WORD)
    extra = words * _WORD - bits
    while True:
        x = 0
        for w in rng.integers(0, 1 << _WORD, size=words).tolist():
            x = (x << _WORD) | w
        x >>= extra
        if x < d:
            return x


def bernoulli_rational(rng: np.random.Generator, numerator: int, denominator: int) -> bool:
    """Bernoulli(numerator / denominator), exactly: ``randbelow(denominator) < numerator``."""
    _v.whole(minimum=0, maximum=denominator, numerator=numerator)
    return randbelow(rng, denominator) < numerator


def _bernoulli_exp_unit(rng: np.random.Generator, g: Fraction) -> bool:
    """Bernoulli(exp(-g)) for g in [0, 1] (the first branch of CKS Algorithm 1)."""
    k = 1
    while bernoulli_rational(rng, g.numerator, g.denominator * k):
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma: Fraction | int | float, rng: np.random.Generator) -> bool:
    """One exact Bernoulli(exp(-gamma)) draw, ``gamma >= 0`` taken as an exact rational (a float
    as the rational it is), by Canonne, Kamath and Steinke 2020, Algorithm 1. The scalar reference
    of the vectorised stages of :func:`exponential_mechanism_exact`."""
    if isinstance(gamma, float):
        _v.non_negative(gamma=gamma)
    g = Fraction(gamma)
    if g < 0:
        raise ValueError(f"gamma={gamma!r} is negative: pass gamma >= 0 (the draw is Bernoulli(exp(-gamma))).")
    whole = g.numerator // g.denominator
    if g <= 1:
        return _bernoulli_exp_unit(rng, g)
    for _ in range(whole):
        if not _bernoulli_exp_unit(rng, Fraction(1)):
            return False
    return _bernoulli_exp_unit(rng, g - whole)


# ----------------------------------------------------------------------------- the scores


class _Gammas:
    """``gamma_i = epsilon (q_max - q_i) / (2 sensitivity)`` of the finite candidates: a certified
    float64 enclosure ``lo <= gamma <= hi`` for all of them, the exact Fraction on demand.

    The enclosure: ``g = fl(fl(epsilon / (2 sensitivity)) * fl(q_max - q_i))``. With the quotient a
    normal float and no overflow, each of the three roundings has relative error <= 2^-53, and an
    underflow in the last two adds at most 2^-1075 absolutely (a subnormal difference is exact), so
    ``|g - gamma| <= 3.01 * 2^-53 g + 2^-1074``. ``delta = 2^-49 g + 2^-1000`` exceeds that by a
    factor above 4, and ``lo``/``hi`` are ``g -/+ delta`` moved one more float outward, so their own
    rounding only widens them. Where any of that fails (an infinite or NaN ``g``, a quotient below
    the smallest normal float), ``lo = -inf`` and ``hi = inf``: every comparison goes exact.
    """

    def __init__(self, q: np.ndarray, epsilon: float, sensitivity: float):
        self.index = np.flatnonzero(q != -np.inf)
        qf = q[self.index]
        qmax = float(qf.max())
        with np.errstate(all="ignore"):
            c = epsilon / (2.0 * sensitivity)
            g = c * (qmax - qf)
            safe = np.isfinite(g) & (math.isfinite(c) and c >= np.finfo(np.float64).tiny)
            delta = g * 2.0**-49 + 2.0**-1000
            self.lo = np.where(safe, np.nextafter(g - delta, -np.inf), -np.inf)
            self.hi = np.where(safe, np.nextafter(g + delta, np.inf), np.inf)
            self.approx = np.where(safe, g, np.inf)
        self._q = qf
        self._c = Fraction(epsilon) / (2 * Fraction(sensitivity))
        self._qmax = Fraction(qmax)
        self._exact: dict[int, Fraction] = {}

    def exact(self, j: int) -> Fraction:
        """gamma of the ``j``-th finite candidate, as an exact rational."""
        j = int(j)
        g = self._exact.get(j)
        if g is None:
            g = self._exact[j] = self._c * (self._qmax - Fraction(float(self._q[j])))
        return g

    def batch_size(self) -> int:
        """Proposals per batch: about 1.5 m / sum exp(-gamma) (expected ~1.5 acceptances), from the
        float approximations; it only sets the speed, not the law."""
        with np.errstate(all="ignore"):
            z = float(np.nansum(np.exp(-self.approx)))
        m = self.index.size
        return int(min(max(math.ceil(1.5 * m / max(z, 1.0)), 8), _MAX_BATCH))


# ----------------------------------------------------------------------------- vectorised stages


def _bernoulli_exp1(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` independent exact Bernoulli(exp(-1)) draws: CKS Algorithm 1 with gamma = 1 (``K = 1;
    while Bernoulli(1 / K): K += 1``; the draw is ``K`` odd), each Bernoulli(1 / K) being
    ``rng.integers(0, K) == 0``, all ``n`` loops run side by side (the loops still running share
    one ``K``; Bernoulli(1 / 1) = 1 needs no draw)."""
    k = np.ones(n, np.int64)
    active = np.arange(n)
    step = 1
    while active.size:
        if step > 1:
            active = active[rng.integers(0, step, size=active.size) == 0]
        step += 1
        k[active] = step
    return k % 2 == 1


def _below_fraction(rng: np.random.Generator, gam: _Gammas, cand: np.ndarray, whole: np.ndarray,
                    flo: np.ndarray, fhi: np.ndarray) -> np.ndarray:
    """Bernoulli(f) for each ``f = gamma - whole`` of the candidates ``cand`` (``flo <= f <= fhi``):
    ``U < f`` for a fresh uniform ``U = (u + V) 2^-52``, ``u`` one integer draw, ``V`` uniform in
    [0, 1) drawn only when ``u`` cannot decide (then ``V < f 2^52 - u``, exactly)."""
    u = rng.integers(0, 1 << _UBITS, size=cand.size).astype(np.float64)   # exact below 2^53
    yes = u + 1.0 <= flo * _TWO_UBITS        # U < (u + 1) 2^-52 <= flo <= f
    no = u >= fhi * _TWO_UBITS               # U >= u 2^-52 >= fhi >= f
    for j in np.flatnonzero(~(yes | no)).tolist():
        r = (gam.exact(cand[j]) - int(whole[j])) * (1 << _UBITS) - int(u[j])
        yes[j] = r >= 1 or (r > 0 and bernoulli_rational(rng, r.numerator, r.denominator))
    return yes


def _accept(rng: np.random.Generator, gam: _Gammas, cand: np.ndarray) -> np.ndarray:
    """Independent exact Bernoulli(exp(-gamma_j)) for the finite candidates ``cand`` (positions in
    ``gam.index``), by CKS Algorithm 1 run on the whole array at once."""
    n = cand.size
    lo, hi = gam.lo[cand], gam.hi[cand]
    s = np.zeros(n, np.int64)          # Bernoulli(exp(-1)) successes so far
    alive = np.arange(n)               # still in the integer stage
    passed = np.zeros(n, bool)
    while alive.size:
        t = s[alive] + 1.0
        done = t > hi[alive]           # gamma < s + 1: floor(gamma) <= s, the stage is passed
        more = t <= lo[alive]          # gamma >= s + 1: floor(gamma) > s, one more success needed
        for j in np.flatnonzero(~(done | more)).tolist():
            g = gam.exact(cand[alive[j]])
            done[j] = s[alive[j]] >= g.numerator // g.denominator
            more[j] = not done[j]
        passed[alive[done]] = True
        alive = alive[more]
        ok = _bernoulli_exp1(rng, alive.size)
        alive = alive[ok]              # a failure rejects the proposal
        s[alive] += 1
    # every passed proposal has s = floor(gamma): the first s at which s >= floor(gamma)
    p = np.flatnonzero(passed)
    with np.errstate(all="ignore"):
        flo = np.nextafter(lo[p] - s[p], -np.inf)
        fhi = np.nextafter(hi[p] - s[p], np.inf)
    k = np.ones(p.size, np.int64)
    active = np.arange(p.size)
    step = 1                           # the K of every loop still running
    while active.size:
        if step > 1:                   # Bernoulli(1 / K); Bernoulli(1 / 1) = 1 needs no draw
            active = active[rng.integers(0, step, size=active.size) == 0]
        go = _below_fraction(rng, gam, cand[p[active]], s[p[active]], flo[active], fhi[active])
        active = active[go]
        step += 1
        k[active] = step
    accept = np.zeros(n, bool)
    accept[p] = k % 2 == 1
    return accept


# ----------------------------------------------------------------------------- the mechanism


def _quality(quality) -> np.ndarray:
    q = np.asarray(quality, dtype=np.float64)
    if q.ndim != 1:
        raise ValueError(f"quality has shape {q.shape}: pass a 1-D array of scores, one per candidate.")
    if np.isnan(q).any() or (q == np.inf).any():
        raise ValueError("quality holds NaN or +inf: pass finite scores, or -inf for an excluded "
                         "candidate.")
    if not (q != -np.inf).any():
        raise ValueError(f"quality has no finite score among its {q.size} candidates: leave at least "
                         "one candidate not excluded (-inf excludes one).")
    return q


def exponential_mechanism_exact(quality, epsilon: float, sensitivity: float,
                                rng: np.random.Generator) -> int:
    """The index of one candidate, drawn with probability exactly proportional to
    ``exp(epsilon * quality[i] / (2 * sensitivity))``, every float64 input read as the exact
    rational it is; candidates with quality ``-inf`` have probability 0.

    Rejection sampling: uniform proposals among the finite candidates, each accepted with an exact
    Bernoulli(exp(-gamma_i)), ``gamma_i = epsilon (max q - q_i) / (2 sensitivity)`` (see the module
    docstring). ``rng`` is a numpy generator (``dpsgd.host_rng``); all its use is uniform integers.

    Args:
        quality: 1-D scores; finite, or ``-inf`` to exclude a candidate (at least one finite).
        epsilon: The selection's epsilon; finite and > 0.
        sensitivity: The most any one score moves when one record is added or removed; finite, > 0.
        rng: The numpy generator the draws come from.

    Returns:
        The chosen index into ``quality``.

    Privacy:
        (epsilon, 0)-DP and epsilon-bounded-range, hence epsilon^2 / 8-zCDP
        (``privacy.ExponentialMechanismPhase(epsilon)``), under the stated sensitivity.
    """
    epsilon = _v.positive(epsilon=epsilon)
    sensitivity = _v.positive(sensitivity=sensitivity)
    gam = _Gammas(_quality(quality), epsilon, sensitivity)
    m = gam.index.size
    if m == 1:
        return int(gam.index[0])
    batch = gam.batch_size()
    while True:
        cand = rng.integers(0, m, size=batch)
        hit = np.flatnonzero(_accept(rng, gam, cand))
        if hit.size:
            return int(gam.index[cand[hit[0]]])


__all__ = ["bernoulli_exp", "bernoulli_rational", "exponential_mechanism_exact", "randbelow"]
