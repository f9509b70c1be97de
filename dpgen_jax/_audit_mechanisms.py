"""Many-run audits of the cheap mechanisms: a DP-SGD step, the sanitiser, histograms, DP-EM.

Re-exported by :mod:`dpgen_jax.audit` (see ``docs/audit.md``). Each audit runs the library's own
mechanism many times, a canary in half of the runs and out of the other half, with the noise the
library's accounting (:mod:`dpgen_jax.privacy` phases and :func:`~dpgen_jax.privacy.calibrate`)
calibrates to a claimed epsilon, scores every run from what the mechanism releases, and feeds the
scores to jax-privacy's :class:`~jax_privacy.auditing.CanaryScoreAuditor`
(``epsilon_clopper_pearson``: the many-run test of Jagielski, Ullman and Oprea 2020) at a few
thresholds fixed before any run (:func:`epsilon_lower_bound_many_runs`).

Runs are independent draws: each has its own key (``jax.random.split``), the in-runs all release
the mechanism on the data with the canary and the out-runs on the data without it (for the DP-SGD
step: with the canary's loss set to 0, which has the same distribution), and a chunk of runs is
one ``jax.vmap`` of the mechanism over keys (the host releases, histograms and DP-EM, are batched
calls of their release functions instead). Every score is normalised so that the
canary's own contribution is 1 and the claimed noise has standard deviation ``score_noise`` (the
mechanism's effective Gaussian noise multiplier); the thresholds are ``1/2 + k * score_noise``.

The broken variants are arguments of the real functions: ``"noise_off"`` (noise multiplier 0),
``"half_noise"`` (half the calibrated noise multiplier) and ``"no_clip"`` (clip norm times
10^6 with the noise multiplier divided by 10^6, so the noise standard deviation is unchanged),
while the claim stays the sound mechanism's. Nothing of the library imports this module.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy

MANY_RUN_BROKEN = {
    "dpsgd-step": ("noise_off", "half_noise", "no_clip"),
    "sanitizer": ("noise_off", "half_noise", "no_clip"),
    "histograms": ("noise_off", "half_noise"),
    "dp-em": ("noise_off", "half_noise"),
}
"""The broken variants each many-run audit accepts (DP-EM and the histograms have no clip norm to
turn off: DP-EM clips rows to the unit ball unconditionally, a histogram count needs no
clipping)."""

THRESHOLD_STEPS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0)
"""The pre-registered thresholds, ``1/2 + k * score_noise`` for k in this tuple: the midpoint
between a present and an absent canary (k = 0, the right test when the noise is missing) and then
every half noise standard deviation up to 4, then 5 (the region where the Gaussian's likelihood
ratio is largest at the run counts we use)."""

HISTOGRAM_MECHANISMS = ("independent", "dp-sactgan")
_NO_CLIP_FACTOR = 1e6


def _auditing():
    try:
        from jax_privacy import auditing
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("The audit needs jax-privacy: pip install 'dpgen-jax[audit]'.") from exc
    return auditing


# ----------------------------------------------------------------------------- the bound


class ManyRunBound(NamedTuple):
    """A many-run lower bound and the threshold that attains it.

    Attributes:
        epsilon: the lower bound (0 when no claim is falsified).
        threshold: the pre-registered threshold of the best rule ("in" when score >= threshold).
        true_positives: in-runs at or above the threshold.
        false_positives: out-runs at or above the threshold.
    """

    epsilon: float
    threshold: float
    true_positives: int
    false_positives: int


def many_run_thresholds(score_noise: float) -> tuple[float, ...]:
    """``1/2 + k * score_noise`` for k in :data:`THRESHOLD_STEPS` (a function of the claim only)."""
    s = _v.positive(score_noise=score_noise)
    return tuple(0.5 + k * s for k in THRESHOLD_STEPS)


def epsilon_lower_bound_many_runs(in_scores: np.typing.ArrayLike, out_scores: np.typing.ArrayLike,
                                  delta: float, *, thresholds: Sequence[float],
                                  significance: float = 0.05) -> ManyRunBound:
    """A lower bound on epsilon at ``delta`` from the scores of independent runs.

    For each threshold t (fixed before the runs), jax-privacy's
    ``CanaryScoreAuditor.epsilon_clopper_pearson`` with ``Explicit(t)`` bounds the true positive
    rate from below and the false positive rate from above (Clopper-Pearson, each at half the
    level) and returns ``log((TPR_lower - delta) / FPR_upper)``; each threshold is tested at level
    ``significance / len(thresholds)`` and the maximum is a valid bound at ``significance`` by the
    union bound. Valid when the in-scores are i.i.d. draws of the mechanism with the canary and the
    out-scores i.i.d. draws without it (independent runs); unlike one-run auditing, the delta term
    does not grow with the number of runs.

    Args:
        in_scores, out_scores: scores of the runs with and without the canary (1-D, finite).
        delta: the delta of the claim, in [0, 1).
        thresholds: the pre-registered thresholds (:func:`many_run_thresholds`).
        significance: probability that the bound is wrong, in (0, 0.5).

    Returns:
        A :class:`ManyRunBound`.
    """
    in_s = _check_scores(in_scores, "in_scores")
    out_s = _check_scores(out_scores, "out_scores")
    _v.between(low=0, high=1, high_open=True, delta=delta)
    _v.between(low=0, high=0.5, low_open=True, high_open=True, significance=significance)
    ts = tuple(_v.between(low=-math.inf, high=math.inf, low_open=True, high_open=True,
                          **{f"thresholds[{i}]": t}) for i, t in enumerate(thresholds))
    if not ts:
        raise ValueError("thresholds is empty: pre-register at least one (see many_run_thresholds).")
    auditing = _auditing()
    auditor = auditing.CanaryScoreAuditor(in_s, out_s)
    best = None
    for t in ts:
        eps = float(auditor.epsilon_clopper_pearson(significance / len(ts), delta,
                                                    threshold_strategy=auditing.Explicit(t)))
        if best is None or eps > best.epsilon:
            best = ManyRunBound(eps, t, int(np.sum(in_s >= t)), int(np.sum(out_s >= t)))
    return best


def max_certifiable_epsilon_many_runs(runs_in: int, runs_out: int, delta: float, *,
                                      significance: float = 0.05,
                                      rules: int = len(THRESHOLD_STEPS)) -> float:
    """The largest bound :func:`epsilon_lower_bound_many_runs` can give: perfectly separated
    scores (every in-run above the threshold, no out-run), about ln(runs_out / ln(2 rules /
    significance))."""
    n_in, n_out = _v.whole(minimum=1, runs_in=runs_in), _v.whole(minimum=1, runs_out=runs_out)
    auditing = _auditing()
    auditor = auditing.CanaryScoreAuditor(np.ones(n_in), np.zeros(n_out))
    return float(auditor.epsilon_clopper_pearson(significance / _v.whole(minimum=1, rules=rules), delta,
                                                 threshold_strategy=auditing.Explicit(0.5)))


def _check_scores(scores, name) -> np.ndarray:
    a = np.asarray(scores, dtype=np.float64)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} has shape {a.shape}: pass a non-empty 1-D array of scores.")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds NaN or inf: pass finite scores.")
    return a


# ----------------------------------------------------------------------------- running the runs


@dataclasses.dataclass(frozen=True)
class ManyRunResult:
    """The outcome of a many-run audit (JSON-friendly through :meth:`summary`).

    Attributes:
        mechanism: which audit ("dpsgd-step", "sanitizer", "histograms/independent",
            "histograms/dp-sactgan", "dp-em").
        claimed_epsilon: the calibrated phase's epsilon at ``delta`` (PLD accountant).
        delta: the delta of the claim and of the bound.
        lower_bound: the :class:`ManyRunBound`.
        runs_in, runs_out: runs with and without the canary.
        noise_multiplier: the claimed (calibrated) noise multiplier of the library's phase.
        score_noise: the standard deviation of a score under the claimed noise (threshold unit).
        broken: None for the sound mechanism, else the broken variant run.
        significance: the bound's failure probability.
        seconds: wall-clock seconds of the runs and the bound (compilation included; the
            calibration, cached per claim, excluded).
        setting: the audited mechanism's public parameters.
        in_scores, out_scores: the scores.
    """

    mechanism: str
    claimed_epsilon: float
    delta: float
    lower_bound: ManyRunBound
    runs_in: int
    runs_out: int
    noise_multiplier: float
    score_noise: float
    broken: str | None
    significance: float
    seconds: float
    setting: dict
    in_scores: np.ndarray
    out_scores: np.ndarray

    def summary(self) -> dict:
        b = self.lower_bound
        return {"mechanism": self.mechanism, "claimed_epsilon": self.claimed_epsilon,
                "delta": self.delta, "epsilon_lower_bound": b.epsilon, "threshold": b.threshold,
                "true_positives": b.true_positives, "false_positives": b.false_positives,
                "runs_in": self.runs_in, "runs_out": self.runs_out,
                "noise_multiplier": self.noise_multiplier, "score_noise": self.score_noise,
                "broken": self.broken, "significance": self.significance,
                "seconds": self.seconds, "setting": dict(self.setting),
                "max_certifiable_epsilon": max_certifiable_epsilon_many_runs(
                    self.runs_in, self.runs_out, self.delta, significance=self.significance)}


def _scores(score_fn: Callable[[jax.Array, jax.Array], jax.Array], key: jax.Array,
            present: np.ndarray, chunk: int) -> np.ndarray:
    """``score_fn(key, present)`` (a scalar score) on one independent key per run, ``chunk`` runs
    per compiled call; ``present`` (runs,) says whether each run holds the canary."""
    runs = int(present.size)
    chunk = _v.whole(minimum=1, chunk=chunk)
    keys = jax.random.split(key, runs)
    flags = jnp.asarray(present)
    size = min(chunk, runs)
    fn = jax.jit(jax.vmap(score_fn))
    out = []
    for start in range(0, runs, size):
        part, flag = keys[start:start + size], flags[start:start + size]
        n = part.shape[0]
        if n < size:  # pad the last chunk so that one compilation serves every chunk
            part = jnp.concatenate([part, keys[:size - n]])
            flag = jnp.concatenate([flag, flags[:size - n]])
        out.append(np.asarray(fn(part, flag), dtype=np.float64)[:n])
    return np.concatenate(out)


def _in_out(score_fn, key, r_in, r_out, chunk):
    """In-run and out-run scores of one ``score_fn(key, present)`` (one compilation)."""
    s = _scores(score_fn, key, np.arange(r_in + r_out) < r_in, chunk)
    return s[:r_in], s[r_in:]


def _check_common(runs, broken, mechanism, significance):
    n = _v.whole(minimum=2, runs=runs)
    if broken is not None:
        _v.one_of(MANY_RUN_BROKEN[mechanism], broken=broken)
    _v.between(low=0, high=0.5, low_open=True, high_open=True, significance=significance)
    return n // 2, n - n // 2


@functools.lru_cache(maxsize=64)
def _calibrated(phase: privacy.Phase, target_epsilon: float, delta: float):
    """The phase with its noise calibrated to the target (PLD) and its epsilon (cached: phases
    are frozen dataclasses, and the sound and broken audits of one claim share it)."""
    cal = privacy.calibrate([phase], _v.positive(target_epsilon=target_epsilon), delta)[0]
    return cal, float(privacy.epsilon([cal], delta))


def _broken_noise(sigma: float, broken: str | None) -> float:
    return {"noise_off": 0.0, "half_noise": 0.5 * sigma}.get(broken, sigma)


def _run_phase(phase: privacy.DPSGDPhase, clip_norm: float, noise_multiplier: float):
    """The phase a (possibly broken) audited step runs: the accounted ``phase`` with another clip
    norm and noise multiplier; noise 0 is the clipped, noiseless ``NonPrivatePhase`` of the same
    schedule. A broken variant runs a phase other than the one accounted (what an audit detects)."""
    if noise_multiplier == 0.0:
        return privacy.NonPrivatePhase(phase.name, phase.steps, phase.sample_rate, phase.batch_size,
                                       clip_norm=clip_norm)
    return dataclasses.replace(phase, clip_norm=clip_norm, noise_multiplier=noise_multiplier)


def _finish(mechanism, claimed, delta, in_s, out_s, sigma, score_noise, broken, significance,
            t0, setting) -> ManyRunResult:
    bound = epsilon_lower_bound_many_runs(in_s, out_s, delta,
                                          thresholds=many_run_thresholds(score_noise),
                                          significance=significance)
    return ManyRunResult(mechanism, claimed, float(delta), bound, in_s.size, out_s.size,
                         float(sigma), float(score_noise), broken, significance,
                         time.perf_counter() - t0, setting, in_s, out_s)


# ----------------------------------------------------------------------------- a DP-SGD step


def audit_dpsgd_step(key: jax.Array, *, target_epsilon: float, delta: float = 1e-5,
                     runs: int = 400_000, batch_size: int = 8, num_records: int = 16,
                     clip_norm: float = 1.0, canary_scale: float = 1.0, chunk: int = 16384,
                     significance: float = 0.05, broken: str | None = None) -> ManyRunResult:
    """Audits one DP-SGD step of the engine (Poisson sampling, clipping, noise) over many runs.

    The step is :func:`dpgen_jax.dpsgd.make_dp_step` of the accounted phase (the synthesizers'
    step, ``method="vmap"``; optimizer ``optax.identity()`` from zero parameters, so the new
    parameters are the released privatised gradient) on a table of ``num_records`` (N) rows:
    N - 1 real rows and one gradient canary, a row whose loss is ``canary_scale * C * <theta, u>``
    in the in-runs and 0 in the out-runs (a row of zero loss adds 0 to the clipped sum whether
    sampled or not, so an out-run has the distribution of the table without the canary; one
    compiled program serves both). The real rows' gradients (norm about 8 C, so clipped) live in
    the first 8 of the 16 coordinates and the unit direction ``u`` in the other 8, so the
    canary's coordinate carries only the canary and the noise. Sampling rate q = B / N
    (``privacy.DPSGDPhase.from_batch_size``), one step, noise calibrated to ``target_epsilon``.
    Score: ``<g, u> * B / C``: the canary adds 1 when it is sampled (probability q), the noise has
    standard deviation sigma; for one step it orders the runs as the likelihood ratio does.
    """
    r_in, r_out = _check_common(runs, broken, "dpsgd-step", significance)
    b, n_rec = _v.whole(minimum=1, batch_size=batch_size), _v.whole(minimum=2, num_records=num_records)
    c, s = _v.positive(clip_norm=clip_norm), _v.positive(canary_scale=canary_scale)
    phase, claimed = _calibrated(
        privacy.DPSGDPhase.from_batch_size("audited", b, n_rec, 1.0, 1, clip_norm=c),
        target_epsilon, delta)
    sigma = phase.noise_multiplier
    t0 = time.perf_counter()
    k_data, k_dir, k_runs = jax.random.split(key, 3)
    dim, half = 16, 8
    u = jax.random.normal(k_dir, (dim - half,))
    u = jnp.concatenate([jnp.zeros(half), u / jnp.linalg.norm(u)])
    table = {"x": jnp.concatenate([3.0 * jax.random.normal(k_data, (n_rec - 1, half)),
                                   jnp.zeros((1, half))]),
             "canary": jnp.arange(n_rec) == n_rec - 1}
    step_c, step_sigma = c, _broken_noise(sigma, broken)
    if broken == "no_clip":
        step_c, step_sigma = c * _NO_CLIP_FACTOR, sigma / _NO_CLIP_FACTOR
    opt = optax.identity()
    state = dpsgd.init_state({"w": jnp.zeros(dim)}, opt)

    def one(k, present):
        def loss(params, batch):
            real = batch["x"] @ params["w"][:half]
            canary = jnp.where(present, s * c, 0.0) * (params["w"] @ u)
            return jnp.where(batch["canary"], canary, real)

        step = dpsgd.make_dp_step(loss, opt, _run_phase(phase, step_c, step_sigma), scan_rows=n_rec,
                                  method="vmap")
        new, _ = step(state, table, k)
        return (new.params["w"] @ u) * b / c

    in_s, out_s = _in_out(one, k_runs, r_in, r_out, chunk)
    return _finish("dpsgd-step", claimed, delta, in_s, out_s, sigma, sigma, broken, significance,
                   t0, {"batch_size": b, "num_records": n_rec, "sample_rate": phase.sample_rate,
                        "steps": 1, "clip_norm": c, "canary_scale": s, "parameters": dim})


# ----------------------------------------------------------------------------- the sanitiser


def audit_sanitizer(key: jax.Array, *, target_epsilon: float, delta: float = 1e-5,
                    runs: int = 200_000, rows: int = 4, dim: int = 8, clip_norm: float = 1.0,
                    canary_scale: float = 1.0, chunk: int = 16384, significance: float = 0.05,
                    broken: str | None = None) -> ManyRunResult:
    """Audits one call of the generator-side sanitiser (:func:`dpgen_jax.dpsgd.sanitized`).

    A generator whose ``rows`` (B) outputs all equal its parameters ``theta`` (dim ``dim``) passes
    them through ``sanitized(..., scale=1/B)`` to a loss whose gradient on every row (the
    discriminator's cotangent) is the canary cotangent ``+canary_scale * C * u`` in the in-runs and
    ``-canary_scale * C * u`` in the out-runs: the two ends of the per-row replacement sensitivity
    2C the accounting assumes, on every row of the step. The released quantity is the generator's
    gradient ``d loss / d theta`` (the summed sanitised cotangents over B), computed by
    ``jax.grad`` through the custom VJP. The claim is one step of
    ``privacy.ShardedSanitizerPhase(num_shards=1, rows_per_step=B, accounting="strict")``, i.e. a
    Gaussian with noise multiplier sigma / sqrt(B). Score: ``(<grad, u> / C + 1) / 2`` (0 without
    the canary, 1 with it; noise standard deviation sigma / sqrt(B)).
    """
    r_in, r_out = _check_common(runs, broken, "sanitizer", significance)
    b, d = _v.whole(minimum=1, rows=rows), _v.whole(minimum=1, dim=dim)
    c, s = _v.positive(clip_norm=clip_norm), _v.positive(canary_scale=canary_scale)
    phase, claimed = _calibrated(
        privacy.ShardedSanitizerPhase("generator", num_shards=1, steps=1, rows_per_step=b,
                                      noise_multiplier=1.0, dataset_size=1, accounting="strict",
                                      clip_norm=c), target_epsilon, delta)
    sigma = phase.noise_multiplier
    t0 = time.perf_counter()
    k_dir, k_runs = jax.random.split(key)
    u = jax.random.normal(k_dir, (d,))
    u = u / jnp.linalg.norm(u)
    step_c, step_sigma = c, _broken_noise(sigma, broken)
    if broken == "no_clip":
        step_c, step_sigma = c * _NO_CLIP_FACTOR, sigma / _NO_CLIP_FACTOR
    step_std = privacy.noise_std_of(step_sigma, phase.row_sensitivity(step_c))  # sigma * 2C

    def one(k, present):
        cotangent = jnp.where(present, 1.0, -1.0) * s * c * u

        def loss(theta):
            x = jnp.broadcast_to(theta, (b, d))
            out = dpsgd.sanitized(x, k if step_sigma else None, clip_norm=step_c,
                                  noise_std=step_std, scale=1.0 / b)
            return jnp.sum(out @ cotangent)

        g = jax.grad(loss)(jnp.zeros(d))
        return (g @ u / c + 1.0) / 2.0

    in_s, out_s = _in_out(one, k_runs, r_in, r_out, chunk)
    return _finish("sanitizer", claimed, delta, in_s, out_s, sigma, sigma / math.sqrt(b), broken,
                   significance, t0, {"rows_per_step": b, "dim": d, "clip_norm": c,
                                      "canary_scale": s, "num_shards": 1, "steps": 1,
                                      "effective_noise_multiplier":
                                          phase.effective_noise_multiplier})


# ----------------------------------------------------------------------------- histograms


def _sactgan_layout(columns: int, categories: int):
    from dpgen_jax import data
    from dpgen_jax.synthesizers import dp_sactgan

    schema = data.Schema.from_dict({"columns": [
        {"name": f"c{j}", "kind": "categorical", "categories": [f"v{i}" for i in range(categories)]}
        for j in range(columns)]})
    config = dp_sactgan.DPSACTGANConfig(modes="public", cond="noisy", batch_size=1,
                                        num_discriminators=1).validate()
    return config, dp_sactgan.build_layout(schema, config)


def audit_histograms(key: jax.Array, *, target_epsilon: float, delta: float = 1e-5,
                     mechanism: str = "independent", runs: int = 400_000, columns: int = 4,
                     categories: int = 3, base_count: int = 100, chunk: int = 16384,
                     significance: float = 0.05, broken: str | None = None) -> ManyRunResult:
    """Audits a synthesizer's Gaussian histograms: a canary record adds one count to a cell of
    every histogram; the score is the noisy count of the canary's cells.

    Both release through ``dpsgd.noisy_counts`` (integer counts plus integer Gaussian noise), the
    one function every histogram path calls; each run releases the d counts of the canary's cells.
    ``mechanism="independent"``: the noise of
    :func:`dpgen_jax.synthesizers.independent.release_histograms` (the d one-way histograms released
    together, ``sigma * sqrt(d)`` per cell), claim ``independent.privacy_phases`` (one Gaussian of
    L2 sensitivity sqrt(d)). ``"dp-sactgan"``: that of
    :func:`dpgen_jax.synthesizers.dp_sactgan.release_conditional_counts` (one histogram per column,
    noise sigma per cell, clipped at 0) on the layout of a categorical schema, claim the
    ``"histograms"`` phase of ``dp_sactgan.privacy_phases`` (d Gaussians of sensitivity 1).

    The table has ``columns`` (d) categorical columns of ``categories`` values and
    ``base_count * categories`` base rows, ``base_count`` in every cell (so that the 0-clipping
    of DP-SACTGAN's counts never binds); the canary record has code 0 in every column and is
    appended in the in-runs. Score: the sum over columns of the released count of cell 0, minus
    the known base counts, divided by d (the canary adds 1; the noise has standard deviation
    sigma for the independent histograms and sigma / sqrt(d) for DP-SACTGAN's).
    """
    from dpgen_jax.synthesizers import dp_sactgan, independent

    _v.one_of(HISTOGRAM_MECHANISMS, mechanism=mechanism)
    r_in, r_out = _check_common(runs, broken, "histograms", significance)
    d, k = _v.whole(minimum=1, columns=columns), _v.whole(minimum=1, categories=categories)
    base = _v.whole(minimum=0, base_count=base_count)
    base_codes = np.repeat(np.arange(k), base)[:, None] * np.ones((1, d), np.int64)
    codes = {"out": base_codes, "in": np.concatenate([base_codes, np.zeros((1, d), np.int64)])}
    if mechanism == "independent":
        config = independent.IndependentConfig(noise_multiplier=1.0).validate()
        phase, claimed = _calibrated(independent.privacy_phases(config, d)[0], target_epsilon, delta)
        score_noise = phase.noise_multiplier
    else:
        config, layout = _sactgan_layout(d, k)
        phases = dp_sactgan.privacy_phases(config.replace(hist_noise_multiplier=1.0), layout,
                                           base_codes.shape[0] + 1)
        phase, claimed = _calibrated(next(p for p in phases if p.name == "histograms"),
                                     target_epsilon, delta)
        score_noise = phase.noise_multiplier / math.sqrt(d)
    sigma = phase.noise_multiplier
    step_sigma = _broken_noise(sigma, broken)
    t0 = time.perf_counter()

    # Every histogram path releases through dpsgd.noisy_counts (integer counts plus integer noise,
    # on the host: no vmap); a run's score needs only the canary's cells, so each run releases the
    # d counts of cell 0 (the other cells' noise is independent of them), many runs per call.
    std = step_sigma * (math.sqrt(d) if mechanism == "independent" else 1.0)

    def scores(table, kk, runs_n):
        cell0 = np.bincount(np.nonzero(table == 0)[1], minlength=d)        # (d,) counts of code 0
        out = []
        for i, start in enumerate(range(0, runs_n, chunk)):
            n = min(chunk, runs_n - start)
            tiled = np.broadcast_to(cell0, (n, d))
            released = dpsgd.noisy_counts({"h": tiled}, std or None, jax.random.fold_in(kk, i))["h"]
            if mechanism == "dp-sactgan":
                released = np.maximum(released, 0)  # as dp_sactgan.release_conditional_counts
            out.append((released.sum(axis=1) - d * base) / d)
        return np.concatenate(out).astype(np.float64)

    k_in, k_out = jax.random.split(key)
    in_s = scores(codes["in"], k_in, r_in)
    out_s = scores(codes["out"], k_out, r_out)
    return _finish(f"histograms/{mechanism}", claimed, delta, in_s, out_s, sigma, score_noise,
                   broken, significance, t0,
                   {"columns": d, "categories": k, "base_count": base,
                    "sensitivity": phase.sensitivity, "releases": phase.steps})


# ----------------------------------------------------------------------------- DP-EM


def _dp_em_observer(a2: float) -> tuple[float, float, np.ndarray, float]:
    """Base-row centre b, second moment Q, the weights w of the two observed statistics and the
    score's noise in units of sigma, for base rows at b +- a with b = -(1 - a) (see
    :func:`audit_dp_em`)."""
    a = math.sqrt(a2)
    b = -(1.0 - a)
    q = b * b + a2
    cov = np.array([[1.0 + b * b, b * q], [b * q, 1.0 + q * q]])  # of (e1 - b e0, e2 - q e0)
    mean = np.array([1.0 - b, 1.0 - q])  # what the canary adds to them
    w = np.linalg.solve(cov, mean)
    return b, q, w / (w @ mean), float(1.0 / math.sqrt(mean @ w))


def audit_dp_em(key: jax.Array, *, target_epsilon: float, delta: float = 1e-5,
                runs: int = 1_000_000, base_rows: int = 1000, iterations: int = 1,
                chunk: int = 262144, significance: float = 0.05,
                broken: str | None = None) -> ManyRunResult:
    """Audits DP-EM by sufficient-statistics perturbation (``dpgen_jax.synthesizers._dp_em.dp_em_ssp``).

    The mechanism is ``dp_em_ssp`` with one component in one dimension and ``iterations`` (J)
    iterations; the claim is ``privacy.GaussianPhase("dp-em", sigma, steps=3 * J,
    sensitivity=1.0)``, as the synthesizers account it. The table: ``base_rows`` (n, even) rows,
    half at b + a and half at b - a, and, in the in-runs, a canary at 1 (the edge of the unit
    ball: it adds 1 to the soft count, to the first moment and to the second moment, the full
    sensitivity of each); the out-runs drop it with the function's ``mask`` (padding changes no
    sensitivity).

    The runs are the mixtures of one batched ``dp_em_ssp`` call (in-runs first). With one
    component every responsibility is 1 (``R = 2^b``), so the exact fixed-point statistics do
    not depend on the mixture: they are computed once per table (``_dp_em.sufficient_statistics``)
    and every run's release is ``_dp_em.release_statistics`` at the counters ``dp_em_ssp`` gives
    that run (the snapped release, vectorised over ``chunk`` runs per call). Only the last
    iteration's release reaches the fitted mixture, so it is the one drawn; the M-step is
    ``_dp_em.m_step``.

    Score. The released mixture normalises its weight, so the three noisy statistics (count n',
    first moment S1, second moment S2) are seen only as ``mu = S1 / n'`` and ``m2 = cov + mu^2 =
    S2 / n'``. To first order in 1/n, ``n (mu - b)`` and ``n (m2 - Q)`` (Q = b^2 + a^2) are
    ``e1 - b e0`` and ``e2 - Q e0``, where e0, e1, e2 are the canary's contribution plus noise of
    the three releases; the score is their best linear combination (weights from the claimed
    covariance), scaled so that the canary adds 1 (b and Q are the base rows' exact mean and
    second moment on the fixed point). With b = -(1 - a), the base rows' mean
    opposite the canary, the count enters through the denominator with the same sign as the first
    moment: the score's noise is about sigma / 1.62, against sigma / sqrt(3) for all three
    statistics seen directly (sigma / sqrt(2) with the rows at 0). The spread a keeps the released
    covariance clear of the function's eigenvalue floor: ``a^2 = min(1/4, 8 sigma / n)`` (n a^2 is
    eight claimed noise standard deviations), a function of the claim only.
    """
    r_in, r_out = _check_common(runs, broken, "dp-em", significance)
    n = _v.whole(minimum=2, base_rows=base_rows)
    if n % 2:
        raise ValueError(f"base_rows={base_rows!r} is odd: pass an even number (half the rows at "
                         "b + a, half at b - a).")
    j = _v.whole(minimum=1, iterations=iterations)
    chunk = _v.whole(minimum=1, chunk=chunk)
    phase, claimed = _calibrated(privacy.GaussianPhase("dp-em", 1.0, steps=3 * j, sensitivity=1.0,
                                                       output="snapped"), target_epsilon, delta)
    sigma = phase.noise_multiplier
    step_sigma = _broken_noise(sigma, broken)
    a2 = min(0.25, 8.0 * sigma / n)
    b, q, w, unit_noise = _dp_em_observer(a2)
    from dpgen_jax.synthesizers import _dp_em

    t0 = time.perf_counter()
    a = math.sqrt(a2)
    x = np.concatenate([np.full((n // 2, 1), b + a), np.full((n // 2, 1), b - a), np.ones((1, 1))])
    big = _dp_em.fixed_point_rows(x.astype(np.float32))
    base = big[:n, 0] * 2.0**-_dp_em.FRAC_BITS
    b_fp, q_fp = float(np.mean(base)), float(np.mean(base * base))    # exact in float64
    one = _dp_em.Mixture(np.ones(1), np.zeros((1, 1)), np.eye(1)[None])
    stats = {present: _dp_em.sufficient_statistics(big, _dp_em.fixed_point_responsibilities(
        big, one, mask=np.arange(n + 1) < n + present)) for present in (0, 1)}   # (1, 3) each
    total = r_in + r_out
    cells = stats[0].size
    k_runs = jax.random.split(key)[1]
    w1, w2 = float(w[0]), float(w[1])
    scores = []
    for start in range(0, total, chunk):
        size = min(chunk, total - start)
        present = (np.arange(start, start + size) < r_in)[:, None, None]
        nums = np.where(present, stats[1], stats[0])                       # (size, 1, 3)
        released = _dp_em.release_statistics(nums, k_runs, step_sigma,
                                             offset=((j - 1) * total + start) * cells)
        mix = _dp_em.m_step(*_dp_em.unpack_statistics(released, 1))
        mu = mix.means[:, 0, 0]
        m2 = mix.covariances[:, 0, 0, 0] + mu * mu
        scores.append(n * (w1 * (mu - b_fp) + w2 * (m2 - q_fp)))
    s = np.concatenate(scores)
    return _finish("dp-em", claimed, delta, s[:r_in], s[r_in:], sigma, sigma * unit_noise, broken,
                   significance, t0, {"base_rows": n, "base_centre": b, "base_spread": a,
                                      "iterations": j, "components": 1, "dim": 1,
                                      "releases": 3 * j})


__all__ = [
    "HISTOGRAM_MECHANISMS",
    "MANY_RUN_BROKEN",
    "ManyRunBound",
    "ManyRunResult",
    "THRESHOLD_STEPS",
    "audit_dp_em",
    "audit_dpsgd_step",
    "audit_histograms",
    "audit_sanitizer",
    "epsilon_lower_bound_many_runs",
    "many_run_thresholds",
    "max_certifiable_epsilon_many_runs",
]
