"""DP-SACTGAN step speed: the DP generator step against the same step without the sanitiser.

Usage::

    python -m experiments.speed.dpsactgan_speed --out runs/dpsactgan-speed [--threads 1] [--quick]

DP-SACTGAN privatises the B x width matrix of gradients with respect to the generated rows (one
clip per row, one noise draw), so a DP step should cost about what the non-private step costs:
no per-example parameter gradients. This benchmark times, side by side in one run and with the
same shapes (Adult-shaped rows, ``adult_schema()``, the default configuration: B = 64,
d_model 64, 4 heads, 2 layers, K = 100 critics):

* **generator update**: ``dp_sactgan.generator_update`` with ``private=True`` (through
  ``dpsgd.sanitized``) against ``private=False`` (same losses averaged, no clip, no noise), on a
  fixed critic, classifier and batch;
* **whole training step**: ``dp_sactgan.train_step`` (a secret shard, its critic update, the
  generator update, its classifier update) private against non-private;
* **critic step of ``mechanism="critic"``**: one DP-SGD step of the critic and classifier
  (Poisson-sampled real rows at q = B / N, the critic's per-example gradients with the pair's
  gradient penalty by a compiled loop, the classifier's ghost norms, one joint clip, noise; and,
  as ``critic_dp_vmap``, the same step with every per-example gradient by ``vmap``) against the
  same step without clipping or noise (same sampler, the plain gradient of the summed terms); goal
  a ratio <= 1.5.

Each contender runs ``--steps`` steps inside one compiled ``lax.fori_loop`` (step t uses
``fold_in(key, t)``), compiled ahead of time (compile seconds reported separately), one untimed
warm-up call, then ``--rounds`` interleaved rounds (order rotating); the median and p10/p90 of
milliseconds per step, wall and process CPU time. Threads are pinned as
``experiments.speed.throughput`` pins them. The goal is a DP / non-private ratio <= 1.2.

Writes ``OUT/dpsactgan_speed.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from dpgen_jax import _validate as _v
from experiments.speed.throughput import _configure_threads, _machine, _stats

GOAL = 1.2
CRITIC_GOAL = 1.5
QUICK = {"steps": 5, "rounds": 3}
FULL = {"steps": 50, "rounds": 7}


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m experiments.speed.dpsactgan_speed",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", required=True, type=pathlib.Path, help="output folder")
    p.add_argument("--quick", action="store_true", help=f"tiny counts ({QUICK}) for CI")
    p.add_argument("--threads", type=int, default=1, action=_v.flag(_v.whole, minimum=1),
                   help="threads for every contender")
    p.add_argument("--rows", type=int, default=32561, action=_v.flag(_v.whole, minimum=1), help="Adult-shaped rows (adult_like)")
    p.add_argument("--steps", type=int, default=None, action=_v.flag(_v.whole, minimum=1), help=f"steps per timed call (default {FULL['steps']})")
    p.add_argument("--rounds", type=int, default=None, action=_v.flag(_v.whole, minimum=1), help=f"interleaved rounds (default {FULL['rounds']})")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    mode = QUICK if args.quick else FULL
    for name in ("steps", "rounds"):
        if getattr(args, name) is None:
            setattr(args, name, mode[name])
    return args


def build(args):
    """The default configuration on Adult-shaped rows: layout, data, state, a fixed batch."""
    import jax
    import jax.numpy as jnp

    from dpgen_jax import data
    from dpgen_jax.synthesizers import dp_sactgan as ds

    schema = data.adult_schema()
    # the hook's contenders need its sharded state; the critic mechanism's read the same networks
    cfg = ds.DPSACTGANConfig(mechanism="hook", modes="public", noise_multiplier=17.5)
    lay = ds.build_layout(schema, cfg)
    frame = data.adult_like(args.rows, seed=args.seed)
    x = jnp.asarray(data.TableEncoder(schema).encode(frame))
    rows, codes = ds.encode_rows(lay, x, ds.public_modes(schema, cfg))
    counts = ds.release_conditional_counts(codes, lay, jax.random.key(1), 0.0,
                                           ds.histogram_columns(lay, cfg))
    log_probs = ds.cond_log_probs(lay, counts, training=True)
    k = ds.num_shards(cfg, args.rows)
    td = ds.prepare(lay, rows, codes, jax.random.key(2), k)
    state = ds.init_state(cfg, lay, k, jax.random.key(3))
    return cfg, lay, td, log_probs, state, rows, codes


def contenders(cfg, lay, td, log_probs, state, rows, codes):
    import jax
    from jax import lax

    from dpgen_jax.synthesizers import dp_sactgan as ds

    from dpgen_jax.synthesizers import _shards

    n = int(rows.shape[0])
    hooks = {True: _shards.sanitizer_hook(ds.privacy_phases(cfg, lay, n)[-1]), False: None}
    take = lambda t: None if t is None else jax.tree_util.tree_map(lambda a: a[0], t)  # noqa: E731
    d, aux = take(state.critics), take(state.aux)
    batch = ds.draw_batch(cfg, lay, td, 0, log_probs, jax.random.key(4))

    def g_loop(private):
        def run(g, key, n):
            return lax.fori_loop(0, n, lambda t, gg: ds.generator_update(
                cfg, lay, gg, batch, d.params, None if aux is None else aux.params,
                jax.random.fold_in(key, t), hooks[private]), g)
        return jax.jit(run), (state.generator,)

    def step_loop(private):
        step = ds.train_step(cfg, lay, hooks[private])

        def run(s, key, n):
            return lax.fori_loop(0, n, lambda t, ss: step(ss, td, jax.random.fold_in(key, t), log_probs)[0], s)
        return jax.jit(run), (state,)

    from dpgen_jax import dpsgd
    from dpgen_jax.synthesizers import _dpsgd_phases
    from dpgen_jax.synthesizers.dp_sactgan import _critic

    critic_params, _ = _critic.init_params(cfg, lay, jax.random.key(5))
    critic_data = {"rows": rows, "codes": codes.astype("int32")}
    opt = ds.optimizer(cfg)
    n = int(rows.shape[0])

    def critic_loop(private, method=None):
        phase = _dpsgd_phases.dpsgd_phase("critic", batch_size=cfg.batch_size, num_records=n, noise_multiplier=1.0,
                                          steps=0, clip_norm=cfg.clip_norm, private=private)
        step = dpsgd.make_dp_step(_critic.critic_terms(cfg, lay), opt, phase, scan_rows=n,
                                  method=method or _critic.clip_method(cfg, lay),
                                  batch_fn=_critic.critic_batch_fn(cfg, lay))

        def run(st, key, n_steps):
            return lax.fori_loop(0, n_steps, lambda t, ss: step(
                ss, critic_data, jax.random.fold_in(key, t), (state.generator.params, None))[0], st)
        return jax.jit(run), (dpsgd.init_state(critic_params, opt),)

    return {"generator_dp": g_loop(True), "generator_nonprivate": g_loop(False),
            "step_dp": step_loop(True), "step_nonprivate": step_loop(False),
            "critic_dp": critic_loop(True), "critic_nonprivate": critic_loop(False),
            # the same DP step with every per-example gradient by vmap (the method before the split)
            "critic_dp_vmap": critic_loop(True, "vmap")}


def main(argv=None) -> dict:
    args = _parse(argv)
    _configure_threads(args.threads, "cpu")
    import jax
    import jax.numpy as jnp

    built = build(args)
    cfg, lay, td = built[:3]
    fns = contenders(*built)
    key = jax.random.key(args.seed)
    compiled, compile_s = {}, {}
    for name, (fn, first) in fns.items():
        t0 = time.perf_counter()
        compiled[name] = (fn.lower(*first, key, jnp.int32(args.steps)).compile(), first)
        compile_s[name] = time.perf_counter() - t0
        jax.block_until_ready(compiled[name][0](*first, key, jnp.int32(args.steps)))  # warm-up
    wall = {n: [] for n in fns}
    cpu = {n: [] for n in fns}
    names = list(fns)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            fn, first = compiled[name]
            k = jax.random.fold_in(key, r + 1)
            w0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn(*first, k, jnp.int32(args.steps)))
            wall[name].append(1e3 * (time.perf_counter() - w0) / args.steps)
            cpu[name].append(1e3 * (time.process_time() - c0) / args.steps)
    rows = {}
    for name in names:
        med, p10, p90 = _stats(wall[name])
        cmed, _, _ = _stats(cpu[name])
        rows[name] = {"ms_per_step_median": med, "ms_per_step_p10": p10, "ms_per_step_p90": p90,
                      "cpu_ms_per_step_median": cmed, "compile_seconds": compile_s[name]}
    ratios = {
        "generator": rows["generator_dp"]["ms_per_step_median"] / rows["generator_nonprivate"]["ms_per_step_median"],
        "generator_cpu": rows["generator_dp"]["cpu_ms_per_step_median"] / rows["generator_nonprivate"]["cpu_ms_per_step_median"],
        "step": rows["step_dp"]["ms_per_step_median"] / rows["step_nonprivate"]["ms_per_step_median"],
        "step_cpu": rows["step_dp"]["cpu_ms_per_step_median"] / rows["step_nonprivate"]["cpu_ms_per_step_median"],
        "critic": rows["critic_dp"]["ms_per_step_median"] / rows["critic_nonprivate"]["ms_per_step_median"],
        "critic_cpu": rows["critic_dp"]["cpu_ms_per_step_median"] / rows["critic_nonprivate"]["cpu_ms_per_step_median"],
        "critic_vmap": rows["critic_dp_vmap"]["ms_per_step_median"] / rows["critic_nonprivate"]["ms_per_step_median"],
    }
    result = {"benchmark": "dpsactgan_speed", "goal_ratio": GOAL, "critic_goal_ratio": CRITIC_GOAL,
              "ratios": ratios, "rows": rows,
              "settings": {"rows": args.rows, "steps": args.steps, "rounds": args.rounds,
                           "threads": args.threads, "batch_size": cfg.batch_size, "width": lay.width,
                           "cond_width": lay.cond_width, "d_model": cfg.d_model,
                           "num_layers": cfg.num_layers, "num_heads": cfg.num_heads,
                           "num_discriminators": int(td.shards.starts.shape[0]),
                           "data": "data.adult_like (Adult-shaped, not Adult)"},
              "machine": _machine(args.threads), "command": " ".join(sys.argv)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dpsactgan_speed.json").write_text(json.dumps(result, indent=2))
    print(f"{'contender':24s} {'ms/step':>9s} {'p10':>8s} {'p90':>8s} {'cpu ms':>8s} {'compile s':>9s}")
    for name, r in rows.items():
        print(f"{name:24s} {r['ms_per_step_median']:9.2f} {r['ms_per_step_p10']:8.2f} {r['ms_per_step_p90']:8.2f} "
              f"{r['cpu_ms_per_step_median']:8.2f} {r['compile_seconds']:9.1f}")
    print(f"DP / non-private: generator update {ratios['generator']:.3f} (cpu {ratios['generator_cpu']:.3f}), "
          f"whole step {ratios['step']:.3f} (cpu {ratios['step_cpu']:.3f}); goal <= {GOAL}")
    print(f"mechanism='critic': DP critic step / non-private {ratios['critic']:.3f} (cpu "
          f"{ratios['critic_cpu']:.3f}); goal <= {CRITIC_GOAL} (every per-example gradient by vmap: "
          f"{ratios['critic_vmap']:.3f})")
    return result


if __name__ == "__main__":
    main()
