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

GS-WGAN pretraining (``gswgan_*``, used by ``experiments/speed/gswgan_pretrain.py``): the tabular GS-WGAN
networks of ``dpgen_jax.models.gs_wgan_networks`` (generator ``z(32) -> 128 -> LayerNorm -> ReLU ->
256 -> LayerNorm -> ReLU -> width -> tanh``, critic ``width -> 128 -> LayerNorm -> LeakyReLU(0.2) ->
1``; ``norm="batch"``: BatchNorm on the batch's statistics in place of LayerNorm, as the thesis's
presets), WGAN-GP with GS-WGAN's drift term, Adam(1e-4, betas (0, 0.9), eps 1e-8), pretrained in the
authors' structure: one discriminator after another, each with a fresh critic, a fresh temporary
generator and fresh optimizers (Chen, Orekondy and Fritz 2020, "GS-WGAN", NeurIPS; the JAX
definitions are ``dpgen_jax.synthesizers.gs_wgan``). It needs torch only, not opacus.

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
    rng = np.random.default_rng(_v.integer(seed, "seed"))
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
    sample_rate = _v.sample_rate(sample_rate)
    clip_norm = _v.positive(clip_norm=clip_norm)
    noise_multiplier = _v.non_negative(noise_multiplier=noise_multiplier)
    steps = _v.whole(minimum=1, steps=steps)
    warmup = _v.whole(minimum=0, warmup=warmup)
    threads = _v.whole(minimum=1, threads=threads)
    seed = _v.integer(seed, "seed")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"Expected optimizer={optimizer!r} to be one of {OPTIMIZERS}.")
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
# GS-WGAN pretraining in the authors' structure

#: GS-WGAN's pretraining settings, the defaults of ``dpgen_jax.synthesizers.gs_wgan.GSWGANConfig``
#: (the thesis's): noise size, hidden widths, batch B, critic updates per generator update, the
#: gradient-penalty weight lambda, the drift weight, and Adam's lr / betas / eps for both networks.
GSWGAN_PRETRAIN: types.MappingProxyType = types.MappingProxyType(
    {
        "noise_dim": 32,
        "generator_hidden": (128, 256),
        "critic_hidden": (128,),
        "batch_size": 32,
        "critic_steps": 5,
        "gradient_penalty": 10.0,
        "drift": 1e-3,
        "learning_rate": 1e-4,
        "betas": (0.0, 0.9),
        "eps": 1e-8,
        "norm": "layer",
    }
)

_LAYER_NORM_EPS = 1e-5  # torch's default, and dpgen_jax.models._gswgan's


def gswgan_available() -> tuple[bool, str]:
    """Whether the GS-WGAN rows can run (they need torch only, not opacus).

    Returns:
        ``(True, "")`` when torch imports, else ``(False, reason)``.
    """
    return (torch is not None, _TORCH_ERROR)


def gswgan_networks(
    width: int,
    *,
    noise_dim: int = 32,
    generator_hidden: Sequence[int] = (128, 256),
    critic_hidden: Sequence[int] = (128,),
    device: str = "cpu",
    norm: str = "layer",
) -> tuple[Any, Any]:
    """GS-WGAN's tabular generator and critic, freshly initialised (PyTorch defaults).

    Generator: ``z (noise_dim) -> [Linear -> LayerNorm -> ReLU] per hidden width -> Linear
    (width) -> tanh``. Critic: ``width -> [Linear -> LayerNorm -> LeakyReLU(0.2)] per hidden width
    -> Linear (1)``. LayerNorm epsilon 1e-5. These are ``dpgen_jax.models.gs_wgan_networks`` with
    ``norm="layer"`` and ``init="torch"``, the library's defaults. ``norm="batch"``: a
    ``BatchNorm1d`` (epsilon 1e-5, no running statistics, so always the batch's own, as
    ``norm="batch"`` in JAX) in place of each LayerNorm.

    Args:
        width: encoded row width.
        noise_dim: size of the generator's input ``z``.
        generator_hidden: the generator's hidden widths.
        critic_hidden: the critic's hidden widths.
        device: torch device string.
        norm: ``"layer"`` or ``"batch"``.

    Returns:
        ``(generator, critic)``, two ``nn.Sequential``; the critic returns ``(n, 1)`` scores.

    Raises:
        RuntimeError: torch missing.
        ValueError / TypeError: a bad width (named in the message).
    """
    _require_torch()
    width = _v.whole(minimum=1, width=width)
    noise_dim = _v.whole(minimum=1, noise_dim=noise_dim)
    for name, widths in (("generator_hidden", generator_hidden), ("critic_hidden", critic_hidden)):
        if not widths:
            raise ValueError(f"Expected {name}={widths!r} to be a non-empty sequence of widths.")
        for w in widths:
            _v.count(w, name, 1)
    if norm not in _NORM_MODULES:
        raise ValueError(f"Expected norm={norm!r} to be one of {sorted(_NORM_MODULES)}.")
    generator = _gswgan_mlp(noise_dim, tuple(generator_hidden) + (width,), nn.ReLU, nn.Tanh, norm)
    critic = _gswgan_mlp(
        width, tuple(critic_hidden) + (1,), lambda: nn.LeakyReLU(_LEAKY_SLOPE), None, norm
    )
    return generator.to(device), critic.to(device)


