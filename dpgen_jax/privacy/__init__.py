"""Privacy accounting: phases as ``dp_accounting`` events, composition, calibration, report.

- :class:`DPSGDPhase`, :class:`GaussianPhase`, :class:`ExponentialMechanismPhase`,
  :class:`ShardedSanitizerPhase`, :class:`NonPrivatePhase`, :class:`ParallelPhases` (parallel
  composition over disjoint groups): the public
  parameters of each way a run touches the private data. A phase kind owns its facts
  (:class:`Phase`): ``.event()`` gives the dp_accounting event, ``.noise_std`` the std of its
  Gaussian noise (:func:`noise_std_of`, the one place sigma x sensitivity is computed), and it
  states the accountants that interpret it; its report prose (:func:`prose_of`: the mechanism's
  name, assumption sentence and floating-point realisation under its ``KIND``) is one table.
  Adding a phase kind touches its own module, its prose entry, this package's imports, its test
  and the docs (docs/architecture.md, "Adding a method, a metric, a phase kind, a noise sampler").
  :func:`batch_rate` is the one rule deriving a sampling rate q = B / N from a batch size.
- :func:`epsilon`: all phases composed (one ``ComposedDpEvent``) and converted once; PLD (default,
  the headline) or RDP with the improved or the papers' classic conversion.
- :func:`calibrate`: one common factor on every noise multiplier to meet a target epsilon.
- :func:`report`: a JSON-serialisable report with every phase, epsilon by accountant and the
  assumptions; :func:`seeded_assumption` is the shared sentence for seeded runs.
- :data:`RDP_ORDERS`, :data:`PAPER_RDP_ORDERS`, :func:`rdp_curve`, :func:`classic_conversion`,
  :func:`pld_discretization_interval`: the accounting details, documented and testable;
  :data:`PLD_EPSILON_MEMO`: the bounded memo of PLD evaluations (results unaffected).
- :func:`zcdp_rho`, :func:`cks_epsilon`: the zCDP accounting of the marginal methods' papers (MST,
  AIM, GEM), reported beside the headline.

Example:
    >>> from dpgen_jax import privacy
    >>> phases = [privacy.DPSGDPhase("autoencoder", 64 / 32561, 2.5, 10_000),
    ...           privacy.DPSGDPhase("critic", 128 / 32561, 7.5, 15_000)]
    >>> round(privacy.epsilon(phases, 1e-5, accountant="rdp", conversion="classic"), 3)
    0.508
"""

from dpgen_jax.privacy._accounting import (
    ACCOUNTANTS,
    CONVERSIONS,
    RDP_ORDERS,
    branches,
    composed_event,
    epsilon,
    flat_phases,
    map_phases,
    with_steps,
    neighbouring_relation,
    pld_supported,
    rdp_curve,
)
from dpgen_jax.privacy._calibrate import calibrate
from dpgen_jax.privacy._parallel import ParallelPhases
from dpgen_jax.privacy._exponential import ExponentialMechanismPhase
from dpgen_jax.privacy._phases import (
    DPSGDPhase,
    GaussianPhase,
    NonPrivatePhase,
    Phase,
    batch_rate,
    noise_std_of,
)
from dpgen_jax.privacy._prose import PhaseProse, prose_of
from dpgen_jax.privacy._rdp import classic_conversion
from dpgen_jax.privacy._pld import PLD_EPSILON_MEMO, PLD_VALUE_DISCRETIZATION, pld_discretization_interval
from dpgen_jax.privacy._sharded_phase import PAPER_RDP_ORDERS, ShardedSanitizerPhase
from dpgen_jax.privacy._report import SEEDED_ASSUMPTION, format_number, format_report, report, seeded_assumption
from dpgen_jax.privacy._zcdp import cks_epsilon, zcdp_rho

__all__ = [
    "format_number",
    "format_report",
    "ACCOUNTANTS",
    "CONVERSIONS",
    "DPSGDPhase",
    "ExponentialMechanismPhase",
    "GaussianPhase",
    "NonPrivatePhase",
    "PAPER_RDP_ORDERS",
    "PLD_EPSILON_MEMO",
    "PLD_VALUE_DISCRETIZATION",
    "ParallelPhases",
    "Phase",
    "PhaseProse",
    "RDP_ORDERS",
    "SEEDED_ASSUMPTION",
    "ShardedSanitizerPhase",
    "batch_rate",
    "branches",
    "calibrate",
    "cks_epsilon",
    "classic_conversion",
    "composed_event",
    "epsilon",
    "flat_phases",
    "map_phases",
    "with_steps",
    "neighbouring_relation",
    "noise_std_of",
    "pld_discretization_interval",
    "pld_supported",
    "prose_of",
    "rdp_curve",
    "report",
    "seeded_assumption",
    "zcdp_rho",
]
