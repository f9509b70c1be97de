"""The ``dpgen-jax`` command line: from a CSV to a synthetic CSV and a privacy report.

Subcommands (``dpgen-jax SUBCOMMAND --help`` for each; ``docs/cli.md`` for the whole story)::

    dpgen-jax schema draft [DATA] [--from-yaml META [--table T]] [--label L] -o schema.json
    dpgen-jax fit --method NAME --data data.csv --schema schema.json (--epsilon E | --preset P)
                  [--delta D] [--num-records N] [--seed S] [--set FIELD=VALUE ...] --out model.npz
    dpgen-jax sample model.npz -n N -o synthetic.csv [--seed S] [--mode argmax|sample]
    dpgen-jax evaluate --real train.csv --test test.csv --synthetic synthetic.csv
                       --schema schema.json [--label L] --out DIR
    dpgen-jax privacy --method NAME --num-records N (--epsilon E | --preset P) [--schema S]
    dpgen-jax methods

Every CSV is read with the dtypes its schema declares (:func:`read_csv`), so integer columns and
categories of str, int or bool survive a write and a read. A mistake the user can fix (a missing
file, a frame that does not match its schema, an unreachable epsilon, an unknown method, a bad
flag) prints one line ``dpgen-jax: error: ...`` and exits with status 2, without a traceback
(set ``DPGEN_TRACEBACK=1`` to see one).

Privacy: ``schema draft`` reads facts from the data and marks the schema ``data-derived`` with a
loud warning; ``fit`` refuses such a schema unless ``--allow-data-derived-schema`` is given, and
the report then says the result is not end-to-end differentially private. ``evaluate`` reads the
real rows and is not private.

This module is the ``cli`` layer: it may import every other layer; nothing imports it except
the experiments (which share :func:`config_overrides`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import pathlib
import sys
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # the heavy layers are imported by the commands that need them
    import pandas as pd

    from dpgen_jax import data as data_lib

PROG = "dpgen-jax"
DRAFT_NOTE_PREFIX = "DRAFT"
SMARTNOISE_TYPES = ("boolean", "string", "int", "float")
# SmartNoise SQL table options: those about its query engine are accepted and not used here
# (docs/cli.md); max_ids and rows are reported by the draft; notes is our extension.
_TABLE_OPTIONS = ("max_ids", "row_privacy", "rows", "sample_max_ids", "censor_dims", "clamp_counts",
                  "clamp_columns", "use_dpsu", "notes")
_SMARTNOISE_COLUMN_KEYS = ("name", "type", "lower", "upper", "nullable", "missing_value",
                           "private_id", "sensitivity", "categories", "label")


class UsageError(Exception):
    """A mistake the user can fix; printed as one line, exit status 2."""


# ----------------------------------------------------------------------------- reading and writing


def _existing_file(path: os.PathLike | str, what: str) -> pathlib.Path:
    p = pathlib.Path(path)
    if not p.exists():
        raise UsageError(f"{what} {str(p)!r} not found.")
    if not p.is_file():
        raise UsageError(f"{what} {str(p)!r} is not a file.")
    return p


def _new_file(path: os.PathLike | str, force: bool, what: str) -> pathlib.Path:
    p = pathlib.Path(path)
    if p.exists() and not force:
        raise UsageError(f"{what} {str(p)!r} exists; pass --force to replace it.")
    if p.exists() and not p.is_file():
        raise UsageError(f"{what} {str(p)!r} is not a file.")
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def load_schema(path: os.PathLike | str) -> data_lib.Schema:
    """The schema in a JSON file written by ``Schema.to_json`` (or by ``schema draft``).

    Raises:
        UsageError: no file, invalid JSON or an invalid schema (the message names the file).
    """
    from dpgen_jax import data

    p = _existing_file(path, "schema file")
    try:
        return data.Schema.from_json(p.read_text())
    except json.JSONDecodeError as exc:
        raise UsageError(f"{p}: not valid JSON ({exc}).") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise UsageError(f"{p}: not a valid schema: {exc}") from None


def _parse_bool(s: pd.Series, where: str):
    lowered = s.str.lower()
    bad = ~lowered.isin(("true", "false", ""))
    if bad.any():
        raise UsageError(f"{where} holds {s[bad].iloc[0]!r}; expected True or False (a bool column "
                         "of the schema).")
    return lowered.map({"true": True, "false": False, "": None})


def _parse_numbers(s: pd.Series, where: str, integer: bool):
    import pandas as pd

    blank = s == ""
    try:
        values = pd.to_numeric(s.mask(blank), errors="raise")
    except (ValueError, TypeError) as exc:
        bad = [v for v in s[~blank] if _not_number(v)]
        shown = repr(bad[0]) if bad else f"a value it cannot parse ({exc})"
        raise UsageError(f"{where} holds {shown}; expected "
                         f"{'integers' if integer else 'numbers'}.") from None
    if integer and not blank.any() and values.dtype.kind == "f":
        whole = values == values.round()
        if whole.all():
            values = values.astype("int64")
    return values


def _not_number(v: str) -> bool:
    try:
        float(v)
        return False
    except ValueError:
        return True


def read_csv(path: os.PathLike | str, schema: data_lib.Schema, name: str | None = None) -> pd.DataFrame:
    """A CSV file read with the dtypes ``schema`` declares, checked against its columns.

    Every cell is first read as the exact text in the file (no whitespace stripping, no guessing
    of missing-value markers), then converted column by column:

    * discrete columns with ``str`` categories keep the text (so ``"10"`` stays a string);
      ``int`` categories are parsed as integers, ``bool`` categories from ``True``/``False``
      (any case); an empty cell is a missing value (unless ``""`` is itself a category), which
      encodes as the column's ``missing`` category if it has one;
    * continuous columns are parsed as numbers (int64 for integer columns).

    The values are then checked as the library reads them (``TableEncoder.encode``): unknown
    categories, values out of bounds and missing values without a missing category are errors
    naming the file and the column.

    Args:
        path: The CSV file (header row with the column names, comma-separated).
        schema: The public schema of the table.
        name: What to call the file in messages (default: its path).

    Raises:
        UsageError: no file, unreadable CSV, columns that differ from the schema's, or a value
            that cannot be parsed as its column's type or is not allowed by the schema.
    """
    import pandas as pd

    from dpgen_jax import data

    p = _existing_file(path, "data file")
    label = name or str(p)
    try:
        raw = pd.read_csv(p, dtype=str, keep_default_na=False, na_filter=False)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UsageError(f"{label}: not a readable CSV file ({exc}).".replace("\n", " ")) from None
    try:
        data.check_frame(raw, schema, name=label)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = {}
    for col in schema.columns:
        s = raw[col.name].astype(object)
        where = f"{label}: column {col.name!r}"
        if col.kind == "continuous":
            out[col.name] = _parse_numbers(s, where, col.integer)
            continue
        kind = type(col.categories[0])
        if kind is str:
            out[col.name] = s if "" in col.categories else s.mask(s == "")
        elif kind is bool:
            out[col.name] = _parse_bool(s, where)
        else:
            values = _parse_numbers(s, where, integer=True)
            if values.dtype.kind == "f" and not (values.dropna() == values.dropna().round()).all():
                raise UsageError(f"{where} holds non-integer values; its categories are integers.")
            out[col.name] = values
    frame = pd.DataFrame(out, columns=schema.names)
    try:
        data.TableEncoder(schema).encode(frame)  # every value checked here, named by file and column
    except ValueError as exc:
        raise UsageError(f"{label}: {exc}") from None
    return frame


def write_csv(df: pd.DataFrame, path: pathlib.Path) -> None:
    """Writes ``df`` without its index; floats at full precision, so :func:`read_csv` reads the
    same values back."""
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
    p = _existing_file(path, "metadata file")
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
    if kind not in SMARTNOISE_TYPES:
        raise UsageError(f"{where}: type {kind!r} is not supported; expected one of "
                         f"{list(SMARTNOISE_TYPES)} (drop datetime and unknown columns from the table).")
    out: dict[str, Any] = {"name": name, "label": bool(meta.get("label", False))}
    has_bounds = [k for k in ("lower", "upper") if meta.get(k) is not None]
    cats = meta.get("categories")
    missing = meta.get("missing_value")
    if has_bounds and (kind in ("boolean", "string") or cats is not None):
        raise UsageError(f"{where}: lower/upper apply to int and float columns without categories.")
    if kind == "float" and cats is not None:
        raise UsageError(f"{where}: a float column takes bounds, not categories.")
    if kind == "boolean":
        cats = [False, True]
    if kind in ("int", "float") and cats is None:
        if missing is not None:
            raise UsageError(f"{where}: missing_value is supported for discrete columns only (a "
                             "continuous column cannot hold a missing value).")
        if len(has_bounds) == 1:
            raise UsageError(f"{where}: give both lower and upper.")
        if not has_bounds:
            return None
        return {**out, "kind": "continuous", "lower": meta["lower"], "upper": meta["upper"],
                "integer": kind == "int"}
    if cats is None:
        return None
    if not isinstance(cats, list) or not cats:
        raise UsageError(f"{where}: categories must be a non-empty list.")
    if kind == "string":
        cats = [str(c) for c in cats]
        missing = None if missing is None else str(missing)
    if missing is not None and missing not in cats:
        cats = [*cats, missing]
    return {**out, "kind": "binary" if len(cats) == 2 else "categorical", "categories": cats,
            "missing": missing}


_CANONICAL_INT = r"-?(0|[1-9][0-9]*)"
_LEADING_ZERO = r"-?0[0-9]+"  # a code such as a ZIP code, not a number


def _read_draft_frame(path: pathlib.Path, string_columns: Sequence[str]) -> pd.DataFrame:
    """The CSV typed for drafting: a column is bool when every cell is True/False, int when every
    cell is a canonical integer, float when every cell is a number and none has a leading zero
    (``"01"`` is a code), else str (always str for ``string_columns``). Empty cells are missing."""
    import pandas as pd

    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UsageError(f"{path}: not a readable CSV file ({exc}).".replace("\n", " ")) from None
    out = {}
    for name in raw.columns:
        s = raw[name].astype(object)
        blank = s == ""
        filled = s[~blank]
        typed = s.mask(blank)
        if name not in string_columns and len(filled):
            if filled.isin(("True", "False")).all():
                typed = typed.map({"True": True, "False": False}, na_action="ignore")
                typed = typed.astype(bool) if not blank.any() else typed
            elif filled.str.fullmatch(_CANONICAL_INT).all():
                typed = pd.to_numeric(typed)
            elif not (filled.str.fullmatch(_LEADING_ZERO).any() or any(map(_not_number, filled))):
                typed = pd.to_numeric(typed).astype(float)
        out[name] = typed
    return pd.DataFrame(out, columns=raw.columns)


class Draft(NamedTuple):
    """What ``schema draft`` produced.

    Attributes:
        schema: the schema.
        drafted: the columns whose facts were read from the data (empty: all public).
        rows: the number of rows the metadata file declares (``rows``), if any.
    """

    schema: data_lib.Schema
    drafted: list[str]
    rows: int | None


def draft_schema(data_path: os.PathLike | str | None, *, yaml_path: os.PathLike | str | None = None,
                 table: str | None = None, label: str | None = None) -> Draft:
    """A draft schema from a metadata file of public facts and/or the data.

    Facts declared in the metadata file (SmartNoise layout) are public. Every other fact is read
    from the data with :func:`dpgen_jax.data.infer_schema`; if there is any, the schema is marked
    ``data-derived`` and its first note, starting with ``DRAFT``, says which columns.

    Raises:
        UsageError: neither input, a column of the metadata file missing from the data, facts
            missing with no data to draft them from, or an unknown label.
    """
    from dpgen_jax import data

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
        p = _existing_file(data_path, "data file")
        frame = _read_draft_frame(p, [n for n, t in types.items() if t == "string"])
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
    drafted: dict[str, dict] = {}
    if to_draft:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", data.DataDerivedSchemaWarning)
            try:
                inferred = data.infer_schema(frame[to_draft])
            except ValueError as exc:
                raise UsageError(f"{data_path}: {exc}") from None
        drafted = {c.name: c.to_dict() for c in inferred.columns}
    if label is not None and label not in names:
        raise UsageError(f"--label {label!r} is not a column; the columns are {names}.")
    cols = []
    for n in names:
        d = dict(declared.get(n) or drafted[n])
        if label is not None:
            d["label"] = n == label
        cols.append(d)
    public = [n for n in names if n not in drafted]
    if drafted:
        source = "data-derived"
        notes.insert(0, f"{DRAFT_NOTE_PREFIX} by `dpgen-jax schema draft`: the kinds, categories "
                        f"and bounds of column(s) {to_draft} were read from the rows of {data_path} "
                        "(not differentially private). Review every column, replace those facts by "
                        'public knowledge, then set "source" to "public" and rewrite these notes.')
        if public:
            notes.insert(1, f"Column(s) {public} were declared in the public metadata file "
                            f"{yaml_path}.")
    else:
        source = "public"
        notes.insert(0, f"Declared in the metadata file {yaml_path} (SmartNoise layout): column "
                        "kinds, category lists and bounds are public knowledge, not read from the "
                        "private rows.")
    try:
        schema = data.Schema.from_dict({"columns": cols, "source": source, "notes": notes})
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{yaml_path or data_path}: {exc}") from None
    rows = options.get("rows")
    return Draft(schema, to_draft, rows if isinstance(rows, int) and not isinstance(rows, bool) else None)


# ----------------------------------------------------------------------------- configuration


def config_overrides(method: str, pairs: Sequence[str]) -> dict[str, Any]:
    """``["field=value", ...]`` as typed configuration overrides of ``method``.

    Values are read as JSON where they parse (``5000``, ``0.5``, ``null``, ``[64, 64]``) and as
    strings otherwise; an integer given for a float field becomes a float.

    Raises:
        ValueError: a pair without ``=`` or a field the method's configuration does not have.
    """
    from dpgen_jax import synthesizers

    cfg = synthesizers.get(method).CONFIG
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


def _synthesizer(method: str, overrides: Sequence[str], *, to_fit: bool = False):
    """A new synthesizer of ``method`` with the ``--set`` overrides, checked before any file is
    read: an unknown method, a method that cannot fit here (``to_fit``: a missing optional
    package, :meth:`Synthesizer.unavailable_reason`) and a ``--set`` value of the wrong type or
    range are user errors naming the flag."""
    from dpgen_jax import synthesizers

    cls = synthesizers.get(method)  # an unknown method fails here
    if to_fit:
        reason = cls.unavailable_reason()
        if reason is not None:
            raise UsageError(f"--method {method} cannot fit here: {reason}")
    values = config_overrides(method, overrides)
    try:
        return synthesizers.create(method, **values)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--set {_culprit(method, overrides)}: {exc}") from None


def _culprit(method: str, pairs: Sequence[str]) -> str:
    """The ``--set`` pair(s) a configuration refuses: the first refused on its own, else all."""
    from dpgen_jax import synthesizers

    for pair in pairs:
        try:
            synthesizers.create(method, **config_overrides(method, [pair]))
        except (TypeError, ValueError):
            return pair
    return " ".join(pairs)


# ----------------------------------------------------------------------------- privacy summary


def _num(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.{digits}g}"
    return str(v)


def format_privacy(report: Mapping[str, Any], *, title: str) -> str:
    """A privacy report (``privacy.report`` / ``privacy_report()``) as a console table.

    One row per phase (mechanism, sampling rate, noise multiplier, steps, epsilon of the phase
    alone), then epsilon by each accountant, the paper's accounting when the report has it, and
    every assumption.
    """
    rows = [("phase", "mechanism", "sample rate", "noise mult.", "steps", "eps alone")]
    for ph in report["phases"]:
        rows.append((ph["name"], ph["mechanism"], _num(ph.get("sample_rate")),
                     _num(ph.get("noise_multiplier"), 5), str(ph["steps"]), _num(ph["epsilon_alone"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [title]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    by = report["epsilon_by_accountant"]
    headline = report["accountant"].upper()
    if report.get("conversion") and report["accountant"] != "pld":
        headline += f" {report['conversion']}"
    if report["non_private"]:
        lines.append("  epsilon: inf (non-private run: no privacy guarantee)")
    else:
        lines.append(f"  epsilon: {_num(report['epsilon'])} ({headline}, headline)"
                     f" | RDP improved {_num(by.get('rdp_improved'))} | RDP classic "
                     f"{_num(by.get('rdp_classic'))}   at delta = {report['delta']:g}, "
                     f"{report['neighbouring_relation']} neighbours")
    if report.get("sharded_accounting") and not report["non_private"]:
        headline = "proven, selection-conditioned bound, exact"
        sharded = report["sharded_accounting"]
        lines[-1] = lines[-1].replace("(PLD, headline)", f"({headline})")
        lines.append(f"  assumed accounting: {_num(sharded.get('assumed'))} ({sharded['assumed_label']})")
    paper = report.get("paper_accounting")
    if paper:
        lines.append(f"  paper's accounting: {_num(paper.get('epsilon'))} ({paper.get('label')})")
    lines.append("  assumptions:")
    lines += [f"   - {a}" for a in report["assumptions"]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- commands


def _warn_loudly(lines: Sequence[str]) -> None:
    bar = "!" * 78
    print("\n".join([bar, *(f"! {line}" for line in lines), bar]), file=sys.stderr)


def cmd_schema_draft(args) -> int:
    out = _new_file(args.out, args.force, "output file")
    schema, drafted, rows = draft_schema(args.data, yaml_path=args.from_yaml, table=args.table,
                                         label=args.label)
    out.write_text(schema.to_json() + "\n")
    kinds = {k: sum(c.kind == k for c in schema.columns) for k in ("categorical", "binary", "continuous")}
    print(f"wrote {out}: {len(schema)} columns ({', '.join(f'{v} {k}' for k, v in kinds.items())}), "
          f"source {schema.source!r}, label {schema.label!r}")
    if rows is not None:
        print(f"the metadata declares rows: {rows}; if that count is public, pass --num-records "
              f"{rows} to fit")
    if drafted:
        _warn_loudly([
            f"WARNING: {out} is DATA-DERIVED. The facts of {len(drafted)} column(s) were read from",
            "the private rows (a category seen once, or a maximum, reveals a row), which is not",
            "differentially private. Before a private run, review every column and replace those",
            "facts by public knowledge (a codebook, a data dictionary, published ranges), then set",
            '"source": "public" and rewrite "notes". `dpgen-jax fit` refuses this schema unless you',
            "pass --allow-data-derived-schema, and the result is then not end-to-end DP.",
        ])
    return 0


def cmd_fit(args) -> int:
    if args.epsilon is not None and not args.epsilon > 0:
        raise UsageError(f"--epsilon {args.epsilon} must be > 0 (or inf for a non-private run).")
    _existing_file(args.data, "data file")  # fail fast, before the library loads
    model = _synthesizer(args.method, args.overrides, to_fit=True)
    schema = load_schema(args.schema)
    if schema.source == "public" and any(n.startswith(DRAFT_NOTE_PREFIX) for n in schema.notes):
        warnings.warn(f"{args.schema} is marked public but still carries the draft's notes; make "
                      "sure every fact is public knowledge and rewrite the notes (they go into the "
                      "privacy report).", stacklevel=1)
    derived = schema.source == "data-derived"
    if derived and not args.allow_data_derived_schema:
        raise UsageError(f"{args.schema} is data-derived (its facts were read from the data): "
                         'replace them by public knowledge and set "source": "public", or pass '
                         "--allow-data-derived-schema (the result is then not end-to-end DP).")
    out = _new_file(args.out, args.force, "model file")
    df = read_csv(args.data, schema)
    if derived:
        warnings.warn(f"{args.schema} is data-derived and --allow-data-derived-schema was given: "
                      "the result is NOT end-to-end differentially private (the report says so).",
                      stacklevel=1)
    model.fit(df, schema, epsilon=args.epsilon, delta=args.delta, preset=args.preset,
              num_records=args.num_records, seed=args.seed, progress=not args.no_progress,
              max_seconds=args.max_seconds,
              allow_data_derived_schema=args.allow_data_derived_schema)
    model.save(out)
    report = model.privacy_report()
    # No row count in the title (privacy rule 10): the report itself names N where it is public
    # (--num-records, or a method that treats its row count as public and says so).
    print(format_privacy(report, title=f"privacy report of {args.method} on {args.data}:"))
    if args.report is not None:
        path = _new_file(args.report, args.force, "report file")
        path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    print(f"wrote {out} (released: {', '.join(report['released'])})")
    return 0


def cmd_sample(args) -> int:
    from dpgen_jax import synthesizers

    if args.n < 1:
        raise UsageError(f"-n {args.n} must be a positive number of rows.")
    out = _new_file(args.out, args.force, "output file")
    model = synthesizers.load(_existing_file(args.model, "model file"))
    rows = model.sample(args.n, seed=args.seed, mode=args.mode)  # None: model.default_decode_mode()
    write_csv(rows, out)
    eps = model.privacy_report().get("epsilon")
    print(f"wrote {out}: {len(rows)} synthetic rows from {args.model} ({model.METHOD}, epsilon "
          f"{_num(eps) if eps is not None else 'inf (non-private)'})")
    return 0


def cmd_evaluate(args) -> int:
    from dpgen_jax import metrics, synthesizers

    schema = load_schema(args.schema)
    if args.label is not None and args.label not in schema:
        raise UsageError(f"--label {args.label!r} is not a column of {args.schema}; the columns "
                         f"are {schema.names}.")
    train = read_csv(args.real, schema)
    test = read_csv(args.test, schema)
    synthetic = read_csv(args.synthetic, schema)
    epsilon = None
    if args.model is not None:
        epsilon = synthesizers.load(_existing_file(args.model, "model file")).privacy_report()["epsilon"]
    result = metrics.evaluate(train, test, synthetic, schema, label=args.label, seed=args.seed,
                              n_jobs=args.n_jobs)
    written = metrics.write_report(result, args.out, real=[train, test], synthetic=synthetic,
                                   schema=schema, epsilon=epsilon)
    acc, tstr = result.get("label_accuracy") or {}, result.get("tstr_auroc") or {}
    tv = (result.get("tv_1way") or {}).get("mean")
    print(f"label {acc.get('label') or tstr.get('label')!r}: random-forest accuracy real "
          f"{_num(acc.get('real'), 3)} / synthetic {_num(acc.get('synthetic'), 3)}; TSTR AUROC real "
          f"{_num(tstr.get('real'), 3)} / synthetic {_num(tstr.get('synthetic'), 3)}; mean 1-way TV "
          f"{_num(tv, 3)}")
    print(f"wrote {', '.join(sorted(written))} to {args.out} (not private: computed from the real rows)")
    return 0


def cmd_privacy(args) -> int:
    from dpgen_jax import data, privacy

    if args.epsilon is not None and not args.epsilon > 0:
        raise UsageError(f"--epsilon {args.epsilon} must be > 0 (or inf for a non-private run).")
    model = _synthesizer(args.method, args.overrides)
    if args.schema is not None:
        schema, where = load_schema(args.schema), str(args.schema)
    else:
        schema, where = data.adult_schema(), "Adult's public schema (default; see --schema)"
    try:
        plan = model.plan(schema, args.num_records, epsilon=args.epsilon, delta=args.delta,
                          preset=args.preset)
    except ValueError as exc:
        hint = (" (planned for Adult's public schema; pass --schema)"
                if args.schema is None and args.preset is not None else "")
        raise UsageError(f"{exc}{hint}") from None
    except ImportError as exc:  # a plan that needs a missing optional package
        reason = model.unavailable_reason()
        raise UsageError(f"--method {args.method} cannot plan here: {reason or exc}") from None
    if model.USES_NUM_RECORDS:
        notes = [f"The sampling rates use N={plan.num_records} records (given with --num-records)."]
    else:
        notes = [f"No record count enters this method's mechanisms: a fit takes any size it needs "
                 f"from its own noisy counts, not from N. This plan uses N={plan.num_records} "
                 "(given with --num-records) only in place of such counts, so a fit's schedule "
                 "and epsilon can differ where they depend on them."]
    # The plan's own headline accountant (RDP for a method with phases only RDP interprets).
    report = privacy.report(plan.phases, plan.delta, accountant=plan.accountant,
                            dataset_size=plan.num_records, assumptions=notes)
    # The paper's accounting of the method, as fit() reports it (a method hook of the skeleton).
    report["paper_accounting"] = model._paper_accounting(plan.phases, plan.delta, report) if plan.private else None
    target = None if args.epsilon is None or math.isinf(args.epsilon) else args.epsilon
    report["method"], report["preset"], report["target_epsilon"] = args.method, args.preset, target
    report["noise"] = _noise(plan.config)
    if args.json:
        print(json.dumps(report, indent=2, allow_nan=False))
        return 0
    target = (f"preset {args.preset}" if args.preset else
              "non-private" if math.isinf(args.epsilon) else f"target epsilon {args.epsilon:g}")
    print(format_privacy(report, title=f"{args.method}: {target}, N={plan.num_records}, schema: "
                                       f"{where} (no data read)"))
    if plan.private:
        noise = ", ".join(f"{k}=({', '.join(_num(x, 6) for x in v)})" if isinstance(v, list)
                          else f"{k}={_num(v, 6)}" for k, v in report["noise"].items())
        how = "calibrated to the target before training" if args.epsilon else "the preset's"
        print(f"  noise ({how}): {noise}")
    return 0


def _noise(config) -> dict[str, Any]:
    """The noise multipliers of a configuration: its ``NOISE_FIELDS`` (one per accounted phase),
    then any other ``*_noise_multiplier(s)`` field a method calibrates (e.g. DP-SYN's per-group
    autoencoders and DP-EM inside its parallel phase)."""
    names = list(type(config).NOISE_FIELDS.values())
    names += [f.name for f in dataclasses.fields(config) if f.name not in names
              and f.name.endswith(("noise_multiplier", "noise_multipliers"))]
    return {name: (list(v) if isinstance(v := getattr(config, name), tuple) else v) for name in names}


def cmd_methods(args) -> int:
    from dpgen_jax import synthesizers

    methods = synthesizers.available()
    width = max(map(len, methods))
    for name, description in methods.items():
        presets = sorted(synthesizers.get(name).PRESETS)
        extra = f" [presets: {', '.join(presets)}]" if presets else ""
        print(f"{name.ljust(width)}  {description}{extra}")
    return 0


# ----------------------------------------------------------------------------- the parser


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit status 2 through :func:`main`)."""

    def error(self, message: str):
        raise UsageError(f"{message} (see {self.prog} --help)")


