"""How a running fit reports and stops: its progress bars and the stop tests of a time budget.

:class:`Progress`: a bar per phase with the units done and the epsilon spent so far.
:class:`TimeBudget`: the units per phase that ``fit(max_seconds=...)`` without ``checkpoint_dir``
may run, fixed *before* any private row is read (``synthesizers._budget.measure`` sets them from
the time the method's own training takes on a stand-in table drawn from the public schema;
``docs/privacy.md``, "Time budget"), and its stop tests (:class:`StopTest`): the steps a budget
cuts then depend on public facts and on the machine, never on the private rows.
:func:`round_budget`: the units of rounds whose size follows released values (AIM's annealing),
read from the cap before any private row is read.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable

from dpgen_jax import privacy
from dpgen_jax.synthesizers._hooks import ProgressFn


class Progress:
    """A tqdm bar per phase: units done (steps, or rounds) and the epsilon spent so far under the
    headline accountant.

    During a phase, the epsilon is that of every planned phase composed with the units reported so
    far under its name, or under the bar that names it among the phases it runs (a phase that
    reports under another name without saying so, e.g. a method's rounds, counts as not started); it is recomputed at most every ``min_interval`` seconds (and at the end of
    each phase), between compiled chunks. :meth:`close` with the report's epsilon ends the last
    bar at the epsilon of what was executed (a schedule cut by a time budget included).
    It is left out when the plan's N may not be shown (``RecordCount.shown``): a plan made with
    the private row count as a stand-in (a method that uses no record count, fitted without
    ``num_records``) would show a number computed from that count (privacy rule 10).
    """

    def __init__(self, enabled: bool, plan, min_interval: float = 2.0):
        self.enabled, self.plan, self.min_interval = enabled, plan, min_interval
        self.show_epsilon = plan.records.shown(plan.uses_records) is not None
        self.executed: dict[str, int] = {}
        self.runs: dict[str, tuple[str, ...]] = {}  # bar name -> the planned phases it runs
        self.bar = None
        self.name: str | None = None
        self._last = -math.inf

    def epsilon_spent(self) -> float:
        done = dict(self.executed)
        for bar, names in self.runs.items():  # a bar running phases of other names
            for n in names:
                done[n] = max(done.get(n, 0), self.executed.get(bar, 0))
        phases = privacy.map_phases(list(self.plan.phases), lambda p: dataclasses.replace(
            p, steps=min(done.get(p.name, 0), p.steps)))
        return privacy.epsilon(phases, self.plan.delta, accountant=self.plan.accountant)

    def _label(self, epsilon: float) -> str:
        return f"eps({self.plan.accountant})={epsilon:.3f}"

    def phase(self, name: str, unit: str = "step", phases: tuple[str, ...] = ()) -> ProgressFn | None:
        """The callback ``(done, total)`` of phase ``name`` (``unit``: what it counts, e.g.
        ``"round"``), or None when bars are off. ``phases``: the planned phases the bar runs when
        their names are not its own (each counted at min(done, its planned steps))."""
        if not self.enabled:
            return None
        if phases:
            self.runs[name] = tuple(phases)
        from tqdm.auto import tqdm

        def update(done: int, total: int) -> None:
            if self.name != name:
                self.close()
                self.bar, self.name, self._last = tqdm(total=total, desc=name, unit=unit), name, -math.inf
            self.executed[name] = done
            self.bar.total, self.bar.n = total, done
            now = time.monotonic()
            due = done >= total or now - self._last >= self.min_interval
            if self.show_epsilon and self.plan.private and due:
                self._last = now
                self.bar.set_postfix_str(self._label(self.epsilon_spent()), refresh=False)
            self.bar.refresh()

        return update

    def close(self, epsilon: float | None = None) -> None:
        """Closes the open bar; ``epsilon`` (the report's, of the executed steps) is shown on it
        first (on a line of its own when no bar is open)."""
        if epsilon is not None and self.enabled and self.show_epsilon and self.plan.private:
            if self.bar is None:
                from tqdm.auto import tqdm

                tqdm.write(f"{self.plan.method}: {self._label(epsilon)} spent", file=sys.stderr)
            else:
                self.bar.set_postfix_str(self._label(epsilon) + " spent", refresh=True)
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class TimeBudget:
    """Units per phase (steps, critic steps, iterations or rounds, as the phase reports them)
    that a budgeted fit may run, fixed before any private row is read.

    A phase asks ``stop(name)()`` between compiled chunks (``Hooks.stop``) and reports
    ``(done, total)`` through ``progress(name, inner)``; the test is True once the phase's
    ``done`` (or, for a phase that reports nothing, the number of times it asked) reaches its
    cap. A phase without a cap runs its schedule. The caps are public values, so the point where
    each phase stops is one too (each phase still runs at least one compiled chunk).

    ``synthesizers._budget.measure`` builds one from the method's training on the stand-in.
    """

    def __init__(self, caps: dict | None = None, default: float = math.inf):
        self.caps, self.default = dict(caps or {}), default
        self.done: dict = {}
        self.totals: dict = {}
        self.asked: dict = {}
        self.current = None

    def units(self, name) -> int:
        return self.done.get(name, self.asked.get(name, 0))

    def progress(self, name, inner: ProgressFn | None) -> ProgressFn:
        def update(done: int, total: int) -> None:
            self.done[name], self.totals[name], self.current = int(done), int(total), name
            if inner is not None:
                inner(done, total)

        return update

    def stop(self, name=None) -> StopTest:
        """The stop test of phase ``name`` (None: the phase that last reported, e.g. a method's
        rounds asking ``hooks.should_stop``); a named one carries its phase's cap
        (:class:`StopTest`, :func:`round_budget`)."""
        return StopTest(self, name)

    def cap(self, name) -> int | None:
        """The units phase ``name`` may run (None: its whole schedule), fixed before training."""
        cap = self.caps.get(name, self.default)
        return None if math.isinf(cap) else int(cap)


class StopTest:
    """A :class:`TimeBudget`'s stop test of one phase: called between compiled chunks (or rounds),
    True once the units the phase reported reach its cap. ``cap``: that cap (None: no cap, or an
    unnamed test, whose phase is the one that last reported), a public value a method whose
    rounds cost a data-dependent number of units reads before any private row
    (:func:`round_budget`)."""

    def __init__(self, budget: TimeBudget, name=None):
        self.budget, self.name = budget, name

    def __call__(self) -> bool:
        b = self.budget
        key = b.current if self.name is None else self.name
        b.asked[key] = b.asked.get(key, 0) + 1
        return b.units(key) >= b.caps.get(key, b.default)

    @property
    def cap(self) -> int | None:
        return None if self.name is None else self.budget.cap(self.name)


def round_budget(total: int, stop: Callable[[], bool] | None) -> int:
    """The units that rounds of data-dependent size (AIM's annealing; GEM's with ``anneal``) spend
    under the stop test ``stop`` of their phase: ``total``, or the cap of a :class:`StopTest`
    (at least 1: the first round always runs) when it is smaller.

    Public: ``total`` comes from the plan and the cap from the time budget's stand-in measure, so
    every path under one budget spends exactly these units when no round overshoots them (a
    round's units are ``round_units(level, budget - spent)``). Stopping when a test between rounds
    fires instead would let the units spent follow the earlier rounds' DP outputs (privacy rule
    11): a round of 4 units that starts one unit below the cap ends 3 above it.
    """
    cap = getattr(stop, "cap", None)
    return int(total) if cap is None else max(1, min(int(total), int(cap)))


__all__ = ["Progress", "StopTest", "TimeBudget", "round_budget"]
