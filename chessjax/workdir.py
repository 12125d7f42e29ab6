"""A training workdir: the files in it, read back for evaluation, and the conventions every
evaluator of one shares.

restored = restore("runs/slice_d256")  # Best, else latest (or which="latest"); or gs://bucket/...
logits = restored.fns.predict(restored.state["params"], restored.state["model_state"], tokens)

A workdir is a directory holding `config.json` (`CONFIG`, `find_workdirs`), its checkpoints under
`checkpoints/` and, when training validated, the best one under `best/` (`CHECKPOINTS`), the
early-stopping state (`EARLY_STOPPING`) and, once the loop has ended, its summary (`SUMMARY`,
`read_summary`; `finished` says whether a rerun would train any further). Every
evaluation (`chessjax.world_model.evaluate`, `chessjax.lm.evaluate`, `chessjax.lm.token_roles`,
`chessjax.lm.linear_probe`, the atomic track's LM picker) scores the best checkpoint when there
is one, else the newest (`default_checkpoint`: what `restore` takes unless told), reads its
datasets from `--data NAME=PATH[:SPLIT]` (`parse_datasets`), batches them as the run's config
batched its validation (`chessjax.batches.eval_batches`) and writes its reports under
WORKDIR/eval/ (`EVAL_DIR`).
"""

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import jax
import ml_collections

from chessjax.checkpointing import Checkpointer
from chessjax.data.source import parse_data_arg
from chessjax.files import as_path, write_json
from chessjax.spec import TrainSpec
from chessjax.step import StepFns, build
from chessjax.task import get_task

CONFIG = "config.json"  # The run's full config (`chessjax.train.config_json`).
SUMMARY = "train_summary.json"  # Written when the loop ends (`chessjax.train`).
EARLY_STOPPING = "early_stopping.json"  # Best validation so far, and whether training stopped.
_EARLY_STOPPING_BEFORE = "selection.json"  # Its name in workdirs written before 2026-11-27.
EVAL_DIR = "eval"  # WORKDIR/eval/: the reports of every evaluation of a workdir.
CHECKPOINTS = ("best", "latest")  # WORKDIR/best (kept by validation), WORKDIR/checkpoints.
SKIP_DIRS = {"checkpoints", "best", EVAL_DIR, "tb", "boards"}  # Never a workdir inside.


@dataclasses.dataclass
class Restored:
  config: ml_collections.ConfigDict
  spec: TrainSpec  # The config as the loop read it (batching, model identity).
  fns: StepFns  # The task, jitted steps (eval_step, predict) and shardings.
  state: dict  # The train state pytree (params, model_state, ...).
  step: int  # The checkpoint's training step.
  checkpoint: str | None = None  # "best" or "latest" (`restore`); None: not read from a workdir.

  @property
  def task(self):
    return self.fns.task

  def predict(self, tokens):
    """Logits float32[B, T, C] of the model at this checkpoint for tokens int32[B, T]."""
    return self.fns.predict(self.state["params"], self.state["model_state"], tokens)


def read_config(workdir) -> ml_collections.ConfigDict:
  path = as_path(workdir) / CONFIG
  if not path.exists():
    raise FileNotFoundError(f"{workdir} is not a training workdir (no config.json)")
  return ml_collections.ConfigDict(json.loads(path.read_text()))


def restore(workdir, which: str | None = None, *, step: int | None = None) -> Restored:
  """A checkpoint of a training workdir, ready to evaluate: the one with the best validation
  metric (`which="best"`, WORKDIR/best), the newest readable one (`which="latest"`), or, by
  default, best when the workdir has it, else latest (`default_checkpoint`). `step` names a
  checkpoint by its training step (under WORKDIR/checkpoints unless `which="best"`)."""
  if which is None:
    which = "latest" if step is not None else default_checkpoint(workdir)
  if which not in CHECKPOINTS:
    raise ValueError(f"which must be 'latest' or 'best', got {which!r}")
  config = read_config(workdir)
  spec = TrainSpec.from_config(config)
  _, template, fns = build(spec, get_task(config), abstract=True)
  ckpt = Checkpointer(workdir, subdir="checkpoints" if which == "latest" else "best")
  try:
    if step is None:
      restored = ckpt.restore_latest(template)
    elif step in ckpt.steps():
      restored = (step, *ckpt.restore(step, template))
    else:
      raise FileNotFoundError(f"{workdir} has no checkpoint at step {step}: {ckpt.steps()}")
  finally:
    ckpt.close()
  if restored is None:
    raise FileNotFoundError(f"{workdir} has no readable {which} checkpoint")
  step, state, _ = restored
  return Restored(config=config, spec=spec, fns=fns, state=state, step=step, checkpoint=which)


def initial(config: ml_collections.ConfigDict) -> Restored:
  """The config's model at its initial parameters (step 0), as a restored run is (a template, a
  control, a benchmark's model)."""
  spec = TrainSpec.from_config(config)
  _, state, fns = build(spec, get_task(config))
  return Restored(config=config, spec=spec, fns=fns, state=state, step=0)


def default_checkpoint(run_dir) -> str:
  """ "best" when the workdir has a best checkpoint (WORKDIR/best, kept by validation), else
  "latest": the checkpoint every evaluation of a workdir scores unless told otherwise (the one
  rule; `restore(workdir)` applies it)."""
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


def parse_datasets(texts: Sequence[str]) -> dict[str, tuple[str, str | None]]:
  """{name: (path, split or None)} of `--data NAME=PATH[:SPLIT]` arguments
  (`chessjax.data.source.parse_data_arg`); a name given twice is an error."""
  datasets = {}
  for text in texts:
    name, path, split = parse_data_arg(text)
    if name in datasets:
      raise ValueError(f"dataset name {name!r} given twice")
    datasets[name] = (path, split)
  return datasets


def device_batch_size(batch_size: int) -> int:
  """`batch_size` rounded up to a multiple of the device count: evaluation rows shard over every
  device."""
  devices = jax.device_count()
  return -(-int(batch_size) // devices) * devices
