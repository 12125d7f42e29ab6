"""The main job on the bundled sample, on a CPU, in minutes: `make demo`.

    python -m launch.demo_world_model --workdir runs/demo [--family slice] [--steps 500]

1. Prepare the bundled lichess sample into train/validation/test shards and a small random-uniform
   test set (seed 0), with their sizes and move-token coverage.
2. Train a small model (SLiCE d128 by default) on the real training split.
3. Evaluate it on the real and random-uniform test splits, next to the majority-class baseline
   (each label's most frequent class in the training split, predicted at every step).
Everything lands in WORKDIR: `report.md`, `eval/` (metrics JSON, Markdown, plots, boards) and
`train/tb` (TensorBoard). Rerunning reuses prepared data and resumes or skips finished training.
"""

import argparse
import logging
import sys
import time
from pathlib import Path

from chessjax import train
from chessjax.data import read_games, read_manifest
from chessjax.world_model import evaluate, metrics
from configs import cwm
from data_prep import coverage, process_pgn, random_uniform

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"


def prepare(workdir: Path, random_games: int, workers: int) -> tuple[Path, Path]:
  """Prepares (or reuses) the real and random-uniform datasets; returns their directories."""
  real, rand = workdir / "data" / "real", workdir / "data" / "random"
  if not (real / "manifest.json").exists():
    process_pgn.run(
      process_pgn.parse_args(
        ["--pgn", str(SAMPLE), "--out", str(real), "--test-fraction", "0.1"]
        + ["--workers", str(workers)]
      )
    )
  if not (rand / "manifest.json").exists():
    argv = ["--games", str(random_games), "--seed", "0", "--out", str(rand)]
    argv += ["--workers", str(workers), "--quiet"]
    if random_uniform.main(argv) != 0:
      raise RuntimeError("random-uniform generation failed")
  return real, rand


def data_report(real: Path, rand: Path) -> str:
  lines = ["## Data", ""]
  manifest = read_manifest(real)
  lines.append(process_pgn.summary_table(manifest))
  rmanifest = read_manifest(rand)
  lines += ["", f"random-uniform: {rmanifest['splits']['test']['games']:,} games, seed 0", ""]
  lines.append(coverage.format_report(coverage.coverage_report([real, rand])))
  return "\n".join(lines)


def demo_config(family: str, real: Path, steps: int):
  """The paper's recipe for `family` at d128, shortened to a few CPU minutes."""
  config = cwm.get_config(f"family={family},size=d128")
  config.model.dtype = "float32"
  config.data.train = str(real)
  config.data.batch_size = 32
  config.data.max_len = 256
  config.data.bucket_lengths = (64, 128, 192, 256)
  config.optim.lr = 3e-3
  config.optim.warmup_steps = max(steps // 20, 1)
  config.optim.floor = 0.1
  config.train.steps = steps
  config.train.log_every = 25
  config.train.eval_every = steps
  config.train.eval_batches = 4
  config.train.checkpoint_every = max(steps // 4, 1)
  return config


def compare_with_baseline(real: Path, eval_sets: dict, results: dict) -> tuple[str, dict]:
  """Markdown rows of the model and the majority-class baseline on both test splits."""
  majority = metrics.majority_labels(read_games(real, "train"))
  rows = [
    "| model | split | Labelwise % | ExactState % | Trajectory % |",
    "|---|---|---:|---:|---:|",
  ]
  baselines = {}
  for name, (path, split) in eval_sets.items():
    base = metrics.constant_prediction_metrics(majority, read_games(path, split))
    baselines[name] = base
    for label, m in (("majority class", base), ("trained model", results[name])):
      rows.append(
        f"| {label} | {name} | {100 * m['labelwise']:.2f} | {100 * m['exact_state']:.2f} | "
        f"{100 * m['trajectory']:.2f} |"
      )
  return "\n".join(rows), baselines


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
    prog="python -m launch.demo_world_model", description=__doc__.split("\n")[0]
  )
  ap.add_argument("--workdir", default="runs/demo")
  ap.add_argument("--family", default="slice")
  ap.add_argument("--steps", type=int, default=500)
  ap.add_argument("--random-games", type=int, default=200)
  ap.add_argument("--workers", type=int, default=2)
  args = ap.parse_args(argv)
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
  logging.getLogger("absl").setLevel(logging.WARNING)  # orbax logs every save at INFO.
  workdir = Path(args.workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  start = time.perf_counter()
  print(f"[1/3] preparing data under {workdir / 'data'} ...", flush=True)
  real, rand = prepare(workdir, args.random_games, args.workers)
  report = ["# chessjax demo", "", data_report(real, rand)]

  print(f"[2/3] training {args.family} d128 for {args.steps} steps ...", flush=True)
  train_dir = workdir / "train"
  summary = train.train_and_evaluate(demo_config(args.family, real, args.steps), train_dir)

  print("[3/3] evaluating on the real and random-uniform test splits ...", flush=True)
  eval_sets = {"real": (real, "test"), "random": (rand, "test")}
  results = evaluate.evaluate(train_dir, eval_sets)
  table, baselines = compare_with_baseline(real, eval_sets, results)
  report += [
    "",
    f"## Model: {args.family} d128, {summary['params']:,} parameters, {summary['steps']} steps",
    "",
    table,
    "",
    f"Full metrics: {train_dir / 'eval'}; TensorBoard: tensorboard --logdir {train_dir / 'tb'}",
  ]
  text = "\n".join(report) + "\n"
  (workdir / "report.md").write_text(text)
  print("\n" + table + "\n")
  beats = all(results["real"][k] > baselines["real"][k] for k in ("labelwise", "exact_state"))
  print(
    f"trained model {'beats' if beats else 'does NOT beat'} the majority-class baseline on "
    f"Labelwise and ExactState of the real test split"
  )
  print(f"done in {time.perf_counter() - start:.0f}s")
  print(f"report:      {workdir / 'report.md'}")
  print(f"evaluation:  {train_dir / 'eval' / 'results.md'} (plots, boards)")
  print(f"tensorboard: tensorboard --logdir {train_dir / 'tb'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
