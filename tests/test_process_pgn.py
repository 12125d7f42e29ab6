"""`data_prep.process_pgn`: shards, manifest, split rule, bad input, parallelism, kill and rerun."""

import bz2
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import chess
import chess.variant
import numpy as np
import pytest
import zstandard
from conftest import REPO, SAMPLE_PGN, TEST_DATA

from chessjax import encoding
from chessjax.data import read_games, read_manifest
from data_prep import ordered_pool, process_pgn


def run(*args):
  return process_pgn.run(process_pgn.parse_args([str(a) for a in args]))


@pytest.fixture(scope="module")
def sample_text():
  return bz2.open(SAMPLE_PGN, "rt", encoding="utf-8").read()


@pytest.fixture(scope="module")
def small_pgn(tmp_path_factory, sample_text):
  """The first 300 games of the sample as a plain .pgn."""
  games = sample_text.split("\n\n[Event ")[:300]
  path = tmp_path_factory.mktemp("pgn") / "small.pgn"
  path.write_text("\n\n[Event ".join(games) + "\n")
  return path


@pytest.mark.slow
def test_sample_dataset_matches_encoder_and_split_rule(tmp_path, sample_games_uci):
  out = tmp_path / "ds"
  manifest = run("--pgn", SAMPLE_PGN, "--out", out, "--test-fraction", "0.1")
  assert manifest == read_manifest(out)
  c = manifest["counts"]
  assert c["games_read"] == 5000 and c["kept"] + c["skipped"] == 5000
  assert manifest["skipped"]["too_short"] == c["skipped"] == 290
  splits = manifest["splits"]
  assert sum(s["games"] for s in splits.values()) == c["kept"]
  src = manifest["sources"][0]
  assert src["sha256"] == hashlib.sha256(SAMPLE_PGN.read_bytes()).hexdigest()
  assert src["bytes"] == SAMPLE_PGN.stat().st_size
  # Every game lands in the split of its id's MD5 bucket (Walker & Lyons, appendix B.1).
  seen = 0
  long_games = iter(g for g in sample_games_uci if len(g) >= 20)
  for split in ("train", "validation", "test"):
    for game in read_games(out, split):
      bucket = int.from_bytes(hashlib.md5(game["example_id"].encode()).digest()[:8], "little")
      bucket %= 10000
      expected = "validation" if bucket < 50 else "test" if bucket < 1050 else "train"
      assert split == expected
      assert game["plies"] == len(game["moves"]) - 1 == game["states"].shape[0] - 1
      assert game["example_id"].startswith("https://lichess.org/")
      seen += 1
  assert seen == c["kept"]
  # In stored order within a split the games are the file's order: compare the first ones.
  by_id = {g["example_id"]: g for g in read_games(out)}
  first = next(long_games)
  match = [g for g in by_id.values() if len(g["moves"]) == len(first) + 1]
  moves, states = encoding.encode_game(first)
  assert any(
    np.array_equal(g["moves"], moves) and np.array_equal(g["states"], states) for g in match
  )
  # Bytes per game: at most 1/10 of the released JSONL (about 17 KB per game).
  size = sum((out / s["file"]).stat().st_size for sp in splits.values() for s in sp["shards"])
  assert size / c["kept"] < 1700


@pytest.mark.multiprocess
def test_workers_and_compression_formats_give_identical_shards(tmp_path, small_pgn):
  raw = small_pgn.read_bytes()
  variants = {
    "plain": small_pgn,
    "gz": tmp_path / "s.pgn.gz",
    "zst": tmp_path / "s.pgn.zst",
  }
  variants["gz"].write_bytes(gzip.compress(raw))
  variants["zst"].write_bytes(zstandard.ZstdCompressor().compress(raw))
  outputs = {}
  for name, path in variants.items():
    run("--pgn", path, "--out", tmp_path / name, "--games-per-shard", "50")
    outputs[name] = tmp_path / name
  run("--pgn", small_pgn, "--out", tmp_path / "k2", "--games-per-shard", "50", "--workers", "2")
  outputs["k2"] = tmp_path / "k2"
  ref = outputs.pop("plain")
  ref_files = sorted(p.name for p in ref.glob("*.array_record"))
  assert len(ref_files) > 3
  for out in outputs.values():
    assert sorted(p.name for p in out.glob("*.array_record")) == ref_files
    for name in ref_files:
      assert (out / name).read_bytes() == (ref / name).read_bytes()
    assert read_manifest(out)["splits"] == read_manifest(ref)["splits"]


