"""Throughput benchmark: dpgen_jax DP-SGD steps against non-private JAX and the torch versions.

Usage::

    python -m experiments.speed.throughput --quick --out runs/throughput [--threads 1] [--device cpu]
    python -m experiments.speed.throughput --out runs/mimic --models mimic_autoencoder --batches 256,512,1024 --no-end-to-end

Protocol:

* Every row times whole optimizer steps with batch sampling included: the JAX rows run the
  fused step of :func:`dpgen_jax.dpsgd.make_dp_step` (Poisson sampling inside the compiled graph,
  clipping, noise, SGD update), ``n`` steps per compiled call; the non-private JAX row uses the
  same sampler with the plain gradient. Torch rows (``experiments.speed.torch_reference``) sample with
  ``torch.rand(m) < q`` inside every timed step.
* Both frameworks get the same thread count (default 1), the same model, the same initial
  weights, the same data, clip norm, noise multiplier and SGD learning rate.
* Methods are interleaved round-robin over ``--rounds`` rounds so that background load hits them
  alike. JAX statistics are over per-call averages (each call runs ``n`` fused steps); torch
  statistics are over single steps. Compile time (first call, one step) is reported separately.
* ``jax-privacy`` rows (Google DeepMind's ``jax_privacy``, when installed): its ``clipped_grad``
  (vmap per-example clipping with ``is_padding_example``) and ``gaussian_privatizer`` on the same
  model, weights, Poisson-sampled padded batches (our in-graph sampler, same capacity), clip norm,
  noise and SGD update, fused the same way (``n`` steps per compiled ``fori_loop``).
* Before timing, a parity check computes the clipped gradient sum of one batch with every
  method (noise off) and fails the run loudly if they disagree, so every row measures the same
  computation.
* Noise cost per value, interleaved in the same run: the engine's tail-safe noise
  (``dpsgd.add_gaussian_noise``), the engine's previous noise (one flat ``jax.random.normal``
  draw sliced into the parameter arrays), ``jax.random.normal`` alone and torch's ``normal_``,
  on each benchmarked model's parameter shapes.

Writes ``OUT/throughput.json``, ``OUT/throughput.md`` (ratios to the JAX ``ghost`` row of the same
model and batch size) and ``OUT/throughput.png``. The JAX and jax-privacy runners, the parity
check and the shared settings are in ``experiments/speed/_throughput_runners.py``; the thread
pinning, machine description and statistics every speed benchmark uses in
``experiments/speed/_harness.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

from experiments.speed._harness import _configure_threads, _machine, _stats
from experiments.speed._throughput_runners import (
    CLIP_NORM,
    DATASET_SIZE,
    FULL_MODELS,
    JAX_PRIVACY_METHOD,
    LEARNING_RATE,
    NOISE_MULTIPLIER,
    _fallback_weights,
    _jax_privacy_runner,
    _jax_runner,
    _jax_setup,
    _parity,
    _to_flax,
    jax_privacy_available,
)

QUICK_MODELS = ("adult_autoencoder",)
QUICK_BATCHES = (64, 256, 1024)
FULL_BATCHES = (64, 128, 256, 512, 1024)
JAX_METHODS = ("nonprivate", "ghost", "vmap")
ROW_KEYS = (
    "framework", "method", "model", "batch_size", "ms_per_step_median", "ms_per_step_p10",
    "ms_per_step_p90", "compile_seconds", "includes_sampling",
)


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m experiments.speed.throughput",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="adult_autoencoder at batch 64, 256, 1024")
    p.add_argument("--out", required=True, type=pathlib.Path, help="output folder")
    p.add_argument("--threads", type=int, default=1, help="threads for both frameworks")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    p.add_argument("--target-seconds", type=float, default=0.25,
                   help="approximate wall time of one timed JAX call / torch measurement")
    p.add_argument("--no-torch", action="store_true", help="skip the torch rows")
    p.add_argument("--no-jax-privacy", action="store_true", help="skip the jax-privacy rows")
    p.add_argument("--models", type=lambda v: tuple(v.split(",")), default=None,
                   help=f"comma-separated subset of {FULL_MODELS} (default: by mode)")
    p.add_argument("--batches", type=lambda v: tuple(int(b) for b in v.split(",")), default=None,
                   help="comma-separated batch sizes (default: by mode)")
    p.add_argument("--no-end-to-end", action="store_true",
                   help="full mode without the end-to-end DP-auto-GAN run")
    args = p.parse_args(argv)
    for model in args.models or ():
        if model not in FULL_MODELS:
            p.error(f"--models: {model!r} is not one of {FULL_MODELS}")
    if args.batches is not None and min(args.batches) < 1:
        p.error(f"--batches={args.batches} must be positive")
    if args.threads < 1:
        p.error(f"--threads={args.threads} must be >= 1")
    if args.rounds < 3:
        p.error(f"--rounds={args.rounds} must be >= 3 (p10/median/p90)")
    return args


# --------------------------------------------------------------------------- timing


def _row(framework, method, model, batch, ms, compile_s):
    med, p10, p90 = _stats(ms)
    return {
        "framework": framework, "method": method, "model": model, "batch_size": batch,
        "ms_per_step_median": round(med, 4), "ms_per_step_p10": round(p10, 4),
        "ms_per_step_p90": round(p90, 4),
        "compile_seconds": None if compile_s is None else round(compile_s, 3),
        "includes_sampling": True,
    }


def benchmark(models, batches, *, threads, rounds, target_seconds, torch_ref, jax_privacy=False,
              log=print):
    import jax.numpy as jnp
    import numpy as np

    rows, parity = [], []
    for model_name in models:
        m = DATASET_SIZE[model_name]
        rng = np.random.default_rng(0)
        if torch_ref is not None:
            weights = torch_ref.init_weights(model_name, 0)
        else:
            weights = _fallback_weights(model_name)
        in_dim = weights[0][0].shape[0]
        data = (rng.random((m, in_dim)) < 0.15).astype(np.float32)
        parity.append(_parity(model_name, weights, data, torch_ref, jax_privacy))
        log(f"parity {model_name}: ok {parity[-1]['max_abs_diff_vs_jax_vmap']}")
        _, _, paths = _jax_setup(model_name)
        params = _to_flax(paths, weights)
        data_dev = jnp.asarray(data)
        for batch in batches:
            calls, samples, compiles = {}, {}, {}
            for method in JAX_METHODS:
                call, compile_s = _jax_runner(model_name, method, batch, params, data_dev)
                probe = call(2, 1)
                n = int(max(1, min(2000, target_seconds * 1e3 / max(probe, 1e-3))))
                calls[("jax", method)] = (call, n)
                compiles[("jax", method)] = compile_s
                samples[("jax", method)] = []
            if jax_privacy:
                call, compile_s = _jax_privacy_runner(model_name, batch, params, data_dev)
                probe = call(2, 1)
                n = int(max(1, min(2000, target_seconds * 1e3 / max(probe, 1e-3))))
                key = ("jax-privacy", JAX_PRIVACY_METHOD)
                calls[key], compiles[key], samples[key] = (call, n), compile_s, []
            if torch_ref is not None:
                for method in torch_ref.METHODS:
                    probe = np.median(torch_ref.time_steps(
                        model_name, method, weights, data, batch / m, CLIP_NORM,
                        NOISE_MULTIPLIER, steps=2, warmup=1, threads=threads, seed=0,
                        learning_rate=LEARNING_RATE))
                    n = int(max(2, min(200, target_seconds * 1e3 / max(probe, 1e-3))))
                    calls[("torch", method)] = (method, n)
                    compiles[("torch", method)] = None
                    samples[("torch", method)] = []
            for r in range(rounds):
                for key, (fn, n) in calls.items():
                    if key[0] != "torch":
                        samples[key].append(fn(n, 100 + r))
                    else:
                        samples[key].extend(torch_ref.time_steps(
                            model_name, fn, weights, data, batch / m, CLIP_NORM,
                            NOISE_MULTIPLIER, steps=n, warmup=1, threads=threads, seed=100 + r,
                            learning_rate=LEARNING_RATE))
            for key in calls:
                rows.append(_row(key[0], key[1], model_name, batch, samples[key], compiles[key]))
                log(f"{model_name} B={batch} {key[0]}/{key[1]}: "
                    f"{rows[-1]['ms_per_step_median']:.3f} ms/step")
    return rows, parity


NOISE_GENERATORS = ("dpgen_jax tail-safe", "dpgen_jax before (flat jax.random.normal)",
                    "jax.random.normal", "torch normal_")


def _previous_engine_noise(tree, key, std):
    """The engine's noise before the tail-safe sampler: one flat float32 ``jax.random.normal``
    draw of even length, sliced into the arrays (kept here only as a benchmark reference)."""
    import jax
    import jax.numpy as jnp

    leaves, treedef = jax.tree_util.tree_flatten(tree)
    total = sum(x.size for x in leaves)
    flat = jax.random.normal(key, (total + total % 2,), jnp.float32)
    out, start = [], 0
    for x in leaves:
        out.append(x + (std * flat[start:start + x.size]).reshape(x.shape))
        start += x.size
    return jax.tree_util.tree_unflatten(treedef, out)


def noise_cost(models, *, threads, rounds, torch_ok, log=print) -> list[dict]:
    """ns per noise value of each generator on each model's parameter shapes, interleaved.

    Each measurement adds N(0, 1) noise to a zero tree shaped like the model's parameters (the
    JAX rows as one compiled call, torch as ``normal_`` on one preallocated tensor per parameter,
    as Opacus draws it), repeated for about 50 ms; the median over ``rounds`` rounds is reported.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    from dpgen_jax import dpsgd

    rows = []
    for model_name in models:
        shapes = [w.shape for pair in _fallback_weights(model_name) for w in pair]
        tree = [jnp.zeros(s, jnp.float32) for s in shapes]
        n_values = int(sum(np.prod(s) for s in shapes))
        fns = {
            NOISE_GENERATORS[0]: jax.jit(lambda t, k: dpsgd.add_gaussian_noise(t, k, 1.0)),
            NOISE_GENERATORS[1]: jax.jit(lambda t, k: _previous_engine_noise(t, k, 1.0)),
            # even length: threefry has a slow path for odd lengths that the engine never hit
            NOISE_GENERATORS[2]: jax.jit(lambda t, k: jax.random.normal(k, (n_values + n_values % 2,),
                                                                        jnp.float32)),
        }
        for f in fns.values():
            jax.block_until_ready(f(tree, jax.random.key(0)))

        def jax_timer(f):
            def timed(reps, seed):
                keys = [jax.random.key(seed + i) for i in range(reps)]
                t = time.perf_counter()
                for k in keys:
                    out = f(tree, k)
                jax.block_until_ready(out)
                return (time.perf_counter() - t) * 1e9 / (reps * n_values)
            return timed

        timers = {name: jax_timer(f) for name, f in fns.items()}
        if torch_ok:
            import torch

            tensors = [torch.zeros(s) for s in shapes]
            gen = torch.Generator().manual_seed(0)

            def torch_timed(reps, seed):
                previous = torch.get_num_threads()
                torch.set_num_threads(threads)
                try:
                    t = time.perf_counter()
                    for _ in range(reps):
                        for x in tensors:
                            x.normal_(0.0, 1.0, generator=gen)
                    return (time.perf_counter() - t) * 1e9 / (reps * n_values)
                finally:
                    torch.set_num_threads(previous)

            timers[NOISE_GENERATORS[3]] = torch_timed
        reps = {name: max(1, int(0.05 / max(fn(1, 0) * n_values * 1e-9, 1e-6))) for name, fn in timers.items()}
        samples = {name: [] for name in timers}
        for r in range(rounds):
            for name, fn in timers.items():
                samples[name].append(fn(reps[name], 1000 * r))
        for name in timers:
            med, p10, p90 = _stats(samples[name])
            rows.append({"generator": name, "model": model_name, "values": n_values,
                         "ns_per_value_median": round(med, 3), "ns_per_value_p10": round(p10, 3),
                         "ns_per_value_p90": round(p90, 3)})
            log(f"noise {model_name} ({n_values} values) {name}: {med:.2f} ns/value")
    return rows


