"""Row formats: how a track turns stored games into the fixed-shape arrays of a batch.

The pipeline is task-agnostic: it plans batches from per-row lengths and hands each batch's
games to a row format, which a track supplies (the world model uses `GameRows`; a language model
builds token rows with its own format). A row format is a picklable object with

    lengths(steps int32[N]) -> int32[N]
        the length of each game's row from its stored steps (plies + 1), for planning; an upper
        bound is fine (rows shorter than planned are padded);
    batch(games, length, *, max_len, epoch) -> dict[str, np.ndarray]
        the arrays of one batch, `b = len(games)` rows of `T = length` positions; `games[r]` is
        `(game index in the split, game dict of `chessjax.data.records.decode_record`)`, or None
        for a pad row; rows are cut to `max_len` positions (their prefix) when it is set; `epoch`
        lets a format redraw per-epoch randomness as a pure function of (epoch, game index).

Every format returns a `mask` bool[b, T] (True on scored positions): the training loop counts
tokens with it.
"""

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from chessjax.encoding import PAD_ID
from chessjax.labels import NUM_LABELS

Games = Sequence[tuple[int, dict] | None]


class RowFormat(Protocol):
  def lengths(self, steps: np.ndarray) -> np.ndarray: ...

  def batch(
    self, games: Games, length: int, *, max_len: int | None, epoch: int
  ) -> dict[str, np.ndarray]: ...


class GameRows:
  """The stored games as they are, right-padded (`b` rows, `T` positions):

    moves  int32[b, T]      move ids, START first, `PAD_ID` after the game's last step
    states uint8[b, T, 75]  state labels, zeros after the game's last step
    mask   bool[b, T]       True on the game's steps (t = 0 included, as every step is scored)

  `mask` is exactly `moves != PAD_ID`.
  """

  keys = ("moves", "states", "mask")

  def lengths(self, steps: np.ndarray) -> np.ndarray:
    return np.asarray(steps, dtype=np.int32)

  def batch(self, games: Games, length: int, *, max_len: int | None, epoch: int) -> dict:
    del epoch  # Stored games do not change between epochs.
    b = len(games)
    moves = np.full((b, length), PAD_ID, dtype=np.int32)
    states = np.zeros((b, length, NUM_LABELS), dtype=np.uint8)
    mask = np.zeros((b, length), dtype=bool)
    for r, item in enumerate(games):
      if item is None:
        continue
      game = item[1]
      n = len(game["moves"]) if max_len is None else min(len(game["moves"]), max_len)
      moves[r, :n] = game["moves"][:n]
      states[r, :n] = game["states"][:n]
      mask[r, :n] = True
    return {"moves": moves, "states": states, "mask": mask}
