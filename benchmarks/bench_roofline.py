"""Roofline estimate of the paper's d512 step on a paper-like batch (an estimate, not a
measurement), and the numbers docs/performance.md compares the paper's 1.1 s with.

    python -m benchmarks.bench_roofline [--out docs/results/roofline.json] [--shuffles 20]

The paper's released loader pads each batch of 128 real games to its longest game (no length
buckets). The batch here is the same from the bundled CC0 sample (data/, lichess January 2013):
its games kept by the paper's rule (at least 20 plies), `--shuffles` seeded shuffles cut into
batches of 128 (a last partial batch dropped), each batch padded to its longest game (steps =
plies + 1, START included). Per family at d512 (the implementation `auto` picks on a GPU, as on
this CPU): training FLOPs per step, the mean over those batches of 128 x T x `chessjax.flops`'s
per-token count at T, the batch's padded length; the bytes of XLA's cost analysis for the lowered
(unfused) train step at batch 128 x the mean padded length; compute-bound time = FLOPs / the
chip's float32 (TF32) peak and memory-bound time = bytes / HBM bandwidth (`chessjax.peaks`).
Before fusion every op reads and writes its operands in memory, so the memory time is an upper
bound of the traffic, far above what the fused program moves. Prints a table; `--out` writes the
record docs/performance.md renders (`docgen.record_tables`).
"""

import argparse
import json
import time
from pathlib import Path

import jax
import numpy as np

from benchmarks.harness import built_step, device_batches, random_batch, world_model_config
from chessjax import flops, peaks, pgn_reader
from chessjax.models import model_config
from data_prep.pgn_files import SourceInfo, iter_game_batches

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
FAMILIES = ("transformer", "slice", "slice_diag", "gated_deltanet", "mamba2", "mamba3",
            "mamba3_mimo")  # fmt: skip
CHIPS = ("H100", "H200", "TPU v5e")
BATCH = 128


def sample_steps(path=SAMPLE, min_plies: int = 20) -> np.ndarray:
  """Steps (plies + 1) of every game of a PGN file that the paper's rule keeps."""
  out = []
  for texts, last in iter_game_batches(path, SourceInfo(str(path))):
    games, _ = pgn_reader.encode_games(texts, min_plies=min_plies, last_is_final=last)
    out += [len(g.moves) for g in games]
  return np.asarray(out, np.int64)


def padded_lengths(steps: np.ndarray, batch: int = BATCH, shuffles: int = 20, seed: int = 0):
  """The padded length (the longest game) of every full batch of `shuffles` seeded shuffles."""
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(shuffles):
    order = rng.permutation(len(steps))
    full = len(steps) // batch * batch
    out += steps[order[:full]].reshape(-1, batch).max(1).tolist()
  return np.asarray(out, np.int64)


def step_flops(family: str, padded: np.ndarray) -> float:
  """Training FLOPs of a d512 step, the mean over batches padded to `padded`."""
  cfg = model_config(family, "d512")
  per = {int(t): flops.per_token(cfg, int(t)) for t in np.unique(padded)}
  return float(np.mean([BATCH * t * per[int(t)] for t in padded]))


def step_bytes(family: str, steps: int) -> float:
  """Bytes of XLA's cost analysis of the lowered d512 train step (the one training runs,
  `chessjax.step.build`, float32) at batch 128 x `steps`."""
  built = built_step(world_model_config(family, "d512", batch=BATCH, steps=steps, dtype="float32"))
  (batch,) = device_batches(built, [random_batch(BATCH, steps, 0)])
  return float(built.fns.train_step.lower(built.state, batch).cost_analysis()["bytes accessed"])


def roofline(shuffles: int = 20) -> dict:
  steps = sample_steps()
  padded = padded_lengths(steps, shuffles=shuffles)
  mean_padded = int(round(padded.mean()))
  rows = {}
  for family in FAMILIES:
    start = time.perf_counter()
    rows[family] = {
      "flop_per_step": step_flops(family, padded),
      "bytes_per_step": step_bytes(family, mean_padded),
    }
    for chip in CHIPS:
      p = peaks.PEAKS[chip]
      rows[family][chip] = {
        "compute_ms": 1e3 * rows[family]["flop_per_step"] / p.fp32,
        "memory_ms": 1e3 * rows[family]["bytes_per_step"] / p.bandwidth,
      }
    print(f"{family}: {time.perf_counter() - start:.1f} s", flush=True)
  return {
    "what": "roofline estimate of the paper's d512 batch-128 step on a paper-like batch: real "
    "games padded to the longest of each batch of 128 (benchmarks.bench_roofline)",
    "command": f"python -m benchmarks.bench_roofline --shuffles {shuffles}",
    "sample": {
      "path": str(SAMPLE.relative_to(REPO)),
      "games": int(len(steps)),
      "mean_steps": float(steps.mean()),
      "median_steps": float(np.median(steps)),
      "max_steps": int(steps.max()),
      "batches": int(len(padded)),
      "shuffles": shuffles,
      "mean_padded_steps": float(padded.mean()),
      "padded_steps_quartiles": [float(q) for q in np.percentile(padded, [25, 50, 75])],
      "padding": float(1 - steps.mean() / padded.mean()),
    },
    "chips": {c: peaks.PEAKS[c]._asdict() for c in CHIPS},
    "rows": rows,
    "jax": jax.__version__,
    "date": time.strftime("%Y-%m-%d"),
  }


def main(argv=None) -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--out", default="", help="write the record here (JSON)")
  ap.add_argument("--shuffles", type=int, default=20)
  args = ap.parse_args(argv)
  rec = roofline(args.shuffles)
  s = rec["sample"]
  print(f"{s['games']} games, mean {s['mean_steps']:.1f} steps; batches of {BATCH} padded to "
        f"{s['mean_padded_steps']:.1f} steps on average ({s['batches']} batches)")  # fmt: skip
  print(
    "| family | TFLOP per step | XLA GB | " + " | ".join(f"{c} compute / memory ms" for c in CHIPS)
  )
  for family, r in rec["rows"].items():
    cells = [f"{r[c]['compute_ms']:.1f} / {r[c]['memory_ms']:.0f}" for c in CHIPS]
    print(f"| {family} | {r['flop_per_step'] / 1e12:.3f} | {r['bytes_per_step'] / 1e9:.0f} | "
          + " | ".join(cells))  # fmt: skip
  if args.out:
    Path(args.out).write_text(json.dumps(rec, indent=1) + "\n")


if __name__ == "__main__":
  main()
