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
"""

import argparse
import contextlib
import io
import json
import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from launch import sweep

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
  return ap.parse_args(argv)


class Pipeline:
  def __init__(self, args):
    self.args = args
    self.work = Path(args.workdir).resolve()  # Commands run from the repository root.
    self.work.mkdir(parents=True, exist_ok=True)
    self.log = self.work / "commands.sh"
    self.log.write_text("# launch.reproduce_mini: every command, in order\n")

  def record(self, argv: list[str], stdout=None) -> str:
    """Prints and logs a command line (`argv`, its output redirected to `stdout` if given)."""
    line = shlex.join(argv) + (f" > {shlex.quote(str(stdout))}" if stdout else "")
    print(f"$ {line}", flush=True)
    with open(self.log, "a") as f:
      f.write(line + "\n")
    return line

  def sh(self, argv: list[str]) -> None:
    """Runs one command from the repository root."""
    line = self.record(argv)
    result = subprocess.run(argv, cwd=REPO)
    if result.returncode != 0:
      raise SystemExit(f"reproduce_mini: command failed ({result.returncode}): {line}")

  def sweep(self, *args: str, out: Path) -> str:
    """`python -m launch.sweep ARGS > OUT`, run in this process; returns its output."""
    line = self.record([self.args.python, "-m", "launch.sweep", *args], stdout=out)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
      code = sweep.main(list(args))
    if code:
      raise SystemExit(f"reproduce_mini: command failed ({code}): {line}")
    Path(out).write_text(text.getvalue())
    return text.getvalue()

  def run_all(self, commands: list[str]) -> None:
    """The commands of a stage (`chessjax.population` or `chessjax.main` processes; comment lines
    skipped), `--jobs` at a time."""
    commands = [c for c in commands if c.strip() and not c.lstrip().startswith("#")]
    if not commands:
      return
    with ThreadPoolExecutor(max(self.args.jobs, 1)) as pool:
      list(pool.map(lambda c: self.sh(shlex.split(c)), commands))

  def paths(self):
    return self.work / "data" / "real", self.work / "data" / "random"

  def prepare(self) -> None:
    real, rand = self.paths()
    py = self.args.python
    if not (real / "manifest.json").exists():
      argv = [py, "-m", "data_prep.process_pgn", "--pgn", str(SAMPLE), "--out", str(real)]
      argv += ["--test-fraction", "0.1", "--workers", "1"]
      if self.args.sample_games:
        argv += ["--max-games", str(self.args.sample_games)]
      self.sh(argv)
    if not (rand / "manifest.json").exists():
      argv = [py, "-m", "data_prep.random_uniform", "--games", str(self.args.random_games)]
      self.sh(argv + ["--seed", "0", "--out", str(rand), "--workers", "1", "--quiet"])

  def common(self) -> list[str]:
    a = self.args
    real, _ = self.paths()
    buckets = tuple(b for b in (64, 128, 192, 256, 384, 512) if b < a.max_len) + (a.max_len,)
    sets = {
      "data.batch_size": a.batch_size,
      "data.max_len": a.max_len,
      "data.bucket_lengths": buckets,
      "train.eval_every": 10**9,  # Validate once, at the end (and the validation snapshot).
      "train.eval_batches": 4,
      "train.log_every": 20,
      "train.checkpoint_every": 10**9,  # A checkpoint at the end only.
    }
    out = ["--families", a.families, "--sizes", a.size, "--data", str(real)]
    out += ["--workdir-root", str(self.work / "runs"), "--python", a.python]
    out += ["--population", str(a.population)]
    for k, v in sets.items():
      out += ["--set", f"{k}={v!r}".replace(" ", "")]
    return out

  def main(self) -> None:
    a, w, start = self.args, self.work, time.perf_counter()
    print("[1/6] data", flush=True)
    self.prepare()
    real, rand = self.paths()
    print("[2/6] stage 1", flush=True)
    grid = ["--lrs", a.lrs, "--warmups", str(a.warmup), "--b2s", "0.99", "--wds", "0", "--off-grid"]
    text = self.sweep(
      "--stage",
      "1",
      *grid,
      "--steps",
      str(a.stage1_steps),
      *self.common(),
      "--skip-finished",
      out=w / "stage1.sh",
    )
    self.run_all(text.splitlines())
    print("[3/6] collect stage 1, stage 2", flush=True)
    self.sweep("--collect", str(w / "runs" / "stage1"), out=w / "stage1.csv")
    stage2 = ["--results", str(w / "stage1.csv"), "--steps", str(a.stage2_steps)]
    for round_ in range(1, 4):
      more = ["--stage2-results", str(w / "stage2.csv")] if round_ > 1 else []
      text = self.sweep(
        "--stage",
        "2",
        *stage2,
        *more,
        *self.common(),
        "--skip-finished",
        out=w / f"stage2_round{round_}.sh",
      )
      self.run_all(text.splitlines())
      self.sweep("--collect", str(w / "runs" / "stage2"), out=w / "stage2.csv")
      if not text.strip():
        break
    print("[4/6] select", flush=True)
    both = ["--results", str(w / "stage1.csv"), "--stage2-results", str(w / "stage2.csv")]
    self.sweep(
      "--select", *both, "--families", a.families, "--sizes", a.size, out=w / "selection.json"
    )
    print("[5/6] evaluate", flush=True)
    test = ["--test-data", f"real={real}:test", f"random={rand}:test"]
    extra = "--boards 2" + (f" --max-games {a.eval_games}" if a.eval_games else "")
    text = self.sweep(
      "--evaluate",
      *both,
      *test,
      "--families",
      a.families,
      "--sizes",
      a.size,
      "--python",
      a.python,
      "--eval-args",
      extra,
      out=w / "evaluate.sh",
    )
    self.run_all(text.splitlines())
    print("[6/6] report", flush=True)
    self.sh(
      [
        a.python,
        "-m",
        "chessjax.world_model.report",
        "--runs",
        str(w / "runs"),
        "--out",
        str(w / "report"),
      ]
    )
    kept = [c for c in json.loads((w / "selection.json").read_text()) if c["status"] == "done"]
    print(f"done in {time.perf_counter() - start:.0f}s: {len(kept)} cell(s) selected")
    print(f"report:  {w / 'report' / 'tables.md'}")
    print(f"figures: {w / 'report' / 'figure3.png'}, {w / 'report' / 'figure4.png'}")


def main(argv=None) -> int:
  Pipeline(parse_args(argv)).main()
  return 0


if __name__ == "__main__":
  sys.exit(main())