class _HelpFormatter(argparse.HelpFormatter):
    """Shows a flag's default when it has a meaningful one (not None, False or [])."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default not in (None, False, [], argparse.SUPPRESS) and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def _privacy_target(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--epsilon", type=float,
                       help="target epsilon under the method's headline accountant (PLD, or RDP "
                            "for a method with phases only RDP accounts, e.g. mst); the noise is "
                            "calibrated before training; 'inf' trains without privacy")
    group.add_argument("--preset", help="one of the method's published settings (dpgen-jax methods)")
    p.add_argument("--delta", type=float, default=1e-5, help="target delta")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help="a configuration field of the method (JSON values), e.g. --set "
                        "critic_steps=5000; repeat for several")


def build_parser() -> argparse.ArgumentParser:
    fmt = _HelpFormatter
    parser = _Parser(prog=PROG, description="Differentially private synthetic tabular data "
                     "(dpgen_jax): a CSV in, a synthetic CSV and a privacy report out. See "
                     "docs/cli.md.", formatter_class=fmt)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    schema = sub.add_parser("schema", help="write a draft schema for review", formatter_class=fmt,
                            description="Schemas: the public column metadata every private run needs.")
    schema_sub = schema.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND",
                                       parser_class=_Parser)
    draft = schema_sub.add_parser(
        "draft", formatter_class=fmt, help="a draft schema from a CSV and/or a metadata file",
        description="Writes a draft schema (JSON) for you to review. Facts read from the data are "
                    "marked data-derived with a loud warning: replace them by public knowledge "
                    "before a private run. --from-yaml reads public facts from a SmartNoise-style "
                    "metadata file (type/lower/upper per column, plus categories).")
    draft.add_argument("data", nargs="?", help="the CSV file (header row) to draft missing facts from")
    draft.add_argument("--from-yaml", metavar="META", help="a SmartNoise metadata file of public "
                       "facts (needs PyYAML: pip install 'dpgen-jax[yaml]')")
    draft.add_argument("--table", help="which table of the metadata file ('schema.table' or 'table')")
    draft.add_argument("--label", help="the label (prediction target) column")
    draft.add_argument("-o", "--out", required=True, help="the schema file to write (JSON)")
    draft.add_argument("--force", action="store_true", help="replace an existing output file")
    draft.set_defaults(run=cmd_schema_draft)

    fit = sub.add_parser(
        "fit", formatter_class=fmt, help="train a synthesizer and write its release file",
        description="Trains a synthesizer on a CSV under (epsilon, delta)-DP with a progress bar, "
                    "prints the privacy report and writes the release file (generator and "
                    "decoder, schema, configuration, privacy report; no private row, no key).")
    fit.add_argument("--method", required=True, help="a registered method (dpgen-jax methods)")
    fit.add_argument("--data", required=True, help="the private CSV, columns as in the schema")
    fit.add_argument("--schema", required=True, help="the public schema (JSON)")
    _privacy_target(fit)
    fit.add_argument("--num-records", type=int, help="a public number of records N for the "
                     "sampling rates (default: the row count, reported as treated as public)")
    fit.add_argument("--seed", type=int, help="reproducible run (not fit for release); default: "
                     "OS entropy")
    fit.add_argument("--max-seconds", type=float, help="a time budget; the report accounts for "
                     "the steps executed")
    fit.add_argument("--allow-data-derived-schema", action="store_true",
                     help="train on a schema read from the data (the result is NOT end-to-end DP, "
                          "and the report says so)")
    fit.add_argument("--report", help="also write the privacy report as JSON to this file")
    fit.add_argument("--no-progress", action="store_true", help="no progress bar")
    fit.add_argument("--out", required=True, help="the release file to write (.npz)")
    fit.add_argument("--force", action="store_true", help="replace existing output files")
    fit.set_defaults(run=cmd_fit)

    sample = sub.add_parser("sample", formatter_class=fmt, help="synthetic rows from a release file",
                            description="Samples synthetic rows from a release file (post-processing: "
                                        "no privacy cost) and writes them as CSV.")
    sample.add_argument("model", help="a release file written by dpgen-jax fit")
    sample.add_argument("-n", type=int, required=True, help="number of rows")
    sample.add_argument("-o", "--out", required=True, help="the CSV file to write")
    sample.add_argument("--seed", type=int, help="reproducible sampling; default: OS entropy")
    sample.add_argument("--mode", choices=("argmax", "sample"), default=None,
                        help="how discrete columns are decoded: the most likely category, or one "
                             "drawn from the output probabilities (default: the fitted model's "
                             "own, e.g. 'sample' for dp-wgan, dp-vae, dp-syn and dp-auto-gan, "
                             "'argmax' for dp-auto-gan's paper presets)")
    sample.add_argument("--force", action="store_true", help="replace an existing output file")
    sample.set_defaults(run=cmd_sample)

    ev = sub.add_parser("evaluate", formatter_class=fmt, help="the papers' metrics, plots and a summary",
                        description="Compares synthetic rows with real training and test rows: "
                                    "writes metrics.json, plots and summary.md. Not private: "
                                    "the output describes the real data.")
    ev.add_argument("--real", required=True, help="the real training CSV (the rows fitted on)")
    ev.add_argument("--test", required=True, help="real held-out rows (CSV)")
    ev.add_argument("--synthetic", required=True, help="the synthetic CSV")
    ev.add_argument("--schema", required=True, help="the schema (JSON)")
    ev.add_argument("--label", help="the label column (default: the schema's label)")
    ev.add_argument("--model", help="the release file, to show its epsilon in the summary")
    ev.add_argument("--seed", type=int, default=0, help="seed of the metrics' models")
    ev.add_argument("--n-jobs", type=int, default=-1, help="parallel jobs of the forests")
    ev.add_argument("--out", required=True, help="output folder")
    ev.set_defaults(run=cmd_evaluate)

    pv = sub.add_parser("privacy", formatter_class=fmt, help="account a method's schedule without data",
                        description="Accounts a method's schedule without reading any data: the "
                                    "phases, epsilon by each accountant (the method's headline, PLD "
                                    "unless it is RDP; RDP improved and classic; the paper's) and "
                                    "the calibrated noise.")
    pv.add_argument("--method", required=True, help="a registered method (dpgen-jax methods)")
    pv.add_argument("--num-records", type=int, required=True, help="the number of records N")
    _privacy_target(pv)
    pv.add_argument("--schema", help="the schema the method would be fitted on (default: Adult's "
                    "public schema); it selects the method's default configuration")
    pv.add_argument("--json", action="store_true", help="print the report as JSON")
    pv.set_defaults(run=cmd_privacy)

    methods = sub.add_parser("methods", formatter_class=fmt, help="the registered methods",
                             description="Lists the registered methods, one line each.")
    methods.set_defaults(run=cmd_methods)
    return parser


@contextlib.contextmanager
def _console_warnings():
    """Warnings as ``dpgen-jax: warning: ...`` lines (without the source line of the library)."""
    saved = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"{PROG}: warning: {message}", file=sys.stderr)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = saved


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc).strip() or type(exc).__name__).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns (and exits with) 0 on success, 2 on a user error."""
    traceback = os.environ.get("DPGEN_TRACEBACK") == "1"
    try:
        args = build_parser().parse_args(argv)
        with _console_warnings():
            code = args.run(args)
    except UsageError as exc:
        if traceback:
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (ValueError, OSError, ImportError) as exc:
        # The library's checks raise ValueError with a message naming the argument or column
        # (schema mismatch, unreachable epsilon, unknown method or preset, bad --set value);
        # ImportError: an optional package a method needs is missing (its message says which).
        if traceback:
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
