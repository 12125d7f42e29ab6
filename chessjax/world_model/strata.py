"""Strata: the steps of a game where the chess state is hard to track, and the steps right after.

A model that tracks the board must apply every rule, not only the common ones: a capture removes a
piece, a king move may also move a rook, a promotion changes a piece's kind, castling rights and
en-passant squares come and go. Scoring ExactState and each label group's accuracy on the steps
where such an event happens (and on the step right after it, where a delayed update shows) says
which rule a model fails, where the pooled metrics cannot.

Step t is the state after ply t (t = 0: the initial position). A step belongs to a stratum when,
replayed with python-chess under the game's rules:
  capture        ply t captured a piece (en passant included; an atomic capture explodes too)
  check          the side to move at step t is in check
  king_move      ply t moved the king (castling included)
  promotion      ply t promoted a pawn
  castling_lost  ply t took away a castling right (king or rook moved, rook captured)
  ep_available   at step t an en-passant capture is a legal move
`after_NAME` is the step right after a step of NAME (t + 1). A step can belong to several strata.
"""

import hashlib
import os
from pathlib import Path

import chess
import numpy as np

from chessjax import encoding, labels, runtime
from chessjax.data import pipeline
from chessjax.data.source import GameSource
from chessjax.files import as_path

STRATA = ("capture", "check", "king_move", "promotion", "castling_lost", "ep_available")
NAMES = (*STRATA, *(f"after_{s}" for s in STRATA))
GROUP_NAMES = tuple(name for name, *_ in labels.GROUPS)
GROUP_SIZES = np.array([count for _, _, count, _ in labels.GROUPS], dtype=np.int64)


def game_flags(moves, variant: str = "chess") -> np.ndarray:
  """bool[T, len(NAMES)]: which strata each step of a game (move ids, START first) belongs to."""
  board = encoding.new_board(variant)
  flags = np.zeros((len(moves), len(STRATA)), dtype=bool)
  for t in range(len(moves)):
    if t > 0:
      move = chess.Move.from_uci(encoding.id_to_move(int(moves[t])))
      rights = board.clean_castling_rights()
      flags[t, 0] = board.is_capture(move)
      flags[t, 2] = board.piece_type_at(move.from_square) == chess.KING
      flags[t, 3] = move.promotion is not None
      board.push(move)
      flags[t, 4] = board.clean_castling_rights() != rights
    flags[t, 1] = board.is_check()
    flags[t, 5] = encoding.has_legal_ep(board)
  after = np.zeros_like(flags)
  after[1:] = flags[:-1]
  return np.concatenate([flags, after], axis=1)


class StrataAccumulator:
  """Sums, per stratum, the steps, exact steps and each label group's right labels, from per-step
  results of a model (`add`, one game at a time), and turns them into metrics (`result`)."""

  def __init__(self):
    self.steps = np.zeros(len(NAMES), np.int64)
    self.exact = np.zeros(len(NAMES), np.int64)
    self.group_correct = np.zeros((len(NAMES), len(GROUP_NAMES)), np.int64)

  def add(self, flags: np.ndarray, exact: np.ndarray, group_correct: np.ndarray) -> None:
    """flags bool[T, S] (`game_flags`), exact bool[T] and group_correct int[T, G] (right labels
    per group) of the same T steps of one game."""
    f = flags.astype(np.int64)
    self.steps += f.sum(0)
    self.exact += f.T @ exact.astype(np.int64)
    self.group_correct += f.T @ group_correct.astype(np.int64)

  def result(self) -> dict:
    """{stratum: {steps, exact_state, groups: {group: accuracy}}}; metrics are None for a stratum
    with no step (e.g. no promotion in a short split)."""
    out = {}
    for i, name in enumerate(NAMES):
      n = int(self.steps[i])
      out[name] = {
        "steps": n,
        "exact_state": float(self.exact[i] / n) if n else None,
        "groups": {
          g: float(self.group_correct[i, j] / (n * GROUP_SIZES[j])) if n else None
          for j, g in enumerate(GROUP_NAMES)
        },
      }
    return out


def dataset_flags(path, split: str, num_games: int, variant: str = "chess") -> list[np.ndarray]:
  """`game_flags` of the first `num_games` games of a dataset split, in stored order.

  Replaying a split with python-chess takes minutes (about 20,000 steps/s), so the flags of a
  local dataset are cached per user (`$XDG_CACHE_HOME/chessjax/strata`, keyed by the split's
  manifest and lengths, the game count and the rules): every run evaluated on the same test set
  replays it once.
  """
  key = hashlib.sha256()
  key.update(as_path(path).joinpath("manifest.json").read_bytes())
  key.update(np.asarray(pipeline.game_lengths(path, split)).tobytes())
  key.update(f"{split}:{num_games}:{variant}:{NAMES}".encode())
  cache = Path(runtime.default_cache_dir()).parent / "strata" / f"{key.hexdigest()[:32]}.npz"
  if cache.exists():
    with np.load(cache) as z:
      return np.split(z["flags"], z["offsets"][1:-1])
  source = GameSource(path, split)
  out = [game_flags(source[g]["moves"], variant) for g in range(num_games)]
  offsets = np.cumsum([0] + [len(f) for f in out])
  cache.parent.mkdir(parents=True, exist_ok=True)
  tmp = cache.with_name(f".{cache.stem}.{os.getpid()}.tmp.npz")
  np.savez_compressed(tmp, flags=np.concatenate(out), offsets=offsets)
  os.replace(tmp, cache)
  return out
