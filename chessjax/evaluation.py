"""The one evaluation loop: a jitted step over batches, each result read one batch late.

Used by training-time validation (`accumulate`, the task's additive statistics) and by each
track's evaluation command (`run_batches` with its own step, e.g. statistics plus per-game
extras). `run` is a `chessjax.step.StepFns` (the task, jitted steps and shardings).
"""

import jax

from chessjax import sharding


def device_batch(batch: dict, run) -> dict:
  """The task's arrays of a process-local batch as global arrays sharded over the rows."""
  return sharding.global_batch(batch, run.task.batch_keys, run.data_sharding)


def run_batches(step_fn, run, batches, consume, *, keys=None) -> None:
  """Calls `consume(host outputs)` for `step_fn(global batch)` of every batch, in order.

  `keys` are the arrays sent to the devices (default: the task's `batch_keys`). The previous
  batch's outputs are fetched only after the next batch is dispatched, so the host never waits
  on the device.
  """
  keys = run.task.batch_keys if keys is None else keys
  pending = None
  for batch in batches:
    out = step_fn(sharding.global_batch(batch, keys, run.data_sharding))
    if pending is not None:
      consume(jax.device_get(pending))
    pending = out
  if pending is not None:
    consume(jax.device_get(pending))


def accumulate(run, state: dict, batches) -> dict:
  """The task's metrics (`Task.accumulator().result()`) over `batches` under `state`."""
  acc = run.task.accumulator()
  step = lambda b: run.eval_step(state["params"], state["model_state"], b)  # noqa: E731
  run_batches(step, run, batches, acc.add)
  return acc.result()
