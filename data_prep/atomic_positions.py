"""Variant-divergent evaluation positions for the atomic-chess track (Co & Konuganti 2026, sec. 3).

    python -m data_prep.atomic_positions --out runs/atomic/positions.jsonl \
        [--chess-pgn GAMES.pgn.bz2 ...] [--atomic-pgn lichess_atomic.pgn.zst ...] \
        [--selfplay-games 400] [--per-source 100] [--depth 24] [--min-drop 20] [--unfiltered]

Candidates are one position per game, at a ply drawn uniformly in [--min-ply, --max-ply] from a
seeded generator, from two sources (named by the rules their games were played under; `standard`
is read as the old name of `chess`):
  chess     standard chess games (default: the bundled lichess sample)
  atomic    atomic games: a lichess atomic PGN export (`[Variant "Atomic"]`) when given, otherwise
            Fairy-Stockfish self-play at --selfplay-depth after --random-plies random opening
            moves; such positions carry `"synthetic": true`
A candidate must be valid and not over under both variants' rules, and is analysed at --depth by
Stockfish (variant "chess") and Fairy-Stockfish ("atomic"). It is kept iff (the paper's section 3
variant-divergence filter; --unfiltered, the paper's Table 3 control set, keeps every valid
candidate):
  * the atomic-best and chess-best moves differ,
  * the chess-best move is legal under atomic rules,
  * played under atomic rules it loses at least --min-drop Win% points (default 20, MISTAKE),
  * no analysis (either best line, or the chess-best move under atomic rules) is a mate.
Sources are balanced: candidates are drawn until --per-source positions of each are kept. The
paper's unfiltered control (Table 3) is `--sources atomic --unfiltered`.

Output: JSONL, one position per line (FEN, source, the UCI move history from the source game's
start, `moves`, played under `game_variant`, side to move, legal UCI moves and engine best
move/score per variant, keyed "chess" and "atomic", the chess-best move's atomic Win% drop,
engines, depth, the three prompts of the paper's Appendix A), and `OUT.summary.json` with every
count by reason. A progress line after every batch gives, per source, the candidates labelled and
positions kept so far, their rates and the time left (the run's kept rate so far, extrapolated).
Engine analyses go through the `chessjax.atomic.cache` sqlite cache, so a rerun with the same
engines and depth costs nothing.
"""

import argparse
import io
import json
import logging
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import chess
import chess.pgn
import chess.variant

from chessjax.atomic import prompts
from chessjax.atomic.engines import (
  EngineMissingError,
  EnginePool,
  Line,
  Request,
  cache_arg,
  variant_pools,
)
from chessjax.atomic.scoring import clamp_cp, win_percent
from chessjax.files import write_json, write_text
from data_prep import pgn_files

REPO = Path(__file__).resolve().parents[1]
DEFAULT_STANDARD_PGN = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
REASONS = (
  "kept",
  "too_short",
  "invalid",
  "game_over",
  "duplicate",
  "same_best",
  "chess_best_illegal_in_atomic",
  "mate",
  "small_drop",
)


# ------------------------------------------------------------------------------------------------
# Candidate positions


def pgn_games(paths: Sequence, variant: str) -> Iterator[tuple[str, list[chess.Move], str]]:
  """(origin, mainline moves, variant) of each game of `variant` in the PGN files.

  Files are streamed by `data_prep.pgn_files` (plain, .gz, .bz2, .zst). Games of another variant
  or from a set-up position are passed over; a game python-chess could not replay to its end
  keeps only its legal prefix (python-chess stops at the first error).
  """
  for path in paths:
    number = 0
    for texts, _ in pgn_files.iter_game_batches(path, pgn_files.SourceInfo(str(path))):
      for text in texts:
        number += 1
        game = chess.pgn.read_game(io.StringIO(text))
        if game is None:
          continue
        board = game.board()
        if board.uci_variant != variant or board.fen() != type(board)().fen():
          continue
        yield f"{Path(path).name}#{number}", list(game.mainline_moves()), variant


