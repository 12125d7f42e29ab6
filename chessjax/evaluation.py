"""The one evaluation loop: a jitted step over batches, each result read one batch late.

Used by training-time validation (`accumulate`, the task's additive statistics) and by each
track's evaluation command (`run_batches` with its own step, e.g. statistics plus per-game
extras). `fns` is a `chessjax.step.StepFns` (the task, jitted steps and shardings). An evaluation
command compiles its step for every batch length of its pass first (`CompiledLengths`), so the
pass it times runs without compiling.
"""

import time

import jax
import numpy as np

from chessjax import sharding


def device_batch(batch: dict, fns) -> dict:
  """The task's arrays of a process-local batch as global arrays sharded over the rows."""
  return sharding.global_batch(batch, fns.task.batch_keys, fns.data_sharding)


def run_batches(step_fn, fns, batches, consume, *, keys=None) -> None:
  """Calls `consume(host outputs)` for `step_fn(global batch)` of every batch, in order.

  `keys` are the arrays sent to the devices (default: the task's `batch_keys`). The previous
  batch's outputs are fetched only after the next batch is dispatched, so the host never waits
  on the device.
  """
  keys = fns.task.batch_keys if keys is None else keys
  pending = None
  for batch in batches:
    out = step_fn(sharding.global_batch(batch, keys, fns.data_sharding))
    if pending is not None:
      consume(jax.device_get(pending))
    pending = out
  if pending is not None:
    consume(jax.device_get(pending))


def accumulate(fns, state: dict, batches, *, ahead: bool = False) -> dict:
  """The task's metrics (`Task.accumulator().result()`) over `batches` under `state`. `ahead`:
  the step is compiled for every batch length of `batches.plan` before the pass
  (`CompiledLengths`; the task's evaluation rows), instead of at each new length."""
  acc = fns.task.accumulator()
  params, model_state = state["params"], state["model_state"]
  if ahead:
    task = fns.task
    step = CompiledLengths(
      fns.eval_step,
      params,
      model_state,
      batches.plan,
      task.eval_rows,
      keys=task.batch_keys,
      sharding=fns.data_sharding,
    )
  else:
    step = lambda b: fns.eval_step(params, model_state, b)  # noqa: E731
  run_batches(step, fns, batches, acc.add)
  return acc.result()


class CompiledLengths:
  """`step_fn(params, model_state, batch)` (jitted) compiled ahead of time for every batch length
  of a batch plan (`chessjax.data.plan.BatchPlan`); called with a global batch, it runs the
  executable of the batch's length.

  The batch shapes are those the task's row format `rows` writes (an all-padding batch of it, plus
  the loader's `index` of each row's game), restricted to `keys` and sharded as `sharding`.
  `shared`: executables of the same `step_fn` and state by batch shape, from other datasets (one
  run's evaluation scores several): a shape found there is not compiled again, and one compiled
  here is added. `lengths`: the lengths compiled; `seconds`: the time compiling took.
  """

  def __init__(self, step_fn, params, model_state, plan, rows, *, keys, sharding, shared=None):
    self.params, self.model_state = params, model_state
    shared = {} if shared is None else shared
    b = plan.batch_size
    self.executables = {}
    start = time.perf_counter()
    for length in sorted({plan.global_batch(i)[1] for i in range(len(plan))}):
      example = rows.batch([None] * b, length, max_len=None, epoch=0)
      example["index"] = np.zeros(b, np.int32)  # The loader adds each row's game index.
      spec = {
        key: jax.ShapeDtypeStruct(example[key].shape, example[key].dtype, sharding=sharding)
        for key in keys
      }
      shape = tuple((key, x.shape, str(x.dtype)) for key, x in spec.items())
      if shape not in shared:
        shared[shape] = step_fn.lower(params, model_state, spec).compile()
      self.executables[length] = shared[shape]
    self.seconds = time.perf_counter() - start

  @property
  def lengths(self) -> list[int]:
    return sorted(self.executables)

  def __call__(self, batch: dict):
    length = next(x.shape[1] for x in batch.values() if x.ndim > 1)  # [B, T, ...] arrays
    return self.executables[length](self.params, self.model_state, batch)
