"""Release files of earlier format versions, brought to the current one: the one home of every
old-format rule.

A release file (``synthesizers/_release.py``) holds one JSON document, its metadata, with a
``format_version``. :func:`upgrade` takes the metadata of any version this library still reads
and returns it in the current format (:data:`CURRENT`), applying in turn the step of each version
from the file's up to the current one (:data:`STEPS`: the version a step upgrades from -> the
step). The readers then read the current format only. Every step is a pure function of JSON
values: it reads no arrays, imports nothing of the package (a leaf) and changes nothing a fit
released; it only renames, fills in what a field meant when it was absent, and moves values to
where the current format keeps them.

Version 1 (methods stored under their class names) is not read: :func:`upgrade` refuses it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

#: The release format this library writes (``synthesizers._release.FORMAT_VERSION``).
CURRENT = 3

#: Configuration fields that became speed settings (``synthesizers.Flags``): the old name -> the
#: flag. They never changed what a fit computed, so a version-2 configuration drops them.
FLAGS_FROM_CONFIG = {"method": "clip_method", "chunk_size": "chunk_size",
                     "shard_group": "shard_group", "pretrain_chunk": "pretrain_chunk"}

# Version 2 -> 3 ----------------------------------------------------------------------------

#: The methods of version 2 whose configuration is a ``GeneratorConfig`` (the one-way stage).
_GENERATORS_2 = frozenset({"dp-auto-gan", "dp-sactgan", "dp-syn", "dp-vae", "dp-wgan", "gs-wgan"})
#: Version-2 configuration keys renamed in version 3 (the neural generators' one-way stage is
#: marginal matching; "calibration" names noise calibration only).
_RENAMED_2 = {"calibration_share": "matching_share", "calibration_bins": "matching_bins"}
#: Fields a version-2 configuration may lack, per method, with the value the fit used before the
#: field existed: a neural generator's one-way stage off (it did not exist), GEM's fresh noise,
#: DP-auto-GAN's paper defaults.
_ABSENT_2 = {
    **{m: {"calibration_share": 0.0} for m in _GENERATORS_2},
    "dp-auto-gan": {"calibration_share": 0.0, "decode": "argmax", "continuous_encoding": "paper"},
    "gem": {"fixed_noise": False},
}
#: Values some version-2 configurations held that the current format keeps elsewhere or derives:
#: released statistics (AIM's cliques, DP-SYN's label counts) and d (``num_columns``, the marginal
#: methods' column count, taken from the schema).
_STATISTICS_2 = ("model_cliques", "released_counts")
_DERIVED_2 = ("num_columns",)
#: Phase kinds of version 2 (stored by class name) -> their stable name (``privacy.Phase.KIND``).
_PHASE_KINDS_2 = {"DPSGDPhase": "dpsgd", "GaussianPhase": "gaussian",
                  "ExponentialMechanismPhase": "exponential-mechanism", "NonPrivatePhase": "non-private",
                  "ParallelPhases": "parallel", "ShardedSanitizerPhase": "sharded-sanitizer"}


def _phase_kinds_2(value: Any) -> Any:
    """A version-2 plan value with every ``{"phase": class name, "fields": ...}`` as
    ``{"kind": KIND, "fields": ...}`` (nested phases included)."""
    if isinstance(value, dict):
        if set(value) == {"phase", "fields"}:
            name = value["phase"]
            if name not in _PHASE_KINDS_2:
                raise ValueError(f"Unknown privacy phase {name!r} in a version-2 plan; version 2 knew "
                                 f"{sorted(_PHASE_KINDS_2)}.")
            return {"kind": _PHASE_KINDS_2[name], "fields": _phase_kinds_2(value["fields"])}
        return {k: _phase_kinds_2(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_phase_kinds_2(v) for v in value]
    return value


def _from_2(meta: dict[str, Any]) -> dict[str, Any]:
    """Version 2 -> 3: the configuration's renamed keys, absent fields filled with what they
    meant, speed settings, derived values and released statistics moved out of it; the plan's
    phases keyed by their stable kind; a file written before plans (or run facts) were saved gets
    a plan without phases (its report is then shown as stored, unchecked) and run facts holding
    only the statistics its configuration held."""
    method = meta["method"]
    config = {k: v for k, v in meta["config"].items() if k not in FLAGS_FROM_CONFIG and k not in _DERIVED_2}
    statistics = {k: config.pop(k) for k in _STATISTICS_2 if k in config}
    config = {**_ABSENT_2.get(method, {}), **config}
    meta["config"] = {_RENAMED_2.get(k, k): v for k, v in config.items()}
    if "plan" in meta:
        meta["plan"] = _phase_kinds_2(meta["plan"])
    else:
        meta["plan"] = {"phases": None, "delta": meta["privacy_report"]["delta"], "target_epsilon": None,
                        "preset": None, "private": True, "accountant": "pld", "uses_records": True,
                        "num_records": None, "num_records_public": False, "max_seconds": None,
                        "seeded": False}
    meta["plan"] = {"uncut_steps": None, **meta["plan"]}  # no version-2 schedule was cut and recalibrated
    run = meta.get("run", {"steps": {}, "statistics": {k: v for k, v in statistics.items() if v is not None}})
    meta["run"] = {"clip_norms": {}, "statistics": {}, "notes": [], **run}
    return meta


#: The step of each version this library reads: the version it upgrades from -> the step.
STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {2: _from_2}


def upgrade(meta: Mapping[str, Any]) -> dict[str, Any]:
    """A release file's metadata in the current format (a new dict; ``meta`` is not changed).

    Args:
        meta: the JSON document of a release file, of format version :data:`CURRENT` or one
            :data:`STEPS` upgrades from.

    Returns:
        The metadata with ``format_version`` :data:`CURRENT`.

    Raises:
        ValueError: a format version this library does not read (older than every step, or
            newer than :data:`CURRENT`), naming it and the library version that wrote the file.
        KeyError: a field the file's version always held is missing.
    """
    out = copy.deepcopy(dict(meta))
    version = out.get("format_version")
    while version != CURRENT:
        if version not in STEPS:
            raise ValueError(
                f"saved with release format version {version!r} (dpgen-jax "
                f"{out.get('versions', {}).get('dpgen-jax')}); this dpgen-jax reads versions "
                f"{min(STEPS)} to {CURRENT}. Load it with the dpgen-jax version that wrote it.")
        out = STEPS[version](out)
        version = version + 1
        out["format_version"] = version
    return out


__all__ = ["CURRENT", "FLAGS_FROM_CONFIG", "STEPS", "upgrade"]
