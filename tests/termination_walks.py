"""Walks that compare `data_prep.termination.GameEnd` with python-chess's
`board.outcome(claim_draw=True)` before every move (shared by the chess and atomic tests)."""

from collections import Counter

import chess

from data_prep.termination import GameEnd

T = chess.Termination
ALL_TERMINATIONS = {
  T.CHECKMATE,
  T.STALEMATE,
  T.INSUFFICIENT_MATERIAL,
  T.SEVENTYFIVE_MOVES,
  T.FIVEFOLD_REPETITION,
  T.FIFTY_MOVES,
  T.THREEFOLD_REPETITION,
}
ATOMIC_TERMINATIONS = ALL_TERMINATIONS | {T.VARIANT_LOSS}


class Stats:
  def __init__(self):
    self.plies = 0
    self.terminations = Counter()
    self.lookahead_threefold = 0  # claimable only through a next move
    self.fifty_lookahead = 0  # claimable at clock 99 through a next move
    self.clock99_open = 0  # clock 99 and the game goes on

  def check(self, board: chess.Board, end: GameEnd, legal=None) -> chess.Outcome | None:
    legal = list(board.legal_moves) if legal is None else legal
    fast = end.outcome(legal)
    slow = board.outcome(claim_draw=True)
    # (python-chess's `is_game_over(claim_draw=True)` is `outcome(claim_draw=True) is not None`:
    # comparing with it too would only run the slow oracle twice.)
    assert fast == slow, (board.fen(), [m.uci() for m in board.move_stack[-12:]], fast, slow)
    assert end.outcome() == fast  # The legal list is optional.
    self.plies += 1
    if fast is not None:
      self.terminations[fast.termination] += 1
      if fast.termination == T.THREEFOLD_REPETITION and end.repetitions() < 3:
        self.lookahead_threefold += 1
      if fast.termination == T.FIFTY_MOVES and board.halfmove_clock == 99:
        self.fifty_lookahead += 1
    elif board.halfmove_clock == 99:
      self.clock99_open += 1
    return fast


def uniform(rng):
  return lambda board, legal: legal[rng.randrange(len(legal))]


def repeating(rng, p=0.6):
  """Undoes the mover's previous move when it can (A-B-A-B shuffles), else plays at random."""

  def choose(board, legal):
    if len(board.move_stack) >= 2 and rng.random() < p:
      prev = board.move_stack[-2]
      back = chess.Move(prev.to_square, prev.from_square)
      if back in legal:
        return back
    return legal[rng.randrange(len(legal))]

  return choose


def quiet(rng):
  """Prefers moves that keep the halfmove clock running, to reach the 50/75-move boundaries."""

  def choose(board, legal):
    quiet = [m for m in legal if not board.is_zeroing(m)]
    pool = quiet or legal
    return pool[rng.randrange(len(pool))]

  return choose


def walk(stats, board, choose, *, max_plies, stop_at_end):
  """Plays from `board`, comparing the fast and python-chess outcomes before every move."""
  end = GameEnd(board)
  for _ in range(max_plies):
    legal = list(board.legal_moves)
    outcome = stats.check(board, end, legal)
    if not legal or (outcome is not None and stop_at_end):
      return
    if outcome is not None and outcome.termination == T.INSUFFICIENT_MATERIAL:
      return  # Stays so for good: nothing further to compare.
    end.push(choose(board, legal))
  stats.check(board, end)
