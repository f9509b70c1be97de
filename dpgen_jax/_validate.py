"""Argument checks shared by every layer (a leaf module: it imports nothing of ours).

Every check raises an error that names the argument, the value received and what was expected.
Numbers are returned as builtin ``float``/``int`` so that phases hash, compare and
serialise to JSON the same way whether the caller passed Python or NumPy scalars; the value itself
is never changed, clipped or rounded.

The checks are keyword-named: the keyword is the argument's name, so it is written once::

    eps = _validate.positive(epsilon=epsilon)       # a finite number > 0
    bins = _validate.whole(minimum=1, bins=bins)    # an integer >= 1
    _validate.one_of(METHODS, method=method)        # one of a closed set of strings

A check takes exactly one ``name=value`` keyword beside its own options (``minimum``,
``allow_inf``), and an optional positional ``context`` that prefixes its message (e.g.
``positive("DPSGDPhase 'train'", clip_norm=c)``). Numbers: ``bool`` is refused where a number
is expected (TypeError, as any non-number); NaN fails every range; ``inf`` fails every range but
``positive(allow_inf=True, ...)`` (an epsilon target, where inf is a non-private run).
:func:`flag` runs a check on a command-line flag as argparse parses it (the CLI, the experiments).

A name computed at run time is passed as ``**{name: value}`` (``whole(minimum=1, **{name: v})``).
There are no positional forms: ``tests/test_validate.py`` refuses them, and refuses a hand-written
``raise ...("Expected ...")`` in the package and the experiments (an error that is not an argument check says
what is wrong and what to do).
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import Any


class UsageError(ValueError):
    """A mistake the user can fix (a missing file, an unreadable CSV, a value its schema does not
    allow, a bad flag): the command line prints it as one line and exits with status 2."""


def np_bool() -> type:
    """NumPy's bool type if NumPy is loaded (this leaf module does not import it itself)."""
    import sys
    numpy = sys.modules.get("numpy")
    return numpy.bool_ if numpy is not None else bool


def _where(context: str) -> str:
    return f"{context}: " if context else ""


def _argument(check: str, kw: dict[str, Any]) -> tuple[str, Any]:
    """The one ``name=value`` keyword of a keyword-named check."""
    if len(kw) != 1:
        raise TypeError(f"_validate.{check}() takes exactly one name=value keyword (the argument "
                        f"checked), got {sorted(kw) or 'none'}.")
    return next(iter(kw.items()))


def _real(value: Any, name: str, context: str = "") -> float:
    """Returns ``value`` as a float; raises TypeError for anything that is not a real number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{_where(context)}expected {name} to be a real number, got {name}={value!r} "
            f"({type(value).__name__})."
        )
    return float(value)


def _integer(value: Any, name: str, context: str = "") -> int:
    """Returns ``value`` as an int; raises TypeError for floats, bools and non-numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{_where(context)}expected {name} to be an integer, got {name}={value!r} "
            f"({type(value).__name__})."
        )
    return int(value)


# ----------------------------------------------------------------------------- keyword-named checks


def positive(context: str = "", /, *, allow_inf: bool = False, **kw: Any) -> float:
    """A real number > 0: finite, or ``inf`` too with ``allow_inf``."""
    name, value = _argument("positive", kw)
    x = _real(value, name, context)
    if not (x > 0.0 and (allow_inf or math.isfinite(x))):
        what = "a number > 0 or inf" if allow_inf else "a finite number > 0"
        raise ValueError(f"{_where(context)}expected {name} to be {what}, got {name}={value!r}.")
    return x


def non_negative(context: str = "", /, **kw: Any) -> float:
    """A real number in [0, inf)."""
    name, value = _argument("non_negative", kw)
    x = _real(value, name, context)
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(
            f"{_where(context)}expected {name} to be a finite number >= 0, got {name}={value!r}."
        )
    return x


def probability(context: str = "", /, **kw: Any) -> float:
    """A probability in (0, 1] (e.g. a sampling rate)."""
    name, value = _argument("probability", kw)
    q = _real(value, name, context)
    if not (0.0 < q <= 1.0):
        raise ValueError(f"{_where(context)}expected {name} in (0, 1], got {name}={value!r}.")
    return q


def fraction(context: str = "", /, **kw: Any) -> float:
    """A number in the open interval (0, 1) (e.g. a delta, a share of a budget)."""
    name, value = _argument("fraction", kw)
    d = _real(value, name, context)
    if not (0.0 < d < 1.0):
        raise ValueError(f"{_where(context)}expected {name} in (0, 1), got {name}={value!r}.")
    return d


def whole(context: str = "", /, *, minimum: int = 0, maximum: int | None = None, **kw: Any) -> int:
    """An integer >= ``minimum`` (a count, a seed, a number of rows), and <= ``maximum`` if given."""
    name, value = _argument("whole", kw)
    n = _integer(value, name, context)
    if maximum is not None and not minimum <= n <= maximum:
        raise ValueError(f"{_where(context)}expected {name} to be an integer in [{minimum}, {maximum}], "
                         f"got {name}={n}.")
    if n < minimum:
        raise ValueError(f"{_where(context)}expected {name} to be an integer >= {minimum}, got {name}={n}.")
    return n


