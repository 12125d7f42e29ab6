"""Board-state probing sets of the blindfolded chess LM (Toshniwal et al. 2022, sections 3.2-3.4,
section 4 "Data", appendix D, Table 11).

    python -m data_prep.probing_sets --pool POOL --train TRAIN [TRAIN ...] --out DIR \\
        [--count 1000] [--min-len 51] [--max-len 100] [--seed 42]

POOL and TRAIN are UCI text files (one game per line, moves separated by spaces) or prepared data
sets (`data_prep.lm_data` output; POOL reads split `probing_pool`, TRAIN split `train`, see
`--pool-split`, `--train-split`). Writes the row-aligned `DIR/end.jsonl` and `DIR/start.jsonl`
(the four tasks share their prefixes) and `DIR/summary.json` (counts, skip reasons, random-legal
baselines, piece-type counts).

Selection (so that the same pool and training games give the authors' rows):
1. The exclusion set is every prefix (the whole game included) of every TRAIN game.
2. `random.seed(seed)`; walk the pool in file order; skip a game with `plies <= min_len`; draw
   `L = random.randint(min_len, min(plies - 1, max_len))` once per such game, before any other
   check; skip it if its L-move prefix is excluded or already used by a kept row (no redraw).
3. Keep it if the actual next move (move L) is a non-pawn, non-castling move, at least 2 squares
   hold a non-pawn piece with a legal non-castling move, and at least 2 piece types have one.
   Stop at `count`.
4. `random.seed(seed)` again; per kept prefix in order: `other_starting_square =
   random.choice(sorted(other from-squares))` (by square name), then `other_piece_type =
   random.choice(sorted(other movable types))` (by letter).
Legal sets hold only non-pawn, non-castling legal moves, in python-chess `legal_moves` order (so a
king's castling square is never a legal answer). A game that does not replay is skipped and
counted (`illegal_move`); it has consumed its draw.
"""

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import chess
import numpy as np
from array_record.python.array_record_module import ArrayRecordReader

from chessjax.data import records, shards, source
from chessjax.files import write_json, write_text
from chessjax.lm import probing, tokens

SKIP_REASONS = ("too_short", "excluded", "already_used", "illegal_move", "next_move", "too_few")


def read_uci_file(path) -> Iterator[list[str]]:
  """Games of a UCI text file in file order (one per line; blank lines are not games)."""
  with open(path, encoding="utf-8") as f:
    for line in f:
      moves = line.split()
      if moves:
        yield moves


def iter_stored_moves(path, split: str, chunk: int = 4096) -> Iterator[np.ndarray]:
  """Move ids int32[T+1] of every game of a data set split in stored order, read sequentially a
  chunk of records at a time (random access per record costs ~60x more) without decoding the
  state labels."""
  paths = source.shard_paths(path, split)
  for shard in paths:
    reader = ArrayRecordReader(shard)
    try:
      n = reader.num_records()
      for lo in range(0, n, chunk):
        for rec in reader.read(lo, min(lo + chunk, n)):
          yield records.decode_moves(rec)
    finally:
      reader.close()


def read_game_list(path, split: str, limit: int | None = None) -> Iterator[list[str]]:
  """UCI move lists from a UCI text file or one split of a prepared data set, in stored order."""
  path = Path(path)
  if path.is_dir():
    if not (path / shards.MANIFEST).exists():
      raise FileNotFoundError(f"{path} is a directory but not a prepared data set (no manifest)")
    games = (tokens.ucis_of_moves(m) for m in iter_stored_moves(path, split))
  elif path.is_file():
    games = read_uci_file(path)
  else:
    raise FileNotFoundError(f"no such file or data set: {path}")
  for i, g in enumerate(games):
    if limit is not None and i >= limit:
      return
    yield g


def draw_prefix_lengths(
  pool: Sequence[Sequence[str]], *, seed: int, min_len: int, max_len: int
) -> list[tuple[int, int]]:
  """Step 2's draws: (pool index, L) for every game with more than `min_len` plies, in pool order,
  from `random.Random(seed)` (the same sequence as `random.seed(seed)` + `random.randint`)."""
  rng = random.Random(seed)
  out = []
  for i, game in enumerate(pool):
    plies = len(game)
    if plies <= min_len:
      continue
    out.append((i, rng.randint(min_len, min(plies - 1, max_len))))
  return out


