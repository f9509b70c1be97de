"""Losses and layers the ghost rules do not cover: refused by name with ``fallback="error"``,
warned about and computed per example with ``fallback="vmap"`` (equal to the loop oracle of
``tests/_clipping.py``); the documented limitation of the ghost path (an expected failure); and
LayerNorm calls outside the ghost rule's float32 bound (a mask, a named axis, bfloat16).
"""

from __future__ import annotations

import dataclasses
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpgen_jax import dpsgd, models
from tests._clipping import (
    CASES,
    MASK,
    B,
    Prepared,
    case_penalty_and_classifier,
    clipped,
    close,
    flat64,
    loop_clipped_sum,
    normal,
    per_example_loop,
    prepared,
    random_params,
    rng,
)
from tests._compile import FAST_COMPILE


# --------------------------------------------------------------------------------------------
# Losses whose structure the ghost rules do not cover
# --------------------------------------------------------------------------------------------


def _critic_concat_case():
    """The critic applied once to the stacked (2B, d) fake and real rows, then split."""
    net, r = models.Critic(hidden=(6, 4)), rng(11)
    batch = {"real": normal(r, B, 5, scale=3.0), "fake": normal(r, B, 5, scale=3.0)}
    params = random_params(net, batch["real"][:1], 11)

    def loss(p, b):
        n = b["real"].shape[0]
        out = net.apply(p, jnp.concatenate([b["fake"], b["real"]]))
        return out[:n] - out[n:]

    grads, norms = per_example_loop(loss, params, batch)
    return Prepared(loss, params, batch, grads, norms, {})


@pytest.fixture(scope="module")
def critic_concat():
    return _critic_concat_case()


def test_critic_on_stacked_rows_vmap_matches_loop(critic_concat):
    prep = critic_concat
    c = float(np.median(prep.norms))
    got, _ = clipped(prep, "vmap", c, MASK)
    close(got, loop_clipped_sum(prep.grads, prep.norms, c, MASK), c)


def test_critic_on_stacked_rows_ghost_matches_loop(critic_concat):
    prep = critic_concat
    c = float(np.median(prep.norms))
    # Stacked rows (leading axis 2B) have no ghost rule: refused with fallback="error" ...
    with pytest.raises(dpsgd.UnsupportedLayerError, match="leading axis B"):
        clipped(prep, "ghost", c, MASK)
    # ... and computed by the vmap fallback otherwise.
    fn = dpsgd.clipped_grad_sum(prep.loss, c, method="ghost", fallback="vmap")
    with pytest.warns(UserWarning, match="no rule"):
        got, _ = fn(prep.params, prep.batch, jnp.asarray(MASK))
    close(jax.tree_util.tree_map(np.asarray, got), loop_clipped_sum(prep.grads, prep.norms, c, MASK), c)


@pytest.mark.xfail(strict=True, reason=(
    "documented limitation of the ghost path (dpsgd/_clipping.py docstring): a parameter used by a "
    "Dense AND elsewhere in the loss is counted as supported; "
    "ghost only sees the Dense route, so norms and the sum miss the other use (silently wrong "
    "gradient; the sum is still norm-bounded). Fix: detect other uses (e.g. dead-code analysis "
    "of the loss jaxpr with tapped layers' parameters replaced by constants), fall back/raise."))
def test_parameter_used_outside_its_dense_under_ghost():
    base = prepared("critic_twice")

    def loss(p, b):
        kernel = p["params"]["MLP_0"]["layer_0"]["Dense_0"]["kernel"]  # also used by its Dense
        return base.loss(p, b) + jnp.sum(kernel) * b["real"][:, 0]

    grads, norms = per_example_loop(loss, base.params, base.batch)
    prep = Prepared(loss, base.params, base.batch, grads, norms, {})
    c = float(np.median(norms))
    got, _ = clipped(prep, "ghost", c, MASK)
    close(got, loop_clipped_sum(grads, norms, c, MASK), c)


class ConvNet(nn.Module):
    @nn.compact
    def __call__(self, x):
        h = nn.Conv(3, kernel_size=(2,))(x[..., None])
        return nn.Dense(1)(jnp.tanh(h).reshape(h.shape[0], -1))[..., 0]


class RawParamNet(nn.Module):
    """A parameter transformed before use (softplus of a raw weight), then a Dense."""

    @nn.compact
    def __call__(self, x):
        w = self.param("raw_scale", nn.initializers.normal(1.0), (x.shape[-1],))
        return nn.Dense(1)(x * jax.nn.softplus(w))[..., 0]


