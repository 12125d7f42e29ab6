"""The training loop, for any task: `train_and_evaluate(config, workdir)`.

Reads top to bottom: get the task (`chessjax.task`), build the model, optimizer, train state and
jitted steps (`chessjax.step.build`), the task's input pipeline, restore the newest readable
checkpoint if any, then run the compiled train step once per batch. Nothing here knows what a
batch holds beyond `task.batch_keys` and its `mask` (True on scored positions, used to count
tokens).

* Data parallel over every device of every process (`chessjax.step`): each process feeds its rows
  of the global batch (`jax.make_array_from_process_local_data`). The same code runs on 1 CPU,
  N fake CPU devices, a GPU, or a multi-host TPU slice.
* Non-finite guard: the step skips non-finite batches and rolls parameters back to a snapshot
  (`chessjax.step.train_step`); the host aborts after `max_bad_batches` consecutive bad batches,
  reading each step's counters one step late.
* Checkpoints (orbax) every `checkpoint_every` steps and at the end hold the train state and the
  input iterator's state: rerunning the same command resumes and reaches the same parameters,
  bit for bit on CPU, as an uninterrupted run. The workdir may be a URL (`gs://...`).
* Only process 0 writes TensorBoard summaries, logs and JSON files; a progress line (step, loss,
  tokens/s, time left) is printed at least every `progress_seconds`.
* Compilation (`chessjax.compile`): the step compiles once per batch length (`StepCompiler`),
  checked against the machine's memory before the first step. Where a core is free to do it
  (`train.compile_ahead`), the lengths the run's plan will use are compiled in a background
  thread while the first one trains; `data.min_bucket_batches` merges the length buckets that
  few of the run's batches use into longer ones (fewer compilations for a short run).
"""

import json
import logging
import time
from functools import partial

import jax
import ml_collections
import numpy as np

from chessjax import batches, evaluation, flops, logs, peaks, profiling
from chessjax import workdir as workdir_lib
from chessjax.checkpointing import Checkpointer, abstract_like
from chessjax.compile import StepCompiler, batch_shape, check_memory
from chessjax.data.plan import BatchPlan, bucket_length
from chessjax.files import as_path, write_json, write_text
from chessjax.models import count_params
from chessjax.spec import TrainSpec
from chessjax.step import build
from chessjax.task import get_task

log = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
  """Training produced too many consecutive non-finite batches (counters as the guard read them)."""

  def __init__(self, message: str, *, step: int = 0, bad_batches: int = 0, rollbacks: int = 0):
    super().__init__(message)
    self.step, self.bad_batches, self.rollbacks = step, bad_batches, rollbacks


def config_json(config) -> str:
  """The config as the workdir keeps it (`config.json`)."""
  return json.dumps(config.to_dict(), indent=2, sort_keys=True, default=str) + "\n"