def excluded_prefixes(candidates: Sequence[str], train_games, min_len: int) -> set[str]:
  """The candidate prefixes (space-joined UCI) that are a prefix of, or equal to, some TRAIN game.

  Every candidate has at least `min_len` moves, so a training game can only match candidates that
  share its first `min_len` moves: one dictionary look-up per training game.
  """
  by_head: dict[str, list[str]] = {}
  for c in candidates:
    by_head.setdefault(" ".join(c.split(" ")[:min_len]), []).append(c)
  hit: set[str] = set()
  for game in train_games:
    if len(game) < min_len:
      continue
    head = " ".join(game[:min_len])
    if head in by_head:
      full = " ".join(game)
      for c in by_head[head]:
        if full == c or full.startswith(c + " "):
          hit.add(c)
  return hit


def _replay(game: Sequence[str], upto: int) -> tuple[chess.Board, list[str]] | None:
  """The board after `game[:upto]` and the oracle prefix tokens, or None if a move is illegal."""
  board = chess.Board()
  oracle = []
  for uci in game[:upto]:
    try:
      move = chess.Move.from_uci(uci)
    except (chess.InvalidMoveError, ValueError):
      return None
    if not move or not board.is_legal(move):
      return None
    if board.is_castling(move):
      oracle.append(uci)
    else:
      oracle.append(chess.piece_symbol(board.piece_type_at(move.from_square)).upper() + uci)
    board.push(move)
  return board, oracle


def movable_pieces(board: chess.Board) -> dict[int, list[int]]:
  """from-square -> legal to-squares (python-chess `legal_moves` order, dict in first-appearance
  order) of every non-pawn piece's non-castling legal moves."""
  out: dict[int, list[int]] = {}
  for m in board.legal_moves:
    if board.piece_type_at(m.from_square) == chess.PAWN or board.is_castling(m):
      continue
    out.setdefault(m.from_square, []).append(m.to_square)
  return out


def _letter(board: chess.Board, square: int) -> str:
  return chess.piece_symbol(board.piece_type_at(square)).upper()


def select(
  pool: Sequence[Sequence[str]],
  train_games,
  *,
  count: int = 1000,
  min_len: int = 51,
  max_len: int = 100,
  seed: int = 42,
) -> tuple[list[dict], list[dict], Counter]:
  """Steps 1-4 of the module docstring. Returns (end rows, start rows, skip counts)."""
  if min_len < 1 or max_len < min_len:
    raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
  skipped: Counter = Counter()
  draws = draw_prefix_lengths(pool, seed=seed, min_len=min_len, max_len=max_len)
  prefixes = [" ".join(pool[i][:L]) for i, L in draws]
  excluded = excluded_prefixes(prefixes, train_games, min_len)
  kept: list[tuple[list[str], list[str], chess.Board, chess.Move, dict]] = []
  used: set[str] = set()
  walked = len(pool)  # pool games walked before `count` rows were kept
  for (i, L), prefix in zip(draws, prefixes, strict=True):
    if len(kept) >= count:
      walked = i
      break
    if prefix in excluded:
      skipped["excluded"] += 1
      continue
    if prefix in used:
      skipped["already_used"] += 1
      continue
    game = pool[i]
    replayed = _replay(game, L)
    nxt = None
    if replayed is not None:
      try:
        nxt = chess.Move.from_uci(game[L])
      except (chess.InvalidMoveError, ValueError):
        nxt = None
    if replayed is None or nxt is None or not replayed[0].is_legal(nxt):
      skipped["illegal_move"] += 1
      continue
    board, oracle = replayed
    if board.piece_type_at(nxt.from_square) == chess.PAWN or board.is_castling(nxt):
      skipped["next_move"] += 1
      continue
    movable = movable_pieces(board)
    types = {board.piece_type_at(s) for s in movable}
    if len(movable) < 2 or len(types) < 2:
      skipped["too_few"] += 1
      continue
    used.add(prefix)
    kept.append((list(game[:L]), oracle, board, nxt, movable))
  drawn_walked = sum(1 for i, _ in draws if i < walked)
  skipped["too_short"] = walked - drawn_walked
  rng = random.Random(seed)
  end_rows, start_rows = [], []
  for moves, oracle, board, nxt, movable in kept:
    start, piece = nxt.from_square, _letter(board, nxt.from_square)
    names = {s: chess.SQUARE_NAMES[s] for s in movable}
    other_sq = rng.choice(sorted(names[s] for s in movable if s != start))
    other_type = rng.choice(sorted({_letter(board, s) for s in movable} - {piece}))
    other_sq_i = chess.parse_square(other_sq)
    common = {"prefix": " ".join(moves), "oracle_prefix": " ".join(oracle)}
    end_rows.append(
      {
        **common,
        "piece_type": piece,
        "starting_square": names[start],
        "ending_square": chess.SQUARE_NAMES[nxt.to_square],
        "legal_ending_square": [chess.SQUARE_NAMES[t] for t in movable[start]],
        "other_piece_type": _letter(board, other_sq_i),
        "other_starting_square": other_sq,
        "other_ending_square": [chess.SQUARE_NAMES[t] for t in movable[other_sq_i]],
      }
    )
    start_rows.append(
      {
        **common,
        "piece_type": piece,
        "starting_square": names[start],
        "legal_starting_square": [names[s] for s in movable if _letter(board, s) == piece],
        "other_piece_type": other_type,
        "other_starting_square": [names[s] for s in movable if _letter(board, s) == other_type],
      }
    )
  return end_rows, start_rows, skipped


