"""launch.cluster against a real single-node SLURM (`slurm` below: one for the module).

* `launch.cwm_mini` (two families, one seed) and the blindfolded LM grid (two configurations) at
  toy size with `--scheduler slurm --wait` give the records and tables of the same commands run here
  (conftest.py's `cwm_mini_local`, `lm_grid_local`), paths and times aside, floats to relative
  1e-5, and `launch.cluster status WORK --json` counts every stage of their plans finished;
* the toy protocol submitted with `launch.reproduce_mini --scheduler slurm --wait` gives the same
  report (Table 8 cells, selection) as the same command run here without SLURM (conftest.py's
  `reproduce_mini_local`, which tests/world_model/test_report.py checks cell by cell). Both run at
  conftest.py's reduced `MINI_FLAGS` (one family, a few steps, a slice of the sample): the whole
  `make reproduce-mini` twice would take most of 10 minutes on this suite's two cores. The
  committed record
  (docs/results/reproduce_mini.json) was made without the suite's XLA settings
  (conftest.py: JAX_DISABLE_MOST_OPTIMIZATIONS), so equal digits there would test XLA, not the
  chain; the two runs here share this process's settings and one CPU per process (each SLURM task
  runs on the one core this SLURM has, `CORE`), and must agree bit for bit.

* the transfer experiment at toy size (conftest.py's `transfer_flags`: one family, its source
  trained by the plan, four arms at two Ns) with `--scheduler slurm --wait` gives the record of the
  same command run here (`transfer_local`), floats to relative 1e-5 (a local task runs with one
  XLA thread, a SLURM task on the one CPU it asked for), and `status` counts every stage finished;
* a plan whose task fails stops its chain before the next stage, naming the task and its log (exit
  status 1), and submitting it again runs only what did not end.

One array of three training runs serves the next two checks (`array`):
* a task sent SIGTERM by `scancel --signal=TERM` (what the time limit and preemption send) saves,
  exits 75 and is requeued; released at once (`StartTime=now`, not SLURM's begin-time hold), it
  resumes and ends with the parameters of the uninterrupted run beside it, bit for bit;
* a task killed with `scancel` shows as failed in `status`, and submitting the manifest again runs
  only that run;
* a run of 2 SLURM tasks (2 JAX processes that find each other from SLURM's variables) ends within
  1e-4 of the 1-process run (tests/test_multiprocess.py's tolerance).
Runs are the smoke world model (tests/test_multiprocess.py's) for 40 tiny steps, enough for a
signal sent once step 5 is logged to land mid-run, compiled with XLA's optimisations (the suite
turns them off: its programs mostly run a step or two; one such run took 8.9 s optimised against
16.5 s, 2 devices on one AMD EPYC core, 2026-11-29).
"""

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import LM_GRID_FLAGS, MINI_FLAGS, cwm_mini_flags, transfer_flags

from chessjax import runtime
from chessjax import workdir as workdirs
from launch import cwm_mini, lm_sweep, manifest, slurm_jobs

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SMOKE_FAMILY = "slice"  # tests/conftest.py's smoke family.

# One single-node SLURM for the module's tests (`tests/slurm/local_slurm.sh`), started by the
# first cluster test and stopped after the last, also when a test fails: configuration, munge key
# and socket, state and logs in a temporary folder, the daemons stopped by their pids. It gets one
# core, this process's first (`CORE`), for its daemons and tasks (a task asks for one CPU and sees
# one, as the local runs it is compared with do): under `make test`'s two workers that is this
# worker's own core, so the other worker keeps its core to itself.
#
# It needs root (munged runs as user munge, slurmd as root) and Debian's slurmctld, slurmd,
# slurm-client and munge (`make slurm` installs them). Where one is missing the cluster tests skip
# with one line naming it; under CI=true they fail instead, so CI always runs them.

SCRIPT = Path(__file__).resolve().parents[1] / "slurm" / "local_slurm.sh"
TOOLS = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scontrol", "scancel")


CORE = str(min(os.sched_getaffinity(0)))


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
      ["bash", str(SCRIPT), "start", str(folder), CORE], env=env, capture_output=True, text=True,
      timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, f"local SLURM did not start:\n{r.stdout}{r.stderr}"
    conf = folder / "slurm.conf"
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    os.environ["PATH"] = env["PATH"]
    yield conf
  finally:
    stop = ["bash", str(SCRIPT), "stop", str(folder)]
    subprocess.run(stop, env=env, capture_output=True, timeout=120)
    if "before" in locals():
      if before is None:
        os.environ.pop("SLURM_CONF", None)
      else:
        os.environ["SLURM_CONF"] = before
    shutil.rmtree(folder, ignore_errors=True)


