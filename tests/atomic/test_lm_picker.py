"""The offline language-model picker on a tiny GPT-2 trained for a few steps (a real workdir)."""

import json
import random

import chess
import numpy as np
import pytest

from chessjax import train
from chessjax.atomic import pickers, prompts
from chessjax.atomic.lm_picker import LMPicker
from chessjax.lm import tokens as tk
from configs import lm as lm_config
from data_prep import lm_data

pytestmark = pytest.mark.slow  # trains a tiny GPT-2 for 4 steps (compilation dominates)


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
def workdir(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("lm")
  games = tmp / "games.txt"
  games.write_text("".join(" ".join(g) + "\n" for g in _random_games(80, 24, seed=0)))
  argv = ["--uci", str(games), "--out", str(tmp / "data"), "--train-size", "64"]
  assert lm_data.main(argv + ["--pool-size", "0", "--dev-size", "8", "--test-size", "8"]) == 0
  config = lm_config.get_config("model=gpt2,size=tiny,notation=uci,train=all,steps=4")
  config.data.train, config.data.batch_size = str(tmp / "data"), 16
  config.data.max_len, config.data.bucket_lengths = 64, (64,)
  config.optim.lr = 1e-2
  config.train.update(log_every=2, checkpoint_every=1000)
  train.train_and_evaluate(config, tmp / "run")
  return tmp / "run"


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
  assert picker.name.startswith("LM gpt2 tiny uci") and "step 4" in picker.name
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
