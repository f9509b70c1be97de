"""The execution plan of a fit and what a fit releases: one frozen :class:`Plan` in, one frozen
:class:`Release` out.

A :class:`Plan` is decided from public values only, before any private row is read: the resolved
configuration (the method's default for the schema, the user's choices, a preset), the accounted
phases with their calibrated noise, the record count N the rates refer to (:class:`RecordCount`),
delta, the target and the speed settings. A method's ``_train(plan, rows, key, hooks)`` runs it and
returns a :class:`Release`: the released arrays, the released statistics (DP outputs other than
arrays, e.g. AIM's cliques or DP-SYN's label counts), the steps executed, the clip norms resolved at
train time and the method's sentences for the report. :meth:`Plan.report` turns the pair into the
privacy report, the same way for a fit and for a loaded release file (both are stored in it).
The plan is a value: what the method adds to the report (its paper's accounting) is given to it by
the synthesizer that builds it, and nothing here looks a method up.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from dpgen_jax import data as data_lib
from dpgen_jax import privacy
from dpgen_jax._typing import PyTree
from dpgen_jax.synthesizers._config import Flags, SynthesizerConfig
from dpgen_jax.synthesizers._hooks import STANDIN_ROWS


@dataclasses.dataclass(frozen=True)
class RecordCount:
    """N, the number of records the sampling rates refer to, and where it came from.

    Attributes:
        n: the count.
        public: True when the user gave it (``num_records``, a public count or estimate); False
            when it is the private row count, which a method that uses a record count treats as
            public (stated in the report) and any other method keeps to itself (privacy rule 10).
    """

    n: int
    public: bool

    def shown(self, uses_records: bool) -> int | None:
        """The count as it may appear in an output: the user's public N, or the row count of a
        method that uses it (and says so); None for the private count of a method that does not."""
        return self.n if self.public or uses_records else None


@dataclasses.dataclass(frozen=True)
class Release:
    """What a method's ``_train`` returns: everything a fit releases, and the facts of its run.

    Attributes:
        arrays: name -> parameter pytree, the released arrays of the release file.
        steps: phase name -> steps executed (what the accountant is given).
        clip_norms: phase name -> clip norm chosen at train time on public rows (the report
            accounts for, and prints, the phase with it).
        statistics: released statistics other than arrays (JSON values: AIM's model cliques,
            DP-SYN's noisy label counts); DP outputs of accounted phases, saved in the file.
        notes: the method's sentences for the privacy report.
        seconds: phase name -> wall seconds of training (not saved).
        diagnostics: method-specific values of the run kept on the fitted object (e.g. AIM's
            rounds), never released or saved.
    """

    arrays: dict[str, PyTree]
    steps: dict[str, int]
    clip_norms: dict[str, float] = dataclasses.field(default_factory=dict)
    statistics: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The run facts saved beside the arrays (JSON): steps, clip norms, statistics, notes."""
        return {"steps": dict(self.steps), "clip_norms": dict(self.clip_norms),
                "statistics": dict(self.statistics), "notes": list(self.notes)}

    @classmethod
    def from_record(cls, arrays: dict[str, PyTree], record: Mapping[str, Any]) -> Release:
        return cls(arrays=arrays, steps={k: int(v) for k, v in record["steps"].items()},
                   clip_norms={k: float(v) for k, v in record.get("clip_norms", {}).items()},
                   statistics=dict(record.get("statistics", {})), notes=tuple(record.get("notes", ())))


@dataclasses.dataclass(frozen=True)
class Plan:
    """What a fit will do, decided from public values only (no private row is read).

    Attributes:
        method: the registry name of the method.
        config: the resolved configuration (noise fields as configured; never rewritten).
        phases: the accounted phases with the planned step counts and the calibrated noise.
        records: N, the record count the sampling rates refer to (:class:`RecordCount`).
        delta: target delta.
        target_epsilon: the requested epsilon (None for a preset, ``inf`` for non-private).
        preset: the preset name or None.
        private: False for ``epsilon=inf`` (no clipping, no noise, no guarantee).
        accountant: the method's headline accountant: ``"pld"``, or ``"rdp"`` (improved
            conversion) for methods with phases only RDP interprets.
        uses_records: whether the method's mechanisms use N (``Synthesizer.USES_NUM_RECORDS``).
        schema: the user's public schema (its assumptions go into the report).
        flags: the speed settings of the fit (never part of the result).
        max_seconds: the fit's time budget, or None.
        seeded: the keys come from a user seed (the report then says the run is not for release).
        paper_accountant: the method's published accounting, set by the synthesizer that builds
            the plan (``Synthesizer._paper_accounting`` of its configuration and delta): a function
            of the phases as run and the report (its epsilon by accountant) to a label and an
            epsilon; None: no published accounting. Not part of the plan's value (not compared,
            shown or saved).
    """

    method: str
    config: SynthesizerConfig
    phases: tuple
    records: RecordCount
    delta: float
    target_epsilon: float | None
    preset: str | None
    private: bool
    accountant: str = "pld"
    uses_records: bool = True
    schema: data_lib.Schema | None = None
    flags: Flags = Flags()
    max_seconds: float | None = None
    seeded: bool = False
    paper_accountant: Callable[[list, Mapping[str, Any]], dict | None] | None = dataclasses.field(
        default=None, compare=False, repr=False)

    @property
    def model_schema(self) -> data_lib.Schema:
        """The schema the method models (a column declared missing followed by its indicator)."""
        return data_lib.model_schema(self.schema)

    def epsilon(self, accountant: str | None = None, conversion: str = "improved") -> float:
        """The epsilon of the planned schedule (``inf`` when not private); default: the headline
        accountant of the plan."""
        return privacy.epsilon(list(self.phases), self.delta, accountant=accountant or self.accountant,
                               conversion=conversion)

    def phase(self, name: str) -> privacy.Phase:
        """The accounted phase ``name`` (calibrated noise, planned steps, the rate over N; a
        ``NonPrivatePhase`` of the same schedule in a non-private fit). A training phase runs from
        it (``dpsgd.make_dp_step(loss, optimizer, phase, ...)``), so what runs is what is accounted;
        a clip norm chosen at train time is set with ``phase.with_clip_norm(C)`` and returned in
        :attr:`Release.clip_norms`."""
        for p in privacy.flat_phases(list(self.phases)):
            if p.name == name:
                return p
        raise KeyError(f"The plan has no phase {name!r}; its phases are "
                       f"{[p.name for p in privacy.flat_phases(list(self.phases))]}.")

    def executed_phases(self, release: Release, *, planned_steps: bool = False) -> list:
        """The phases as run: the clip norms resolved at train time and the executed steps (the
        planned steps with ``planned_steps=True``): what the report accounts for."""
        resolved = privacy.map_phases(list(self.phases), lambda p: p.with_clip_norm(release.clip_norms[p.name])
                                      if p.name in release.clip_norms else p)
        return resolved if planned_steps else privacy.with_steps(resolved, release.steps)

    def paper_accounting(self, phases: list, report: Mapping[str, Any]) -> dict | None:
        """The method's published accounting of ``phases`` for comparison (label and epsilon;
        ``report`` holds the epsilon by accountant), or None for a non-private plan."""
        if not self.private or self.paper_accountant is None:
            return None
        return self.paper_accountant(phases, report)

    def cut_steps(self, release: Release) -> dict[str, tuple[int, int]]:
        """``{phase: (executed, planned) steps}`` for every phase a time budget cut (empty when
        the schedule ran whole)."""
        executed = privacy.flat_phases(self.executed_phases(release))
        planned = privacy.flat_phases(self.executed_phases(release, planned_steps=True))
        return {p.name: (p.steps, q.steps) for p, q in zip(executed, planned) if p.steps != q.steps}

    def report(self, release: Release, *, resumed: bool = False) -> dict:
        """The privacy report of ``release``, a run of this plan: the phases as run, the
        assumptions of the schema, of the record count and of the method, epsilon by accountant,
        and the method's published accounting beside it. Warns when a time budget cut the
        schedule (a budget fixes the units each phase may run before training,
        ``_budget.measure``; a checkpointed fit pauses instead and releases nothing cut).
        """
        phases, cut = self.executed_phases(release), self.cut_steps(release)
        if cut:
            warnings.warn(f"max_seconds={self.max_seconds} cut the schedule: (executed, planned) steps "
                          f"{cut}; the report accounts for the executed steps.", stacklevel=3)
        assumptions = list(self.schema.assumptions()) + self._record_sentences()
        assumptions.extend(release.notes)
        if resumed:
            assumptions.append(
                "Training was resumed from a private checkpoint: the steps reported are every "
                "distinct step executed across the runs; mechanisms before the saved point were "
                "replayed with the same keys on the same inputs (the same outputs) or restored.")
        if cut and self.private:
            assumptions.append(
                f"A time budget (max_seconds={self.max_seconds}) ended training early, after the "
                "executed steps listed, which this report accounts for. Where each phase stopped "
                "was fixed before any private row was read, from max_seconds and the time the "
                "method's training took on a stand-in table drawn from the public schema (with the "
                f"number of records above, or {STANDIN_ROWS:,} rows for a method that uses none); it depends "
                "on no private row, so the epsilon of the executed steps bounds the run, the stop "
                "included.")
        # dataset_size only when N may be shown: privacy.report writes it into a sentence and a
        # warning when delta >= 1/n (and the sentence's absence would say n < 1/delta).
        report = privacy.report(phases, self.delta, accountant=self.accountant,
                                dataset_size=self.records.shown(self.uses_records),
                                assumptions=assumptions, seeded=self.seeded)
        report["method"] = self.method
        report["preset"] = self.preset
        report["target_epsilon"] = (None if self.target_epsilon is None or math.isinf(self.target_epsilon)
                                    else self.target_epsilon)
        report["num_records_public"] = self.records.public
        # the arrays, then the released statistics (DP outputs saved beside them: the calibration
        # stage's one-way counts, DP-SYN's counts, AIM's cliques), then the public parts
        report["released"] = sorted(release.arrays) + sorted(release.statistics) + ["schema", "config"]
        report["paper_accounting"] = self.paper_accounting(phases, report)
        return report

    def _record_sentences(self) -> list[str]:
        n, public = self.records.n, self.records.public
        if not self.uses_records:
            given = f" (the num_records N={n} given by the user is not used)" if public else ""
            out = ["No record count enters this method's mechanisms: noisy counts are normalised by "
                   f"their own noisy total, and the number of private rows is not published{given}."]
            if not public:
                out.append(
                    f"As the number of private rows n is not published, this report does not check "
                    f"delta={self.delta:g} against it: a delta of 1/n or more is met by a mechanism "
                    "that publishes one random record outright, so delta must be well below 1/n.")
            return out
        if public:
            return [f"The sampling rates use the public number of records N={n} given by the user "
                    "(num_records); the private row count is not published."]
        return [f"The number of private rows (n={n}) is treated as public: it sets the sampling "
                "rates q = expected batch size / n (and a schedule given in epochs), or the schedule "
                "of a signal-to-noise rule (GEM's rounds). Pass num_records=N "
                "(a public count) to avoid this assumption."]

    # -- the release file's record of the plan (public values only) --------------------------
    def record(self) -> dict[str, Any]:
        """The plan as saved in a release file (JSON): the phases, delta, the target, the preset
        and N when it may be shown (a private count of a method that does not use it is left out,
        privacy rule 10). The configuration and schema are saved beside it."""
        return {"phases": [phase_to_json(p) for p in self.phases], "delta": self.delta,
                "target_epsilon": phase_to_json(self.target_epsilon), "preset": self.preset, "private": self.private,
                "accountant": self.accountant, "uses_records": self.uses_records,
                "num_records": self.records.shown(self.uses_records), "num_records_public": self.records.public,
                "max_seconds": self.max_seconds, "seeded": self.seeded}

    @classmethod
    def from_record(cls, method: str, config: SynthesizerConfig, schema: data_lib.Schema,
                    record: Mapping[str, Any]) -> Plan:
        n = record["num_records"]
        return cls(method=method, config=config, phases=tuple(phase_from_json(p) for p in record["phases"]),
                   records=RecordCount(0 if n is None else int(n), bool(record["num_records_public"])),
                   delta=float(record["delta"]), target_epsilon=phase_from_json(record["target_epsilon"]),
                   preset=record["preset"], private=bool(record["private"]), accountant=record["accountant"],
                   uses_records=bool(record["uses_records"]), schema=schema,
                   max_seconds=record["max_seconds"], seeded=bool(record["seeded"]))


def _phase_types() -> dict[str, type]:
    """Every phase kind defined so far, by class name (the subclasses of ``privacy.Phase``), so a
    new kind needs no entry here."""
    found, todo = {}, [privacy.Phase]
    while todo:
        for sub in todo.pop().__subclasses__():
            found[sub.__name__] = sub
            todo.append(sub)
    return found


def phase_to_json(value: Any) -> Any:
    """A phase (or a field of one) as JSON: ``{"phase": class name, "fields": {...}}``; tuples as
    lists; a non-finite float as ``{"float": "inf"}`` (JSON has none). Floats keep their exact
    value (JSON writes their shortest round-trip form)."""
    if isinstance(value, privacy.Phase):
        return {"phase": type(value).__name__,
                "fields": {f.name: phase_to_json(getattr(value, f.name))
                           for f in dataclasses.fields(value) if f.init}}
    if isinstance(value, (tuple, list)):
        return [phase_to_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value


def phase_from_json(value: Any) -> Any:
    """Inverse of :func:`phase_to_json` (lists back to tuples)."""
    if isinstance(value, dict) and set(value) == {"phase", "fields"}:
        cls = _phase_types().get(value["phase"])
        if cls is None:
            raise ValueError(f"Unknown privacy phase {value['phase']!r} in a saved plan.")
        return cls(**{k: phase_from_json(v) for k, v in value["fields"].items()})
    if isinstance(value, dict) and set(value) == {"float"}:
        return float(value["float"])
    if isinstance(value, list):
        return tuple(phase_from_json(v) for v in value)
    return value


__all__ = ["Plan", "RecordCount", "Release", "phase_from_json", "phase_to_json"]
