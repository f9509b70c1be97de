"""``FIELD=VALUE`` strings as typed configuration overrides: the one parser of ``--set`` (the
command line's and every experiment's)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from dpgen_jax.synthesizers._config import Flags, moved_hint
from dpgen_jax.synthesizers._registry import get


def config_overrides(method: str, pairs: Sequence[str]) -> dict[str, Any]:
    """``["field=value", ...]`` as typed keyword overrides of ``method``: configuration fields and
    speed settings (:class:`~dpgen_jax.synthesizers.Flags` fields), for ``create(method, **out)``.

    Values are read as JSON where they parse (``5000``, ``0.5``, ``null``, ``[64, 64]``) and as
    strings otherwise; an integer given for a float field becomes a float.

    Raises:
        ValueError: a pair without ``=``, or a name that is neither a field of the method's
            configuration nor a flag it reads (a former field that is a flag now is named).
    """
    cls = get(method)
    cfg = cls.CONFIG
    fields = {f.name: f for f in dataclasses.fields(cfg)}
    # and the speed settings (Flags) the method reads
    fields.update({f.name: f for f in dataclasses.fields(Flags) if getattr(cls.FLAGS, f.name) is not None})
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep:
            raise ValueError(f"--set {pair!r}: expected FIELD=VALUE.")
        if name not in fields:
            raise ValueError(f"--set {pair!r}: {cfg.__name__} has no field {name!r} and {method} "
                             f"reads no such flag; expected one of {sorted(fields)}."
                             f"{moved_hint([name])}")
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
