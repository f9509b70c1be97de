"""Torch/Opacus reference steps against an independent float64 numpy per-example reference."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("opacus")

from experiments.speed import torch_reference as tr  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")

DP_METHODS = ("loop", "opacus_hooks", "opacus_ghost")


# ---------------------------------------------------------------------------------------------
# independent reference: hand-written backprop in float64, per-example gradients materialised


def _act(name, z):
    if name == "leaky_relu":
        return np.where(z > 0, z, 0.2 * z)
    if name == "tanh":
        return np.tanh(z)
    return z


def _act_grad(name, z):
    if name == "leaky_relu":
        return np.where(z > 0, 1.0, 0.2)
    if name == "tanh":
        return 1.0 - np.tanh(z) ** 2
    return np.ones_like(z)


def _per_example_grads(model, weights, x):
    """[(kernel grads (n, in, out), bias grads (n, out))] of each example's own loss."""
    _, layers = tr.MODELS[model]
    ws = [(k.astype(np.float64), b.astype(np.float64)) for k, b in weights]
    x = x.astype(np.float64)
    h, inputs, pre = x, [], []
    for (_, act), (k, b) in zip(layers, ws):
        inputs.append(h)
        z = h @ k + b
        pre.append(z)
        h = _act(act, z)
    logits = pre[-1]
    loss = tr.LOSSES[model]
    if loss == "bce_mean":
        delta = (1.0 / (1.0 + np.exp(-logits)) - x) / x.shape[1]
    elif loss == "bce_sum":
        delta = 1.0 / (1.0 + np.exp(-logits)) - x
    else:  # neg_output
        delta = -np.ones_like(logits)
    grads = [None] * len(ws)
    for index in reversed(range(len(ws))):
        grads[index] = (np.einsum("ni,nj->nij", inputs[index], delta), delta.copy())
        if index > 0:
            delta = (delta @ ws[index][0].T) * _act_grad(layers[index - 1][1], pre[index - 1])
    return grads


def _norms(grads):
    return np.sqrt(sum((gk**2).sum(axis=(1, 2)) + (gb**2).sum(axis=1) for gk, gb in grads))


def _reference_sum(grads, clip_norm):
    if clip_norm is None:
        coef = np.ones(grads[0][1].shape[0])
    else:
        coef = np.minimum(1.0, clip_norm / (_norms(grads) + 1e-6))
    return [(np.einsum("n,nij->ij", coef, gk), coef @ gb) for gk, gb in grads]


def _random_weights(model, rng):
    in_dim, layers = tr.MODELS[model]
    weights = []
    for out_dim, _ in layers:
        scale = 1.5 / np.sqrt(in_dim)
        weights.append(
            (
                rng.uniform(-scale, scale, (in_dim, out_dim)).astype(np.float32),
                rng.uniform(-scale, scale, (out_dim,)).astype(np.float32),
            )
        )
        in_dim = out_dim
    return weights


def _batch(model, rng, n):
    d = tr.MODELS[model][0]
    return (rng.random((n, d)) < 0.3).astype(np.float32)


def _assert_close(got, ref):
    assert len(got) == len(ref)
    scale = max(np.abs(r).max() for pair in ref for r in pair)
    for (gk, gb), (rk, rb) in zip(got, ref):
        assert gk.shape == rk.shape and gb.shape == rb.shape
        assert gk.dtype == np.float32 and gb.dtype == np.float32
        np.testing.assert_allclose(gk, rk, rtol=1e-4, atol=1e-5 * scale)
        np.testing.assert_allclose(gb, rb, rtol=1e-4, atol=1e-5 * scale)


# ---------------------------------------------------------------------------------------------


def test_available():
    assert tr.available() == (True, "")


