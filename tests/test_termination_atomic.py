"""`data_prep.termination.GameEnd` under atomic rules equals python-chess's
`AtomicBoard.outcome(claim_draw=True)` at every ply (explosions, variant wins, atomic insufficient
material)."""

import random

import chess.variant
import pytest
from termination_walks import ATOMIC_TERMINATIONS, Stats, quiet, repeating, uniform, walk

# Atomic positions near the rules' edges: clocks at 95..149 with mating material, connected
# kings, atomic insufficient material (opposite-coloured bishops, bare king), a king already
# exploded (a variant win for the side to move can only be set up), pseudo-legal en passant.
ATOMIC_CRAFTED = [
  "8/8/4k3/8/3n4/3K4/6Q1/8 w - - 95 120",
  "8/8/4k3/8/3n4/3K4/6Q1/8 b - - 97 120",
  "8/2k5/8/2pP4/2P5/3K4/8/8 w - - 140 150",
  "k7/8/8/8/8/1q6/P7/K7 w - - 99 80",  # Clock 99, every legal move zeroes it.
  "8/8/8/3kK3/8/8/8/R6r w - - 98 90",  # Kings connected: the rooks give no check.
  "r3k2r/pppq1ppp/8/8/8/8/PPPQ1PPP/R3K2R b KQkq - 6 20",
  "4k3/8/8/8/3p4/8/4P3/4K3 w - - 0 1",
  "8/8/8/8/R4p1k/8/4P3/K7 w - - 0 1",
  "8/8/4k3/2b5/8/3K4/4B3/8 w - - 30 60",  # Bishops on opposite colours: insufficient.
  "8/8/4k3/2b5/8/3K4/3B4/8 w - - 30 60",  # Same colour: they can still explode each other.
  "8/8/4k3/8/8/3K4/4N3/8 w - - 0 1",  # Knight vs bare king: insufficient.
  "8/8/8/8/8/8/8/K7 w - - 0 1",  # Black's king is gone, white to move: variant win.
  "3R4/8/8/3K4/8/Q7/2k5/4Q3 b - - 6 122",  # Stalemate (from a random game).
  "7R/4Q3/8/3K4/8/Q7/4k3/8 b - - 2 120",  # Four plies before it.
]


def _atomic_walks(stats, *, random_games, long_walks, crafted_repeats):
  rng = random.Random(54321)
  for seed in random_games:
    board = chess.variant.AtomicBoard()
    walk(stats, board, uniform(random.Random(seed)), max_plies=2000, stop_at_end=True)
  for i in long_walks:
    choose = (repeating, quiet, uniform)[i % 3](random.Random(2000 + i))
    walk(stats, chess.variant.AtomicBoard(), choose, max_plies=260, stop_at_end=False)
  for fen in ATOMIC_CRAFTED:
    for j in range(crafted_repeats):
      choose = (repeating, quiet, uniform)[j % 3](rng)
      walk(stats, chess.variant.AtomicBoard(fen), choose, max_plies=220, stop_at_end=False)


# The quick test's random games and long walks; the slow test walks the next ones (seeds), so
# `make test` checks every walk once.
QUICK_GAMES, QUICK_WALKS = 40, 6


@pytest.mark.slow
def test_atomic_game_end_matches_python_chess():
  stats = Stats()
  _atomic_walks(
    stats, random_games=range(QUICK_GAMES), long_walks=range(QUICK_WALKS), crafted_repeats=2
  )
  assert stats.plies > 5000
  assert set(stats.terminations) >= ATOMIC_TERMINATIONS, stats.terminations
  assert stats.lookahead_threefold > 0
  assert stats.clock99_open > 0


@pytest.mark.slow
def test_atomic_game_end_matches_python_chess_long():
  stats = Stats()
  _atomic_walks(
    stats,
    random_games=range(QUICK_GAMES, 170),
    long_walks=range(QUICK_WALKS, 18),
    crafted_repeats=4,
  )
  assert stats.plies > 20_000
  assert set(stats.terminations) >= ATOMIC_TERMINATIONS, stats.terminations
  assert stats.fifty_lookahead > 0
