"""Downstream-task metrics: the random-forest label accuracy of the DP-auto-GAN paper's Table 3, the
train-on-synthetic / test-on-real logistic-regression AUROC of the GS-WGAN thesis, and the
logistic-regression utility of the DP-SACTGAN paper (``docs/metrics.md``). Both train on one table (real training rows or synthetic rows) and test
on the real held-out rows."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, roc_auc_score
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from dpgen_jax import _validate as _v
from dpgen_jax.data import Schema, TableEncoder
from dpgen_jax.metrics._forest import Score, fit_recording_convergence, forest_predict, note_from_flag, source_flag
from dpgen_jax.metrics._inputs import (
    Table,
    check_label,
    check_schema,
    prepare_frames,
    missing_as_value,
)
from dpgen_jax.metrics._registry import (BoardColumn, Headline, Metric, MetricInputs, Option, needs_binary_label,
                                         needs_label, register_metric)

#: Trees of the DP-auto-GAN paper's Table 3 random forest.
LABEL_ACCURACY_TREES = 800
#: The C grid of the GS-WGAN thesis's TSTR model selection (20 values, log-spaced from 1e-4 to 1).
TSTR_C_GRID: tuple[float, ...] = tuple(float(c) for c in np.logspace(-4, 0, 20))


# -- Table 3: random-forest label accuracy ------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class LabelAccuracyProtocol:
    """Options of the DP-auto-GAN paper's Table 3 random-forest protocol.

    The defaults are the clean full split (all training rows against all test rows) with the
    paper's forest. The notebook behind Table 3 used ``size=4000`` with one unseeded shuffle for
    real data (84.53 %) and ``size=32561`` for synthetic data (i.e. everything); pass
    ``shuffle_seed`` to make such a shuffle reproducible.

    Attributes:
        size: Keep the first ``size`` rows of the (shuffled) training rows and of the test rows;
            None = all. Larger than a frame keeps all of it, as the notebook's slicing does.
        shuffle_seed: Shuffle the training rows with ``numpy.random.default_rng(shuffle_seed)``
            before truncating; None = keep their order.
        n_estimators: Trees (800 in the paper).
        random_state: Forest seed (0 in the paper).
    """

    size: int | None = None
    shuffle_seed: int | None = None
    n_estimators: int = LABEL_ACCURACY_TREES
    random_state: int = 0

    def __post_init__(self) -> None:
        if self.size is not None:
            _v.whole(minimum=1, size=self.size)
        if self.shuffle_seed is not None:
            _v.whole(shuffle_seed=self.shuffle_seed)
        _v.whole(minimum=1, n_estimators=self.n_estimators)
        _v.whole(random_state=self.random_state)

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for a result's ``protocol`` entry."""
        return {
            "model": (
                f"RandomForestClassifier(n_estimators={self.n_estimators}, "
                f"random_state={self.random_state})"
            ),
            "features": "other columns as integer codes (continuous raw)",
            "size": self.size,
            "shuffle_seed": self.shuffle_seed,
            "split": (
                "full: all training rows vs all real test rows"
                if self.size is None and self.shuffle_seed is None
                else "first `size` (shuffled) training rows vs the first `size` test rows (the paper's notebook)"
            ),
        }


def label_accuracy_from_tables(
    train: Table,
    test: Table,
    schema: Schema,
    label: str,
    protocol: LabelAccuracyProtocol = LabelAccuracyProtocol(),
    n_jobs: int | None = -1,
) -> float:
    """:func:`label_accuracy` on prepared tables."""
    size, shuffle_seed = protocol.size, protocol.shuffle_seed
    j = schema.names.index(label)
    x, y = np.delete(train.codes, j, axis=1), train.codes[:, j].astype(np.int64)
    x_test, y_test = np.delete(test.codes, j, axis=1), test.codes[:, j].astype(np.int64)
    if shuffle_seed is not None:
        perm = np.random.default_rng(shuffle_seed).permutation(len(y))
        x, y = x[perm], y[perm]
    if size is not None:
        x, y, x_test, y_test = x[:size], y[:size], x_test[:size], y_test[:size]
    rf = RandomForestClassifier(
        n_estimators=protocol.n_estimators, random_state=protocol.random_state, n_jobs=n_jobs
    )
    rf.fit(x.astype(np.float32), y)
    return float(np.mean(forest_predict(rf, x_test.astype(np.float32), n_jobs) == y_test))


