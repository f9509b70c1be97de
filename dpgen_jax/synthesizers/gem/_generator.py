"""GEM's generator: the network from noise to one softmax per column, its initialisation, the
measurements in the compiled layout, the Adam steps on the weighted L1 loss, drawing codes, and the
nudge of its output bias toward the released one-way marginals. See ``docs/gem.md``."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpgen_jax._typing import PyTree
from dpgen_jax import models
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers.gem._config import GEMConfig

Clique = sm.Clique


def network(config: GEMConfig, width: int) -> models.MLP:
    """The generator: ``hidden`` ReLU layers to ``width`` logits, one per bin of every column
    (``width`` = the sum of the bin counts, columns one after another), He-normal initialisation."""
    return models.MLP(tuple(config.hidden) + (width,), activation="relu", init_scheme="he")


def last_layer(params: PyTree) -> str:
    """The name of the generator's output layer in ``params`` (``models.MLP`` names its layers
    ``layer_0`` ... ``layer_L``)."""
    return max(params, key=lambda name: int(name.rsplit("_", 1)[1]))


ONE_WAY_FLOOR = 1e-5  # the smallest probability one_way_init sets (log 1e-5 = -11.5)


def init(config: GEMConfig, width: int, key: jax.Array, one_way: np.ndarray | None = None) -> PyTree:
    """He-normal parameters, the last layer's kernel times ``output_init_scale`` (how much the
    initial mixture's columns depend on the noise, and so on each other); with ``one_way``
    (``(width,)`` probabilities, one per output: ``one_way_probabilities(...)[bin_mask(sizes)]``)
    its bias the log of them (``one_way_init``)."""
    params = network(config, width).init(key, jnp.zeros((1, config.noise_dim)))["params"]
    last = last_layer(params)
    layer = dict(params[last])
    if config.output_init_scale not in (None, 1.0):
        layer["kernel"] = layer["kernel"] * config.output_init_scale
    if one_way is not None:
        bias = np.log(np.maximum(np.asarray(one_way, np.float64), ONE_WAY_FLOOR)).reshape(-1)
        if bias.size != width:
            raise ValueError(f"one_way has {bias.size} entries for an output of width {width}.")
        layer["bias"] = jnp.asarray(bias, layer["bias"].dtype)
    return {**params, last: layer}


def bin_mask(sizes: Sequence[int]) -> np.ndarray:
    """``(d, S)`` True on each column's bins, S = max(sizes) (the padded layout of the outputs)."""
    return np.arange(max(sizes))[None, :] < np.asarray(sizes)[:, None]


def bin_index(sizes: Sequence[int]) -> np.ndarray:
    """``(d, S)`` int32: the generator's output (columns' bins one after another, ``sum(sizes)``
    of them) holding each bin of the padded layout, -1 on padding bins."""
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    index = offsets[:, None] + np.arange(max(sizes))[None, :]
    return np.where(bin_mask(sizes), index, -1).astype(np.int32)


def probabilities(net: models.MLP, params: PyTree, z: jax.Array, index: jax.Array) -> jax.Array:
    """``(n, d, S)``: one softmax per column over its bins, 0 on the padding bins. The network
    computes one logit per bin (``sum(sizes)``, no padding: the last layer is the largest);
    ``index`` (:func:`bin_index`) gathers them into the padded layout, where one dense softmax
    serves every column (no per-column or segment operation, so a table of a thousand columns
    compiles and runs as a table of ten)."""
    flat = net.apply({"params": params}, z)
    if flat.shape[1] == index.size:  # no padding (every column as many bins): the same layout
        return jax.nn.softmax(flat.reshape(z.shape[0], *index.shape), axis=-1)
    logits = jnp.take(flat, jnp.maximum(index, 0), axis=1)  # its gradient: a scatter-add
    return jax.nn.softmax(jnp.where(index >= 0, logits, -jnp.inf), axis=-1)


