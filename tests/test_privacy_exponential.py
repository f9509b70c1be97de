"""The exponential-mechanism phase: its zCDP event, RDP-only accounting, calibration and report."""

from __future__ import annotations

import json
import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpgen_jax import privacy
from dpgen_jax.privacy import ExponentialMechanismPhase, GaussianPhase

DELTA = 1e-5


def _mst_like(sigma=5.0, d=13):
    return [GaussianPhase("one_way", sigma, 1, sensitivity=math.sqrt(d)),
            ExponentialMechanismPhase.from_noise_multiplier("selection", sigma * math.sqrt(d - 1), d - 1, 1.0),
            GaussianPhase("two_way", sigma, 1, sensitivity=math.sqrt(d - 1))]


def test_event_is_the_bounded_range_zcdp_bound():
    p = ExponentialMechanismPhase("sel", epsilon=0.3, steps=7, sensitivity=1.0)
    assert p.event() == dpa.SelfComposedDpEvent(dpa.ZCDpEvent(0.3**2 / 8), 7)
    assert p.rho == pytest.approx(0.01125) and p.noise_multiplier == pytest.approx(2 / 0.3)
    assert ExponentialMechanismPhase("sel", 0.3, 0).event() == dpa.NoOpDpEvent()
    q = ExponentialMechanismPhase.from_noise_multiplier("sel", 4.0, 2)
    # Same zCDP cost as a Gaussian of noise multiplier 4: rho = 1 / (2 * 16).
    assert q.epsilon == 0.5 and q.rho == pytest.approx(1 / 32)


def test_rdp_epsilon_equals_dp_accounting_composed_directly():
    phases = _mst_like()
    acc = RdpAccountant(list(privacy.RDP_ORDERS), dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc.compose(dpa.GaussianDpEvent(5.0)).compose(dpa.GaussianDpEvent(5.0))
    eps_sel = 2.0 / (5.0 * math.sqrt(12))
    acc.compose(dpa.ZCDpEvent(eps_sel**2 / 8), 12)
    assert privacy.epsilon(phases, DELTA, accountant="rdp") == pytest.approx(acc.get_epsilon(DELTA), rel=1e-12)
    # zCDP adds up: the total is 3 * 1/(2 sigma^2) (the Gaussians' RDP is alpha / (2 sigma^2)).
    rho = 2 / (2 * 25.0) + 12 * eps_sel**2 / 8
    assert rho == pytest.approx(3 / 50)


def test_pld_refuses_and_the_report_says_why():
    phases = _mst_like()
    assert not privacy.pld_supported(phases) and privacy.pld_supported(phases[:1])
    assert not PLDAccountant().supports(phases[1].event())
    with pytest.raises(ValueError, match=r"does not support phase 'selection'.*use accountant='rdp'"):
        privacy.epsilon(phases, DELTA)
    rep = privacy.report(phases, DELTA, accountant="rdp")
    json.dumps(rep, allow_nan=False)
    assert rep["epsilon_by_accountant"]["pld"] is None
    assert rep["epsilon"] == rep["epsilon_by_accountant"]["rdp_improved"]
    sel = rep["phases"][1]
    assert sel["mechanism"] == "exponential_mechanism" and sel["steps"] == 12
    assert sel["sensitivity"] == 1.0 and sel["rho_per_step"] == pytest.approx(sel["epsilon_per_step"] ** 2 / 8)
    assert any("Cesar and Rogers" in a and "PLD epsilon is not reported" in a for a in rep["assumptions"])


def test_calibration_keeps_the_zcdp_split():
    phases = _mst_like(sigma=1.0)
    out = privacy.calibrate(phases, 1.0, DELTA, accountant="rdp")
    eps = privacy.epsilon(out, DELTA, accountant="rdp")
    assert 0.999 < eps <= 1.0
    rhos = [1 / (2 * out[0].noise_multiplier**2), out[1].steps * out[1].rho, 1 / (2 * out[2].noise_multiplier**2)]
    np.testing.assert_allclose(rhos, [rhos[0]] * 3, rtol=1e-9)


def test_rdp_curve_is_rho_times_the_order():
    """The event's RDP is exactly the zCDP line rho * alpha (nothing looser, nothing tighter)."""
    p = ExponentialMechanismPhase("s", 0.8, 1)
    orders, rdp = privacy.rdp_curve([p])
    np.testing.assert_allclose(rdp, p.rho * orders, rtol=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(name="", epsilon=1.0), "name"),
    (dict(name="s", epsilon=0.0), "epsilon"),
    (dict(name="s", epsilon=math.inf), "epsilon"),
    (dict(name="s", epsilon=1.0, steps=-1), "steps"),
    (dict(name="s", epsilon=1.0, sensitivity=0.0), "sensitivity"),
])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ExponentialMechanismPhase(**kwargs)
