"""The table encoder: DataFrame <-> float32 matrix under a public :class:`Schema`.

Layout (the one of Tantipongpipat et al. 2021, "Differentially Private Synthetic Mixed-Type Data
Generation For Unsupervised Learning", section 4.1; ``docs/data.md``): a categorical column
becomes a one-hot block of width k (category index = position in the schema's list); a binary
column one 0/1 column (1 = the second category); a continuous column one column scaled to
[0, 1] with the schema's bounds (on the logarithm of the distance from the lower bound for a column
declared ``scale="log"``). The encoder is built from the schema alone and never fits anything on
data.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal, NamedTuple, get_args

import jax
import numpy as np
import pandas as pd

from dpgen_jax._random import host_rng
from dpgen_jax.data._check import check_key, show_values
from dpgen_jax.data._missing import from_model_frame, model_schema, to_model_frame
from dpgen_jax.data._schema import Column, Schema

OutOfBoundsPolicy = Literal["error", "clip"]
DecodeMode = Literal["argmax", "sample"]
#: The decoding modes of ``TableEncoder.decode`` (and ``BinnedEncoder.decode``).
DECODE_MODES: tuple[str, ...] = get_args(DecodeMode)

#: An integer column whose range holds fewer values than this round-trips exactly through the
#: float32 encoding: the scaled value of an integer is off by at most half a float32 ulp of [0.5, 1),
#: 2**-25, which times the span stays below 0.5. For a column declared ``scale="log"`` the error of
#: the offset is about ``(1 + span) * log1p(span) * 2**-25``, so the round trip is exact when
#: ``(1 + span) * log1p(span) < 2**24`` (a span of up to about 1.1 million).
EXACT_INTEGER_SPAN = 2**24


class IntegerResolutionWarning(UserWarning):
    """Warned when an integer column's range is too wide for an exact float32 round trip."""


class Block(NamedTuple):
    """Where one column lives in the encoded matrix: columns ``start:stop``.

    Attributes:
        name: Column name.
        kind: ``"binary"``, ``"categorical"`` or ``"continuous"``.
        start: First encoded column (inclusive).
        stop: Last encoded column (exclusive).
        categories: The schema's categories (``None`` for continuous).
    """

    name: str
    kind: str
    start: int
    stop: int
    categories: tuple | None

    @property
    def width(self) -> int:
        """``stop - start``."""
        return self.stop - self.start

    @property
    def slice(self) -> slice:
        """``slice(start, stop)``, for indexing the encoded matrix."""
        return slice(self.start, self.stop)


def _integer_error(col: Column) -> float:
    """Upper bound on ``|decode(encode(v)) - v|`` before rounding for an integer column: zero when
    rounding recovers every integer of the range exactly."""
    span = col.upper - col.lower
    if col.scale == "log":
        unit = col.log_unit
        reach = (unit + span) * np.log1p(span / unit)
        return 0.0 if reach < EXACT_INTEGER_SPAN else reach * 2.0**-25 + 0.5
    return 0.0 if span < EXACT_INTEGER_SPAN else span * 2.0**-25 + 0.5


def _int_dtype(categories: tuple) -> np.dtype:
    """The smallest signed integer dtype that holds every int category."""
    lo, hi = min(categories), max(categories)
    for dt in (np.int8, np.int16, np.int32):
        info = np.iinfo(dt)
        if info.min <= lo and hi <= info.max:
            return np.dtype(dt)
    return np.dtype(np.int64)


