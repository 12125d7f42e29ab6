"""Compilation where users wait: time to the first step and the train step's compilations of a
first-ever short run (no compilation cache).

    python -m benchmarks.bench_compile [--steps 80] [--reps 2] [--core 0] [--work DIR] \\
        [--variants 'NAME=OVERRIDES;...'] [--baseline-repo DIR]

docs/performance.md ("Compilation of a first-ever run") ran it with `--reps 3 --baseline-repo
/tmp/before --variants 'after=;ahead=--config.train.compile_ahead=true;merged=--config.data.
min_bucket_batches=8'` (one line).

Setting: the chessjax side of `bench_parity_quality` (its defaults): the d128 Transformer with the
paper's final hyperparameters for the cell (dropout 0.1), batch 16, games cut at 256 steps,
length buckets (64, 128, 192, 256), the first 4,480 games of the bundled lichess sample prepared
by `data_prep.process_pgn --split train` (4,217 kept), no validation; here `--steps` steps
(default 80) and the compilation cache off (`--config.train.compilation_cache=`), so every run
compiles everything as a user's first run does. Each run is pinned to `--core` with one thread
for XLA (`chessjax.machine.pinned_env`) in a fresh workdir.

Variants are `NAME=OVERRIDES` items separated by `;` (overrides separated by spaces, passed to
`chessjax.main`); `--baseline-repo` adds a run of another checkout's code with no overrides
(e.g. `git archive HEAD | tar -x -C DIR` for the code before a change). Runs alternate between
the variants within each of `--reps` rounds, so load on a shared machine hits all of them.

Per run: seconds from process start until the first step's outputs are ready (glue that blocks on
that step alone); the seconds the loop spent compiling or waiting for a compilation
(`TrainLogger.compiled`); each compilation's seconds and thread from the loop's log lines (before
this benchmark's change the loop logged none: its compilations are the loop's seconds); wall and
CPU seconds (user + sys) of the whole process (`wait4`); the last logged loss (equal across
variants that compile the same programs: the runs are deterministic).
"""

import argparse
import datetime
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.reference import split_pgn
from chessjax.machine import cpu_model, pinned_env

REPO = Path(__file__).resolve().parents[1]

GLUE = r"""
import sys, time
import jax
from absl import app
from chessjax import logs, main
_compiled = logs.TrainLogger.compiled
def compiled(self, seconds):
    print("[glue] loop compiled %.6f" % seconds, file=sys.stderr, flush=True)
    return _compiled(self, seconds)
logs.TrainLogger.compiled = compiled
_Pending, _first = logs.Pending, [True]
def pending(step, out, *args, **kwargs):
    if _first[0]:
        _first[0] = False
        jax.block_until_ready(out)
        print("[glue] first step %d ready %.6f cpu %.6f" % (step, time.perf_counter(),
              time.process_time()), file=sys.stderr, flush=True)
    return _Pending(step, out, *args, **kwargs)
logs.Pending = pending
app.run(main.main)
"""

LOOP_COMPILED = re.compile(r"^\[glue\] loop compiled ([0-9.]+)", re.M)
FIRST_STEP = re.compile(r"^\[glue\] first step \d+ ready ([0-9.]+) cpu ([0-9.]+)", re.M)
COMPILED = re.compile(r"train step for batch shapes .* compiled (in the loop|ahead) in ([0-9.]+) s")
LOSS = re.compile(r"^step (\d+)/\d+\s+loss ([0-9.]+)", re.M)


def machine() -> str:
  return (
    f"{cpu_model() or platform.processor()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
  )


def prepare(work: Path, train_games: int) -> Path:
  data = work / "cj_train"
  if not (data / "manifest.json").exists():
    train_pgn, _ = split_pgn(train_games, 1, work)
    subprocess.run(
      [sys.executable, "-m", "data_prep.process_pgn", "--pgn", str(train_pgn), "--out",
       str(data), "--split", "train", "--workers", "1"],
      cwd=REPO, check=True, capture_output=True,
    )  # fmt: skip
  return data


