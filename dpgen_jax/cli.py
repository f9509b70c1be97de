"""The ``dpgen-jax`` command line: from a CSV to a synthetic CSV and a privacy report.

Subcommands (``dpgen-jax SUBCOMMAND --help`` for each; ``docs/cli.md`` for the whole story)::

    dpgen-jax schema draft [DATA] [--from-yaml META [--table T]] [--label L] -o schema.json
    dpgen-jax fit --method NAME|auto --data data.csv --schema schema.json (--epsilon E | --preset P)
                  [--delta D] [--num-records N] [--seed S] [--set FIELD=VALUE ...] --out model.npz
    dpgen-jax recommend --schema schema.json --num-records N --epsilon E [--delta D]
    dpgen-jax sample model.npz -n N -o synthetic.csv [--seed S] [--mode argmax|sample]
    dpgen-jax evaluate --real train.csv --test test.csv --synthetic synthetic.csv
                       --schema schema.json [--label L] --out DIR
    dpgen-jax privacy --method NAME --num-records N (--epsilon E | --preset P) [--schema S]
    dpgen-jax methods

Every CSV is read with the dtypes its schema declares (:func:`dpgen_jax.data.read_csv`), so integer columns and
categories of str, int or bool survive a write and a read. A mistake the user can fix (a missing
file, a frame that does not match its schema, an unreachable epsilon, an unknown method, a bad
flag) prints one line ``dpgen-jax: error: ...`` and exits with status 2, without a traceback
(set ``DPGEN_TRACEBACK=1`` to see one). XLA's own C++ log lines (such as its "Very slow compile?"
alarm) are kept off the console: :func:`main` sets ``TF_CPP_MIN_LOG_LEVEL=3`` before JAX loads
unless the variable is already set.

Privacy: ``schema draft`` reads facts from the data and marks the schema ``data-derived`` with a
loud warning; ``fit`` refuses such a schema unless ``--allow-data-derived-schema`` is given, and
the report then says the result is not end-to-end differentially private. ``evaluate`` reads the
real rows and is not private.

This module is the ``cli`` layer: the commands and their parser. It may import every other layer
and nothing imports it; the files it reads and writes are ``data``'s (``data.read_csv``,
``data.load_schema``, ``data.draft_schema``), the ``--set`` parser is
``synthesizers.config_overrides`` (shared with the experiments), the report table is
``privacy.format_report`` and the method advice (``recommend``, ``fit --method auto``, the collapse
warning) is ``advice``'s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import warnings
from collections.abc import Sequence

# A leaf module only: the heavy layers are imported by the commands that need them.
from dpgen_jax import _validate as _v
from dpgen_jax._validate import UsageError, existing_file, new_file

PROG = "dpgen-jax"


# ----------------------------------------------------------------------------- configuration


def _synthesizer(method: str, overrides: Sequence[str], *, to_fit: bool = False):
    """A new synthesizer of ``method`` with the ``--set`` overrides, checked before any file is
    read: an unknown method, a method that cannot fit here (``to_fit``: a missing optional
    package, :meth:`Synthesizer.unavailable_reason`) and a ``--set`` value of the wrong type or
    range are user errors naming the flag."""
    from dpgen_jax import synthesizers

    if method not in synthesizers.available():  # the registry's own list and message
        raise UsageError(f"Unknown method {method!r}; expected one of {sorted(synthesizers.available())}.")
    cls = synthesizers.get(method)
    if to_fit:
        reason = cls.unavailable_reason()
        if reason is not None:
            raise UsageError(f"--method {method} cannot fit here: {reason}")
    values = synthesizers.config_overrides(method, overrides)
    try:
        return synthesizers.create(method, **values)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--set {_culprit(method, overrides)}: {exc}") from None


def _culprit(method: str, pairs: Sequence[str]) -> str:
    """The ``--set`` pair(s) a configuration refuses: the first refused on its own, else all."""
    from dpgen_jax import synthesizers

    for pair in pairs:
        try:
            synthesizers.create(method, **synthesizers.config_overrides(method, [pair]))
        except (TypeError, ValueError):
            return pair
    return " ".join(pairs)


# ----------------------------------------------------------------------------- commands


def _label_phrase(label: str | None, hint: str) -> str:
    """``label 'y'``, or ``no label (<hint>)`` for a table without one."""
    return f"label {label!r}" if label is not None else f"no label ({hint})"


def _warn_loudly(lines: Sequence[str]) -> None:
    bar = "!" * 78
    print("\n".join([bar, *(f"! {line}" for line in lines), bar]), file=sys.stderr)


def cmd_schema_draft(args) -> int:
    from dpgen_jax import data

    out = new_file(args.out, args.force, "output file")
    draft = data.draft_schema(args.data, yaml_path=args.from_yaml, table=args.table, label=args.label,
                              verbose=args.verbose)
    schema, drafted, rows = draft
    out.write_text(schema.to_json() + "\n")
    kinds = {k: sum(c.kind == k for c in schema.columns) for k in ("categorical", "binary", "continuous")}
    print(f"wrote {out}: {len(schema)} columns ({', '.join(f'{v} {k}' for k, v in kinds.items())}), "
          f"source {schema.source!r}, {_label_phrase(schema.label, '--label L names the prediction target')}")
    for line in draft.advice:  # gaps, identifiers and the unit of privacy, log scales (also in the notes)
        print(f"review: {line}")
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


def _auto_method(args) -> str:
    """``fit --method auto``: recommend's first choice for the public shape and budget (no data)."""
    if args.num_records is None:
        raise UsageError("--method auto needs --num-records N, a public number of records: the advice "
                         "never reads the data's row count (see dpgen-jax recommend).")
    if args.epsilon is None or math.isinf(args.epsilon):
        raise UsageError("--method auto needs a finite --epsilon (a preset belongs to one method).")
    if args.overrides:
        raise UsageError("--method auto takes no --set (configuration fields belong to one method).")
    from dpgen_jax import advice, data

    minutes = advice.DEFAULT_MAX_MINUTES if args.max_seconds is None else max(args.max_seconds, 1.0) / 60.0
    method = advice.choose_method(data.load_schema(args.schema), args.num_records, args.epsilon,
                                  delta=args.delta, max_minutes=minutes)
    print(f"--method auto: {method} (first in dpgen-jax recommend for this schema, N and epsilon among the "
          f"methods predicted to finish within {minutes:g} minutes)")
    return method


