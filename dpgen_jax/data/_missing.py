"""Gaps in any column kind: the model schema and the frames on either side of it.

A column declared ``missing=True`` (a public fact: the column may be missing) is modelled by the
*model schema* (:func:`model_schema`), which every synthesizer fits and samples on and every
metric compares:

* a continuous column becomes two columns: the value itself (no longer missing) and, right after
  it, a binary missingness indicator named :func:`indicator_name` (``False``/``True``). A missing
  value becomes ``indicator=True`` with the column's lower bound as its value (a public constant:
  the value is never read where the indicator is set);
* a discrete column becomes a categorical column of the same name whose categories are its own
  followed by one more, :func:`missing_category`, that stands for the gap (bool categories become
  the ints 0 and 1, the gap 2), so "missing" is one more category and no value is filled anywhere.

A continuous column that declares atoms (point masses, ``Column.atoms``) is modelled the same way:
its value, then a categorical *state* column :func:`atom_name` whose categories are
``"continuous"``, one per atom (:func:`atom_label`) and, when the column is also declared
``missing=True``, ``"[missing]"`` (which then replaces the indicator). A row at an atom has that
atom as its state and as its value; a gap has the lower bound as its value.

Decoding puts the gaps and atoms back (:func:`from_model_frame`). Neural methods thus see the
indicator pair or the state column (continuous) or the extra category (discrete); marginal methods
see "missing" and each atom as one more code of the discretised column (``Discretizer``).
``docs/data.md`` ("Missing values", "Point masses").
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from dpgen_jax.data._check import check_frame
from dpgen_jax.data._schema import MAX_EXACT_INTEGER, Column, Schema, atom_name, indicator_name

__all__ = ["atom_label", "atom_name", "from_model_frame", "has_missing", "has_model_columns", "indicator_name",
           "missing_category", "model_schema", "off_atoms", "to_model_frame"]

_GAP_TEXT = "[missing]"
#: The state (``atom_name``) of a value of a column with atoms that is at none of its atoms.
CONTINUOUS_STATE = "continuous"


def _declared(schema: Schema) -> list[Column]:
    return [c for c in schema.columns if c.missing is True]


def has_missing(schema: Schema) -> bool:
    """Whether ``schema`` has a column (of any kind) declared ``missing=True``."""
    return bool(_declared(schema))


def has_model_columns(schema: Schema) -> bool:
    """Whether :func:`model_schema` differs from ``schema``: a column (of any kind) declared
    ``missing=True`` or a continuous column with atoms. Frames of such a schema are compared as
    model frames (:func:`to_model_frame`)."""
    return any(c.missing is True or c.atoms for c in schema.columns)


def atom_label(atom: float) -> str:
    """The category of ``atom`` in a state column (:func:`atom_name`): the whole number without a
    decimal point (``"0"``), else ``repr`` of the float (exact: ``float(atom_label(a)) == a``)."""
    return str(int(atom)) if float(atom).is_integer() and abs(atom) <= MAX_EXACT_INTEGER else repr(float(atom))


def _states(column: Column) -> tuple[str, ...]:
    """The categories of the state column of a continuous column with atoms."""
    gap = (_GAP_TEXT,) if column.missing is True else ()
    return (CONTINUOUS_STATE, *(atom_label(a) for a in column.atoms), *gap)


def off_atoms(values: np.ndarray, column: Column) -> np.ndarray:
    """``values`` (of the continuous part of ``column``, inside its bounds) with every value that
    equals an atom moved off it: to the next float towards ``upper``
    (towards ``lower`` for an atom at ``upper``), or for an integer column the next whole number up
    that is neither an atom nor beyond ``upper`` (else down). So the continuous part never puts mass
    on an atom; in float columns such a value is a measure-zero event of clipping or a draw."""
    out = np.array(values, copy=True)
    atoms = np.asarray(column.atoms, dtype=np.float64)
    if not atoms.size:
        return out
    hit = np.isin(out, atoms)
    if not hit.any():
        return out
    if not column.integer:
        up = np.nextafter(out[hit], column.upper)
        out[hit] = np.where(out[hit] < column.upper, up, np.nextafter(out[hit], column.lower))
        return out
    for x in np.unique(out[hit]):
        steps = [x + k for k in range(1, len(atoms) + 2)] + [x - k for k in range(1, len(atoms) + 2)]
        free = [y for y in steps if column.lower <= y <= column.upper and y not in atoms]
        if free:
            out[out == x] = free[0]
    return out


def missing_category(column: Column) -> str | int:
    """The category that stands for a gap in the model schema of a discrete column declared
    ``missing=True``: for str categories ``"[missing]"`` (with ``"_"`` appended until it is not one
    of them), for int categories their maximum plus one (the minimum minus one if the maximum is the
    largest int64), for bool categories ``2`` (they become ``0``/``1`` in the model).

    Raises:
        ValueError: if the column is continuous (its gap is the indicator :func:`indicator_name`)
            or not declared ``missing=True``.

    Example:
        >>> missing_category(Column("smoker", "binary", categories=("no", "yes"), missing=True))
        '[missing]'
        >>> missing_category(Column("grade", "categorical", categories=(1, 2, 3), missing=True))
        4
    """
    if not isinstance(column, Column):
        raise TypeError(f"column must be a dpgen_jax.data.Column, got {type(column).__name__}.")
    if column.kind == "continuous" or column.missing is not True:
        raise ValueError(
            f"column {column.name!r}: missing_category applies to a discrete column declared missing=True; "
            "a continuous column's gaps are its indicator (indicator_name)."
        )
    cats = column.categories
    if isinstance(cats[0], bool):
        return 2
    if isinstance(cats[0], int):
        top = max(cats)
        return top + 1 if top + 1 < 2**63 else min(cats) - 1
    text = _GAP_TEXT
    while text in cats:
        text += "_"
    return text


def _model_categories(column: Column) -> tuple:
    """The model schema's categories of a discrete column declared ``missing=True``."""
    if isinstance(column.categories[0], bool):
        return (0, 1, 2)
    return (*column.categories, missing_category(column))


