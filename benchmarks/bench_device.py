"""The accelerator check: the train step training runs, the training loop, populations and the
recurrences, timed on one device.

    python -m benchmarks.bench_device --out runs/bench_device [--budget-minutes 7]
        [--only PART_OR_ROW,...] [--toy]

Every timed train step is the one a training run executes: `chessjax.step.build` of the family's
config (`benchmarks.harness.world_model_config`, `configs/lm.py`): forward in train mode,
the loss, backward, clipping, AdamW with the family's recipe and the non-finite guard, the state
donated. Each is compiled ahead of time (compile seconds: lower + compile), run `--warmup` steps,
then timed over `--iters` steps each to completion ("step ms", the median) and over steps
dispatched back to back ("b2b ms": the rate a training loop can reach, which keeps the device
busy). World-model steps run on random valid moves and labels, games cut at `STEPS` = 256 steps,
no padding. The parts, in run order: what no device has measured first, most valuable first (an
H200 ran the loop and population rows of the `measured` part on 2026-11-28,
docs/results/bench_device_h200_1128.json; `--help` lists each part's rows and rough seconds):

1. `loop`: the real training loop (`chessjax.train.train_and_evaluate`: batches prefetched to the
   device, the guard, logging every `log_every` steps; no validation, no checkpoint before the
   last step) on the bundled sample (`data_prep.process_pgn`, prepared once under OUT/data) at
   d128 batch 32 (SLiCE, float32), one length bucket of 256 steps so that every batch has the
   step's shape, one step a call and `STEPS_PER_CALL` = 8 (`--config.train.steps_per_call=8`:
   a training loop without that key fails the row, saying so), beside the same step timed alone
   ("slice d128 b32 float32"). The loop's ms/step is taken from its log intervals after the first
   (which holds the compilation and start-up): efficiency = the step alone back to back / the
   loop's ms/step; with the loop's own input wait (share of its time) and host ms/step, its
   padding and real tokens/s.
2. `cmdbuf`: XLA's command buffers (CUDA graphs) for while loops and conditionals,
   `XLA_FLAGS=--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL --xla_gpu_graph_min_graph_size=1`,
   "off" (XLA's default) against "on", each setting in a fresh process (XLA reads its flags once;
   XLA_PYTHON_CLIENT_MEM_FRACTION=0.10 of the device), on `AB_TARGETS` (SLiCE's d128 batch-32
   step, a population of 16 of it, the affine scan sequential).
3. `population`: K SLiCE members (float32, differing in learning rate: one shared batch, as a
   grid cell's members) in one step (`chessjax.population.Population`) at d128 batch 128, the
   grid's batch, K = 16 and 64, for each implementation of the affine scan (sequential, chunked
   at C = 16 and 64, associative; at 256 steps a chunk of 256 is the associative scan):
   ms/step, member-steps/s and the speed-up over K steps of the run alone one after another
   (back to back both), beside the step alone at batch 128. What `chessjax.ops.impl`'s table
   needs at rows = batch x K (`python -m benchmarks.bench_scans --device FILE` adds them). A K
   whose step does not fit is refused before it runs, with the largest K that fits (the memory
   check's estimate, `chessjax.compile.largest_population`): from a smaller K's program of the
   same implementation when that already says so (nothing built), else from its own program.
4. `unreached`: the steps no device has timed: Mamba-2, Mamba-3 and Mamba-3 MIMO at d128 batch
   32 and GPT-2 small's LM step (60 games of 512 tokens, Toshniwal et al.), both precision
   policies; SLiCE's d128 batch-32 bfloat16 step.
5. `unroll`: `lax.scan` unrolled `UNROLLS` = 4 and 16 times on the sequential forms (SLiCE's
   d128 step, whose `auto` is sequential on GPU, and each recurrence's sequential form), against
   the same rows at unroll 1. `chessjax.ops` has no unroll argument: `ScanUnroll` gives every
   `lax.scan` traced inside the step `unroll=k` (the row says how many scans it reached).
6. `measured`: the H200's rows again: the loop at d512 batch 128; the populations under `auto`,
   K = 1, 4, 16, 64 at d128 batch 32 and 128, K = 1, 4 at d256 and d512 batch 128; every
   family of the grid at d128 batch 32 and d512 batch 128, float32 and bfloat16
   (`model.dtype`); and each recurrence of `chessjax.ops.impl.RECURRENCES` in each
   implementation (chunked at several chunk sizes) at the d512 layer's shapes, forward and
   forward + backward.

Columns: tokens/s = batch x length / step ms; MFU = tokens/s x the model's FLOPs per token
(`chessjax.flops`, training) over the device's peak for the policy (`chessjax.peaks`; the measured
matmul rate on a CPU), from the step each run to completion ("MFU %") and from the steps back to
back ("MFU b2b %", the rate a loop reaches; a loop row's own MFU is its ms/step's); "program
GiB" = the compiled program's memory (XLA's memory analysis: arguments, outputs, temporaries;
`chessjax.memory.program_bytes`, the memory check's estimate, which
`chessjax.compile.check_memory` compares with the device's limit); "device peak GiB" = the
device's `peak_bytes_in_use` after the row, the row's own peak where the row raised it, else
"<= X" (the counter is a running maximum and cannot be reset: the row's own peak is at most the
peak so far); "-" where the backend keeps no count (the CPU). Rows are ordered by growing memory
where that is cheap (a population's K), so most peaks are the row's own.

Sizing: `--budget-minutes` (default 7 from the process's start, 0: none) keeps a run inside 8
minutes: a row whose rough seconds (`--help`; the H200's own seconds for each row it ran,
`benchmarks.device.common.measured_seconds`) would overrun it is not started, and it and every
later row are listed as `skipped (budget)`; the output names the parts left for a second run
(`--only PART,...`). `--only A,B` runs the parts named A or B and the rows named A or B, each
name exact (`--only population` runs that part, not "cmdbuf on: population ..."); the others
are listed as skipped. The process runs with XLA_PYTHON_CLIENT_MEM_FRACTION=0.85 unless set
(training's scripts use 0.90; the rest leaves room for the A/B's processes).

Output: DIR/bench_device.md (the tables) and DIR/bench_device.json (device kind, platform, jax
version, date, XLA flags, every row), also printed. `--toy`: every row at toy shapes (d128 at
batch 2 x 16 steps, small recurrences, GPT-2 `tiny`, K = 1, 2 and a K = 64 refused under a 1 GiB
limit, the per-implementation populations at K = 2 and 3, a 48-game sample) with XLA's quickest
compile, seconds per row on one CPU core: the suite runs it (tests/test_bench_device.py) so the
check cannot rot before a device runs it.

This module is the command: the catalogue in run order, the budget, the report. Each part's rows
and table are a module of benchmarks/device/: `loop.py`, `population.py`, `ab.py` (the
command buffers and unrolling), and `steps.py` (the train steps and recurrences: the
`unreached` and `measured` parts, and the steps alone the others compare with); `common.py`
holds the shapes, the row, the context and the table writer.
"""