@missing_as_value(label_rows=True)
def label_accuracy(
    train: pd.DataFrame,
    test: pd.DataFrame,
    schema: Schema,
    label: str | None = None,
    *,
    size: int | None = None,
    shuffle_seed: int | None = None,
    n_estimators: int = LABEL_ACCURACY_TREES,
    random_state: int = 0,
    n_jobs: int | None = -1,
) -> float:
    """Random-forest accuracy on a label column: the protocol of the DP-auto-GAN paper's Table 3.

    Features are the other columns as integer category codes (continuous columns raw), the
    model is ``RandomForestClassifier(n_estimators=800, random_state=0)``, and the score is the
    accuracy on ``test`` as a fraction. Pass the real training rows as ``train`` for the
    real-data number, or synthetic rows for a synthesizer's number; ``test`` is real held-out.

    The notebook that made Table 3 shuffles ``train``, keeps its first ``SIZE`` rows and tests
    on the *first* ``SIZE`` rows of ``test``: real data used ``SIZE = 4000`` (84.53 %, one
    unseeded shuffle), synthetic data ``SIZE = 32561`` (all synthetic rows against all 16,281
    test rows). ``size`` and ``shuffle_seed`` reproduce that; the default (no shuffle, no
    truncation) is the clean full split (0.8519 on real Adult).

    Args:
        train: Training rows (real or synthetic).
        test: Real held-out rows.
        schema: The schema of both frames.
        label: The target column (default: the schema's label); binary or categorical.
        size: Keep the first ``size`` rows of (shuffled) ``train`` and of ``test``; larger
            than a frame keeps all of it, as in the notebook. None = all rows.
        shuffle_seed: Shuffle ``train`` with this seed before truncating (None = keep order).
        n_estimators: Trees (800 in the paper).
        random_state: Forest seed (0 in the paper).
        n_jobs: Parallel jobs for the forest (-1 = all cores).

    Returns:
        Accuracy in [0, 1].

    Raises:
        TypeError, ValueError: on frames that do not match the schema, a continuous or unknown
            label, or invalid protocol options.

    References:
        Tantipongpipat et al. 2021, Table 3; ``docs/metrics.md``.
    """
    check_schema(schema)
    name = check_label(schema, label)
    protocol = LabelAccuracyProtocol(size, shuffle_seed, n_estimators, random_state)
    return label_accuracy_from_tables(*prepare_frames(schema, train=train, test=test), schema, name, protocol, n_jobs)


def majority_rate(test: Table, schema: Schema, label: str) -> float:
    """The share of the real test rows in their most frequent label class: the accuracy of a model
    that always predicts it, which ``evaluate`` holds synthetic-trained accuracies against."""
    codes = test.codes[:, schema.names.index(label)].astype(np.int64)
    return float(np.bincount(codes).max() / len(codes))


# -- TSTR logistic-regression AUROC -------------------------------------------------------------
def _auroc_lr(
    x: np.ndarray, y: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, c: float = 1.0, penalty: str = "l2"
) -> tuple[float, bool]:
    """AUROC of a liblinear logistic regression, and whether it converged."""
    model = LogisticRegression(
        solver="liblinear", C=c, l1_ratio=1.0 if penalty == "l1" else 0.0, max_iter=100, random_state=0
    )
    converged = fit_recording_convergence(model, x, y)
    return float(roc_auc_score(y_test, model.predict_proba(x_test)[:, 1])), converged


def tstr_auroc_from_tables(
    train: Table, test: Table, schema: Schema, label: str, *, tune: bool = False, seed: int = 0
) -> Score:
    """:func:`tstr_auroc` on prepared tables; an undefined score is ``Score(None, reason=...)``."""
    j = schema.names.index(label)
    b = TableEncoder(schema).block(label)
    width = train.encoded.shape[1]
    cols = np.concatenate([np.arange(0, b.start), np.arange(b.stop, width)])
    x, y = train.encoded[:, cols], train.codes[:, j].astype(np.int64)
    x_test, y_test = test.encoded[:, cols], test.codes[:, j].astype(np.int64)
    if np.unique(y_test).size < 2:
        return Score(
            None, reason=f"the real test rows of {label!r} hold a single class, so AUROC is undefined"
        )
    if np.unique(y).size < 2:
        return Score(0.5, flag="constant_target")  # a constant score ranks nothing
    with threadpool_limits(limits=1, user_api="blas"):
        return _tstr_fit(x, y, x_test, y_test, label, train.name, tune, seed)


