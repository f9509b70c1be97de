"""DP-VAE: the synthesizer contract, the ELBO and one DP-SGD step against slow references, the
clip-norm rule, sampling from the prior, and the paper's presets against dp_accounting.

References: the negative ELBO written out in float64 NumPy (per block, per row), per-example
gradients from a Python loop over the sampled rows with the step's own reparameterisation noise,
Adam in NumPy, and epsilons from ``dp_accounting``'s RDP accountant with the classic conversion
computed here.
"""

from __future__ import annotations

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpgen_jax import data, synthesizers
from dpgen_jax.synthesizers import DPVAE, DPVAEConfig
from dpgen_jax.synthesizers import dp_vae as dv
from tests import _oracles, _tables
from tests._contract import SynthesizerContract
from tests._presets import check_paper_presets

TINY = DPVAE.SMOKE  # the method's smoke schedule




class TestDPVAEContract(SynthesizerContract):
    METHOD = "dp-vae"
    OVERRIDES = TINY
    EPSILON = 4.0

    def zero_steps(self):
        return dict(steps=0)

    def functional_phases(self, config, schema, num_records):
        return dv.privacy_phases(config, num_records)

    def functional_released(self, model, frame, schema, phases):
        """fit(seed=0) redone with the public functions and the key splits of the class."""
        cfg = model.fitted_config
        enc = data.TableEncoder(schema)
        x = jnp.asarray(enc.encode(frame))
        k_init, _k_clip, k_train = jax.random.split(self.train_key(cfg), 3)
        state = dv.train_vae(cfg, tuple(enc.blocks), dv.init(cfg, enc.width, k_init), x, k_train, phases[0])
        return {"decoder": state.params["decoder"]}


# ----------------------------------------------------------------------------- the ELBO


def _np_elbo(params, x, eps, blocks) -> np.ndarray:
    """The negative ELBO per row, written out in float64 (sigmoid encoder, ReLU decoder)."""
    p = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), params)

    def dense(layer, h):
        return h @ layer["Dense_0"]["kernel"] + layer["Dense_0"]["bias"]

    h = 1.0 / (1.0 + np.exp(-dense(p["encoder"]["layer_0"], x)))
    mean, log_var = dense(p["mean_head"], h), dense(p["log_var_head"], h)
    z = mean + np.exp(0.5 * log_var) * eps
    logits = dense(p["decoder"]["layer_1"], np.maximum(dense(p["decoder"]["layer_0"], z), 0.0))
    out = np.zeros(len(x))
    for i in range(len(x)):
        total = 0.0
        for b in blocks:
            lg, t = logits[i, b.start:b.stop], x[i, b.start:b.stop]
            if b.kind == "categorical":
                total -= float(np.sum(t * (lg - np.log(np.sum(np.exp(lg))))))
            elif b.kind == "binary":
                s = 1.0 / (1.0 + np.exp(-lg[0]))
                total -= t[0] * np.log(s) + (1 - t[0]) * np.log(1 - s)
            else:
                total += (1.0 / (1.0 + np.exp(-lg[0])) - t[0]) ** 2
        kl = 0.5 * np.sum(mean[i] ** 2 + np.exp(log_var[i]) - 1.0 - log_var[i])
        out[i] = total + kl
    return out


@pytest.fixture(scope="module")
def mixed():
    enc = data.TableEncoder(_tables.MIXED_SCHEMA)
    x = enc.encode(_tables.mixed_frame(40, 3))
    cfg = DPVAEConfig(hidden=(8,), latent_dim=3)
    params = dv.init(cfg, enc.width, jax.random.key(4))
    eps = np.asarray(jax.random.normal(jax.random.key(5), (len(x), 3)))
    return cfg, tuple(enc.blocks), params, x, eps


