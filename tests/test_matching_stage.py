"""The neural generators' matching stage in their plans (docs/matching.md): on in the library's
configurations, off in every paper preset, refused with a preset, and accounted as one Gaussian
release of L2 sensitivity sqrt(d) held at its share while the rest is calibrated. The matching of
sampled rows is checked for every method by the contract (tests/_contract.py) and in
tests/test_one_way_matching.py."""

from __future__ import annotations

import math

import pytest

from dpgen_jax import data, privacy, synthesizers

NEURAL = ("dp-auto-gan", "dp-wgan", "dp-vae", "dp-syn", "gs-wgan", "dp-sactgan")
DELTA = 1e-5


@pytest.mark.parametrize("method", NEURAL)
def test_every_paper_preset_turns_the_stage_off(method):
    cls = synthesizers.get(method)
    assert cls.CONFIG().matching_share > 0  # on in the library's configuration
    for name, values in cls.PRESETS.items():
        family = values.get("family")
        schema = data.binary_schema(8) if family == "binary" else data.adult_schema()
        assert synthesizers.create(method).resolve_config(schema, name).matching_share == 0.0, name


def test_a_preset_with_the_stage_asked_for_is_refused():
    with pytest.warns(UserWarning, match="keeps the configured matching_share"):
        with pytest.raises(ValueError, match="matching_share=0.3 needs a target epsilon"):
            synthesizers.create("dp-vae", matching_share=0.3).plan(data.adult_schema(), 32_561,
                                                                     preset="paper-1.01")


@pytest.mark.parametrize("method", ["dp-auto-gan", "dp-syn", "dp-sactgan"])
def test_the_release_is_held_at_its_share_and_the_plan_meets_the_target(method):
    """dp_accounting directly: the one-way phase is a Gaussian of sensitivity sqrt(d) with d the
    Adult schema's columns (one histogram each), alone at share * epsilon; the composed plan meets
    epsilon."""
    import dp_accounting as dpa

    plan = synthesizers.create(method, **synthesizers.get(method).SMOKE).plan(data.adult_schema(), 5_000,
                                                                              epsilon=1.0)
    one = plan.phase("one-way")
    assert one.sensitivity == pytest.approx(math.sqrt(len(data.adult_schema().columns)))
    acct = dpa.pld.PLDAccountant().compose(dpa.GaussianDpEvent(one.noise_multiplier))
    share = plan.config.matching_share
    assert acct.get_epsilon(DELTA) == pytest.approx(share * 1.0, rel=2e-3)
    assert 0.99 <= plan.epsilon() <= 1.0


def test_share_zero_plans_exactly_the_methods_own_phases():
    off = synthesizers.create("dp-auto-gan", matching_share=0.0).plan(data.adult_schema(), 32_561, epsilon=1.0)
    on = synthesizers.create("dp-auto-gan").plan(data.adult_schema(), 32_561, epsilon=1.0)
    assert [p.name for p in off.phases] == ["autoencoder", "critic"]
    assert [p.name for p in on.phases] == ["autoencoder", "critic", "one-way"]
    # the training phases get less of the budget: more noise than without the stage
    for a, b in zip(off.phases, on.phases[:2], strict=True):
        assert b.noise_multiplier > a.noise_multiplier
    assert privacy.epsilon(list(on.phases[:2]), DELTA) < off.epsilon()


def test_bad_shares_are_refused_by_name():
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="matching_share"):
            synthesizers.create("dp-vae", matching_share=bad)
    with pytest.raises(ValueError, match="matching_bins"):
        synthesizers.create("dp-vae", matching_bins=1)
