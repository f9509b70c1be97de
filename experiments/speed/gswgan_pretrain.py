"""GS-WGAN pretraining speed: K discriminators under ``vmap`` against a Python loop and torch.

Usage::

    python -m experiments.speed.gswgan_pretrain --out runs/gswgan-pretrain [--threads 1]
    python -m experiments.speed.gswgan_pretrain --quick --out runs/gswgan-pretrain-quick
    python -m experiments.speed.gswgan_pretrain --table cardio-like --norm batch --devices 2 \
        --out runs/gswgan-pretrain-cardio     # the thesis-M1500 schedule on cardio's shape

GS-WGAN (Chen, Orekondy and Fritz 2020, NeurIPS) pretrains K discriminators, each on its own data
shard against its own temporary generator. :func:`dpgen_jax.synthesizers.gs_wgan.pretrain` runs
all K at once under ``jax.vmap``; the authors' public code runs them one after another. This
benchmark times, side by side in one run:

* **(v) JAX vmap**: ``gs_wgan.pretrain(config, x_sorted, shards, key, iterations=I)`` on the first
  ``--discriminators`` shards (default 20), and on all ``--full-k`` shards for
  ``--full-k-iterations`` iterations. The call is wrapped in one ``jax.jit`` (with
  the flag ``pretrain_chunk=I``, so the whole run is one compiled loop) and compiled ahead of time; each
  direct call of ``pretrain`` would otherwise build and compile its runner anew.
* **(a) JAX Python loop**: the same shards one after another, each run by ONE jitted function
  (compiled once, reused for every shard) that initialises a critic and a temporary generator and
  runs I iterations of ``gs_wgan.pretrain_iteration`` in a ``lax.fori_loop``, with the keys that
  ``pretrain`` gives that shard (so (a) computes what (v) computes; the run checks it).
* **(b) torch, the authors' structure** (``experiments.speed.torch_reference.time_gswgan_pretrain``):
  the same shards (same rows), same B, same iterations; per shard a fresh critic, temporary
  generator and Adam optimizers, 5 critic updates then 1 generator update per iteration.

Protocol: every contender initialises its networks inside the timed region; compile time is
excluded and reported separately (ahead-of-time ``lower().compile()``); one untimed warm-up call
each; then ``--rounds`` interleaved rounds (the order rotates every round), reporting the median
and p10/p90 over rounds, of wall time and of process CPU time (the load-robust measure on a
shared machine when every contender runs on one thread). All contenders get the same thread
count (default 1, pinned as ``experiments.speed.throughput`` pins it: XLA flags and
``OMP/MKL/OPENBLAS_NUM_THREADS`` before JAX is imported, ``torch.set_num_threads``). Times are
converted to seconds per discriminator-iteration and extrapolated linearly to ``--full-k``
discriminators x ``--full-iterations`` iterations (the thesis's schedule: 2000 iterations,
K = N // 46 on Adult). For (a) and (b), which run shards one after another, linear extrapolation
in K is their structure; for (v) the run measures full K. XLA's flop count of one
discriminator-iteration gives each contender's achieved GFLOP/s.

Data (``--table``): ``adult-like`` (default), ``dpgen_jax.data.adult_like(32561, seed=0)``
(Adult-shaped, not Adult) encoded with ``TableEncoder(adult_schema())`` (width 106), or
``cardio-like``, ``data.cardio_like(56000, seed=0)`` with ``cardio_schema()`` (width 16; cardio's
training split has 56,000 rows, and the thesis-M1500 preset gives it K = 1500); scaled to [-1, 1]
as ``GSWGAN.fit`` does, and partitioned by ``gs_wgan.partition`` into ``--full-k`` shards; the
first ``--discriminators`` shards are the ones the loops and the small vmapped run train.
``--norm batch`` uses the thesis's normalisation (its presets') in both networks and in torch
(``BatchNorm1d`` on the batch's statistics). ``--devices D`` runs the full-K vmapped contender on
D CPU host devices (``pretrain(mesh=dpsgd.data_mesh(D))``: the shards split over the devices, one
thread each); its compile time is then that of the first, untimed call.

Before timing, a parity check compares the critic loss (and its parameter gradient) of one batch
with the same weights in JAX and torch, and fails the run loudly beyond 1e-4 relative.

Writes ``OUT/gswgan_pretrain.json`` and ``OUT/gswgan_pretrain.md`` and prints the markdown. The
contenders, the (a)-(v) check and the parity check are in ``experiments/speed/_gswgan_contenders.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

from dpgen_jax import _validate as _v
from experiments.speed._gswgan_contenders import (
    TABLES,
    _first,
    check_parity,
    flops_per_discriminator_iteration,
    loop_runner,
    loop_vs_vmap_difference,
    parity,
    table_rows,
    vmapped_runner,
)
from experiments.speed._harness import _configure_threads, _machine, _stats

GOALS = {"loop": 3.0, "torch": 5.0}  # the targets: (v) faster than (a) by 3x, (b) by 5x
QUICK = {"iterations": 2, "full_k_iterations": 1, "rounds": 3}
FULL = {"iterations": 100, "full_k_iterations": 5, "rounds": 5}
CONTENDERS = ("vmap", "vmap_full", "loop", "torch")
LABELS = {
    "vmap": "(v) JAX vmap",
    "vmap_full": "(v) JAX vmap, full K",
    "loop": "(a) JAX Python loop",
    "torch": "(b) torch, authors' loop",
}


def default_full_k(table: str = "adult-like") -> int:
    """K that ``GSWGAN.fit`` gives the thesis-M1500 preset on ``table``'s rows (Adult's 32,561:
    698, the thesis's shard size; cardio's 56,000: the thesis's own 1,500)."""
    from dpgen_jax.synthesizers import gs_wgan

    preset = gs_wgan.THESIS_PRESETS["thesis-M1500"]
    cfg = gs_wgan.GSWGANConfig(records_per_shard=preset["records_per_shard"],
                               thesis_shards=preset["thesis_shards"])
    return gs_wgan.num_shards(cfg, TABLES[table])


