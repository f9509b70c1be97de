"""Every notebook in ``notebooks/`` runs top to bottom with the small settings, and is stored
without outputs.

Execution needs the ``notebooks`` extra (nbclient, nbformat, ipykernel) and is marked
``notebooks`` (excluded from the default run): ``python -m pytest -m notebooks
tests/test_notebooks.py``. ``.ci/run`` does this after the test suite, pointing notebook 03 at the
throughput run it has just made (``DPGEN_THROUGHPUT_RUN``); notebook 04 reads the committed
leaderboard unless ``DPGEN_LEADERBOARD`` names another.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from dpgen_jax import data
from tests.conftest import SHARED_ADULT

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_notebooks_are_stored_without_outputs():
    assert [p.stem for p in NOTEBOOKS] == ["01_quickstart", "02_privacy_accounting", "03_throughput",
                                           "04_methods_compared"]
    for path in NOTEBOOKS:
        book = json.loads(path.read_text())
        for cell in book["cells"]:
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None, path.name


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_without_error(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="executing the notebooks needs the 'notebooks' "
                                   "extra: pip install -e '.[notebooks]'")
    nbclient = pytest.importorskip("nbclient", reason="executing the notebooks needs the 'notebooks' "
                                   "extra: pip install -e '.[notebooks]'")
    monkeypatch.setenv("DPGEN_NOTEBOOK_SMALL", "1")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    for var in ("DPGEN_THROUGHPUT_RUN", "DPGEN_LEADERBOARD"):  # the notebooks run in notebooks/: absolute paths
        if os.environ.get(var):
            monkeypatch.setenv(var, str(pathlib.Path(os.environ[var]).resolve()))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    try:
        data.find_adult()
    except FileNotFoundError:  # as the adult_dir fixture: the folder beside the checkout, if any
        if (SHARED_ADULT / "adult.data").is_file() and (SHARED_ADULT / "adult.test").is_file():
            monkeypatch.setenv("DPGEN_ADULT_DIR", str(SHARED_ADULT))
    book = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(book, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError, naming the cell, on any error
