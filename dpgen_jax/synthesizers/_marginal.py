"""The marginal methods' base: what ``independent``, MST, AIM and GEM share besides the select-measure
kit (``_select_measure``).

* ``MarginalConfig``: the base of their configurations: what the user chose; d, the noise
  multipliers of a budget split and other values derived from the schema's bins are computed
  where they are used (``configured_noise``).
* ``discretizer``, ``bins_note``: the public binning of a schema by a configuration and the
  report's sentence on it.
* ``mbi_missing`` / ``load_mbi``: the optional graphical-model package, imported only to fit.
* ``MarginalSynthesizer``: the hooks MST, AIM and GEM have in common (RDP headline, no use of N,
  ``mbi`` to fit unless the method says otherwise, the papers' zCDP accounting beside the
  headline: ``privacy.zcdp_rho`` and ``privacy.cks_epsilon``).

Nothing here needs ``mbi``. See ``docs/independent.md``, ``docs/mst.md``, ``docs/aim.md`` and
``docs/gem.md``.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import warnings
from collections.abc import Mapping
from typing import ClassVar

from dpgen_jax import privacy
from dpgen_jax.data._discrete import Discretizer
from dpgen_jax.synthesizers._base import Synthesizer, SynthesizerConfig

INSTALL = 'pip install "dpgen-jax[baselines]"  (the mbi package, version >= 2.0)'


def mbi_missing(method: str) -> str | None:
    """Why ``mbi`` cannot be used by ``method`` (absent or older than 2.0), or None when it can."""
    try:
        spec = importlib.util.find_spec("mbi")
    except (ImportError, ValueError):  # e.g. sys.modules["mbi"] = None
        spec = None
    if spec is None:
        return f"the optional package mbi is not installed; {INSTALL}."
    version = importlib.metadata.version("mbi")
    if int(version.split(".")[0]) < 2:
        return f"mbi {version} is installed but {method} needs mbi >= 2.0; {INSTALL}."
    return None


def load_mbi(method: str):
    """The ``mbi`` module, or an ImportError saying why ``method`` cannot fit."""
    reason = mbi_missing(method)
    if reason is not None:
        raise ImportError(f"{method} cannot fit: {reason}")
    with warnings.catch_warnings():  # import-time notes on float32 and the compilation cache
        warnings.simplefilter("ignore")
        import mbi
    return mbi


def discretizer(config, schema) -> Discretizer:
    """The public binning of ``schema`` by a configuration's ``bins`` and ``bin_spacing`` (a
    continuous column declared missing: one coded column, its bins and a missing code)."""
    return Discretizer(schema, config.bins, config.bin_spacing)


def bins_note(disc) -> str:
    """The report's sentence on the public discretisation (a ``data.Discretizer``)."""
    return (f"Continuous columns are discretised on public bins from the schema bounds "
            f"({disc.describe()}); discrete columns over the schema's categories.")


@dataclasses.dataclass(frozen=True)
class MarginalConfig(SynthesizerConfig):
    """Base of the marginal methods' configurations: only what the user chose. d (the number of
    coded columns, ``len(discretizer(config, schema).sizes)``) and what follows from it (a budget
    split's noise multipliers, AIM's paper rounds, GEM's schedule) are derived from the public
    schema where they are used, in the method's phases and training, never written into the
    configuration."""


def configured_noise(config, defaults: Mapping[str, float]) -> dict[str, float]:
    """The configuration's noise multipliers named in ``defaults``, each one left None taking its
    value from ``defaults`` (a budget split; derived, never written into the configuration)."""
    return {k: v if getattr(config, k) is None else getattr(config, k) for k, v in defaults.items()}


class MarginalSynthesizer(Synthesizer):
    """The hooks MST, AIM and GEM share: RDP headline (the exponential mechanism has no PLD event),
    no use of N, ``mbi`` to fit, and the papers' zCDP accounting beside the headline."""

    ACCOUNTANT = "rdp"
    USES_NUM_RECORDS = False
    RELEASES_ONE_WAY = True  # every column's one-way marginal is measured and fitted
    PAPER_ACCOUNTING: ClassVar[str]
    NEEDS_MBI: ClassVar[bool] = True  # False for a method that fits without mbi (GEM)

    # A budget unit's noise multiplier grows as the square root of the number of units (about
    # R + 0.9 d): on a table of a thousand columns it passes the default cap of 100 at a usable
    # epsilon. Below the default cap the calibration is the same (the bracket doubles from 1).
    MAX_NOISE_MULTIPLIER: ClassVar[float] = 1e4

    @classmethod
    def unavailable_reason(cls):
        return mbi_missing(cls.__name__) if cls.NEEDS_MBI else None

    def _calibrate(self, config, schema, phases, epsilon, delta, fixed=()):
        return privacy.calibrate(phases, target_epsilon=epsilon, delta=delta, accountant=self.ACCOUNTANT,
                                 max_noise_multiplier=self.MAX_NOISE_MULTIPLIER, fixed=fixed)

    def _paper_accounting(self, config, phases, delta, report):
        rho = privacy.zcdp_rho(phases)
        return {"label": self.PAPER_ACCOUNTING, "epsilon": privacy.cks_epsilon(rho, delta), "rho": rho}
