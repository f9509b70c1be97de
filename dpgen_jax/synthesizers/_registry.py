"""The registry of methods: ``@register`` on a class, ``synthesizers.create(name)``.

It imports nothing of the skeleton but the configuration types: a registered class is any
``Synthesizer`` subclass (with its ``METHOD`` and ``DESCRIPTION``), so the base, the release file
and the ``--set`` parser can all look methods up here.
"""

from __future__ import annotations

from typing import Any

from dpgen_jax.synthesizers._config import Flags, SynthesizerConfig

_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator: makes ``cls`` (a ``Synthesizer`` subclass) available as
    ``synthesizers.create(cls.METHOD)``."""
    name = cls.METHOD
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise ValueError(f"a synthesizer named {name!r} is already registered ({_REGISTRY[name]}).")
    _REGISTRY[name] = cls
    return cls


def available() -> dict[str, str]:
    """The registered methods: name -> one-line description."""
    return {name: cls.DESCRIPTION for name, cls in sorted(_REGISTRY.items())}


def get(name: str) -> type:
    """The synthesizer class registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"Unknown method {name!r}; expected one of {sorted(_REGISTRY)}.") from None


def create(name: str, config: SynthesizerConfig | None = None, *, flags: Flags | None = None,
           **overrides) -> Any:
    """A new, unfitted synthesizer of method ``name`` (see :func:`available`).

    Args:
        name: registry name, e.g. ``"dp-auto-gan"``.
        config: a full configuration of that method (default: the method's default for the
            schema given to ``fit``).
        flags: speed settings (:class:`~dpgen_jax.synthesizers.Flags`); None fields take the
            method's defaults.
        **overrides: configuration fields to set on top of the default (or of ``config``), and
            flags (``chunk_size=...``): each keyword is sorted by its name.

    Returns:
        The method's ``Synthesizer``.
    """
    return get(name)(config, flags=flags, **overrides)
