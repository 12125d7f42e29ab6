"""The one evaluation loop: a jitted step over batches, each result read one batch late.

Used by training-time validation (`accumulate`, the task's additive statistics) and by each
track's evaluation command (`run_batches` with its own step, e.g. statistics plus per-game
extras). `fns` is a `chessjax.step.StepFns` (the task, jitted steps and shardings).
"""

import jax

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


def accumulate(fns, state: dict, batches) -> dict:
  """The task's metrics (`Task.accumulator().result()`) over `batches` under `state`."""
  acc = fns.task.accumulator()
  step = lambda b: fns.eval_step(state["params"], state["model_state"], b)  # noqa: E731
  run_batches(step, fns, batches, acc.add)
  return acc.result()
