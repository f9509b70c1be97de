"""Published numbers, one :class:`PublishedResults` record per (paper, method, dataset).

A record maps *result paths* (dotted keys into the dict of :func:`~dpgen_jax.metrics.evaluate`,
e.g. ``"label_accuracy.synthetic"`` or ``"jsd.workclass"``) to the published value at each
epsilon, so a report can put every published number beside the one we compute under the same
key. ``write_report(..., published=...)`` takes records; ``docs/metrics.md`` lists them.

Values are in natural units: the papers' percentages and "x100" rows are converted here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def _frozen(d: Mapping[str, Any]) -> MappingProxyType:
    return MappingProxyType({k: (_frozen(v) if isinstance(v, Mapping) else v) for k, v in d.items()})


@dataclasses.dataclass(frozen=True)
class PublishedResults:
    """The published numbers of one method on one dataset, from one paper.

    Attributes:
        method: The method as the paper names it (e.g. ``"DP-auto-GAN"``).
        dataset: The dataset (e.g. ``"UCI Adult"``).
        citation: Full citation: authors, year, title (and where it appeared).
        epsilons: The epsilons of the published columns, in order.
        delta: The delta of those columns (None if the paper does not state it).
        values: ``{result path: {epsilon: value}}`` for synthetic-data numbers.
        real: ``{result path: value}`` for the paper's numbers on real data.
        sources: ``{first path component: where in the paper}`` (e.g. ``{"jsd": "Table 6"}``).
        columns: The schema columns the numbers refer to; a report refuses a result with
            other columns. None: not tied to a column set.
        notes: Sentences on protocol differences a reader needs to compare the numbers.

    Raises:
        ValueError: if a value's epsilon is not one of ``epsilons``, or a number is not finite.
    """

    method: str
    dataset: str
    citation: str
    epsilons: tuple[float, ...]
    delta: float | None
    values: Mapping[str, Mapping[float, float]]
    real: Mapping[str, float] = dataclasses.field(default_factory=dict)
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    columns: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        eps = tuple(float(e) for e in self.epsilons)
        for path, by_eps in self.values.items():
            unknown = [e for e in by_eps if float(e) not in eps]
            if unknown:
                raise ValueError(f"{self.method}: values[{path!r}] has epsilons {unknown} not in epsilons={eps}.")
            bad = [v for v in by_eps.values() if not math.isfinite(v)]
            if bad:
                raise ValueError(f"{self.method}: values[{path!r}] holds non-finite numbers {bad}.")
        object.__setattr__(self, "epsilons", eps)
        object.__setattr__(self, "values", _frozen(self.values))
        object.__setattr__(self, "real", _frozen(self.real))
        object.__setattr__(self, "sources", _frozen(self.sources))
        object.__setattr__(self, "notes", tuple(self.notes))
        if self.columns is not None:
            object.__setattr__(self, "columns", tuple(self.columns))

    @property
    def label(self) -> str:
        """Short name for tables: ``"DP-auto-GAN (Tantipongpipat et al. 2021)"``."""
        return f"{self.method} ({self.short_citation})"

    @property
    def short_citation(self) -> str:
        """``"Author et al. YEAR"`` from the citation's first author and year."""
        first = self.citation.split(",")[0].split(" and ")[0].strip()
        year = next((w.strip("().,") for w in self.citation.split() if w.strip("().,").isdigit()), "")
        many = self.citation.count(",") > 1 or " and " in self.citation.split("(")[0]
        return f"{first}{' et al.' if many else ''} {year}".strip()

    def source(self, path: str) -> str | None:
        """Where in the paper the number at ``path`` comes from."""
        return self.sources.get(path.split(".")[0])

    def at(self, path: str) -> list[float | None]:
        """The published values at ``path`` for each of :attr:`epsilons` (None where absent)."""
        by_eps = self.values.get(path, {})
        return [by_eps.get(e) for e in self.epsilons]


_EIGHT = ("workclass", "marital-status", "occupation", "relationship", "race", "sex", "native-country", "salary")
_DP_AUTO_GAN_JSD = {  # Table 6 per feature (salary row printed x100), Table 2 "All" as total
    0.36: (0.086, 0.025, 0.107, 0.042, 0.021, 0.010, 0.037, 0.00539, 0.33),
    0.51: (0.040, 0.043, 0.064, 0.035, 0.014, 0.008, 0.028, 0.00002, 0.23),
    1.01: (0.032, 0.014, 0.089, 0.011, 0.016, 0.001, 0.032, 0.00003, 0.19),
}
_DP_AUTO_GAN_KL_MU = {  # Table 7 per feature (salary row printed x100), Table 2 "All" as total
    0.36: (0.155, 0.019, 0.059, 0.036, 0.125, 0.037, 0.361, 0.02005, 0.81),
    0.51: (0.054, 0.053, 0.031, 0.027, 0.064, 0.028, 0.227, 0.00007, 0.48),
    1.01: (0.055, 0.005, 0.064, 0.006, 0.090, 0.003, 0.304, 0.00013, 0.53),
}


