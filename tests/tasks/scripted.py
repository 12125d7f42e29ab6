"""The world-model task with a scripted validation loss (tests of model selection and early
stopping): the k-th validation of a process returns `SCRIPT[k]` as its loss."""

from chessjax.world_model import metrics
from chessjax.world_model.task import WorldModelTask

SCRIPT: list[float] = []
CALLS = [0]


class _Scripted(metrics.Accumulator):
  def result(self):
    out = super().result()
    out["loss"] = SCRIPT[CALLS[0]]
    CALLS[0] += 1
    return out


class ScriptedTask(WorldModelTask):
  def accumulator(self):
    return _Scripted()


def make_task(config):
  del config
  return ScriptedTask()
