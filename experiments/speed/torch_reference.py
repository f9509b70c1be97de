"""PyTorch / Opacus reference implementations of the benchmarked DP-SGD steps.

The throughput harness (``experiments/speed/throughput.py``) compares dpgen_jax's DP-SGD steps with the
torch implementations users know. This module builds those torch rows, written for this project
(nothing copied), from weights handed in from JAX so both frameworks compute the same function:

* models (``MODELS``): ``adult_autoencoder`` 106-60-15-60-106 (LeakyReLU 0.2, mean-BCE over the
  106 coordinates), ``adult_critic`` 106-70-35-1 (LeakyReLU 0.2, per-example loss ``-critic(x)``,
  the real-data term of the WGAN critic loss) and ``mimic_autoencoder`` 1071-128-1071 (tanh
  encoder, summed BCE over the 1071 coordinates). Autoencoders use the input as the target; the
  decoder's sigmoid is folded into BCE-with-logits (docs/dp-auto-gan.md).
* methods (``METHODS``): ``nonprivate`` (one batched backward pass), ``loop`` (the DP-auto-GAN
  authors' per-example loop, docs/dp-auto-gan.md), ``opacus_hooks`` (``GradSampleModule`` +
  ``DPOptimizer``) and ``opacus_ghost`` (``GradSampleModuleFastGradientClipping`` +
  ``DPOptimizerFastGradientClipping`` + ``DPLossFastGradientClipping``).

Every step samples its own batch the way the JAX step does: Poisson sampling
``torch.rand(m) < q`` over a device-resident float32 data tensor, then a row gather. Every DP
method divides the noised clipped sum by the *expected* batch size ``q * m`` and applies plain SGD
(no momentum; ``optimizer="adam"`` selects ``torch.optim.Adam`` instead). Opacus is used without its
``PrivacyEngine``/``DPDataLoader`` (we sample ourselves) and without an accountant hook; its noise
uses ``secure_mode=False``, like the JAX side.

GS-WGAN pretraining in the authors' structure (``gswgan_*``, used by
``experiments/speed/gswgan_pretrain.py``) is defined in ``experiments/speed/_torch_gswgan.py`` and
importable from here; it needs torch only, not opacus.

Privacy: these are benchmark references, not a private training API. The DP methods implement the
Poisson-subsampled Gaussian mechanism (add/remove neighbours, L2 sensitivity ``clip_norm`` of the
clipped sum, noise std ``noise_multiplier * clip_norm``), but nothing here accounts for privacy.
"""

from __future__ import annotations

import math
import time
import types
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpgen_jax import _validate as _v
from experiments.speed._torch_gswgan import (
    GSWGAN_PRETRAIN,
    gswgan_available,
    gswgan_critic_loss,
    gswgan_nets_from_jax,
    gswgan_networks,
    gswgan_pretrain_shard,
    time_gswgan_pretrain,
)

try:  # torch and opacus come from the optional ``bench`` extra.
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError as _exc:  # pragma: no cover - exercised only without torch
    torch = None
    _TORCH_ERROR = f"torch is not importable ({_exc}); install the 'bench' extra"
else:
    _TORCH_ERROR = ""

try:  # without torch, opacus's import error would only repeat torch's
    if torch is None:
        raise ImportError("torch is missing")
    from opacus import GradSampleModule
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.optimizers import DPOptimizer, DPOptimizerFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
except ImportError as _exc:  # pragma: no cover - exercised only without opacus
    _OPACUS_ERROR = f"opacus is not importable ({_exc}); install the 'bench' extra"
else:
    _OPACUS_ERROR = ""

__all__ = [
    "GSWGAN_PRETRAIN",
    "LOSSES",
    "METHODS",
    "MODELS",
    "available",
    "clipped_grad_sum",
    "gswgan_available",
    "gswgan_critic_loss",
    "gswgan_networks",
    "gswgan_nets_from_jax",
    "gswgan_pretrain_shard",
    "init_weights",
    "time_gswgan_pretrain",
    "time_steps",
]

#: name -> (input dim, layers); each layer is ``(out_features, activation after it or None)``.
MODELS: types.MappingProxyType = types.MappingProxyType(
    {
        "adult_autoencoder": (
            106,
            ((60, "leaky_relu"), (15, "leaky_relu"), (60, "leaky_relu"), (106, None)),
        ),
        "adult_critic": (106, ((70, "leaky_relu"), (35, "leaky_relu"), (1, None))),
        "mimic_autoencoder": (1071, ((128, "tanh"), (1071, None))),
    }
)

