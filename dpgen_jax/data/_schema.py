"""Public column metadata: :class:`Column`, :class:`Schema` and the schema constructors.

A schema is the *public* description of a table: column kinds, the full ordered category
list of every discrete column and the bounds of every continuous column. Under differential
privacy none of these facts may be read from the private rows for free (``docs/privacy.md``),
so a schema records where its facts came from (``source``) and carries plain-language
``notes`` that end up in every privacy report built on it. ``docs/data.md`` explains how to
declare one for a new dataset.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

import numpy as np


ColumnKind = Literal["binary", "categorical", "continuous"]
SchemaSource = Literal["public", "data-derived"]
ColumnScale = Literal["linear", "log"]

_KINDS: tuple[str, ...] = ("binary", "categorical", "continuous")
_SOURCES: tuple[str, ...] = ("public", "data-derived")
_FORMAT_VERSION = 1
_COLUMN_KEYS = ("name", "kind", "categories", "lower", "upper", "integer", "label", "missing", "scale", "atoms")
#: A column declared ``scale="log"`` resolves values down to this fraction of its span above its
#: lower bound (``Column.log_unit``): its first log bin is that narrow, not one unit wide.
LOG_RESOLUTION = 1e-3
#: The scales of a continuous column (``Column.scale``).
SCALES: tuple[str, ...] = ("linear", "log")
_SCHEMA_KEYS = ("version", "columns", "source", "notes")
#: Largest magnitude of an integer column's bounds: every integer up to it is exact in float64.
MAX_EXACT_INTEGER = 2**53


def show_values(values: Sequence[Any], limit: int = 5) -> str:
    """Render at most ``limit`` values with ``repr`` for an error message.

    Example:
        >>> show_values(["a", "b", "c"], limit=2)
        "'a', 'b', ... (1 more)"
    """
    items = list(values)
    shown = ", ".join(repr(v) for v in items[:limit])
    extra = len(items) - limit
    return shown + (f", ... ({extra} more)" if extra > 0 else "")


class DataDerivedSchemaWarning(UserWarning):
    """Warned when a schema is read from the data itself (not end-to-end DP)."""


def _category_type(value: Any) -> type:
    """The normalised Python type of a category value (str, bool or int)."""
    if isinstance(value, (bool, np.bool_)):
        return bool
    if isinstance(value, str):
        return str
    if isinstance(value, numbers.Integral):
        return int
    raise TypeError(f"category {value!r} has type {type(value).__name__}; expected str, int or bool")


def _normalise_category(value: Any) -> str | int | bool:
    """Convert numpy scalars to the equivalent Python value (for hashing and JSON)."""
    kind = _category_type(value)
    return kind(value)


def indicator_name(column: str) -> str:
    """The name of the missingness indicator of a continuous column declared ``missing=True``:
    ``"<column> [missing]"`` (a binary column, ``True`` where the value is missing)."""
    return f"{column} [missing]"


def atom_name(column: str) -> str:
    """The name of the state column of a continuous column that declares atoms:
    ``"<column> [atom]"`` (a categorical column: ``"continuous"``, one category per atom, and
    ``"[missing]"`` when the column is also declared ``missing=True``)."""
    return f"{column} [atom]"


@dataclasses.dataclass(frozen=True)
class Column:
    """Public metadata of one column.

    Attributes:
        name: Column name (non-empty string).
        kind: ``"binary"`` (two values, encoded as one 0/1 column), ``"categorical"`` (one-hot
            over the full ordered category list) or ``"continuous"`` (scaled to [0, 1] with the
            bounds).
        categories: Binary: exactly two values ``(negative, positive)``; the second encodes as
            1. Categorical: the full ordered category list; the one-hot position and the integer
            code of a value is its index here. Values are all ``str``, all ``int`` or all
            ``bool``; ``None`` for continuous columns.
        lower: Lower bound of a continuous column (finite float, ``None`` otherwise).
        upper: Upper bound of a continuous column (finite float > ``lower``).
        integer: Continuous columns only: the values are integers. The bounds must then be
            integers of magnitude at most 2**53 (so every value in range is exact in float64);
            encoding refuses non-integer values, and decoding rounds to the nearest integer
            (half to even) and returns int64. A range of fewer than 2**24 integers round-trips
            exactly through the float32 encoding (see ``TableEncoder``).
        label: Whether this column is the prediction target (at most one per schema). The
            label is encoded like any other column.
        missing: ``True`` declares (as a public fact) that the column may be missing, for every
            kind: NaN, None and ``pd.NA`` in the data are gaps, every method models them, and
            decoding returns gaps where the model put them (``docs/data.md``, "Missing values"). A
            continuous column is then modelled as its value plus a binary missingness indicator
            right after it (:func:`~dpgen_jax.data.indicator_name`); a discrete one as a
            categorical column whose last category stands for the gap
            (:func:`~dpgen_jax.data.missing_category`). Decoded gaps are NaN in float columns,
            ``pd.NA`` in nullable ``Int64`` / ``boolean`` columns (integer values, int or bool
            categories) and NaN in object columns (str categories). A discrete column may instead
            name one of its categories as the gap (for Adult ``"?"``): NaN, None and ``pd.NA``
            then encode as that category and decoding returns the category itself. ``None`` or
            ``False`` (default): a missing value is an error.
        scale: Continuous columns only: ``"linear"`` (default) or ``"log"``, a public fact that the
            column is skewed (incomes, counts). A log column is encoded as
            ``log1p((x - lower) / u) / log1p((upper - lower) / u)`` with the public unit
            ``u = (upper - lower) * LOG_RESOLUTION`` (:attr:`log_unit`: the scale resolves three
            orders of magnitude below its span) and binned on log-spaced edges, so its many small
            values are not crowded into one bin and its bins do not crowd at the lower bound.
        atoms: Continuous columns only: declared point masses, values inside the bounds that many
            rows hold exactly (an income of 0). A public fact, like the bounds. Each atom is a code
            of its own in every encoding (the model schema's state column
            :func:`~dpgen_jax.data.atom_name`), so a synthetic value at an atom is exactly the atom
            and the continuous part never lands on it. Finite, unique, within ``[lower, upper]``,
            whole numbers in an integer column; stored sorted (``docs/data.md``, "Point masses").

    Raises:
        ValueError: if a field is inconsistent with ``kind`` (e.g. a binary column without
            exactly two distinct categories, bounds with ``lower >= upper``).
        TypeError: if a category is not a str, int or bool, or the types are mixed.
    """

    name: str
    kind: ColumnKind
    categories: tuple[str | int | bool, ...] | None = None
    lower: float | None = None
    upper: float | None = None
    integer: bool = False
    label: bool = False
    missing: str | int | bool | None = None
    scale: ColumnScale = "linear"
    atoms: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Column name must be a non-empty string, got {self.name!r}.")
        where = f"column {self.name!r}"
        if self.kind not in _KINDS:
            raise ValueError(f"{where}: kind={self.kind!r}; expected one of {_KINDS}.")
        if not isinstance(self.integer, (bool, np.bool_)) or not isinstance(self.label, (bool, np.bool_)):
            raise TypeError(f"{where}: integer and label must be bool, got {self.integer!r}, {self.label!r}.")
        object.__setattr__(self, "integer", bool(self.integer))
        object.__setattr__(self, "label", bool(self.label))
        if self.scale not in SCALES:
            raise ValueError(f"{where}: scale={self.scale!r}; expected one of {SCALES}.")
        if self.scale != "linear" and self.kind != "continuous":
            raise ValueError(f"{where}: scale={self.scale!r} applies to continuous columns only (a {self.kind} "
                             "column has no numeric scale).")
        if self.missing is False or (isinstance(self.missing, np.bool_) and not self.missing):
            object.__setattr__(self, "missing", None)
        elif self.missing is True or isinstance(self.missing, np.bool_):
            object.__setattr__(self, "missing", True)
        if self.kind == "continuous":
            self._check_continuous(where)
        else:
            self._check_discrete(where)

    def _check_continuous(self, where: str) -> None:
        if self.categories is not None:
            raise ValueError(f"{where}: a continuous column takes no categories, got {self.categories!r}.")
        if self.missing is not None and self.missing is not True:
            raise ValueError(
                f"{where}: missing={self.missing!r}; a continuous column takes missing=True (the "
                "column may be missing: the encoder adds an indicator) or None (a missing value is an "
                "error), not a category."
            )
        bounds = []
        for side, value in (("lower", self.lower), ("upper", self.upper)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
                raise ValueError(
                    f"{where}: {side}={value!r}; a continuous column needs a finite real {side} bound."
                )
            if not math.isfinite(float(value)):
                raise ValueError(f"{where}: {side}={value!r}; expected a finite bound.")
            bounds.append(float(value))
        if not bounds[0] < bounds[1]:
            raise ValueError(f"{where}: lower={bounds[0]!r} must be smaller than upper={bounds[1]!r}.")
        if self.integer:
            for side, value in zip(("lower", "upper"), bounds, strict=True):
                if not value.is_integer() or abs(value) > MAX_EXACT_INTEGER:
                    raise ValueError(
                        f"{where}: {side}={value!r}; an integer column needs integer bounds of "
                        f"magnitude at most 2**53 = {MAX_EXACT_INTEGER}."
                    )
        object.__setattr__(self, "lower", bounds[0])
        object.__setattr__(self, "upper", bounds[1])
        self._check_atoms(where)

    def _check_atoms(self, where: str) -> None:
        """Atoms as a sorted tuple of floats: finite reals inside the bounds, unique, whole numbers
        in an integer column."""
        if self.atoms is None or isinstance(self.atoms, (str, bytes, Mapping)) or not isinstance(self.atoms, Sequence):
            raise ValueError(f"{where}: atoms={self.atoms!r}; expected a list of numbers inside the bounds.")
        atoms = []
        for a in self.atoms:
            if isinstance(a, (bool, np.bool_)) or not isinstance(a, numbers.Real) or not math.isfinite(float(a)):
                raise ValueError(f"{where}: atom {a!r}; expected finite real numbers.")
            if not self.lower <= float(a) <= self.upper:
                raise ValueError(f"{where}: atom {a!r} lies outside the bounds [{self.lower:g}, {self.upper:g}].")
            if self.integer and not float(a).is_integer():
                raise ValueError(f"{where}: atom {a!r}; an integer column takes whole-number atoms.")
            atoms.append(float(a))
        if len(set(atoms)) != len(atoms):
            dupes = sorted({a for a in atoms if atoms.count(a) > 1})
            raise ValueError(f"{where}: duplicate atoms {show_values(dupes)}.")
        object.__setattr__(self, "atoms", tuple(sorted(atoms)))

    def _check_discrete(self, where: str) -> None:
        if self.lower is not None or self.upper is not None:
            raise ValueError(
                f"{where}: a {self.kind} column takes no bounds, "
                f"got lower={self.lower!r}, upper={self.upper!r}."
            )
        if self.integer:
            raise ValueError(f"{where}: integer=True applies to continuous columns only.")
        if self.atoms:
            raise ValueError(f"{where}: atoms apply to continuous columns only (a {self.kind} column's "
                             "values are its categories).")
        object.__setattr__(self, "atoms", ())
        if self.categories is None or isinstance(self.categories, (str, bytes, set, frozenset, Mapping)):
            raise ValueError(
                f"{where}: a {self.kind} column needs an ordered sequence of categories, "
                f"got {self.categories!r}."
            )
        try:
            cats = tuple(_normalise_category(c) for c in self.categories)
        except TypeError as err:
            raise TypeError(f"{where}: {err}.") from None
        types = {type(c) for c in cats}
        if len(types) > 1:
            raise TypeError(
                f"{where}: categories mix types {sorted(t.__name__ for t in types)}; "
                "use all str, all int or all bool."
            )
        if len(set(cats)) != len(cats):
            dupes = sorted({c for c in cats if cats.count(c) > 1}, key=repr)
            raise ValueError(f"{where}: duplicate categories {show_values(dupes)}.")
        if self.kind == "binary" and len(cats) != 2:
            raise ValueError(
                f"{where}: a binary column needs exactly 2 categories (negative, positive), "
                f"got {len(cats)}: {show_values(cats)}."
            )
        if not cats:
            raise ValueError(f"{where}: a categorical column needs at least one category.")
        if isinstance(cats[0], int) and not isinstance(cats[0], bool):
            out_of_range = [c for c in cats if not -(2**63) <= c < 2**63]
            if out_of_range:
                raise ValueError(f"{where}: int categories must fit in int64, got {show_values(out_of_range)}.")
        object.__setattr__(self, "categories", cats)
        if self.missing is not None and self.missing is not True:
            try:
                missing = _normalise_category(self.missing)
            except TypeError as err:
                raise TypeError(f"{where}: missing: {err}.") from None
            if missing not in cats or type(missing) is not type(cats[0]):
                raise ValueError(
                    f"{where}: missing={self.missing!r} is not one of its categories ({show_values(cats)})."
                )
            object.__setattr__(self, "missing", missing)

    @property
    def log_unit(self) -> float:
        """The unit ``u`` of a continuous column's log scale: log-spaced bins and the log encoding
        are uniform in ``log1p((x - lower) / u)``. ``(upper - lower) * LOG_RESOLUTION`` for a column
        declared ``scale="log"``; 1 otherwise (the whole units a column that the ``"auto"`` bin
        spacing puts on log bins is counted in, as Adult's dollar amounts). Public: bounds only."""
        if self.kind != "continuous":
            raise ValueError(f"column {self.name!r} is {self.kind}; only a continuous column has a scale.")
        return (self.upper - self.lower) * LOG_RESOLUTION if self.scale == "log" else 1.0

    @property
    def width(self) -> int:
        """Number of encoded columns: k for categorical, 1 for binary and continuous."""
        return len(self.categories) if self.kind == "categorical" else 1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with every field (lossless; inverse of :meth:`from_dict`); ``scale`` only
        when it is not ``"linear"``, so schemas without it serialise as before."""
        return {
            "name": self.name,
            "kind": self.kind,
            "categories": None if self.categories is None else list(self.categories),
            "lower": self.lower,
            "upper": self.upper,
            "integer": self.integer,
            "label": self.label,
            "missing": self.missing,
            **({} if self.scale == "linear" else {"scale": self.scale}),
            **({"atoms": list(self.atoms)} if self.atoms else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Column:
        """Build a column from a dict as written by :meth:`to_dict` (absent keys take defaults).

        Raises:
            ValueError: on unknown keys or inconsistent fields.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"a column must be a dict, got {type(data).__name__}: {data!r}.")
        unknown = sorted(set(data) - set(_COLUMN_KEYS))
        if unknown:
            raise ValueError(
                f"column {data.get('name')!r}: unknown keys {unknown}; "
                f"expected a subset of {list(_COLUMN_KEYS)}."
            )
        fields = dict(data)
        for key in ("categories", "atoms"):
            if fields.get(key) is not None and not isinstance(fields[key], (str, bytes, Mapping)):
                fields[key] = tuple(fields[key])
        return cls(**fields)


