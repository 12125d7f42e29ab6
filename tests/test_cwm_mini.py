"""launch/cwm_mini.py across sessions: finished runs of the committed record are not
trained again and enter the tables; a record of another protocol is ignored."""

import json

import pytest

from chessjax.machine import cpu_model
from launch import cwm_mini as bench
from launch import cwm_tables as tables


def _record(tmp_path, **protocol):
  args = vars(bench.parse_args(["--work", str(tmp_path / "old")]))
  args.update(protocol)
  row = {"family": "slice", "seed": 0, "workdir": "runs/slice_s0", "curve": [[250, 1.0]]}
  path = tmp_path / "record.json"
  path.write_text(json.dumps({"args": args, "runs": [row], "summary": {}}))
  return path, row


def test_recorded_runs_are_skipped_and_reported(tmp_path, monkeypatch):
  path, row = _record(tmp_path)
  argv = ["--work", str(tmp_path / "w"), "--record", str(path), "--families", "slice,mamba3"]
  args = bench.parse_args(argv + ["--seeds", "0"])
  assert bench.recorded(args) == {("slice", 0): row}
  assert bench.collect(args, tmp_path / "w") == [row]  # mamba3_s0: neither local nor recorded
  trained = []
  monkeypatch.setattr(
    bench, "do_run", lambda args, family, seed, *rest: trained.append((family, seed))
  )
  bench.run_all(args, tmp_path / "w", data={})
  assert trained == [("mamba3", 0)]


def test_a_record_of_another_protocol_or_none_is_not_used(tmp_path):
  path, _ = _record(tmp_path, steps=12000)
  args = bench.parse_args(["--work", str(tmp_path / "w"), "--record", str(path)])
  assert bench.recorded(args) == {}
  args = bench.parse_args(["--work", str(tmp_path / "w"), "--record", ""])
  assert bench.recorded(args) == {}


def test_machine_line_names_the_cpu(tmp_path):
  info = tmp_path / "cpuinfo"
  info.write_text(
    "processor\t: 0\nmodel name\t: Test CPU 9000\nprocessor\t: 1\nmodel name\t: Other\n"
  )
  assert cpu_model(info) == "Test CPU 9000"
  info.write_text("processor\t: 0\n")
  assert cpu_model(info) == ""
  assert cpu_model(tmp_path / "absent") == ""
  assert bench.machine_line().split(", ")[0] == (cpu_model() or "unknown CPU")


def test_paired_counts_seeds_where_one_family_beats_another():
  def row(family, seed, loss, exact):
    split = {"loss": loss, "labelwise": 0.9, "exact_state": exact, "trajectory": 0.0}
    return {"family": family, "seed": seed, "real": split, "random": split}

  rows = [
    row("transformer", 0, 0.40, 0.10),
    row("transformer", 1, 0.30, 0.20),
    row("mamba3", 0, 0.20, 0.15),  # better than the Transformer on both
    row("mamba3", 1, 0.35, 0.20),  # worse loss, equal ExactState
    row("mamba3", 2, 0.10, 0.90),  # no Transformer seed 2: not paired
  ]
  better, worse, n, diff = bench.paired(rows, "transformer", "mamba3", "real", "loss")
  assert (better, worse, n) == (1, 1, 2) and abs(diff - (-0.2 + 0.05) / 2) < 1e-12
  better, worse, n, diff = bench.paired(rows, "transformer", "mamba3", "real", "exact_state")
  assert (better, worse, n) == (1, 0, 2) and abs(diff - 2.5) < 1e-9  # percent
  assert bench.paired(rows, "transformer", "slice", "real", "loss")[2] == 0
  lines = tables._paired_table(rows, [("transformer", "mamba3")], "## t", "better")
  assert "| mamba3 vs transformer | real | better in 1/2, -0.0750 |" in "\n".join(lines)


def _long_eval(exact_by_ply, steps_by_ply, first_errors, game_loss):
  """An evaluation's long-game outputs (`chessjax.world_model.evaluate`) from per-ply counts."""
  n = len(steps_by_ply)
  stratum = {"steps": 4, "exact_state": 0.5, "groups": {}}
  return {
    "per_ply": {
      "steps": steps_by_ply,
      "exact": exact_by_ply,
      "correct": [75 * s for s in steps_by_ply],
    },
    "dataset": {"max_len": n, "truncated_games": 0},
    "first_error_steps": first_errors,
    "game_loss": game_loss,
    "max_game_loss": max(game_loss),
    "strata": {"capture": stratum, "after_capture": {"steps": 0, "exact_state": None}},
  }


