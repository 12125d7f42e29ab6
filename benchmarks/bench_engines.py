"""Engine analysis throughput: positions per second per core, cold and warm cache.

    python -m benchmarks.bench_engines [--positions 20] [--seed 0] [--depths 12 16 20]
        [--engines stockfish fairy-stockfish]

Positions: `--positions` positions drawn deterministically from `--seed` out of the bundled games
(data/lichess_2013-01_sample5000.pgn.bz2), one per sampled game at a ply between 10 and 60.
Stockfish analyses them under standard rules; Fairy-Stockfish analyses the same FENs under atomic
rules, skipping those that are invalid or over in atomic chess. Each (engine, depth) runs in a
pool with one worker (one engine process, Threads=1, so rates are per core) and a fresh temporary
cache ("cold": every position searched), then in a second pool on that cache ("warm": every
position a cache hit, no engine started). CPU s is the engine process's CPU time (from
getrusage of waited-for children), which on a shared machine is steadier than wall time. Prints a
Markdown table.
"""

import argparse
import bz2
import os
import random
import resource
import tempfile
import time
from pathlib import Path

import chess
import chess.pgn
import chess.variant

from chessjax.atomic.cache import AnalysisCache
from chessjax.atomic.engines import EnginePool, Request

REPO = Path(__file__).resolve().parents[1]
SAMPLE_PGN = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
VARIANT = {"stockfish": "chess", "fairy-stockfish": "atomic"}


def sample_fens(n: int, seed: int, games_read: int = 1000) -> list[str]:
  """`n` FENs, each from a different game among the first `games_read`, at plies 10..60."""
  games = []
  with bz2.open(SAMPLE_PGN, "rt", encoding="utf-8") as f:
    while len(games) < games_read:
      game = chess.pgn.read_game(f)
      if game is None:
        break
      moves = list(game.mainline_moves())
      if len(moves) > 10:
        games.append(moves)
  rng = random.Random(seed)
  fens = []
  for moves in rng.sample(games, n):
    board = chess.Board()
    for move in moves[: rng.randint(10, min(60, len(moves) - 1))]:
      board.push(move)
    fens.append(board.fen())
  return fens


def _children_cpu() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def measure(kind: str, requests: list[Request], cache_path: Path) -> dict:
  """Cold then warm `analyse_many` over `requests`; wall and engine CPU seconds."""
  cpu = _children_cpu()
  with AnalysisCache(cache_path) as cache, EnginePool(kind, workers=1, cache=cache) as pool:
    start = time.perf_counter()
    cold = pool.analyse_many(requests)
    cold_s = time.perf_counter() - start
    name, misses = pool.info.name, pool.stats["misses"]
  cold_cpu = _children_cpu() - cpu  # the pool has closed (and reaped) its engine
  with AnalysisCache(cache_path) as cache, EnginePool(kind, workers=1, cache=cache) as pool:
    start = time.perf_counter()
    warm = pool.analyse_many(requests)
    warm_s = time.perf_counter() - start
    hits = pool.stats["hits"]
  if [a.lines for a in warm] != [a.lines for a in cold] or hits != len(requests):
    raise AssertionError(f"{name}: the warm run did not return the cold run's analyses")
  return {
    "name": name,
    "cold_s": cold_s,
    "cold_cpu": cold_cpu,
    "misses": misses,
    "warm_s": warm_s,
    "hits": hits,
  }


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--positions", type=int, default=20)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--depths", type=int, nargs="+", default=[12, 16, 20])
  ap.add_argument("--engines", nargs="+", default=list(VARIANT), choices=list(VARIANT))
  args = ap.parse_args(argv)
  if args.positions < 1 or min(args.depths) < 1:
    ap.error("--positions and every depth must be >= 1")

  fens = sample_fens(args.positions, args.seed)
  playable = {
    "chess": fens,
    "atomic": [
      f for f in fens if (b := chess.variant.AtomicBoard(f)).is_valid() and not b.is_game_over()
    ],
  }
  rows = []
  load_before = os.getloadavg()
  with tempfile.TemporaryDirectory() as tmp:
    for kind in args.engines:
      variant = VARIANT[kind]
      for depth in args.depths:
        requests = [Request(f, variant, depth) for f in playable[variant]]
        r = measure(kind, requests, Path(tmp) / f"{kind}-{depth}.sqlite")
        n = len(requests)
        rows.append(
          f"| {r['name']} | {variant} | {depth} | {n} | {r['cold_s']:.2f} | "
          f"{n / r['cold_s']:.2f} | {r['cold_cpu']:.2f} | {n / r['cold_cpu']:.2f} | "
          f"{r['warm_s'] * 1e3:.1f} | {n / r['warm_s']:,.0f} |"
        )
  load_after = os.getloadavg()
  header = [
    f"{args.positions} positions (seed {args.seed}; {len(playable['atomic'])} valid and not over "
    f"in atomic), 1 worker = 1 engine process, Threads=1, Hash 16 MB; {os.cpu_count()} CPUs, "
    f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after",
    "",
    "| engine | rules | depth | positions | cold wall s | cold pos/s | engine CPU s "
    "| pos/CPU-s | warm wall ms | warm pos/s |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  print("\n".join(header + rows))
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
