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


_TANTIPONGPIPAT = (
    "Tantipongpipat, Waites, Boob, Siva and Cummings (2021), \"Differentially Private Synthetic "
    "Mixed-Type Data Generation For Unsupervised Learning\", Intelligent Decision Technologies 15(4)"
)

_ADULT_COLUMNS = (
    "age", "workclass", "education-num", "marital-status", "occupation", "relationship", "race",
    "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "salary",
)  # fmt: skip

#: DP-auto-GAN on UCI Adult: Table 3 (random-forest salary accuracy) and Tables 2, 6 and 7
#: (JSD and mu-smoothed KL of the eight features and their sum).
DP_AUTO_GAN_ADULT = PublishedResults(
    method="DP-auto-GAN",
    dataset="UCI Adult",
    citation=_TANTIPONGPIPAT,
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

# DP-auto-GAN's baselines on UCI Adult, as Tantipongpipat et al. ran them: Tables 6 (JSD) and 7
# (D_KL^mu) per feature in natural units (the salary rows are printed x100), Table 2's "All" as
# total; Table 7 with the integer parts its printing dropped (Table 2's sums need them): DP-WGAN
# workclass 1.046 (0.36), marital 1.164 and relationship 1.079 (0.51), native-country 3.298 (0.36);
# DP-VAE native-country 1.606 (0.36).
_BASELINE_TABLES = {
    "DP-WGAN": {
        "jsd": {0.36: (0.271, 0.119, 0.100, 0.190, 0.081, 0.014, 0.516, 0.0, 1.29),
                0.51: (0.119, 0.624, 0.522, 0.614, 0.053, 0.066, 0.036, 0.374, 2.41),
                1.01: (0.090, 0.136, 0.228, 0.187, 0.040, 0.006, 0.021, 0.02537, 0.73)},
        "kl_mu": {0.36: (1.046, 0.166, 0.065, 0.375, 0.262, 0.051, 3.298, 0.00002, 5.26),
                  0.51: (0.208, 1.164, 0.408, 1.079, 0.465, 0.255, 0.351, 2.46, 6.39),
                  1.01: (0.177, 0.290, 0.210, 0.321, 0.277, 0.020, 0.142, 0.09421, 1.53)},
    },
    "DP-VAE": {
        "jsd": {0.36: (0.085, 0.139, 0.066, 0.019, 0.095, 0.024, 0.361, 0.00829, 0.80),
                0.51: (0.067, 0.043, 0.048, 0.011, 0.031, 0.001, 0.236, 0.00003, 0.44),
                1.01: (0.028, 0.021, 0.024, 0.006, 0.011, 0.000, 0.134, 0.00196, 0.23)},
        "kl_mu": {0.36: (0.196, 0.207, 0.044, 0.034, 0.315, 0.085, 1.606, 0.03081, 2.52),
                  0.51: (0.124, 0.044, 0.022, 0.012, 0.102, 0.003, 0.865, 0.00013, 1.17),
                  1.01: (0.039, 0.017, 0.010, 0.009, 0.038, 0.000, 0.463, 0.00736, 0.58)},
    },
    "DP-SYN": {
        "jsd": {0.5: (0.040, 0.017, 0.081, 0.024, 0.053, 0.000, 0.037, 0.00007, 0.25),
                0.8: (0.043, 0.013, 0.099, 0.025, 0.053, 0.000, 0.037, 0.00007, 0.27),
                1.4: (0.048, 0.017, 0.098, 0.028, 0.053, 0.001, 0.037, 0.00007, 0.28)},
        "kl_mu": {0.5: (0.074, 0.017, 0.039, 0.029, 0.465, 0.000, 0.364, 0.00027, 0.99),
                  0.8: (0.074, 0.011, 0.053, 0.032, 0.465, 0.001, 0.364, 0.00027, 1.00),
                  1.4: (0.084, 0.012, 0.053, 0.036, 0.465, 0.003, 0.364, 0.00027, 1.02)},
    },
}  # fmt: skip
_BASELINE_NOTES = {
    "DP-WGAN": ("Run by Tantipongpipat et al. with SAP's implementation of Frigerio et al. (2019) on "
                "the nine discrete columns only (continuous columns deleted), 10,496 synthetic rows; "
                "its 0.36 column was trained to epsilon 0.37.",),
    "DP-VAE": ("Run by Tantipongpipat et al. with SAP's DP-VAE tutorial on the 13 columns of "
               "adult_schema(), 32,561 training rows.",),
    "DP-SYN": ("Abay et al.'s code, at epsilon 0.5 / 0.8 / 1.4 by basic composition of its two "
               "phases (comparable, by Tantipongpipat et al.'s Lemma 4, with 0.36 / 0.51 / 1.01 by "
               "RDP composition).",),
}


def _baseline(method: str) -> PublishedResults:
    table = _BASELINE_TABLES[method]
    return PublishedResults(
        method=method, dataset="UCI Adult", citation=_TANTIPONGPIPAT, epsilons=tuple(table["jsd"]),
        delta=1e-5, values={**_per_feature("jsd", table["jsd"]), **_per_feature("kl_mu", table["kl_mu"])},
        sources={"jsd": "Table 6 per feature, Table 2 total", "kl_mu": "Table 7 per feature, Table 2 total"},
        notes=_BASELINE_NOTES[method] + (
            "JSD and D_KL^mu in nats over the categories of all 48,842 real rows; total = the sum "
            "over the eight features.",))


#: DP-auto-GAN's baselines on UCI Adult as its paper ran them (Tables 2, 6 and 7): DP-WGAN,
#: DP-VAE and DP-SYN (the last at epsilon 0.5 / 0.8 / 1.4 by basic composition).
DP_WGAN_ADULT = _baseline("DP-WGAN")
DP_VAE_ADULT = _baseline("DP-VAE")
DP_SYN_ADULT = _baseline("DP-SYN")

# The other rows of the DP-SACTGAN paper's Table 1 (Adult, logistic regression: ACC in percentage
# points, AUC, F1) and Table 3 (Adult: WD, JSD, Diff Cor), all labelled epsilon 1.
_SACTGAN_PATHS = tuple(DP_SACTGAN_ADULT.values)
_SACTGAN_RIVAL_ROWS = {
    "CTAB-GAN+": (5.046576, 0.056005, 0.08038, 0.015372, 0.080305, 1.25747),
    "CTGAN": (5.282015, 0.361938, 0.20729, 0.199956, 0.723736, 2.39017),
    "DP-GAN": (5.077285, 0.482824, 0.22059, 0.151921, 0.409907, 2.29194),
    "PATE-GAN": (46.852288, 0.389049, 0.31661, 0.392529, 0.51769, 2.12781),
}

#: The four comparison models of the DP-SACTGAN paper on UCI Adult (Tables 1 and 3), as it ran
#: and reported them, labelled epsilon 1.
DP_SACTGAN_PAPER_RIVALS: tuple[PublishedResults, ...] = tuple(
    PublishedResults(
        method=model, dataset="UCI Adult", citation=DP_SACTGAN_ADULT.citation, epsilons=(1.0,), delta=None,
        values={path: {1.0: (v / 100 if path == "lr_utility.difference.accuracy" else v)}
                for path, v in zip(_SACTGAN_PATHS, row, strict=True)},
        sources=dict(DP_SACTGAN_ADULT.sources),
        notes=(f"{model} as run and reported by the DP-SACTGAN paper, labelled epsilon 1; the paper "
               "does not say which of its comparison models were differentially private.",
               *DP_SACTGAN_ADULT.notes))
    for model, row in _SACTGAN_RIVAL_ROWS.items())

#: GS-WGAN's thesis on the Kaggle cardiovascular table: logistic-regression TSTR AUROC on its real
#: test rows, with the epsilons it published under GS-WGAN's accounting (not a valid bound;
#: docs/gs-wgan.md, "Published numbers"). Written as it is into experiments' ``thesis_reference``.
GS_WGAN_THESIS_CARDIO: Mapping[str, Any] = _frozen({
    "dataset": "Kaggle cardiovascular disease (70,000 rows)",
    "real_lr_auroc": 0.795,
    "non_private_auroc": 0.788,
    "M1500": {"auroc": 0.717, "published_epsilon": 6.45},
    "M250": {"auroc": 0.752, "published_epsilon": 63.0},
})

#: Every record this library ships.
ALL: tuple[PublishedResults, ...] = (DP_AUTO_GAN_ADULT, DP_SACTGAN_ADULT, DP_WGAN_ADULT, DP_VAE_ADULT,
                                     DP_SYN_ADULT, *DP_SACTGAN_PAPER_RIVALS)
