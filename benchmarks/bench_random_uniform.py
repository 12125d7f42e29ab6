"""Random-uniform generation speed: `data_prep.random_uniform` against the released algorithm.

    python -m benchmarks.bench_random_uniform [--games 200] [--seed 0] [--workers 1,2] [--runs 1]

Contenders, the same number of kept games each, timed in one run and interleaved over `--runs`:
  * yardstick: the released generator's algorithm re-expressed plainly (one `random.Random(seed)`,
    `board.is_game_over(claim_draw=True)` before every ply, `list(board.legal_moves)`, a 64-square
    `piece_at` loop per position, `board.result(claim_draw=True)`, one JSON line per kept game);
  * ours, `--compat reference`: the same games (checked move for move), incremental game-end test,
    bitboard snapshots, compressed ArrayRecord shards;
  * ours, default mode with each worker count of `--workers`.
Wall seconds are what a user waits; CPU seconds (this process and its workers) show the work done,
which matters on a shared machine where other jobs take cores: the table reports both and the load
average around the run.
"""

import argparse
import json
import os
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

import chess

from chessjax.data import read_games
from data_prep import random_uniform

SQUARES_A8_TO_H1 = [chess.square(f, r) for r in range(7, -1, -1) for f in range(8)]
START = 20480
PROMO = {None: 0, chess.QUEEN: 1, chess.ROOK: 2, chess.BISHOP: 3, chess.KNIGHT: 4}


def _pack_move(move):
  return (move.from_square * 64 + move.to_square) * 5 + PROMO[move.promotion]


def _encode_state(board):
  s = [0] * 75
  for i, sq in enumerate(SQUARES_A8_TO_H1):
    p = board.piece_at(sq)
    if p is not None:
      s[i] = p.piece_type if p.color == chess.WHITE else p.piece_type + 6
  s[64] = 0 if board.turn == chess.WHITE else 1
  s[65] = int(board.has_kingside_castling_rights(chess.WHITE))
  s[66] = int(board.has_queenside_castling_rights(chess.WHITE))
  s[67] = int(board.has_kingside_castling_rights(chess.BLACK))
  s[68] = int(board.has_queenside_castling_rights(chess.BLACK))
  ep = board.ep_square
  if ep is not None and chess.square_rank(ep) in (2, 5):
    s[69] = chess.square_file(ep) + 1
    s[70] = 1 if chess.square_rank(ep) == 2 else 2
  hm = max(0, min(board.halfmove_clock, 65535))
  fm = max(0, min(board.fullmove_number, 65535))
  s[71], s[72], s[73], s[74] = hm >> 8, hm & 255, fm >> 8, fm & 255
  return s


def yardstick(out_path: Path, games: int, seed: int, min_plies: int = 20) -> list[list[int]]:
  """The released random-uniform generator's loop; returns the kept games' move ids."""
  rng = random.Random(seed)
  parsed = kept = 0
  kept_moves = []
  with open(out_path, "w") as out:
    while kept < games:
      board = chess.Board()
      moves, states = [START], [_encode_state(board)]
      while not board.is_game_over(claim_draw=True):
        legal = list(board.legal_moves)
        move = legal[rng.randrange(len(legal))]
        moves.append(_pack_move(move))
        board.push(move)
        states.append(_encode_state(board))
      plies = len(moves) - 1
      example = {
        "example_id": f"cwm_random_{parsed:05d}",
        "moves": moves,
        "states": states,
        "steps": len(moves),
        "plies": plies,
        "fullmoves": (plies + 1) // 2,
        "result": board.result(claim_draw=True),
      }
      parsed += 1
      if plies < min_plies:
        continue
      out.write(json.dumps(example) + "\n")
      kept += 1
      kept_moves.append(moves)
  return kept_moves


def _cpu_seconds() -> float:
  # Pool workers count once they have been joined, which `generate` does before returning.
  usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
  return sum(u.ru_utime + u.ru_stime for u in usage)


def _timed(fn):
  wall, cpu = time.perf_counter(), _cpu_seconds()
  value = fn()
  return time.perf_counter() - wall, _cpu_seconds() - cpu, value


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--games", type=int, default=200)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--workers", default="1,2", help="comma-separated worker counts (default mode)")
  ap.add_argument("--runs", type=int, default=1, help="interleaved repetitions; medians reported")
  args = ap.parse_args(argv)
  worker_counts = [int(w) for w in args.workers.split(",")]
  if args.games < 1 or args.runs < 1 or min(worker_counts) < 1:
    ap.error("--games, --runs and every worker count must be >= 1")

  names = ["yardstick (released algorithm)", "ours --compat reference"]
  names += [f"ours default, {w} worker{'s' * (w > 1)}" for w in worker_counts]
  wall = {n: [] for n in names}
  cpu = {n: [] for n in names}
  plies = {}
  load_before = os.getloadavg()
  with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    for _ in range(args.runs):
      w, c, ref_moves = _timed(lambda: yardstick(tmp / "yardstick.jsonl", args.games, args.seed))
      wall[names[0]].append(w)
      cpu[names[0]].append(c)
      plies[names[0]] = sum(len(m) - 1 for m in ref_moves)
      contenders = [(names[1], "reference", 1)]
      contenders += [(n, "default", k) for n, k in zip(names[2:], worker_counts, strict=True)]
      for name, compat, workers in contenders:
        out = tmp / name.replace(" ", "_").replace(",", "")
        w, c, manifest = _timed(
          lambda compat=compat, workers=workers, out=out: random_uniform.generate(
            out,
            games=args.games,
            seed=args.seed,
            compat=compat,
            workers=workers,
            overwrite=True,
            progress=False,
          )
        )
        wall[name].append(w)
        cpu[name].append(c)
        plies[name] = manifest["plies"]["total"]
        if compat == "reference":
          ours = [g["moves"].tolist() for g in read_games(out, "test")]
          if ours != ref_moves:
            raise AssertionError("reference mode and the yardstick played different games")
  load_after = os.getloadavg()

  base = args.games / statistics.median(wall[names[0]])
  rows = [
    f"{args.games} kept games per contender, seed {args.seed}, median of {args.runs} run(s); "
    f"{os.cpu_count()} CPUs, load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
    "reference mode played the yardstick's games move for move",
    "",
    "| contender | plies | wall s | games/s | x yardstick | CPU s | games/CPU-s |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ]
  for name in names:
    w, c = statistics.median(wall[name]), statistics.median(cpu[name])
    rate = args.games / w
    rows.append(
      f"| {name} | {plies[name]:,} | {w:.2f} | {rate:.1f} | {rate / base:.2f} | {c:.2f} | "
      f"{args.games / c:.1f} |"
    )
  print("\n".join(rows))
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
