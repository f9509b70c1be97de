"""The proven (selection-conditioned) bound of sharded sanitiser phases, as an event and accountants.

A sharded phase (GS-WGAN, DP-SACTGAN with K > 1) runs T generator steps; each step draws one of K
disjoint shards uniformly and independently, and releases the sanitised gradients of B generated
rows, read through that shard's critic. The critics keep their state between steps, so a step's
shard draw is *not* fresh subsampling: once a record's critic has seen the record, every later use
of that critic can carry it. The bound computed here needs no such assumption. Reveal to the
adversary every step's shard choice and the differing record's shard (both drawn from
data-independent randomness, so revealing them can only help the adversary). Conditioned on them:

* a step on another shard reads a critic whose state is a function of that shard's rows and of
  earlier released outputs only, so its output has the same distribution under both neighbours;
* each of the c steps on the record's shard is dominated by one Gaussian mechanism of noise
  multiplier ``sigma / sqrt(B)``, whatever the critic's state (all B rows may move, each by the
  per-row sensitivity; no amplification within the shard is claimed).

The c uses compose (adaptively) to one Gaussian of ``mu_c^2 = c * B / sigma^2``, plus the
``mu^2`` of the run's other Gaussian releases; c ~ Binomial(T, 1/K). Since c is revealed, the
hockey-stick divergence of the run is the average over c:

    delta(eps) = sum_c Binomial(c; T, 1/K) * delta_Gauss(eps; mu_c),
    delta_Gauss(eps; mu) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),

and, at each Renyi order a, exp((a-1) D_a) = sum_c Binomial(c; T, 1/K) exp(a (a-1) mu_c^2 / 2).
Both sums run over every c in 0..T (no truncation), so the numbers are exact up to floating point
(a binomial probability that underflows is bounded by the smallest double and added to delta).

The bound holds when no state is shared across shards (no shared temporary generator, no batch
statistics across shards) and the critics are never released.

:class:`ShardedMixtureDpEvent` is the event a proven sharded phase returns. Two accountants
interpret it: :class:`MixtureAnalyticAccountant` here (the headline: exact delta(eps) with the
other phases' Gaussian releases folded in) and :class:`~dpgen_jax.privacy._rdp.MixtureRdpAccountant`
(dp_accounting's RDP accountant that also knows the mixture through :func:`mixture_rdp`, so it
composes with any other event; every method's RDP accountant).

References:
    docs/privacy.md ("GS-WGAN and DP-SACTGAN: three numbers"); Balle and Wang (2018), "Improving
    the Gaussian Mechanism for Differential Privacy" (the Gaussian's exact delta(eps)).
"""

from __future__ import annotations

import functools
import math

import attr
import dp_accounting as dpa
import numpy as np
from dp_accounting import privacy_accountant as _pa
from scipy import special, stats

NeighboringRelation = dpa.NeighboringRelation


@attr.s(frozen=True, slots=True, auto_attribs=True)
class ShardedMixtureDpEvent(dpa.DpEvent):
    """T steps, each on one of ``1 / sample_rate`` shards; c ~ Binomial(T, sample_rate) of them read
    the differing record's shard, each such step a Gaussian of ``noise_multiplier``; c is revealed.

    Attributes:
        steps: T, the steps executed.
        sample_rate: 1/K, the probability that a step reads the record's shard.
        noise_multiplier: The effective noise multiplier of one step, sigma / sqrt(B).
    """

    steps: int
    sample_rate: float
    noise_multiplier: float


