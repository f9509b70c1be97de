"""GEM (Liu, Vietri and Wu 2021, "Iterative Methods for Private Synthetic Data: Unifying Framework
and New Methods", NeurIPS): AIM's select-measure loop with a generator network in place of the
graphical model. See ``docs/gem.md``.

The table is discretised on public bins (``data.Discretizer``, as for MST and AIM). The budget is
AIM's, cut into units before any row is read (``_select_measure.unit_noise_multipliers``): the d
one-way histograms released together, then R rounds, each one exponential-mechanism selection and
one Gaussian measurement of a marginal.

1. **Workload** (public): the ``workload_degree``-way marginals with at most ``max_cells`` cells,
   all of them or a random subset of ``workload_size`` drawn from ``workload_seed`` (wide tables);
   the candidates are its downward closure with AIM's weights.
2. **Rounds.** Select the candidate whose marginal the generator approximates worst (AIM's score
   w_r (||M_r(D) - M_r(G)||_1 - sqrt(2 / pi) sigma n_r), sensitivity the largest weight; the
   generator's marginals are counts of ``score_samples`` rows it draws, scaled to the released
   total), measure it with Gaussian noise, then fit the generator to every measurement so far:
   ``round_steps`` Adam steps in one compiled program, each on a fresh batch of ``batch_size``
   noise vectors.
3. **The generator**: an MLP from N(0, I) noise to one softmax per column over its bins, so each
   noise vector is a product distribution and the model is their mixture (GEM's). The marginal of
   a measured clique is the batch mean of the product of its columns' probabilities, so the loss
   (L1 between these marginals, scaled to the released total, and the noisy counts, each
   measurement weighted by 1 / its noise standard deviation) is differentiable. The outputs are
   laid out as d columns of S bins (S: the most bins of any column, padding bins masked), so the
   softmaxes, the one-way term and sampling are dense operations. Marginals whose
   columns' bin counts round up to the same powers of two are stacked and computed together (a
   Khatri-Rao product and one batched matmul; stacks grow by doubling), so a round compiles a new
   program only when a new padded shape appears or a stack doubles.
4. **Components** (``independent_components``, the wide-table default): the generator's draws are
   decoupled between the connected components of the measured marginals' graph (each component's
   columns permuted across the rows together), so columns no measurement joins are independent,
   as in a graphical model fitted to the same measurements.
5. **Finer one-way release** (``one_way_refine``, off by default): continuous columns' one-way
   histograms on finer bins nested in the model's, summed for the fit and used at sampling to
   place a value inside its bin.

Accounting: the same units as AIM (every round one unit, or AIM's annealing with ``anneal``: a
round of m units costs m of each): the one-way release,
R unit selections (``privacy.ExponentialMechanismPhase``) and R unit measurements
(``privacy.GaussianPhase``), composed with the RDP accountant (the exponential mechanism has no
PLD event); fixed before data is read, calibrated by one common factor. Everything else reads only
released values (post-processing).

Functional API: :func:`discretizer`, :func:`privacy_phases`, :func:`bin_mask`, :func:`probabilities`,
:func:`measured`, :func:`group_marginals`, :func:`fit_steps`, :func:`draw_codes`, :func:`fit_released`,
:func:`fine_discretizer`, :func:`refinement`, :func:`coarse_histograms`, :func:`refine_codes`.
Class API: :class:`GEM` (``synthesizers.create("gem")``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import models
from dpgen_jax.data._discrete import SPACINGS, Discretizer, numpy_rng
from dpgen_jax.synthesizers import _select_measure as sm
from dpgen_jax.synthesizers import independent
from dpgen_jax.synthesizers._base import SynthesizerConfig, TrainResult, register

Clique = sm.Clique
PAPER_ACCOUNTING = ("zCDP of the one-way release and of every round summed and converted with the "
                    "bound of Canonne, Kamath and Steinke (2020), as AIM's reference code")


@dataclasses.dataclass(frozen=True)
class GEMConfig(SynthesizerConfig):
    """Hyperparameters of GEM (all public).

    Attributes:
        bins, bin_spacing: the public discretisation of continuous columns (``data.Discretizer``).
        workload_degree, max_cells: the workload is the ``workload_degree``-way marginals with at
            most ``max_cells`` cells (AIM's default: every 3-way marginal up to 10,000 cells).
        workload_size, workload_seed: with more eligible marginals than ``workload_size``, a
            public random subset of that many, drawn from ``workload_seed`` (None: all).
        max_rounds: R, the rounds; each selects and measures ``measurements_per_round`` marginals
            (one budget unit each), then fits the generator.
        measurements_per_round: k, the marginals selected (each by its own exponential
            mechanism, among those not yet chosen in the round) and measured per round.
        measure_share: alpha, the share of a unit spent on the measurement (AIM's 0.9).
        one_way_share: the share of the total budget spent on the one-way release (None: AIM's
            alpha d / (alpha d + R k), every unit the same budget as the one-way release's per
            column); the R k units share the rest.
            These four left None take ``DEFAULTS`` (AIM's schedule: R 32, k 1, alpha 0.9), or
            ``WIDE_DEFAULTS`` when pairs are candidates (R 8, k 8, alpha 0.5, one-way 0.88), as
            does ``output_init_scale``.
        pair_candidates: every 2-way marginal (up to ``max_cells`` cells) is a candidate, scored
            at once from the one-hot Gram matrices of the real and generated rows, beside the
            workload's other marginals; every candidate then has weight 1. None (auto): when the
            workload is a random subset (a wide table, where the workload's closure holds few of
            the pairs) and the columns have at most ``PAIR_WIDTH_LIMIT`` bins in all.
        noise_dim, hidden: the generator (noise width, hidden widths, ReLU).
        output_init_scale: the last layer's He-normal kernel is multiplied by this at
            initialisation: below 1 the initial mixture is closer to one product distribution,
            so columns nothing measured start (and tend to stay) closer to independent. None:
            1 (``DEFAULTS``), 0.1 with pair candidates (``WIDE_DEFAULTS``).
        one_way_init: the last layer's bias starts at the log of the released one-way
            probabilities (``one_way_probabilities``, floored at ``1e-5``), so the initial mixture
            is close to the independent model of the one-way release instead of uniform (an
            Adam step moves a logit by about the learning rate, so from a uniform start a code of
            rate 1 % takes thousands of steps to reach; ``docs/gem.md``). None: False
            (``DEFAULTS``), True with pair candidates (``WIDE_DEFAULTS``).
        independent_components: sample the components of the measured marginals' graph
            (columns joined by a measured marginal) independently of each other: after the
            generator draws the rows, each component's columns are permuted across the rows
            together (every column's marginal and every measured marginal's distribution kept,
            the rest of the generator's dependence between components removed), as a graphical
            model fitted to the same measurements would (MST, AIM). A column no marginal
            measured is a component of its own. The rounds' scores read the same sampler. None:
            False (``DEFAULTS``: on Adult one component soon holds every column), True with pair
            candidates (``WIDE_DEFAULTS``: a thousand columns, a hundred measured).
        calibrate_iterations: after the last fit, the generator's output bias is shifted this many
            times by the log ratio of the released one-way probabilities to the generator's own
            (mean softmax over ``score_samples`` noise vectors), for every column of a component
            of several columns (every column without ``independent_components``): each column's
            rates move to the one-way release's while the rows' dependence (the kernels) is kept,
            a raking of the generator to its one-way measurement (post-processing). 0: none.
            None: 0 (``DEFAULTS``), 4 with pair candidates (``WIDE_DEFAULTS``).
        anneal: AIM's annealing of the units (needs ``measurements_per_round`` 1): when a round's
            fit moved the generator's marginal of the measured clique by at most the expected noise
            (sqrt(2 / pi) sigma_t n_r in L1, total times the mixture's marginal over
            ``batch_size`` fixed noise vectors, before the measurement and after the fit), the
            next rounds spend 4 times the units (sigma halved, the selection's epsilon doubled);
            when fewer than twice a round's units remain, one last round spends them all
            (``_select_measure.round_units``). A round of m units costs exactly m unit selections
            and m unit measurements, so the plan and the accounting are those of R units whatever
            the path. None: False.
        one_way_refine: the one-way release of each continuous column is measured on this many
            times finer bins nested in the model's (``bins`` times this; an integer column at
            most one bin per integer); the fit reads their sums on the model's bins, and sampling
            draws a value inside its bin from the finer histogram instead of uniformly
            (post-processing; the release's sensitivity is unchanged). 1 (default): off; on the
            generated table that chooses the defaults 4 was worse, on Adult's peaked columns
            better (``docs/gem.md``, step 10).
        batch_size: noise vectors per gradient step.
        round_steps: Adam steps before the first round and after each round's measurements;
            ``final_steps`` more at the end. None: 400 (``DEFAULTS``; chosen on
            ``data.adult_like``, ``docs/gem.md``), 200 with pair candidates (``WIDE_DEFAULTS``).
        learning_rate: Adam's.
        score_samples: rows drawn from the generator to estimate the candidates' marginals.
        one_way_noise_multiplier, selection_noise_multiplier, measure_noise_multiplier: as AIM's
            (zCDP-equivalent Gaussian noise multipliers of one unit); None: AIM's split of a total
            rho of 1, scaled together by the calibration.
        num_columns: d, set from the schema by the fit.
    """

    bins: int = 32
    bin_spacing: str = "auto"
    workload_degree: int = 3
    max_cells: int = 10_000
    workload_size: int | None = 2000
    workload_seed: int = 0
    max_rounds: int | None = None
    measurements_per_round: int | None = None
    measure_share: float | None = None
    one_way_share: float | None = None
    pair_candidates: bool | None = None
    noise_dim: int = 64
    hidden: tuple[int, ...] = (256, 256)
    output_init_scale: float | None = None
    one_way_init: bool | None = None
    independent_components: bool | None = None
    calibrate_iterations: int | None = None
    anneal: bool | None = None
    one_way_refine: int = 1
    batch_size: int = 512
    round_steps: int | None = None
    final_steps: int = 1000
    learning_rate: float = 1e-3
    score_samples: int = 10_000
    one_way_noise_multiplier: float | None = None
    selection_noise_multiplier: float | None = None
    measure_noise_multiplier: float | None = None
    num_columns: int | None = None

    def validate(self) -> GEMConfig:
        _v.choice(self.bin_spacing, "bin_spacing", SPACINGS)
        for name in ("bins", "workload_degree", "max_cells", "noise_dim", "batch_size", "score_samples",
                     "one_way_refine"):
            _v.count(getattr(self, name), name, 1)
        for name in ("max_rounds", "measurements_per_round"):
            if getattr(self, name) is not None:
                _v.count(getattr(self, name), name, 1)
        for name in ("round_steps", "calibrate_iterations"):
            if getattr(self, name) is not None:
                _v.count(getattr(self, name), name, 0)
        for name in ("final_steps", "workload_seed"):
            _v.count(getattr(self, name), name, 0)
        if self.workload_size is not None:
            _v.count(self.workload_size, "workload_size", 1)
        if self.measure_share is not None and not 0.0 < _v.real(self.measure_share, "measure_share") < 1.0:
            raise ValueError(f"Expected measure_share={self.measure_share!r} in (0, 1).")
        if self.one_way_share is not None and not 0.0 < _v.real(self.one_way_share, "one_way_share") < 1.0:
            raise ValueError(f"Expected one_way_share={self.one_way_share!r} in (0, 1) or None.")
        if self.anneal and self.measurements_per_round not in (None, 1):
            raise ValueError(f"anneal=True needs measurements_per_round=1 (AIM's rounds of one "
                             f"marginal), got measurements_per_round={self.measurements_per_round}.")
        for name in ("pair_candidates", "one_way_init", "independent_components", "anneal"):
            if getattr(self, name) not in (None, True, False):
                raise ValueError(f"Expected {name}={getattr(self, name)!r} to be True, False or "
                                 "None (auto).")
        _v.positive_finite(self.learning_rate, "learning_rate")
        if self.output_init_scale is not None:
            _v.positive_finite(self.output_init_scale, "output_init_scale")
        if not self.hidden or any(isinstance(w, bool) or int(w) != w or w < 1 for w in self.hidden):
            raise ValueError(f"Expected hidden={self.hidden!r} to be a non-empty tuple of widths >= 1.")
        for name in ("one_way_noise_multiplier", "selection_noise_multiplier", "measure_noise_multiplier"):
            if getattr(self, name) is not None:
                _v.positive_finite(getattr(self, name), name)
        if self.num_columns is not None:
            _v.count(self.num_columns, "num_columns", 1)
            if self.workload_degree > self.num_columns:
                raise ValueError(f"workload_degree={self.workload_degree} exceeds the "
                                 f"{self.num_columns} columns of the schema.")
        return self

    def for_sizes(self, sizes: Sequence[int]) -> GEMConfig:
        """The configuration for columns of these bin counts (public): ``pair_candidates``
        decided (:meth:`scores_pairs`), every unset schedule field from ``WIDE_DEFAULTS`` when
        pairs are scored and from ``DEFAULTS`` otherwise, then :meth:`for_columns`."""
        pairs = self.scores_pairs(sizes)
        base = WIDE_DEFAULTS if pairs else DEFAULTS
        fill = {k: v for k, v in base.items() if getattr(self, k) is None}
        return self.replace(pair_candidates=pairs, **fill).for_columns(len(sizes))

    def for_columns(self, d: int) -> GEMConfig:
        """``num_columns=d``, every unset schedule field from ``DEFAULTS`` (:meth:`for_sizes`
        chooses between these and the wide-table defaults) and every unset noise multiplier from
        the split of a total rho of 1 (AIM's, or ``one_way_share``)."""
        if self.num_columns not in (None, d):
            raise ValueError(f"num_columns={self.num_columns} but the schema has {d} columns.")
        fill = {k: v for k, v in DEFAULTS.items() if getattr(self, k) is None}
        cfg = self.replace(num_columns=d, **fill).validate()
        defaults = sm.unit_noise_multipliers(d, cfg.units(), cfg.measure_share, cfg.one_way_share)
        return cfg.replace(**{k: v for k, v in defaults.items() if getattr(cfg, k) is None}).validate()

    def units(self) -> int:
        """R k: the budget units (one selection and one measurement each)."""
        return self.max_rounds * self.measurements_per_round

    def scores_pairs(self, sizes: Sequence[int]) -> bool:
        """Whether every 2-way marginal is a candidate (``pair_candidates``; None: auto, see the
        attribute). Public: it reads the schema's bin counts and the configuration only.

        Raises:
            ValueError: ``pair_candidates=True`` with more than ``PAIR_WIDTH_LIMIT`` bins in all.
        """
        width = int(sum(sizes))
        if self.pair_candidates is True and width > PAIR_WIDTH_LIMIT:
            raise ValueError(f"pair_candidates=True needs at most {PAIR_WIDTH_LIMIT} bins in all "
                             f"(a {width} x {width} Gram matrix); these columns have {width}.")
        if self.pair_candidates is not None:
            return self.pair_candidates
        if width > PAIR_WIDTH_LIMIT or self.workload_size is None or len(sizes) < 2:
            return False
        d, k = len(sizes), self.workload_degree
        if math.comb(d, k) > sm.ENUMERATE_LIMIT:
            return True
        return len(sm.workload(sizes, k, self.max_cells)) > self.workload_size


discretizer = sm.discretizer
PAIR_WIDTH_LIMIT = 4096  # bins in all for pair_candidates: a (bins x bins) Gram matrix per round
# The schedule left unset: AIM's (one marginal a round, 32 rounds, 90 % of a unit on its
# measurement, the one-way release as large as alpha d units), 400 Adam steps a round ...
DEFAULTS = dict(max_rounds=32, measurements_per_round=1, measure_share=0.9, one_way_share=None,
                output_init_scale=1.0, one_way_init=False, independent_components=False,
                round_steps=400, calibrate_iterations=0, anneal=False)
# ... and, when every pair is a candidate (a wide table), fewer rounds of several marginals, more
# of each unit on its selection (hundreds of thousands of candidates) and a fixed one-way share
# (chosen on a generated table, data.planted_binary(2000, 1000, seed=7): docs/gem.md).
WIDE_DEFAULTS = dict(max_rounds=8, measurements_per_round=8, measure_share=0.5, one_way_share=0.88,
                     output_init_scale=0.1, one_way_init=True, independent_components=True,
                     round_steps=200, calibrate_iterations=4, anneal=False)


def fine_discretizer(config: GEMConfig, schema) -> Discretizer | None:
    """The one-way release's finer binning (``one_way_refine`` times ``bins``, the same spacing,
    so its edges nest in :func:`discretizer`'s); None when ``one_way_refine`` is 1."""
    if config.one_way_refine == 1:
        return None
    return Discretizer(schema, config.bins * config.one_way_refine, config.bin_spacing)


class Refinement(NamedTuple):
    """The finer one-way binning against the model's: ``sizes`` the finer bins per column,
    ``parents[j]`` the model's bin of each finer bin of column j (None: a discrete column, the
    same codes), ``fallback[j]`` the finer bin holding each model bin's first integer or
    midpoint (for a model bin no finer bin names, if rounding ever leaves one)."""

    sizes: tuple[int, ...]
    parents: tuple[np.ndarray | None, ...]
    fallback: tuple[np.ndarray | None, ...]


def refinement(coarse: Discretizer, fine: Discretizer) -> Refinement:
    """How ``fine``'s bins nest in ``coarse``'s (public: from the two binnings alone)."""
    up, down = fine.parents(coarse), coarse.parents(fine)
    names = coarse.schema.names
    return Refinement(tuple(fine.sizes), tuple(up.get(n) for n in names), tuple(down.get(n) for n in names))


def coarse_histograms(fine_hists: Sequence[np.ndarray], ref: Refinement,
                      sizes: Sequence[int]) -> list[np.ndarray]:
    """The finer (noisy) histograms summed onto the model's bins."""
    return [y if p is None else np.bincount(p, weights=y, minlength=sizes[j])
            for j, (y, p) in enumerate(zip(fine_hists, ref.parents, strict=True))]


def refine_codes(codes: np.ndarray, ref: Refinement, fine_probs: np.ndarray,
                 rng: np.random.Generator) -> np.ndarray:
    """``codes`` (n, d) on the model's bins as codes on the finer bins: for a continuous column,
    each row's finer bin is drawn among the finer bins of its model bin with the released finer
    probabilities (uniformly among them where those are all 0). Post-processing."""
    out = np.array(codes, dtype=np.int64, copy=True)
    for j, parent in enumerate(ref.parents):
        if parent is None:
            continue
        w = np.asarray(fine_probs[j, :parent.size], np.float64)
        col = out[:, j].copy()
        for c in np.unique(col):
            rows = np.flatnonzero(col == c)
            kids = np.flatnonzero(parent == c)
            if kids.size == 0:
                kids = np.array([ref.fallback[j][c]])
            p = w[kids]
            p = np.full(kids.size, 1.0 / kids.size) if p.sum() <= 0 else p / p.sum()
            out[rows, j] = kids[rng.choice(kids.size, rows.size, p=p)]
    return out


def privacy_phases(config: GEMConfig, *, steps: Mapping[str, int] | None = None,
                   private: bool = True) -> list:
    """The one-way Gaussian release, R unit selections and R unit measurements (AIM's units)."""
    if config.num_columns is None or config.one_way_noise_multiplier is None:
        raise ValueError("Resolve the configuration for a schema first (GEMConfig.for_sizes(sizes) or for_columns(d)).")
    return sm.unit_phases(config.num_columns, config.units(), config.one_way_noise_multiplier,
                          config.selection_noise_multiplier, config.measure_noise_multiplier,
                          steps=steps, private=private)


# ----------------------------------------------------------------------------- the generator


def network(config: GEMConfig, width: int) -> models.MLP:
    """The generator: ``hidden`` ReLU layers to ``width`` = d * S logits (S: the most bins of any
    column), He-normal initialisation."""
    return models.MLP(tuple(config.hidden) + (width,), activation="relu", init_scheme="he")


def last_layer(params: PyTree) -> str:
    """The name of the generator's output layer in ``params`` (``models.MLP`` names its layers
    ``layer_0`` ... ``layer_L``)."""
    return max(params, key=lambda name: int(name.rsplit("_", 1)[1]))


ONE_WAY_FLOOR = 1e-5  # the smallest probability one_way_init sets (log 1e-5 = -11.5)


def init(config: GEMConfig, width: int, key: jax.Array, one_way: np.ndarray | None = None) -> PyTree:
    """He-normal parameters, the last layer's kernel times ``output_init_scale`` (how much the
    initial mixture's columns depend on the noise, and so on each other); with ``one_way``
    (``(d, S)`` probabilities, ``d S == width``) its bias the log of them (``one_way_init``)."""
    params = network(config, width).init(key, jnp.zeros((1, config.noise_dim)))["params"]
    last = last_layer(params)
    layer = dict(params[last])
    if config.output_init_scale not in (None, 1.0):
        layer["kernel"] = layer["kernel"] * config.output_init_scale
    if one_way is not None:
        bias = np.log(np.maximum(np.asarray(one_way, np.float64), ONE_WAY_FLOOR)).reshape(-1)
        if bias.size != width:
            raise ValueError(f"one_way has {bias.size} entries for an output of width {width}.")
        layer["bias"] = jnp.asarray(bias, layer["bias"].dtype)
    return {**params, last: layer}


def bin_mask(sizes: Sequence[int]) -> np.ndarray:
    """``(d, S)`` True on each column's bins, S = max(sizes) (the padded layout of the outputs)."""
    return np.arange(max(sizes))[None, :] < np.asarray(sizes)[:, None]


def probabilities(net: models.MLP, params: PyTree, z: jax.Array, mask: jax.Array) -> jax.Array:
    """``(n, d, S)``: one softmax per column over its bins, 0 on the padding bins (one dense
    softmax over the padded layout: no per-column or segment operation, so a table of a thousand
    columns compiles and runs as a table of ten)."""
    d, width = mask.shape
    logits = net.apply({"params": params}, z).reshape(z.shape[0], d, width)
    return jax.nn.softmax(jnp.where(mask, logits, -jnp.inf), axis=-1)


def bucket(size: int, widest: int) -> int:
    """A column's padded width in a stacked marginal: the next power of two, at most ``widest``
    (measurements whose columns' padded widths agree share one batched computation, so a round
    seldom compiles a new program)."""
    return min(1 << (int(size) - 1).bit_length(), int(widest))


class Group(NamedTuple):
    """The measured marginals of one padded shape, stacked (capacity a power of two).

    Attributes:
        columns: per position, ``(M,)`` the column (positions ordered by padded width; empty slots
            use column 0 with weight 0).
        target: ``(M, prod b_j)`` the noisy counts in that order, 0 on padding bins.
        weight: ``(M,)`` 1 / the measurement's noise standard deviation (0: an empty slot).
        widths: the padded widths b_j (static).
    """

    columns: tuple
    target: jax.Array
    weight: jax.Array
    widths: tuple


class Measured(NamedTuple):
    """Everything measured so far, as the compiled loss reads it: the one-way histograms as one
    ``(d, S)`` array (``one_way``, 0 on padding bins; ``one_weight`` 1 / their noise std) and the
    rounds' marginals in :class:`Group` s."""

    one_way: jax.Array
    one_weight: jax.Array
    groups: tuple


jax.tree_util.register_pytree_node(
    Group, lambda g: ((g.columns, g.target, g.weight), g.widths),
    lambda widths, ch: Group(ch[0], ch[1], ch[2], widths))


def measured(one_way: Sequence[np.ndarray], one_std: float,
             log: Sequence[tuple[Clique, np.ndarray, float]], sizes: Sequence[int]) -> Measured:
    """The measurements in the compiled layout: ``one_way`` the d noisy histograms (noise std
    ``one_std``), ``log`` the rounds' ``(clique, flattened noisy counts, noise std)``."""
    widest = max(sizes)
    by_shape: dict[tuple[int, ...], list] = {}
    for clique, y, std in log:
        order = sorted(range(len(clique)), key=lambda i: (bucket(sizes[clique[i]], widest), clique[i]))
        cols = [clique[i] for i in order]
        table = np.transpose(np.asarray(y, np.float64).reshape([sizes[a] for a in clique]), order)
        shape = tuple(bucket(sizes[a], widest) for a in cols)
        table = np.pad(table, [(0, b - sizes[a]) for a, b in zip(cols, shape)])
        by_shape.setdefault(shape, []).append((cols, table.ravel(), 1.0 / std))
    groups = []
    for shape in sorted(by_shape):
        items = by_shape[shape]
        cap = 1 << (len(items) - 1).bit_length()
        items = items + [([0] * len(shape), np.zeros(math.prod(shape)), 0.0)] * (cap - len(items))
        groups.append(Group(
            tuple(jnp.asarray([it[0][j] for it in items], jnp.int32) for j in range(len(shape))),
            jnp.asarray(np.stack([it[1] for it in items]), jnp.float32),
            jnp.asarray([it[2] for it in items], jnp.float32), shape))
    one = np.zeros((len(sizes), widest))
    for j, y in enumerate(one_way):
        one[j, :sizes[j]] = y
    return Measured(jnp.asarray(one, jnp.float32), jnp.float32(1.0 / one_std), tuple(groups))


def group_marginals(probs: jax.Array, group: Group) -> jax.Array:
    """``(M, prod b_j)``: each stacked marginal of the mixture, the batch mean of the product of
    its columns' probabilities (``probs``: ``(B, d, S)``), as a Khatri-Rao product of all but the
    last position contracted with the last by a batched matmul."""
    parts = [probs[:, cols, :b] for cols, b in zip(group.columns, group.widths)]
    n, m = probs.shape[0], group.weight.shape[0]
    left = parts[0]
    for p in parts[1:-1]:
        left = (left[..., :, None] * p[:, :, None, :]).reshape(n, m, -1)
    if len(parts) == 1:
        return jnp.mean(left, axis=0)
    return (jnp.einsum("bmx,bmk->mxk", left, parts[-1]) / n).reshape(m, -1)


def optimizer(config: GEMConfig) -> optax.GradientTransformation:
    return optax.adam(config.learning_rate)


@functools.partial(jax.jit, static_argnames=("net", "opt", "batch_size", "noise_dim"))
def fit_steps(params, opt_state, meas: Measured, mask, total, key, steps, *, net, opt,
              batch_size, noise_dim):
    """``steps`` Adam steps (a traced count; one compilation per layout of ``meas``) on the
    weighted L1 between the generator's marginals scaled to ``total`` and the noisy counts;
    step t draws its noise from ``fold_in(key, t)``."""

    def loss(p, z):
        probs = probabilities(net, p, z, mask)
        out = meas.one_weight * jnp.sum(jnp.abs(total * jnp.mean(probs, axis=0) - meas.one_way))
        for g in meas.groups:
            err = jnp.abs(total * group_marginals(probs, g) - g.target)
            out = out + jnp.sum(g.weight[:, None] * err)
        return out

    def body(t, carry):
        p, s = carry
        z = jax.random.normal(jax.random.fold_in(key, t), (batch_size, noise_dim))
        g = jax.grad(loss)(p, z)
        upd, s = opt.update(g, s, p)
        return optax.apply_updates(p, upd), s

    return jax.lax.fori_loop(0, steps, body, (params, opt_state))


@functools.partial(jax.jit, static_argnames=("net", "n", "noise_dim"))
def draw_codes(params, mask, key, *, net, n, noise_dim):
    """``(n, d)`` codes: a noise vector per row, each column drawn from its softmax (Gumbel-max
    over the padded layout; padding bins have probability 0)."""
    k_z, k_g = jax.random.split(key)
    probs = probabilities(net, params, jax.random.normal(k_z, (n, noise_dim)), mask)
    g = jnp.where(mask, jnp.log(jnp.maximum(probs, 1e-30)) + jax.random.gumbel(k_g, probs.shape), -jnp.inf)
    return jnp.argmax(g, axis=-1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("net", "noise_dim", "n", "iterations"))
def calibrate(params, mask, target, columns, key, *, net, noise_dim, n, iterations):
    """``params`` with the last layer's bias shifted ``iterations`` times by
    ``log(target) - log(mean probabilities)`` on the bins of ``columns`` (``(d,)`` booleans), the
    mean over ``n`` fixed noise vectors; ``target`` ``(d, S)`` probabilities, floored at
    ``ONE_WAY_FLOOR``. The kernels are kept: each column's rates move to ``target``'s, the
    rows' dependence through the noise stays (a raking of the generator's one-way rates)."""
    last = last_layer(params)
    z = jax.random.normal(key, (n, noise_dim))
    goal = jnp.log(jnp.maximum(target, ONE_WAY_FLOOR))
    move = mask & columns[:, None]

    def body(_, bias):
        p = {**params, last: {**params[last], "bias": bias}}
        now = jnp.log(jnp.maximum(jnp.mean(probabilities(net, p, z, mask), axis=0), 1e-30))
        return bias + jnp.where(move, goal - now, 0.0).reshape(-1)

    bias = jax.lax.fori_loop(0, iterations, body, params[last]["bias"])
    return {**params, last: {**params[last], "bias": bias}}


def components(cliques: Sequence[Clique], d: int) -> np.ndarray:
    """``(d,)`` the connected component of each column in the graph whose edges join the columns
    of each clique (labels 0, 1, ... in order of each component's first column)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    edges = np.asarray([(c[0], a) for c in cliques for a in c[1:]], np.int64).reshape(-1, 2)
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(d, d))
    return connected_components(graph, directed=False)[1].astype(np.int32)


def one_way_probabilities(one_way: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    """``(d, S)`` the noisy one-way histograms as probabilities (``independent.probabilities``:
    clipped at 0, normalised; 0 on the padding bins). Post-processing of the one-way release."""
    probs = independent.probabilities({str(j): y for j, y in enumerate(one_way)})
    out = np.zeros((len(sizes), max(sizes)), np.float32)
    for j, p in enumerate(probs):
        out[j, :sizes[j]] = p
    return out


def decouple(codes: np.ndarray, labels: np.ndarray, rng: np.random.Generator,
             one_way: np.ndarray | None = None) -> np.ndarray:
    """The sampler's rows: ``codes`` (n, d) drawn by the generator, with the components
    (``labels``, as :func:`components`) made independent of each other. A component of several
    columns keeps the generator's joint: its rows are permuted together (one permutation per
    component; the first is left in place). A column of its own is drawn from ``one_way`` (the
    released histogram, ``(d, S)`` probabilities) when given, else permuted. Nothing to do (one
    component of several columns): ``codes`` itself, no draw from ``rng``."""
    labels = np.asarray(labels)
    sizes = np.bincount(labels) if labels.size else np.zeros(0, np.int64)
    redraw_lone = one_way is not None and bool(np.any(sizes == 1))
    if sizes.size <= 1 and not redraw_lone:  # one component (or none): nothing to decouple
        return codes
    out = np.array(codes, copy=True)
    n = out.shape[0]
    for c, size in enumerate(sizes):
        cols = np.flatnonzero(labels == c)
        if size == 1 and one_way is not None:
            out[:, cols[0]] = independent.draw_codes(one_way[cols[0]], n, rng)
        elif c > 0:
            out[:, cols] = out[rng.permutation(n)[:, None], cols]
    return out


class Round(NamedTuple):
    cliques: tuple[Clique, ...]  # the marginals selected and measured, in order
    seconds: float               # the round's wall time (selections, measurements, fit)
    units: int = 1               # budget units of each selection and measurement (``anneal``)
    annealed: bool = False       # the next rounds spend 4 times the units


def mixture_marginal(net, params, z: jax.Array, mask: jax.Array, clique: Clique,
                     sizes: Sequence[int]) -> np.ndarray:
    """The generator's marginal of ``clique`` (probabilities, flattened in the clique's order):
    the mean over the noise vectors ``z`` of the product of the columns' probabilities."""
    probs = probabilities(net, params, z, mask)
    out = probs[:, clique[0], :sizes[clique[0]]]
    for a in clique[1:]:
        out = (out[:, :, None] * probs[:, a, None, :sizes[a]]).reshape(z.shape[0], -1)
    return np.asarray(jnp.mean(out, axis=0), np.float64)


def fit_released(config: GEMConfig, codes: np.ndarray, sizes: Sequence[int], key: jax.Array, *,
                 private: bool = True, should_stop: Callable[[], bool] | None = None,
                 phases: Sequence | None = None, progress=None,
                 fine: tuple[np.ndarray, Refinement] | None = None):
    """The whole of GEM on the private codes. Returns the generator's parameters, the released
    total (the mean of the noisy one-way histograms' sums), the rounds executed, the one-way
    probabilities on the model's bins and those on the finer bins (None without ``fine``).
    ``fine``: ``(codes on the finer bins, refinement)`` (``one_way_refine``): the one-way
    release is measured on the finer bins (one record still adds one to one cell of each
    column's histogram) and summed onto the model's.
    ``private=False``: exact counts and the best candidate each round. ``should_stop`` is asked
    before every round after the first (units not spent are not spent at all). ``phases``: the
    accounted phases the noise is read from (default: :func:`privacy_phases` of ``config``)."""
    d = len(sizes)
    if config.num_columns != d:
        raise ValueError(f"num_columns={config.num_columns} but the codes have {d} columns; "
                         "resolve the configuration with GEMConfig.for_sizes(sizes).")
    work = sm.workload(sizes, config.workload_degree, config.max_cells, size=config.workload_size,
                       seed=config.workload_seed)
    if not work:
        raise ValueError(f"max_cells={config.max_cells} leaves no {config.workload_degree}-way "
                         "marginal in the workload.")
    cands = sm.candidates(work)
    pairs = None
    if config.scores_pairs(sizes):  # every pair, scored from Gram matrices; every weight 1
        cands = {r: 1.0 for r in cands if len(r) != 2}
        size = np.asarray(sizes, np.int64)
        pairs = np.argwhere(np.triu(np.outer(size, size) <= config.max_cells, 1))
        pair_cells = (size[pairs[:, 0]] * size[pairs[:, 1]]).astype(np.float64)
        real_gram = sm.onehot_gram(codes, sizes)
    keys = list(cands)
    answers = {r: sm.counts(codes, sizes, r).astype(np.float64) for r in keys}
    sensitivity = max(cands.values())
    phases = {p.name: p for p in (privacy_phases(config) if phases is None else phases)}
    sigma = phases["measure"].noise_multiplier if private else None
    eps = phases["selection"].epsilon if private else None

    k_one, k_init, k_rounds = jax.random.split(key, 3)
    std1 = phases["one_way"].noise_std if private else None
    singles = [(j,) for j in range(d)]
    if fine is None:
        one, fine_probs = sm.measure(codes, sizes, singles, std1, k_one), None
    else:
        fine_one = sm.measure(fine[0], fine[1].sizes, singles, std1, k_one)
        one = coarse_histograms(fine_one, fine[1], sizes)
        fine_probs = one_way_probabilities(fine_one, fine[1].sizes)
    total = max(1.0, float(np.mean([y.sum() for y in one])))  # post-processing of the release
    one_probs = one_way_probabilities(one, sizes)
    log: list[tuple[Clique, np.ndarray, float]] = []

    mask = jnp.asarray(bin_mask(sizes))
    net, opt = network(config, mask.size), optimizer(config)
    params = init(config, mask.size, k_init, one_probs if config.one_way_init else None)
    state = opt.init(params)
    static = dict(net=net, opt=opt, batch_size=config.batch_size, noise_dim=config.noise_dim)

    def fit(p, s, k, steps):
        return fit_steps(p, s, measured(one, std1 or 1.0, log, sizes), mask,
                         jnp.float32(total), k, jnp.int32(steps), **static)

    per_round = min(config.measurements_per_round, len(keys) + (0 if pairs is None else len(pairs)))
    params, state = fit(params, state, jax.random.fold_in(k_rounds, 10**6), config.round_steps)
    rounds: list[Round] = []
    anneal = bool(private and config.anneal)
    z_moved = (jax.random.normal(jax.random.fold_in(k_rounds, 10**6 + 3), (config.batch_size, config.noise_dim))
               if anneal else None)
    sigma_u, eps_u = sigma, eps
    level, spent, t = 1, 0, 0
    while spent < config.max_rounds:
        if rounds and should_stop is not None and should_stop():
            break
        m, last = sm.round_units(level, config.max_rounds - spent) if anneal else (1, False)
        sigma = None if sigma_u is None else sigma_u / math.sqrt(m)
        eps = None if eps_u is None else eps_u * math.sqrt(m)
        t0 = time.perf_counter()
        k_sample, k_sel, k_meas, k_fit = jax.random.split(jax.random.fold_in(k_rounds, t), 4)
        sample = np.asarray(draw_codes(params, mask, k_sample, net=net, n=config.score_samples,
                                       noise_dim=config.noise_dim))
        if config.independent_components:  # the sampler's rows (post-processing of the log)
            sample = decouple(sample, components([c for c, _, _ in log], d),
                              numpy_rng(jax.random.fold_in(k_sample, 1)), one_probs)
        scale = total / config.score_samples
        est = {r: sm.counts(sample, sizes, r) * scale for r in keys}
        quality = sm.scores(cands, answers, est, sizes, sigma)
        q = np.array([quality[r] for r in keys], np.float64)
        if pairs is not None:
            l1 = sm.pair_l1(real_gram, sm.onehot_gram(sample, sizes) * scale, sizes)
            bias = 0.0 if sigma is None else sm.BIAS * sigma
            q = np.concatenate([q, l1[pairs[:, 0], pairs[:, 1]] - bias * pair_cells])
        chosen = sm.select_many(q, per_round, eps, numpy_rng(k_sel), sensitivity=sensitivity)
        picked = tuple(keys[i] if i < len(keys) else tuple(int(a) for a in pairs[i - len(keys)])
                       for i in chosen)
        for j, r in enumerate(picked):
            k_j = k_meas if j == 0 else jax.random.fold_in(k_meas, j)  # one per round: as before k
            (y,) = sm.measure(codes, sizes, [r], sigma, k_j)
            log.append((r, y, sigma or 1.0))
        if anneal:
            before = mixture_marginal(net, params, z_moved, mask, picked[0], sizes)
        params, state = fit(params, state, k_fit, config.round_steps)
        jax.block_until_ready(params)
        annealed = False
        if anneal and not last:  # AIM's rule, on the generator's marginal (post-processing)
            moved = total * float(np.abs(mixture_marginal(net, params, z_moved, mask, picked[0], sizes)
                                         - before).sum())
            annealed = moved <= sm.BIAS * sigma * math.prod(sizes[a] for a in picked[0])
            level = 4 * level if annealed else level
        rounds.append(Round(picked, time.perf_counter() - t0, m, annealed))
        spent, t = spent + m, t + 1
        if progress is not None:
            progress(spent, config.max_rounds)
    params, _ = fit(params, state, jax.random.fold_in(k_rounds, 10**6 + 1), config.final_steps)
    if config.calibrate_iterations:
        columns = np.ones(d, bool)
        if config.independent_components:  # a lone column is drawn from its histogram anyway
            labels = components([c for r in rounds for c in r.cliques], d)
            columns = np.bincount(labels)[labels] > 1
        params = calibrate(params, mask, jnp.asarray(one_probs), jnp.asarray(columns),
                           jax.random.fold_in(k_rounds, 10**6 + 2), net=net,
                           noise_dim=config.noise_dim, n=config.score_samples,
                           iterations=config.calibrate_iterations)
    return params, total, rounds, one_probs, fine_probs


@register
class GEM(sm.MarginalSynthesizer):
    """GEM with a scikit-learn-like interface (no optional package needed).

    Example:
        >>> model = GEM().fit(train_df, data.adult_schema(), epsilon=1.0)  # doctest: +SKIP
        >>> model.sample(1000)                                             # doctest: +SKIP
    """

    METHOD = "gem"
    DESCRIPTION = ("AIM's rounds (a marginal chosen by the exponential mechanism, measured with "
                   "Gaussian noise) fitting a generator network instead of a graphical model "
                   "(Liu, Vietri and Wu 2021)")
    CONFIG = GEMConfig
    DECODE_MODE = "sample"
    PAPER_ACCOUNTING = PAPER_ACCOUNTING
    NEEDS_MBI = False

    def resolve_config(self, schema, preset=None):
        config = super().resolve_config(schema, preset)
        sizes = discretizer(config, schema).sizes
        config = config.for_sizes(sizes)
        if len(schema) >= config.workload_degree and not sm.workload(
                sizes, config.workload_degree, config.max_cells, size=config.workload_size,
                seed=config.workload_seed):
            raise ValueError(f"max_cells={config.max_cells} leaves no {config.workload_degree}-way "
                             "marginal of the schema in the workload.")
        return config

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, private=private)

    def _train(self, config, x, key, ctx) -> TrainResult:
        t0 = time.perf_counter()
        disc, finer = discretizer(config, ctx.schema), fine_discretizer(config, ctx.schema)
        codes = disc.codes_from_encoded(x)
        fine = None if finer is None else (finer.codes_from_encoded(x), refinement(disc, finer))
        params, total, rounds, one_probs, fine_probs = fit_released(
            config, codes, disc.sizes, key, private=ctx.private, should_stop=ctx.should_stop,
            phases=ctx.phases() if ctx.private else None, progress=ctx.progress("measure"), fine=fine)
        names = ctx.schema.names
        listing = ", ".join("-".join(names[a] for a in c) for r in rounds for c in r.cliques)
        units = sum(r.units * len(r.cliques) for r in rounds)
        pairs = config.scores_pairs(disc.sizes)
        notes = [
            sm.bins_note(disc),
            (f"{len(rounds)} rounds ran, annealed as AIM's (units per round: "
             + ", ".join(str(r.units) for r in rounds) + f"; {units} of {config.max_rounds} units"
             if config.anneal and ctx.private else
             f"{len(rounds)} of {config.max_rounds} rounds ran ({units} units")
            + ", each unit one selection and one Gaussian measurement); the candidates (the marginals scored) are public: "
            + ("every eligible marginal of the workload" if config.workload_size is None else
               f"the closure of at most {config.workload_size} eligible "
               f"{config.workload_degree}-way marginals drawn from the public seed "
               f"{config.workload_seed}")
            + (", and every 2-way marginal of at most "
               f"{config.max_cells} cells, all with weight 1 (sensitivity 1)" if pairs else "")
            + ". Selected marginals: " + listing + ".",
            *([] if finer is None else [(
                f"The one-way release measures each continuous column on {config.one_way_refine} "
                f"times finer bins nested in the model's ({finer.describe()}); the fit reads their "
                "sums on the model's bins.")]),
            "Post-processing, not accounted because it reads only released values: the total "
            "(the mean sum of the noisy one-way histograms), "
            + ("the generator's initial output bias (the log of the one-way probabilities), "
               if config.one_way_init else "")
            + "the generator's fit "
            f"({config.round_steps} Adam steps per round, {config.final_steps} at the end), "
            + (f"its output bias moved {config.calibrate_iterations} times toward the one-way "
               "probabilities, " if config.calibrate_iterations else "")
            + "the scores' generator marginals and sampling"
            + ("" if finer is None else " (a value's finer bin inside its bin drawn from the finer "
               "one-way histogram, clipped at 0)") + ".",
        ]
        labels = (components([c for r in rounds for c in r.cliques], len(disc.sizes))
                  if config.independent_components else np.zeros(len(disc.sizes), np.int32))
        if config.independent_components:
            notes.append(f"Sampling: the {int(labels.max()) + 1} connected components of the measured "
                         "marginals' graph are drawn independently of each other (post-processing "
                         "of the released selections).")
        sampler = {"labels": jnp.asarray(labels), "one_way": jnp.asarray(one_probs)}
        if fine_probs is not None:
            sampler["fine"] = jnp.asarray(fine_probs)
        released = {"generator": params, "sampler": sampler}
        return TrainResult(config=config, released=released,
                           steps={"one_way": 1, "selection": units, "measure": units},
                           seconds={"gem": time.perf_counter() - t0}, assumptions=notes,
                           state={"rounds": rounds, "total": total})

    def _sample_frame(self, n, key, mode):
        del mode  # every column is drawn from its bins' probabilities
        k_codes, k_values = jax.random.split(key)
        cfg = self.fitted_config
        disc = discretizer(cfg, self.model_schema)
        mask = jnp.asarray(bin_mask(disc.sizes))
        codes = np.asarray(draw_codes(self.released["generator"], mask, k_codes,
                                      net=network(cfg, mask.size), n=n, noise_dim=cfg.noise_dim))
        sampler = self.released["sampler"]
        if cfg.independent_components:
            codes = decouple(codes, np.asarray(sampler["labels"]),
                             numpy_rng(jax.random.fold_in(key, 1)), np.asarray(sampler["one_way"]))
        finer = fine_discretizer(cfg, self.model_schema)
        if finer is None:
            return disc.decode(codes, k_values)
        codes = refine_codes(codes, refinement(disc, finer), np.asarray(sampler["fine"]),
                             numpy_rng(jax.random.fold_in(key, 2)))
        return finer.decode(codes, k_values)

    def _release_shapes(self, config, schema):
        d, widest = bin_mask(discretizer(config, schema).sizes).shape
        sampler = {"labels": jax.ShapeDtypeStruct((d,), jnp.int32),
                   "one_way": jax.ShapeDtypeStruct((d, widest), jnp.float32)}
        finer = fine_discretizer(config, schema)
        if finer is not None:
            sampler["fine"] = jax.ShapeDtypeStruct((d, max(finer.sizes)), jnp.float32)
        return {"generator": jax.eval_shape(lambda: init(config, d * widest, jax.random.key(0))),
                "sampler": sampler}


__all__ = [
    "GEM",
    "GEMConfig",
    "Round",
    "bin_mask",
    "calibrate",
    "components",
    "decouple",
    "one_way_probabilities",
    "discretizer",
    "fine_discretizer",
    "refinement",
    "refine_codes",
    "coarse_histograms",
    "Refinement",
    "draw_codes",
    "fit_released",
    "fit_steps",
    "init",
    "bucket",
    "group_marginals",
    "measured",
    "network",
    "optimizer",
    "privacy_phases",
    "probabilities",
]
