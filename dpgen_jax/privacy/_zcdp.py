"""The zCDP accounting of the marginal methods' papers (MST, AIM, GEM), beside the headline.

* :func:`zcdp_rho`: the zCDP of exponential-mechanism and Gaussian phases, summed (zCDP composes by
  adding rho).
* :func:`cks_epsilon`: rho-zCDP converted to (epsilon, delta) by Canonne, Kamath and Steinke (2020,
  Prop. 12), minimised over real orders as the MST and AIM reference code does. The conversion at
  one order is dp_accounting's own (``rdp.compute_epsilon`` of the RDP curve rho * alpha, its
  "improved" conversion, the same proposition); only the minimisation over real rather than listed
  orders is done here.

References:
    docs/mst.md, docs/aim.md; Bun and Steinke (2016), "Concentrated Differential Privacy";
    Canonne, Kamath and Steinke (2020), "The Discrete Gaussian for Differential Privacy".
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from dp_accounting.rdp import compute_epsilon
from scipy import optimize

from dpgen_jax.privacy._exponential import ExponentialMechanismPhase
from dpgen_jax.privacy._phases import Phase


def zcdp_rho(phases: Iterable[Phase]) -> float:
    """The summed zCDP of exponential-mechanism and Gaussian phases (rho = 1 / (2 sigma^2) per
    Gaussian release, sigma its noise multiplier; the phase's rho per selection), times their steps.

    Example:
        >>> from dpgen_jax import privacy
        >>> zcdp_rho([privacy.GaussianPhase("measure", 1.0, 2, sensitivity=1.0)])
        1.0
    """
    return sum(p.steps * (p.rho if isinstance(p, ExponentialMechanismPhase)
                          else 1.0 / (2.0 * p.noise_multiplier**2)) for p in phases)


def cks_epsilon(rho: float, delta: float) -> float:
    """rho-zCDP to (epsilon, delta) by Canonne, Kamath and Steinke (2020, Prop. 12), minimised over
    real orders alpha > 1 (the conversion of the MST and AIM reference code).

    At each order it is dp_accounting's ``compute_epsilon`` of the RDP value ``rho * alpha`` (which
    is 0 where the KL bound already gives delta, never negative); the order is found by a bounded
    scalar search over ``log(alpha - 1)`` in [-10, 10].
    """
    def eps(log_am1):
        a = 1.0 + math.exp(log_am1)
        return compute_epsilon([a], [rho * a], delta)[0]
    res = optimize.minimize_scalar(eps, bounds=(-10.0, 10.0), method="bounded", options={"xatol": 1e-10})
    return float(res.fun)
