"""A training workdir's files and the rules read from them, without JAX: what launchers,
schedulers and status commands need (`launch.manifest`, `launch.cluster exec`, `launch.sweep`)
before or instead of starting a backend. The standard library and `etils.epath` only (a test
checks that importing it loads no jax, orbax or flax).

A workdir is a directory holding `config.json` (`CONFIG`, `find_workdirs`), its checkpoints under
`checkpoints/` and, when training validated, the best one under `best/` (`CHECKPOINTS`,
`default_checkpoint`), the early-stopping state (`EARLY_STOPPING`) and, once the loop has ended,
its summary (`SUMMARY`, `read_summary`; `finished` says whether a rerun would train any further).
Evaluations write their reports under WORKDIR/eval/ (`EVAL_DIR`). `chessjax.workdir` restores
checkpoints on top of these rules.
"""

import json
import os
from collections.abc import Iterable
from pathlib import Path

from chessjax.files import as_path, write_json

CONFIG = "config.json"  # The run's full config (`chessjax.train.config_json`).
SUMMARY = "train_summary.json"  # Written when the loop ends (`chessjax.train`).
EARLY_STOPPING = "early_stopping.json"  # Best validation so far, and whether training stopped.
_EARLY_STOPPING_BEFORE = "selection.json"  # Its name in workdirs written before 2026-11-27.
EVAL_DIR = "eval"  # WORKDIR/eval/: the reports of every evaluation of a workdir.
CHECKPOINTS = ("best", "latest")  # WORKDIR/best (kept by validation), WORKDIR/checkpoints.
SKIP_DIRS = {"checkpoints", "best", EVAL_DIR, "tb", "boards"}  # Never a workdir inside.


def default_checkpoint(run_dir) -> str:
  """ "best" when the workdir has a best checkpoint (WORKDIR/best, kept by validation), else
  "latest": the checkpoint every evaluation of a workdir scores unless told otherwise (the one
  rule; `chessjax.workdir.restore(workdir)` applies it)."""
  best = as_path(run_dir) / "best"
  return "best" if best.is_dir() and any(best.iterdir()) else "latest"


def read_summary(workdir) -> dict | None:
  """The run's summary (`SUMMARY`, written when its loop ended), or None when there is none or it
  cannot be read."""
  try:
    return json.loads((as_path(workdir) / SUMMARY).read_text())
  except (OSError, ValueError):
    return None


def write_summary(workdir, summary: dict) -> None:
  write_json(as_path(workdir) / SUMMARY, summary)


def finished(workdir, total_steps: int | None = None) -> bool:
  """Whether rerunning the run of `workdir` would train no further: its loop ended after its
  total steps (`total_steps`, default the summary's own), after early stopping, or aborted by the
  non-finite guard (a rerun would resume into the same non-finite batches). A run that was
  preempted, crashed or is still running is not finished."""
  summary = read_summary(workdir)
  if not isinstance(summary, dict) or "steps" not in summary:
    return False
  total = summary.get("total_steps") if total_steps is None else total_steps
  return bool(
    summary.get("aborted")
    or summary.get("stopped_early")
    or (total is not None and int(summary["steps"]) >= int(total))
  )


def aborted(workdir) -> bool:
  """Whether the run's loop ended aborted by the non-finite guard."""
  summary = read_summary(workdir)
  return isinstance(summary, dict) and bool(summary.get("aborted"))


def early_stopping_path(workdir, *, existing: bool = False):
  """WORKDIR/`EARLY_STOPPING`; with `existing`, the file a workdir written before the rename
  holds instead when only that one exists."""
  path = as_path(workdir) / EARLY_STOPPING
  old = as_path(workdir) / _EARLY_STOPPING_BEFORE
  return old if existing and not path.exists() and old.exists() else path


def find_workdirs(roots: Iterable) -> list[Path]:
  """Every directory under `roots` (the roots included) that holds a `config.json`, sorted."""
  found = set()
  for root in roots:
    root = Path(root)
    if not root.is_dir():
      raise FileNotFoundError(f"{root} is not a directory")
    for dirpath, dirnames, filenames in os.walk(root):
      dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
      if CONFIG in filenames:
        found.add(Path(dirpath))
        dirnames[:] = []  # A workdir holds no other workdir.
  return sorted(found)