_NORM_MODULES = {  # torch module and the Flax node name of the normalisation after a hidden layer
    "layer": (lambda d: nn.LayerNorm(d, eps=_LAYER_NORM_EPS), "LayerNorm"),
    "batch": (lambda d: nn.BatchNorm1d(d, eps=_LAYER_NORM_EPS, track_running_stats=False), "_BatchAffine"),
}


def _gswgan_mlp(in_dim: int, widths: Sequence[int], activation: Any, output: Any, norm: str) -> Any:
    modules = []
    for index, out_dim in enumerate(widths):
        modules.append(nn.Linear(in_dim, out_dim))
        if index < len(widths) - 1:
            modules += [_NORM_MODULES[norm][0](out_dim), activation()]
        in_dim = out_dim
    if output is not None:
        modules.append(output())
    return nn.Sequential(*modules)


def _flax_layers(params: Any, what: str) -> tuple[list, list, str]:
    """``([(kernel, bias)], [(scale, bias)], norm)`` in forward order from a GS-WGAN Flax tree."""
    if not isinstance(params, dict) and not hasattr(params, "keys"):
        raise TypeError(f"Expected {what} parameters to be a mapping, got {type(params).__name__}.")
    dense, norms = [], []
    prefix = "TorchDense_" if "TorchDense_0" in params else "Dense_"
    i = 0
    while f"{prefix}{i}" in params:
        node = params[f"{prefix}{i}"]
        node = node["Dense_0"] if prefix == "TorchDense_" else node
        dense.append((np.array(node["kernel"], np.float32), np.array(node["bias"], np.float32)))
        i += 1
    norm = "batch" if "_BatchAffine_0" in params else "layer"
    node_name = _NORM_MODULES[norm][1]
    i = 0
    while f"{node_name}_{i}" in params:
        node = params[f"{node_name}_{i}"]
        norms.append((np.array(node["scale"], np.float32), np.array(node["bias"], np.float32)))
        i += 1
    if not dense or len(norms) != len(dense) - 1:
        raise ValueError(
            f"Expected {what} parameters of a GS-WGAN MLP with a LayerNorm (or batch "
            f"normalisation) after every hidden Dense layer, got keys {sorted(params)}."
        )
    return dense, norms, norm