# --------------------------------------------------------------------------- end to end

E2E_AE_STEPS, E2E_CRITIC_STEPS = 10_000, 15_000
E2E_TORCH_STEPS = 30


def end_to_end(torch_ref, *, threads, log=print) -> list[dict]:
    """The DP-auto-GAN Adult schedule (10,000 AE + 15,000 critic steps) end to end.

    JAX: both phases of :mod:`dpgen_jax.synthesizers.dp_auto_gan` run in full on Adult-shaped
    data (rows drawn uniformly from the public Adult schema, so no data files are needed),
    compilation included. Torch: ``loop`` and ``opacus_hooks`` time ``E2E_TORCH_STEPS`` steps of
    the autoencoder (batch 64) and of the critic (batch 128, real-data term only) and extrapolate
    to the schedule; they leave out the generator and the fake rows, so they are lower bounds.
    """
    import jax
    import numpy as np

    from dpgen_jax import data
    from dpgen_jax.synthesizers import dp_auto_gan as ag

    m = DATASET_SIZE["adult_autoencoder"]
    encoder = data.TableEncoder(data.adult_schema())
    x = data.uniform_rows(encoder.schema, m, jax.random.key(0))
    config = ag.DPAutoGANConfig.adult(ae_steps=E2E_AE_STEPS, critic_steps=E2E_CRITIC_STEPS,
                                      ae_clip_norm=0.012 * 2**0.5, ae_noise_multiplier=1.5,
                                      critic_noise_multiplier=3.5)
    ae_phase, critic_phase = ag.privacy_phases(config, m)
    params = ag.init(config, encoder.width, jax.random.key(1))
    t0 = time.perf_counter()
    ae = ag.train_autoencoder(config, params.autoencoder, x, jax.random.key(2), ae_phase)
    jax.block_until_ready(ae.params)
    t1 = time.perf_counter()
    gan = ag.train_gan(config, params, ae.params["decoder"], x, jax.random.key(3), critic_phase)
    jax.block_until_ready(gan.generator.params)
    t2 = time.perf_counter()
    rows = [{"framework": "jax", "method": "ghost", "autoencoder_seconds": round(t1 - t0, 2),
             "gan_seconds": round(t2 - t1, 2), "total_seconds": round(t2 - t0, 2),
             "measured_steps": {"autoencoder": int(ae.steps), "critic": int(gan.critic.steps),
                                "generator": int(gan.generator.steps)},
             "extrapolated": False, "includes_compile": True}]
    log(f"end-to-end jax ghost: {rows[-1]['total_seconds']} s")
    if torch_ref is None:
        return rows
    xs = np.asarray(x)
    for method in ("loop", "opacus_hooks"):
        per = {}
        for model, batch, steps in (("adult_autoencoder", 64, E2E_AE_STEPS),
                                    ("adult_critic", 128, E2E_CRITIC_STEPS)):
            w = torch_ref.init_weights(model, 0)
            ms = torch_ref.time_steps(model, method, w, xs, batch / m, CLIP_NORM, NOISE_MULTIPLIER,
                                      steps=E2E_TORCH_STEPS, warmup=2, threads=threads, seed=0,
                                      learning_rate=LEARNING_RATE)
            per[model] = float(np.median(ms)) * steps / 1e3
        rows.append({"framework": "torch", "method": method,
                     "autoencoder_seconds": round(per["adult_autoencoder"], 1),
                     "gan_seconds": round(per["adult_critic"], 1),
                     "total_seconds": round(sum(per.values()), 1),
                     "measured_steps": {"autoencoder": E2E_TORCH_STEPS, "critic": E2E_TORCH_STEPS},
                     "extrapolated": True, "includes_compile": False,
                     "note": "median ms/step x schedule; critic real-data term only, no generator"})
        log(f"end-to-end torch {method} (extrapolated): {rows[-1]['total_seconds']} s")
    return rows


