"""The training loop, for any task: `train_and_evaluate(config, workdir)`.

Reads top to bottom: get the task (`chessjax.task`), build the model and optimizer, the mesh and
shardings, the task's input pipeline, restore the newest readable checkpoint if any, then run one
jitted pure `train_step` per batch. Nothing here knows what a batch holds beyond `task.batch_keys`
and its `mask` (True on scored positions, used to count tokens).

* Data parallel over every device of every process: a 1-D mesh `("data",)`, parameters
  replicated, each process feeding its rows of the global batch
  (`jax.make_array_from_process_local_data`). The same code runs on 1 CPU, N fake CPU devices,
  a GPU, or a multi-host TPU slice.
* Non-finite guard as in the Chess-World-Model release, inside the step (no host sync): a batch
  whose loss or gradient norm is non-finite is skipped; parameters that turn non-finite are
  rolled back to a snapshot taken every `snapshot_every` steps; the host aborts after
  `max_bad_batches` consecutive bad batches, reading each step's counters one step late.
* Checkpoints (orbax) every `checkpoint_every` steps and at the end hold the train state and the
  input iterator's state: rerunning the same command resumes and reaches the same parameters,
  bit for bit on CPU, as an uninterrupted run. The workdir may be a URL (`gs://...`).
* Only process 0 writes TensorBoard summaries, logs and JSON files; a progress line (step, loss,
  tokens/s, time left) is printed at least every `progress_seconds`.
* Compilation: the step compiles once per batch length (`StepCompiler`). Where a core is free to
  do it (`train.compile_ahead`), the lengths the run's plan will use are compiled in a background
  thread while the first one trains; `data.min_bucket_batches` merges the length buckets that
  few of the run's batches use into longer ones (fewer compilations for a short run).
"""

import dataclasses
import json
import logging
import os
import threading
import time
from concurrent.futures import Future
from functools import partial

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding

from chessjax import evaluation, flops, logs, memory, optim, peaks, profiling, sharding
from chessjax.checkpointing import Checkpointer, abstract_like
from chessjax.data import pipeline, read_manifest
from chessjax.data.plan import BatchPlan, bucket_length, merge_rare_buckets
from chessjax.files import as_path, write_json, write_text
from chessjax.models import count_params, create_model
from chessjax.task import Task, get_task, task_name

log = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
  """Training produced too many consecutive non-finite batches (counters as the guard read them)."""

  def __init__(self, message: str, *, step: int = 0, bad_batches: int = 0, rollbacks: int = 0):
    super().__init__(message)
    self.step, self.bad_batches, self.rollbacks = step, bad_batches, rollbacks


@dataclasses.dataclass
class Run:
  """What the loop needs besides the train state: the task, compiled steps and shardings."""

  task: Task
  graphdef: nnx.GraphDef
  train_step: object  # jitted (state, batch) -> (state, outputs)
  eval_step: object  # jitted (params, model_state, batch) -> the task's additive statistics
  predict: object  # jitted (params, model_state, tokens int32[B, T]) -> logits float32[B, T, C]
  state_sharding: object
  data_sharding: NamedSharding


def init_state(params, model_state, tx) -> dict:
  """The train state pytree (everything a checkpoint must hold). No two leaves share a buffer,
  since the step donates them all."""
  zero = lambda: jnp.zeros((), jnp.int32)  # noqa: E731
  return {
    "step": zero(),
    "params": params,
    "model_state": model_state,  # Non-parameter model state (dropout RNG counters).
    "opt_state": tx.init(params),
    "snapshot": {"params": jax.tree.map(jnp.copy, params), "opt_state": tx.init(params)},
    "bad_in_a_row": zero(),
    "bad_batches": zero(),
    "rollbacks": zero(),
  }


def _all_finite(tree) -> jax.Array:
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
  return jnp.all(jnp.stack(leaves))


def loss_weight(task: Task, batch: dict) -> jax.Array:
  """The number the task's loss divides its summed per-token losses by (token pooling): the task's
  `loss_weight(batch)` if it has one, else the sum of the batch's `weights` (the LM task), else of
  its `mask` (the world-model task). Only micro-batching needs it."""
  if hasattr(task, "loss_weight"):
    return jnp.asarray(task.loss_weight(batch), jnp.float32)
  key = "weights" if "weights" in batch else "mask"
  return jnp.sum(batch[key].astype(jnp.float32))


