"""Data-parallel DP-SGD: steps per second on 1, 2 and 4 devices, side by side in one run.

Usage::

    python -m experiments.speed.multidevice --out runs/multidevice [--quick] [--devices 1,2,4]
    python -m experiments.speed.multidevice --out runs/multidevice-gpu --platform gpu --devices 1,2,4

Protocol:

* One worker process per device count D (``XLA_FLAGS=--xla_force_host_platform_device_count=D``
  on CPU; on GPUs the first D visible GPUs). Each worker builds the DP-auto-GAN Adult autoencoder
  step of ``experiments.speed.throughput`` (same model, weights, data, clip norm, noise and SGD update,
  through its ``_jax_runner`` timing helper) inside ``dpsgd.data_parallel(dpsgd.data_mesh(D))``,
  so that the padded Poisson batch is split over the D devices (D = 1: the ordinary step).
* Each worker compiles every (batch size, method) first (the first call, one step, is the reported
  compile time) and probes how many fused steps fill about ``--target-seconds``; the parent then
  asks the workers for one timed call each, round-robin over ``--rounds`` rounds, so background
  load hits every device count alike. Statistics are over per-call averages (median, p10, p90);
  the ratio is steps/s on D devices divided by steps/s on 1 device, from the medians.
* Before timing, every worker computes one noised step from the same key; the parent checks that
  all device counts agree (the sharded step is the single-device step) and fails loudly if not.

Writes ``OUT/multidevice.json`` and ``OUT/multidevice.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

from experiments.speed import throughput

MODEL = "adult_autoencoder"
METHODS = ("ghost", "vmap")
QUICK_BATCHES = (256, 1024)
FULL_BATCHES = (64, 256, 1024, 4096)
PARITY_RTOL = 1e-4


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m experiments.speed.multidevice",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=pathlib.Path, help="output folder (required unless --worker)")
    p.add_argument("--quick", action="store_true", help=f"batches {QUICK_BATCHES}, ghost only")
    p.add_argument("--devices", type=lambda v: tuple(int(d) for d in v.split(",")), default=(1, 2, 4))
    p.add_argument("--batches", type=lambda v: tuple(int(b) for b in v.split(",")), default=None)
    p.add_argument("--methods", type=lambda v: tuple(v.split(",")), default=None)
    p.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    p.add_argument("--target-seconds", type=float, default=0.25,
                   help="approximate wall time of one timed call")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads per device (1: each device runs single-threaded)")
    p.add_argument("--platform", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-devices", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.worker and args.out is None:
        p.error("--out is required")
    if min(args.devices) < 1 or args.rounds < 3 or args.threads < 1:
        p.error("--devices must be >= 1, --rounds >= 3, --threads >= 1")
    for m in args.methods or ():
        if m not in METHODS:
            p.error(f"--methods: {m!r} is not one of {METHODS}")
    return args


# --------------------------------------------------------------------------- worker


def _worker(args) -> None:
    """Compiles, reports, then answers ``batch method seed`` lines with ms/step (JSON lines)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from dpgen_jax import dpsgd

    d = args.worker_devices
    if len(jax.devices()) < d:
        raise SystemExit(f"worker: {d} devices asked for, JAX sees {len(jax.devices())}")
    mesh = dpsgd.data_mesh(d)
    m = throughput.DATASET_SIZE[MODEL]
    weights = throughput._fallback_weights(MODEL)
    data = jnp.asarray((np.random.default_rng(0).random((m, weights[0][0].shape[0])) < 0.15)
                       .astype(np.float32))
    _, _, paths = throughput._jax_setup(MODEL)
    params = throughput._to_flax(paths, weights)
    calls, info = {}, {"devices": [str(x) for x in mesh.devices.ravel()], "compile_seconds": {},
                       "steps_per_call": {}, "parity": {}}
    for batch in args.batches:
        for method in args.methods:
            with dpsgd.data_parallel(mesh):  # make_dp_step picks the mesh up when it is built
                call, compile_s = throughput._jax_runner(MODEL, method, batch, params, data)
            probe = call(2, 1)
            n = int(max(1, min(2000, args.target_seconds * 1e3 / max(probe, 1e-3))))
            calls[(batch, method)] = (call, n)
            info["compile_seconds"][f"{batch}/{method}"] = round(compile_s, 3)
            info["steps_per_call"][f"{batch}/{method}"] = n
        info["parity"][str(batch)] = _one_step(params, data, batch, mesh)
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        batch, method, seed = line.split()
        call, n = calls[(int(batch), method)]
        print(json.dumps({"ms_per_step": call(n, int(seed))}), flush=True)


def _one_step(params, data, batch, mesh) -> list[float]:
    """The first parameters after one noised ghost step from key 0 (for the parity check)."""
    import jax
    import numpy as np
    import optax

    from dpgen_jax import dpsgd, privacy

    _, loss, _ = throughput._jax_setup(MODEL)
    m = data.shape[0]
    opt = optax.sgd(throughput.LEARNING_RATE)
    phase = privacy.DPSGDPhase.from_batch_size("multidevice", batch, m, throughput.NOISE_MULTIPLIER, 0,
                                               clip_norm=throughput.CLIP_NORM)
    step = dpsgd.make_dp_step(loss, opt, phase, scan_rows=m, mesh=mesh)
    new, _ = jax.jit(step)(dpsgd.init_state(params, opt), data, jax.random.key(0))
    leaf = jax.tree_util.tree_leaves(new.params)[0]
    return np.asarray(leaf, np.float64).ravel()[:64].tolist()


# --------------------------------------------------------------------------- parent


