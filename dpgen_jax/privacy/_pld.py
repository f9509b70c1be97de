"""dp_accounting's PLD accountant with a discretisation interval that grows with epsilon, memoised.

:class:`ScaledPLDAccountant` is the headline accountant of :func:`dpgen_jax.privacy.epsilon` and
:func:`dpgen_jax.privacy.calibrate` (``accountant="pld"``); :data:`PLD_EPSILON_MEMO` keeps its
evaluations. :func:`quiet_unconverged_orders` silences dp_accounting's per-order RDP warnings.

References:
    docs/privacy.md; dp_accounting's ``PLDAccountant``.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import threading
from collections.abc import Hashable
from typing import Any

import dp_accounting as dpa
from dp_accounting import privacy_accountant as _pa
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpgen_jax import _validate as _v

NeighboringRelation = dpa.NeighboringRelation

PLD_VALUE_DISCRETIZATION: float = 1e-4
"""Base ``value_discretization_interval`` of the PLD accountant (used as is for epsilon <= 1).

Measured on the three Adult settings of DP-auto-GAN (docs/dp-auto-gan.md; delta = 1e-5), against 1e-5 as the
reference (0.239666 / 0.357875 / 0.744331): 1e-4 gives 0.240690 / 0.358606 / 0.744729 (error
<= 1.1e-3, i.e. <= 0.43 %) in 0.05-0.26 s; 1e-3 gives 0.328592 / 0.426458 / 0.783685 (errors of
0.04-0.09, up to 37 %), so 1e-3 is not usable for these many-step, small-q, large-sigma phases.
See :func:`pld_discretization_interval` for how the interval grows with epsilon.
"""

_PLD_SCALE_CAP = 1e5
# A cheap grid for the rough epsilon that sets the PLD interval (about 10x cheaper than RDP_ORDERS).
_SCALE_ORDERS: tuple[float, ...] = (
    1.02, 1.05, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0,
    20.0, 24.0, 32.0, 40.0, 48.0, 64.0,
)


class _DropUnconvergedOrders(logging.Filter):
    """Drops dp_accounting's per-order "failed to converge ... Excluding this order" log lines.

    For large q or small sigma, dp_accounting's series for fractional orders close to 1 may not
    converge; the library then sets the RDP at that order to inf (the order is excluded, which is
    conservative) and logs one warning per order and per call. Calibration makes hundreds of such
    calls, so the lines are dropped while our own computations run; the values are unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("_compute_log_a_frac failed to converge")


@contextlib.contextmanager
def quiet_unconverged_orders():
    """Drops dp_accounting's unconverged-order log lines (:class:`_DropUnconvergedOrders`) in the block."""
    logger = logging.getLogger("absl")
    flt = _DropUnconvergedOrders()
    logger.addFilter(flt)
    try:
        yield
    finally:
        logger.removeFilter(flt)


def pld_discretization_interval(epsilon_scale: float) -> float:
    """The PLD discretisation interval used for a composition whose epsilon is about ``epsilon_scale``.

    ``PLD_VALUE_DISCRETIZATION * min(max(1, epsilon_scale), 1e5)``. dp_accounting discretises
    privacy losses pessimistically, so every interval gives a valid upper bound; the interval only
    trades tightness for time. The PLD's cost grows with the range of privacy losses divided by the
    interval, and its error shrinks relative to epsilon as epsilon grows, so an interval
    proportional to epsilon keeps both roughly constant. Measured (delta = 1e-5, error against
    interval 1e-5): ADULT settings (epsilon < 1) 1e-4 -> error <= 1.1e-3; N=30k, B=256, sigma=1.1,
    10k steps (epsilon 4.32) 4.3e-4 -> ~5e-4; assumed-accounting GS-WGAN K=1500, T=21k (epsilon 252.0) 0.028
    -> ~0.2 in 0.05 s, where the fixed 1e-4 takes ~15 s. The cap is that high because absurd
    schedules must stay computable: DP-SACTGAN's paper preset (one critic, 11,700 steps of 500 rows
    at sigma 1; epsilon about 3e6) needs 24 GB of memory with an interval capped at 0.1, and 0.26 GB
    and 0.01 s at 10 (PLD 2.98e6 against RDP 2.96e6). Much larger intervals overflow inside
    dp_accounting.

    Args:
        epsilon_scale: A rough epsilon of the composition; :func:`epsilon` and :func:`calibrate`
            use dp_accounting's RDP epsilon (improved conversion) over a coarse grid of 23 orders
            up to 64, which costs ~10 % of an RDP evaluation. inf or nan are treated as the cap.

    Returns:
        The ``value_discretization_interval`` to give ``PLDAccountant``.
    """
    scale = float(epsilon_scale)
    if not math.isfinite(scale):
        scale = _PLD_SCALE_CAP
    return PLD_VALUE_DISCRETIZATION * min(max(1.0, scale), _PLD_SCALE_CAP)


