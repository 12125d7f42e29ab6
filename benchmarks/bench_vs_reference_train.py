"""End-to-end training loop vs the released PyTorch training loop: state tokens/s, same CPU core.

    python -m benchmarks.bench_vs_reference_train --ref /path/to/Chess-World-Model \\
        --ref-python /path/to/venv/bin/python [--families slice,transformer] [--batch-size 16] \\
        [--max-len 256] [--reps 3] [--core 0] [--pgn GAMES.pgn] [--work DIR]

Both sides train a d128 model for one epoch of the same games (default: the bundled 5,000-game
lichess sample, decompressed), each through its own whole pipeline:

* released: the games are converted by its own `data/process.py` (run with this interpreter,
  which has python-chess; it needs only python-chess and the standard library) into its JSONL
  format, then its `main.py` trains with `experiment_configs/{arch}_d128_defaults_simple.json`,
  `--batch_size`, `--max_steps` = max length, `--epochs 1`, `--val_every 0`, `--cpu`, its default
  DataLoader (`num_workers` 0, games in file order, each batch padded to its longest game) and
  its default NaN guard; lr, beta2 and weight decay are set to chessjax's final values for the
  cell (they do not change the cost of a step).
* chessjax: `data_prep.process_pgn --split train` (every kept game in the training split), then
  `chessjax.main` with `configs/cwm.py:family=...,size=d128`, the same batch size, `max_len` and
  length buckets (64, 128, 192, max_len), one epoch of steps, a fresh workdir per run.

Nothing of the released code is copied: its scripts are run as they are, by a few lines of glue
passed with `python -c` that (1) set torch to one thread, (2) print the throughput it already
logs at full precision with a timestamp (its `format_rate` rounds to 3 digits), and (3) count
padding in its collate function. chessjax runs with `jax_log_compiles` (its absl log lines carry
microsecond timestamps), so intervals containing a compilation can be excluded.

Threads: each run is pinned to one core with `taskset -c CORE`, with OMP/MKL/OpenBLAS threads 1,
`torch.set_num_threads(1)`, and for XLA `--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1`. Both loaders run in the training process (no worker processes).

Steady state: both sides log every `--log-every` steps; intervals ending at or before
`--warmup-steps` are dropped, and so is any chessjax interval in which XLA compiled something.
The rate is sum(tokens) / sum(seconds) over the kept intervals, a state token being one
supervised timestep (the released log counts 75 labels per timestep; divided by 75 here).
Runs alternate (released, chessjax, then chessjax, released, ...) so that load on the shared
machine hits both; the table gives the median over `--reps` and the 1-minute load average seen.
Both sides also report tokens per CPU-second of the pinned process (`time.process_time()` at each
log mark; the released side through the same `format_rate` hook, chessjax by wrapping
`logs.TrainLogger.write_interval`) and the CPU share (CPU-s / wall-s): on a shared machine,
where neighbours take a varying part of the core, tokens/CPU-s is the stable number and the wall
rate follows the share.
"""

import argparse
import bz2
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.reference import (
  CJ_GLUE,
  CJ_GLUE_LINE,
  REF_GLUE,
  REF_LINE,
  REPO,
  SAMPLE,
  add_reference_args,
)
from chessjax.machine import pinned_env

# chessjax's final (lr, beta2, weight decay) for d128 (configs/cwm.py FINAL), given to the
# released trainer too so that both optimisers do the same arithmetic.
OPTIM = {"transformer": (3e-3, 0.95, 0.0), "slice": (1e-3, 0.999, 1e-2)}

# Interval lines on stdout: "step 20/60  loss ... 943 tok/s  pad 0.31  bad 0  eta 0:00:12"
CJ_STEP = re.compile(r"^step \d+/\d+ .* tok/s\s+pad ([0-9.]+)")
CJ_COMPILE = re.compile(r"^[IW]\d{4} .*\] (Compiling jit\(|Finished XLA compilation)")


