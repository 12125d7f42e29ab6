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
"""

import dataclasses
import json
import logging
from functools import partial

import jax
import jax.numpy as jnp
import ml_collections
import optax
from flax import nnx
from jax.sharding import NamedSharding

from chessjax import evaluation, logs, optim, sharding
from chessjax.checkpointing import Checkpointer, abstract_like
from chessjax.data import pipeline, read_manifest
from chessjax.files import as_path, write_json, write_text
from chessjax.models import count_params, create_model
from chessjax.task import Task, get_task, task_name

log = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
  """Training produced too many consecutive non-finite batches."""


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


def train_step(graphdef, tx, task: Task, snapshot_every: int, state: dict, batch: dict):
  """One optimisation step with the non-finite guard. Pure; jitted once per batch shape."""

  model = nnx.merge(graphdef, state["params"], state["model_state"])
  # nnx.value_and_grad (not jax's) so that dropout may advance the model's RNG counters inside
  # the differentiated function; gradients are taken w.r.t. the nnx.Param variables only.
  loss, grads = nnx.value_and_grad(lambda m: task.loss(m, batch, train=True))(model)
  model_state = nnx.state(model, nnx.Not(nnx.Param))
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
  return create_model(
    config.family,
    config.size,
    seed=config.seed,
    head=task.head,
    **task.model_kwargs,
    **config.model.to_dict(),
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
      partial(train_step, graphdef, tx, task, config.train.snapshot_every),
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
  if chief:
    workdir.mkdir(parents=True, exist_ok=True)
    write_text(workdir / "config.json", config_json(config))

  train_iter = pipeline.make_batches(
    config.data.train,
    config.data.train_split,
    task.rows,
    max_games=config.data.get("max_train_games") or None,
    batch_size=config.data.batch_size,
    seed=config.seed,
    shuffle=config.data.get("shuffle", True),
    bucket_lengths=tuple(config.data.bucket_lengths),
    max_len=config.data.max_len,
    window_batches=config.data.window_batches,
    worker_count=config.data.worker_count,
  )
  epoch_steps = train_iter.plan.batches_per_epoch
  total = total_steps(config, epoch_steps)
  eval_every = config.train.eval_every or epoch_steps
  model, state, run = build(config, task, total_steps=total)
  n_params = count_params(model)
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
  try:
    while step < total and not selection.stopped:
      batch = next(train_iter)
      state, out = run.train_step(state, evaluation.device_batch(batch, run))
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
  finally:
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
    "stopped_early": selection.stopped,
    "best_step": selection.best_step,
    "bad_batches": int(state["bad_batches"]),
    "rollbacks": int(state["rollbacks"]),
    "validation": {k: v for k, v in last_eval.items() if k != "bins"},
  }
  if chief:
    write_json(workdir / "train_summary.json", summary)
  return summary


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


def _check_finite(pending: "logs.Pending", max_bad: int) -> None:
  out = jax.device_get(pending.out)
  if int(out["bad_in_a_row"]) >= max_bad:
    raise NonFiniteError(
      f"step {pending.step}: {int(out['bad_in_a_row'])} consecutive batches with a non-finite "
      f"loss, gradient or parameters ({int(out['bad_batches'])} in all, {int(out['rollbacks'])} "
      "rollbacks); lower the learning rate or check the data"
    )
