"""The majority-class baseline per ply bin (`launch.majority_bins`): its numbers on games whose
answer is known, and its committed record binned like the long-game record it is read beside
(the same random-uniform games: the same steps in every bin)."""

import numpy as np
import pytest

from chessjax import labels
from docgen.findings import record
from launch import majority_bins


def test_bins_start_at_zero_then_every_20_plies_from_the_training_length():
  assert majority_bins.bin_edges(128, 60) == [0, 8, 28, 48]
  assert majority_bins.bin_edges(20, 45) == [0, 20, 40]


def test_the_majority_row_per_bin():
  # Three games of 10, 10 and 30 steps: label 0 is 1 on the first 10 steps of each game, 2 after.
  games = []
  for steps in (10, 10, 30):
    s = np.zeros((steps, labels.NUM_LABELS), np.uint8)
    s[:10, 0], s[10:, 0] = 1, 2
    games.append({"states": s})
  r = majority_bins.per_bin(games, trained=28)  # Bins [0, 8), [8, 28), [28, 30).
  # Label 0 is 1 on 30 steps and 2 on 20: the majority row holds 1; every other label is right.
  assert r["bins"]["start"] == [0, 8, 28] and r["bins"]["steps"] == [24, 24, 2]
  # Plies 8-27: 2 + 2 + 20 steps, 18 of them (game 3, steps 10-27) with label 0 wrong.
  assert r["bins"]["labelwise"] == pytest.approx([1.0, 1 - 18 / (24 * 75), 1 - 1 / 75])
  assert r["bins"]["exact_state"] == pytest.approx([1.0, 6 / 24, 0.0])
  assert r["steps"] == 50 and r["exact_state"] == pytest.approx(30 / 50)


def test_the_record_bins_the_long_game_records_games():
  maj = record("majority_bins")
  for run in record("bench_cwm_long")["runs"]:
    b = run["random"]["long"]["bins"]
    assert b["start"] == maj["bins"]["start"][: len(b["start"])]
    assert b["steps"] == maj["bins"]["steps"][: len(b["steps"])]
