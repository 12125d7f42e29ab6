"""Manifests: the commands of one stage as JSON lines, index -> one command, for any scheduler.

Line i of a manifest (`*.jsonl`) is task i of the stage: a JSON object with
  index     its line number, from 0;
  stage     the protocol's stage it belongs to (`data`, `stage1`, `stage2`, `evaluate`, ...);
  name      a short name (a population's, a run's, an evaluation's);
  argv      the command, one argument per item (`command` is the same as one shell line);
  cwd       the directory it runs in (the repository root), env extra environment variables;
  runs      the training runs it advances: [{"workdir", "steps"}] (total steps of each);
  outputs   the files it writes when done (for commands that are not training runs).
A task has ended when every run of it is finished in `chessjax.workdir.finished`'s sense (trained
to its steps, stopped early, or aborted by the non-finite guard: a rerun would train no further)
and every output exists. Nothing here knows SLURM: `launch/slurm_array.sh` runs line
$SLURM_ARRAY_TASK_ID of a manifest, and another backend (Cloud TPU queued resources, Kubernetes
indexed jobs) would read the same file.
"""

import json
import os
import shlex
import tempfile
from pathlib import Path

from chessjax import workdir as workdirs


class ManifestError(ValueError):
  """A manifest that cannot be read or an index outside it."""


def entry(index: int, stage: str, name: str, command: str, cwd, **kw) -> dict:
  """One manifest line; `command` is a shell line (as `launch.sweep` prints them)."""
  return {
    "index": index,
    "stage": stage,
    "name": name,
    "argv": shlex.split(command),
    "command": command,
    "cwd": str(cwd),
    "env": dict(kw.get("env") or {}),
    "runs": [dict(r) for r in kw.get("runs") or []],
    "outputs": [str(p) for p in kw.get("outputs") or []],
  }


def renumber(entries: list[dict]) -> list[dict]:
  """The entries with indices 0, 1, ... in their order (a manifest's line i is task i)."""
  return [dict(e, index=i) for i, e in enumerate(entries)]


def write(path, entries: list[dict]) -> Path:
  """Writes `entries` (indices 0..n-1 in order) as JSON lines, atomically."""
  path = Path(path)
  for i, e in enumerate(entries):
    if e.get("index") != i:
      raise ManifestError(f"{path}: entry {i} has index {e.get('index')!r}; renumber first")
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
  with os.fdopen(fd, "w") as f:
    f.writelines(json.dumps(e, sort_keys=True) + "\n" for e in entries)
  os.replace(tmp, path)
  return path


def read(path) -> list[dict]:
  """Every entry of a manifest, checked: an object per line with index, argv, cwd."""
  path = Path(path)
  try:
    lines = path.read_text().splitlines()
  except OSError as e:
    raise ManifestError(f"cannot read manifest: {e}") from e
  out = []
  for i, line in enumerate(lines):
    try:
      e = json.loads(line)
    except json.JSONDecodeError as err:
      raise ManifestError(f"{path}, line {i + 1}: not JSON: {err}") from None
    if not isinstance(e, dict) or e.get("index") != i:
      raise ManifestError(f"{path}, line {i + 1}: expected an object with index {i}")
    argv = e.get("argv")
    if not argv or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
      raise ManifestError(f"{path}, line {i + 1}: 'argv' must be a non-empty list of strings")
    e.setdefault("cwd", ".")
    e.setdefault("env", {})
    e.setdefault("runs", [])
    e.setdefault("outputs", [])
    e.setdefault("stage", path.stem)
    e.setdefault("name", f"task{i}")
    out.append(e)
  return out


def line(path, index: int) -> dict:
  entries = read(path)
  if not 0 <= index < len(entries):
    raise ManifestError(f"{path}: no task {index} (it has {len(entries)})")
  return entries[index]


def run_ended(run: dict) -> bool:
  return workdirs.finished(run["workdir"], run.get("steps"))


def run_aborted(run: dict) -> bool:
  summary = workdirs.read_summary(run["workdir"])
  return isinstance(summary, dict) and bool(summary.get("aborted"))


def ended(e: dict) -> bool:
  """Whether the task would do nothing if run again (see the module docstring)."""
  return all(run_ended(r) for r in e["runs"]) and all(Path(p).exists() for p in e["outputs"])


def exec_entry(e: dict) -> None:
  """Replaces this process with the entry's command (so signals reach it directly)."""
  os.chdir(e["cwd"])
  env = dict(os.environ, **{k: str(v) for k, v in e["env"].items()})
  os.execvpe(e["argv"][0], e["argv"], env)
