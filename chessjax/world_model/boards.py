"""Label rows as people read them: text differences, boards, and SVGs of failures.

Shared by `chessjax.world_model.evaluate` (failure boards) and `chessjax.world_model.track`
(side-by-side boards of one game).
"""

import textwrap
from xml.sax.saxutils import escape

import chess
import chess.svg
import numpy as np

from chessjax.encoding import labels_to_fen

_PIECE_LETTERS = ".PNBRQKpnbrqk"
_PIECE_NAMES = ("empty",) + tuple(
  f"{color} {name}"
  for color in ("white", "black")
  for name in ("pawn", "knight", "bishop", "rook", "queen", "king")
)
_UNICODE = "·" + "".join(chess.UNICODE_PIECE_SYMBOLS[c] for c in _PIECE_LETTERS[1:])
_BOARD_PX, _GAP_PX, _LINE_PX, _MAX_CAPTION_LINES = 320, 24, 16, 30
_CAPTION_CHARS = 82  # Monospace 13 px fits about 84 characters across the two boards.


def _ep_text(file_label: int, rank_label: int) -> str:
  if file_label == 0 and rank_label == 0:
    return "-"
  file = "abcdefgh"[file_label - 1] if 0 < file_label <= 8 else "?"
  rank = {1: "3", 2: "6"}.get(int(rank_label), "?")
  return file + rank


def aux_fields(row) -> dict[str, str]:
  """The auxiliary labels of a row as text: side, castling, ep, halfmove, fullmove."""
  row = np.asarray(row, np.int64)
  return {
    "side": "wb"[row[64]] if row[64] in (0, 1) else "?",
    "castling": "".join(s for s, bit in zip("KQkq", row[65:69], strict=True) if bit) or "-",
    "ep": _ep_text(int(row[69]), int(row[70])),
    "halfmove": str(row[71] * 256 + row[72]),
    "fullmove": str(row[73] * 256 + row[74]),
  }


def describe_differences(pred_row, true_row) -> list[str]:
  """One line per wrong square or state field of a predicted label row vs the true one."""
  pred, true = np.asarray(pred_row, np.int64), np.asarray(true_row, np.int64)
  out = []
  for i in np.nonzero(pred[:64] != true[:64])[0]:
    square = chess.square_name(int(i) ^ 56)
    out.append(f"{square}: model {_PIECE_NAMES[pred[i]]}, true {_PIECE_NAMES[true[i]]}")
  if pred[64] != true[64]:
    side = ("white", "black")
    out.append(f"side to move: model {side[pred[64]]}, true {side[true[64]]}")
  for j, right in enumerate("KQkq"):
    if pred[65 + j] != true[65 + j]:
      yes = ("no", "yes")
      out.append(f"castling {right}: model {yes[pred[65 + j]]}, true {yes[true[65 + j]]}")
  if pred[69] != true[69] or pred[70] != true[70]:
    out.append(f"en passant: model {_ep_text(*pred[69:71])}, true {_ep_text(*true[69:71])}")
  for name, first in (("halfmove clock", 71), ("fullmove number", 73)):
    p, t = pred[first] * 256 + pred[first + 1], true[first] * 256 + true[first + 1]
    if p != t:
      out.append(f"{name}: model {p}, true {t}")
  return out


def board_of_labels(row) -> chess.Board:
  """A python-chess board of a label row; a row whose FEN python-chess refuses keeps its pieces."""
  row = np.asarray(row, np.int64)
  try:
    return chess.Board(labels_to_fen(row))
  except ValueError:
    board = chess.Board(None)
    for i, c in enumerate(row[:64]):
      if 1 <= c <= 12:
        board.set_piece_at(int(i) ^ 56, chess.Piece.from_symbol(_PIECE_LETTERS[c]))
    return board


def _safe_fen(row) -> str:
  try:
    return labels_to_fen(row)
  except ValueError as e:
    return f"(invalid: {e})"


def failure_svg(pred_row, true_row, title: str, move: str | None = None) -> str:
  """An SVG of the predicted (left) and true (right) boards, wrong squares shaded, and a caption:
  `title`, both FENs and the wrong labels."""
  pred, true = np.asarray(pred_row), np.asarray(true_row)
  wrong_squares = [int(i) ^ 56 for i in np.nonzero(pred[:64] != true[:64])[0]]
  fill = dict.fromkeys(wrong_squares, "#e0404080")
  last = chess.Move.from_uci(move) if move else None
  drawn = [
    chess.svg.board(board_of_labels(row), size=_BOARD_PX, fill=fill, lastmove=last)
    for row in (pred, true)
  ]
  diffs = describe_differences(pred, true)
  n_wrong = len(diffs)
  if n_wrong > _MAX_CAPTION_LINES:
    diffs = diffs[: _MAX_CAPTION_LINES - 1] + [f"... and {n_wrong - _MAX_CAPTION_LINES + 1} more"]
  caption = textwrap.wrap(title, _CAPTION_CHARS, subsequent_indent="  ")
  caption += [f"model FEN: {_safe_fen(pred)}", f"true FEN:  {_safe_fen(true)}"]
  caption += [f"{int((pred != true).sum())} wrong labels:"] + [f"  {d}" for d in diffs]
  width, top = 2 * _BOARD_PX + _GAP_PX, 2 * _LINE_PX
  height = top + _BOARD_PX + _LINE_PX * (len(caption) + 1)
  right = _BOARD_PX + _GAP_PX + _BOARD_PX // 2
  parts = [
    f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
    f'width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
    f'<rect width="{width}" height="{height}" fill="white"/>',
    '<g font-family="monospace" font-size="13">',
    f'<text x="{_BOARD_PX // 2}" y="{_LINE_PX + 4}" text-anchor="middle">model (argmax)</text>',
    f'<text x="{right}" y="{_LINE_PX + 4}" text-anchor="middle">true</text>',
  ]
  for k, svg in enumerate(drawn):
    # Nested <svg> elements place each board; their piece <defs> are identical, so sharing ids
    # between them is harmless.
    parts.append(svg.replace("<svg ", f'<svg x="{k * (_BOARD_PX + _GAP_PX)}" y="{top}" ', 1))
  for k, line in enumerate(caption):
    y = top + _BOARD_PX + _LINE_PX * (k + 1) + 4
    parts.append(f'<text x="4" y="{y}" xml:space="preserve">{escape(line)}</text>')
  parts += ["</g>", "</svg>"]
  return "\n".join(parts) + "\n"


def board_lines(pred_row, true_row, ascii_pieces: bool = False) -> list[str]:
  """Model and true boards side by side, rank 8 first; squares the model got wrong are starred."""
  symbols = _PIECE_LETTERS if ascii_pieces else _UNICODE
  pred, true = np.asarray(pred_row, np.int64), np.asarray(true_row, np.int64)
  files = "a b c d e f g h"
  # Each board is "  R " + 16 characters, then two spaces: the right one starts at column 24.
  lines = [f"    {'model':<20}true"]
  for r in range(8):
    left = right = ""
    for i in range(8 * r, 8 * r + 8):  # Label rows run a8..h8, a7..h7, ..., a1..h1.
      left += symbols[pred[i]] + ("*" if pred[i] != true[i] else " ")
      right += symbols[true[i]] + " "
    lines.append(f"  {8 - r} {left}  {8 - r} {right.rstrip()}")
  lines.append(f"    {files:<20}{files}")
  return lines