def _loss_and_grads(task: Task, model, batch: dict):
  # nnx.value_and_grad (not jax's) so that dropout may advance the model's RNG counters inside
  # the differentiated function; gradients are taken w.r.t. the nnx.Param variables only.
  return nnx.value_and_grad(lambda m: task.loss(m, batch, train=True))(model)


def accumulated_loss_and_grads(graphdef, task: Task, params, model_state, batch: dict, n: int):
  """Loss and gradients of a batch computed over `n` micro-batches of `B / n` rows in turn
  (`jax.lax.scan`, so only one micro-batch's activations live at a time).

  The task's loss pools over tokens (summed per-token losses / tokens of the whole batch), so
  micro-batch i, whose own loss is S_i / w_i, enters with weight w_i / sum(w) (`loss_weight`):
  sum_i (w_i / W) S_i / w_i = S / W, the full batch's loss, and likewise its gradient, to float
  rounding. Micro-batch i holds rows i, i + n, i + 2n, ... so every device keeps its share of each
  micro-batch under data parallelism. Dropout draws its masks per micro-batch: with dropout the
  step is the batch's step in distribution, without it the same step.
  """
  if n == 1:
    model = nnx.merge(graphdef, params, model_state)
    loss, grads = _loss_and_grads(task, model, batch)
    return loss, grads, nnx.state(model, nnx.Not(nnx.Param))

  def split(x):
    return x.reshape(x.shape[0] // n, n, *x.shape[1:]).swapaxes(0, 1)

  micro = jax.tree.map(split, batch)

  def body(carry, mb):
    # The parameters travel in the carry (unchanged) so that the model is merged, and its
    # dropout RNG counters advanced, at the scan's own trace level, as nnx requires.
    params, loss_sum, grad_sum, weight_sum, model_state = carry
    model = nnx.merge(graphdef, params, model_state)
    loss, grads = _loss_and_grads(task, model, mb)
    w = loss_weight(task, mb)
    grad_sum = jax.tree.map(lambda a, g: a + w * g, grad_sum, grads)
    model_state = nnx.state(model, nnx.Not(nnx.Param))
    return (params, loss_sum + w * loss, grad_sum, weight_sum + w, model_state), None

  zero = jnp.zeros((), jnp.float32)
  grads0 = jax.tree.map(jnp.zeros_like, params)
  (_, loss_sum, grad_sum, weight_sum, model_state), _ = jax.lax.scan(
    body, (params, zero, grads0, zero, model_state), micro
  )
  scale = 1.0 / jnp.maximum(weight_sum, 1.0)
  grads = jax.tree.map(lambda g: (g * scale).astype(g.dtype), grad_sum)
  return loss_sum * scale, grads, model_state


def train_step(
  graphdef, tx, task: Task, snapshot_every: int, state: dict, batch: dict, *, micro_batches=1
):
  """One optimisation step with the non-finite guard. Pure; jitted once per batch shape.
  `micro_batches` > 1 accumulates the gradient over that many slices of the batch (same step,
  less memory: `accumulated_loss_and_grads`)."""

  loss, grads, model_state = accumulated_loss_and_grads(
    graphdef, task, state["params"], state["model_state"], batch, micro_batches
  )
  grad_norm = optax.tree.norm(grads)
  updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
  params = optax.apply_updates(state["params"], updates)

  batch_ok = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
  params_ok = _all_finite(params)
  keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(batch_ok, n, o), new, old)  # noqa: E731
  params, opt_state = keep(params, state["params"]), keep(opt_state, state["opt_state"])
  rollback = batch_ok & ~params_ok
  snap = state["snapshot"]
  back = lambda cur, old: jax.tree.map(lambda c, o: jnp.where(rollback, o, c), cur, old)  # noqa: E731
  params, opt_state = back(params, snap["params"]), back(opt_state, snap["opt_state"])
  step = state["step"] + 1
  take = (step % snapshot_every) == 0
  snap = jax.tree.map(
    lambda c, o: jnp.where(take, c, o), {"params": params, "opt_state": opt_state}, snap
  )
  bad = ~batch_ok | rollback
  new_state = {
    "step": step,
    "params": params,
    "model_state": model_state,
    "opt_state": opt_state,
    "snapshot": snap,
    "bad_in_a_row": jnp.where(bad, state["bad_in_a_row"] + 1, 0),
    "bad_batches": state["bad_batches"] + bad,
    "rollbacks": state["rollbacks"] + rollback,
  }
  # The host reads these a step late, after the next step has donated `new_state`: they must
  # not be the state's buffers (XLA may hand back one buffer for two equal outputs), hence float.
  out = {
    "loss": loss,
    "grad_norm": grad_norm,
    "bad_in_a_row": new_state["bad_in_a_row"].astype(jnp.float32),
    "bad_batches": new_state["bad_batches"].astype(jnp.float32),
    "rollbacks": new_state["rollbacks"].astype(jnp.float32),
  }
  return new_state, out


