"""Tables and schemas in files: the one reader of CSV files and of public metadata.

* :func:`read_csv` / :func:`write_csv`: a CSV read with the dtypes its schema declares and checked
  against it, so integer columns and categories of str, int or bool survive a write and a read.
* :func:`load_schema`: a schema from its JSON file.
* :func:`read_metadata_yaml` and :func:`draft_schema`: public facts from a SmartNoise SQL metadata
  file, and a draft schema from them and/or the data (marked ``data-derived`` when any fact was
  read from the rows), with the advice of a review (:class:`Draft`).

Every problem a user can fix (a missing file, an unreadable CSV, a value the schema does not
allow) raises :class:`dpgen_jax._validate.UsageError` (a ``ValueError``) naming the file and column;
the command line prints it as one line; it names the rule, not the offending value, unless the
caller passes ``verbose=True``. ``docs/cli.md`` describes the formats.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from dpgen_jax._validate import UsageError, existing_file
from dpgen_jax.data._check import check_frame
from dpgen_jax.data._encoder import TableEncoder
from dpgen_jax.data._infer import advice, coded, gap_columns, infer_schema, is_number, looks_like_id
from dpgen_jax.data._schema import Column, DataDerivedSchemaWarning, Schema

DRAFT_NOTE_PREFIX = "DRAFT"
SMARTNOISE_TYPES = ("boolean", "string", "int", "float")
# SmartNoise SQL table options: those about its query engine are accepted and not used here
# (docs/cli.md); max_ids and rows are reported by the draft; notes is our extension.
_TABLE_OPTIONS = ("max_ids", "row_privacy", "rows", "sample_max_ids", "censor_dims", "clamp_counts",
                  "clamp_columns", "use_dpsu", "notes")
_SMARTNOISE_COLUMN_KEYS = ("name", "type", "lower", "upper", "nullable", "missing_value",
                           "private_id", "sensitivity", "categories", "label", "atoms")


def load_schema(path: os.PathLike | str) -> Schema:
    """The schema in a JSON file written by ``Schema.to_json`` (or by ``schema draft``).

    Raises:
        UsageError: no file, invalid JSON or an invalid schema (the message names the file).
    """

    p = existing_file(path, "schema file")
    try:
        return Schema.from_json(p.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{p}: not valid JSON ({exc}).") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{p}: not a valid schema: {exc}") from None


def _parse_bool(s: pd.Series, where: str, verbose: bool = False):
    lowered = s.str.lower()
    bad = ~lowered.isin(("true", "false", ""))
    if bad.any():
        shown = repr(s[bad].iloc[0]) if verbose else "a value other than True/False"
        raise UsageError(f"{where} holds {shown}; expected True or False (a bool column "
                         "of the schema).")
    return lowered.map({"true": True, "false": False, "": None})


def _parse_numbers(s: pd.Series, where: str, integer: bool, verbose: bool = False):
    blank = s == ""
    try:
        values = pd.to_numeric(s.mask(blank), errors="raise")
    except (ValueError, TypeError) as exc:
        bad = [v for v in s[~blank] if not is_number(v)]
        if not verbose:
            shown = "text that is not a number"
        else:
            shown = repr(bad[0]) if bad else f"a value it cannot parse ({exc})"
        raise UsageError(f"{where} holds {shown}; expected "
                         f"{'integers' if integer else 'numbers'}.") from None
    if integer and not blank.any() and values.dtype.kind == "f":
        whole = values == values.round()
        if whole.all():
            values = values.astype("int64")
    return values


_INTEGRAL_FLOAT = re.compile(r"(-?(?:0|[1-9][0-9]*))\.0+")


def _integral_labels(s: pd.Series, col: Column) -> pd.Series:
    """A str-category column with each cell that is not a category but an integral float as pandas
    writes it (``1.0``, ``-3.00``) replaced by the category that is its whole number (``"1"``), when
    there is one: a 0/1 or coded column with gaps is a float column in pandas and comes out of
    ``to_csv`` as ``1.0``/``0.0``/empty. Only exact integral floats map; ``1.5`` or ``1.0`` without
    a category ``"1"`` stays as it is, for the encoder to refuse naming the column."""
    cats = set(col.categories)
    matched = s.str.fullmatch(_INTEGRAL_FLOAT.pattern) & ~s.isin(cats)
    if not matched.any():
        return s
    whole = s[matched].str.extract(_INTEGRAL_FLOAT, expand=False)
    return s.mask(matched & s.index.isin(whole.index[whole.isin(cats)]), whole)


def _nullable(values: pd.Series, col: Column) -> Any:
    """A column declared ``missing=True`` in the dtype ``data.from_model_frame`` gives it: ``Int64``
    for integer values and int categories, ``boolean`` for bool categories (float and str columns
    keep float64 / object with NaN). Values the dtype cannot hold are left for the encoder to refuse."""
    if col.kind == "continuous" and not col.integer:
        return values
    if col.kind != "continuous" and isinstance(col.categories[0], bool):
        return pd.array(list(values), dtype="boolean")
    if col.kind != "continuous" and isinstance(col.categories[0], str):
        return values
    present = values.dropna()
    return values.astype("Int64") if (present == present.round()).all() else values


def read_csv(path: os.PathLike | str, schema: Schema, name: str | None = None,
             verbose: bool = False) -> pd.DataFrame:
    """A CSV file read with the dtypes ``schema`` declares, checked against its columns.

    Every cell is first read as the exact text in the file (no whitespace stripping, no guessing
    of missing-value markers), then converted column by column:

    * discrete columns with ``str`` categories keep the text (so ``"10"`` stays a string), except
      that an integral float as pandas writes it matches the category of its whole number
      (``1.0`` reads as ``"1"`` when ``"1"`` is a category and ``"1.0"`` is not; ``1.5`` is refused
      naming the column); ``int`` categories are parsed as integers (``1.0`` as ``1``), ``bool``
      categories from ``True``/``False``
      (any case); an empty cell is a missing value (unless ``""`` is itself a category), which
      encodes as the column's ``missing`` category if it names one;
    * continuous columns are parsed as numbers (int64 for integer columns); an empty cell is a
      missing value;
    * a column (of any kind) declared ``missing=True``: an empty cell is a gap, and the column
      has the dtype ``TableEncoder.decode`` gives it: nullable ``Int64`` (integer values, int
      categories) or ``boolean`` (bool categories) with ``pd.NA``, float64 or object (str
      categories) with NaN. :func:`write_csv` writes gaps as empty cells, so a read, a write and a
      read give the same frame.

    The values are then checked as the library reads them (``TableEncoder.encode``): unknown
    categories, values out of bounds and missing values in a column not declared missing are
    errors naming the file, the column and the rule.

    Args:
        path: The CSV file (header row with the column names, comma-separated).
        schema: The public schema of the table.
        name: What to call the file in messages (default: its path).
        verbose: Quote the offending value (and counts) in errors, and pandas' own message with its
            line number for a file it cannot parse, for debugging your own data.

    Raises:
        UsageError: no file, unreadable CSV, columns that differ from the schema's, a value that
            cannot be parsed as its column's type or is not allowed by the schema, or a str column
            declared ``missing=True`` with ``""`` among its categories (an empty cell would be
            ambiguous).
    """

    p = existing_file(path, "data file")
    label = name or str(p)
    raw = _read_raw(p, label, verbose)
    try:
        check_frame(raw, schema, name=label)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = {}
    for col in schema.columns:
        s = raw[col.name].astype(object)
        where = f"{label}: column {col.name!r}"
        if col.kind == "continuous":
            values = _parse_numbers(s, where, col.integer, verbose)
            out[col.name] = _nullable(values, col) if col.missing is True else values
            continue
        kind = type(col.categories[0])
        if kind is str:
            if col.missing is True and "" in col.categories:
                raise UsageError(f"{where}: the column is declared missing=True and has the category \"\"; "
                                 "in a CSV file an empty cell would be both. Rename that category.")
            s = _integral_labels(s, col)
            out[col.name] = s if "" in col.categories else s.mask(s == "")
        elif kind is bool:
            values = _parse_bool(s, where, verbose)
            out[col.name] = _nullable(values, col) if col.missing is True else values
        else:
            values = _parse_numbers(s, where, True, verbose)
            if values.dtype.kind == "f" and not (values.dropna() == values.dropna().round()).all():
                raise UsageError(f"{where} holds non-integer values; its categories are integers.")
            out[col.name] = _nullable(values, col) if col.missing is True else values
    frame = pd.DataFrame(out, columns=schema.names)
    try:
        TableEncoder(schema).encode(frame, verbose)  # every value checked here, named by file and column
    except ValueError as exc:
        raise UsageError(f"{label}: {exc}") from None
    return frame


def write_csv(df: pd.DataFrame, path: pathlib.Path) -> None:
    """Writes ``df`` without its index; floats at full precision and gaps (NaN, None, ``pd.NA``)
    as empty cells, so :func:`read_csv` reads the same values and gaps back."""
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)


# ----------------------------------------------------------------------------- SmartNoise metadata


def read_metadata_yaml(path: os.PathLike | str, table: str | None = None
                       ) -> tuple[str, dict[str, Any], dict[str, dict[str, Any]]]:
    """One table of a SmartNoise SQL metadata file: ``(table name, table options, columns)``.

    The layout is SmartNoise's (``docs/cli.md`` cites it): a collection, then schemas, then
    tables; a table's scalar keys are options (``max_ids``, ``row_privacy``, ``rows``, ...) and
    its mapping keys are columns with ``type`` and, for numbers, ``lower``/``upper``. Needs PyYAML
    (the ``yaml`` extra).

    Args:
        path: The YAML file.
        table: ``"schema.table"`` or ``"table"``; None: the file's only table.

    Raises:
        UsageError: no file, no PyYAML, invalid YAML, not that layout, or an ambiguous table.
    """
    p = existing_file(path, "metadata file")
    try:
        import yaml
    except ImportError:
        raise UsageError("--from-yaml needs PyYAML: pip install 'dpgen-jax[yaml]'.") from None
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"{p}: not valid YAML ({exc}).".replace("\n", " ")) from None

    def mapping(node, where):
        if not isinstance(node, dict) or not node:
            raise UsageError(f"{p}: {where} must be a non-empty mapping (SmartNoise layout: "
                             "collection -> schema -> table -> columns).")
        return node

    tables = {}
    for collection, schemas in mapping(doc, "the file").items():
        for schema_name, schema_tables in mapping(schemas, f"collection {collection!r}").items():
            for table_name, body in mapping(schema_tables, f"schema {schema_name!r}").items():
                full = f"{schema_name}.{table_name}" if schema_name else str(table_name)
                tables[full] = (str(table_name), mapping(body, f"table {full!r}"))
    if table is None:
        if len(tables) != 1:
            raise UsageError(f"{p} describes {len(tables)} tables {sorted(tables)}; choose one with "
                             "--table.")
        (name, body), = tables.values()
    else:
        hits = [v for k, v in tables.items() if table in (k, v[0])]
        if len(hits) != 1:
            raise UsageError(f"--table {table!r} matches {len(hits)} tables of {p}; expected one of "
                             f"{sorted(tables)}.")
        (name, body), = hits
    options, columns = {}, {}
    for key, value in body.items():
        if isinstance(value, dict):
            columns[str(key)] = value
        elif key in _TABLE_OPTIONS:
            options[key] = value
        else:
            raise UsageError(f"{p}: table {name!r} has an unknown option {key!r}; expected columns "
                             f"(mappings) or one of {list(_TABLE_OPTIONS)}.")
    notes = options.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise UsageError(f"{p}: table {name!r}: notes must be a list of sentences.")
    if not columns:
        raise UsageError(f"{p}: table {name!r} declares no columns.")
    return name, options, columns


def _metadata_column(name: str, meta: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """The schema column (as a dict) a SmartNoise column declares, or None when its facts are
    incomplete (no categories for a string column, no bounds for a number)."""
    unknown = sorted(set(meta) - set(_SMARTNOISE_COLUMN_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {unknown}; expected some of "
                         f"{list(_SMARTNOISE_COLUMN_KEYS)}.")
    if meta.get("private_id"):
        raise UsageError(f"{where} is a private identifier (private_id: true); drop it from the "
                         "table: a synthesizer must not learn identifiers.")
    kind = meta.get("type")
    nullable = meta.get("nullable", False)
    if not isinstance(nullable, bool):
        raise UsageError(f"{where}: nullable must be true or false, got {nullable!r}.")
    if kind not in SMARTNOISE_TYPES:
        raise UsageError(f"{where}: type {kind!r} is not supported; expected one of "
                         f"{list(SMARTNOISE_TYPES)} (drop datetime and unknown columns from the table).")
    out: dict[str, Any] = {"name": name, "label": bool(meta.get("label", False))}
    if nullable and meta.get("missing_value") is None:
        out["missing"] = True
    has_bounds = [k for k in ("lower", "upper") if meta.get(k) is not None]
    cats = meta.get("categories")
    missing = meta.get("missing_value")
    if (has_bounds or meta.get("atoms")) and (kind in ("boolean", "string") or cats is not None):
        raise UsageError(f"{where}: lower/upper and atoms apply to int and float columns without categories.")
    if kind == "float" and cats is not None:
        raise UsageError(f"{where}: a float column takes bounds, not categories.")
    if kind == "boolean":
        cats = [False, True]
    if kind in ("int", "float") and cats is None:
        if missing is not None:
            raise UsageError(f"{where}: missing_value is supported for discrete columns only (a "
                             "continuous column has no value to spare: declare nullable: true).")
        if len(has_bounds) == 1:
            raise UsageError(f"{where}: give both lower and upper.")
        if not has_bounds:
            return None
        return {**out, "kind": "continuous", "lower": meta["lower"], "upper": meta["upper"],
                "integer": kind == "int", **({"atoms": meta["atoms"]} if meta.get("atoms") else {})}
    if cats is None:
        return None
    if not isinstance(cats, list) or not cats:
        raise UsageError(f"{where}: categories must be a non-empty list.")
    if kind == "string":
        cats = [str(c) for c in cats]
        missing = None if missing is None else str(missing)
    if missing is not None and missing not in cats:
        cats = [*cats, missing]
    if missing is None:
        return {**out, "kind": "binary" if len(cats) == 2 else "categorical", "categories": cats}
    return {**out, "kind": "binary" if len(cats) == 2 else "categorical", "categories": cats,
            "missing": missing}


# The rules pandas' parse errors name, by a piece of their message; the message itself holds a line
# number, a field count or a byte of the private file, so it is quoted only under verbose=True.
_PARSE_RULES = (("fields in line", "a row has a different number of fields than the header"),
                ("EOF inside string", "a quoted field is not closed before the end of the file"),
                ("EOF in", "a quoted field is not closed before the end of the file"),
                ("No columns to parse", "the file is empty (no header row)"))


def _read_raw(path: pathlib.Path, label: str, verbose: bool) -> pd.DataFrame:
    """The CSV's cells as str (no NA parsing). A file pandas cannot parse raises a
    :class:`UsageError` naming the file and the rule broken; pandas' own message (a line number, a
    count of fields, a byte offset: numbers of the private file) only under ``verbose``."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        if verbose:
            detail = str(exc).strip()
        elif isinstance(exc, UnicodeDecodeError):
            detail = f"the file is not {exc.encoding} text"
        else:
            detail = next((rule for piece, rule in _PARSE_RULES if piece in str(exc)),
                          f"pandas raised {type(exc).__name__}")
        hint = "" if verbose else (" Pass verbose=True (dpgen-jax: --verbose) to see where (for your own "
                                   "data only: the position is private).")
        raise UsageError(f"{label}: not a readable CSV file ({detail}).{hint}".replace("\n", " ")) from None