#: name -> per-example loss: ``bce_mean`` / ``bce_sum`` are BCE-with-logits of the final layer
#: against the input, averaged / summed over coordinates; ``neg_output`` is ``-f(x)``.
LOSSES: types.MappingProxyType = types.MappingProxyType(
    {
        "adult_autoencoder": "bce_mean",
        "adult_critic": "neg_output",
        "mimic_autoencoder": "bce_sum",
    }
)

METHODS = ("nonprivate", "loop", "opacus_hooks", "opacus_ghost")
OPTIMIZERS = ("sgd", "adam")

_LEAKY_SLOPE = 0.2
_CLIP_EPS = 1e-6  # the clip factor is min(1, C / (norm + 1e-6)), as in Opacus and the authors' code
# Opacus's hooks are full backward hooks on modules whose inputs do not require grad; torch warns
# about that on every such module. It is harmless here (the hooks need only output gradients).
_HOOK_WARNING = "Full backward hook is firing when gradients are computed"

Weights = Sequence[tuple[np.ndarray, np.ndarray]]


def available() -> tuple[bool, str]:
    """Whether the torch rows can run.

    Returns:
        ``(True, "")`` when torch and opacus import, else ``(False, reason)``.
    """
    reasons = [r for r in (_TORCH_ERROR, _OPACUS_ERROR if torch is not None else "") if r]
    return (not reasons, "; ".join(reasons))