def steady(marks, warmup_steps) -> dict:
  """Steady-state rates from log marks (step, wall s, cpu s, tokens since last mark, compiled).

  Intervals ending at or before `warmup_steps`, and intervals with a compilation, are dropped.
  """
  tokens = wall = cpu = 0.0
  kept = dropped = 0
  for (step, w1, c1, tok, compiled), (_, w0, c0, _, _) in zip(marks[1:], marks[:-1], strict=False):
    if step <= warmup_steps:
      continue
    if compiled:
      dropped += 1
      continue
    tokens, wall, cpu, kept = tokens + tok, wall + w1 - w0, cpu + c1 - c0, kept + 1
  nan = float("nan")
  return {
    "tokens_per_s": tokens / wall if wall else nan,
    "tokens_per_cpu_s": tokens / cpu if cpu else nan,
    "cpu_share": cpu / wall if wall else nan,
    "kept": kept,
    "dropped": dropped,
    "steps": marks[-1][0],
  }


def run_ref(args, family, data_dir, work, pin, env) -> dict:
  lr, b2, wd = OPTIM[family]
  cmd = pin + [args.ref_python, "-c", REF_GLUE,
    "--experiment_config", f"{family}_d128_defaults_simple", "--data_path", str(data_dir),
    "--batch_size", str(args.batch_size), "--max_steps", str(args.max_len), "--epochs", "1",
    "--val_every", "0", "--save_every", "0", "--log_every", str(args.log_every), "--cpu",
    "--lr", str(lr), "--beta2", str(b2), "--weight_decay", str(wd),
    "--ckpt_path", str(work / "ref_ckpt"),
  ]  # fmt: skip
  t0 = time.time()
  proc = subprocess.run(cmd, cwd=args.ref, env=env, capture_output=True, text=True)
  wall = time.time() - t0
  if proc.returncode:
    sys.exit(f"released trainer failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
  # The released loop logs tokens/(time.time() interval); tokens = rate x interval. Its first
  # interval starts before the loop (no mark here), and is dropped as warm-up anyway.
  marks = [(0, float("nan"), float("nan"), 0, False)]
  for m in REF_LINE.finditer(proc.stdout):
    wall_t, cpu_t = float(m.group(3)), float(m.group(4))
    rate = float(m.group(2)) / 75.0  # it counts 75 labels per timestep
    marks.append((int(m.group(1)), wall_t, cpu_t, rate * (wall_t - marks[-1][1]), False))
  pad = re.search(r"valid_steps (\d+) cells (\d+)", proc.stdout)
  return {**steady(marks, args.warmup_steps), "wall_s": wall,
    "padding": 1 - int(pad.group(1)) / int(pad.group(2)) if pad else float("nan"),
  }  # fmt: skip


def run_ours(args, family, data_dir, work, steps, pin, env) -> dict:
  workdir = work / f"cj_{family}"
  shutil.rmtree(workdir, ignore_errors=True)
  buckets = sorted({b for b in (64, 128, 192) if b < args.max_len} | {args.max_len})
  cmd = pin + [sys.executable, "-c", CJ_GLUE,
    f"--config={REPO}/configs/cwm.py:family={family},size=d128", f"--workdir={workdir}",
    f"--config.data.train={data_dir}", f"--config.data.batch_size={args.batch_size}",
    f"--config.data.max_len={args.max_len}",
    f"--config.data.bucket_lengths=({','.join(map(str, buckets))})",
    f"--config.train.steps={steps}", f"--config.train.log_every={args.log_every}",
    "--config.train.checkpoint_every=1000000",
  ]  # fmt: skip
  t0 = time.time()
  proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
  wall = time.time() - t0
  if proc.returncode:
    sys.exit(f"chessjax trainer failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
  marks = [(0, float("nan"), float("nan"), 0, False)]
  pads, compiled = [], False
  for line in (proc.stderr + "\n" + proc.stdout).splitlines():
    if CJ_COMPILE.match(line):
      compiled = True
    m = CJ_GLUE_LINE.match(line)
    if m:
      marks.append(
        (int(m.group(1)), float(m.group(3)), float(m.group(4)), int(m.group(2)), compiled)
      )
      compiled = False
    m = CJ_STEP.match(line)
    if m:
      pads.append(float(m.group(1)))
  shutil.rmtree(workdir, ignore_errors=True)
  return {
    **steady(marks, args.warmup_steps), "wall_s": wall,
    "padding": statistics.mean(pads) if pads else float("nan"),
  }  # fmt: skip


def prepare(args, work: Path) -> tuple[Path, Path, int]:
  pgn = Path(args.pgn) if args.pgn else work / "games.pgn"
  if not args.pgn:
    pgn.write_bytes(bz2.decompress(SAMPLE.read_bytes()))
  ref_data = work / "ref_data"
  if not any(ref_data.glob("chess_*.jsonl")):
    ref_data.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("CHESS_WORLD_MODEL_ID_KEY", "bench-vs-reference")  # its example-id HMAC key
    subprocess.run(
      [args.ref_prep_python, "-m", "data.process", "--pgn", str(pgn), "--out", f"{ref_data}/"],
      cwd=args.ref,
      env=env,
      check=True,
      capture_output=True,
    )
  ours = work / "cj_data"
  if not (ours / "manifest.json").exists():
    subprocess.run(
      [sys.executable, "-m", "data_prep.process_pgn", "--pgn", str(pgn), "--out", str(ours),
       "--split", "train", "--workers", "1"],
      cwd=REPO, check=True, capture_output=True,
    )  # fmt: skip
  games = json.loads((ours / "manifest.json").read_text())["splits"]["train"]["games"]
  return ref_data, ours, games // args.batch_size


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  add_reference_args(ap)
  ap.add_argument("--families", default="slice,transformer")
  ap.add_argument("--batch-size", type=int, default=16)
  ap.add_argument("--max-len", type=int, default=256)
  ap.add_argument("--reps", type=int, default=3)
  ap.add_argument("--core", type=int, default=0)
  ap.add_argument("--log-every", type=int, default=20)
  ap.add_argument("--warmup-steps", type=int, default=40)
  ap.add_argument("--pgn", help="games (default: the bundled sample)")
  ap.add_argument("--work", help="working directory (default: a temporary one)")
  args = ap.parse_args(argv)
  args.ref = str(Path(args.ref).resolve())
  with tempfile.TemporaryDirectory() as tmp:
    work = Path(args.work or tmp)
    work.mkdir(parents=True, exist_ok=True)
    ref_data, ours, steps = prepare(args, work)
    pin, env = pinned_env(args.core)
    results = {}
    for rep in range(args.reps):
      for family in args.families.split(","):
        order = ("ref", "ours") if rep % 2 == 0 else ("ours", "ref")
        for side in order:
          load0 = os.getloadavg()[0]
          if side == "ref":
            r = run_ref(args, family, ref_data, work, pin, env)
          else:
            r = run_ours(args, family, ours, work, steps, pin, env)
          r["load"] = max(load0, os.getloadavg()[0])
          results.setdefault((family, side), []).append(r)
          print(
            f"rep {rep} {family:11s} {side:4s} {r['tokens_per_s']:9,.0f} state tokens/s "
            f"({r['tokens_per_cpu_s']:,.0f} per CPU-s, CPU share {r['cpu_share']:.2f}; "
            f"{r['kept']} intervals kept, {r['dropped']} dropped for compiles, "
            f"{r['steps']} steps, padding {r['padding']:.2f}, wall {r['wall_s']:.0f} s, "
            f"load {r['load']:.2f})",
            flush=True,
          )
  print(
    f"\nd128, batch {args.batch_size}, max length {args.max_len}, one epoch, core {args.core} "
    f"only, 1 thread each side, steady state after step {args.warmup_steps}, median of "
    f"{args.reps}\n"
  )
  print(
    "| family | released tokens/s | chessjax tokens/s | ratio | released tokens/CPU-s "
    "| chessjax tokens/CPU-s | ratio | padding released / chessjax | load avg (1 min) |"
  )
  print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
  for family in args.families.split(","):
    ref, us = results[(family, "ref")], results[(family, "ours")]
    med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
    a, b = med(ref, "tokens_per_s"), med(us, "tokens_per_s")
    c, d = med(ref, "tokens_per_cpu_s"), med(us, "tokens_per_cpu_s")
    loads = [r["load"] for r in ref + us]
    print(
      f"| {family} | {a:,.0f} | {b:,.0f} | {b / a:.2f}x | {c:,.0f} | {d:,.0f} | {d / c:.2f}x | "
      f"{ref[0]['padding']:.2f} / {statistics.mean(r['padding'] for r in us):.2f} | "
      f"{min(loads):.1f}-{max(loads):.1f} |"
    )
  print(json.dumps({f"{k[0]}/{k[1]}": v for k, v in results.items()}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
