"""A training workdir: the files in it, read back for evaluation, and the conventions every
evaluator of one shares.

restored = restore("runs/slice_d256")  # Best, else latest (or which="latest"); or gs://bucket/...
logits = restored.fns.predict(restored.state["params"], restored.state["model_state"], tokens)

A workdir's files and the rules read from them (`CONFIG`, `SUMMARY`, `finished`, `find_workdirs`,
...) are `chessjax.rundir`'s, which needs no JAX; they are re-exported here for its readers. Every
evaluation (`chessjax.world_model.evaluate`, `chessjax.lm.evaluate`, `chessjax.lm.token_roles`,
`chessjax.lm.linear_probe`, the atomic track's LM picker) scores the best checkpoint when there
is one, else the newest (`default_checkpoint`: what `restore` takes unless told), reads its
datasets from `--data NAME=PATH[:SPLIT]` (`parse_datasets`), batches them as the run's config
batched its validation (`chessjax.batches.eval_batches`) and writes its reports under
WORKDIR/eval/ (`EVAL_DIR`).
"""

import dataclasses
import json
from collections.abc import Sequence

import jax
import ml_collections

from chessjax.checkpointing import Checkpointer
from chessjax.data.source import parse_data_arg
from chessjax.files import as_path
from chessjax.rundir import (  # noqa: F401 (a workdir's file rules, re-exported for its readers)
  CHECKPOINTS,
  CONFIG,
  EARLY_STOPPING,
  EVAL_DIR,
  SKIP_DIRS,
  SUMMARY,
  aborted,
  default_checkpoint,
  early_stopping_path,
  find_workdirs,
  finished,
  read_summary,
  write_summary,
)
from chessjax.spec import TrainSpec
from chessjax.step import StepFns, build
from chessjax.task import get_task


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
