"""Move ids and state labels against python-chess, the oracle (Walker & Lyons, section 2.3,
appendix A.1)."""

import bz2
import random

import chess
import numpy as np
import pytest
from conftest import SAMPLE_PGN
from encoding_helpers import fen_checked, state_of_board

from chessjax import encoding, pgn_reader
from chessjax.encoding import (
  MOVE_VOCAB_SIZE,
  NUM_LABELS,
  PAD_ID,
  START_ID,
  encode_game,
  id_to_move,
  labels_to_fen,
  move_to_id,
)
from data_prep.pgn_files import split_games


def oracle_state(board: chess.Board, ep_mode: str = "pseudo") -> list[int]:
  """Labels written plainly from python-chess's public API, square by square."""
  s = [0] * 75
  for sq, p in board.piece_map().items():  # label index: a8 = 0 ... h1 = 63
    s[8 * (7 - chess.square_rank(sq)) + chess.square_file(sq)] = p.piece_type + 6 * (not p.color)
  s[64] = int(board.turn == chess.BLACK)
  s[65] = int(board.has_kingside_castling_rights(chess.WHITE))
  s[66] = int(board.has_queenside_castling_rights(chess.WHITE))
  s[67] = int(board.has_kingside_castling_rights(chess.BLACK))
  s[68] = int(board.has_queenside_castling_rights(chess.BLACK))
  ep = (
    board.ep_square
    if ep_mode == "pseudo"
    else (board.ep_square if board.has_legal_en_passant() else None)
  )
  if ep is not None:
    s[69] = chess.square_file(ep) + 1
    s[70] = 1 if chess.square_rank(ep) == 2 else 2
  hm, fm = min(board.halfmove_clock, 65535), min(board.fullmove_number, 65535)
  s[71], s[72], s[73], s[74] = hm >> 8, hm & 255, fm >> 8, fm & 255
  return s


def assert_matches_oracle(ucis, ep_mode="pseudo"):
  moves, states = encode_game(ucis, ep_mode=ep_mode)
  assert moves.dtype == np.int32 and states.dtype == np.uint8
  assert moves.shape == (len(ucis) + 1,) and states.shape == (len(ucis) + 1, NUM_LABELS)
  assert moves[0] == START_ID
  board = chess.Board()
  fen_mode = "fen" if ep_mode == "pseudo" else "legal"
  want = [oracle_state(board, ep_mode)]
  for t, uci in enumerate(ucis, 1):
    assert moves[t] == move_to_id(uci)
    board.push(chess.Move.from_uci(uci))
    want.append(oracle_state(board, ep_mode))
    if fen_checked(t, len(ucis)):
      assert labels_to_fen(states[t]) == board.fen(en_passant=fen_mode), f"ply {t}"
  wrong = np.flatnonzero((states != np.array(want, np.uint8)).any(-1))
  assert not wrong.size, f"first wrong ply {wrong[0]}: {states[wrong[0]]} != {want[wrong[0]]}"
  return len(ucis)


def random_game(rng: random.Random, max_plies: int = 700) -> list[str]:
  board, ucis = chess.Board(), []
  while not board.is_game_over() and len(ucis) < max_plies:
    move = rng.choice(list(board.legal_moves))
    ucis.append(move.uci())
    board.push(move)
  return ucis


def test_constants_and_spec_examples():
  assert (MOVE_VOCAB_SIZE, START_ID, PAD_ID, NUM_LABELS) == (20482, 20480, 20481, 75)
  assert move_to_id("e2e4") == 3980
  assert move_to_id("e1g1") == 1310
  assert move_to_id("a7a8q") == 15641
  assert move_to_id("a7a8n") == 15644


def test_every_move_id_round_trips():
  for i in range(20480):
    assert move_to_id(id_to_move(i)) == i
  for bad in (START_ID, PAD_ID, -1, 20482):
    with pytest.raises(ValueError):
      id_to_move(bad)
  for bad in ("e2e9", "0000", "", "e2e4k"):
    with pytest.raises(ValueError):
      move_to_id(bad)


@pytest.mark.slow
def test_real_games_match_python_chess(sample_games_uci):
  plies = sum(assert_matches_oracle(g) for g in sample_games_uci)
  assert plies >= 100_000


@pytest.mark.slow
def test_random_uniform_games_match_python_chess():
  rng, plies, legal_plies = random.Random(1234), 0, 0
  while plies < 100_000:
    game = random_game(rng)
    plies += assert_matches_oracle(game)
    if plies < 20_000:  # ep_mode="legal" on a fifth of them: pins and checks included.
      legal_plies += assert_matches_oracle(game, ep_mode="legal")
  assert legal_plies > 0


@pytest.mark.slow
def test_native_pgn_path_equals_encode_game(sample_games_uci):
  texts = split_games(bz2.open(SAMPLE_PGN, "rt").read())
  for ep_mode in encoding.EP_MODES:
    games, counts = pgn_reader.encode_games(texts, min_plies=0, ep_mode=ep_mode)
    assert len(games) == len(texts) == 5000 and not counts
    for game, ucis in zip(games, sample_games_uci, strict=False):
      moves, states = encode_game(ucis, ep_mode=ep_mode)
      np.testing.assert_array_equal(game.moves, moves)
      np.testing.assert_array_equal(game.states, states)


