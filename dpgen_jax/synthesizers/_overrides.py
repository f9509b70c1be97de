"""``FIELD=VALUE`` strings as typed configuration overrides: the one parser of ``--set`` (the
command line's and every experiment's)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from dpgen_jax.synthesizers._registry import get


def config_overrides(method: str, pairs: Sequence[str]) -> dict[str, Any]:
    """``["field=value", ...]`` as typed configuration overrides of ``method``.

    Values are read as JSON where they parse (``5000``, ``0.5``, ``null``, ``[64, 64]``) and as
    strings otherwise; an integer given for a float field becomes a float.

    Raises:
        ValueError: a pair without ``=`` or a field the method's configuration does not have.
    """
    cfg = get(method).CONFIG
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"--set {pair!r}: expected FIELD=VALUE.")
        if name not in fields:
            raise ValueError(f"--set {pair!r}: {cfg.__name__} has no field {name!r}; expected one "
                             f"of {sorted(fields)}.")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if isinstance(value, list):
            value = tuple(value)
        default = fields[name].default
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        out[name] = value
    return out


__all__ = ["config_overrides"]
