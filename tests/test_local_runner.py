"""The one local runner (launch/local.py), the scheduler's flags and `execute`, manifests of tasks,
and `launch.cluster exec`/`ended` without JAX, with tiny shell and Python commands (no training).

The tests that start a process are `multiprocess`; the rest (manifest round trips, flags, plan
checks) are quick.
"""

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launch import local, manifest, scheduler, slurm_jobs
from launch.manifest import Task

REPO = Path(__file__).resolve().parents[1]


def sh(tmp, stage: str, name: str, script: str, **kw) -> Task:
  """A task running `script` in bash from `tmp`."""
  return manifest.task(stage, name, ["bash", "-c", script], tmp, **kw)


def run(tasks, lanes=None, tmp=None, **kw) -> tuple[local.Result, list[str]]:
  said = []
  result = local.run(tasks, lanes or local.pool(2), log_dir=tmp / "logs", say=said.append, **kw)
  return result, said


def order(tmp) -> list[str]:
  return (tmp / "order").read_text().split()


# --- The runner ----------------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_a_task_waits_for_the_tasks_its_after_names(tmp_path):
  tasks = [
    sh(tmp_path, "s", "a", "sleep 0.5; echo a >> order"),
    sh(tmp_path, "s", "b", "echo b >> order", after=["a"]),
    sh(tmp_path, "s", "c", "echo c >> order"),
  ]
  result, said = run(tasks, tmp=tmp_path)
  assert result.ok and [t.name for t in result.ran] == ["c", "a", "b"], said
  assert order(tmp_path) == ["c", "a", "b"]


@pytest.mark.multiprocess
def test_without_after_a_task_waits_for_the_stages_before_its_own(tmp_path):
  tasks = [
    sh(tmp_path, "second", "y", "echo y >> order"),
    sh(tmp_path, "first", "x", "sleep 0.5; echo x >> order"),
  ]
  result, _ = run(tasks, tmp=tmp_path, stages=["first", "second"])
  assert result.ok and order(tmp_path) == ["x", "y"]


@pytest.mark.multiprocess
def test_a_failed_task_blocks_what_needs_it_and_the_report_names_it(tmp_path, capsys):
  tasks = [
    sh(tmp_path, "s", "bad", "echo oops; exit 3"),
    sh(tmp_path, "s", "child", "echo child >> order", after=["bad"]),
    sh(tmp_path, "s", "free", "echo free >> order"),
    sh(tmp_path, "s", "orphan", "true", after=["absent"]),
  ]
  result, _ = run(tasks, tmp=tmp_path)
  assert order(tmp_path) == ["free"]
  (f,) = result.failures
  log = tmp_path / "logs" / "s" / "bad.log"
  assert (f.task.name, f.returncode, f.log) == ("bad", 3, log)
  assert "oops" in log.read_text()
  assert {t.name: why for t, why in result.blocked} == {
    "child": "needs bad, which did not end",
    "orphan": "needs absent, which is not in the plan",
  }
  assert local.report(result, "prog") == 1
  err = capsys.readouterr().err
  assert f"prog: s task bad failed (exit status 3); see {log}" in err
  assert "prog: s task child not run: needs bad" in err


@pytest.mark.multiprocess
def test_a_plan_with_a_failing_task_exits_1_naming_it_and_its_log(tmp_path, capsys):
  log = tmp_path / "runs" / "r" / "train.log"
  tasks = [
    sh(tmp_path, "train", "r", "exit 2", log=log),
    sh(tmp_path, "report", "report", "echo report >> order"),
  ]
  args = argparse.Namespace(scheduler="local", jobs=1, cores="", until="")
  assert scheduler.execute(tasks, args, tmp_path, prog="launch.x") == 1
  err = capsys.readouterr().err
  assert f"launch.x: train task r failed (exit status 2); see {log}" in err
  assert "launch.x: report task report not run: needs r, which did not end" in err
  assert not (tmp_path / "order").exists()


