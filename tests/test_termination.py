"""`data_prep.termination.GameEnd` equals python-chess's `board.outcome(claim_draw=True)` at every
ply of random, repetitive, clock-running and crafted standard-chess games."""

import random

import chess
import pytest
from termination_walks import ALL_TERMINATIONS, Stats, quiet, repeating, uniform, walk

from data_prep.termination import GameEnd

T = chess.Termination


# Positions near the rules' edges: clocks at 95..149, kings shuffling beside locked pawns,
# castling rights that a rook move destroys, en passant that is pseudo-legal only (pinned pawn).
CRAFTED = [
  "8/8/4k3/8/8/3K4/6R1/8 w - - 95 120",
  "8/8/4k3/8/8/3K4/6R1/8 b - - 97 120",
  "k7/8/8/8/8/1q6/P7/K7 w - - 99 80",  # Clock 99, every legal move zeroes it.
  "7k/8/5QK1/8/8/8/8/8 w - - 98 90",
  "8/2k5/8/2pP4/2P5/3K4/8/8 w - - 140 150",
  "8/3k4/3p4/2pP4/2P5/3K4/8/8 b - - 0 60",
  "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",
  "r3k2r/pppq1ppp/8/8/8/8/PPPQ1PPP/R3K2R b KQkq - 6 20",
  "4k3/8/8/8/3p4/8/4P3/4K3 w - - 0 1",  # e2e4 gives a legal en passant.
  "8/8/8/8/R4p1k/8/4P3/K7 w - - 0 1",  # e2e4: ep square, but fxe3 would expose the king.
  "8/8/4k3/8/8/3K4/4B3/8 w - - 0 1",  # Insufficient from the start.
  "8/8/4k3/2b5/8/3K4/4N3/8 w - - 30 60",
  "7k/5K2/6Q1/8/8/8/8/8 b - - 10 70",  # Stalemate.
]


def _equivalence_walks(stats, *, random_games, long_walks, crafted_repeats):
  rng = random.Random(12345)
  # Generation exactly as the generator plays: from the start, up to the first end.
  for seed in random_games:
    walk(stats, chess.Board(), uniform(random.Random(seed)), max_plies=2000, stop_at_end=True)
  # Past the first claimable draw: fivefold, seventy-five moves and long windows.
  for i in long_walks:
    choose = (repeating, quiet, uniform)[i % 3](random.Random(1000 + i))
    walk(stats, chess.Board(), choose, max_plies=260, stop_at_end=False)
  for fen in CRAFTED:
    for j in range(crafted_repeats):
      choose = (repeating, quiet, uniform)[j % 3](rng)
      walk(stats, chess.Board(fen), choose, max_plies=220, stop_at_end=False)


# The quick test's random games and long walks; the slow test walks the next ones (seeds), so
# `make test` checks every walk once.
QUICK_GAMES, QUICK_WALKS = 12, 6


def test_game_end_matches_python_chess():
  stats = Stats()
  _equivalence_walks(
    stats, random_games=range(QUICK_GAMES), long_walks=range(QUICK_WALKS), crafted_repeats=3
  )
  assert stats.plies > 8000
  assert set(stats.terminations) == ALL_TERMINATIONS, stats.terminations
  assert stats.lookahead_threefold > 0
  assert stats.fifty_lookahead > 0
  assert stats.clock99_open > 0


@pytest.mark.slow
def test_game_end_matches_python_chess_long():
  stats = Stats()
  _equivalence_walks(
    stats,
    random_games=range(QUICK_GAMES, 130),
    long_walks=range(QUICK_WALKS, 33),
    crafted_repeats=8,
  )
  assert stats.plies > 50_000
  assert set(stats.terminations) == ALL_TERMINATIONS, stats.terminations


def test_game_end_resumes_from_a_move_stack():
  # A tracker built mid-game (backward scan of the stack) must agree with one that saw every move.
  stats = Stats()
  rng = random.Random(7)
  for seed in range(4):
    board = chess.Board()
    choose = repeating(random.Random(seed), p=0.8)
    follower = GameEnd(board)
    for ply in range(160):
      if ply % 23 == 0:
        stack, fen = list(board.move_stack), board.fen()
        fresh = GameEnd(board)
        assert board.move_stack == stack and board.fen() == fen  # The scan put the stack back.
        assert fresh.outcome() == follower.outcome() == board.outcome(claim_draw=True)
        assert fresh.repetitions() == follower.repetitions()
      stats.check(board, follower)
      legal = list(board.legal_moves)
      if not legal:
        break
      follower.push(choose(board, legal))
    walk(stats, board, uniform(rng), max_plies=40, stop_at_end=False)
  assert stats.plies > 500


def test_game_end_rejects_other_variants():
  with pytest.raises(TypeError, match="chess.Board or chess.variant.AtomicBoard"):
    GameEnd(chess.variant.CrazyhouseBoard())