def _per_feature(key: str, table: dict[float, tuple[float, ...]]) -> dict[str, dict[float, float]]:
    out: dict[str, dict[float, float]] = {}
    for eps, row in table.items():
        for feature, value in zip((*_EIGHT, "total"), row, strict=True):
            out.setdefault(f"{key}.{feature}", {})[eps] = value
    return out


_ADULT_COLUMNS = (
    "age", "workclass", "education-num", "marital-status", "occupation", "relationship", "race",
    "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "salary",
)  # fmt: skip

#: DP-auto-GAN on UCI Adult: Table 3 (random-forest salary accuracy) and Tables 2, 6 and 7
#: (JSD and mu-smoothed KL of the eight features and their sum).
DP_AUTO_GAN_ADULT = PublishedResults(
    method="DP-auto-GAN",
    dataset="UCI Adult",
    citation=(
        "Tantipongpipat, Waites, Boob, Siva and Cummings (2021), \"Differentially Private "
        "Synthetic Mixed-Type Data Generation For Unsupervised Learning\", Intelligent Decision "
        "Technologies 15(4)"
    ),
    epsilons=(0.36, 0.51, 1.01),
    delta=1e-5,
    values={
        "label_accuracy.synthetic": {0.36: 0.7466, 0.51: 0.7868, 1.01: 0.7919},
        **_per_feature("jsd", _DP_AUTO_GAN_JSD),
        **_per_feature("kl_mu", _DP_AUTO_GAN_KL_MU),
    },
    real={"label_accuracy.real": 0.8453},
    sources={
        "label_accuracy": "Table 3",
        "jsd": "Table 6 per feature, Table 2 total",
        "kl_mu": "Table 7 per feature, Table 2 total",
    },
    columns=_ADULT_COLUMNS,
    notes=(
        "Random-forest accuracy: 800 trees, random_state 0, features as integer codes. The paper's "
        "real-data 0.8453 trains on 4,000 shuffled training rows and tests on the first 4,000 test "
        "rows; its synthetic numbers use all rows, as evaluate() does for both (the full split "
        "gives about 0.852 on real data).",
        "JSD and D_KL^mu are in nats over the categories present in all 48,842 real rows, summed "
        "over the eight features in total (evaluate()'s jsd and kl_mu).",
        "The epsilons are the paper's own accounting (RDP with the classic conversion).",
    ),
)

#: DP-SACTGAN on UCI Adult at epsilon 1: Table 1 (logistic-regression utility differences) and
#: Table 3 (statistical similarity).
DP_SACTGAN_ADULT = PublishedResults(
    method="DP-SACTGAN",
    dataset="UCI Adult",
    citation=(
        "Li and Wang (2023), \"A self-attention-based differentially private tabular GAN with "
        "high data utility\", arXiv:2312.13031"
    ),
    epsilons=(1.0,),
    delta=None,
    values={
        "lr_utility.difference.accuracy": {1.0: 0.04084348},
        "lr_utility.difference.auroc": {1.0: 0.026138},
        "lr_utility.difference.f1_macro": {1.0: 0.02508},
        "wasserstein_mean.mean": {1.0: 0.014889},
        "js_distance_mean.mean": {1.0: 0.101352},
        "diff_cor.value": {1.0: 0.84923},
    },
    sources={
        "lr_utility": "Table 1 (its accuracy is printed in percentage points)",
        "wasserstein_mean": "Table 3 (WD)",
        "js_distance_mean": "Table 3 (JSD)",
        "diff_cor": "Table 3 (Diff Cor)",
    },
    notes=(
        "The paper defines none of its metrics; they follow the CTAB-GAN+ evaluation code, which "
        "splits Adult 80/20 itself and fits min-max scalers on the real rows. evaluate() uses "
        "Adult's own train/test split and the public bounds, so the numbers are comparable in kind "
        "but not identical in protocol.",
        "The paper states neither delta nor its Adult layout; the CTAB-GAN+ code it follows uses 14 "
        "columns (fnlwgt and education, no education-num), not adult_schema()'s 13.",
        "The paper does not say how many runs it averages; the CTAB-GAN+ code averages five "
        "synthetic tables for Adult.",
    ),
)

#: Every record this library ships.
ALL: tuple[PublishedResults, ...] = (DP_AUTO_GAN_ADULT, DP_SACTGAN_ADULT)