def _unsupported_case(name):
    x = normal(rng(12), B, 6)
    if name == "conv":
        net = ConvNet()
        return (lambda p, b: net.apply(p, b) ** 2), random_params(net, x[:1], 12), x, "Conv_0"
    if name == "raw_param":
        net = RawParamNet()
        return (lambda p, b: net.apply(p, b) ** 2), random_params(net, x[:1], 13), x, "raw_scale"
    # The loss transforms every parameter before applying the network.
    net = models.MLP((3, 1))

    def loss(p, b):
        return net.apply(jax.tree_util.tree_map(lambda w: 2.0 * w, p), b)[:, 0] ** 2

    return loss, random_params(net, x[:1], 14), x, "layer_0"


@pytest.mark.parametrize("name", ["conv", "raw_param", "scaled_params"])
def test_unsupported_layer_with_fallback_error_raises(name):
    loss, params, x, param_name = _unsupported_case(name)
    fn = dpsgd.clipped_grad_sum(loss, 1.0, method="ghost", fallback="error")
    with pytest.raises(dpsgd.UnsupportedLayerError, match=param_name) as info:
        jax.eval_shape(fn, params, x, None)  # raised while tracing; nothing is compiled
    assert isinstance(info.value, ValueError)


def test_unsupported_layer_with_fallback_vmap_warns_and_matches_loop():
    loss, params, x, param_name = _unsupported_case("conv")
    grads, norms = per_example_loop(loss, params, x)
    c = float(np.median(norms))
    fn = jax.jit(dpsgd.clipped_grad_sum(loss, c, method="ghost", fallback="vmap"),
                 compiler_options=FAST_COMPILE)
    with pytest.warns(UserWarning, match=param_name):
        got, _ = fn(params, x, jnp.asarray(MASK))
    close(flat64(got), loop_clipped_sum(grads, norms, c, MASK), c)


@pytest.mark.parametrize("name", list(CASES))
def test_supported_networks_trace_without_fallback(name):
    loss, params, batch = CASES[name]()
    fn = dpsgd.clipped_grad_sum(loss, 1.0, method="ghost", fallback="error")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.eval_shape(fn, params, batch, jnp.asarray(MASK))


