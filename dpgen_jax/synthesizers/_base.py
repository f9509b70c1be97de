"""The shared skeleton of every synthesizer: configuration, planning, fit, report, release.

A method supplies pure pieces and this module composes them the same way for all:

* a frozen configuration dataclass (a :class:`SynthesizerConfig`) of public hyperparameters;
* ``_phases(config, schema, num_records, private)``: the privacy phases of the planned schedule,
  from public values only (no data);
* ``_train(config, x, key, ctx)``: the training phases on the encoded private rows, each run from
  its accounted phase (``ctx.phase(name)``: calibrated noise, planned steps), returning the
  released parameters and the steps actually executed per phase;
* ``_sample_encoded(n, key)`` (or ``_sample_frame``) and ``_release_shapes(config, width)``.

:meth:`Synthesizer.plan` resolves the configuration (defaults for the schema, the user's
overrides, a preset) and calibrates the phases' noise to a target epsilon before any data is
touched; :meth:`Synthesizer.fit` runs that plan's phases; the report is
:func:`dpgen_jax.privacy.report` of the same phases with the *executed* step counts. The noise
lives in the phases only: a configuration's noise fields are the configured values the
calibration starts from (their ratios are kept), never written back. See ``docs/architecture.md``.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, NamedTuple

import jax
import numpy as np
import pandas as pd

from dpgen_jax._typing import PyTree
from dpgen_jax import data as data_lib
from dpgen_jax import dpsgd, privacy
from dpgen_jax.synthesizers import _checkpoint, _fit_report, _release
from dpgen_jax.synthesizers._config import Flags, SynthesizerConfig, split_overrides
from dpgen_jax.synthesizers._progress import Progress, ProgressFn
from dpgen_jax.synthesizers._registry import available, create, get, register  # noqa: F401  (re-exported)



# ----------------------------------------------------------------------------- plan and results


class Plan(NamedTuple):
    """What a fit will do, decided from public values only (no private row is read).

    Attributes:
        config: the resolved configuration (noise fields as configured).
        phases: the accounted phases with the planned step counts and the calibrated noise: what
            the fit runs (``FitContext.phase``).
        num_records: the number of records N the sampling rates refer to.
        delta: target delta.
        target_epsilon: the requested epsilon (None for a preset, ``inf`` for non-private).
        preset: the preset name or None.
        private: False for ``epsilon=inf`` (no clipping, no noise, no guarantee).
        accountant: the method's headline accountant (``Synthesizer.ACCOUNTANT``): ``"pld"``, or
            ``"rdp"`` (improved conversion) for methods with phases only RDP interprets.
    """

    config: SynthesizerConfig
    phases: list
    num_records: int
    delta: float
    target_epsilon: float | None
    preset: str | None
    private: bool
    accountant: str = "pld"

    def epsilon(self, accountant: str | None = None, conversion: str = "improved") -> float:
        """The epsilon of the planned schedule (``inf`` when not private); default: the headline
        accountant of the plan."""
        return privacy.epsilon(self.phases, self.delta, accountant=accountant or self.accountant,
                               conversion=conversion)


class TrainResult(NamedTuple):
    """What a method's ``_train`` returns.

    Attributes:
        config: the configuration actually used (e.g. with a clip norm resolved to a number; noise
            fields as configured, the noise used is in the phases).
        released: name -> parameter pytree, everything that goes into the release file.
        steps: phase name -> steps actually executed (what the accountant is given).
        seconds: phase name -> wall seconds of training.
        assumptions: the method's sentences for the privacy report.
        state: method-specific values kept on the object after fit but never released.
    """

    config: SynthesizerConfig
    released: dict[str, PyTree]
    steps: dict[str, int]
    seconds: dict[str, float]
    assumptions: list[str]
    state: dict[str, Any] = {}


@dataclasses.dataclass
class FitContext:
    """Public facts a method's ``_train`` may use, and the progress callbacks.

    Attributes:
        num_records: N, the number of records the sampling rates refer to: the user's public
            ``num_records``, or the row count (treated as public by a method that uses it; for a
            method with ``USES_NUM_RECORDS = False`` only a stand-in for the counts it releases,
            which must reach no output).
        private: False for a non-private (``epsilon=inf``) run.
        plan: the plan being executed.
        schema: the public schema.
        progress: ``progress(phase_name)`` returns a callback ``(done, total)`` or None.
        should_stop: called between compiled chunks; True once the fit's time budget
            (``max_seconds``) is spent, and a phase must then end (its executed steps are what the
            report accounts for).
        checkpointer: the fit's private checkpoints (``fit(checkpoint_dir=...)``), or None.
        flags: the speed settings (:class:`Flags`, the method's defaults resolved).
    """

    num_records: int
    private: bool
    plan: Plan
    schema: data_lib.Schema
    progress: Callable[[str], ProgressFn | None]
    should_stop: Callable[[], bool]
    checkpointer: _checkpoint.Checkpointer | None = None
    flags: Flags = Flags()

    def checkpoint(self, name: str):
        """The checkpoint hook of training phase ``name`` for ``dpsgd.run_phase(checkpoint=...)``
        (None when the fit keeps no checkpoints). Phase names are unique within a method."""
        return None if self.checkpointer is None else self.checkpointer.phase(name)

    resolved: dict[str, privacy.Phase] = dataclasses.field(default_factory=dict)

    def phase(self, name: str) -> privacy.Phase:
        """The accounted phase ``name``: the plan's (calibrated noise, planned steps, the rate over
        the public N; a ``NonPrivatePhase`` with the same schedule in a non-private fit), with a
        clip norm set by :meth:`with_clip_norm`. A phase is run from it (``dpsgd.make_dp_step(loss,
        optimizer, phase, scan_rows=m)``), so what runs is what is accounted."""
        if name in self.resolved:
            return self.resolved[name]
        for p in privacy.flat_phases(self.plan.phases):
            if p.name == name:
                return p
        raise KeyError(f"The plan has no phase {name!r}; its phases are "
                       f"{[p.name for p in privacy.flat_phases(self.plan.phases)]}.")

    def with_clip_norm(self, name: str, clip_norm: float) -> privacy.Phase:
        """The one hook for a clip norm chosen at train time on public rows (e.g.
        ``median_grad_norm_after``): phase ``name`` with clip norm C, recorded so that the report
        accounts for (and states) the phase as run. Call it before the phase's first step."""
        self.resolved[name] = self.phase(name).with_clip_norm(clip_norm)
        return self.resolved[name]

    def phases(self) -> list:
        """The plan's phases with every clip norm resolved so far (planned steps)."""
        return privacy.map_phases(self.plan.phases, lambda p: self.resolved.get(p.name, p))

    def phase_args(self, name: str) -> dict[str, Any]:
        """What every training-phase function takes from the fit: the ``progress`` callback of
        phase ``name``, ``should_stop``, its ``checkpoint`` hook and the speed ``flags``."""
        return {"progress": self.progress(name), "should_stop": self.should_stop,
                "checkpoint": self.checkpoint(name), "flags": self.flags}


