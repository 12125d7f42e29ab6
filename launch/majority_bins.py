"""The majority-class baseline per ply bin of random-uniform games: what a constant prediction
scores where the long-game curves are read (docs/claims.md, claim 5: "ExactState collapses long
before Labelwise").

    python -m launch.majority_bins [--data DIR] [--games 10000] [--max-len 1024] [--trained 128] \\
        [--record docs/results/majority_bins.json]

The games: the paper's random-uniform test set, seed 0 game for game (`data_prep.random_uniform
--compat reference --seed 0`, as `launch.cwm_mini` builds it; `--data DIR` reads a prepared
copy instead of generating one), each cut to its first `--max-len` steps as the long-game runs
were scored. The prediction: the most frequent class of each of the 75 labels over every one of
those steps (`chessjax.world_model.metrics.majority_labels`), the same row at every step: the
best any constant row does on these games. Its Labelwise and ExactState per bin use the long-game
record's bins (`launch.cwm_mini.long_game_summary`: 20 plies wide, anchored at the training
length `--trained`, the first clipped at ply 0). A constant row sees no move: a model's Labelwise
above this is what it tracks.
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from chessjax import labels
from chessjax.data.source import read_games, read_manifest
from chessjax.files import write_json
from chessjax.world_model import metrics
from launch.cwm_tables import BIN

REPO = Path(__file__).resolve().parents[1]


def bin_edges(trained: int, plies: int) -> list[int]:
  """The long-game record's bin starts: 0, then every 20 plies from `trained` % 20."""
  return sorted({0, *range(trained % BIN, plies, BIN)})


def per_bin(games: list[dict], trained: int) -> dict:
  """The majority row's Labelwise and ExactState per bin, and over all steps, of `games` (dicts
  with `states`, already cut)."""
  row = metrics.majority_labels(games)
  plies = max(len(g["states"]) for g in games)
  steps, correct, exact = (np.zeros(plies, np.int64) for _ in range(3))
  for g in games:
    hit = g["states"] == row[None]
    n = len(hit)
    steps[:n] += 1
    correct[:n] += hit.sum(-1)
    exact[:n] += hit.all(-1)
  edges = bin_edges(trained, plies)
  out = {"start": [], "steps": [], "labelwise": [], "exact_state": []}
  for a, b in zip(edges, [*edges[1:], plies], strict=True):
    n = int(steps[a:b].sum())
    if n:
      out["start"].append(a)
      out["steps"].append(n)
      out["labelwise"].append(float(correct[a:b].sum() / (labels.NUM_LABELS * n)))
      out["exact_state"].append(float(exact[a:b].sum() / n))
  total = int(steps.sum())
  return {
    "bins": out,
    "labelwise": float(correct.sum() / (labels.NUM_LABELS * total)),
    "exact_state": float(exact.sum() / total),
    "steps": total,
  }


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--data", default="", help="a prepared copy of the test set (default: generate)")
  ap.add_argument("--games", type=int, default=10_000)
  ap.add_argument("--max-len", type=int, default=1024, help="steps scored per game")
  ap.add_argument("--trained", type=int, default=128, help="the runs' training length (bins)")
  ap.add_argument("--record", default="", help="write the record here")
  args = ap.parse_args(argv)
  start = time.time()
  with tempfile.TemporaryDirectory() as tmp:
    data = Path(args.data) if args.data else Path(tmp) / "random"
    if not args.data:
      cmd = [sys.executable, "-m", "data_prep.random_uniform", "--games", str(args.games)]
      cmd += ["--seed", "0", "--compat", "reference", "--out", str(data), "--quiet"]
      subprocess.run(cmd, cwd=REPO, check=True)
    gen = read_manifest(data)["generator"]
    games = [
      {"states": g["states"][: args.max_len]}
      for _, g in zip(range(args.games), read_games(data, "test"), strict=False)
    ]
  record = {
    "what": "the majority-class baseline per ply bin of random-uniform games: the most frequent "
    "class of each label over every scored step of the games, the same row at every step",
    "command": f"python -m launch.majority_bins --games {args.games} --max-len {args.max_len} "
    f"--trained {args.trained}",
    "data": {
      "games": len(games),
      "seed": gen["seed"],
      "mode": gen["mode"],
      "max_len": args.max_len,
    },
    "trained": args.trained,
    **per_bin(games, args.trained),
    "wall_s": round(time.time() - start, 1),
  }
  b = record["bins"]
  for s, n, lw, e in zip(b["start"], b["steps"], b["labelwise"], b["exact_state"], strict=True):
    print(f"plies {s:4d}+: {n:9,} steps  Labelwise {100 * lw:6.2f}%  ExactState {100 * e:.2f}%")
  if args.record:
    write_json(Path(args.record), record)
    print(f"wrote {args.record}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
