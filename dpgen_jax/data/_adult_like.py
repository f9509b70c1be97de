"""A seeded, licence-free table in the exact format of UCI Adult, for tests and examples.

:func:`adult_like` draws rows from a small hand-written model over :func:`adult_schema`: the
same 13 columns, category lists, bounds and dtypes as :func:`load_adult` returns, so any code
written for Adult runs on it without the Adult files. It is a stand-in, **not Adult**: its
parameters were set by hand to look roughly like the census (proportions rounded to a few
percent), were not fitted to Adult's rows, and say nothing about the real data. Never report
a number measured on it as an Adult result.

Model, one row at a time (``docs/data.md`` lists the parameters):

* sex, race, native-country, workclass and education-num are drawn from fixed proportions;
  age from a shifted gamma (mean about 38);
* marital-status depends on the age group, relationship on marital-status, sex and age;
  occupation on education-num (and is ``'?'`` exactly when workclass is ``'?'`` or
  ``'Never-worked'``, as in Adult); hours-per-week on sex and age;
* salary is ``'>50K'`` with probability ``sigmoid(s)``, where the score ``s`` grows with
  education-num, age (up to 60), hours-per-week, being married, being male and a managerial or
  professional occupation (about a quarter of the rows are ``'>50K'``);
* capital-gain and capital-loss are mostly 0, more often positive for ``'>50K'`` rows (so they
  carry label signal, as in Adult), with 99999 as a rare top value.

Every source of randomness is a separate numpy stream that draws one value per row, so the
rows are prefix-stable: ``adult_like(m, seed=s)`` equals the first ``m`` rows of
``adult_like(n, seed=s)`` for ``m <= n``.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
from scipy.special import gammaincinv, ndtri

from dpgen_jax import _validate as _v
from dpgen_jax.data._adult import ADULT_COLUMNS, adult_schema

# -- hand-set proportions (not fitted to Adult) ------------------------------------------------
_SEX = {"Female": 0.33, "Male": 0.67}
_RACE = {"White": 0.855, "Black": 0.095, "Asian-Pac-Islander": 0.03, "Amer-Indian-Eskimo": 0.01, "Other": 0.01}
_WORKCLASS = {
    "Private": 0.70, "Self-emp-not-inc": 0.08, "Local-gov": 0.064, "?": 0.055, "State-gov": 0.04,
    "Self-emp-inc": 0.034, "Federal-gov": 0.029, "Without-pay": 0.0006, "Never-worked": 0.0004,
}  # fmt: skip
# education-num "1".."16"
_EDUCATION = (0.002, 0.005, 0.01, 0.02, 0.016, 0.029, 0.036, 0.013, 0.32, 0.22, 0.043, 0.033,
              0.165, 0.053, 0.018, 0.013)  # fmt: skip
# marital-status by age group: (< 25, 25-44, >= 45)
_MARITAL = {
    "Never-married": (0.82, 0.30, 0.08),
    "Married-civ-spouse": (0.13, 0.50, 0.60),
    "Divorced": (0.02, 0.13, 0.18),
    "Separated": (0.015, 0.04, 0.03),
    "Widowed": (0.002, 0.01, 0.09),
    "Married-spouse-absent": (0.01, 0.015, 0.015),
    "Married-AF-spouse": (0.003, 0.005, 0.005),
}
# relationship of rows not married to a present spouse: (age < 25, age >= 25)
_UNMARRIED_RELATIONSHIP = {
    "Own-child": (0.60, 0.12),
    "Not-in-family": (0.28, 0.58),
    "Unmarried": (0.07, 0.25),
    "Other-relative": (0.05, 0.05),
}
# occupation by education: (education-num < 13, >= 13)
_OCCUPATION = {
    "Craft-repair": (0.16, 0.03), "Adm-clerical": (0.13, 0.08), "Sales": (0.11, 0.12),
    "Other-service": (0.13, 0.02), "Machine-op-inspct": (0.08, 0.01), "Transport-moving": (0.06, 0.01),
    "Handlers-cleaners": (0.055, 0.005), "Exec-managerial": (0.09, 0.25), "Prof-specialty": (0.05, 0.38),
    "Farming-fishing": (0.04, 0.01), "Tech-support": (0.03, 0.04), "Protective-serv": (0.02, 0.02),
    "Priv-house-serv": (0.006, 0.0005), "Armed-Forces": (0.0004, 0.0004),
}  # fmt: skip
_US_SHARE, _MEXICO_SHARE, _UNKNOWN_COUNTRY_SHARE = 0.895, 0.02, 0.018
# salary score: s = intercept + sum of these terms (see _salary_score)
_SALARY = {
    "intercept": -9.4, "education": 0.33, "age": 0.045, "hours": 0.03, "married": 2.1, "male": 0.3,
    "white_collar": 0.7,
}  # fmt: skip
_STREAMS = (
    "sex", "race", "workclass", "education", "age", "marital", "relationship", "occupation",
    "hours_flat", "hours", "country", "salary", "gain_any", "gain", "loss_any", "loss",
)  # fmt: skip


def _draw(u: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw of category indices: ``u`` (n,) uniforms, ``probs`` (k,) or (n, k)."""
    p = np.asarray(probs, dtype=np.float64)
    cum = np.cumsum(p / p.sum(axis=-1, keepdims=True), axis=-1)
    if cum.ndim == 1:
        idx = np.searchsorted(cum, u, side="right")
    else:
        idx = (cum <= u[:, None]).sum(axis=1)
    return np.minimum(idx, p.shape[-1] - 1)


def _values(names: list[str], idx: np.ndarray) -> np.ndarray:
    return np.asarray(names, dtype=object)[idx]