def selfplay_games(
  pool: EnginePool,
  count: int,
  *,
  depth: int,
  random_plies: int,
  max_plies: int,
  seed: int,
) -> Iterator[tuple[str, list[chess.Move], str]]:
  """Atomic games of Fairy-Stockfish against itself after random opening moves (synthetic)."""
  for n in range(count):
    rng = random.Random(f"selfplay|{seed}|{n}")
    board, moves = chess.variant.AtomicBoard(), []
    while len(moves) < max_plies and not board.is_game_over(claim_draw=True):
      if len(moves) < random_plies:
        move = rng.choice(list(board.legal_moves))
      else:
        analysis = pool.analyse(board.fen(), variant="atomic", depth=depth)
        move = chess.Move.from_uci(analysis.best.move)
      board.push(move)
      moves.append(move)
    yield f"selfplay#{n}", moves, "atomic"


def sample_position(moves: Sequence[chess.Move], variant: str, rng, min_ply: int, max_ply: int):
  """(ply, FEN) of a uniformly drawn ply in [min_ply, min(max_ply, len)], or None if too short.
  The position's history is `moves[:ply]`."""
  last = min(max_ply, len(moves))
  if last < min_ply:
    return None
  ply = rng.randint(min_ply, last)
  board = prompts.VARIANT_BOARD[variant]()
  for move in moves[:ply]:
    board.push(move)
  return ply, board.fen()


def check_position(fen: str) -> str | None:
  """None if the position is valid and not over under both variants' rules, else the reason."""
  for variant in ("atomic", "chess"):  # atomic first: the order the rejection counts assume
    board = prompts.board_of(fen, variant)
    if not board.is_valid():
      return "invalid"
    if board.is_game_over(claim_draw=False) or not any(board.legal_moves):
      return "game_over"
  return None


# ------------------------------------------------------------------------------------------------
# Labelling


def _line_json(line: Line) -> dict:
  return {"move": line.move, "cp": line.cp, "mate": line.mate, "pv": list(line.pv)}


def label_batch(
  candidates: Sequence[dict], pools: dict, *, depth: int, min_drop: float, unfiltered: bool
) -> list[tuple[str, dict]]:
  """(reason, record) of each candidate; reason `kept` for positions that pass the filter."""
  best = {
    variant: pools[variant].analyse_many([Request(c["fen"], variant, depth) for c in candidates])
    for variant in prompts.VARIANTS
  }
  legal = [{v: prompts.legal_moves(c["fen"], v) for v in prompts.VARIANTS} for c in candidates]
  needs_cross = [
    i
    for i, c in enumerate(candidates)
    if best["chess"][i].best.move in legal[i]["atomic"]
    and (unfiltered or best["chess"][i].best.move != best["atomic"][i].best.move)
  ]
  cross = dict(
    zip(
      needs_cross,
      pools["atomic"].analyse_many(
        [
          Request(candidates[i]["fen"], "atomic", depth, root_moves=(best["chess"][i].best.move,))
          for i in needs_cross
        ]
      ),
      strict=True,
    )
  )
  out = []
  for i, c in enumerate(candidates):
    std, atm = best["chess"][i].best, best["atomic"][i].best
    cross_line = cross[i].best if i in cross else None
    drop = None
    if cross_line is not None:
      drop = win_percent(clamp_cp(atm.cp, atm.mate)) - win_percent(
        clamp_cp(cross_line.cp, cross_line.mate)
      )
    if unfiltered:
      reason = "kept"
    elif std.move == atm.move:
      reason = "same_best"
    elif cross_line is None:
      reason = "chess_best_illegal_in_atomic"
    elif any(line.mate is not None for line in (std, atm, cross_line)):
      reason = "mate"
    elif drop < min_drop:
      reason = "small_drop"
    else:
      reason = "kept"
    board = prompts.board_of(c["fen"], "chess")
    record = {
      **c,
      "side_to_move": "white" if board.turn == chess.WHITE else "black",
      "legal_moves": legal[i],
      "best": {"chess": _line_json(std), "atomic": _line_json(atm)},
      "chess_best_under_atomic": None if cross_line is None else _line_json(cross_line),
      "chess_best_atomic_win_drop": drop,
      "engines": {
        v: {"name": best[v][i].engine, "version": best[v][i].version} for v in prompts.VARIANTS
      },
      "depth": depth,
      "prompts": {k: prompts.render(k, c["fen"]) for k in prompts.CONDITIONS},
    }
    out.append((reason, record))
  return out