STEPS = 40


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
  out = subprocess.run(
    ["squeue", "-h", "-r", "-o", "%i %T"], capture_output=True, text=True, timeout=60
  )
  return dict(line.split() for line in out.stdout.splitlines())


def slurm_state() -> str:
  """What SLURM says of its node and jobs, for a failure message."""
  cmds = (["sinfo", "-N", "-l"], ["squeue", "-a", "-l", "-r"], ["scontrol", "show", "job"])
  out = [subprocess.run(c, capture_output=True, text=True, timeout=60).stdout for c in cmds]
  return "\n".join(out)[-4000:]


def wait_for(what: str, ok, timeout: float = 240, every: float = 0.3):
  deadline = time.monotonic() + timeout
  while not (value := ok()):
    if time.monotonic() >= deadline:
      raise AssertionError(f"timed out waiting for {what}; SLURM:\n{slurm_state()}")
    time.sleep(every)
  return value


def train_entry(dataset, work, devices: int, stage: str) -> manifest.Task:
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
  env = {"XLA_FLAGS": flags.strip(), "JAX_DISABLE_MOST_OPTIMIZATIONS": "0"}
  e = manifest.entry(0, stage, work.name, command, REPO, env=env)
  return dataclasses.replace(e, argv=tuple(map(str, argv)), runs=(manifest.Run(str(work), STEPS),))


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


def test_toy_protocol_through_slurm_equals_the_local_run(slurm, request, tmp_path):
  cl = tmp_path / "slurm"
  run = [sys.executable, "-m", "launch.reproduce_mini", *MINI_FLAGS, "--jobs", "2"]
  r = subprocess.run(
    [*run, "--workdir", cl, "--scheduler", "slurm", "--wait"],
    cwd=REPO, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  assert "chain done" in r.stdout
  local = local_run(request, "reproduce_mini_local")

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


TIME_KEY = re.compile(r"(^|_)(wall|cpu|elapsed|time|date)(_|$)|_s$")  # Times: not compared.


def assert_same(ours, theirs, roots: tuple[str, str], where: str = "") -> None:
  """`ours` equals `theirs` but for times (keys of `TIME_KEY`), the roots in strings (`roots`:
  ours, theirs) and floats, equal to relative 1e-5."""
  if isinstance(theirs, dict):
    assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), where
    for k in theirs:
      if not TIME_KEY.search(k):
        assert_same(ours[k], theirs[k], roots, f"{where}.{k}")
  elif isinstance(theirs, list):
    assert isinstance(ours, list) and len(ours) == len(theirs), where
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
      assert_same(a, b, roots, f"{where}[{i}]")
  elif isinstance(theirs, float) and not isinstance(ours, bool):
    assert ours == pytest.approx(theirs, rel=1e-5, nan_ok=True), where
  elif isinstance(theirs, str):
    assert ours.replace(roots[0], "ROOT") == theirs.replace(roots[1], "ROOT"), where
  else:
    assert ours == theirs, where


def through_slurm(module: str, where: str, root, flags) -> None:
  """`python -m MODULE WHERE ROOT FLAGS --scheduler slurm --wait`, which must exit 0."""
  argv = [sys.executable, "-m", module, where, str(root), *flags, "--scheduler", "slurm", "--wait"]
  r = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def local_run(request, fixture: str) -> Path:
  """The local run a test compares its SLURM run with (conftest.py's `fixture`), asked for once
  the SLURM run has ended: this SLURM shares this worker's core, and the other worker may have
  made the local run meanwhile (test_transfer.py, test_cwm_mini.py, ...); made here otherwise,
  after the SLURM run, not beside it on the same core, while the other worker would wait for it."""
  return request.getfixturevalue(fixture)


def assert_every_stage_finished(root, stages) -> None:
  s = status(root)
  for stage in stages:
    st = s["stages"][stage]
    assert isinstance(st["total"], int) and st["total"] > 0 and st["finished"] == st["total"], s


def test_cwm_mini_through_slurm_equals_the_local_run(slurm, toy_pgns, request, tmp_path):
  cl = tmp_path / "slurm"
  through_slurm("launch.cwm_mini", "--work", cl, cwm_mini_flags(toy_pgns))
  cwm_mini_local = local_run(request, "cwm_mini_local")
  ours, theirs = (json.loads((w / "tables.json").read_text()) for w in (cl, cwm_mini_local))
  assert [r["family"] for r in theirs["runs"]] == ["slice", "transformer"]
  for key in ("runs", "summary"):
    assert_same(ours[key], theirs[key], (str(cl), str(cwm_mini_local)), key)
  assert_every_stage_finished(cl, cwm_mini.STAGES)


