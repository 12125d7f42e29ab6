"""Move tokens and the 75 state labels of the Chess-World-Model task (Walker & Lyons,
Chess-World-Model, section 2.3, appendix A.1).

`encode_game` replays UCI moves with python-chess (which checks legality) under standard or atomic
rules (`chess.variant.AtomicBoard`, Co & Konuganti's atomic chess: same tokens, same labels) and
reads each position from python-chess's bitboards: eight integers per ply, turned into the 64 square
labels for the whole game at once with numpy. This is exact by construction and several times faster
than the released 64-square `piece_at` loop. The native PGN path (`chessjax.pgn_reader`) produces
the same arrays from the Rust PGN reader; tests hold both to python-chess.
"""

import re
from collections.abc import Sequence

import chess
import chess.variant
import numpy as np

from chessjax.labels import NUM_LABELS

MOVE_VOCAB_SIZE = 20482
START_ID = 20480
PAD_ID = 20481
NUM_MOVE_IDS = 20480

EP_MODES = ("pseudo", "legal")
VARIANTS = ("chess", "atomic")
_BOARDS = {"chess": chess.Board, "atomic": chess.variant.AtomicBoard}

# promo index: 0 none, 1 q, 2 r, 3 b, 4 n.
_PROMO_TO_INDEX = {None: 0, chess.QUEEN: 1, chess.ROOK: 2, chess.BISHOP: 3, chess.KNIGHT: 4}
_PROMO_LETTERS = "-qrbn"
_UCI = re.compile(r"[a-h][1-8][a-h][1-8][qrbn]?")

# Label i describes python-chess square i ^ 56 (a8 first, h1 last).
LABEL_SQUARES = np.arange(64, dtype=np.int64) ^ 56
_PIECE_SYMBOLS = ".PNBRQKpnbrqk"
_COUNTER_MAX = 65535


def move_to_id(uci: str) -> int:
  """Packed id `(from * 64 + to) * 5 + promo` of a UCI move string (castling as e1g1).

  Any square pair has an id, even one no legal move uses (e.g. a1a1); the null move does not.
  """
  if not isinstance(uci, str) or not _UCI.fullmatch(uci):
    raise ValueError(f"not a UCI move: {uci!r}")
  from_sq = chess.SQUARE_NAMES.index(uci[:2])
  to_sq = chess.SQUARE_NAMES.index(uci[2:4])
  return (from_sq * 64 + to_sq) * 5 + _PROMO_LETTERS.index(uci[4:] or "-")


def move_id(move: chess.Move) -> int:
  """Packed id of a python-chess move."""
  return (move.from_square * 64 + move.to_square) * 5 + _PROMO_TO_INDEX[move.promotion]


def id_to_move(i: int) -> str:
  """UCI string of a packed move id (inverse of `move_to_id`)."""
  i = int(i)
  if not 0 <= i < NUM_MOVE_IDS:
    raise ValueError(f"{i} is not a move id (START={START_ID}, PAD={PAD_ID} are special tokens)")
  squares, promo = divmod(i, 5)
  from_sq, to_sq = divmod(squares, 64)
  return chess.SQUARE_NAMES[from_sq] + chess.SQUARE_NAMES[to_sq] + _PROMO_LETTERS[promo].strip("-")


def new_board(variant: str = "chess") -> chess.Board:
  """The initial position of a variant of `VARIANTS` (a python-chess board of its rules)."""
  if variant not in _BOARDS:
    raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
  return _BOARDS[variant]()


def snapshot(board: chess.Board, ep_mode: str = "pseudo") -> tuple[int, ...]:
  """The integers that determine a position's labels, read straight off python-chess (any board of
  `VARIANTS`; an exploded atomic king simply leaves no king on the board).

  (white, black, pawns, knights, bishops, rooks, queens, kings, turn, castling bits KQkq
  (K = 1, Q = 2, k = 4, q = 8), ep square or -1, halfmove clock, fullmove number).
  """
  if ep_mode == "pseudo":
    ep = board.ep_square
  else:
    ep = board.ep_square if has_legal_ep(board) else None
  return (
    board.occupied_co[chess.WHITE],
    board.occupied_co[chess.BLACK],
    board.pawns,
    board.knights,
    board.bishops,
    board.rooks,
    board.queens,
    board.kings,
    int(board.turn == chess.BLACK),
    _castling_bits(board.clean_castling_rights()),
    -1 if ep is None else ep,
    board.halfmove_clock,
    board.fullmove_number,
  )


def has_legal_ep(board: chess.Board) -> bool:
  """Whether an en-passant capture is a legal move on `board` (standard or atomic rules)."""
  if type(board) is chess.variant.AtomicBoard:
    return _has_legal_atomic_ep(board)
  return board.has_legal_en_passant()


def _has_legal_atomic_ep(board: chess.variant.AtomicBoard) -> bool:
  """Whether an en-passant capture is among the atomic board's legal moves.

  Not `board.has_legal_en_passant()`: python-chess 1.11.2 decides that with the standard
  "does it leave my king attacked" test, which on an AtomicBoard counts a capture that explodes
  one's own king as legal and one that explodes the enemy king while in check as illegal.
  """
  ep = board.ep_square
  if ep is None:
    return False
  pawns = board.pawns & board.occupied_co[board.turn]
  return any(
    board.is_en_passant(m) for m in board.generate_legal_moves(pawns, chess.BB_SQUARES[ep])
  )


def _castling_bits(rights: int) -> int:
  return (
    (rights >> chess.H1 & 1)
    | (rights >> chess.A1 & 1) << 1
    | (rights >> chess.H8 & 1) << 2
    | (rights >> chess.A8 & 1) << 3
  )


