"""launch/cwm_mini.py: the experiment as a plan of tasks (data, train, evaluate, report); a run
of the committed record is left out of the plan and enters the tables from it, a record of another
protocol is ignored; the command at toy size (conftest.py's `cwm_mini_local`: two families, one
seed, a few steps), a rerun that runs nothing, and a failing run that makes it exit 1 naming the
task and its log; the tables' pieces."""

import json
import os
import shutil
import sys

import pytest
from conftest import cwm_mini_flags

from chessjax import rundir
from chessjax.machine import cpu_model
from launch import cwm_mini as bench
from launch import cwm_tables as tables
from launch import local


def _record(tmp_path, **protocol):
  args = vars(bench.parse_args(["--work", str(tmp_path / "old")]))
  args.update(protocol)
  row = {"family": "slice", "seed": 0, "workdir": "runs/slice_s0", "curve": [[250, 1.0]]}
  path = tmp_path / "record.json"
  path.write_text(json.dumps({"args": args, "runs": [row], "summary": {}}))
  return path, row


def test_recorded_runs_are_left_out_of_the_plan_and_reported(tmp_path):
  path, row = _record(tmp_path)
  argv = ["--work", str(tmp_path / "w"), "--record", str(path), "--families", "slice,mamba3"]
  args = bench.parse_args(argv + ["--seeds", "0"])
  assert bench.recorded(args) == {("slice", 0): row}
  assert bench.collect(args, tmp_path / "w") == [row]  # mamba3_s0: neither local nor recorded
  tasks = bench.plan(args, argv)
  assert [t.name for t in tasks if t.stage == "train"] == ["mamba3_s0"]


def test_the_plan(tmp_path, monkeypatch):
  """The data a task each (ended by its manifest.json); per run seed-major a
  training task (its run and total steps) then its evaluation (its outputs), which waits for its
  run and the test sets only; the report is the command again, paths absolute, `--report-only`."""
  pgns = {k: tmp_path / f"{k}.pgn" for k in ("train", "test")}
  for p in pgns.values():
    p.write_text("")
  monkeypatch.chdir(tmp_path)
  argv = ["--work", "w", *cwm_mini_flags(pgns), "--seeds", "0,1", "--families", "slice,mamba2"]
  args = bench.parse_args(argv + ["--ablation-seeds", "1"])
  assert args.work == str(tmp_path / "w") and args.train_pgn == str(pgns["train"])
  tasks = bench.plan(args, argv)
  assert [t.index for t in tasks] == list(range(len(tasks)))
  assert {t.stage for t in tasks} == set(bench.STAGES)
  data = [t for t in tasks if t.stage == "data"]
  assert [t.name for t in data] == ["train_data", "real_test", "random_test"]
  assert [t.outputs for t in data] == [
    (str(tmp_path / "w" / "data" / d / "manifest.json"),) for d in ("train", "real_test", "random")
  ]
  assert str(pgns["train"]) in data[0].argv and str(pgns["test"]) in data[1].argv
  runs = [t for t in tasks if t.stage in ("train", "evaluate")]
  names = ["slice_s0", "eval_slice_s0", "slice_s1", "eval_slice_s1", "mamba2_s1", "eval_mamba2_s1"]
  assert [t.name for t in runs] == names  # seed-major, each run scored after it
  train, evaluate = runs[:2]
  wd = tmp_path / "w" / "runs" / "slice_s0"
  assert [(r.workdir, r.steps) for r in train.runs] == [(str(wd), 3)]
  assert train.after == ("train_data",) and train.log == str(wd / "train.log")
  assert evaluate.after == ("slice_s0", "real_test", "random_test")
  assert evaluate.outputs == tuple(str(wd / "eval" / f"{s}.json") for s in bench.SPLITS)
  assert train.argv[0] == sys.executable and f"--workdir={wd}" in train.argv
  (report,) = [t for t in tasks if t.stage == "report"]
  assert report.argv[1:3] == ("-m", "launch.cwm_mini") and report.argv[-1] == "--report-only"
  assert f"--work={tmp_path / 'w'}" in report.argv and report.after is None
  args = bench.parse_args(argv + ["--train-only"])
  assert not [t for t in bench.plan(args, argv) if t.stage == "evaluate"]


