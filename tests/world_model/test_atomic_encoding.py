"""Atomic chess (Co & Konuganti, 2026): `encode_game(..., variant="atomic")` against python-chess's
`AtomicBoard`, the oracle, at every ply of random, crafted and engine-played games; the legal
en-passant label; illegal atomic moves; and a dataset of atomic games through training and
`chessjax.world_model.track`."""

import random

import chess
import chess.variant
import numpy as np
import pytest
from conftest import SMOKE_FAMILY, TEST_DATA
from encoding_helpers import fen_checked, state_of_board

from chessjax import encoding
from chessjax.encoding import NUM_LABELS, START_ID, encode_game, labels_to_fen, move_to_id

SELFPLAY = TEST_DATA / "atomic_selfplay_uci.txt"
Atomic = chess.variant.AtomicBoard


def legal_ep(board: chess.Board) -> bool:
  """Whether an en-passant capture is among the board's legal moves (python-chess's own list)."""
  return any(board.is_en_passant(m) for m in board.legal_moves)


def oracle_state(board: chess.Board, ep_mode: str = "pseudo") -> list[int]:
  """Labels written plainly from python-chess's public API, square by square."""
  s = [0] * NUM_LABELS
  for sq, p in board.piece_map().items():  # label index: a8 = 0 ... h1 = 63
    s[8 * (7 - chess.square_rank(sq)) + chess.square_file(sq)] = p.piece_type + 6 * (not p.color)
  s[64] = int(board.turn == chess.BLACK)
  rights = board.clean_castling_rights()
  s[65:69] = [
    int(bool(rights & chess.BB_SQUARES[sq])) for sq in (chess.H1, chess.A1, chess.H8, chess.A8)
  ]
  ep = board.ep_square if ep_mode == "pseudo" or legal_ep(board) else None
  if ep is not None:
    s[69] = chess.square_file(ep) + 1
    s[70] = 1 if chess.square_rank(ep) == 2 else 2
  hm, fm = min(board.halfmove_clock, 65535), min(board.fullmove_number, 65535)
  s[71], s[72], s[73], s[74] = hm >> 8, hm & 255, fm >> 8, fm & 255
  return s


def oracle_fen(board: chess.Board, ep_mode: str) -> str:
  fields = board.fen(en_passant="fen").split()
  if ep_mode == "legal" and not legal_ep(board):
    fields[3] = "-"
  return " ".join(fields)


def assert_matches_oracle(ucis, ep_mode="pseudo") -> int:
  """Checks every ply of an atomic game; returns its number of plies."""
  moves, states = encode_game(ucis, ep_mode=ep_mode, variant="atomic")
  assert moves.dtype == np.int32 and states.dtype == np.uint8
  assert moves.shape == (len(ucis) + 1,) and states.shape == (len(ucis) + 1, NUM_LABELS)
  assert moves[0] == START_ID
  board = Atomic()
  want, rebuilt, fen_plies = [], [], []
  for t in range(len(ucis) + 1):
    if t:
      assert moves[t] == move_to_id(ucis[t - 1])
      board.push(chess.Move.from_uci(ucis[t - 1]))
    want.append(oracle_state(board, ep_mode))
    if fen_checked(t, len(ucis)):  # The FEN and the board rebuilt from it.
      fen = labels_to_fen(states[t])
      assert fen == oracle_fen(board, ep_mode), t
      # The FEN alone rebuilds a board with the same labels (clean castling rights, no stack).
      rebuilt.append(state_of_board(Atomic(fen), ep_mode))
      fen_plies.append(t)
  checks = (
    ("oracle", np.arange(len(states)), np.array(want, np.uint8)),
    ("from its FEN", np.array(fen_plies), np.array(rebuilt)),
  )
  for name, plies, rows in checks:
    wrong = np.flatnonzero((states[plies] != rows).any(-1))
    assert not wrong.size, (
      f"{name}: first wrong ply {plies[wrong[0]]}: {states[plies[wrong[0]]]} != {rows[wrong[0]]}"
    )
  return len(ucis)


def random_atomic_game(rng: random.Random, max_plies: int = 400) -> list[str]:
  board, ucis = Atomic(), []
  while not board.is_game_over() and len(ucis) < max_plies:
    move = rng.choice(list(board.legal_moves))
    ucis.append(move.uci())
    board.push(move)
  return ucis


