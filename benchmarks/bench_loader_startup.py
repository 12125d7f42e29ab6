"""Loader start-up on a large split: the lengths file of the manifest against a header scan.

    python -m benchmarks.bench_loader_startup [--games 1000000] [--out DIR]

Writes a synthetic dataset of `--games` games (random lengths 11-300 steps, as real games span;
random move ids, constant labels: the records are small but each is still one zstd frame, so the
scan costs what it costs on real data) with `chessjax.data.shards.DatasetWriter`, then times,
each in a fresh process so no cache helps:
  * scan:  reading every record's header (`pipeline._scan_lengths`, what the loader did before
           the manifest named a lengths file, and still does for older datasets);
  * file:  `pipeline.game_lengths` from the manifest's `train-lengths.npy`;
  * first batch: `make_batches(...)` up to its first batch, with the lengths file.
Prints a Markdown table.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from chessjax.data.records import encode_record
from chessjax.data.shards import DatasetWriter
from chessjax.encoding import START_ID

REPO = Path(__file__).resolve().parents[1]

PROBES = {
  "scan": "from chessjax.data import pipeline\nn = len(pipeline._scan_lengths(PATH, 'train'))",
  "file": "from chessjax.data import pipeline\nn = len(pipeline.game_lengths(PATH, 'train'))",
  "first batch": (
    "from chessjax.data import pipeline\nfrom chessjax.data.rows import GameRows\n"
    "it = pipeline.make_batches(PATH, 'train', GameRows(), batch_size=128, seed=0,"
    " process_index=0, process_count=1)\nb = next(it); n = it.plan.num_games; it.close()"
  ),
}


def write_dataset(out: Path, games: int, seed: int = 0) -> None:
  rng = np.random.default_rng(seed)
  lengths = rng.integers(11, 301, games)
  states = np.zeros((301, 75), np.uint8)
  writer = DatasetWriter(out, games_per_shard=100_000, overwrite=True)
  for i, steps in enumerate(lengths):
    moves = rng.integers(0, 20480, steps).astype(np.int32)
    moves[0] = START_ID
    writer.add("train", encode_record(moves, states[:steps], f"g{i}", "*"), int(steps) - 1)
  writer.finish({"source": "synthetic (benchmarks.bench_loader_startup)"})


def time_probe(code: str, path: Path) -> tuple[float, int]:
  """Seconds of `code` in a fresh process (imports excluded), and the games it saw."""
  script = (
    "import json, time\n"
    f"PATH = {str(path)!r}\n"
    "from chessjax.data import pipeline  # imports outside the timed region\n"
    "t = time.perf_counter()\n"
    f"{code}\n"
    "print(json.dumps({'seconds': time.perf_counter() - t, 'games': n}))\n"
  )
  out = subprocess.run(
    [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True
  ).stdout
  r = json.loads(out.strip().splitlines()[-1])
  return r["seconds"], r["games"]


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--games", type=int, default=1_000_000)
  ap.add_argument("--out", type=Path, default=None, help="keep the dataset here")
  args = ap.parse_args(argv)
  with tempfile.TemporaryDirectory() as tmp:
    out = args.out or Path(tmp) / "synthetic"
    t = time.perf_counter()
    write_dataset(out, args.games)
    print(f"wrote {args.games:,} synthetic games in {time.perf_counter() - t:.0f}s", flush=True)
    rows = {name: time_probe(code, out) for name, code in PROBES.items()}
  print(f"\n| start-up step ({args.games:,} games) | seconds | games seen |")
  print("|---|---:|---:|")
  for name, (seconds, games) in rows.items():
    print(f"| {name} | {seconds:.3f} | {games:,} |")
  print(f"\nscan / file: {rows['scan'][0] / max(rows['file'][0], 1e-9):,.0f}x")
  return 0


if __name__ == "__main__":
  sys.exit(main())