def model_schema(schema: Schema) -> Schema:
    """The schema the methods model. Each continuous column declared ``missing=True`` is followed by
    its binary indicator ``indicator_name(column)`` (categories ``(False, True)``); each discrete
    column declared ``missing=True`` becomes a categorical column of the same name (and label flag)
    whose categories are its own (bool ones as ``0``/``1``) followed by :func:`missing_category`,
    which is its ``missing`` category.

    A continuous column with atoms is followed by its state column ``atom_name(column)``
    (categories ``"continuous"``, :func:`atom_label` of each atom, then ``"[missing]"`` if it is
    declared ``missing=True``, in place of the indicator); the value column keeps no atoms.

    A schema without such a column is returned as it is (the same object).

    Example:
        >>> s = Schema.from_dict({"columns": [
        ...     {"name": "hours", "kind": "continuous", "lower": 1, "upper": 99, "missing": True},
        ...     {"name": "smoker", "kind": "binary", "categories": [False, True], "missing": True}]})
        >>> model_schema(s).names
        ['hours', 'hours [missing]', 'smoker']
        >>> model_schema(s)["smoker"].categories, model_schema(s)["smoker"].missing
        ((0, 1, 2), 2)
    """
    if not isinstance(schema, Schema):
        raise TypeError(f"schema must be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
    if not has_model_columns(schema):
        return schema
    columns: list[Column] = []
    for c in schema.columns:
        if c.atoms:
            states = _states(c)
            columns.append(dataclasses.replace(c, missing=None, atoms=()))
            columns.append(Column(atom_name(c.name), "categorical", categories=states,
                                  missing=_GAP_TEXT if c.missing is True else None))
        elif c.missing is not True:
            columns.append(c)
        elif c.kind == "continuous":
            columns.append(dataclasses.replace(c, missing=None))
            columns.append(Column(indicator_name(c.name), "binary", categories=(False, True)))
        else:
            cats = _model_categories(c)
            columns.append(Column(c.name, "categorical", categories=cats, label=c.label, missing=cats[-1]))
    return Schema(tuple(columns), source=schema.source, notes=schema.notes)


def _discrete_to_model(c: Column, s: pd.Series, where: str) -> pd.Series:
    """A discrete column declared missing=True as values of its model column (gaps -> the gap
    category); values outside the categories are passed on for the encoder to refuse."""
    gap = missing_category(c)
    isna = s.isna().to_numpy(dtype=bool)
    cats = c.categories
    if isinstance(cats[0], bool):
        obj = s.to_numpy(dtype=object)
        present = obj[~isna]
        if not pd.api.types.is_bool_dtype(s.dtype) and not all(isinstance(v, (bool, np.bool_)) for v in present):
            raise ValueError(
                f"{where}: value(s) that are not True or False; the schema's categories are {cats} "
                "(gaps: NaN, None or pd.NA)."
            )
        codes = np.full(len(obj), 2, dtype=np.int8)
        codes[~isna] = (present.astype(bool) == cats[1]).astype(np.int8)
        return pd.Series(codes, index=s.index)
    if (s[~isna] == gap).to_numpy(dtype=bool).any():
        raise ValueError(
            f"{where}: holds {gap!r}, the category that stands for a gap in the model (missing=True), which "
            "is not one of the schema's categories."
        )
    if not isna.any():
        return s
    if isinstance(cats[0], int) and pd.api.types.is_integer_dtype(s.dtype):  # nullable Int64 etc.
        return s.fillna(gap).astype(np.int64)
    if isinstance(cats[0], int) and pd.api.types.is_float_dtype(s.dtype) and isinstance(s.dtype, np.dtype):
        return pd.Series(np.where(isna, float(gap), s.to_numpy()), index=s.index)
    return s.astype(object).mask(isna, gap)


def to_model_frame(df: pd.DataFrame, schema: Schema, name: str = "df") -> pd.DataFrame:
    """``df`` (the schema's columns) as a frame of :func:`model_schema`'s columns.

    For each continuous column declared ``missing=True``: its indicator is ``True`` where the value
    is NaN, None or ``pd.NA``, and those values become the column's lower bound. For each discrete
    column declared ``missing=True``: gaps become :func:`missing_category` (bool values become
    ``0``/``1``). Other columns are passed on untouched (their values are checked where they are
    encoded). For each continuous column with atoms: its state column is the atom's label where the
    value equals an atom, ``"[missing]"`` at a gap (the value then the lower bound), else
    ``"continuous"``. A frame whose schema declares no such column is returned as it is.

    Args:
        df: A frame with exactly the schema's columns (any order).
        schema: The public schema.
        name: What to call the frame in messages.

    Raises:
        TypeError, ValueError: as :func:`~dpgen_jax.data.check_frame`; ValueError naming the
            column for a value that is not a bool in a bool column declared ``missing=True``, or
            that equals the gap category.
    """
    check_frame(df, schema, name)
    if not has_model_columns(schema):
        return df
    out: dict[str, object] = {}
    for c in schema.columns:
        s = df[c.name]
        if c.atoms:
            out[c.name], out[atom_name(c.name)] = _atoms_to_model(c, s)
        elif c.missing is not True:
            out[c.name] = s
        elif c.kind == "continuous":
            isna = s.isna().to_numpy(dtype=bool)
            out[c.name] = s.where(~isna, c.lower).infer_objects() if isna.any() else s
            out[indicator_name(c.name)] = isna
        else:
            out[c.name] = _discrete_to_model(c, s, f"{name}: column {c.name!r}")
    return pd.DataFrame(out, index=df.index)


def _atoms_to_model(c: Column, s: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """The value and the state of a continuous column with atoms; values that are not numbers are
    passed on for the encoder to refuse."""
    isna = s.isna().to_numpy(dtype=bool)
    value = s.where(~isna, c.lower).infer_objects() if isna.any() else s
    state = np.full(len(s), CONTINUOUS_STATE, dtype=object)
    numeric = pd.to_numeric(value, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    for a, label in zip(c.atoms, _states(c)[1:], strict=False):
        state[(numeric == a) & ~isna] = label
    if c.missing is True:
        state[isna] = _GAP_TEXT
    elif isna.any():
        value = s  # a gap in a column not declared missing: the encoder refuses it, naming the column
    return value, state


def _atoms_from_model(c: Column, df: pd.DataFrame) -> object:
    """The user's values of a continuous column with atoms from its value and state columns."""
    states = df[atom_name(c.name)].to_numpy(dtype=object)
    raw = df[c.name].to_numpy(dtype=np.int64 if c.integer else np.float64)
    values = off_atoms(raw, c)
    for a, label in zip(c.atoms, _states(c)[1:], strict=False):
        values[states == label] = a
    if c.missing is not True:
        return values
    gap = states == _GAP_TEXT
    if c.integer:
        out = pd.array(values, dtype="Int64")
        out[gap] = pd.NA
        return out
    return np.where(gap, np.nan, values)


def _discrete_from_model(c: Column, values: pd.Series) -> object:
    """The user's values of a discrete column declared missing=True from its model column."""
    gap = missing_category(c)
    cats = c.categories
    if isinstance(cats[0], bool):
        codes = values.to_numpy(dtype=np.int64)
        out = pd.array(np.asarray(cats, dtype=bool)[np.minimum(codes, 1)], dtype="boolean")
        out[codes == 2] = pd.NA
        return out
    if isinstance(cats[0], int):
        codes = values.to_numpy(dtype=np.int64)
        out = pd.array(codes, dtype="Int64")
        out[codes == gap] = pd.NA
        return out
    obj = values.to_numpy(dtype=object).copy()
    obj[obj == gap] = np.nan
    return pd.Series(obj, index=values.index, dtype=object)


def from_model_frame(df: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """The inverse of :func:`to_model_frame` on decoded rows, with gaps as a user expects them:
    where a continuous column's indicator is ``True`` its value becomes missing (NaN in a float64
    column; ``pd.NA`` in a nullable ``Int64`` column for an integer column) and the indicators are
    dropped; a discrete column's gap category becomes ``pd.NA`` in a nullable ``Int64`` (int
    categories) or ``boolean`` (bool categories) column, and NaN in an object column (str
    categories). A continuous column with atoms takes each atom where its state names it, a gap
    where it says ``"[missing]"``, and elsewhere its value moved off the atoms (:func:`off_atoms`).

    Args:
        df: A frame with :func:`model_schema`'s columns.
        schema: The public (user's) schema.

    Raises:
        ValueError: if ``df`` does not have the model schema's columns.
    """
    if not has_model_columns(schema):
        return df
    check_frame(df, model_schema(schema), "the model's rows")
    out: dict[str, object] = {}
    for c in schema.columns:
        if c.atoms:
            out[c.name] = _atoms_from_model(c, df)
        elif c.missing is not True:
            out[c.name] = df[c.name]
        elif c.kind != "continuous":
            out[c.name] = _discrete_from_model(c, df[c.name])
        else:
            flag = df[indicator_name(c.name)].to_numpy(dtype=bool)
            if c.integer:
                values = pd.array(df[c.name].to_numpy(dtype=np.int64), dtype="Int64")
                values[flag] = pd.NA
            else:
                values = np.where(flag, np.nan, df[c.name].to_numpy(dtype=np.float64))
            out[c.name] = values
    return pd.DataFrame(out, index=df.index)
