"""The training commands' shared prologue (`chessjax.entry`): both commands in one process, and a
wrong config value, a mistyped config key or a wrong member reported the same way by both, before
anything starts; a run the non-finite guard aborted is one line too."""

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.multiprocess  # Every test starts a command as a subprocess.

CONFIG = f"--config={REPO / 'configs' / 'cwm.py'}:family=slice,size=d128,smoke=True"


def run(*args: str) -> subprocess.CompletedProcess:
  env = dict(os.environ, PYTHONPATH=str(REPO))
  return subprocess.run(
    [sys.executable, *args], cwd=REPO, capture_output=True, text=True, env=env, timeout=300
  )


def test_both_commands_import_in_one_process():
  """Their flags (`--config`, `--workdir`, `--member`) are defined once, by `chessjax.entry`:
  absl refuses a flag defined twice. Importing the population's functions defines no flag of
  its own."""
  code = (
    "from absl import flags\n"
    "import chessjax.population\n"
    "print(sorted(k for k in ('config', 'workdir', 'member') if k in flags.FLAGS),\n"
    "      flags.FLAGS.find_module_defining_flag('member'))\n"
    "import chessjax.main\n"
    "print('both imported')"
  )
  proc = run("-c", code)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.strip().splitlines() == [
    "['config', 'member', 'workdir'] chessjax.entry",
    "both imported",
  ]


SCHEDULE = "--config.optim.schedule=nope"


@pytest.mark.parametrize(
  "command, args, message",
  [
    ("chessjax.main", (SCHEDULE,), "error: optim.schedule must be one of"),
    ("chessjax.main", ("--config.train.steps_per_call=0",), "error: train.steps_per_call must be"),
    ("chessjax.population", (SCHEDULE, "--member=a"), "error: optim.schedule must be one of"),
    (
      "chessjax.population",
      ("--member=a", "--member=b:data.batch_size=16"),
      "error: member b: data.batch_size changes the model, the batch's shapes",
    ),
    ("chessjax.population", ("--member=a", "--member=a:seed=2"), "error: member names must"),
    ("chessjax.main", ("--member=a",), "error: --member trains a population"),
    (
      "chessjax.main",
      ("--config.optim.lrr=1",),
      "error: a --config override names no field of the config (--config.optim.lrr=1): 'lrr' "
      'Did you mean "lr" instead of "lrr"?',
    ),
    (
      "chessjax.population",
      ("--member=a", "--config.nosuch.x=1"),
      "error: a --config override names no field of the config (--config.nosuch.x=1): 'nosuch'",
    ),
  ],
)
def test_a_wrong_config_value_is_one_line_and_status_1(tmp_path, command, args, message):
  work = tmp_path / "work"
  proc = run("-m", command, CONFIG, f"--workdir={work}", *args)
  assert proc.returncode == 1, proc.stderr[-3000:]
  assert proc.stderr.strip().splitlines()[-1].startswith(message), proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  assert not work.exists()  # Refused before anything was written.


@pytest.mark.slow
def test_a_run_the_non_finite_guard_aborted_is_one_line(small_dataset, tmp_path):
  """`chessjax.main` reports the guard's abort as the population does, one `error: ...` line
  with exit status 1 (its summary says the same), not `NonFiniteError`'s traceback."""
  work = tmp_path / "nan"
  flags = [
    f"--config.data.train={small_dataset}", "--config.data.max_len=32",
    "--config.data.bucket_lengths=(32,)", "--config.train.steps=8",
    "--config.train.max_bad_batches=3", "--config.train.snapshot_every=2",
    "--config.train.compile_ahead=false", "--config.data.val_split=none",
    "--config.optim.lr=1e38", "--config.optim.warmup_steps=1",
  ]  # fmt: skip
  proc = run("-m", "chessjax.main", CONFIG, f"--workdir={work}", *flags)
  assert proc.returncode == 1, proc.stderr[-3000:]
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("error: step ") and "consecutive batches with a non-finite" in last
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  summary = json.loads((work / "train_summary.json").read_text())
  assert summary["aborted"] and last == f"error: {summary['abort_reason']}"
