"""The measurement protocol the speed benchmarks share: the thread count pinned before JAX (and
numpy's BLAS) is imported, the machine described in every result, and the median / p10 / p90 of
repeated timings. Used by ``throughput``, ``gswgan_pretrain``, ``multidevice`` and
``dpsactgan_speed``; it imports neither JAX nor numpy at module level.
"""

from __future__ import annotations

import os
import pathlib
import platform
from importlib import metadata


def _configure_threads(threads: int, device: str) -> None:
    """Must run before jax is imported."""
    if device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if threads == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        # one Eigen thread per XLA computation (a bare "intra_op_parallelism_threads=1", which
        # this line once held, is no XLA flag: XLA stopped reading XLA_FLAGS at it)
        extra = "--xla_cpu_multi_thread_eigen=false"
        os.environ["XLA_FLAGS"] = (flags + " " + extra).strip()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)


def _version(dist: str) -> str | None:
    """The installed version of the distribution ``dist``, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _machine(threads: int) -> dict:
    """The CPU, core count, platform, Python and package versions of this run, and ``threads``."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {d: _version(d) for d in
                     ("jax", "jaxlib", "flax", "optax", "numpy", "torch", "opacus", "jax-privacy",
                      "dpgen-jax")},
        "threads": threads,
    }


def _stats(ms: list[float]) -> tuple[float, float, float]:
    """Median, 10th and 90th percentile of repeated timings."""
    import numpy as np

    a = np.asarray(ms, dtype=float)
    return float(np.median(a)), float(np.percentile(a, 10)), float(np.percentile(a, 90))
