"""JAX's persistent compilation cache for a block of tests, restored afterwards."""

from __future__ import annotations

import contextlib

import jax


@contextlib.contextmanager
def compilation_cache(directory: str | None, min_compile_seconds: float | None = None):
    """Points JAX's persistent compilation cache at ``directory`` (None: leave the setting to the
    code under test) and restores the previous settings and cache state on exit. A cached program
    is the same executable, so results are unaffected; repeated compilations are loaded instead."""
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
