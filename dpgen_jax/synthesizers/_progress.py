"""How a fit is operated while it runs: its progress bars and its time budget.

:class:`Progress`: a bar per phase with the units done and the epsilon spent so far.
:class:`TimeBudget`: ``fit(max_seconds=...)`` without ``checkpoint_dir``, turned into a count of
units per phase *before* any private row is read, from the time the method's own training takes
on a stand-in table drawn from the public schema (``docs/privacy.md``, "Time budget"): the steps a
budget cuts then depend on public facts and on the machine, never on the private rows.
:func:`round_budget`: the units of rounds whose size follows released values (AIM's annealing),
read from the cap before any private row is read.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
import warnings
from collections.abc import Callable

from dpgen_jax import privacy

ProgressFn = Callable[[int, int], None]

#: Rows of the stand-in table of a method that uses no record count and was given no public N.
STANDIN_ROWS = 1000
#: Steps per compiled call while the stand-in is timed (a flag: it changes no result).
PROBE_CHUNK = 20
#: The longest compiled call of a budgeted run, as a share of max_seconds (chunks are shortened to
#: it, so the stop lands close to the planned moment).
CHUNK_SHARE = 0.05


class Progress:
    """A tqdm bar per phase: units done (steps, or rounds) and the epsilon spent so far under the
    headline accountant.

    During a phase, the epsilon is that of every planned phase composed with the units reported so
    far under its name (a phase that reports under another name, e.g. a method's rounds, counts
    as not started); it is recomputed at most every ``min_interval`` seconds (and at the end of
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
        self.bar = None
        self.name: str | None = None
        self._last = -math.inf

    def epsilon_spent(self) -> float:
        phases = privacy.map_phases(list(self.plan.phases),
                                    lambda p: dataclasses.replace(p, steps=self.executed.get(p.name, 0)))
        return privacy.epsilon(phases, self.plan.delta, accountant=self.plan.accountant)

    def _label(self, epsilon: float) -> str:
        return f"eps({self.plan.accountant})={epsilon:.3f}"

    def phase(self, name: str, unit: str = "step") -> ProgressFn | None:
        """The callback ``(done, total)`` of phase ``name`` (``unit``: what it counts, e.g.
        ``"round"``), or None when bars are off."""
        if not self.enabled:
            return None
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

    :meth:`measure` builds one from the method's training on the stand-in (a probe whose own
    stop test ends every phase at its second question); the measurement is kept per public
    setting of a process, so every fit with the same public facts and budget stops at the same
    steps.
    """

    def __init__(self, caps: dict | None = None, default: float = math.inf):
        self.caps, self.default = dict(caps or {}), default
        self.done: dict = {}
        self.asked: dict = {}
        self.current = None

    def units(self, name) -> int:
        return self.done.get(name, self.asked.get(name, 0))

    def progress(self, name, inner: ProgressFn | None) -> ProgressFn:
        def update(done: int, total: int) -> None:
            self.done[name], self.current = int(done), name
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

    # -- the measurement on the stand-in ---------------------------------------------------------
    @classmethod
    def measure(cls, model, plan, max_seconds: float, mesh=None) -> tuple[TimeBudget, object]:
        """The budget of a fit of ``plan`` by ``model`` in ``max_seconds``, and the speed flags of
        its run (chunks shortened so that one takes at most ``CHUNK_SHARE`` of the budget).

        Public values only: the plan (schema, configuration, phases, flags and N as it may be
        shown), ``max_seconds``, the device ``mesh`` and the time the method's ``_train`` takes on
        rows drawn uniformly from the public schema (N rows; ``STANDIN_ROWS`` for a method that
        uses no record count and was given none). ``max_seconds=0`` needs no measurement: every
        phase stops after its first chunk.
        """
        if max_seconds <= 0:
            return cls(default=0), plan.flags
        key = _probe_key(model, plan, mesh)
        if key not in _MEASURED:
            try:
                _MEASURED[key] = _probe(model, plan, mesh)
            except Exception as exc:  # noqa: BLE001  (public data only: the fit itself may still run)
                warnings.warn(f"max_seconds: {plan.method}'s training could not be timed on a stand-in "
                              f"drawn from the public schema ({type(exc).__name__}: {exc}); every "
                              "phase stops after its first compiled chunk.", stacklevel=4)
                return cls(default=0), plan.flags
        return _MEASURED[key].budget(max_seconds, plan.flags)


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


@dataclasses.dataclass(frozen=True)
class _PhaseTiming:
    name: object
    first: float          # seconds from the previous phase's last question to this one's first
                          # (compilation, public work, the first chunk)
    per_unit: float       # seconds per unit after the first chunk
    total: int | None     # units of the phase's schedule (None: not reported)


@dataclasses.dataclass(frozen=True)
class _Measurement:
    phases: tuple          # _PhaseTiming in the order the phases ran
    fixed: float           # seconds of the probe that no cap can shorten (first chunks, tail)
    probe: float           # wall seconds of the whole probe

    def budget(self, max_seconds: float, flags) -> tuple[TimeBudget, object]:
        spare = max_seconds - self.probe - self.fixed
        caps, slowest = {}, 0.0
        for t in self.phases:
            per = max(t.per_unit, 1e-9)
            slowest = max(slowest, per)
            want = math.inf if t.total is None else t.total
            n = min(want, math.floor(max(spare, 0.0) / per))
            if n < want:
                caps[t.name] = int(n)
            spare -= n * per
        changes = {}
        if slowest > 0:
            longest = max(1, math.floor(CHUNK_SHARE * max_seconds / slowest))
            for field in ("chunk_size", "pretrain_chunk"):
                value = getattr(flags, field)
                if value is not None and value > longest:
                    changes[field] = longest
        return TimeBudget(caps), flags.replace(**changes) if changes else flags


_MEASURED: dict = {}


def _probe_key(model, plan, mesh) -> tuple:
    public = plan.records.shown(plan.uses_records)
    return (plan.method, repr(plan.config), repr(plan.schema), repr(plan.phases), repr(plan.flags),
            public, plan.private, None if mesh is None else repr(mesh))


def _probe(model, plan, mesh) -> _Measurement:
    """Runs ``model._train`` on the stand-in with short chunks, every phase stopped at its second
    question, and times it (nothing of it is kept but the times)."""
    import jax

    from dpgen_jax import data as data_lib
    from dpgen_jax import dpsgd
    from dpgen_jax.synthesizers._plan import RecordCount

    n = plan.records.shown(plan.uses_records) or STANDIN_ROWS
    changes = {f: min(getattr(plan.flags, f), PROBE_CHUNK) for f in ("chunk_size", "pretrain_chunk")
               if getattr(plan.flags, f) is not None}
    probe_plan = dataclasses.replace(plan, records=RecordCount(n, plan.records.public),
                                     flags=plan.flags.replace(**changes), max_seconds=None)
    k_rows, k_train = jax.random.split(dpsgd.make_key(None).key)
    model_schema = probe_plan.model_schema
    frame = data_lib.TableEncoder(model_schema).decode(data_lib.uniform_rows(model_schema, n, k_rows))
    x = jax.numpy.asarray(model._encoder(model_schema, plan.config).encode(frame))
    events: list = []   # (time, phase, units)
    totals: dict = {}
    budget = TimeBudget()

    def progress(name, unit="step"):
        record = budget.progress(name, None)

        def update(done, total):
            totals[name] = int(total)
            record(done, total)

        return update

    def stop(name=None):
        test = budget.stop(name)

        def asked() -> bool:
            test()
            key = budget.current if name is None else name
            events.append((time.monotonic(), key, budget.units(key)))
            return budget.asked[key] >= 2

        return asked

    from dpgen_jax.synthesizers._base import Hooks

    hooks = Hooks(progress=progress, should_stop=stop(), stop_test=stop, flags=probe_plan.flags)
    start = time.monotonic()
    with warnings.catch_warnings(), dpsgd.data_parallel(mesh):
        warnings.simplefilter("ignore")
        model._train(probe_plan, x, k_train, hooks)
    end = time.monotonic()
    phases, previous, fixed = [], start, 0.0
    for name in dict.fromkeys(e[1] for e in events):
        mine = [e for e in events if e[1] == name]
        first = mine[0][0] - previous
        if len(mine) > 1 and mine[1][2] > mine[0][2]:
            per = (mine[1][0] - mine[0][0]) / (mine[1][2] - mine[0][2])
        else:
            per = first / max(1, mine[0][2])
        phases.append(_PhaseTiming(name, first, per, totals.get(name)))
        fixed += first
        previous = mine[-1][0]
    fixed += end - previous
    return _Measurement(tuple(phases), fixed, end - start)
