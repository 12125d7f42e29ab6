"""The paper's whole pipeline at toy scale on a CPU, from the bundled sample: `make reproduce-mini`.

    python -m launch.reproduce_mini --workdir runs/reproduce_mini [--jobs 2]

The same `launch.sweep` commands as a real sweep (launch/README.md, "The two-stage sweep"), on
the bundled lichess sample and a small random-uniform test set (seed 0):
1. data: the sample into train/validation/test shards, random-uniform test games;
2. stage 1: a small grid (two families x two learning rates at d128, a few steps each), each
   family's runs trained together as one population (`--population`, `chessjax.population`);
3. `--collect` the stage-1 runs; stage 2: each cell's best configuration at both cosine floors;
4. `--collect` stage 2 and apply the replacement rule until no configuration is left to run;
5. `--select`, then `--evaluate` the kept runs on the real and random-uniform test splits;
6. `chessjax.world_model.report` over the runs: WORKDIR/report/tables.md, tables.json, figures.
Every command is printed before it runs and logged to WORKDIR/commands.sh (the `launch.sweep` ones
run in this process: the same code, one interpreter start instead of seven). Rerunning resumes:
the sweep leaves out finished runs (`--skip-finished`) and prepared data is reused.

`--scheduler slurm` submits the same steps to SLURM instead (`launch.slurm_jobs`: each stage's
commands one job array, each step a job that starts when the arrays before it ended); `--wait`
returns when the chain has ended, with status 0 only if every stage finished. The steps are
`launch.protocol`'s in both cases, so both run the same commands.
"""

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from chessjax.spec import DataSpec
from launch import slurm_jobs
from launch.protocol import Protocol, StepError, run_local

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"


def parse_args(argv):
  ap = argparse.ArgumentParser(
    prog="python -m launch.reproduce_mini", description=__doc__.split("\n")[0]
  )
  ap.add_argument("--workdir", default="runs/reproduce_mini")
  ap.add_argument("--families", default="transformer,slice")
  ap.add_argument("--size", default="d128")
  ap.add_argument("--lrs", default="1e-3,3e-3")
  ap.add_argument("--warmup", type=int, default=10)
  ap.add_argument("--stage1-steps", type=int, default=60)
  ap.add_argument("--stage2-steps", type=int, default=120)
  ap.add_argument("--batch-size", type=int, default=16)
  ap.add_argument("--max-len", type=int, default=128)
  ap.add_argument("--sample-games", type=int, default=0, help="games of the sample (0: all)")
  ap.add_argument("--random-games", type=int, default=100)
  ap.add_argument("--eval-games", type=int, default=0, help="test games per split (0: all)")
  ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs at a time")
  ap.add_argument(
    "--population",
    type=int,
    default=4,
    metavar="K",
    help="train a stage's runs of one cell as populations of at most K members (0: one by one)",
  )
  ap.add_argument("--python", default=sys.executable, help="interpreter of the commands")
  ap.add_argument(
    "--scheduler",
    choices=("local", "slurm"),
    default="local",
    help="local: run here; slurm: submit the same commands as SLURM job arrays (launch.cluster)",
  )
  ap.add_argument("--wait", action="store_true", help="slurm: return when the chain has ended")
  return ap.parse_args(argv)


def protocol(args) -> Protocol:
  """The toy protocol: the data commands, then `launch.sweep`'s stages with the toy's flags."""
  a, work = args, Path(args.workdir).resolve()  # Commands run from the repository root.
  real, rand = work / "data" / "real", work / "data" / "random"
  py = a.python
  prep = [py, "-m", "data_prep.process_pgn", "--pgn", str(SAMPLE), "--out", str(real)]
  prep += ["--test-fraction", "0.1", "--workers", "1"]
  if a.sample_games:
    prep += ["--max-games", str(a.sample_games)]
  uniform = [py, "-m", "data_prep.random_uniform", "--games", str(a.random_games)]
  uniform += ["--seed", "0", "--out", str(rand), "--workers", "1", "--quiet"]
  data = [
    {"name": "real", "command": shlex.join(prep), "outputs": [str(real / "manifest.json")]},
    {"name": "random", "command": shlex.join(uniform), "outputs": [str(rand / "manifest.json")]},
  ]
  buckets = DataSpec(max_len=a.max_len).buckets_to_max_len()
  sets = {
    "data.batch_size": a.batch_size,
    "data.max_len": a.max_len,
    "data.bucket_lengths": buckets,
    "train.eval_every": 10**9,  # Validate once, at the end (and the validation snapshot).
    "train.eval_batches": 4,
    "train.log_every": 20,
    "train.checkpoint_every": 10**9,  # A checkpoint at the end only.
  }
  common = ["--families", a.families, "--sizes", a.size, "--data", str(real)]
  common += ["--workdir-root", str(work / "runs"), "--python", py]
  common += ["--population", str(a.population)]
  for k, v in sets.items():
    common += ["--set", f"{k}={v!r}".replace(" ", "")]
  grid = ["--lrs", a.lrs, "--warmups", str(a.warmup), "--b2s", "0.99", "--wds", "0", "--off-grid"]
  extra = "--boards 2" + (f" --max-games {a.eval_games}" if a.eval_games else "")
  return Protocol(
    root=str(work),
    python=py,
    common=common,
    stage1=[*grid, "--steps", str(a.stage1_steps)],
    stage2=["--steps", str(a.stage2_steps)],
    families=a.families,
    sizes=a.size,
    test_data=[f"real={real}:test", f"random={rand}:test"],
    eval_args=extra,
    rounds=3,
    data=data,
  )


def run(args) -> int:
  p, start = protocol(args), time.perf_counter()
  w = p.work
  w.mkdir(parents=True, exist_ok=True)
  (w / "commands.sh").write_text("# launch.reproduce_mini: every command, in order\n")
  if args.scheduler == "slurm":
    chain = slurm_jobs.submit_protocol(
      p, slurm_jobs.Options(throttle=args.jobs, python=args.python)
    )
    print(f"submitted to SLURM: {chain}; `python -m launch.cluster status {w}` shows it")
    if not args.wait:
      return 0
    ok, message = slurm_jobs.wait(w)
    print(f"{message} ({time.perf_counter() - start:.0f}s)")
    if not ok:
      return 1
  else:
    try:
      run_local(p, args.jobs, say=lambda m: print(m, flush=True))
    except StepError as e:
      raise SystemExit(f"reproduce_mini: {e}") from None
  kept = [c for c in json.loads((w / "selection.json").read_text()) if c["status"] == "done"]
  print(f"done in {time.perf_counter() - start:.0f}s: {len(kept)} cell(s) selected")
  print(f"report:  {w / 'report' / 'tables.md'}")
  print(f"figures: {w / 'report' / 'figure3.png'}, {w / 'report' / 'figure4.png'}")
  return 0


def main(argv=None) -> int:
  return run(parse_args(argv))


if __name__ == "__main__":
  sys.exit(main())
