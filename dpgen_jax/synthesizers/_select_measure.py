"""Select, measure, generate: the pieces the marginal-based methods share (MST, AIM).

* ``counts``: a marginal of the private codes on the public bins (a record adds one to one cell);
  ``measure``: several marginals released with one Gaussian.
* ``exponential_mechanism``: one choice among scored candidates, probability proportional to
  exp(epsilon q / (2 Delta)), drawn by Gumbel-max.
* ``zcdp_rho`` and ``cks_epsilon``: the papers' accounting (the zCDP of every selection and
  measurement summed, converted to (epsilon, delta) by Canonne, Kamath and Steinke 2020).
* ``mbi_missing`` / ``load_mbi``: the optional graphical-model package, imported only to fit.
* ``MarginalSynthesizer``: the hooks MST and AIM have in common.

Nothing here needs ``mbi``. See ``docs/mst.md`` and ``docs/aim.md``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import warnings
from collections.abc import Iterable, Sequence
from typing import ClassVar

import jax
import numpy as np
from scipy import optimize

from dpgen_jax import dpsgd, privacy
from dpgen_jax.synthesizers._base import Synthesizer

Clique = tuple[int, ...]
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


def counts(codes: np.ndarray, sizes: Sequence[int], clique: Clique) -> np.ndarray:
    """The flattened ``clique`` marginal of ``codes`` (rows of per-column codes), float32.

    Privacy: adding or removing one record changes one cell by one (L1 and L2 sensitivity 1).
    """
    shape = tuple(sizes[j] for j in clique)
    flat = np.ravel_multi_index(tuple(codes[:, j] for j in clique), shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(np.float32)


def measure(codes: np.ndarray, sizes: Sequence[int], cliques: Sequence[Clique],
            noise_std: float | None, key: jax.Array) -> list[np.ndarray]:
    """The flattened marginals of ``cliques`` with N(0, noise_std^2) per cell (None: exact).

    Privacy: one Gaussian release; a record adds one to one cell of each marginal, so the L2
    sensitivity is sqrt(len(cliques)) and ``noise_std`` must be sigma * sqrt(len(cliques)).
    """
    tables = {f"{i:06d}": counts(codes, sizes, c) for i, c in enumerate(cliques)}
    if noise_std is not None:
        tables = dpsgd.add_gaussian_noise(tables, key, float(noise_std))
    return [np.asarray(tables[k], dtype=np.float64) for k in sorted(tables)]


def exponential_mechanism(quality: np.ndarray, epsilon: float | None, rng: np.random.Generator,
                          sensitivity: float = 1.0) -> int:
    """The index of one candidate, chosen with probability proportional to
    ``exp(epsilon * quality / (2 * sensitivity))`` (Gumbel-max: one Gumbel draw per candidate).

    ``epsilon=None`` returns the best score (a non-private run). ``sensitivity`` bounds how much
    any one score moves when one record is added or removed. Accounted as
    ``privacy.ExponentialMechanismPhase(epsilon)``: (epsilon, 0)-DP and epsilon^2 / 8-zCDP.
    """
    q = np.asarray(quality, np.float64)
    if epsilon is None:
        return int(np.argmax(q))
    return int(np.argmax(epsilon * q / (2.0 * sensitivity) + rng.gumbel(size=q.size)))


def zcdp_rho(phases: Iterable[privacy.PrivacyPhase]) -> float:
    """The summed zCDP of exponential-mechanism and Gaussian phases (rho = 1 / (2 sigma^2) per
    Gaussian release of sensitivity 1, the phase's rho per selection), times their steps."""
    return sum(p.steps * (p.rho if isinstance(p, privacy.ExponentialMechanismPhase)
                          else 1.0 / (2.0 * p.noise_multiplier**2)) for p in phases)


def cks_epsilon(rho: float, delta: float) -> float:
    """rho-zCDP to (epsilon, delta) by Canonne, Kamath and Steinke (2020, Prop. 12), minimised over
    real orders alpha > 1 (the conversion of the MST and AIM reference code)."""
    def eps(log_am1):
        a = 1.0 + math.exp(log_am1)
        return rho * a + (math.log(1 / delta) + (a - 1) * math.log(1 - 1 / a) - math.log(a)) / (a - 1)
    res = optimize.minimize_scalar(eps, bounds=(-10.0, 10.0), method="bounded", options={"xatol": 1e-10})
    return float(res.fun)


class MarginalSynthesizer(Synthesizer):
    """The hooks MST and AIM share: RDP headline (the exponential mechanism has no PLD event),
    no use of N, ``mbi`` to fit, and the papers' zCDP accounting beside the headline."""

    ACCOUNTANT = "rdp"
    USES_NUM_RECORDS = False
    PAPER_ACCOUNTING: ClassVar[str]

    @classmethod
    def unavailable_reason(cls):
        return mbi_missing(cls.__name__)

    def _paper_accounting(self, config, phases, delta, report):
        rho = zcdp_rho(phases)
        return {"label": self.PAPER_ACCOUNTING, "epsilon": cks_epsilon(rho, delta), "rho": rho}
