"""Independent noisy marginals: every column's histogram with Gaussian noise, columns sampled
independently. The reference floor of the benchmark (``docs/independent.md``).

One mechanism touches the private rows: the d one-way histograms of the table (discrete columns
over the schema's categories, continuous columns over public bins from the schema bounds,
``data.Discretizer``) are released together with Gaussian noise. Adding or removing one record
changes one cell of every histogram by one, so the joint release has L2 sensitivity sqrt(d), and
the noise standard deviation per cell is ``noise_multiplier * sqrt(d)``. Calibration, the PLD
headline and the report are the toolkit's defaults. The mechanism and its post-processing are the
shared one-way release (``synthesizers._one_way``, also GEM's first measurement and the neural
generators' matching stage). Sampling projects each noisy histogram onto the probability
simplex (``_one_way.probabilities``) and draws every column independently; a continuous value is drawn
uniformly inside its bin. Joint structure is lost by design: any joint model should beat this
method on joint metrics (label accuracy, 3-way marginals, TSTR).

Functional API: :func:`discretizer`, :func:`privacy_phases` (given d, the number of histograms:
``len(discretizer(config, schema).sizes)``), :func:`release_histograms`, :func:`probabilities`,
:func:`sample_codes`. Class API: :class:`Independent`
(``synthesizers.create("independent")``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence

import jax
import numpy as np

from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy
from dpgen_jax.data._discrete import SPACINGS
from dpgen_jax.synthesizers import _one_way
from dpgen_jax.synthesizers._base import Synthesizer, Release, register
from dpgen_jax.synthesizers._marginal import MarginalConfig, discretizer
from dpgen_jax.synthesizers._one_way import probabilities, release_histograms

PHASE = "histograms"


@dataclasses.dataclass(frozen=True)
class IndependentConfig(MarginalConfig):
    """Hyperparameters of the independent-marginals reference (all public).

    Attributes:
        bins: public bins per continuous column (``data.Discretizer``; integer columns keep the
            bins that hold an integer).
        bin_spacing: ``"auto"`` (log-spaced for a column declared ``scale="log"`` or bounds from >= 0
            reaching 1,000 x max(lower, 1), else equal; ``data.auto_spacing``), ``"equal"`` or ``"log"``.
        noise_multiplier: noise standard deviation over the L2 sensitivity sqrt(d), d the number
            of histograms released (one per column of the schema, ``len(discretizer(config,
            schema).sizes)``: a continuous column declared missing has one histogram over its bins
            and a missing code); the configured value a calibration to a target epsilon starts
            from (the plan's phase carries the calibrated one).
    """


    bins: int = 100
    bin_spacing: str = "auto"
    noise_multiplier: float = 1.0

    def validate(self) -> IndependentConfig:
        _v.whole(minimum=1, bins=self.bins)
        _v.one_of(SPACINGS, bin_spacing=self.bin_spacing)
        _v.positive(noise_multiplier=self.noise_multiplier)
        return self


def privacy_phases(config: IndependentConfig, d: int, *, steps: Mapping[str, int] | None = None,
                   private: bool = True) -> list:
    """One Gaussian release of the ``d`` histograms (L2 sensitivity sqrt(d); d is
    ``len(discretizer(config, schema).sizes)``), or a non-private phase."""
    d = _v.whole(minimum=1, d=d)
    n = dict(steps or {}).get(PHASE, 1)
    if not private:
        return [privacy.NonPrivatePhase(PHASE, n)]
    return [dataclasses.replace(_one_way.phase(PHASE, d, noise_multiplier=config.noise_multiplier), steps=n)]


def draw_codes(p: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``(n,)`` codes drawn i.i.d. from the probabilities ``p`` (inverse CDF of ``n`` uniforms;
    a code of probability 0 is never drawn)."""
    cdf = np.cumsum(np.asarray(p, np.float64))
    return np.minimum(np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right"), cdf.size - 1)


def sample_codes(probs: Sequence[np.ndarray], n: int, key: jax.Array) -> np.ndarray:
    """``(n, d)`` codes, column j drawn i.i.d. from ``probs[j]`` independently of the others."""
    rng = dpsgd.host_rng(key)
    out = np.empty((n, len(probs)), dtype=np.int64)
    for j, p in enumerate(probs):
        out[:, j] = draw_codes(p, n, rng)
    return out


@register
class Independent(Synthesizer):
    """Independent noisy one-way marginals with a scikit-learn-like interface.

    Example:
        >>> model = Independent().fit(train_df, data.adult_schema(), epsilon=1.0)  # doctest: +SKIP
        >>> model.sample(1000)                                                     # doctest: +SKIP
    """

    METHOD = "independent"
    DESCRIPTION = ("Every column's histogram with Gaussian noise (continuous columns on public bins), "
                   "columns sampled independently: the reference floor")
    CONFIG = IndependentConfig
    SMOKE = dict(bins=16)
    USES_NUM_RECORDS = False
    RELEASES_ONE_WAY = True  # its rows are drawn from the released one-way marginals

    def _phases(self, config, schema, num_records, private):
        # d: the histograms of the schema (a column declared missing is one histogram)
        return privacy_phases(config, len(discretizer(config, schema).sizes), private=private)

    def _paper_accounting(self, config, phases, delta, report):
        return {"label": "none: a reference method without a paper of its own", "epsilon": None}

    def _train(self, plan, x, key, hooks) -> Release:
        config = plan.config
        t0 = time.perf_counter()
        disc = discretizer(config, plan.model_schema)
        codes = disc.codes_from_encoded(x)
        std = plan.phase(PHASE).noise_std if plan.private else None
        counts = release_histograms(codes, disc.sizes, std, key)
        jax.block_until_ready(counts)
        notes = [
            f"Continuous columns are counted on public bins from the schema bounds ({disc.describe()}); "
            "discrete columns over the schema's categories.",
            "Released: the noisy counts of every histogram. Sampling post-processes them: each "
            "histogram is projected onto the probability simplex (shifted by one amount and clipped "
            "at 0 to keep its noisy total, then normalised), columns are drawn independently, and a "
            "continuous value uniformly inside its bin.",
        ]
        return Release(arrays={"counts": counts}, steps={PHASE: 1},
                           seconds={PHASE: time.perf_counter() - t0}, notes=tuple(notes))

    def _sample_frame(self, n, key, mode):
        k_codes, k_values = jax.random.split(key)
        codes = sample_codes(probabilities(self.released["counts"]), n, k_codes)
        return discretizer(self.fitted_config, self.model_schema).decode(codes, k_values)

    def _release_shapes(self, config, schema, statistics):
        sizes = discretizer(config, schema).sizes
        return {"counts": {str(j): jax.ShapeDtypeStruct((k,), np.int64) for j, k in enumerate(sizes)}}
