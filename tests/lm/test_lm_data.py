"""`data_prep.lm_data`: the LM data protocol (Toshniwal et al. 2022, section 4 "Data") written as
chessjax shards, from PGN and from UCI text, with skip reasons and bad input."""

import json

import numpy as np
import pytest
from conftest import SAMPLE_PGN

from chessjax.data import source
from chessjax.lm import tokens as tk
from data_prep import lm_data, probing_sets


def _games(path, split):
  return [tk.ucis_of_moves(g["moves"]) for g in source.read_games(path, split)]


def test_pgn_protocol_splits_and_pool_file(tmp_path, capsys):
  out = tmp_path / "ds"
  argv = ["--pgn", str(SAMPLE_PGN), "--out", str(out), "--train-size", "1000"]
  argv += ["--pool-size", "300", "--dev-size", "100", "--test-size", "100", "--max-plies", "120"]
  assert lm_data.main(argv) == 0
  m = source.read_manifest(out)
  assert {s: m["splits"][s]["games"] for s in lm_data.SPLITS} == {
    "train": 1000,
    "probing_pool": 300,
    "dev": 100,
    "test": 100,
  }
  assert m["kind"] == "lm" and m["encoding"]["num_labels"] == 75
  assert m["lm"]["train_subsets"] == {"S": 1000, "M": 1000, "L": 1000}
  assert m["counts"]["unused"] == m["counts"]["kept"] - 1500
  assert m["skipped"]["too_long"] > 0 and m["skipped"]["too_short"] > 0
  assert m["sources"][0]["sha256"] and not m["lm"]["scaled_down"]
  games = {s: _games(out, s) for s in lm_data.SPLITS}
  for g in (g for s in games.values() for g in s):
    assert 10 <= len(g) <= 120
  all_games = [" ".join(g) for s in games.values() for g in s]
  assert len(set(all_games)) == len(all_games)
  pool_txt = (out / "probing_pool.txt").read_text().splitlines()
  assert pool_txt == [" ".join(g) for g in games["probing_pool"]]
  assert list(probing_sets.read_game_list(out, "probing_pool")) == games["probing_pool"]
  assert tk.Vocab.from_file(out / "vocab.txt") == tk.Vocab.default()
  # Same seed, same order; another seed, another order.
  again = tmp_path / "again"
  assert lm_data.main([*argv[:3], str(again), *argv[4:]]) == 0
  assert _games(again, "dev") == games["dev"]
  other = tmp_path / "other"
  assert lm_data.main([*argv[:3], str(other), *argv[4:], "--seed", "1"]) == 0
  assert _games(other, "dev") != games["dev"]
  capsys.readouterr()


def test_uci_text_dedup_null_illegal_and_scaling(tmp_path, capsys, sample_games_uci):
  lines = [" ".join(g) for g in sample_games_uci[:60] if 10 <= len(g) <= 150]
  n = len(lines)
  bad = "e2e4 e7e5 " + "g1f3 b8c6 f3g1 c6b8 " * 2 + "e1e5"  # illegal at ply 11
  null = "e2e4 0000 " + " ".join(["g1f3", "b8c6"] * 5)
  text = "\n".join([lines[0], *lines, bad, null, "e2e4 e7e5", ""])
  path = tmp_path / "games.txt"
  path.write_text(text)
  out = tmp_path / "ds"
  rc = lm_data.main(["--uci", str(path), "--out", str(out), "--train-size", "1000"])
  assert rc == 0
  err = capsys.readouterr().err
  assert "scaled down" in err and "line" in err and "illegal move 'e1e5'" in err
  m = source.read_manifest(out)
  assert m["skipped"]["duplicate"] == 1 and m["skipped"]["illegal_move"] == 1
  assert m["skipped"]["null_move"] == 1 and m["skipped"]["too_short"] == 1
  assert m["counts"]["kept"] == n and m["lm"]["scaled_down"]
  assert sum(m["splits"][s]["games"] for s in m["splits"]) == n
  written = sorted(" ".join(g) for s in m["splits"] for g in _games(out, s))
  assert written == sorted(lines)
  assert "ply 11" in m["skip_examples"][0]
  # A run over an existing data set needs --overwrite.
  assert lm_data.main(["--uci", str(path), "--out", str(out)]) == 2
  assert "already holds" in capsys.readouterr().err