def gswgan_nets_from_jax(
    generator_params: Any, critic_params: Any, *, device: str = "cpu"
) -> tuple[Any, Any]:
    """Torch copies of GS-WGAN networks holding the given Flax parameters.

    Args:
        generator_params: ``gs_wgan.init_generator(...)`` (or trained) parameters, any arrays
            numpy can read, in the Flax layout (``TorchDense_i/Dense_0/{kernel,bias}``,
            ``LayerNorm_i/{scale,bias}`` or ``_BatchAffine_i/{scale,bias}``; ``Dense_i`` for
            ``init="normal"``).
        critic_params: the same for the critic.
        device: torch device string.

    Returns:
        ``(generator, critic)`` as :func:`gswgan_networks` builds them, with ``weight = kernel.T``.

    Raises:
        RuntimeError: torch missing.
        ValueError / TypeError: a tree that is not a GS-WGAN network with a normalisation, or
            generator and critic with different normalisations.
    """
    _require_torch()
    g_dense, g_norms, g_norm = _flax_layers(generator_params, "generator")
    d_dense, d_norms, d_norm = _flax_layers(critic_params, "critic")
    if g_norm != d_norm:
        raise ValueError(f"Expected one normalisation in both networks, got generator {g_norm!r} "
                         f"and critic {d_norm!r}.")
    width = g_dense[-1][0].shape[1]
    if d_dense[0][0].shape[0] != width or d_dense[-1][0].shape[1] != 1:
        raise ValueError(
            f"Expected a critic from width {width} to 1 score, got kernels "
            f"{[k.shape for k, _ in d_dense]}."
        )
    generator, critic = gswgan_networks(
        width,
        noise_dim=g_dense[0][0].shape[0],
        generator_hidden=[k.shape[1] for k, _ in g_dense[:-1]],
        critic_hidden=[k.shape[1] for k, _ in d_dense[:-1]],
        device=device,
        norm=g_norm,
    )
    for net, dense, norms in ((generator, g_dense, g_norms), (critic, d_dense, d_norms)):
        linears = [m for m in net if isinstance(m, nn.Linear)]
        layer_norms = [m for m in net if isinstance(m, (nn.LayerNorm, nn.BatchNorm1d))]
        with torch.no_grad():
            for module, (kernel, bias) in zip(linears, dense):
                module.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.T)))
                module.bias.copy_(torch.from_numpy(bias))
            for module, (scale, bias) in zip(layer_norms, norms):
                module.weight.copy_(torch.from_numpy(scale))
                module.bias.copy_(torch.from_numpy(bias))
    return generator, critic


def gswgan_critic_loss(
    critic: Any,
    real: Any,
    fake: Any,
    alpha: Any,
    *,
    gradient_penalty: float = 10.0,
    drift: float = 1e-3,
) -> Any:
    """WGAN-GP critic loss with GS-WGAN's drift term, as a differentiable scalar tensor.

    ``mean D(fake) - mean D(real) + gradient_penalty * mean((||grad_x D(x_hat)||_2 - 1)^2)
    + drift * mean(D(real)^2)`` with ``x_hat = alpha real + (1 - alpha) fake`` (Gulrajani et al.
    2017; Chen et al. 2020). The input gradient comes from ``torch.autograd.grad`` with
    ``create_graph=True`` so that the penalty is differentiated through.

    Args:
        critic: a module mapping ``(n, width)`` rows to ``(n, 1)`` scores.
        real: ``(n, width)`` real rows.
        fake: ``(n, width)`` generated rows (detached).
        alpha: ``(n, 1)`` interpolation weights in [0, 1].
        gradient_penalty: lambda.
        drift: weight of ``mean D(real)^2``.

    Returns:
        A 0-d tensor.
    """
    x_hat = (alpha * real + (1.0 - alpha) * fake).detach().requires_grad_(True)
    d_hat = critic(x_hat)
    (grads,) = torch.autograd.grad(
        d_hat, x_hat, grad_outputs=torch.ones_like(d_hat), create_graph=True, retain_graph=True
    )
    penalty = ((grads.norm(2, dim=1) - 1.0) ** 2).mean()
    d_real = critic(real)[:, 0]
    d_fake = critic(fake)[:, 0]
    return d_fake.mean() - d_real.mean() + gradient_penalty * penalty + drift * (d_real**2).mean()


