"""Atoms (declared point masses) of continuous columns, and CSV files as pandas writes them.

Atoms go through the model schema as gaps do (``docs/data.md``, "Point masses"): the state column
gives each atom a code of its own in ``TableEncoder``, the ``Discretizer`` and every method, a
sampled row at an atom is exactly the atom and the continuous part never lands on one. The
references are counted directly on the frames (numpy), not through the code under test.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data, synthesizers
from dpgen_jax.data import Column, DataDerivedSchemaWarning, Schema

INCOME = Column("income", "continuous", lower=0, upper=500_000, scale="log", atoms=(0,), missing=True)
KIDS = Column("kids", "continuous", lower=0, upper=12, integer=True, atoms=(0, 2))
SCHEMA = Schema((INCOME, KIDS, Column("sex", "binary", categories=("F", "M"))))


def frame(n: int, seed: int = 0, zeros: float = 0.11, gaps: float = 0.05) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    income = np.clip(r.lognormal(10, 1, n), 1.0, 500_000)
    u = r.random(n)
    income[u < zeros] = 0.0
    income[(u >= zeros) & (u < zeros + gaps)] = np.nan
    kids = np.minimum(r.poisson(1.5, n), 12)
    return pd.DataFrame({"income": income, "kids": kids, "sex": r.choice(["F", "M"], n)})


# -- the schema ------------------------------------------------------------------------------------
def test_atoms_round_trip_through_json_sorted_and_only_when_declared():
    s = Schema.from_dict({"columns": [{"name": "x", "kind": "continuous", "lower": -1, "upper": 9,
                                       "atoms": [5, -1]}]})
    assert s["x"].atoms == (-1.0, 5.0) and Schema.from_json(s.to_json()) == s
    plain = Schema((Column("y", "continuous", lower=0, upper=1),))
    assert "atoms" not in plain.to_dict()["columns"][0]  # older schema files unchanged
    assert any("point masses" in a for a in s.assumptions())


@pytest.mark.parametrize("column, match", [
    (dict(atoms=[11]), "atom 11 lies outside the bounds"),
    (dict(atoms=[float("nan")]), "finite"),
    (dict(atoms=[1, 1.0]), "duplicate atoms"),
    (dict(atoms=[0.5], integer=True), "whole-number atoms"),
    (dict(atoms=[True]), "finite real"),
    (dict(atoms=0), "a list of numbers"),
])
def test_bad_atoms_are_refused_naming_the_column(column, match):
    with pytest.raises(ValueError, match=match) as err:
        Column("spend", "continuous", lower=0, upper=10, **column)
    assert "'spend'" in str(err.value)
    with pytest.raises(ValueError, match="'flag'.*continuous columns only"):
        Column("flag", "binary", categories=(0, 1), atoms=(0,))
    with pytest.raises(ValueError, match="atom states"):
        Schema((KIDS, Column("kids [atom]", "binary", categories=(0, 1))))


# -- the model schema and the encoder --------------------------------------------------------------
def test_model_schema_has_a_state_per_column_with_atoms_and_round_trips():
    model = data.model_schema(SCHEMA)
    assert model.names == ["income", "income [atom]", "kids", "kids [atom]", "sex"]
    assert model["income [atom]"].categories == ("continuous", "0", "[missing]")  # no indicator
    assert model["kids [atom]"].categories == ("continuous", "0", "2")
    assert not model["income"].atoms and model["income"].missing is None
    df = frame(400)
    m = data.to_model_frame(df, SCHEMA)
    np.testing.assert_array_equal(m["income [atom]"] == "0", df["income"].to_numpy() == 0)
    np.testing.assert_array_equal(m["income [atom]"] == "[missing]", df["income"].isna())
    np.testing.assert_array_equal(m["kids [atom]"] == "2", df["kids"] == 2)
    back = data.from_model_frame(m, SCHEMA)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    enc = data.TableEncoder(SCHEMA)
    decoded = enc.decode(enc.encode(df))
    np.testing.assert_array_equal(decoded["income"].isna(), df["income"].isna())
    np.testing.assert_array_equal(decoded["income"] == 0, df["income"] == 0)
    np.testing.assert_array_equal(decoded["kids"], df["kids"])


def test_the_continuous_part_never_decodes_onto_an_atom():
    enc = data.TableEncoder(SCHEMA)
    b = {blk.name: blk for blk in enc.blocks}
    x = np.zeros((3, enc.width), np.float32)
    x[:, b["income [atom]"].start] = 1.0  # state "continuous" ...
    x[:, b["kids [atom]"].start] = 1.0
    x[:, b["income"].start] = [0.0, -0.5, 1e-9]  # ... with values at (or clipped to) the atom 0
    x[:, b["kids"].start] = [0.0, 2.0 / 12, 2.0 / 12]  # the integer atoms 0 and 2
    out = enc.decode(x)
    assert (out["income"] > 0).all() and (out["income"] < 1e-3).all()
    assert out["kids"].tolist() == [1, 3, 3]  # the next whole number that is not an atom
    x[:, b["income [atom]"].start:b["income [atom]"].stop] = np.eye(3, dtype=np.float32)[[1, 2, 0]]
    out = enc.decode(x)
    assert out["income"].iloc[0] == 0.0 and np.isnan(out["income"].iloc[1])


# -- the Discretizer -------------------------------------------------------------------------------
def test_discretizer_gives_each_atom_a_code_and_no_bin_holds_one():
    d = data.Discretizer(SCHEMA, bins=6)
    kids_bins = d.sizes[1] - 2
    assert d.atom_codes == {"income": (6,), "kids": (kids_bins, kids_bins + 1)}
    assert d.missing_codes == {"income": 7} and d.sizes[0] == 8
    df = frame(600, seed=1)
    c = d.codes(df)
    np.testing.assert_array_equal(c[:, 0] == 6, df["income"].to_numpy() == 0)
    np.testing.assert_array_equal(c[:, 0] == 7, df["income"].isna())
    np.testing.assert_array_equal(c[:, 1] == kids_bins + 1, df["kids"] == 2)
    assert data.Discretizer(data.model_schema(SCHEMA), bins=6).sizes == d.sizes
    np.testing.assert_array_equal(data.Discretizer(data.model_schema(SCHEMA), bins=6).codes(
        data.to_model_frame(df, SCHEMA)), c)
    out = d.decode(c, jax.random.key(0))
    np.testing.assert_array_equal(d.codes(out), c)
    # every bin code, decoded many times, never gives an atom and never leaves the bounds
    every = np.stack(np.meshgrid(np.arange(d.sizes[0]), np.arange(d.sizes[1]), [0, 1]), -1).reshape(-1, 3)
    rows = d.decode(np.repeat(every, 50, axis=0), jax.random.key(1))
    in_bins = np.repeat(every, 50, axis=0)
    inc, kids = rows["income"].to_numpy(dtype=float), rows["kids"].to_numpy(dtype=float)
    assert not np.isin(inc[in_bins[:, 0] < 6], [0.0]).any()
    assert not np.isin(kids[in_bins[:, 1] < kids_bins], [0, 2]).any()
    assert np.nanmin(inc) >= 0 and kids.min() >= 0 and np.nanmax(inc) <= 500_000 and kids.max() <= 12
    assert d.parents(data.Discretizer(SCHEMA, bins=3))["kids"][-2:].tolist() == list(
        data.Discretizer(SCHEMA, bins=3).atom_codes["kids"])


def test_an_integer_bin_draws_uniformly_among_its_integers_that_are_not_atoms():
    s = Schema((Column("k", "continuous", lower=0, upper=12, integer=True, atoms=(1,)),))
    d = data.Discretizer(s, bins=3)  # bin 0 holds 0, 1, 2, 3; 1 is the atom
    out = d.decode(np.zeros((30_000, 1), np.int64), jax.random.key(3))["k"]
    shares = out.value_counts(normalize=True).sort_index()
    assert shares.index.tolist() == [0, 2, 3] and np.allclose(shares, 1 / 3, atol=0.015)


@pytest.mark.parametrize("spacing", ["equal", "log"])
def test_bins_never_put_mass_below_the_lower_bound(spacing):
    col = Column("t", "continuous", lower=-40.5, upper=60, atoms=(-40.5,))
    s = Schema((col, Column("n", "continuous", lower=-7, upper=300, integer=True, atoms=(-7,))))
    d = data.Discretizer(s, bins=10, spacing=spacing)
    codes = np.stack([np.arange(d.sizes[0] - 1).repeat(40) % (d.sizes[0] - 1),
                      np.arange(d.sizes[0] - 1).repeat(40) % (d.sizes[1] - 1)], 1)
    out = d.decode(codes, jax.random.key(2))
    assert (out["t"] > -40.5).all() and (out["n"] > -7).all()  # above the bound: no bin holds the atom


# -- a method, end to end --------------------------------------------------------------------------
def test_independent_reproduces_the_share_of_an_atom_and_never_lands_next_to_it():
    df = frame(3000, seed=3)
    model = synthesizers.create("independent").fit(df, SCHEMA, epsilon=8.0, seed=0)
    syn = model.sample(20_000, seed=1)
    real = (df["income"] == 0).mean()
    assert abs((syn["income"] == 0).mean() - real) < 0.02
    assert abs(syn["income"].isna().mean() - df["income"].isna().mean()) < 0.02
    assert ((syn["income"] > 0) & (syn["income"] < 1e-6)).mean() < 1e-3  # no mass piled next to 0
    assert abs((syn["kids"] == 2).mean() - (df["kids"] == 2).mean()) < 0.02


# -- drafting and CSV files as pandas writes them --------------------------------------------------
def test_infer_schema_proposes_an_atom_at_a_frequent_bound_with_a_note():
    df = frame(500, seed=4, gaps=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataDerivedSchemaWarning)
        s = data.infer_schema(df[["income"]].assign(w=np.random.default_rng(0).uniform(1, 2, 500)))
    assert s["income"].atoms == (0.0,) and s["w"].atoms == ()
    assert any("'income'" in n and "atom" in n for n in s.notes)


def test_read_csv_maps_integral_floats_to_integer_labels_and_refuses_fractions(tmp_path):
    path = tmp_path / "flags.csv"
    df = pd.DataFrame({"smoker": [1.0, 0.0, np.nan, 1.0], "grade": [3.0, 1.0, 2.0, np.nan]})
    df.to_csv(path, index=False)
    assert path.read_text().splitlines()[1] == "1.0,3.0"  # what pandas writes
    s = Schema.from_dict({"columns": [
        {"name": "smoker", "kind": "binary", "categories": ["0", "1"], "missing": True},
        {"name": "grade", "kind": "categorical", "categories": [1, 2, 3], "missing": True}]})
    got = data.read_csv(path, s)
    assert got["smoker"].tolist()[:2] == ["1", "0"] and pd.isna(got["smoker"][2])
    assert got["grade"].tolist()[:3] == [3, 1, 2] and pd.isna(got["grade"][3])
    df.assign(smoker=[1.5, 0.0, np.nan, 1.0]).to_csv(path, index=False)
    with pytest.raises(ValueError, match="column 'smoker'.*not in the schema's categories"):
        data.read_csv(path, s)
    df.assign(grade=[3.5, 1.0, 2.0, np.nan]).to_csv(path, index=False)
    with pytest.raises(ValueError, match="column 'grade' holds non-integer values"):
        data.read_csv(path, s)


def test_cli_drafts_a_coded_column_and_fits_on_the_csv_pandas_wrote(tmp_path, capsys):
    from dpgen_jax import cli

    r = np.random.default_rng(5)
    n = 300
    smoker = np.where(r.random(n) < 0.3, 1.0, 0.0)
    smoker[r.random(n) < 0.1] = np.nan
    df = pd.DataFrame({"smoker": smoker, "stage": r.choice([1, 2, 3, 4], n).astype(float),
                       "income": np.where(r.random(n) < 0.2, 0.0, np.round(r.lognormal(10, 1, n), 2))})
    df.to_csv(tmp_path / "data.csv", index=False)
    assert cli.main(["schema", "draft", str(tmp_path / "data.csv"), "-o", str(tmp_path / "draft.json")]) == 0
    draft = data.load_schema(tmp_path / "draft.json")
    assert draft["smoker"] == Column("smoker", "binary", categories=(0, 1), missing=True)
    assert draft["stage"].kind == "categorical" and draft["stage"].categories == (1, 2, 3, 4)
    assert draft["income"].kind == "continuous" and draft["income"].atoms == (0.0,)
    assert any("'smoker'" in n and "'stage'" in n and "categorical" in n for n in draft.notes)
    public = Schema.from_dict({**draft.to_dict(), "source": "public", "notes": ["Codebook."],
                               "columns": [{**c.to_dict(), **({"categories": ["0", "1"]} if c.name == "smoker" else {}),
                                            **({"upper": 1e6} if c.name == "income" else {})} for c in draft]})
    (tmp_path / "schema.json").write_text(public.to_json())
    assert cli.main(["fit", "--method", "independent", "--data", str(tmp_path / "data.csv"), "--schema",
                     str(tmp_path / "schema.json"), "--epsilon", "3", "--seed", "0", "--no-progress",
                     "--out", str(tmp_path / "model.npz")]) == 0, capsys.readouterr().err
    rows = synthesizers.load(tmp_path / "model.npz").sample(2000, seed=0)
    assert set(rows["smoker"].dropna()) <= {"0", "1"} and (rows["income"] == 0).mean() > 0.1


def test_every_encoding_gives_each_atom_a_code_of_its_own():
    from dpgen_jax.synthesizers.dp_sactgan._config import DPSACTGANConfig
    from dpgen_jax.synthesizers.dp_sactgan._encoding import build_layout

    model = data.model_schema(SCHEMA)
    blocks = {b.name: b for b in data.TableEncoder(SCHEMA).blocks}
    assert blocks["income [atom]"].stop - blocks["income [atom]"].start == 3  # continuous, 0, [missing]
    layout = build_layout(model, DPSACTGANConfig(n_modes=3))  # the state is a discrete token
    i = layout.names.index("kids [atom]")
    assert not layout.continuous[i] and layout.widths[i] == 3 and layout.block_size[i] == 3
    binned = {b.name: b for b in data.BinnedEncoder(SCHEMA, bins=5).blocks}
    assert "income [atom]" not in binned and binned["income"].stop - binned["income"].start == 5 + 1 + 1


def test_the_point_mass_study_measures_exact_zeros_with_and_without_the_atom():
    from experiments.studies import point_masses

    args = ["--methods", "independent", "--seeds", "0", "--sample", "3000", "--epsilon", "5"]
    with_atom, = point_masses.main(args)
    without, = point_masses.main([*args, "--no-atoms"])
    assert with_atom["real"] == 0.11 and abs(with_atom["synthetic_many"] - 0.11) < 0.02
    assert without["synthetic_many"] == 0.0 and without["next_to_zero"] > 0.05


@pytest.mark.parametrize("model", [False, True])
def test_the_one_way_matching_moves_rows_between_atoms_bins_and_gaps_as_released(model):
    from dpgen_jax.synthesizers._matching import match_one_way, rounded_counts

    schema = data.model_schema(SCHEMA) if model else SCHEMA
    disc = data.Discretizer(schema, 10)
    real, syn = frame(4000, seed=7, zeros=0.25), frame(1000, seed=8, zeros=0.05, gaps=0.15)
    to = (lambda df: data.to_model_frame(df, SCHEMA)) if model else (lambda df: df)
    codes = disc.codes(to(real))
    probs = [np.bincount(codes[:, j], minlength=k) / len(real) for j, k in enumerate(disc.sizes)]
    out = match_one_way(to(syn), disc, probs, np.random.default_rng(0))
    got = disc.codes(out)
    for j, col in enumerate(disc.schema.columns):
        np.testing.assert_array_equal(np.bincount(got[:, j], minlength=disc.sizes[j]),
                                      rounded_counts(probs[j], len(syn)), err_msg=col.name)
    user = data.from_model_frame(out, SCHEMA) if model else out
    zeros = (user["income"] == 0).to_numpy()
    assert zeros.sum() == rounded_counts(probs[0], 1000)[disc.atom_codes["income"][0]]  # exact zeros
    assert ((user["income"] > 0) & (user["income"] < 1e-6)).sum() == 0  # and nothing next to them
    assert (zeros[(syn["income"] == 0).to_numpy()]).all()  # 5 % at the atom, 25 % released: they stay


def test_a_metadata_file_declares_atoms_as_public_facts(tmp_path):
    pytest.importorskip("yaml")
    from dpgen_jax._validate import UsageError

    path = tmp_path / "meta.yaml"
    text = ("census:\n  public:\n    people:\n      rows: 800\n"
            "      income: {{type: float, lower: 0, upper: 500000, atoms: {atoms}}}\n"
            "      sex: {{type: string, categories: [F, M]}}\n")
    path.write_text(text.format(atoms="[0]"))
    draft = data.draft_schema(None, yaml_path=path)
    assert draft.schema.source == "public" and draft.schema["income"].atoms == (0.0,)
    assert Schema.from_json(draft.schema.to_json()) == draft.schema
    path.write_text(text.format(atoms="[-5]"))
    with pytest.raises(UsageError, match="column 'income': atom -5 lies outside the bounds"):
        data.draft_schema(None, yaml_path=path)