def test_max_games_keeps_file_order_and_fixed_split(tmp_path, small_pgn):
  full = run("--pgn", small_pgn, "--out", tmp_path / "all", "--split", "test")
  part = run("--pgn", small_pgn, "--out", tmp_path / "part", "--split", "test", "--max-games", "7")
  assert list(full["splits"]) == ["test"] and full["splits"]["test"]["games"] > 7
  assert part["counts"]["kept"] == 7 and part["counts"]["stopped_at_max_games"]
  ids_all = [g["example_id"] for g in read_games(tmp_path / "all", "test")]
  ids_part = [g["example_id"] for g in read_games(tmp_path / "part", "test")]
  assert ids_part == ids_all[:7]


GOOD = (
  "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 6. Re1 b5 7. Bb3 d6 8. c3 O-O 9. h3 Nb8 "
  "10. d4 Nbd7 11. Nbd2 Bb7 12. Bc2 Re8 1-0"
)


def pgn(headers: dict, movetext: str) -> str:
  return "".join(f'[{k} "{v}"]\n' for k, v in headers.items()) + "\n" + movetext + "\n"


def test_bad_input_is_skipped_and_counted(tmp_path):
  site = lambda i: {"Event": "t", "Site": f"https://example.org/{i}"}  # noqa: E731
  games = [
    pgn(site(0), GOOD),
    pgn(site(1), GOOD.replace("7. Bb3", "7. Bb7")),  # illegal SAN
    pgn({**site(2), "SetUp": "1", "FEN": "4k3/8/8/8/8/8/8/1N2KN2 w - - 0 1"}, "1. Nd2 *"),
    pgn({**site(3), "Variant": "Atomic"}, GOOD),
    pgn(site(4), "*"),  # empty game
    pgn(site(5), GOOD.replace("12. Bc2", "12. --")),  # null move
    pgn({**site(6), "FEN": "4k3/8/8/8/8/8/8/4K3 w - - 0 1"}, "1. Kd2 Kd7 *"),
    pgn(site(7), "1. e4 e5 2. Nf3 *"),  # too short
    pgn(site(8), GOOD),
  ]
  text = "\n".join(games).encode()
  # A latin-1 byte in a header; and a last game cut off mid-movetext (no result marker).
  text += b'\n[Event "t"]\n[White "Bj\xf6rn"]\n\n' + GOOD.encode() + b"\n"
  text += b'\n[Event "t"]\n[Site "https://example.org/99"]\n\n1. e4 e5 2. Nf3 Nc6 3. B'
  path = tmp_path / "bad.pgn"
  path.write_bytes(text)
  manifest = run("--pgn", path, "--out", tmp_path / "out", "--split", "train")
  assert manifest["counts"] == {
    "games_read": 11,
    "kept": 2,
    "skipped": 9,
    "python_chess_fallback": 0,
    "stopped_at_max_games": False,
  }
  assert manifest["skipped"] == {
    "non_utf8": 1,
    "variant": 1,
    "non_standard_start": 2,
    "illegal_or_ambiguous_san": 1,
    "null_move": 1,
    "too_short": 2,
    "truncated_game": 1,
    "unparsable": 0,
  }
  ids = [g["example_id"] for g in read_games(tmp_path / "out")]
  assert ids == ["https://example.org/0", "https://example.org/8"]


