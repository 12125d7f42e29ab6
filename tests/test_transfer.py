"""launch/transfer.py end to end at toy size (conftest's `transfer_local`: one family, its chess
source trained by the plan, the four arms at two Ns, every run and the source scored on atomic and
chess random-uniform games): the runs' names and configs, the record's structure (families ->
seeds -> runs -> N -> arm), and a rerun that runs nothing; the lichess export as training set."""

import json
import os
from pathlib import Path

import pytest
from conftest import transfer_flags

from chessjax import init_from, rundir
from launch import local, transfer

pytestmark = pytest.mark.slow

FAMILY, SEED, NS = "gated_deltanet", 0, (8, 16)  # conftest.transfer_flags.
STEPS, SOURCE_STEPS = 2, 3


def _segments(work) -> int:
  return sum(
    len(json.loads(p.read_text())["segments"]) for p in (work / "runs").glob("*/bench.json")
  )


def _check_run(work, arm: str, n: int, scores: dict) -> None:
  """One arm's workdir FAMILY_sSEED_ARM_N: its data, steps, start (the source or none), scores."""
  wd = transfer.run_dir(work, FAMILY, SEED, arm, n)
  assert wd.name == f"{FAMILY}_s{SEED}_{arm}_{n}"
  steps = SOURCE_STEPS + STEPS if arm == "scratch_equal" else STEPS
  assert scores["steps"] == steps and scores["train_cpu_s"] > 0 and scores["eval_cpu_s"] > 0
  for split in transfer.SPLITS:
    assert scores[split]["checkpoint_step"] == steps and scores[split]["loss"] > 0
  config = json.loads((wd / rundir.CONFIG).read_text())
  assert config["data"]["max_train_games"] == n and config["data"]["val_split"] == "none"
  games = "chess_train_random" if arm == "control" else "atomic_train"
  assert Path(config["data"]["train"]).name == games
  summary = rundir.read_summary(wd)
  if arm in transfer.FROM_SOURCE:
    init = summary["init"]
    assert init == init_from.read_record(wd)
    assert init["workdir"] == str(transfer.run_dir(work, FAMILY, SEED, "source"))
  else:
    assert "init" not in summary


def test_transfer_end_to_end_and_a_rerun_runs_nothing(transfer_local, small_dataset, capsys):
  work = transfer_local
  record = json.loads((work / "transfer.json").read_text())
  assert record["args"]["arms"] == list(transfer.ARMS)
  assert list(record["families"]) == [FAMILY]
  assert list(record["families"][FAMILY]["seeds"]) == [str(SEED)]
  cell = record["families"][FAMILY]["seeds"][str(SEED)]
  source = cell["source"]
  assert source["workdir"] == f"runs/{FAMILY}_s{SEED}_source" and source["steps"] == SOURCE_STEPS
  for split in transfer.SPLITS:
    assert source[split]["games"] == 6 and 0 <= source[split]["exact_state"] <= 1
  assert set(source["atomic"]["strata"]) == set(transfer.ATOMIC_STRATA)
  assert list(cell["runs"]) == [str(n) for n in NS]
  for n in NS:
    assert list(cell["runs"][str(n)]) == list(transfer.ARMS)
    for arm, scores in cell["runs"][str(n)].items():
      _check_run(work, arm, n, scores)
  text = (work / "transfer.md").read_text()
  assert f"| {FAMILY} | {NS[0]} | {SEED} |" in text  # A row per N: seeds, then the arms.
  twins = record["test_sets"]["twins"]  # Each atomic test game beside its chess twin.
  assert twins["games"] == 6 and 0 <= twins["with_twin"] <= 6
  after = cell["runs"][str(NS[0])]["ft"]["atomic"]["after_divergence"]
  assert set(after) >= {"games", "steps", "loss", "labelwise", "exact_state", "trajectory"}
  assert (work / "transfer.png").read_bytes()[:4] == b"\x89PNG"
  # Again, up to the evaluation (the report always runs): every task has ended, none runs.
  segments, text = _segments(work), (work / "transfer.json").read_text()
  capsys.readouterr()
  core = str(min(os.sched_getaffinity(0)))
  argv = transfer_flags(work, small_dataset) + ["--cores", core, "--until", "evaluate"]
  assert transfer.main(argv) == 0
  out = capsys.readouterr().out
  assert "0 task(s) to run of 22\n" in out, out  # 4 datasets, 1 source, 8 runs, 9 evaluations.
  assert _segments(work) == segments  # Nothing trained or scored again.
  assert (work / "transfer.json").read_text() == text


def test_a_record_of_earlier_sessions_is_not_run_again(transfer_local, small_dataset, tmp_path):
  """`--record` of this protocol, its workdirs gone (another session): the plan trains and scores
  nothing it holds, and the report takes those runs from it; another protocol's is not read."""
  record = tmp_path / "record.json"
  record.write_text((transfer_local / "transfer.json").read_text())
  work = tmp_path / "later"
  args = transfer.parse_args(transfer_flags(work, small_dataset) + ["--record", str(record)])
  tasks = transfer.plan(args, [])
  assert {t.stage for t in tasks} == {"data", "report"}
  assert transfer.collect(args, work) == json.loads(record.read_text())["families"]
  more = transfer_flags(work, small_dataset) + ["--record", str(record), "--steps", "3"]
  other = transfer.parse_args(more)  # Another fine-tune length: another protocol.
  assert transfer.recorded(other) == {}
  assert {t.stage for t in transfer.plan(other, [])} >= {"source", "train", "evaluate"}


def _atomic_pgn(path, games: int) -> None:
  """`games` random atomic games (python-chess's AtomicBoard) and one standard game, as a lichess
  export writes them (the `Variant` header names the rules)."""
  import random

  import chess.pgn
  import chess.variant

  rng = random.Random(0)
  texts = []
  for g in range(games + 1):
    board = chess.variant.AtomicBoard() if g < games else chess.Board()
    while not board.is_game_over() and board.ply() < 60:
      board.push(rng.choice(sorted(board.legal_moves, key=chess.Move.uci)))
    game = chess.pgn.Game.from_board(board)
    texts.append(str(game))
  path.write_text("\n\n".join(texts) + "\n")


def test_a_lichess_atomic_export_is_the_training_set(small_dataset, tmp_path):
  pgn = tmp_path / "atomic.pgn"
  _atomic_pgn(pgn, 12)
  argv = transfer_flags(tmp_path / "w", small_dataset) + ["--lichess-atomic", str(pgn)]
  args = transfer.parse_args(argv + ["--train-games", "4,8", "--arms", "ft,scratch"])
  tasks = [t for t in transfer.plan(args, argv) if t.stage == "data"]
  assert local.run(tasks, local.pool(1), log_dir=tmp_path / "logs").ok
  data = transfer.data_paths(args, Path(args.work))
  manifest = json.loads((data["atomic_train"] / "manifest.json").read_text())
  assert manifest["splits"]["train"]["games"] == 8  # The first max(N) atomic games, no other.
  assert manifest["encoding"]["variant"] == "atomic" and manifest["skipped"]["variant"] == 1
  for split in transfer.SPLITS:  # The same count and seed under each rule set.
    test = json.loads((data[split] / "manifest.json").read_text())
    assert test["splits"]["test"]["games"] == 6 and test["generator"]["seed"] == 0
    assert test["encoding"]["variant"] == split