def test_bad_input_is_one_line(tmp_path, capsys):
  for argv, said in (
    (["--train-pgn", str(tmp_path / "none.pgn")], "--train-pgn"),
    (["--steps", "0"], "--steps must be at least 1"),
  ):
    with pytest.raises(SystemExit):
      bench.parse_args(["--work", str(tmp_path), *argv])
    assert said in capsys.readouterr().err
  args = bench.parse_args(["--work", str(tmp_path), "--masters", str(tmp_path / "none")])
  with pytest.raises(SystemExit, match="no master games at .*none"):
    bench.check_masters(args, bench.plan(args, []))


def test_the_record_holds_the_protocol_not_this_machine(tmp_path):
  pgn = tmp_path / "games.pgn"
  pgn.write_text("")
  argv = ["--work", str(tmp_path), "--train-pgn", str(pgn), "--cores", "0", "--jobs", "2"]
  protocol = bench.protocol(bench.parse_args(argv))
  assert protocol["train_pgn"] == "games.pgn" and protocol["cores"] == "0"
  assert not {"work", "masters", "record", "test_pgn", "python", "scheduler", "jobs"} & set(
    protocol
  )
  assert protocol["steps"] == 3000 and protocol["families"].startswith("transformer,")


def test_the_toy_run(cwm_mini_local):
  """Both runs trained for their steps and scored on 6 games of each split; the tables, curves
  and the paper-layout report written; each task's time in its run's bench.json."""
  work = cwm_mini_local
  record = json.loads((work / "tables.json").read_text())
  rows = {r["family"]: r for r in record["runs"]}
  assert sorted(rows) == ["slice", "transformer"]
  for family, row in rows.items():
    assert row["workdir"] == f"runs/{family}_s0" and row["params"] > 0
    for split in bench.SPLITS:
      assert row[split]["games"] == 6 and row[split]["loss"] > 0
    assert [step for step, _ in row["curve"]] == [3]
    assert rundir.read_summary(work / row["workdir"])["steps"] == 3
    phases = [s["phase"] for s in local.bench_record(work / row["workdir"])["segments"]]
    assert phases == ["train", "eval"] and row["train_cpu_s"] > 0
  text = (work / "tables.md").read_text()
  assert "Train: train.pgn; real test: first 6 games of test.pgn;" in text
  assert (work / "curves.png").read_bytes()[:4] == b"\x89PNG"
  assert (work / "report" / "tables.json").exists()


def test_a_rerun_runs_nothing(cwm_mini_local, toy_pgns, tmp_path, capsys):
  work = tmp_path / "work"
  shutil.copytree(cwm_mini_local, work)
  before = (work / "runs" / "slice_s0" / "bench.json").read_text()
  argv = ["--work", str(work), *cwm_mini_flags(toy_pgns), "--until", "evaluate"]
  assert bench.main(argv) == 0
  assert "0 task(s) to run of 7" in capsys.readouterr().out
  assert (work / "runs" / "slice_s0" / "bench.json").read_text() == before


def test_a_failed_run_exits_1_naming_the_task_and_its_log(
  cwm_mini_local, toy_pgns, tmp_path, capsys
):
  """Training fails (an interpreter that refuses `chessjax.main`): the command exits 1 naming each
  failed task with its log, and the evaluations and the report are not run."""
  work = tmp_path / "work"
  shutil.copytree(cwm_mini_local / "data", work / "data")  # The data tasks have ended.
  python = tmp_path / "python"
  refuse = 'if [ "$2" = chessjax.main ]; then echo no >&2; exit 3; fi'
  python.write_text(f'#!/bin/sh\n{refuse}\nexec {sys.executable} "$@"\n')
  python.chmod(0o755)
  core = str(min(os.sched_getaffinity(0)))
  argv = ["--work", str(work), *cwm_mini_flags(toy_pgns), "--python", str(python), "--cores", core]
  assert bench.main(argv) == 1
  err = capsys.readouterr().err
  for family in ("slice", "transformer"):
    log = work / "runs" / f"{family}_s0" / "train.log"
    assert f"train task {family}_s0 failed (exit status 3); see {log}" in err
    assert "no" in log.read_text()
    assert f"evaluate task eval_{family}_s0 not run" in err
  assert "report task report not run" in err and "2 task(s) failed, 3 not run" in err


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
