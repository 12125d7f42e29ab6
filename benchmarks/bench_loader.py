"""Input-pipeline throughput: sustained batches/s and state tokens/s of `make_batches`.

    python -m benchmarks.bench_loader [--data DIR --split train] [--seconds 5]
        [--batch-sizes 16 128] [--workers 0 2] [--read-threads 1]

Without `--data` it first prepares the bundled sample (data/lichess_2013-01_sample5000.pgn.bz2,
4,710 kept games) into a temporary directory with `data_prep.process_pgn`. Each configuration
runs the training iterator (shuffled, bucketed, repeating) with a consumer that does nothing, so
the numbers are the loader's ceiling on this machine. "state tokens" are valid (unpadded) steps,
each carrying 75 labels; startup is the time to the first batch (worker processes start there)
and is excluded from the rates. Prints a Markdown table.
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from chessjax.data import pipeline

REPO = Path(__file__).resolve().parents[1]
SAMPLE_PGN = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"


def prepare_sample(out: Path) -> None:
  """Writes the bundled PGN sample as a one-split ('train') dataset."""
  from data_prep import process_pgn

  rc = process_pgn.main(["--pgn", str(SAMPLE_PGN), "--out", str(out), "--split", "train"])
  if rc:
    raise SystemExit(f"data_prep.process_pgn failed with exit code {rc}")


def measure(data, split, *, batch_size, workers, read_threads, seconds, seed=0) -> dict:
  """Runs one configuration; returns its rates and padding."""
  start = time.perf_counter()
  it = pipeline.make_batches(
    data,
    split,
    batch_size=batch_size,
    seed=seed,
    process_index=0,
    process_count=1,
    worker_count=workers,
    read_threads=read_threads,
  )
  try:
    next(it)
    startup = time.perf_counter() - start
    batches = valid = total = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
      batch = next(it)
      batches += 1
      valid += int(batch["mask"].sum())
      total += batch["mask"].size
    elapsed = time.perf_counter() - t0
  finally:
    it.close()
  return {
    "startup_s": startup,
    "batches_per_s": batches / elapsed,
    "tokens_per_s": valid / elapsed,
    "padded_tokens_per_s": total / elapsed,
    "padding": 1.0 - valid / total,
    "batches": batches,
  }


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--data", help="prepared dataset directory (default: prepare the sample)")
  ap.add_argument("--split", default="train")
  ap.add_argument("--seconds", type=float, default=5.0, help="timed seconds per configuration")
  ap.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 128])
  ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
  ap.add_argument("--read-threads", type=int, default=1)
  args = ap.parse_args(argv)

  with tempfile.TemporaryDirectory(prefix="bench_loader_") as tmp:
    data = args.data
    if data is None:
      data = Path(tmp) / "sample"
      t = time.perf_counter()
      prepare_sample(data)
      print(f"prepared the sample in {time.perf_counter() - t:.1f}s\n")
    t = time.perf_counter()
    lengths = pipeline.game_lengths(data, args.split)
    scan = time.perf_counter() - t
    print(
      f"{args.split}: {len(lengths):,} games, median {int(np.median(lengths))} steps, "
      f"max {int(lengths.max())}; length scan {scan:.2f}s ({scan / len(lengths) * 1e6:.1f} us/game)"
    )
    print(f"buckets {pipeline.DEFAULT_BUCKET_LENGTHS}, window {pipeline.DEFAULT_WINDOW_BATCHES}")
    print(f"CPU cores visible: {os.cpu_count()}, read threads per process: {args.read_threads}\n")
    rows = [
      "| batch | workers | startup s | batches/s | state tokens/s | padded tokens/s | padding |",
      "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for batch_size in args.batch_sizes:
      for workers in args.workers:
        r = measure(
          data,
          args.split,
          batch_size=batch_size,
          workers=workers,
          read_threads=args.read_threads,
          seconds=args.seconds,
        )
        rows.append(
          f"| {batch_size} | {workers} | {r['startup_s']:.1f} | {r['batches_per_s']:,.1f} "
          f"| {r['tokens_per_s']:,.0f} | {r['padded_tokens_per_s']:,.0f} | {r['padding']:.3f} |"
        )
        print(rows[-1], file=sys.stderr, flush=True)
    print("\n".join(rows))
    print()
    print("| batch | epoch padding (plan) | one bucket of 1024 |")
    print("|---:|---:|---:|")
    for batch_size in args.batch_sizes:
      planned = pipeline.epoch_padding_fraction(data, args.split, batch_size=batch_size)
      single = pipeline.epoch_padding_fraction(
        data, args.split, batch_size=batch_size, bucket_lengths=(1024,)
      )
      print(f"| {batch_size} | {planned:.3f} | {single:.3f} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
