"""What the parts of the synthesizer skeleton share, below all of them (no module of the skeleton
is imported here).

- :class:`Hooks`: how a fit is operated apart from what it computes (progress, stop tests,
  checkpoints, speed flags): the last argument of a method's ``_train``.
- :class:`Stage`: a step the base runs around every method's own training through one seam, at
  plan, train and sample time; this base class is the stage of a method without one (it changes
  nothing). The neural generators' one-way stage is ``synthesizers._matching.OneWayStage``.
- :data:`STANDIN_ROWS`: the rows of a time budget's stand-in table when no N may be shown (the
  probe draws them, ``synthesizers._budget``; the report states them, ``synthesizers._plan``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from dpgen_jax.synthesizers._checkpoint import Checkpointer
from dpgen_jax.synthesizers._config import Flags

#: The callback of a phase's progress: ``(done, total)`` units.
ProgressFn = Callable[[int, int], None]

#: Rows of the stand-in table of a method that uses no record count and was given no public N.
STANDIN_ROWS = 1000


@dataclasses.dataclass(frozen=True)
class Hooks:
    """How a fit is operated, apart from what it computes (``_train``'s last argument).

    Attributes:
        progress: ``progress(phase_name, unit="step", phases=())`` returns a callback
            ``(done, total)`` or None (``unit``: what ``done`` counts, e.g. ``"round"``;
            ``phases``: the planned phases a bar of another name runs, e.g. DP-SYN's bar
            ``autoencoders`` runs ``autoencoder/<group>``, so its epsilon counts them).
        should_stop: the stop test of a phase that asks without a name (e.g. a method's rounds,
            asked before each round after the first); see ``stop``.
        checkpointer: the fit's private checkpoints (``fit(checkpoint_dir=...)``), or None.
        flags: the speed settings (:class:`Flags`, the method's defaults resolved).
        stop_test: ``stop_test(phase_name)`` returns the stop test of a phase (None: every phase
            uses ``should_stop``). A stop test is called between compiled chunks; once it returns
            True the phase must end (its executed steps are what the report accounts for). It is
            True when the fit's time budget (``max_seconds``) ends the phase: at the units fixed
            before training (``_progress.TimeBudget``, measured by ``_budget.measure``), or, with
            ``checkpoint_dir``, once the time is spent (the fit then pauses).
    """

    progress: Callable[..., ProgressFn | None] = lambda name, unit="step", phases=(): None
    should_stop: Callable[[], bool] = lambda: False
    checkpointer: Checkpointer | None = None
    flags: Flags = Flags()
    stop_test: Callable[[str], Callable[[], bool]] | None = None

    def stop(self, name: str) -> Callable[[], bool]:
        """The stop test of training phase ``name`` (the name its progress reports under)."""
        return self.should_stop if self.stop_test is None else self.stop_test(name)

    def checkpoint(self, name: str):
        """The checkpoint hook of training phase ``name`` for ``dpsgd.run_phase(checkpoint=...)``
        (None when the fit keeps no checkpoints). Phase names are unique within a method."""
        return None if self.checkpointer is None else self.checkpointer.phase(name)

    def phase_args(self, name: str, phases: tuple[str, ...] = ()) -> dict[str, Any]:
        """What every training-phase function takes from the fit: the ``progress`` callback of
        phase ``name`` (running the planned ``phases`` when it reports under another name),
        ``should_stop``, its ``checkpoint`` hook and the speed ``flags``."""
        return {"progress": self.progress(name, phases=tuple(phases)), "should_stop": self.stop(name),
                "checkpoint": self.checkpoint(name), "flags": self.flags}


class Stage:
    """A step around a method's own training that the base runs the same way for every method
    that has one, through one seam (``Synthesizer._stage(config)``, a stage for the resolved
    configuration) at plan, train and sample time. This base class changes nothing: it is the
    stage of a method without one.

    Attributes:
        releases_one_way: the sampled rows follow one-way marginals the fit released, so a column
            piled at a bound is what the release says (``sample`` then does not warn of it).
    """

    releases_one_way: bool = False

    def preset(self, values: dict[str, Any]) -> dict[str, Any]:
        """A preset's configuration values, with what the stage sets for a published setting."""
        return values

    def plan(self, schema: Any, phases: list, *, private: bool, epsilon: float | None, delta: float,
             accountant: str) -> tuple[list, tuple[str, ...]]:
        """``(the method's planned phases with the stage's, the names the calibration of the
        method's own phases must hold fixed)``, from public values only (``schema``: the model
        schema)."""
        return phases, ()

    def keys(self, key: Any) -> tuple[Any, Any]:
        """``(the key of the method's own training, the stage's own key or None)`` from a fit's
        key: the one place a fit's key is split between the method and its stage (what
        ``synthesizers.training_key`` returns, and what :meth:`train` hands the method). This
        stage draws nothing: the method gets the fit's key whole."""
        return key, None

    def train(self, plan: Any, frame: Any, key: Any, hooks: Hooks, train: Callable[[Any], Any]) -> Any:
        """The fit's ``Release`` from the fit's ``key``: ``train(k)`` runs the method's own
        training on its part of the key (:meth:`keys`); the stage may add to the release after,
        with its own part (``frame``: the private rows of the plan's model schema)."""
        return train(self.keys(key)[0])

    def sample(self, schema: Any, statistics: dict[str, Any], key: Any, draw: Callable[[Any], Any]) -> Any:
        """Rows of the model ``schema``: ``draw(key)`` draws them from the method's release (whose
        released ``statistics`` are given); the stage may take a part of ``key`` first and
        post-process the rows after."""
        return draw(key)


__all__ = ["Hooks", "ProgressFn", "STANDIN_ROWS", "Stage"]