def bucket(size: int, widest: int) -> int:
    """A column's padded width in a stacked marginal: the next power of two, at most ``widest``
    (measurements whose columns' padded widths agree share one batched computation, so a round
    seldom compiles a new program)."""
    return min(1 << (int(size) - 1).bit_length(), int(widest))


# The fewest marginals a stack holds (empty slots weigh 0): a new shape's first measurements
# then compile one program, not one at 1, 2 and 4 (empty slots cost a few per cent of a step).
MIN_STACK = 4


class Group(NamedTuple):
    """The measured marginals of one padded shape, stacked (capacity a power of two, at least
    ``MIN_STACK``).

    Attributes:
        columns: per position, ``(M,)`` the column (positions ordered by padded width; empty slots
            use column 0 with weight 0).
        target: ``(M, prod b_j)`` the noisy counts in that order, 0 on padding bins.
        weight: ``(M,)`` 1 / the measurement's noise standard deviation (0: an empty slot).
        widths: the padded widths b_j (static).
    """

    columns: tuple
    target: jax.Array
    weight: jax.Array
    widths: tuple


class Measured(NamedTuple):
    """Everything measured so far, as the compiled loss reads it: the one-way histograms as one
    ``(d, S)`` array (``one_way``, 0 on padding bins; ``one_weight`` 1 / their noise std) and the
    rounds' marginals in :class:`Group` s."""

    one_way: jax.Array
    one_weight: jax.Array
    groups: tuple


jax.tree_util.register_pytree_node(
    Group, lambda g: ((g.columns, g.target, g.weight), g.widths),
    lambda widths, ch: Group(ch[0], ch[1], ch[2], widths))


def measured(one_way: Sequence[np.ndarray], one_std: float,
             log: Sequence[tuple[Clique, np.ndarray, float]], sizes: Sequence[int]) -> Measured:
    """The measurements in the compiled layout: ``one_way`` the d noisy histograms (noise std
    ``one_std``), ``log`` the rounds' ``(clique, flattened noisy counts, noise std)``."""
    widest = max(sizes)
    by_shape: dict[tuple[int, ...], list] = {}
    for clique, y, std in log:
        order = sorted(range(len(clique)), key=lambda i: (bucket(sizes[clique[i]], widest), clique[i]))
        cols = [clique[i] for i in order]
        table = np.transpose(np.asarray(y, np.float64).reshape([sizes[a] for a in clique]), order)
        shape = tuple(bucket(sizes[a], widest) for a in cols)
        table = np.pad(table, [(0, b - sizes[a]) for a, b in zip(cols, shape)])
        by_shape.setdefault(shape, []).append((cols, table.ravel(), 1.0 / std))
    groups = []
    for shape in sorted(by_shape):
        items = by_shape[shape]
        cap = max(MIN_STACK, 1 << (len(items) - 1).bit_length())
        items = items + [([0] * len(shape), np.zeros(math.prod(shape)), 0.0)] * (cap - len(items))
        groups.append(Group(
            tuple(jnp.asarray([it[0][j] for it in items], jnp.int32) for j in range(len(shape))),
            jnp.asarray(np.stack([it[1] for it in items]), jnp.float32),
            jnp.asarray([it[2] for it in items], jnp.float32), shape))
    one = np.zeros((len(sizes), widest))
    for j, y in enumerate(one_way):
        one[j, :sizes[j]] = y
    return Measured(jnp.asarray(one, jnp.float32), jnp.float32(1.0 / one_std), tuple(groups))


def group_marginals(probs: jax.Array, group: Group) -> jax.Array:
    """``(M, prod b_j)``: each stacked marginal of the mixture, the batch mean of the product of
    its columns' probabilities (``probs``: ``(B, d, S)``), as a Khatri-Rao product of all but the
    last position contracted with the last by a batched matmul."""
    parts = [probs[:, cols, :b] for cols, b in zip(group.columns, group.widths)]
    n, m = probs.shape[0], group.weight.shape[0]
    left = parts[0]
    for p in parts[1:-1]:
        left = (left[..., :, None] * p[:, :, None, :]).reshape(n, m, -1)
    if len(parts) == 1:
        return jnp.mean(left, axis=0)
    return (jnp.einsum("bmx,bmk->mxk", left, parts[-1]) / n).reshape(m, -1)


