"""The sharded sanitiser phase (GS-WGAN, DP-SACTGAN's hook): K critics on secret shards, one drawn
per step, the generator's row gradients clipped and noised. Its proven (selection-conditioned)
bound is the headline; the assumed and paper accountings are printed beside it, labelled.

See docs/privacy.md and the mixture event in :mod:`dpgen_jax.privacy._sharded`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Literal

import dp_accounting as dpa

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._phases import NeighboringRelation, Phase
from dpgen_jax.privacy._sharded import MixtureAnalyticAccountant, ShardedMixtureDpEvent

ShardAccounting = Literal["proven", "assumed", "paper", "strict"]
SHARD_ACCOUNTINGS: tuple[str, ...] = ("proven", "assumed", "paper")
"""The accountings of :class:`ShardedSanitizerPhase`; ``"strict"`` is accepted as an alias of
``"assumed"`` (its name before the proven bound existed) and warns."""

ASSUMED_SHARD_SENTENCE = (
    "assumes each step's shard choice is fresh although critics keep state; not a proven bound"
)
"""The words that label every number computed with ``accounting="assumed"``."""

PAPER_RDP_ORDERS: tuple[float, ...] = tuple(float(a) for a in range(2, 257))
"""Integer orders 2..256, autodp's grid, used only for ``ShardedSanitizerPhase(accounting="paper")``."""