def eval_step(graphdef, task: Task, params, model_state, batch: dict) -> dict:
  """The task's additive statistics of one batch under the model in evaluation mode."""
  return task.eval_stats(nnx.merge(graphdef, params, model_state), batch)


def predict(graphdef, params, model_state, tokens):
  model = nnx.merge(graphdef, params, model_state)
  return model(tokens, train=False).astype(jnp.float32)


def build_model(config: ml_collections.ConfigDict, task: Task) -> nnx.Module:
  model = create_model(
    config.family,
    config.size,
    seed=config.seed,
    head=task.head,
    **task.model_kwargs,
    **config.model.to_dict(),
  )
  if config.get("train", {}).get("remat", False):
    set_remat(model)
  return model


def set_remat(model: nnx.Module, remat: bool = True) -> None:
  """Rematerialisation: every residual stack (`chessjax.models.stack.Stack`) of `model` keeps only
  each block's input for the backward pass and recomputes the block's activations there
  (`nnx.remat`, i.e. `jax.checkpoint`): activation memory of one block instead of all, for about
  one more forward pass of compute. Same values; parameters and checkpoints are unchanged."""
  from chessjax.models.stack import Stack

  stacks = [m for _, m in nnx.iter_modules(model) if isinstance(m, Stack)]
  if not stacks:
    raise ValueError(
      f"train.remat: {type(model).__name__} has no residual stack (chessjax.models.stack.Stack) "
      "whose blocks could be recomputed"
    )
  for stack in stacks:
    stack.remat = remat


def micro_batches(config) -> int:
  """`train.micro_batches` (default 1), checked against the global batch size."""
  n = int(config.train.get("micro_batches", 1))
  if n < 1 or config.data.batch_size % n:
    raise ValueError(
      f"train.micro_batches={n} must be >= 1 and divide data.batch_size={config.data.batch_size}"
    )
  return n


def compile_ahead(config) -> bool:
  """`train.compile_ahead`: whether the loop compiles the train step for the run's other batch
  lengths in a background thread (`StepCompiler`). "auto" (the default): when that can overlap
  training, i.e. the steps run on an accelerator or this process may use more than one CPU core;
  on a single core it would only move the compilations, not hide them. Also true/false."""
  setting = config.train.get("compile_ahead", "auto")
  if isinstance(setting, str):
    value = setting.strip().lower()
    if value == "auto":
      return jax.default_backend() != "cpu" or _usable_cores() > 1
    if value not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
      raise ValueError(f"train.compile_ahead must be auto, true or false, got {setting!r}")
    return value in ("true", "1", "yes", "on")
  return bool(setting)


def _usable_cores() -> int:
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # Not on Linux.
    return os.cpu_count() or 1


def batch_shape(batch: dict, keys) -> tuple:
  """What a compiled train step is kept under: the shapes of the batch's `keys` arrays."""
  return tuple(tuple(batch[k].shape) for k in keys)


def batch_like(batch: dict, length: int) -> dict:
  """Abstract arrays (shape, dtype, sharding) of `batch` (global arrays, or abstract ones) with
  `length` positions: axis 1 of every array with more than one axis."""
  return {
    k: jax.ShapeDtypeStruct(
      (x.shape[0], length, *x.shape[2:]) if len(x.shape) > 1 else x.shape,
      x.dtype,
      sharding=x.sharding,
    )
    for k, x in batch.items()
  }


