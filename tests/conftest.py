"""Shared test fixtures."""

import os
import pathlib

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

from dpgen_jax import data  # noqa: E402  (after the environment above)

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_ADULT = ROOT.parent / "shared" / "data" / "adult"


@pytest.fixture(scope="session")
def adult_dir() -> pathlib.Path:
    """The UCI Adult folder, found as the library finds it, else ``../shared/data/adult``.

    Order: ``$DPGEN_ADULT_DIR`` (an error if it names a folder without the files), the per-user
    cache that ``data.fetch_adult()`` fills, then the folder beside the checkout that CI has.
    Tests that need real Adult skip when none holds the files; behaviour tests use
    ``data.adult_like`` instead and never skip.
    """
    try:
        return data.find_adult()
    except FileNotFoundError as err:
        if os.environ.get("DPGEN_ADULT_DIR"):
            pytest.fail(str(err))
        if (SHARED_ADULT / "adult.data").is_file() and (SHARED_ADULT / "adult.test").is_file():
            return SHARED_ADULT
        pytest.skip(f"{err} The tests also looked in {SHARED_ADULT}.")