def between(context: str = "", /, *, low: float, high: float, low_open: bool = False,
            high_open: bool = False, **kw: Any) -> float:
    """A real number in an interval, e.g. ``between(low=0, high=1, high_open=True, decay=d)`` for
    [0, 1); NaN fails it."""
    name, value = _argument("between", kw)
    x = _real(value, name, context)
    if not ((low < x if low_open else low <= x) and (x < high if high_open else x <= high)):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        raise ValueError(f"{_where(context)}expected {name} in {interval}, got {name}={value!r}.")
    return x


def boolean(context: str = "", /, **kw: Any) -> bool:
    """True or False (a NumPy bool too); anything else is a TypeError."""
    name, value = _argument("boolean", kw)
    if not isinstance(value, (bool, np_bool())):
        raise TypeError(f"{_where(context)}expected {name} to be True or False, got {name}={value!r}.")
    return bool(value)


def widths(context: str = "", /, *, allow_empty: bool = False, **kw: Any) -> tuple[int, ...]:
    """Layer widths: a tuple (or list) of integers >= 1, non-empty unless ``allow_empty``."""
    name, value = _argument("widths", kw)
    ok = isinstance(value, (tuple, list)) and (allow_empty or len(value) > 0) and all(
        not isinstance(w, bool) and isinstance(w, numbers.Integral) and w >= 1 for w in value)
    if not ok:
        what = "a tuple" if allow_empty else "a non-empty tuple"
        raise ValueError(f"{_where(context)}expected {name} to be {what} of widths >= 1, got {name}={value!r}.")
    return tuple(int(w) for w in value)


def instance(kind: type | tuple[type, ...], what: str, context: str = "", /, **kw: Any) -> Any:
    """An instance of ``kind`` (``what`` names it for the reader, e.g. "a dpgen_jax.data.Schema")."""
    name, value = _argument("instance", kw)
    if not isinstance(value, kind):
        raise TypeError(f"{_where(context)}expected {name} to be {what}, got {type(value).__name__}.")
    return value


def number(context: str = "", /, **kw: Any) -> float:
    """Any real number (NaN and inf included: a range check is the caller's)."""
    name, value = _argument("number", kw)
    return _real(value, name, context)


def integral(context: str = "", /, **kw: Any) -> int:
    """Any integer, negative ones included (an exponent, a signed offset)."""
    name, value = _argument("integral", kw)
    return _integer(value, name, context)


def non_empty(context: str = "", /, **kw: Any) -> str:
    """A non-empty string (a phase's name, a group's name)."""
    name, value = _argument("non_empty", kw)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{_where(context)}expected {name} to be a non-empty string, got {name}={value!r}.")
    return value


def one_of(options: Sequence[str], /, **kw: Any) -> str:
    """One of a closed set of strings."""
    name, value = _argument("one_of", kw)
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"expected {name} to be one of {list(options)}, got {name}={value!r}.")
    return value


def flag(check: Callable[..., Any], **options: Any) -> type[argparse.Action]:
    """An argparse ``action`` that runs ``check`` (a keyword-named check, with its ``options``) on
    a flag's value as it is parsed, on each item of a list: a bad value is the parser's error
    (exit status 2), named by the flag, e.g. ``expected --epsilon to be a number > 0 or inf, got
    --epsilon=0.0``. Defaults are not checked. Example::

        p.add_argument("--num-records", type=int, action=_validate.flag(_validate.whole, minimum=1))
    """

    class Checked(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            name = self.option_strings[-1] if self.option_strings else self.dest
            try:
                if isinstance(values, (list, tuple)):
                    checked = type(values)(check(**options, **{name: v}) for v in values)
                else:
                    checked = check(**options, **{name: values})
            except (TypeError, ValueError) as exc:
                raise argparse.ArgumentError(None, str(exc)) from None
            setattr(namespace, self.dest, checked)

    return Checked


# ----------------------------------------------------------------------------- files


def existing_file(path: os.PathLike | str, what: str) -> pathlib.Path:
    """``path`` as a Path, if it names an existing file (``what`` names it in the message)."""
    p = pathlib.Path(path)
    if not p.exists():
        raise UsageError(f"{what} {str(p)!r} not found.")
    if not p.is_file():
        raise UsageError(f"{what} {str(p)!r} is not a file.")
    return p


def new_file(path: os.PathLike | str, force: bool, what: str) -> pathlib.Path:
    """``path`` as a Path to write, its folder created; an existing file only with ``force``."""
    p = pathlib.Path(path)
    if p.exists() and not force:
        raise UsageError(f"{what} {str(p)!r} exists; pass --force to replace it.")
    if p.exists() and not p.is_file():
        raise UsageError(f"{what} {str(p)!r} is not a file.")
    p.parent.mkdir(parents=True, exist_ok=True)
    return p