@pytest.mark.parametrize("model", list(tr.MODELS))
def test_clipped_sums_match_reference(model):
    rng = np.random.default_rng(list(tr.MODELS).index(model) + 10)
    weights = _random_weights(model, rng)
    x = _batch(model, rng, 10)
    grads = _per_example_grads(model, weights, x)
    norms = _norms(grads)
    assert norms.min() > 0 and norms.max() > 1.2 * norms.min()  # the clip norms below differ
    clip_norms = {
        "clips_nothing": float(norms.max()) * 10.0,
        "clips_some": float(np.median(norms)),
        "clips_all": float(norms.min()) * 0.3,
    }
    _assert_close(tr.clipped_grad_sum(model, "nonprivate", weights, x, 1.0), _reference_sum(grads, None))
    for label, clip_norm in clip_norms.items():
        ref = _reference_sum(grads, clip_norm)
        for method in DP_METHODS:
            got = tr.clipped_grad_sum(model, method, weights, x, clip_norm)
            try:
                _assert_close(got, ref)
            except AssertionError as err:
                raise AssertionError(f"{model} {method} {label} (C={clip_norm})") from err
    # Clipping really happened in the other two cases: the sums differ from the unclipped one.
    unclipped = _reference_sum(grads, None)[0][0]
    assert not np.allclose(_reference_sum(grads, clip_norms["clips_some"])[0][0], unclipped)


def test_clipped_sum_of_an_empty_batch_is_zero():
    model = "adult_critic"
    weights = tr.init_weights(model, 0)
    x = np.zeros((0, 106), np.float32)
    for method in tr.METHODS:
        for gk, gb in tr.clipped_grad_sum(model, method, weights, x, 0.1):
            assert not gk.any() and not gb.any()


@pytest.mark.parametrize("method", DP_METHODS)
def test_noise_and_division_by_expected_batch_size(method):
    """One SGD step with lr=1: update * b - clipped sum is the noise, N(0, (sigma C)^2) i.i.d."""
    from scipy import stats

    model = "adult_autoencoder"
    rng = np.random.default_rng(1)
    weights = _random_weights(model, rng)
    x = _batch(model, rng, 8)
    clip_norm, sigma, expected_b = 0.05, 2.0, 6.5
    step = tr._DPStep(
        model, method, weights, clip_norm=clip_norm, noise_multiplier=sigma,
        expected_batch_size=expected_b, optimizer="sgd", learning_rate=1.0,
        generator=torch.Generator().manual_seed(3), device=torch.device("cpu"),
    )
    before = [p.detach().clone() for p in step.params]
    step.update(torch.tensor(x))
    ref = _reference_sum(_per_example_grads(model, weights, x), clip_norm)
    noise = []
    for layer_index, layer in enumerate(step.linears):
        for p, p0, r in ((layer.weight, before[2 * layer_index], ref[layer_index][0].T),
                         (layer.bias, before[2 * layer_index + 1], ref[layer_index][1])):
            update = (p0 - p.detach()).double().numpy() * expected_b
            noise.append((update - r).ravel())
    noise = np.concatenate(noise)
    std = sigma * clip_norm
    assert noise.size == 14_761
    assert abs(noise.mean()) < 4 * std / np.sqrt(noise.size)
    assert stats.kstest(noise, "norm", args=(0, std)).pvalue > 1e-3
    assert stats.kstest(noise, "norm", args=(0, std * 2 / 3)).pvalue < 1e-6
    assert stats.kstest(noise, "norm", args=(0, std * 1.5)).pvalue < 1e-6


def test_nonprivate_step_divides_by_expected_batch_size():
    model = "adult_critic"
    rng = np.random.default_rng(2)
    weights = _random_weights(model, rng)
    x = _batch(model, rng, 5)
    step = tr._DPStep(
        model, "nonprivate", weights, clip_norm=1.0, noise_multiplier=0.0,
        expected_batch_size=4.0, optimizer="sgd", learning_rate=0.5,
        generator=torch.Generator().manual_seed(0), device=torch.device("cpu"),
    )
    step.update(torch.tensor(x))
    ref = _reference_sum(_per_example_grads(model, weights, x), None)
    new_kernel = step.linears[0].weight.detach().T.double().numpy()
    np.testing.assert_allclose(new_kernel, weights[0][0] - 0.5 * ref[0][0] / 4.0, rtol=0, atol=1e-6)