def _abstract(x) -> jax.ShapeDtypeStruct:
  # Typed PRNG keys (dropout's RNG state) are never weak and have no `weak_type`.
  weak = getattr(x, "weak_type", False)
  return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding, weak_type=weak)


class StepCompiler:
  """The jitted train step's compiled programs, one per batch shape, each compiled exactly once:
  by the loop when a batch first needs it (`get`), or ahead of time by a background thread
  (`start_ahead`) while earlier shapes train. XLA compiles with the GIL released, so where a core
  is free (or an accelerator runs the steps) the later lengths' compilations hide behind
  training; on one core they would only move. A shape the thread is compiling is awaited, one it
  has not reached is compiled by the loop (the thread then skips it), and an error of a
  background compilation is raised by the loop when it needs that shape. The programs are the
  same either way: lowered from the same jitted function with the same shapes, dtypes,
  shardings and weak types (`ShapeDtypeStruct`s of the live state and batch), under JAX's global
  configuration (a thread-local one, e.g. a `jax.default_matmul_precision` block around the loop,
  would not reach the thread)."""

  def __init__(self, jitted):
    self._jitted = jitted
    self._lock = threading.Lock()
    self._futures: dict[tuple, Future] = {}
    self._thread: threading.Thread | None = None
    self._stop = threading.Event()
    self._error: BaseException | None = None
    self.where: dict[tuple, str] = {}  # Shape -> "in the loop" | "ahead": who compiled it.

  def ready(self, shape):
    """The compiled step for `shape` if it is compiled (its compilation's error raised), else
    None."""
    if self._error is not None:
      raise self._error
    future = self._futures.get(shape)
    return future.result() if future is not None and future.done() else None

  def get(self, shape, state, batch):
    """The compiled step for `shape` (that of `batch`): compiled now unless the background thread
    has started it, in which case it is awaited."""
    with self._lock:
      future = self._futures.get(shape)
      mine = future is None
      if mine:
        future = self._futures[shape] = Future()
    if mine:
      self._compile(future, shape, state, batch, "in the loop")
    return future.result()

  def start_ahead(self, state, batch: dict, keys, lengths) -> None:
    """Compiles, in a background thread, the step for `batch` (the live global batch) at each
    of `lengths` (an iterable walked in that thread; `BatchPlan.first_uses`) not yet claimed."""
    state_like = jax.tree.map(_abstract, state)
    template = {k: _abstract(x) for k, x in batch.items()}

    def work():
      try:
        for length in lengths:
          if self._stop.is_set():
            return
          like = batch_like(template, length)
          shape = batch_shape(like, keys)
          with self._lock:
            if shape in self._futures:
              continue
            future = self._futures[shape] = Future()
          self._compile(future, shape, state_like, like, "ahead")
      except BaseException as e:  # noqa: BLE001 - raised by the loop's next `ready`
        self._error = e

    self._thread = threading.Thread(target=work, name="chessjax-compile-ahead")
    self._thread.start()

  def close(self) -> None:
    """Stops the background thread after the compilation it is in (joined)."""
    self._stop.set()
    if self._thread is not None:
      self._thread.join()
      self._thread = None

  def _compile(self, future: Future, shape, state, batch, where: str) -> None:
    started = time.perf_counter()
    try:
      compiled = self._jitted.lower(state, batch).compile()
    except BaseException as e:
      future.set_exception(e)
      return
    self.where[shape] = where
    future.set_result(compiled)
    log.info(
      "train step for batch shapes %s compiled %s in %.1f s",
      shape,
      where,
      time.perf_counter() - started,
    )