class TableEncoder:
    """Encode a DataFrame into a float32 matrix and decode model outputs back.

    Args:
        schema: The public schema.
        on_out_of_bounds: What :meth:`encode` and :meth:`codes` do with a continuous value outside
            the schema bounds: ``"error"`` (default) raises; ``"clip"`` clips it to the bound,
            records the per-column counts in :attr:`last_clip_counts` and warns naming the columns.

    A column declared ``missing=True`` is encoded as its model schema says (``data.model_schema``):
    a continuous one as two blocks, its value (the lower bound where it is missing) and, right after
    it, the binary block of its missingness indicator (``data.indicator_name``); a discrete one as a
    one-hot block with one more category for the gap (``data.missing_category``). :meth:`decode`
    puts the gaps back (``docs/data.md``, "Missing values").

    A continuous column declared ``scale="log"`` is encoded as
    ``log1p((x - lower) / u) / log1p((upper - lower) / u)`` (in [0, 1]; ``u`` its public
    ``Column.log_unit``) and decoded with the inverse.

    Attributes:
        schema: The schema.
        model_schema: ``data.model_schema(schema)``: the schema with the indicators, whose
            columns the blocks follow (the schema itself when no column is declared missing).
        blocks: One :class:`Block` per column of ``model_schema``, in order.
        width: Total number of encoded columns.
        last_clip_counts: After a successful :meth:`encode`/:meth:`codes`, ``{column: number of
            values clipped}`` for every continuous column (all zero under ``"error"``); ``None``
            before the first call.

    Example:
        >>> from dpgen_jax.data import Schema
        >>> s = Schema.from_dict({"columns": [
        ...     {"name": "c", "kind": "categorical", "categories": ["a", "b", "c"]},
        ...     {"name": "y", "kind": "binary", "categories": ["no", "yes"]},
        ...     {"name": "v", "kind": "continuous", "lower": 0, "upper": 10}]})
        >>> enc = TableEncoder(s)
        >>> enc.width
        5
        >>> enc.encode(pd.DataFrame({"c": ["b"], "y": ["yes"], "v": [2.5]})).tolist()
        [[0.0, 1.0, 0.0, 1.0, 0.25]]

    Privacy:
        Encoding and decoding use only the public schema. Errors and warnings name the column and
        the rule, never a value or a count of rows, unless ``verbose=True`` is passed to
        :meth:`encode` / :meth:`codes` (for debugging your own data). The clip counts
        (:attr:`last_clip_counts`) are computed from the rows they were given: if those rows are
        private, do not put them in anything you release.
    """

    def __init__(self, schema: Schema, on_out_of_bounds: OutOfBoundsPolicy = "error") -> None:
        if not isinstance(schema, Schema):
            raise TypeError(f"schema must be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
        if on_out_of_bounds not in ("error", "clip"):
            raise ValueError(f"on_out_of_bounds={on_out_of_bounds!r}; expected 'error' or 'clip'.")
        for col in schema.columns:
            error = _integer_error(col) if col.integer else 0.0
            if error:
                many = ("2**24 or more values" if col.scale == "linear" else
                        "too many values on a log scale ((u + span) * log1p(span / u) >= 2**24)")
                warnings.warn(
                    f"column {col.name!r}: the integer range [{col.lower:.0f}, {col.upper:.0f}] holds "
                    f"{many}, more than one float32 per column resolves: decode(encode(df)) "
                    f"can differ from df by up to about {error:.3g} in this column.",
                    IntegerResolutionWarning,
                    stacklevel=2,
                )
        self.schema = schema
        self.model_schema = model_schema(schema)
        self.on_out_of_bounds: OutOfBoundsPolicy = on_out_of_bounds
        blocks, start = [], 0
        for col in self.model_schema.columns:
            blocks.append(Block(col.name, col.kind, start, start + col.width, col.categories))
            start += col.width
        self.blocks: list[Block] = blocks
        self.width: int = start
        self.last_clip_counts: dict[str, int] | None = None
        self._index = {b.name: b for b in blocks}

    def __repr__(self) -> str:
        return (
            f"TableEncoder({len(self.schema)} columns, width={self.width}, "
            f"on_out_of_bounds={self.on_out_of_bounds!r})"
        )

    def block(self, name: str) -> Block:
        """The block of column ``name``."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no column {name!r} in the encoder's schema") from None

    # -- validation ---------------------------------------------------------------------
    def _discrete_codes(self, col: Column, s: pd.Series, verbose: bool) -> np.ndarray:
        """Integer codes (category index) of one discrete column; raises on bad values."""
        cats = col.categories
        numeric_fast = (
            isinstance(cats[0], int)
            and not isinstance(cats[0], bool)
            and (pd.api.types.is_integer_dtype(s.dtype) or pd.api.types.is_float_dtype(s.dtype))
            and not pd.api.types.is_bool_dtype(s.dtype)
            and isinstance(s.dtype, np.dtype)  # not a nullable/extension dtype
        )
        if numeric_fast and len(cats) == 2:
            arr = s.to_numpy()
            pos = arr == cats[1]
            codes = pos.astype(np.int64)
            codes[~(pos | (arr == cats[0]))] = -1
            isna = np.isnan(arr) if arr.dtype.kind == "f" else np.zeros(arr.shape[0], dtype=bool)
        elif numeric_fast:
            arr = s.to_numpy()
            codes = np.full(arr.shape[0], -1, dtype=np.int64)
            for k, c in enumerate(cats):
                codes[arr == c] = k
            isna = np.isnan(arr) if arr.dtype.kind == "f" else np.zeros(arr.shape[0], dtype=bool)
        else:
            codes = pd.Index(cats).get_indexer(s).astype(np.int64)
            isna = s.isna().to_numpy(dtype=bool)
        where = f"column {col.name!r}"
        if isna.any():
            if col.missing is None:
                raise ValueError(
                    f"{where}: {_count(isna, verbose)}missing value(s) (NaN/None) and the schema does not "
                    "declare the column missing (Column.missing=True, or a category that stands for a gap)."
                )
            codes[isna] = cats.index(col.missing)
        bad = codes < 0
        if bad.any():
            listed = ""
            if verbose:
                values = pd.Series(s.to_numpy(dtype=object)[bad]).value_counts(sort=True)
                listed = ": " + ", ".join(f"{v!r} ({n} row{'s' if n > 1 else ''})"
                                          for v, n in list(values.items())[:5])
                listed += f", ... ({len(values) - 5} more distinct)" if len(values) > 5 else ""
            raise ValueError(
                f"{where}: {_count(bad, verbose)}value(s) not in the schema's categories{listed}; "
                f"expected one of {show_values(cats, 8)} ({len(cats)} categories). Values are compared exactly "
                f"(no whitespace stripping, no str/number conversion).{_HINT if not verbose else ''}"
            )
        return codes

    def _continuous_values(self, col: Column, s: pd.Series, clip_counts: dict[str, int],
                           verbose: bool) -> np.ndarray:
        """float64 values of one continuous column, checked against the bounds."""
        where = f"column {col.name!r}"
        if pd.api.types.is_bool_dtype(s.dtype) or not (
            pd.api.types.is_integer_dtype(s.dtype) or pd.api.types.is_float_dtype(s.dtype)
        ):
            obj = s.to_numpy(dtype=object)
            numeric = np.array(
                [
                    isinstance(v, (int, float, np.integer, np.floating))
                    and not isinstance(v, (bool, np.bool_))
                    for v in obj
                ],
                dtype=bool,
            )
            isna = s.isna().to_numpy(dtype=bool)
            bad = ~numeric & ~isna
            if bad.any():
                shown = f", e.g. {show_values(pd.unique(obj[bad]).tolist())}" if verbose else ""
                raise ValueError(
                    f"{where}: {_count(bad, verbose)}non-numeric value(s) in a continuous column{shown}; "
                    f"expected numbers (dtype {s.dtype}).{_HINT if not verbose else ''}"
                )
            values = np.where(isna, np.nan, obj).astype(np.float64)
        else:
            values = s.to_numpy(dtype=np.float64, na_value=np.nan)
        nan = np.isnan(values)
        if nan.any():
            raise ValueError(
                f"{where}: {_count(nan, verbose)}missing value(s) (NaN/None) and the schema does not declare "
                "the column missing (Column.missing=True adds a missingness indicator)."
            )
        inf = np.isinf(values)
        if inf.any():
            raise ValueError(f"{where}: {_count(inf, verbose)}infinite value(s); expected finite numbers.")
        if col.integer:
            fractional = values != np.round(values)
            if fractional.any():
                shown = f", e.g. {show_values(np.unique(values[fractional]).tolist())}" if verbose else ""
                raise ValueError(
                    f"{where}: {_count(fractional, verbose)}non-integer value(s){shown}; the schema declares "
                    f"the column integer (Column.integer).{_HINT if not verbose else ''}"
                )
        low, high = values < col.lower, values > col.upper
        n_out = int(low.sum() + high.sum())
        if n_out and self.on_out_of_bounds == "error":
            shown = f", e.g. {show_values(np.unique(values[low | high]).tolist())}" if verbose else ""
            raise ValueError(
                f"{where}: {_count(low | high, verbose)}value(s) outside the schema bounds "
                f"[{col.lower:g}, {col.upper:g}]{shown}. Fix the data, or widen the column's "
                f"\"lower\"/\"upper\" in the schema to a public range that holds them (in Python, "
                f"TableEncoder(schema, on_out_of_bounds='clip') clips them instead).{_HINT if not verbose else ''}"
            )
        clip_counts[col.name] = n_out
        return np.clip(values, col.lower, col.upper) if n_out else values

    def _validated(self, df: pd.DataFrame, verbose: bool) -> dict[str, np.ndarray]:
        """Per column: int64 codes (discrete) or float64 in-bounds values (continuous)."""
        df = to_model_frame(df, self.schema)
        clip_counts: dict[str, int] = {}
        out = {}
        for col in self.model_schema.columns:
            s = df[col.name]
            if col.kind == "continuous":
                out[col.name] = self._continuous_values(col, s, clip_counts, verbose)
            else:
                out[col.name] = self._discrete_codes(col, s, verbose)
        self.last_clip_counts = clip_counts
        clipped = {k: v for k, v in clip_counts.items() if v}
        if clipped and verbose:
            warnings.warn(
                "TableEncoder clipped values outside the schema bounds: "
                + ", ".join(f"{k!r}: {v}" for k, v in clipped.items())
                + f" (of {len(df)} rows).",
                UserWarning,
                stacklevel=3,
            )
        elif clipped:
            warnings.warn(
                f"TableEncoder clipped values outside the schema bounds in column(s) {show_values(list(clipped), 20)} "
                "to the bounds (on_out_of_bounds='clip'); last_clip_counts holds the counts, verbose=True shows "
                "them.",
                UserWarning,
                stacklevel=3,
            )
        return out

    # -- encode -------------------------------------------------------------------------
    def encode(self, df: pd.DataFrame, verbose: bool = False) -> np.ndarray:
        """Encode a table.

        Args:
            df: A frame with exactly the schema's columns (any order), at least one row.
            verbose: Quote the offending values and count them in errors and in the clip warning
                (for debugging your own data; never on private rows whose messages are shared).

        Returns:
            ``(len(df), width)`` float32: one-hot blocks, 0/1 binary columns, continuous
            columns scaled to [0, 1] by ``(x - lower) / (upper - lower)`` (``scale="log"``:
            ``log1p((x - lower) / u) / log1p((upper - lower) / u)``, ``u = Column.log_unit``).

        Raises:
            TypeError: if ``df`` is not a DataFrame.
            ValueError: naming the column and the rule, on a missing or undeclared column, an
                empty frame, a value outside the categories, a missing value in a column not
                declared missing, a non-numeric or non-finite continuous value, or (policy
                ``"error"``) a value outside the bounds.
        """
        parts = self._validated(df, verbose)
        x = np.zeros((len(df), self.width), dtype=np.float32, order="F")  # contiguous column writes
        rows = np.arange(len(df))
        for b, col in zip(self.blocks, self.model_schema.columns, strict=True):
            v = parts[b.name]
            if b.kind == "categorical":
                x[rows, b.start + v] = 1.0
            elif b.kind == "binary":
                x[:, b.start] = v
            elif col.scale == "log":
                unit = col.log_unit
                x[:, b.start] = np.log1p((v - col.lower) / unit) / np.log1p((col.upper - col.lower) / unit)
            else:
                x[:, b.start] = (v - col.lower) / (col.upper - col.lower)
        return np.ascontiguousarray(x)

    def codes(self, df: pd.DataFrame, verbose: bool = False) -> pd.DataFrame:
        """Integer codes for discrete columns, raw numbers for continuous ones.

        The same checks and out-of-bounds policy as :meth:`encode` apply. Used by the papers'
        random-forest protocol (``docs/metrics.md``).

        Args:
            df: A frame with exactly the schema's columns.
            verbose: As :meth:`encode`.

        Returns:
            A frame in schema order with ``df``'s index: int64 category indices (binary: 0 for the
            first category, 1 for the second) and float64 continuous values (clipped under the
            ``"clip"`` policy).
        """
        parts = self._validated(df, verbose)
        return pd.DataFrame({n: parts[n] for n in self.model_schema.names}, index=df.index)

    # -- decode -------------------------------------------------------------------------
    def decode(self, array: Any, mode: DecodeMode = "argmax", key: jax.Array | None = None) -> pd.DataFrame:
        """Decode model outputs into a table.

        Args:
            array: ``(n, width)`` real array (numpy or JAX), e.g. sigmoid/softmax outputs.
            mode: ``"argmax"``: a categorical block takes its largest output (first on ties), a
                binary column is the second category iff its output is > 0.5 (as in the DP-auto-GAN
                paper's code).
                ``"sample"``: a categorical value is drawn with probability proportional to its
                block's outputs (which must be >= 0 with a positive sum), a binary column is the
                second category with probability equal to its output (which must lie in
                [0, 1]). Continuous columns are decoded the same way in both modes.
            key: ``mode="sample"`` only, and then required: a ``jax.random`` key (typed,
                ``jax.random.key(seed)``, or legacy ``jax.random.PRNGKey(seed)``). There is no
                default randomness. Ignored by ``"argmax"``.

        Returns:
            A frame with the schema's columns in order and a RangeIndex. Discrete columns hold
            the schema's own values (str columns as pandas strings; int columns with the
            smallest signed integer dtype that holds the categories; bool columns as bool).
            Continuous columns are ``x * (upper - lower) + lower`` clipped to the bounds
            (``scale="log"``: ``lower + u * expm1(x * log1p((upper - lower) / u))`` with ``x`` clipped to
            [0, 1]): float64, or for integer columns int64, rounded to the nearest integer (half to
            even). Gaps of columns declared ``missing=True`` come back as ``data.from_model_frame``
            returns them.
            ``decode(encode(df))`` returns every integer exactly when the column's range holds
            fewer than 2**24 values (:data:`EXACT_INTEGER_SPAN`), e.g. UCI Adult's
            capital-gain over [0, 99999].

        Raises:
            ValueError: on a wrong shape, non-finite outputs, an unknown mode, a missing key, or
                (``"sample"``) outputs outside the ranges above, naming the column.
            TypeError: if ``key`` is not a JAX key.
        """
        if mode not in DECODE_MODES:
            raise ValueError(f"mode={mode!r}; expected 'argmax' or 'sample'.")
        x = np.asarray(array)
        if x.ndim != 2 or x.shape[1] != self.width:
            raise ValueError(f"array has shape {x.shape}; expected (n, {self.width}).")
        if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer) or x.dtype == bool):
            raise ValueError(f"array has dtype {x.dtype}; expected real numbers.")
        if not np.issubdtype(x.dtype, np.floating):
            x = x.astype(np.float64)
        finite = np.isfinite(x).all(axis=0)
        if not finite.all():
            bad = [b.name for b in self.blocks if not finite[b.slice].all()]
            raise ValueError(f"array has NaN or infinite outputs in column(s) {show_values(bad, 10)}.")
        n = x.shape[0]
        xt = np.ascontiguousarray(x.T)  # (width, n): each encoded column is contiguous
        uniforms = None
        if mode == "sample":
            check_key(key, "decoding with mode='sample'")
            n_draws = sum(1 for b in self.blocks if b.kind != "continuous")
            # 128 bits from the key seed a numpy PCG64 stream: one fixed-shape JAX call (compiled
            # once per process) however many rows are decoded.
            rng = host_rng(key)
            uniforms = rng.random((n_draws, n))  # in [0, 1); row d for the d-th discrete column
        out: dict[str, Any] = {}
        draw = 0
        for b, col in zip(self.blocks, self.model_schema.columns, strict=True):
            v = xt[b.slice]  # (block width, n)
            if b.kind == "continuous":
                out[b.name] = decode_continuous(v[0], col)
                continue
            if mode == "argmax":
                idx = np.argmax(v, axis=0) if b.kind == "categorical" else (v[0] > 0.5).astype(np.int64)
            else:
                u = uniforms[draw]
                draw += 1
                idx = _sample_block(b, v, u)
            out[b.name] = _values_from_codes(col, idx)
        return from_model_frame(pd.DataFrame(out, index=pd.RangeIndex(n)), self.schema)


def _count(flags: np.ndarray, verbose: bool) -> str:
    """``"<n> "`` (the number of flagged rows) under ``verbose``, else nothing: a count of rows is
    a private number."""
    return f"{int(flags.sum())} " if verbose else ""


_HINT = " Pass verbose=True (dpgen-jax: --verbose) to see the values (for your own data only)."


def decode_continuous(x: np.ndarray, col: Column) -> np.ndarray:
    """A continuous column's values from its scaled outputs ``x`` (any real numbers), inside its
    bounds: int64 for an integer column (:func:`_decode_integer`), float64 otherwise, on the
    column's scale (``lower + x * (upper - lower)``, or ``lower + u * expm1(x * log1p((upper - lower) / u))``
    for ``scale="log"``, ``u = Column.log_unit``)."""
    if col.integer:
        return _decode_integer(x, col)
    if col.scale == "log":
        y = _log_offset(x, col) + col.lower
    else:
        y = x.astype(np.float64) * (col.upper - col.lower) + col.lower
    return np.clip(y, col.lower, col.upper)


def _log_offset(x: np.ndarray, col: Column) -> np.ndarray:
    """``u * expm1(x * log1p((upper - lower) / u))`` in float64 with ``x`` clipped to [0, 1]
    (``upper - lower`` exactly at 1; ``u = Column.log_unit``): the offset from ``lower`` of a
    log-scaled column."""
    t = np.clip(x.astype(np.float64), 0.0, 1.0)
    span, unit = col.upper - col.lower, col.log_unit
    return np.where(t >= 1.0, span, unit * np.expm1(t * np.log1p(span / unit)))  # the upper bound exactly at 1


def _decode_integer(x: np.ndarray, col: Column) -> np.ndarray:
    """int64 values of an integer column from its scaled outputs ``x`` (any real numbers).

    The offset from ``lower`` is rounded in float64 before ``lower`` is added as an integer, so
    no rounding happens at the magnitude of the bounds (up to 2**53); ties go to the even value.
    """
    if col.scale == "log":
        offset = np.minimum(_log_offset(x, col), col.upper - col.lower)
    else:
        offset = np.clip(x.astype(np.float64), 0.0, 1.0) * (col.upper - col.lower)
    base = np.floor(offset)
    frac = offset - base
    base_int = base.astype(np.int64)
    lower = int(col.lower)
    odd_value = (base_int % 2 == 1) != (lower % 2 == 1)
    up = (frac > 0.5) | ((frac == 0.5) & odd_value)
    return base_int + up + np.int64(lower)


def _sample_block(b: Block, v: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of one discrete block's codes; ``v`` is (block width, n), ``u`` is (n,)."""
    where = f"column {b.name!r}"
    if b.kind == "binary":
        p = v[0]
        if (p < 0).any() or (p > 1).any():
            raise ValueError(
                f"{where}: mode='sample' needs binary outputs in [0, 1] (probabilities), got values in "
                f"[{p.min():g}, {p.max():g}]; apply a sigmoid first."
            )
        return (u < p).astype(np.int64)
    if (v < 0).any():
        raise ValueError(
            f"{where}: mode='sample' draws in proportion to the block's outputs, which must be >= 0; "
            f"got a minimum of {v.min():g}. Apply a softmax or sigmoid first."
        )
    cum = np.cumsum(v, axis=0, dtype=np.float64)
    total = cum[-1]
    if (total <= 0).any():
        raise ValueError(
            f"{where}: mode='sample' needs a positive sum of outputs per row; "
            f"{int((total <= 0).sum())} row(s) are all zero."
        )
    idx = (cum <= u * total).sum(axis=0)
    return np.minimum(idx, b.width - 1).astype(np.int64)


def _values_from_codes(col: Column, idx: np.ndarray) -> Any:
    """Map category indices back to the schema's values, with a dtype that fits them."""
    cats = col.categories
    if isinstance(cats[0], bool):
        return np.asarray(cats, dtype=bool)[idx]
    if isinstance(cats[0], int):
        return np.asarray(cats, dtype=_int_dtype(cats))[idx]
    return np.asarray(cats, dtype=object)[idx]  # pandas infers its default string dtype
