"""PGN game texts -> encoded games (move ids and 75 state labels), with skip reasons.

Two paths give identical labels (tests hold both to python-chess, the oracle):

* native (default): the Rust PGN reader (`rust-pgn-reader-python-binding`, built on the lichess
  `shakmaty`/`pgn-reader` crates) parses a batch of games into flat arrays of boards and moves; the
  75 labels are then computed for the whole batch at once with numpy. Boards come from the reader;
  side to move, castling rights, en passant and both counters are derived here from the moves,
  which for games from the standard start is exact and keeps the label semantics ours (e.g. the
  reader's halfmove clock is a uint8 that wraps at 256; ours is not).
* python-chess: any game the native reader rejects is re-read with python-chess, which decides
  (Walker & Lyons, appendix B.1: a game is kept iff python-chess replays it without
  `game.errors`). A game that python-chess accepts but the reader did not is encoded by
  `chessjax.encoding.encode_game` and counted as `python_chess_fallback`.

A game is kept iff it starts from the standard position, is of the requested variant, is valid
UTF-8, replays legally to its end, and has at least `min_plies` plies. Skip reasons are counted.

Atomic games (`variant="atomic"`: a `Variant` header python-chess's `find_variant` maps to
`AtomicBoard`, e.g. lichess's "Atomic") take the python-chess path only, as the native reader
knows standard rules alone; python-chess reads them with `AtomicBoard` (from the header) and
`encoding.encode_game(..., variant="atomic")` labels them.
"""

import functools
import hashlib
import io
import logging
import re
from collections import Counter
from dataclasses import dataclass

import chess
import chess.pgn
import chess.variant
import numpy as np
import rust_pgn_reader_python_binding as native

from chessjax import encoding

STANDARD_FEN = chess.STARTING_FEN
_STANDARD_VARIANTS = {"", "standard", "chess", "from position"}
# `chess.variant.find_variant` matches aliases case-insensitively and exactly (no stripping).
_ATOMIC_VARIANTS = {a.lower() for a in chess.variant.AtomicBoard.aliases}
# Promotion codes of the reader (-1 none, 2 N, 3 B, 4 R, 5 Q) -> ours (0 none, 1 q, 2 r, 3 b, 4 n).
_PROMO = np.zeros(6, dtype=np.int64)
_PROMO[[2, 3, 4, 5]] = [4, 3, 2, 1]
_RESULT_MARKER = re.compile(r"(1-0|0-1|1/2-1/2|\*)\s*$")

SKIP_REASONS = (
  "non_utf8",
  "variant",
  "non_standard_start",
  "illegal_or_ambiguous_san",
  "null_move",
  "too_short",
  "truncated_game",
  "unparsable",
)


@dataclass
class EncodedGame:
  """One kept game."""

  example_id: str
  result: str
  moves: np.ndarray  # int32[T+1], START first
  states: np.ndarray  # uint8[T+1, 75]

  @property
  def plies(self) -> int:
    return len(self.moves) - 1


def game_id(headers: dict, move_ids: np.ndarray) -> str:
  """The game's id: its Site header when that is a URL (unique on lichess), else an MD5 of the
  space-separated UCI movetext (a Site like 'London ENG' names many games and would cluster the
  split). `move_ids` are the game's packed moves without START."""
  site = headers.get("Site", "")
  if "://" in site:
    return site
  table = _uci_table()
  text = " ".join(table[i] for i in move_ids)
  return "md5:" + hashlib.md5(text.encode()).hexdigest()


@functools.cache
def _uci_table() -> list[str]:
  return [encoding.id_to_move(i) for i in range(encoding.NUM_MOVE_IDS)]


def header_skip_reason(headers: dict, variant: str = "chess") -> str | None:
  """Skip reason decided by the headers alone (variant, set-up position), or None."""
  if variant == "atomic":
    if headers.get("Variant", "").lower() not in _ATOMIC_VARIANTS:
      return "variant"
  elif headers.get("Variant", "").strip().lower() not in _STANDARD_VARIANTS:
    return "variant"
  fen = headers.get("FEN")
  if fen is not None and fen.strip() != STANDARD_FEN:
    return "non_standard_start"
  return None


