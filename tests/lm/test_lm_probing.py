"""The probing scorer (Toshniwal et al. 2022, sections 3.2-3.4 and 5, Tables 4-7) on crafted
logits and positions."""

import chess
import numpy as np
import pytest

from chessjax.lm import probing
from chessjax.lm import tokens as tk

VOCAB = tk.Vocab.default()
V = len(VOCAB)


def _logits(*ranked: str) -> np.ndarray:
  """Logits whose ranking starts with the given tokens (then everything else, lower)."""
  out = np.zeros(V, dtype=np.float32)
  for k, tok in enumerate(ranked):
    out[VOCAB.id(tok)] = 100.0 - k
  return out


def test_score_exm_lgm_rprecision():
  logits = np.stack([_logits("b5", "e2"), _logits("a6", "h3", "e2"), _logits("N", "b5")])
  exact = ["b5", "b5", "b5"]
  legal = [["e2", "d3", "c4", "b5", "a6"], ["e2", "a6"], ["b5"]]
  out = probing.score(logits, exact, legal, VOCAB)
  assert out["rows"] == 3
  assert out["exm"] == pytest.approx(100 / 3)  # only row 0
  assert out["lgm"] == pytest.approx(200 / 3)  # row 2's top-1 is a piece token: wrong
  # R-precision: row 0 top-5 holds b5, e2 and three non-legal tokens -> 2/5; row 1 top-2 = a6,
  # h3 -> 1/2; row 2 top-1 = N -> 0.
  assert out["r_precision"] == pytest.approx(100 * (2 / 5 + 1 / 2 + 0) / 3)
  other = probing.score(logits[:2], [None, None], legal[:2], VOCAB)
  assert "exm" not in other


def test_error_category_one_case_each():
  # 1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 (white to move): bishop b5, knight f3, king e1.
  board = probing.board_after("e2e4 e7e5 g1f3 b8c6 f1b5 a7a6")
  cat = lambda start, piece, tok: probing.error_category(board, start, piece, VOCAB.id(tok), VOCAB)
  assert cat("b5", "B", "e3") == "unreachable"  # neither a queen line nor a knight jump
  assert cat("b5", "B", "b5") == "unreachable"  # the start square itself
  assert cat("b5", "B", "N") == "unreachable"  # a non-square token
  assert cat("b5", "B", "b4") == "syntax"  # a queen line, but no bishop move
  assert cat("e1", "K", "g1") == "syntax"  # the king's castling square
  assert cat("b5", "B", "d7") == "path_obstruction"  # c6 knight in the way
  assert cat("f3", "N", "h2") == "path_obstruction"  # own pawn on h2
  # Pinned knight: 1. e4 e5 2. Nc3 Bb4 3. d3 -- after ...Bb4 the c3 knight is pinned once d2 moves.
  pinned = probing.board_after("e2e4 e7e5 b1c3 f8b4 d2d3 g8f6")
  assert pinned.is_pseudo_legal(chess.Move.from_uci("c3d5"))
  assert not pinned.is_legal(chess.Move.from_uci("c3d5"))
  assert probing.error_category(pinned, "c3", "N", VOCAB.id("d5"), VOCAB) == "pseudo_legal"


def _rows():
  """Two hand-made probing rows (end, start), the first from Table 2 of the paper."""
  end = [
    {
      "prefix": "e2e4 e7e5 g1f3 b8c6 d2d4 h7h6",
      "oracle_prefix": "Pe2e4 Pe7e5 Ng1f3 Nb8c6 Pd2d4 Ph7h6",
      "piece_type": "B",
      "starting_square": "f1",
      "ending_square": "b5",
      "legal_ending_square": ["e2", "d3", "c4", "b5", "a6"],
      "other_piece_type": "N",
      "other_starting_square": "f3",
      "other_ending_square": ["d2", "g1", "h4", "g5", "e5"],
    },
    {
      "prefix": "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6",
      "oracle_prefix": "Pe2e4 Pe7e5 Ng1f3 Nb8c6 Bf1b5 Pa7a6",
      "piece_type": "B",
      "starting_square": "b5",
      "ending_square": "c6",
      "legal_ending_square": ["f1", "e2", "d3", "c4", "a4", "c6", "a6"],
      "other_piece_type": "N",
      "other_starting_square": "f3",
      "other_ending_square": ["g1", "h4", "d4", "g5", "e5"],
    },
  ]
  start = [
    {
      "prefix": e["prefix"],
      "oracle_prefix": e["oracle_prefix"],
      "piece_type": "B",
      "starting_square": e["starting_square"],
      "legal_starting_square": [e["starting_square"]],
      "other_piece_type": "N",
      "other_starting_square": ["f3", "b1"] if i == 0 else ["f3"],
    }
    for i, e in enumerate(end)
  ]
  return end, start


