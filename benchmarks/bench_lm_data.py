"""Speed of the blindfolded-LM data tools against a straightforward python-chess replay, and the
probing set they build from master games beside the paper's numbers (Toshniwal et al. 2022,
section 4 "Data", appendix D Table 11).

    python -m benchmarks.bench_lm_data [--pgn-dir ../shared/data/masters] [--files N] \\
        [--baseline-files 1] [--baseline-train 50000] [--workers 1] [--keep DIR]

Contenders, each timed in this process (wall clock, one run; the machine is shared):
* `lm_data` (`python -m data_prep.lm_data` on the first `--files` PGN files): native PGN reader,
  the 75 state labels of every position, dedup, shuffle, shards. Also run on the first
  `--baseline-files` files to compare on equal input.
* baseline LM data: python-chess `read_game` per game, mainline UCI moves, the same filters,
  dedup and shuffle, UCI text out (no state labels: it does less work than `lm_data`).
* `probing_sets` on the `lm_data` output (pool = split probing_pool, train = split train; with all
  training games, and with the first `--baseline-train` to compare on equal input).
* baseline probing sets: the same selection with the exclusion set built the straightforward way
  (a set of every prefix of every training game, as strings), on the first `--baseline-train`
  training games.
Prints a Markdown table, then the random-legal baselines and the Table 11 piece-type counts of the
1000-row probing set built from all training games, beside the paper's.
"""

import argparse
import bz2
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import chess.pgn
import numpy as np

from chessjax.data import source
from chessjax.lm import probing
from data_prep import lm_data, probing_sets

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PGN_DIR = REPO.parent / "shared" / "data" / "masters"
PAPER_BASELINE = {"end": 19.6, "start": 86.0}


def baseline_lm_data(paths, out: Path, seed: int = 42) -> tuple[int, int]:
  """python-chess replay of every game; same filters, dedup and shuffle; UCI text. Returns
  (games read, games kept)."""
  kept, seen, read = [], set(), 0
  for path in paths:
    with bz2.open(path, "rt", encoding="utf-8", errors="replace") as f:
      while True:
        game = chess.pgn.read_game(f)
        if game is None:
          break
        read += 1
        if game.errors or game.headers.get("FEN") or game.headers.get("Variant"):
          continue
        ucis = [m.uci() for m in game.mainline_moves()]
        if "0000" in ucis or not 10 <= len(ucis) <= 150:
          continue
        text = " ".join(ucis)
        if text in seen:
          continue
        seen.add(text)
        kept.append(text)
  order = np.random.default_rng(seed).permutation(len(kept))
  out.write_text("".join(kept[i] + "\n" for i in order))
  return read, len(kept)


def baseline_probing(pool, train, *, count=1000, min_len=51, max_len=100, seed=42) -> list[str]:
  """The selection of `data_prep.probing_sets` with a naive exclusion set. Returns the kept
  prefixes."""
  excluded = {" ".join(g[:k]) for g in train for k in range(1, len(g) + 1)}
  rng = random.Random(seed)
  used, rows = set(), []
  for game in pool:
    if len(rows) >= count:
      break
    if len(game) <= min_len:
      continue
    L = rng.randint(min_len, min(len(game) - 1, max_len))
    prefix = " ".join(game[:L])
    if prefix in excluded or prefix in used:
      continue
    board = chess.Board()
    for uci in game[:L]:
      board.push_uci(uci)
    nxt = chess.Move.from_uci(game[L])
    if board.piece_type_at(nxt.from_square) == chess.PAWN or board.is_castling(nxt):
      continue
    movable = probing_sets.movable_pieces(board)
    if len(movable) < 2 or len({board.piece_type_at(s) for s in movable}) < 2:
      continue
    used.add(prefix)
    rows.append(prefix)
  return rows


