"""launch.cluster against a real single-node SLURM (`slurm` below: one for the module).

* the toy protocol submitted with `launch.reproduce_mini --scheduler slurm --wait` gives the same
  report (Table 8 cells, selection) as the same command run here without SLURM. Both run at reduced
  flags (one family, a few steps, a slice of the sample): the whole `make reproduce-mini` twice
  would take most of 10 minutes on this suite's two cores. The committed record
  (docs/results/reproduce_mini.json) was made without the suite's XLA settings
  (conftest.py: JAX_DISABLE_MOST_OPTIMIZATIONS), so equal digits there would test XLA, not the
  chain; the two runs here share this process's settings and must agree bit for bit;
* a task sent SIGTERM by `scancel --signal=TERM` (what the time limit and preemption send) saves,
  exits 75 and is requeued; released at once (`StartTime=now`, not SLURM's begin-time hold), it
  resumes and ends with the parameters of an uninterrupted run, bit for bit;
* a task killed with `scancel` shows as failed in `status`, and submitting the manifest again runs
  only that run;
* a run of 2 SLURM tasks (2 JAX processes that find each other from SLURM's variables) ends within
  1e-4 of the 1-process run (tests/test_multiprocess.py's tolerance).
Runs are the smoke world model (tests/test_multiprocess.py's) for a few hundred tiny steps.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from chessjax import workdir as workdirs
from launch import manifest

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SMOKE_FAMILY = "slice"  # tests/conftest.py's smoke family.

# One single-node SLURM for the module's tests (`tests/slurm/local_slurm.sh`), started by the
# first cluster test and stopped after the last, also when a test fails: configuration, munge key
# and socket, state and logs in a temporary folder, the daemons stopped by their pids.
#
# It needs root (munged runs as user munge, slurmd as root) and Debian's slurmctld, slurmd,
# slurm-client and munge (`make slurm` installs them). Where one is missing the cluster tests skip
# with one line naming it; under CI=true they fail instead, so CI always runs them.

SCRIPT = Path(__file__).resolve().parents[1] / "slurm" / "local_slurm.sh"
TOOLS = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scontrol", "scancel")


def missing() -> str | None:
  """What this machine lacks to start the test SLURM, in words (None: nothing)."""
  if os.geteuid() != 0:
    return "root (munged runs as user munge, slurmd as root)"
  path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
  absent = [t for t in TOOLS if not shutil.which(t, path=path)]
  if absent:
    return f"{', '.join(absent)} (make slurm: apt-get install slurmctld slurmd slurm-client munge)"
  return None


@pytest.fixture(scope="module")
def slurm():
  """SLURM_CONF of a running single-node SLURM (also set in os.environ while it runs)."""
  lack = missing()
  if lack:
    if os.environ.get("CI", "").lower() == "true":
      pytest.fail(f"cluster tests need {lack}; CI must run them")
    pytest.skip(f"cluster tests need {lack}")
  # Not under pytest's 0700 temporary folders: munged (user munge) must reach its socket.
  folder = Path(tempfile.mkdtemp(prefix="chessjax-slurm-", dir="/tmp"))
  env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
  try:
    r = subprocess.run(
      ["bash", str(SCRIPT), "start", str(folder)], env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, f"local SLURM did not start:\n{r.stdout}{r.stderr}"
    conf = folder / "slurm.conf"
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    os.environ["PATH"] = env["PATH"]
    yield conf
  finally:
    subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], env=env, capture_output=True)
    if "before" in locals():
      if before is None:
        os.environ.pop("SLURM_CONF", None)
      else:
        os.environ["SLURM_CONF"] = before
    shutil.rmtree(folder, ignore_errors=True)


STEPS = 150
TOY = [
  "--families", "slice", "--stage1-steps", "4", "--stage2-steps", "6", "--sample-games", "100",
  "--random-games", "10", "--eval-games", "10", "--max-len", "64", "--batch-size", "8",
  "--jobs", "2",
]  # fmt: skip


def cluster(*args, check=True) -> subprocess.CompletedProcess:
  r = subprocess.run(
    [sys.executable, "-m", "launch.cluster", *map(str, args)],
    cwd=REPO, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert not check or r.returncode == 0, r.stdout + r.stderr
  return r


def status(root) -> dict:
  return json.loads(cluster("status", root, "--json").stdout)


def squeue() -> dict[str, str]:
  out = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True)
  return dict(line.split() for line in out.stdout.splitlines())


def slurm_state() -> str:
  """What SLURM says of its node and jobs, for a failure message."""
  cmds = (["sinfo", "-N", "-l"], ["squeue", "-a", "-l", "-r"], ["scontrol", "show", "job"])
  out = [subprocess.run(c, capture_output=True, text=True).stdout for c in cmds]
  return "\n".join(out)[-4000:]


def wait_for(what: str, ok, timeout: float = 240, every: float = 0.3):
  deadline = time.monotonic() + timeout
  while not (value := ok()):
    if time.monotonic() >= deadline:
      raise AssertionError(f"timed out waiting for {what}; SLURM:\n{slurm_state()}")
    time.sleep(every)
  return value


def train_entry(dataset, work, devices: int, stage: str) -> dict:
  argv = [
    sys.executable, "-m", "chessjax.main",
    f"--config={REPO / 'configs' / 'cwm.py'}:family={SMOKE_FAMILY},size=d128,smoke=True",
    f"--workdir={work}", f"--config.data.train={dataset}", "--config.data.max_len=32",
    "--config.data.bucket_lengths=(32,)", f"--config.train.steps={STEPS}",
    "--config.train.log_every=5", "--config.train.checkpoint_every=1000000",
    "--config.train.compile_ahead=false", "--config.data.val_split=none",
  ]  # fmt: skip
  flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
  command = " ".join(map(str, argv))
  e = manifest.entry(0, stage, work.name, command, REPO, env={"XLA_FLAGS": flags.strip()})
  return dict(e, argv=argv, runs=[{"workdir": str(work), "steps": STEPS}])


def submit(root, entries, *flags) -> str:
  """Writes `entries` as a manifest and submits it; returns the array's job id."""
  path = root / "input.jsonl"
  manifest.write(path, manifest.renumber(entries))
  r = cluster("submit-manifest", root / "cluster", path, "--retries", "0", *flags)
  return r.stdout.split("array job ")[-1].split()[0] if "array job" in r.stdout else ""