def test_prompts_per_notation():
  end, start = _rows()
  toks = lambda ids: [VOCAB.tokens[i] for i in ids]
  uci = probing.prompt(end[0], start[0], "end_actual", VOCAB, "uci")
  assert toks(uci) == ["<s>", *"e2 e4 e7 e5 g1 f3 b8 c6 d2 d4 h7 h6".split(), "f1"]
  ap = probing.prompt(end[0], start[0], "end_other", VOCAB, "ap")
  assert toks(ap)[:4] == ["<s>", "P", "e2", "e4"] and toks(ap)[-2:] == ["N", "f3"]
  rap = probing.prompt(end[0], start[0], "start_other", VOCAB, "rap")
  assert toks(rap)[-2:] == ["h6", "N"] and "P" not in toks(rap)
  with pytest.raises(ValueError, match="not available"):
    probing.prompt(end[0], start[0], "start_actual", VOCAB, "uci")
  assert probing.tasks_for("uci") == ("end_actual", "end_other")


def test_evaluate_batched_with_masking_and_errors():
  end, start = _rows()
  calls = []

  def logits_fn(tokens, lengths):
    # A fake model: the top token is a piece letter, then a square chosen from the last token.
    calls.append(tokens.shape)
    assert tokens.dtype == np.int32 and lengths.dtype == np.int32
    out = np.zeros((len(tokens), V), dtype=np.float32)
    for i, n in enumerate(lengths):
      last = VOCAB.tokens[tokens[i, n - 1]]
      guess = {"f1": "b5", "b5": "b4", "f3": "g1", "B": "f1", "N": "b1"}[last]
      out[i, VOCAB.id("Q")] = 10
      out[i, VOCAB.id(guess)] = 5
    return out

  res = probing.evaluate(end, start, logits_fn, VOCAB, notation="rap", batch_size=3)
  assert set(calls) == {(3, len(probing.prompt(end[0], start[0], "end_actual", VOCAB, "rap")))}
  ea = res["end_actual"]
  assert ea["exm"] == 50 and ea["lgm"] == 50  # row 0 b5 exact; row 1 b4 syntax error
  assert ea["errors"]["counts"] == {
    "unreachable": 0,
    "syntax": 1,
    "pseudo_legal": 0,
    "path_obstruction": 0,
  }
  assert ea["errors"]["by_piece"]["B"]["syntax"] == 1
  assert res["end_other"]["lgm"] == 100
  assert res["start_actual"]["exm"] == 50 and res["start_actual"]["lgm"] == 50
  assert res["start_other"]["lgm"] == 50  # row 0 b1 legal, row 1 b1 not
  ap = probing.evaluate(end, start, logits_fn, VOCAB, notation="ap", batch_size=2)
  assert ap["end_actual"]["lgm"] == 0  # unmasked: the top-1 token is Q, always wrong
  assert ap["end_actual"]["errors"]["counts"]["unreachable"] == 2
  assert set(probing.evaluate(end, start, logits_fn, VOCAB, notation="uci")) == {
    "end_actual",
    "end_other",
  }


def test_baseline_and_piece_counts():
  end, start = _rows()
  assert probing.random_legal_baseline(end, "end") == pytest.approx(100 * (1 / 5 + 1 / 7) / 2)
  assert probing.random_legal_baseline(start, "start") == pytest.approx(100.0)
  counts = probing.piece_type_counts(end, start)
  assert counts["actual"]["B"] == 2 and counts["end_other"]["N"] == 2
  assert counts["start_other"]["total"] == 2
  table = probing.piece_type_table(counts)
  assert "| B | 2 / 164 | 0 / 170 | 0 / 161 |" in table


def test_read_rows_checks_alignment(tmp_path):
  import json

  end, start = _rows()
  (tmp_path / "end.jsonl").write_text("".join(json.dumps(r) + "\n" for r in end))
  (tmp_path / "start.jsonl").write_text("".join(json.dumps(r) + "\n" for r in start))
  assert probing.read_rows(tmp_path) == (end, start)
  (tmp_path / "start.jsonl").write_text(json.dumps(start[1]) + "\n" + json.dumps(start[0]) + "\n")
  with pytest.raises(ValueError, match="not row-aligned"):
    probing.read_rows(tmp_path)