def encode_games(
  texts: list[str],
  *,
  min_plies: int = 20,
  ep_mode: str = "pseudo",
  last_is_final: bool = False,
  variant: str = "chess",
) -> tuple[list[EncodedGame], Counter]:
  """Encodes a batch of PGN game texts. Returns the kept games in input order and a Counter of
  skip reasons (plus `python_chess_fallback` for games the native reader could not parse).

  `last_is_final`: the last text is the end of its file; if it lacks a result marker the file was
  cut short and that game is skipped as `truncated_game`. `variant`: the games to keep, "chess"
  or "atomic" (others are skipped as `variant`).
  """
  if ep_mode not in encoding.EP_MODES:
    raise ValueError(f"ep_mode must be one of {encoding.EP_MODES}, got {ep_mode!r}")
  if variant not in encoding.VARIANTS:
    raise ValueError(f"variant must be one of {encoding.VARIANTS}, got {variant!r}")
  counts: Counter = Counter()
  results: list[EncodedGame | None] = [None] * len(texts)
  native_idx = []
  for i, text in enumerate(texts):
    if "\ufffd" in text:
      counts["non_utf8"] += 1
    elif last_is_final and i == len(texts) - 1 and not _RESULT_MARKER.search(text):
      counts["truncated_game"] += 1
    elif variant == "atomic":
      results[i], reason = _encode_python_chess(text, min_plies, ep_mode, variant)
      if reason is not None:
        counts[reason] += 1
    else:
      native_idx.append(i)
  if native_idx:
    parsed = native.parse_games_from_strings([texts[i] for i in native_idx], num_threads=1)
    pos = 0
    for chunk in parsed.chunks:
      games, reasons = _encode_chunk(chunk, min_plies, ep_mode)
      for game, reason in zip(games, reasons, strict=True):
        i = native_idx[pos]
        pos += 1
        if reason == "native_rejected":
          game, reason = _encode_python_chess(texts[i], min_plies, ep_mode)
          if game is not None:
            counts["python_chess_fallback"] += 1
        if reason is not None:
          counts[reason] += 1
        results[i] = game
  return [g for g in results if g is not None], counts


def _encode_chunk(chunk, min_plies: int, ep_mode: str):
  """Labels for every game of one native chunk at once. Returns (games, skip reasons)."""
  n_games = chunk.num_games
  move_off = chunk.move_offsets.astype(np.int64)
  pos_off = chunk.position_offsets.astype(np.int64)
  boards = chunk.boards.reshape(-1, 64)
  from_sq = chunk.from_squares.astype(np.int64)
  to_sq = chunk.to_squares.astype(np.int64)
  promo = _PROMO[np.maximum(chunk.promotions.astype(np.int64), 0)]
  move_ids = (from_sq * 64 + to_sq) * 5 + promo

  # Per position: its game and its ply index within the game (0 = initial position).
  n_pos = boards.shape[0]
  pos_game = np.repeat(np.arange(n_games), np.diff(pos_off))
  ply = np.arange(n_pos) - pos_off[pos_game]
  # Per move: index of the position before it and after it. A game the reader rejected may
  # record fewer positions than moves + 1; its moves are left out so they cannot write into a
  # neighbour's positions.
  consistent = np.diff(pos_off) == np.diff(move_off) + 1
  move_game = np.repeat(np.arange(n_games), np.diff(move_off))
  keep = consistent[move_game]
  move_game, from_sq, to_sq = move_game[keep], from_sq[keep], to_sq[keep]
  move_local = np.flatnonzero(keep) - move_off[move_game]
  before = pos_off[move_game] + move_local
  after = before + 1
  moved = boards[before, from_sq]
  captured = boards[before, to_sq]
  is_pawn = (moved == 1) | (moved == 7)

  aux = np.zeros((n_pos, 5), dtype=np.int64)
  aux[:, 0] = ply & 1  # Side to move: games start from the standard position, white first.
  # Castling rights: a right is gone for good once a move leaves the king's or that rook's home
  # square or lands on the rook's home square (a capture there).
  lost = np.zeros((n_pos, 4), dtype=np.int64)
  for bit, (king, rook) in enumerate(
    ((chess.E1, chess.H1), (chess.E1, chess.A1), (chess.E8, chess.H8), (chess.E8, chess.A8))
  ):
    lost[after, bit] = (from_sq == king) | (from_sq == rook) | (to_sq == rook)
  lost_cum = _segment_cumsum(lost, pos_off)
  aux[:, 1] = ((lost_cum == 0) * (1 << np.arange(4))).sum(axis=1)
  # En passant square after a double pawn push (python-chess's `ep_square`).
  aux[:, 2] = -1
  double = is_pawn & (np.abs(to_sq - from_sq) == 16)
  aux[after[double], 2] = (from_sq[double] + to_sq[double]) // 2
  # Halfmove clock: plies since the last pawn move or capture (or the game's start).
  reset = np.zeros(n_pos, dtype=np.int64)
  reset[pos_off[:-1][np.diff(pos_off) > 0]] = 1
  reset[after[is_pawn | (captured != 0)]] = 1
  last_reset = np.maximum.accumulate(np.where(reset == 1, np.arange(n_pos), 0))
  aux[:, 3] = np.arange(n_pos) - last_reset
  aux[:, 4] = 1 + ply // 2
  states = encoding.assemble_states(boards[:, encoding.LABEL_SQUARES], aux)
  if ep_mode == "legal":
    _clear_illegal_ep(states, np.flatnonzero(aux[:, 2] >= 0))

  valid = chunk.valid
  headers = chunk.headers
  outcomes = chunk.outcome
  games, reasons = [], []
  for g in range(n_games):
    head = headers[g]
    reason = header_skip_reason(head)
    if reason is None and not (valid[g] and consistent[g]):
      reason = "native_rejected"
    plies = int(move_off[g + 1] - move_off[g])
    if reason is None and plies < min_plies:
      reason = "too_short"
    if reason is not None:
      games.append(None)
      reasons.append(reason)
      continue
    moves = np.empty(plies + 1, dtype=np.int32)
    moves[0] = encoding.START_ID
    moves[1:] = move_ids[move_off[g] : move_off[g + 1]]
    ident = game_id(head, moves[1:])
    result = head.get("Result") or _OUTCOME_RESULT.get(outcomes[g], "*")
    games.append(EncodedGame(ident, result, moves, states[pos_off[g] : pos_off[g + 1]]))
    reasons.append(None)
  return games, reasons


