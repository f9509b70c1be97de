"""DP-SACTGAN's critic mechanism (``mechanism="critic"``, ``docs/dp-sactgan.md``): DP-SGD on one
critic and the auxiliary classifier, the generator trained on their outputs only.

The approach of CTAB-GAN+'s DP release, done soundly:

* Real rows are Poisson-sampled at the public rate q = B / N (the engine's exact sampler): no
  training-by-sampling of real rows, whose per-category draw would give each record a private,
  data-dependent inclusion probability.
* Each sampled real row conditions on its own values (a uniform column, the row's category or mode
  in it) and is paired with one generated row under the same condition. Everything in an example
  (the pair, its slerp interpolate, the classifier's term on the real row) is a function of that
  record and public values only, so the per-example term ``D(fake_i | c_i) - D(real_i | c_i) +
  lambda (||grad D(slerp_i)|| - 1)^2 + CE(Aux(real_i), label_i)`` is clipped as a whole: critic and
  classifier gradients jointly, one clip, Gaussian noise once per step, one
  :class:`~dpgen_jax.privacy.DPSGDPhase` event. The gradient penalty is a double-backward term,
  which ghost norms do not cover: the critic's per-example gradients are materialised (by a
  compiled loop over the examples, faster on CPU than ``vmap`` for this transformer), the
  classifier's norms are ghost norms (plain Dense layers, first order), and each example is
  clipped once over both (:func:`clip_method`).
* The generator's loss reads only the critic's and the classifier's outputs on generated rows and
  the conditional cross-entropy, with conditions drawn from the DP (or public) frequencies:
  post-processing. The information loss, which reads real rows' critic features, is not used.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from jax import lax

from dpgen_jax.synthesizers import _gan
from dpgen_jax.synthesizers._dpsgd_phases import averaged_params, params_average
from dpgen_jax.synthesizers.dp_sactgan._conditional import sample_cond
from dpgen_jax.synthesizers._config import Flags
from dpgen_jax.synthesizers.dp_sactgan._config import FLAGS, DPSACTGANConfig
from dpgen_jax.synthesizers.dp_sactgan._encoding import Layout
from dpgen_jax.synthesizers.dp_sactgan._hook_training import (
    activate,
    cond_loss,
    init_aux,
    init_critic,
    init_generator,
    label_of,
    networks,
    optimizer,
    slerp,
)


def real_conditions(layout: Layout, codes: jax.Array, key: jax.Array):
    """``(cond (n, cond_width), column (n,), category (n,))`` of real rows from their own values:
    a uniform column per row and the row's category (or mode) in it."""
    col = jax.random.randint(key, (codes.shape[0],), 0, layout.n_cols)
    cat = jnp.take_along_axis(codes, col[:, None], axis=1)[:, 0]
    slot = jnp.asarray(layout.cond_offsets, jnp.int32)[col] + cat
    return jax.nn.one_hot(slot, layout.cond_width, dtype=jnp.float32), col, cat


def generate(config: DPSACTGANConfig, layout: Layout, g_params, cond: jax.Array, key: jax.Array):
    """``(logits, rows)``: the generator's padded logits and activated rows under ``cond``."""
    k_z, k_g = jax.random.split(key)
    z = jnp.concatenate([jax.random.normal(k_z, (cond.shape[0], config.noise_dim)), cond], axis=1)
    logits = networks(config, layout).generator.apply({"params": g_params}, z)
    return logits, activate(layout, logits, k_g, config.tau)


def critic_batch_fn(config: DPSACTGANConfig, layout: Layout):
    """The engine's ``batch_fn``: the sampled real rows, their own conditions, one generated row
    per real row under the same condition, and the slerp fractions."""

    def batch_fn(data, idx, key, extra):
        g_params, _ = extra
        k_c, k_f, k_t = jax.random.split(key, 3)
        real = jnp.take(data["rows"], idx, axis=0)
        cond, _, _ = real_conditions(layout, jnp.take(data["codes"], idx, axis=0), k_c)
        _, fake = generate(config, layout, g_params, cond, k_f)
        return {"real": real, "fake": lax.stop_gradient(fake), "cond": cond,
                "t": jax.random.uniform(k_t, (idx.shape[0], 1))}

    return batch_fn


def critic_terms(config: DPSACTGANConfig, layout: Layout):
    """The per-example loss ``(params, batch) -> (B,)`` over ``params = {"critic", "aux"}``:
    WGAN-GP's pair term with its own gradient penalty, plus the classifier's cross-entropy on the
    real row (module docstring). Every network is row-wise, so row i's term reads row i only."""
    nets = networks(config, layout)
    keep = layout.features_without_label()

    def loss(params, batch):
        score = lambda v: nets.critic.apply({"params": params["critic"]}, v)[0]  # noqa: E731
        r = jnp.concatenate([batch["real"], batch["cond"]], 1)
        f = jnp.concatenate([batch["fake"], batch["cond"]], 1)
        mid = slerp(batch["t"], r, f)
        grads = jax.grad(lambda v: jnp.sum(score(v)))(mid)
        gp = (jnp.sqrt(jnp.sum(grads * grads, axis=1) + 1e-12) - 1.0) ** 2
        out = score(f) - score(r) + config.gradient_penalty * gp
        if nets.aux is not None:
            logits = nets.aux.apply({"params": params["aux"]}, batch["real"][:, keep])
            target = label_of(layout, batch["real"])
            out = out - jnp.take_along_axis(jax.nn.log_softmax(logits), target[:, None], 1)[:, 0]
        return out

    return loss


