"""The atomic track end to end with the real engines at low depth (built by `make engines`).

positions (filtered and unfiltered) -> move-pickers -> scoring report, then a rerun from the cache.
The checks are consistency laws that hold for any engine version: an engine answering under its
own rules at the positions' depth plays the recorded best move; Stockfish answering atomic prompts
loses exactly the recorded atomic Win% drop of the chess-best move, always >= the MISTAKE
threshold on filtered positions.
"""

import json
from pathlib import Path

import chess
import chess.variant
import pytest

from chessjax.atomic import pickers, prompts, report, scoring
from data_prep import atomic_positions

DEPTH = 6
pytestmark = pytest.mark.slow


def _read(path):
  return [json.loads(line) for line in open(path)]


@pytest.fixture(scope="module")
def positions(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("atomic")
  out = tmp / "positions.jsonl"
  argv = ["--out", str(out), "--depth", str(DEPTH), "--per-source", "2", "--selfplay-games", "60"]
  argv += ["--selfplay-depth", "3", "--cache", str(tmp / "cache.sqlite"), "--seed", "1"]
  assert atomic_positions.main(argv) == 0
  return tmp, out


def test_filtered_positions_satisfy_the_filter(positions):
  tmp, out = positions
  rows = _read(out)
  summary = json.loads(out.with_name(out.name + ".summary.json").read_text())
  assert [r["source"] for r in rows] == ["chess"] * 2 + ["atomic"] * 2
  assert all(r["synthetic"] for r in rows if r["source"] == "atomic")
  assert summary["counts"]["chess"]["kept"] == 2 and summary["counts"]["atomic"]["kept"] == 2
  assert summary["engines"]["chess"]["name"].startswith("Stockfish")
  assert summary["engines"]["atomic"]["name"].startswith("Fairy-Stockfish")
  for r in rows:
    assert r["depth"] == DEPTH
    std, atm, cross = r["best"]["chess"], r["best"]["atomic"], r["chess_best_under_atomic"]
    assert std["move"] != atm["move"]
    assert std["move"] in r["legal_moves"]["atomic"] and cross["move"] == std["move"]
    assert None is std["mate"] is atm["mate"] is cross["mate"]
    drop = scoring.win_percent(scoring.clamp_cp(atm["cp"], None))
    drop -= scoring.win_percent(scoring.clamp_cp(cross["cp"], None))
    assert drop == pytest.approx(r["chess_best_atomic_win_drop"]) and drop >= 20.0
    assert r["legal_moves"]["chess"] == sorted(m.uci() for m in chess.Board(r["fen"]).legal_moves)
    atomic_board = chess.variant.AtomicBoard(r["fen"])
    assert r["legal_moves"]["atomic"] == sorted(m.uci() for m in atomic_board.legal_moves)
    assert r["prompts"]["chess"] == prompts.render("chess", r["fen"])
    # The move history from the source game's start reaches the position.
    board = prompts.VARIANT_BOARD[r["game_variant"]]()
    for uci in r["moves"]:
      board.push_uci(uci)
    assert board.fen() == r["fen"] and len(r["moves"]) == r["ply"]
    assert r["game_variant"] == r["source"]
    assert set(r["prompts"]) == set(prompts.CONDITIONS)


def test_unfiltered_control_set(positions):
  tmp, _ = positions
  out = tmp / "unfiltered.jsonl"
  argv = ["--out", str(out), "--depth", str(DEPTH), "--per-source", "3", "--selfplay-games", "4"]
  argv += ["--selfplay-depth", "3", "--cache", str(tmp / "cache.sqlite"), "--seed", "1"]
  assert atomic_positions.main([*argv, "--sources", "atomic", "--unfiltered"]) == 0
  rows = _read(out)
  assert len(rows) == 3 and {r["source"] for r in rows} == {"atomic"}


def test_pickers_and_scoring_report(positions):
  tmp, out = positions
  cache = str(tmp / "cache.sqlite")
  answer_files = []
  for name, extra in [
    ("random", ["--picker", "random", "--seed", "0"]),
    ("sf", ["--picker", "engine", "--rules", "standard", "--depth", str(DEPTH)]),
    ("fsf", ["--picker", "engine", "--variant", "atomic", "--depth", str(DEPTH)]),
  ]:
    path = tmp / f"{name}.jsonl"
    argv = ["--positions", str(out), "--out", str(path), "--cache", cache, *extra]
    assert pickers.main(argv) == 0
    answer_files.append(str(path))
  report_dir = tmp / "report"
  argv = [
    "--positions",
    str(out),
    "--answers",
    *answer_files,
    "--cache",
    cache,
    "--bootstrap",
    "500",
  ]
  assert report.main([*argv, "--out", str(report_dir)]) == 0
  scored = _read(report_dir / "scored.jsonl")
  summary = json.loads((report_dir / "report.json").read_text())
  assert summary["n_answers"] == 3 * 4 * 2 and summary["depth"] == DEPTH
  assert set(summary["engines"]) == {"chess", "atomic"}
  by_fen = {r["fen"]: r for r in _read(out)}
  for s in scored:
    position = by_fen[s["fen"]]
    if s["model"].startswith("Stockfish") and s["variant"] == "chess":
      assert s["best"] and s["win_loss"] == 0.0
    if s["model"].startswith("Fairy-Stockfish") and s["variant"] == "atomic":
      assert s["best"] and s["move"] == position["best"]["atomic"]["move"]
    if s["model"].startswith("Stockfish") and s["variant"] == "atomic":
      assert s["move"] == position["best"]["chess"]["move"]
      assert s["win_loss"] == pytest.approx(position["chess_best_atomic_win_drop"])
      assert s["category"] in ("MISTAKE", "BLUNDER")
  assert (report_dir / "win_loss.png").read_bytes()[:4] == b"\x89PNG"
  assert "| atomic |" in (report_dir / "report.md").read_text()
  # A rerun is answered entirely from the cache, also from answer files written before the
  # rename (`ruleset`: "standard" | "atomic" instead of `variant`).
  old_files = []
  for path in answer_files:
    rows = [
      {**r, "ruleset": {"chess": "standard"}.get(r["variant"], "atomic")} for r in _read(path)
    ]
    old = tmp / f"old_{Path(path).name}"
    old.write_text(
      "".join(json.dumps({k: v for k, v in r.items() if k != "variant"}) + "\n" for r in rows)
    )
    old_files.append(str(old))
  argv[argv.index("--answers") + 1 : argv.index("--cache")] = old_files
  assert report.main([*argv, "--out", str(tmp / "report2")]) == 0
  again = json.loads((tmp / "report2" / "report.json").read_text())
  assert all(stats["misses"] == 0 for stats in again["cache"].values())
  assert again["summary"] == summary["summary"]
  assert _read(tmp / "report2" / "scored.jsonl") == scored
