"""The cardiovascular-disease table: loader, public schema, the thesis's split and the stand-in."""

import hashlib

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data

SHA_CARDIO = "21a705d23381b0dfd6a6416da701b490744f1fc3b47e9ff3db3968c420ffa10c"


def test_schema_is_the_theses_sixteen_columns():
    schema = data.cardio_schema()
    assert schema.names == list(data.CARDIO_COLUMNS) and schema.label == "cardio"
    assert data.TableEncoder(schema).width == 16  # thesis: 16 columns after one-hot encoding
    bounds = {c.name: (c.lower, c.upper) for c in schema if c.kind == "continuous"}
    assert bounds == {"age": (14275, 23713), "height": (100, 207), "weight": (35, 200),
                      "ap_hi": (60, 240), "ap_lo": (30, 190)}
    assert {c.name for c in schema if c.kind == "categorical"} == {"cholesterol", "gluc"}
    assert schema.source == "public" and any("clips" in n for n in schema.notes)


def test_load_cardio_real_file(cardio_path):
    assert hashlib.sha256(cardio_path.read_bytes()).hexdigest() == SHA_CARDIO
    df = data.load_cardio(cardio_path)
    assert df.shape == (70_000, 12) and list(df.columns) == list(data.CARDIO_COLUMNS)
    raw = pd.read_csv(cardio_path, sep=";")
    for col in data.cardio_schema():
        if col.kind == "continuous":
            # every value clipped into the public bounds, and only the out-of-bounds ones changed
            np.testing.assert_array_equal(df[col.name], raw[col.name].clip(col.lower, col.upper))
        else:
            np.testing.assert_array_equal(df[col.name], raw[col.name])
    assert raw["ap_hi"].max() > 240 and df["ap_hi"].max() == 240  # the file does hold outliers
    data.TableEncoder(data.cardio_schema()).encode(df)  # encodes under the strict policy


def test_split_is_the_theses_and_stratified(cardio_path):
    df = data.load_cardio(cardio_path)
    train, val, test = data.cardio_split(df, seed=0)
    assert (len(train), len(val), len(test)) == (56_000, 7_000, 7_000)
    for part in (train, val, test):
        assert abs(part["cardio"].mean() - df["cardio"].mean()) < 1e-3
    again = data.cardio_split(df, seed=0)
    pd.testing.assert_frame_equal(train, again[0])
    other = data.cardio_split(df, seed=1)[2]
    assert not test.equals(other)


def test_find_cardio_order_and_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DPGEN_CARDIO_PATH", raising=False)
    with pytest.raises(FileNotFoundError, match="not downloaded.*kaggle.*DPGEN_CARDIO_PATH"):
        data.find_cardio()
    with pytest.raises(FileNotFoundError, match="path="):
        data.find_cardio(tmp_path / "nope.csv")
    folder = tmp_path / "mine"
    folder.mkdir()
    file = folder / "cardio_train.csv"
    file.write_text("id;" + ";".join(data.CARDIO_COLUMNS) + "\n0;18393;2;168;62.0;110;80;1;1;0;0;1;0\n")
    assert data.find_cardio(folder) == file
    monkeypatch.setenv("DPGEN_CARDIO_PATH", str(file))
    assert data.find_cardio() == file
    assert data.load_cardio().shape == (1, 12)
    cached = data.cardio_cache_path()
    assert str(cached).startswith(str(tmp_path / "cache"))


HEADER = "id;" + ";".join(data.CARDIO_COLUMNS)


@pytest.mark.parametrize("text, match", [
    (HEADER.replace(";", ",") + "\n0,18393,2,168,62.0,110,80,1,1,0,0,1,0\n", "not semicolon-separated"),
    (HEADER.replace(";gluc", "") + "\n0;18393;2;168;62.0;110;80;1;0;0;1;0\n", r"missing column.*gluc"),
    (HEADER + "\n0;18393;2;168;62.0;110;80;1;1;0;0;1;0\n1;x;2;168;62.0;110;80;1;1;0;0;1;0\n"
     "2;y;2;168;62.0;110;80;1;1;0;0;1;0\n", r"column 'age': 2 value\(s\) are not finite numbers"),
    (HEADER + "\n0;18393;3;168;62.0;110;80;1;1;0;0;1;0\n", r"column 'gender': 1 value\(s\) are not one of"),
    (HEADER + "\n0;18393;2;168.5;62.0;110;80;1;1;0;0;1;0\n", r"column 'height': 1 value\(s\) are not whole"),
])
def test_malformed_files_name_the_column_and_count(tmp_path, text, match):
    file = tmp_path / "cardio_train.csv"
    file.write_text(text)
    with pytest.raises(ValueError, match=match):
        data.load_cardio(file)


def test_cardio_like_format_and_signal():
    df = data.cardio_like(4000, seed=3)
    assert list(df.columns) == list(data.CARDIO_COLUMNS) and len(df) == 4000
    x = data.TableEncoder(data.cardio_schema()).encode(df)  # in bounds, valid codes
    assert x.shape == (4000, 16)
    pd.testing.assert_frame_equal(df, data.cardio_like(4000, seed=3))
    assert not df.equals(data.cardio_like(4000, seed=4))
    assert 0.35 < df["cardio"].mean() < 0.65 and 0.2 < (df["gender"] == 2).mean() < 0.5
    # the label depends on the blood pressure, so a classifier has something to learn
    assert df.loc[df.cardio == 1, "ap_hi"].mean() > df.loc[df.cardio == 0, "ap_hi"].mean() + 5
    with pytest.raises(ValueError, match="n_rows"):
        data.cardio_like(0)


def test_cardio_like_heaping_rounds_a_share_of_the_blood_pressures_only():
    plain, heaped = data.cardio_like(20_000, seed=5), data.cardio_like(20_000, seed=5, heaping=0.6)
    others = [c for c in data.CARDIO_COLUMNS if c not in ("ap_hi", "ap_lo")]
    pd.testing.assert_frame_equal(plain[others], heaped[others])  # the label stays the true risk's
    moved = heaped["ap_hi"] != plain["ap_hi"]
    assert (heaped.loc[moved, "ap_hi"] % 10 == 0).all() and (heaped.loc[moved, "ap_hi"] - plain.loc[moved, "ap_hi"]).abs().max() <= 5
    for col in ("ap_hi", "ap_lo"):  # 60 % rounded, and the rest as often at a multiple of 10 as before
        share = (heaped[col] % 10 == 0).mean()
        assert abs(share - (0.6 + 0.4 * (plain[col] % 10 == 0).mean())) < 0.02
    with pytest.raises(ValueError, match="heaping"):
        data.cardio_like(10, heaping=1.5)