def test_elbo_matches_a_numpy_reference(mixed):
    cfg, blocks, params, x, eps = mixed
    got = dv.elbo_loss_fn(cfg, blocks)(params, {"x": jnp.asarray(x), "eps": jnp.asarray(eps)})
    np.testing.assert_allclose(np.asarray(got), _np_elbo(params, x, eps, blocks), rtol=2e-5)


def test_reparameterisation_noise_is_standard_normal_and_fresh_per_chunk():
    batch_fn = dv.reparameterised_batch(4)
    rows = jnp.arange(12.0).reshape(6, 2)
    idx = jnp.array([5, 0, 3])
    b = batch_fn(rows, idx, jax.random.key(0), None)
    np.testing.assert_array_equal(np.asarray(b["x"]), np.asarray(rows)[[5, 0, 3]])
    assert b["eps"].shape == (3, 4)
    big = batch_fn(rows, jnp.zeros(20_000, jnp.int32), jax.random.key(1), None)["eps"]
    assert stats.kstest(np.asarray(big).ravel(), "norm").pvalue > 1e-3
    assert stats.kstest(1.5 * np.asarray(big).ravel(), "norm").pvalue < 1e-6
    other = batch_fn(rows, idx, jax.random.key(2), None)["eps"]
    assert not np.allclose(np.asarray(other), np.asarray(b["eps"]))


# ----------------------------------------------------------------------------- one DP-SGD step


@functools.partial(jax.jit, static_argnums=(0, 1))
def _row_grad(cfg, blocks, params, x, eps):
    return jax.grad(lambda p: dv.elbo_loss_fn(cfg, blocks)(p, {"x": x[None], "eps": eps[None]})[0])(params)


def test_one_dp_step_matches_a_per_example_reference():
    """train_vae for one step (ghost clipping, no fallback) = Poisson batch of the step key, one
    row at a time with the noise the batch builder drew for its slot, clipping, the step's noise,
    division by B, Adam."""
    schema = _tables.MIXED_SCHEMA  # a categorical block, a binary and two continuous columns
    enc = data.TableEncoder(schema)
    x = np.asarray(data.uniform_rows(schema, 600, jax.random.key(3)))
    cfg = DPVAEConfig(batch_size=24, clip_norm=3.0, noise_multiplier=0.7)
    blocks = tuple(enc.blocks)
    p0 = dv.init(cfg, enc.width, jax.random.key(1))
    key, n_records = jax.random.key(9), 1000  # a public N larger than the 600 rows
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ghost clipping covers every layer: no vmap fallback
        got = dv.train_vae(cfg, blocks, p0, jnp.asarray(x), key,
                           dv.privacy_phases(cfg.replace(steps=1), n_records)[0])
    k_sample, k_batch, k_noise, _ = jax.random.split(jax.random.fold_in(key, 0), 4)
    q = cfg.batch_size / n_records
    chunks, cap = _oracles.poisson_chunks(k_sample, len(x), q)
    examples = []
    for i, idx, slots in chunks:
        eps = np.asarray(jax.random.normal(jax.random.fold_in(k_batch, i), (cap, cfg.latent_dim)))
        examples += [(jnp.asarray(x[r]), jnp.asarray(eps[s])) for r, s in zip(idx, slots)]
    assert examples, "the reference batch is empty"
    total, norms = _oracles.clipped_sum(functools.partial(_row_grad, cfg, blocks), p0, examples,
                                        cfg.clip_norm)
    assert np.min(norms) < cfg.clip_norm < np.max(norms) or np.min(norms) > cfg.clip_norm
    g = _oracles.noisy(total, p0, k_noise, cfg.noise_multiplier * cfg.clip_norm) / cfg.batch_size
    flat0 = _oracles.flat(p0)
    want, _, _ = _oracles.adam(flat0, g, np.zeros_like(g), np.zeros_like(g), 1, cfg.learning_rate)
    assert int(got.steps) == 1
    _oracles.assert_close(got.params, want, "parameters after one step", grad=g)


# ----------------------------------------------------------------------------- clip norm, sampling


