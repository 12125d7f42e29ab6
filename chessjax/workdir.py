"""A training workdir read back for evaluation, and the conventions every evaluator of one shares.

restored = restore("runs/slice_d256")  # Best, else latest (or which="latest"); or gs://bucket/...
logits = restored.fns.predict(restored.state["params"], restored.state["model_state"], tokens)

A workdir is a directory holding `config.json` (`find_workdirs`), its checkpoints under
`checkpoints/` and, when training validated, the best one under `best/` (`CHECKPOINTS`). Every
evaluation (`chessjax.world_model.evaluate`, `chessjax.lm.evaluate`, `chessjax.lm.token_roles`,
`chessjax.lm.linear_probe`, the atomic track's LM picker) scores the best checkpoint when there
is one, else the newest (`default_checkpoint`: what `restore` takes unless told), reads its
datasets from `--data NAME=PATH[:SPLIT]`
(`parse_datasets`), batches them as the run's config batched its validation (`eval_batches`) and
writes its reports under WORKDIR/eval/ (`EVAL_DIR`).
"""

import dataclasses
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import jax
import ml_collections

from chessjax.checkpointing import Checkpointer, abstract_like
from chessjax.data import pipeline
from chessjax.data.source import parse_data_arg
from chessjax.files import as_path
from chessjax.step import StepFns, build

EVAL_DIR = "eval"  # WORKDIR/eval/: the reports of every evaluation of a workdir.
CHECKPOINTS = ("best", "latest")  # WORKDIR/best (kept by validation), WORKDIR/checkpoints.
SKIP_DIRS = {"checkpoints", "best", EVAL_DIR, "tb", "boards"}  # Never a workdir inside.


@dataclasses.dataclass
class Restored:
  config: ml_collections.ConfigDict
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
  path = as_path(workdir) / "config.json"
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
  _, state, fns = build(config)
  ckpt = Checkpointer(workdir, subdir="checkpoints" if which == "latest" else "best")
  try:
    if step is None:
      restored = ckpt.restore_latest(abstract_like(state))
    elif step in ckpt.steps():
      restored = (step, *ckpt.restore(step, abstract_like(state)))
    else:
      raise FileNotFoundError(f"{workdir} has no checkpoint at step {step}: {ckpt.steps()}")
  finally:
    ckpt.close()
  if restored is None:
    raise FileNotFoundError(f"{workdir} has no readable {which} checkpoint")
  step, state, _ = restored
  return Restored(config=config, fns=fns, state=state, step=step, checkpoint=which)


def default_checkpoint(run_dir) -> str:
  """ "best" when the workdir has a best checkpoint (WORKDIR/best, kept by validation), else
  "latest": the checkpoint every evaluation of a workdir scores unless told otherwise (the one
  rule; `restore(workdir)` applies it)."""
  best = as_path(run_dir) / "best"
  return "best" if best.is_dir() and any(best.iterdir()) else "latest"


def find_workdirs(roots: Iterable) -> list[Path]:
  """Every directory under `roots` (the roots included) that holds a `config.json`, sorted."""
  found = set()
  for root in roots:
    root = Path(root)
    if not root.is_dir():
      raise FileNotFoundError(f"{root} is not a directory")
    for dirpath, dirnames, filenames in os.walk(root):
      dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
      if "config.json" in filenames:
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


def eval_batches(config, rows, path, split: str, *, batch_size: int, max_len=None, **kwargs):
  """One pass over a dataset split in the task's evaluation `rows` (`pipeline.make_eval_batches`),
  cut and bucketed as the run's `config` says (`data.bucket_lengths`, `data.max_len`, unless
  `max_len` scores longer or shorter prefixes), so evaluation compiles the shapes training
  validated with. `kwargs`: `max_games`, `sort_by_length` and the rest of `make_eval_batches`'."""
  return pipeline.make_eval_batches(
    path,
    split,
    rows,
    batch_size=batch_size,
    bucket_lengths=tuple(config.data.bucket_lengths),
    max_len=config.data.max_len if max_len is None else max_len,
    **kwargs,
  )
