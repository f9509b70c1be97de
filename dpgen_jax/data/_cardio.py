"""The Kaggle cardiovascular-disease table, the home table of GS-WGAN for tables.

Ulianova (2019), "Cardiovascular Disease dataset", Kaggle: 70,000 rows, semicolon-separated, an
``id`` column and 12 features. It is the table of the GS-WGAN tabular thesis (``docs/gs-wgan.md``).
The file needs a Kaggle account, so it is never downloaded: :func:`load_cardio` reads a path given
as an argument, in ``$DPGEN_CARDIO_PATH`` or in the per-user cache.

* :func:`cardio_schema`: the thesis's 12 columns (``id`` dropped) with the public bounds of its
  Table 4.2, recorded as public facts.
* :func:`load_cardio`: the rows, with every continuous value outside its public bound clipped into
  it (a per-row map that reads no other row). How many values were clipped depends on the private
  rows, so it is never printed; the schema's notes say that clipping is applied.
* :func:`cardio_split`: the thesis's 80/10/10 split, stratified on ``cardio``.
* :func:`cardio_like`: a seeded, licence-free stand-in in the same format (not the real table).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, ndtri

from dpgen_jax import _validate as _v
from dpgen_jax.data._schema import Column, Schema

CARDIO_FILE = "cardio_train.csv"
CARDIO_COLUMNS: tuple[str, ...] = ("age", "gender", "height", "weight", "ap_hi", "ap_lo", "cholesterol",
                                   "gluc", "smoke", "alco", "active", "cardio")
#: Public bounds of the continuous columns: the thesis's Table 4.2 (its ``ap_lo``/``ap_hi`` labels
#: swapped back to the Kaggle meaning: ``ap_hi`` is the systolic pressure).
CARDIO_BOUNDS: dict[str, tuple[float, float]] = {
    "age": (14_275, 23_713), "height": (100, 207), "weight": (35.0, 200.0),
    "ap_hi": (60, 240), "ap_lo": (30, 190),
}
_INTEGER = ("age", "height", "ap_hi", "ap_lo")
_CODES: dict[str, tuple[int, ...]] = {
    "gender": (1, 2), "cholesterol": (1, 2, 3), "gluc": (1, 2, 3),
    "smoke": (0, 1), "alco": (0, 1), "active": (0, 1), "cardio": (0, 1),
}
#: Shares of the thesis's split: train, validation, test.
CARDIO_SPLIT = (0.8, 0.1, 0.1)


def cardio_schema() -> Schema:
    """The public schema of the cardiovascular table as the thesis encodes it (16 encoded columns).

    Continuous: age (days, integer, 14,275-23,713), height (cm, integer, 100-207), weight (kg,
    35-200), ap_hi (systolic, integer, 60-240), ap_lo (diastolic, integer, 30-190): the bounds of the
    thesis's Table 4.2. Binary: gender (1/2, 2 encodes as 1), smoke, alco, active, cardio (0/1; cardio
    is the label). Categorical: cholesterol and gluc (1 normal, 2 above, 3 well above normal).
    """
    cols = []
    for name in CARDIO_COLUMNS:
        if name in CARDIO_BOUNDS:
            low, high = CARDIO_BOUNDS[name]
            cols.append(Column(name, "continuous", lower=low, upper=high, integer=name in _INTEGER))
        elif name in ("cholesterol", "gluc"):
            cols.append(Column(name, "categorical", categories=_CODES[name]))
        else:
            cols.append(Column(name, "binary", categories=_CODES[name], label=name == "cardio"))
    notes = (
        "Cardio schema: Kaggle 'Cardiovascular Disease dataset' (Ulianova 2019), the table of the GS-WGAN "
        "tabular thesis; codes from the dataset's description (gender 1/2, cholesterol and gluc 1-3, "
        "the binary columns 0/1).",
        "Cardio bounds: the thesis's Table 4.2 after its outlier treatment (age 14,275-23,713 days, height "
        "100-207, weight 35-200, ap_lo 30-190, ap_hi 60-240, with the thesis's ap_hi/ap_lo labels swapped "
        "back), treated as public domain knowledge, which is an assumption the DP guarantee does not "
        "cover. load_cardio clips every value outside these bounds into them (a per-row map); how many "
        "values that touched is not reported, since it depends on the private rows. The thesis's KNN "
        "imputation and data min-max scaling read the private rows and are not offered.",
    )
    return Schema(tuple(cols), source="public", notes=notes)


def cardio_cache_path() -> Path:
    """Where :func:`load_cardio` looks last: ``$XDG_CACHE_HOME/dpgen_jax/cardio/cardio_train.csv``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dpgen_jax" / "cardio" / CARDIO_FILE


