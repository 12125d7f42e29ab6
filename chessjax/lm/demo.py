"""A chess language model on the bundled sample, on a CPU, in minutes: `make demo-lm`.

    python -m chessjax.lm.demo --workdir runs/demo_lm [--family slice] [--epochs 2]

1. Prepare the bundled lichess sample with Toshniwal et al.'s protocol (`data_prep.lm_data`:
   10-150 plies, duplicates dropped, a seeded shuffle into train / probing pool / dev / test)
   and a probing set (`data_prep.probing_sets`, 200 prompts of 21-60 moves).
2. Train the same small model (SLiCE d128 by default) as a UCI language model with plain UCI and
   with UCI + RAP (p = 0.25): the paper's recipe (AdamW, linear warmup and decay, early stopping,
   best checkpoint), shortened to a few epochs.
3. Evaluate both (`chessjax.lm.evaluate`: per-move perplexity, the probing tasks) and print the
   End-square table next to the random-legal baseline.
Everything lands in WORKDIR; rerunning reuses prepared data and finished runs.
"""

import argparse
import json
import sys
import time
from pathlib import Path

from chessjax import train
from chessjax.lm import evaluate
from configs import lm as lm_config
from data_prep import lm_data, probing_sets

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"


def prepare(workdir: Path) -> tuple[Path, Path]:
  data, sets = workdir / "data", workdir / "probing"
  if not (data / "manifest.json").exists():
    argv = ["--pgn", str(SAMPLE), "--out", str(data), "--train-size", "3000"]
    argv += ["--pool-size", "600", "--dev-size", "200", "--test-size", "200", "--overwrite"]
    if lm_data.main(argv) != 0:
      raise RuntimeError("data_prep.lm_data failed")
  if not (sets / "end.jsonl").exists():
    argv = ["--pool", str(data), "--train", str(data), "--out", str(sets)]
    if probing_sets.main(argv + ["--count", "200", "--min-len", "21", "--max-len", "60"]) != 0:
      raise RuntimeError("data_prep.probing_sets failed")
  return data, sets


def demo_config(family: str, notation: str, data: Path, epochs: int):
  config = lm_config.get_config(f"model={family},size=d128,notation={notation},train=all")
  config.data.train = str(data)
  config.data.batch_size = 16
  config.data.max_len = 512
  config.data.bucket_lengths = (128, 192, 256, 384, 512)
  config.optim.lr = 3e-3
  config.train.epochs = epochs
  config.train.log_every = 50
  return config


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
    prog="python -m chessjax.lm.demo", description=__doc__.split("\n")[0]
  )
  ap.add_argument("--workdir", default="runs/demo_lm")
  ap.add_argument("--family", default="slice")
  ap.add_argument("--epochs", type=int, default=2)
  args = ap.parse_args(argv)
  workdir = Path(args.workdir)
  start = time.perf_counter()
  print(f"[1/3] preparing LM data and probing sets under {workdir} ...", flush=True)
  data, sets = prepare(workdir)
  results = {}
  for i, notation in enumerate(("uci", "rap")):
    print(f"[2/3] training {args.family} d128 with {notation.upper()} ({i + 1}/2) ...", flush=True)
    run_dir = workdir / notation
    train.train_and_evaluate(demo_config(args.family, notation, data, args.epochs), run_dir)
    results[notation] = evaluate.evaluate(run_dir, sets=sets)
  print("[3/3] results (best checkpoint of each run)\n")
  base = results["uci"]["probes"]["random_legal"]["end_actual"]
  print("| notation | dev perplexity | End-Actual ExM | End-Actual LgM | End-Other LgM |")
  print("|---|---:|---:|---:|---:|")
  for notation, r in results.items():
    t = r["probes"]["tasks"]
    print(
      f"| {notation.upper()} | {r['perplexity']['dev']['perplexity']:.2f} | "
      f"{t['end_actual']['exm']:.1f} | {t['end_actual']['lgm']:.1f} | {t['end_other']['lgm']:.1f} |"
    )
  print(f"| random legal | - | {base:.1f} | - | - |")
  summary = {n: {"perplexity": r["perplexity"], "probes": r["probes"]} for n, r in results.items()}
  (workdir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
  print(f"\ndone in {time.perf_counter() - start:.0f}s; reports: {workdir}/*/lm_eval/results.md")
  return 0


if __name__ == "__main__":
  sys.exit(main())
