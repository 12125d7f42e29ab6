"""Move-token coverage (Walker & Lyons, Table 3) and length statistics of prepared datasets.

    python -m data_prep.coverage data/real data/random [--json OUT.json]

For each dataset split: games, plies, length quantiles, unique move ids (of the 20,480 move ids,
START and PAD excluded) and coverage. With several splits, the overlap of their move-id sets:
ids seen only in one split and not another, which is what shows whether a test split asks a
model for move tokens it never trained on.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

from chessjax import encoding
from chessjax.data import read_games, read_manifest
from chessjax.files import write_json


def split_stats(path, split: str) -> tuple[dict, np.ndarray]:
  """Statistics of one split and the boolean set of move ids it uses."""
  seen = np.zeros(encoding.NUM_MOVE_IDS, dtype=bool)
  lengths = []
  for game in read_games(path, split):
    seen[game["moves"][1:]] = True
    lengths.append(game["plies"])
  lengths = np.asarray(lengths, dtype=np.int64)
  q = np.percentile(lengths, [0, 50, 90, 99, 100]) if len(lengths) else [0] * 5
  stats = {
    "games": len(lengths),
    "plies": int(lengths.sum()),
    "mean_plies": float(lengths.mean()) if len(lengths) else 0.0,
    "min_plies": int(q[0]),
    "median_plies": float(q[1]),
    "p90_plies": float(q[2]),
    "p99_plies": float(q[3]),
    "max_plies": int(q[4]),
    "unique_move_ids": int(seen.sum()),
    "coverage": float(seen.mean()),
  }
  return stats, seen


def coverage_report(paths) -> dict:
  """Per-split statistics for every dataset and pairwise move-id overlaps."""
  report, sets = {"splits": {}, "overlap": []}, {}
  for path in paths:
    for split in read_manifest(path)["splits"]:
      name = f"{Path(path).name}/{split}"
      report["splits"][name], sets[name] = split_stats(path, split)
  names = list(sets)
  for i, a in enumerate(names):
    for b in names[i + 1 :]:
      report["overlap"].append(
        {
          "a": a,
          "b": b,
          "shared": int((sets[a] & sets[b]).sum()),
          "only_a": int((sets[a] & ~sets[b]).sum()),
          "only_b": int((sets[b] & ~sets[a]).sum()),
        }
      )
  return report


def format_report(report: dict) -> str:
  rows = [
    "| split | games | plies | mean | median | p99 | max | unique ids | coverage |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for name, s in report["splits"].items():
    rows.append(
      f"| {name} | {s['games']:,} | {s['plies']:,} | {s['mean_plies']:.1f} | "
      f"{s['median_plies']:.0f} | {s['p99_plies']:.0f} | {s['max_plies']} | "
      f"{s['unique_move_ids']:,}/{encoding.NUM_MOVE_IDS:,} | {100 * s['coverage']:.2f}% |"
    )
  if report["overlap"]:
    rows += ["", "| a | b | shared ids | only in a | only in b |", "|---|---|---:|---:|---:|"]
    for o in report["overlap"]:
      rows.append(f"| {o['a']} | {o['b']} | {o['shared']:,} | {o['only_a']:,} | {o['only_b']:,} |")
  return "\n".join(rows)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m data_prep.coverage", description=__doc__)
  ap.add_argument("datasets", nargs="+", help="prepared dataset directories")
  ap.add_argument("--json", help="also write the report as JSON here")
  args = ap.parse_args(argv)
  try:
    report = coverage_report(args.datasets)
  except (FileNotFoundError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(format_report(report))
  if args.json:
    write_json(args.json, report)
  return 0


if __name__ == "__main__":
  sys.exit(main())
