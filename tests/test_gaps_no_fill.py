"""No fill value in a row that is not missing (issue 48, item 2; ``docs/data.md``, "Missing values").

A column with gaps is modelled by a marginal method as one coded column whose last code stands for
a gap (``data.Discretizer``), so the lower bound the model schema writes into a missing value never
comes back in a row that is not missing. The reference is the real table itself: its observed
values never come within 5 % of the range above the lower bound, so a synthetic value within 1 %
of it can only come from the fill (or from noise in an empty bin, which a generous epsilon keeps
rare). Parametrised over every registered method: the marginal ones with their smoke schedules in
the default run; the neural ones (which keep the value and its indicator: ``data.model_schema``)
with their default configurations under a time budget, marked slow (a smoke schedule leaves a
generator near its initialisation, which would test the initialisation, not the fill).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpgen_jax import data, synthesizers
from dpgen_jax.synthesizers._marginal import MarginalConfig

# The marginal methods: those configured on public bins (a MarginalConfig), as the registry says.
MARGINAL = tuple(m for m in synthesizers.available() if issubclass(synthesizers.get(m).CONFIG, MarginalConfig))
METHODS = [m for m in synthesizers.available() if m in MARGINAL]
NEURAL = [m for m in synthesizers.available() if m not in MARGINAL]
NEURAL_SECONDS = 90  # the time budget of a neural method's default configuration here
GAP = 0.2        # the real missing rate of every column with gaps
LOWER, UPPER = 0, 100
# GEM's smoke schedule (30 Adam steps) leaves its generator near its random initialisation, about
# 1/7 of a column's mass in every code, empty bin 0 included: that would measure the
# initialisation, not the fill. Its documented one-way options start and end it at the released
# one-way probabilities instead (docs/gem.md).
EXTRA = {"gem": dict(one_way_init=True, calibrate_iterations=3)}


def _schema() -> data.Schema:
    return data.Schema([
        data.Column("age", "continuous", lower=LOWER, upper=UPPER, integer=True, missing=True),
        data.Column("hours", "continuous", lower=LOWER, upper=UPPER, missing=True),
        data.Column("smoker", "binary", categories=(False, True), missing=True),
        data.Column("grade", "categorical", categories=("a", "b", "c"), missing=True),
        data.Column("y", "binary", categories=(0, 1), label=True)])  # DP-SYN partitions by it


def _frame(n: int = 800, seed: int = 0) -> pd.DataFrame:
    """Observed values at least 20 above the lower bound (5 % of the range is 5); a fifth missing."""
    r = np.random.default_rng(seed)
    y = r.integers(0, 2, n)
    age = pd.array(r.integers(20, 90, n) + 5 * y, dtype="Int64")
    hours = r.uniform(20.0, 95.0, n)
    smoker = pd.array(r.random(n) < 0.3 + 0.3 * y, dtype="boolean")
    grade = np.where(y == 1, r.choice(["a", "b"], n), r.choice(["b", "c"], n)).astype(object)
    for j, col in enumerate((age, hours, smoker, grade)):
        gaps = np.random.default_rng(100 + j).random(n) < GAP
        col[gaps] = np.nan if col is hours or col is grade else pd.NA
    return pd.DataFrame({"age": age, "hours": hours, "smoker": smoker, "grade": grade, "y": y})


def _share_near_lower(values: pd.Series) -> float:
    present = values.dropna().to_numpy(dtype=np.float64)
    return float((present <= LOWER + 0.01 * (UPPER - LOWER)).mean())


CASES = [(m, EXTRA.get(m, {})) for m in METHODS]
if "gem" in METHODS:  # the default's finer one-way release nests the missing code in the missing
    CASES.append(("gem", dict(EXTRA["gem"], one_way_refine=1)))  # code; and without it


# The neural methods' default configurations match every sampled batch to their matching stage's
# released one-way marginals (docs/matching.md): a gap moves with its indicator and the values
# follow the released bins, so neither the fill nor a generator's pile at the lower bound (DP-SACTGAN
# put 22 % / 35 % of ages / hours there under this budget before the stage) reaches a present value.
CASES += [pytest.param(m, None, id=f"{m}-default", marks=pytest.mark.slow) for m in NEURAL]


@pytest.mark.parametrize(("method", "extra"), CASES)
def test_no_fill_value_in_rows_that_are_not_missing(method, extra):
    cls = synthesizers.get(method)
    reason = cls.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    df = _frame()
    assert _share_near_lower(df["age"]) == 0.0 and df["age"].min() >= 20  # the reference: none near
    if extra is None:  # a neural method: its default configuration, within a time budget
        model = synthesizers.create(method).fit(df, _schema(), epsilon=20.0, seed=0, num_records=len(df),
                                                max_seconds=NEURAL_SECONDS)
    else:
        model = synthesizers.create(method, **{**cls.SMOKE, **extra}).fit(df, _schema(), epsilon=20.0, seed=0)
    syn = model.sample(3000, seed=1)
    assert list(syn.columns) == list(df.columns)
    for col in ("age", "hours"):
        assert _share_near_lower(syn[col]) <= 0.01, (method, col, _share_near_lower(syn[col]))
    # missing rates: a marginal method's are one-way marginals it releases; a neural method's
    # default configuration matches its rows to its matching stage's released one-way marginals
    for col in ("age", "hours", "smoker", "grade"):
        real, fake = df[col].isna().mean(), syn[col].isna().mean()
        assert abs(fake - real) <= 0.06, (method, col, real, fake)
    # gaps come back as the input had them, never as a sentinel value
    assert set(syn["smoker"].dropna().unique()) <= {False, True}
    assert set(syn["grade"].dropna().unique()) <= {"a", "b", "c"}
    assert str(syn["age"].dtype) == "Int64" and syn["hours"].dtype == np.float64


def test_a_gap_is_one_code_of_its_column_for_every_marginal_method():
    """The methods code what ``data.Discretizer`` codes: one column per column of the user's
    schema, the continuous ones with their bins and one missing code; the user's schema and the
    model schema give the same codes."""
    schema, df = _schema(), _frame(200)
    for bins in (6, 16):
        disc = data.Discretizer(schema, bins)
        via_model = data.Discretizer(data.model_schema(schema), bins)
        assert disc.schema.names == via_model.schema.names == schema.names
        assert disc.sizes == via_model.sizes
        assert disc.missing_codes == {"age": disc.sizes[0] - 1, "hours": bins}
        codes = disc.codes(df)
        np.testing.assert_array_equal(codes[:, 0] == disc.sizes[0] - 1, df["age"].isna().to_numpy())
        np.testing.assert_array_equal(codes, via_model.codes(data.to_model_frame(df, schema)))
        x = data.TableEncoder(schema).encode(df)
        np.testing.assert_array_equal(codes, disc.codes_from_encoded(x))
