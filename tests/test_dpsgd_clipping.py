"""Per-example clipped gradient sums against a plain Python loop over examples.

The oracle is the definition (``tests/_clipping.py``): for each kept example i, g_i = jax.grad of
the single-example loss (batch of one row), c_i = min(1, C / ||g_i||) over all parameters, and the
result is sum_i c_i g_i, accumulated in float64 in Python. Both ``method="ghost"`` and
``method="vmap"`` must equal it on networks with Dense (with and without bias) and LayerNorm,
networks called twice per example, two sub-modules of one model, frozen networks around the trained
one, token inputs, masks and clip norms that clip every example, about half, or none. Then the
privacy property itself: adding or removing one (adversarial) row moves the sum by at most C, also
in floating point where calls of one layer nearly cancel. What the ghost rules do not cover is in
``tests/test_dpsgd_clipping_fallback.py``.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpgen_jax import dpsgd
from tests._clipping import (
    ALL,
    CASES,
    GROUPED,
    MASK,
    B,
    clip_norms,
    clipped,
    close,
    flat64,
    loop_clipped_sum,
    normal,
    prepared,
    rng,
)
from tests._compile import FAST_COMPILE


# --------------------------------------------------------------------------------------------
# Equality with the loop
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, method",
    [(n, "ghost") for n in CASES]
    + [(n, "vmap") for n in ("dense_layernorm", "critic_twice")]
    + [(n, "map") for n in ("dense_layernorm", "critic_twice")]
    + [("penalty_and_classifier", GROUPED), ("penalty_and_classifier", {"critic": "vmap", "aux": "vmap"}),
       ("penalty_and_classifier", {"critic": "map", "aux": "ghost"}), ("penalty_and_classifier", "vmap")],
)
def test_clipped_sum_equals_per_example_loop(name, method):
    prep = prepared(name)
    for label, clip_norm in clip_norms(prep.norms).items():
        for mask in (ALL, MASK):
            got, aux = clipped(prep, method, clip_norm, mask)
            close(got, loop_clipped_sum(prep.grads, prep.norms, clip_norm, mask), clip_norm)
            np.testing.assert_allclose(aux["norms"], np.where(mask, prep.norms, 0.0),
                                       rtol=2e-4, atol=1e-6)
            factors = np.where(mask, np.minimum(1.0, clip_norm / prep.norms), 0.0)
            np.testing.assert_allclose(np.asarray(aux["clip_factors"]), factors, rtol=2e-4)
            assert np.all(np.asarray(aux["losses"])[~mask] == 0.0)
            if label == "tiny":
                assert np.all(np.asarray(aux["clip_factors"])[mask] < 1e-2)
            if label == "huge":
                np.testing.assert_allclose(np.asarray(aux["clip_factors"])[mask], 1.0)


def test_clip_norm_argument_and_mask_none():
    # The same check without the scaling device: the clip norm as given, and mask=None.
    method = "ghost"
    prep = prepared("dense_layernorm")
    cs = clip_norms(prep.norms)

    def both(p, b, m):
        a = dpsgd.clipped_grad_sum(prep.loss, cs["tiny"], method=method)(p, b, None)
        c = dpsgd.clipped_grad_sum(prep.loss, cs["medium"], method=method)(p, b, m)
        return a[0], c[0]

    fn = jax.jit(both, compiler_options=FAST_COMPILE)
    tiny, medium = fn(prep.params, prep.batch, jnp.asarray(MASK))
    close(tiny, loop_clipped_sum(prep.grads, prep.norms, cs["tiny"], None), cs["tiny"])
    close(medium, loop_clipped_sum(prep.grads, prep.norms, cs["medium"], MASK), cs["medium"])


@pytest.mark.parametrize("sequential", [False, True])
def test_per_example_grads_match_loop(sequential):
    prep = prepared("critic_twice")
    losses, grads = jax.jit(lambda p, b: dpsgd.per_example_grads(prep.loss, p, b, sequential=sequential),
                           compiler_options=FAST_COMPILE)(
        prep.params, prep.batch)
    flat = np.concatenate([np.asarray(g, np.float64).reshape(B, -1)
                           for g in jax.tree_util.tree_leaves(grads)], axis=1)
    np.testing.assert_allclose(flat, prep.grads, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(losses), np.asarray(prep.loss(prep.params, prep.batch)),
                               rtol=1e-5, atol=1e-6)


def test_per_example_grads_sequential_with_mask_computes_only_kept_rows():
    # The loop visits the kept rows (MASK keeps rows that are not a prefix) and no other: each
    # kept row's loss and gradient are the loop's, a masked row's are exactly 0, even if it is NaN.
    prep = prepared("critic_twice")
    bad = jax.tree_util.tree_map(np.copy, prep.batch)
    for leaf in jax.tree_util.tree_leaves(bad):
        leaf[~MASK] = np.nan
    visited = []

    def counted(p, b):
        jax.debug.callback(lambda: visited.append(1))
        return prep.loss(p, b)

    losses, grads = jax.jit(lambda p, b, m: dpsgd.per_example_grads(counted, p, b, sequential=True, mask=m),
                            compiler_options=FAST_COMPILE)(prep.params, bad, jnp.asarray(MASK))
    jax.effects_barrier()
    assert len(visited) == int(MASK.sum())
    flat = np.concatenate([np.asarray(g, np.float64).reshape(B, -1)
                           for g in jax.tree_util.tree_leaves(grads)], axis=1)
    np.testing.assert_allclose(flat[MASK], prep.grads[MASK], rtol=1e-4, atol=1e-6)
    assert np.all(flat[~MASK] == 0.0) and np.all(np.asarray(losses)[~MASK] == 0.0)
    np.testing.assert_allclose(np.asarray(losses)[MASK],
                               np.asarray(prep.loss(prep.params, prep.batch))[MASK], rtol=1e-5, atol=1e-6)


def test_clip_factors_definition():
    sq = jnp.array([0.0, 0.25, 1.0, 4.0, 100.0])
    np.testing.assert_allclose(np.asarray(dpsgd.clip_factors(sq, 1.0, None)),
                               [1.0, 1.0, 1.0, 0.5, 0.1], rtol=1e-6)
    mask = jnp.array([True, False, True, False, True])
    np.testing.assert_allclose(np.asarray(dpsgd.clip_factors(sq, 1.0, mask)),
                               [1.0, 0.0, 1.0, 0.0, 0.1], rtol=1e-6)


@pytest.mark.parametrize("method", ["ghost", "vmap", "map"])
def test_all_rows_masked_gives_exact_zero(method):
    got, _ = clipped(prepared("dense_layernorm"), method, 1.0, np.zeros(B, bool))
    assert np.all(got == 0.0)


@pytest.mark.parametrize("method", ["ghost", "vmap", "map"])
def test_masked_rows_with_large_values_add_exactly_zero(method):
    # Padded slots hold real (other) records; whatever they hold, masked rows must add exactly 0.
    prep = prepared("dense_layernorm")
    a, _ = clipped(prep, method, 0.5, MASK)
    wild = jax.tree_util.tree_map(np.copy, prep.batch)
    wild["x"][~MASK] *= 1e4
    wild["y"][~MASK] = -1e4
    b, _ = clipped(dataclasses.replace(prep, batch=wild), method, 0.5, MASK)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("method", ["ghost", "vmap", "map"])
def test_masked_nan_row_adds_exactly_zero(method):
    prep = prepared("dense_layernorm")
    bad = jax.tree_util.tree_map(np.copy, prep.batch)
    bad["x"][1] = np.nan  # row 1 is masked out
    got, _ = clipped(dataclasses.replace(prep, batch=bad), method, 0.5, MASK)
    close(got, loop_clipped_sum(prep.grads, prep.norms, 0.5, MASK), 0.5)


def test_masked_overflowing_row_adds_exactly_zero_vmap():
    prep = prepared("dense_layernorm")
    bad = jax.tree_util.tree_map(np.copy, prep.batch)
    bad["x"][1] = 1e30
    got, _ = clipped(dataclasses.replace(prep, batch=bad), "vmap", 0.5, MASK)
    close(got, loop_clipped_sum(prep.grads, prep.norms, 0.5, MASK), 0.5)


# --------------------------------------------------------------------------------------------
# Sensitivity: neighbouring batches
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, method",
    [("dense_layernorm", "ghost"), ("generator", "ghost"), ("critic_twice", "ghost"),
     ("dense_layernorm", "vmap"), ("critic_twice", "vmap"), ("critic_twice", "map"),
     ("penalty_and_classifier", GROUPED), ("penalty_and_classifier", {"critic": "map", "aux": "ghost"})],
)
def test_one_row_moves_the_sum_by_at_most_c(name, method):
    prep = prepared(name)
    clip_norm = float(np.median(prep.norms))
    r = rng(20)
    moves = []
    for trial in range(12):
        batch = jax.tree_util.tree_map(lambda x: np.array(x, copy=True), prep.batch)
        mask = r.uniform(size=B) < 0.6
        j = int(r.integers(B))
        if trial % 3 == 0:  # an adversarial row: the row scaled by 1e6
            for leaf in jax.tree_util.tree_leaves(batch):
                leaf[j] *= 1e6
        elif trial % 3 == 1:  # a fresh random row
            for leaf in jax.tree_util.tree_leaves(batch):
                leaf[j] = 5.0 * r.normal(size=leaf[j].shape)
        without, with_row = mask.copy(), mask.copy()
        without[j], with_row[j] = False, True
        changed = dataclasses.replace(prep, batch=batch)
        a, _ = clipped(changed, method, clip_norm, without)
        b, _ = clipped(changed, method, clip_norm, with_row)
        move = float(np.linalg.norm(b - a))
        assert move <= clip_norm * (1 + 1e-4) + 1e-6, (trial, move, clip_norm)
        moves.append(move)
    # The bound is attained by the adversarial rows (their gradient is clipped to norm C).
    assert max(moves) > 0.99 * clip_norm


# --------------------------------------------------------------------------------------------
# The bound in floating point: near-cancelling calls of one layer
# --------------------------------------------------------------------------------------------


def _cancelling_critic_case(n=64, d=16, scale=3e3, seed=21):
    """A Dense(1) critic on a real row of norm ~3e3 and a fake row that differs from it by a
    vector of norm 0.6 to 1.5: the per-example gradient (fake - real for the kernel, 0 for the
    bias) is small next to its two parts, so a float32 Gram form cancels catastrophically."""
    r = rng(seed)
    real = r.normal(size=(n, d))
    real *= scale / np.linalg.norm(real, axis=1, keepdims=True)
    delta = r.normal(size=(n, d))
    delta *= r.uniform(0.6, 1.5, size=(n, 1)) / np.linalg.norm(delta, axis=1, keepdims=True)
    batch = {"real": real.astype(np.float32), "fake": (real + delta).astype(np.float32)}
    net = nn.Dense(1)
    params = {"params": {"kernel": normal(r, d, 1, scale=0.3), "bias": np.zeros(1, np.float32)}}

    def loss(p, b):
        return net.apply(p, b["fake"])[:, 0] - net.apply(p, b["real"])[:, 0]

    # True per-example gradient norms from the float32 rows, in float64.
    exact = np.linalg.norm(batch["fake"].astype(np.float64) - batch["real"].astype(np.float64), axis=1)
    return loss, params, batch, exact


@pytest.mark.parametrize("method", ["ghost", "vmap", "map"])
def test_near_cancelling_calls_keep_every_contribution_below_c(method):
    clip = 0.5
    loss, params, batch, exact = _cancelling_critic_case()
    n = exact.size
    fn = dpsgd.clipped_grad_sum(loss, clip, method=method, fallback="error")

    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    def contributions(masks):
        return jax.vmap(lambda m: fn(params, batch, m)[0])(masks)

    one_hot = np.eye(n, dtype=bool)
    flat = np.stack([flat64(jax.tree_util.tree_map(lambda x, i=i: x[i], contributions(one_hot)))
                     for i in range(n)])
    norms = np.linalg.norm(flat, axis=1)
    # Each example moves the sum by at most C, as promised (float rounding of the bound only) ...
    assert norms.max() <= clip * (1 + 1e-5), norms.max() / clip
    # ... and the bound is not bought by clipping much harder than C / ||g_i|| (all exceed C here).
    assert np.all(exact > clip)
    assert norms.min() >= 0.97 * clip, norms.min() / clip
    # Neighbouring batches (with and without row i, among others) differ by at most C as well.
    r = rng(22)
    base = r.uniform(size=n) < 0.5
    for i in r.choice(n, 8, replace=False):
        with_i, without_i = base.copy(), base.copy()
        with_i[i], without_i[i] = True, False
        both = contributions(np.stack([with_i, without_i]))
        diff = flat64(jax.tree_util.tree_map(lambda x: x[0], both)) - flat64(
            jax.tree_util.tree_map(lambda x: x[1], both))
        assert np.linalg.norm(diff) <= clip * (1 + 1e-5), (i, np.linalg.norm(diff) / clip)

