"""Per-example clipped gradient sums: ghost norms with book-keeping, and vmap.

A *per-example loss* is a function ``loss_fn(params, batch) -> (B,)`` whose i-th output depends
only on row i of every array in ``batch`` (leading axis B). No batch statistics, no cross-row
terms: that is what makes per-example clipping meaningful (docs/privacy.md).

``method="ghost"`` (the fast path) never materialises per-example gradients. It runs the loss
once under a Flax method interceptor that taps every ``flax.linen.Dense`` and ``LayerNorm`` call:
it records the layer input ``a`` and adds a zero "perturbation" to the layer output ``z``. One
backward pass with respect to the perturbations gives ``g = dL/dz`` for every example (because
the loss is a sum of per-example terms), and then

* Dense, one call per example (a row): ||grad W_i||^2 = ||a_i||^2 ||g_i||^2, ||grad b_i||^2 = ||g_i||^2;
* Dense called T times per example (e.g. a critic applied to a real and a fake row, or inputs with
  token axes): ||grad W_i||^2 = sum_{t,s} (a_t . a_s)(g_t . g_s) (the Gram form);
* LayerNorm: grad scale_i = sum_t g_t * xhat_t and grad bias_i = sum_t g_t, instantiated (B x d).

The clipped sum then comes from the stored activations ("book-keeping"): sum_i c_i grad W_i =
A^T (c * G), one matmul per layer, the same cost as an ordinary weight gradient.

The bound holds in floating point. The clip factor uses an upper bound of the norm of what is
actually added: ``c_i = C / max(N_i, C)`` with ``N_i = sqrt(sq_i^+) (1 + 8u) + sum_l k_l S_il``,
where u = 2^-24. Sums of squares (which cannot cancel) run in float32 and each is inflated by its
rounding bound ((k + 1) u for k terms) in ``sq_i^+``. For every Dense called T > 1 times per
example, the Gram form (which can cancel) is computed in float64 (a scoped ``jax.enable_x64``),
``S_il = sum_t ||a_t|| ||g_t||`` and ``k_l`` covers the float64 error of the Gram form and the
float32 rounding of the book-keeping matmul. So every example's contribution to
the computed sum has norm at most C (1 + 1e-6), even when a layer's calls nearly cancel (e.g. a
critic on a real and a fake row that are nearly equal); the price is a slightly stronger clip
for such an example, by a relative ``k_l S_il / sqrt(sq_i)`` (about 1e-6 S / norm), and by at most
(k + 1) u / 2 otherwise.

A parameter is *supported* when the interceptor saw it used, unchanged, as the kernel/bias of a
plain ``Dense`` (no custom ``dot_general``) or the scale/bias of a ``LayerNorm`` normalising the
last axis of a float32 input, called with the input alone (a ``LayerNorm`` with ``mask=``, an
``axis_name``, ``axis_index_groups`` or a low-precision ``dtype`` computes other statistics and is
not tapped). If any parameter is not (another layer
type, a parameter transformed before use, a Dense whose output feeds nothing), ``fallback="vmap"``
uses the vmap method for the whole computation (with a warning) and ``fallback="error"`` raises.

Assumptions of the ghost path (documented, not detected): a tapped parameter is used only by
its layer (a kernel that is also used elsewhere in the loss, e.g. tied weights outside the Dense,
would have its other use missed; the clipped norm bound C still holds, but the gradient is wrong),
and the loss does not permute rows between layers. Use ``method="vmap"`` for such losses.

``method={group: "ghost" | "vmap" | "map", ...}`` splits ``params`` by its top-level keys: each group's
block of every example's gradient is computed by its own method (the gradient of the whole loss
with respect to that group), the blocks' squared norms (and the ghost groups' float bounds) are
added, and every example gets one clip factor over all of its gradient, as with one method. A loss
whose terms cannot all go through ghost norms (DP-SACTGAN's critic: a gradient penalty, a double
backward) can then still take ghost norms for the parameters that can (its classifier).

``method="vmap"`` materialises per-example gradients with ``jax.vmap(jax.grad(...))``; it is the
general fallback and the reference the ghost path is tested against. Its squared norms are summed
in float32 along each array's last axis and in float64 across the rest, with the float32 error
covered in the bound; padded rows are zeroed by a select (not by a zero clip factor, so a NaN row
adds exactly 0) and the scaled rows summed by an elementwise reduction (small arrays) or a dot
(large arrays), whichever XLA runs faster on CPU. ``method="map"`` computes the same per-example
gradients by a compiled loop over the examples and continues as ``"vmap"``: on CPU, XLA runs a
batch of small per-example matrix products (``vmap`` of a transformer's gradient with a gradient
penalty, a few tokens per example) more slowly than the same products one example at a time, and
the loop is then the faster form (docs/engine.md has the measurement). Given a mask, the loop visits
only the kept rows (a trip count of ``mask.sum()``; the masked rows' gradients are exactly 0 and never
computed), so a padded Poisson batch costs its sampled rows, not its capacity. The step's time then
follows the sampled count, whose law depends on the data only through the number of records
(docs/engine.md, "Padded chunks").
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from typing import Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v

LossFn = Callable[[PyTree, PyTree], jax.Array]

METHODS = ("ghost", "vmap", "map")
FALLBACKS = ("vmap", "error")


class UnsupportedLayerError(ValueError):
    """Raised by ``method="ghost", fallback="error"`` when a parameter has no ghost rule."""


@dataclasses.dataclass
class _Tap:
    kind: str                 # "dense" | "layernorm"
    leaves: tuple             # (kernel_or_scale_leaf_index, bias_leaf_index or None)
    epsilon: float = 0.0
    fast_variance: bool = True


_U32 = 2.0**-24   # unit roundoff of float32
_U64 = 2.0**-53   # unit roundoff of float64


def clip_factors(sq_norms: jax.Array, clip_norm: float, mask: jax.Array | None) -> jax.Array:
    """c_i = min(1, C / ||g_i||), zero for masked-out rows; never amplifies a gradient."""
    norms = jnp.sqrt(jnp.maximum(sq_norms, 0.0))
    c = clip_norm / jnp.maximum(norms, clip_norm)
    if mask is not None:
        c = jnp.where(mask, c, 0.0)
    return c


def _clip_from_bound(norm_bound: jax.Array, clip_norm: float, mask: jax.Array | None) -> jax.Array:
    """c_i = C / max(N_i, C) from an upper bound N_i of the norm; zero for masked-out rows."""
    c = clip_norm / jnp.maximum(norm_bound, clip_norm)
    return c if mask is None else jnp.where(mask, c, 0.0)


def _layernorm_xhat(x: jax.Array, epsilon: float, fast_variance: bool = True) -> jax.Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    if fast_variance:
        var = jnp.maximum(jnp.mean(jnp.square(x), axis=-1, keepdims=True) - jnp.square(mean), 0.0)
    else:
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + epsilon)


def _as_tokens(x: jax.Array, batch: int) -> jax.Array:
    """(B, ..., d) -> (B, T, d)."""
    return x.reshape(batch, -1, x.shape[-1])


class _Interceptor:
    """Taps Dense/LayerNorm calls whose parameters are leaves of the differentiated params."""

    def __init__(self, leaf_ids: dict[int, int], perturbations: list | None):
        self.leaf_ids = leaf_ids
        self.perturbations = perturbations
        self.taps: list[_Tap] = []
        self.inputs: list[jax.Array] = []
        self.out_shapes: list[jax.ShapeDtypeStruct] = []

    def _leaf(self, module: nn.Module, name: str):
        if not module.has_variable("params", name):
            return None, True
        idx = self.leaf_ids.get(id(module.get_variable("params", name)))
        return idx, idx is not None

    def __call__(self, next_fun, args, kwargs, context):
        module = context.module
        if context.method_name != "__call__" or not args:
            return next_fun(*args, **kwargs)
        plain_call = len(args) == 1 and not kwargs
        if type(module) is nn.Dense:
            k, ok_k = self._leaf(module, "kernel")
            b, ok_b = self._leaf(module, "bias")
            custom = module.dot_general is not None or module.dot_general_cls is not None
            if k is None or not (ok_k and ok_b) or custom or not plain_call:
                return next_fun(*args, **kwargs)
            tap = _Tap("dense", (k, b))
        elif type(module) is nn.LayerNorm:
            s, ok_s = self._leaf(module, "scale")
            b, ok_b = self._leaf(module, "bias")
            if (s is None and b is None) or not (ok_s and ok_b) or not _plain_layernorm(
                    module, args, kwargs):
                return next_fun(*args, **kwargs)
            tap = _Tap("layernorm", (s, b), float(module.epsilon), bool(module.use_fast_variance))
        else:
            return next_fun(*args, **kwargs)
        out = next_fun(*args, **kwargs)
        i = len(self.taps)
        self.taps.append(tap)
        self.inputs.append(args[0])
        self.out_shapes.append(jax.ShapeDtypeStruct(out.shape, out.dtype))
        if self.perturbations is not None:
            out = out + self.perturbations[i]
        return out


def _plain_layernorm(module: nn.LayerNorm, args, kwargs) -> bool:
    """Whether the call normalises the last axis of one float32 input with its own statistics."""
    return (
        len(args) == 1 and not kwargs  # e.g. mask= changes which entries the statistics use
        and module.reduction_axes == -1 and module.feature_axes == -1
        and module.axis_name is None and module.axis_index_groups is None
        and module.dtype in (None, jnp.float32)
        and getattr(args[0], "dtype", None) == jnp.float32
    )


def _unsupported_leaves(taps: list[_Tap], n_leaves: int) -> set[int]:
    covered = {i for t in taps for i in t.leaves if i is not None}
    return set(range(n_leaves)) - covered


class _Stage(NamedTuple):
    """One group's share of a clipped sum, before the clip factors are known."""

    losses: jax.Array                  # (B,) per-example losses
    upper: jax.Array                   # float64 (B,) upper bound of the group's squared norms
    exact: jax.Array                   # float64 (B,) the squared norms as computed
    slack: jax.Array | None            # float64 (B,) additive slack of the norm, or None
    finish: Callable[[jax.Array], PyTree]  # clip factors (B,) -> the group's clipped sum
    materialised: bool                 # per-example gradients were built (vmap or map)