def test_split_files_layout(tmp_path, sample_games_uci):
  d = tmp_path / "authors"
  d.mkdir()
  parts = {"train.txt": 0, "dev.txt": 20, "test.txt": 30, "other_eval.txt": 40}
  for name, lo in parts.items():
    (d / name).write_text("".join(" ".join(g) + "\n" for g in sample_games_uci[lo : lo + 10]))
  out = tmp_path / "ds"
  assert lm_data.main(["--layout", "split-files", "--uci-dir", str(d), "--out", str(out)]) == 0
  m = source.read_manifest(out)
  assert m["lm"]["split_order"] == ["train", "probing_pool", "dev", "test"]
  assert _games(out, "dev") == sample_games_uci[20:30]
  assert _games(out, "probing_pool") == sample_games_uci[40:50]
  assert (out / "probing_pool.txt").read_text().splitlines()[0] == " ".join(sample_games_uci[40])


def test_bad_input(tmp_path, capsys):
  empty = tmp_path / "empty.txt"
  empty.write_text("\n")
  assert lm_data.main(["--uci", str(empty), "--out", str(tmp_path / "a")]) == 2
  assert "holds no games" in capsys.readouterr().err
  only_bad = tmp_path / "bad.txt"
  only_bad.write_text("e2e5 e7e5 g1f3 b8c6 f1c4 f8c5 e1g1 g8f6 d2d3 e8g8\n")
  assert lm_data.main(["--uci", str(only_bad), "--out", str(tmp_path / "b")]) == 2
  err = capsys.readouterr().err
  assert "no game of 1 was kept" in err and "illegal_move" in err
  with pytest.raises(SystemExit):
    lm_data.main(["--layout", "split-files", "--uci-dir", str(tmp_path), "--out", "x"])


def test_split_sizes():
  assert lm_data.split_sizes(10**6, lm_data.PAPER_SIZES) == (list(lm_data.PAPER_SIZES), False)
  sizes, scaled = lm_data.split_sizes(58_000, lm_data.PAPER_SIZES)
  assert scaled and sum(sizes) == 58_000 and sizes[1:] == [5000, 1500, 1500]
  assert json.dumps(sizes)  # plain ints
  assert np.all(np.array(sizes) >= 0)


def test_max_games_reads_only_the_first_games(tmp_path, capsys, sample_games_uci):
  lines = [" ".join(g) for g in sample_games_uci[:50]]
  uci = tmp_path / "games.txt"
  uci.write_text("\n".join(lines) + "\n")
  sizes = ["--train-size", "10", "--pool-size", "2", "--dev-size", "2", "--test-size", "2"]
  out = tmp_path / "uci"
  assert lm_data.main(["--uci", str(uci), "--out", str(out), *sizes, "--max-games", "30"]) == 0
  m = source.read_manifest(out)
  assert m["counts"]["games_read"] == 30 and m["options"]["max_games"] == 30
  kept = {" ".join(g) for s in lm_data.SPLITS for g in _games(out, s)}
  assert kept <= set(lines[:30]) and kept - set(lines[:16])  # The first 30 only, not fewer.
  # PGN: the first games of the sample, across batch boundaries; the cut game is not "truncated".
  out = tmp_path / "pgn"
  argv = ["--pgn", str(SAMPLE_PGN), "--out", str(out), *sizes, "--max-games", "123"]
  assert lm_data.main(argv) == 0
  m = source.read_manifest(out)
  assert m["counts"]["games_read"] == 123 and m["skipped"]["truncated_game"] == 0
  with pytest.raises(SystemExit):
    lm_data.parse_args(["--uci", str(uci), "--out", str(out), "--max-games", "0"])
  capsys.readouterr()
