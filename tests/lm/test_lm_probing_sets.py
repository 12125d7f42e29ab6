"""`data_prep.probing_sets`: the selection procedure on a hand-made pool with a hand-worked answer,
every written row re-derived with python-chess, and bad input (Toshniwal et al. 2022, section 3.2,
section 4 "Data")."""

import json
import random

import chess
import pytest

from chessjax.lm import probing
from data_prep import probing_sets

# min_len 2, max_len 3, seed 42: every pool game below with >= 4 plies draws randint(2, 3); the
# first draws of random.Random(42).randint(2, 3) are 2, 2, 3, 2, 2, 2, 2.
POOL = [
  "e2e4 e7e5",  # 2 plies <= min_len: no draw
  "e2e4 e7e5 g1f3 b8c6",  # L=2: "e2e4 e7e5" is a prefix of a training game -> excluded
  "d2d4 d7d5 c2c4 e7e6",  # L=2: next move c2c4 is a pawn move -> skipped
  "c2c4 e7e5 b1c3 g8f6 g1f3",  # L=3: next g8f6, a knight -> row 0
  "c2c4 e7e5 g1f3 b8c6",  # L=2: next g1f3 -> row 1
  "c2c4 e7e5 b1c3 b8c6",  # L=2: "c2c4 e7e5" already used by row 1 -> skipped (no redraw)
  "d2d4 e7e5 e1e3 b8c6",  # L=2: next move e1e3 is illegal -> skipped, counted
  "g1f3 d7d5 b1c3 c8g4",  # L=2: next b1c3 -> row 2, count reached
  "e2e4 d7d5 e4d5 d8d5",  # not walked
]
TRAIN = ["e2e4 e7e5 f1c4", "d2d4 g8f6 c2c4"]


def test_hand_made_pool_hand_worked_answer():
  pool = [g.split() for g in POOL]
  end, start, skipped = probing_sets.select(
    pool, [g.split() for g in TRAIN], count=3, min_len=2, max_len=3, seed=42
  )
  assert [r["prefix"] for r in end] == ["c2c4 e7e5 b1c3", "c2c4 e7e5", "g1f3 d7d5"]
  assert [r["oracle_prefix"] for r in end] == ["Pc2c4 Pe7e5 Nb1c3", "Pc2c4 Pe7e5", "Ng1f3 Pd7d5"]
  assert dict(skipped) == {
    "too_short": 1,
    "excluded": 1,
    "next_move": 1,
    "already_used": 1,
    "illegal_move": 1,
  }
  # Step 4 with random.seed(42): choice(sorted other squares) then choice(sorted other types) per
  # row; the draws pick index 0 of [b8 d8 e8 f8], 0 of [B K Q], 1 of [b1 d1], 0 of [Q], 0 of
  # [f3 h1], 0 of [R].
  assert end[0] == {
    "prefix": "c2c4 e7e5 b1c3",
    "oracle_prefix": "Pc2c4 Pe7e5 Nb1c3",
    "piece_type": "N",
    "starting_square": "g8",
    "ending_square": "f6",
    "legal_ending_square": ["e7", "h6", "f6"],
    "other_piece_type": "N",
    "other_starting_square": "b8",
    "other_ending_square": ["c6", "a6"],
  }
  assert start[0] == {
    "prefix": "c2c4 e7e5 b1c3",
    "oracle_prefix": "Pc2c4 Pe7e5 Nb1c3",
    "piece_type": "N",
    "starting_square": "g8",
    "legal_starting_square": ["g8", "b8"],
    "other_piece_type": "B",
    "other_starting_square": ["f8"],
  }
  assert (end[1]["piece_type"], end[1]["starting_square"], end[1]["ending_square"]) == (
    "N",
    "g1",
    "f3",
  )
  assert end[1]["legal_ending_square"] == ["h3", "f3"]
  assert (end[1]["other_starting_square"], end[1]["other_piece_type"]) == ("d1", "Q")
  assert end[1]["other_ending_square"] == ["a4", "b3", "c2"]
  assert start[1]["legal_starting_square"] == ["g1", "b1"]
  assert (start[1]["other_piece_type"], start[1]["other_starting_square"]) == ("Q", ["d1"])
  assert (end[2]["starting_square"], end[2]["ending_square"]) == ("b1", "c3")
  assert end[2]["legal_ending_square"] == ["c3", "a3"]
  assert (end[2]["other_starting_square"], end[2]["other_piece_type"]) == ("f3", "N")
  assert end[2]["other_ending_square"] == ["g5", "e5", "h4", "d4", "g1"]
  assert start[2]["legal_starting_square"] == ["f3", "b1"]
  assert (start[2]["other_piece_type"], start[2]["other_starting_square"]) == ("R", ["h1"])


def test_draws_match_python_random_protocol():
  pool = [g.split() for g in POOL]
  random.seed(42)
  expected = [(i, random.randint(2, min(len(g) - 1, 3))) for i, g in enumerate(pool) if len(g) > 2]
  assert probing_sets.draw_prefix_lengths(pool, seed=42, min_len=2, max_len=3) == expected
  assert [L for _, L in expected[:7]] == [2, 2, 3, 2, 2, 2, 2]