def _parse(argv):
    p = argparse.ArgumentParser(
        prog="python -m experiments.speed.gswgan_pretrain",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--out", required=True, type=pathlib.Path, help="output folder")
    p.add_argument("--quick", action="store_true",
                   help=f"tiny iteration counts ({QUICK}) for CI")
    p.add_argument("--threads", type=int, default=1, action=_v.flag(_v.whole, minimum=1),
                   help="threads for every contender")
    p.add_argument("--discriminators", type=int, default=20, action=_v.flag(_v.whole, minimum=1),
                   help="discriminators of the loops and of the small vmapped run")
    p.add_argument("--iterations", type=int, default=None, action=_v.flag(_v.whole, minimum=1),
                   help=f"iterations per discriminator at --discriminators (default {FULL['iterations']}, "
                        f"quick {QUICK['iterations']})")
    p.add_argument("--table", choices=sorted(TABLES), default="adult-like", help="the rows' shape")
    p.add_argument("--norm", choices=("layer", "batch"), default="layer",
                   help="normalisation in both networks (batch: the thesis's presets')")
    p.add_argument("--devices", type=int, default=1, action=_v.flag(_v.whole, minimum=1),
                   help="CPU host devices of the full-K vmapped contender (its shards split over them)")
    p.add_argument("--full-k", type=int, default=None, action=_v.flag(_v.whole, minimum=1),
                   help="K of the full vmapped run and of the extrapolation (default: the "
                        "thesis-M1500 preset's K on --table: 698 on adult-like, 1500 on cardio-like)")
    p.add_argument("--full-k-iterations", type=int, default=None, action=_v.flag(_v.whole, minimum=1),
                   help=f"iterations measured at full K (default {FULL['full_k_iterations']}, "
                        f"quick {QUICK['full_k_iterations']})")
    p.add_argument("--full-iterations", type=int, default=2000, action=_v.flag(_v.whole, minimum=1),
                   help="iterations per discriminator of the extrapolated schedule (the thesis's)")
    p.add_argument("--rounds", type=int, default=None, action=_v.flag(_v.whole, minimum=1),
                   help=f"interleaved timing rounds (default {FULL['rounds']}, quick {QUICK['rounds']})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-torch", action="store_true", help="skip the torch contender")
    args = p.parse_args(argv)
    mode = QUICK if args.quick else FULL
    for name in ("iterations", "full_k_iterations", "rounds"):
        if getattr(args, name) is None:
            setattr(args, name, mode[name])
    if args.full_k is None:
        args.full_k = default_full_k(args.table)
    if args.discriminators > args.full_k:
        p.error(f"--discriminators={args.discriminators} must be <= --full-k={args.full_k}")
    if args.full_k > TABLES[args.table] // 32:
        p.error(f"--full-k={args.full_k} leaves fewer than a batch (32) of rows per shard on average")
    return args


# --------------------------------------------------------------------------- benchmark


def benchmark(args, torch_ref, log=print) -> dict:
    import jax
    import numpy as np

    from dpgen_jax.synthesizers import gs_wgan

    from experiments import _common

    config = gs_wgan.GSWGANConfig(generator_norm=args.norm, critic_norm=args.norm).replace(
        num_shards=args.full_k).validate()
    x = table_rows(args.table, 0)
    x_sorted, shards_full = gs_wgan.partition(x, jax.random.key(args.seed), args.full_k)
    shards = _first(shards_full, args.discriminators)
    sizes = np.asarray(shards.sizes)
    mesh = _common.device_mesh(args.devices)
    log(f"data: {x.shape[0]} {args.table} rows, width {x.shape[1]}; K={args.full_k} shards; the "
        f"{args.discriminators} timed shards hold {sizes.min()}-{sizes.max()} rows")

    result: dict = {}
    if torch_ref is not None:
        result["parity"] = parity(config, x_sorted, torch_ref, seed=args.seed)
        check_parity(result["parity"])
        log(f"parity: ok {result['parity']}")

    flops = flops_per_discriminator_iteration(config, x_sorted, shards)
    if flops is not None:
        log(f"XLA: {flops / 1e6:.1f} MFLOP per discriminator-iteration")
    vm, vm_compile = vmapped_runner(config, x_sorted, shards, args.iterations)
    log(f"compiled (v) at K={args.discriminators}: {vm_compile:.1f} s")
    vf, vf_compile = vmapped_runner(config, x_sorted, shards_full, args.full_k_iterations, mesh)
    log(f"compiled (v) at K={args.full_k} on {args.devices} device(s): {vf_compile:.1f} s")
    lp, lp_prepare, lp_compile = loop_runner(config, x_sorted, shards, args.iterations)
    log(f"compiled (a) single shard: {lp_compile:.1f} s")

    # Warm-up (untimed), and the check that (a) computes what (v) computes: same key, same shards.
    warm_key = jax.random.key(args.seed + 1)
    diff = loop_vs_vmap_difference(vm(warm_key), lp(lp_prepare(warm_key)))
    log(f"(a) vs (v), same key, {args.iterations} iterations: max |critic param diff| = {diff:.2e}")
    vf(warm_key)
    x_np = np.asarray(x_sorted)
    starts_np, sizes_np = np.asarray(shards.starts), np.asarray(shards.sizes)
    if torch_ref is not None:
        torch_settings = dict(torch_ref.GSWGAN_PRETRAIN, norm=args.norm)
        torch_ref.time_gswgan_pretrain(x_np, starts_np, sizes_np, discriminators=1, iterations=2,
                                       settings=torch_settings,
                                       threads=args.threads, seed=args.seed)

    def timed_jax(fn, arg):
        c, t = time.process_time(), time.perf_counter()
        fn(arg)
        return time.perf_counter() - t, time.process_time() - c

    def timed_torch(seed):
        # wall seconds from the reference (its clock starts after the data tensor is built); the
        # process CPU time around the call also covers that setup, a few ms against seconds
        c = time.process_time()
        wall = torch_ref.time_gswgan_pretrain(x_np, starts_np, sizes_np, iterations=args.iterations,
                                              settings=torch_settings,
                                              threads=args.threads, seed=seed)
        return wall, time.process_time() - c

    contenders = [c for c in CONTENDERS if c != "torch" or torch_ref is not None]
    samples = {c: [] for c in contenders}
    cpu = {c: [] for c in contenders}
    for r in range(args.rounds):
        key = jax.random.key(1000 + r)
        order = contenders[r % len(contenders):] + contenders[:r % len(contenders)]
        for c in order:
            if c == "vmap":
                wall, used = timed_jax(vm, key)
            elif c == "vmap_full":
                wall, used = timed_jax(vf, key)
            elif c == "loop":
                wall, used = timed_jax(lp, lp_prepare(key))
            else:
                wall, used = timed_torch(1000 + r)
            samples[c].append(wall)
            cpu[c].append(used)
        log(f"round {r + 1}/{args.rounds} (wall / cpu s): "
            + ", ".join(f"{c} {samples[c][-1]:.2f} / {cpu[c][-1]:.2f}" for c in contenders)
            + f"; load {os.getloadavg()[0]:.2f}")

    measured = {"vmap": (args.discriminators, args.iterations, vm_compile),
                "vmap_full": (args.full_k, args.full_k_iterations, vf_compile),
                "loop": (args.discriminators, args.iterations, lp_compile),
                "torch": (args.discriminators, args.iterations, None)}
    schedule = args.full_k * args.full_iterations
    rows = []
    for c in contenders:
        k, its, comp = measured[c]
        med, p10, p90 = _stats(samples[c])
        cpu_med = _stats(cpu[c])[0]
        per, per_cpu = med / (k * its), cpu_med / (k * its)
        rows.append({
            "contender": c, "discriminators": k, "iterations": its,
            "label": LABELS[c] + (f", {args.devices} devices" if c == "vmap_full" and args.devices > 1 else ""),
            "seconds_median": round(med, 4), "seconds_p10": round(p10, 4), "seconds_p90": round(p90, 4),
            "seconds_per_round": [round(s, 4) for s in samples[c]],
            "cpu_seconds_median": round(cpu_med, 4),
            "cpu_seconds_per_round": [round(s, 4) for s in cpu[c]],
            "compile_seconds": None if comp is None else round(comp, 2),
            "ms_per_discriminator_iteration": round(per * 1e3, 5),
            "cpu_ms_per_discriminator_iteration": round(per_cpu * 1e3, 5),
            "gflops_per_second": None if flops is None else round(flops / per / 1e9, 2),
            "gflops_per_cpu_second": None if flops is None else round(flops / per_cpu / 1e9, 2),
            "extrapolated_schedule_hours": round(per * schedule / 3600, 3),
            "extrapolated_schedule_cpu_hours": round(per_cpu * schedule / 3600, 3),
        })
    ratios = {}
    for clock, times in (("wall", samples), ("cpu", cpu)):
        med = {c: _stats(times[c])[0] / (measured[c][0] * measured[c][1]) for c in contenders}
        per_round = {c: [s / (measured[c][0] * measured[c][1]) for s in times[c]] for c in contenders}
        for c in ("loop", "torch"):
            if c not in med:
                continue
            for base in ("vmap", "vmap_full"):
                rr = [a / b for a, b in zip(per_round[c], per_round[base])]
                ratios.setdefault(clock, {})[f"{c}/{base}"] = {
                    "ratio": round(med[c] / med[base], 3),
                    "per_round_min": round(min(rr), 3), "per_round_max": round(max(rr), 3),
                    "goal": GOALS[c], "meets_goal": med[c] / med[base] >= GOALS[c],
                }
    result.update(rows=rows, ratios=ratios, loop_vs_vmap_max_abs_diff=diff, width=int(x.shape[1]),
                  xla_flops_per_discriminator_iteration=flops,
                  shard_sizes={"timed_min": int(sizes.min()), "timed_max": int(sizes.max()),
                               "full_min": int(np.min(np.asarray(shards_full.sizes))),
                               "full_max": int(np.max(np.asarray(shards_full.sizes)))})
    return result


# --------------------------------------------------------------------------- output


def markdown(result) -> str:
    s = result["settings"]
    la0, la1 = result["load_average"]["start"], result["load_average"]["end"]
    lines = [
        "# GS-WGAN pretraining: vmapped discriminators vs a Python loop and torch",
        "",
        f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, shared; threads per "
        f"contender: {result['threads']}; load average (1/5/15 min) {la0[0]:.2f}/{la0[1]:.2f}/{la0[2]:.2f} "
        f"at the start, {la1[0]:.2f}/{la1[1]:.2f}/{la1[2]:.2f} at the end. Mode: {result['mode']}; "
        f"{s['rounds']} interleaved rounds, median (p10-p90); compile time excluded. Every contender "
        "runs on one thread, so process CPU time is given beside wall time: on a shared machine it is "
        "the load-robust measure.",
        "",
        f"Data: {s['num_records']} {s['table']} rows (width {result['width']}, scaled to [-1, 1]; "
        f"normalisation: {s['norm']}) partitioned into "
        f"K={s['full_k']} shards by `gs_wgan.partition`; the {s['discriminators']} timed shards hold "
        f"{result['shard_sizes']['timed_min']}-{result['shard_sizes']['timed_max']} rows. B={s['batch_size']}, "
        f"{s['critic_steps']} critic updates + 1 temporary-generator update per iteration. Extrapolated "
        f"schedule: K={s['full_k']} x {s['full_iterations']} iterations, linear in discriminator-iterations.",
        "",
        "| contender | discriminators | iterations | median wall s | p10 | p90 | median CPU s | compile s "
        "| ms / discriminator-iteration (wall / CPU) | GFLOP/s (wall / CPU) "
        f"| extrapolated K={s['full_k']} x {s['full_iterations']}, h (wall / CPU) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        comp = "-" if r["compile_seconds"] is None else f"{r['compile_seconds']:.1f}"
        gf = ("-" if r["gflops_per_second"] is None
              else f"{r['gflops_per_second']:.1f} / {r['gflops_per_cpu_second']:.1f}")
        lines.append(
            f"| {r['label']} | {r['discriminators']} | {r['iterations']} | {r['seconds_median']:.3f} | "
            f"{r['seconds_p10']:.3f} | {r['seconds_p90']:.3f} | {r['cpu_seconds_median']:.3f} | {comp} | "
            f"{r['ms_per_discriminator_iteration']:.3f} / {r['cpu_ms_per_discriminator_iteration']:.3f} | "
            f"{gf} | {r['extrapolated_schedule_hours']:.2f} / {r['extrapolated_schedule_cpu_hours']:.2f} |")
    if result.get("xla_flops_per_discriminator_iteration"):
        lines += ["", f"GFLOP/s: XLA's count of {result['xla_flops_per_discriminator_iteration'] / 1e6:.1f} MFLOP "
                  "per discriminator-iteration (the torch loop does the same arithmetic) over the measured time. "
                  f"The extrapolation of (v) at K={s['discriminators']} is linear in K for comparison only; "
                  f"(v) at K={s['full_k']} is measured."]
    lines += ["", "Ratios per discriminator-iteration (> 1: (v) is faster; per-round range in brackets):", "",
              f"| ratio | clock | vs (v) at K={s['discriminators']} | vs (v) at K={s['full_k']} | goal |",
              "|---|---|---|---|---|"]
    for c, name in (("loop", "(a) JAX loop / (v)"), ("torch", "(b) torch / (v)")):
        for clock in ("wall", "cpu"):
            if f"{c}/vmap" not in result["ratios"].get(clock, {}):
                continue
            cells = []
            for base in ("vmap", "vmap_full"):
                q = result["ratios"][clock][f"{c}/{base}"]
                mark = "met" if q["meets_goal"] else "not met"
                cells.append(f"{q['ratio']:.2f}x [{q['per_round_min']:.2f}-{q['per_round_max']:.2f}] ({mark})")
            lines.append(f"| {name} | {clock} | {cells[0]} | {cells[1]} | >= {GOALS[c]:.0f}x |")
    lines += ["", f"(a) computes what (v) computes: same key and shards, max |critic parameter difference| "
              f"after {s['iterations']} iterations = {result['loop_vs_vmap_max_abs_diff']:.2e} (float "
              "rounding differences between the batched and unbatched programs, grown through Adam's "
              "normalised steps; the test suite checks agreement to 1e-5 after 2 iterations)."]
    if result.get("parity"):
        p = result["parity"]
        lines.append(f"Parity, JAX vs torch, one batch of {p['batch_size']} with the same weights: critic loss "
                     f"{p['loss_jax']:.6f} vs {p['loss_torch']:.6f} (relative difference "
                     f"{p['loss_rel_diff']:.1e}, limit {p['rtol']:.0e}); critic gradient max |diff| "
                     f"{p['critic_grad_max_abs_diff']:.1e}; generator output max |diff| "
                     f"{p['generator_max_abs_diff']:.1e}.")
    if result.get("skipped"):
        lines += ["", f"Skipped: {result['skipped']}"]
    lines += ["", f"Wall time of the run: {result['wall_seconds']} s."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    args = _parse(argv)
    _configure_threads(args.threads, "cpu")
    if args.devices > 1:
        from experiments import _common

        _common.host_devices(args.devices)
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    torch_ref, skipped = None, None
    if args.no_torch:
        skipped = "torch contender (--no-torch)"
    else:
        from experiments.speed import torch_reference

        ok, reason = torch_reference.gswgan_available()
        if ok:
            torch_ref = torch_reference
        else:
            skipped = f"torch contender ({reason})"
            print(f"gswgan_pretrain: skipping {skipped}", file=sys.stderr)
    result = {
        "machine": _machine(args.threads),
        "threads": args.threads,
        "mode": "quick" if args.quick else "full",
        "settings": {
            "num_records": TABLES[args.table], "table": args.table, "norm": args.norm,
            "devices": args.devices, "full_k": args.full_k,
            "discriminators": args.discriminators, "iterations": args.iterations,
            "full_k_iterations": args.full_k_iterations, "full_iterations": args.full_iterations,
            "rounds": args.rounds, "seed": args.seed, "batch_size": 32, "critic_steps": 5,
            "optimizer": "adam(lr=1e-4, b1=0, b2=0.9, eps=1e-8)",
            "data": (f"dpgen_jax.data.{args.table.replace('-', '_')}({TABLES[args.table]}, seed=0), "
                     f"TableEncoder({args.table.split('-')[0]}_schema()), 2x - 1"),
        },
    }
    result.update(benchmark(args, torch_ref))
    result["skipped"] = skipped
    result["load_average"] = {"start": list(load_start), "end": list(os.getloadavg())}
    result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gswgan_pretrain.json").write_text(json.dumps(result, indent=2, allow_nan=False))
    text = markdown(result)
    (args.out / "gswgan_pretrain.md").write_text(text)
    print(text)
    return result


if __name__ == "__main__":
    main()