_OUTCOME_RESULT = {"White": "1-0", "Black": "0-1", "Draw": "1/2-1/2"}


def _segment_cumsum(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
  """Cumulative sum along axis 0 restarted at every segment start in `offsets`."""
  total = np.cumsum(x, axis=0)
  starts = offsets[:-1]
  lengths = np.diff(offsets)
  base = np.where(starts[:, None] > 0, total[np.maximum(starts - 1, 0)], 0)
  return total - np.repeat(base, lengths, axis=0)


def _clear_illegal_ep(states: np.ndarray, rows: np.ndarray) -> None:
  """`ep_mode="legal"`: drop the en-passant label where no legal en-passant capture exists.

  Only positions right after a double push are candidates; legality (pins, checks) is decided
  by python-chess on the labelled position itself.
  """
  for row in rows:
    file = int(states[row, 69]) - 1
    rank_row = 4 if states[row, 70] == 1 else 3  # Label row of the pushed pawn: rank 4 or 5.
    enemy_pawn = 7 if states[row, 64] == 1 else 1  # Black to move captures with a black pawn.
    neighbours = [f for f in (file - 1, file + 1) if 0 <= f < 8]
    if not any(states[row, 8 * rank_row + f] == enemy_pawn for f in neighbours):
      states[row, 69:71] = 0
      continue
    if not chess.Board(encoding.labels_to_fen(states[row])).has_legal_en_passant():
      states[row, 69:71] = 0


def _encode_python_chess(text: str, min_plies: int, ep_mode: str, variant: str = "chess"):
  """The oracle path for one game text: (EncodedGame or None, skip reason or None)."""
  pgn_logger = logging.getLogger("chess.pgn")
  level = pgn_logger.level
  pgn_logger.setLevel(logging.CRITICAL)  # python-chess logs every error it records; we count.
  try:
    game = chess.pgn.read_game(io.StringIO(text))
  except Exception:  # noqa: BLE001 - any parser failure is a skip reason, never a crash.
    return None, "unparsable"
  finally:
    pgn_logger.setLevel(level)
  if game is None:
    return None, "unparsable"
  reason = header_skip_reason(dict(game.headers), variant)
  if reason is not None:
    return None, reason
  if game.errors:
    return None, "illegal_or_ambiguous_san"
  moves = list(game.mainline_moves())
  if any(not m for m in moves):
    return None, "null_move"
  if len(moves) < min_plies:
    return None, "too_short"
  ucis = [m.uci() for m in moves]
  ids, states = encoding.encode_game(ucis, ep_mode=ep_mode, variant=variant)
  ident = game_id(dict(game.headers), ids[1:])
  return EncodedGame(ident, game.headers.get("Result", "*"), ids, states), None