def _warn_if_flagged(args, schema) -> None:
    """Warns when the method's plan lies where the benchmark grid's plans collapsed; only with a
    public --num-records (the warning states N) and a finite --epsilon."""
    if args.num_records is None or args.epsilon is None or math.isinf(args.epsilon):
        return
    from dpgen_jax import advice, synthesizers

    text = advice.warn_if_flagged(args.method, schema, args.num_records, args.epsilon, delta=args.delta,
                                  overrides=synthesizers.config_overrides(args.method, args.overrides))
    if text is not None:
        warnings.warn(text, stacklevel=1)


def cmd_fit(args) -> int:
    existing_file(args.data, "data file")  # fail fast, before the library loads
    if args.method == "auto":
        args.method = _auto_method(args)
    model = _synthesizer(args.method, args.overrides, to_fit=True)
    from dpgen_jax import data, privacy

    schema = data.load_schema(args.schema)
    if schema.source == "public" and any(n.startswith(data.DRAFT_NOTE_PREFIX) for n in schema.notes):
        warnings.warn(f"{args.schema} is marked public but still carries the draft's notes; make "
                      "sure every fact is public knowledge and rewrite the notes (they go into the "
                      "privacy report).", stacklevel=1)
    derived = schema.source == "data-derived"
    if derived and not args.allow_data_derived_schema:
        raise UsageError(f"{args.schema} is data-derived (its facts were read from the data): "
                         'replace them by public knowledge and set "source": "public", or pass '
                         "--allow-data-derived-schema (the result is then not end-to-end DP).")
    out = new_file(args.out, args.force, "model file")
    df = data.read_csv(args.data, schema, verbose=args.verbose)
    if derived:
        warnings.warn(f"{args.schema} is data-derived and --allow-data-derived-schema was given: "
                      "the result is NOT end-to-end differentially private (the report says so).",
                      stacklevel=1)
    _warn_if_flagged(args, schema)  # after every user error, before training
    model.fit(df, schema, epsilon=args.epsilon, delta=args.delta, preset=args.preset,
              num_records=args.num_records, seed=args.seed, progress=not args.no_progress,
              max_seconds=args.max_seconds,
              allow_data_derived_schema=args.allow_data_derived_schema)
    model.save(out)
    report = model.privacy_report()
    # No row count in the title (privacy rule 10): the report itself names N where it is public
    # (--num-records, or a method that treats its row count as public and says so).
    print(privacy.format_report(report, title=f"privacy report of {args.method} on {args.data}:"))
    if args.report is not None:
        path = new_file(args.report, args.force, "report file")
        path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    print(f"wrote {out} (released: {', '.join(report['released'])})")
    return 0