def init_weights(model: str, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """PyTorch-default initial weights, ``U(±1/sqrt(fan_in))`` for kernels and biases.

    Args:
        model: a key of ``MODELS``.
        seed: seed of the numpy generator.

    Returns:
        ``[(kernel (in, out), bias (out,)), ...]`` float32, in forward order (Flax layout).

    Raises:
        ValueError: unknown ``model``.
    """
    in_dim, layers = _model_spec(model)
    rng = np.random.default_rng(_v.integral(seed=seed))
    weights = []
    for out_dim, _ in layers:
        bound = 1.0 / math.sqrt(in_dim)
        kernel = rng.uniform(-bound, bound, size=(in_dim, out_dim)).astype(np.float32)
        bias = rng.uniform(-bound, bound, size=(out_dim,)).astype(np.float32)
        weights.append((kernel, bias))
        in_dim = out_dim
    return weights


def clipped_grad_sum(
    model: str,
    method: str,
    weights: Weights,
    batch: np.ndarray,
    clip_norm: float,
    *,
    device: str = "cpu",
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The clipped per-example gradient sum one step of ``method`` computes (noise off).

    The batch is used as given (no sampling). The step is the same code path as in
    :func:`time_steps`, built with ``noise_multiplier=0``, ``expected_batch_size=1`` and learning
    rate 0, so the gradient the optimizer receives (``p.grad`` after the step, for Opacus too) is
    exactly the clipped sum divided by 1. For ``nonprivate`` it is the plain (unclipped) sum.

    Args:
        model: a key of ``MODELS``.
        method: one of ``METHODS``.
        weights: ``[(kernel (in, out), bias (out,)), ...]`` float32 in forward order.
        batch: ``(n, input_dim)`` float32 rows.
        clip_norm: per-example L2 bound ``C > 0`` (ignored by ``nonprivate``).
        device: torch device string.

    Returns:
        ``[(kernel_grad (in, out), bias_grad (out,)), ...]`` float32 numpy, forward order.

    Raises:
        RuntimeError: torch or opacus missing.
        ValueError / TypeError: a bad argument (named in the message).
    """
    _require_available()
    in_dim, _ = _model_spec(model)
    _v.one_of(METHODS, method=method)
    _check_weights(model, weights)
    _check_data("batch", batch, in_dim, min_rows=0)
    clip_norm = _v.positive(clip_norm=clip_norm)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_HOOK_WARNING, category=UserWarning)
        step = _DPStep(
            model,
            method,
            weights,
            clip_norm=clip_norm,
            noise_multiplier=0.0,
            expected_batch_size=1.0,
            optimizer="sgd",
            learning_rate=0.0,
            generator=torch.Generator(device=device).manual_seed(0),
            device=torch.device(device),
        )
        step.update(torch.tensor(batch, device=step.device))
    return [
        (
            layer.weight.grad.detach().T.cpu().numpy().copy(),
            layer.bias.grad.detach().cpu().numpy().copy(),
        )
        for layer in step.linears
    ]


def time_steps(
    model: str,
    method: str,
    weights: Weights,
    data: np.ndarray,
    sample_rate: float,
    clip_norm: float,
    noise_multiplier: float,
    *,
    steps: int,
    warmup: int,
    threads: int,
    seed: int,
    optimizer: str = "sgd",
    learning_rate: float = 1e-3,
    device: str = "cpu",
) -> list[float]:
    """Wall-clock milliseconds of full optimizer steps of ``method``, sampling included.

    Each timed step draws a Poisson batch (``torch.rand(m) < sample_rate`` over the data tensor,
    already on ``device``), computes the (clipped, noised) gradient, divides by the expected batch
    size ``sample_rate * m`` and applies the optimizer. Warm-up steps run first and are not
    returned. ``torch.set_num_threads(threads)`` holds during the call and is restored after.

    Args:
        model: a key of ``MODELS``.
        method: one of ``METHODS``.
        weights: initial ``[(kernel (in, out), bias (out,)), ...]`` float32, forward order.
        data: ``(m, input_dim)`` float32 training rows.
        sample_rate: Poisson inclusion probability ``q`` in (0, 1].
        clip_norm: per-example L2 bound ``C > 0`` (unused by ``nonprivate``).
        noise_multiplier: ``sigma >= 0``; noise std is ``sigma * C`` (unused by ``nonprivate``).
        steps: number of timed steps (>= 1).
        warmup: number of untimed steps before them (>= 0).
        threads: torch intra-op threads (>= 1).
        seed: seed of the torch generator used for sampling and noise.
        optimizer: ``"sgd"`` (plain SGD) or ``"adam"`` (``torch.optim.Adam`` defaults).
        learning_rate: optimizer learning rate (>= 0).
        device: torch device string; CUDA steps are synchronised before each timestamp.

    Returns:
        ``steps`` floats, milliseconds per timed step.

    Raises:
        RuntimeError: torch or opacus missing.
        ValueError / TypeError: a bad argument (named in the message).

    Privacy:
        DP methods apply the Poisson-subsampled Gaussian mechanism with noise std
        ``noise_multiplier * clip_norm`` on the clipped sum; no accounting is done here.
    """
    _require_available()
    in_dim, _ = _model_spec(model)
    _v.one_of(METHODS, method=method)
    _check_weights(model, weights)
    _check_data("data", data, in_dim, min_rows=1)
    sample_rate = _v.probability(sample_rate=sample_rate)
    clip_norm = _v.positive(clip_norm=clip_norm)
    noise_multiplier = _v.non_negative(noise_multiplier=noise_multiplier)
    steps = _v.whole(minimum=1, steps=steps)
    warmup = _v.whole(minimum=0, warmup=warmup)
    threads = _v.whole(minimum=1, threads=threads)
    seed = _v.integral(seed=seed)
    _v.one_of(OPTIMIZERS, optimizer=optimizer)
    learning_rate = _v.non_negative(learning_rate=learning_rate)

    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_HOOK_WARNING, category=UserWarning)
            x_all = torch.tensor(data, device=dev)
            generator = torch.Generator(device=dev).manual_seed(seed)
            step = _DPStep(
                model,
                method,
                weights,
                clip_norm=clip_norm,
                noise_multiplier=noise_multiplier,
                expected_batch_size=sample_rate * x_all.shape[0],
                optimizer=optimizer,
                learning_rate=learning_rate,
                generator=generator,
                device=dev,
            )
            times = []
            sync()
            for i in range(warmup + steps):
                start = time.perf_counter()
                step.sample_and_update(x_all, sample_rate)
                sync()
                elapsed = time.perf_counter() - start
                if i >= warmup:
                    times.append(elapsed * 1e3)
    finally:
        torch.set_num_threads(previous_threads)
    return times


# --------------------------------------------------------------------------------------------
# implementation


def _per_example_loss(kind: str, output: Any, target: Any) -> Any:
    """Per-example losses, shape (n,), of the final-layer ``output`` (n, k)."""
    if kind == "bce_mean":
        return F.binary_cross_entropy_with_logits(output, target, reduction="none").mean(dim=1)
    if kind == "bce_sum":
        return F.binary_cross_entropy_with_logits(output, target, reduction="none").sum(dim=1)
    if kind == "neg_output":
        return -output[:, 0]
    raise ValueError(f"Unknown loss kind {kind!r}.")  # pragma: no cover - LOSSES is fixed


class _Criterion:
    """Loss object for ``DPLossFastGradientClipping``: it sets ``reduction="none"`` to get the
    per-example losses, and reads ``reduction`` to check it matches the module's."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.reduction = "mean"

    def __call__(self, output: Any, target: Any) -> Any:
        per_example = _per_example_loss(self.kind, output, target)
        if self.reduction == "none":
            return per_example
        if self.reduction == "sum":
            return per_example.sum()
        return per_example.mean()


def _build_net(model: str, weights: Weights, device: Any) -> Any:
    """An ``nn.Sequential`` of Linear/activation layers holding ``weights`` (kernel.T = weight)."""
    in_dim, layers = MODELS[model]
    modules = []
    for (out_dim, activation), (kernel, bias) in zip(layers, weights):
        linear = nn.Linear(in_dim, out_dim)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(np.ascontiguousarray(np.asarray(kernel).T)))
            linear.bias.copy_(torch.from_numpy(np.asarray(bias)))
        modules.append(linear)
        if activation == "leaky_relu":
            modules.append(nn.LeakyReLU(_LEAKY_SLOPE))
        elif activation == "tanh":
            modules.append(nn.Tanh())
        in_dim = out_dim
    return nn.Sequential(*modules).to(device)


class _DPStep:
    """One optimizer step of one method; ``update`` takes a batch, ``sample_and_update`` draws it.

    Attributes:
        net: the plain ``nn.Sequential`` (Opacus methods wrap it, sharing its parameters).
        linears: its ``nn.Linear`` layers in forward order.
    """

    def __init__(
        self,
        model: str,
        method: str,
        weights: Weights,
        *,
        clip_norm: float,
        noise_multiplier: float,
        expected_batch_size: float,
        optimizer: str,
        learning_rate: float,
        generator: Any,
        device: Any,
    ) -> None:
        self.method = method
        self.device = device
        self.loss_kind = LOSSES[model]
        self.clip_norm = float(clip_norm)
        self.noise_std = float(noise_multiplier) * float(clip_norm)
        self.expected_batch_size = float(expected_batch_size)
        self.generator = generator
        self.net = _build_net(model, weights, device)
        self.linears = [m for m in self.net if isinstance(m, nn.Linear)]
        self.params = list(self.net.parameters())
        if optimizer == "adam":
            base = torch.optim.Adam(self.params, lr=learning_rate)
        else:
            base = torch.optim.SGD(self.params, lr=learning_rate)

        if method in ("nonprivate", "loop"):
            self.module = self.net
            self.optimizer = base
        elif method == "opacus_hooks":
            # loss_reduction="mean": Opacus rescales the backprops by the realised batch size, so
            # the per-sample gradients are those of the per-example losses; DPOptimizer clips,
            # sums, adds N(0, (sigma C)^2) and divides by expected_batch_size.
            self.module = GradSampleModule(self.net, loss_reduction="mean")
            self.optimizer = DPOptimizer(
                base,
                noise_multiplier=noise_multiplier,
                max_grad_norm=clip_norm,
                expected_batch_size=self.expected_batch_size,
                loss_reduction="mean",
                generator=generator,
            )
        else:  # opacus_ghost
            # Two backward passes inside DPTensorFastGradientClipping.backward: the first (on the
            # mean loss, backprops rescaled by the batch size) gives per-sample norms, the second
            # (on sum_i coef_i * loss_i) leaves the clipped sum in p.grad; the optimizer then adds
            # noise and divides by expected_batch_size.
            self.module = GradSampleModuleFastGradientClipping(
                self.net, loss_reduction="mean", max_grad_norm=clip_norm, use_ghost_clipping=True
            )
            self.optimizer = DPOptimizerFastGradientClipping(
                base,
                noise_multiplier=noise_multiplier,
                max_grad_norm=clip_norm,
                expected_batch_size=self.expected_batch_size,
                loss_reduction="mean",
                generator=generator,
            )
            self.criterion = DPLossFastGradientClipping(
                self.module, self.optimizer, _Criterion(self.loss_kind), loss_reduction="mean"
            )
        self.update = getattr(self, f"_update_{method}")

    def sample_and_update(self, x_all: Any, sample_rate: float) -> None:
        """Poisson-sample a batch from ``x_all`` (m, d) and take one step on it."""
        mask = torch.rand(x_all.shape[0], generator=self.generator, device=x_all.device)
        self.update(x_all[mask < sample_rate])

    def _update_nonprivate(self, xb: Any) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        losses = _per_example_loss(self.loss_kind, self.net(xb), xb)
        (losses.sum() / self.expected_batch_size).backward()
        self.optimizer.step()

    def _update_loop(self, xb: Any) -> None:
        # The authors' microbatch-1 loop: forward+backward per example, global L2 norm over all
        # parameters, clip by min(1, C / (norm + 1e-6)), accumulate; then one Gaussian draw per
        # parameter tensor and division by the expected batch size. Written the fast way: one
        # host read of the global norm per example (the authors read one per parameter) and
        # torch's multi-tensor ops (measured fastest of four variants of this loop).
        params = self.params
        accumulated = [torch.zeros_like(p) for p in params]
        for i in range(xb.shape[0]):
            xi = xb[i : i + 1]
            loss = _per_example_loss(self.loss_kind, self.net(xi), xi).sum()
            grads = torch.autograd.grad(loss, params)
            norm = float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))))
            coef = min(1.0, self.clip_norm / (norm + _CLIP_EPS))
            torch._foreach_add_(accumulated, grads, alpha=coef)
        for p, acc in zip(params, accumulated):
            if self.noise_std > 0.0:
                acc.add_(
                    torch.normal(
                        0.0, self.noise_std, size=acc.shape, generator=self.generator,
                        device=acc.device,
                    )
                )
            p.grad = acc.div_(self.expected_batch_size)
        self.optimizer.step()

    def _update_opacus_hooks(self, xb: Any) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        losses = _per_example_loss(self.loss_kind, self.module(xb), xb)
        losses.mean().backward()
        self.optimizer.step()

    def _update_opacus_ghost(self, xb: Any) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.criterion(self.module(xb), xb)
        loss.backward()
        self.optimizer.step()


