"""Regenerates `atomic_selfplay_uci.txt`: Fairy-Stockfish self-play games under atomic rules.

    python tests/data/make_atomic_selfplay.py PATH/TO/fairy-stockfish [--games 30] [--seed 0]

Not run by the tests (they read the committed output; no engine needed). Each game opens with 4-8
uniformly random legal plies (python-chess `AtomicBoard`, seeded `random.Random`), then the engine
plays both sides at a depth of 5-8 drawn per game (`UCI_Variant atomic`, Threads 1), until
python-chess says the game is over (`is_game_over(claim_draw=True)`), the engine has no move, or
200 plies. Every engine move must be legal for python-chess. One game per line, UCI moves
separated by spaces.
"""

import argparse
import random
import subprocess
import sys
from pathlib import Path

import chess
import chess.variant

OUT = Path(__file__).resolve().parent / "atomic_selfplay_uci.txt"
MAX_PLIES = 200


class Engine:
  """A minimal UCI conversation with one engine process."""

  def __init__(self, path: str):
    self.proc = subprocess.Popen(
      [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    self.send("uci")
    self.wait_for("uciok")
    for name, value in (("UCI_Variant", "atomic"), ("Threads", "1"), ("Hash", "16")):
      self.send(f"setoption name {name} value {value}")
    self.send("isready")
    self.wait_for("readyok")

  def send(self, line: str) -> None:
    self.proc.stdin.write(line + "\n")

  def wait_for(self, prefix: str) -> str:
    for line in self.proc.stdout:
      if line.startswith(prefix):
        return line.strip()
    raise RuntimeError(f"engine exited before {prefix!r}")

  def best_move(self, ucis: list[str], depth: int) -> str | None:
    self.send("position startpos" + (" moves " + " ".join(ucis) if ucis else ""))
    self.send(f"go depth {depth}")
    move = self.wait_for("bestmove").split()[1]
    return None if move in ("(none)", "0000") else move

  def close(self) -> None:
    self.send("quit")
    self.proc.wait(timeout=10)


def play(engine: Engine, rng: random.Random) -> list[str]:
  board, ucis = chess.variant.AtomicBoard(), []
  opening, depth = rng.randint(4, 8), rng.randint(5, 8)
  engine.send("ucinewgame")
  while len(ucis) < MAX_PLIES and not board.is_game_over(claim_draw=True):
    if len(ucis) < opening:
      legal = list(board.legal_moves)
      move = legal[rng.randrange(len(legal))]
    else:
      uci = engine.best_move(ucis, depth)
      if uci is None:
        break
      move = chess.Move.from_uci(uci)
      if move not in board.legal_moves:
        raise RuntimeError(f"engine move {uci} illegal for python-chess in {board.fen()}")
    ucis.append(move.uci())
    board.push(move)
  return ucis


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("engine", help="path to a Fairy-Stockfish binary")
  ap.add_argument("--games", type=int, default=30)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--out", default=str(OUT))
  args = ap.parse_args(argv)
  rng = random.Random(args.seed)
  engine = Engine(args.engine)
  try:
    games = [play(engine, rng) for _ in range(args.games)]
  finally:
    engine.close()
  Path(args.out).write_text("".join(" ".join(g) + "\n" for g in games))
  print(f"{len(games)} games, {sum(map(len, games))} plies -> {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