def cmd_sample(args) -> int:
    from dpgen_jax import data, privacy, synthesizers

    out = new_file(args.out, args.force, "output file")
    model = synthesizers.load(existing_file(args.model, "model file"))
    rows = model.sample(args.n, seed=args.seed, mode=args.mode)  # None: model.default_decode_mode()
    data.write_csv(rows, out)
    eps = model.privacy_report().get("epsilon")
    print(f"wrote {out}: {len(rows)} synthetic rows from {args.model} ({model.METHOD}, epsilon "
          f"{privacy.format_number(eps) if eps is not None else 'inf (non-private)'})")
    return 0


def cmd_evaluate(args) -> int:
    from dpgen_jax import data, metrics, privacy, synthesizers

    schema = data.load_schema(args.schema)
    if args.label is not None and args.label not in schema:
        raise UsageError(f"--label {args.label!r} is not a column of {args.schema}; the columns "
                         f"are {schema.names}.")
    train = data.read_csv(args.real, schema, verbose=args.verbose)
    test = data.read_csv(args.test, schema, verbose=args.verbose)
    synthetic = data.read_csv(args.synthetic, schema, verbose=args.verbose)
    epsilon = None
    if args.model is not None:
        epsilon = synthesizers.load(existing_file(args.model, "model file")).privacy_report()["epsilon"]
    result = metrics.evaluate(train, test, synthetic, schema, label=args.label, seed=args.seed,
                              n_jobs=args.n_jobs)
    written = metrics.write_report(result, args.out, real=[train, test], synthetic=synthetic,
                                   schema=schema, epsilon=epsilon)
    from dpgen_jax.metrics._registry import lookup
    from dpgen_jax.metrics._report import why_null

    def shown(path: str) -> str:  # a number, or why it is undefined
        reason = why_null(result, path) if lookup(result, path) is None else None
        return f"undefined ({reason})" if reason else privacy.format_number(lookup(result, path), 3)

    def pair(key: str, what: str) -> str:
        if result.get(key) is None:
            return f"{what} {shown(key)}"
        return f"{what} real {shown(key + '.real')} / synthetic {shown(key + '.synthetic')}"

    label = result["meta"]["label"]
    scores = [f"mean 1-way TV {shown('tv_1way.mean')}"]
    if label is not None:  # without one, the label scores are undefined and not printed
        scores[:0] = [pair("label_accuracy", "random-forest accuracy"), pair("tstr_auroc", "TSTR AUROC")]
    hint = "--label L, or \"label\": true on a column of the schema, names one for the label metrics"
    print(f"{_label_phrase(label, hint)}: {'; '.join(scores)}")
    print(f"wrote {', '.join(sorted(written))} to {args.out} (not private: computed from the real rows)")
    return 0