def test_lm_grid_through_slurm_equals_the_local_run(slurm, request, tmp_path):
  cl = tmp_path / "slurm"
  through_slurm("launch.lm_sweep", "--root", cl, LM_GRID_FLAGS)
  lm_grid_local = local_run(request, "lm_grid_local")
  ours, theirs = (
    json.loads((w / "report" / "tables.json").read_text()) for w in (cl, lm_grid_local)
  )
  assert len(theirs["runs"]) == 2
  assert_same(ours, theirs, (str(cl), str(lm_grid_local)))
  for name in ("gpt2_uci_S", "gpt2_rap5_S"):
    ours, theirs = (
      json.loads((w / name / "eval" / "results.json").read_text()) for w in (cl, lm_grid_local)
    )
    assert_same(ours, theirs, (str(cl), str(lm_grid_local)), name)
  assert_every_stage_finished(cl, lm_sweep.STAGES)


@pytest.fixture(scope="module")
def array(slurm, small_dataset, tmp_path_factory):
  """Three runs as one array, at once, each with 2 CPU devices in one process: task 0 is sent
  SIGTERM during training and released at once after its requeue, task 1 runs uninterrupted (the
  reference), task 2 is killed (`scancel`) during training. Returns the folders and what
  `status` said while task 0 waited requeued and once the array had ended."""
  root = tmp_path_factory.mktemp("array")
  works = [root / name for name in ("interrupted", "reference", "killed")]
  job = submit(root, [train_entry(small_dataset, w, 2, "train") for w in works], "--throttle", "3")
  logs = [root / "cluster" / "slurm" / "logs" / f"input-001_{i}.log" for i in range(3)]
  signals = {0: ["--signal=TERM"], 2: []}

  def signal_when_training() -> bool:
    for i in [i for i in signals if log_step(logs[i]) >= 5]:
      subprocess.run(["scancel", *signals.pop(i), f"{job}_{i}"], check=True, timeout=60)
    return not signals

  wait_for("tasks 0 and 2 to train", signal_when_training, timeout=300, every=0.1)
  history = root / "cluster" / "slurm" / "tasks" / "input-001_0"
  wait_for("exit 75", lambda: any(x.split()[-1] == "75" for x in _lines(history) if "exit" in x))
  wait_for("the requeue", lambda: squeue().get(f"{job}_0") in ("PENDING", "RUNNING"))
  seen = status(root / "cluster")
  subprocess.run(["scontrol", "update", f"JobId={job}_0", "StartTime=now"], timeout=60)
  wait_for("the array", lambda: not any(k.startswith(f"{job}_") for k in squeue()), timeout=300)
  after = status(root / "cluster")
  return {"root": root, "works": works, "log": logs[0], "seen": seen, "after": after}


def test_sigterm_saves_requeues_and_resumes_bit_exact(array):
  interrupted, reference, _ = array["works"]
  text = array["log"].read_text()
  assert "requeueing task" in text and "resumed from step" in text, text[-3000:]
  assert workdirs.read_summary(interrupted)["steps"] == STEPS
  assert 0 < workdirs.read_summary(interrupted)["resumed_from"] < STEPS
  for x, y in zip(params_of(interrupted), params_of(reference), strict=True):
    np.testing.assert_array_equal(x, y)
  # While requeued, status counted it preempted (or running again, once released).
  seen = array["seen"]["stages"]["train"]
  assert seen["preempted"] + seen["running"] >= 1 and seen["total"] == 3, seen


def test_a_killed_task_is_failed_and_resubmitted_alone(array):
  interrupted, reference, killed = array["works"]
  root = array["root"]
  assert not workdirs.finished(killed, STEPS)
  st = array["after"]["stages"]["train"]
  assert (st["failed"], st["finished"], st["total"]) == (1, 2, 3), st
  assert str(killed) in st["problems"]
  mtimes = [(w / workdirs.SUMMARY).stat().st_mtime_ns for w in (interrupted, reference)]
  r = cluster("submit-manifest", root / "cluster", root / "input.jsonl")
  assert "2 of 3 task(s) already ended" in r.stdout, r.stdout
  (again,) = manifest.read(root / "cluster" / "slurm" / "manifests" / "input-002.jsonl")
  assert again.runs == (manifest.Run(str(killed), STEPS),)
  job2 = r.stdout.split("array job ")[-1].split()[0]
  wait_for("the rerun", lambda: not any(k.startswith(f"{job2}_") for k in squeue()), timeout=300)
  assert workdirs.finished(killed, STEPS)
  # The other two were not trained again.
  assert [(w / workdirs.SUMMARY).stat().st_mtime_ns for w in (interrupted, reference)] == mtimes
  st = status(root / "cluster")["stages"]["train"]
  assert (st["finished"], st["failed"], st["total"]) == (3, 0, 3), st
  assert st["steps"] == 3 * STEPS, st