@dataclasses.dataclass(frozen=True)
class Schema:
    """An ordered tuple of :class:`Column` plus where its facts came from.

    Attributes:
        columns: The columns, in encoding order.
        source: ``"public"`` (declared from public knowledge; the default) or
            ``"data-derived"`` (read from the data by :func:`infer_schema`; not end-to-end DP).
        notes: Plain sentences about the schema's facts (their origin, assumptions such as
            bounds treated as public knowledge). They are copied into privacy reports.

    Raises:
        ValueError: on an empty schema, duplicate names, more than one label or an unknown source.

    Example:
        >>> s = Schema.from_dict({"columns": [
        ...     {"name": "sex", "kind": "binary", "categories": ["Female", "Male"]},
        ...     {"name": "age", "kind": "continuous", "lower": 17, "upper": 90, "integer": True}]})
        >>> s.names, s["age"].upper, len(s)
        (['sex', 'age'], 90.0, 2)
        >>> Schema.from_json(s.to_json()) == s
        True
    """

    columns: tuple[Column, ...]
    source: SchemaSource = "public"
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        cols = tuple(self.columns)
        if not cols:
            raise ValueError("a schema needs at least one column.")
        for c in cols:
            if not isinstance(c, Column):
                raise TypeError(f"schema columns must be Column objects, got {type(c).__name__}: {c!r}.")
        names = [c.name for c in cols]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate column names in schema: {dupes}.")
        clashes = [n for c in cols if c.kind == "continuous"
                   for n in ((indicator_name(c.name),) if c.missing and not c.atoms else ())
                   + ((atom_name(c.name),) if c.atoms else ()) if n in names]
        if clashes:
            raise ValueError(
                f"column name(s) {show_values(clashes)} are the missingness indicators or atom states of "
                "continuous columns declared missing=True or with atoms; rename them."
            )
        labels = [c.name for c in cols if c.label]
        if len(labels) > 1:
            raise ValueError(f"at most one label column is allowed, got {labels}.")
        if self.source not in _SOURCES:
            raise ValueError(f"schema source={self.source!r}; expected one of {_SOURCES}.")
        if isinstance(self.notes, str):
            raise TypeError("schema notes must be a sequence of strings, not a single string.")
        notes = tuple(self.notes)
        for n in notes:
            if not isinstance(n, str):
                raise TypeError(f"schema notes must be strings, got {n!r}.")
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "notes", notes)

    # -- lookup -------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """Column names in schema order."""
        return [c.name for c in self.columns]

    @property
    def label(self) -> str | None:
        """Name of the label column, or None."""
        for c in self.columns:
            if c.label:
                return c.name
        return None

    def __getitem__(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"no column {name!r} in schema; columns are {show_values(self.names, 20)}")

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def __iter__(self) -> Iterator[Column]:
        return iter(self.columns)

    # -- (de)serialisation --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (lossless: ``Schema.from_dict(s.to_dict()) == s``)."""
        return {
            "version": _FORMAT_VERSION,
            "source": self.source,
            "notes": list(self.notes),
            "columns": [c.to_dict() for c in self.columns],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Schema:
        """Build a schema from ``{"columns": [...], "source": ..., "notes": [...]}``.

        ``source`` defaults to ``"public"``: building a schema by hand declares its facts public.

        Raises:
            ValueError: on unknown keys, an unsupported ``version`` or invalid columns.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"a schema must be a dict, got {type(data).__name__}.")
        unknown = sorted(set(data) - set(_SCHEMA_KEYS))
        if unknown:
            raise ValueError(f"schema: unknown keys {unknown}; expected a subset of {list(_SCHEMA_KEYS)}.")
        version = data.get("version", _FORMAT_VERSION)
        if version != _FORMAT_VERSION:
            raise ValueError(f"schema version={version!r}; this library reads version {_FORMAT_VERSION}.")
        if "columns" not in data:
            raise ValueError("schema: missing key 'columns'.")
        return cls(
            columns=tuple(Column.from_dict(c) for c in data["columns"]),
            source=data.get("source", "public"),
            notes=tuple(data.get("notes", ())),
        )

    def to_json(self, indent: int | None = 2) -> str:
        """Serialise to JSON text. Category types (str, int, bool) survive the round trip."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> Schema:
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    # -- privacy report -----------------------------------------------------------------
    def assumptions(self) -> list[str]:
        """Plain sentences for a privacy report: where the schema's facts came from.

        Returns:
            One sentence on the source, then the schema's notes, and for a data-derived schema a
            final sentence saying the result is not end-to-end differentially private.
        """
        if self.source == "public":
            out = [
                "The schema (column kinds, category lists, numeric bounds) is declared as public "
                "knowledge and was not computed from the private rows; the privacy guarantee "
                "assumes this is true."
            ]
        else:
            out = [
                "The schema (column kinds, category lists, numeric bounds) was derived from the "
                "data itself without any differential-privacy mechanism."
            ]
        declared = [c.name for c in self.columns if c.kind == "continuous" and c.missing and not c.atoms]
        if declared:
            out.append(
                f"That the continuous column(s) {show_values(declared, 10)} may be missing is declared as "
                "public knowledge; each is modelled as its value plus a missingness indicator, a column "
                "like any other."
            )
        discrete = [c.name for c in self.columns if c.kind != "continuous" and c.missing is True]
        if discrete:
            out.append(
                f"That the discrete column(s) {show_values(discrete, 10)} may be missing is declared as "
                "public knowledge; each is modelled with \"missing\" as one more category."
            )
        atoms = [c.name for c in self.columns if c.atoms]
        if atoms:
            out.append(
                f"That the column(s) {show_values(atoms, 10)} have point masses (atoms) at the declared values is "
                "declared as public knowledge; each atom (and a gap, where the column may be missing) is "
                "modelled as a category of its own."
            )
        logs = [c.name for c in self.columns if c.scale == "log"]
        if logs:
            out.append(
                f"That the column(s) {show_values(logs, 10)} are skewed (scale \"log\") is declared as "
                "public knowledge; it sets how they are encoded and binned."
            )
        out.extend(self.notes)
        if self.source == "data-derived":
            out.append(
                "Because the schema is data-derived, the synthetic data is NOT end-to-end "
                "differentially private: the category sets and bounds can reveal individual rows "
                "(e.g. a category that occurs once)."
            )
        return out


def binary_schema(n_features: int, prefix: str = "x") -> Schema:
    """A public schema of ``n_features`` binary 0/1 columns named ``f"{prefix}{i}"``.

    Args:
        n_features: Number of columns (>= 1).
        prefix: Column-name prefix.

    Returns:
        A ``public`` schema whose columns are binary with int categories ``(0, 1)``.

    Example:
        >>> binary_schema(3).names
        ['x0', 'x1', 'x2']
    """
    if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral) or n_features < 1:
        raise ValueError(f"n_features={n_features!r}; expected an integer >= 1.")
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(f"prefix={prefix!r}; expected a non-empty string.")
    cols = tuple(Column(f"{prefix}{i}", "binary", categories=(0, 1)) for i in range(int(n_features)))
    return Schema(
        cols,
        source="public",
        notes=(f"All {int(n_features)} columns are binary with values 0/1; this layout is public.",),
    )