def _square_bits(bitboards: np.ndarray) -> np.ndarray:
  """uint64[N, K] bitboards -> uint8[N, K, 64] bits indexed by python-chess square."""
  as_bytes = bitboards.astype("<u8").view(np.uint8).reshape(*bitboards.shape, 8)
  return np.unpackbits(as_bytes, axis=-1, bitorder="little")


def states_from_snapshots(snaps: Sequence[tuple[int, ...]]) -> np.ndarray:
  """uint8[N, 75] labels from `snapshot` tuples, vectorised over the N positions."""
  n = len(snaps)
  boards = np.array([s[:8] for s in snaps], dtype=np.uint64).reshape(n, 8)
  aux = np.array([s[8:] for s in snaps], dtype=np.int64).reshape(n, 5)
  bits = _square_bits(boards)  # [N, 8, 64]
  kind = (bits[:, 2:8] * np.arange(1, 7, dtype=np.uint8)[None, :, None]).sum(axis=1)
  pieces = kind + 6 * bits[:, 1] * (kind > 0)
  return assemble_states(pieces[:, LABEL_SQUARES], aux)


def assemble_states(square_labels: np.ndarray, aux: np.ndarray) -> np.ndarray:
  """Labels from square labels uint8[N, 64] (label order) and aux int64[N, 5] =
  (turn, castling bits KQkq, ep square or -1, halfmove, fullmove)."""
  n = square_labels.shape[0]
  out = np.zeros((n, NUM_LABELS), dtype=np.uint8)
  out[:, :64] = square_labels
  out[:, 64] = aux[:, 0]
  for j in range(4):
    out[:, 65 + j] = (aux[:, 1] >> j) & 1
  ep = aux[:, 2]
  has_ep = ep >= 0
  out[:, 69] = np.where(has_ep, ep % 8 + 1, 0)
  out[:, 70] = np.where(has_ep, np.where(ep // 8 == 2, 1, 2), 0)
  half = np.clip(aux[:, 3], 0, _COUNTER_MAX)
  full = np.clip(aux[:, 4], 0, _COUNTER_MAX)
  out[:, 71], out[:, 72] = half >> 8, half & 255
  out[:, 73], out[:, 74] = full >> 8, full & 255
  return out


def encode_game(
  ucis: Sequence[str], *, ep_mode: str = "pseudo", variant: str = "chess"
) -> tuple[np.ndarray, np.ndarray]:
  """Move ids int32[T+1] (START first) and states uint8[T+1, 75] of a game from the start,
  played under the rules of `variant` ("chess" or "atomic").

  Raises ValueError naming the ply (1-based) of the first malformed or illegal move (in atomic
  chess also a king capture, a capture exploding one's own king, or any move after a king has
  exploded). Castling must be written as the king's two-square move (e1g1), as in standard UCI.
  """
  if ep_mode not in EP_MODES:
    raise ValueError(f"ep_mode must be one of {EP_MODES}, got {ep_mode!r}")
  board = new_board(variant)
  moves = np.empty(len(ucis) + 1, dtype=np.int32)
  moves[0] = START_ID
  snaps = [snapshot(board, ep_mode)]
  for ply, uci in enumerate(ucis, start=1):
    try:
      move = chess.Move.from_uci(uci)
    except (chess.InvalidMoveError, ValueError, TypeError):
      raise ValueError(f"ply {ply}: {uci!r} is not a UCI move") from None
    if not move or not board.is_legal(move) or _is_rook_capture_castling(board, move):
      raise ValueError(f"ply {ply}: illegal move {uci!r} in position {board.fen()}")
    moves[ply] = move_id(move)
    board.push(move)
    snaps.append(snapshot(board, ep_mode))
  return moves, states_from_snapshots(snaps)


def _is_rook_capture_castling(board: chess.Board, move: chess.Move) -> bool:
  """python-chess also accepts castling written king-takes-rook (e1h1); UCI here does not."""
  return bool(board.kings & chess.BB_SQUARES[move.from_square]) and bool(
    board.rooks & board.occupied_co[board.turn] & chess.BB_SQUARES[move.to_square]
  )


def labels_to_fen(states_row) -> str:
  """The full FEN described by one label row (exact inverse of the encoding). FEN is the same for
  both variants; a row may lack a king (atomic: exploded)."""
  row = np.asarray(states_row, dtype=np.int64)
  if row.shape != (NUM_LABELS,):
    raise ValueError(f"expected {NUM_LABELS} labels, got shape {row.shape}")
  ranks = []
  for r in range(8):
    text, empty = "", 0
    for c in row[8 * r : 8 * r + 8]:
      if not 0 <= c < len(_PIECE_SYMBOLS):
        raise ValueError(f"square label {c} out of range")
      if c == 0:
        empty += 1
      else:
        text += (str(empty) if empty else "") + _PIECE_SYMBOLS[c]
        empty = 0
    ranks.append(text + (str(empty) if empty else ""))
  side = "w" if row[64] == 0 else "b"
  castling = "".join(s for s, bit in zip("KQkq", row[65:69], strict=True) if bit) or "-"
  ep = "-"
  if row[69] and row[70]:
    ep = "abcdefgh"[row[69] - 1] + ("3" if row[70] == 1 else "6")
  half = int(row[71]) * 256 + int(row[72])
  full = int(row[73]) * 256 + int(row[74])
  return f"{'/'.join(ranks)} {side} {castling} {ep} {half} {full}"
