"""Empirical privacy audit of a DP-SGD phase with canaries, in one training run.

The audit inserts ``m`` canaries into a DP-SGD phase, each included independently with
probability 1/2 under a secret key, trains the phase with the project's engine (Poisson sampling,
per-example clipping, calibrated Gaussian noise: :func:`dpgen_jax.dpsgd.make_dp_step` of the
accounted phase, exactly the step the synthesizers use), scores every canary, and turns the
scores of the included ("in") and excluded ("out") canaries into a lower bound on epsilon at the
phase's delta with ``jax-privacy``'s :class:`~jax_privacy.auditing.CanaryScoreAuditor` (one-run
auditing of Steinke, Nasr and Jagielski 2023: ``epsilon_one_run``). See ``docs/audit.md``.

Canaries are *gradient canaries* (white-box): canary j is an extra record whose per-example loss
is ``s * C * <theta, u_j>``, linear in the flattened parameters, so that its gradient is the fixed
vector ``s * C * u_j`` (``u_j`` a random unit direction, ``C`` the clip norm, ``s`` the
``canary_scale``, default 1: the largest gradient clipping lets through). Canaries are rows of the
dataset like any other: the sampler draws them with the same rate q, the clipping and noise treat
them like real rows. The observer is the threat model of DP-SGD's analysis, *all iterates*: it
sees every privatised gradient the optimizer receives (an optax transformation chained before the
optimizer records ``<g_t, u_j>``; it changes nothing). A canary's score is the log-likelihood
ratio, summed over the steps, of "sampled with rate q" against "absent" under the claimed noise
(the Neyman-Pearson test of one subsampled Gaussian step), or the plain sum of the alignments
(``score="sum"``: alignment with the accumulated privatised gradient).

Many-run audits (``dpgen_jax._audit_mechanisms``, re-exported here) cover the mechanisms that are
cheap enough to run hundreds of thousands of times, where one-run auditing's ceiling (about 4.4
with 1,000 canaries, :func:`max_certifiable_epsilon`) is too low: one DP-SGD step
(:func:`audit_dpsgd_step`), the generator-side sanitiser (:func:`audit_sanitizer`), the Gaussian
histograms of the independent and DP-SACTGAN synthesizers (:func:`audit_histograms`) and DP-EM
(:func:`audit_dp_em`). Each runs the library's own mechanism under ``jax.vmap``, the canary in half
of the runs, and bounds epsilon with jax-privacy's Clopper-Pearson test at pre-registered
thresholds (:func:`epsilon_lower_bound_many_runs`).

Layers: this module may import ``dpsgd``, ``privacy``, ``data``, ``models`` and ``synthesizers``;
nothing of ours imports it except ``experiments.studies.audit`` and its tests. The deliberately broken
variants (``broken="noise_off"``, ``"half_noise"`` or ``"no_clip"``) exist only to show that the
audit detects a broken mechanism; no synthesizer can reach them.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy
from dpgen_jax._audit_mechanisms import (
    HISTOGRAM_MECHANISMS,
    MANY_RUN_BROKEN,
    THRESHOLD_STEPS,
    ManyRunBound,
    ManyRunResult,
    _auditing,
    _check_scores,
    _run_phase,
    audit_dp_em,
    audit_dpsgd_step,
    audit_histograms,
    audit_sanitizer,
    epsilon_lower_bound_many_runs,
    many_run_thresholds,
    max_certifiable_epsilon_many_runs,
)


BROKEN_VARIANTS = ("noise_off", "no_clip")
"""Deliberately broken mechanisms for demonstrating the audit (never used by a synthesizer)."""
SCORES = ("likelihood_ratio", "count", "sum")
_NO_CLIP_FACTOR = 1e6  # "no_clip": the clip norm is C * this (no real clipping), the noise std sigma * C


def include_canaries(key: jax.Array, num_canaries: int) -> np.ndarray:
    """Which canaries are inserted: independent Bernoulli(1/2) draws under a secret key.

    Args:
        key: a secret JAX key (:func:`dpgen_jax.dpsgd.make_key`); the inclusion bits are what the
            audit's adversary must guess.
        num_canaries: m >= 1.

    Returns:
        A (m,) bool array, True for an included ("in") canary.
    """
    m = _v.whole(minimum=1, num_canaries=num_canaries)
    return np.asarray(jax.random.bernoulli(key, 0.5, (m,)))


def canary_directions(key: jax.Array, num_canaries: int, dim: int) -> jax.Array:
    """m random unit vectors in R^dim (Gaussian, normalised), float32 of shape (m, dim)."""
    m, d = _v.whole(minimum=1, num_canaries=num_canaries), _v.whole(minimum=1, dim=dim)
    u = jax.random.normal(key, (m, d), jnp.float32)
    return u / jnp.linalg.norm(u, axis=1, keepdims=True)


GUESS_FRACTIONS = (0.45, 0.25, 0.125, 0.0625, 0.03125)
"""Default numbers of guesses as fractions of m: just under the expected m / 2 inserted canaries
(so that a perfect score can have all of them right), then halving."""


def guess_grid(num_canaries: int, min_guesses: int = 10) -> tuple[int, ...]:
    """The pre-registered numbers of guesses k tried by :func:`epsilon_lower_bound`.

    k = round(f * m) for f in :data:`GUESS_FRACTIONS`, kept when k >= ``min_guesses`` (at least
    one k). Fixed before any score is seen, so a union bound over them is sound; few of them,
    because each costs significance (and one-run auditing's delta term, 2 m delta, already
    takes its share).
    """
    m = _v.whole(minimum=1, num_canaries=num_canaries)
    grid = []
    for f in GUESS_FRACTIONS:
        k = max(1, round(f * m))
        if k >= min_guesses and k not in grid:
            grid.append(k)
    return tuple(grid) or (max(1, round(GUESS_FRACTIONS[0] * m)),)


class Bound(NamedTuple):
    """A one-run lower bound and the guess that attains it.

    Attributes:
        epsilon: the lower bound (0 when no claim is falsified).
        guesses: the number of canaries guessed "in" (score >= threshold) at the best rule.
        correct: how many of those guesses were in.
        threshold: the score threshold of the best rule.
        epsilon_all_thresholds: jax-privacy's own Bonferroni search over every threshold
            (``epsilon_one_run`` with its default strategy), reported beside.
    """

    epsilon: float
    guesses: int
    correct: int
    threshold: float
    epsilon_all_thresholds: float


def epsilon_lower_bound(in_scores: np.typing.ArrayLike, out_scores: np.typing.ArrayLike,
                        delta: float, *, significance: float = 0.05,
                        guesses: Sequence[int] | None = None) -> Bound:
    """A lower bound on epsilon at ``delta`` from canary scores, by one-run auditing.

    The adversary guesses "in" for the k canaries with the highest scores (a rule that sees the
    scores but not which canaries were inserted) and abstains on the others; for each
    pre-registered k, jax-privacy's ``CanaryScoreAuditor.epsilon_one_run`` with an explicit
    threshold (the k-th highest score) gives the largest epsilon that the number of correct
    guesses falsifies at level ``significance / len(guesses)`` (Steinke, Nasr, Jagielski 2023,
    Theorem 5.2, which accounts for delta with the total number of canaries). The union bound
    over the k makes the maximum valid at level ``significance``.

    Args:
        in_scores: scores of the inserted canaries (higher means "more likely in").
        out_scores: scores of the canaries that were not inserted.
        delta: the delta of the (epsilon, delta) claim under test, in (0, 1].
        significance: probability that the bound is wrong (one minus confidence), in (0, 1).
        guesses: the numbers k of guesses to try (default :func:`guess_grid` of m); each at
            most m.

    Returns:
        A :class:`Bound`.

    Raises:
        ValueError: if a score array is empty, not one-dimensional or not finite, or an argument
            is out of range.
    """
    in_s, out_s = _check_scores(in_scores, "in_scores"), _check_scores(out_scores, "out_scores")
    _v.probability(delta=delta)
    _v.fraction(significance=significance)
    m = in_s.size + out_s.size
    grid = guess_grid(m) if guesses is None else tuple(
        _v.whole(f"m={m} canaries", minimum=1, maximum=m, **{f"guesses[{i}]": k})
        for i, k in enumerate(guesses))
    if not grid:
        raise ValueError("guesses is empty: pass at least one number of guesses, or None for guess_grid(m).")
    auditing = _auditing()
    auditor = auditing.CanaryScoreAuditor(in_s, out_s)
    ranked = np.sort(np.concatenate([in_s, out_s]))[::-1]
    best = (0.0, 0, 0, math.inf)
    for k in grid:
        t = float(ranked[int(k) - 1])
        eps = float(auditor.epsilon_one_run(significance / len(grid), delta,
                                            threshold_strategy=auditing.Explicit(t)))
        n_guess, n_correct = int(np.sum(ranked >= t)), int(np.sum(in_s >= t))
        if eps > best[0] or best[1] == 0:
            best = (eps, n_guess, n_correct, t)
    all_thresholds = float(auditor.epsilon_one_run(significance, delta))
    return Bound(best[0], best[1], best[2], best[3], all_thresholds)


def max_certifiable_epsilon(guesses: int, num_canaries: int, delta: float, *,
                            significance: float = 0.05, rules: int = 1) -> float:
    """The largest bound one-run auditing can give with ``guesses`` guesses, all correct.

    Perfectly separated scores through :func:`epsilon_lower_bound`'s statistics (jax-privacy's
    one-run bound at level ``significance / rules``); close to ln(guesses / ln(rules /
    significance)), i.e. about ln(r / 3) for one rule at 5%.
    """
    m = _v.whole(minimum=1, num_canaries=num_canaries)
    r = _v.whole(f"num_canaries={m}", minimum=1, maximum=m, guesses=guesses)
    auditing = _auditing()
    auditor = auditing.CanaryScoreAuditor(np.ones(r), np.zeros(max(1, m - r)))
    return float(auditor.epsilon_one_run(significance / rules, delta,
                                         threshold_strategy=auditing.Explicit(1.0)))


# ----------------------------------------------------------------------------- the audited phase


class ObserverState(NamedTuple):
    """Per-canary running scores (m,): summed log-likelihood ratios, numbers of steps whose
    alignment exceeds 1/2, and summed alignments; and the running average of past privatised
    gradients (flattened) whose direction each step is projected away from."""

    log_ratio: jax.Array
    count: jax.Array
    alignment: jax.Array
    baseline: jax.Array
    level: jax.Array
    history: jax.Array


def observer(directions: jax.Array, *, scale: float, sample_rate: float,
             noise_multiplier: float, baseline_decay: float = 0.5,
             history: int = 8) -> optax.GradientTransformation:
    """An optax transformation that records, and passes on unchanged, each privatised gradient.

    For every step it computes ``y_j = <r, u_j> * scale``, where ``r`` is the gradient ``g``
    minus its least-squares projection on the span of the previous ``history`` privatised
    gradients and ``b``, their exponential moving average (decay ``baseline_decay``), and
    ``x_j = y_j - l_j`` with ``l_j`` the same moving average of canary j's previous ``y_j``. The
    real rows' clipped gradients are nearly aligned (their sum has a norm close to B * C), and
    those slowly turning directions would otherwise leak about |sum| / sqrt(d) into every canary's
    alignment at every step; ``l_j`` removes what persists along canary j's own direction. A canary's own contribution is a
    spike in one step and survives. ``scale = B / C``: a sampled canary of norm C
    contributes 1 and the noise has standard deviation sigma. Canary j's scores accumulate the
    log-likelihood ratio ``log(1 - q + q exp((x_j - 1/2) / sigma^2))`` of one subsampled Gaussian
    step (canary present with rate q against absent, under the claimed sigma), the count of steps
    with ``x_j > 1/2``, and ``x_j``. Everything is a function of the released gradients only,
    never of which canaries were inserted.

    Args:
        directions: (m, d) canary directions, d the number of parameters.
        scale: B / C.
        sample_rate: the claimed q.
        noise_multiplier: the claimed sigma (> 0).
        baseline_decay: in [0, 1); 0 uses the previous gradient's direction only.
        history: how many previous gradients (besides the running average) span the subspace
            that is projected away.
    """
    q = float(sample_rate)
    inv_var = 1.0 / _v.positive(noise_multiplier=noise_multiplier) ** 2
    beta = _v.between(low=0, high=1, high_open=True, baseline_decay=baseline_decay)
    m, d = directions.shape
    k_hist = _v.whole(minimum=0, history=history)

    def init(params):
        del params
        zeros = jnp.zeros((m,), jnp.float32)
        return ObserverState(zeros, zeros, zeros, jnp.zeros((d,), jnp.float32), zeros,
                             jnp.zeros((k_hist, d), jnp.float32))

    def update(updates, state, params=None):
        del params
        flat, _ = ravel_pytree(updates)
        past = jnp.concatenate([state.baseline[None], state.history])  # (1 + history, d)
        coef = jnp.linalg.pinv(past @ past.T, hermitian=True) @ (past @ flat)
        raw = (directions @ (flat - coef @ past)) * scale
        x = raw - state.level
        llr = jnp.logaddexp(math.log1p(-q), math.log(q) + (x - 0.5) * inv_var)
        baseline = beta * state.baseline + (1.0 - beta) * flat
        return updates, ObserverState(state.log_ratio + llr, state.count + (x > 0.5),
                                      state.alignment + x, baseline,
                                      beta * state.level + (1.0 - beta) * raw,
                                      state.history if k_hist == 0 else
                                      jnp.roll(state.history, 1, axis=0).at[0].set(flat))

    return optax.GradientTransformation(init, update)


def canary_loss(loss_fn: Callable[[PyTree, PyTree], jax.Array], directions: jax.Array,
                norm: float) -> Callable[[PyTree, dict], jax.Array]:
    """The per-example loss over real rows and gradient canaries.

    ``batch`` is ``{"rows": <a batch of loss_fn>, "canary": (B,) int32}``; a row with
    ``canary == -1`` is real and gets ``loss_fn``, a row with ``canary == j`` gets
    ``norm * <theta, u_j>`` (gradient ``norm * u_j``).
    """

    def loss(params, batch):
        real = loss_fn(params, batch["rows"])
        flat, _ = ravel_pytree(params)
        idx = batch["canary"]
        lin = norm * (jnp.take(directions, jnp.maximum(idx, 0), axis=0) @ flat)
        return jnp.where(idx >= 0, lin, real)

    return loss


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit_dpsgd` (JSON-friendly through :meth:`summary`).

    Attributes:
        claimed_epsilon: the phase's epsilon at ``delta`` (PLD accountant).
        delta: the delta of the claim and of the bound.
        lower_bound: the empirical lower bound (:class:`Bound`).
        canaries: m; ``included``: how many were inserted.
        noise_multiplier, sample_rate, steps, clip_norm: the claimed phase.
        broken: None for the sound phase, else the broken variant trained.
        score: the score whose bound is reported (the best of those tried; the bound is corrected
            for the number tried).
        significance: the bound's failure probability.
        seconds: wall-clock seconds of training and scoring.
        in_scores, out_scores: the canary scores.
    """

    claimed_epsilon: float
    delta: float
    lower_bound: Bound
    canaries: int
    included: int
    noise_multiplier: float
    sample_rate: float
    steps: int
    clip_norm: float
    broken: str | None
    score: str
    significance: float
    seconds: float
    in_scores: np.ndarray
    out_scores: np.ndarray

    def summary(self) -> dict:
        b = self.lower_bound
        return {"claimed_epsilon": self.claimed_epsilon, "delta": self.delta,
                "epsilon_lower_bound": b.epsilon, "epsilon_lower_bound_all_thresholds":
                b.epsilon_all_thresholds, "guesses": b.guesses, "correct_guesses": b.correct,
                "canaries": self.canaries, "included": self.included,
                "noise_multiplier": self.noise_multiplier, "sample_rate": self.sample_rate,
                "steps": self.steps, "clip_norm": self.clip_norm, "broken": self.broken,
                "score": self.score, "significance": self.significance, "seconds": self.seconds}


