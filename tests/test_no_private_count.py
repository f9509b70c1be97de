"""No private row count in any output (DESIGN.md, privacy rule 10; issue 25, items 1 and 2).

Every registered method is fitted on a generated table with an odd row count, 1,237 rows, at
delta = 0.01 (so that delta >= 1/n, the case in which ``privacy.report`` writes ``n`` into a
sentence and a warning), once without and once with a public ``num_records=2000``. The count must
appear in none of the outputs: the privacy report, the release file's ``__meta__`` (read through
the library's loader), every warning, the progress bars, and ``dpgen-jax fit``'s stdout and
stderr. The one exception is documented: a method that sets its sampling rates from the row count
(``USES_NUM_RECORDS``), fitted without ``num_records``, treats the count as public and says so in
its report; there the count may appear, and the statement must be there.

"Appears" means the digits ``1237`` (or ``1,237``) as a whole number, not inside a longer number
such as 0.51237, or the reciprocal the report would print for it (``1/n = 0.000808``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import warnings

import pytest

from dpgen_jax import cli, data, synthesizers
from dpgen_jax.synthesizers import _release
from tests import _tables

pytestmark = pytest.mark.usefixtures("persistent_compilation_cache")  # tests/conftest.py

N_ROWS = 1237  # the private row count; odd, so that it cannot be mistaken for a config value
PUBLIC_N = 2000  # a public number of records a user declares (num_records / --num-records)
DELTA = 0.01  # >= 1/1237 and >= 1/2000: the report would warn and name n if it were given n
LEAK = re.compile(r"(?<![\d.])1,?237(?![\d])")
RECIPROCAL = f"{1.0 / N_ROWS:.3g}"  # how privacy.report writes 1/n ("0.000808")
# tqdm's speed readings ("1237.08step/s", "0.81s/step") are timings, not data: a run at about 1,237
# steps per second once matched the count by chance. They are removed before the search.
RATE = re.compile(r"\d+(?:\.\d+)?(?:s/[a-z]+|[a-z]+/s)")
TREATED_AS_PUBLIC = "is treated as public"

# The contract tests' mixed table with a label (DP-SYN partitions by it).
SCHEMA = data.Schema(tuple(dataclasses.replace(c, label=(c.name == "b"))
                           for c in _tables.MIXED_SCHEMA.columns))
FRAME = _tables.mixed_frame(N_ROWS, 7)

EPSILON = 10.0  # calibrates fastest (the PLD interval grows with epsilon); only the text matters
# Each method runs its smoke schedule (``SMOKE``, a class attribute: the tiny schedule the tests and
# the benchmark's quick mode run): compilation and noise calibration are most of a fit's time here.
METHODS = sorted(synthesizers.available())
# Methods that take no record count: for them the private count may appear in no output, with
# or without num_records (the case of issue 25). The others treat it as public without
# num_records (documented, stated in the report).
N_FREE = {m for m in METHODS if not synthesizers.get(m).USES_NUM_RECORDS}
# CLI fits repeat a library fit (its outputs checked above): the DP-SGD methods' (seconds of
# accounting and compilation each) run with -m slow, the CLI's code path being the same for every method.
SLOW_CLI = {"dp-auto-gan", "dp-sactgan", "dp-syn", "dp-vae", "dp-wgan", "gs-wgan"}


def cases(cli: bool) -> list:
    """(method, num_records) for every registered method, once without and once with a public N.

    The default run keeps every case that can leak the count: every method with a public N, and
    the methods that take no record count without one. The rest (the documented exception, and
    CLI fits whose library twin already ran) are marked slow.
    """
    out = []
    for m in METHODS:
        for nr, label in ((None, "private-n"), (PUBLIC_N, "public-n")):
            slow = (nr is None and m not in N_FREE) or (cli and m in SLOW_CLI)
            out.append(pytest.param(m, nr, id=f"{m}-{label}",
                                    marks=[pytest.mark.slow] if slow else []))
    return out


def leaks(text: str) -> list[str]:
    """Every place ``text`` shows the private row count (or its reciprocal), with context."""
    text = RATE.sub("<rate>", text)
    hits = [text[max(0, m.start() - 60):m.end() + 30] for m in LEAK.finditer(text)]
    at = text.find(RECIPROCAL)
    if at >= 0:
        hits.append(text[max(0, at - 60):at + 30])
    return hits


def method_class(method: str):
    cls = synthesizers.get(method)
    reason = cls.unavailable_reason()
    if reason is not None:
        pytest.skip(f"{method} cannot fit here: {reason}")
    return cls


def count_may_appear(cls, num_records) -> bool:
    """The documented exception: the method sets its rates from n and no public N was given."""
    return cls.USES_NUM_RECORDS and num_records is None


def check_outputs(cls, num_records, outputs: dict[str, str], report: dict) -> None:
    if count_may_appear(cls, num_records):
        assert any(TREATED_AS_PUBLIC in a for a in report["assumptions"]), report["assumptions"]
        return
    found = {where: hits for where, text in outputs.items() if (hits := leaks(text))}
    assert not found, f"the private row count {N_ROWS} is published by {cls.METHOD}: {found}"
    assert not any(TREATED_AS_PUBLIC in a for a in report["assumptions"])


@pytest.mark.parametrize("method", METHODS)
def test_every_registered_method_has_a_smoke_schedule_that_plans(method):
    """``SMOKE`` is non-empty, holds only configuration fields and speed settings (flags) of the
    method, and a data-free plan with it builds (that of the public-N fits below, whose
    calibration then comes from the PLD memo)."""
    cls = synthesizers.get(method)
    smoke = dict(cls.SMOKE)
    assert smoke, f"{method} has an empty SMOKE; give it a tiny schedule"
    known = {f.name for f in dataclasses.fields(cls.CONFIG)} | set(cls.FLAGS.to_dict())
    assert set(smoke) <= known, f"{method}.SMOKE sets {sorted(set(smoke) - known)}, not fields or flags"
    plan = synthesizers.create(method, **smoke).plan(SCHEMA, PUBLIC_N, epsilon=EPSILON, delta=DELTA)
    assert plan.phases and plan.epsilon() <= EPSILON


@pytest.mark.parametrize("method, num_records", cases(cli=False))
def test_fit_publishes_no_private_count(method, num_records, tmp_path, capfd):
    """The library: report, release file, warnings and progress bars of ``fit(progress=True)``."""
    cls = method_class(method)
    overrides = cls.SMOKE
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = synthesizers.create(method, **overrides).fit(
            FRAME, SCHEMA, epsilon=EPSILON, delta=DELTA, num_records=num_records, seed=0,
            progress=True)
        model.save(tmp_path / "model.npz")
    out, err = capfd.readouterr()
    _, meta = _release.load_release(tmp_path / "model.npz", method)
    report = model.privacy_report()
    outputs = {"privacy report": json.dumps(report, allow_nan=False),
               "release __meta__": json.dumps(meta, allow_nan=False),
               "warnings": "\n".join(f"{w.category.__name__}: {w.message}" for w in caught),
               "stdout (progress)": out, "stderr (progress)": err}
    check_outputs(cls, num_records, outputs, report)
    assert meta["privacy_report"] == json.loads(outputs["privacy report"])
    # delta >= 1/n is checked (and warned about) exactly when n is public: the user's N, or the
    # row count of a method that treats it as public.
    public = num_records if num_records is not None else N_ROWS if cls.USES_NUM_RECORDS else None
    delta_warnings = [w for w in caught if "1/n" in str(w.message)]
    if public is None:
        assert not delta_warnings
        assert any("delta" in a and "not published" in a for a in report["assumptions"])
    else:
        assert any(f"n={public}" in str(w.message) for w in delta_warnings), outputs["warnings"]
        assert any(f"n={public}" in a for a in report["assumptions"])


@pytest.mark.parametrize("method, num_records", cases(cli=True))
def test_cli_fit_prints_no_private_count(method, num_records, tmp_path, capsys):
    """``dpgen-jax fit`` with its progress bars: stdout, stderr, the --report file, the release."""
    cls = method_class(method)
    overrides = cls.SMOKE
    csv, schema_file = tmp_path / "private.csv", tmp_path / "schema.json"
    data.write_csv(FRAME, csv)
    schema_file.write_text(SCHEMA.to_json())
    sets = [x for k, v in overrides.items() for x in ("--set", f"{k}={json.dumps(v)}")]
    extra = [] if num_records is None else ["--num-records", str(num_records)]
    capsys.readouterr()
    code = cli.main(["fit", "--method", method, "--data", str(csv), "--schema", str(schema_file),
                     "--epsilon", str(EPSILON), "--delta", str(DELTA), "--seed", "0", *extra, *sets,
                     "--report", str(tmp_path / "report.json"), "--out", str(tmp_path / "m.npz")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"privacy report of {method}" in out
    report = json.loads((tmp_path / "report.json").read_text())
    _, meta = _release.load_release(tmp_path / "m.npz", method)
    outputs = {"stdout": out, "stderr": err, "--report file": json.dumps(report),
               "release __meta__": json.dumps(meta, allow_nan=False)}
    check_outputs(cls, num_records, outputs, report)
    if count_may_appear(cls, num_records):
        assert TREATED_AS_PUBLIC in out
    assert math.isfinite(report["epsilon"]) and report["epsilon"] <= EPSILON


@pytest.mark.parametrize("method", sorted(N_FREE))
def test_a_cut_schedule_publishes_no_private_count(method, recwarn):
    """A time budget: the refusal of one below the minimum, the warning of a cut and the report's
    time-budget sentence name no count either."""
    from tests._budgets import above_minimum

    cls = method_class(method)
    warnings.simplefilter("always")
    model = synthesizers.create(method, **cls.SMOKE)
    with pytest.raises(ValueError) as refused:
        model.fit(FRAME, SCHEMA, epsilon=EPSILON, delta=DELTA, seed=1, max_seconds=0)
    seconds = above_minimum(model, FRAME, SCHEMA, 0.5, epsilon=EPSILON, delta=DELTA, seed=1)
    model.fit(FRAME, SCHEMA, epsilon=EPSILON, delta=DELTA, seed=1, max_seconds=seconds)
    report = model.privacy_report()
    outputs = {"privacy report": json.dumps(report, allow_nan=False),
               "refusal": str(refused.value),
               "warnings": "\n".join(f"{w.category.__name__}: {w.message}" for w in recwarn)}
    check_outputs(cls, None, outputs, report)
    cut = any("cut the schedule" in str(w.message) or "cut unaccounted work" in str(w.message)
              for w in recwarn)
    assert cut == any("time budget" in a for a in report["assumptions"])
