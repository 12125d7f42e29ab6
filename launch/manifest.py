"""Tasks and manifests: an experiment's commands, each a `Task`, and one stage of them as JSON
lines (index -> one command) for any scheduler.

A `Task` (line i of a manifest `*.jsonl` is task i of the stage) holds
  index     its line number, from 0;
  stage     the stage it belongs to (`data`, `train`, `stage1`, `evaluate`, `report`, ...);
  name      a short name (a population's, a run's, an evaluation's), unique within a plan;
  argv      the command, one argument per item (`command` is the same as one shell line);
  cwd       the directory it runs in (the repository root), env extra environment variables;
  runs      the training runs it advances: [{"workdir", "steps"}] (total steps of each);
  outputs   the files it writes when done (for commands that are not training runs);
  after     (optional) the names of the tasks it needs; by default, every task of the stages
            before its own (`launch.local` reads it; on SLURM a stage waits for the whole stage
            before it, which covers both);
  log       (optional) the file its output is appended to under any scheduler (`launch.local`
            also writes its wall and CPU time to `bench.json` beside it; `exec_task`, which
            SLURM's array tasks run, says there in the scheduler's own log where it went).
A task has ended when every run of it is finished in `chessjax.rundir.finished`'s sense (trained
to its steps, stopped early, or aborted by the non-finite guard: a rerun would train no further)
and every output exists; a task with neither runs nor outputs (a report) has never ended, so it
runs whenever its plan does. Nothing here knows SLURM or JAX: `launch/slurm_array.sh` runs line
$SLURM_ARRAY_TASK_ID of a manifest through `launch.cluster exec`, `launch.local` runs tasks here,
and another backend (Cloud TPU queued resources, Kubernetes indexed jobs) would read the same
file.
"""

import dataclasses
import json
import os
import shlex
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from chessjax import rundir


class ManifestError(ValueError):
  """A manifest that cannot be read, an index outside it, or a malformed task."""


@dataclasses.dataclass(frozen=True)
class Run:
  """A training run a task advances: its workdir and total steps (None: the run's own)."""

  workdir: str
  steps: int | None = None

  def ended(self) -> bool:
    return rundir.finished(self.workdir, self.steps)

  def aborted(self) -> bool:
    return rundir.aborted(self.workdir)


@dataclasses.dataclass(frozen=True)
class Task:
  """One command of a plan (see the module docstring for the fields)."""

  index: int
  stage: str
  name: str
  argv: tuple[str, ...]
  command: str = ""
  cwd: str = "."
  env: tuple[tuple[str, str], ...] = ()
  runs: tuple[Run, ...] = ()
  outputs: tuple[str, ...] = ()
  after: tuple[str, ...] | None = None
  log: str = ""

  def ended(self) -> bool:
    """Whether running the task again would do nothing (see the module docstring)."""
    if not self.runs and not self.outputs:
      return False
    return all(r.ended() for r in self.runs) and all(Path(p).exists() for p in self.outputs)

  def missing(self) -> list[str]:
    """What keeps the task from having ended: its unfinished runs' and absent outputs' names."""
    runs = [Path(r.workdir).name for r in self.runs if not r.ended()]
    return runs + [Path(p).name for p in self.outputs if not Path(p).exists()]

  def to_json(self) -> dict:
    """The manifest line (`after` and `log` only when set)."""
    out = {
      "index": self.index,
      "stage": self.stage,
      "name": self.name,
      "argv": list(self.argv),
      "command": self.command,
      "cwd": self.cwd,
      "env": dict(self.env),
      "runs": [dataclasses.asdict(r) for r in self.runs],
      "outputs": list(self.outputs),
    }
    if self.after is not None:
      out["after"] = list(self.after)
    if self.log:
      out["log"] = self.log
    return out


def task(
  stage: str,
  name: str,
  argv: Sequence[str],
  cwd,
  *,
  env: dict | None = None,
  runs: Iterable[tuple] = (),
  outputs: Iterable = (),
  after: Iterable[str] | None = None,
  log="",
  index: int = 0,
) -> Task:
  """A task from its command's arguments; `runs` as (workdir, steps) pairs."""
  argv = tuple(str(a) for a in argv)
  return Task(
    index=index,
    stage=stage,
    name=name,
    argv=argv,
    command=shlex.join(argv),
    cwd=str(cwd),
    env=tuple(sorted((str(k), str(v)) for k, v in (env or {}).items())),
    runs=tuple(Run(str(w), None if s is None else int(s)) for w, s in runs),
    outputs=tuple(str(p) for p in outputs),
    after=None if after is None else tuple(after),
    log=str(log),
  )