def audit_dpsgd(
    loss_fn: Callable[[PyTree, PyTree], jax.Array],
    optimizer: optax.GradientTransformation,
    params: PyTree,
    data: PyTree,
    key: jax.Array,
    *,
    batch_size: int,
    num_records: int,
    steps: int,
    clip_norm: float,
    noise_multiplier: float,
    delta: float,
    canaries: int = 1000,
    canary_scale: float = 1.0,
    score: str | Sequence[str] = ("likelihood_ratio", "count"),
    baseline_decay: float = 0.5,
    history: int = 8,
    significance: float = 0.05,
    method: str = "vmap",
    chunk_size: int = 1000,
    progress: Callable[[int, int], None] | None = None,
    broken: str | None = None,
) -> AuditResult:
    """Audits one DP-SGD phase with gradient canaries in a single run.

    Args:
        loss_fn: the phase's per-example loss ``(params, batch) -> (B,)``.
        optimizer: the phase's optax optimizer (the observer is chained before it).
        params: initial parameters.
        data: the phase's private rows (a pytree with leading axis n).
        key: a secret key; it draws the canary directions, the inclusion bits and the phase's key.
        batch_size: expected batch size B; the sampling rate is q = B / ``num_records``.
        num_records: the public N of the sampling rate (as in the synthesizers).
        steps: DP-SGD steps.
        clip_norm: C.
        noise_multiplier: sigma of the claim (calibrated by the caller).
        delta: delta of the claim and of the bound.
        canaries: m.
        canary_scale: canary gradient norm in units of C (> 0; clipping reduces anything above 1
            to C in a sound phase).
        score: one of :data:`SCORES` or several: with k scores each bound is computed at level
            ``significance / k`` and the largest is reported (a union bound, so still valid at
            ``significance``). Default: the likelihood ratio (the best test against a sound
            phase) and the count (robust when the noise is absent).
        baseline_decay, history: the observer's removal of the real rows' common gradient
            directions (:func:`observer`).
        significance: failure probability of the bound.
        method: clipping method of the engine; ``"vmap"`` because the canaries' linear loss has
            no ghost-norm rule (the two methods give the same clipped sums; tests/test_dpsgd_*).
        chunk_size: steps per compiled call.
        progress: ``progress(done, total)`` between chunks.
        broken: None (sound). ``"noise_off"`` trains without noise and ``"no_clip"`` without
            clipping (noise std kept at sigma * C), while the claim stays the sound phase's: to
            show that the audit detects a broken mechanism. For experiments only.

    Returns:
        An :class:`AuditResult`.
    """
    names = (score,) if isinstance(score, str) else tuple(score)
    if not names:
        raise ValueError("score is empty: name at least one of " + ", ".join(SCORES) + ".")
    for name in names:
        _v.one_of(SCORES, score=name)
    if broken is not None:
        _v.one_of(BROKEN_VARIANTS, broken=broken)
    n_steps = _v.whole(minimum=0, steps=steps)
    m = _v.whole(minimum=2, canaries=canaries)
    c = _v.positive(clip_norm=clip_norm)
    sigma = _v.positive(noise_multiplier=noise_multiplier)
    scale = _v.positive(canary_scale=canary_scale)
    phase = privacy.DPSGDPhase.from_batch_size("audited", batch_size, num_records, sigma, n_steps,
                                               clip_norm=c)
    claimed = privacy.epsilon([phase], delta)
    q = phase.sample_rate
    t0 = time.perf_counter()
    k_dir, k_in, k_phase = jax.random.split(key, 3)
    flat, _ = ravel_pytree(params)
    directions = canary_directions(k_dir, m, flat.size)
    included = include_canaries(k_in, m)
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    inserted = np.flatnonzero(included).astype(np.int32)
    rows = jax.tree_util.tree_map(
        lambda x: jnp.concatenate([x, jnp.zeros((inserted.size,) + x.shape[1:], x.dtype)]), data)
    table = {"rows": rows, "canary": jnp.concatenate([jnp.full((n,), -1, jnp.int32),
                                                      jnp.asarray(inserted)])}
    obs = observer(directions, scale=batch_size / c, sample_rate=q, noise_multiplier=sigma,
                   baseline_decay=baseline_decay, history=history)
    opt = optax.chain(obs, optimizer)
    step_clip, step_sigma = c, sigma
    if broken == "noise_off":
        step_sigma = 0.0
    elif broken == "no_clip":
        step_clip, step_sigma = c * _NO_CLIP_FACTOR, sigma / _NO_CLIP_FACTOR
    step = dpsgd.make_dp_step(canary_loss(loss_fn, directions, scale * c), opt,
                              _run_phase(phase, step_clip, step_sigma), scan_rows=n + inserted.size,
                              method=method)
    state = dpsgd.run_phase(step, dpsgd.init_state(params, opt), table, k_phase, n_steps,
                            chunk_size=chunk_size, progress=progress)
    obs_state = state.opt_state[0]
    fields = {"likelihood_ratio": obs_state.log_ratio, "count": obs_state.count,
              "sum": obs_state.alignment}
    bound, best, all_scores = None, None, {}
    for name in names:
        scores = np.asarray(fields[name], dtype=np.float64)
        all_scores[name] = scores
        b = epsilon_lower_bound(scores[included], scores[~included], delta,
                                significance=significance / len(names))
        if bound is None or b.epsilon > bound.epsilon:
            bound, best = b, name
    scores = all_scores[best]
    return AuditResult(
        claimed_epsilon=float(claimed), delta=float(delta), lower_bound=bound, canaries=m,
        included=int(included.sum()), noise_multiplier=sigma, sample_rate=q, steps=int(state.steps),
        clip_norm=c, broken=broken, score=best, significance=significance,
        seconds=time.perf_counter() - t0, in_scores=scores[included], out_scores=scores[~included])


