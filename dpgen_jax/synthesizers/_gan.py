"""WGAN pieces with a DP-SGD critic: critic terms, generator step, the alternating runner.

The critic sees private rows and is trained with DP-SGD (Poisson sampling, per-example clipping,
Gaussian noise); the generator sees only the critic, so its updates are post-processing. The
pieces take plain callables: ``critic_fn(params, rows) -> (B,)`` scores and
``fake_fn(gen_params, frozen, key, n) -> (n, width)`` generated rows (``frozen`` holds any other
released, fixed parameters, e.g. DP-auto-GAN's decoder). Both DP-auto-GAN (a GAN in a latent
space, decoded) and DP-WGAN (a GAN in data space) are built from them.

Critic terms (``clipping``):

* ``"paired"``: each real row is paired with one fresh generated row and the per-example term
  ``D(fake) - D(real)`` is clipped as a whole (Tantipongpipat et al. 2021; Frigerio et al. 2019).
* ``"real_only"``: only ``-D(real)`` is clipped and noised; the generated rows' term depends on no
  private record (the generator is a DP output and z is fresh noise), so its gradient is added
  unnoised. Each generated row's gradient is still clipped to the same C, not for privacy but to
  keep the two terms' balance of the paired form (without it the unclipped term dominates).

See ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from dpgen_jax._typing import PyTree
from dpgen_jax import _validate as _v
from dpgen_jax import dpsgd, privacy
from dpgen_jax.synthesizers._dpsgd_phases import torch_rmsprop, weight_clamp

CRITIC_CLIPPINGS = ("paired", "real_only")


class GANState(NamedTuple):
    critic: dpsgd.TrainState
    generator: dpsgd.TrainState


class GANRunner(NamedTuple):
    """A compiled GAN phase (:func:`make_gan_runner`) and the optimizers its states start from."""

    run: Callable
    critic_optimizer: optax.GradientTransformation
    generator_optimizer: optax.GradientTransformation


def paired_critic_loss(critic_fn: Callable[[PyTree, jax.Array], jax.Array]):
    """The per-example critic term of ``clipping="paired"``: ``D(fake_i) - D(real_i)``.

    ``loss(params, batch) -> (B,)`` over a batch ``{"real": (B, width), "fake": (B, width)}``.
    """

    def loss(params, batch):
        return -critic_fn(params, batch["real"]) + critic_fn(params, batch["fake"])

    return loss


def make_gan_runner(
    critic_fn: Callable[[PyTree, jax.Array], jax.Array],
    fake_fn: Callable[[PyTree, PyTree, jax.Array, int], jax.Array],
    critic_optimizer: optax.GradientTransformation,
    generator_optimizer: optax.GradientTransformation,
    phase: privacy.DPSGDPhase | privacy.NonPrivatePhase,
    *,
    scan_rows: int,
    clipping: str = "paired",
    critic_steps_per_generator_step: int,
    generator_batch_size: int,
    post_update: Callable[[PyTree], PyTree] | None = None,
    method: str | Mapping[str, str] = "ghost",
    critic_loss: Callable[[PyTree, PyTree], jax.Array] | None = None,
    critic_batch_fn: Callable[[PyTree, jax.Array, jax.Array, PyTree], PyTree] | None = None,
    generator_loss: Callable[[PyTree, PyTree, PyTree, jax.Array], jax.Array] | None = None,
):
    """Compiles ``run(state, data, frozen, key, n_iterations, total_critic_steps) -> state``.

    One iteration is up to ``critic_steps_per_generator_step`` DP critic steps (never beyond
    ``total_critic_steps`` executed in all) followed by one generator step on
    ``generator_batch_size`` generated rows. The critic's steps realise the accounted ``phase``
    (``dpsgd.make_dp_step`` reads q, sigma, C and B from it); a ``NonPrivatePhase`` trains the
    critic without clipping or noise (a non-private run).

    A method with its own paired term gives ``critic_loss`` (per example, ``(params, batch) ->
    (B,)``) with ``critic_batch_fn`` (``(data, indices, key, (gen_params, frozen)) -> batch``: the
    sampled real rows and one generated row per real row; everything in an example must be a
    function of that example's record and public values only) in place of the paired term of
    ``critic_fn``, and ``generator_loss`` (``(gen_params, critic_params, frozen, key) -> scalar``)
    in place of ``-mean D(fake)``; ``critic_fn`` and ``fake_fn`` may then be None (DP-SACTGAN's
    critic mechanism: a critic and a classifier clipped jointly, conditional vectors).

    Args:
        critic_fn: ``(params, rows) -> (B,)`` critic scores.
        fake_fn: ``(gen_params, frozen, key, n) -> (n, width)`` generated rows.
        critic_optimizer, generator_optimizer: optax transformations.
        phase: the critic's accounted phase (its expected batch B, rate B / N, clip norm C and
            noise multiplier sigma), or its non-private schedule.
        scan_rows: m, the private row count (the sampler's scan length).
        clipping: ``"paired"`` or ``"real_only"`` (module docstring).
        critic_steps_per_generator_step: t_D.
        generator_batch_size: generated rows per generator step.
        post_update: applied to the critic's parameters after each update (e.g. a weight clamp).
        method: ``"ghost"``, ``"vmap"``, ``"map"`` or a mapping of the critic parameters' top-level groups to
            one each (``dpsgd.clipped_grad_sum``): per-example clipping.
    """
    dpsgd.check_method(method)
    _v.one_of(CRITIC_CLIPPINGS, clipping=clipping)
    private = isinstance(phase, privacy.DPSGDPhase)
    if (critic_loss is None) != (critic_batch_fn is None):
        raise ValueError("critic_loss and critic_batch_fn go together (a per-example term and the "
                         "batch it reads).")

    if critic_loss is not None:
        batch_fn, loss, public_grad_fn = critic_batch_fn, critic_loss, None
    elif clipping == "paired":
        def batch_fn(data, idx, key, extra):
            gen_params, frozen = extra
            fake = jax.lax.stop_gradient(fake_fn(gen_params, frozen, key, idx.shape[0]))
            return {"real": jnp.take(data, idx, axis=0), "fake": fake}

        loss = paired_critic_loss(critic_fn)
        public_grad_fn = None
    else:
        def batch_fn(data, idx, key, extra):
            return jnp.take(data, idx, axis=0)

        def loss(params, batch):
            return -critic_fn(params, batch)

        n_fake = phase.batch_size
        fake_sum = (dpsgd.clipped_grad_sum(critic_fn, phase.clip_norm, method=method) if private
                    else dpsgd.grad_sum(critic_fn))

        def public_grad_fn(params, key, extra):
            gen_params, frozen = extra
            fake = jax.lax.stop_gradient(fake_fn(gen_params, frozen, key, n_fake))
            g, _ = fake_sum(params, fake, None)
            # Scaled so that after the division by the expected batch size it is a mean over the
            # generated rows.
            return jax.tree_util.tree_map(lambda x: x * (phase.normaliser(scan_rows) / n_fake), g)

    critic_step = dpsgd.make_dp_step(
        loss, critic_optimizer, phase, scan_rows=scan_rows, method=method, batch_fn=batch_fn,
        post_update=post_update, public_grad_fn=public_grad_fn)
    b2 = generator_batch_size

    def generator_step(gen_state, critic_params, frozen, key):
        def gen_loss(gp):
            if generator_loss is not None:
                return generator_loss(gp, critic_params, frozen, key)
            return -jnp.mean(critic_fn(critic_params, fake_fn(gp, frozen, key, b2)))

        g = jax.grad(gen_loss)(gen_state.params)
        updates, opt_state = generator_optimizer.update(g, gen_state.opt_state, gen_state.params)
        return dpsgd.TrainState(optax.apply_updates(gen_state.params, updates), opt_state,
                                gen_state.steps + 1)

    t_d = critic_steps_per_generator_step

    def run(state: GANState, data, frozen, key, n_iterations, total_critic_steps):
        k_critic, k_gen = jax.random.split(key)

        def iteration(_, s: GANState):
            n_c = jnp.clip(total_critic_steps - s.critic.steps, 0, t_d)

            def critic_body(_, cs):
                new, _ = critic_step(cs, data, jax.random.fold_in(k_critic, cs.steps),
                                     (s.generator.params, frozen))
                return new

            cs = jax.lax.fori_loop(0, n_c, critic_body, s.critic)
            gs = generator_step(s.generator, cs.params, frozen,
                                jax.random.fold_in(k_gen, s.generator.steps))
            return GANState(cs, gs)

        return jax.lax.fori_loop(0, n_iterations, iteration, state)

    return jax.jit(run)


def run_gan(runner, state: GANState, data, frozen, key, *, critic_steps: int,
            critic_steps_per_generator_step: int, chunk_size: int = 1000,
            progress: Callable[[int, int], None] | None = None,
            should_stop: Callable[[], bool] | None = None, checkpoint=None) -> GANState:
    """Runs ``critic_steps`` critic steps with interleaved generator steps, in compiled chunks.

    Progress (critic steps done, total) is reported between chunks, and ``should_stop()``, when
    given, may end the phase early there; ``int(state.critic.steps)`` is the executed count the
    accountant is given. ``checkpoint``: a hook as in :func:`dpgen_jax.dpsgd.run_phase`, counting
    iterations (one generator step each); critic and generator steps use keys folded with their
    own step counts, so a continued phase equals an uninterrupted one.
    """
    t_d = critic_steps_per_generator_step
    total_iters = -(-critic_steps // t_d)
    return dpsgd.run_chunks(
        lambda s, done, n: runner(s, data, frozen, key, jnp.int32(n), jnp.int32(critic_steps)),
        state, total_iters, max(1, chunk_size // t_d),
        after_chunk=None if progress is None else lambda s, done: progress(int(s.critic.steps), critic_steps),
        should_stop=should_stop, checkpoint=checkpoint)


def rmsprop_gan_runner(critic_fn, fake_fn, *, critic_learning_rate: float,
                       generator_learning_rate: float, weight_clamp_bound: float | None,
                       **runner_kwargs) -> GANRunner:
    """:func:`make_gan_runner` with PyTorch-style RMSProp for both networks and the WGAN weight
    clamp on the critic (``weight_clamp_bound=None``: no clamp), the WGAN training of Arjovsky,
    Chintala and Bottou (2017) that DP-auto-GAN and DP-WGAN use. Other keywords go to
    :func:`make_gan_runner`."""
    critic_opt = torch_rmsprop(critic_learning_rate)
    gen_opt = torch_rmsprop(generator_learning_rate)
    run = make_gan_runner(critic_fn, fake_fn, critic_opt, gen_opt,
                          post_update=weight_clamp(weight_clamp_bound), **runner_kwargs)
    return GANRunner(run, critic_opt, gen_opt)


def train_gan(runner: GANRunner, critic_params: PyTree, generator_params: PyTree, data, frozen,
              key, *, critic_steps: int, critic_steps_per_generator_step: int,
              chunk_size: int = 1000, progress: Callable[[int, int], None] | None = None,
              should_stop: Callable[[], bool] | None = None, checkpoint=None) -> GANState:
    """The GAN phase from fresh optimizer states at the given parameters (see :func:`run_gan`)."""
    state = GANState(dpsgd.init_state(critic_params, runner.critic_optimizer),
                     dpsgd.init_state(generator_params, runner.generator_optimizer))
    return run_gan(runner.run, state, data, frozen, key, critic_steps=critic_steps,
                   critic_steps_per_generator_step=critic_steps_per_generator_step,
                   chunk_size=chunk_size, progress=progress, should_stop=should_stop,
                   checkpoint=checkpoint)


def critic_term_note(clipping: str, dp_outputs: str, paired_note: str = "") -> str:
    """The privacy report's sentence on the critic's per-example term; ``dp_outputs`` says which
    released networks the generated rows come from (e.g. "the generator is a DP output")."""
    if clipping == "paired":
        return ("Critic per-example term: each real row paired with one fresh generated row and "
                f"clipped together{paired_note}.")
    return ("Critic per-example term: only the real-data term is clipped and noised; the generated "
            f"rows' term depends on no private row ({dp_outputs}, z is fresh noise).")


__all__ = ["CRITIC_CLIPPINGS", "GANRunner", "GANState", "critic_term_note", "make_gan_runner",
           "paired_critic_loss", "rmsprop_gan_runner", "run_gan", "train_gan"]