def _spawn(args, devices: int) -> subprocess.Popen:
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "")
    if args.platform == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
        flags += f" --xla_force_host_platform_device_count={devices}"
    if args.threads == 1:
        flags += " --xla_cpu_multi_thread_eigen=false"  # one Eigen thread per computation
    env["XLA_FLAGS"] = flags.strip()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = str(args.threads)
    root = pathlib.Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "experiments.speed.multidevice", "--worker", "--worker-devices",
           str(devices), "--batches", ",".join(map(str, args.batches)), "--methods",
           ",".join(args.methods), "--target-seconds", str(args.target_seconds), "--rounds",
           str(args.rounds), "--threads", str(args.threads)]
    return subprocess.Popen(cmd, env=env, cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def _read(proc: subprocess.Popen, devices: int) -> dict:
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"multidevice: the {devices}-device worker exited "
                         f"(code {proc.wait()}); see its error output above")
    return json.loads(line)


def benchmark(args, log=print) -> dict:
    import numpy as np

    workers = {d: _spawn(args, d) for d in args.devices}
    try:
        infos = {d: _read(p, d) for d, p in workers.items()}  # compiled, probed, parity step done
        base = args.devices[0]
        for batch in args.batches:
            ref = np.asarray(infos[base]["parity"][str(batch)])
            for d in args.devices:
                got = np.asarray(infos[d]["parity"][str(batch)])
                if not np.allclose(got, ref, rtol=PARITY_RTOL, atol=1e-7):
                    raise SystemExit(f"multidevice: parity failed at batch {batch}: {d} devices "
                                     f"differ from {base} by {np.abs(got - ref).max():.3g}")
        log(f"parity: every device count gives the same noised step (rtol {PARITY_RTOL})")
        samples = {(d, b, m): [] for d in args.devices for b in args.batches for m in args.methods}
        for r in range(args.rounds):
            for b in args.batches:
                for m in args.methods:
                    for d, p in workers.items():
                        p.stdin.write(f"{b} {m} {100 + r}\n")
                        p.stdin.flush()
                        samples[(d, b, m)].append(_read(p, d)["ms_per_step"])
    finally:
        for p in workers.values():
            if p.stdin:
                p.stdin.close()
            p.wait(timeout=120)
    rows = []
    for (d, b, m), ms in samples.items():
        med, p10, p90 = throughput._stats(ms)
        rows.append({"devices": d, "batch_size": b, "method": m,
                     "ms_per_step_median": round(med, 4), "ms_per_step_p10": round(p10, 4),
                     "ms_per_step_p90": round(p90, 4), "steps_per_second": round(1e3 / med, 2),
                     "compile_seconds": infos[d]["compile_seconds"][f"{b}/{m}"],
                     "steps_per_call": infos[d]["steps_per_call"][f"{b}/{m}"]})
    one = {(r["batch_size"], r["method"]): r["steps_per_second"] for r in rows if r["devices"] == 1}
    for r in rows:
        base_sps = one.get((r["batch_size"], r["method"]))
        r["ratio_vs_1_device"] = None if base_sps is None else round(r["steps_per_second"] / base_sps, 3)
        log(f"D={r['devices']} B={r['batch_size']} {r['method']}: {r['steps_per_second']:.1f} steps/s "
            f"(x{r['ratio_vs_1_device']})")
    return {"rows": rows, "devices": {d: i["devices"] for d, i in infos.items()}}


def markdown(result) -> str:
    lines = [
        f"# Data-parallel DP-SGD: {MODEL}, {result['platform']} ({result['machine']['cpu']}, "
        f"{result['machine']['cores']} cores), {result['threads']} thread(s) per device",
        "",
        "Steps per second of the fused DP step (Poisson sampling, clipping, one noise draw, SGD), "
        f"median of {result['rounds']} interleaved rounds; ratio = steps/s on D devices / steps/s "
        "on 1 device (same run). Compile time excluded (listed).",
        "",
        "| devices | batch | method | ms/step (median) | p10-p90 | steps/s | ratio vs 1 | compile s |",
        "|---:|---:|---|---:|---|---:|---:|---:|",
    ]
    for r in sorted(result["rows"], key=lambda r: (r["batch_size"], r["method"], r["devices"])):
        ratio = "" if r["ratio_vs_1_device"] is None else f"{r['ratio_vs_1_device']:.2f}"
        lines.append(f"| {r['devices']} | {r['batch_size']} | {r['method']} | "
                     f"{r['ms_per_step_median']:.3f} | {r['ms_per_step_p10']:.3f}-"
                     f"{r['ms_per_step_p90']:.3f} | {r['steps_per_second']:.1f} | {ratio} | "
                     f"{r['compile_seconds']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict | None:
    args = _parse(argv)
    args.batches = args.batches or (QUICK_BATCHES if args.quick else FULL_BATCHES)
    args.methods = args.methods or (("ghost",) if args.quick else METHODS)
    if args.worker:
        _worker(args)
        return None
    if 1 not in args.devices:
        args.devices = (1,) + tuple(args.devices)
    t0 = time.perf_counter()
    out = benchmark(args)
    result = {"machine": throughput._machine(args.threads), "platform": args.platform,
              "model": MODEL, "threads": args.threads, "rounds": args.rounds,
              "mode": "quick" if args.quick else "full",
              "settings": {"clip_norm": throughput.CLIP_NORM,
                           "noise_multiplier": throughput.NOISE_MULTIPLIER,
                           "optimizer": f"sgd(lr={throughput.LEARNING_RATE})",
                           "dataset_size": throughput.DATASET_SIZE[MODEL]},
              **out, "wall_seconds": round(time.perf_counter() - t0, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "multidevice.json").write_text(json.dumps(result, indent=2, allow_nan=False))
    (args.out / "multidevice.md").write_text(markdown(result))
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
