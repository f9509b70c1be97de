"""DP-SACTGAN: a conditional column-token transformer GAN whose generator learns only through one
sanitised gradient per step. See ``docs/dp-sactgan.md``.

Li and Wang (2023), "A self-attention-based differentially private tabular GAN with high data
utility" (arXiv:2312.13031), after CTAB-GAN+ (Zhao et al. 2022), with this project's corrections:

* **Encoding.** Discrete columns one-hot (a binary column as a two-slot one-hot); a continuous
  column ``v`` (scaled to [-1, 1] by its schema bounds) as ``(alpha, beta)``: ``beta`` one-hot of a
  mode m, ``alpha = (v - mu_m) / (4 sd_m)``. The modes are **public** (centres of equal-width
  public bins, ``modes="public"``) or fitted by a one-dimensional **DP-EM** per column
  (``synthesizers._dp_em.dp_em_ssp``, accounted, ``modes="dp-em"``); never a mixture fitted on private values.
  A row takes its most probable mode (``mode_assignment="argmax"``, the paper) or one drawn from
  the posterior (``"sample"``, CTAB-GAN+).
* **Conditional vector.** One one-hot block per column (the category, or the mode); each row
  conditions on one block. Its frequencies are Gaussian-noised histograms (accounted,
  ``cond="noisy"``; the modes of a DP-EM column take the fitted DP weights, free) or uniform
  (``cond="uniform"``, free). The critic sees real rows of the chosen category (training by
  sampling), drawn inside the chosen shard.
* **Networks.** :class:`dpgen_jax.models.ColumnTokenGenerator` and
  :class:`~dpgen_jax.models.ColumnTokenCritic` (one token per column) and, when the schema has a
  discrete label, an :class:`~dpgen_jax.models.AuxClassifier`. WGAN-GP with slerp interpolates,
  gumbel-softmax (tau 0.2), the information loss, Adam with coupled L2 (CTAB-GAN+'s settings).
* **The DP hook.** The generator's activated output passes once through
  :func:`dpgen_jax.dpsgd.sanitized` (each row's gradient clipped to C, Gaussian noise of std
  2 C sigma). The adversarial term, the information loss and the auxiliary classifier all consume
  the hooked rows and are summed into one loss: one release per step. The conditional
  cross-entropy on the raw logits bypasses the hook: it depends on the DP conditional
  frequencies only.
* **Shards.** K critics and classifiers, one per secret shard (GS-WGAN's partition), stacked and
  ``vmap``-ed; each step draws one shard, updates its critic and classifier on that shard only,
  and the generator through the hook. Accounted by :class:`privacy.ShardedSanitizerPhase`
  with the proven (selection-conditioned) bound as the headline, composed exactly with the
  histograms and DP-EM; the number that assumes each step's shard draw is fresh is reported
  beside it, labelled. K = 1 is the paper's single discriminator, whose honest epsilon is the
  unsubsampled composition (all three accountings agree there but the paper's).

Functional API: :func:`build_layout`, :func:`public_modes`, :func:`fit_modes`, :func:`encode_rows`,
:func:`release_conditional_counts`, :func:`prepare`, :func:`activate`, :func:`critic_update`,
:func:`generator_update`, :func:`shard_iteration`, :func:`train_step`, :func:`pretrain`,
:func:`train`, :func:`sample_encoded`, :func:`privacy_phases`, :func:`num_shards`,
:func:`generator_steps`. Class API: :class:`DPSACTGAN` (``synthesizers.create("dp-sactgan")``).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp

from dpgen_jax import _validate as _v
from dpgen_jax._machine import physical_memory
from dpgen_jax import privacy
from dpgen_jax.synthesizers._dpsgd_phases import dpsgd_phase
from dpgen_jax.synthesizers._base import Synthesizer, Release, register
from dpgen_jax.synthesizers.dp_sactgan import _critic
from dpgen_jax.synthesizers.dp_sactgan._conditional import (
    TrainData,
    cond_log_probs,
    prepare,
    real_indices,
    release_conditional_counts,
    sample_cond,
)
from dpgen_jax.synthesizers.dp_sactgan._config import (
    ABSURD_SNR,
    COND_SOURCES,
    FLAGS,
    MODE_ASSIGNMENTS,
    MODE_SOURCES,
    PAPER_PRESETS,
    DPSACTGANConfig,
)
from dpgen_jax.synthesizers.dp_sactgan._encoding import (
    Layout,
    Modes,
    assign_modes,
    build_layout,
    decode_rows,
    encode_rows,
    fit_modes,
    public_modes,
    split_columns,
)
from dpgen_jax.synthesizers.dp_sactgan._hook_training import (
    Batch,
    Net,
    Nets,
    PretrainState,
    State,
    activate,
    aux_update,
    cond_loss,
    critic_loss,
    critic_update,
    draw_batch,
    generator_grads,
    generator_loss,
    generator_update,
    hooked_loss,
    init_aux,
    init_critic,
    init_generator,
    init_state,
    label_of,
    networks,
    optimizer,
    pretrain,
    private_terms,
    sample_encoded,
    shard_iteration,
    slerp,
    train,
    train_step,
)

# ----------------------------------------------------------------------------- privacy


def num_shards(config: DPSACTGANConfig, num_records: int) -> int:
    """K: ``num_discriminators``, or ``min(max_discriminators, N // batch_size)``.

    Raises:
        ValueError: too few records for one batch per shard on average (naming the argument).
    """
    n = _v.whole(minimum=1, num_records=num_records)
    b = config.batch_size
    if config.num_discriminators is None:
        if n < b:
            raise ValueError(f"too few rows: N={n} records is fewer than batch_size={b}, so not even one "
                             "shard holds a batch; use a smaller batch_size.")
        return min(config.max_discriminators, n // b)
    k = config.num_discriminators
    if n / k < b:
        raise ValueError(f"too few rows per shard: num_discriminators={k} gives N/K={n / k:.1f} records "
                         f"per shard for N={n}, fewer than batch_size={b}; use fewer discriminators, a "
                         "smaller batch_size, or num_discriminators=None (K chosen from N).")
    return k


def generator_steps(config: DPSACTGANConfig, num_records: int) -> int:
    """T: ``generator_steps``, or ``round(epochs * (N // batch_size))`` when ``epochs`` is set."""
    if config.epochs is None:
        return config.generator_steps
    return int(round(config.epochs * (int(num_records) // config.batch_size)))


def histogram_columns(layout: Layout, config: DPSACTGANConfig) -> tuple[int, ...]:
    """Columns whose block frequencies are noisy histograms (``cond="noisy"``): every discrete
    column, and the continuous ones when their modes are public."""
    if config.cond != "noisy":
        return ()
    return tuple(c for c in range(layout.n_cols) if not layout.continuous[c] or config.modes == "public")


def privacy_phases(config: DPSACTGANConfig, layout: Layout, num_records: int, *,
                   steps: Mapping[str, int] | None = None, private: bool = True) -> list:
    """Histograms (one Gaussian release per histogram), DP-EM (``3 * em_iterations`` releases per
    continuous column), and the training: ``mechanism="hook"`` the generator
    (:class:`privacy.ShardedSanitizerPhase`, proven); ``"critic"`` the critic's DP-SGD
    (:class:`privacy.DPSGDPhase`, ``critic_steps`` per generator step, q = B / N)."""
    steps = dict(steps or {})
    phases = []
    n_hist = len(histogram_columns(layout, config))
    n_em = 3 * config.em_iterations * layout.n_continuous if config.modes == "dp-em" else 0
    t = steps.get("generator", generator_steps(config, num_records))
    if n_hist:
        s = steps.get("histograms", n_hist)
        phases.append(privacy.GaussianPhase("histograms", config.hist_noise_multiplier, s, sensitivity=1.0)
                      if private else privacy.NonPrivatePhase("histograms", s))
    if n_em:
        s = steps.get("dp-em", n_em)
        phases.append(privacy.GaussianPhase("dp-em", config.em_noise_multiplier, s, sensitivity=1.0,
                                            output="snapped")
                      if private else privacy.NonPrivatePhase("dp-em", s))
    if config.mechanism == "critic":
        return phases + [dpsgd_phase(
            "critic", batch_size=config.batch_size, num_records=int(num_records),
            noise_multiplier=config.noise_multiplier, steps=steps.get("critic", t * config.critic_steps),
            clip_norm=config.clip_norm, private=private)]
    if not private:
        return phases + [privacy.NonPrivatePhase("generator", t)]
    return phases + [privacy.ShardedSanitizerPhase(
        "generator", num_shards=num_shards(config, num_records), steps=t, rows_per_step=config.batch_size,
        noise_multiplier=config.noise_multiplier, dataset_size=int(num_records), accounting="proven",
        clip_norm=config.clip_norm)]


PREPROCESSING = ("histograms", "dp-em")


def calibrate(config: DPSACTGANConfig, layout: Layout, phases: list, epsilon: float, delta: float,
              accountant: str = "pld", fixed: Sequence[str] = ()) -> list:
    """Preprocessing noise first (alone at ``preprocessing_share * epsilon``, or as configured),
    then the generator noise with the preprocessing (and the phases named in ``fixed``) held fixed; warns when the generator update
    would be essentially noise (per-step signal-to-noise bound below :data:`ABSURD_SNR`)."""
    pre = [p for p in phases if p.name in PREPROCESSING]
    if pre and config.preprocessing_share is not None:
        scaled = {p.name: p for p in privacy.calibrate(pre, config.preprocessing_share * epsilon, delta,
                                                       accountant, max_noise_multiplier=1e7)}
        phases = [scaled.get(p.name, p) for p in phases]
    gen = next(p for p in phases if p.name not in PREPROCESSING and p.name not in fixed)
    if not gen.spends_privacy:  # no training step planned: nothing left to calibrate
        return phases
    out = privacy.calibrate(phases, epsilon, delta, accountant, max_noise_multiplier=1e7,
                            fixed=[*fixed, *(p.name for p in pre)])
    if config.mechanism == "critic":
        return out
    gen = next(p for p in out if p.name == "generator")
    snr = math.sqrt(config.batch_size) / (2.0 * gen.noise_multiplier * math.sqrt(layout.width))
    if snr < ABSURD_SNR:
        warnings.warn(
            f"epsilon={epsilon} with K={gen.num_shards} discriminator(s), B={gen.rows_per_step} and "
            f"T={gen.steps} steps needs a per-row noise multiplier of {gen.noise_multiplier:.6g} (the "
            f"paper's sigma = {2 * gen.noise_multiplier:.6g}): each generator update is essentially "
            f"noise (signal-to-noise at most sqrt(B)/(sigma sqrt(width)) = {snr:.2e}). Use the sharded "
            "mode (num_discriminators=None) or fewer steps.", UserWarning, stacklevel=4)
    return out


# The one measurement of the attention's memory on a wide table (docs/scaling.md): at 1,071 columns,
# batch 64 and 4 heads the fit asked for one 40 GB allocation. Every column is a token, so the
# attention arrays grow as batch x heads x columns^2; the estimate scales this point.
ATTENTION_MEASURED = {"columns": 1071, "batch_size": 64, "num_heads": 4, "bytes": 40e9}


def attention_bytes(columns: int, batch_size: int, num_heads: int) -> float:
    """The estimated largest allocation of a fit (bytes), extrapolated from ``ATTENTION_MEASURED``."""
    m = ATTENTION_MEASURED
    return (m["bytes"] * (batch_size / m["batch_size"]) * (num_heads / m["num_heads"])
            * (columns / m["columns"]) ** 2)


@register
class DPSACTGAN(Synthesizer):
    """DP-SACTGAN with a scikit-learn-like interface (``docs/dp-sactgan.md``).

    Example:
        >>> model = DPSACTGAN().fit(train_df, data.adult_schema(), epsilon=1.0)   # doctest: +SKIP
        >>> model.sample(1000)                                                   # doctest: +SKIP
    """

    METHOD = "dp-sactgan"
    DESCRIPTION = ("conditional column-token transformer GAN, generator trained through one sanitised "
                   "output gradient per step, K sharded critics (Li and Wang 2023, corrected)")
    CONFIG = DPSACTGANConfig
    SMOKE = dict(batch_size=8, generator_steps=6, noise_dim=8, d_model=8, num_heads=2,
                 num_layers=1, n_modes=3, em_iterations=2, chunk_size=3, aux_hidden=(8,))
    PRESETS = PAPER_PRESETS
    DECODE_MODE = "sample"
    CHECKPOINTS = True
    FLAGS = FLAGS

    def resolve_config(self, schema, preset=None):
        """The base resolution, refused when the attention between columns cannot fit in this
        machine's memory (an estimate from the measured point, ``ATTENTION_MEASURED``): a clear
        error before any row is read instead of an allocation failure minutes into the fit."""
        config = super().resolve_config(schema, preset)
        need, have = attention_bytes(len(schema), config.batch_size, config.num_heads), physical_memory()
        if have is not None and need > have:
            raise ValueError(
                f"DP-SACTGAN's attention between the {len(schema)} columns needs about {need / 1e9:.0f} GB "
                f"in one allocation at batch_size={config.batch_size} and num_heads={config.num_heads} "
                f"(it grows as batch x heads x columns^2; {ATTENTION_MEASURED['bytes'] / 1e9:.0f} GB was "
                f"measured at {ATTENTION_MEASURED['columns']:,} columns, batch 64, 4 heads); this machine "
                f"has {have / 1e9:.0f} GB. Use fewer columns, a smaller batch_size or num_heads, or "
                "another method (advice.recommend).")
        return config

    def _phases(self, config, schema, num_records, private):
        return privacy_phases(config, build_layout(schema, config), num_records, private=private)

    def _calibrate(self, config, schema, phases, epsilon, delta, fixed=()):
        return calibrate(config, build_layout(schema, config), phases, epsilon, delta, self.ACCOUNTANT,
                         fixed=fixed)

    def _paper_accounting(self, config, phases, delta, report):
        if not any(p.name == "generator" for p in phases):  # mechanism="critic": not the paper's
            return None
        gen = next(p for p in phases if p.name == "generator")
        if gen.num_shards == 1:
            return {"label": ("The paper's Theorem 1 ((lambda, 2 B lambda / sigma_paper^2)-RDP per generator "
                              "step) composed over the executed steps, RDP classic conversion, training "
                              "only: a valid bound for the training phase (one discriminator sees every "
                              "record, no amplification); the preprocessing is not included"),
                    "epsilon": privacy.epsilon([gen], delta, accountant="rdp", conversion="classic")}
        paper = dataclasses.replace(gen, accounting="paper")
        return {"label": ("GS-WGAN's accounting of sharded discriminators (steps * B per-row releases, "
                          "each subsampled at 1/K, RDP classic conversion), training only; NOT a valid "
                          "bound, for comparison only"),
                "epsilon": privacy.epsilon([paper], delta, accountant="rdp", conversion="classic")}

    def _train(self, plan, x, key, hooks) -> Release:
        config = plan.config
        layout = build_layout(plan.model_schema, config)
        k = 1 if config.mechanism == "critic" else num_shards(config, plan.records.n)
        config = config.replace(num_discriminators=k)
        k_modes, k_assign, k_hist, k_part, k_pre, k_init, k_run = jax.random.split(key, 7)
        t0 = time.perf_counter()
        _, u = split_columns(layout, x)
        if config.modes == "dp-em":
            private_em = plan.private and layout.n_continuous
            modes = fit_modes(u, k_modes, config, plan.phase("dp-em").noise_multiplier if private_em else 0.0)
        else:
            modes = public_modes(plan.model_schema, config)
        rows, codes = encode_rows(layout, x, modes, config.mode_assignment, k_assign)
        hist_cols = histogram_columns(layout, config)
        noise = plan.phase("histograms").noise_std if plan.private and hist_cols else 0.0
        counts = release_conditional_counts(codes, layout, k_hist, noise, hist_cols)
        if config.cond == "noisy" and config.modes == "dp-em":  # the DP-EM weights (post-processing)
            j = 0
            for c in range(layout.n_cols):
                if layout.continuous[c]:
                    counts = counts.at[c, :config.n_modes].set(modes.weights[j] * plan.records.n)
                    j += 1
        elif config.cond == "uniform":
            counts = jnp.where(jnp.isfinite(cond_log_probs(layout, jnp.zeros_like(counts), training=False)),
                               1.0, 0.0)
        log_probs = cond_log_probs(layout, counts, training=True)
        pre_steps = {"histograms": len(hist_cols)} if hist_cols else {}
        if config.modes == "dp-em" and layout.n_continuous:
            pre_steps["dp-em"] = 3 * config.em_iterations * layout.n_continuous
        released = {"modes": {f: getattr(modes, f) for f in Modes._fields}, "cond": {"counts": counts}}
        if config.mechanism == "critic":
            t1 = time.perf_counter()
            state = _critic.train(config, layout, rows, codes, log_probs, k_run, plan.phase("critic"),
                                  **hooks.phase_args("critic"))
            generator = jax.block_until_ready(_critic.released_generator(config, state))
            return Release(arrays={"generator": generator, **released},
                               steps={**pre_steps, "critic": int(state.critic.steps)},
                               seconds={"preprocessing": t1 - t0, "critic": time.perf_counter() - t1},
                               notes=self._critic_notes(config, layout, plan.private))
        data = prepare(layout, rows, codes, k_part, k)
        t1 = time.perf_counter()
        critics = aux = None
        pretrained = 0
        if config.pretrain_iterations:
            pre = pretrain(config, layout, data, log_probs, k_pre, progress=hooks.progress("pretrain"),
                           should_stop=hooks.stop("pretrain"), checkpoint=hooks.checkpoint("pretrain"), flags=hooks.flags)
            critics, aux, pretrained = pre.critics, pre.aux, int(pre.steps)
            opt = optimizer(config)  # fresh Adam states for the generator phase, as GS-WGAN
            critics = Net(critics.params, jax.vmap(opt.init)(critics.params))
            if aux is not None:
                aux = Net(aux.params, jax.vmap(opt.init)(aux.params))
        t2 = time.perf_counter()
        state = init_state(config, layout, k, k_init, critics, aux)
        state = train(config, layout, state, data, log_probs, k_run, plan.phase("generator"),
                      **hooks.phase_args("generator"))
        jax.block_until_ready(state.generator.params)
        t3 = time.perf_counter()
        notes = self._notes(config, layout, k, pretrained, plan.private)
        steps = {"generator": int(state.steps), **pre_steps}
        return Release(arrays={"generator": state.generator.params, **released},
                           steps=steps,
                           seconds={"preprocessing": t1 - t0, "pretrain": t2 - t1, "generator": t3 - t2},
                           notes=tuple(notes))

    @staticmethod
    def _preprocessing_notes(config, layout) -> list[str]:
        return [
            (f"Modes of the {layout.n_continuous} continuous column(s): one-dimensional DP-EM per column "
             f"({config.n_modes} components, {config.em_iterations} iterations, values scaled to [-1, 1] by "
             "the schema bounds; phase 'dp-em'); no mixture is fitted on private values without noise."
             if config.modes == "dp-em" else
             f"Modes of the continuous columns: centres of {config.n_modes} equal-width public bins over "
             "the schema bounds (no data read)."),
            ("Conditional-vector frequencies: Gaussian-noised histograms (phase 'histograms'; each record "
             "adds 1 to one bin per histogram)" + (", the DP-EM weights for mode blocks" if config.modes == "dp-em"
                                                   else "") + "; they are released to sample."
             if config.cond == "noisy" else "Conditional-vector frequencies: uniform (no data read)."),
        ]

    @classmethod
    def _critic_notes(cls, config, layout, private) -> list[str]:
        notes = cls._preprocessing_notes(config, layout) + [
            "Mechanism 'critic' (not the paper's): one critic and the auxiliary classifier trained with "
            f"DP-SGD (phase 'critic', {config.critic_steps} step(s) per generator step): real rows "
            "Poisson-sampled at the public rate batch_size / N (no per-category draw of real rows); each "
            "real row conditions on its own value in a uniformly chosen column and is paired with one "
            "generated row under that condition.",
            "The generator reads only the critic's and the classifier's outputs on generated rows and the "
            "conditional cross-entropy (conditions from the released frequencies): post-processing. The "
            "information loss, which reads real rows' critic features, is not used.",
        ]
        if config.generator_average is not None:
            notes.append(f"The released generator is the bias-corrected exponential moving average (decay "
                         f"{config.generator_average}) of its iterates: a function of the iterates, so "
                         "post-processing like them.")
        if private:
            notes.append(
                "Per-example term: the pair's critic difference, its own gradient penalty (slerp between the "
                "pair) and the classifier's cross-entropy on the real row, clipped jointly to "
                f"C={config.clip_norm} (the critic's per-example gradients materialised, the penalty being "
                "a double-backward term; the classifier's by ghost norms; one clip over both), Gaussian "
                "noise of std noise_multiplier*C once per step.")
        return notes

    @classmethod
    def _notes(cls, config, layout, k, pretrained, private) -> list[str]:
        notes = cls._preprocessing_notes(config, layout) + [
            f"Shards: every record got an independent uniform label in 1..K (K={k}) from the secret key, so "
            "adding or removing a record moves no other record; the labels, shard sizes and the shard drawn "
            "at each step are never saved, logged or reported." if k > 1 else
            "One discriminator sees every record (the paper's mechanism): no amplification by sampling.",
            "The critics and auxiliary classifiers (one per shard) train without privacy and never leave "
            "the process, and no state is shared across shards (each shard's pretraining has its own "
            "temporary generator): the headline bound needs nothing more, whatever state a critic "
            "carries between steps.",
            "The critic's real rows for a condition (training by sampling) are looked up inside the chosen "
            "shard; they reach the generator only through the sanitised rows.",
        ]
        if pretrained:
            notes.append(f"Pretraining ({pretrained} iterations per shard, each critic and classifier on its "
                         "own shard against its own temporary generator) releases nothing.")
        if private:
            notes.append(
                "The released generator depends on the private rows only through one sanitised gradient per "
                f"step: each generated row's gradient (adversarial, information and classifier terms summed) "
                f"clipped to C={config.clip_norm} with Gaussian noise of std 2*C*noise_multiplier. The "
                "conditional cross-entropy on the raw logits bypasses the sanitiser: it depends on the DP or "
                "public conditional frequencies only.")
        return notes

    def _sample_encoded(self, n, key):
        layout = build_layout(self.model_schema, self.fitted_config)
        return sample_encoded(self.fitted_config, layout, self.released, n, key)

    def _release_shapes(self, config, schema, statistics):
        layout = build_layout(schema, config)
        g = jax.eval_shape(lambda kk: init_generator(config, layout, kk), jax.random.key(0))
        shape = (layout.n_continuous, config.n_modes)
        f32 = jnp.float32
        return {"generator": g,
                "modes": {f: jax.ShapeDtypeStruct(shape, f32) for f in Modes._fields},
                "cond": {"counts": jax.ShapeDtypeStruct((layout.n_cols, layout.max_width), f32)}}


__all__ = [
    "ABSURD_SNR",
    "Batch",
    "COND_SOURCES",
    "FLAGS",
    "DPSACTGAN",
    "DPSACTGANConfig",
    "Layout",
    "MODE_ASSIGNMENTS",
    "MODE_SOURCES",
    "Modes",
    "Net",
    "Nets",
    "PAPER_PRESETS",
    "PREPROCESSING",
    "PretrainState",
    "State",
    "TrainData",
    "activate",
    "assign_modes",
    "aux_update",
    "build_layout",
    "calibrate",
    "cond_log_probs",
    "cond_loss",
    "critic_loss",
    "critic_update",
    "decode_rows",
    "draw_batch",
    "encode_rows",
    "fit_modes",
    "generator_grads",
    "generator_loss",
    "generator_steps",
    "generator_update",
    "histogram_columns",
    "hooked_loss",
    "init_aux",
    "init_critic",
    "init_generator",
    "init_state",
    "label_of",
    "networks",
    "num_shards",
    "optimizer",
    "prepare",
    "pretrain",
    "privacy_phases",
    "private_terms",
    "public_modes",
    "real_indices",
    "sample_cond",
    "sample_encoded",
    "shard_iteration",
    "slerp",
    "split_columns",
    "train",
    "train_step",
]