# ------------------------------------------------------------------------------------------------
# Command line


def parse_args(argv=None) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("--out", required=True, help="output JSONL path")
  p.add_argument(
    "--chess-pgn",
    "--standard-pgn",
    dest="chess_pgn",
    nargs="*",
    default=None,
    help="standard chess PGN files (--standard-pgn: the old spelling)",
  )
  p.add_argument("--atomic-pgn", nargs="*", default=[], help="atomic PGN files (lichess export)")
  p.add_argument("--selfplay-games", type=int, default=400, help="synthetic atomic games, at most")
  p.add_argument("--selfplay-depth", type=int, default=6)
  p.add_argument("--random-plies", type=int, default=6, help="random opening plies of self-play")
  p.add_argument("--per-source", type=int, default=100, help="positions kept per source")
  p.add_argument("--depth", type=int, default=24, help="analysis depth (paper: 24)")
  p.add_argument("--min-drop", type=float, default=20.0, help="atomic Win%% drop (MISTAKE: 20)")
  p.add_argument("--min-ply", type=int, default=10)
  p.add_argument("--max-ply", type=int, default=60)
  p.add_argument("--unfiltered", action="store_true", help="keep every valid candidate (Table 3)")
  p.add_argument(
    "--sources",
    nargs="+",
    choices=("chess", "standard", "atomic"),
    default=["chess", "atomic"],
    help="position sources ('standard' is the old name of 'chess')",
  )
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--workers", type=int, default=1, help="engine processes per engine")
  p.add_argument("--batch", type=int, default=8, help="candidates analysed per round")
  p.add_argument("--cache", default=None, help="engine cache path, or 'none'")
  args = p.parse_args(argv)
  args.sources = list(dict.fromkeys(prompts.variant_of(s) for s in args.sources))
  return args


def _source_games(args, source: str, pools: dict):
  if source == "chess":
    return pgn_games(args.chess_pgn or [DEFAULT_STANDARD_PGN], "chess")
  if args.atomic_pgn:
    return pgn_games(args.atomic_pgn, "atomic")
  return selfplay_games(
    pools["atomic"],
    args.selfplay_games,
    depth=args.selfplay_depth,
    random_plies=args.random_plies,
    max_plies=args.max_ply + 1,
    seed=args.seed,
  )


def collect(args, pools: dict) -> tuple[list[dict], dict]:
  """Kept positions of both sources and the counts by source and reason."""
  kept, counts, seen = [], {}, set()
  progress = Progress(args.sources, args.per_source)
  for source in args.sources:
    counts[source] = Counter({r: 0 for r in REASONS})
    mine, pending = [], []
    rng = random.Random(f"{args.seed}|{source}")
    synthetic = source == "atomic" and not args.atomic_pgn
    games = _source_games(args, source, pools)
    for origin, moves, variant in games:
      if len(mine) >= args.per_source:
        break
      sampled = sample_position(moves, variant, rng, args.min_ply, args.max_ply)
      if sampled is None:
        counts[source]["too_short"] += 1
        continue
      ply, fen = sampled
      reason = "duplicate" if fen in seen else check_position(fen)
      if reason:
        counts[source][reason] += 1
        continue
      seen.add(fen)
      pending.append(
        {
          "fen": fen,
          "source": source,
          "synthetic": synthetic,
          "origin": origin,
          "ply": ply,
          "moves": [m.uci() for m in moves[:ply]],
          "game_variant": variant,
        }
      )
      if len(pending) >= args.batch:
        _label(pending, pools, args, counts[source], mine)
        pending = []
        progress.update(source, counts[source], len(mine))
    if pending and len(mine) < args.per_source:
      _label(pending, pools, args, counts[source], mine)
    progress.update(source, counts[source], len(mine), done=True)
    if len(mine) < args.per_source:
      logging.warning(
        "source %s: only %d of %d positions kept (games exhausted)",
        source,
        len(mine),
        args.per_source,
      )
    kept += mine
  return kept, {s: dict(c) for s, c in counts.items()}