CRAFTED = {
  "castling_lost_by_king_move": "e2e4 e7e5 e1e2 e8e7 e2e1 e7e8",
  "castling_lost_by_rook_move": "h2h4 a7a5 h1h3 a8a6 h3h1 a6a8",
  "castling_lost_by_rook_capture": "b2b3 g7g6 c1b2 a7a6 b2h8 f8g7 a2a3 g7a1",
  "castling_both_sides": "e2e4 e7e5 g1f3 b8c6 f1c4 d7d6 e1g1 c8g4 d2d3 d8d7 b1c3 e8c8",
  "en_passant_capture": "e2e4 a7a6 e4e5 d7d5 e5d6 c7c5 d6d7 b8d7",
  "en_passant_both_ways": "a2a4 h7h5 a4a5 h5h4 g2g4 h4g3 h2g3 b7b5 a5b6",
}


@pytest.mark.parametrize("name", sorted(CRAFTED))
@pytest.mark.parametrize("ep_mode", encoding.EP_MODES)
def test_crafted_games(name, ep_mode):
  assert_matches_oracle(CRAFTED[name].split(), ep_mode=ep_mode)


@pytest.mark.slow
def test_every_promotion_piece_for_both_colours():
  """Random games (fixed seed) until every promotion piece has appeared for both colours, with
  and without capture; each game is checked label by label."""
  rng, seen = random.Random(7), set()
  while len(seen) < 16:
    ucis = random_game(rng)
    board = chess.Board()
    new = set()
    for u in ucis:
      move = chess.Move.from_uci(u)
      if move.promotion:
        new.add((board.turn, move.promotion, board.is_capture(move)))
      board.push(move)
    if new - seen:
      assert_matches_oracle(ucis)
      seen |= new


def test_clocks_at_100_plies_and_fullmove_high_byte():
  shuffle = ["g1f3", "g8f6", "f3g1", "f6g8"] * 130  # 520 reversible plies.
  moves, states = encode_game(shuffle)
  half = states[:, 71].astype(int) * 256 + states[:, 72]
  full = states[:, 73].astype(int) * 256 + states[:, 74]
  np.testing.assert_array_equal(half, np.arange(521))
  assert states[99, 72] == 99 and states[100, 72] == 100
  assert states[300, 71] == 1 and states[300, 72] == 44
  assert full[509] == 255 and full[510] == 256 and states[510, 73] == 1 and states[510, 74] == 0
  assert_matches_oracle(shuffle)
  # The native PGN path computes its own clocks (the reader's own wrap at 256).
  san = chess.Board().variation_san([chess.Move.from_uci(u) for u in shuffle])
  games, counts = pgn_reader.encode_games([f'[Event "x"]\n\n{san} *\n'], min_plies=0)
  assert not counts
  np.testing.assert_array_equal(games[0].states, states)


@pytest.mark.parametrize(
  "fen, pseudo, legal",
  [
    # Black pawn d5 just pushed; white pawn e5 pinned along the rank by the rook on h5.
    ("8/8/8/K2pP2r/8/8/8/4k3 w - d6 0 2", "d6", "-"),
    # Same without the rook: the capture is legal.
    ("8/8/8/K2pP3/8/8/8/4k3 w - d6 0 2", "d6", "d6"),
    # Diagonal pin of the capturing pawn (king d4, bishop g7).
    ("8/6b1/8/3pP3/3K4/8/8/4k3 w - d6 0 2", "d6", "-"),
    # Removing the captured pawn opens a diagonal onto the king (c4-d5-e6-f7).
    ("8/5b2/8/3pP3/2K5/8/8/4k3 w - d6 0 2", "d6", "-"),
    # A bishop that pins nothing.
    ("8/8/2b5/3pP3/8/8/7K/4k3 w - d6 0 2", "d6", "d6"),
    # No pawn can capture.
    ("4k3/8/8/3p4/8/8/8/4K3 w - d6 0 2", "d6", "-"),
  ],
)
def test_en_passant_modes_with_pins(fen, pseudo, legal):
  board = chess.Board(fen)
  for mode, expected in (("pseudo", pseudo), ("legal", legal)):
    row = state_of_board(board, mode)
    assert row.tolist() == oracle_state(board, mode)
    assert labels_to_fen(row).split()[3] == expected
    # The native path's legal-mode filter decides the same from the labels alone.
    row = state_of_board(board, "pseudo")[None].copy()
    if mode == "legal":
      pgn_reader._clear_illegal_ep(row, np.array([0]))
      assert labels_to_fen(row[0]).split()[3] == expected


def test_illegal_move_raises_with_ply():
  with pytest.raises(ValueError, match="ply 3"):
    encode_game(["e2e4", "e7e5", "e1e3"])
  with pytest.raises(ValueError, match="ply 1"):
    encode_game(["e2e5"])
  with pytest.raises(ValueError, match="ply 2"):
    encode_game(["e2e4", "xx"])
  with pytest.raises(ValueError, match="ply 7"):  # Castling must be the king's two-square move.
    encode_game("e2e4 e7e5 g1f3 b8c6 f1c4 f8c5 e1h1".split())
  with pytest.raises(ValueError, match="ep_mode"):
    encode_game([], ep_mode="fen")


def test_empty_game_and_fen_round_trip_errors():
  moves, states = encode_game([])
  assert moves.tolist() == [START_ID]
  assert labels_to_fen(states[0]) == chess.STARTING_FEN
  with pytest.raises(ValueError):
    labels_to_fen(np.zeros(74, np.uint8))