def _ghost_stage(loss_fn, params, batch, mask, fallback) -> _Stage:
    leaves, treedef = jax.tree_util.tree_flatten(params)
    n = len(leaves)

    def traced_loss(leaf_list, perts):
        ids = {id(x): i for i, x in enumerate(leaf_list)}
        icpt = _Interceptor(ids, perts)
        with nn.intercept_methods(icpt):
            losses = loss_fn(jax.tree_util.tree_unflatten(treedef, leaf_list), batch)
        return losses, icpt

    # Discovery pass (abstract): which layers are tapped, and their output shapes.
    box = {}

    def discover(leaf_list):
        losses, icpt = traced_loss(leaf_list, None)
        box["taps"], box["shapes"] = icpt.taps, icpt.out_shapes
        box["lead"] = [x.shape[0] if x.ndim else None for x in icpt.inputs]
        return losses

    out_shape = jax.eval_shape(discover, leaves)
    taps, shapes = box["taps"], box["shapes"]
    bsz = out_shape.shape[0] if out_shape.ndim == 1 else None
    # Row i of every tapped input must belong to example i: a call whose leading axis is not the
    # batch (e.g. real and fake rows stacked into one (2B, d) input) has no ghost rule here.
    misaligned = {i for t, lead in zip(taps, box["lead"]) if lead != bsz for i in t.leaves if i is not None}
    missing = _unsupported_leaves(taps, n) | misaligned
    if missing:
        paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
        names = ", ".join(paths[i] for i in sorted(missing))
        msg = (
            f"method='ghost' has no rule for parameter(s) {names}: ghost norms cover parameters used "
            "unchanged as the kernel/bias of flax.linen.Dense or the scale/bias of a default LayerNorm, "
            "in calls whose input rows are the loss's examples (leading axis B, row i = example i)."
        )
        if fallback == "error":
            raise UnsupportedLayerError(msg + " Use method='vmap' or fallback='vmap'.")
        warnings.warn(msg + " Falling back to method='vmap'.", stacklevel=4)
        return _vmap_stage(loss_fn, params, batch, mask)

    perts0 = [jnp.zeros(s.shape, s.dtype) for s in shapes]

    def total(perts):
        losses, icpt = traced_loss(leaves, perts)
        return jnp.sum(losses), (losses, icpt.inputs)

    grads, (losses, inputs) = jax.grad(total, has_aux=True)(perts0)
    bsz = losses.shape[0]
    keep = jnp.ones((bsz,), bool) if mask is None else mask

    # Group the calls by parameter leaf (a layer may be called several times per example).
    groups: dict[tuple, list[int]] = {}
    for call, tap in enumerate(taps):
        groups.setdefault((tap.kind, tap.leaves, tap.epsilon, tap.fast_variance), []).append(call)

    book = []  # (kind, leaves, A (B,T,d) or per-example scale grad, G (B,T,p) or bias grad)
    pieces = []  # (float32 (B,) sum of squares, its relative error bound), all terms >= 0
    grams = []   # float64 (B,) Gram-form squared norms of multi-call Dense kernels (may cancel)
    slack = []   # float64 (B,) absolute norm slack for those kernels (see module docstring)

    def sq32(x):  # positive float32 sum over the last axis: relative error <= (k + 1) u
        return jnp.sum(jnp.square(x), axis=-1), (x.shape[-1] + 1) * _U32

    for (kind, leaf_idx, eps, fast), calls in groups.items():
        g = jnp.concatenate([_as_tokens(grads[c], bsz) for c in calls], axis=1)
        g = jnp.where(keep[:, None, None], g, 0.0)
        a = jnp.concatenate([_as_tokens(inputs[c], bsz) for c in calls], axis=1)
        a = jnp.where(keep[:, None, None], a, 0.0)  # a masked row adds exactly 0, even if NaN
        tokens = g.shape[1]
        if kind == "dense":
            k_idx, b_idx = leaf_idx
            if tokens == 1:
                (sa, ra), (sg, rg) = sq32(a[:, 0]), sq32(g[:, 0])
                pieces.append((sa * sg, ra + rg + 2 * _U32))
            else:
                with jax.enable_x64(True):
                    a64, g64 = a.astype(jnp.float64), g.astype(jnp.float64)
                    gram = jnp.einsum("btd,bsd->bts", a64, a64) * jnp.einsum("btp,bsp->bts", g64, g64)
                    grams.append(jnp.sum(gram, axis=(1, 2)))
                    size = (tokens + 2) * _U32 + ((a.shape[-1] + g.shape[-1] + tokens**2 + 8) * _U64) ** 0.5
                    norms_a = jnp.sqrt(jnp.sum(a64 * a64, -1))
                    norms_g = jnp.sqrt(jnp.sum(g64 * g64, -1))
                    slack.append(2.0 * size * jnp.sum(norms_a * norms_g, axis=1))
            gb = jnp.sum(g, axis=1)  # (B, p) per-example bias gradient, summed once
            if b_idx is not None:
                pieces.append(sq32(gb))
            book.append((kind, leaf_idx, a, (g, gb)))
        else:
            s_idx, b_idx = leaf_idx
            xhat = _layernorm_xhat(a, eps, fast)
            gs = jnp.sum(g * xhat, axis=1)  # (B, d) per-example scale gradient
            gb = jnp.sum(g, axis=1)         # (B, d) per-example bias gradient
            if s_idx is not None:
                pieces.append(sq32(gs))
            if b_idx is not None:
                pieces.append(sq32(gb))
            book.append((kind, leaf_idx, gs, gb))

    with jax.enable_x64(True):
        # Positive pieces are inflated by their float32 error bound; the sums run in float64.
        upper = sum((x.astype(jnp.float64) * (1.0 + 1.01 * rel) for x, rel in pieces),
                    jnp.zeros((bsz,), jnp.float64))
        exact = sum((x.astype(jnp.float64) for x, _ in pieces), jnp.zeros((bsz,), jnp.float64))
        for gram in grams:
            upper, exact = upper + gram, exact + gram
        total_slack = sum(slack[1:], slack[0]) if slack else None

    def finish(c):
        out = [jnp.zeros_like(x) for x in leaves]
        for kind, leaf_idx, first, second in book:
            if kind == "dense":
                k_idx, b_idx = leaf_idx
                a, (g, gb) = first, second
                if g.shape[1] == 1:  # one token per example: plain matmuls
                    kernel = a[:, 0].T @ (g[:, 0] * c[:, None])
                else:
                    kernel = jnp.einsum("btd,btp->dp", a, g * c[:, None, None])
                out[k_idx] = out[k_idx] + kernel.reshape(leaves[k_idx].shape)
                if b_idx is not None:
                    out[b_idx] = out[b_idx] + (c @ gb).reshape(leaves[b_idx].shape)
            else:
                s_idx, b_idx = leaf_idx
                if s_idx is not None:
                    out[s_idx] = out[s_idx] + (c @ first).reshape(leaves[s_idx].shape)
                if b_idx is not None:
                    out[b_idx] = out[b_idx] + (c @ second).reshape(leaves[b_idx].shape)
        return jax.tree_util.tree_unflatten(treedef, out)

    return _Stage(losses, upper, exact, total_slack, finish, materialised=False)


