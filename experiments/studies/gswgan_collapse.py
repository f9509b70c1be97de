"""Why GS-WGAN's sharded training collapses: non-private ablations on a cardio-shaped table.

Usage::

    python -m experiments.studies.gswgan_collapse --out runs/gswgan-collapse [--variants NAME ...] [--cardio PATH]

Each variant trains GS-WGAN without noise (``private=False``: no clipping, no noise) through the
functional API, on ``data.cardio_like(20000, seed=0)`` (or the first 20,000 training rows of the
real table with ``--cardio``), with 200 pretraining iterations and 3,000 generator steps unless the
variant says otherwise, then samples 5,000 rows from the moving-average generator and reports each
binary column's rate beside the training rows' rate, and the standard deviation of ``ap_hi``.
The variants separate the candidate causes named in ``docs/gs-wgan.md`` ("Why sharded training
collapses"): the number of critics, the rows each critic sees, pretraining, critic updates per
step, normalisation, and which critics train at each step.

Writes ``OUT/gswgan_collapse.json`` and ``OUT/gswgan_collapse.md`` (a variant's row is added as
soon as it finishes) and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

N_ROWS, K, P, T = 20_000, 200, 200, 3000
BINARY = ("gender", "smoke", "alco", "active", "cardio")
# name -> (description, config overrides, shard layout: "shards" | "one_shard" | "all_rows")
VARIANTS: dict[str, tuple[str, dict, str]] = {
    "k1": ("K = 1 (one critic on every row)", {"num_shards": 1, "critic_schedule": "selected"}, "shards"),
    "selected": ("K = 200, only the drawn critic trains (GS-WGAN's schedule)", {"critic_schedule": "selected"}, "shards"),
    "selected-k5": ("K = 5, only the drawn critic trains", {"num_shards": 5, "critic_schedule": "selected"}, "shards"),
    "selected-no-pretraining": ("K = 200, selected, no pretraining",
                                {"critic_schedule": "selected", "pretrain_iterations": 0}, "shards"),
    "selected-12000-steps": ("K = 200, selected, 12,000 generator steps",
                             {"critic_schedule": "selected", "generator_steps": 12_000}, "shards"),
    "selected-25-critic-steps": ("K = 200, selected, 25 critic updates per step",
                                 {"critic_schedule": "selected", "critic_steps_per_generator_step": 25}, "shards"),
    "one-small-critic": ("one critic, trained and used on one 100-row shard only",
                         {"critic_schedule": "selected"}, "one_shard"),
    "many-full-critics": ("200 critics, each on all 20,000 rows, selected",
                          {"critic_schedule": "selected"}, "all_rows"),
    "k1-one-critic-step": ("K = 1, one critic update per generator step",
                           {"num_shards": 1, "critic_schedule": "selected", "critic_steps_per_generator_step": 1},
                           "shards"),
    "selected-critic-batchnorm": ("K = 200, selected, BatchNorm critic",
                                  {"critic_schedule": "selected", "critic_norm": "batch"}, "shards"),
    "selected-batchnorm": ("K = 200, selected, BatchNorm in both networks (the thesis)",
                           {"critic_schedule": "selected", "critic_norm": "batch", "generator_norm": "batch"},
                           "shards"),
    "all": ("K = 200, every critic trains at every step (the default schedule)", {"critic_schedule": "all"},
            "shards"),
    "all-no-pretraining": ("K = 200, every critic trains, no pretraining (the default)",
                           {"critic_schedule": "all", "pretrain_iterations": 0}, "shards"),
}


def run_variant(name: str, frame) -> dict:
    import jax
    import jax.numpy as jnp

    from dpgen_jax import data
    from dpgen_jax.synthesizers import gs_wgan as gw

    label, overrides, layout = VARIANTS[name]
    schema = data.cardio_schema()
    enc = data.TableEncoder(schema)
    x = 2.0 * jnp.asarray(enc.encode(frame)) - 1.0
    cfg = gw.GSWGANConfig(**{"num_shards": K, "pretrain_iterations": P, "generator_steps": T, **overrides}).validate()
    k_part, k_pre, k_init, k_gen = jax.random.split(jax.random.key(0), 4)
    xs, shards = gw.partition(x, k_part, cfg.num_shards)
    if layout == "one_shard":
        shards = gw.Shards(shards.starts[:1], shards.sizes[:1])
    elif layout == "all_rows":
        k = shards.starts.shape[0]
        shards = gw.Shards(jnp.zeros(k, jnp.int32), jnp.full(k, x.shape[0], jnp.int32))
    t0 = time.perf_counter()
    pre = gw.pretrain(cfg, xs, shards, k_pre)
    state = gw.init_generator_phase(cfg, x.shape[1], pre.critics.params, k_init)
    state = gw.train_generator(cfg, state, xs, shards, k_gen, gw.privacy_phases(cfg, x.shape[0], private=False)[0])
    rows = gw.sample_encoded(cfg, x.shape[1], state.ema, 5000, jax.random.key(1))
    seconds = time.perf_counter() - t0
    synth = enc.decode(rows)
    rate = {c: float((synth[c] == schema[c].categories[1]).mean()) for c in BINARY}
    real = {c: float((frame[c] == schema[c].categories[1]).mean()) for c in BINARY}
    return {"variant": name, "label": label, "rates": rate, "real_rates": real,
            "max_gap": max(abs(rate[c] - real[c]) for c in BINARY),
            "ap_hi_sd": float(synth["ap_hi"].std()), "real_ap_hi_sd": float(frame["ap_hi"].std()),
            "seconds": seconds}


def markdown(rows: list[dict], source: str) -> str:
    head = ("| variant | " + " | ".join(BINARY) + " | largest gap | ap_hi sd | s |\n"
            "|---|" + "---|" * (len(BINARY) + 3))
    lines = [f"Non-private GS-WGAN on {source}, seed 0; binary rates of 5,000 rows from the moving-average "
             "generator.", "", head]
    if rows:
        real = rows[0]["real_rates"]
        lines.append("| training rows | " + " | ".join(f"{real[c]:.3f}" for c in BINARY)
                     + f" | - | {rows[0]['real_ap_hi_sd']:.1f} | - |")
    for r in rows:
        lines.append(f"| {r['label']} | " + " | ".join(f"{r['rates'][c]:.3f}" for c in BINARY)
                     + f" | {r['max_gap']:.3f} | {r['ap_hi_sd']:.1f} | {r['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m experiments.studies.gswgan_collapse", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=pathlib.Path, required=True)
    p.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    p.add_argument("--cardio", default=None, help="path of cardio_train.csv (default: the generated stand-in)")
    args = p.parse_args(argv)
    from dpgen_jax import data

    if args.cardio:
        frame, source = data.cardio_split(data.load_cardio(args.cardio), 0)[0].iloc[:N_ROWS], "cardio (20,000 training rows)"
    else:
        frame, source = data.cardio_like(N_ROWS, seed=0), "cardio_like(20000, seed=0)"
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.variants:
        rows.append(run_variant(name, frame))
        (args.out / "gswgan_collapse.json").write_text(json.dumps({"source": source, "rows": rows}, indent=2))
        (args.out / "gswgan_collapse.md").write_text(markdown(rows, source))
        print(f"{name}: largest gap {rows[-1]['max_gap']:.3f} ({rows[-1]['seconds']:.0f} s)", flush=True)
    print(markdown(rows, source))


if __name__ == "__main__":
    main()