def test_long_game_summary_bins_at_the_training_length_and_finds_the_half():
  """Bins anchored at the training length (the first one clipped at ply 0); the half-value ply is
  the first bin from the training length on below half the last bin before it."""
  trained, n = 50, 130
  steps = [200] * n
  exact = [200 if t < trained else (150 if t < 90 else 40) for t in range(n)]  # 100%, 75%, 20%
  r = _long_eval(exact, steps, [-1, 95, 60, 100], [0.1, 0.2, 3.0, 0.4])
  long = bench.long_game_summary(r, trained)
  assert long["bins"]["start"] == [0, 10, 30, 50, 70, 90, 110]
  assert long["bins"]["steps"] == [2000, 4000, 4000, 4000, 4000, 4000, 4000]
  assert long["bins"]["exact_state"] == [1.0, 1.0, 1.0, 0.75, 0.75, 0.2, 0.2]
  assert long["exact_within"] == 1.0 and long["steps_beyond"] == 80 * 200
  assert long["labelwise_within"] == long["labelwise_beyond"] == 1.0
  assert long["exact_beyond"] == (40 * 150 + 40 * 40) / (80 * 200)
  assert long["first_wrong"]["never"] == 1 and long["first_wrong"]["quartiles"][1] == 95
  assert long["max_game_loss"] == 3.0 and long["median_game_loss"] == pytest.approx(0.3)
  assert bench.half_value_ply(long, trained) == 90
  assert bench.half_value_ply(long, trained, min_steps=5000) is None  # Too few steps per bin.


def test_long_tables_and_figure(tmp_path):
  args = bench.parse_args(["--work", str(tmp_path), "--max-len", "50", "--eval-max-len", "130"])
  steps = [10] * 130
  rows = []
  for family in ("transformer", "slice"):
    row = {"family": family, "seed": 0}
    for split in bench.SPLITS:
      r = _long_eval([10] * 130, steps, [-1, 3], [0.5, 0.25])
      row[split] = {"exact_state": 1.0, "long": bench.long_game_summary(r, 50)}
    rows.append(row)
  text = bench.long_tables_markdown(args, rows)
  assert "trained on 50 steps, scored to 130" in text
  row = "| transformer_s0 | real | 100.00 | 100.00 (800) | 100.00 | - | 100.00 / 100.00 |"
  assert row + " 3/3/3 | 1 | 0.5 | 0.375 | 0 |" in text
  assert "| slice_s0 | random | 100.00 | 50.00 (-50.00) | - |" in text
  bench.length_png(args, rows, tmp_path / "length.png")
  assert (tmp_path / "length.png").read_bytes()[:4] == b"\x89PNG"
  assert (
    bench.long_tables_markdown(args, [{"family": "x", "seed": 0, "real": {}, "random": {}}]) == ""
  )


def test_strata_table_shows_the_matched_steps_when_the_evaluation_has_them(tmp_path):
  """Evaluations with `matched` strata: each cell is the stratum's ExactState / the same plies'
  other steps'; without it (older records) the cell is beside the overall ExactState."""
  args = bench.parse_args(["--work", str(tmp_path), "--max-len", "50", "--eval-max-len", "130"])
  r = _long_eval([10] * 130, [10] * 130, [-1, 3], [0.5, 0.25])
  r["strata"]["capture"]["matched"] = {"steps": 4, "exact_state": 0.75, "groups": {}}
  r["strata"]["after_capture"]["matched"] = {"steps": 0, "exact_state": None, "groups": {}}
  row = {"family": "slice", "seed": 0}
  for split in bench.SPLITS:
    row[split] = {"exact_state": 0.6, "long": bench.long_game_summary(r, 50)}
  assert row["real"]["long"]["strata"]["capture"]["matched"] == {"steps": 4, "exact_state": 0.75}
  text = bench.long_tables_markdown(args, [row])
  assert "ExactState on the other steps at the same plies" in text
  assert "| slice_s0 | real | 60.00 | 50.00 / 75.00 | - |" in text
  del r["strata"]["capture"]["matched"]
  for split in bench.SPLITS:
    row[split]["long"] = bench.long_game_summary(r, 50)
  assert "| slice_s0 | real | 60.00 | 50.00 (-10.00) | - |" in bench.long_tables_markdown(
    args, [row]
  )


def test_strata_keep_the_transition_error_beside_its_matched(tmp_path):
  """A newer evaluation's `transition_error` reaches the record and the strata table."""
  args = bench.parse_args(["--work", str(tmp_path), "--max-len", "50", "--eval-max-len", "130"])
  r = _long_eval([10] * 130, [10] * 130, [-1, 3], [0.5, 0.25])
  r["strata"]["capture"]["matched"] = {"steps": 4, "exact_state": 0.75, "groups": {}}
  r["strata"]["capture"]["transition_error"] = {
    "steps": 3, "error": 0.25, "matched": {"steps": 3, "error": 0.125}, "extra": 1,
  }  # fmt: skip
  r["strata"]["after_capture"]["matched"] = {"steps": 0, "exact_state": None, "groups": {}}
  row = {"family": "slice", "seed": 0}
  for split in bench.SPLITS:
    row[split] = {"exact_state": 0.6, "long": bench.long_game_summary(r, 50)}
  assert row["real"]["long"]["strata"]["capture"]["transition_error"] == {
    "steps": 3, "error": 0.25, "matched": {"steps": 3, "error": 0.125},
  }  # fmt: skip
  text = bench.long_tables_markdown(args, [row])
  assert "| slice_s0 | real | 60.00 | 50.00 / 75.00 (25.0 / 12.5) | - |" in text
