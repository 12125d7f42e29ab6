"""What the training loop (`chessjax.train`) trains and what it keeps per run.

* `Runs`: the seam between the loop and the device: the train state of every run it trains
  together, their step (jitted, and the pure function `chessjax.dispatch` compiles its own call
  of), and each run's share of both. `OneRun` is a run trained alone
  (`chessjax.step.build`'s step); `chessjax.populations.Population` trains many runs of one model
  in one program.
* `Member`: one run of a loop: its config, spec and workdir (a run alone is a loop's only
  member).
* `RunBook`: the loop's bookkeeping of one run: its checkpoints (latest and best), early
  stopping (`chessjax.early_stopping`), logs, where it is, how it ended, and its summary.
"""

import dataclasses
from pathlib import Path
from typing import Protocol

import jax
import ml_collections

from chessjax import evaluation, init_from, logs
from chessjax import workdir as workdir_lib
from chessjax.checkpointing import Checkpointer, abstract_like
from chessjax.early_stopping import EarlyStopping
from chessjax.spec import TrainSpec
from chessjax.step import build
from chessjax.task import Task


class Runs(Protocol):
  """What the loop trains together: one run (`OneRun`) or a population's members."""

  task: Task
  model: object  # One member's model (its parameter count and FLOPs).
  state: dict  # The initial train state of every member.
  train_step: object  # jitted (state, batch) -> (state, outputs)
  step_fn: object  # The pure step `train_step` jits (`chessjax.dispatch` calls it its own way).
  data_sharding: object  # Of one step's batch on the devices.
  length_axis: int  # The positions axis of a device batch.

  def host_batch(self, host: list[dict]) -> dict: ...  # One step's batch of the members' batches.

  def device_batch(self, host: list[dict]) -> dict: ...  # Global arrays of each member's batch.

  def member_like(self) -> dict: ...  # The abstract train state of one member.

  def member(self, state: dict, i: int) -> dict: ...  # Member i's train state.

  def with_members(self, state: dict, members: dict[int, dict]) -> dict: ...

  def with_active(self, state: dict, active: list[bool]) -> dict: ...  # Inactive: frozen.

  def outputs(self, out: dict, i: int) -> dict: ...  # Member i's of the host outputs.

  def validate(self, state: dict, batches: list[dict]) -> list[dict]: ...  # One per member.

  def lr_at(self, i: int): ...  # Member i's schedule.


class OneRun:
  """A run trained alone: the step `chessjax.step.build` makes, on an unbatched state."""

  length_axis = 1

  def __init__(self, spec: TrainSpec, task: Task):
    self.model, self.state, self.fns = build(spec, task)
    self.task, self.train_step, self.step_fn = task, self.fns.train_step, self.fns.step_fn
    self.data_sharding = self.fns.data_sharding

  def host_batch(self, host):
    return {k: host[0][k] for k in self.task.batch_keys}

  def device_batch(self, host):
    return evaluation.device_batch(host[0], self.fns)

  def member_like(self):
    return abstract_like(self.state)

  def member(self, state, i):
    return state

  def with_members(self, state, members):
    return members.get(0, state)

  def with_active(self, state, active):
    return state  # The loop stops when its one run does.

  def outputs(self, out, i):
    return out

  def validate(self, state, batches):
    return [evaluation.accumulate(self.fns, state, batches)]

  def lr_at(self, i):
    return self.fns.lr_at


@dataclasses.dataclass
class Member:
  """One run of a loop: its config (as its workdir keeps it), spec and workdir."""

  name: str  # "" for a run trained alone.
  config: ml_collections.ConfigDict
  spec: TrainSpec
  workdir: Path


class RunBook:
  """The loop's bookkeeping of one member: checkpoints, early stopping, logs, how it ended."""

  def __init__(self, member: Member, *, validates: bool, params: int, **logger_kwargs):
    self.chief = jax.process_index() == 0
    self.spec, self.workdir = member.spec, member.workdir
    self.ckpt = Checkpointer(self.workdir, max_to_keep=self.spec.train.keep_checkpoints)
    self.best = Checkpointer(self.workdir, max_to_keep=1, subdir="best") if validates else None
    self.stopping = EarlyStopping(self.workdir, self.spec.train.early_stopping_patience)
    self.logger = logs.TrainLogger(
      self.workdir if self.chief else None, name=member.name, **logger_kwargs
    )
    self.params = params
    self.ended = ""  # Why it no longer trains: "total", "stopped", "aborted" or "preempted".
    self.steps = 0  # Steps done: where it is, or where it stopped.
    self.resumed_from = 0
    self.counters = {"bad_batches": 0, "rollbacks": 0}  # The guard's, as last read.
    self.abort_reason = ""
    self.last_eval: dict = {}
    self.kept_summary: dict | None = None  # An aborted run's summary, kept by a rerun.

  def end(self, why: str, step: int) -> None:
    self.ended, self.steps = why, step

  def summary(self, total: int) -> dict:
    """The run's summary as it stands (an aborted run's as it was kept), written to its workdir
    by process 0 (`workdir.SUMMARY`)."""
    if self.kept_summary is not None:
      return self.kept_summary
    if self.ended == "aborted":
      health = {"aborted": True, "abort_reason": self.abort_reason, **self.counters}
    else:
      health = {
        "aborted": False,
        "stopped_early": self.ended == "stopped",
        "preempted": self.ended == "preempted",
        "best_step": self.stopping.best_step,
        **self.counters,
      }
    summary = {
      "task": self.spec.task,
      "family": self.spec.family,
      "size": self.spec.size,
      "params": self.params,
      "steps": self.steps,
      "total_steps": total,
      "resumed_from": self.resumed_from,
      **health,
      "validation": {k: v for k, v in self.last_eval.items() if k != "bins"},
    }
    init = init_from.read_record(self.workdir)  # Started from another run's parameters.
    if init is not None:
      summary["init"] = init
    if self.chief:
      workdir_lib.write_summary(self.workdir, summary)
    return summary

  def close(self) -> None:
    for ckpt in (self.ckpt, self.best):
      if ckpt is not None:
        ckpt.close()
    self.logger.close()
