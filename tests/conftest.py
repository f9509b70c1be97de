"""Shared test fixtures."""

import os
import pathlib

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")

from dpgen_jax import data  # noqa: E402  (after the environment above)
from tests._compile import compilation_cache  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_ADULT = ROOT.parent / "shared" / "data" / "adult"
SHARED_CARDIO = ROOT.parent / "shared" / "data" / "cardio" / "cardio_train.csv"


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


@pytest.fixture(scope="session")
def cardio_path() -> pathlib.Path:
    """Kaggle's cardio_train.csv, found as the library finds it (argument-free: $DPGEN_CARDIO_PATH,
    then the user cache), else ``../shared/data/cardio``; tests that need it skip without it."""
    try:
        return data.find_cardio()
    except FileNotFoundError as err:
        if os.environ.get("DPGEN_CARDIO_PATH"):
            pytest.fail(str(err))
        if SHARED_CARDIO.is_file():
            return SHARED_CARDIO
        pytest.skip(f"{err} The tests also looked in {SHARED_CARDIO}.")


@pytest.fixture(scope="module")
def adult(adult_dir):
    """UCI Adult as ``(train, test)`` frames (``data.load_adult``), loaded once per module."""
    return data.load_adult(adult_dir)


@pytest.fixture(scope="session", autouse=True)
def persistent_compilation_cache(tmp_path_factory, worker_id):
    """JAX's persistent compilation cache in one temporary folder for the whole run, shared by
    pytest-xdist's workers (the folder sits beside their base temporary folders).

    Programs compiled again with new closures (the same tiny schedule fitted by several tests, a
    functional reproduction of a fit, the released model's sampler, references) are loaded instead
    of recompiled. Results are unaffected: a cached program is the same executable. The previous
    settings are restored afterwards.
    """
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if worker_id != "master" else base) / "xla_cache"
    folder.mkdir(exist_ok=True)
    with compilation_cache(str(folder), 0.3):
        yield


@pytest.fixture(scope="module")
def xla_cache_home(tmp_path_factory):
    """The experiments turn on JAX's persistent compilation cache under $XDG_CACHE_HOME (later
    seeds then load the first seed's programs). Point it at a temporary folder, so that tests
    never touch the user's cache, reset JAX's cache state so the experiments' setting takes
    effect as it does on the command line, and restore both afterwards."""
    with pytest.MonkeyPatch.context() as mp, compilation_cache(None):
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg_cache")))
        yield
