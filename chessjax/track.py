"""Watch a trained model track one game: its board next to the true one after every ply.

    python -m chessjax.track --workdir runs/t1 --moves "e2e4 e7e5 g1f3 b8c6 f1b5" [--ascii]
    python -m chessjax.track --workdir runs/t1 --pgn game.pgn [--ascii] [--variant chess|atomic]

The moves (UCI, or the first game's mainline of a PGN file) are checked with
`encoding.encode_game` under the rules of `--variant` (default: those of the run's training data,
from its manifest; else standard chess), which names the ply of an illegal move. The model runs
once over the whole sequence; being causal, its output at step t is its state after move t. For
each step the tracker prints the move, the model's argmax board and the true board side by side
(8 ranks each, unicode pieces or `--ascii` letters, wrong squares starred), the auxiliary labels
(side to move, castling, en passant, clocks) predicted vs true, and a marker on every mismatch;
then a summary (exact steps, first wrong step).

Also here, shared with `chessjax.evaluate`: readable differences between two label rows, a
python-chess board of a (possibly invalid) predicted row, and the SVG of a failure board.
"""

import argparse
import bz2
import gzip
import json
import sys
import textwrap
from pathlib import Path
from xml.sax.saxutils import escape

import chess
import chess.pgn
import chess.svg
import numpy as np
import zstandard

from chessjax import encoding, train
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


# ------------------------------------------------------------------------------------------------
# Label rows as text, boards and SVG


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


# ------------------------------------------------------------------------------------------------
# Tracking one game


def read_pgn_mainline(path, variant: str = "chess") -> list[str]:
  """UCI moves of the first game's mainline in a PGN file (plain, .gz, .bz2 or .zst), which must
  be a game of `variant` (python-chess picks the rules from its `Variant` header)."""
  path = Path(path)
  name = path.name.lower()
  if name.endswith(".gz"):
    f = gzip.open(path, "rt", encoding="utf-8")
  elif name.endswith(".bz2"):
    f = bz2.open(path, "rt", encoding="utf-8")
  elif name.endswith(".zst"):
    import io

    f = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")), "utf-8")
  else:
    f = open(path, encoding="utf-8")
  with f:
    game = chess.pgn.read_game(f)
  if game is None:
    raise ValueError(f"{path} holds no PGN game")
  if game.errors:
    raise ValueError(f"{path}: the first game does not replay: {game.errors[0]}")
  board = game.board()
  if type(board) is not type(encoding.new_board(variant)):
    raise ValueError(f"{path}: the first game is {board.uci_variant}, not {variant}")
  if board.fen() != chess.STARTING_FEN:
    raise ValueError(f"{path}: the first game does not start from the initial position")
  return [m.uci() for m in game.mainline_moves()]


def training_encoding(workdir) -> tuple[str, str]:
  """(ep_mode, variant) of a run's training data (from `config.json` and the data's manifest): the
  model learned its en-passant convention and its rules. ("pseudo", "chess") when unknown."""
  from chessjax.data.source import read_manifest, variant_of_manifest

  try:
    train_path = json.loads((Path(workdir) / "config.json").read_text())["data"]["train"]
    manifest = read_manifest(train_path)
  except (OSError, ValueError, KeyError, TypeError):
    return "pseudo", "chess"
  return manifest.get("encoding", {}).get("ep_mode", "pseudo"), variant_of_manifest(manifest)


def track(
  workdir, ucis, *, restored=None, ep_mode: str | None = None, variant: str | None = None
) -> list[dict]:
  """The model's state after every ply of a game from the initial position.

  `ucis` is a list (or a space-separated string) of UCI moves; an illegal one raises ValueError
  naming its ply. `ep_mode` and `variant` (the rules of the true board) default to those of the
  training data. `restored` may pass `train.restore_for_eval(workdir)`. Returns one dict per step
  t = 0..plies: `step`, `move` (UCI, None at t = 0), `san`, `pred` and `true` (uint8[75] label
  rows), `exact`, `wrong` (label indices) and `differences` (readable lines).
  """
  if isinstance(ucis, str):
    ucis = ucis.split()
  ucis = list(ucis)
  if restored is None:
    restored = train.restore_for_eval(workdir)
  config, run, state, _ = restored
  data_ep_mode, data_variant = training_encoding(workdir)
  ep_mode, variant = ep_mode or data_ep_mode, variant or data_variant
  moves, states = encoding.encode_game(ucis, ep_mode=ep_mode, variant=variant)
  from chessjax.evaluate import argmax_labels  # Lazily: evaluate imports this module.

  logits = run.predict(state["params"], state["rest"], moves[None].astype(np.int32))

  pred = np.asarray(argmax_labels(logits)[0]).astype(np.uint8)
  board, out = encoding.new_board(variant), []
  for t in range(len(moves)):
    move = san = None
    if t > 0:
      move = ucis[t - 1]
      san = board.san(chess.Move.from_uci(move))
      board.push_uci(move)
    wrong = np.nonzero(pred[t] != states[t])[0]
    out.append(
      {
        "step": t,
        "move": move,
        "san": san,
        "pred": pred[t],
        "true": states[t],
        "exact": len(wrong) == 0,
        "wrong": [int(i) for i in wrong],
        "differences": describe_differences(pred[t], states[t]),
      }
    )
  return out