def _clip(stages: list[_Stage], clip_norm: float, mask) -> tuple[jax.Array, jax.Array]:
    """``(c, sq)``: one clip factor per example from the groups' joint norm bound
    ``sqrt(sum upper) (1 + 8u) + sum slack`` (rounded upward to float32), and the squared norms."""
    with jax.enable_x64(True):
        upper = sum(st.upper for st in stages[1:]) + stages[0].upper
        exact = sum(st.exact for st in stages[1:]) + stages[0].exact
        bound = jnp.sqrt(jnp.maximum(upper, 0.0)) * (1.0 + 8 * _U32)
        for st in stages:
            if st.slack is not None:
                bound = bound + st.slack
        bound = bound.astype(jnp.float32) * np.float32(1.0 + 2 * _U32)  # float32 rounding, upward
        sq = exact.astype(jnp.float32)
    return _clip_from_bound(bound, clip_norm, mask), sq


def _aux(losses, sq, c, mask):
    keep = jnp.ones_like(losses, bool) if mask is None else mask
    return {
        "losses": jnp.where(keep, losses, 0.0),
        "norms": jnp.where(keep, jnp.sqrt(jnp.maximum(sq, 0.0)), 0.0),
        "clip_factors": c,
    }


def per_example_grads(loss_fn: LossFn, params: PyTree, batch: PyTree, *, sequential: bool = False,
                      mask: jax.Array | None = None) -> PyTree:
    """``(losses (B,), grads)``: per-example gradients, a pytree like ``params`` with a leading B
    axis, by ``jax.vmap`` or, with ``sequential``, by a compiled loop over the examples (the same
    values; faster on CPU for some networks, ``method="map"``). With ``sequential`` and a (B,) bool
    ``mask``, the loop runs over the kept rows only and the masked rows' losses and gradients are
    exactly 0 (never computed); without ``sequential`` the mask is not used (every row is computed)."""

    def one(p, example):
        return loss_fn(p, jax.tree_util.tree_map(lambda x: x[None], example))[0]

    grad_one = jax.value_and_grad(one)
    if not sequential:
        return jax.vmap(grad_one, in_axes=(None, 0))(params, batch)
    if mask is None:
        return jax.lax.map(lambda example: grad_one(params, example), batch)
    bsz = mask.shape[0]
    order = jnp.argsort(jnp.logical_not(mask), stable=True)  # the kept rows first, in order
    first = jax.tree_util.tree_map(lambda x: x[0], batch)
    shapes = jax.eval_shape(grad_one, params, first)
    zeros = jax.tree_util.tree_map(lambda s: jnp.zeros((bsz,) + s.shape, s.dtype), shapes)

    def body(i, out):
        j = order[i]
        value = grad_one(params, jax.tree_util.tree_map(lambda x: jax.lax.dynamic_index_in_dim(x, j, 0, False), batch))
        return jax.tree_util.tree_map(lambda o, v: jax.lax.dynamic_update_index_in_dim(o, v, j, 0), out, value)

    return jax.lax.fori_loop(0, jnp.sum(mask, dtype=jnp.int32), body, zeros)


