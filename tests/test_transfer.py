"""launch/transfer.py end to end at toy size: chess sources trained by the command, scored on
atomic and chess random-uniform games, fine-tuned and trained from scratch on N atomic games,
scored again; the record's structure, and a rerun that does nothing new."""

import json
import os

import pytest

from chessjax import init_from
from chessjax import workdir as workdirs
from chessjax.world_model import strata
from launch import transfer

pytestmark = pytest.mark.slow

FAMILIES = ("slice",)  # One family: each adds 5 runs (10 commands); nothing here is per family.
NS = (8, 16)


def _argv(work, dataset):
  return [
    "--work", str(work), "--families", ",".join(FAMILIES), "--chess-train", str(dataset),
    "--source-steps", "3", "--steps", "2", "--batch-size", "4", "--max-len", "32",
    "--test-games", "6", "--train-games", ",".join(map(str, NS)), "--eval-every", "3",
    "--eval-batches", "1", "--checkpoint-every", "2",
    "--cores", str(min(os.sched_getaffinity(0))),  # This worker's own core.
  ]  # fmt: skip


def _segments(work) -> int:
  return sum(
    len(json.loads(p.read_text())["segments"]) for p in (work / "runs").glob("*/bench.json")
  )


def test_transfer_end_to_end_and_a_rerun_does_nothing_new(small_dataset, tmp_path, capsys):
  work = tmp_path / "transfer"
  transfer.main(_argv(work, small_dataset))
  record = json.loads((work / "transfer.json").read_text())
  assert list(record["families"]) == list(FAMILIES)
  for family, row in record["families"].items():
    assert row["source"]["workdir"] == f"runs/{family}_source"
    for split in transfer.SPLITS:
      assert row["source"][split]["games"] == 6 and 0 <= row["source"][split]["exact_state"] <= 1
    assert set(row["source"]["atomic"]["strata"]) == set(strata.ATOMIC_STRATA)
    assert list(row["runs"]) == [str(n) for n in NS]
    for n in NS:
      for kind in ("ft", "scratch"):
        run = row["runs"][str(n)][kind]
        assert run["atomic"]["checkpoint_step"] == run["chess"]["checkpoint_step"] == 2
        assert run["atomic"]["loss"] > 0 and run["chess"]["loss"] > 0
      ft = transfer.run_dir(work, family, "ft", n)
      init = workdirs.read_summary(ft)["init"]
      assert init == init_from.read_record(ft) and init["workdir"] == str(
        transfer.run_dir(work, family, "source")
      )
      config = json.loads((ft / workdirs.CONFIG).read_text())
      assert config["data"]["max_train_games"] == n and config["data"]["val_split"] == "none"
      scratch = workdirs.read_summary(transfer.run_dir(work, family, "scratch", n))
      assert "init" not in scratch
  text = (work / "transfer.md").read_text()
  assert "| slice | 8 | 0 |" in text and "| slice | 16 | 0 |" in text  # Per N, seeds, arms.
  assert (work / "transfer.png").read_bytes()[:4] == b"\x89PNG"
  segments = _segments(work)
  capsys.readouterr()
  transfer.main(_argv(work, small_dataset))
  out = capsys.readouterr().out
  assert "0 runs to do of 1\n" in out and "0 runs to do of 4\n" in out  # Sources, then the rest.
  assert _segments(work) == segments  # Nothing trained or scored again.
  assert json.loads((work / "transfer.json").read_text()) == record


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
  args = transfer.parse_args(_argv(tmp_path / "w", small_dataset) + ["--lichess-atomic", str(pgn)])
  args.ns = [4, 8]
  data = transfer.prepare(args, tmp_path / "w")
  manifest = json.loads((data["atomic_train"] / "manifest.json").read_text())
  assert manifest["splits"]["train"]["games"] == 8  # The first max(N) atomic games, no other.
  assert manifest["encoding"]["variant"] == "atomic" and manifest["skipped"]["variant"] == 1
  for split in transfer.SPLITS:  # The same count and seed under each rule set.
    test = json.loads((data[split] / "manifest.json").read_text())
    assert test["splits"]["test"]["games"] == 6 and test["generator"]["seed"] == 0
    assert test["encoding"]["variant"] == split