def optimizer(config: GEMConfig) -> optax.GradientTransformation:
    """Adam at ``learning_rate``: one object per rate, so that :func:`fit_steps` (whose optimizer
    is a static argument, compared by identity) reuses its compiled programs across fits instead
    of compiling and keeping new ones every fit."""
    return _adam(float(config.learning_rate))


@functools.lru_cache(maxsize=None)
def _adam(learning_rate: float) -> optax.GradientTransformation:
    return optax.adam(learning_rate)


def fit_steps(params, opt_state, meas: Measured, index, total, key, steps, *, net, opt,
              batch_size, noise_dim, noise=None):
    """``steps`` Adam steps on the weighted L1 between the generator's marginals scaled to
    ``total`` and the noisy counts.

    ``noise``: the mixture's ``(K, noise_dim)`` fixed noise vectors (``fixed_noise``): every step
    reads all of them, so the loss is the model's exact one. A step is then two compiled programs:
    the gradient of the loss with respect to the mixture's probabilities (one small program per
    stack of measured marginals, :func:`_group_grad`, compiled once per stack shape) and the
    network's backward pass, Adam update and next forward pass (:func:`_network_step`, compiled
    once per network and optimizer): a round that adds a measurement compiles only its stack's
    program, not the network's (compiling the whole step for every new layout took about half of
    an Adult fit). None: step t draws ``batch_size`` fresh vectors from ``fold_in(key, t)``, all
    steps in one compiled loop (:func:`_fresh_steps`, one compilation per layout of ``meas``)."""
    if noise is None:
        return _fresh_steps(params, opt_state, meas, index, total, key, steps, net=net, opt=opt,
                            batch_size=batch_size, noise_dim=noise_dim)
    probs = _probabilities(params, noise, index, net=net)
    for _ in range(int(steps)):
        g = _one_way_grad(probs, meas.one_way, meas.one_weight, total)
        for group in meas.groups:
            g = _group_grad(probs, group, total, g)
        params, opt_state, probs = _network_step(params, opt_state, noise, index, g, net=net, opt=opt)
    return params, opt_state


def _one_way_loss(probs, one_way, one_weight, total):
    return one_weight * jnp.sum(jnp.abs(total * jnp.mean(probs, axis=0) - one_way))


def _group_loss(probs, group: Group, total):
    return jnp.sum(group.weight[:, None] * jnp.abs(total * group_marginals(probs, group) - group.target))


@jax.jit
def _one_way_grad(probs, one_way, one_weight, total):
    """The one-way term's gradient with respect to the probabilities ``(K, d, S)``."""
    return jax.grad(_one_way_loss)(probs, one_way, one_weight, total)


@jax.jit
def _group_grad(probs, group: Group, total, acc):
    """``acc`` plus one stack's gradient with respect to the probabilities."""
    return acc + jax.grad(_group_loss)(probs, group, total)


@functools.partial(jax.jit, static_argnames=("net",))
def _probabilities(params, noise, index, *, net):
    return probabilities(net, params, noise, index)