@dataclasses.dataclass(frozen=True)
class ShardedSanitizerPhase(Phase):
    """GS-WGAN-style generator training: K disjoint shards, one per step, sanitised rows.

    The dataset of ``dataset_size`` records is split into ``num_shards`` (K) disjoint shards, each
    with its own discriminator. Every step picks one shard uniformly at random, generates
    ``rows_per_step`` (B) rows, clips the gradient flowing from that discriminator into each row to
    L2 norm C and adds Gaussian noise with standard deviation ``2 * C * noise_multiplier`` per
    coordinate (per-row replacement sensitivity 2C, noise multiplier sigma relative to it).

    Three accountings (docs/privacy.md, "GS-WGAN and DP-SACTGAN: three numbers"):

    ``accounting="proven"`` (the default and the headline): the selection-conditioned bound. The
    adversary is shown every step's shard choice and the differing record's shard (both from
    data-independent randomness). A step on another shard then has the same output distribution
    under both neighbours; each of the c steps on the record's shard is dominated by one Gaussian
    of noise multiplier ``sigma / sqrt(B)`` whatever the discriminator's state (all B rows may
    move; no amplification within the shard is claimed); c ~ Binomial(T, 1/K). So
    ``delta(eps) = sum_c Binomial(c; T, 1/K) delta_Gauss(eps; mu_c)`` with
    ``mu_c^2 = c B / sigma^2`` plus the run's other Gaussian releases, computed exactly
    (:mod:`dpgen_jax.privacy._sharded`; event :class:`ShardedMixtureDpEvent`). It needs no
    assumption about the state the discriminators keep; it holds when no state is shared across
    shards and the discriminators are never released. Add/remove-one neighbours.

    ``accounting="assumed"`` (``"strict"`` is a warned alias): the number printed as the headline
    before the proven bound existed. Each step is treated as a fresh Poisson(1/K) subsample:
    ``SelfComposedDpEvent(PoissonSampledDpEvent(1/K, GaussianDpEvent(sigma / sqrt(B))), steps)``.
    It assumes each step's shard choice is fresh although critics keep state; not a proven bound: the discriminators' state carries a record into every later use of its shard.
    For K=1500, T=21,000, B=32, sigma=1.07 at delta 1e-5 it gives 252.0 where the proven bound
    gives 479.6.

    ``accounting="paper"`` reproduces the GS-WGAN / thesis number exactly (autodp's
    analytical moments accountant): each of the ``steps * B`` sanitised rows is treated as an
    independent release, each sampled without replacement (a shard of n = dataset_size // K
    records out of n * K; only the ratio 1/K matters) with a Gaussian of noise multiplier sigma,
    under replace-one neighbours; RDP over the integer orders 2..256 (``PAPER_RDP_ORDERS``) and
    the classic conversion. The event is ``SelfComposedDpEvent(SampledWithoutReplacementDpEvent(
    n * K, n, GaussianDpEvent(sigma)), steps * B)``. This is **not a sound bound**: the B rows of
    a step share one shard selection, but each gets its own subsampling coin. Use it only to show
    the published number. Paper mode is an RDP-only event and one evaluation takes ~10 s.

    Args:
        name: Name of the phase in the report.
        num_shards: Number K of disjoint shards (discriminators); an integer >= 1.
        steps: Number of generator steps T actually executed; an integer >= 0.
        rows_per_step: Generated rows B per step, each sanitised; an integer >= 1.
        noise_multiplier: Per-row noise multiplier sigma (noise std / per-row sensitivity);
            finite and > 0.
        dataset_size: Number N of records the shard size of the paper accounting refers to (public,
            as GS-WGAN assumes); an integer >= num_shards. The proven and assumed events do not
            depend on it.
        accounting: ``"proven"`` (headline), ``"assumed"`` or ``"paper"``.
        clip_norm: The per-row clip norm C of the sanitiser, when known; reported as a number, it
            does not enter the event.

    Raises:
        TypeError: If an argument has the wrong type.
        ValueError: If an argument is outside its range.

    Privacy:
        proven: a valid (eps, delta) bound under add/remove-one. assumed: valid only under the
        fresh-subsampling assumption. paper: unsound; comparison only.
    """
    KIND = "sharded-sanitizer"  # Phase.KIND, a ClassVar

    name: str
    num_shards: int
    steps: int
    rows_per_step: int
    noise_multiplier: float
    dataset_size: int
    accounting: ShardAccounting = "proven"
    clip_norm: float | None = None

    def __post_init__(self) -> None:
        _v.non_empty("ShardedSanitizerPhase", name=self.name)
        ctx = f"ShardedSanitizerPhase {self.name!r}"
        if self.clip_norm is not None:
            object.__setattr__(self, "clip_norm", _v.positive(ctx, clip_norm=self.clip_norm))
        object.__setattr__(self, "num_shards", _v.whole(ctx, minimum=1, num_shards=self.num_shards))
        object.__setattr__(self, "steps", _v.whole(ctx, minimum=0, steps=self.steps))
        object.__setattr__(self, "rows_per_step", _v.whole(ctx, minimum=1, rows_per_step=self.rows_per_step))
        object.__setattr__(
            self, "noise_multiplier", _v.positive(ctx, noise_multiplier=self.noise_multiplier)
        )
        n = _v.integral(ctx, dataset_size=self.dataset_size)
        if n < self.num_shards:
            raise ValueError(
                f"{ctx}: expected dataset_size to be an integer >= num_shards={self.num_shards} "
                f"(every shard needs a record), got {n}."
            )
        object.__setattr__(self, "dataset_size", n)
        if self.accounting == "strict":
            warnings.warn(
                f"{ctx}: accounting='strict' is now called 'assumed' ({ASSUMED_SHARD_SENTENCE}); "
                "the proven bound is accounting='proven', the default.", FutureWarning, stacklevel=3)
            object.__setattr__(self, "accounting", "assumed")
        if not isinstance(self.accounting, str) or self.accounting not in SHARD_ACCOUNTINGS:
            raise ValueError(
                f"{ctx}: expected accounting to be one of {list(SHARD_ACCOUNTINGS)}, "
                f"got {self.accounting!r}."
            )

    @property
    def sample_rate(self) -> float:
        """Probability 1/K that a given record's shard is queried in one step."""
        return 1.0 / self.num_shards

    @property
    def shard_size(self) -> int:
        """Records per shard used by the paper event, n = dataset_size // num_shards."""
        return self.dataset_size // self.num_shards

    @property
    def effective_noise_multiplier(self) -> float:
        """Noise multiplier of one step's joint B-row release, sigma / sqrt(B)."""
        return self.noise_multiplier / math.sqrt(self.rows_per_step)

    def event(self) -> dpa.DpEvent:
        """The proven, assumed or paper event described in the class docstring."""
        if self.steps == 0:
            return dpa.NoOpDpEvent()
        if self.accounting == "proven":
            return ShardedMixtureDpEvent(self.steps, self.sample_rate, self.effective_noise_multiplier)
        if self.accounting == "assumed":
            step = dpa.PoissonSampledDpEvent(
                self.sample_rate, dpa.GaussianDpEvent(self.effective_noise_multiplier)
            )
            return dpa.SelfComposedDpEvent(step, self.steps)
        n = self.shard_size
        row = dpa.SampledWithoutReplacementDpEvent(
            n * self.num_shards, n, dpa.GaussianDpEvent(self.noise_multiplier)
        )
        return dpa.SelfComposedDpEvent(row, self.steps * self.rows_per_step)

    @property
    def neighbouring_relation(self) -> NeighboringRelation:
        """Add/remove-one for proven and assumed, replace-one for paper."""
        if self.accounting == "paper":
            return NeighboringRelation.REPLACE_ONE
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def noise_multiplier_or_none(self) -> float:
        return self.noise_multiplier

    @staticmethod
    def row_sensitivity(clip_norm: float) -> float:
        """2C: two rows' gradients clipped to C differ by at most 2C (per-row replacement)."""
        return 2.0 * clip_norm

    @property
    def noise_sensitivity(self) -> float | None:
        """2C (:meth:`row_sensitivity`); None while the clip norm is unknown."""
        return None if self.clip_norm is None else self.row_sensitivity(self.clip_norm)

    def _no_noise_std(self) -> str:
        return f"ShardedSanitizerPhase {self.name!r} has no clip_norm yet, so no noise std."

    def unsupported_reason(self, accountant: str) -> str | None:
        if self.accounting == "paper" and accountant != "rdp":
            return ("The paper accounting is RDP-only (sampling without replacement under "
                    "replace-one); use accountant='rdp', conversion='classic'.")
        return None

    @property
    def rdp_orders(self) -> tuple[float, ...] | None:
        """:data:`PAPER_RDP_ORDERS` for the paper accounting, else None (the default grid)."""
        return PAPER_RDP_ORDERS if self.accounting == "paper" else None

    @property
    def exact_accountant(self) -> type | None:
        """The proven bound's exact accountant (:class:`MixtureAnalyticAccountant`) once it runs steps."""
        return MixtureAnalyticAccountant if self.accounting == "proven" and self.steps > 0 else None

    def assumed_accounting(self) -> tuple[ShardedSanitizerPhase, str] | None:
        """The proven phase with each step's shard choice assumed fresh, labelled."""
        if self.accounting != "proven":
            return None
        return dataclasses.replace(self, accounting="assumed"), ASSUMED_SHARD_SENTENCE

    def with_noise_multiplier(self, noise_multiplier: float) -> ShardedSanitizerPhase:
        return dataclasses.replace(self, noise_multiplier=noise_multiplier)

    def report_parameters(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "accounting": self.accounting,
            "num_shards": self.num_shards,
            "rows_per_step": self.rows_per_step,
            "noise_multiplier": self.noise_multiplier,
            "sample_rate": self.sample_rate,
        }
        if self.accounting == "paper":
            params["dataset_size"] = self.dataset_size
            params["shard_size"] = self.shard_size
            params["row_releases"] = self.steps * self.rows_per_step
        else:
            params["effective_noise_multiplier"] = self.effective_noise_multiplier
        if self.accounting == "assumed":
            params["assumption"] = ASSUMED_SHARD_SENTENCE
        params["clip_norm"] = self.clip_norm
        return params