def _check_header(names: Sequence[str], label: str) -> None:
    """Refuses a header row that looks like data: every name a number, or names repeated (pandas
    renames a repeated ``x`` to ``x.1``). A file without a header row would otherwise have its
    first private row turned into column names, and that row dropped. The names are not quoted
    (they may be a private row)."""
    names = [str(n) for n in names]
    numeric = all(is_number(n) for n in names)
    present = set(names)
    repeated = sum(1 for n in names if "." in n and n.rsplit(".", 1)[1].isdigit()
                   and n.rsplit(".", 1)[0] in present)
    if numeric or repeated:
        why = (f"every one of its {len(names)} column names is a number" if numeric else
               f"{repeated} of its {len(names)} column names repeat another's")
        raise UsageError(f"{label}: the first row does not look like a header row ({why}); the first "
                         "row of the CSV must hold the column names. Add a header row (a file without "
                         "one would have its first record read as names and dropped).")


_CANONICAL_INT = r"-?(0|[1-9][0-9]*)"
_LEADING_ZERO = r"-?0[0-9]+"  # a code such as a ZIP code, not a number


def _read_draft_frame(path: pathlib.Path, string_columns: Sequence[str], verbose: bool = False) -> pd.DataFrame:
    """The CSV typed for drafting: a column is bool when every cell is True/False, int when every
    cell is a canonical integer, float when every cell is a number and none has a leading zero
    (``"01"`` is a code), else str (always str for ``string_columns``). Empty cells are gaps (and
    make a bool column ``boolean``, an int column ``Int64``, with ``pd.NA``)."""
    raw = _read_raw(path, str(path), verbose)
    _check_header(raw.columns, str(path))
    out = {}
    for name in raw.columns:
        s = raw[name].astype(object)
        blank = s == ""
        filled = s[~blank]
        typed = s.mask(blank)
        if name not in string_columns and len(filled):
            if filled.isin(("True", "False")).all():
                typed = typed.map({"True": True, "False": False}, na_action="ignore")
                typed = typed.astype(bool if not blank.any() else "boolean")
            elif filled.str.fullmatch(_CANONICAL_INT).all():
                typed = pd.to_numeric(typed)
                typed = typed if not blank.any() else pd.Series(
                    pd.array([None if b else int(v) for b, v in zip(blank, s)], dtype="Int64"), index=s.index)
            elif not filled.str.fullmatch(_LEADING_ZERO).any() and all(map(is_number, filled)):
                typed = pd.to_numeric(typed).astype(float)
        out[name] = typed
    return pd.DataFrame(out, columns=raw.columns)