def build(
  config: ml_collections.ConfigDict, task: Task | None = None, *, devices=None, total_steps=None
):
  """Model, initial train state and compiled steps (`Run`) for a config, data parallel over
  `devices` (default: every device of every process). `total_steps` sets the learning-rate
  schedule's length (default `config.train.steps`)."""
  task = get_task(config) if task is None else task
  model = build_model(config, task)
  graphdef, params, model_state = nnx.split(model, nnx.Param, ...)
  total = config.train.steps if total_steps is None else total_steps
  tx = optim.make_optimizer(config.optim, total, params, warmup_steps=warmup_steps(config, total))
  mesh = sharding.make_mesh(devices)
  replicated = sharding.replicated(mesh)
  state = jax.device_put(init_state(params, model_state, tx), replicated)
  state_sharding = jax.tree.map(lambda x: x.sharding, state)
  run = Run(
    task=task,
    graphdef=graphdef,
    train_step=jax.jit(
      partial(
        train_step,
        graphdef,
        tx,
        task,
        config.train.snapshot_every,
        micro_batches=micro_batches(config),
      ),
      out_shardings=(state_sharding, replicated),
      donate_argnums=0,
    ),
    eval_step=jax.jit(partial(eval_step, graphdef, task), out_shardings=replicated),
    predict=jax.jit(partial(predict, graphdef)),
    state_sharding=state_sharding,
    data_sharding=sharding.batch_sharding(mesh),
  )
  return model, state, run


def config_json(config) -> str:
  return json.dumps(config.to_dict(), indent=2, sort_keys=True, default=str) + "\n"


