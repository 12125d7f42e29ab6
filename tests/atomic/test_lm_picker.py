"""The offline language-model picker on a real workdir: the suite's GPT-2 tiny, trained as a UCI
language model on sample games (conftest.py `trained_lm`)."""

import json
import random

import chess
import numpy as np
import pytest

from chessjax.atomic import pickers, prompts
from chessjax.atomic.lm_picker import LMPicker
from chessjax.lm import tokens as tk
from chessjax.workdir import SUMMARY

pytestmark = pytest.mark.slow  # a trained GPT-2 tiny (`trained_lm`, shared by the LM tests)


def _random_games(count: int, plies: int, seed: int) -> list[list[str]]:
  rng, games = random.Random(seed), []
  for _ in range(count):
    board, moves = chess.Board(), []
    while len(moves) < plies and not board.is_game_over():
      move = rng.choice(sorted(board.legal_moves, key=lambda m: m.uci()))
      moves.append(move.uci())
      board.push(move)
    games.append(moves)
  return games


@pytest.fixture(scope="module")
def workdir(trained_lm):
  return trained_lm  # Read only: the picker restores it and writes nothing into it.


def _reference_log_prob(picker, history, move) -> float:
  """log P(move | <s> history), each candidate on its own, unpadded."""
  ids = [picker.vocab.bos_id, *tk.tokenize(history, picker.vocab, add_special=False)]
  tail = tk.tokenize([move], picker.vocab, add_special=False).tolist()
  logits = np.asarray(picker.restored.predict(np.array([ids + tail], np.int32)), np.float64)[0]
  logits[:, picker.vocab.piece_ids] = -np.inf
  total = 0.0
  for j, token in enumerate(tail):
    row = logits[len(ids) - 1 + j]
    total += row[token] - (np.log(np.exp(row - row.max()).sum()) + row.max())
  return total


def test_plays_the_legal_move_it_rates_most_likely(workdir, tmp_path):
  picker = LMPicker(workdir)
  # The picker plays the run's best checkpoint (WORKDIR/best, as evaluation does) and says so.
  best = json.loads((workdir / SUMMARY).read_text())["best_step"]
  assert picker.name.startswith("LM gpt2 tiny uci") and f"step {best})" in picker.name
  history = _random_games(1, 9, seed=5)[0]
  board = chess.Board()
  for uci in history:
    board.push_uci(uci)
  for condition in ("chess", "atomic"):
    query = prompts.Query(board.fen(), condition, tuple(history), "chess")
    out = picker.pick(query)
    reference = {m: _reference_log_prob(picker, history, m) for m in query.legal_moves}
    assert out["move"] == max(reference, key=reference.get)
    assert out["lm_log_prob"] == pytest.approx(reference[out["move"]], abs=1e-4)
  # The history must reach the position.
  with pytest.raises(ValueError, match="does not reach"):
    picker.pick(prompts.Query(board.fen(), "chess", tuple(history[:-1]), "chess"))


def test_cli_answers_positions_with_history(workdir, tmp_path):
  games = _random_games(3, 11, seed=7)
  rows = []
  for g in games:
    board = chess.Board()
    for uci in g:
      board.push_uci(uci)
    rows.append({"fen": board.fen(), "source": "chess", "moves": g, "game_variant": "chess"})
  positions = tmp_path / "p.jsonl"
  positions.write_text("".join(json.dumps(r) + "\n" for r in rows))
  out = tmp_path / "a.jsonl"
  argv = ["--positions", str(positions), "--out", str(out), "--picker", "lm"]
  assert pickers.main([*argv, "--workdir", str(workdir)]) == 0
  answers = [json.loads(line) for line in out.read_text().splitlines()]
  assert len(answers) == 6 and {a["variant"] for a in answers} == {"chess", "atomic"}
  for a in answers:
    assert a["move"] in prompts.legal_moves(a["fen"], a["variant"])
    assert a["model"].startswith("LM gpt2 tiny uci")
  # Positions without a history are refused with a message, not guessed at.
  positions.write_text(json.dumps({"fen": rows[0]["fen"], "source": "chess"}) + "\n")
  assert pickers.main([*argv, "--workdir", str(workdir)]) == 1
