"""The baselines' paper presets against ``dp_accounting`` called directly.

A preset fixes the paper's noise multiplier and a batch size; its step count must be the largest
whose epsilon under the paper's accounting (RDP, classic conversion eps = min_a r(a) +
log(1/delta)/(a - 1), computed here from the accountant's RDP vector) is at or below the paper's
epsilon for Adult's 32,561 training rows (Tantipongpipat et al. 2021).
"""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
from dp_accounting.rdp import RdpAccountant

from dpgen_jax import data, privacy

ADULT_N, DELTA = 32561, 1e-5


def classic_epsilon(q: float, sigma: float, steps: int, delta: float = DELTA) -> float:
    acc = RdpAccountant(list(privacy.RDP_ORDERS), dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps))
    orders, rdp = np.asarray(acc.orders), np.asarray(acc.rdp)
    return float(np.min(rdp + math.log(1.0 / delta) / (orders - 1.0)))


def check_paper_presets(cls, phase: str, expected: dict[str, tuple[float, float]]) -> None:
    """``expected``: preset name -> (the paper's noise multiplier, the paper's epsilon)."""
    assert set(cls.PRESETS) == set(expected)
    for name, (sigma, eps) in expected.items():
        plan = cls().plan(data.adult_schema(), ADULT_N, preset=name)
        (p,) = plan.phases
        assert p.name == phase and p.noise_multiplier == sigma
        assert p.sample_rate == cls.PRESETS[name]["batch_size"] / ADULT_N
        assert classic_epsilon(p.sample_rate, sigma, p.steps) <= eps, name
        assert classic_epsilon(p.sample_rate, sigma, p.steps + 1) > eps, name
        assert plan.epsilon("rdp", "classic") <= eps
        assert plan.epsilon() < plan.epsilon("rdp", "classic")  # PLD, reported beside it, is tighter