# Per-example size of a parameter array above which the vmap path sums the masked, scaled rows
# with a dot (XLA's column reductions over the batch axis are slow for large arrays on CPU) and
# below which it uses an elementwise reduction (faster for small arrays). Same result either way.
_DOT_MIN_SIZE = 16384


def _per_example_sq64(leaves) -> tuple[jax.Array, int]:
    """Squared norms of per-example gradients (leading axis B) and the float32 summation length.

    Squares are summed in float32 along each array's last axis (fused with the squaring, one
    pass over the B x P block), then in float64 across the rest; the float32 partial sums carry a
    relative error of at most (k + 1) u for a last axis of length k, which the caller covers.
    """
    total, inner = 0.0, 1
    with jax.enable_x64(True):
        for g in leaves:
            if g.ndim > 2:
                partial, k = jnp.sum(jnp.square(g), axis=-1), g.shape[-1]
            else:
                partial, k = jnp.square(g), 1
            inner = max(inner, k)
            total = total + jnp.sum(partial.reshape(g.shape[0], -1).astype(jnp.float64), axis=1)
    return total, inner


def _vmap_stage(loss_fn, params, batch, mask, sequential: bool = False) -> _Stage:
    losses, grads = per_example_grads(loss_fn, params, batch, sequential=sequential, mask=mask)
    leaves = jax.tree_util.tree_leaves(grads)
    sq64, inner = _per_example_sq64(leaves)
    with jax.enable_x64(True):
        upper = sq64 * (1.0 + 1.01 * (inner + 1) * _U32)
    keep = jnp.ones_like(losses, bool) if mask is None else mask

    def finish(c):
        c_kept = jnp.where(keep, c, 0.0)

        def masked_sum(g):
            # Padded rows are zeroed with a select (exactly 0, even if they hold NaN), never by a
            # multiplication with a zero clip factor.
            shape = (-1,) + (1,) * (g.ndim - 1)
            if g[0].size >= _DOT_MIN_SIZE:
                return jnp.tensordot(c_kept.astype(g.dtype), jnp.where(keep.reshape(shape), g, 0.0), axes=1)
            return jnp.sum(jnp.where(keep.reshape(shape), g * c.reshape(shape).astype(g.dtype), 0.0), axis=0)

        return jax.tree_util.tree_map(masked_sum, grads)

    return _Stage(losses, upper, sq64, None, finish, materialised=True)