import argparse
import dataclasses
import datetime
import gc
import json
import math
import os
import sys
import time
from pathlib import Path

import jax

from benchmarks.device import ab, loop, population, steps
from benchmarks.device.common import (
  FULL,
  STARTED,
  TOY,
  Catalogue,
  Context,
  Row,
  Shapes,
  Unit,
  device_peak_gib,
  fmt,
  matches,
)
from chessjax import peaks

BUDGET_MINUTES = 7.0  # A lent device's 15 minutes hold two runs and the start-up.
GROUPS = {
  "loop": "the training loop at d128 b32, 1 and 8 steps a call, against the step alone (SLiCE)",
  "cmdbuf": "XLA command buffers off/on (a process each)",
  "population": "K = 16, 64 at d128 b128, per implementation of the affine scan (SLiCE)",
  "unreached": "Mamba-2/3/MIMO d128 b32, GPT-2 small's LM step, SLiCE d128 b32 bfloat16",
  "unroll": "lax.scan unrolled 4/16 times on the sequential forms",
  "measured": "the H200's rows again: the loop at d512, populations, every step, recurrence",
}


def units(shapes: Shapes) -> list[Unit]:
  """Every row of a run, in run order (`GROUPS`)."""
  cat = Catalogue()
  loop.units(cat)
  ab.command_buffers(cat)
  population.units(cat)
  steps.unreached(cat)
  ab.unrolls(cat)
  loop.measured(cat)
  population.measured(cat)
  steps.measured(cat, shapes)
  return cat.units