def gswgan_pretrain_shard(
    x_all: Any,
    start: int,
    size: int,
    *,
    iterations: int,
    generator: Any,
    settings: Any = GSWGAN_PRETRAIN,
) -> tuple[Any, Any]:
    """Pretrains ONE discriminator on its shard ``x_all[start : start + size]`` (authors' loop).

    A fresh critic, a fresh temporary generator (PyTorch default initialisation from the global
    torch RNG) and fresh Adam optimizers; then ``iterations`` times: ``critic_steps`` critic
    updates (each on B real rows drawn without replacement from the shard, or with replacement
    when the shard holds fewer than B rows, as ``gs_wgan.shard_batch_indices``; B fresh generated
    rows, detached; one ``alpha`` per row), then one update of the temporary generator on
    ``-mean D(G(z))`` with the critic's ``requires_grad`` off. This is the loop of the GS-WGAN
    authors' public ``source/pretrain.py`` (Chen et al. 2020) with the tabular networks and this
    project's settings (``settings``; their script uses Adam betas (0.5, 0.9), the thesis and
    ``GSWGANConfig`` (0, 0.9), which changes no cost); its data pipeline (a ``DataLoader`` over a ``SubsetRandomSampler``) is replaced by one ``randperm`` per
    batch and the fake rows are generated under ``no_grad``, both cheaper than the original, so
    timings of this loop are if anything favourable to torch.

    Args:
        x_all: ``(m, width)`` float32 tensor of all rows, sorted by shard.
        start: first row of the shard.
        size: rows in the shard (0: the critic sees zero rows as "real", as the JAX side).
        iterations: pretraining iterations (>= 0).
        generator: ``torch.Generator`` for the batches, ``z`` and ``alpha``.
        settings: a mapping like :data:`GSWGAN_PRETRAIN`.

    Returns:
        ``(temporary generator, critic)`` after training.
    """
    _require_torch()
    iterations = _v.whole(minimum=0, iterations=iterations)
    start = _v.whole(minimum=0, start=start)
    size = _v.whole(minimum=0, size=size)
    if start + size > x_all.shape[0]:
        raise ValueError(
            f"Expected the shard [{start}, {start + size}) inside {x_all.shape[0]} rows."
        )
    s = dict(settings)
    b, noise_dim, width = int(s["batch_size"]), int(s["noise_dim"]), int(x_all.shape[1])
    dev = x_all.device
    net_g, net_d = gswgan_networks(
        width,
        noise_dim=noise_dim,
        generator_hidden=s["generator_hidden"],
        critic_hidden=s["critic_hidden"],
        device=dev,
        norm=s.get("norm", "layer"),
    )
    adam = {"lr": s["learning_rate"], "betas": tuple(s["betas"]), "eps": s["eps"]}
    opt_d = torch.optim.Adam(net_d.parameters(), **adam)
    opt_g = torch.optim.Adam(net_g.parameters(), **adam)
    d_params = list(net_d.parameters())
    for _ in range(iterations):
        for p in d_params:
            p.requires_grad_(True)
        for _ in range(int(s["critic_steps"])):
            if size >= b:
                index = torch.randperm(size, generator=generator, device=dev)[:b] + start
                real = x_all[index]
            elif size > 0:
                index = torch.randint(size, (b,), generator=generator, device=dev) + start
                real = x_all[index]
            else:
                real = torch.zeros(b, width, device=dev)
            z = torch.randn(b, noise_dim, generator=generator, device=dev)
            with torch.no_grad():
                fake = net_g(z)
            alpha = torch.rand(b, 1, generator=generator, device=dev)
            opt_d.zero_grad(set_to_none=True)
            loss = gswgan_critic_loss(
                net_d, real, fake, alpha, gradient_penalty=s["gradient_penalty"], drift=s["drift"]
            )
            loss.backward()
            opt_d.step()
        for p in d_params:
            p.requires_grad_(False)
        opt_g.zero_grad(set_to_none=True)
        z = torch.randn(b, noise_dim, generator=generator, device=dev)
        g_loss = -net_d(net_g(z)).mean()
        g_loss.backward()
        opt_g.step()
    for p in d_params:
        p.requires_grad_(True)
    return net_g, net_d


