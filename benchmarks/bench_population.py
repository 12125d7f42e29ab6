"""Populations against runs alone: the time of one member-step of a K-member population against one
step of the same run trained alone, on this machine.

    python -m benchmarks.bench_population [--family slice] [--size d128] [--batch 16] \
        [--steps 128] [--ks 1,2,4,8] [--warmup 2] [--rounds 5] [--seconds 2] [--out FILE.json] \
        [--toy]

A population (`chessjax.population.Population`) trains its K members in one compiled step (the
step of one run, `jax.vmap`ped over the members' states); the run alone is the step
`chessjax.step.build` makes for the same config. Both are the family's `configs/cwm.py` cell at
`--batch` x `--steps` (one length bucket, random valid moves and labels, no padding; float32);
the members differ in learning rate only, so they share one data order and every step one batch,
as the members of a stage-1 grid cell do. Every step is compiled first (compile seconds
reported, not timed) and runs `--warmup` steps; then `--rounds` rounds each time the run alone
and every K in turn, steps dispatched back to back for at least `--seconds` (the rate of a
training loop, which keeps the device busy); the medians over the rounds are reported (and each
K's range of per-round ratios), so a machine whose speed drifts moves both sides of every ratio
alike.

Columns: "population ms" and "alone ms" per step (back to back); "member-step ms" = population
ms / K; "K alone ms" = K x alone ms, the time of K runs one after another; "speed-up" = K alone
ms / population ms (above 1: the population costs less than K runs one after another, below 1:
more); "member-steps/s" = K / population seconds; "program MiB" = the compiled step's memory
(`chessjax.memory.program_bytes`, what the memory check compares with the machine's). A line
per K says in words whether the population costs more than K runs one after another (the table:
`benchmarks.population_table`).

Machine: the CPU model (`chessjax.machine`), its cores, the load average at the start, jax's
version and the date head the table. On a CPU XLA runs one step on the process's cores; a
population gives each op K times the work, so where one small step leaves cores idle it may
fill them. `--toy`: d128 at batch 2 x 16 steps, K = 1, 2 unless `--ks` (seconds; the suite runs
it). The
population is built as `benchmarks.harness.build_population` builds it, as
`benchmarks.bench_device`'s population rows do.
"""

import argparse
import datetime
import json
import math
import os
import statistics
import time
from pathlib import Path

import jax

from benchmarks.harness import (
  build_population,
  built_step,
  device_batches,
  random_batch,
  world_model_config,
)
from benchmarks.population_table import table
from chessjax import machine, memory
from chessjax.files import write_text

MIB = 2**20


class _Prepared:
  """A compiled step with its (donated) state and batches, ready to be timed again and again."""

  def __init__(self, jitted, state, batches: list, warmup: int):
    started = time.perf_counter()
    self.compiled = jitted.lower(state, batches[0]).compile()
    self.compile_s = time.perf_counter() - started
    self.program_bytes = memory.program_bytes(self.compiled)
    self.state, self.batches = state, batches
    for _ in range(warmup):
      self.steps(1)

  def steps(self, n: int) -> float:
    """Seconds per step of `n` steps dispatched back to back."""
    started = time.perf_counter()
    for i in range(n):
      self.state, out = self.compiled(self.state, self.batches[i % len(self.batches)])
    jax.block_until_ready((self.state, out))
    return (time.perf_counter() - started) / n

  def for_at_least(self, seconds: float) -> float:
    """Seconds per step over at least `seconds` (and 3 steps) of steps back to back."""
    first = self.steps(1)
    return self.steps(max(3, math.ceil(seconds / max(first, 1e-9))))