def generator_objective(config: DPSACTGANConfig, layout: Layout):
    """``(g_params, critic_params, log_probs, key) -> loss`` on ``batch_size`` generated rows with
    conditions from ``log_probs``: ``-mean D(x | c)``, the classifier's cross-entropy of the rows'
    own labels, and the conditional cross-entropy on the raw logits. Reads no private row."""
    nets = networks(config, layout)
    keep = layout.features_without_label()

    def loss(g_params, critic_params, log_probs, key):
        k_c, k_f = jax.random.split(key)
        cond, col, cat = sample_cond(layout, log_probs, k_c, config.batch_size)
        logits, rows = generate(config, layout, g_params, cond, k_f)
        score, _ = nets.critic.apply({"params": critic_params["critic"]}, jnp.concatenate([rows, cond], 1))
        total = -jnp.mean(score) + cond_loss(layout, logits, col, cat)
        if nets.aux is not None:
            aux_logits = nets.aux.apply({"params": critic_params["aux"]}, rows[:, keep])
            target = lax.stop_gradient(label_of(layout, rows))
            total = total - jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(aux_logits), target[:, None], 1))
        return total

    return loss


def clip_method(config: DPSACTGANConfig, layout: Layout):
    """The engine's per-example clipping of :func:`critic_terms` (``dpsgd.clipped_grad_sum``):
    materialised per-example gradients for the critic, whose gradient penalty is a double backward
    (``"map"``: a compiled loop over the examples, which XLA runs faster on CPU than ``vmap`` for
    this network; ``docs/dp-sactgan.md`` has the timings), and ghost norms for the classifier, one
    clip over both; ``"map"`` without a classifier."""
    return "map" if networks(config, layout).aux is None else {"critic": "map", "aux": "ghost"}


@functools.lru_cache(maxsize=16)
def runner(config: DPSACTGANConfig, layout: Layout, num_rows: int, phase) -> _gan.GANRunner:
    """The compiled phase (``_gan.make_gan_runner``): ``critic_steps`` steps of the critic and
    classifier realising the accounted ``phase`` (clipped as :func:`clip_method` says; a
    ``NonPrivatePhase``: non-private), then one generator step, per iteration. With
    ``config.generator_average`` the generator's optimizer state also keeps the average of its
    iterates (:func:`released_generator` reads it)."""
    opt = optimizer(config)
    gen_opt = opt if config.generator_average is None else optax.chain(opt, params_average(config.generator_average))
    run = _gan.make_gan_runner(
        None, None, opt, gen_opt, phase, scan_rows=num_rows,
        critic_steps_per_generator_step=config.critic_steps, generator_batch_size=config.batch_size,
        method=clip_method(config, layout), critic_loss=critic_terms(config, layout),
        critic_batch_fn=critic_batch_fn(config, layout), generator_loss=generator_objective(config, layout))
    return _gan.GANRunner(run, opt, gen_opt)


def released_generator(config: DPSACTGANConfig, state: _gan.GANState):
    """The generator parameters to release: the average of the iterates (``generator_average``)
    or the last iterate."""
    if config.generator_average is None:
        return state.generator.params
    return averaged_params(state.generator.opt_state)


@functools.partial(jax.jit, static_argnums=(0, 1))
def init_params(config: DPSACTGANConfig, layout: Layout, key: jax.Array):
    """``(critic_params {"critic", "aux"}, generator_params)``, fresh (one compiled program: run
    eagerly, the initialisers' operations compile one by one, seconds on a table's first fit)."""
    k_d, k_a, k_g = jax.random.split(key, 3)
    return ({"critic": init_critic(config, layout, k_d), "aux": init_aux(config, layout, k_a)},
            init_generator(config, layout, k_g))


def train(config: DPSACTGANConfig, layout: Layout, rows: jax.Array, codes: jax.Array, log_probs: jax.Array,
          key: jax.Array, phase, *, progress=None, should_stop=None, checkpoint=None,
          flags: Flags = FLAGS) -> _gan.GANState:
    """The ``phase.steps`` critic steps of the accounted ``phase`` (``privacy_phases``' "critic":
    q = B / N over the public N) with a generator step after every ``config.critic_steps``.
    ``int(state.critic.steps)`` is the executed count the accountant is given."""
    k_init, k_run = jax.random.split(key)
    critic_params, g_params = init_params(config, layout, k_init)
    data = {"rows": rows, "codes": codes.astype(jnp.int32)}
    return _gan.train_gan(runner(config, layout, int(rows.shape[0]), phase),
                          critic_params, g_params, data, log_probs, k_run, critic_steps=phase.steps,
                          critic_steps_per_generator_step=config.critic_steps,
                          chunk_size=flags.chunk_size * config.critic_steps, progress=progress,
                          should_stop=should_stop, checkpoint=checkpoint)