def find_cardio(path: str | os.PathLike | None = None) -> Path:
    """The file :func:`load_cardio` reads: ``path``, else ``$DPGEN_CARDIO_PATH``, else the cache.

    ``path`` and the variable may name the file or a folder holding ``cardio_train.csv``.

    Raises:
        FileNotFoundError: nothing found; the message says where to get the file and where to put it.
    """
    for where, value in (("path", path), ("DPGEN_CARDIO_PATH", os.environ.get("DPGEN_CARDIO_PATH"))):
        if value:
            p = Path(value)
            p = p / CARDIO_FILE if p.is_dir() else p
            if not p.is_file():
                raise FileNotFoundError(f"{where}={str(value)!r}: no file {str(p)!r}.")
            return p
    cached = cardio_cache_path()
    if cached.is_file():
        return cached
    raise FileNotFoundError(
        "The cardiovascular-disease table was not found: no path given, DPGEN_CARDIO_PATH is not set and "
        f"{cached} does not exist. It is not downloaded (Kaggle requires an account): get cardio_train.csv "
        "from https://www.kaggle.com/datasets/sulianova/cardiovascular-disease-dataset and put it at "
        f"{cached}, or name it with DPGEN_CARDIO_PATH or load_cardio(path=...).")


def load_cardio(path: str | os.PathLike | None = None) -> pd.DataFrame:
    """The 12 columns of :func:`cardio_schema` read from Kaggle's ``cardio_train.csv``.

    Continuous values outside the public bounds are clipped into them (the file has blood pressures
    of -150 and 16,020 and heights of 55 cm); integer columns come back as int64, weight as float64,
    the codes as int64. ``id`` is dropped.

    Raises:
        FileNotFoundError: see :func:`find_cardio`.
        ValueError: a malformed file: not semicolon-separated, a missing column, or values that are
            not numbers (or not one of a column's codes), naming the column and how many values.
    """
    file = find_cardio(path)
    text = file.read_bytes().decode("utf-8")
    header = text.split("\n", 1)[0].strip()
    if ";" not in header:
        raise ValueError(f"{file}: the header {header[:80]!r} is not semicolon-separated; expected "
                         f"'id;{';'.join(CARDIO_COLUMNS)}'.")
    raw = pd.read_csv(io.StringIO(text), sep=";", dtype=object, keep_default_na=False, na_values=[])
    raw.columns = [str(c).strip() for c in raw.columns]
    missing = [c for c in CARDIO_COLUMNS if c not in raw.columns]
    if missing:
        raise ValueError(f"{file}: missing column(s) {missing}; expected {['id', *CARDIO_COLUMNS]}.")
    if len(raw) == 0:
        raise ValueError(f"{file} holds no data rows.")
    out = {}
    for name in CARDIO_COLUMNS:
        values = pd.to_numeric(raw[name].str.strip(), errors="coerce").to_numpy(np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            raise ValueError(f"column {name!r}: {int(bad.sum())} value(s) are not finite numbers.")
        if name in CARDIO_BOUNDS:
            low, high = CARDIO_BOUNDS[name]
            values = np.clip(values, low, high)
            if name in _INTEGER:
                frac = values != np.round(values)
                if frac.any():
                    raise ValueError(f"column {name!r}: {int(frac.sum())} value(s) are not whole numbers.")
                values = values.astype(np.int64)
            out[name] = values
        else:
            wrong = ~np.isin(values, _CODES[name])
            if wrong.any():
                raise ValueError(f"column {name!r}: {int(wrong.sum())} value(s) are not one of the codes "
                                 f"{list(_CODES[name])}.")
            out[name] = values.astype(np.int64)
    return pd.DataFrame(out)


def cardio_split(df: pd.DataFrame, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The thesis's split: 80 % train, 10 % validation, 10 % test, each stratified on ``cardio``
    (56,000 / 7,000 / 7,000 of the 70,000 rows). Returns ``(train, validation, test)`` with fresh
    indices; the partition depends only on the row order, the labels and ``seed``."""
    from sklearn.model_selection import train_test_split

    if "cardio" not in df.columns:
        raise ValueError(f"The table has no 'cardio' column to stratify on (its columns: {list(df.columns)}); "
                         "pass the cardio table with its label.")
    _v.integral(seed=seed)
    train, rest = train_test_split(df, test_size=CARDIO_SPLIT[1] + CARDIO_SPLIT[2], stratify=df["cardio"],
                                   random_state=int(seed))
    val, test = train_test_split(rest, test_size=0.5, stratify=rest["cardio"], random_state=int(seed))
    return tuple(part.reset_index(drop=True) for part in (train, val, test))


def cardio_like(n_rows: int, seed: int = 0, *, heaping: float = 0.0) -> pd.DataFrame:
    """``n_rows`` rows in the format of :func:`load_cardio` from a hand-written model (not the
    real table; never report a number measured on it as a cardio result).

    Age, gender, height and weight are drawn with weight rising with height; the blood pressures
    rise with age and weight; cholesterol and gluc from fixed shares shifted by age; smoke and alco
    more often positive for men; ``cardio`` is positive with probability ``sigmoid(s)`` with ``s``
    growing with ap_hi, age, cholesterol and weight (about half the rows positive), so a classifier
    can learn it. Every value lies in the public bounds (clipped).

    ``heaping``: the share of rows whose blood pressures are recorded rounded to a multiple of 10
    (terminal-digit preference, common in clinical records: heaps at 120/80 mmHg); 0 (default)
    leaves them at 1 mmHg. The same seed draws the same rows before rounding.
    """
    _v.whole(minimum=1, n_rows=n_rows)
    _v.between(low=0, high=1, heaping=heaping)
    rng = np.random.default_rng(seed)
    n = int(n_rows)
    z = ndtri(rng.uniform(1e-9, 1 - 1e-9, size=(n, 8)))
    u = rng.uniform(size=(n, 8))
    male = u[:, 0] < 0.35
    age = np.round(19_470 + 2_470 * z[:, 0])
    height = np.round(np.where(male, 170.0, 161.0) + 7.0 * z[:, 1])
    weight = np.round(74.0 + 0.55 * (height - 164.0) + 13.0 * z[:, 2], 1)
    age_s = (age - 19_470) / 2_470
    weight_s = (weight - 74.0) / 14.0
    ap_hi = np.round(127.0 + 6.0 * age_s + 5.0 * weight_s + 15.0 * z[:, 3])
    ap_lo = np.round(81.0 + 0.35 * (ap_hi - 127.0) + 8.0 * z[:, 4])
    shift = 0.05 * age_s
    chol = 1 + (u[:, 1] > 0.75 - shift).astype(np.int64) + (u[:, 1] > 0.87 - shift).astype(np.int64)
    gluc = 1 + (u[:, 2] > 0.85 - shift).astype(np.int64) + (u[:, 2] > 0.925 - shift).astype(np.int64)
    smoke = u[:, 3] < np.where(male, 0.22, 0.02)
    alco = u[:, 4] < np.where(male, 0.11, 0.03)
    active = u[:, 5] < 0.8
    score = (0.08 * (ap_hi - 127.0) + 0.5 * age_s + 0.55 * (chol - 1) + 0.2 * weight_s
             - 0.2 * active + 0.15)
    cardio = u[:, 6] < expit(score)
    if heaping > 0.0:  # the records, not the risk: its own stream, every other value as at 0
        heaped = np.random.default_rng([int(seed), 1]).uniform(size=n) < heaping
        ap_hi, ap_lo = (np.where(heaped, np.round(v / 10.0) * 10.0, v) for v in (ap_hi, ap_lo))
    out = {
        "age": age, "gender": np.where(male, 2, 1), "height": height, "weight": weight,
        "ap_hi": ap_hi, "ap_lo": ap_lo, "cholesterol": chol, "gluc": gluc, "smoke": smoke,
        "alco": alco, "active": active, "cardio": cardio,
    }
    df = {}
    for name in CARDIO_COLUMNS:
        v = np.asarray(out[name])
        if name in CARDIO_BOUNDS:
            v = np.clip(v.astype(np.float64), *CARDIO_BOUNDS[name])
            df[name] = v.astype(np.int64) if name in _INTEGER else v
        else:
            df[name] = v.astype(np.int64)
    return pd.DataFrame(df)
