"""Incremental `board.outcome(claim_draw=True)` for games played forward one move at a time.

python-chess 1.11.2 decides a game's end from scratch at every call: `is_repetition(5)` walks the
whole move stack, and `can_claim_threefold_repetition` pops back to the last irreversible move,
replays it and then pushes every legal move. Called once per ply, as the released random-uniform
generator did, that is quadratic in the game length and costs most of the generation time.

`GameEnd` keeps what python-chess recomputes: the transposition keys (`Board._transposition_key`)
of the positions since the last irreversible move, counted. The window is the one python-chess's
backward scan sees: `is_irreversible(move)` evaluated in the position the move is played from
(before pushing) ends it, the position after that move opens the next one. Then, in the order of
`Board.outcome`:

  variant end          atomic only: a king has exploded (`is_variant_loss`, `is_variant_win`)
  checkmate            no legal moves and in check (the caller's legal-move list is reused)
  insufficient         `is_insufficient_material()`, recomputed only after captures and pawn moves
  stalemate            no legal moves
  seventy-five moves   halfmove clock >= 150
  fivefold             the current key's count in the window >= 5
  fifty moves (claim)  python-chess's own `can_claim_fifty_moves()`, only once the clock is >= 99
  threefold (claim)    count >= 3, or some legal move reaches a key whose count is >= 2; that
                       lookahead only runs while such a key exists, and only pushes moves whose
                       resulting occupancy matches one of those keys (key equality implies it)

Atomic chess (`chess.variant.AtomicBoard`) needs nothing else: the board's own legal moves, check,
insufficient-material, irreversibility and transposition-key methods carry its rules; material
still changes only with the clock zeroed (captures), and a capture, which removes at least two
pieces, can never reach a key of the window, so the threefold lookahead's occupancy filter stays
exact.

`tests/test_random_uniform.py` holds this equal to `board.outcome(claim_draw=True)` at every ply of
many random, repetition-seeking and crafted games of both variants.
"""

from collections.abc import Sequence

import chess
import chess.variant

_BB = chess.BB_SQUARES
_BOARDS = (chess.Board, chess.variant.AtomicBoard)


class GameEnd:
  """Tracks a board that is advanced only through `GameEnd.push`.

  `outcome()` equals `board.outcome(claim_draw=True)` of python-chess 1.11.2 for a standard
  `chess.Board` or a `chess.variant.AtomicBoard`. The board may already hold a move stack: the
  window is rebuilt from it with the same backward scan python-chess uses.
  """

  def __init__(self, board: chess.Board):
    if type(board) not in _BOARDS:
      raise TypeError(
        f"GameEnd needs a chess.Board or chess.variant.AtomicBoard, got {type(board).__name__}"
      )
    self.board = board
    self._atomic = type(board) is chess.variant.AtomicBoard
    self._counts: dict = {}
    # Occupancies of the window's keys seen at least twice, by side to move: a legal move can
    # only complete a threefold repetition by reaching one of those keys.
    self._hot: dict[bool, set[int]] = {chess.WHITE: set(), chess.BLACK: set()}
    self._key = board._transposition_key()
    self._counts[self._key] = 1
    switchyard = []
    try:
      while board.move_stack:
        move = board.pop()
        switchyard.append(move)
        if board.is_irreversible(move):
          break
        key = board._transposition_key()
        self._counts[key] = self._counts.get(key, 0) + 1
    finally:
      while switchyard:
        board.push(switchyard.pop())
    for key, count in self._counts.items():
      if count >= 2:
        self._hot[key[8]].add(key[6] | key[7])
    self._insufficient = board.is_insufficient_material()

  def push(self, move: chess.Move) -> None:
    """Plays a legal move on the board and updates the repetition window."""
    board = self.board
    if board.is_irreversible(move):
      self._counts.clear()
      self._hot[chess.WHITE].clear()
      self._hot[chess.BLACK].clear()
    board.push(move)
    # Material only changes through captures and promotions, both of which zero the clock.
    if board.halfmove_clock == 0:
      self._insufficient = board.is_insufficient_material()
    key = board._transposition_key()
    self._key = key
    count = self._counts.get(key, 0) + 1
    self._counts[key] = count
    if count == 2:
      self._hot[key[8]].add(key[6] | key[7])

  def repetitions(self) -> int:
    """Occurrences of the current position since the last irreversible move, itself included."""
    return self._counts[self._key]

  def outcome(self, legal: Sequence[chess.Move] | None = None) -> chess.Outcome | None:
    """`board.outcome(claim_draw=True)`; `legal`: the position's legal moves, in any order."""
    board = self.board
    if self._atomic:
      if board.is_variant_loss():
        return chess.Outcome(chess.Termination.VARIANT_LOSS, not board.turn)
      if board.is_variant_win():  # Only from a set-up position: legal moves cannot get here.
        return chess.Outcome(chess.Termination.VARIANT_WIN, board.turn)
    if legal is None:
      legal = list(board.generate_legal_moves())
    if not legal:
      if board.is_check():
        return chess.Outcome(chess.Termination.CHECKMATE, not board.turn)
      if self._insufficient:
        return chess.Outcome(chess.Termination.INSUFFICIENT_MATERIAL, None)
      return chess.Outcome(chess.Termination.STALEMATE, None)
    if self._insufficient:
      return chess.Outcome(chess.Termination.INSUFFICIENT_MATERIAL, None)
    clock = board.halfmove_clock
    if clock >= 150:
      return chess.Outcome(chess.Termination.SEVENTYFIVE_MOVES, None)
    count = self._counts[self._key]
    if count >= 5:
      return chess.Outcome(chess.Termination.FIVEFOLD_REPETITION, None)
    # Below 99 neither the clock nor any single move reaches 100; above, python-chess's own
    # lookahead is cheap and rarely needed (it is the game's last ply unless every move zeroes
    # the clock or ends the game).
    if clock >= 99 and board.can_claim_fifty_moves():
      return chess.Outcome(chess.Termination.FIFTY_MOVES, None)
    if count >= 3 or self._threefold_next(legal):
      return chess.Outcome(chess.Termination.THREEFOLD_REPETITION, None)
    return None

  def _threefold_next(self, legal: Sequence[chess.Move]) -> bool:
    """Whether a legal move reaches a key seen twice in the window (python-chess's lookahead)."""
    board = self.board
    targets = self._hot[not board.turn]
    if not targets:
      return False
    occupied = board.occupied
    own = board.occupied_co[board.turn]
    own_kings = board.kings & own
    pawns = board.pawns
    ep_square = board.ep_square
    counts = self._counts
    for move in legal:
      src, dst = move.from_square, move.to_square
      src_bb = _BB[src]
      # Castling and en passant move a second piece: decide those by pushing them.
      special = (src_bb & own_kings and (_BB[dst] & own or abs(src - dst) == 2)) or (
        dst == ep_square and src_bb & pawns
      )
      if not special and ((occupied & ~src_bb) | _BB[dst]) not in targets:
        continue
      board.push(move)
      try:
        hit = counts.get(board._transposition_key(), 0) >= 2
      finally:
        board.pop()
      if hit:
        return True
    return False
