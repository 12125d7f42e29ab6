"""Data preparation speed and size: `process_pgn` against the released algorithm, side by side.

    python -m benchmarks.bench_data_prep [--repeat-input 4] [--runs 3] \\
        [--reference ../shared/bench/reference_encoder.py]

Input: the bundled 5,000-game lichess sample written out as one plain PGN, repeated
`--repeat-input` times so start-up costs weigh little. Each contender is timed as a whole
command (interpreter start, imports, reading, encoding, writing), the median of `--runs` runs,
contenders interleaved so that load on a shared machine hits them alike. The yardstick is the
released preprocessing algorithm (`reference_encoder.py`: python-chess `read_game`, a 64-square
`piece_at` loop per ply, JSONL); it is not part of this repository, so pass its path.
"""

import argparse
import bz2
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
DEFAULT_REFERENCE = REPO.parent / "shared" / "bench" / "reference_encoder.py"


def timed(cmd: list[str]) -> tuple[float, str]:
  start = time.perf_counter()
  proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True)
  return time.perf_counter() - start, proc.stdout


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--repeat-input", type=int, default=4)
  ap.add_argument("--runs", type=int, default=3)
  ap.add_argument("--reference-runs", type=int, default=1)
  ap.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
  args = ap.parse_args(argv)

  with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    pgn = tmp / "games.pgn"
    text = bz2.open(SAMPLE, "rt", encoding="utf-8").read().rstrip("\n") + "\n\n"
    pgn.write_text(text * args.repeat_input)
    games = 5000 * args.repeat_input

    ours = {1: [], 2: []}
    reference, ref_bytes, ref_kept = [], None, None
    for run in range(max(args.runs, args.reference_runs)):
      if args.reference.exists() and run < args.reference_runs:
        seconds, out = timed([sys.executable, str(args.reference), str(pgn), str(tmp / "r.jsonl")])
        _, kept, _, _, _, nbytes = out.split()
        reference.append(seconds)
        ref_bytes, ref_kept = int(nbytes), int(kept)
      if run < args.runs:
        for workers in ours:
          out_dir = tmp / f"ours{workers}"
          cmd = [sys.executable, "-m", "data_prep.process_pgn", "--pgn", str(pgn)]
          cmd += ["--out", str(out_dir), "--workers", str(workers), "--overwrite"]
          cmd += ["--val-fraction", "0.005"]
          ours[workers].append(timed(cmd)[0])
    shard_bytes = sum(f.stat().st_size for f in (tmp / "ours1").glob("*.array_record"))
    kept = json.loads((tmp / "ours1" / "manifest.json").read_text())["counts"]["kept"]

  rows = [
    f"input: {games:,} games ({args.repeat_input} x the bundled sample), plain PGN; "
    f"whole command, median of runs; {os.cpu_count()} CPUs",
    "",
    "| contender | runs | seconds | games/s | x reference | bytes/game |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  ref_rate = None
  if reference:
    ref_s = statistics.median(reference)
    ref_rate = games / ref_s
    rows.append(
      f"| released algorithm (reference_encoder.py, JSONL) | {len(reference)} | {ref_s:.2f} | "
      f"{ref_rate:,.0f} | 1.00 | {ref_bytes / ref_kept:,.0f} |"
    )
  for workers, times in ours.items():
    sec = statistics.median(times)
    ratio = f"{games / sec / ref_rate:.1f}" if ref_rate else "n/a"
    rows.append(
      f"| chessjax process_pgn, {workers} worker{'s' * (workers > 1)} | {len(times)} | "
      f"{sec:.2f} | {games / sec:,.0f} | {ratio} | {shard_bytes / kept:,.0f} |"
    )
  speedup = statistics.median(ours[1]) / statistics.median(ours[2])
  rows += ["", f"2-worker speed-up over 1 worker: {speedup:.2f}x"]
  if ref_bytes:
    rows.append(
      f"shard bytes per game / reference JSONL bytes per game: "
      f"{(shard_bytes / kept) / (ref_bytes / ref_kept):.3f}"
    )
  else:
    rows.append(f"(yardstick not found at {args.reference}; pass --reference)")
  print("\n".join(rows))
  return 0


if __name__ == "__main__":
  sys.exit(main())