def load(path) -> Synthesizer:
    """Loads a release file of any registered method (dispatching on the method it holds)."""
    return Synthesizer.load(path)


# ----------------------------------------------------------------------------- the base class


def _check_target(epsilon, delta, preset) -> None:
    if (epsilon is None) == (preset is None):
        raise ValueError("Give exactly one of epsilon=<target or math.inf> or preset=<name> "
                         f"(got epsilon={epsilon!r}, preset={preset!r}).")
    if epsilon is not None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating, np.integer)):
            raise TypeError(f"Expected epsilon={epsilon!r} to be a number (or math.inf).")
        if not epsilon > 0:
            raise ValueError(f"Expected epsilon={epsilon!r} to be > 0 (or math.inf).")
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.floating)) or not 0 < delta < 1:
        raise ValueError(f"Expected delta={delta!r} in (0, 1).")


def _check_num_records(num_records) -> int:
    if isinstance(num_records, bool) or not isinstance(num_records, (int, np.integer)) or num_records < 1:
        raise ValueError(f"Expected num_records={num_records!r} to be a positive integer.")
    return int(num_records)


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
    ``CHECKPOINTS`` (True for a method whose ``_train`` passes every phase its ``ctx.checkpoint``
    hook, so that ``fit(checkpoint_dir=...)`` can resume it), ``FLAGS`` (the speed settings the
    method reads, with its defaults; ``ctx.flags`` and ``ctx.phase_args`` pass them on) and
    ``USES_NUM_RECORDS`` (False for a method whose mechanisms use
    no record count, e.g. noisy histograms normalised by their own noisy total).

    Attributes:
        config: the user's configuration (None: the method's default for the schema).
        overrides: the user's field overrides on top of it.
        flags: the speed settings of its fits (:class:`Flags`, the method's defaults resolved).
        fitted_config: the configuration of the last fit (or of the loaded file).
        schema: the schema of the last fit.
        train_seconds: phase -> seconds of the last fit.
    """

    METHOD: ClassVar[str]
    DESCRIPTION: ClassVar[str] = ""
    CONFIG: ClassVar[type[SynthesizerConfig]]
    PRESETS: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    DECODE_MODE: ClassVar[str] = "argmax"
    ACCOUNTANT: ClassVar[str] = "pld"
    USES_NUM_RECORDS: ClassVar[bool] = True
    CHECKPOINTS: ClassVar[bool] = False
    FLAGS: ClassVar[Flags] = Flags()  # the speed settings the method reads, with their defaults

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why the method cannot fit in this environment (a missing optional package), or None."""
        return None

    def __init__(self, config: SynthesizerConfig | None = None, *, flags: Flags | None = None,
                 **overrides):
        if config is not None and not isinstance(config, self.CONFIG):
            raise TypeError(f"Expected config to be a {self.CONFIG.__name__}, got {type(config).__name__}.")
        if flags is not None and not isinstance(flags, Flags):
            raise TypeError(f"Expected flags to be a synthesizers.Flags, got {type(flags).__name__}.")
        self.config = config.validate() if config is not None else None
        overrides, flag_values = split_overrides(overrides, self.CONFIG)
        self.flags: Flags = (flags or Flags()).replace(**flag_values).over(self.FLAGS, self.METHOD)
        self.overrides = dict(overrides)
        if overrides:  # fail early on unknown fields and bad values
            base = config if config is not None else self.CONFIG()
            base.replace(**overrides).validate()
        self.fitted_config: SynthesizerConfig | None = None
        self.schema: data_lib.Schema | None = None
        self.train_seconds: dict[str, float] = {}
        self._released: dict[str, PyTree] | None = None
        self._report: dict | None = None
        self._state: dict[str, Any] = {}
        self._fitted_phases: list | None = None

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

    @abc.abstractmethod
    def _train(self, config, x: jax.Array, key: jax.Array, ctx: FitContext) -> TrainResult:
        """Trains on the encoded private rows ``x`` (m, width) with the secret ``key``."""

    def _sample_encoded(self, n: int, key: jax.Array) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} samples frames directly.")

    def _sample_frame(self, n: int, key: jax.Array, mode: str, **options) -> pd.DataFrame:
        """Decoded rows; ``options`` go to the method's ``_sample_encoded`` (e.g. GS-WGAN's
        ``params`` of a kept snapshot)."""
        k_gen, k_dec = jax.random.split(key)
        arr = self._sample_encoded(n, k_gen, **options)
        return self._encoder(self.model_schema, self.fitted_config).decode(arr, mode=mode, key=k_dec)

    @abc.abstractmethod
    def _release_shapes(self, config, schema: data_lib.Schema) -> dict[str, PyTree]:
        """Abstract shapes (``jax.eval_shape``) of every released group, to check loaded files."""

    def _calibrate(self, config, schema: data_lib.Schema, phases: list, epsilon: float, delta: float) -> list:
        """Calibrated phases for a target; default: one common factor on every noise multiplier."""
        return privacy.calibrate(phases, target_epsilon=epsilon, delta=delta, accountant=self.ACCOUNTANT)

    def _paper_accounting(self, config, phases: list, delta: float, report: dict) -> dict:
        """The published accounting of the method's paper, for comparison (label and epsilon)."""
        return {"label": "RDP with the classic conversion (the papers' accounting)",
                "epsilon": report["epsilon_by_accountant"].get("rdp_classic")}

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
            values = dict(self.PRESETS[preset])
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
        _check_target(epsilon, delta, preset)
        if not isinstance(schema, data_lib.Schema):
            raise TypeError(f"Expected schema to be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
        schema = data_lib.model_schema(schema)  # a column declared missing: its value + indicator
        self._check_schema(schema)
        n = _check_num_records(num_records)
        config = self.resolve_config(schema, preset)
        private = not (epsilon is not None and math.isinf(epsilon))
        phases = self._phases(config, schema, n, private)
        if private and epsilon is not None:
            phases = list(self._calibrate(config, schema, phases, float(epsilon), delta))
        return Plan(config, phases, n, float(delta), None if epsilon is None else float(epsilon),
                    preset, private, self.ACCOUNTANT)

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
            max_seconds: a time budget for training. Once it is spent, every remaining phase stops
                after its current compiled chunk (each phase runs at least one chunk); the report
                accounts for the steps actually executed, and a warning says the schedule was cut.
                With ``checkpoint_dir`` it pauses the fit instead (:class:`FitPaused`).
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
                epsilon, a data-derived schema without ``allow_data_derived_schema=True``, a
                ``checkpoint_dir`` for a method without checkpoints, or a resume of another
                training (the message lists the differences).
            FitPaused: a checkpointed fit spent its ``max_seconds``; its state is saved and
                nothing is released (resume it).
            ImportError: the method needs an optional package that is not installed
                (:meth:`unavailable_reason` says which).
        """
        _check_target(epsilon, delta, preset)
        reason = self.unavailable_reason()
        if reason is not None:
            raise ImportError(f"{self.METHOD} cannot fit here: {reason}")
        if not isinstance(schema, data_lib.Schema):
            raise TypeError(f"Expected schema to be a dpgen_jax.data.Schema, got {type(schema).__name__}.")
        if schema.source == "data-derived" and allow_data_derived_schema is not True:
            raise ValueError(
                "The schema is data-derived (its kinds, categories and bounds were read from the "
                "data), so the result would not be end-to-end differentially private; declare a "
                "public schema (docs/data.md) or pass allow_data_derived_schema=True to accept "
                "that (the privacy report then says so).")
        user_schema = schema
        df = data_lib.to_model_frame(df, schema)  # checks the frame; the methods see the model schema
        schema = data_lib.model_schema(schema)
        self._check_schema(schema)
        public_n = num_records is not None
        if public_n:
            _check_num_records(num_records)
        m = len(df)
        n = int(num_records) if public_n else m
        # Whether n may reach an output (rule 10): the user's N, or the row count of a method that
        # uses it and states that it is treated as public. For a method that uses no record count,
        # fitted without num_records, n is the private count, passed on only as a stand-in.
        n_is_public = public_n or self.USES_NUM_RECORDS
        plan = self.plan(schema, n, epsilon=epsilon, delta=delta, preset=preset)
        x = jax.numpy.asarray(self._encoder(schema, plan.config).encode(df))
        if max_seconds is not None and (isinstance(max_seconds, bool) or not max_seconds >= 0):
            raise ValueError(f"Expected max_seconds={max_seconds!r} to be a number >= 0 or None.")
        ckpt, run_key = _checkpoint.open_for_fit(
            self, plan, schema, x, checkpoint_dir=checkpoint_dir, resume=resume, seed=seed,
            every=checkpoint_every, n=n, public_n=public_n, preset=preset, max_seconds=max_seconds)
        bar = Progress(progress, plan, show_epsilon=n_is_public)
        deadline = math.inf if max_seconds is None else time.monotonic() + float(max_seconds)
        ctx = FitContext(num_records=n, private=plan.private, plan=plan, schema=schema,
                         progress=bar.phase, should_stop=lambda: time.monotonic() >= deadline,
                         checkpointer=ckpt, flags=self.flags)
        try:
            with dpsgd.data_parallel(mesh):  # multi-host: every process must use process 0's key
                result = self._train(plan.config, x, dpsgd.shared_key(run_key.key), ctx)
        finally:
            bar.close()
            if ckpt is not None:
                ckpt.close()
        planned = ctx.phases()
        executed = privacy.with_steps(planned, result.steps)
        report = _fit_report.fit_report(self, plan, result, user_schema, executed, planned, n=n, public_n=public_n,
                                        n_is_public=n_is_public, preset=preset, max_seconds=max_seconds,
                                        resumed=ckpt is not None and ckpt.resumed is not None,
                                        seeded=run_key.seeded)
        self.fitted_config, self.schema, self._report = result.config, user_schema, report
        self._released, self._state = result.released, dict(result.state)
        self.train_seconds = dict(result.seconds)
        self._fitted_phases = executed
        return self

    # -- release -----------------------------------------------------------------------------
    def _require_fitted(self) -> None:
        if self._released is None:
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
        return self._released

    def sample(self, n: int, seed: int | None = None, mode: str | None = None) -> pd.DataFrame:
        """``n`` synthetic rows decoded to the schema (post-processing of the released model).

        Args:
            n: number of rows, a positive integer.
            seed: reproducible sampling; None draws the key from OS entropy.
            mode: how discrete columns are decoded (``"argmax"`` or ``"sample"``, see
                ``data.TableEncoder.decode``); None: :meth:`default_decode_mode`.
        """
        frame = self._sample_frame(self._check_sample_size(n), dpsgd.make_key(seed).key,
                                   mode or self.default_decode_mode())
        return data_lib.from_model_frame(frame, self.schema)

    def _check_sample_size(self, n) -> int:
        self._require_fitted()
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
            raise ValueError(f"Expected n={n!r} to be a positive integer.")
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
        """The accounted phases of the last fit as run (calibrated noise, clip norms resolved at
        train time, executed steps): what :meth:`privacy_report` accounts for. A loaded model
        has only the report."""
        self._require_fitted()
        if self._fitted_phases is None:
            raise RuntimeError("A loaded model has no phase objects; its privacy_report() lists them.")
        return list(self._fitted_phases)

    def save(self, path) -> None:
        """Writes the released parameters, schema, configuration, privacy report and versions.

        Nothing else: no optimizer state, no critic or discriminator, no key, no private row.
        """
        self._require_fitted()
        _release.save_release(path, self.METHOD, self._released, {
            "config": self.fitted_config.to_dict(), "schema": self.schema.to_dict(),
            "privacy_report": self._report})

    @classmethod
    def load(cls, path) -> Synthesizer:
        """Reads a release file; on the base class it dispatches on the method stored in it.

        Raises:
            FileNotFoundError: no file.
            ValueError: not a dpgen_jax release, corrupt, another format version, a method other
                than ``cls``'s, or arrays that do not match the stored configuration.
        """
        groups, meta = _release.load_release(path, None if cls is Synthesizer else cls.METHOD)
        target = get(meta["method"]) if cls is Synthesizer else cls
        try:
            config = target.CONFIG.from_dict(meta["config"]).validate()
            schema = data_lib.Schema.from_dict(meta["schema"])
            report = meta["privacy_report"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{str(path)!r} has an invalid {target.METHOD} record: {exc}") from exc
        model = target(config)
        expected = model._release_shapes(config, data_lib.model_schema(schema))
        for name, want in expected.items():
            got = groups.get(name)
            same = got is not None and jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
            if not same or any(np.shape(a) != tuple(b.shape) for a, b in
                               zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want))):
                raise ValueError(f"{str(path)!r}: the saved {name} does not match its configuration.")
        model.fitted_config, model.schema, model._report = config, schema, report
        model._released = {k: jax.tree_util.tree_map(jax.numpy.asarray, groups[k]) for k in expected}
        return model


__all__ = [
    "FitContext",
    "Flags",
    "Plan",
    "Synthesizer",
    "SynthesizerConfig",
    "TrainResult",
    "available",
    "create",
    "get",
    "load",
    "register",
]