@pytest.mark.multiprocess
def test_ended_tasks_are_skipped(tmp_path):
  (tmp_path / "done.txt").write_text("")
  workdir = tmp_path / "run"
  workdir.mkdir()
  (workdir / "train_summary.json").write_text(json.dumps({"steps": 5, "total_steps": 5}))
  tasks = [
    sh(tmp_path, "s", "output", "echo output >> order", outputs=[tmp_path / "done.txt"]),
    sh(tmp_path, "s", "trained", "echo trained >> order", runs=[(workdir, 5)]),
    sh(tmp_path, "s", "longer", "echo longer >> order", runs=[(workdir, 6)]),
    sh(tmp_path, "s", "missing", "touch missing.txt", outputs=[tmp_path / "missing.txt"]),
  ]
  assert [t.ended() for t in tasks] == [True, True, False, False]
  result, said = run(tasks, tmp=tmp_path)
  assert said[0] == "2 task(s) to run of 4"
  assert result.ok and order(tmp_path) == ["longer"] and tasks[3].ended()
  result, said = run(tasks[:2] + tasks[3:], tmp=tmp_path)
  assert said == ["0 task(s) to run of 3"] and result.ran == []


@pytest.mark.multiprocess
def test_each_task_is_timed_into_bench_json_beside_its_log(tmp_path):
  run_dir = tmp_path / "run"
  tasks = [
    sh(tmp_path, "train", "t", "echo training", log=run_dir / "train.log"),
    sh(tmp_path, "eval", "e", "exit 4", log=run_dir / "eval.log"),
    sh(tmp_path, "data", "d1", "sleep 0.3", log=tmp_path / "data" / "prepare.log"),
    sh(tmp_path, "data", "d2", "sleep 0.3", log=tmp_path / "data" / "prepare.log"),
  ]
  run(tasks, tmp=tmp_path, stages=["data", "train", "eval"])
  segments = json.loads((run_dir / "bench.json").read_text())["segments"]
  assert [(s["phase"], s["returncode"]) for s in segments] == [("train", 0), ("eval", 4)]
  for s in segments:
    assert s["end"] >= s["start"] and s["wall_s"] >= 0 and s["cpu_s"] >= 0 and s["core"] is None
  assert "$ bash -c 'echo training'\ntraining\n" == (run_dir / "train.log").read_text()
  # Two tasks of one folder at once: both segments kept, neither closed as killed.
  data = json.loads((tmp_path / "data" / "bench.json").read_text())["segments"]
  assert len(data) == 2 and all(s["returncode"] == 0 and "killed" not in s for s in data)


@pytest.mark.multiprocess
def test_a_pinned_lane_runs_under_taskset_with_one_thread(tmp_path):
  core = min(os.sched_getaffinity(0))
  script = "import os; print(sorted(os.sched_getaffinity(0)), os.environ['OMP_NUM_THREADS'])"
  t = manifest.task("s", "p", [sys.executable, "-c", script], tmp_path, log=tmp_path / "p.log")
  result, said = run([t], local.cores(str(core)), tmp=tmp_path)
  assert result.ok and said[1] == f"[s] p on core {core}"
  assert (tmp_path / "p.log").read_text().splitlines()[-1] == f"[{core}] 1"
  assert json.loads((tmp_path / "bench.json").read_text())["segments"][0]["core"] == core


@pytest.mark.multiprocess
def test_a_command_that_cannot_start_is_a_failure_not_a_hang(tmp_path):
  t = manifest.task("s", "x", [str(tmp_path / "no-such-program")], tmp_path)
  result, _ = run([t], tmp=tmp_path)
  assert [(f.task.name, f.returncode) for f in result.failures] == [("x", 127)]
  assert "cannot start the command" in (tmp_path / "logs" / "s" / "x.log").read_text()


