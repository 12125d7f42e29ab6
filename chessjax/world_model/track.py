"""Watch a trained model track one game: its board next to the true one after every ply.

    python -m chessjax.world_model.track --workdir runs/t1 --moves "e2e4 e7e5 g1f3 b8c6 f1b5"
    python -m chessjax.world_model.track --workdir runs/t1 --pgn game.pgn [--ascii] \
        [--variant chess|atomic] [--checkpoint best|latest]

The moves (UCI, or the first game's mainline of a PGN file) are checked with
`encoding.encode_game` under the rules of `--variant` (default: those of the run's training data,
from its manifest; else standard chess), which names the ply of an illegal move. The model runs
once over the whole sequence; being causal, its output at step t is its state after move t. For
each step the tracker prints the move, the model's argmax board and the true board side by side
(8 ranks each, unicode pieces or `--ascii` letters, wrong squares starred), the auxiliary labels
(side to move, castling, en passant, clocks) predicted vs true, and a marker on every mismatch;
then a summary (exact steps, first wrong step). `--html OUT.html` also writes the game as a
page to step through in a browser (`chessjax.world_model.page`). The conventions of every
evaluation of a workdir (`chessjax.cli`): the checkpoint (`--checkpoint`) is the best one when the
workdir has WORKDIR/best, else the latest; a bad input is a one-line `error: ...`.
"""

import bz2
import gzip
import io
import sys
from functools import partial
from pathlib import Path

import chess
import chess.pgn
import numpy as np
import zstandard

from chessjax import cli, encoding, workdir
from chessjax.data.source import read_manifest, variant_of_manifest
from chessjax.files import write_text
from chessjax.labels import argmax_labels
from chessjax.spec import TrainSpec
from chessjax.world_model import page
from chessjax.world_model.boards import aux_fields, board_lines, describe_differences


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


def training_encoding(run_dir) -> tuple[str, str]:
  """(ep_mode, variant) of a run's training data (from `config.json` and the data's manifest): the
  model learned its en-passant convention and its rules. ("pseudo", "chess") when unknown."""
  try:
    manifest = read_manifest(TrainSpec.from_config(workdir.read_config(run_dir)).data.train)
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return "pseudo", "chess"
  return manifest.get("encoding", {}).get("ep_mode", "pseudo"), variant_of_manifest(manifest)


def track(
  run_dir, ucis, *, restored=None, ep_mode: str | None = None, variant: str | None = None
) -> list[dict]:
  """The model's state after every ply of a game from the initial position.

  `ucis` is a list (or a space-separated string) of UCI moves; an illegal one raises ValueError
  naming its ply. `ep_mode` and `variant` (the rules of the true board) default to those of the
  training data. `restored` may pass `chessjax.workdir.restore(workdir, which)` (default: the
  checkpoint every evaluator scores, `workdir.default_checkpoint`: best, else latest). Returns
  one dict per step t = 0..plies: `step`, `move` (UCI, None at t = 0), `san`, `pred` and `true`
  (uint8[75] label rows), `exact`, `wrong` (label indices) and `differences` (readable lines).
  """
  if isinstance(ucis, str):
    ucis = ucis.split()
  ucis = list(ucis)
  if restored is None:
    restored = workdir.restore(run_dir)
  data_ep_mode, data_variant = training_encoding(run_dir)
  ep_mode, variant = ep_mode or data_ep_mode, variant or data_variant
  moves, states = encoding.encode_game(ucis, ep_mode=ep_mode, variant=variant)
  logits = restored.predict(moves[None].astype(np.int32))
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
  ap = cli.workdir_parser("chessjax.world_model.track", __doc__)
  source = ap.add_mutually_exclusive_group(required=True)
  source.add_argument("--moves", help='UCI moves from the initial position, e.g. "e2e4 e7e5"')
  source.add_argument("--pgn", help="a PGN file: its first game's mainline")
  ap.add_argument("--ascii", action="store_true", help="letters instead of unicode pieces")
  ap.add_argument("--html", metavar="OUT.html", help="also write a page to step through the game")
  ap.add_argument("--ep-mode", choices=encoding.EP_MODES, default=None, help="default: the data's")
  ap.add_argument(
    "--variant", choices=encoding.VARIANTS, default=None, help="rules; default: the data's"
  )
  args = ap.parse_args(argv)

  def run():
    # The training data's encoding is known from config.json alone, before the (slower) model
    # restore, so a typo in the moves fails at once.
    data_ep_mode, data_variant = training_encoding(args.workdir)
    ep_mode, variant = args.ep_mode or data_ep_mode, args.variant or data_variant
    try:
      ucis = read_pgn_mainline(args.pgn, variant) if args.pgn else args.moves.split()
    except OSError as e:  # An unreadable or corrupt (compressed) file: a bad input too.
      raise ValueError(str(e)) from e
    encoding.encode_game(ucis, ep_mode=ep_mode, variant=variant)
    restored = workdir.restore(args.workdir, args.checkpoint)
    steps = track(args.workdir, ucis, restored=restored, ep_mode=ep_mode, variant=variant)
    return ucis, variant, restored, steps

  return cli.run_workdir_command(ap, args, run, report=partial(_print_report, args))


def _print_report(args, tracked) -> None:
  ucis, variant, restored, steps = tracked
  spec, step = restored.spec, restored.step
  print(f"{spec.family} {spec.size}, checkpoint step {step}, {len(ucis)} plies ({variant})")
  if len(steps) > spec.data.max_len:
    print(f"note: steps beyond {spec.data.max_len} are longer than any training sequence")
  for s in steps:
    print()
    print(format_step(s, args.ascii))
  print()
  print(summary(steps))
  if args.html:
    view = page.game_view(
      f"{len(ucis)} plies", ucis, [s["true"] for s in steps], [s["pred"] for s in steps]
    )
    heading = f"{spec.family} {spec.size} at step {step}: {args.workdir}"
    write_text(args.html, page.page_html([view], heading))
    print(f"page: {args.html}")


if __name__ == "__main__":
  sys.exit(main())
