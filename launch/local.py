"""One local runner for every plan of tasks (`launch.manifest.Task`): the tasks run here as
subprocesses, on pinned cores or a pool of N at a time, in plan order as their dependencies allow.

    failures = local.run(tasks, local.cores("0,1"))   # one at a time on each core, pinned
    failures = local.run(tasks, local.pool(4))         # four at a time, unpinned

* A task that has ended (`Task.ended`: its runs finished, its outputs present) is skipped.
* A task starts once every task it needs has ended or succeeded: the tasks named by its `after`,
  or by default every task of the stages before its own. A task whose dependency failed is not
  run (reported as blocked, naming the failure).
* A pinned lane runs its task under `taskset` with one XLA and BLAS thread
  (`chessjax.machine.pinned_env`): what one core of a CPU run is measured with. On SLURM the
  binding is SLURM's (`--cpus-per-task`), not this module's.
* Each task's output is appended to its `log` (else LOG_DIR/STAGE/NAME.log), and its wall and CPU
  time to `bench.json` beside that log as a segment {phase, core, start, end, wall_s, cpu_s,
  returncode} (the phase is the log's stem: a run's train.log and eval.log give "train" and
  "eval"). A segment an earlier session left open (the machine stopped) is closed with the wall
  time up to its log's last write and its CPU time unknown.
* SIGTERM or SIGINT (a session's end, `timeout`, Ctrl-C): the running tasks get SIGTERM (a trainer
  saves at the step in progress and exits 75), no task starts after it, and `run` returns with
  `stopped` set on the result.

`run` returns a `Result`: the failures (task, exit status, log) and the blocked tasks; a command
that runs a plan exits 1 when there are any, naming each failure and its log (`report`).
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from chessjax.files import write_json
from chessjax.machine import pinned_env
from launch.manifest import Task


@dataclasses.dataclass(frozen=True)
class Lanes:
  """Where tasks run: `cores` (one pinned lane per core) or `n` unpinned lanes."""

  cores: tuple[int, ...] = ()
  n: int = 1

  @property
  def count(self) -> int:
    return len(self.cores) or max(self.n, 1)

  def prefix_env(self, lane: int) -> tuple[list[str], dict, int | None]:
    if self.cores:
      prefix, env = pinned_env(self.cores[lane])
      return prefix, env, self.cores[lane]
    return [], dict(os.environ), None


def cores(text: str) -> Lanes:
  """Lanes pinned to the cores of `text` ("0,1": one task at a time on each)."""
  return Lanes(cores=tuple(int(c) for c in str(text).split(",") if c.strip()))


def pool(n: int) -> Lanes:
  """`n` unpinned lanes."""
  return Lanes(n=max(int(n), 1))


@dataclasses.dataclass
class Failure:
  task: Task
  returncode: int
  log: Path

  def __str__(self) -> str:
    t = self.task
    return f"{t.stage} task {t.name} failed (exit status {self.returncode}); see {self.log}"


@dataclasses.dataclass
class Result:
  failures: list[Failure] = dataclasses.field(default_factory=list)
  blocked: list[tuple[Task, str]] = dataclasses.field(default_factory=list)  # (task, why)
  ran: list[Task] = dataclasses.field(default_factory=list)
  stopped: bool = False

  @property
  def ok(self) -> bool:
    return not self.failures and not self.blocked and not self.stopped


# ------------------------------------------------------------------------------------------------
# Timing into bench.json


def bench_record(folder: Path) -> dict:
  """FOLDER/bench.json: {"segments": [...]}, empty when there is none yet."""
  path = Path(folder) / "bench.json"
  return json.loads(path.read_text()) if path.exists() else {"segments": []}


def close_killed_segments(folder: Path, record: dict, running=()) -> None:
  """A segment that started but never ended (the session stopped): wall time up to the last write
  of its log, CPU time unknown. `running`: the (phase, start) of segments still running here."""
  running = set(running)
  for s in [s for s in record["segments"] if "end" not in s]:
    if (s["phase"], s["start"]) in running:
      continue
    log = Path(folder) / f"{s['phase']}.log"
    s["end"] = log.stat().st_mtime if log.exists() else s["start"]
    s["wall_s"], s["cpu_s"], s["killed"] = s["end"] - s["start"], None, True


def log_path(t: Task, log_dir: Path) -> Path:
  return Path(t.log) if t.log else Path(log_dir) / t.stage / f"{t.name}.log"


class _Runner:
  def __init__(self, tasks, lanes: Lanes, log_dir: Path, say: Callable, stages=None):
    names = [t.name for t in tasks]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
      raise ValueError(f"task names must be unique in a plan: {dup}")
    self.tasks, self.lanes, self.log_dir, self.say = list(tasks), lanes, Path(log_dir), say
    self.stages = list(stages or dict.fromkeys(t.stage for t in tasks))
    unknown = sorted({t.stage for t in tasks} - set(self.stages))
    if unknown:
      raise ValueError(f"tasks of stages not in the plan's order {self.stages}: {unknown}")
    self.state = {t.name: "ended" if t.ended() else "todo" for t in tasks}
    self.result = Result()
    self.cond = threading.Condition()
    self.bench = threading.Lock()  # Tasks of one folder (a stage's logs) share its bench.json.
    self.segments: set[tuple[str, float]] = set()  # (phase, start) of the running tasks.
    self.procs: dict[int, subprocess.Popen] = {}

  def needs(self, t: Task) -> list[str]:
    if t.after is not None:
      return list(t.after)
    earlier = self.stages[: self.stages.index(t.stage)]
    return [u.name for u in self.tasks if u.stage in earlier]

  def _next(self) -> Task | None:
    """The first task ready to start (marking blocked ones), None when none is; call locked."""
    for t in self.tasks:
      if self.state[t.name] != "todo":
        continue
      needs = {n: self.state.get(n, "unknown") for n in self.needs(t)}
      bad = [n for n, s in needs.items() if s in ("failed", "blocked", "unknown")]
      if bad:
        self.state[t.name] = "blocked"
        why = f"needs {', '.join(bad)}, which " + (
          "is not in the plan" if "unknown" in needs.values() else "did not end"
        )
        self.result.blocked.append((t, why))
        self.say(f"[blocked] {t.name}: {why}")
        self.cond.notify_all()
        continue
      if all(s in ("ended", "done") for s in needs.values()):
        return t
    return None

  def _lane(self, lane: int) -> None:
    while True:
      with self.cond:
        while True:
          if self.result.stopped:
            return
          t = self._next()
          if t is not None:
            self.state[t.name] = "running"
            break
          if not any(s in ("todo", "running") for s in self.state.values()):
            return
          self.cond.wait(1.0)
      code = self._run(t, lane)
      with self.cond:
        if code == 0 or t.ended():
          self.state[t.name] = "done"
          self.result.ran.append(t)
        elif self.result.stopped:
          self.state[t.name] = "stopped"
        else:
          self.state[t.name] = "failed"
          self.result.failures.append(Failure(t, code, log_path(t, self.log_dir)))
          self.say(f"[fail] {t.name}: exit status {code}, see {log_path(t, self.log_dir)}")
        self.cond.notify_all()

  def _run(self, t: Task, lane: int) -> int:
    """Runs one task, its output appended to its log and its times to bench.json beside it."""
    log = log_path(t, self.log_dir)
    log.parent.mkdir(parents=True, exist_ok=True)
    prefix, env, core = self.lanes.prefix_env(lane)
    env.update(dict(t.env))
    seg = {"phase": log.stem, "core": core, "start": time.time()}
    with self.bench:
      record = bench_record(log.parent)
      close_killed_segments(log.parent, record, self.segments)
      self.segments.add((seg["phase"], seg["start"]))
      record["segments"].append(seg)
      write_json(log.parent / "bench.json", record)
    where = f" on core {core}" if core is not None else ""
    self.say(f"[{t.stage}] {t.name}{where}")
    with open(log, "a") as out:
      out.write(f"$ {t.command or ' '.join(t.argv)}\n")
      out.flush()
      code, cpu_s = self._spawn(prefix + list(t.argv), t.cwd, env, out)
    seg["end"] = time.time()
    seg["wall_s"], seg["cpu_s"] = seg["end"] - seg["start"], cpu_s
    seg["returncode"] = code
    with self.bench:
      record = bench_record(log.parent)  # Another task of the same folder may have written it.
      for s in record["segments"]:
        if s.get("start") == seg["start"] and s.get("phase") == seg["phase"] and "end" not in s:
          s.update(seg)
      write_json(log.parent / "bench.json", record)
      self.segments.discard((seg["phase"], seg["start"]))
    return code

  def _spawn(self, argv: list[str], cwd: str, env: dict, out) -> tuple[int, float]:
    """Runs `argv` to its end, its output to `out`; (exit status, CPU seconds). A command that
    cannot start (no such program or folder) is status 127, said in its log."""
    try:
      proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    except OSError as e:
      out.write(f"cannot start the command: {e}\n")
      return 127, 0.0
    with self.cond:
      self.procs[proc.pid] = proc
      if self.result.stopped:
        proc.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    with self.cond:
      self.procs.pop(proc.pid, None)
    return proc.returncode, usage.ru_utime + usage.ru_stime

  def stop(self, signum, frame) -> None:
    with self.cond:
      if not self.result.stopped:
        self.say(f"[stop] signal {signum}: stopping {len(self.procs)} running task(s)")
      self.result.stopped = True
      for proc in self.procs.values():
        proc.send_signal(signal.SIGTERM)
      self.cond.notify_all()

  def __call__(self) -> Result:
    todo = sum(s == "todo" for s in self.state.values())
    self.say(f"{todo} task(s) to run of {len(self.tasks)}")
    main = threading.current_thread() is threading.main_thread()
    old = {}
    if main:
      for sig in (signal.SIGTERM, signal.SIGINT):
        old[sig] = signal.signal(sig, self.stop)
    try:
      threads = [
        threading.Thread(target=self._lane, args=(i,), daemon=True) for i in range(self.lanes.count)
      ]
      for th in threads:
        th.start()
      for th in threads:
        while th.is_alive():
          th.join(0.5)
    finally:
      for sig, handler in old.items():
        signal.signal(sig, handler)
    return self.result


def _say(message: str) -> None:
  print(message, flush=True)


def run(tasks: Sequence[Task], lanes: Lanes, *, log_dir="logs", say=_say, stages=None) -> Result:
  """Runs the plan's tasks here (see the module docstring); returns what failed or stopped.
  `stages`: the plan's stages in order (default: as they first appear in `tasks`), which a task
  without `after` waits for."""
  return _Runner(tasks, lanes, Path(log_dir), say, stages)()


def report(result: Result, prog: str) -> int:
  """Prints each failure (with its log) and blocked task; returns the command's exit status:
  0 all ended, 75 stopped by a signal (rerun to resume), 1 a task failed or was blocked."""
  for f in result.failures:
    print(f"{prog}: {f}", file=sys.stderr)
  for t, why in result.blocked:
    print(f"{prog}: {t.stage} task {t.name} not run: {why}", file=sys.stderr)
  if result.failures or result.blocked:
    n = len(result.failures)
    print(f"{prog}: {n} task(s) failed, {len(result.blocked)} not run", file=sys.stderr)
    return 1
  if result.stopped:
    print(f"{prog}: stopped by a signal; rerun the same command to resume", file=sys.stderr)
    return 75
  return 0