def _jsonl(rows: list[dict]) -> str:
  return "".join(json.dumps(r) + "\n" for r in rows)


def parse_args(argv=None) -> argparse.Namespace:
  ap = argparse.ArgumentParser(
    prog="python -m data_prep.probing_sets", description=__doc__.split("\n\n")[0]
  )
  ap.add_argument("--pool", required=True, help="UCI text file or prepared data set")
  ap.add_argument("--train", nargs="+", required=True, help="UCI text files or data sets")
  ap.add_argument("--out", required=True, help="output directory")
  ap.add_argument("--count", type=int, default=1000)
  ap.add_argument("--min-len", type=int, default=51)
  ap.add_argument("--max-len", type=int, default=100)
  ap.add_argument("--seed", type=int, default=42)
  ap.add_argument("--pool-split", default="probing_pool", help="split read from a POOL data set")
  ap.add_argument("--train-split", default="train", help="split read from a TRAIN data set")
  ap.add_argument("--train-limit", type=int, default=None, help="first N games of each TRAIN")
  args = ap.parse_args(argv)
  if args.count < 1 or args.min_len < 1 or args.max_len < args.min_len:
    ap.error("need --count >= 1 and 1 <= --min-len <= --max-len")
  for p in [args.pool, *args.train]:
    if not Path(p).exists():
      ap.error(f"no such file or data set: {p}")
  return args


def run(args: argparse.Namespace) -> dict:
  """Builds and writes the probing sets; returns the summary (also written to summary.json)."""
  t0 = time.perf_counter()
  pool = list(read_game_list(args.pool, args.pool_split))
  if not pool:
    raise ValueError(f"the pool {args.pool} holds no games")

  def train_games():
    for t in args.train:
      yield from read_game_list(t, args.train_split, args.train_limit)

  end_rows, start_rows, skipped = select(
    pool,
    train_games(),
    count=args.count,
    min_len=args.min_len,
    max_len=args.max_len,
    seed=args.seed,
  )
  out = Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  write_text(out / "end.jsonl", _jsonl(end_rows))
  write_text(out / "start.jsonl", _jsonl(start_rows))
  summary = {
    "rows": len(end_rows),
    "requested": args.count,
    "pool_games": len(pool),
    "skipped": {r: skipped.get(r, 0) for r in SKIP_REASONS},
    "random_legal_baseline": {
      "end": probing.random_legal_baseline(end_rows, "end"),
      "start": probing.random_legal_baseline(start_rows, "start"),
    },
    "piece_type_counts": probing.piece_type_counts(end_rows, start_rows),
    "options": {
      "count": args.count,
      "min_len": args.min_len,
      "max_len": args.max_len,
      "seed": args.seed,
      "pool": str(args.pool),
      "train": [str(t) for t in args.train],
      "train_limit": args.train_limit,
    },
    "elapsed_s": round(time.perf_counter() - t0, 3),
  }
  write_json(out / "summary.json", summary)
  return summary


def main(argv=None) -> int:
  args = parse_args(argv)
  try:
    summary = run(args)
  except (ValueError, FileNotFoundError, KeyError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  skipped = ", ".join(f"{k} {v:,}" for k, v in summary["skipped"].items() if v) or "none"
  if summary["rows"] < args.count:
    print(
      f"warning: only {summary['rows']} eligible prefixes in the pool "
      f"({args.count} requested); wrote those",
      file=sys.stderr,
    )
  if summary["skipped"]["illegal_move"]:
    print(
      f"warning: {summary['skipped']['illegal_move']} pool game(s) do not replay legally; skipped",
      file=sys.stderr,
    )
  b = summary["random_legal_baseline"]
  print(
    f"wrote {summary['rows']} rows to {args.out}/end.jsonl, start.jsonl "
    f"from {summary['pool_games']:,} pool games in {summary['elapsed_s']:.2f}s"
  )
  print(f"skipped: {skipped}")
  print(f"random-legal baseline: End {b['end']:.1f}, Start {b['start']:.1f}")
  print(probing.piece_type_table(summary["piece_type_counts"]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
