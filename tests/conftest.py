"""Shared test fixtures."""

import os
import pathlib

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
# Test-only compile options for every program the tests compile, also in the subprocesses they
# start (which inherit the environment): FAST_COMPILE of tests/_compile.py, XLA's CPU back end
# without its LLVM optimisations. Compilation is most of the suite's time and takes about a third
# less; the programs compute the same values (the pinned outputs and release files still match to
# their tolerances), a few run slower (test_dpsgd_noise's 2^29 draws compile with full
# optimisation). Either flag already in XLA_FLAGS is left as it is (XLA_FLAGS="--xla_backend_
# optimization_level=3 --xla_llvm_disable_expensive_passes=false" runs the suite with XLA's defaults).
from tests._compile import compilation_cache, with_fast_compile  # noqa: E402  (imports no JAX)

os.environ["XLA_FLAGS"] = with_fast_compile(os.environ.get("XLA_FLAGS", ""))

from dpgen_jax import data  # noqa: E402  (after the environment above)

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_ADULT = ROOT.parent / "shared" / "data" / "adult"
SHARED_CARDIO = ROOT.parent / "shared" / "data" / "cardio" / "cardio_train.csv"


# Test files that fit the same methods, run by one pytest-xdist worker (pytest_xdist_make_scheduler):
# a worker keeps its compiled programs (JAX's in-memory caches) and the accounting memo
# (privacy.PLD_EPSILON_MEMO) from one file to the next, so the second file's fits of a method reuse much
# of the first's work. Each tuple is one unit of work instead of one unit per file.
SAME_WORKER = (
    ("test_dp_auto_gan.py", "test_dp_auto_gan_privacy.py", "test_dp_auto_gan_reference.py",
     "test_checkpoint.py", "test_checkpoint_permissions.py", "test_synthesizers_base.py"),
    ("test_dp_sactgan.py", "test_dp_sactgan_critic.py", "test_dp_sactgan_memory.py",
     "test_experiments_dpsactgan.py"),
    ("test_gs_wgan.py", "test_gswgan_speed.py"),
    ("test_dp_syn.py", "test_dp_syn_plan.py"),
    ("test_dp_vae.py", "test_dp_wgan.py", "test_experiments_baselines.py", "test_flags.py",
     "test_missing_values.py"),
    ("test_mst.py", "test_aim.py", "test_benchmark.py"),
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (pyproject.toml) with the files of each :data:`SAME_WORKER` tuple in one
    unit: every other file is still its own unit, every file still runs on one worker."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    unit = {name: "+".join(names) for names in SAME_WORKER for name in names}

    class SameWorkerScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return unit.get(path.rsplit("/", 1)[-1], path)

    return SameWorkerScheduling(config, log)


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