@pytest.mark.parametrize(
    "kwargs, argument",
    [({"clip_norm": 0.0}, "clip_norm"), ({"clip_norm": -1.0}, "clip_norm"),
     ({"clip_norm": float("inf")}, "clip_norm"), ({"clip_norm": float("nan")}, "clip_norm"),
     ({"clip_norm": 1.0, "method": "opacus"}, "method"),
     ({"clip_norm": 1.0, "fallback": "ignore"}, "fallback"),
     ({"clip_norm": 1.0, "method": {"critic": "vmap", "aux": "opacus"}}, r"method\['aux'\]"),
     ({"clip_norm": 1.0, "method": {}}, "method")],
)
def test_bad_arguments_raise(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        dpsgd.clipped_grad_sum(lambda p, b: b, **kwargs)


def test_groups_must_be_the_parameters_top_level_keys():
    # A group the parameters lack, or a parameter group the mapping leaves out, is refused by name
    # (never silently clipped by some default method).
    loss, params, batch = case_penalty_and_classifier()
    for method in ({"critic": "vmap"}, {"critic": "vmap", "aux": "ghost", "gen": "ghost"}):
        fn = dpsgd.clipped_grad_sum(loss, 1.0, method=method)
        with pytest.raises(ValueError, match=r"exactly the keys .*got \['aux', 'critic'\]"):
            jax.eval_shape(fn, params, batch, None)
    fn = dpsgd.clipped_grad_sum(lambda p, b: b["real"][:, 0], 1.0, method={"critic": "vmap"})
    with pytest.raises(ValueError, match="mapping"):
        jax.eval_shape(fn, np.zeros(3, np.float32), batch, None)


class MaskedNormNet(nn.Module):
    """LayerNorm whose statistics use only the entries marked by a (per-row) mask."""

    @nn.compact
    def __call__(self, x, entries):
        h = nn.LayerNorm()(nn.Dense(6)(x), mask=entries)
        return nn.Dense(1)(jnp.tanh(h))[..., 0]


def _masked_norm_case():
    net, r = MaskedNormNet(), rng(23)
    batch = {"x": normal(r, B, 5), "entries": r.uniform(size=(B, 6)) < 0.6, "y": normal(r, B)}
    batch["entries"][:, 0] = True
    params = random_params(net, batch["x"][:1], 23, entries=batch["entries"][:1])
    return lambda p, b: (net.apply(p, b["x"], b["entries"]) - b["y"]) ** 2, params, batch


def test_layernorm_called_with_a_mask_is_not_tapped():
    loss, params, batch = _masked_norm_case()
    fn = dpsgd.clipped_grad_sum(loss, 1.0, method="ghost", fallback="error")
    with pytest.raises(dpsgd.UnsupportedLayerError, match="LayerNorm_0"):
        jax.eval_shape(fn, params, batch, None)
    # The vmap fallback computes the right thing (the masked statistics) for every parameter.
    grads, norms = per_example_loop(loss, params, batch)
    c = float(np.median(norms))
    fb = jax.jit(dpsgd.clipped_grad_sum(loss, c, method="ghost", fallback="vmap"),
                 compiler_options=FAST_COMPILE)
    with pytest.warns(UserWarning, match="LayerNorm_0"):
        got, _ = fb(params, batch, jnp.asarray(MASK))
    close(flat64(got), loop_clipped_sum(grads, norms, c, MASK), c)


class NormNet(nn.Module):
    """Dense -> LayerNorm(**norm) -> tanh -> Dense; ``bf16_input`` feeds the LayerNorm bfloat16."""

    norm: dict = dataclasses.field(default_factory=dict)
    bf16_input: bool = False

    @nn.compact
    def __call__(self, x):
        h = nn.Dense(6)(x)
        h = nn.LayerNorm(**self.norm)(h.astype(jnp.bfloat16) if self.bf16_input else h)
        return nn.Dense(1)(jnp.tanh(h.astype(jnp.float32)))[..., 0]


def _norm_case(seed, **net_fields):
    """(loss, params, batch) of a NormNet; float32 parameters from the plain network's shapes."""
    net, r = NormNet(**net_fields), rng(seed)
    batch = {"x": normal(r, B, 5), "y": normal(r, B)}
    params = random_params(NormNet(), batch["x"][:1], seed)
    return lambda p, b: (net.apply(p, b["x"]) - b["y"]) ** 2, params, batch


def _declined_then_vmap(loss, params, batch, wrap=lambda fn: fn, reference=None, rtol=2e-4):
    """fallback="error" refuses LayerNorm_0; fallback="vmap" warns and equals the loop oracle
    (of ``reference``, default ``loss``). ``wrap`` runs the clipped sum inside another transform."""
    fn = wrap(dpsgd.clipped_grad_sum(loss, 1.0, method="ghost", fallback="error"))
    with pytest.raises(dpsgd.UnsupportedLayerError, match="LayerNorm_0"):
        jax.eval_shape(fn, params, batch, None)
    grads, norms = per_example_loop(reference or loss, params, batch)
    c = float(np.median(norms))
    fb = jax.jit(wrap(dpsgd.clipped_grad_sum(loss, c, method="ghost", fallback="vmap")),
                 compiler_options=FAST_COMPILE)
    with pytest.warns(UserWarning, match="LayerNorm_0"):
        got, _ = fb(params, batch, jnp.asarray(MASK))
    close(flat64(got), loop_clipped_sum(grads, norms, c, MASK), c, rtol=rtol)


def _in_one_shard(fn):
    """``fn(params, batch, mask)`` under a vmap that binds the axis name "shards" to one shard
    holding the whole batch, so that LayerNorm(axis_name="shards") has its axis."""
    mapped = jax.vmap(fn, in_axes=(None, 0, None), axis_name="shards")

    def call(params, batch, mask):
        out = mapped(params, jax.tree_util.tree_map(lambda x: x[None], batch), mask)
        return jax.tree_util.tree_map(lambda x: x[0], out)

    return call


def test_layernorm_with_a_named_axis_is_not_tapped():
    """LayerNorm(axis_name=...) averages its statistics over the rows of every shard of the
    named axis, which the ghost rule (each row normalised by its own statistics) does not cover.
    The same network without the axis is tapped under the same vmap, so the axis is what declines."""
    plain, params, batch = _norm_case(24)
    jax.eval_shape(_in_one_shard(dpsgd.clipped_grad_sum(plain, 1.0, method="ghost", fallback="error")),
                   params, batch, None)
    named, _, _ = _norm_case(24, norm={"axis_name": "shards"})
    # With one shard the statistics are each row's own: the plain network's loop is the reference.
    _declined_then_vmap(named, params, batch, wrap=_in_one_shard, reference=plain)


@pytest.mark.parametrize("low_precision", [{"norm": {"dtype": jnp.bfloat16}}, {"bf16_input": True}],
                         ids=["dtype", "input"])
def test_low_precision_layernorm_is_not_tapped(low_precision):
    """A LayerNorm computing in bfloat16 (its ``dtype``, or a bfloat16 input) is outside the
    float32 bound of the ghost norms: declined. The loop runs the same bfloat16 arithmetic per
    example; the tolerance allows bfloat16 rounding (2^-8) between batched and single rows."""
    loss, params, batch = _norm_case(25, **low_precision)
    _declined_then_vmap(loss, params, batch, rtol=1e-2)
