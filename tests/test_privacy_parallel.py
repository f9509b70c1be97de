"""privacy.ParallelPhases: parallel composition over disjoint groups (add/remove-one).

Oracle: dp_accounting called directly on each group's composition, then the maximum; the group
numbers are the DP-SYN Adult example of Abay et al. (2018) as accounted with dp_accounting.
"""

from __future__ import annotations

import dp_accounting as dpa
import pytest
from dp_accounting.pld import PLDAccountant
from dp_accounting.rdp import RdpAccountant

from dpgen_jax import privacy
from dpgen_jax.privacy import DPSGDPhase, GaussianPhase, ParallelPhases

DELTA = 1e-5


def _ae(group, n, sigma, batch=64, epochs=10):
    return DPSGDPhase(f"autoencoder/{group}", batch / n, sigma, int(epochs * n / batch))


def _run(sigma_big=1.1, sigma_small=1.1, em=33.846):
    counts = GaussianPhase("counts", 20.0, 1, sensitivity=1.0)
    groups = ParallelPhases("groups", (
        ("<=50K", (_ae("<=50K", 23_809, sigma_big), GaussianPhase("em/<=50K", em, 70))),
        (">50K", (_ae(">50K", 7_845, sigma_small), GaussianPhase("em/>50K", em, 70)))))
    return [counts, groups]


def _direct(phases, accountant):
    acc = (RdpAccountant(list(privacy.RDP_ORDERS)) if accountant == "rdp"
           else PLDAccountant(value_discretization_interval=1e-4))
    return acc.compose(dpa.ComposedDpEvent([p.event() for p in phases])).get_epsilon(DELTA)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_epsilon_is_the_maximum_over_groups_of_the_composition_with_the_shared_phases(accountant):
    counts, groups = _run()
    per_group = {g: _direct([counts, *inner], accountant) for g, inner in groups.groups}
    got = privacy.epsilon([counts, groups], DELTA, accountant=accountant)
    assert got == pytest.approx(max(per_group.values()), rel=5e-3)
    assert per_group[">50K"] > per_group["<=50K"]  # the smaller group has the larger rate
    sequential = _direct([counts, *groups.inner], accountant)
    assert got < sequential


def test_the_published_example_of_the_dpsyn_groups():
    # AE alone (10 epochs, B = 64, sigma 1.1) and with a Park-style DP-EM (70 Gaussian releases,
    # z = 33.846), RDP with the improved conversion: 0.905 / 1.302 and 1.526 / 1.835.
    assert privacy.epsilon([_ae("a", 23_809, 1.1)], DELTA, "rdp") == pytest.approx(0.905, abs=2e-3)
    assert privacy.epsilon([_ae("b", 7_845, 1.1)], DELTA, "rdp") == pytest.approx(1.526, abs=2e-3)
    groups = ParallelPhases("groups", (
        ("a", (_ae("a", 23_809, 1.1), GaussianPhase("em/a", 33.846, 70))),
        ("b", (_ae("b", 7_845, 1.1), GaussianPhase("em/b", 33.846, 70)))))
    assert privacy.epsilon([groups], DELTA, "rdp") == pytest.approx(1.835, abs=3e-3)


def test_report_lists_every_group_and_says_how_they_compose():
    counts, groups = _run()
    rep = privacy.report([counts, groups], DELTA)
    entry = rep["phases"][1]
    assert entry["mechanism"] == "parallel_composition" and entry["groups"][0]["group"] == "<=50K"
    eps = [g["epsilon"] for g in entry["groups"]]
    assert rep["epsilon"] == pytest.approx(max(eps), rel=1e-9)
    assert [p["name"] for p in entry["groups"][1]["phases"]] == ["autoencoder/>50K", "em/>50K"]
    assert any("in parallel" in s for s in rep["assumptions"])
    assert any("DP-SGD phases ['autoencoder/<=50K', 'autoencoder/>50K']" in s for s in rep["assumptions"])


def test_calibrate_meets_the_target_in_every_group():
    counts, groups = _run()
    out = privacy.calibrate([counts, groups], 1.0, DELTA, fixed=["counts", "em/<=50K", "em/>50K"])
    assert out[0] == counts
    new = out[1]
    sigmas = {g: inner[0].noise_multiplier for g, inner in new.groups}
    assert sigmas[">50K"] > sigmas["<=50K"]  # the smaller group needs more noise
    for g, inner in new.groups:
        assert inner[1] == dict(groups.groups)[g][1]  # DP-EM held fixed
        eps = _direct([counts, *inner], "pld")
        assert 1.0 - 5e-3 <= eps <= 1.0 + 5e-3, (g, eps)
    assert privacy.epsilon(out, DELTA) <= 1.0


def test_bad_uses_are_refused():
    counts, groups = _run()
    with pytest.raises(ValueError, match="held fixed"):
        privacy.calibrate([counts, groups], 1.0, DELTA)
    with pytest.raises(ValueError, match="at most one ParallelPhases"):
        privacy.epsilon([groups, ParallelPhases("again", (("x", (counts,)),))], DELTA)
    with pytest.raises(ValueError, match="appears twice"):
        ParallelPhases("g", (("a", (counts,)), ("b", (counts,))))
    with pytest.raises(ValueError, match="add/remove-one only"):
        ParallelPhases("g", (("a", (privacy.ShardedSanitizerPhase(
            "s", num_shards=2, steps=10, rows_per_step=4, noise_multiplier=1.0, dataset_size=100,
            accounting="paper"),)),))
    with pytest.raises(ValueError, match="no single event"):
        privacy.composed_event([groups])
    with pytest.raises(TypeError, match="no single dp_accounting event"):
        groups.event()