def test_two_slurm_tasks_train_like_one_process(array, small_dataset, tmp_path):
  two = tmp_path / "two"
  job = submit(tmp_path, [train_entry(small_dataset, two, 1, "train")], "--tasks-per-run", "2")
  wait_for("the 2-task run", lambda: not any(k.startswith(f"{job}_") for k in squeue()), 600)
  log = (tmp_path / "cluster" / "slurm" / "logs" / "input-001_0.log").read_text()
  assert workdirs.finished(two, STEPS), log[-3000:]
  assert "2 devices, 2 processes" in log, log[-3000:]
  for x, y in zip(params_of(two), params_of(array["works"][1]), strict=True):
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)


# What an array task's command prints of the trainer's environment once `chessjax.runtime` set it
# (`setup` does this first, in every training and evaluation command): what it set, the variables
# XLA reads, the platform it read and the compilation cache folder.
SHOW_ENVIRONMENT = """
import json, os, sys
from chessjax import runtime
done = runtime.set_environment()
keys = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_FLAGS")
seen = {"set": done, "env": {k: os.environ.get(k) for k in keys},
        "platform": runtime.default_platform(), "cache": runtime.compilation_cache_dir()}
with open(sys.argv[1], "w") as f:
  json.dump(seen, f)
"""


def test_an_array_task_gets_the_trainers_environment(slurm, tmp_path):
  """Through `launch.cluster submit-manifest` and `slurm_array.sh`, a task's command starts with
  the submitter's environment (sbatch passes it on) and `chessjax.runtime` adds its defaults:
  task 0, submitted with none of them set, gets the memory fraction, the CPU's XLA flags (the
  submitter's, nothing of a GPU's) and the one default cache folder; task 1's own values
  (a fraction, a flag, a GPU platform) are kept, the GPU's flag added to its flags."""
  own = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5", "XLA_FLAGS": "--xla_dump_to=/tmp/x",
         "JAX_PLATFORMS": "cuda"}  # fmt: skip
  entries = []
  for i, env in enumerate(({}, own)):
    out = tmp_path / f"env{i}.json"
    command = shlex.join([sys.executable, "-c", SHOW_ENVIRONMENT, str(out)])
    entries.append(manifest.entry(i, "env", f"env{i}", command, REPO, env=env, outputs=[out]))
  path = manifest.write(tmp_path / "env.jsonl", entries)
  unset = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "JAX_PLATFORMS", "JAX_COMPILATION_CACHE_DIR")
  env = {k: v for k, v in os.environ.items() if k not in unset}
  r = subprocess.run(
    [sys.executable, "-m", "launch.cluster", "submit-manifest", str(tmp_path / "cluster"),
     str(path), "--retries", "0"],
    cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert r.returncode == 0 and "array job" in r.stdout, r.stdout + r.stderr
  job = r.stdout.split("array job ")[-1].split()[0]
  wait_for("the array", lambda: not any(k.startswith(f"{job}_") for k in squeue()), timeout=120)
  logs = tmp_path / "cluster" / "slurm" / "logs"
  shown = [tmp_path / f"env{i}.json" for i in range(2)]
  assert all(p.exists() for p in shown), "".join(f.read_text() for f in logs.glob("*.log"))[-3000:]
  defaults, kept = (json.loads(p.read_text()) for p in shown)
  flags = os.environ.get("XLA_FLAGS")  # The suite's CPU flags: no GPU flag added to them.
  assert defaults["platform"] == "cpu"
  assert defaults["set"] == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.90"}
  assert defaults["env"] == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.90", "XLA_FLAGS": flags}
  assert defaults["cache"] == runtime.default_cache_dir()
  gpu = "--xla_gpu_enable_latency_hiding_scheduler=true"
  assert kept["platform"] == "gpu"
  assert kept["env"] == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5",
                         "XLA_FLAGS": f"--xla_dump_to=/tmp/x {gpu}"}  # fmt: skip