def _one_group(stage: _Stage, clip_norm: float, mask):
    c, sq = _clip([stage], clip_norm, mask)
    return stage.finish(c), _aux(stage.losses, sq, c, mask)


def _grouped_clipped_sum(loss_fn, params, batch, mask, clip_norm, methods, fallback):
    """One clip over all of ``params``, each top-level group's share by its own method."""
    if not isinstance(params, Mapping) or set(params) != set(methods):
        got = sorted(params) if isinstance(params, Mapping) else type(params).__name__
        raise ValueError(f"method={dict(methods)!r} names the groups of the parameters; expected "
                         f"params to be a mapping with exactly the keys {sorted(methods)}, got {got}.")
    stages = {}
    for name, how in methods.items():
        def group_loss(p, b, name=name):
            return loss_fn({**params, name: p}, b)

        stages[name] = (_ghost_stage(group_loss, params[name], batch, mask, fallback) if how == "ghost"
                        else _vmap_stage(group_loss, params[name], batch, mask, how == "map"))
    c, sq = _clip(list(stages.values()), clip_norm, mask)
    # Every group computed the same per-example losses; a materialised group's are used, so that
    # the other passes' forward computations of the loss can be dropped by the compiler.
    losses = next((st.losses for st in stages.values() if st.materialised), next(iter(stages.values())).losses)
    summed = {name: stages[name].finish(c) for name in params}
    return (type(params)(summed) if not isinstance(params, dict) else summed), _aux(losses, sq, c, mask)


