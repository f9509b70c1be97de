"""Time budgets for tests: a budget a little above the least a fit needs.

A fit under ``max_seconds`` below what the method needs at least (its stand-in's time and the run's
fixed costs) is refused before any row is read, the error naming that minimum; the helper reads it
from the real path (no internals) and adds a margin, so the fit runs, cut where the schedule is long.
"""

from __future__ import annotations

import re

import pytest

MINIMUM = re.compile(r"max_seconds=0 is below the ([0-9.]+) s ")


def above_minimum(model, frame, schema, seconds: float = 1.0, **target) -> float:
    """``seconds`` above the least budget of ``model.fit(frame, schema, **target)`` (the minimum is
    printed to 0.1 s; the margin covers it)."""
    with pytest.raises(ValueError, match=MINIMUM.pattern) as refused:
        model.fit(frame, schema, max_seconds=0, **target)
    return float(MINIMUM.search(str(refused.value)).group(1)) + seconds