class EpsilonMemo:
    """A bounded memo (least recently used first out) of epsilon evaluations, safe across threads.

    Keys are hashable descriptions of an evaluation, values what it returned; ``maxsize`` bounds the
    entries kept, so memory stays bounded in a long-lived process.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = _v.whole(minimum=1, maxsize=maxsize)
        self._items: collections.OrderedDict = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any | None:
        """The value stored under ``key`` (now the most recently used), or None."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> Any:
        """Stores ``value`` under ``key``, dropping the least recently used entry when full;
        returns ``value``."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


PLD_EPSILON_MEMO = EpsilonMemo(maxsize=65_536)
"""Every PLD epsilon :class:`ScaledPLDAccountant` computed in this process, by the composed event's
``repr`` (every parameter of every event), the neighbouring relation, the fixed discretisation
interval (None: the rule of :func:`pld_discretization_interval`) and delta, with the interval the
evaluation used. Fits of one schedule calibrate the same noise again and again (a fit, the data-free
plan of the same configuration, the CLI's report), and each calibration is a bisection of PLD
convolutions; the memo spares the repeated ones. Results are unaffected: an evaluation is a
deterministic function of its key. At most 65,536 entries (a few hundred bytes to a few kilobytes
each: tens of megabytes at most; a test suite or a grid of plans fills thousands)."""


class ScaledPLDAccountant(_pa.PrivacyAccountant):
    """``PLDAccountant`` with the discretisation interval of :func:`pld_discretization_interval`.

    It collects the composed events and, at query time, estimates epsilon with a quick RDP pass
    (orders <= 64, improved conversion), picks the interval from that estimate (unless one was
    fixed) and runs dp_accounting's ``PLDAccountant`` on the whole composition. Used by both
    :func:`~dpgen_jax.privacy.epsilon` and :func:`~dpgen_jax.privacy.calibrate`, so a calibrated
    result re-evaluates to the same number. ``get_epsilon`` is memoised (:data:`PLD_EPSILON_MEMO`).
    """

    def __init__(self, neighboring_relation: NeighboringRelation, fixed_interval: float | None) -> None:
        super().__init__(neighboring_relation)
        self._fixed_interval = fixed_interval
        self._probe = PLDAccountant(neighboring_relation)
        self._events: list[dpa.DpEvent] = []
        self.last_interval: float | None = None

    def _maybe_compose(self, event: dpa.DpEvent, count: int, do_compose: bool):
        if not self._probe.supports(event):
            return _pa.PrivacyAccountant.CompositionErrorDetails(
                invalid_event=event, error_message="not supported by dp_accounting's PLDAccountant"
            )
        if do_compose:
            self._events.append(event if count == 1 else dpa.SelfComposedDpEvent(event, count))
        return None

    def _interval(self, scale_for_delta: float | None, scale: float | None) -> float:
        if self._fixed_interval is not None:
            return self._fixed_interval
        if scale is None:
            rdp = RdpAccountant(_SCALE_ORDERS, self.neighboring_relation)
            event = dpa.ComposedDpEvent(list(self._events))
            if rdp.supports(event):
                with quiet_unconverged_orders():
                    scale = rdp.compose(event).get_epsilon(scale_for_delta)
            else:
                scale = 1.0
        return pld_discretization_interval(scale)

    def _pld(self, interval: float) -> PLDAccountant:
        self.last_interval = interval
        acc = PLDAccountant(self.neighboring_relation, value_discretization_interval=interval)
        return acc.compose(dpa.ComposedDpEvent(list(self._events)))

    def get_epsilon(self, target_delta: float) -> float:
        """Epsilon at ``target_delta``, from :data:`PLD_EPSILON_MEMO` when this composition was
        evaluated before in this process (``last_interval`` is then the interval it used)."""
        key = (repr(dpa.ComposedDpEvent(list(self._events))), repr(self.neighboring_relation),
               self._fixed_interval, float(target_delta))
        hit = PLD_EPSILON_MEMO.get(key)
        if hit is None:
            eps = float(self._pld(self._interval(target_delta, None)).get_epsilon(target_delta))
            hit = PLD_EPSILON_MEMO.put(key, (eps, self.last_interval))
        eps, self.last_interval = hit
        return eps

    def get_delta(self, target_epsilon: float) -> float:
        return float(self._pld(self._interval(None, target_epsilon)).get_delta(target_epsilon))