def test_public_clip_norm_reads_no_private_row():
    """The same seed gives the same clip norm whatever the private rows are (it is computed on
    rows drawn from the public schema), and the report says how it was chosen."""
    over = dict(steps=0, batch_size=16, matching_share=0.0)  # the fit key unsplit
    fits = [synthesizers.create("dp-vae", **over).fit(frame, _tables.MIXED_SCHEMA, epsilon=2.0, seed=0)
            for frame in _unlike_frames()]
    clips = [m.fitted_release.clip_norms["vae"] for m in fits]
    assert clips[0] == clips[1] and clips[0] > 0
    cfg = DPVAEConfig(**over)
    p0 = dv.init(cfg, 6, jax.random.split(jax.random.key(0), 3)[0])
    value, sentence = dv.resolve_clip_norm(cfg, _tables.MIXED_SCHEMA, p0, jax.random.split(jax.random.key(0), 3)[1])
    assert value == clips[0]
    assert any(sentence == a for a in fits[0].privacy_report()["assumptions"])
    assert fits[0].privacy_report()["phases"][0]["clip_norm"] == value


def test_default_sampling_draws_categories_from_the_decoder_probabilities():
    model = synthesizers.create("dp-vae", **{**TINY, "steps": 0, "matching_share": 0.0}).fit(  # the decoder's own draws
        _tables.mixed_frame(100, 0), _tables.MIXED_SCHEMA, epsilon=4.0, seed=0)
    n = 4000
    probs = dv.sample_encoded(model.fitted_config, model.schema, model.released["decoder"], n,
                              jax.random.key(11))
    block = data.TableEncoder(model.schema).block("a")
    p = probs[:, block.start:block.stop].mean(axis=0)
    drawn = model.sample(n, seed=12)["a"].value_counts(normalize=True).reindex(list(block.categories),
                                                                               fill_value=0.0)
    se = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(drawn.to_numpy() - p) < 5 * se + 1e-3)
    assert model.sample(50, seed=1, mode="argmax")["a"].nunique() <= 3


def test_release_holds_only_the_decoder(tmp_path):
    model = synthesizers.create("dp-vae", **{**TINY, "steps": 0}).fit(
        _tables.mixed_frame(50, 1), _tables.MIXED_SCHEMA, epsilon=4.0, seed=0)
    model.save(tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as npz:
        groups = {k.split("/")[0] for k in npz.files if k != "__meta__"}
    assert groups == {"decoder"}


def _unlike_frames():
    """Two private tables with nothing in common but the schema."""
    a = _tables.mixed_frame(200, 1)
    b = a.assign(a="z", b="q", c=99, d=-1.0).iloc[:50]
    return a, b


# ----------------------------------------------------------------------------- presets


def test_paper_presets_are_the_longest_schedules_within_the_papers_epsilons():
    check_paper_presets(DPVAE, "vae", {"paper-0.36": (5.0, 0.36), "paper-0.51": (4.0, 0.51),
                                       "paper-1.01": (2.0, 1.01)})


@pytest.mark.parametrize("bad, match", [
    (dict(latent_dim=0), "latent_dim=0"),
    (dict(hidden=(0,)), "hidden=(0,)"),
    (dict(clip_norm="median"), "clip_norm='median'"),
    (dict(clip_norm=-1.0), "clip_norm=-1.0"),
    (dict(noise_multiplier=0.0), "noise_multiplier=0.0"),
    (dict(continuous_loss="l1"), "continuous_loss='l1'"),
    (dict(encoder_activation="swish"), "swish"),
])
def test_bad_configuration_is_refused(bad, match):
    import re

    with pytest.raises(ValueError, match=re.escape(match)):
        synthesizers.create("dp-vae", **bad)


def test_a_non_integer_step_count_is_a_type_error():
    with pytest.raises(TypeError, match=r"steps=1\.5 \(float\)"):
        synthesizers.create("dp-vae", steps=1.5)