class Features:
  """What a set of games exercised: explosions, castling, en passant, promotions, endings."""

  def __init__(self):
    self.counts = dict.fromkeys(
      ("blast", "castling", "ep", "capture_promotion", "king_exploded", "rights_exploded"), 0
    )

  def add(self, ucis):
    board = Atomic()
    for u in ucis:
      move = chess.Move.from_uci(u)
      before, rights = chess.popcount(board.occupied), board.clean_castling_rights()
      capture = board.is_capture(move)
      self.counts["castling"] += board.is_castling(move)
      self.counts["ep"] += board.is_en_passant(move)
      self.counts["capture_promotion"] += bool(capture and move.promotion)
      board.push(move)
      self.counts["blast"] += capture and before - chess.popcount(board.occupied) > 2
      moved = chess.BB_SQUARES[move.from_square] | chess.BB_SQUARES[move.to_square]
      self.counts["rights_exploded"] += bool(rights & ~board.castling_rights & ~moved)
    self.counts["king_exploded"] += board.is_variant_end()


# ------------------------------------------------------------------------------------------------
# Random, crafted and engine-played games


def test_variants_and_unknown_variant():
  assert encoding.VARIANTS == ("chess", "atomic")
  with pytest.raises(ValueError, match="variant"):
    encode_game(["e2e4"], variant="crazyhouse")
  assert type(encoding.new_board("atomic")) is Atomic and type(encoding.new_board()) is chess.Board


@pytest.mark.slow
def test_random_atomic_games_match_python_chess():
  rng, features, plies, legal_plies = random.Random(2024), Features(), 0, 0
  while plies < 20_000:
    game = random_atomic_game(rng)
    plies += assert_matches_oracle(game)
    if plies < 4_000:
      legal_plies += assert_matches_oracle(game, ep_mode="legal")
    features.add(game)
  assert legal_plies > 0
  assert min(features.counts.values()) > 0, features.counts


