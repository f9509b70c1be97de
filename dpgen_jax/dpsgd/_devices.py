"""Devices: data-parallel training over several devices with JAX's own sharding (``docs/scaling.md``).

A *data mesh* is a :class:`jax.sharding.Mesh` with one axis. A DP-SGD step built with
``make_dp_step(..., mesh=mesh)`` splits its padded Poisson batch (rows and mask) along that axis
with :func:`jax.shard_map`: each device clips its share of the examples, the per-device clipped
sums are added with one ``psum``, and the Gaussian noise is drawn once, from the step's noise key,
on the replicated sum. Everything else (sampling, building the batch, the optimizer) is replicated:
every device computes the same values from the same key.

- :func:`data_mesh`: a one-axis mesh over the given (default: all) devices.
- :func:`mesh_axis`: the axis name and device count of a data mesh (validated).
- :func:`pad_to_devices`: a size rounded up to a multiple of the device count.
- :func:`replicate`: places a pytree on every device of the mesh (the dataset, the state).
- :func:`data_parallel` / :func:`current_mesh`: an ambient mesh, so that a whole ``fit`` can run
  data-parallel without each phase function taking a ``mesh`` argument.

A multi-host run also needs one key on every process: :func:`dpgen_jax.dpsgd.shared_key`
(``_keys.py``, with the rest of the randomness).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v


DATA_AXIS = "data"

_AMBIENT: contextvars.ContextVar[Mesh | None] = contextvars.ContextVar("dpgen_jax_mesh", default=None)


def data_mesh(devices: Sequence[jax.Device] | int | None = None, axis_name: str = DATA_AXIS) -> Mesh:
    """A one-axis :class:`jax.sharding.Mesh` for data-parallel DP-SGD.

    Args:
        devices: the devices (default: ``jax.devices()``, every device of every process), or an
            int n for the first n of them.
        axis_name: the mesh axis name.

    Raises:
        ValueError: an empty device list, or more devices asked for than exist.
    """
    available = jax.devices()
    if devices is None:
        chosen = available
    elif isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        if not 1 <= devices <= len(available):
            raise ValueError(
                f"devices={devices!r} is not between 1 and the {len(available)} available devices "
                "(on CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N makes N host devices).")
        chosen = available[: int(devices)]
    else:
        chosen = list(devices)
        if not chosen:
            raise ValueError("devices is an empty list: name at least one jax.Device, or pass None for all.")
    return Mesh(np.asarray(chosen, dtype=object), (axis_name,))


def mesh_axis(mesh: Mesh) -> tuple[str, int]:
    """The axis name and device count of a one-axis data mesh.

    Raises:
        TypeError: ``mesh`` is not a :class:`jax.sharding.Mesh`.
        ValueError: the mesh has more or fewer than one axis.
    """
    _v.instance(Mesh, "a jax.sharding.Mesh", mesh=mesh)
    if len(mesh.axis_names) != 1:
        raise ValueError(
            f"mesh has axes {mesh.axis_names!r}, not exactly one (data) axis; "
            "build one with dpsgd.data_mesh().")
    name = mesh.axis_names[0]
    return name, int(mesh.shape[name])


def pad_to_devices(size: int, mesh: Mesh) -> int:
    """``size`` rounded up to a multiple of the mesh's device count."""
    _, n = mesh_axis(mesh)
    return int(-(-int(size) // n) * n)


def pad_stacked(tree: PyTree, size: int) -> PyTree:
    """Every array of a pytree stacked along axis 0 (e.g. K networks) padded to ``size`` entries
    with copies of entry 0, so that the stack splits evenly over a mesh (:func:`pad_to_devices`);
    the caller drops the padding (``x[:K]``) afterwards."""
    def pad(x):
        extra = int(size) - x.shape[0]
        if extra < 0:
            raise ValueError(f"pad_stacked: size={size} is below the stack's {x.shape[0]} entries.")
        return jnp.concatenate([x, jnp.repeat(x[:1], extra, axis=0)], axis=0)

    return jax.tree_util.tree_map(pad, tree)


def replicate(tree: PyTree, mesh: Mesh) -> PyTree:
    """Every array of ``tree`` placed, whole, on every device of ``mesh``.

    In a multi-host run every process must pass the same values (e.g. the same dataset, loaded on
    every host, and parameters initialised from the same key).
    """
    mesh_axis(mesh)
    return jax.device_put(tree, NamedSharding(mesh, PartitionSpec()))


@contextlib.contextmanager
def data_parallel(mesh: Mesh | None) -> Iterator[Mesh | None]:
    """Within the block, DP-SGD steps built without an explicit ``mesh`` use ``mesh``.

    ``make_dp_step(..., mesh=None)`` and GS-WGAN's pretraining read :func:`current_mesh` when they
    are built, so ``with dpsgd.data_parallel(mesh): model.fit(...)`` (or ``fit(..., mesh=mesh)``)
    runs every DP-SGD phase of a method data-parallel. ``None`` turns it off inside the block.
    """
    if mesh is not None:
        mesh_axis(mesh)
    token = _AMBIENT.set(mesh)
    try:
        yield mesh
    finally:
        _AMBIENT.reset(token)


def current_mesh() -> Mesh | None:
    """The mesh set by the innermost :func:`data_parallel` block, or None."""
    return _AMBIENT.get()


def resolve_mesh(mesh: Mesh | None) -> Mesh | None:
    """``mesh`` if given, else the ambient one; a one-device mesh counts as no mesh."""
    mesh = current_mesh() if mesh is None else mesh
    if mesh is None:
        return None
    _, n = mesh_axis(mesh)
    return mesh if n > 1 else None


__all__ = [
    "DATA_AXIS",
    "current_mesh",
    "data_mesh",
    "data_parallel",
    "mesh_axis",
    "pad_stacked",
    "pad_to_devices",
    "replicate",
    "resolve_mesh",
]