def check_method(method: str | Mapping[str, str]) -> str | Mapping[str, str]:
    """A clipping method: ``"ghost"``, ``"vmap"``, ``"map"``, or a mapping of parameter groups (the
    top-level keys of the parameters) to one each; anything else is refused by name."""
    if isinstance(method, Mapping):
        if not method:
            raise ValueError("method is an empty mapping: name at least one parameter group, or pass one "
                             "method for all.")
        for name, how in method.items():
            _v.one_of(METHODS, **{f"method[{name!r}]": how})
        return method
    return _v.one_of(METHODS, method=method)


def clipped_grad_sum(
    loss_fn: LossFn, clip_norm: float, method: str = "ghost", fallback: str = "vmap"
) -> Callable[[PyTree, PyTree, jax.Array | None], tuple[PyTree, dict]]:
    """Builds ``fn(params, batch, mask) -> (sum_i c_i grad_i, aux)``.

    Args:
        loss_fn: per-example loss ``(params, batch) -> (B,)`` (see the module docstring).
        clip_norm: C > 0; each example's gradient (over all of ``params``) is scaled to norm <= C.
        method: "ghost" (ghost norms + book-keeping for Dense/LayerNorm), "vmap", "map" (the
            per-example gradients of "vmap" computed by a compiled loop over the examples), or a
            mapping of the top-level keys of ``params`` to one of them (e.g. ``{"critic": "vmap", "aux":
            "ghost"}``): each group's share of every example's gradient (the gradient of the whole
            loss with respect to that group, the others held fixed) is computed by its method, the
            shares' squared norms are added and each example is clipped once over all of
            ``params``. A ghost group must meet the ghost path's assumptions for its own
            parameters (in particular, none of them inside a gradient that the loss takes, such
            as a gradient penalty); a group that does not is given to "vmap".
        fallback: for "ghost" when some parameter has no ghost rule: "vmap" (warn and use vmap)
            or "error" (raise :class:`UnsupportedLayerError`).

    Returns:
        A function of ``(params, batch, mask)``; ``mask`` is a (B,) bool array (None: all rows).
        It returns the clipped gradient sum (a pytree like ``params``) and ``aux`` with the
        per-example ``losses`` (masked rows 0), gradient ``norms`` and ``clip_factors``.

    Privacy:
        Adding or removing one row of ``batch`` changes the sum by a vector of L2 norm <= C.
        ``aux`` describes private rows: it is for diagnostics and must not be released.
    """
    clip_norm = _v.positive(clip_norm=clip_norm)
    check_method(method)
    _v.one_of(FALLBACKS, fallback=fallback)

    def fn(params, batch, mask=None):
        if isinstance(method, Mapping):
            return _grouped_clipped_sum(loss_fn, params, batch, mask, clip_norm, method, fallback)
        if method in ("vmap", "map"):
            return _one_group(_vmap_stage(loss_fn, params, batch, mask, method == "map"), clip_norm, mask)
        return _one_group(_ghost_stage(loss_fn, params, batch, mask, fallback), clip_norm, mask)

    return fn


def grad_sum(loss_fn: LossFn) -> Callable[[PyTree, PyTree, jax.Array | None], tuple[PyTree, dict]]:
    """Non-private counterpart of :func:`clipped_grad_sum`: the plain gradient of the masked sum."""

    def fn(params, batch, mask=None):
        def total(p):
            losses = loss_fn(p, batch)
            if mask is not None:
                losses = jnp.where(mask, losses, 0.0)
            return jnp.sum(losses), losses

        grads, losses = jax.grad(total, has_aux=True)(params)
        return grads, {"losses": losses}

    return fn
