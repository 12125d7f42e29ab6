"""launch/lm_sweep.py: the blindfolded LM grid as a plan of tasks (data, probing sets, train,
evaluate, report), its `--print` lines, its checks of bad input, and the grid at toy size
(conftest.py's `lm_grid_local`: GPT-2 tiny, UCI and RAP at p = 5%, 2 steps, on the data and
probing sets it builds from the bundled sample)."""

import json

import pytest
from conftest import LM_GRID_FLAGS

from chessjax import rundir
from launch import lm_sweep


def test_the_plan(tmp_path):
  """With --pgn: the data set, then the probing sets (a stage of its own: on SLURM a stage waits
  for the whole stage before it); each run's training task (its steps, the toy's overrides) then
  its evaluation with the probing sets; the report over ROOT last."""
  root = tmp_path / "grid"
  args = lm_sweep.parse_args(["--root", str(root), *LM_GRID_FLAGS])
  tasks = lm_sweep.plan(args)
  stages = [t.stage for t in tasks]
  assert stages == ["data", "sets", "train", "evaluate", "train", "evaluate", "report"]
  data, sets = root / "data" / "lm", root / "data" / "probing"
  assert tasks[0].outputs == (str(data / "manifest.json"),)
  assert tasks[1].outputs == (str(sets / "summary.json"),) and tasks[1].after == ("lm_data",)
  names = [t.name for t in tasks[2:6]]
  assert names == ["gpt2_uci_S", "eval_gpt2_uci_S", "gpt2_rap5_S", "eval_gpt2_rap5_S"]
  train, evaluate = tasks[4:6]
  wd = root / "gpt2_rap5_S"
  assert [(r.workdir, r.steps) for r in train.runs] == [(str(wd), 2)]
  assert "--config=configs/lm.py:family=gpt2,notation=rap,rap_p=0.05,train=S,size=tiny,steps=2" in (
    train.argv
  )
  assert train.argv[-3:] == (
    "--config.data.batch_size=8",
    "--config.data.max_len=128",
    "--config.data.bucket_lengths=(128,)",
  )
  assert evaluate.after == ("gpt2_rap5_S", "probing_sets")
  assert evaluate.outputs == tuple(str(wd / "eval" / f) for f in ("results.json", "probes.jsonl"))
  assert tasks[-1].argv[1:] == (
    "-m",
    "chessjax.lm.report",
    "--runs",
    str(root),
    "--out",
    str(root / "report"),
  )


def test_print_gives_the_commands_with_the_paths_as_given(capsys):
  assert lm_sweep.main(["--print", "--root", "r", "--data", "d", "--trains", "L", "--ps", "0"]) == 0
  assert capsys.readouterr().out.splitlines() == [
    "python -m chessjax.main --config=configs/lm.py:family=gpt2,notation=uci,train=L "
    "--workdir=r/gpt2_uci_L --config.data.train=d",
    "python -m chessjax.lm.evaluate --workdir r/gpt2_uci_L",
    "python -m chessjax.lm.report --runs r --out r/report",
  ]


@pytest.mark.parametrize(
  "argv, said",
  [
    (["--set", "train.nope=1"], "rejected by configs/lm.py"),
    (["--set", "data.max_len=long"], "rejected by configs/lm.py"),
    (["--set", "lm.rap_p=0.5"], "--set lm.rap_p: set by the grid itself"),
    (["--set", "x"], "expected KEY=VALUE"),
    (["--size", "huge"], "unknown size 'huge'"),
    (["--trains", "S,XL"], "--trains: unknown ['XL']"),
    (["--ps", "0.05,0.051"], "--ps: two p's give one workdir (gpt2_rap5_S)"),
    (["--ps", "2"], "--ps: probabilities in [0, 1]"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--pgn", "x.pgn", "--sets", "s"], "give --pgn (the data built here) or --data"),
  ],
)
def test_bad_input_is_one_line(argv, said, capsys):
  with pytest.raises(SystemExit):
    lm_sweep.parse_args(["--print", "--trains", "S", *argv])
  err = capsys.readouterr().err.strip().splitlines()
  assert said in err[-1], err


def test_prepared_data_must_exist(tmp_path, capsys):
  argv = ["--root", str(tmp_path / "r"), "--data", str(tmp_path / "none"), "--trains", "S"]
  assert lm_sweep.main(argv) == 1
  assert f"no LM data set at {tmp_path / 'none'}" in capsys.readouterr().err
  assert not (tmp_path / "r").exists()


def test_the_toy_grid(lm_grid_local):
  """The data and probing sets built, both runs trained for 2 steps and probed, the report's
  tables over both."""
  root = lm_grid_local
  manifest = json.loads((root / "data" / "lm" / "manifest.json").read_text())
  assert manifest["options"]["max_games"] == 600
  rows = json.loads((root / "data" / "probing" / "summary.json").read_text())["rows"]
  assert 0 < rows <= 20
  for name, tasks in (("gpt2_uci_S", 2), ("gpt2_rap5_S", 4)):  # End (and Start) x Actual, Other
    assert rundir.read_summary(root / name)["steps"] == 2
    probes = (root / name / "eval" / "probes.jsonl").read_text().splitlines()
    assert len(probes) == tasks * rows
  tables = json.loads((root / "report" / "tables.json").read_text())
  assert sorted(r["workdir"] for r in tables["runs"]) == [
    str(root / "gpt2_rap5_S"),
    str(root / "gpt2_uci_S"),
  ]
