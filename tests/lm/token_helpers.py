"""Test-only helpers of `chessjax.lm.tokens`: the inverse of `tokenize`, piece letters as strings
and the per-move loss of Toshniwal et al. (2022, section 4) on arrays. The library needs none of
them (`chessjax.lm.task.Sums` computes the reported per-move loss)."""

from collections.abc import Sequence

import chess
import numpy as np

from chessjax.lm.tokens import PIECE_LETTERS, PROMO_LETTERS, Vocab, move_pieces


def piece_letters(moves: np.ndarray, states: np.ndarray) -> list[str | None]:
  """Piece letter of every move (`P N R B Q K`, None for castling), from the stored states."""
  return [None if k < 0 else PIECE_LETTERS[k] for k in move_pieces(moves, states)]


def detokenize(ids: Sequence[int], vocab: Vocab) -> tuple[list[str], list[str | None]]:
  """Inverse of `tokenize`: (UCI moves, piece letter or None per move). `<pad>` is ignored, `<s>`
  is allowed first and `</s>` last; anything else out of place raises ValueError."""
  toks = [vocab.tokens[int(i)] for i in ids if int(i) != vocab.pad_id]
  if toks and toks[0] == "<s>":
    toks = toks[1:]
  if toks and toks[-1] == "</s>":
    toks = toks[:-1]
  ucis: list[str] = []
  pieces: list[str | None] = []
  i = 0
  while i < len(toks):
    piece = None
    if toks[i] in PIECE_LETTERS:
      piece, i = toks[i], i + 1
    if (
      i + 1 >= len(toks)
      or toks[i] not in chess.SQUARE_NAMES
      or toks[i + 1] not in chess.SQUARE_NAMES
    ):
      raise ValueError(f"token {i}: expected two squares, got {toks[i : i + 2]}")
    uci = toks[i] + toks[i + 1]
    i += 2
    if i < len(toks) and toks[i] in PROMO_LETTERS:
      uci, i = uci + toks[i], i + 1
    ucis.append(uci)
    pieces.append(piece)
  return ucis, pieces


def _xp(x):
  if isinstance(x, np.ndarray | np.generic):
    return np
  import jax.numpy as jnp

  return jnp


def per_move_loss(nll, weights, num_moves):
  """Summed NLL over scored tokens / summed (moves + 1) (Toshniwal et al. 2022, section 4: `</s>`
  counts as a move). `nll`, `weights` [B, T]; `num_moves` int[B] already holding plies + 1 (the
  `num_moves` field of `lm_row`)."""
  xp = _xp(nll)
  return xp.sum(nll * weights) / xp.sum(xp.asarray(num_moves).astype(xp.float32))


def per_move_perplexity(nll, weights, num_moves):
  """exp(`per_move_loss`)."""
  xp = _xp(nll)
  return xp.exp(per_move_loss(nll, weights, num_moves))