# --------------------------------------------------------------------------- output


def ratios(rows):
    """Each row's median divided by the JAX ghost median of the same model and batch size."""
    ghost = {(r["model"], r["batch_size"]): r["ms_per_step_median"] for r in rows
             if r["framework"] == "jax" and r["method"] == "ghost"}
    return [r["ms_per_step_median"] / ghost[(r["model"], r["batch_size"])]
            if (r["model"], r["batch_size"]) in ghost else None for r in rows]


def markdown(result) -> str:
    lines = [
        "# Throughput: ms per DP-SGD step (sampling included)",
        "",
        f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores; threads per "
        f"framework: {result['threads']}. Ratio = row / JAX ghost of the same model and batch "
        "(> 1: slower than JAX ghost).",
        "",
        "| model | batch | framework | method | median ms | p10 | p90 | compile s | ratio to JAX ghost |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r, ratio in zip(result["rows"], ratios(result["rows"])):
        comp = "-" if r["compile_seconds"] is None else f"{r['compile_seconds']:.2f}"
        rat = "-" if ratio is None else f"{ratio:.2f}x"
        lines.append(
            f"| {r['model']} | {r['batch_size']} | {r['framework']} | {r['method']} | "
            f"{r['ms_per_step_median']:.3f} | {r['ms_per_step_p10']:.3f} | "
            f"{r['ms_per_step_p90']:.3f} | {comp} | {rat} |")
    if result.get("noise"):
        lines += ["", "Noise cost per value (N(0, 1) added to a zero tree of the model's parameter shapes; "
                  "interleaved, same run):", "",
                  "| model | values | generator | median ns/value | p10 | p90 |", "|---|---|---|---|---|---|"]
        for r in result["noise"]:
            lines.append(f"| {r['model']} | {r['values']} | {r['generator']} | {r['ns_per_value_median']:.2f} | "
                         f"{r['ns_per_value_p10']:.2f} | {r['ns_per_value_p90']:.2f} |")
    if result.get("end_to_end"):
        lines += ["", "End to end, DP-auto-GAN Adult schedule (10,000 AE + 15,000 critic steps):", "",
                  "| framework | method | AE s | GAN s | total s | extrapolated |", "|---|---|---|---|---|---|"]
        for r in result["end_to_end"]:
            lines.append(f"| {r['framework']} | {r['method']} | {r['autoencoder_seconds']} | "
                         f"{r['gan_seconds']} | {r['total_seconds']} | {r['extrapolated']} |")
    if result.get("skipped"):
        lines += ["", f"Skipped: {result['skipped']}"]
    lines += ["", "Parity (clipped gradient sum of one batch, noise off, max |diff| vs JAX vmap):"]
    for p in result["parity"]:
        lines.append(f"- {p['model']} (C = {p['clip_norm']:.4g}): " + ", ".join(
            f"{k} {v:.2e}" for k, v in p["max_abs_diff_vs_jax_vmap"].items()))
    return "\n".join(lines) + "\n"


def plot(result, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r["model"] for r in result["rows"]})
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.5), squeeze=False)
    for ax, model in zip(axes[0], models):
        rows = [r for r in result["rows"] if r["model"] == model]
        series = sorted({(r["framework"], r["method"]) for r in rows})
        for fw, method in series:
            pts = sorted((r["batch_size"], r["ms_per_step_median"]) for r in rows
                         if (r["framework"], r["method"]) == (fw, method))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    linestyle="-" if fw == "jax" else "--", label=f"{fw} {method}")
        ax.set(xscale="log", yscale="log", xlabel="expected batch size", ylabel="ms per step",
               title=model)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    args = _parse(argv)
    _configure_threads(args.threads, args.device)
    if args.device == "gpu":
        os.environ.pop("JAX_PLATFORMS", None)
    import jax

    if args.device == "gpu" and jax.default_backend() != "gpu":
        raise SystemExit("--device gpu: JAX sees no GPU on this machine.")
    torch_ref, skipped = None, None
    if not args.no_torch:
        from experiments.speed import torch_reference

        ok, reason = torch_reference.available()
        if ok:
            torch_ref = torch_reference
        else:
            skipped = f"torch rows ({reason})"
            print(f"throughput: skipping {skipped}", file=sys.stderr)
    else:
        skipped = "torch rows (--no-torch)"
    if args.device == "gpu" and torch_ref is not None:
        skipped, torch_ref = "torch rows (--device gpu runs the JAX rows only)", None
    jax_privacy = False
    if not args.no_jax_privacy:
        jax_privacy, reason = jax_privacy_available()
        if not jax_privacy:
            note = f"jax-privacy rows ({reason})"
            skipped = note if skipped is None else f"{skipped}; {note}"
            print(f"throughput: skipping {note}", file=sys.stderr)
    models = args.models or (QUICK_MODELS if args.quick else FULL_MODELS)
    batches = args.batches or (QUICK_BATCHES if args.quick else FULL_BATCHES)
    t0 = time.perf_counter()
    rows, parity = benchmark(models, batches, threads=args.threads, rounds=args.rounds,
                             target_seconds=args.target_seconds, torch_ref=torch_ref,
                             jax_privacy=jax_privacy)
    noise = noise_cost(models, threads=args.threads, rounds=args.rounds,
                       torch_ok=torch_ref is not None)
    e2e = None if (args.quick or args.no_end_to_end) else end_to_end(torch_ref, threads=args.threads)
    result = {
        "machine": _machine(args.threads),
        "threads": args.threads,
        "device": args.device,
        "mode": "quick" if args.quick else "full",
        "settings": {"clip_norm": CLIP_NORM, "noise_multiplier": NOISE_MULTIPLIER,
                     "optimizer": f"sgd(lr={LEARNING_RATE})", "rounds": args.rounds,
                     "dataset_size": {m: DATASET_SIZE[m] for m in models}},
        "rows": rows,
        "parity": parity,
        "noise": noise,
        "end_to_end": e2e,
        "skipped": skipped,
        "wall_seconds": round(time.perf_counter() - t0, 1),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "throughput.json").write_text(json.dumps(result, indent=2, allow_nan=False))
    (args.out / "throughput.md").write_text(markdown(result))
    plot(result, args.out / "throughput.png")
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
