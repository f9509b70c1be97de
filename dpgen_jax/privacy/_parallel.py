"""Parallel composition: phases run on disjoint groups of the records (DP-SYN's per-label models).

See docs/privacy.md ("Parallel composition"); :func:`dpgen_jax.privacy.branches` lists the
compositions whose maximum is the run's epsilon.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import dp_accounting as dpa

from dpgen_jax import _validate as _v
from dpgen_jax.privacy._phases import NeighboringRelation, Phase, relation_name


@dataclasses.dataclass(frozen=True)
class ParallelPhases(Phase):
    """Phases run on disjoint groups of the records: parallel composition under add/remove-one.

    Each group's phases read only the records of that group, and which group a record belongs to
    is decided by the record's own values (e.g. its label), so adding or removing one record
    changes the data of exactly one group. The other phases of the run (``shared``: those outside
    this object, e.g. a noisy count of the groups) see every record. Epsilon is then the maximum,
    over the groups, of the shared phases composed with that group's phases
    (:func:`~dpgen_jax.privacy.epsilon` computes each composition with one accountant and takes the
    maximum); :func:`~dpgen_jax.privacy.calibrate` calibrates each group on its own, so that every
    group meets the target.

    Args:
        name: Name of the phase in the report.
        groups: ``((group name, (phase, ...)), ...)``: at least one group; inner phases must be
            stated under add/remove-one (or no relation) and must not nest another
            ``ParallelPhases``. Phase names must be unique across groups.

    Privacy:
        No single ``dp_accounting`` event: :meth:`event` raises, and the accounting functions of
        :mod:`dpgen_jax.privacy` handle this phase themselves. Valid under add/remove-one only
        (under replace-one a record may move between two groups).
    """
    KIND = "parallel"  # Phase.KIND, a ClassVar

    name: str
    groups: tuple

    def __post_init__(self) -> None:
        _v.non_empty("ParallelPhases", name=self.name)
        ctx = f"ParallelPhases {self.name!r}"
        if isinstance(self.groups, (str, bytes)) or not isinstance(self.groups, (tuple, list)) \
                or not self.groups:
            raise ValueError(f"{ctx}: expected groups to be a non-empty sequence of (name, phases), "
                             f"got groups={self.groups!r}.")
        groups, seen = [], set()
        for item in self.groups:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise ValueError(f"{ctx}: expected each group to be (name, phases), got {item!r}.")
            group, phases = item
            _v.non_empty(ctx, name=group)
            phases = tuple(phases)
            for q in phases:
                if not isinstance(q, Phase) or q.parallel_groups is not None:
                    raise TypeError(f"{ctx}: group {group!r} holds {q!r}; expected privacy phases "
                                    "(not another ParallelPhases).")
                if q.neighbouring_relation not in (None, NeighboringRelation.ADD_OR_REMOVE_ONE):
                    raise ValueError(f"{ctx}: phase {q.name!r} of group {group!r} is stated under "
                                     f"{relation_name(q.neighbouring_relation)}; parallel "
                                     "composition holds under add/remove-one only.")
                if q.name in seen:
                    raise ValueError(f"{ctx}: phase name {q.name!r} appears twice.")
                seen.add(q.name)
            groups.append((group, phases))
        if len({g for g, _ in groups}) != len(groups):
            raise ValueError(f"{ctx}: group names must be unique, got {[g for g, _ in groups]}.")
        object.__setattr__(self, "groups", tuple(groups))

    @property
    def steps(self) -> int:
        """The most steps any group ran (0 when no group touched its records)."""
        return max((q.steps for _, qs in self.groups for q in qs), default=0)

    @property
    def inner(self) -> tuple[Phase, ...]:
        """Every group's phases, in order."""
        return tuple(q for _, qs in self.groups for q in qs)

    def event(self) -> dpa.DpEvent:
        raise TypeError(f"ParallelPhases {self.name!r} has no single dp_accounting event: "
                        "privacy.epsilon, report and calibrate account it as the maximum over its "
                        "groups.")

    @property
    def neighbouring_relation(self) -> NeighboringRelation:
        return NeighboringRelation.ADD_OR_REMOVE_ONE

    @property
    def spends_privacy(self) -> bool:
        return any(q.spends_privacy for q in self.inner)

    @property
    def parallel_groups(self) -> tuple:
        return self.groups

    def leaves(self) -> tuple[Phase, ...]:
        return self.inner

    def map(self, fn: Callable[[Phase], Phase]) -> ParallelPhases:
        return dataclasses.replace(self, groups=tuple((g, tuple(q.map(fn) for q in inner))
                                                      for g, inner in self.groups))

    def report_parameters(self) -> dict[str, Any]:
        return {"groups": [g for g, _ in self.groups]}