def train_and_evaluate(config: ml_collections.ConfigDict, workdir) -> dict:
  """Trains per `config`, resuming from `workdir` if it holds checkpoints. Returns a summary
  (also written to the workdir: `workdir.SUMMARY`).

  Length: `config.train.steps`, or `config.train.epochs` whole epochs of the training split when
  that is set (> 0). Validation: every `eval_every` steps (0: once per epoch) on the first
  `eval_batches` batches of the validation split (0: all of it). Whenever validation improves the
  task's selection metric (`task.selection_metric`, lower is better) the state is also saved as
  WORKDIR/best; with `early_stopping_patience` > 0, training stops after that many validations
  without improvement.
  """
  workdir = as_path(workdir)
  chief = jax.process_index() == 0
  spec = TrainSpec.from_config(config)
  task = get_task(config)
  train_iter, spec = batches.train_batches(spec, task.rows)
  profiler = profiling.StepProfiler(spec.train.profile, workdir / "profile")
  if chief:
    workdir.mkdir(parents=True, exist_ok=True)
    write_text(workdir / workdir_lib.CONFIG, config_json(config))

  epoch_steps, total = spec.epoch_steps, spec.total_steps
  eval_every = spec.train.eval_every or epoch_steps
  model, state, fns = build(spec, task)
  n_params = count_params(model)
  played = np.minimum(train_iter.plan.lengths, spec.data.max_len)  # For MFU in the logs.
  flops_per_token = flops.model_per_token(model, played)
  del model
  val_batches = batches.validation_batches(spec, task.eval_rows)

  ckpt = Checkpointer(workdir, max_to_keep=spec.train.keep_checkpoints)
  restored = ckpt.restore_latest(abstract_like(state))
  start_step = 0
  if restored is not None:
    start_step, state, data_state = restored
    train_iter.set_state(data_state)
    log.info("resumed from step %d", start_step)
  stopping = _EarlyStopping(workdir, spec.train.early_stopping_patience)
  logger = logs.TrainLogger(
    workdir if chief else None,
    total=total,
    start_step=start_step,
    lr_at=fns.lr_at,
    progress_seconds=spec.train.progress_seconds,
    flops_per_token=flops_per_token,
    peak_flops=peaks.system_peak(spec.dtype),
  )
  logger.message(
    f"{spec.family} {spec.size} ({spec.task}): {n_params:,} "
    f"parameters, {jax.device_count()} devices, {jax.process_count()} processes, global batch "
    f"{spec.data.batch_size}, {total} steps ({epoch_steps} per epoch)"
    + (f", resumed from step {start_step}" if start_step else "")
  )
  step, pending = start_step, None
  last_eval = {}
  best = Checkpointer(workdir, max_to_keep=1, subdir="best") if val_batches else None
  plan: BatchPlan = train_iter.plan
  longest = bucket_length(int(plan.lengths.max()), plan.batching.bucket_lengths)
  compiler = StepCompiler(fns.train_step)
  ahead = spec.compile_ahead
  checked = False
  summary = partial(
    _write_summary,
    workdir if chief else None,
    spec,
    params=n_params,
    total=total,
    resumed_from=start_step,
  )
  try:
    while step < total and not stopping.stopped:
      profiler.step(step)
      batch = next(train_iter)
      device_batch = evaluation.device_batch(batch, fns)
      shape = batch_shape(device_batch, task.batch_keys)
      started = time.perf_counter()
      compiled = compiler.ready(shape)
      if compiled is None:  # Compiled now, or awaited from the background thread.
        compiled = compiler.get(shape, state, device_batch)
        if not checked:  # The run's first compilation.
          checked = True
          check_memory(spec, task.batch_keys, state, device_batch, compiler, longest)
          if ahead:
            lengths = plan.copy().first_uses(step, min(total, step + epoch_steps))
            compiler.start_ahead(state, device_batch, task.batch_keys, lengths)
        logger.compiled(time.perf_counter() - started)
      state, out = compiled(state, device_batch)
      step += 1
      # Read the previous step's outputs only now, so the host never waits on the device.
      if pending is not None:
        _check_finite(pending, spec.train.max_bad_batches)
        logger.add(pending)
      # This process's rows times the processes: every process holds as many rows of each batch,
      # so tokens/s counts the whole batch (exact for one process, an estimate for several).
      n = jax.process_count()
      pending = logs.Pending(step, out, n * int(batch["mask"].sum()), n * batch["mask"].size)
      if step % spec.train.log_every == 0 or step == total:
        jax.block_until_ready(out)
        _check_finite(pending, spec.train.max_bad_batches)
        logger.add(pending)
        pending = None
        logger.write_interval(step)
      elif logger.progress_due():
        logger.progress(step)
      validated = val_batches and (step % eval_every == 0 or step == total)
      if validated:
        last_eval = evaluation.accumulate(fns, state, val_batches)
        logger.write_eval(step, *task.summarize(last_eval))
        if stopping.update(step, float(last_eval[task.selection_metric])):
          best.save(step, state, train_iter.get_state(), force=True)
        if stopping.stopped:
          logger.message(
            f"step {step}: no validation improvement in {stopping.patience} evaluations, "
            f"stopping (best {task.selection_metric} {stopping.best:.6g} at step "
            f"{stopping.best_step})"
          )
      if step % spec.train.checkpoint_every == 0 or step == total or stopping.stopped:
        ckpt.save(step, state, train_iter.get_state(), force=True)
      if validated and chief:
        # After the checkpoints are started: a rerun sees the early stopping of the saved state.
        stopping.write()
  except NonFiniteError as e:
    summary(
      last_eval,
      steps=e.step,
      aborted=True,
      abort_reason=str(e),
      bad_batches=e.bad_batches,
      rollbacks=e.rollbacks,
    )
    raise
  finally:
    profiler.close()
    compiler.close()
    ckpt.close()
    if best is not None:
      best.close()
    train_iter.close()
    logger.close()
  if val_batches and not last_eval:  # Rerun of a finished run: keep the summary's metrics.
    last_eval = evaluation.accumulate(fns, state, val_batches)
  return summary(
    last_eval,
    steps=step,
    aborted=False,
    stopped_early=stopping.stopped,
    best_step=stopping.best_step,
    bad_batches=int(state["bad_batches"]),
    rollbacks=int(state["rollbacks"]),
  )