def entry(index: int, stage: str, name: str, command: str, cwd, **kw) -> Task:
  """A task from a shell line (as `launch.sweep` prints them); `runs` as [{"workdir", "steps"}]."""
  runs = [(r["workdir"], r.get("steps")) for r in kw.pop("runs", None) or []]
  t = task(stage, name, shlex.split(command), cwd, runs=runs, index=index, **kw)
  return dataclasses.replace(t, command=command)


def from_json(e, where: str) -> Task:
  """The task of a manifest line (`where` names it in errors)."""
  if not isinstance(e, dict):
    raise ManifestError(f"{where}: expected an object")
  argv = e.get("argv")
  if not argv or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
    raise ManifestError(f"{where}: 'argv' must be a non-empty list of strings")
  try:
    runs = tuple(Run(str(r["workdir"]), r.get("steps")) for r in e.get("runs") or [])
    return Task(
      index=int(e["index"]),
      stage=str(e.get("stage", "")),
      name=str(e.get("name") or f"task{e['index']}"),
      argv=tuple(argv),
      command=str(e.get("command") or shlex.join(argv)),
      cwd=str(e.get("cwd", ".")),
      env=tuple(sorted((str(k), str(v)) for k, v in (e.get("env") or {}).items())),
      runs=runs,
      outputs=tuple(str(p) for p in e.get("outputs") or []),
      after=None if e.get("after") is None else tuple(e["after"]),
      log=str(e.get("log", "")),
    )
  except (KeyError, TypeError, ValueError, AttributeError) as err:
    raise ManifestError(f"{where}: malformed task: {err!r}") from None


def renumber(tasks: Iterable[Task]) -> list[Task]:
  """The tasks with indices 0, 1, ... in their order (a manifest's line i is task i)."""
  return [dataclasses.replace(t, index=i) for i, t in enumerate(tasks)]


def write(path, tasks: Sequence[Task]) -> Path:
  """Writes `tasks` (indices 0..n-1 in order) as JSON lines, atomically."""
  path = Path(path)
  for i, t in enumerate(tasks):
    if t.index != i:
      raise ManifestError(f"{path}: task {i} has index {t.index!r}; renumber first")
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
  with os.fdopen(fd, "w") as f:
    f.writelines(json.dumps(t.to_json(), sort_keys=True) + "\n" for t in tasks)
  os.replace(tmp, path)
  return path


def read(path) -> list[Task]:
  """Every task of a manifest, checked: an object per line with its index, argv, cwd; a line
  without a stage takes the file's name."""
  path = Path(path)
  try:
    lines = path.read_text().splitlines()
  except OSError as e:
    raise ManifestError(f"cannot read manifest: {e}") from e
  out = []
  for i, text in enumerate(lines):
    where = f"{path}, line {i + 1}"
    try:
      e = json.loads(text)
    except json.JSONDecodeError as err:
      raise ManifestError(f"{where}: not JSON: {err}") from None
    if not isinstance(e, dict) or e.get("index") != i:
      raise ManifestError(f"{where}: expected an object with index {i}")
    e.setdefault("stage", path.stem)
    out.append(from_json(e, where))
  return out


def line(path, index: int) -> Task:
  tasks = read(path)
  if not 0 <= index < len(tasks):
    raise ManifestError(f"{path}: no task {index} (it has {len(tasks)})")
  return tasks[index]


def ended(t: Task) -> bool:
  return t.ended()


def exec_task(t: Task) -> None:
  """Replaces this process with the task's command (so signals reach it directly), its output
  appended to the task's `log` when it names one (as `launch.local` does: a run's train.log holds
  its output whichever scheduler ran it), after a line saying so on this process's output."""
  os.chdir(t.cwd)
  env = dict(os.environ, **dict(t.env))
  if t.log:
    log = Path(t.log)
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    print(f"{t.stage} task {t.index} ({t.name}): output appended to {log}", flush=True)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
  os.execvpe(t.argv[0], list(t.argv), env)
