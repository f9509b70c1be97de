"""The RDP accountants every method's ``accountant="rdp"`` uses, and the papers' classic conversion.

* :class:`MixtureRdpAccountant`: dp_accounting's ``RdpAccountant`` that also composes the sharded
  phases' :class:`~dpgen_jax.privacy._sharded.ShardedMixtureDpEvent` (its RDP is
  :func:`~dpgen_jax.privacy._sharded.mixture_rdp`), keeping the RDP of each (subsampled) Gaussian
  event per process. It is the RDP accountant of every run, sharded or not.
* :func:`classic_conversion` and :class:`ClassicRdpAccountant`: the classic RDP-to-DP conversion
  (Mironov 2017, Prop. 3) that DP-auto-GAN and GS-WGAN used, applied to the accountant's own RDP
  vector; dp_accounting's ``get_epsilon`` uses the tighter "improved" conversion.

References:
    docs/privacy.md; Mironov (2017), "Renyi Differential Privacy".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import dp_accounting as dpa
import numpy as np
from dp_accounting import privacy_accountant as _pa
from dp_accounting.rdp import RdpAccountant

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._sharded import ShardedMixtureDpEvent, mixture_rdp

NeighboringRelation = dpa.NeighboringRelation


_GAUSSIAN_LEAVES = (dpa.GaussianDpEvent, dpa.PoissonSampledDpEvent, dpa.SampledWithoutReplacementDpEvent)


@functools.lru_cache(maxsize=4096)
def _leaf_rdp(event: dpa.DpEvent, orders: tuple[float, ...], relation: NeighboringRelation) -> np.ndarray:
    """dp_accounting's RDP of one ``event`` at ``orders`` (read-only): ``count`` repetitions add
    ``count`` times it, as ``RdpAccountant`` adds them, so a cached value composes to the same bits."""
    rdp = RdpAccountant(list(orders), relation).compose(event)._rdp
    rdp.setflags(write=False)
    return rdp


class MixtureRdpAccountant(RdpAccountant):
    """dp_accounting's ``RdpAccountant`` that also composes :class:`ShardedMixtureDpEvent`.

    The mixture's RDP at order a is :func:`mixture_rdp` (exact, every c in 0..T); ``count``
    independent repetitions add up like any RDP. Every other event is dp_accounting's own; the
    RDP of a (subsampled) Gaussian event is kept per event and orders in this process
    (``_leaf_rdp``): a report recomputed for fewer executed steps, or the paper accounting of
    GS-WGAN (sampling without replacement over 255 integer orders, seconds per event), reuses it.
    """

    def _maybe_compose(self, event: dpa.DpEvent, count: int, do_compose: bool):
        if isinstance(event, ShardedMixtureDpEvent):
            if self._neighboring_relation != NeighboringRelation.ADD_OR_REMOVE_ONE:
                return _pa.PrivacyAccountant.CompositionErrorDetails(
                    invalid_event=event, error_message="the sharded mixture is stated under add/remove-one")
            if do_compose and event.steps > 0:
                self._rdp += count * mixture_rdp(self._orders, event)
            return None
        if isinstance(event, dpa.SelfComposedDpEvent):
            return self._maybe_compose(event.event, event.count * count, do_compose)
        if isinstance(event, dpa.ComposedDpEvent):
            for e in event.events:
                result = self._maybe_compose(e, count, do_compose)
                if result is not None:
                    return result
            return None
        if isinstance(event, _GAUSSIAN_LEAVES):
            error = super()._maybe_compose(event, count, do_compose=False)
            if error is None and do_compose:
                self._rdp += count * _leaf_rdp(event, tuple(float(a) for a in self._orders),
                                               self._neighboring_relation)
            return error
        return super()._maybe_compose(event, count, do_compose)


def classic_conversion(orders: Sequence[float], rdp: Sequence[float], delta: float) -> tuple[float, float]:
    """The classic RDP-to-DP conversion: epsilon = min over orders of r(a) + log(1/delta) / (a - 1).

    This is the conversion of Mironov (2017, Prop. 3) used by DP-auto-GAN and GS-WGAN (autodp);
    ``dp_accounting``'s ``RdpAccountant.get_epsilon`` uses the tighter "improved" conversion.

    Args:
        orders: RDP orders, each > 1, shape (k,).
        rdp: RDP values at those orders (may contain inf), shape (k,).
        delta: Target delta in (0, 1).

    Returns:
        ``(epsilon, optimal_order)``; epsilon is inf if every RDP value is inf.

    Raises:
        ValueError: If the shapes differ, an order is <= 1, or delta is outside (0, 1).
    """
    d = _v.fraction(delta=delta)
    a = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    if a.ndim != 1 or a.shape != r.shape or a.size == 0:
        raise ValueError(f"classic_conversion: orders and rdp have shapes {a.shape} and {r.shape}; give "
                         "two 1-D sequences of one non-zero length (one RDP value per order).")
    if np.any(a <= 1.0):
        raise ValueError(f"classic_conversion: got min(orders)={a.min()}; give every order > 1 (Renyi "
                         "orders of a conversion lie above 1).")
    eps = r + math.log(1.0 / d) / (a - 1.0)
    i = int(np.argmin(eps))
    return float(eps[i]), float(a[i])


class ClassicRdpAccountant(MixtureRdpAccountant):
    """``RdpAccountant`` whose ``get_epsilon`` applies the classic conversion to its RDP vector."""

    def get_epsilon_and_optimal_order(self, target_delta: float) -> tuple[float, float]:
        return classic_conversion(self.orders, self.rdp, target_delta)

    def get_epsilon(self, target_delta: float) -> float:
        return self.get_epsilon_and_optimal_order(target_delta)[0]
