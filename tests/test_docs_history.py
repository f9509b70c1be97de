"""Reference pages describe the present; history lives in git.

No issue number ("issue 50", "issues 48/49", "issue #27", "issue-51") and no review-pass history
("pass 2", "the third pass") in the library's docstrings and comments (``dpgen_jax/**/*.py``), the
documentation (``docs/**/*.md``, and the recorded command and description strings of
``docs/results/*.json``) or ``README.md``. A sentence says what is true now and why (the decision
and its evidence, with the command or commit that measured it), not when it changed.
"""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: An issue number, or a numbered or ordinal review pass.
HISTORY = re.compile(
    r"\bissues?[ -]?#?[0-9]"
    r"|\bpass [0-9]+\b"
    r"|\b(first|second|third|fourth|fifth) pass\b",
    re.IGNORECASE,
)


def _files() -> list[pathlib.Path]:
    files = sorted((ROOT / "dpgen_jax").rglob("*.py"))
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "docs" / "results").glob("*.json"))
    files.append(ROOT / "README.md")
    return [f for f in files if "__pycache__" not in f.parts]


def _matches(path: pathlib.Path) -> list[str]:
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if HISTORY.search(line):
            out.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:160]}")
    return out


def test_the_pattern_finds_what_it_should_and_nothing_else():
    for history in ("fixed in issue 50", "Issues 48/49", "issue #27", "(issue-51 runs)",
                    "the third pass", "pass 2 of the review", "ISSUE 7"):
        assert HISTORY.search(history), history
    for present in ("the backward pass clips", "one pass of measurements", "re-issues the warnings",
                    "the issue's bar", "pass --force to replace it", "a tissue 5 sample"):
        assert not HISTORY.search(present), present


def test_the_scanned_files_exist():
    files = _files()
    assert ROOT / "README.md" in files
    assert any(f.suffix == ".py" for f in files) and any(f.parent.name == "docs" for f in files)
    assert all(f.is_file() for f in files)


def test_no_issue_numbers_or_pass_history_in_reference_pages():
    found = [m for f in _files() for m in _matches(f)]
    assert not found, ("History in reference pages (say what is true now and why; history is "
                       "git's):\n" + "\n".join(found))
