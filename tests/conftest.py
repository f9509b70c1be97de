"""Shared test fixtures."""

import os
import pathlib

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_ADULT = ROOT.parent / "shared" / "data" / "adult"


@pytest.fixture(scope="session")
def adult_dir() -> pathlib.Path:
    """The shared UCI Adult folder; tests that need it skip when it is absent."""
    env = os.environ.get("DPGEN_ADULT_DIR")
    for candidate in ([pathlib.Path(env)] if env else []) + [SHARED_ADULT]:
        if (candidate / "adult.data").exists():
            return candidate
    pytest.skip("UCI Adult files not found (../shared/data/adult or DPGEN_ADULT_DIR)")
