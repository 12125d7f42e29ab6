"""Test-only helpers of `chessjax.encoding` (the library encodes whole games, never one board)."""

import chess
import numpy as np

from chessjax.encoding import snapshot, states_from_snapshots


def state_of_board(board: chess.Board, ep_mode: str = "pseudo") -> np.ndarray:
  """uint8[75] labels of a single python-chess position (standard or atomic board)."""
  return states_from_snapshots([snapshot(board, ep_mode)])[0]