def log_step(log) -> int:
  steps = [m.group("step") for m in map(_progress, _lines(log)) if m]
  return int(steps[-1]) if steps else 0


def _lines(path):
  return path.read_text(errors="replace").splitlines() if path.exists() else []


def _progress(line):
  import re

  return re.search(r"step (?P<step>\d+)/\d+ ", line)


def params_of(work):
  restored = workdirs.restore(work, which="latest")
  return [np.asarray(x) for x in jax.tree.leaves(restored.state["params"])]


def test_toy_protocol_through_slurm_equals_the_local_run(slurm, tmp_path):
  local, cl = tmp_path / "local", tmp_path / "slurm"
  run = [sys.executable, "-m", "launch.reproduce_mini", *TOY]
  r = subprocess.run([*run, "--workdir", local], cwd=REPO, capture_output=True, text=True)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  r = subprocess.run(
    [*run, "--workdir", cl, "--scheduler", "slurm", "--wait"],
    cwd=REPO, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  assert "chain done" in r.stdout

  def read(root, name):
    return json.loads((root / name).read_text().replace(str(root), "ROOT"))

  ours, theirs = read(cl, "report/tables.json"), read(local, "report/tables.json")
  assert [row for row in ours["tables"]["table8"]["rows"] if row["loss"] is not None]
  assert ours["tables"]["table8"] == theirs["tables"]["table8"]
  assert ours["selection"] == theirs["selection"]
  assert ours == theirs
  assert read(cl, "selection.json") == read(local, "selection.json")
  s = status(cl)
  for stage in ("data", "stage1", "stage2", "evaluate", "report"):
    st = s["stages"][stage]
    assert isinstance(st["total"], int) and st["total"] > 0 and st["finished"] == st["total"], s
  assert s["chain"]["state"] == "done"


@pytest.fixture(scope="module")
def preempted(slurm, small_dataset, tmp_path_factory):
  """Two runs as one array: task 0 sent SIGTERM during training and released at once after its
  requeue, task 1 uninterrupted (the reference); both with 2 CPU devices in one process."""
  root = tmp_path_factory.mktemp("preempt")
  a, b = root / "interrupted", root / "reference"
  job = submit(root, [train_entry(small_dataset, w, 2, "train") for w in (a, b)], "--throttle", "2")
  task = f"{job}_0"
  log = root / "cluster" / "slurm" / "logs" / "input-001_0.log"
  wait_for("task 0 to train", lambda: log_step(log) >= 10, timeout=300, every=0.1)
  assert not workdirs.finished(a, STEPS), "the run ended before the signal"
  subprocess.run(["scancel", "--signal=TERM", task], check=True)
  history = root / "cluster" / "slurm" / "tasks" / "input-001_0"
  wait_for("exit 75", lambda: any(x.split()[-1] == "75" for x in _lines(history) if "exit" in x))
  wait_for("the requeue", lambda: squeue().get(task) in ("PENDING", "RUNNING"))
  seen = status(root / "cluster")
  subprocess.run(["scontrol", "update", f"JobId={task}", "StartTime=now"], check=False)
  wait_for("both runs", lambda: not any(k.startswith(f"{job}_") for k in squeue()), timeout=300)
  return {"root": root, "a": a, "b": b, "log": log, "seen": seen}


def test_sigterm_saves_requeues_and_resumes_bit_exact(preempted):
  text = preempted["log"].read_text()
  assert "requeueing task" in text and "resumed from step" in text, text[-3000:]
  assert workdirs.read_summary(preempted["a"])["steps"] == STEPS
  assert 0 < workdirs.read_summary(preempted["a"])["resumed_from"] < STEPS
  for x, y in zip(params_of(preempted["a"]), params_of(preempted["b"]), strict=True):
    np.testing.assert_array_equal(x, y)
  # While requeued, status counted it preempted (or running again, once released).
  seen = preempted["seen"]["stages"]["train"]
  assert seen["preempted"] + seen["running"] >= 1 and seen["total"] == 2, seen
  final = status(preempted["root"] / "cluster")["stages"]["train"]
  assert final["finished"] == final["total"] == 2 and final["steps"] == 2 * STEPS, final


def test_a_killed_task_is_failed_and_resubmitted_alone(slurm, small_dataset, tmp_path):
  killed, kept = tmp_path / "killed", tmp_path / "kept"
  entries = [train_entry(small_dataset, w, 1, "train") for w in (killed, kept)]
  job = submit(tmp_path, entries, "--throttle", "2")
  log = tmp_path / "cluster" / "slurm" / "logs" / "input-001_0.log"
  wait_for("task 0 to train", lambda: log_step(log) >= 5, timeout=300, every=0.1)
  subprocess.run(["scancel", f"{job}_0"], check=True)
  wait_for("the array", lambda: not any(k.startswith(f"{job}_") for k in squeue()), timeout=300)
  assert workdirs.finished(kept, STEPS) and not workdirs.finished(killed, STEPS)
  st = status(tmp_path / "cluster")["stages"]["train"]
  assert (st["failed"], st["finished"], st["total"]) == (1, 1, 2), st
  assert str(killed) in st["problems"]
  kept_summary = (kept / workdirs.SUMMARY).stat().st_mtime_ns
  r = cluster("submit-manifest", tmp_path / "cluster", tmp_path / "input.jsonl")
  assert "1 of 2 task(s) already ended" in r.stdout, r.stdout
  (again,) = manifest.read(tmp_path / "cluster" / "slurm" / "manifests" / "input-002.jsonl")
  assert again["runs"] == [{"workdir": str(killed), "steps": STEPS}]
  job2 = r.stdout.split("array job ")[-1].split()[0]
  wait_for("the rerun", lambda: not any(k.startswith(f"{job2}_") for k in squeue()), timeout=300)
  assert workdirs.finished(killed, STEPS)
  assert (kept / workdirs.SUMMARY).stat().st_mtime_ns == kept_summary  # Not trained again.
  st = status(tmp_path / "cluster")["stages"]["train"]
  assert (st["finished"], st["failed"], st["total"]) == (2, 0, 2), st


def test_two_slurm_tasks_train_like_one_process(preempted, small_dataset, tmp_path):
  two = tmp_path / "two"
  job = submit(tmp_path, [train_entry(small_dataset, two, 1, "train")], "--tasks-per-run", "2")
  wait_for("the 2-task run", lambda: not any(k.startswith(f"{job}_") for k in squeue()), 600)
  log = (tmp_path / "cluster" / "slurm" / "logs" / "input-001_0.log").read_text()
  assert workdirs.finished(two, STEPS), log[-3000:]
  assert "2 devices, 2 processes" in log, log[-3000:]
  for x, y in zip(params_of(two), params_of(preempted["b"]), strict=True):
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)