def _write_summary(
  workdir,
  spec: TrainSpec,
  last_eval: dict,
  *,
  params: int,
  steps: int,
  total: int,
  resumed_from: int,
  **health,
) -> dict:
  """The run's summary, written to the workdir (`workdir_lib.SUMMARY`; `workdir`
  None: on processes other than 0, not written): what trained, how far, its health (`aborted`,
  counters; the sweep's selection rule replaces an aborted stage-2 run) and its last
  validation."""
  summary = {
    "task": spec.task,
    "family": spec.family,
    "size": spec.size,
    "params": params,
    "steps": steps,
    "total_steps": total,
    "resumed_from": resumed_from,
    **health,
    "validation": {k: v for k, v in last_eval.items() if k != "bins"},
  }
  if workdir is not None:
    workdir_lib.write_summary(workdir, summary)
  return summary


class _EarlyStopping:
  """Best validation metric so far and early stopping, persisted in WORKDIR/early_stopping.json
  (`workdir_lib.EARLY_STOPPING`) so a resumed run continues the count (and a run that stopped
  early stays stopped)."""

  def __init__(self, workdir, patience: int):
    self.path, self.patience = workdir_lib.early_stopping_path(workdir), int(patience)
    saved_at = workdir_lib.early_stopping_path(workdir, existing=True)
    saved = json.loads(saved_at.read_text()) if saved_at.exists() else {}
    self.best = saved.get("best", float("inf"))
    self.best_step = saved.get("best_step")
    self.since_best = saved.get("since_best", 0)
    self.stopped = bool(saved.get("stopped", False))

  def update(self, step: int, metric: float) -> bool:
    """Records a validation result; returns whether it is the best so far."""
    if metric < self.best:
      self.best, self.best_step, self.since_best = metric, step, 0
      return True
    self.since_best += 1
    self.stopped = self.patience > 0 and self.since_best >= self.patience
    return False

  def write(self) -> None:
    state = {
      "best": self.best,
      "best_step": self.best_step,
      "since_best": self.since_best,
      "stopped": self.stopped,
    }
    write_json(self.path, state)


def _check_finite(pending: "logs.Pending", max_bad: int) -> None:
  out = jax.device_get(pending.out)
  if int(out["bad_in_a_row"]) >= max_bad:
    raise NonFiniteError(
      f"step {pending.step}: {int(out['bad_in_a_row'])} consecutive batches with a non-finite "
      f"loss, gradient or parameters ({int(out['bad_batches'])} in all, {int(out['rollbacks'])} "
      "rollbacks); lower the learning rate or check the data",
      step=pending.step,
      bad_batches=int(out["bad_batches"]),
      rollbacks=int(out["rollbacks"]),
    )