def _rederive(end: dict, start: dict, train_prefixes: set[str], min_len: int, max_len: int):
  """Checks one row pair from scratch with python-chess."""
  moves = end["prefix"].split()
  assert start["prefix"] == end["prefix"] and start["oracle_prefix"] == end["oracle_prefix"]
  assert min_len <= len(moves) <= max_len
  assert end["prefix"] not in train_prefixes
  board, oracle = chess.Board(), []
  for uci in moves:
    m = chess.Move.from_uci(uci)
    assert m in board.legal_moves
    san = board.san(m)
    oracle.append(uci if san.startswith("O") else (san[0] if san[0].isupper() else "P") + uci)
    board.push(m)
  assert end["oracle_prefix"] == " ".join(oracle)
  legal = [
    m
    for m in board.legal_moves
    if board.piece_type_at(m.from_square) != chess.PAWN and not board.is_castling(m)
  ]
  letter = lambda sq: board.piece_at(chess.parse_square(sq)).symbol().upper()
  ends_of = lambda sq: [
    chess.square_name(m.to_square) for m in legal if chess.square_name(m.from_square) == sq
  ]
  froms = list(dict.fromkeys(chess.square_name(m.from_square) for m in legal))
  assert len(froms) >= 2 and len({letter(s) for s in froms}) >= 2
  assert end["piece_type"] == letter(end["starting_square"]) == start["piece_type"] != "P"
  actual = chess.Move.from_uci(end["starting_square"] + end["ending_square"])
  assert actual in legal
  assert end["legal_ending_square"] == ends_of(end["starting_square"])
  assert (
    end["other_starting_square"] in froms and end["other_starting_square"] != end["starting_square"]
  )
  assert end["other_piece_type"] == letter(end["other_starting_square"])
  assert end["other_ending_square"] == ends_of(end["other_starting_square"])
  assert start["starting_square"] == end["starting_square"]
  assert start["legal_starting_square"] == [s for s in froms if letter(s) == start["piece_type"]]
  assert start["other_piece_type"] != start["piece_type"]
  assert start["other_starting_square"] == [
    s for s in froms if letter(s) == start["other_piece_type"]
  ]
  assert start["other_starting_square"]
  return actual


def test_every_written_row_rederived(tmp_path, sample_games_uci):
  pool_games = sample_games_uci[:500]
  train_games = sample_games_uci[500:900]
  # A pool game whose prefix is certainly in training: its own copy is in TRAIN.
  train_games = [*train_games, pool_games[3]]
  pool_file, train_file = tmp_path / "pool.txt", tmp_path / "train.txt"
  pool_file.write_text("".join(" ".join(g) + "\n" for g in pool_games))
  train_file.write_text("".join(" ".join(g) + "\n" for g in train_games))
  out = tmp_path / "probe"
  rc = probing_sets.main(
    [
      "--pool",
      str(pool_file),
      "--train",
      str(train_file),
      "--out",
      str(out),
      "--count",
      "120",
      "--min-len",
      "21",
      "--max-len",
      "40",
    ]  # fmt: skip
  )
  assert rc == 0
  end, start = probing.read_rows(out)
  assert len(end) == 120
  train_prefixes = {" ".join(g[:k]) for g in train_games for k in range(1, len(g) + 1)}
  for e, s in zip(end, start, strict=True):
    actual = _rederive(e, s, train_prefixes, 21, 40)
    game = next(g for g in pool_games if " ".join(g).startswith(e["prefix"] + " "))
    assert game[len(e["prefix"].split())] == actual.uci()
  assert len({e["prefix"] for e in end}) == len(end)
  summary = json.loads((out / "summary.json").read_text())
  assert summary["rows"] == 120 and summary["skipped"]["excluded"] <= 1
  assert summary["random_legal_baseline"]["end"] == pytest.approx(
    probing.random_legal_baseline(end, "end")
  )


def test_bad_input_messages(tmp_path, capsys):
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n")
  train = tmp_path / "train.txt"
  train.write_text("h2h3 h7h6\n")
  assert (
    probing_sets.main(["--pool", str(empty), "--train", str(train), "--out", str(tmp_path / "o")])
    == 2
  )
  assert "holds no games" in capsys.readouterr().err
  pool = tmp_path / "pool.txt"
  pool.write_text("e2e4 e7e5 e1e3 b8c6\ng1f3 d7d5 b1c3 c8g4\n")
  rc = probing_sets.main(
    [
      "--pool",
      str(pool),
      "--train",
      str(train),
      "--out",
      str(tmp_path / "o"),
      "--count",
      "5",
      "--min-len",
      "2",
      "--max-len",
      "3",
    ]  # fmt: skip
  )
  assert rc == 0
  err = capsys.readouterr().err
  assert "1 pool game(s) do not replay legally" in err and "only 1 eligible" in err
  summary = json.loads((tmp_path / "o" / "summary.json").read_text())
  assert summary["skipped"]["illegal_move"] == 1 and summary["rows"] == 1
  with pytest.raises(SystemExit):
    probing_sets.main(["--pool", str(tmp_path / "nope.txt"), "--train", str(train), "--out", "x"])
