"""The released-model file: a safe, versioned container for a synthesizer's public parts.

A release file is a NumPy ``.npz`` archive read with ``allow_pickle=False``: parameter arrays
under ``"<group>/<path>"`` keys and one JSON document under ``"__meta__"`` (method, format version,
config, schema, privacy report, library versions). Only what a synthesizer releases goes in (for
DP-auto-GAN: generator and decoder); no optimizer state, no critic, no encoder, no key.
``FORMAT_VERSION`` 3 stores the method under its registry name (``synthesizers.available()``), the
plan's phases under their stable kind (``privacy.Phase.KIND``) and the neural generators' one-way
stage as ``matching_share`` / ``matching_bins``; a file of an earlier version this library still
reads is brought to it by ``dpgen_jax._migrate`` as it is loaded, and read as the current format.
:func:`write_model` and :func:`read_model` put a fitted synthesizer in such a file and back
(``Synthesizer.save`` / ``load``): its released arrays and statistics, configuration, schema, plan
and privacy report, so a loaded model samples and reports as the fitted one did.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import warnings
import zipfile
from typing import Any

import jax
import numpy as np

from dpgen_jax import _migrate
from dpgen_jax import data as data_lib
from dpgen_jax import privacy
from dpgen_jax._versions import library_versions
from dpgen_jax.synthesizers._plan import Plan, Release
from dpgen_jax.synthesizers._registry import get

FORMAT = "dpgen_jax.release"
# Version 3: phases under their KIND, the matching stage's fields (dpgen_jax._migrate upgrades 2).
FORMAT_VERSION = _migrate.CURRENT
_SEP = "/"
# How far a stored epsilon may be from the one recomputed from the stored plan: JSON keeps a
# float's exact value, so only the accountant's own float arithmetic may differ (relative).
EPSILON_RTOL = 1e-9


def _flatten(tree: Any, prefix: str) -> dict[str, np.ndarray]:
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        names = []
        for p in path:
            if not isinstance(p, jax.tree_util.DictKey) or _SEP in str(p.key):
                raise ValueError(f"Cannot save parameter path {path!r}: expected nested dicts of str keys.")
            names.append(str(p.key))
        out[_SEP.join([prefix, *names])] = np.asarray(leaf)
    return out


def _unflatten(arrays: dict[str, np.ndarray], prefix: str) -> dict:
    tree: dict = {}
    for key, value in arrays.items():
        parts = key.split(_SEP)
        if parts[0] != prefix:
            continue
        node = tree
        for name in parts[1:-1]:
            node = node.setdefault(name, {})
        node[parts[-1]] = value
    return tree


def save_release(path: str | pathlib.Path, method: str, groups: dict[str, Any], meta: dict) -> pathlib.Path:
    """Writes ``groups`` (name -> parameter pytree) and ``meta`` (JSON-serialisable) to ``path``."""
    path = pathlib.Path(path)
    arrays: dict[str, np.ndarray] = {}
    for name, tree in groups.items():
        arrays.update(_flatten(tree, name))
    doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "method": method,
           "groups": sorted(groups), "versions": library_versions(), **meta}
    arrays["__meta__"] = np.asarray(json.dumps(doc, allow_nan=False))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:  # np.savez would append ".npz" to a name without it
        np.savez(fh, **arrays)
    return path


def load_release(path: str | pathlib.Path, method: str | None) -> tuple[dict[str, dict], dict]:
    """Reads a release file written by :func:`save_release` for ``method`` (None: any method).

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is not a dpgen_jax release, is corrupt, holds another method, or was
            written with a format version this library does not read.

    Returns:
        ``(groups, meta)``: the arrays by group, and the metadata in the current format
        (``_migrate.upgrade``).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No saved model at {str(path)!r}.")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{str(path)!r} is not a readable dpgen_jax model file ({exc}).") from exc
    if "__meta__" not in arrays:
        raise ValueError(f"{str(path)!r} is not a dpgen_jax model file (no '__meta__' record).")
    try:
        meta = json.loads(str(arrays.pop("__meta__")))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{str(path)!r} has a corrupt '__meta__' record ({exc}).") from exc
    if meta.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a dpgen_jax model file (format {meta.get('format')!r}).")
    version = meta.get("format_version")
    try:
        meta = _migrate.upgrade(meta)
    except ValueError as exc:  # a format version this library does not read, or a bad old one
        raise ValueError(f"{str(path)!r}: {exc}") from exc
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{str(path)!r}: a release file of format version {version!r} without a valid "
                         f"{exc} field.") from exc
    if method is not None and meta.get("method") != method:
        raise ValueError(f"{str(path)!r} holds a {meta.get('method')!r} model, not {method!r}.")
    groups = {name: _unflatten(arrays, name) for name in meta.get("groups", [])}
    return groups, meta