def adult_like(n_rows: int, seed: int = 0) -> pd.DataFrame:
    """A seeded synthetic table with exactly the format of :func:`load_adult` (not Adult data).

    See the module docstring for the model. Use it wherever a test or example needs
    Adult-shaped rows but not Adult's values; use :func:`load_adult` for results about Adult.

    Args:
        n_rows: Number of rows, an integer >= 1.
        seed: Non-negative integer seed; the same seed gives the same rows, and rows are
            prefix-stable in ``n_rows``.

    Returns:
        A frame with the 13 columns of :func:`adult_schema` in order, a RangeIndex, pandas
        strings for the discrete columns (values from the schema's category lists, including
        ``'?'`` in workclass, occupation and native-country) and int64 for age, capital-gain,
        capital-loss and hours-per-week (within the schema's bounds). It encodes with
        ``TableEncoder(adult_schema())`` and round-trips through ``decode`` exactly.

    Raises:
        ValueError: if ``n_rows`` or ``seed`` is not an integer in range.

    Example:
        >>> df = adult_like(5, seed=1)
        >>> list(df.columns) == adult_schema().names, len(df)
        (True, 5)
    """
    _v.whole(minimum=1, n_rows=n_rows)
    _v.whole(minimum=0, seed=seed)
    n = int(n_rows)
    seqs = np.random.SeedSequence(int(seed)).spawn(len(_STREAMS))
    u = {k: np.random.Generator(np.random.PCG64(s)).random(n) for k, s in zip(_STREAMS, seqs, strict=True)}
    schema = adult_schema()
    out: dict[str, np.ndarray] = {}

    male = u["sex"] < _SEX["Male"]
    age = np.clip(17 + np.floor(9.8 * gammaincinv(2.2, u["age"])), 17, 90).astype(np.int64)
    out["age"] = age
    workclass = _values(list(_WORKCLASS), _draw(u["workclass"], np.array(list(_WORKCLASS.values()))))
    out["workclass"] = workclass
    edu = _draw(u["education"], np.array(_EDUCATION)) + 1  # 1..16
    out["education-num"] = _values([str(i) for i in range(1, 17)], edu - 1)
    group = np.digitize(age, [25, 45])  # 0: < 25, 1: 25-44, 2: >= 45
    marital_table = np.array(list(_MARITAL.values())).T  # (3 groups, 7 statuses)
    marital = _values(list(_MARITAL), _draw(u["marital"], marital_table[group]))
    out["marital-status"] = marital
    married = np.isin(marital, ["Married-civ-spouse", "Married-AF-spouse"])
    rel_table = np.array(list(_UNMARRIED_RELATIONSHIP.values())).T  # (2 age groups, 4)
    relationship = _values(list(_UNMARRIED_RELATIONSHIP), _draw(u["relationship"], rel_table[(age >= 25).astype(int)]))
    relationship[married] = np.where(male[married], "Husband", "Wife")
    out["relationship"] = relationship
    out["race"] = _values(list(_RACE), _draw(u["race"], np.array(list(_RACE.values()))))
    out["sex"] = np.where(male, "Male", "Female").astype(object)
    occ_table = np.array(list(_OCCUPATION.values())).T  # (2 education groups, 14)
    occupation = _values(list(_OCCUPATION), _draw(u["occupation"], occ_table[(edu >= 13).astype(int)]))
    occupation[np.isin(workclass, ["?", "Never-worked"])] = "?"
    out["occupation"] = occupation
    hours = np.rint(40 + 4 * male - 8 * (age < 25) + 12 * _normal(u["hours"]))
    hours = np.where(u["hours_flat"] < 0.45, 40, np.clip(hours, 1, 99)).astype(np.int64)
    out["hours-per-week"] = hours

    score = (
        _SALARY["intercept"]
        + _SALARY["education"] * edu
        + _SALARY["age"] * np.minimum(age, 60)
        + _SALARY["hours"] * hours
        + _SALARY["married"] * married
        + _SALARY["male"] * male
        + _SALARY["white_collar"] * np.isin(occupation, ["Exec-managerial", "Prof-specialty"])
    )
    rich = u["salary"] < 1.0 / (1.0 + np.exp(-score))
    out["salary"] = np.where(rich, ">50K", "<=50K").astype(object)
    gain = np.rint(np.exp(8.3 + 0.9 * _normal(u["gain"])))
    gain = np.where(u["gain"] > 0.995, 99999, np.clip(gain, 114, 99999))
    out["capital-gain"] = np.where(u["gain_any"] < np.where(rich, 0.20, 0.04), gain, 0).astype(np.int64)
    loss = np.clip(np.rint(1900 + 350 * _normal(u["loss"])), 155, 4356)
    out["capital-loss"] = np.where(u["loss_any"] < np.where(rich, 0.10, 0.03), loss, 0).astype(np.int64)

    others = [c for c in schema["native-country"].categories if c not in ("United-States", "Mexico", "?")]
    rest = 1.0 - _US_SHARE - _MEXICO_SHARE - _UNKNOWN_COUNTRY_SHARE
    country_p = np.array([_US_SHARE, _MEXICO_SHARE, _UNKNOWN_COUNTRY_SHARE] + [rest / len(others)] * len(others))
    out["native-country"] = _values(["United-States", "Mexico", "?", *others], _draw(u["country"], country_p))
    return pd.DataFrame({name: out[name] for name in ADULT_COLUMNS}, index=pd.RangeIndex(n))


def _normal(u: np.ndarray) -> np.ndarray:
    """Standard normal quantiles of uniforms in [0, 1) (clipped away from 0)."""
    return ndtri(np.clip(u, 1e-12, 1 - 1e-12))