def run_once(args, data: Path, repo: Path, overrides: list[str], workdir: Path) -> dict:
  shutil.rmtree(workdir, ignore_errors=True)
  pin, env = pinned_env(args.core)
  env["PYTHONPATH"] = str(repo)
  env.pop("JAX_COMPILATION_CACHE_DIR", None)
  cmd = pin + [sys.executable, "-c", GLUE,
    f"--config={repo}/configs/cwm.py:family=transformer,size=d128", f"--workdir={workdir}",
    f"--config.data.train={data}", "--config.data.batch_size=16", "--config.data.max_len=256",
    "--config.data.bucket_lengths=(64,128,192,256)", f"--config.train.steps={args.steps}",
    f"--config.train.log_every={args.steps}", "--config.train.compilation_cache=",
    *overrides,
  ]  # fmt: skip
  log = workdir.with_suffix(".log")
  with log.open("w") as out:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
  text = log.read_text()
  if os.waitstatus_to_exitcode(status):
    raise RuntimeError(f"run failed ({log}):\n{text[-3000:]}")
  compiles = [(m[1], float(m[2])) for m in COMPILED.finditer(text)]
  loop_s = [float(x) for x in LOOP_COMPILED.findall(text)]
  losses = LOSS.findall(text)
  first = FIRST_STEP.search(text)
  return {
    "first_step_s": float(first[1]) - start,
    "first_step_cpu_s": float(first[2]),
    "loop_compile_s": sum(loop_s),
    "loop_compiles": len(loop_s),
    "compiles": compiles,
    "wall_s": wall,
    "cpu_s": usage.ru_utime + usage.ru_stime,
    "loss": losses[-1][1] if losses else "-",
  }


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--steps", type=int, default=80)
  ap.add_argument("--reps", type=int, default=2)
  ap.add_argument("--core", type=int, default=0)
  ap.add_argument("--train-games", type=int, default=4480)
  ap.add_argument("--work", type=Path, default=Path("/tmp/bench_compile"))
  ap.add_argument(
    "--variants",
    default="loop=--config.train.compile_ahead=false;ahead=--config.train.compile_ahead=true",
  )
  ap.add_argument("--baseline-repo", type=Path, default=None)
  args = ap.parse_args()
  args.work.mkdir(parents=True, exist_ok=True)
  data = prepare(args.work, args.train_games)
  variants = []
  if args.baseline_repo is not None:
    variants.append(("baseline", args.baseline_repo.resolve(), []))
  for item in filter(None, args.variants.split(";")):
    name, _, overrides = item.partition("=")
    variants.append((name.strip(), REPO, overrides.split()))
  print(f"machine: {machine()}; {datetime.date.today()}; {args.steps} steps, core {args.core}")
  results = {name: [] for name, _, _ in variants}
  for rep in range(args.reps):
    order = variants if rep % 2 == 0 else variants[::-1]
    for name, repo, overrides in order:
      r = run_once(args, data, repo, overrides, args.work / f"run_{name}_{rep}")
      results[name].append(r)
      each = ", ".join(f"{s:.1f} {w}" for w, s in r["compiles"]) or f"{r['loop_compiles']} in loop"
      print(
        f"rep {rep} {name:10s} first step {r['first_step_s']:6.1f} s ({r['first_step_cpu_s']:.1f} "
        f"CPU s)  loop compile "
        f"{r['loop_compile_s']:6.1f} s  wall {r['wall_s']:6.1f} s  CPU {r['cpu_s']:6.1f} s  "
        f"loss {r['loss']}  compilations: {each}  (load {os.getloadavg()[0]:.1f})",
        flush=True,
      )
  print()
  print(
    "| variant | time to first step s (CPU s) | loop compiling or waiting s | compilations (loop"
    " + ahead) | their seconds | whole run wall s | whole run CPU s | last loss |"
  )
  print("|---|---:|---:|---:|---:|---:|---:|---:|")
  med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
  for name, rs in results.items():
    n_loop = [sum(w == "in the loop" for w, _ in r["compiles"]) or r["loop_compiles"] for r in rs]
    n_ahead = [sum(w == "ahead" for w, _ in r["compiles"]) for r in rs]
    secs = [sum(s for _, s in r["compiles"]) or r["loop_compile_s"] for r in rs]
    print(
      f"| {name} | {med(rs, 'first_step_s'):.1f} ({med(rs, 'first_step_cpu_s'):.1f}) | "
      f"{med(rs, 'loop_compile_s'):.1f} | "
      f"{statistics.median(n_loop):g} + {statistics.median(n_ahead):g} | "
      f"{statistics.median(secs):.1f} | {med(rs, 'wall_s'):.1f} | {med(rs, 'cpu_s'):.1f} | "
      f"{rs[-1]['loss']} |"
    )
  print(f"\nmedians over {args.reps} runs each")


if __name__ == "__main__":
  main()