RUNNER = """
import sys
from launch import local, manifest
t = manifest.task("train", "sleeper", ["bash", "-c", "touch started; exec sleep 60"], sys.argv[1])
then = manifest.task("train", "then", ["touch", "after"], sys.argv[1], after=["sleeper"])
sys.exit(local.report(local.run([t, then], local.pool(1), log_dir=sys.argv[1]), "runner"))
"""


@pytest.mark.multiprocess
def test_sigterm_stops_the_running_task_and_the_runner_returns_75(tmp_path):
  proc = subprocess.Popen(
    [sys.executable, "-c", RUNNER, str(tmp_path)], cwd=REPO, stderr=subprocess.PIPE, text=True
  )
  deadline = time.monotonic() + 60
  while not (tmp_path / "started").exists():
    assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
    time.sleep(0.05)
  start = time.monotonic()
  proc.send_signal(signal.SIGTERM)
  assert proc.wait(timeout=30) == 75
  assert time.monotonic() - start < 10  # The sleep was stopped, not waited for.
  assert "stopped by a signal; rerun the same command to resume" in proc.stderr.read()
  assert not (tmp_path / "after").exists()  # Nothing starts after the signal.
  (segment,) = json.loads((tmp_path / "train" / "bench.json").read_text())["segments"]
  assert segment["returncode"] == -signal.SIGTERM


def test_task_names_must_be_unique(tmp_path):
  tasks = [sh(tmp_path, "s", "a", "true"), sh(tmp_path, "t", "a", "true")]
  with pytest.raises(ValueError, match=r"unique in a plan: \['a'\]"):
    local.run(tasks, local.pool(1), log_dir=tmp_path)
  with pytest.raises(slurm_jobs.ClusterError, match=r"unique in a plan: \['a'\]"):
    slurm_jobs.check_plan(tasks, ["s", "t"])


def test_until_keeps_the_stages_up_to_one(tmp_path):
  tasks = [sh(tmp_path, s, s, "true") for s in ("data", "train", "evaluate", "report")]
  stages = ["data", "train", "evaluate", "report"]
  assert [t.stage for t in scheduler.until(tasks, "train", stages)] == ["data", "train"]
  assert scheduler.until(tasks, "", stages) == tasks
  with pytest.raises(SystemExit, match="--until nope: the plan's stages are data, train"):
    scheduler.until(tasks, "nope", stages)


@pytest.mark.multiprocess
def test_execute_with_until_runs_those_stages_only(tmp_path):
  tasks = [sh(tmp_path, s, s, f"echo {s} >> order") for s in ("data", "train", "report")]
  args = argparse.Namespace(scheduler="local", jobs=2, cores="", until="train")
  assert scheduler.execute(tasks, args, tmp_path, prog="x") == 0
  assert order(tmp_path) == ["data", "train"]


# --- Manifests ------------------------------------------------------------------------------------


def test_a_task_round_trips_through_a_manifest_line(tmp_path):
  t = manifest.task(
    "train", "r", ["python", "-m", "chessjax.main", "--workdir=a b"], tmp_path,
    env={"B": 2, "A": "1"}, runs=[(tmp_path / "r", 10), (tmp_path / "q", None)],
    outputs=[tmp_path / "out.json"], after=["data"], log=tmp_path / "r" / "train.log", index=3,
  )  # fmt: skip
  line = json.dumps(t.to_json(), sort_keys=True)
  assert manifest.from_json(json.loads(line), "here") == t
  assert t.command == "python -m chessjax.main '--workdir=a b'"
  assert t.env == (("A", "1"), ("B", "2"))
  path = manifest.write(tmp_path / "m.jsonl", manifest.renumber([t, t]))
  assert manifest.read(path) == manifest.renumber([t, t])
  assert manifest.line(path, 1).index == 1


