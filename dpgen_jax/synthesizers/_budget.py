"""A time budget fixed before any private row is read: the method's training timed on a stand-in.

``fit(max_seconds=...)`` without ``checkpoint_dir`` calls :func:`measure` after planning and before
reading a row: the method's own ``_train`` runs on a table drawn uniformly from the public schema
(N rows as the plan may show them, :data:`~dpgen_jax.synthesizers._hooks.STANDIN_ROWS` when none
may be shown) with short chunks, every phase stopped at its second question, and is timed; the
budget becomes a :class:`~dpgen_jax.synthesizers._progress.TimeBudget` (units per phase, earlier
phases first) and the speed flags of the run (chunks shortened to :data:`CHUNK_SHARE` of the
budget). A budget below what the method needs at least (the stand-in's time and the run's fixed
costs) is refused. :func:`cut_steps` turns the budget into the accounted steps of the cut schedule,
which the fit then plans (and calibrates the noise for) like any schedule. The measurement is kept
per public setting of a process, so every fit with the same public facts and budget stops at the
same steps (``docs/privacy.md``, "Time budget").
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import jax

from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, privacy
from dpgen_jax.synthesizers._hooks import STANDIN_ROWS, Hooks
from dpgen_jax.synthesizers._plan import RecordCount
from dpgen_jax.synthesizers._progress import TimeBudget

#: Steps per compiled call while the stand-in is timed (a flag: it changes no result).
PROBE_CHUNK = 20
#: The longest compiled call of a budgeted run, as a share of max_seconds (chunks are shortened to
#: it, so the stop lands close to the planned moment).
CHUNK_SHARE = 0.05


def measure(model, plan, max_seconds: float, mesh=None) -> tuple[TimeBudget, object]:
    """The budget of a fit of ``plan`` by ``model`` in ``max_seconds``, and the speed flags of its
    run (chunks shortened so that one takes at most ``CHUNK_SHARE`` of the budget).

    Public values only: the plan (schema, configuration, phases, flags and N as it may be shown),
    ``max_seconds``, the device ``mesh`` and the time the method's ``_train`` takes on rows drawn
    uniformly from the public schema (N rows; ``STANDIN_ROWS`` for a method that uses no record
    count and was given none).

    Raises:
        ValueError: ``max_seconds`` is below the least the method needs here (the stand-in's time
            and the run's fixed costs: compilation, work outside the phases, one chunk per phase).
    """
    key = _probe_key(model, plan, mesh)
    if key not in _MEASURED:
        try:
            _MEASURED[key] = _probe(model, plan, mesh, deadline=max_seconds)
        except _OverBudget as over:
            raise ValueError(
                f"max_seconds={max_seconds:g} is below what {plan.method} needs here with this schema, "
                f"configuration and number of records: timing its training on a stand-in drawn from "
                f"the public schema (part of the budget) alone passed it (stopped at "
                f"{over.seconds:.1f} s). Pass a larger "
                "max_seconds, a smaller schedule, or no max_seconds.") from None
        except Exception as exc:  # noqa: BLE001  (public data only: the fit itself may still run)
            warnings.warn(f"max_seconds: {plan.method}'s training could not be timed on a stand-in "
                          f"drawn from the public schema ({type(exc).__name__}: {exc}); every "
                          "phase is cut to one unit (the noise calibrated to that schedule).",
                          stacklevel=4)
            return TimeBudget(default=0), plan.flags
    measured = _MEASURED[key]
    if max_seconds < measured.minimum:
        raise ValueError(
            f"max_seconds={max_seconds:g} is below the {measured.minimum:.1f} s {plan.method} needs at "
            f"least here with this schema, configuration and number of records: timing its training "
            f"on a stand-in drawn from the public schema took {measured.probe:.1f} s, and the run's "
            f"compilation, one chunk per phase and its work outside the phases take "
            f"{measured.fixed:.1f} s more. Pass max_seconds >= {math.ceil(measured.minimum)}, a "
            "smaller schedule, or no max_seconds.")
    return measured.budget(max_seconds, plan.flags)


def minimum(model, plan, mesh=None) -> float:
    """The least budget a fit of ``plan`` by ``model`` can meet (:meth:`Synthesizer.minimum_seconds`):
    the stand-in's time and the run's fixed costs, measured as :func:`measure` does (and kept)."""
    key = _probe_key(model, plan, mesh)
    if key not in _MEASURED:
        _MEASURED[key] = _probe(model, plan, mesh)
    return _MEASURED[key].minimum


def cut_steps(budget: TimeBudget, phases, runs: dict | None = None) -> dict[str, int]:
    """``{phase: steps}`` of every accounted phase (of ``phases``) that ``budget`` cuts: the cap of
    the progress name the phase reports under (its own name, or a bar that declares it among the
    phases it runs, ``runs``: bar -> phase names), at least 1 (a phase runs at least one unit), when
    below the phase's planned steps. A phase counts its steps in the units of its bar, as the
    progress bars' epsilon does (``_progress.Progress``). Public: the caps and the plan only."""
    bars: dict = {}
    for bar, names in dict(runs or {}).items():
        for name in names:
            bars.setdefault(name, []).append(bar)
    out = {}
    for p in privacy.flat_phases(list(phases)):
        caps = [c for c in (budget.cap(b) for b in [p.name, *bars.get(p.name, [])]) if c is not None]
        if caps and min(caps) < p.steps:
            out[p.name] = max(1, min(caps))
    return out


def note_unaccounted_cuts(release, budget: TimeBudget, plan, bars: dict):
    """``release`` with a report note, and a warning, for the work the budget cut that no accounted
    phase counts (e.g. MST's mbi estimate, GS-WGAN's pretraining): ``{name: (done, planned)}``
    units of every progress name that stopped short and is neither a planned phase nor a bar that
    runs planned phases (``bars``). Cutting it changes no epsilon."""
    import warnings

    accounted = {p.name for p in privacy.flat_phases(list(plan.phases))} | set(bars)
    cut = {n: (budget.done[n], t) for n, t in budget.totals.items()
           if n not in accounted and budget.done.get(n, t) < t}
    if not cut:
        return release
    note = (f"The time budget (max_seconds={plan.max_seconds}) also cut work that no accounted "
            f"phase counts, at units fixed before any private row was read: (done, planned) {cut}; "
            "this changes no epsilon.")
    warnings.warn(f"max_seconds={plan.max_seconds} cut unaccounted work: (done, planned) {cut}.",
                  stacklevel=3)
    return dataclasses.replace(release, notes=(*release.notes, note))


def runs(model, plan, mesh=None) -> dict:
    """Bar -> the planned phases it runs under another name, as the method's training on the
    stand-in declared them (empty before :func:`measure`)."""
    measured = _MEASURED.get(_probe_key(model, plan, mesh))
    return {} if measured is None else dict(measured.runs)


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
    runs: tuple = ()       # (bar, the planned phases it runs under another name)

    @property
    def minimum(self) -> float:
        """The least budget the method can meet: the probe (part of the budget) and the fixed costs."""
        return self.probe + self.fixed

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


class _OverBudget(Exception):
    """The stand-in probe alone passed the budget (it stops there: the fit is refused)."""

    def __init__(self, seconds: float):
        super().__init__(seconds)
        self.seconds = seconds


def _probe_key(model, plan, mesh) -> tuple:
    public = plan.records.shown(plan.uses_records)
    return (plan.method, repr(plan.config), repr(plan.schema), repr(plan.phases), repr(plan.flags),
            public, plan.private, None if mesh is None else repr(mesh))


def _probe(model, plan, mesh, deadline: float | None = None) -> _Measurement:
    """Runs ``model._train`` on the stand-in with short chunks, every phase stopped at its second
    question, and times it (nothing of it is kept but the times). It stops with
    :class:`_OverBudget` at the first question after ``deadline`` seconds (the budget: a probe that
    alone passes it shows the budget cannot be met)."""
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
    declared: dict = {}  # bar -> the phases it runs under another name
    budget = TimeBudget()

    def progress(name, unit="step", phases=()):
        if phases:
            declared[name] = tuple(phases)
        record = budget.progress(name, None)

        def update(done, total):
            totals[name] = int(total)
            record(done, total)

        return update

    def stop(name=None):
        test = budget.stop(name)

        def asked() -> bool:
            test()
            now = time.monotonic()
            if deadline is not None and now - start > deadline:
                raise _OverBudget(now - start)
            key = budget.current if name is None else name
            events.append((now, key, budget.units(key)))
            return budget.asked[key] >= 2

        return asked

    start = time.monotonic()
    hooks = Hooks(progress=progress, should_stop=stop(), stop_test=stop, flags=probe_plan.flags)
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
    return _Measurement(tuple(phases), fixed, end - start, tuple(declared.items()))


__all__ = ["CHUNK_SHARE", "PROBE_CHUNK", "cut_steps", "measure", "minimum", "note_unaccounted_cuts", "runs"]
