"""Time budgets for tests: a budget a little above the least a fit needs.

A fit under ``max_seconds`` below what the method needs at least (its stand-in's time and the run's
fixed costs) is refused before any row is read; the helper reads that minimum from the public
``Synthesizer.minimum_seconds`` (the same measurement the fit makes, kept per public setting) and
adds a margin, so the fit runs, cut where the schedule is long.
"""

from __future__ import annotations


def above_minimum(model, frame, schema, seconds: float = 1.0, **target) -> float:
    """``seconds`` above the least budget of ``model.fit(frame, schema, **target)``."""
    n = target.get("num_records") or (len(frame) if model.USES_NUM_RECORDS else None)
    return model.minimum_seconds(schema, n, epsilon=target.get("epsilon"), delta=target.get("delta", 1e-5),
                                 preset=target.get("preset")) + seconds