def test_a_line_without_after_and_log_reads_as_before(tmp_path):
  old = {
    "index": 0, "stage": "stage1", "name": "cell", "argv": ["python", "-c", "pass"],
    "command": "python -c pass", "cwd": str(tmp_path), "env": {},
    "runs": [{"workdir": str(tmp_path / "w"), "steps": 7}], "outputs": [],
  }  # fmt: skip
  (tmp_path / "stage1.jsonl").write_text(json.dumps(old) + "\n")
  (t,) = manifest.read(tmp_path / "stage1.jsonl")
  assert t.after is None and t.log == "" and t.runs == (manifest.Run(str(tmp_path / "w"), 7),)
  assert t.to_json() == old  # Written back the same: `after` and `log` only when set.
  del old["stage"]
  (tmp_path / "stage9.jsonl").write_text(json.dumps(old) + "\n")
  assert manifest.read(tmp_path / "stage9.jsonl")[0].stage == "stage9"  # The file's name.


def test_a_plan_on_slurm_needs_only_earlier_stages(tmp_path):
  a, b = sh(tmp_path, "data", "a", "true"), sh(tmp_path, "train", "b", "true", after=["a"])
  assert slurm_jobs.check_plan([a, b], ["data", "train", "report"]) == ["data", "train"]
  same = sh(tmp_path, "train", "c", "true", after=["b"])
  with pytest.raises(slurm_jobs.ClusterError, match="task c .train. needs b: on SLURM"):
    slurm_jobs.check_plan([a, b, same], ["data", "train"])
  with pytest.raises(slurm_jobs.ClusterError, match="not in the plan's order"):
    slurm_jobs.check_plan([a, b], ["data"])


def test_the_slurm_flags_are_the_options_fields():
  fields = {f.name for f in dataclasses.fields(slurm_jobs.Options)}
  assert set(slurm_jobs.OPTION_KEYS) == fields - {"until", "python"}
  ap = argparse.ArgumentParser()
  scheduler.add_flags(ap)
  args = ap.parse_args(
    ["--partition", "gpu", "--cpus-per-task", "4", "--sbatch-arg=--constraint=a100", "--time",
     "1:00:00", "--until", "train", "--python", "py"]
  )  # fmt: skip
  opts = slurm_jobs.options(args, {"throttle": 8, "partition": "cpu"}, until=False)
  assert (opts.partition, opts.cpus_per_task, opts.throttle, opts.time) == ("gpu", 4, 8, "1:00:00")
  assert opts.sbatch_args == ["--constraint=a100"] and opts.python == "py"
  assert opts.until == slurm_jobs.Options().until
  every = {a.dest for a in ap._actions}
  assert set(slurm_jobs.OPTION_KEYS) <= every


# --- launch.cluster exec and ended: no JAX ------------------------------------------------------


def _python(code: str, *args, **kw) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, "-c", code, *map(str, args)], cwd=REPO, capture_output=True, text=True,
    timeout=60, **kw,
  )  # fmt: skip


HEAVY = "sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'orbax', 'flax'))"


@pytest.mark.multiprocess
def test_cluster_and_manifest_import_no_jax():
  r = _python("import launch.cluster, launch.manifest, sys; assert 'jax' not in sys.modules")
  assert r.returncode == 0, r.stderr
  light = "chessjax.rundir, launch.cluster, launch.slurm_jobs, launch.protocol, launch.scheduler"
  r = _python(f"import {light}, sys; print({HEAVY})")
  assert r.stdout.strip() == "[]", r.stdout


EXEC = f"""
import os, sys
def execvpe(file, argv, env):  # All that exec does, short of replacing the process.
  print("would exec", argv)
  print("modules", {HEAVY})
  sys.exit(0)
os.execvpe = execvpe
from launch import cluster
code = cluster.main(sys.argv[1:])
print("modules", {HEAVY})
sys.exit(code)
"""


