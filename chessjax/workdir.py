"""A training workdir read back for evaluation: its config, task, compiled steps and newest state.

restored = restore("runs/slice_d256")            # or gs://bucket/runs/slice_d256
logits = restored.run.predict(restored.state["params"], restored.state["model_state"], tokens)
"""

import dataclasses
import json

import ml_collections

from chessjax.checkpointing import Checkpointer, abstract_like
from chessjax.files import as_path
from chessjax.step import StepFns, build


@dataclasses.dataclass
class Restored:
  config: ml_collections.ConfigDict
  run: StepFns  # The task, jitted steps (eval_step, predict) and shardings.
  state: dict  # The train state pytree (params, model_state, ...).
  step: int  # The checkpoint's training step.

  @property
  def task(self):
    return self.run.task

  def predict(self, tokens):
    """Logits float32[B, T, C] of the model at this checkpoint for tokens int32[B, T]."""
    return self.run.predict(self.state["params"], self.state["model_state"], tokens)


def read_config(workdir) -> ml_collections.ConfigDict:
  path = as_path(workdir) / "config.json"
  if not path.exists():
    raise FileNotFoundError(f"{workdir} is not a training workdir (no config.json)")
  return ml_collections.ConfigDict(json.loads(path.read_text()))


def restore(workdir, which: str = "latest", *, step: int | None = None) -> Restored:
  """The newest readable checkpoint of a training workdir (`which="latest"`), the one with the
  best validation metric (`which="best"`, WORKDIR/best), or the one saved at training step `step`,
  ready to evaluate."""
  if which not in ("latest", "best"):
    raise ValueError(f"which must be 'latest' or 'best', got {which!r}")
  config = read_config(workdir)
  _, state, run = build(config)
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
  return Restored(config=config, run=run, state=state, step=step)
