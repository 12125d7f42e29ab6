"""How close a population's members stay to their runs alone where dropout draws at a padded shape.

    python -m benchmarks.bench_population_dropout [--family slice] [--steps 300] [--seeds 0,1,2] \\
        [--out runs/bench_population_dropout] [--record docs/results/population_dropout.json]

Members with different seeds read different data orders; at a step where their batches fall in
different length buckets the population pads them to the longest (`chessjax.population`), and a
family with dropout then draws its masks at the padded shape: not the draw its run alone makes at
its own length. So such a member is not its run alone to float rounding, only in distribution.
This measures by how much: a population of one member per seed (`--family`, d128, the bundled
sample's games in buckets 64-256, `--steps` steps of batch 16) and each seed's run alone; for each
seed the final validation loss of the member and of the run alone, their difference, and the
spread of the runs alone over the seeds (max - min: the yardstick a different seed gives). Also
the share of steps at which the members' lengths differed (where padding happened).

Writes OUT/population_dropout.json and, with `--record`, that file (docs/performance.md renders
it). One CPU core is enough; the four runs take minutes.
"""

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from chessjax import populations, train, workdir
from chessjax.batches import train_batches
from chessjax.files import write_json
from chessjax.machine import cpu_model
from chessjax.members import member_config, parse_member
from chessjax.spec import TrainSpec
from chessjax.task import get_task
from configs import cwm
from data_prep import process_pgn

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
BUCKETS = (64, 128, 192, 256)


def parse_args(argv=None):
  ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_population_dropout")
  ap.add_argument("--family", default="slice", help="a family with dropout (SLiCE: 0.1)")
  ap.add_argument("--steps", type=int, default=300)
  ap.add_argument("--seeds", default="0,1,2")
  ap.add_argument("--out", default="runs/bench_population_dropout")
  ap.add_argument("--record", default="", help="also write the record here")
  return ap.parse_args(argv)


def base_config(family: str, data: Path, steps: int):
  c = cwm.get_config(f"family={family},size=d128")
  c.model.dtype = "float32"
  c.data.update(train=str(data), batch_size=16, max_len=BUCKETS[-1], bucket_lengths=BUCKETS)
  c.optim.update(lr=1e-3, warmup_steps=steps // 10)
  c.train.update(steps=steps, log_every=steps, eval_every=steps, eval_batches=8)
  c.train.update(checkpoint_every=steps, compile_ahead="false")
  return c


def padded_share(config, seeds: list[int]) -> float:
  """The share of steps at which the seeds' batches have different lengths."""
  spec = TrainSpec.from_config(config)
  plans = []
  for seed in seeds:
    it, _ = train_batches(spec.replace(seed=seed), get_task(config).rows)
    plans.append(it.plan)
    it.close()
  steps = spec.train.steps
  return sum(len({p.global_batch(i)[1] for p in plans}) > 1 for i in range(steps)) / steps


def main(argv=None) -> dict:
  args = parse_args(argv)
  out = Path(args.out)
  data = out / "data"
  if not (data / "manifest.json").exists():
    process_pgn.run(process_pgn.parse_args(["--pgn", str(SAMPLE), "--out", str(data)]))
  seeds = [int(s) for s in args.seeds.split(",")]
  config = base_config(args.family, data, args.steps)
  members = [f"s{s}:seed={s}" for s in seeds]
  started = time.perf_counter()
  summaries = populations.train_population(config, out / "population", members)
  pop_s = time.perf_counter() - started
  rows = []
  for seed, summary in zip(seeds, summaries, strict=True):
    name, overrides = parse_member(f"s{seed}:seed={seed}")
    alone_dir = out / f"alone_s{seed}"
    if not workdir.finished(alone_dir):
      train.train_and_evaluate(member_config(config, name, overrides), alone_dir)
    alone = workdir.read_summary(alone_dir)
    member, own = summary["validation"]["loss"], alone["validation"]["loss"]
    row = {"seed": seed, "member_loss": member, "alone_loss": own, "difference": member - own}
    rows.append(row)
  losses = [r["alone_loss"] for r in rows]
  commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip
  record = {
    "what": "A population's members (one per seed) against their runs alone, where dropout is "
    "drawn at the padded shape: final validation loss (benchmarks.bench_population_dropout).",
    "command": "python -m benchmarks.bench_population_dropout " + " ".join(argv or sys.argv[1:]),
    "date": datetime.date.today().isoformat(),
    "commit": commit,
    "machine": cpu_model(),
    "family": args.family,
    "size": "d128",
    "batch_size": 16,
    "buckets": list(BUCKETS),
    "steps": args.steps,
    "seeds": seeds,
    "padded_step_share": padded_share(config, seeds),
    "rows": rows,
    "seed_spread": max(losses) - min(losses),
    "largest_difference": max(abs(r["difference"]) for r in rows),
    "population_wall_s": pop_s,
  }
  write_json(out / "population_dropout.json", record)
  if args.record:
    write_json(args.record, record)
  print(json.dumps(record, indent=1))
  return record


if __name__ == "__main__":
  main()
