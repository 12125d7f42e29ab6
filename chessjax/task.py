"""The seam between the one training loop and a track: the `Task` protocol and `get_task`.

The loop (`chessjax.train`, its step `chessjax.step`) knows nothing about chess states or
tokens. It asks the task, which `config.task` names, for everything track-specific, in the way
nanodo hands `get_loss_fn` to its trainer:

    task = get_task(config)        # config.task: "world_model" -> chessjax.world_model.task
    model = create_model(config.family, config.size, head=task.head, **task.model_kwargs, ...)
    batches = make_batches(path, split, task.rows, ...)    # training rows of the task's format
    val = make_eval_batches(path, split, task.eval_rows, ...)  # its validation/test rows
    loss = task.loss(model, batch, train=True)
    weight = task.loss_weight(batch)                       # what `loss` pooled over (tokens)
    stats = task.eval_stats(model, batch)                  # additive, jittable
    acc = task.accumulator(); acc.add(stats); result = acc.result()
    line, scalars, images = task.summarize(result)         # for the log and TensorBoard
    result[task.selection_metric]                          # lower is better: best checkpoint
    ids, ends = task.probe_positions(game)                 # optional: where a probe reads boards

A track adds a task in its own folder (`chessjax/<track>/task.py` with `make_task(config)`), or
anywhere importable under a dotted name (`config.task = "my_package.my_task"`); the loop is not
edited.
"""

import importlib
from typing import Protocol

import jax
import numpy as np
from flax import nnx

from chessjax.data.rows import RowFormat
from chessjax.spec import task_of


class Accumulator(Protocol):
  def add(self, stats: dict) -> None: ...

  def result(self) -> dict: ...


class Task(Protocol):
  head: str  # `create_model` head: "state" or "tokens".
  model_kwargs: dict  # Further `create_model` arguments of the head (e.g. vocab_size).
  rows: RowFormat  # How stored games become the task's training batch arrays.
  eval_rows: RowFormat  # ... its validation and test arrays (e.g. without training-time noise).
  selection_metric: str  # Key of the evaluation result that picks the best checkpoint (lower).
  batch_keys: tuple[str, ...]  # The arrays of a batch that the device needs.
  pad_id: int  # The model's padding input id (optional, with `probe_positions`).

  def loss(self, model: nnx.Module, batch: dict, *, train: bool) -> jax.Array: ...

  def loss_weight(self, batch: dict) -> jax.Array:
    """What `loss` divides the batch's summed per-token losses by (float32 scalar; token pooling).

    Gradient accumulation (`chessjax.step.accumulated_loss_and_grads`) weighs each micro-batch's
    loss by it, so that the micro-batches together give the whole batch's loss and gradient.
    """
    ...

  def eval_stats(self, model: nnx.Module, batch: dict) -> dict: ...

  def accumulator(self) -> Accumulator: ...

  def summarize(self, result: dict) -> tuple[str, dict[str, float], dict[str, np.ndarray]]: ...

  def probe_positions(self, game: dict) -> tuple[np.ndarray, np.ndarray]:
    """(model input ids int32[L] of a stored game, index int[P] of the input token that ends each
    of its P moves): where a linear probe (`chessjax.probe`) reads the board after each move.
    The hidden state at the index of move t has read the whole move, so it is probed for
    `game["states"][t + 1]`. Optional: a task without it cannot be probed. Rows shorter than a
    batch are padded with the task's `pad_id`."""
    ...


def get_task(config) -> Task:
  """The task `config.task` names (`chessjax.spec.task_of`: a config written before tasks existed
  trained the world model): a track folder (`world_model`) or a dotted module path."""
  name = task_of(config)
  module_name = name if "." in name else f"chessjax.{name}.task"
  try:
    module = importlib.import_module(module_name)
  except ModuleNotFoundError as e:
    if e.name is not None and module_name.startswith(e.name):
      raise ValueError(f"unknown task {name!r}: no module {module_name}") from None
    raise
  return module.make_task(config)