def _tstr_fit(
    x: np.ndarray,
    y: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    label: str,
    source: str,
    tune: bool,
    seed: int,
) -> Score:
    c, penalty = 1.0, "l2"
    if tune:
        counts = np.bincount(y, minlength=2)
        if counts.min() < 2 or len(y) < 18:
            return Score(
                None,
                reason=f"tune=True needs >= 2 rows of each class of {label!r} and >= 18 rows in {source}",
            )
        x_fit, x_val, y_fit, y_val = train_test_split(x, y, test_size=1 / 9, stratify=y, random_state=seed)
        if np.unique(y_fit).size < 2 or np.unique(y_val).size < 2:
            return Score(None, reason="the stratified validation split lost a class")
        best = -np.inf
        for pen in ("l1", "l2"):
            for cc in TSTR_C_GRID:
                auc, _ = _auroc_lr(x_fit, y_fit, x_val, y_val, cc, pen)
                if auc > best:
                    best, c, penalty = auc, cc, pen
    auc, converged = _auroc_lr(x, y, x_test, y_test, c, penalty)
    return Score(auc, flag=None if converged else "not_converged")


@missing_as_value(label_rows=True)
def tstr_auroc(
    train: pd.DataFrame,
    test: pd.DataFrame,
    schema: Schema,
    label: str | None = None,
    *,
    tune: bool = False,
    seed: int = 0,
) -> float:
    """Train-on-synthetic / test-on-real AUROC of a logistic regression on a binary label.

    The classifier is ``LogisticRegression(solver="liblinear")`` on the data layer's encoding of
    the other columns, as in the GS-WGAN thesis (``docs/metrics.md``). Pass synthetic rows as
    ``train`` for TSTR, or real training rows for the real-data reference.

    Args:
        train: Training rows (synthetic or real).
        test: Real held-out rows.
        schema: The schema of both frames.
        label: A binary (two-category) column (default: the schema's label); positive = the
            second category.
        tune: False (default): ``C = 1``, L2 penalty. True: the thesis's model selection:
            ``C`` over ``logspace(-4, 0, 20)`` x penalty {l1, l2} (40 fits), chosen by AUROC on a
            stratified 1/9 validation split of ``train``, then refitted on all of ``train``.
        seed: Seed of that validation split.

    Returns:
        AUROC on ``test`` in [0, 1]; 0.5 when ``train``'s label is constant (a constant score).

    Raises:
        TypeError, ValueError: on frames that do not match the schema, a label that is not
            binary, or when the score is undefined (single-class test labels; with ``tune``,
            too few rows of a class for the split), with the reason.

    References:
        ``docs/metrics.md`` (TSTR AUROC).
    """
    check_schema(schema)
    name = check_label(schema, label, binary_only=True)
    score = tstr_auroc_from_tables(*prepare_frames(schema, train=train, test=test), schema, name, tune=tune, seed=seed)
    if score.value is None:
        raise ValueError(f"tstr_auroc is undefined: {score.reason}.")
    return score.value


# -- the DP-SACTGAN paper's logistic-regression utility ----------------------------------------
#: The classifier of the DP-SACTGAN paper's Adult utility table (the CTAB-GAN+ evaluation code).
LR_UTILITY_MODEL = "LogisticRegression(max_iter=500, random_state=42)"