# Each from the initial position: (moves, expected castling labels KQkq after them, squares that
# must be empty at the end).
CRAFTED = {
  # En passant: the blast is centred on the destination square (d6 / d3) and takes the knight
  # beside it; the pawns around survive.
  "ep_explosion_white": ("e2e4 b8c6 e4e5 d7d5 e5d6", (1, 1, 1, 1), "c6 d6 d5 e5"),
  "ep_explosion_black": ("b1c3 e7e5 a2a3 e5e4 d2d4 e4d3", (1, 1, 1, 1), "c3 d3 d4 e4"),
  # Rooks exploded on their home squares: each wing of each side loses its right.
  "rook_explodes_black_kingside": ("b2b3 a7a6 c1b2 a6a5 b2g7", (1, 1, 0, 1), "h8 g8 f8 g7"),
  "rook_explodes_black_queenside": ("g2g3 h7h6 f1g2 h6h5 g2b7", (1, 1, 1, 0), "a8 b8 c8 b7"),
  "rook_explodes_white_kingside": ("a2a3 b7b6 a3a4 c8b7 a4a5 b7g2", (0, 1, 1, 1), "h1 g1 f1 g2"),
  "rook_explodes_white_queenside": ("h2h3 g7g6 h3h4 f8g7 h4h5 g7b2", (1, 0, 1, 1), "a1 b1 c1 b2"),
  # White's own capture on a2 explodes white's a1 rook.
  "own_capture_explodes_own_rook": ("a2a4 b8c6 b1c3 c6b4 g2g3 b4a2 c3a2", (1, 0, 1, 1), "a1 a2"),
  # Nxf7 explodes the king on e8 beside it: the game is over, black has no king.
  "king_explodes": ("g1f3 d7d5 f3e5 a7a6 e5f7", (1, 1, 0, 0), "e8 f7 f8 g8"),
  # Kings side by side (no check between connected kings), then captures beside them.
  "kings_adjacent": (
    "e2e4 e7e5 e1e2 e8e7 e2d3 e7d6 d3c4 d6c6 c4c5 d8g5 d1h5 g5g2 h5f7",
    (0, 0, 0, 0),
    "f1 g1 h1 g2 f7 f8 g8",
  ),
  # Capturing promotions: the new queen explodes at once with its neighbours (white's also
  # takes the black king).
  "capture_promotion_white": (
    "f2f3 c7c6 e1f2 b7b5 b2b4 h7h6 c1b2 d7d6 f2g3 c8e6 e2e4 d8a5 b2f6 e7f6 g3g4 f8e7 c2c4 b5c4 "
    "f1e2 g8f6 g4h4 a5h5 h4g3 h5c5 e4e5 e8f8 e2f1 c5d5 b1c3 g7g6 f1e2 f8g7 c3e4 f6h5 g3f2 e7d8 "
    "e2a6 g7f8 e5e6 d5a5 e6e7 f8e8 e7d8q",
    (0, 0, 0, 0),
    "d8 e8",
  ),
  "capture_promotion_black": (
    "g1h3 b7b6 e2e3 h7h6 b2b4 g7g6 f1d3 e7e6 d3e4 d7d5 h3g1 d8g5 g2g4 g5h4 e4g6 d5d4 e1f1 b6b5 "
    "h2h3 h4h3 e3d4 f7f5 a2a3 b8a6 c2c3 h8h7 g1f3 c8b7 d1e1 f8d6 h1g1 b7f3 e1e2 a8d8 e2c4 d6b4 "
    "a1a2 g8e7 a2b2 h7f7 b2a2 f5f4 c1b2 d8c8 a2a1 f7f6 g4g5 e7g8 f2f3 b5b4 g5f6 b4b3 b2c1 a6b8 "
    "g1g5 e6e5 g5g2 a7a5 g2g3 e8d8 f1g2 c7c6 c3c4 h6h5 g2h1 g8h6 b1c3 h5h4 g3g4 b3b2 c3d1 b2c1q",
    (0, 0, 0, 0),
    "c1 d1 b2",
  ),
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
@pytest.mark.parametrize("ep_mode", encoding.EP_MODES)
def test_crafted_atomic_games(name, ep_mode):
  text, castling, empty = CRAFTED[name]
  ucis = text.split()
  assert_matches_oracle(ucis, ep_mode)
  final = encode_game(ucis, ep_mode=ep_mode, variant="atomic")[1][-1]
  assert tuple(final[65:69]) == castling
  for name_sq in empty.split():
    assert final[chess.parse_square(name_sq) ^ 56] == 0, name_sq
  # Standard chess reads the same moves differently (or refuses them).
  try:
    chess_final = encode_game(ucis, ep_mode=ep_mode)[1][-1]
  except ValueError:
    return
  assert not np.array_equal(chess_final, final)


def test_game_ending_by_king_explosion():
  ucis = CRAFTED["king_explodes"][0].split()
  _, states = encode_game(ucis, variant="atomic")
  final = states[-1]
  assert 12 not in final[:64] and 6 in final[:64]  # No black king; the white king stands.
  fen = labels_to_fen(final)
  assert fen == "rnbq3r/1pp1p1pp/p7/3p4/8/8/PPPPPPPP/RNBQKB1R b KQ - 0 3"
  board = Atomic(fen)
  assert board.is_variant_loss() and board.outcome().winner == chess.WHITE
  with pytest.raises(ValueError, match="ply 6"):  # Nothing follows an explosion.
    encode_game([*ucis, "e7e6"], variant="atomic")


def test_engine_played_games_match_python_chess():
  games = [line.split() for line in SELFPLAY.read_text().splitlines() if line.strip()]
  assert len(games) == 30
  features, plies = Features(), 0
  for ucis in games:
    plies += assert_matches_oracle(ucis)
    assert_matches_oracle(ucis, "legal")
    features.add(ucis)
  assert plies > 1000
  assert features.counts["blast"] > 50 and features.counts["king_exploded"] > 10, features.counts


# ------------------------------------------------------------------------------------------------
# En passant: the legal label follows atomic legality


@pytest.mark.parametrize(
  "fen, push, legal, python_chess",
  [
    # Plain: exd6 e.p. is legal.
    ("4k3/3p4/8/4P3/8/8/8/K7 b - - 0 1", "d7d5", "d6", True),
    # exd6 e.p. would explode white's own king on c5 (python-chess still calls it legal).
    ("4k3/3p4/8/2K1P3/8/8/8/8 b - - 0 1", "d7d5", "-", True),
    # White in check from the rook, but exd6 e.p. explodes the black king on e6 and wins
    # (python-chess calls it illegal).
    ("8/3p4/4k3/4P3/8/8/8/K6r b - - 0 1", "d7d5", "d6", False),
    # Pinned capturer: exd6 e.p. opens the rank to the rook; no king beside d6 to win with.
    ("8/3p4/8/K3P2r/8/8/8/7k b - - 0 1", "d7d5", "-", False),
    # Kings connected: no check between them, so the pin does not count.
    ("8/3p4/8/K3P2r/k7/8/8/8 b - - 0 1", "d7d5", "d6", True),
    # Black captures: cxd3 e.p. explodes nothing of black's; legal.
    ("4k3/8/8/8/2p5/8/3P4/K7 w - - 0 1", "d2d4", "d3", True),
  ],
)
def test_legal_en_passant_label(fen, push, legal, python_chess):
  board = Atomic(fen)
  board.push_uci(push)
  move = chess.Move.from_uci(push)
  assert board.ep_square == (move.from_square + move.to_square) // 2
  for mode, expected in (("pseudo", chess.square_name(board.ep_square)), ("legal", legal)):
    row = state_of_board(board, mode)
    assert row.tolist() == oracle_state(board, mode)
    assert labels_to_fen(row).split()[3] == expected
  assert board.has_legal_en_passant() is python_chess  # python-chess 1.11.2's own test.


def test_legal_en_passant_differs_from_python_chess_only_by_explosions():
  """Where python-chess's `has_legal_en_passant()` (a standard king-safety test) disagrees with
  the legal moves, an en-passant capture explodes a king: one's own (python-chess says legal) or,
  while in check, the enemy's (python-chess says illegal)."""
  rng, ep_positions, disagreements = random.Random(99), 0, 0
  while ep_positions < 400:
    board = Atomic()
    for u in random_atomic_game(rng):
      board.push_uci(u)
      if board.ep_square is None:
        continue
      ep_positions += 1
      ours = state_of_board(board, "legal")[69] != 0
      assert ours == legal_ep(board)
      if ours != board.has_legal_en_passant():
        disagreements += 1
        kings = []
        for m in board.generate_pseudo_legal_ep():
          after = board.copy(stack=False)
          after.push(m)
          kings.append(after.is_variant_end())
        assert any(kings), board.fen()
  assert ep_positions >= 400


# ------------------------------------------------------------------------------------------------
# Illegal atomic moves


ILLEGAL = {
  # The king on g3 takes the bishop on h3: legal in chess, never in atomic (kings cannot capture).
  "king_capture": "f2f4 a7a6 e1f2 d7d6 b2b4 e7e5 c1a3 c8h3 f2g3 d8e7 g3h3",
  # Ng1xh3 explodes white's own king on g3.
  "self_explosion": "f2f4 a7a6 e1f2 d7d6 b2b4 e7e5 c1a3 c8h3 f2g3 d8e7 g1h3",
}


@pytest.mark.parametrize("name", sorted(ILLEGAL))
def test_illegal_atomic_moves_raise_with_ply(name):
  ucis = ILLEGAL[name].split()
  encode_game(ucis)  # Standard chess accepts every move.
  assert_matches_oracle(ucis[:-1])
  with pytest.raises(ValueError, match=r"ply 11: illegal move"):
    encode_game(ucis, variant="atomic")
  with pytest.raises(ValueError, match="ply 3"):
    encode_game(["e2e4", "e7e5", "e4e5"], variant="atomic")
  with pytest.raises(ValueError, match="ply 1"):  # Castling only as the king's two-square move.
    encode_game(["e1h1"], variant="atomic")


# ------------------------------------------------------------------------------------------------
# Downstream: an atomic dataset through training, and tracking under the data's rules


@pytest.mark.slow
def test_atomic_random_uniform_dataset_trains_and_tracks(tmp_path, capsys):
  from chessjax import train
  from chessjax.data.source import read_manifest, variant_of_manifest
  from chessjax.world_model import track
  from configs import cwm
  from data_prep import random_uniform

  data = tmp_path / "atomic"
  random_uniform.generate(data, games=40, seed=1, variant="atomic", split="train", progress=False)
  assert variant_of_manifest(read_manifest(data)) == "atomic"
  config = cwm.get_config(f"family={SMOKE_FAMILY},size=d128,smoke=True")
  config.data.train = str(data)
  config.data.val_split = "train"
  config.data.bucket_lengths = (128,)
  config.train.steps = 4  # The train step of tests/world_model/test_evaluate.py's run.
  summary = train.train_and_evaluate(config, tmp_path / "run")
  assert summary["steps"] == 4 and np.isfinite(summary["validation"]["loss"])

  workdir = tmp_path / "run"
  assert track.training_encoding(workdir) == ("pseudo", "atomic")
  ucis = CRAFTED["king_explodes"][0].split()
  steps = track.track(workdir, ucis)
  _, atomic_states = encode_game(ucis, variant="atomic")
  np.testing.assert_array_equal(np.stack([s["true"] for s in steps]), atomic_states)
  assert steps[-1]["san"] == "Nxf7#"
  # The command line follows the data's rules: an atomic-illegal king capture is refused.
  with pytest.raises(SystemExit):
    track.main(["--workdir", str(workdir), "--moves", ILLEGAL["king_capture"]])
  assert "ply 11" in capsys.readouterr().err
  # ... unless told to use standard rules.
  assert (
    track.main(["--workdir", str(workdir), "--moves", " ".join(ucis), "--variant", "chess"]) == 0
  )
  assert "(chess)" in capsys.readouterr().out


def test_track_reads_an_atomic_pgn_only_as_atomic(tmp_path):
  from chessjax.world_model import track

  ucis = CRAFTED["king_explodes"][0].split()
  san = Atomic().variation_san([chess.Move.from_uci(u) for u in ucis])
  path = tmp_path / "atomic.pgn"
  path.write_text(f'[Event "x"]\n[Variant "Atomic"]\n\n{san} 1-0\n')
  assert track.read_pgn_mainline(path, "atomic") == ucis
  with pytest.raises(ValueError, match="is atomic, not chess"):
    track.read_pgn_mainline(path)
  assert track.training_encoding(tmp_path / "no_run") == ("pseudo", "chess")