def time_gswgan_pretrain(
    data: np.ndarray,
    starts: Sequence[int],
    sizes: Sequence[int],
    *,
    iterations: int,
    threads: int,
    seed: int = 0,
    discriminators: int | None = None,
    settings: Any = GSWGAN_PRETRAIN,
    device: str = "cpu",
) -> float:
    """Wall-clock seconds of GS-WGAN pretraining in the authors' structure.

    Shards ``0 .. discriminators - 1`` (all of ``starts`` by default) are pretrained one after
    another by :func:`gswgan_pretrain_shard`, ``iterations`` iterations each. The data tensor is
    built before the clock starts; network construction is inside it (the authors build each
    discriminator's temporary generator in the loop). ``torch.set_num_threads(threads)`` holds
    during the call and the global torch RNG is seeded inside ``fork_rng``; both are restored.

    Args:
        data: ``(m, width)`` float32 rows sorted by shard (the JAX side's ``x_sorted``).
        starts: first row of each shard.
        sizes: rows of each shard.
        iterations: iterations per discriminator (>= 1).
        threads: torch intra-op threads (>= 1).
        seed: seed of the initialisation and of the batch / noise generator.
        discriminators: how many shards to run (default: all).
        settings: a mapping like :data:`GSWGAN_PRETRAIN`.
        device: torch device string; CUDA is synchronised before the clock stops.

    Returns:
        Seconds for all the discriminators.

    Raises:
        RuntimeError: torch missing.
        ValueError / TypeError: a bad argument (named in the message).
    """
    _require_torch()
    if not isinstance(data, np.ndarray) or data.dtype != np.float32 or data.ndim != 2:
        raise TypeError("Expected data to be a 2-D float32 numpy array.")
    starts = [_v.count(int(v), "starts[i]", 0) for v in np.asarray(starts).reshape(-1)]
    sizes = [_v.count(int(v), "sizes[i]", 0) for v in np.asarray(sizes).reshape(-1)]
    if len(starts) != len(sizes) or not starts:
        raise ValueError(
            f"Expected starts and sizes of one non-zero length, got {len(starts)} and {len(sizes)}."
        )
    k = len(starts)
    if discriminators is not None:
        k = _v.whole(minimum=1, discriminators=discriminators)
    if k > len(starts):
        raise ValueError(f"Expected discriminators={k} <= the {len(starts)} shards given.")
    iterations = _v.whole(minimum=1, iterations=iterations)
    threads = _v.whole(minimum=1, threads=threads)
    seed = _v.integer(seed, "seed")
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            gen = torch.Generator(device=dev).manual_seed(seed)
            x_all = torch.tensor(data, device=dev)
            sync()
            t0 = time.perf_counter()
            for shard in range(k):
                gswgan_pretrain_shard(
                    x_all, starts[shard], sizes[shard], iterations=iterations, generator=gen,
                    settings=settings,
                )
            sync()
            return time.perf_counter() - t0
    finally:
        torch.set_num_threads(previous_threads)


def _require_torch() -> None:
    if torch is None:
        raise RuntimeError(f"The GS-WGAN torch reference needs torch: {_TORCH_ERROR}.")


# --------------------------------------------------------------------------------------------
# validation


def _require_available() -> None:
    ok, reason = available()
    if not ok:
        raise RuntimeError(f"The torch reference needs torch and opacus: {reason}.")


def _model_spec(model: str) -> tuple[int, tuple]:
    if model not in MODELS:
        raise ValueError(f"Expected model={model!r} to be one of {tuple(MODELS)}.")
    return MODELS[model]


def _check_weights(model: str, weights: Weights) -> None:
    in_dim, layers = MODELS[model]
    if not isinstance(weights, (list, tuple)) or len(weights) != len(layers):
        got = len(weights) if isinstance(weights, (list, tuple)) else type(weights).__name__
        raise ValueError(
            f"Expected weights for {model!r} to be a list of {len(layers)} (kernel, bias) "
            f"pairs, got {got}."
        )
    for index, ((out_dim, _), pair) in enumerate(zip(layers, weights)):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"Expected weights[{index}] to be a (kernel, bias) pair.")
        for name, array, shape in (
            ("kernel", pair[0], (in_dim, out_dim)),
            ("bias", pair[1], (out_dim,)),
        ):
            array = np.asarray(array)
            if array.dtype != np.float32:
                raise TypeError(
                    f"Expected weights[{index}] {name} dtype float32, got {array.dtype}."
                )
            if array.shape != shape:
                raise ValueError(
                    f"Expected weights[{index}] {name} of shape {shape} for {model!r}, "
                    f"got {array.shape}."
                )
        in_dim = out_dim


def _check_data(name: str, data: np.ndarray, in_dim: int, *, min_rows: int) -> None:
    if not isinstance(data, np.ndarray):
        raise TypeError(f"Expected {name} to be a numpy array, got {type(data).__name__}.")
    if data.dtype != np.float32:
        raise TypeError(f"Expected {name} dtype float32, got {data.dtype}.")
    if data.ndim != 2 or data.shape[1] != in_dim or data.shape[0] < min_rows:
        raise ValueError(
            f"Expected {name} of shape (n >= {min_rows}, {in_dim}), got {data.shape}."
        )