def _label(pending, pools, args, counts: Counter, mine: list) -> None:
  for reason, record in label_batch(
    pending, pools, depth=args.depth, min_drop=args.min_drop, unfiltered=args.unfiltered
  ):
    if reason == "kept" and len(mine) >= args.per_source:
      break
    counts[reason] += 1
    if reason == "kept":
      mine.append({"id": f"{record['source']}-{len(mine):04d}", **record})
  logging.debug("%s: %s", pending[0]["source"], dict(counts))


class Progress:
  """Progress lines: per source, candidates labelled and positions kept, with rates and the time
  left. The time left extrapolates the kept-positions rate of the run so far (all sources) to the
  positions still to keep; it is "?" until a position is kept."""

  def __init__(self, sources: Sequence[str], per_source: int, *, clock=time.monotonic, emit=None):
    self.sources, self.per_source, self.clock = list(sources), per_source, clock
    self.emit = emit or (lambda line: logging.info("%s", line))
    self.start = clock()
    self.kept_before = 0  # kept by the sources already finished

  def line(self, source: str, counts: Counter, kept: int) -> str:
    elapsed = max(self.clock() - self.start, 1e-9)
    labelled = sum(v for k, v in counts.items() if k in LABEL_REASONS)
    kept_total = self.kept_before + kept
    remaining_sources = len(self.sources) - self.sources.index(source) - 1
    to_keep = (self.per_source - kept) + remaining_sources * self.per_source
    if kept_total:
      left = _duration(to_keep * elapsed / kept_total)
    else:
      left = "?"
    return (
      f"{source}: kept {kept}/{self.per_source}, {labelled} candidates labelled "
      f"({labelled / elapsed * 60:.1f}/min, {kept_total / elapsed * 3600:.0f} kept/h), "
      f"elapsed {_duration(elapsed)}, about {left} left"
    )

  def update(self, source: str, counts: Counter, kept: int, *, done: bool = False) -> None:
    self.emit(self.line(source, counts, kept))
    if done:
      self.kept_before += kept


LABEL_REASONS = ("kept", "same_best", "chess_best_illegal_in_atomic", "mate", "small_drop")


def _duration(seconds: float) -> str:
  seconds = int(round(seconds))
  if seconds < 60:
    return f"{seconds}s"
  if seconds < 3600:
    return f"{seconds // 60}m{seconds % 60:02d}s"
  return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def main(argv=None) -> int:
  logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
  args = parse_args(argv)
  start = time.perf_counter()
  try:
    with variant_pools(
      prompts.VARIANTS, workers=args.workers, cache_path=cache_arg(args.cache)
    ) as pools:
      kept, counts = collect(args, pools)
      summary = {
        "positions": len(kept),
        "counts": counts,
        "engines": {v: {"name": p.info.name, "version": p.info.version} for v, p in pools.items()},
        "cache": {v: p.stats for v, p in pools.items()},
        "seconds": round(time.perf_counter() - start, 1),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
      }
  except EngineMissingError as e:
    print(e, file=sys.stderr)
    return 1
  out = Path(args.out)
  out.parent.mkdir(parents=True, exist_ok=True)
  write_text(out, "".join(json.dumps(r) + "\n" for r in kept))
  write_json(out.with_name(out.name + ".summary.json"), summary)
  for source, c in counts.items():
    print(
      f"{source}: kept {c['kept']}; "
      + ", ".join(f"{k} {v}" for k, v in c.items() if k != "kept" and v)
    )
  print(f"wrote {len(kept)} positions to {out} (summary: {out.name}.summary.json)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