def _record(work) -> dict:
  """WORK/transfer.json, WORK's path as "WORK", without the times (`*_cpu_s`: no bench.json on
  SLURM)."""

  def strip(x):
    if isinstance(x, dict):
      return {k: strip(v) for k, v in x.items() if not k.endswith("_cpu_s")}
    return [strip(v) for v in x] if isinstance(x, list) else x

  return strip(json.loads((work / "transfer.json").read_text().replace(str(work), "WORK")))


def _assert_close(ours, theirs, where="record") -> None:
  """Equal, but floats to relative 1e-5."""
  assert type(ours) is type(theirs), where
  if isinstance(ours, dict):
    assert list(ours) == list(theirs), where
    for k in ours:
      _assert_close(ours[k], theirs[k], f"{where}.{k}")
  elif isinstance(ours, list):
    assert len(ours) == len(theirs), where
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
      _assert_close(a, b, f"{where}[{i}]")
  elif isinstance(ours, float):
    assert ours == pytest.approx(theirs, rel=1e-5), where
  else:
    assert ours == theirs, where


def test_the_transfer_plan_through_slurm_equals_the_local_run(
  slurm, small_dataset, request, tmp_path
):
  work = tmp_path / "transfer"
  argv = [sys.executable, "-m", "launch.transfer", *transfer_flags(work, small_dataset)]
  r = subprocess.run(
    [*argv, "--scheduler", "slurm", "--wait"], cwd=REPO, capture_output=True, text=True,
    timeout=480,
  )  # fmt: skip
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
  assert "chain done at step end: every stage finished" in r.stdout, r.stdout
  local = local_run(request, "transfer_local")
  ours, theirs = _record(work), _record(local)
  assert ours["families"]["gated_deltanet"]["seeds"]["0"]["runs"]["16"]["ft"]["atomic"]["loss"] > 0
  _assert_close(ours, theirs)
  s = status(work)
  assert list(s["stages"]) == ["data", "source", "train", "evaluate", "report"]
  totals = {stage: (st["finished"], st["total"]) for stage, st in s["stages"].items()}
  assert totals == {"data": (4, 4), "source": (1, 1), "train": (8, 8), "evaluate": (9, 9),
                    "report": (1, 1)}, s  # fmt: skip
  assert s["stages"]["train"]["steps"] == s["stages"]["train"]["total_steps"] == 6 * 2 + 2 * 5
  assert s["chain"]["state"] == "done"


def test_a_plan_whose_task_fails_stops_naming_it_and_a_resubmit_runs_the_rest(
  slurm, tmp_path, capsys
):
  def bash(stage, name, script, **kw):
    return manifest.task(stage, name, ["bash", "-c", script], tmp_path, **kw)

  tasks = [
    bash("first", "ok", "echo ok >> runs; touch ok.txt", outputs=[tmp_path / "ok.txt"]),
    bash("first", "bad", "test -e fixed && touch bad.txt", outputs=[tmp_path / "bad.txt"]),
    bash("then", "last", "echo last >> runs"),  # Neither runs nor outputs: ended if it exits 0.
  ]
  args = argparse.Namespace(wait=True, retries=0, python=sys.executable)
  work = tmp_path / "work"

  def submit() -> int:
    return slurm_jobs.run_plan(tasks, args, work, prog="plan", stages=["first", "then"])

  assert submit() == 1
  err = capsys.readouterr().err
  log = work / "slurm" / "logs" / "first-001_1.log"
  assert "plan: chain stopped at step then: 1 task(s) before step then did not finish" in err
  assert f"first-001 task 1 (bad: bad.txt); log {log}" in err and log.exists()
  s = status(work)
  assert (s["stages"]["first"]["finished"], s["stages"]["first"]["failed"]) == (1, 1), s
  assert (s["stages"]["then"]["pending"], s["stages"]["then"]["total"]) == (1, 1), s
  assert s["chain"]["state"] == "stopped" and str(log) in s["stages"]["first"]["problems"].values()
  (tmp_path / "fixed").touch()
  args.wait = False  # Submitted, then waited for here: with SLURM's queue asked twice a minute,
  assert submit() == 0, capsys.readouterr().err  # the wait ends on the chain's own end.
  ok, message = slurm_jobs.wait(work, poll=30)
  waited = time.time() - json.loads((work / "slurm" / "chain.json").read_text())["time"]
  assert ok and "every stage finished" in message and waited < 10, (message, waited)
  assert (tmp_path / "runs").read_text().split() == ["ok", "last"]  # ok did not run again.
  s = status(work)
  assert all(st["finished"] == st["total"] == (2 if n == "first" else 1)
             for n, st in s["stages"].items()), s  # fmt: skip