@dataclasses.dataclass(frozen=True)
class Draft:
    """What ``schema draft`` produced. It unpacks as ``schema, drafted, rows`` (as before the
    ``advice`` field existed).

    Attributes:
        schema: the schema.
        drafted: the columns whose facts were read from the data (empty: all public); a column of
            the metadata file whose data has gaps it does not declare (``nullable``) is one.
        rows: the number of rows the metadata file declares (``rows``), if any.
        advice: sentences for the person who reviews the draft, also at the end of the schema's
            notes: every column with gaps, columns that look like identifiers (drop them) with a
            sentence on the unit of privacy, columns set to ``scale="log"``, columns given atoms, numeric
            columns drafted as codes. Column names only,
            no values or counts.
    """

    schema: Schema
    drafted: list[str]
    rows: int | None
    advice: tuple[str, ...] = ()

    def __iter__(self):
        return iter((self.schema, self.drafted, self.rows))


def draft_schema(data_path: os.PathLike | str | None, *, yaml_path: os.PathLike | str | None = None,
                 table: str | None = None, label: str | None = None, verbose: bool = False) -> Draft:
    """A draft schema from a metadata file of public facts and/or the data.

    Facts declared in the metadata file (SmartNoise layout; ``nullable: true`` declares
    ``missing=True``) are public. Every other fact is read from the data with
    :func:`dpgen_jax.infer_schema`; if there is any, the schema is marked ``data-derived`` and its
    first note, starting with ``DRAFT``, says which columns. Gaps (empty cells) are accepted in every
    column: a column with gaps gets ``missing=True`` (a declared column whose metadata does not say
    ``nullable`` counts as drafted). :attr:`Draft.advice` lists every column with gaps, the columns
    that look like identifiers and the columns set to ``scale="log"``; it never advises filling gaps.

    ``verbose=True`` quotes pandas' message (with its line number) when the data file cannot be
    parsed, as in :func:`read_csv`.

    Raises:
        UsageError: neither input, an unreadable data file, a column of the metadata file missing
            from the data, facts missing with no data to draft them from, or an unknown label.
    """

    if data_path is None and yaml_path is None:
        raise UsageError("schema draft needs a data file, --from-yaml, or both.")
    declared: dict[str, dict | None] = {}
    types: dict[str, str] = {}
    notes: list[str] = []
    options: dict[str, Any] = {}
    if yaml_path is not None:
        _, options, columns = read_metadata_yaml(yaml_path, table)
        notes.extend(options.get("notes", []))
        for name, meta in columns.items():
            declared[name] = _metadata_column(name, meta, f"{yaml_path}: column {name!r}")
            types[name] = meta["type"]
        if isinstance(options.get("max_ids"), int) and options["max_ids"] > 1:
            notes.append(f"The metadata allows one person in up to {options['max_ids']} rows "
                         "(max_ids); dpgen_jax protects one row, so a person's protection is that "
                         f"of a group of {options['max_ids']} rows.")
    frame = None
    if data_path is not None:
        p = existing_file(data_path, "data file")
        frame = _read_draft_frame(p, [n for n, t in types.items() if t == "string"], verbose)
        absent = [n for n in declared if n not in frame.columns]
        if absent:
            raise UsageError(f"{yaml_path} declares column(s) {absent} that {p} does not have.")
        names = [str(c) for c in frame.columns]
    else:
        names = list(declared)
    to_draft = [n for n in names if declared.get(n) is None]
    if to_draft and frame is None:
        raise UsageError(f"{yaml_path}: column(s) {to_draft} lack public facts (categories for "
                         "strings, lower and upper for numbers); add them or give the data file "
                         "to draft them from.")
    gaps = gap_columns(frame) if frame is not None else []
    undeclared_gaps = [n for n in gaps if declared.get(n) is not None and declared[n].get("missing") is None]
    drafted: dict[str, dict] = {}
    if to_draft:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataDerivedSchemaWarning)
            try:
                inferred = infer_schema(frame[to_draft])
            except ValueError as exc:
                raise UsageError(f"{data_path}: {exc}") from None
        drafted = {c.name: c.to_dict() for c in inferred.columns}
    if label is not None and label not in names:
        raise UsageError(f"--label {label!r} is not a column; the columns are {names}.")
    cols = []
    for n in names:
        d = dict(declared.get(n) or drafted[n])
        if n in undeclared_gaps:
            d["missing"] = True
        if label is not None:
            d["label"] = n == label
        cols.append(d)
    public = [n for n in names if n not in drafted]
    if drafted or undeclared_gaps:
        source = "data-derived"
        if drafted:
            notes.insert(0, f"{DRAFT_NOTE_PREFIX} by `dpgen-jax schema draft`: the kinds, categories "
                            f"and bounds of column(s) {to_draft} were read from the rows of {data_path} "
                            "(not differentially private). Review every column, replace those facts by "
                            'public knowledge, then set "source" to "public" and rewrite these notes.')
        else:
            notes.insert(0, f"{DRAFT_NOTE_PREFIX} by `dpgen-jax schema draft`: the metadata file "
                            f"{yaml_path} declares every column, but the rows of {data_path} have gaps "
                            "it does not declare. Review, then set \"source\" to \"public\" and rewrite "
                            "these notes.")
        if public:
            notes.insert(1, f"Column(s) {public} were declared in the public metadata file "
                            f"{yaml_path}.")
        if undeclared_gaps:
            notes.insert(2 if public else 1,
                         f"That column(s) {undeclared_gaps} may be missing was read from the rows of "
                         f"{data_path} (the metadata file does not declare them nullable).")
    else:
        source = "public"
        notes.insert(0, f"Declared in the metadata file {yaml_path} (SmartNoise layout): column "
                        "kinds, category lists and bounds are public knowledge, not read from the "
                        "private rows.")
    if frame is not None:
        ids = [n for n in names if looks_like_id(n, frame[n])]
    else:
        ids = [n for n in names if looks_like_id(n, pd.Series([], dtype=object))]
    logs = [n for n in to_draft if drafted[n].get("scale") == "log"]
    atoms = [n for n in to_draft if drafted[n].get("atoms")]
    review = tuple(advice(gaps, ids, logs, atoms, [n for n in to_draft if coded(frame[n])]))
    notes.extend(review)
    try:
        schema = Schema.from_dict({"columns": cols, "source": source, "notes": notes})
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{yaml_path or data_path}: {exc}") from None
    rows = options.get("rows")
    return Draft(schema, [*to_draft, *undeclared_gaps], rows if isinstance(rows, int) and not isinstance(rows, bool)
                 else None, review)