def format_step(s: dict, ascii_pieces: bool = False) -> str:
  """One step as text: a header with a mismatch marker, both boards and the aux labels."""
  ok, bad = ("ok", "XX") if ascii_pieces else ("✓", "✗")
  t = s["step"]
  if s["move"] is None:
    head = "step 0: initial position"
  else:
    number = f"{(t + 1) // 2}." + ("" if t % 2 else "..")
    head = f"step {t}: {number} {s['san']} ({s['move']})"
  n = len(s["wrong"])
  lines = [f"{ok if s['exact'] else bad} {head}" + ("" if s["exact"] else f"  [{n} wrong]")]
  lines += board_lines(s["pred"], s["true"], ascii_pieces)
  pred, true = aux_fields(s["pred"]), aux_fields(s["true"])
  for key in pred:
    mark = "" if pred[key] == true[key] else "   <-- wrong"
    lines.append(f"    {key:<9} model {pred[key]:<5} true {true[key]:<5}{mark}".rstrip())
  return "\n".join(lines)


def summary(steps: list[dict]) -> str:
  """Exact steps and the first wrong step of a tracked game."""
  exact = sum(s["exact"] for s in steps)
  text = f"exact steps: {exact}/{len(steps)} ({100 * exact / len(steps):.2f}%)"
  wrong = [s for s in steps if not s["exact"]]
  if not wrong:
    return text + "; every step exact"
  first = wrong[0]
  after = "the initial position" if first["move"] is None else f"{first['san']} ({first['move']})"
  return text + f"; first wrong step: {first['step']}, after {after}"


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m chessjax.track", description=__doc__.split("\n")[0])
  ap.add_argument("--workdir", required=True, help="training workdir (config.json, checkpoints/)")
  source = ap.add_mutually_exclusive_group(required=True)
  source.add_argument("--moves", help='UCI moves from the initial position, e.g. "e2e4 e7e5"')
  source.add_argument("--pgn", help="a PGN file: its first game's mainline")
  ap.add_argument("--ascii", action="store_true", help="letters instead of unicode pieces")
  ap.add_argument("--ep-mode", choices=encoding.EP_MODES, default=None, help="default: the data's")
  ap.add_argument(
    "--variant", choices=encoding.VARIANTS, default=None, help="rules; default: the data's"
  )
  args = ap.parse_args(argv)
  try:
    # The training data's encoding is known from config.json alone, before the (slower) model
    # restore, so a typo in the moves fails at once.
    data_ep_mode, data_variant = training_encoding(args.workdir)
    ep_mode, variant = args.ep_mode or data_ep_mode, args.variant or data_variant
    ucis = read_pgn_mainline(args.pgn, variant) if args.pgn else args.moves.split()
    encoding.encode_game(ucis, ep_mode=ep_mode, variant=variant)
    restored = train.restore_for_eval(args.workdir)
    steps = track(args.workdir, ucis, restored=restored, ep_mode=ep_mode, variant=variant)
  except (ValueError, FileNotFoundError, OSError) as e:
    ap.error(str(e))
  config, _, _, step = restored
  print(f"{config.family} {config.size}, checkpoint step {step}, {len(ucis)} plies ({variant})")
  if len(steps) > config.data.max_len:
    print(f"note: steps beyond {config.data.max_len} are longer than any training sequence")
  for s in steps:
    print()
    print(format_step(s, args.ascii))
  print()
  print(summary(steps))
  return 0


if __name__ == "__main__":
  sys.exit(main())
