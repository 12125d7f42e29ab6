"""End-to-end training throughput with the real input pipeline feeding the jitted train step.

    python -m benchmarks.bench_train [--families slice,transformer,...] [--size d128] \\
        [--batch-size 16] [--steps 30] [--data DIR]

For each family: the model at `--size`, AdamW + clipping as in training, batches from
`chessjax.data.pipeline.make_batches` over the bundled lichess sample (prepared on the fly unless
`--data` is given). Every bucket shape is compiled first (not timed); then `--steps` steps are
timed. Reports state tokens per second (valid steps only, the benchmark's unit), the padding
fraction, and the share of wall time the host spent waiting for the next batch: near zero means
the input pipeline is not the bottleneck.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from chessjax import evaluation, workdir
from chessjax.data import pipeline
from chessjax.models import FAMILIES
from configs import cwm
from data_prep import process_pgn

REPO = Path(__file__).resolve().parents[1]
BUCKETS = (64, 128, 192, 256)


def bench_family(family, size, data, batch_size, steps) -> dict:
  config = cwm.get_config(f"family={family},size={size}")
  config.model.dtype = "float32"
  config.data.train = str(data)
  config.data.batch_size = batch_size
  run = workdir.initial(config)
  state, fns = run.state, run.fns
  it = pipeline.make_batches(
    str(data),
    "train",
    fns.task.rows,
    batch_size=batch_size,
    seed=0,
    bucket_lengths=BUCKETS,
    max_len=BUCKETS[-1],
  )
  # Compile every bucket shape once, outside the timed region.
  compiled = set()
  t0 = time.perf_counter()
  while len(compiled) < len(BUCKETS):
    batch = next(it)
    length = batch["moves"].shape[1]
    if length not in compiled:
      state, out = fns.train_step(state, evaluation.device_batch(batch, fns))
      jax.block_until_ready(out)
      compiled.add(length)
  compile_s = time.perf_counter() - t0
  tokens = cells = 0
  wait = 0.0
  start = time.perf_counter()
  for _ in range(steps):
    t = time.perf_counter()
    batch = next(it)
    wait += time.perf_counter() - t
    tokens += int(batch["mask"].sum())
    cells += batch["mask"].size
    state, out = fns.train_step(state, evaluation.device_batch(batch, fns))
  jax.block_until_ready(out)
  seconds = time.perf_counter() - start
  it.close()
  return {
    "family": family,
    "tokens_per_s": tokens / seconds,
    "steps_per_s": steps / seconds,
    "padding": 1 - tokens / cells,
    "input_wait": wait / seconds,
    "compile_s": compile_s,
    "loss": float(np.asarray(out["loss"])),
  }


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--families", default=",".join(FAMILIES))
  ap.add_argument("--size", default="d128")
  ap.add_argument("--batch-size", type=int, default=16)
  ap.add_argument("--steps", type=int, default=30)
  ap.add_argument("--data", help="prepared dataset (default: the bundled sample, prepared now)")
  args = ap.parse_args(argv)
  with tempfile.TemporaryDirectory() as tmp:
    data = args.data
    if data is None:
      data = str(Path(tmp) / "real")
      sample = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
      process_pgn.run(process_pgn.parse_args(["--pgn", str(sample), "--out", data]))
    rows = [
      bench_family(f, args.size, data, args.batch_size, args.steps)
      for f in args.families.split(",")
    ]
  print(
    f"{args.size}, global batch {args.batch_size}, buckets {BUCKETS}, {args.steps} timed "
    f"steps, {jax.device_count()} {jax.default_backend()} device(s)\n"
  )
  print("| family | state tokens/s | steps/s | padding | input wait | compile s | loss |")
  print("|---|---:|---:|---:|---:|---:|---:|")
  for r in rows:
    print(
      f"| {r['family']} | {r['tokens_per_s']:,.0f} | {r['steps_per_s']:.2f} | "
      f"{r['padding']:.2f} | {100 * r['input_wait']:.1f}% | {r['compile_s']:.0f} | "
      f"{r['loss']:.3f} |"
    )
  return 0


if __name__ == "__main__":
  sys.exit(main())