# --------------------------------------------------------------------------------------------
# validation


def _require_available() -> None:
    ok, reason = available()
    if not ok:
        raise RuntimeError(f"The torch reference needs torch and opacus: {reason}.")


def _model_spec(model: str) -> tuple[int, tuple]:
    _v.one_of(tuple(MODELS), model=model)
    return MODELS[model]


def _check_weights(model: str, weights: Weights) -> None:
    in_dim, layers = MODELS[model]
    if not isinstance(weights, (list, tuple)) or len(weights) != len(layers):
        got = f"{len(weights)} pairs" if isinstance(weights, (list, tuple)) else f"a {type(weights).__name__}"
        raise ValueError(
            f"weights for {model!r} is {got}, not a list of {len(layers)} (kernel, bias) pairs: pass "
            "one pair per layer."
        )
    for index, ((out_dim, _), pair) in enumerate(zip(layers, weights)):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"weights[{index}] is not a (kernel, bias) pair: pass two arrays.")
        for name, array, shape in (
            ("kernel", pair[0], (in_dim, out_dim)),
            ("bias", pair[1], (out_dim,)),
        ):
            array = np.asarray(array)
            if array.dtype != np.float32:
                raise TypeError(
                    f"weights[{index}] {name} has dtype {array.dtype}: pass float32 arrays."
                )
            if array.shape != shape:
                raise ValueError(
                    f"weights[{index}] {name} has shape {array.shape}, not {shape}: pass the "
                    f"layer shapes of {model!r}."
                )
        in_dim = out_dim


def _check_data(name: str, data: np.ndarray, in_dim: int, *, min_rows: int) -> None:
    _v.instance(np.ndarray, "a numpy array", **{name: data})
    if data.dtype != np.float32:
        raise TypeError(f"{name} has dtype {data.dtype}: pass float32 (e.g. {name}.astype(np.float32)).")
    if data.ndim != 2 or data.shape[1] != in_dim or data.shape[0] < min_rows:
        raise ValueError(
            f"{name} has shape {data.shape}: pass shape (n, {in_dim}) with n >= {min_rows}."
        )