def write_model(path, model) -> pathlib.Path:
    """Writes a fitted synthesizer's release file: its released arrays and statistics, schema,
    configuration, plan, privacy report and versions; nothing else (no optimizer state, no critic,
    no key, no private row: the plan holds N only where it may be shown)."""
    plan = model.fitted_plan
    return save_release(path, model.METHOD, model.fitted_release.arrays, {
        "config": plan.config.to_dict(), "schema": plan.schema.to_dict(),
        "privacy_report": model._report, "plan": plan.to_json(), "run": model.fitted_release.to_json()})


def read_model(path, cls=None):
    """The synthesizer in a release file written by :func:`write_model`: of class ``cls``, or
    (``None``) of the registered method the file names.

    Raises:
        FileNotFoundError: no file.
        ValueError: not a dpgen_jax release, corrupt, another format version, a method other
            than ``cls``'s, arrays that do not match the stored configuration, or a stored
            privacy report whose delta or epsilon is not what the stored plan's phases compose to
            (:func:`check_report`).
    """
    groups, meta = load_release(path, None if cls is None else cls.METHOD)
    target = get(meta["method"]) if cls is None else cls
    try:
        config = target.CONFIG.from_dict(meta["config"]).validate()
        schema = data_lib.Schema.from_dict(meta["schema"])
        report = meta["privacy_report"]
        plan = Plan.from_json(target.METHOD, config, schema, meta["plan"])
        release = Release.from_json({}, meta["run"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{str(path)!r} has an invalid {target.METHOD} record: {exc}") from exc
    model = target(config)
    plan = dataclasses.replace(plan, paper_accountant=model._paper_accountant(config, plan.delta))
    check_report(path, plan, release, report)
    expected = model._release_shapes(config, data_lib.model_schema(schema), release.statistics)
    for name, want in expected.items():
        got = groups.get(name)
        same = got is not None and jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
        if not same or any(np.shape(a) != tuple(b.shape) for a, b in
                           zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want))):
            raise ValueError(f"{str(path)!r}: the saved {name} does not match its configuration.")
    arrays = {k: jax.tree_util.tree_map(jax.numpy.asarray, groups[k]) for k in expected}
    model.fitted_plan, model.fitted_release = plan, dataclasses.replace(release, arrays=arrays)
    model._report = report
    return model


def _same(stored: Any, recomputed: float) -> bool:
    """Whether a stored epsilon (None: infinite) is the recomputed one up to :data:`EPSILON_RTOL`."""
    if stored is None or recomputed is None or math.isinf(recomputed):
        return stored is None and (recomputed is None or math.isinf(recomputed))
    if isinstance(stored, bool) or not isinstance(stored, (int, float)):
        return False
    return math.isclose(float(stored), recomputed, rel_tol=EPSILON_RTOL, abs_tol=1e-12)


def check_report(path, plan: Plan, release: Release, report: dict) -> None:
    """Checks a loaded release's stored privacy report against its stored plan: the report's
    delta and accountant are the plan's, and its headline epsilon (and the RDP epsilons it holds)
    are what the plan's phases as run (:meth:`Plan.executed_phases`) compose to under the same
    accountant as at fit time. A file written before plans were saved cannot be checked: it loads
    with a warning.

    Raises:
        ValueError: naming the file, the stored and the recomputed value, when they differ.
    """
    if plan.phases is None:
        warnings.warn(f"{str(path)!r} was written before release files stored their plan: its privacy "
                      "report cannot be recomputed and is shown as stored, unchecked.", UserWarning,
                      stacklevel=4)
        return
    where = f"{str(path)!r}: the stored privacy report"
    if report.get("delta") != plan.delta or report.get("accountant") != plan.accountant:
        raise ValueError(f"{where} (delta={report.get('delta')!r}, accountant {report.get('accountant')!r}) "
                         f"is not the stored plan's (delta={plan.delta!r}, accountant {plan.accountant!r}); "
                         "the file was altered after it was written, refusing to load it.")
    phases = plan.executed_phases(release)
    checks = [("epsilon", report.get("epsilon"), plan.accountant, "improved")]
    by_accountant = report.get("epsilon_by_accountant") or {}
    checks += [(f"epsilon_by_accountant[{key!r}]", by_accountant[key], "rdp", key[4:])
               for key in ("rdp_improved", "rdp_classic") if key in by_accountant]
    for name, stored, accountant, conversion in checks:
        recomputed = privacy.epsilon(phases, plan.delta, accountant=accountant, conversion=conversion)
        if not _same(stored, recomputed):
            shown = "inf" if stored is None else repr(stored)
            raise ValueError(f"{where} says {name} = {shown}, but the stored plan's phases compose to "
                             f"epsilon = {recomputed!r} ({accountant}"
                             f"{'' if accountant == 'pld' else ', ' + conversion} accountant, delta="
                             f"{plan.delta:g}); the file was altered after it was written, refusing to "
                             "load it.")