def _lr_utility_scores(
    train: Table, test: Table, cols: np.ndarray, j: int
) -> tuple[dict[str, float], str | None]:
    """Accuracy, AUROC and macro F1 of the LR trained on ``train``; and None or a note."""
    x, y = train.encoded[:, cols], train.codes[:, j].astype(np.int64)
    x_test, y_test = test.encoded[:, cols], test.codes[:, j].astype(np.int64)
    if np.unique(y).size < 2:
        pred = np.full(y_test.shape, y[0])
        proba, note = np.full(y_test.shape, 0.5), "constant_target"
    else:
        model = LogisticRegression(max_iter=500, random_state=42)
        with threadpool_limits(limits=1, user_api="blas"):
            converged = fit_recording_convergence(model, x, y)
        pred, proba = model.predict(x_test), model.predict_proba(x_test)[:, 1]
        note = None if converged else "not_converged"
    return {
        "accuracy": float(np.mean(pred == y_test)),
        "auroc": float(roc_auc_score(y_test, proba)),
        "f1_macro": float(f1_score(y_test, pred, average="macro", labels=[0, 1], zero_division=0)),
    }, note


def lr_utility_from_tables(
    train: Table,
    test: Table,
    synthetic: Table,
    schema: Schema,
    label: str,
    known_real: tuple[dict[str, float], str | None] | None = None,
) -> Score | dict[str, Any]:
    """:func:`lr_utility` on prepared tables; an undefined result is ``Score(None, reason=...)``.

    ``known_real`` is a previous ``(real scores, note)`` to reuse instead of refitting.
    """
    j = schema.names.index(label)
    if np.unique(test.codes[:, j]).size < 2:
        return Score(None, reason=f"the real test rows of {label!r} hold a single class, so AUROC is undefined")
    b = TableEncoder(schema).block(label)
    cols = np.r_[0 : b.start, b.stop : train.encoded.shape[1]]
    real, real_note = known_real if known_real is not None else _lr_utility_scores(train, test, cols, j)
    syn, syn_note = _lr_utility_scores(synthetic, test, cols, j)
    flags = [f for f in (source_flag("real", real_note), source_flag("synthetic", syn_note)) if f]
    return {
        "label": label,
        "real": real,
        "synthetic": syn,
        "difference": {k: real[k] - syn[k] for k in real},
        "protocol": {
            "model": LR_UTILITY_MODEL,
            "features": "the other columns in the data layer's encoding (one-hot, 0/1, scaled by the public bounds)",
            "positive": schema[label].categories[1],
            "difference": "real-trained score minus synthetic-trained score, both tested on the real test rows",
        },
        "flag": ",".join(flags) or None,
    }


@missing_as_value(label_rows=True)
def lr_utility(
    real_train: pd.DataFrame,
    real_test: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    label: str | None = None,
) -> dict[str, Any]:
    """Logistic-regression utility: accuracy, AUROC and F1 trained on real vs on synthetic rows.

    The utility metric of the DP-SACTGAN paper (Li and Wang 2023, "A self-attention-based
    differentially private tabular GAN with high data utility", Table 1, Adult), defined in the
    CTAB-GAN+ evaluation code: ``LogisticRegression(max_iter=500, random_state=42)`` is fitted
    once on ``real_train`` and once on ``synthetic`` and both are tested on ``real_test``;
    the reported numbers are the differences real minus synthetic (lower is better).

    Differences from that code, on purpose: the features are the data layer's encoding of the
    other columns (one-hot, 0/1 and continuous columns scaled by the public bounds instead of a
    min-max scaler fitted on the real rows), and the split is the dataset's own (Adult's
    train/test files) instead of a fresh stratified 80/20 split. F1 is the macro average over
    the two classes ("the mean of the per-class F1"), accuracy a fraction (the paper prints
    percentage points).

    Args:
        real_train: Real training rows.
        real_test: Real held-out rows.
        synthetic: Synthetic rows.
        schema: The schema of the three frames.
        label: A binary column (default: the schema's label); positive = the second category.

    Returns:
        ``{"label", "real": {"accuracy", "auroc", "f1_macro"}, "synthetic": {...},
        "difference": {...} (real - synthetic), "protocol", "flag"}``. A constant training
        label predicts that class (AUROC 0.5) and is flagged ``constant_<source>_target``; a
        solver stopped before converging is flagged ``<source>_fit_not_converged``.

    Raises:
        TypeError, ValueError: on frames that do not match the schema, a label that is not
            binary, or a real test label with a single class (AUROC undefined).
    """
    check_schema(schema)
    name = check_label(schema, label, binary_only=True)
    tables = prepare_frames(schema, real_train=real_train, real_test=real_test, synthetic=synthetic)
    result = lr_utility_from_tables(*tables, schema, name)
    if isinstance(result, Score):
        raise ValueError(f"lr_utility is undefined: {result.reason}.")
    return result