def measure(opts) -> dict:
  """The run alone and each K compiled first; then `opts.rounds` rounds, each timing the run alone
  and every K in turn for at least `opts.seconds`: the medians over rounds, so a machine whose
  speed drifts (other tenants, clocks) moves both sides of every ratio alike."""
  config = world_model_config(opts.family, opts.size, batch=opts.batch, steps=opts.steps,
                              dtype="float32")  # fmt: skip
  b, t = config.data.batch_size, config.data.max_len
  host = [random_batch(b, t, seed) for seed in (0, 1)]
  built = built_step(config)
  alone = _Prepared(built.fns.train_step, built.state, device_batches(built, host), opts.warmup)
  print(f"alone: compiled in {alone.compile_s:.1f} s", flush=True)
  pops, build_s = {}, {}
  for k in opts.ks:
    started = time.perf_counter()
    pop = build_population(config, k)
    build_s[k] = time.perf_counter() - started
    batches = [pop.device_batch([h]) for h in host]
    pops[k] = _Prepared(pop.train_step, pop.state, batches, opts.warmup)
    print(f"K={k}: compiled in {pops[k].compile_s:.1f} s", flush=True)
  times = {"alone": [], **{k: [] for k in opts.ks}}
  for r in range(opts.rounds):
    times["alone"].append(alone.for_at_least(opts.seconds))
    for k in opts.ks:
      times[k].append(pops[k].for_at_least(opts.seconds))
    timed = ", ".join(f"K={k} {1e3 * times[k][-1]:.2f} ms" for k in opts.ks)
    alone_now = 1e3 * times["alone"][-1]
    print(f"round {r + 1}/{opts.rounds}: alone {alone_now:.2f} ms, {timed}", flush=True)
  alone_ms = 1e3 * statistics.median(times["alone"])
  rows = []
  for k in opts.ks:
    ms = 1e3 * statistics.median(times[k])
    per_round = [x / k / a for x, a in zip(times[k], times["alone"], strict=True)]
    row = {
      "k": k,
      "population_ms": ms,
      "member_step_ms": ms / k,
      "alone_ms": alone_ms,
      "k_alone_ms": k * alone_ms,
      "speedup": k * alone_ms / ms,
      "member_steps_s": 1e3 * k / ms,
      "rounds_ms": [1e3 * x for x in times[k]],
      "cost_ratio_range": [min(per_round), max(per_round)],  # Per round: K alone / population.
      "compile_s": pops[k].compile_s,
      "build_s": build_s[k],
      "program_mib": None if pops[k].program_bytes is None else pops[k].program_bytes / MIB,
    }
    rows.append(row)
    print(f"K={k}: {ms:.2f} ms/step, speed-up {row['speedup']:.2f}x", flush=True)
  return {
    "what": "population member-steps against runs alone (benchmarks.bench_population)",
    "machine": header(),
    "family": opts.family,
    "size": opts.size,
    "batch": opts.batch,
    "steps": opts.steps,
    "dtype": "float32",
    "warmup": opts.warmup,
    "rounds": opts.rounds,
    "seconds": opts.seconds,
    "alone": {
      "ms": alone_ms,
      "rounds_ms": [1e3 * x for x in times["alone"]],
      "compile_s": alone.compile_s,
    },  # fmt: skip
    "rows": rows,
  }


def header() -> dict:
  return {
    "cpu": machine.cpu_model() or "unknown CPU",
    "cores": os.cpu_count(),
    "loadavg": round(os.getloadavg()[0], 2),
    "backend": jax.default_backend(),
    "device_kind": jax.devices()[0].device_kind,
    "jax": jax.__version__,
    "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
  }


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--family", default="slice")
  p.add_argument("--size", default="d128")
  p.add_argument("--batch", type=int, default=16)
  p.add_argument("--steps", type=int, default=128)
  p.add_argument("--ks", default="", help="population sizes, comma-separated (1,2,4,8)")
  p.add_argument("--warmup", type=int, default=2)
  p.add_argument("--rounds", type=int, default=5, help="timing rounds (medians over them)")
  p.add_argument("--seconds", type=float, default=2.0, help="at least this long per timing")
  p.add_argument("--out", default="", help="also write the table's record (JSON) here")
  p.add_argument("--toy", action="store_true", help="batch 2 x 16 steps, K = 1, 2: seconds")
  opts = p.parse_args(argv)
  if opts.toy:
    opts.batch, opts.steps, opts.rounds, opts.seconds = 2, 16, 1, 0.0
  opts.ks = [int(k) for k in (opts.ks or ("1,2" if opts.toy else "1,2,4,8")).split(",") if k]
  return opts


def main(argv=None) -> dict:
  opts = parse_args(argv)
  doc = measure(opts)
  print("\n" + table(doc))
  if opts.out:
    Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(opts.out, json.dumps(doc, indent=1) + "\n")  # Atomically: a record is never half.
  return doc


if __name__ == "__main__":
  main()
