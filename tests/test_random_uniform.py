"""Random-uniform generation: the released games reproduced, the fast game-end test proved equal to
python-chess, worker-count invariance, states, manifest and the writer's safety rules."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import chess
import chess.variant
import numpy as np
import pytest
from termination_walks import ALL_TERMINATIONS

from chessjax.data import read_games, read_manifest
from chessjax.data.shards import MANIFEST, STAGING
from chessjax.encoding import START_ID, id_to_move, labels_to_fen, move_id
from data_prep import random_uniform

REFERENCE_JSONL = Path(__file__).parent / "data" / "reference_random_uniform_seed0_first5.jsonl"


def _reference_games() -> list[dict]:
  return [json.loads(line) for line in REFERENCE_JSONL.read_text().splitlines() if line]


def _generate(tmp_path, name, **kw):
  kw.setdefault("progress", False)
  out = tmp_path / name
  manifest = random_uniform.generate(out, **kw)
  return manifest, list(read_games(out, kw.get("split", "test")))


# --------------------------------------------------------------------------------------------
# Reference compatibility


def test_reference_mode_reproduces_released_games(tmp_path):
  ref = _reference_games()
  assert len(ref) == 5
  manifest, games = _generate(tmp_path, "ref", games=5, seed=0, compat="reference")
  assert [g["example_id"] for g in games] == [r["example_id"] for r in ref]
  for g, r in zip(games, ref, strict=True):
    assert g["moves"].tolist() == r["moves"], r["example_id"]
    assert g["result"] == r["result"], r["example_id"]
    assert g["plies"] == r["plies"], r["example_id"]
  assert manifest["counts"] == {"games_requested": 5, "generated": 5, "kept": 5, "skipped_short": 0}


def test_reference_mode_short_games_consume_draws_and_ids(tmp_path):
  # With a 200-ply floor games 1 (138 plies) and 2 (75) are skipped; games 3 and 4 must still be
  # the released ones, so skipped games drew from the same stream and kept their id numbers.
  ref = {r["example_id"]: r for r in _reference_games()}
  manifest, games = _generate(tmp_path, "ref", games=3, seed=0, compat="reference", min_plies=200)
  assert [g["example_id"] for g in games] == [
    "cwm_random_00000",
    "cwm_random_00003",
    "cwm_random_00004",
  ]
  for g in games:
    assert g["moves"].tolist() == ref[g["example_id"]]["moves"]
  assert manifest["counts"]["skipped_short"] == 2
  assert manifest["counts"]["generated"] == 5


def test_yardstick_loop_matches_reference_mode():
  # The released loop itself (python-chess's is_game_over every ply) against play_random_game.
  for seed in (1, 2):
    slow_rng, fast_rng = random.Random(seed), random.Random(seed)
    for _ in range(3):
      board, moves = chess.Board(), []
      while not board.is_game_over(claim_draw=True):
        legal = list(board.legal_moves)
        move = legal[slow_rng.randrange(len(legal))]
        moves.append(move_id(move))
        board.push(move)
      fast_moves, _, outcome = random_uniform.play_random_game(fast_rng.randrange)
      assert fast_moves[1:] == moves
      assert outcome.result() == board.result(claim_draw=True)


# --------------------------------------------------------------------------------------------
# Default mode, states, manifest


@pytest.mark.multiprocess
def test_default_mode_identical_for_any_worker_count(tmp_path):
  m1, g1 = _generate(tmp_path, "w1", games=20, seed=3, workers=1)
  m2, g2 = _generate(tmp_path, "w2", games=20, seed=3, workers=2)
  assert len(g1) == len(g2) == 20
  for a, b in zip(g1, g2, strict=True):
    assert a["example_id"] == b["example_id"]
    assert a["result"] == b["result"]
    np.testing.assert_array_equal(a["moves"], b["moves"])
    np.testing.assert_array_equal(a["states"], b["states"])
  assert m1["counts"] == m2["counts"]
  assert m1["terminations"] == m2["terminations"]
  assert m1["splits"] == m2["splits"]
  # Game n depends on (seed, n) only: a shorter run is a prefix, another seed differs.
  _, g_short = _generate(tmp_path, "short", games=3, seed=3, workers=1)
  assert [g["example_id"] for g in g_short] == [g["example_id"] for g in g1[:3]]
  for a, b in zip(g_short, g1, strict=False):
    np.testing.assert_array_equal(a["moves"], b["moves"])
  _, g_other = _generate(tmp_path, "other", games=3, seed=4, workers=1)
  assert g_other[0]["moves"].tolist() != g1[0]["moves"].tolist()
  assert g1[0]["example_id"] == "cwm_uniform_s3_00000"
  assert random_uniform.game_seed(3, 0) != random_uniform.game_seed(3, 1)
  assert random_uniform.game_seed(3, 0) != random_uniform.game_seed(4, 0)


@pytest.mark.parametrize("ep_mode", ["pseudo", "legal"])
def test_states_match_python_chess(tmp_path, ep_mode):
  _, games = _generate(tmp_path, ep_mode, games=6, seed=11, ep_mode=ep_mode)
  _, ref = _generate(
    tmp_path, ep_mode + "_ref", games=2, seed=0, compat="reference", ep_mode=ep_mode
  )
  checked = 0
  for game in games + ref:
    moves, states = game["moves"], game["states"]
    assert moves[0] == START_ID
    assert states.shape == (game["plies"] + 1, 75)
    board = chess.Board()
    fen = (lambda b: b.fen(en_passant="fen")) if ep_mode == "pseudo" else (lambda b: b.fen())
    assert labels_to_fen(states[0]) == fen(board)
    for t in range(1, len(moves)):
      move = chess.Move.from_uci(id_to_move(moves[t]))
      assert board.is_legal(move)
      board.push(move)
      assert labels_to_fen(states[t]) == fen(board), (game["example_id"], t)
      checked += 1
    assert board.result(claim_draw=True) == game["result"]
    assert board.is_game_over(claim_draw=True)
  assert checked > 1000


def test_manifest_contents(tmp_path):
  manifest, games = _generate(tmp_path, "m", games=7, seed=5, ep_mode="legal", split="random")
  assert manifest == read_manifest(tmp_path / "m")
  assert manifest["kind"] == "random_uniform"
  gen = manifest["generator"]
  assert gen["name"] == "data_prep.random_uniform"
  assert gen["mode"] == "default" and gen["seed"] == 5
  assert gen["python_chess"] == chess.__version__ == "1.11.2"
  assert gen["id_format"] == random_uniform.DEFAULT_ID
  assert manifest["encoding"]["ep_mode"] == "legal"
  c = manifest["counts"]
  assert c["games_requested"] == c["kept"] == 7
  assert c["generated"] == c["kept"] + c["skipped_short"]
  assert list(manifest["splits"]) == ["random"]
  assert manifest["splits"]["random"]["games"] == 7
  plies = [g["plies"] for g in games]
  assert manifest["splits"]["random"]["plies"] == manifest["plies"]["total"] == sum(plies)
  assert manifest["plies"]["max"] == max(plies) and manifest["plies"]["min"] == min(plies) >= 20
  assert sum(manifest["terminations"].values()) == 7
  assert set(manifest["terminations"]) <= {t.name.lower() for t in ALL_TERMINATIONS}
  assert manifest["elapsed_s"] > 0 and manifest["games_per_s"] > 0
  assert manifest["options"]["min_plies"] == 20 and manifest["options"]["workers"] == 1


# --------------------------------------------------------------------------------------------
# Command line, overwrite protection, aborts


def test_cli_refuses_to_overwrite_complete_dataset(tmp_path, capsys):
  out = str(tmp_path / "cli")
  args = ["--games", "2", "--seed", "1", "--out", out, "--workers", "1", "--quiet"]
  assert random_uniform.main(args) == 0
  first = (tmp_path / "cli" / MANIFEST).read_text()
  assert random_uniform.main([*args[:3], "2", *args[4:]]) == 2
  assert "--overwrite" in capsys.readouterr().err
  assert (tmp_path / "cli" / MANIFEST).read_text() == first
  assert random_uniform.main([*args[:3], "2", *args[4:], "--overwrite"]) == 0
  assert json.loads((tmp_path / "cli" / MANIFEST).read_text())["generator"]["seed"] == 2
  with pytest.raises(FileExistsError):
    random_uniform.generate(tmp_path / "cli", games=1, progress=False)


@pytest.mark.parametrize(
  "extra, message",
  [
    (["--games", "0"], "--games must be >= 1"),
    (["--games", "2", "--seed", "-1"], "--seed must be >= 0"),
    (["--games", "2", "--workers", "0"], "--workers must be >= 1"),
    (["--games", "2", "--compat", "reference", "--workers", "2"], "one random stream"),
    (["--games", "2", "--min-plies", "-3"], "--min-plies must be >= 0"),
    (["--games", "2", "--split", "a/b"], "--split must be"),
    (["--games", "2", "--ep-mode", "fen"], "invalid choice"),
    (["--games", "2", "--compat", "released"], "invalid choice"),
  ],
)
def test_cli_bad_arguments(tmp_path, capsys, extra, message):
  with pytest.raises(SystemExit) as info:
    random_uniform.main(["--out", str(tmp_path / "x"), *extra])
  assert info.value.code == 2
  assert message in capsys.readouterr().err
  assert not (tmp_path / "x").exists()


def test_generate_bad_arguments(tmp_path):
  with pytest.raises(ValueError, match="compat"):
    random_uniform.generate(tmp_path / "x", games=1, compat="released")
  with pytest.raises(ValueError, match="ep_mode"):
    random_uniform.generate(tmp_path / "x", games=1, ep_mode="fen")
  with pytest.raises(ValueError, match="one process"):
    random_uniform.generate(tmp_path / "x", games=1, compat="reference", workers=2)
  assert not (tmp_path / "x").exists()


@pytest.mark.multiprocess
def test_failure_aborts_without_a_dataset(tmp_path, monkeypatch):
  out = tmp_path / "abort"
  real_add = random_uniform.shards.DatasetWriter.add
  calls = []

  def failing_add(self, split, record, plies):
    calls.append(plies)
    if len(calls) == 3:
      raise KeyboardInterrupt
    real_add(self, split, record, plies)

  monkeypatch.setattr(random_uniform.shards.DatasetWriter, "add", failing_add)
  with pytest.raises(KeyboardInterrupt):
    random_uniform.generate(out, games=5, seed=0, workers=2, progress=False)
  assert not (out / MANIFEST).exists()
  assert not (out / STAGING).exists()
  assert not list(out.glob("*.array_record"))
  monkeypatch.setattr(random_uniform.shards.DatasetWriter, "add", real_add)
  manifest = random_uniform.generate(out, games=2, seed=0, progress=False)
  assert manifest["counts"]["kept"] == 2


@pytest.mark.multiprocess
def test_killed_run_leaves_no_dataset(tmp_path):
  # SIGTERM (a plain `kill`) unwinds like Ctrl-C: workers stop, staged shards are removed.
  out = tmp_path / "killed"
  cmd = [sys.executable, "-m", "data_prep.random_uniform", "--games", "100000", "--out", str(out)]
  repo = Path(__file__).resolve().parents[1]
  proc = subprocess.Popen(
    [*cmd, "--workers", "2", "--quiet"], cwd=repo, stderr=subprocess.PIPE, text=True
  )
  try:
    deadline = time.monotonic() + 60
    while not list((out / STAGING).glob("*.array_record")) and time.monotonic() < deadline:
      assert proc.poll() is None, proc.stderr.read()
      time.sleep(0.1)
    assert list((out / STAGING).glob("*.array_record")), "the run never started writing"
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  assert proc.returncode == 130
  assert "interrupted" in proc.stderr.read()
  assert not (out / MANIFEST).exists()
  assert not (out / STAGING).exists()
  assert not list(out.glob("*.array_record"))


# --------------------------------------------------------------------------------------------
# Atomic chess (--variant atomic)


@pytest.mark.multiprocess
def test_atomic_games_identical_for_any_worker_count_and_follow_atomic_rules(tmp_path):
  m1, g1 = _generate(tmp_path, "a1", games=12, seed=3, variant="atomic", workers=1)
  m2, g2 = _generate(tmp_path, "a2", games=12, seed=3, variant="atomic", workers=2)
  assert m1["splits"] == m2["splits"] and m1["counts"] == m2["counts"]
  assert m1["encoding"]["variant"] == "atomic" and m1["generator"]["id_format"].startswith("cwm_at")
  _, chess_games = _generate(tmp_path, "c", games=1, seed=3)
  assert chess_games[0]["moves"].tolist() != g1[0]["moves"].tolist()
  checked = 0
  for a, b in zip(g1, g2, strict=True):
    assert a["example_id"] == b["example_id"] and a["example_id"].startswith(
      "cwm_atomic_uniform_s3_"
    )
    np.testing.assert_array_equal(a["moves"], b["moves"])
    np.testing.assert_array_equal(a["states"], b["states"])
    board = chess.variant.AtomicBoard()
    for t in range(1, len(a["moves"])):
      assert not board.is_game_over(claim_draw=True)
      move = chess.Move.from_uci(id_to_move(a["moves"][t]))
      assert board.is_legal(move)
      board.push(move)
      assert labels_to_fen(a["states"][t]) == board.fen(en_passant="fen")
      checked += 1
    assert board.is_game_over(claim_draw=True) and board.result(claim_draw=True) == a["result"]
  assert checked > 500
  assert "variant_loss" in m1["terminations"]


def test_atomic_reference_mode_refused(tmp_path, capsys):
  with pytest.raises(ValueError, match="standard-chess"):
    random_uniform.generate(tmp_path / "x", games=1, compat="reference", variant="atomic")
  with pytest.raises(ValueError, match="variant"):
    random_uniform.generate(tmp_path / "x", games=1, variant="crazyhouse")
  with pytest.raises(SystemExit):
    random_uniform.main(["--out", str(tmp_path / "x"), "--games", "1", "--compat", "reference",
                         "--variant", "atomic"])  # fmt: skip
  assert "standard-chess" in capsys.readouterr().err
  assert not (tmp_path / "x").exists()
  manifest = random_uniform.generate(tmp_path / "chess", games=1, progress=False)
  assert manifest["encoding"]["variant"] == "chess"
