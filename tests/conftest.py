"""Shared fixtures: the bundled real-game sample, read once per session.

Tests spend most of their time compiling small XLA programs; LLVM's optimisation level 0 cuts
that by about a third and changes no semantics (tests compare implementations, not speed).
"""

import bz2
import os

os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
).strip()
from pathlib import Path

import chess.pgn
import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE_PGN = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def sample_games_uci() -> list[list[str]]:
  """The first 1,600 games of the bundled lichess sample as UCI move lists (python-chess parse)."""
  games = []
  with bz2.open(SAMPLE_PGN, "rt", encoding="utf-8") as f:
    while len(games) < 1600:
      game = chess.pgn.read_game(f)
      if game is None:
        break
      games.append([m.uci() for m in game.mainline_moves()])
  return games