def _timed(fn):
  t0 = time.perf_counter()
  result = fn()
  return time.perf_counter() - t0, result


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--pgn-dir", type=Path, default=DEFAULT_PGN_DIR)
  ap.add_argument("--files", type=int, default=8, help="PGN files for the full lm_data run")
  ap.add_argument("--baseline-files", type=int, default=1)
  ap.add_argument("--baseline-train", type=int, default=50_000)
  ap.add_argument("--workers", type=int, default=1)
  ap.add_argument("--keep", type=Path, default=None, help="keep outputs here (default: temp)")
  ap.add_argument(
    "--only-probing", action="store_true", help="reuse --keep DIR/lm_full; time probing alone"
  )
  args = ap.parse_args(argv)
  if args.only_probing and not (args.keep and (args.keep / "lm_full").is_dir()):
    ap.error("--only-probing needs --keep DIR holding lm_full from an earlier run")
  files = sorted(args.pgn_dir.glob("*.pgn.bz2"))
  if not files:
    print(f"error: no .pgn.bz2 files in {args.pgn_dir}", file=sys.stderr)
    return 2
  rows = []
  with tempfile.TemporaryDirectory() as tmp:
    work = args.keep or Path(tmp)
    work.mkdir(parents=True, exist_ok=True)

    def run_lm(name, paths):
      argv = ["--pgn", *map(str, paths), "--out", str(work / name), "--overwrite"]
      argv += ["--workers", str(args.workers)]
      secs, _ = _timed(lambda: lm_data.run(lm_data.parse_args(argv)))
      m = source.read_manifest(work / name)
      return secs, m

    small, full = files[: args.baseline_files], files[: args.files]
    if not args.only_probing:
      secs, m = run_lm("lm_small", small)
      rows.append(
        ("lm_data", f"{len(small)} file(s)", m["counts"]["games_read"], m["counts"]["kept"], secs)
      )
      secs, (read, kept) = _timed(lambda: baseline_lm_data(small, work / "baseline.txt"))
      rows.append(("baseline lm data (python-chess)", f"{len(small)} file(s)", read, kept, secs))
      secs, m = run_lm("lm_full", full)
      rows.append(
        ("lm_data", f"{len(full)} file(s)", m["counts"]["games_read"], m["counts"]["kept"], secs)
      )
    m = source.read_manifest(work / "lm_full")
    split_games = {s: m["splits"][s]["games"] for s in lm_data.SPLITS}

    ds = work / "lm_full"

    def run_probe(name, limit):
      argv = ["--pool", str(ds), "--train", str(ds), "--out", str(work / name)]
      if limit is not None:
        argv += ["--train-limit", str(limit)]
      return _timed(lambda: probing_sets.run(probing_sets.parse_args(argv)))

    n_pool = split_games["probing_pool"]
    secs, summary = run_probe("probe_small", args.baseline_train)
    rows.append(
      (
        "probing_sets",
        f"pool {n_pool:,} + train {args.baseline_train:,}",
        n_pool,
        summary["rows"],
        secs,
      )
    )

    def base():
      pool = list(probing_sets.read_game_list(ds, "probing_pool"))
      train = list(probing_sets.read_game_list(ds, "train", args.baseline_train))
      return baseline_probing(pool, train)

    secs, base_prefixes = _timed(base)
    ours_prefixes = [r["prefix"] for r in probing.read_rows(work / "probe_small")[0]]
    if base_prefixes != ours_prefixes:
      print("error: the baseline selected other prefixes than probing_sets", file=sys.stderr)
      return 1
    kept = len(base_prefixes)
    rows.append(
      (
        "baseline probing (prefix set)",
        f"pool {n_pool:,} + train {args.baseline_train:,}",
        n_pool,
        kept,
        secs,
      )
    )
    secs, summary = run_probe("probe_full", None)
    n_train = split_games["train"]
    rows.append(
      ("probing_sets", f"pool {n_pool:,} + train {n_train:,}", n_pool, summary["rows"], secs)
    )

  print("| tool | input | games read | kept / rows | seconds | games/s |")
  print("|---|---|---:|---:|---:|---:|")
  for name, inp, read, kept, secs in rows:
    print(f"| {name} | {inp} | {read:,} | {kept:,} | {secs:.1f} | {read / secs:,.0f} |")
  print()
  print("splits of the full run: " + ", ".join(f"{k} {v:,}" for k, v in split_games.items()))
  print("skipped: " + ", ".join(f"{k} {v:,}" for k, v in m["skipped"].items() if v))
  b = summary["random_legal_baseline"]
  print()
  print("| random-legal baseline (%) | ours | paper |")
  print("|---|---:|---:|")
  for k in ("end", "start"):
    print(f"| {k.capitalize()}-Actual | {b[k]:.1f} | {PAPER_BASELINE[k]} |")
  print()
  print(probing.piece_type_table(summary["piece_type_counts"]))
  print()
  print("probing skip counts: " + json.dumps(summary["skipped"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