def selected(unit: Unit, only: list[str]) -> bool:
  return any(matches(n, unit.group, only) for n in unit.names)


TABLES = (
  ("Training loop against the step alone", ("loop",), loop.table),
  ("Populations", ("population",), population.table),
  ("A/B: command buffers and scan unrolling", ("cmdbuf", "unroll"), ab.table),
  ("Train steps and recurrences", ("train", "lm", "recurrence"), steps.table),
)


def report(rows: list[Row]) -> str:
  out = []
  for title, parts, fn in TABLES:
    mine = [r for r in rows if r.part in parts]
    if mine:
      out.append(f"### {title}\n\n{fn(mine)}")
  return "\n".join(out)


def header() -> dict:
  device = jax.devices()[0]
  return {
    "device_kind": device.device_kind,
    "platform": device.platform,
    "device_count": jax.device_count(),
    "chip": peaks.chip(device.device_kind),
    "jax": jax.__version__,
    "jaxlib": getattr(jax.lib, "__version__", None) or jax.__version__,
    "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
    "mem_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", ""),
  }


def run(opts) -> dict:
  """Runs the selected rows within the budget; returns the JSON document (also written to
  opts.out)."""
  shapes = TOY if opts.toy else FULL
  budget = opts.budget_minutes * 60 if opts.budget_minutes > 0 else math.inf
  ctx, rows, left = Context(opts, shapes), [], set()
  only = ctx.only
  stopped = False
  before = jax.config.values["jax_disable_most_optimizations"]
  if opts.toy:  # XLA's quickest compile: the toy rows check that every row runs, not its speed.
    jax.config.update("jax_disable_most_optimizations", True)
  started = time.perf_counter()
  # What lives before the first row (modules, the data, a test suite's objects) is not the rows'
  # garbage: frozen, it is left out of the collection after each row, which then walks only what
  # the rows made.
  gc.freeze()
  try:
    for unit in catalogue(shapes, opts):
      if not selected(unit, only):
        rows += [Row(unit.part, n, status="skipped (--only)") for n in unit.names]
        continue
      stopped = stopped or time.perf_counter() - STARTED + unit.seconds > budget
      if stopped:
        rows += [Row(unit.part, n, status="skipped (budget)") for n in unit.names]
        left.add(unit.group)
        continue
      peak, unit_started = device_peak_gib(), time.perf_counter()
      try:
        got = unit.run(ctx)
      except Exception as e:  # One failing row (e.g. out of memory) must not lose the others.
        got = [Row(unit.part, n, status=f"failed: {type(e).__name__}: {str(e)[:300]}")
               for n in unit.names]  # fmt: skip
      now = device_peak_gib()
      unit_s = time.perf_counter() - unit_started
      for name, row in zip(unit.names, got, strict=True):
        row.part, row.name = unit.part, name
        row.extra["unit_s"] = (
          unit_s  # Wall seconds of the row's unit (the budget's guess: seconds).
        )
        if unit.part != "cmdbuf":  # A/B rows carry their own process's peak.
          row.device_peak_gib = now
          row.peak_own = None if not math.isfinite(now) else bool(now > peak)
        rows.append(row)
        print(f"{unit.group}: {name}: {row.status}, {fmt(row.ms, '.2f')} ms ({unit_s:.1f} s)",
              flush=True)  # fmt: skip
      gc.collect()
      jax.clear_caches()  # Free the compiled programs; a long run holds ~90 of them otherwise.
  finally:
    gc.unfreeze()
    jax.config.update("jax_disable_most_optimizations", before)
  doc = {
    **header(),
    "toy": opts.toy,
    "warmup": opts.warmup,
    "iters": opts.iters,
    "budget_minutes": opts.budget_minutes,
    "only": opts.only,
    "seconds": round(time.perf_counter() - started, 1),
    "rows": [dataclasses.asdict(r) for r in rows],
  }
  out = Path(opts.out)
  out.mkdir(parents=True, exist_ok=True)
  title = (
    f"bench_device on {doc['device_kind']} ({doc['platform']}), jax {doc['jax']}, {doc['date']}"
    f"{', TOY shapes' if opts.toy else ''}: {doc['seconds']} s\n\n"
  )
  if left:
    groups = ",".join(g for g in GROUPS if g in left)
    title += f"Not reached within the budget: parts {groups} (`--only {groups}`).\n\n"
  text = title + report(rows)
  (out / "bench_device.md").write_text(text)
  (out / "bench_device.json").write_text(json.dumps(doc, indent=1, allow_nan=True) + "\n")
  print(f"\n{text}\nwrote {out / 'bench_device.md'} and {out / 'bench_device.json'}")
  return doc


