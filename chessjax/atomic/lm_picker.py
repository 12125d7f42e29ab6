"""An offline language-model move-picker: a chessjax UCI language model (the blindfolded-chess
track, Toshniwal et al. 2022) plays the legal move it rates most likely after the position's move
history.

This is Co & Konuganti's (2026, section 4.5) prior-conflict measurement on a model trained here:
a model that learned chess only from standard games is asked for moves in positions whose best
move differs under atomic rules. It sees no prompt and no rules; what changes between conditions
is the set of legal moves it chooses from (the condition's variant's), so its atomic answers are
its standard-chess prior restricted to moves atomic rules allow.

A candidate's score is log P(move tokens | `<s>` + history tokens) under the model: the summed
log-probabilities of its from-square, to-square and promotion tokens (AP models: the piece letter
before them, castling without one, as `chessjax.lm.tokens` writes games), with the logits scored
as the model's evaluation scores them (`task.eval_logits`: the six piece logits masked for every
non-AP model). Positions carry their history from the start of their source game (`moves`,
played under `game_variant`; `data_prep.atomic_positions` records both); the history must reach
the position's FEN. All candidates of a position run as one batch, padded to a multiple of 32
tokens and 8 rows (few shapes to compile).
"""

from collections.abc import Sequence
from pathlib import Path

import chess
import numpy as np

from chessjax.atomic.prompts import VARIANT_BOARD, Query

WIDTH_MULTIPLE, ROW_MULTIPLE = 32, 8


def history_board(moves: Sequence[str], variant: str) -> chess.Board:
  """The board after `moves` (UCI) from the start position under `variant`'s rules."""
  board = VARIANT_BOARD[variant]()
  for i, uci in enumerate(moves):
    move = chess.Move.from_uci(uci)
    if move not in board.legal_moves:
      raise ValueError(f"history move {i + 1} ({uci}) is not legal under {variant} rules")
    board.push(move)
  return board


def same_position(a: str, b: str) -> bool:
  """Whether two FENs name the same position (clocks ignored)."""
  return a.split()[:4] == b.split()[:4]


def _letter(board: chess.Board, move: chess.Move) -> str | None:
  if board.is_castling(move):
    return None
  return board.piece_at(move.from_square).symbol().upper()


def move_log_probs(
  predict, vocab, prefix: Sequence[int], candidates: Sequence[Sequence[int]], *, eval_logits
) -> np.ndarray:
  """log P(candidate tokens | prefix) float64[K] under `predict(tokens int32[B, T]) -> logits
  [B, T, V]` as `eval_logits` (the task's) scores them (one batch; padded with `<pad>` after each
  sequence, which a causal model ignores)."""
  lengths = [len(prefix) + len(c) for c in candidates]
  width = -(-max(lengths) // WIDTH_MULTIPLE) * WIDTH_MULTIPLE
  rows = -(-len(candidates) // ROW_MULTIPLE) * ROW_MULTIPLE
  tokens = np.full((rows, width), vocab.pad_id, dtype=np.int32)
  for i, c in enumerate(candidates):
    tokens[i, : lengths[i]] = [*prefix, *c]
  logits = eval_logits(np.asarray(predict(tokens), dtype=np.float64))
  mx = logits.max(axis=-1, keepdims=True)
  log_probs = logits - (np.log(np.exp(logits - mx).sum(axis=-1, keepdims=True)) + mx)
  out = np.zeros(len(candidates))
  for i, c in enumerate(candidates):
    at = np.arange(len(prefix) - 1, len(prefix) - 1 + len(c))
    out[i] = log_probs[i, at, np.asarray(c)].sum()
  return out


class LMPicker:
  """The legal move a restored language-model workdir rates most likely (module docstring)."""

  def __init__(self, workdir, *, which: str | None = None, name: str | None = None):
    from chessjax import workdir as workdirs

    self.restored = workdirs.restore(workdir, which or None)
    task = self.restored.task
    if not hasattr(task, "vocab") or not hasattr(task, "notation"):
      raise ValueError(f"{workdir} is not a language-model workdir (task {type(task).__name__})")
    self.vocab, self.notation = task.vocab, task.notation
    self.max_len = int(self.restored.config.data.max_len)
    config = self.restored.config
    self.name = name or (
      f"LM {config.family} {config.size} {self.notation} "
      f"({Path(str(workdir)).name}, step {self.restored.step})"
    )

  def _tokens(self, board: chess.Board, moves: Sequence[str]) -> list[int]:
    """Tokens of `moves` played from `board` (a copy), with piece letters for AP models."""
    from chessjax.lm import tokens as tk

    board = board.copy()
    letters = []
    for uci in moves:
      move = chess.Move.from_uci(uci)
      letters.append(_letter(board, move) if self.notation == "ap" else None)
      board.push(move)
    return tk.tokenize(list(moves), self.vocab, pieces=letters, add_special=False).tolist()

  def pick(self, query: Query) -> dict:
    board = history_board(query.history, query.game_variant)
    if not same_position(board.fen(), query.fen):
      raise ValueError(f"the move history does not reach the position {query.fen}")
    prefix = [self.vocab.bos_id, *self._tokens(VARIANT_BOARD[query.game_variant](), query.history)]
    legal = query.legal_moves
    here = VARIANT_BOARD[query.variant](query.fen)
    candidates = [self._tokens(here, [m]) for m in legal]
    if len(prefix) + max(len(c) for c in candidates) > self.max_len:
      return {"move": "", "reply": f"history longer than the model's {self.max_len} tokens"}
    scores = move_log_probs(
      self.restored.predict,
      self.vocab,
      prefix,
      candidates,
      eval_logits=self.restored.task.eval_logits,
    )
    best = int(np.argmax(scores))
    return {"move": legal[best], "lm_log_prob": float(scores[best]), "lm_step": self.restored.step}