# ----------------------------------------------------------------------------- DP-auto-GAN target


def calibrated_noise(batch_size: int, num_records: int, steps: int, target_epsilon: float,
                     delta: float) -> float:
    """The noise multiplier of one DP-SGD phase calibrated to ``target_epsilon`` (PLD)."""
    phase = privacy.DPSGDPhase.from_batch_size("audited", batch_size, num_records, 1.0,
                                               _v.whole(minimum=0, steps=steps))
    return float(privacy.calibrate([phase], target_epsilon, delta)[0].noise_multiplier)


def audit_dp_auto_gan_autoencoder(x: np.ndarray, key: jax.Array, *, target_epsilon: float,
                                  delta: float = 1e-5, config=None, steps: int | None = None,
                                  num_records: int | None = None, **kwargs) -> AuditResult:
    """Audits DP-auto-GAN's autoencoder phase (phase 1) on encoded rows ``x``.

    The loss, networks, optimizer, batch size, clip norm ("paper-joint" or a number) and schedule
    are the synthesizer's (:mod:`dpgen_jax.synthesizers.dp_auto_gan`); the noise multiplier is
    calibrated to ``target_epsilon`` for this phase alone. ``steps`` overrides the schedule (for
    short audits); other keywords go to :func:`audit_dpsgd`.
    """
    from dpgen_jax.synthesizers import dp_auto_gan

    config = (config or dp_auto_gan.DPAutoGANConfig.adult()).validate()
    clip = dp_auto_gan.ae_clip_value(config)
    if clip is None:
        raise ValueError("config.ae_clip_norm='public-median' is chosen during training; give the "
                         "audit a number or 'paper-joint'.")
    m, width = x.shape
    n_rec = num_records or m
    config = config.replace(ae_batch_size=dp_auto_gan.ae_batch_size_for(config, n_rec))
    n_steps = steps if steps is not None else dp_auto_gan.schedule(config, n_rec)["autoencoder"]
    sigma = calibrated_noise(config.ae_batch_size, n_rec, n_steps, target_epsilon, delta)
    k_init, k_audit = jax.random.split(key)
    params = dp_auto_gan.init(config, width, k_init).autoencoder
    return audit_dpsgd(
        dp_auto_gan.ae_loss_fn(config, width), dp_auto_gan._ae_optimizer(config), params,
        jnp.asarray(x, jnp.float32), k_audit, batch_size=config.ae_batch_size, num_records=n_rec,
        steps=n_steps, clip_norm=clip, noise_multiplier=sigma, delta=delta, **kwargs)


__all__ = [
    "AuditResult",
    "BROKEN_VARIANTS",
    "Bound",
    "HISTOGRAM_MECHANISMS",
    "MANY_RUN_BROKEN",
    "ManyRunBound",
    "ManyRunResult",
    "ObserverState",
    "SCORES",
    "THRESHOLD_STEPS",
    "audit_dp_auto_gan_autoencoder",
    "audit_dp_em",
    "audit_dpsgd",
    "audit_dpsgd_step",
    "audit_histograms",
    "audit_sanitizer",
    "calibrated_noise",
    "canary_directions",
    "canary_loss",
    "epsilon_lower_bound",
    "epsilon_lower_bound_many_runs",
    "guess_grid",
    "include_canaries",
    "many_run_thresholds",
    "max_certifiable_epsilon",
    "max_certifiable_epsilon_many_runs",
    "observer",
]
