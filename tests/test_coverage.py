"""Move-token coverage and length statistics (`data_prep.coverage`) on two small random datasets."""

import json

import chess
import numpy as np

from chessjax import encoding
from chessjax.data import read_games
from data_prep import coverage, random_uniform


def _replayed_ids(path, split) -> tuple[set[int], list[int]]:
  """Move ids and lengths of a split, rebuilt by replaying each game with python-chess."""
  ids, lengths = set(), []
  for game in read_games(path, split):
    board = chess.Board()
    for move_id in game["moves"][1:]:
      move = chess.Move.from_uci(encoding.id_to_move(move_id))
      assert move in board.legal_moves
      board.push(move)
      ids.add(int(move_id))
    lengths.append(len(board.move_stack))
  return ids, lengths


def test_coverage_report_and_cli(tmp_path, capsys):
  paths = []
  for name, seed in (("a", 1), ("b", 2)):
    path = tmp_path / name
    random_uniform.generate(path, games=6, seed=seed, progress=False)
    paths.append(path)
  report = coverage.coverage_report(paths)
  sets = {}
  for path in paths:
    stats = report["splits"][f"{path.name}/test"]
    ids, lengths = _replayed_ids(path, "test")
    sets[path.name] = ids
    assert stats["games"] == 6 and stats["plies"] == sum(lengths)
    assert stats["max_plies"] == max(lengths) and stats["min_plies"] == min(lengths) >= 20
    assert stats["median_plies"] == float(np.median(lengths))
    assert stats["unique_move_ids"] == len(ids)
    assert stats["coverage"] == len(ids) / encoding.NUM_MOVE_IDS
  (overlap,) = report["overlap"]
  assert overlap["shared"] == len(sets["a"] & sets["b"])
  assert overlap["only_a"] == len(sets["a"] - sets["b"])
  assert overlap["only_b"] == len(sets["b"] - sets["a"])
  out = tmp_path / "report.json"
  assert coverage.main([str(p) for p in paths] + ["--json", str(out)]) == 0
  assert json.loads(out.read_text()) == report
  assert "| a/test | 6 |" in capsys.readouterr().out
  assert coverage.main([str(tmp_path / "missing")]) == 2