def test_poisson_sampling_rate():
    model = "adult_critic"
    weights = tr.init_weights(model, 0)
    step = tr._DPStep(
        model, "nonprivate", weights, clip_norm=1.0, noise_multiplier=0.0,
        expected_batch_size=1.0, optimizer="sgd", learning_rate=0.0,
        generator=torch.Generator().manual_seed(0), device=torch.device("cpu"),
    )
    sizes = []
    step.update = lambda xb: sizes.append(xb.shape[0])
    x_all = torch.zeros(2000, 106)
    for _ in range(200):
        step.sample_and_update(x_all, 0.05)
    # Binomial(2000, 0.05) per step: mean 100, std 9.7; the mean of 200 draws has std 0.69.
    assert abs(np.mean(sizes) - 100.0) < 3.5
    assert 6.0 < np.std(sizes) < 14.0


@pytest.mark.parametrize("method", tr.METHODS)
def test_time_steps_runs_every_method(method):
    rng = np.random.default_rng(0)
    data = _batch("adult_critic", rng, 300)
    weights = tr.init_weights("adult_critic", 0)
    before = torch.get_num_threads()
    times = tr.time_steps(
        "adult_critic", method, weights, data, 0.05, 0.1, 1.0,
        steps=3, warmup=1, threads=1, seed=0, optimizer="adam",
    )
    assert len(times) == 3 and all(t > 0 for t in times)
    assert torch.get_num_threads() == before


def test_init_weights_follow_torch_default_bounds():
    weights = tr.init_weights("mimic_autoencoder", 5)
    assert [w[0].shape for w in weights] == [(1071, 128), (128, 1071)]
    assert np.abs(weights[0][0]).max() <= 1 / np.sqrt(1071)
    assert np.abs(weights[1][1]).max() <= 1 / np.sqrt(128)
    assert np.abs(weights[1][1]).max() > 0.9 / np.sqrt(128)
    assert all(w.dtype == np.float32 for pair in weights for w in pair)


def test_bad_arguments_are_named():
    w = tr.init_weights("adult_critic", 0)
    x = np.zeros((4, 106), np.float32)
    with pytest.raises(ValueError, match="model='nope'"):
        tr.clipped_grad_sum("nope", "loop", w, x, 1.0)
    with pytest.raises(ValueError, match="method='ghost'"):
        tr.clipped_grad_sum("adult_critic", "ghost", w, x, 1.0)
    with pytest.raises(ValueError, match=r"weights\[1\] kernel has shape \(35, 70\), not \(70, 35\)"):
        tr.clipped_grad_sum("adult_critic", "loop", [w[0], (w[1][0].T, w[1][1]), w[2]], x, 1.0)
    with pytest.raises(TypeError, match="float32"):
        tr.clipped_grad_sum("adult_critic", "loop", [(k.astype(np.float64), b) for k, b in w], x, 1.0)
    with pytest.raises(ValueError, match="list of 3"):
        tr.clipped_grad_sum("adult_critic", "loop", w[:2], x, 1.0)
    with pytest.raises(ValueError, match=r"batch has shape \(4, 105\)"):
        tr.clipped_grad_sum("adult_critic", "loop", w, np.zeros((4, 105), np.float32), 1.0)
    with pytest.raises(TypeError, match="batch has dtype float64: pass float32"):
        tr.clipped_grad_sum("adult_critic", "loop", w, x.astype(np.float64), 1.0)
    with pytest.raises(ValueError, match="clip_norm=0.0"):
        tr.clipped_grad_sum("adult_critic", "loop", w, x, 0.0)
    kwargs = dict(steps=1, warmup=0, threads=1, seed=0)
    with pytest.raises(ValueError, match="sample_rate=1.5"):
        tr.time_steps("adult_critic", "loop", w, x, 1.5, 1.0, 1.0, **kwargs)
    with pytest.raises(ValueError, match="noise_multiplier=-1.0"):
        tr.time_steps("adult_critic", "loop", w, x, 0.5, 1.0, -1.0, **kwargs)
    with pytest.raises(ValueError, match="steps=0"):
        tr.time_steps("adult_critic", "loop", w, x, 0.5, 1.0, 1.0, **{**kwargs, "steps": 0})
    with pytest.raises(TypeError, match="threads"):
        tr.time_steps("adult_critic", "loop", w, x, 0.5, 1.0, 1.0, **{**kwargs, "threads": 1.0})
    with pytest.raises(ValueError, match="optimizer='rmsprop'"):
        tr.time_steps("adult_critic", "loop", w, x, 0.5, 1.0, 1.0, **kwargs, optimizer="rmsprop")