def train_and_evaluate(config: ml_collections.ConfigDict, workdir) -> dict:
  """Trains per `config`, resuming from `workdir` if it holds checkpoints. Returns a summary.

  Length: `config.train.steps`, or `config.train.epochs` whole epochs of the training split when
  that is set (> 0). Validation: every `eval_every` steps (0: once per epoch) on the first
  `eval_batches` batches of the validation split (0: all of it). Whenever validation improves the
  task's selection metric (`task.selection_metric`, lower is better) the state is also saved as
  WORKDIR/best; with `early_stopping_patience` > 0, training stops after that many validations
  without improvement.
  """
  workdir = as_path(workdir)
  chief = jax.process_index() == 0
  if not config.data.train:
    raise ValueError("config.data.train is empty: point it at a prepared dataset directory")
  task = get_task(config)
  profiler = profiling.StepProfiler(config.train.get("profile", ""), workdir / "profile")
  if chief:
    workdir.mkdir(parents=True, exist_ok=True)
    write_text(workdir / "config.json", config_json(config))

  buckets = tuple(config.data.bucket_lengths)
  train_iter = _train_batches(config, task, buckets)
  epoch_steps = train_iter.plan.batches_per_epoch
  total = total_steps(config, epoch_steps)
  min_batches = int(config.data.get("min_bucket_batches", 0))
  if min_batches > 0:
    # Fixed by the plan and the run's length, so a resumed run merges the same buckets.
    merged = merge_rare_buckets(buckets, train_iter.plan.batch_lengths(0, total), min_batches)
    log.info("data.min_bucket_batches=%d: buckets %s -> %s", min_batches, buckets, merged)
    if merged != buckets:
      train_iter.close()
      train_iter = _train_batches(config, task, merged)
  eval_every = config.train.eval_every or epoch_steps
  model, state, run = build(config, task, total_steps=total)
  n_params = count_params(model)
  played = np.minimum(train_iter.plan.lengths, config.data.max_len)  # For MFU in the logs.
  flops_per_token = flops.model_per_token(model, played)
  del model
  val_batches = _validation_batches(config, task)

  ckpt = Checkpointer(workdir, max_to_keep=config.train.keep_checkpoints)
  restored = ckpt.restore_latest(abstract_like(state))
  start_step = 0
  if restored is not None:
    start_step, state, data_state = restored
    train_iter.set_state(data_state)
    log.info("resumed from step %d", start_step)
  selection = _Selection(workdir, config.train.get("early_stopping_patience", 0))

  lr_at = optim.lr_schedule(
    config.optim.lr,
    warmup_steps(config, total),
    total,
    config.optim.schedule,
    config.optim.floor,
  )
  logger = logs.TrainLogger(
    workdir if chief else None,
    total=total,
    start_step=start_step,
    lr_at=lr_at,
    progress_seconds=config.train.get("progress_seconds", 10.0),
    flops_per_token=flops_per_token,
    peak_flops=peaks.system_peak(config.model.get("dtype", "float32")),
  )
  logger.message(
    f"{config.family} {config.size} ({task_name(config)}): {n_params:,} "
    f"parameters, {jax.device_count()} devices, {jax.process_count()} processes, global batch "
    f"{config.data.batch_size}, {total} steps ({epoch_steps} per epoch)"
    + (f", resumed from step {start_step}" if start_step else "")
  )
  step, pending = start_step, None
  last_eval = {}
  best = Checkpointer(workdir, max_to_keep=1, subdir="best") if val_batches else None
  plan: BatchPlan = train_iter.plan
  longest = bucket_length(int(plan.lengths.max()), plan.batching.bucket_lengths)
  wrapped = not hasattr(run.train_step, "lower")  # A wrapped step (tests, benchmark glue).
  seen = set()  # Batch shapes whose step a wrapped step has compiled by its first call.
  compiler = None if wrapped else StepCompiler(run.train_step)
  ahead = not wrapped and compile_ahead(config)
  checked = False
  try:
    while step < total and not selection.stopped:
      profiler.step(step)
      batch = next(train_iter)
      device_batch = evaluation.device_batch(batch, run)
      shape = batch_shape(device_batch, task.batch_keys)
      started = time.perf_counter()
      if wrapped:
        state, out = run.train_step(state, device_batch)
        if shape not in seen:  # Compiled by this first call, timed as such.
          seen.add(shape)
          logger.compiled(time.perf_counter() - started)
      else:
        compiled = compiler.ready(shape)
        if compiled is None:  # Compiled now, or awaited from the background thread.
          compiled = compiler.get(shape, state, device_batch)
          if not checked:  # The run's first compilation.
            checked = True
            _check_memory(config, run, state, device_batch, compiler, longest)
            if ahead:
              lengths = plan.copy().first_uses(step, min(total, step + epoch_steps))
              compiler.start_ahead(state, device_batch, task.batch_keys, lengths)
          logger.compiled(time.perf_counter() - started)
        state, out = compiled(state, device_batch)
      step += 1
      # Read the previous step's outputs only now, so the host never waits on the device.
      if pending is not None:
        _check_finite(pending, config.train.max_bad_batches)
        logger.add(pending)
      pending = logs.Pending(step, out, int(batch["mask"].sum()), batch["mask"].size)
      if step % config.train.log_every == 0 or step == total:
        jax.block_until_ready(out)
        _check_finite(pending, config.train.max_bad_batches)
        logger.add(pending)
        pending = None
        logger.write_interval(step)
      elif logger.progress_due():
        logger.progress(step)
      validated = val_batches and (step % eval_every == 0 or step == total)
      if validated:
        last_eval = evaluation.accumulate(run, state, val_batches)
        logger.write_eval(step, *task.summarize(last_eval))
        if selection.update(step, float(last_eval[task.selection_metric])):
          best.save(step, state, train_iter.get_state(), force=True)
        if selection.stopped:
          logger.message(
            f"step {step}: no validation improvement in {selection.patience} evaluations, "
            f"stopping (best {task.selection_metric} {selection.best:.6g} at step "
            f"{selection.best_step})"
          )
      if step % config.train.checkpoint_every == 0 or step == total or selection.stopped:
        ckpt.save(step, state, train_iter.get_state(), force=True)
      if validated and chief:
        # After the checkpoints are started: a rerun sees the selection of the saved state.
        selection.write()
  except NonFiniteError as e:
    # The run's health for the sweep's selection rule (an aborted stage-2 run is replaced).
    summary = {
      "task": task_name(config),
      "family": config.family,
      "size": config.size,
      "params": n_params,
      "steps": e.step,
      "total_steps": total,
      "resumed_from": start_step,
      "aborted": True,
      "abort_reason": str(e),
      "bad_batches": e.bad_batches,
      "rollbacks": e.rollbacks,
      "validation": {k: v for k, v in last_eval.items() if k != "bins"},
    }
    if chief:
      write_json(workdir / "train_summary.json", summary)
    raise
  finally:
    profiler.close()
    if compiler is not None:
      compiler.close()
    ckpt.close()
    if best is not None:
      best.close()
    train_iter.close()
    logger.close()
  if val_batches and not last_eval:  # Rerun of a finished run: keep the summary's metrics.
    last_eval = evaluation.accumulate(run, state, val_batches)
  summary = {
    "task": task_name(config),
    "family": config.family,
    "size": config.size,
    "params": n_params,
    "steps": step,
    "total_steps": total,
    "resumed_from": start_step,
    "aborted": False,
    "stopped_early": selection.stopped,
    "best_step": selection.best_step,
    "bad_batches": int(state["bad_batches"]),
    "rollbacks": int(state["rollbacks"]),
    "validation": {k: v for k, v in last_eval.items() if k != "bins"},
  }
  if chief:
    write_json(workdir / "train_summary.json", summary)
  return summary