@functools.lru_cache(maxsize=32)
def _binomial(steps: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """Every count c in 0..steps and log Binomial(c; steps, rate) (cached: calibration asks for
    the same schedule many times; the arrays are read-only)."""
    c = np.arange(steps + 1, dtype=np.float64)
    if rate >= 1.0:
        logp = np.full(steps + 1, -np.inf)
        logp[-1] = 0.0
    else:
        logp = stats.binom.logpmf(c, steps, rate)
    c.setflags(write=False)
    logp.setflags(write=False)
    return c, logp


@functools.lru_cache(maxsize=32)
def _binomial_mass(steps: int, rate: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The counts whose probability is a positive double, those probabilities, and an upper bound
    on the total probability of the others (each below the smallest positive double)."""
    c, logp = _binomial(steps, rate)
    p = np.exp(logp)
    keep = p > 0.0
    dropped = np.count_nonzero(~keep & np.isfinite(logp)) * np.finfo(np.float64).tiny
    return c[keep], p[keep], float(dropped)


def gaussian_delta(eps: float, mu: np.ndarray) -> np.ndarray:
    """Exact delta(eps) of the Gaussian mechanism with privacy parameter mu = sensitivity / std.

    ``Phi(-eps/mu + mu/2) - exp(eps) Phi(-eps/mu - mu/2)``, computed in logs so that tiny values keep
    their relative precision; 0 where mu == 0.
    """
    mu = np.asarray(mu, dtype=np.float64)
    out = np.zeros_like(mu)
    pos = mu > 0
    m = mu[pos]
    la = special.log_ndtr(-eps / m + m / 2.0)
    lb = eps + special.log_ndtr(-eps / m - m / 2.0)
    with np.errstate(over="ignore", invalid="ignore"):
        out[pos] = np.where(lb < la, np.exp(la) * -np.expm1(np.minimum(lb - la, 0.0)), 0.0)
    return np.clip(out, 0.0, 1.0)


def mixture_delta(eps: float, event: ShardedMixtureDpEvent, other_mu_sq: float = 0.0) -> float:
    """delta(eps) of the mixture composed with Gaussian releases of total ``mu^2 = other_mu_sq``."""
    c, p, dropped = _binomial_mass(event.steps, float(event.sample_rate))
    mu = np.sqrt(c / event.noise_multiplier ** 2 + other_mu_sq)
    return float(min(1.0, np.sum(p * gaussian_delta(float(eps), mu)) + dropped))


def mixture_epsilon(delta: float, event: ShardedMixtureDpEvent, other_mu_sq: float = 0.0) -> float:
    """The smallest eps (to relative 1e-10, rounded up) with ``mixture_delta(eps) <= delta``."""
    if mixture_delta(0.0, event, other_mu_sq) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while mixture_delta(hi, event, other_mu_sq) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e12:
            return math.inf
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        if mixture_delta(mid, event, other_mu_sq) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def mixture_rdp(orders, event: ShardedMixtureDpEvent) -> np.ndarray:
    """The mixture's Renyi divergence at each order: log(sum_c p_c exp(a(a-1) c / (2 s^2))) / (a-1)."""
    c, logp = _binomial(event.steps, float(event.sample_rate))
    mu1_sq = 1.0 / event.noise_multiplier ** 2
    out = []
    for a in np.asarray(orders, dtype=np.float64):
        out.append(special.logsumexp(logp + a * (a - 1.0) * c * mu1_sq / 2.0) / (a - 1.0))
    return np.asarray(out)


def _flatten(event: dpa.DpEvent, count: int, sink: list) -> str | None:
    """Appends (event, count) leaves; returns an error message for a structure we cannot hold."""
    if isinstance(event, dpa.NoOpDpEvent):
        return None
    if isinstance(event, dpa.SelfComposedDpEvent):
        return _flatten(event.event, event.count * count, sink)
    if isinstance(event, dpa.ComposedDpEvent):
        for e in event.events:
            err = _flatten(e, count, sink)
            if err is not None:
                return err
        return None
    sink.append((event, count))
    return None


class MixtureAnalyticAccountant(_pa.PrivacyAccountant):
    """Exact delta(eps) of a run with one proven sharded phase and Gaussian releases.

    Supports ``ComposedDpEvent``/``SelfComposedDpEvent`` trees of ``GaussianDpEvent``,
    ``NoOpDpEvent`` and at most one :class:`ShardedMixtureDpEvent` (once). The Gaussians' ``mu^2``
    add up (Gaussian composition is exact) and enter every ``mu_c``; the result has no
    discretisation error. Other events (e.g. subsampled DP-SGD) are not supported: account such a
    run with ``accountant="rdp"``, which composes any event with the mixture.
    """

    HEADLINE_LABEL = "proven, selection-conditioned bound, exact"
    """How the report's console line labels a headline this accountant computed."""

    REPORT_SENTENCE = (
        "Epsilon is the exact selection-conditioned bound: delta(eps) = sum over c of "
        "Binomial(c; steps, 1 / num_shards) * delta_Gauss(eps; mu_c), with mu_c^2 = c * "
        "rows_per_step / noise_multiplier^2 plus the mu^2 of the other Gaussian phases, summed "
        "over every c (no truncation, no discretisation), inverted by bisection rounding up.")
    """The report's sentence on how the headline was computed."""

    UNSUPPORTED_HINT = (
        "The proven bound of a sharded phase composes exactly only with Gaussian "
        "releases (histograms, DP-EM); use accountant='rdp' for other phases.")
    """Why a phase it cannot compose with is refused, and what to use."""

    def __init__(self, neighboring_relation: NeighboringRelation = NeighboringRelation.ADD_OR_REMOVE_ONE):
        super().__init__(neighboring_relation)
        self._mu_sq = 0.0
        self._mixture: ShardedMixtureDpEvent | None = None
        self.last_interval: float | None = None  # exact: no PLD discretisation

    def _maybe_compose(self, event: dpa.DpEvent, count: int, do_compose: bool):
        leaves: list = []
        err = _flatten(event, count, leaves)
        mixtures = sum(1 for e, _ in leaves if isinstance(e, ShardedMixtureDpEvent))
        for e, k in leaves:
            if isinstance(e, ShardedMixtureDpEvent):
                if k > 1 or mixtures > 1 or (self._mixture is not None and e.steps > 0):
                    err = err or "at most one sharded mixture event, composed once, per run"
            elif not isinstance(e, dpa.GaussianDpEvent):
                err = err or (f"{type(e).__name__} does not compose exactly with a sharded mixture; "
                              "use accountant='rdp'")
        if err is not None:
            return _pa.PrivacyAccountant.CompositionErrorDetails(invalid_event=event, error_message=err)
        if do_compose and count > 0:
            for e, k in leaves:
                if isinstance(e, ShardedMixtureDpEvent):
                    self._mixture = e
                else:
                    self._mu_sq += k / e.noise_multiplier ** 2
        return None

    def _event_or_none(self) -> ShardedMixtureDpEvent:
        if self._mixture is not None:
            return self._mixture
        return ShardedMixtureDpEvent(0, 1.0, 1.0)

    def get_delta(self, target_epsilon: float) -> float:
        return mixture_delta(target_epsilon, self._event_or_none(), self._mu_sq)

    def get_epsilon(self, target_delta: float) -> float:
        return mixture_epsilon(target_delta, self._event_or_none(), self._mu_sq)
