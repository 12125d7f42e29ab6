"""Test-only helpers of `chessjax.encoding` (the library encodes whole games, never one board)."""

import chess
import numpy as np

from chessjax.encoding import snapshot, states_from_snapshots


def state_of_board(board: chess.Board, ep_mode: str = "pseudo") -> np.ndarray:
  """uint8[75] labels of a single python-chess position (standard or atomic board)."""
  return states_from_snapshots([snapshot(board, ep_mode)])[0]


# `labels_to_fen` is compared with python-chess's FEN at every FEN_EVERY-th ply and the last of
# the encoding walks (about 25,000 positions per long standard walk): it reads nothing but the
# labels, which the walks check at every ply, and python-chess's `Board.fen` was half their time.
FEN_EVERY = 4


def fen_checked(ply: int, plies: int) -> bool:
  """Whether a walk of `plies` plies compares the FEN of its labels at `ply`."""
  return ply % FEN_EVERY == 0 or ply == plies
