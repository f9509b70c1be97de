"""The tests' compile settings, in one place: the test-only XLA options and JAX's persistent
compilation cache for a block of tests.

Nothing here imports JAX at module level: ``tests/conftest.py`` reads :data:`FAST_COMPILE_FLAGS`
before JAX is first imported, so that the flags reach every program the tests compile.
"""

from __future__ import annotations

import contextlib
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Test-only compile options: XLA's CPU back end without its LLVM optimisations. Small programs
#: compile 2-3x faster and compute the same values (the numerics the tests check do not depend on
#: them). As ``compiler_options`` of a ``jax.jit``; every program of the test process gets them
#: through ``XLA_FLAGS`` as well (:data:`FAST_COMPILE_FLAGS`, set by ``tests/conftest.py``).
FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}

#: :data:`FAST_COMPILE` as ``XLA_FLAGS`` command-line flags (``--name=value``).
FAST_COMPILE_FLAGS = tuple(f"--{name}={str(value).lower()}" for name, value in FAST_COMPILE.items())


def with_fast_compile(xla_flags: str) -> str:
    """``xla_flags`` (an ``XLA_FLAGS`` value) with each of :data:`FAST_COMPILE_FLAGS` appended
    unless ``xla_flags`` already names that flag (whatever its value: a flag set by the user, e.g.
    XLA's defaults, is left as it is)."""
    extra = [flag for flag in FAST_COMPILE_FLAGS if flag.split("=", 1)[0] not in xla_flags]
    return " ".join([xla_flags, *extra]).strip()


def host_devices_env(devices: int) -> dict[str, str]:
    """The environment of a test's subprocess with ``devices`` CPU host devices: this process's
    environment, the checkout on ``PYTHONPATH``, and ``XLA_FLAGS`` ending with the device count and
    :data:`FAST_COMPILE_FLAGS` (both sides of a comparison in that process are compiled alike)."""
    flags = " ".join([os.environ.get("XLA_FLAGS", ""), f"--xla_force_host_platform_device_count={devices}",
                      *FAST_COMPILE_FLAGS]).strip()
    return {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT), "XLA_FLAGS": flags}


@contextlib.contextmanager
def compilation_cache(directory: str | None, min_compile_seconds: float | None = None):
    """Points JAX's persistent compilation cache at ``directory`` (None: leave the setting to the
    code under test) and restores the previous settings and cache state on exit. A cached program
    is the same executable, so results are unaffected; repeated compilations are loaded instead."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache as cc

    saved = (jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs)
    if directory is not None:
        jax.config.update("jax_compilation_cache_dir", directory)
    if min_compile_seconds is not None:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_seconds)
    cc.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_compilation_cache_dir", saved[0])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", saved[1])
        cc.reset_cache()