@functools.partial(jax.jit, static_argnames=("net", "opt"))
def _network_step(params, opt_state, noise, index, g_probs, *, net, opt):
    """One Adam step given the loss's gradient with respect to the probabilities (the network's
    backward pass by ``jax.vjp``), and the new parameters' probabilities for the next step."""
    _, pull = jax.vjp(lambda p: probabilities(net, p, noise, index), params)
    (grad,) = pull(g_probs)
    updates, opt_state = opt.update(grad, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, probabilities(net, params, noise, index)


@functools.partial(jax.jit, static_argnames=("net", "opt", "batch_size", "noise_dim"))
def _fresh_steps(params, opt_state, meas: Measured, index, total, key, steps, *, net, opt,
                 batch_size, noise_dim):
    """:func:`fit_steps` on fresh noise: ``steps`` (traced) in one ``lax.fori_loop``."""

    def loss(p, z):
        probs = probabilities(net, p, z, index)
        out = _one_way_loss(probs, meas.one_way, meas.one_weight, total)
        for g in meas.groups:
            out = out + _group_loss(probs, g, total)
        return out

    def body(t, carry):
        p, s = carry
        z = jax.random.normal(jax.random.fold_in(key, t), (batch_size, noise_dim))
        upd, s = opt.update(jax.grad(loss)(p, z), s, p)
        return optax.apply_updates(p, upd), s

    return jax.lax.fori_loop(0, steps, body, (params, opt_state))


@functools.partial(jax.jit, static_argnames=("net", "n", "noise_dim"))
def draw_codes(params, index, key, *, net, n, noise_dim, noise=None):
    """``(n, d)`` codes, each column drawn from its softmax for a noise vector per row: one of
    the K fixed ``noise`` vectors drawn uniformly (the finite mixture :func:`fit_steps` fitted), or
    without ``noise`` a fresh one. A code is the number of the column's cumulative probabilities
    below one uniform draw (inversion: one random number per row and column), capped at the
    column's last bin (padding bins have probability 0)."""
    k_z, k_u = jax.random.split(key)
    if noise is None:
        cdf = jnp.cumsum(probabilities(net, params, jax.random.normal(k_z, (n, noise_dim)), index), axis=-1)
    else:
        cdf = jnp.cumsum(probabilities(net, params, noise, index), axis=-1)
        cdf = cdf[jax.random.randint(k_z, (n,), 0, noise.shape[0])]
    u = jax.random.uniform(k_u, (n, index.shape[0], 1)) * cdf[:, :, -1:]  # the total: 1 up to rounding
    last = jnp.sum(index >= 0, axis=-1) - 1
    return jnp.minimum(jnp.sum(cdf <= u, axis=-1), last).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("net", "noise_dim", "n", "iterations"))
def fit_one_way_bias(params, index, target, columns, key, *, net, noise_dim, n, iterations, noise=None):
    """``params`` with the last layer's bias shifted ``iterations`` times by
    ``log(target) - log(mean probabilities)`` on the bins of ``columns`` (``(d,)`` booleans), the
    mean over ``n`` noise vectors drawn once (the mixture's own ``noise`` when it has fixed
    ones); ``target`` ``(d, S)`` probabilities, floored at ``ONE_WAY_FLOOR``. The kernels are
    kept: each column's rates move to ``target``'s, the rows' dependence through the noise stays
    (a raking of the generator's one-way rates; ``GEMConfig.calibrate_iterations``;
    post-processing, no noise calibrated here)."""
    last = last_layer(params)
    z = jax.random.normal(key, (n, noise_dim)) if noise is None else noise
    goal = jnp.log(jnp.maximum(target, ONE_WAY_FLOOR))
    width = params[last]["bias"].shape[0]
    into = jnp.where((index >= 0) & columns[:, None], index, width)  # width: dropped

    def body(_, bias):
        p = {**params, last: {**params[last], "bias": bias}}
        now = jnp.log(jnp.maximum(jnp.mean(probabilities(net, p, z, index), axis=0), 1e-30))
        return bias.at[into].add(goal - now, mode="drop")

    bias = jax.lax.fori_loop(0, iterations, body, params[last]["bias"])
    return {**params, last: {**params[last], "bias": bias}}


def mixture_marginal(net, params, z: jax.Array, index: jax.Array, clique: Clique,
                     sizes: Sequence[int]) -> np.ndarray:
    """The generator's marginal of ``clique`` (probabilities, flattened in the clique's order):
    the mean over the noise vectors ``z`` of the product of the columns' probabilities."""
    probs = probabilities(net, params, z, index)
    out = probs[:, clique[0], :sizes[clique[0]]]
    for a in clique[1:]:
        out = (out[:, :, None] * probs[:, a, None, :sizes[a]]).reshape(z.shape[0], -1)
    return np.asarray(jnp.mean(out, axis=0), np.float64)
