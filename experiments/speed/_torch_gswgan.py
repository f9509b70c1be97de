"""PyTorch reference of GS-WGAN's pretraining in the authors' structure (torch only, no opacus).

The tabular GS-WGAN networks of ``dpgen_jax.models.gs_wgan_networks`` (generator ``z(32) -> 128 ->
LayerNorm -> ReLU -> 256 -> LayerNorm -> ReLU -> width -> tanh``, critic ``width -> 128 ->
LayerNorm -> LeakyReLU(0.2) -> 1``; ``norm="batch"``: BatchNorm on the batch's statistics in place
of LayerNorm, as the thesis's presets), WGAN-GP with GS-WGAN's drift term, Adam(1e-4, betas
(0, 0.9), eps 1e-8), pretrained in the authors' structure: one discriminator after another, each
with a fresh critic, a fresh temporary generator and fresh optimizers (Chen, Orekondy and Fritz
2020, "GS-WGAN", NeurIPS; the JAX definitions are ``dpgen_jax.synthesizers.gs_wgan``). Written for
this project (nothing copied). ``experiments/speed/gswgan_pretrain.py`` times it; its public names
are importable from ``experiments.speed.torch_reference``.

Privacy: a benchmark reference, not a private training API; nothing here accounts for privacy.
"""

from __future__ import annotations

import time
import types
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpgen_jax import _validate as _v

try:  # torch comes from the optional ``bench`` extra.
    import torch
    from torch import nn
except ImportError as _exc:  # pragma: no cover - exercised only without torch
    torch = None
    _TORCH_ERROR = f"torch is not importable ({_exc}); install the 'bench' extra"
else:
    _TORCH_ERROR = ""

_LEAKY_SLOPE = 0.2  # the critic's LeakyReLU, as dpgen_jax.models._gswgan's

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
        _v.widths(**{name: widths})
    _v.one_of(sorted(_NORM_MODULES), norm=norm)
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
        raise TypeError(f"The {what} parameters are a {type(params).__name__}, not a mapping: pass the Flax "
                        "parameter tree.")
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
            f"The {what} parameters (keys {sorted(params)}) are not a GS-WGAN MLP with a LayerNorm (or "
            f"batch normalisation) after every hidden Dense layer: pass the parameters gs_wgan builds."
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
        raise ValueError(f"The generator uses {g_norm!r} normalisation and the critic {d_norm!r}: pass "
                         "networks with one normalisation in both.")
    width = g_dense[-1][0].shape[1]
    if d_dense[0][0].shape[0] != width or d_dense[-1][0].shape[1] != 1:
        raise ValueError(
            f"The critic's kernels {[k.shape for k, _ in d_dense]} do not map the generator's width "
            f"{width} to 1 score: pass a critic of that width."
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
            f"The shard [{start}, {start + size}) reaches beyond the {x_all.shape[0]} rows: pass a "
            "shard inside them."
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
        raise TypeError("data is not a 2-D float32 numpy array: convert it with np.asarray(data, np.float32).")
    starts = [_v.whole(**{"starts[i]": int(v)}) for v in np.asarray(starts).reshape(-1)]
    sizes = [_v.whole(**{"sizes[i]": int(v)}) for v in np.asarray(sizes).reshape(-1)]
    if len(starts) != len(sizes) or not starts:
        raise ValueError(
            f"starts and sizes have {len(starts)} and {len(sizes)} entries: pass one start and one size "
            "per shard, for at least one shard."
        )
    k = len(starts)
    if discriminators is not None:
        k = _v.whole(minimum=1, maximum=len(starts), discriminators=discriminators)
    iterations = _v.whole(minimum=1, iterations=iterations)
    threads = _v.whole(minimum=1, threads=threads)
    seed = _v.integral(seed=seed)
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