def catalogue(shapes: Shapes, opts) -> list[Unit]:
  """`units(shapes)`, or with `--rows` (an A/B process) only the units of those exact names."""
  every = units(shapes)
  if not opts.rows:
    return every
  names = [n for n in opts.rows.split(";") if n]
  chosen = [u for u in every if set(u.names) & set(names)]
  missing = set(names) - {n for u in chosen for n in u.names}
  if missing:
    raise SystemExit(f"error: no rows named {sorted(missing)}")
  return chosen


def parts_help() -> str:
  lines = ["parts, in run order (rough seconds on an H100/H200, compilation included):"]
  every = units(FULL)
  for group, what in GROUPS.items():
    mine = [u for u in every if u.group == group]
    rows, seconds = sum(len(u.names) for u in mine), sum(u.seconds for u in mine)
    lines.append(f"  {group:<11} {rows:>3} rows, ~{seconds / 60:.1f} min: {what}")
  total = sum(u.seconds for u in every)
  lines.append(
    f"  all: ~{total / 60:.0f} min; the default budget stops at {BUDGET_MINUTES:g} min "
    "(--only PART,...)"
  )
  return "\n".join(lines)


def parse_args(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, epilog=parts_help(), formatter_class=argparse.RawTextHelpFormatter
  )
  p.add_argument("--out", default="runs/bench_device", help="folder for the .md and .json")
  p.add_argument("--toy", action="store_true", help="toy shapes: seconds per row on one CPU core")
  p.add_argument("--budget-minutes", type=float, default=BUDGET_MINUTES, help="0: no limit")
  p.add_argument("--warmup", type=int, default=2)
  p.add_argument("--iters", type=int, default=5)
  p.add_argument(
    "--only", default="", help="run only these parts and rows (each named exactly, comma-separated)"
  )
  p.add_argument(
    "--memory-limit-gb",
    type=float,
    default=0.0,
    help="the population check's limit (0: the device's; --toy: 1 GiB at most)",
  )
  p.add_argument(
    "--data", default="", help="the loop's prepared dataset (default: the sample, under OUT/data)"
  )
  p.add_argument("--rows", default="", help=argparse.SUPPRESS)  # An A/B process's rows (exact).
  opts = p.parse_args(argv)
  if opts.toy:  # Every row, whatever the machine's speed; the fewest timed steps.
    opts.budget_minutes = 0
    if "--warmup" not in (argv or sys.argv[1:]):
      opts.warmup, opts.iters = 0, 1
  if opts.rows:
    opts.budget_minutes = 0
  return opts


def main(argv=None) -> dict:
  return run(parse_args(argv))


if __name__ == "__main__":
  # Before JAX starts its backend: the memory the device gives this process (see the docstring).
  # Here, not at import: a process that imports the module (the tests) keeps its own setting.
  os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.85")
  main()