def cmd_privacy(args) -> int:
    from dpgen_jax import data, privacy

    model = _synthesizer(args.method, args.overrides)
    if args.schema is not None:
        schema, where = data.load_schema(args.schema), str(args.schema)
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
        notes = [f"The sampling rates use N={plan.records.n} records (given with --num-records)."]
    else:
        notes = [f"No record count enters this method's mechanisms: a fit takes any size it needs "
                 f"from its own noisy counts, not from N. This plan uses N={plan.records.n} "
                 "(given with --num-records) only in place of such counts, so a fit's schedule "
                 "and epsilon can differ where they depend on them."]
    # The plan's own headline accountant (RDP for a method with phases only RDP interprets).
    report = privacy.report(plan.phases, plan.delta, accountant=plan.accountant,
                            dataset_size=plan.records.n, assumptions=notes)
    # The paper's accounting of the method, as fit() reports it (a method hook of the skeleton).
    report["paper_accounting"] = plan.paper_accounting(list(plan.phases), report)
    target = None if args.epsilon is None or math.isinf(args.epsilon) else args.epsilon
    report["method"], report["preset"], report["target_epsilon"] = args.method, args.preset, target
    report["noise"] = {p.name: p.noise_multiplier_or_none for p in privacy.flat_phases(plan.phases)
                       if p.noise_multiplier_or_none is not None}
    if args.json:
        print(json.dumps(report, indent=2, allow_nan=False))
        return 0
    target = (f"preset {args.preset}" if args.preset else
              "non-private" if math.isinf(args.epsilon) else f"target epsilon {args.epsilon:g}")
    from dpgen_jax import privacy

    print(privacy.format_report(report, title=f"{args.method}: {target}, N={plan.records.n}, schema: "
                                       f"{where} (no data read)"))
    if plan.private:
        noise = ", ".join(f"{k}={privacy.format_number(v, 6)}" for k, v in report["noise"].items())
        how = "calibrated to the target before training" if args.epsilon else "the preset's"
        print(f"  noise ({how}): {noise}")
    return 0


def cmd_recommend(args) -> int:
    from dpgen_jax import advice, data

    schema = data.load_schema(args.schema)
    minutes = advice.DEFAULT_MAX_MINUTES if args.max_minutes is None else args.max_minutes
    ranked = advice.recommend(schema, args.num_records, args.epsilon, delta=args.delta, max_minutes=minutes)
    print(f"methods for {args.schema} ({len(schema.columns)} columns), N={args.num_records} (public, given "
          f"with --num-records), epsilon {args.epsilon:g}, delta {args.delta:g}, fits up to "
          f"{minutes:g} minutes (no data read):")
    print(advice.format_recommendations(ranked))
    return 0


def registered_methods() -> dict[str, tuple[str, tuple[str, ...]]]:
    """The registry's methods: name -> (description, sorted preset names). It imports every
    method (JAX, Flax, dp_accounting: a few seconds), so that a method is described in its own
    module only."""
    from dpgen_jax import synthesizers

    return {name: (description, tuple(sorted(synthesizers.get(name).PRESETS)))
            for name, description in synthesizers.available().items()}


def cmd_methods(args) -> int:
    methods = registered_methods()
    width = max(map(len, methods))
    for name, (description, presets) in methods.items():
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


# A numeric flag's range is checked as it is parsed, by the check of ``_validate`` named in its
# ``action`` (the library's own wording, naming the flag): a bad value is one parser error.
_EPSILON = _v.flag(_v.positive, allow_inf=True)  # inf: a non-private run
_DELTA = _v.flag(_v.fraction)
_COUNT = _v.flag(_v.whole, minimum=1)  # a number of records or rows


