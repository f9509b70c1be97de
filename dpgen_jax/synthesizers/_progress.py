"""The progress bars of a fit: steps done per phase and the epsilon spent so far."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from dpgen_jax import privacy

ProgressFn = Callable[[int, int], None]


class Progress:
    """A tqdm bar per phase: steps done and the epsilon spent so far under the headline accountant.

    The epsilon is that of every phase composed with the steps executed so far; it ends at the
    report's epsilon, which calibration keeps at or below the target. It is recomputed at most
    every ``min_interval`` seconds (and at the end of each phase), between compiled chunks.
    It is left out when the plan's N may not be shown (``RecordCount.shown``): a plan made with the
    private row count as a stand-in
    (a method that uses no record count, fitted without ``num_records``) would show a number
    computed from that count (privacy rule 10).
    """

    def __init__(self, enabled: bool, plan, min_interval: float = 2.0):
        self.enabled, self.plan, self.min_interval = enabled, plan, min_interval
        self.show_epsilon = plan.records.shown(plan.uses_records) is not None
        self.executed: dict[str, int] = {}
        self.bar = None
        self.name: str | None = None
        self._last = -math.inf

    def epsilon_spent(self) -> float:
        phases = [dataclasses.replace(p, steps=self.executed.get(p.name, 0)) for p in self.plan.phases]
        return privacy.epsilon(phases, self.plan.delta, accountant=self.plan.accountant)

    def phase(self, name: str) -> ProgressFn | None:
        if not self.enabled:
            return None
        from tqdm.auto import tqdm

        def update(done: int, total: int) -> None:
            if self.name != name:
                self.close()
                self.bar, self.name, self._last = tqdm(total=total, desc=name, unit="step"), name, -math.inf
            self.executed[name] = done
            self.bar.n = done
            now = time.monotonic()
            due = done >= total or now - self._last >= self.min_interval
            if self.show_epsilon and self.plan.private and due:
                self._last = now
                self.bar.set_postfix_str(f"eps({self.plan.accountant})={self.epsilon_spent():.3f}")
            self.bar.refresh()

        return update

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