def _train_batches(config, task: Task, bucket_lengths: tuple) -> pipeline.BatchIterator:
  return pipeline.make_batches(
    config.data.train,
    config.data.train_split,
    task.rows,
    max_games=config.data.get("max_train_games") or None,
    batch_size=config.data.batch_size,
    seed=config.seed,
    shuffle=config.data.get("shuffle", True),
    bucket_lengths=bucket_lengths,
    max_len=config.data.max_len,
    window_batches=config.data.window_batches,
    worker_count=config.data.worker_count,
  )


def total_steps(config, epoch_steps: int) -> int:
  """`train.epochs` epochs of `epoch_steps` batches when set (> 0), else `train.steps`."""
  epochs = config.train.get("epochs", 0)
  return int(epochs * epoch_steps) if epochs else int(config.train.steps)


def warmup_steps(config, total: int) -> int:
  """`optim.warmup_fraction` of the run's `total` steps when set (> 0), else `optim.warmup_steps`.

  (Toshniwal et al. warm up over 10% of a 10-epoch horizon, which an early stop may cut short.)
  """
  fraction = config.optim.get("warmup_fraction", 0.0)
  return max(int(round(fraction * total)), 1) if fraction else int(config.optim.warmup_steps)


class _Selection:
  """Best validation metric so far and early stopping, persisted in WORKDIR/selection.json so a
  resumed run continues the count (and a run that stopped early stays stopped)."""

  def __init__(self, workdir, patience: int):
    self.path, self.patience = workdir / "selection.json", int(patience)
    saved = json.loads(self.path.read_text()) if self.path.exists() else {}
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


def _validation_batches(config, task: Task) -> list[dict]:
  """The first `eval_batches` batches (0: all) of the validation split, read once and kept in
  memory, in the task's evaluation rows."""
  if config.data.val_split not in read_manifest(config.data.train)["splits"]:
    log.warning(
      "no %r split in %s: no validation during training", config.data.val_split, config.data.train
    )
    return []
  it = pipeline.make_eval_batches(
    config.data.train,
    config.data.val_split,
    task.eval_rows,
    batch_size=config.data.batch_size,
    bucket_lengths=tuple(config.data.bucket_lengths),
    max_len=config.data.max_len,
    sort_by_length=False,
  )
  batches = []
  for batch in it:
    batches.append(batch)
    if len(batches) == config.train.eval_batches:  # 0 never matches: the whole split.
      break
  it.close()
  return batches


def _check_memory(
  config, run: Run, state, batch: dict, compiler: "StepCompiler", longest: int
) -> None:
  """Stops before the first step when the run's steps will not fit in memory
  (`chessjax.memory`): the first step's compiled program exactly, the run's longest batch
  (`longest` tokens) extrapolated from it, and compiled and checked exactly when that estimate
  does not fit (the program is kept in `compiler`)."""
  limit_gb = config.train.get("memory_limit_gb", 0.0)  # 0: what the machine has.
  limit = int(limit_gb * 2**30) if limit_gb else memory.available_bytes()
  compiled = compiler.ready(batch_shape(batch, run.task.batch_keys))
  needed = memory.program_bytes(compiled)
  n = micro_batches(config)
  what = (
    f"the train step ({config.family} {config.size}, batch {config.data.batch_size}"
    + (f" in {n} micro-batches" if n > 1 else "")
    + (", remat" if config.train.get("remat", False) else "")
  )
  t = max(x.shape[1] for x in batch.values() if x.ndim > 1)
  memory.check(needed, limit, f"{what}, {t} tokens)")
  if needed is None or limit is None or longest <= t:
    return
  args = compiled.memory_analysis().argument_size_in_bytes
  if args + (needed - args) * (longest / t) ** 2 <= limit:
    return
  like = batch_like(batch, longest)
  longest_step = compiler.get(batch_shape(like, run.task.batch_keys), state, like)
  memory.check(memory.program_bytes(longest_step), limit, f"{what}, {longest} tokens)")


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