def _privacy_target(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--epsilon", type=float, action=_EPSILON,
                       help="target epsilon under the method's headline accountant (PLD, or RDP "
                            "for a method with phases only RDP accounts, e.g. mst); the noise is "
                            "calibrated before training; 'inf' trains without privacy")
    group.add_argument("--preset", help="one of the method's published settings (dpgen-jax methods)")
    p.add_argument("--delta", type=float, default=1e-5, action=_DELTA, help="target delta")
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
    draft.add_argument("--verbose", action="store_true", help="quote where the data file cannot be "
                       "parsed (for your own data only: the position is private)")
    draft.set_defaults(run=cmd_schema_draft)

    fit = sub.add_parser(
        "fit", formatter_class=fmt, help="train a synthesizer and write its release file",
        description="Trains a synthesizer on a CSV under (epsilon, delta)-DP with a progress bar, "
                    "prints the privacy report and writes the release file (generator and "
                    "decoder, schema, configuration, privacy report; no private row, no key).")
    fit.add_argument("--method", required=True, help="a registered method (dpgen-jax methods), or 'auto': "
                     "dpgen-jax recommend's first choice (needs --num-records)")
    fit.add_argument("--data", required=True, help="the private CSV, columns as in the schema")
    fit.add_argument("--schema", required=True, help="the public schema (JSON)")
    _privacy_target(fit)
    fit.add_argument("--num-records", type=int, action=_COUNT, help="a public number of records N "
                     "for the sampling rates (default: the row count, reported as treated as public)")
    fit.add_argument("--seed", type=int, help="reproducible run (not fit for release); default: "
                     "OS entropy")
    fit.add_argument("--max-seconds", type=float, action=_v.flag(_v.non_negative),
                     help="a time budget: the schedule is cut before any row is read and the noise "
                     "calibrated to the cut (a budget below the method's minimum is refused); the "
                     "report says what was cut")
    fit.add_argument("--allow-data-derived-schema", action="store_true",
                     help="train on a schema read from the data (the result is NOT end-to-end DP, "
                          "and the report says so)")
    fit.add_argument("--report", help="also write the privacy report as JSON to this file")
    fit.add_argument("--no-progress", action="store_true", help="no progress bar")
    fit.add_argument("--verbose", action="store_true", help="quote the offending values and counts in "
                     "data errors (for your own data only: they are private)")
    fit.add_argument("--out", required=True, help="the release file to write (.npz)")
    fit.add_argument("--force", action="store_true", help="replace existing output files")
    fit.set_defaults(run=cmd_fit)

    sample = sub.add_parser("sample", formatter_class=fmt, help="synthetic rows from a release file",
                            description="Samples synthetic rows from a release file (post-processing: "
                                        "no privacy cost) and writes them as CSV.")
    sample.add_argument("model", help="a release file written by dpgen-jax fit")
    sample.add_argument("-n", type=int, required=True, action=_COUNT, help="number of rows")
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
    ev.add_argument("--verbose", action="store_true", help="quote the offending values and counts in "
                    "data errors (for your own data only: they are private)")
    ev.set_defaults(run=cmd_evaluate)

    pv = sub.add_parser("privacy", formatter_class=fmt, help="account a method's schedule without data",
                        description="Accounts a method's schedule without reading any data: the "
                                    "phases, epsilon by each accountant (the method's headline, PLD "
                                    "unless it is RDP; RDP improved and classic; the paper's) and "
                                    "the calibrated noise.")
    pv.add_argument("--method", required=True, help="a registered method (dpgen-jax methods)")
    pv.add_argument("--num-records", type=int, required=True, action=_COUNT,
                    help="the number of records N")
    _privacy_target(pv)
    pv.add_argument("--schema", help="the schema the method would be fitted on (default: Adult's "
                    "public schema); it selects the method's default configuration")
    pv.add_argument("--json", action="store_true", help="print the report as JSON")
    pv.set_defaults(run=cmd_privacy)

    rc = sub.add_parser("recommend", formatter_class=fmt, help="rank the methods for a table's shape and budget",
                        description="Ranks every registered method for a table of this public schema, "
                                    "number of records and budget, with a reason in numbers for each: "
                                    "the benchmark grid's nearest cells and each method's plan (no data "
                                    "read). See docs/recommend.md.")
    rc.add_argument("--schema", required=True, help="the public schema (JSON)")
    rc.add_argument("--num-records", type=int, required=True, action=_COUNT,
                    help="the number of records N; must be public (you state it, nothing reads it from data)")
    rc.add_argument("--epsilon", type=float, required=True, action=_v.flag(_v.positive),
                    help="the target epsilon (finite)")
    rc.add_argument("--delta", type=float, default=1e-5, action=_DELTA, help="target delta")
    rc.add_argument("--max-minutes", type=float, default=None, action=_v.flag(_v.positive),
                    help="the longest fit you accept (default 30): a method predicted to take longer (on a 2-core machine "
                         "like the benchmark's) is listed as infeasible")
    rc.set_defaults(run=cmd_recommend)

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


#: XLA's C++ log level for the command line (absl's TF_CPP_MIN_LOG_LEVEL: 0 info, 1 warning, 2 error,
#: 3 fatal only): its "Very slow compile?" alarm and other C++ log lines are not for this console.
XLA_LOG_LEVEL = "3"


def _quiet_xla() -> None:
    """Sets ``TF_CPP_MIN_LOG_LEVEL`` to :data:`XLA_LOG_LEVEL` before JAX loads, unless the user set
    it (theirs is kept) or JAX is already loaded (it read the variable then; a process that calls
    :func:`main` after importing JAX keeps its own logging)."""
    if "jax" not in sys.modules and "jaxlib" not in sys.modules:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", XLA_LOG_LEVEL)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns (and exits with) 0 on success, 2 on a user error."""
    _quiet_xla()
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
