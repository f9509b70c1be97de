"""The shared skeleton of every synthesizer: plan, fit, sample, save, load.

A method supplies pure pieces and this module composes them the same way for all:

* a frozen configuration dataclass (a :class:`SynthesizerConfig`) of public hyperparameters;
* ``_phases(config, schema, records)``: the privacy phases of the planned schedule, from public
  values only (no data; ``records`` is the :class:`RecordCount` N the rates refer to);
* ``_train(plan, rows, key, hooks)``: the training phases on the encoded private rows, each run
  from its accounted phase (``plan.phase(name)``: calibrated noise, planned steps), returning a
  :class:`Release` (the released arrays and statistics, the executed steps, the clip norms resolved
  at train time, the method's notes);
* ``_sample_encoded(n, key)`` (or ``_sample_frame``) and ``_release_shapes(config, schema,
  statistics)``.

``fit`` is plan -> train -> ``plan.report(release)``: :meth:`Synthesizer.plan` resolves the
configuration and calibrates the phases' noise to a target epsilon before any data is touched;
the method's ``_train`` runs the plan; the report is the plan's report of the release. The noise
lives in the phases only: a configuration is never rewritten. A release file stores the plan and
the release's run facts (``Plan.to_json``, ``Release.to_json``), so a loaded model has the same report and phases. See
``docs/architecture.md``.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import jax
import numpy as np
import pandas as pd

from dpgen_jax._typing import PyTree
from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, privacy
from dpgen_jax import _validate as _v
from dpgen_jax.synthesizers import _budget, _matching, _checkpoint, _degenerate, _release
from dpgen_jax.synthesizers._config import Flags, SynthesizerConfig, split_overrides
from dpgen_jax.synthesizers._hooks import STANDIN_ROWS, Hooks, Stage
from dpgen_jax.synthesizers._plan import Plan, RecordCount, Release
from dpgen_jax.synthesizers._progress import Progress
from dpgen_jax.synthesizers._registry import available, create, get, register  # noqa: F401  (re-exported)


def load(path) -> Synthesizer:
    """Loads a release file of any registered method (dispatching on the method it holds)."""
    return Synthesizer.load(path)


# ----------------------------------------------------------------------------- the base class


def _check_target(epsilon, delta, preset) -> None:
    if (epsilon is None) == (preset is None):
        raise ValueError("Give exactly one of epsilon=<target or math.inf> or preset=<name> "
                         f"(got epsilon={epsilon!r}, preset={preset!r}).")
    if epsilon is not None:
        _v.positive(allow_inf=True, epsilon=epsilon)
    _v.fraction(delta=delta)


class Synthesizer(abc.ABC):
    """A DP synthesizer with a scikit-learn-like interface (``fit``, ``sample``, ``save``, ``load``).

    Subclasses set ``METHOD`` (registry name), ``DESCRIPTION`` (one line), ``CONFIG`` (their
    configuration class) and ``PRESETS`` (name -> configuration overrides, optionally with a
    ``"family"`` the configuration must have), and implement the abstract hooks. Optional class
    attributes: ``DECODE_MODE`` (how ``sample`` decodes discrete columns by default:
    ``"argmax"``, or ``"sample"`` for a method whose generative model draws each category from its
    output probabilities; a configuration with a ``decode`` field overrides it per fit),
    ``ACCOUNTANT`` (the headline accountant, ``"pld"`` by default; ``"rdp"`` with the improved
    conversion for a method with phases only RDP interprets, such as the exponential mechanism),
    ``RELEASES_ONE_WAY`` (True for a method whose rows follow one-way marginals it released: ``sample``
    then does not warn about a column piled at a bound, which is what the release says),
    ``CHECKPOINTS`` (True for a method whose ``_train`` passes every phase its
    ``hooks.checkpoint`` hook, so that ``fit(checkpoint_dir=...)`` can resume it), ``FLAGS`` (the
    speed settings the method reads, with its defaults; ``plan.flags`` and ``hooks.phase_args`` pass
    them on), ``SMOKE`` (a tiny schedule for smoke runs) and ``USES_NUM_RECORDS`` (False for a
    method whose mechanisms use no record count, e.g. noisy histograms normalised by their own
    noisy total).

    Attributes:
        config: the user's configuration (None: the method's default for the schema).
        overrides: the user's field overrides on top of it.
        flags: the speed settings of its fits (:class:`Flags`, the method's defaults resolved).
        fitted_plan: the :class:`Plan` of the last fit (or of the loaded file).
        fitted_release: the :class:`Release` of the last fit (or of the loaded file).
    """

    METHOD: ClassVar[str]
    DESCRIPTION: ClassVar[str] = ""
    CONFIG: ClassVar[type[SynthesizerConfig]]
    PRESETS: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    DECODE_MODE: ClassVar[str] = "argmax"
    ACCOUNTANT: ClassVar[str] = "pld"
    USES_NUM_RECORDS: ClassVar[bool] = True
    CHECKPOINTS: ClassVar[bool] = False
    RELEASES_ONE_WAY: ClassVar[bool] = False
    FLAGS: ClassVar[Flags] = Flags()  # the speed settings the method reads, with their defaults
    # A tiny schedule (configuration fields and flags) that runs in seconds, for smoke runs: the
    # tests, the leak test and the benchmark's quick mode read it (no quality is expected of it).
    SMOKE: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why the method cannot fit in this environment (a missing optional package), or None."""
        return None

    def __init__(self, config: SynthesizerConfig | None = None, *, flags: Flags | None = None,
                 **overrides):
        if config is not None:
            _v.instance(self.CONFIG, f"a {self.CONFIG.__name__}", config=config)
        if flags is not None:
            _v.instance(Flags, "a synthesizers.Flags", flags=flags)
        self.config = config.validate() if config is not None else None
        overrides, flag_values = split_overrides(overrides, self.CONFIG)
        self.flags: Flags = (flags or Flags()).replace(**flag_values).over(self.FLAGS, self.METHOD)
        self.overrides = dict(overrides)
        if overrides:  # fail early on unknown fields and bad values
            base = config if config is not None else self.CONFIG()
            base.replace(**overrides).validate()
        self.fitted_plan: Plan | None = None
        self.fitted_release: Release | None = None
        self._report: dict | None = None

    @property
    def fitted_config(self) -> SynthesizerConfig | None:
        """The configuration of the last fit (or of the loaded file): the plan's, never rewritten."""
        return None if self.fitted_plan is None else self.fitted_plan.config

    @property
    def schema(self) -> data_lib.Schema | None:
        """The user's schema of the last fit (or of the loaded file)."""
        return None if self.fitted_plan is None else self.fitted_plan.schema

    @property
    def train_seconds(self) -> dict[str, float]:
        """Phase -> wall seconds of the last fit (empty for a loaded file)."""
        return {} if self.fitted_release is None else dict(self.fitted_release.seconds)

    # -- hooks -------------------------------------------------------------------------------
    def _default_config(self, schema: data_lib.Schema) -> SynthesizerConfig:
        """The method's default configuration for a schema."""
        return self.CONFIG()

    def _encoder(self, schema: data_lib.Schema, config) -> data_lib.TableEncoder:
        """The encoding of rows for a configuration (default: ``TableEncoder``; a method may
        offer others, e.g. DP-auto-GAN's continuous columns on public bins)."""
        return data_lib.TableEncoder(schema)

    def _check_schema(self, schema: data_lib.Schema) -> None:
        """Refuses schemas the method cannot model (e.g. DP-SYN without a label)."""

    @abc.abstractmethod
    def _phases(self, config, schema: data_lib.Schema, num_records: int, private: bool) -> list:
        """The accounted phases of the planned schedule (public values only: the configuration,
        the public schema, N)."""

    def _target_phases(self, config, schema: data_lib.Schema, records: RecordCount, private: bool,
                       epsilon: float | None, delta: float) -> list:
        """The accounted phases planned for a target (public values only): :meth:`_phases`; a
        method whose schedule follows N and the target (GEM's signal-to-noise rule) overrides it."""
        return self._phases(config, schema, records.n, private)

    @abc.abstractmethod
    def _train(self, plan: Plan, x: jax.Array, key: jax.Array, hooks: Hooks) -> Release:
        """Runs ``plan`` on the encoded private rows ``x`` (m, width) with the secret ``key``."""

    def _sample_encoded(self, n: int, key: jax.Array) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} samples frames directly.")

    def _sample_frame(self, n: int, key: jax.Array, mode: str, **options) -> pd.DataFrame:
        """Decoded rows; ``options`` go to the method's ``_sample_encoded`` (e.g. GS-WGAN's
        ``params`` of a kept snapshot)."""
        k_gen, k_dec = jax.random.split(key)
        arr = self._sample_encoded(n, k_gen, **options)
        return self._encoder(self.model_schema, self.fitted_config).decode(arr, mode=mode, key=k_dec)

    @abc.abstractmethod
    def _release_shapes(self, config, schema: data_lib.Schema, statistics: Mapping[str, Any]
                        ) -> dict[str, PyTree]:
        """Abstract shapes (``jax.eval_shape``) of every released group, to check loaded files
        (``statistics``: the release's statistics, e.g. AIM's cliques fix its tables' shapes)."""

    def _calibrate(self, config, schema: data_lib.Schema, phases: list, epsilon: float, delta: float,
                   fixed: Sequence[str] = ()) -> list:
        """Calibrated phases for a target, the phases named in ``fixed`` held (the stage's, e.g.
        the one-way release); default: one common factor on every other noise multiplier."""
        return privacy.calibrate(phases, target_epsilon=epsilon, delta=delta, accountant=self.ACCOUNTANT,
                                 fixed=fixed)

    def _cut_steps(self, config, schema: data_lib.Schema, cut: Mapping[str, int]) -> dict[str, int]:
        """A time budget's cut (phase -> steps, ``_budget.cut_steps``) as the method runs it
        (default: as given; a method whose units come in groups rounds down to whole groups)."""
        return dict(cut)

    def _paper_accounting(self, config, phases: list, delta: float, report: dict) -> dict:
        """The published accounting of the method's paper, for comparison (label and epsilon)."""
        return {"label": "RDP with the classic conversion (the papers' accounting)",
                "epsilon": report["epsilon_by_accountant"].get("rdp_classic")}

    def _paper_accountant(self, config, delta: float) -> Callable[[list, Mapping[str, Any]], dict | None]:
        """The plan's ``paper_accountant``: :meth:`_paper_accounting` of ``config`` and ``delta``,
        as a function of the phases as run and the report."""
        def paper(phases: list, report: Mapping[str, Any]) -> dict | None:
            return self._paper_accounting(config, phases, delta, report)

        return paper

    def _stage(self, config) -> Stage:
        """The one seam through which the base runs a stage around the method's training, at plan
        (``Stage.preset``, ``Stage.plan``), train (``Stage.train``) and sample time
        (``Stage.sample``, ``Stage.releases_one_way``): the neural generators' one-way stage for
        their configurations (``_matching.stage``), a stage that changes nothing otherwise."""
        return _matching.stage(config)

    # -- configuration -----------------------------------------------------------------------
    def _explicit_fields(self, default: SynthesizerConfig) -> set[str]:
        explicit = set(self.overrides)
        if self.config is not None:
            explicit |= {f.name for f in dataclasses.fields(default)
                         if getattr(self.config, f.name) != getattr(default, f.name)}
        return explicit

    def resolve_config(self, schema: data_lib.Schema, preset: str | None = None) -> SynthesizerConfig:
        """The configuration a fit on ``schema`` uses before calibration.

        ``schema`` is the schema the method models (``data.model_schema`` of the user's schema, which
        :meth:`plan` and :meth:`fit` pass): a column declared missing comes with its indicator.

        The method's default for the schema (or the user's ``config``), the user's overrides,
        then the preset's values; a field the user set explicitly is kept over the preset's value,
        with a warning (the preset's published epsilon then no longer applies).
        """
        default = self._default_config(schema)
        config = (self.config if self.config is not None else default).replace(**self.overrides)
        if preset is not None:
            if preset not in self.PRESETS:
                raise ValueError(f"Unknown preset={preset!r} for {self.METHOD}; expected one of "
                                 f"{sorted(self.PRESETS)}.")
            values = self._stage(default).preset(dict(self.PRESETS[preset]))
            family = values.pop("family", None)
            if family is not None and getattr(config, "family", family) != family:
                raise ValueError(f"preset={preset!r} is for {family!r} data but the configuration is "
                                 f"{getattr(config, 'family')!r}.")
            explicit = self._explicit_fields(default)
            for name in sorted(explicit & set(values)):
                if getattr(config, name) != values[name]:
                    warnings.warn(f"preset={preset!r} keeps the configured {name}="
                                  f"{getattr(config, name)!r} instead of the preset's "
                                  f"{values[name]!r}; its published epsilon no longer applies.",
                                  stacklevel=3)
                values.pop(name)
            config = config.replace(**values)
        return config.validate()

    # -- planning (no data) ------------------------------------------------------------------
    def plan(self, schema: data_lib.Schema, num_records: int, *, epsilon: float | None = None,
             delta: float = 1e-5, preset: str | None = None) -> Plan:
        """The configuration and calibrated phases of a fit, from public values only.

        Args:
            schema: the public schema.
            num_records: N, the number of records the sampling rates refer to.
            epsilon: target epsilon under the headline accountant (``ACCOUNTANT``, PLD unless
                the method says otherwise); ``math.inf`` for a
                non-private run. Exclusive with ``preset``.
            delta: target delta.
            preset: the name of a published setting (see ``PRESETS``).

        Raises:
            ValueError: bad arguments, an unknown preset, or an unreachable target (the message
                states the epsilon reachable at the largest allowed noise).
        """
        records = RecordCount(_v.whole(minimum=1, num_records=num_records), public=True)
        return self._plan(schema, records, epsilon=epsilon, delta=delta, preset=preset)

    def minimum_seconds(self, schema: data_lib.Schema, num_records: int | None = None, *,
                        epsilon: float | None = None, delta: float = 1e-5, preset: str | None = None,
                        mesh=None) -> float:
        """The least ``max_seconds`` a fit of this plan can meet here: the method's training timed
        on a stand-in drawn from the public schema, plus the run's fixed costs (public values only;
        no private row is read). A fit under a smaller budget is refused.

        Args:
            schema, epsilon, delta, preset, mesh: as :meth:`fit`.
            num_records: N as the fit will see it (its public ``num_records``, or the table's row
                count for a method that uses one); None for a method that uses no record count
                (``USES_NUM_RECORDS`` False) fitted without a public N.
        """
        _check_target(epsilon, delta, preset)
        if num_records is None and self.USES_NUM_RECORDS:
            raise ValueError(f"{self.METHOD} uses a record count: pass num_records, the N its fit will see.")
        records = (RecordCount(STANDIN_ROWS, public=False) if num_records is None else
                   RecordCount(_v.whole(minimum=1, num_records=num_records), public=True))
        plan = self._plan(schema, records, epsilon=epsilon, delta=delta, preset=preset, max_seconds=None,
                          seeded=False)
        return _budget.minimum(self, plan, mesh)

    def _plan(self, schema: data_lib.Schema, records: RecordCount, *, epsilon, delta, preset,
              cut: Mapping[str, int] | None = None, **run) -> Plan:
        """The plan (see :meth:`plan`); ``cut``: phase -> steps of a schedule a time budget cut
        before any private row was read (``_budget.cut_steps``), planned and calibrated like any
        schedule (a preset keeps its noise)."""
        _check_target(epsilon, delta, preset)
        _v.instance(data_lib.Schema, "a dpgen_jax.data.Schema", schema=schema)
        model_schema = data_lib.model_schema(schema)  # a column declared missing: value + indicator
        self._check_schema(model_schema)
        config = self.resolve_config(model_schema, preset)
        private = not (epsilon is not None and math.isinf(epsilon))
        planned = self._target_phases(config, model_schema, records, private, epsilon, delta)
        phases, fixed = self._stage(config).plan(model_schema, planned,
                                                 private=private, epsilon=epsilon, delta=delta,
                                                 accountant=self.ACCOUNTANT)
        uncut = None
        if cut:
            cut = self._cut_steps(config, model_schema, cut)
            uncut = {p.name: p.steps for p in privacy.flat_phases(phases) if p.name in cut}
            phases = privacy.with_steps(phases, cut)
        if private and epsilon is not None:
            phases = self._calibrate(config, model_schema, phases, float(epsilon), delta, fixed=fixed)
        return Plan(self.METHOD, config, tuple(phases), records, float(delta),
                    None if epsilon is None else float(epsilon), preset, private, self.ACCOUNTANT,
                    self.USES_NUM_RECORDS, schema, self.flags, **run, uncut_steps=uncut,
                    paper_accountant=self._paper_accountant(config, float(delta)))

    # -- training ----------------------------------------------------------------------------
    def fit(self, df: pd.DataFrame, schema: data_lib.Schema, *, epsilon: float | None = None,
            delta: float = 1e-5, preset: str | None = None, num_records: int | None = None,
            seed: int | None = None, progress: bool = False,
            max_seconds: float | None = None,
            allow_data_derived_schema: bool = False, checkpoint_dir=None,
            resume: bool = False, checkpoint_every: int = 10,
            mesh: Any = None) -> Synthesizer:
        """Trains on the private table ``df`` under (epsilon, delta)-DP.

        Args:
            df: the private table; its columns must match ``schema``.
            schema: public schema (``data.Schema``); never fitted on ``df``.
            epsilon: target epsilon under the headline accountant (``ACCOUNTANT``); the noise is calibrated
                before training. ``math.inf``: non-private (no clipping, no noise).
            delta: target delta.
            preset: instead of ``epsilon``, one of the method's published settings.
            num_records: a public number of records N (or a public estimate). The sampling rates
                are q = B / N and every gradient sum is divided by B = q * N; the private row
                count is then used only as the sampler's scan length and appears nowhere in the
                report. Default None: a method that sets its rates from the record count
                (``USES_NUM_RECORDS``) uses the private row count and the report states that it is
                treated as public; a method that uses no record count publishes nothing about it
                (no report sentence, warning, progress bar or file names it, and the report says
                that delta was not checked against 1/n).
            seed: makes the run reproducible (the report then says it is not fit for release);
                None draws every key from OS entropy.
            progress: progress bars with the phase, the steps and the epsilon spent.
            max_seconds: a time budget for training. Before any private row is read, the
                method's training is timed on a stand-in table drawn from the public schema (once
                per process and public setting); a budget below what the method needs at least
                (that time, part of the budget, and the run's fixed costs) is refused, naming the
                minimum. The budget becomes a number of units per phase, earlier phases first
                (compiled chunks shortened to a twentieth of the budget); the accounted steps it
                cuts become the plan, its noise calibrated to them for a target epsilon (a preset
                keeps its noise), so the cut depends on no private row and the target is spent. A
                warning and the report say what was cut (unaccounted work too, e.g. MST's final
                estimate). The fit ends near ``max_seconds``, not exactly: the stand-in's time is
                an estimate. With ``checkpoint_dir`` it pauses the fit instead, once the time is
                spent (:class:`FitPaused`; nothing is released). See docs/privacy.md.
            allow_data_derived_schema: the explicit opt-out for a schema read from the data
                (``schema.source == "data-derived"``, e.g. ``data.infer_schema``). Without it such a
                schema is refused; with it the fit runs and its report says the result is not
                end-to-end differentially private.
            checkpoint_dir: a directory for private, resumable checkpoints (``docs/checkpoints.md``):
                the secret key, every phase's state and a manifest, saved with orbax every
                ``checkpoint_every`` compiled chunks and at the end of each phase. The directory is
                SECRET (never part of a release); delete or protect it after training. Only
                methods with ``CHECKPOINTS`` accept it.
            resume: continue the training saved in ``checkpoint_dir`` (same data, method,
                configuration, target, schema, N and seed, checked); every mechanism before the
                saved point is replayed with the same keys or restored, and the report counts each
                step once.
            checkpoint_every: compiled chunks of a phase between two checkpoints.
            mesh: a one-axis ``jax.sharding.Mesh`` (``dpsgd.data_mesh()``): every DP-SGD phase
                runs data-parallel over its devices (``dpsgd.data_parallel``), with the same result
                and the same privacy accounting as on one device (docs/scaling.md).

        Returns:
            ``self``, fitted.

        Raises:
            ValueError: bad arguments, a frame that does not match the schema, an unreachable
                epsilon, a ``max_seconds`` below the method's minimum, a data-derived schema
                without ``allow_data_derived_schema=True``, a ``checkpoint_dir`` for a method
                without checkpoints, or a resume of another training (the message lists the
                differences).
            FitPaused: a checkpointed fit spent its ``max_seconds``; its state is saved and
                nothing is released (resume it).
            ImportError: the method needs an optional package that is not installed
                (:meth:`unavailable_reason` says which).
        """
        _check_target(epsilon, delta, preset)
        if max_seconds is not None:
            _v.non_negative(max_seconds=max_seconds)
        reason = self.unavailable_reason()
        if reason is not None:
            raise ImportError(f"{self.METHOD} cannot fit here: {reason}")
        _v.instance(data_lib.Schema, "a dpgen_jax.data.Schema", schema=schema)
        if schema.source == "data-derived" and allow_data_derived_schema is not True:
            raise ValueError(
                "The schema is data-derived (its kinds, categories and bounds were read from the "
                "data), so the result would not be end-to-end differentially private; declare a "
                "public schema (docs/data.md) or pass allow_data_derived_schema=True to accept "
                "that (the privacy report then says so).")
        frame = data_lib.to_model_frame(df, schema)  # checks the frame; methods see the model schema
        # N: the user's public count, else the private row count (treated as public by a method
        # that uses it, kept to itself by one that does not: RecordCount.shown, privacy rule 10).
        records = (RecordCount(_v.whole(minimum=1, num_records=num_records), public=True)
                   if num_records is not None else RecordCount(len(frame), public=False))
        target = dict(epsilon=epsilon, delta=delta, preset=preset,
                      max_seconds=None if max_seconds is None else float(max_seconds),
                      seeded=seed is not None)
        plan = self._plan(schema, records, **target)
        start = time.monotonic()
        # A time budget without checkpoints: units per phase fixed now, before any private row is
        # read, from public values and the method's time on a public stand-in (docs/privacy.md);
        # the accounted steps it cuts become the plan, its noise calibrated to them.
        budget, run_flags = (_budget.measure(self, plan, float(max_seconds), mesh)
                             if max_seconds is not None and checkpoint_dir is None else (None, self.flags))
        bars = {} if budget is None else _budget.runs(self, plan, mesh)
        cut = {} if budget is None else _budget.cut_steps(budget, plan.phases, bars)
        if cut:
            with warnings.catch_warnings():  # the plan's warnings were given by the first planning
                warnings.simplefilter("ignore")
                plan = self._plan(schema, records, cut=cut, **target)
        x = jax.numpy.asarray(self._encoder(plan.model_schema, plan.config).encode(frame))
        ckpt, run_key = _checkpoint.open_for_fit(self, plan, x, checkpoint_dir=checkpoint_dir,
                                                 resume=resume, seed=seed, every=checkpoint_every)
        plan = dataclasses.replace(plan, seeded=run_key.seeded)
        bar = Progress(progress, plan)
        if budget is not None:
            hooks = Hooks(progress=lambda name, unit="step", phases=(): budget.progress(
                name, bar.phase(name, unit, phases)),
                          should_stop=budget.stop(), stop_test=budget.stop, flags=run_flags)
        else:  # no budget, or a checkpointed fit that pauses once the time is spent
            deadline = math.inf if max_seconds is None else start + float(max_seconds)
            hooks = Hooks(progress=bar.phase, should_stop=lambda: time.monotonic() >= deadline,
                          checkpointer=ckpt, flags=self.flags)
        epsilon, key = None, dpsgd.shared_key(run_key.key)

        def train(key: jax.Array) -> Release:
            with dpsgd.data_parallel(mesh):  # multi-host: every process must use process 0's key
                return self._train(dataclasses.replace(plan, flags=hooks.flags), x, key, hooks)

        try:
            release = self._stage(plan.config).train(plan, frame, key, hooks, train)
            if budget is not None:
                release = _budget.note_unaccounted_cuts(release, budget, plan, bars)
            resumed = ckpt is not None and ckpt.resumed is not None
            self._report = plan.report(release, resumed=resumed)
            epsilon = self._report.get("epsilon")
        finally:
            bar.close(epsilon)
            if ckpt is not None:
                ckpt.close()
        self.fitted_plan, self.fitted_release = plan, release
        self._release_checked = False
        return self

    # -- release -----------------------------------------------------------------------------
    def _require_fitted(self) -> None:
        if self.fitted_release is None:
            raise RuntimeError(f"This {type(self).__name__} is not fitted; call fit() or load() first.")

    @property
    def model_schema(self) -> data_lib.Schema:
        """The schema the method models (``data.model_schema(self.schema)``): each continuous column
        declared ``missing=True`` followed by its missingness indicator; ``self.schema`` otherwise."""
        self._require_fitted()
        return data_lib.model_schema(self.schema)

    @property
    def released(self) -> dict[str, PyTree]:
        """The released parameters (name -> pytree), as saved."""
        self._require_fitted()
        return self.fitted_release.arrays

    def sample(self, n: int, seed: int | None = None, mode: str | None = None) -> pd.DataFrame:
        """``n`` synthetic rows decoded to the schema (post-processing of the released model).

        Args:
            n: number of rows, a positive integer.
            seed: reproducible sampling; None draws the key from OS entropy.
            mode: how discrete columns are decoded (``"argmax"`` or ``"sample"``, see
                ``data.TableEncoder.decode``); None: :meth:`default_decode_mode`.
        """
        n = self._check_sample_size(n)
        rows = self._rows(n, seed, mode)
        if n >= _degenerate.MIN_ROWS and not getattr(self, "_release_checked", False):
            # once per fitted model, on the synthetic rows alone (no privacy cost)
            self._release_checked = True
            one_way = self.RELEASES_ONE_WAY or self._stage(self.fitted_config).releases_one_way
            _degenerate.check_release(rows, self.schema, method=self.METHOD, bounds=not one_way)
        return rows

    def _rows(self, n: int, seed: int | None, mode: str | None, **options) -> pd.DataFrame:
        """``n`` rows of the user's schema drawn from the release (``options`` go to
        :meth:`_sample_frame`), post-processed by the fit's stage (:meth:`_stage`: matched to the
        released one-way marginals when the fit had the neural generators' one-way stage)."""
        mode = mode or self.default_decode_mode()
        frame = self._stage(self.fitted_config).sample(
            self.model_schema, self.fitted_release.statistics, dpsgd.make_key(seed).key,
            lambda key: self._sample_frame(n, key, mode, **options))
        return data_lib.from_model_frame(frame, self.schema)

    def _check_sample_size(self, n) -> int:
        self._require_fitted()
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
            raise ValueError(f"n={n!r} is not a positive integer: pass the number of rows to sample.")
        return int(n)

    def default_decode_mode(self) -> str:
        """How :meth:`sample` decodes by default: the fitted configuration's ``decode`` field when
        it has one (e.g. DP-auto-GAN's), else the method's ``DECODE_MODE``."""
        self._require_fitted()
        return getattr(self.fitted_config, "decode", None) or self.DECODE_MODE

    def privacy_report(self) -> dict:
        """The privacy report of the last fit (or of the loaded file)."""
        self._require_fitted()
        return self._report

    def fitted_phases(self) -> list:
        """The accounted phases of the last fit (or of the loaded file) as run: calibrated noise,
        clip norms resolved at train time, executed steps; what :meth:`privacy_report` accounts
        for."""
        self._require_fitted()
        if self.fitted_plan.phases is None:
            raise RuntimeError("This release file was written before plans were saved in it: it has no "
                               "phase objects; its privacy_report() lists them.")
        return self.fitted_plan.executed_phases(self.fitted_release)

    def save(self, path) -> None:
        """Writes the released arrays and statistics, schema, configuration, plan, privacy report
        and versions.

        Nothing else: no optimizer state, no critic or discriminator, no key, no private row (the
        plan holds N only where it may be shown).
        """
        self._require_fitted()
        _release.write_model(path, self)

    @classmethod
    def load(cls, path) -> Synthesizer:
        """Reads a release file; on the base class it dispatches on the method stored in it.

        Raises:
            FileNotFoundError: no file.
            ValueError: not a dpgen_jax release, corrupt, another format version, a method other
                than ``cls``'s, or arrays that do not match the stored configuration.
        """
        return _release.read_model(path, None if cls is Synthesizer else cls)

__all__ = [
    "Flags",
    "Plan",
    "Synthesizer",
    "SynthesizerConfig",
    "RecordCount",
    "Release",
    "available",
    "create",
    "get",
    "load",
    "register",
]
