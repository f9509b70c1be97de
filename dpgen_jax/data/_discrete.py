"""A table as small integers on public bins, and back: the domain of marginal-based synthesizers.

Discrete columns keep their category index. A continuous column is cut into public bins from its
schema bounds (:func:`~dpgen_jax.data.bin_edges`); an integer column keeps only the bins that hold
at least one integer that is not an atom, so that no code stands for an impossible value. A
continuous column with atoms (``Column.atoms``) has one code per atom after its bins, and one
declared ``missing=True`` one more code, "missing": the value and its indicator or state column of
the model schema are one coded column, so a model of the codes never pairs a gap with a value, a
value with the fill of a gap, or an atom with a bin. Decoding draws a value uniformly inside its bin
(uniformly among the bin's integers that are not atoms for an integer column; never an atom),
returns the atom for an atom code and a gap for the missing code. Everything here depends on the
schema and the number of bins only, never on the rows.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Literal

import jax
import numpy as np
import pandas as pd

from dpgen_jax._random import host_rng
from dpgen_jax.data._bins import bin_edges, bin_index
from dpgen_jax.data._check import check_key
from dpgen_jax.data._encoder import TableEncoder, _values_from_codes, decode_continuous
from dpgen_jax.data._missing import _GAP_TEXT, CONTINUOUS_STATE, from_model_frame, model_schema, off_atoms
from dpgen_jax.data._schema import Column, Schema, atom_name, indicator_name

DiscreteSpacing = Literal["auto", "equal", "log"]
SPACINGS: tuple[str, ...] = ("auto", "equal", "log")
#: ``"auto"`` spaces a continuous column's bins logarithmically when the column declares
#: ``scale="log"``, or when its bounds start at or above zero and its upper bound is at least
#: this many times ``max(lower, 1)`` (money-like, heavy-tailed amounts from zero such as Adult's
#: capital-gain, 0 to 99999), and equally otherwise: a narrow range far from zero (cardio's age
#: in days, 14,275 to 23,713) stays equal. A public rule: it reads the schema only.
LOG_SPAN = 1000.0


def auto_spacing(column: Column) -> str:
    """The ``"auto"`` spacing of a continuous column: ``"log"`` for a column declared
    ``scale="log"`` or reaching :data:`LOG_SPAN` times ``max(lower, 1)`` from a lower bound >= 0,
    ``"equal"`` otherwise."""
    if column.scale == "log":
        return "log"
    return "log" if 0 <= column.lower and column.upper >= LOG_SPAN * max(column.lower, 1.0) else "equal"


def _is_indicator(column: Column, value: Column) -> bool:
    """Whether ``column`` is the missingness indicator of the continuous column ``value``, as
    ``data.model_schema`` writes it (right after the value, binary ``(False, True)``)."""
    return (column.name == indicator_name(value.name) and column.kind == "binary"
            and tuple(column.categories) == (False, True))


def _as_state(column: Column, value: Column) -> Column | None:
    """``value`` with the atoms (and ``missing=True``) its state column ``column`` names, as
    ``data.model_schema`` writes it (right after the value: ``"continuous"``, the atoms' labels, then
    ``"[missing]"`` if the column may be missing); None if ``column`` is not that state column."""
    cats = column.categories or ()
    if not (column.name == atom_name(value.name) and column.kind == "categorical" and len(cats) > 1
            and cats[0] == CONTINUOUS_STATE and all(isinstance(c, str) for c in cats)):
        return None
    gap = cats[-1] == _GAP_TEXT
    try:
        atoms = tuple(float(c) for c in cats[1:len(cats) - gap])
        return dataclasses.replace(value, atoms=atoms, missing=True if gap else None)
    except ValueError:
        return None


def _coded_columns(schema: Schema) -> tuple[Schema, list[bool]]:
    """The model schema of ``schema`` with each (continuous value, its indicator) pair as one
    continuous column declared ``missing=True`` and each (value, state) pair as one continuous
    column with its atoms, and per column whether it is such a pair."""
    model = model_schema(schema)
    cols, folded, i = [], [], 0
    while i < len(model.columns):
        col = model.columns[i]
        nxt = model.columns[i + 1] if i + 1 < len(model.columns) else None
        state = _as_state(nxt, col) if col.kind == "continuous" and nxt is not None else None
        pair = col.kind == "continuous" and nxt is not None and (state is not None or _is_indicator(nxt, col))
        cols.append(state if state is not None else dataclasses.replace(col, missing=True) if pair else col)
        folded.append(pair)
        i += 2 if pair else 1
    if not any(folded):
        return model, folded
    return Schema(tuple(cols), source=model.source, notes=model.notes), folded


class Discretizer:
    """Every column of a schema as a small integer code on public bins.

    Args:
        schema: The public schema.
        bins: Bins per continuous column before empty integer bins are dropped, an integer >= 1.
        spacing: ``"auto"`` (default; :func:`auto_spacing` per column), ``"equal"`` or ``"log"``
            (see :func:`~dpgen_jax.data.bin_edges`).

    A continuous column declared ``missing=True`` is one coded column: its bins, then one code per
    atom (``atom_codes``), then one last code that stands for a gap (``missing_codes``). The same
    holds for a value followed by its indicator or state column in a schema that is already a model
    schema (``data.model_schema``), so a
    discretizer of the user's schema and one of its model schema code the same columns with the
    same sizes; each reads and returns frames of the schema it was given.

    Attributes:
        schema: The columns coded, one per code column: ``data.model_schema(user_schema)`` with
            each continuous value and its indicator or state column as one continuous column
            declared ``missing=True`` and/or with its atoms; its names are the coded columns' names.
        user_schema: The schema given: ``codes`` reads its frames, ``decode`` returns them (gaps
            as the schema's frames hold them).
        sizes: Number of codes per column of ``schema``, in order (categories, or kept bins and
            the missing code).
        missing_codes: ``{continuous column declared missing: its missing code}`` (its last code).
        atom_codes: ``{continuous column with atoms: the code of each atom}`` (right after its bins).
        edges: ``{continuous column: (bins + 1,) edges}``.
        spacings: ``{continuous column: "equal" | "log"}``.

    Example:
        >>> s = Schema.from_dict({"columns": [
        ...     {"name": "n", "kind": "continuous", "lower": 1, "upper": 4, "integer": True},
        ...     {"name": "c", "kind": "categorical", "categories": ["a", "b"]}]})
        >>> Discretizer(s, bins=8).sizes      # four integers: four non-empty bins of eight
        (4, 2)

    Privacy:
        Built from the public schema alone; codes of private rows are as private as the rows.
    """

    def __init__(self, schema: Schema, bins: int = 100, spacing: DiscreteSpacing = "auto") -> None:
        if not isinstance(schema, Schema):
            raise TypeError(f"schema must be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
        if isinstance(bins, (bool, np.bool_)) or not isinstance(bins, numbers.Integral) or bins < 1:
            raise ValueError(f"bins={bins!r}; expected an integer >= 1.")
        if spacing not in SPACINGS:
            raise ValueError(f"spacing={spacing!r}; expected one of {SPACINGS}.")
        # A continuous column declared missing=True: its value and indicator (data.model_schema)
        # are one coded column whose last code is "missing".
        self.user_schema, self.bins = schema, int(bins)
        self.schema, folded = _coded_columns(schema)
        self._model = model_schema(schema)
        self.missing_codes: dict[str, int] = {}
        self.atom_codes: dict[str, tuple[int, ...]] = {}
        self.edges: dict[str, np.ndarray] = {}
        self.spacings: dict[str, str] = {}
        self._int_ranges: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        sizes = []
        for col, pair in zip(self.schema.columns, folded, strict=True):
            if col.kind != "continuous":
                sizes.append(len(col.categories))
                continue
            sp = auto_spacing(col) if spacing == "auto" else spacing
            e = bin_edges(col, self.bins, sp)
            self.edges[col.name], self.spacings[col.name] = e, sp
            if col.integer:
                first = np.ceil(e[:-1])  # the integers of bin i: first[i] .. last[i], atoms excepted
                last = np.ceil(e[1:]) - 1.0
                last[-1] = e[-1]  # the last bin holds its upper edge
                kept = last - first + 1.0 > _atoms_in(col, first, last)
                lookup = np.full(e.size - 1, -1, dtype=np.int64)
                lookup[kept] = np.arange(int(kept.sum()))
                self._int_ranges[col.name] = (first[kept], last[kept], lookup)
                sizes.append(int(kept.sum()))
            else:
                sizes.append(self.bins)
            if col.atoms:
                self.atom_codes[col.name] = tuple(range(sizes[-1], sizes[-1] + len(col.atoms)))
                sizes[-1] += len(col.atoms)
            if pair and col.missing is True:
                self.missing_codes[col.name] = sizes[-1]
                sizes[-1] += 1
        self.sizes: tuple[int, ...] = tuple(sizes)

    def __repr__(self) -> str:
        return f"Discretizer({len(self.sizes)} columns, bins={self.bins}, sizes={self.sizes})"

    def _bin_codes(self, col: Column, values: np.ndarray) -> np.ndarray:
        idx = bin_index(values, self.edges[col.name])
        if col.name in self._int_ranges:
            idx = self._int_ranges[col.name][2][idx]
            if (idx < 0).any() and not self.schema[col.name].atoms:  # pragma: no cover - never
                raise ValueError(f"column {col.name!r}: a value fell in a bin without integers.")
            idx = np.maximum(idx, 0)  # only an atom's value: its atom code replaces it (_fold)
        return idx

    def codes(self, df: pd.DataFrame) -> np.ndarray:
        """``(n, d)`` int64 codes of a frame (checked against the schema as ``TableEncoder`` does)."""
        raw = TableEncoder(self.user_schema).codes(df)  # the model schema's columns
        out = np.empty((len(df), len(self.sizes)), dtype=np.int64)
        for j, col in enumerate(self.schema.columns):
            v = raw[col.name].to_numpy()
            out[:, j] = self._bin_codes(col, v) if col.kind == "continuous" else v
        return self._fold(out, raw)

    def _fold(self, out: np.ndarray, model: Any) -> np.ndarray:
        """``out`` with the missing code where a folded column's indicator (read from ``model``,
        the model schema's columns by name) is set, and an atom or missing code where its state
        (the state column's category index) is not ``"continuous"``."""
        for name, code in self.missing_codes.items():
            if not self.schema[name].atoms:
                out[np.asarray(model[indicator_name(name)], dtype=bool), self.schema.names.index(name)] = code
        for name, codes in self.atom_codes.items():
            state = np.asarray(model[atom_name(name)], dtype=np.int64)
            j = self.schema.names.index(name)
            out[state > 0, j] = codes[0] + state[state > 0] - 1  # atoms, then the missing code
        return out

    def codes_from_encoded(self, x: Any) -> np.ndarray:
        """``(n, d)`` int64 codes of rows already encoded by ``TableEncoder(schema).encode``.

        Continuous values are recovered as ``TableEncoder.decode`` recovers them, in float64
        (``x * (upper - lower) + lower``, or its log-scale inverse; integer columns rounded), so a real value within float32 resolution of a bin edge may land in
        the neighbouring bin; integer columns whose range holds fewer than 2**24 values are exact.
        """
        x = np.asarray(x)
        enc = TableEncoder(self.user_schema)
        if x.ndim != 2 or x.shape[1] != enc.width:
            raise ValueError(f"x has shape {x.shape}; expected (n, {enc.width}) encoded rows.")
        model: dict[str, np.ndarray] = {}  # codes per column of the model schema
        for b, col in zip(enc.blocks, self._model.columns, strict=True):
            v = x[:, b.slice]
            if b.kind == "categorical":
                model[col.name] = np.argmax(v, axis=1)
            elif b.kind == "binary":
                model[col.name] = (v[:, 0] > 0.5).astype(np.int64)
            else:
                value = off_atoms(decode_continuous(v[:, 0], col), self.schema[col.name]).astype(np.float64)
                model[col.name] = self._bin_codes(col, value)
        out = np.empty((x.shape[0], len(self.sizes)), dtype=np.int64)
        for j, name in enumerate(self.schema.names):
            out[:, j] = model[name]
        return self._fold(out, model)

    def parents(self, coarse: Discretizer) -> dict[str, np.ndarray]:
        """For each continuous column, the code in ``coarse`` of each of this discretizer's bins,
        read at the bin's first integer (integer columns) or its midpoint.

        When this binning refines ``coarse``'s (``bins`` a multiple of ``coarse.bins``, the same
        spacing: the edges nest), every value of a bin lies in the coarse bin named, so a
        histogram on these bins sums to ``coarse``'s. A column's atom and missing codes have
        ``coarse``'s atom and missing codes as their parents. Public: computed from the two binnings.
        """
        if (not isinstance(coarse, Discretizer) or coarse.schema.names != self.schema.names
                or set(coarse.missing_codes) != set(self.missing_codes)
                or coarse.atom_codes.keys() != self.atom_codes.keys()):
            raise ValueError("coarse must be a Discretizer of the same schema.")
        out = {}
        for col in self.schema.columns:
            if col.kind != "continuous":
                continue
            e = self.edges[col.name]
            if col.name in self._int_ranges:
                first, last, _ = self._int_ranges[col.name]
                at = _nth_free(col, first, np.zeros_like(first))
            else:
                at = 0.5 * (e[:-1] + e[1:])
            out[col.name] = coarse._bin_codes(col, at)
            if col.name in self.atom_codes:  # an atom's code is its code
                out[col.name] = np.append(out[col.name], coarse.atom_codes[col.name])
            if col.name in self.missing_codes:  # the missing code is the missing code
                out[col.name] = np.append(out[col.name], coarse.missing_codes[col.name])
        return out

    def decode(self, codes: Any, key: jax.Array) -> pd.DataFrame:
        """A frame of the schema's values from ``(n, d)`` codes.

        Discrete codes map to their categories. A continuous code draws a value uniformly inside
        its bin: uniformly among the bin's integers that are not atoms for an integer column
        (int64), uniformly on ``[edge_i, edge_i+1)`` otherwise (float64; a draw that is exactly an
        atom moves to the next float, ``data.off_atoms``); an atom code gives the atom; a missing
        code gives a gap (NaN, or ``pd.NA`` in an integer column; in a frame of a model schema, the
        indicator set, or the state ``"[missing]"``, and the lower bound).

        Args:
            codes: ``(n, d)`` integers with ``0 <= codes[:, j] < sizes[j]``.
            key: a ``jax.random`` key for the draws inside the bins (no default randomness).

        Raises:
            ValueError: on a wrong shape or an out-of-range code (naming the column).
        """
        check_key(key, "Discretizer.decode")
        c = self._check_codes(codes)
        rng = host_rng(key)
        return self.decode_at(c, np.stack([rng.random(c.shape[0]) for _ in self.sizes], axis=1)
                              if self.sizes else np.empty((c.shape[0], 0)))

    def _check_codes(self, codes: Any) -> np.ndarray:
        c = np.asarray(codes)
        if c.ndim != 2 or c.shape[1] != len(self.sizes) or not np.issubdtype(c.dtype, np.integer):
            raise ValueError(f"codes has shape {c.shape} and dtype {c.dtype}; expected (n, "
                             f"{len(self.sizes)}) integers.")
        for j, col in enumerate(self.schema.columns):
            v = c[:, j]
            if v.size and (v.min() < 0 or v.max() >= self.sizes[j]):
                raise ValueError(f"column {col.name!r}: codes must lie in [0, {self.sizes[j]}), got "
                                 f"[{v.min()}, {v.max()}].")
        return c

    def decode_at(self, codes: Any, positions: Any) -> pd.DataFrame:
        """:meth:`decode` with given positions inside the bins instead of random draws.

        Args:
            codes: ``(n, d)`` integers with ``0 <= codes[:, j] < sizes[j]``.
            positions: ``(n, d)`` numbers in [0, 1): where a continuous value lies inside its bin
                (the bin's integers for an integer column, in order); ignored for other columns.
        """
        c = self._check_codes(codes)
        positions = np.asarray(positions, dtype=np.float64)
        if positions.shape != c.shape:
            raise ValueError(f"positions has shape {positions.shape}; expected {c.shape}.")
        out: dict[str, Any] = {}
        for j, col in enumerate(self.schema.columns):
            v = c[:, j]
            u = positions[:, j]
            state = None  # 0: a bin; i >= 1: the i-th atom, then the missing code
            if col.kind == "continuous" and (col.atoms or col.name in self.missing_codes):
                n_bins = self.sizes[j] - len(col.atoms) - (col.name in self.missing_codes)
                state = np.where(v >= n_bins, v - n_bins + 1, 0)
                v = np.where(state > 0, 0, v)
            if col.kind != "continuous":
                out[col.name] = _values_from_codes(col, v)
            elif col.name in self._int_ranges:
                first, last, _ = self._int_ranges[col.name]
                free = last[v] - first[v] + 1.0 - _atoms_in(col, first[v], last[v])
                out[col.name] = _nth_free(col, first[v], np.minimum(np.floor(u * free), free - 1.0)).astype(np.int64)
            else:
                e = self.edges[col.name]
                out[col.name] = off_atoms(np.clip(e[v] + u * (e[v + 1] - e[v]), col.lower, col.upper), col)
            if state is not None:
                values = out[col.name]
                for i, a in enumerate(col.atoms, start=1):
                    values[state == i] = a
                values[state == len(col.atoms) + 1] = col.lower  # the model frame's fill of a gap
                if col.atoms:
                    labels = np.asarray(self._model[atom_name(col.name)].categories, dtype=object)
                    out[atom_name(col.name)] = labels[state]
                else:
                    out[indicator_name(col.name)] = state == 1
        frame = pd.DataFrame({name: out[name] for name in self._model.names}, index=pd.RangeIndex(c.shape[0]))
        return from_model_frame(frame, self.user_schema)

    def describe(self) -> str:
        """The public binning in words, for reports: per continuous column its spacing and codes."""
        parts = []
        for name, sp in self.spacings.items():
            n_atoms = len(self.atom_codes.get(name, ()))
            k = self.sizes[self.schema.names.index(name)] - (name in self.missing_codes) - n_atoms
            kind = "log-spaced" if sp == "log" else "equal-width"
            kept = "" if k == self.bins else f" (the {k} of {self.bins} that hold an integer)"
            gap = f", {n_atoms} atom code(s)" if n_atoms else ""
            gap += " and a missing code" if name in self.missing_codes else ""
            parts.append(f"{name}: {kind} bins{kept}{gap}" if kept else f"{name}: {k} {kind} bins{gap}")
        return "; ".join(parts) if parts else "no continuous column"


def _atoms_in(col: Column, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """How many of ``col``'s atoms lie in each integer range ``first .. last``."""
    return sum(((first <= a) & (a <= last)).astype(np.float64) for a in col.atoms) + np.zeros_like(first)


def _nth_free(col: Column, first: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The ``k``-th (from 0) integer from ``first`` on that is not one of ``col``'s atoms."""
    x = first + k
    for a in col.atoms:  # ascending: each atom at or below the running value pushes it up by one
        x = x + ((first <= a) & (a <= x))
    return x


class BinnedEncoder:
    """Rows one-hot on public bins: a :class:`TableEncoder` over the :class:`Discretizer`'s codes.

    Discrete columns are encoded as :class:`TableEncoder` encodes them; a continuous column
    becomes a categorical block over its bins (``Discretizer(schema, bins, spacing).sizes``; for a
    column declared ``missing=True``, its bins and the missing code: no separate indicator block).
    Decoding picks a bin per block (``"argmax"`` or ``"sample"``, as ``TableEncoder.decode``) and
    draws a value uniformly inside it (``Discretizer.decode``). The same interface as
    ``TableEncoder`` (``encode``, ``decode``, ``width``, ``blocks``), so a model that works on
    encoded rows can use either.

    Args:
        schema: The public schema.
        bins: Bins per continuous column (an integer >= 1; integer columns keep the bins that
            hold an integer).
        spacing: ``"auto"``, ``"equal"`` or ``"log"``, as :class:`Discretizer`.

    Privacy:
        Built from the public schema alone, like :class:`Discretizer`.
    """

    def __init__(self, schema: Schema, bins: int = 20, spacing: DiscreteSpacing = "auto") -> None:
        self.discretizer = Discretizer(schema, bins, spacing)
        self.schema = schema
        coded = self.discretizer.schema
        columns = [Column(c.name, "categorical", tuple(range(k)), label=c.label)
                   if c.kind == "continuous" else c
                   for c, k in zip(coded.columns, self.discretizer.sizes, strict=True)]
        self.code_schema = Schema(tuple(columns), source=coded.source, notes=coded.notes)
        self._codes = TableEncoder(self.code_schema)
        self.width: int = self._codes.width
        self.blocks = self._codes.blocks

    def __repr__(self) -> str:
        return f"BinnedEncoder({self.discretizer!r}, width={self.width})"

    def encode(self, df: pd.DataFrame) -> np.ndarray:
        """``(n, width)`` float32 one-hot rows (checked against the schema as ``TableEncoder`` does)."""
        codes = self.discretizer.codes(df)
        frame = pd.DataFrame({c.name: codes[:, j] if c.kind == "continuous" else _values_from_codes(c, codes[:, j])
                              for j, c in enumerate(self.discretizer.schema.columns)})
        return self._codes.encode(frame)

    def decode(self, array: Any, mode: str = "argmax", key: jax.Array | None = None) -> pd.DataFrame:
        """A frame of the schema's values; continuous values drawn uniformly inside their bin.

        ``key`` is required (the draws inside the bins), also for ``mode="argmax"``.
        """
        check_key(key, "BinnedEncoder.decode")
        k_blocks, k_bins = jax.random.split(key)
        frame = self._codes.decode(array, mode=mode, key=k_blocks if mode == "sample" else None)
        codes = self._codes.codes(frame).to_numpy(dtype=np.int64)  # a bin or category per column
        return self.discretizer.decode(codes, k_bins)


__all__ = ["BinnedEncoder", "Discretizer", "LOG_SPAN", "SPACINGS", "auto_spacing"]
