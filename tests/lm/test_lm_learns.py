"""A tiny language model learns chess beyond the rules' uniform guess: it beats the random-legal
baseline of a probing set (Toshniwal et al. 2022, Table 5's last row)."""

import json
import shutil

import pytest

from chessjax.lm import evaluate
from chessjax.workdir import SUMMARY


@pytest.mark.slow
def test_a_tiny_lm_beats_the_random_legal_baseline(trained_lm, lm_sample, tmp_path):
  """GPT-2 tiny (2 layers x 64, 137,792 parameters) as a UCI language model, 3 epochs over 1,861
  sample games of at most 60 plies (174 steps of 32 games, lr 1e-2): the suite's `trained_lm`
  (conftest.py). On 100 End-Actual prompts of 8-20 plies from games it never saw, its top-1
  ending square is the one played more often than the random-legal baseline's mean 1/R: measured
  44 and 43 against 31 (seeds 0 and 1)."""
  summary = json.loads((trained_lm / SUMMARY).read_text())
  assert summary["steps"] == 174

  run = tmp_path / "run"
  shutil.copytree(trained_lm, run)  # Evaluation writes RUN/eval: the shared workdir stays as is.
  result = evaluate.evaluate(run, sets=lm_sample["sets"], data={})
  end = result["probes"]["tasks"]["end_actual"]
  baseline = result["probes"]["random_legal"]["end_actual"]
  assert end["rows"] == 100 and 25 < baseline < 40
  assert end["exm"] > baseline + 5, (end["exm"], baseline)