# ----------------------------------------------------------------------------- registered in evaluate


def _label_accuracy(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    train, test, synthetic, schema = inputs.labelled()
    options = inputs.options["label_accuracy"]
    args = (test, schema, inputs.label, options["label_protocol"], options["n_jobs"])
    real = (inputs.prior["label_accuracy"]["real"] if inputs.prior is not None
            else label_accuracy_from_tables(train, *args))
    return {"label_accuracy": {"label": inputs.label, "real": real,
                               "synthetic": label_accuracy_from_tables(synthetic, *args),
                               "protocol": options["label_protocol"].describe()}}


def _tstr(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    train, test, synthetic, schema = inputs.labelled()
    label, prior, tune = inputs.label, inputs.prior, inputs.options["tstr_auroc"]["tune_tstr"]
    entry: dict[str, Any] = {
        "label": label,
        "protocol": {
            "model": "LogisticRegression(solver='liblinear')",
            "selection": ("C over logspace(-4, 0, 20) x {l1, l2} on a 1/9 validation split"
                          if tune else "C = 1, l2"),
            "positive": schema[label].categories[1],
        },
    }
    flags = []
    for key, table in (("real", train), ("synthetic", synthetic)):
        if key == "real" and prior is not None:
            old = prior["tstr_auroc"]
            note = note_from_flag(old.get("flag"), "real")
            score = Score(old["real"], flag=note, reason=prior["nulls"].get("tstr_auroc.real"))
        else:
            score = tstr_auroc_from_tables(table, test, schema, label, tune=tune,
                                           seed=inputs.seed)
        entry[key] = score.value
        if score.value is None:
            nulls[f"tstr_auroc.{key}"] = score.reason
        if score.flag:
            flags.append(source_flag(key, score.flag))
    entry["flag"] = ",".join(flags) or None
    return {"tstr_auroc": entry}


def _lr_utility(inputs: MetricInputs, nulls: dict[str, str]) -> dict[str, Any]:
    known = None
    old = (inputs.prior or {}).get("lr_utility")
    if old:
        known = (old["real"], note_from_flag(old.get("flag"), "real"))
    entry = lr_utility_from_tables(*inputs.labelled(), inputs.label, known_real=known)
    if isinstance(entry, Score):
        nulls["lr_utility"] = entry.reason
        return {"lr_utility": None}
    return {"lr_utility": entry}


def _check_protocol(name: str, value: Any, schema: Schema) -> LabelAccuracyProtocol:
    if value is None:
        return LabelAccuracyProtocol()
    if not isinstance(value, LabelAccuracyProtocol):
        raise TypeError(f"{name} must be a LabelAccuracyProtocol, got {type(value).__name__}.")
    return value


register_metric(Metric(
    "label_accuracy", ("label_accuracy",), _label_accuracy, applies=needs_label, rank=20,
    options=(Option("n_jobs", -1),
             Option("label_protocol", None, _check_protocol, fingerprint=lambda p: ("protocol", p.describe())))))


register_metric(Metric(
    "tstr_auroc", ("tstr_auroc",), _tstr,
    applies=lambda i: needs_binary_label(i, "AUROC"),
    headlines=(Headline("LR AUROC on {label} (TSTR, liblinear)", "tstr_auroc.synthetic", "tstr_auroc.real"),),
    board=(BoardColumn("tstr_auroc", "tstr_auroc.synthetic", "TSTR AUROC", True),), rank=90,
    options=(Option("tune_tstr", False, fingerprint=lambda tune: ("tune_tstr", tune)),)))


register_metric(Metric(
    "lr_utility", ("lr_utility",), _lr_utility,
    applies=lambda i: needs_binary_label(i, "the LR utility"),
    headlines=(Headline("LR accuracy on {label} (max_iter 500)", "lr_utility.synthetic.accuracy",
                        "lr_utility.real.accuracy"),
               Headline("LR accuracy difference (real − synthetic)", "lr_utility.difference.accuracy"),
               Headline("LR AUROC difference (real − synthetic)", "lr_utility.difference.auroc"),
               Headline("LR macro F1 difference (real − synthetic)", "lr_utility.difference.f1_macro")), rank=100))