def test_python_chess_fallback_for_games_the_native_reader_rejects(tmp_path):
  # python-chess accepts a promotion written without '=', the Rust reader does not.
  ucis = "a2a4 h7h5 a4a5 h5h4 a5a6 h4h3 a6b7 h3g2 b7a8q g2h1q a8b8 h1g1 b8c8 g1f1 e1f1 e7e6 "
  ucis += "c8d8 e8d8 d2d4 d8e8 d4d5 g8f6 e2e4 f6e4"
  board = chess.Board()
  san = board.variation_san([chess.Move.from_uci(u) for u in ucis.split()])
  text = pgn({"Event": "t"}, san.replace("=", "") + " *")
  path = tmp_path / "fallback.pgn"
  path.write_text(text)
  manifest = run("--pgn", path, "--out", tmp_path / "out", "--split", "train")
  assert manifest["counts"]["kept"] == 1 and manifest["counts"]["python_chess_fallback"] == 1
  game = next(read_games(tmp_path / "out"))
  assert encoding.id_to_move(game["moves"][9]) == "b7a8q"
  assert game["example_id"].startswith("md5:")


def test_empty_and_truncated_inputs(tmp_path, small_pgn):
  empty = tmp_path / "empty.pgn"
  empty.write_text("")
  manifest = run("--pgn", empty, "--out", tmp_path / "e")
  assert manifest["counts"]["games_read"] == 0 and manifest["splits"] == {}
  assert list(read_games(tmp_path / "e")) == []
  blob = gzip.compress(small_pgn.read_bytes())
  cut = tmp_path / "cut.pgn.gz"
  cut.write_bytes(blob[: len(blob) // 2])
  manifest = run("--pgn", cut, "--out", tmp_path / "c", "--split", "train")
  assert manifest["sources"][0]["truncated"] and "EOFError" in manifest["sources"][0]["error"]
  assert 50 < manifest["counts"]["kept"] < 300
  full = run("--pgn", small_pgn, "--out", tmp_path / "f", "--split", "train")
  ids_cut = [g["example_id"] for g in read_games(tmp_path / "c")]
  ids_full = [g["example_id"] for g in read_games(tmp_path / "f")]
  assert ids_cut == ids_full[: len(ids_cut)] and full["counts"]["kept"] > len(ids_cut)


def test_bad_arguments_and_existing_dataset(tmp_path, small_pgn, capsys):
  with pytest.raises(SystemExit):
    process_pgn.parse_args(["--pgn", str(tmp_path / "missing.pgn"), "--out", str(tmp_path)])
  with pytest.raises(SystemExit):
    process_pgn.parse_args(["--pgn", str(small_pgn), "--out", str(tmp_path), "--workers", "0"])
  out = tmp_path / "ds"
  run("--pgn", small_pgn, "--out", out, "--max-games", "5")
  before = (out / "manifest.json").read_text()
  assert process_pgn.main(["--pgn", str(small_pgn), "--out", str(out)]) == 2
  assert "--overwrite" in capsys.readouterr().err
  assert (out / "manifest.json").read_text() == before
  run("--pgn", small_pgn, "--out", out, "--max-games", "9", "--overwrite")
  assert read_manifest(out)["counts"]["kept"] == 9
  assert len(list(out.glob("*.array_record"))) == len(read_manifest(out)["splits"])


@pytest.mark.multiprocess
def test_killed_run_leaves_no_dataset_and_rerun_is_clean(tmp_path, sample_text):
  big = tmp_path / "big.pgn"
  big.write_text((sample_text + "\n") * 6)
  out = tmp_path / "ds"
  cmd = [sys.executable, "-m", "data_prep.process_pgn", "--pgn", str(big), "--out", str(out)]
  cmd += ["--games-per-shard", "500", "--split", "train"]
  proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + 120
  while time.time() < deadline and not list((out / ".staging").glob("train-0000[2-9]*")):
    time.sleep(0.02)
  os.kill(proc.pid, signal.SIGKILL)
  proc.wait()
  assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
  assert not (out / "manifest.json").exists()
  with pytest.raises(FileNotFoundError, match="not a prepared dataset"):
    read_manifest(out)
  rerun = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
  assert rerun.returncode == 0, rerun.stderr
  manifest = json.loads((out / "manifest.json").read_text())
  assert manifest["counts"]["kept"] == 6 * 4710
  files = sorted(p.name for p in out.glob("*.array_record"))
  assert files == sorted(s["file"] for s in manifest["splits"]["train"]["shards"])
  assert not (out / ".staging").exists()
  assert sum(1 for _ in read_games(out)) == 6 * 4710


@pytest.mark.multiprocess
def test_sigterm_unwinds_like_ctrl_c_and_stops_the_workers(tmp_path, sample_text):
  """SIGTERM (a plain `kill`, SLURM's notice) mid-run: exit 130 with a message, no dataset, no
  staged shards, no worker left running."""
  big = tmp_path / "big.pgn"
  big.write_text((sample_text + "\n") * 6)
  out = tmp_path / "ds"
  cmd = [sys.executable, "-m", "data_prep.process_pgn", "--pgn", str(big), "--out", str(out)]
  cmd += ["--games-per-shard", "500", "--split", "train", "--workers", "2"]
  proc = subprocess.Popen(
    cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
  )
  try:
    deadline = time.monotonic() + 120
    while not list((out / ".staging").glob("train-0000[2-9]*")) and time.monotonic() < deadline:
      assert proc.poll() is None, proc.stderr.read()
      time.sleep(0.02)
    workers = [int(p) for p in (Path("/proc") / str(proc.pid) / "task").glob("*/children")
               for p in p.read_text().split()]  # fmt: skip
    os.kill(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  assert proc.returncode == 130, "the run finished before it could be stopped"
  assert "interrupted: no dataset written" in proc.stderr.read()
  assert not (out / "manifest.json").exists() and not (out / ".staging").exists()
  deadline = time.monotonic() + 20  # Children that outlive it are reaped by init meanwhile.
  while [w for w in workers if (Path("/proc") / str(w)).exists()] and time.monotonic() < deadline:
    time.sleep(0.1)
  assert workers and not [w for w in workers if (Path("/proc") / str(w)).exists()]


# ------------------------------------------------------------------------------------------------
# Atomic games (--variant atomic)


@pytest.fixture(scope="module")
def atomic_pgn(tmp_path_factory):
  """Engine-played atomic games (the committed fixture) as lichess-style PGN, interleaved with
  standard games, other variants and broken atomic games. Returns (path, kept atomic UCI lists,
  number of atomic games too short to keep)."""
  games = [g.split() for g in (TEST_DATA / "atomic_selfplay_uci.txt").read_text().splitlines()]
  texts, kept = [], []
  for i, ucis in enumerate(games):
    board = chess.variant.AtomicBoard()
    san = board.variation_san([chess.Move.from_uci(u) for u in ucis])
    variant = ("Atomic", "atomic", "ATOM")[i % 3]  # Aliases, case-insensitive (find_variant).
    site = f"https://lichess.org/atomic{i}"
    texts.append(pgn({"Event": "a", "Site": site, "Variant": variant}, san + " *"))
    if len(ucis) >= 20:
      kept.append(ucis)
    if i % 10 == 0:
      texts.append(pgn({"Event": "s", "Site": f"https://example.org/{i}"}, GOOD))
  atomic = {"Event": "a", "Variant": "Atomic"}
  king_capture = "f2f4 a7a6 e1f2 d7d6 b2b4 e7e5 c1a3 c8h3 f2g3 d8e7 g3h3".split()
  king_capture = chess.Board().variation_san([chess.Move.from_uci(u) for u in king_capture])
  texts += [
    pgn({**atomic, "Site": "x/1"}, "1. Nf3 d5 2. Ne5 a6 3. Nxf7 e6 *"),  # Move after explosion.
    pgn({**atomic, "Site": "x/2"}, king_capture + " *"),  # Legal in chess, not in atomic.
    pgn({**atomic, "Site": "x/3"}, "1. e4 e5 2. Nf3 *"),  # Too short.
    pgn({**atomic, "Site": "x/4", "FEN": "4k3/8/8/8/8/8/8/4K2R w K - 0 1"}, "1. Rh2 *"),
    pgn({**atomic, "Site": "x/5"}, "1. e4 e5 2. Qxf7 3. Qxe8 *"),  # Corrupt movetext.
    pgn({"Event": "z", "Site": "x/6", "Variant": "Crazyhouse"}, GOOD),
    pgn({"Event": "z", "Site": "x/7", "Variant": " Atomic"}, "1. e4 *"),  # Not an alias.
  ]
  path = tmp_path_factory.mktemp("atomic") / "atomic.pgn"
  path.write_text("\n".join(texts))
  return path, kept, len(games) - len(kept)


def test_atomic_games_kept_counted_and_labelled(tmp_path, atomic_pgn):
  path, kept, short = atomic_pgn
  manifest = run("--pgn", path, "--out", tmp_path / "a", "--variant", "atomic", "--split", "train")
  assert manifest["encoding"]["variant"] == "atomic"
  assert manifest["counts"]["kept"] == len(kept) >= 15
  assert manifest["counts"]["python_chess_fallback"] == 0
  skipped = {k: v for k, v in manifest["skipped"].items() if v}
  assert skipped == {
    "variant": 3 + 2,  # Standard games (one every ten atomic ones), Crazyhouse, " Atomic".
    "illegal_or_ambiguous_san": 3,
    "too_short": 1 + short,
    "non_standard_start": 1,
  }, skipped
  games = list(read_games(tmp_path / "a", "train"))
  assert [g["example_id"] for g in games][:2] == [
    "https://lichess.org/atomic0",
    "https://lichess.org/atomic1",
  ]
  for game, ucis in zip(games, kept, strict=True):
    moves, states = encoding.encode_game(ucis, variant="atomic")
    np.testing.assert_array_equal(game["moves"], moves)
    np.testing.assert_array_equal(game["states"], states)
  # The default (standard chess) mode skips the atomic games as a variant.
  chess_manifest = run("--pgn", path, "--out", tmp_path / "c", "--split", "train")
  assert chess_manifest["encoding"]["variant"] == "chess"
  assert chess_manifest["counts"]["kept"] == 3
  assert chess_manifest["skipped"]["variant"] == 30 + 5 + 2


@pytest.mark.multiprocess
def test_atomic_output_identical_for_any_worker_count(tmp_path, atomic_pgn):
  path, _, _ = atomic_pgn
  common = ("--variant", "atomic", "--games-per-shard", "7", "--ep-mode", "legal")
  one = run("--pgn", path, "--out", tmp_path / "w1", *common)
  two = run("--pgn", path, "--out", tmp_path / "w2", *common, "--workers", "2")
  assert one["splits"] == two["splits"] and one["skipped"] == two["skipped"]
  files = sorted(p.name for p in (tmp_path / "w1").glob("*.array_record"))
  assert len(files) >= 4
  for name in files:
    assert (tmp_path / "w1" / name).read_bytes() == (tmp_path / "w2" / name).read_bytes()


@pytest.mark.multiprocess
def test_workers_start_by_spawn_not_fork(tmp_path, small_pgn, monkeypatch):
  """Forking a process that has imported JAX can deadlock: workers are spawned."""
  import multiprocessing

  methods, real = [], multiprocessing.get_context
  monkeypatch.setattr(
    ordered_pool.multiprocessing, "get_context", lambda m=None: methods.append(m) or real(m)
  )
  manifest = run("--pgn", small_pgn, "--out", tmp_path / "w2", "--workers", "2")
  assert methods == ["spawn"]
  assert sum(s["games"] for s in manifest["splits"].values()) > 0