@pytest.mark.multiprocess
def test_exec_and_ended_run_without_jax_and_a_bad_manifest_is_one_line(tmp_path):
  workdir = tmp_path / "w"
  workdir.mkdir()
  (workdir / "train_summary.json").write_text(json.dumps({"steps": 3}))
  path = manifest.write(
    tmp_path / "m.jsonl",
    [
      manifest.task("s", "a", [sys.executable, "-c", "print('hello')"], REPO, runs=[(workdir, 3)]),
      manifest.task("s", "b", ["true"], REPO, runs=[(workdir, 4)], index=1),
    ],
  )
  for argv, code, said in (
    (["exec", path, 0], 0, "would exec"), (["ended", path, 0], 0, "ended"),
    (["ended", path, 1], 1, "not ended"),
  ):  # fmt: skip
    r = _python(EXEC, *argv)
    assert r.returncode == code and said in r.stdout, r.stdout + r.stderr
    assert "modules []" in r.stdout, r.stdout
  r = subprocess.run(
    [sys.executable, "-m", "launch.cluster", "exec", str(path), "0"], cwd=REPO,
    capture_output=True, text=True, timeout=60,
  )  # fmt: skip
  assert (r.returncode, r.stdout) == (0, "hello\n"), r.stderr
  log = tmp_path / "logs" / "train.log"  # A task naming its log writes there, as it does locally.
  code = "import sys; print('out'); print('err', file=sys.stderr)"
  logged = manifest.write(
    tmp_path / "l.jsonl", [manifest.task("s", "c", [sys.executable, "-c", code], REPO, log=log)]
  )
  for attempt in (1, 2):  # A requeued task appends.
    r = subprocess.run(
      [sys.executable, "-m", "launch.cluster", "exec", str(logged), "0"], cwd=REPO,
      capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (r.returncode, r.stdout) == (0, f"s task 0 (c): output appended to {log}\n"), r.stderr
    assert sorted(log.read_text().splitlines()) == ["err"] * attempt + ["out"] * attempt
  bad = tmp_path / "bad.jsonl"
  bad.write_text("{not json\n")
  for argv in (["exec", bad, 0], ["ended", bad, 0], ["exec", path, 5]):
    r = _python(EXEC, *argv)
    lines = r.stderr.splitlines()
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert lines[0].startswith("launch.cluster: error: "), r.stderr
  assert "not JSON" in _python(EXEC, "ended", bad, 0).stderr
  assert "no task 5 (it has 2)" in _python(EXEC, "exec", path, 5).stderr


@pytest.mark.multiprocess
def test_slurm_array_retries_a_failed_task_but_not_an_unreadable_one(tmp_path):
  """slurm_array.sh under a fake srun (runs its command once): a task that fails is retried
  `--retries` times; one whose manifest cannot be read fails once (`ended` says neither)."""
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  (bin_dir / "srun").write_text('#!/bin/sh\nwhile [ "${1#--}" != "$1" ]; do shift; done\n"$@"\n')
  (bin_dir / "srun").chmod(0o755)
  env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SLURM_ARRAY_TASK_ID="0")
  counter = tmp_path / "attempts"
  failing = manifest.task("s", "f", ["bash", "-c", f"echo x >> {counter}; exit 3"], REPO)
  good = manifest.write(tmp_path / "good.jsonl", [failing])
  bad = tmp_path / "bad.jsonl"
  bad.write_text("[]\n")
  script = [str(REPO / "launch" / "slurm_array.sh"), "--python", sys.executable]
  script += ["--retries", "2", "--retry-delay", "0", "--manifest"]
  run = dict(env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
  r = subprocess.run([*script, str(good)], **run)
  assert r.returncode == 3 and len(counter.read_text().split()) == 3, r.stderr
  assert "exit status 3 after 3 attempt(s); giving up" in r.stderr
  r = subprocess.run([*script, str(bad)], **run)
  assert r.returncode == 1 and r.stderr.count("attempt ") == 1, r.stderr
  assert "cannot be read (above); not retrying" in r.stderr
  assert "launch.cluster: error: " in r.stderr
