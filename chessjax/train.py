"""Training loop of the Chess-World-Model benchmark: `train_and_evaluate(config, workdir)`.

Reads top to bottom: build the model and optimizer, the mesh and shardings, the input pipeline,
restore the newest readable checkpoint if any, then run one jitted pure `train_step` per batch.

* Data parallel over every device of every process: a 1-D mesh `("data",)`, parameters
  replicated, each process feeding its rows of the global batch
  (`jax.make_array_from_process_local_data`). The same code runs on 1 CPU, N fake CPU devices,
  a GPU, or a multi-host TPU slice.
* Non-finite guard as in the reference, inside the step (no host sync): a batch whose loss or
  gradient norm is non-finite is skipped; parameters that turn non-finite are rolled back to a
  snapshot taken every `snapshot_every` steps; the host aborts after `max_bad_batches`
  consecutive bad batches, reading each step's counters one step late.
* Checkpoints (orbax) every `checkpoint_every` steps and at the end hold the train state and the
  input iterator's state: rerunning the same command resumes and reaches the same parameters,
  bit for bit on CPU, as an uninterrupted run.
* Only process 0 writes TensorBoard summaries, logs and JSON files.
"""

import dataclasses
import json
import logging
import math
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from chessjax import metrics, optim, plots
from chessjax.checkpointing import Checkpointer, abstract_like
from chessjax.data import pipeline
from chessjax.files import write_json, write_text
from chessjax.models import count_params, create_model

log = logging.getLogger(__name__)
BATCH_KEYS = ("moves", "states", "mask")


class NonFiniteError(RuntimeError):
  """Training produced too many consecutive non-finite batches."""


@dataclasses.dataclass
class Run:
  """What the loop needs besides the train state: compiled steps and shardings."""

  graphdef: nnx.GraphDef
  train_step: callable
  eval_step: callable
  predict: callable  # (params, rest, moves int32[B, T]) -> logits float32[B, T, 1878]
  state_sharding: object
  data_sharding: NamedSharding


def init_state(params, rest, tx) -> dict:
  """The train state pytree (everything a checkpoint must hold). No two leaves share a buffer,
  since the step donates them all."""
  zero = lambda: jnp.zeros((), jnp.int32)  # noqa: E731
  return {
    "step": zero(),
    "params": params,
    "rest": rest,  # Non-parameter model state (dropout RNG counters).
    "opt_state": tx.init(params),
    "snapshot": {"params": jax.tree.map(jnp.copy, params), "opt_state": tx.init(params)},
    "bad_in_a_row": zero(),
    "bad_batches": zero(),
    "rollbacks": zero(),
  }


def _all_finite(tree) -> jax.Array:
  leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]
  return jnp.all(jnp.stack(leaves))


def train_step(graphdef, tx, snapshot_every: int, state: dict, batch: dict):
  """One optimisation step with the non-finite guard. Pure; jitted once per batch shape."""

  model = nnx.merge(graphdef, state["params"], state["rest"])

  def loss_of(model):
    logits = model(batch["moves"], train=True)
    return metrics.loss_fn(logits, batch["states"], batch["mask"])

  # nnx.value_and_grad (not jax's) so that dropout may advance the model's RNG counters inside
  # the differentiated function; gradients are taken w.r.t. the nnx.Param variables only.
  loss, grads = nnx.value_and_grad(loss_of)(model)
  rest = nnx.state(model, nnx.Not(nnx.Param))
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
    "rest": rest,
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


def eval_step(graphdef, params, rest, batch: dict) -> dict:
  """Metric statistics of one batch under the model in evaluation mode."""
  model = nnx.merge(graphdef, params, rest)
  logits = model(batch["moves"], train=False)
  return metrics.batch_stats(logits, batch["states"], batch["mask"])


def predict(graphdef, params, rest, moves):
  model = nnx.merge(graphdef, params, rest)
  return model(moves, train=False).astype(jnp.float32)


def make_mesh() -> jax.sharding.Mesh:
  # Auto axis: shardings of batch-parallel code propagate through the model without per-op
  # annotations (Explicit mode would require them inside every model, e.g. at the embedding).
  return jax.make_mesh((jax.device_count(),), ("data",), axis_types=(jax.sharding.AxisType.Auto,))


def global_batch(batch: dict, sharding: NamedSharding) -> dict:
  """The process-local rows of a batch as global arrays sharded over the data axis."""
  return {k: jax.make_array_from_process_local_data(sharding, batch[k]) for k in BATCH_KEYS}


def build(config: ml_collections.ConfigDict):
  """Model, optimizer, initial state and compiled steps for a config."""
  model = create_model(config.family, config.size, seed=config.seed, **config.model.to_dict())
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  tx = optim.make_optimizer(config.optim, config.train.steps, params)
  mesh = make_mesh()
  replicated = NamedSharding(mesh, P())
  state = jax.device_put(init_state(params, rest, tx), replicated)
  state_sharding = jax.tree.map(lambda x: x.sharding, state)
  data_sharding = NamedSharding(mesh, P("data"))
  run = Run(
    graphdef=graphdef,
    train_step=jax.jit(
      partial(train_step, graphdef, tx, config.train.snapshot_every),
      out_shardings=(state_sharding, replicated),
      donate_argnums=0,
    ),
    eval_step=jax.jit(partial(eval_step, graphdef), out_shardings=replicated),
    predict=jax.jit(partial(predict, graphdef)),
    state_sharding=state_sharding,
    data_sharding=data_sharding,
  )
  return model, state, run


def restore_for_eval(workdir):
  """(config, run, state, step) of the newest readable checkpoint of a training workdir."""
  workdir = Path(workdir)
  config_path = workdir / "config.json"
  if not config_path.exists():
    raise FileNotFoundError(f"{workdir} is not a training workdir (no config.json)")
  config = ml_collections.ConfigDict(json.loads(config_path.read_text()))
  _, state, run = build(config)
  ckpt = Checkpointer(workdir)
  try:
    restored = ckpt.restore_latest(abstract_like(state))
  finally:
    ckpt.close()
  if restored is None:
    raise FileNotFoundError(f"{workdir} has no readable checkpoint")
  step, state, _ = restored
  return config, run, state, step


def evaluate_batches(run: Run, state: dict, batches) -> dict:
  acc = metrics.Accumulator()
  for batch in batches:
    acc.add(run.eval_step(state["params"], state["rest"], global_batch(batch, run.data_sharding)))
  return acc.result()


def _config_json(config) -> str:
  return json.dumps(config.to_dict(), indent=2, sort_keys=True, default=str) + "\n"


def train_and_evaluate(config: ml_collections.ConfigDict, workdir) -> dict:
  """Trains per `config`, resuming from `workdir` if it holds checkpoints. Returns a summary."""
  workdir = Path(workdir)
  chief = jax.process_index() == 0
  if chief:
    workdir.mkdir(parents=True, exist_ok=True)
    write_text(workdir / "config.json", _config_json(config))
  if not config.data.train:
    raise ValueError("config.data.train is empty: point it at a prepared dataset directory")

  model, state, run = build(config)
  n_params = count_params(model)
  del model
  train_iter = pipeline.make_batches(
    config.data.train,
    config.data.train_split,
    batch_size=config.data.batch_size,
    seed=config.seed,
    bucket_lengths=tuple(config.data.bucket_lengths),
    max_len=config.data.max_len,
    window_batches=config.data.window_batches,
    worker_count=config.data.worker_count,
  )
  val_batches = _fixed_validation_batches(config)

  ckpt = Checkpointer(workdir, max_to_keep=config.train.keep_checkpoints)
  restored = ckpt.restore_latest(abstract_like(state))
  start_step = 0
  if restored is not None:
    start_step, state, data_state = restored
    train_iter.set_state(data_state)
    log.info("resumed from step %d", start_step)

  writer = _summary_writer(workdir) if chief else None
  total = config.train.steps
  log.info(
    "%s %s: %s parameters, %d devices, %d processes, global batch %d, %d steps",
    config.family,
    config.size,
    f"{n_params:,}",
    jax.device_count(),
    jax.process_count(),
    config.data.batch_size,
    total,
  )
  step, pending, window = start_step, None, _Window()
  last_eval = {}
  try:
    while step < total:
      batch = next(train_iter)
      state, out = run.train_step(state, global_batch(batch, run.data_sharding))
      step += 1
      # Read the previous step's outputs only now, so the host never waits on the device.
      if pending is not None:
        _check_finite(pending, config.train.max_bad_batches)
        window.add(pending)
      pending = (step, out, int(batch["mask"].sum()), batch["mask"].size)
      if step % config.train.log_every == 0 or step == total:
        jax.block_until_ready(out)
        _check_finite(pending, config.train.max_bad_batches)
        window.add(pending)
        pending = None
        _log_interval(window, step, total, run, writer, config)
      if val_batches and (step % config.train.eval_every == 0 or step == total):
        last_eval = evaluate_batches(run, state, val_batches)
        _log_eval(last_eval, step, writer)
      if step % config.train.checkpoint_every == 0 or step == total:
        ckpt.save(step, state, train_iter.get_state(), force=True)
  finally:
    ckpt.close()
    train_iter.close()
    if writer is not None:
      writer.close()
  if val_batches and not last_eval:  # Rerun of a finished run: keep the summary's metrics.
    last_eval = evaluate_batches(run, state, val_batches)
  summary = {
    "family": config.family,
    "size": config.size,
    "params": n_params,
    "steps": step,
    "resumed_from": start_step,
    "bad_batches": int(state["bad_batches"]),
    "rollbacks": int(state["rollbacks"]),
    "validation": {k: v for k, v in last_eval.items() if k != "bins"},
  }
  if chief:
    write_json(workdir / "train_summary.json", summary)
  return summary


def _fixed_validation_batches(config) -> list[dict]:
  """The first `eval_batches` batches of the validation split, read once and kept in memory."""
  from chessjax.data import read_manifest

  if config.data.val_split not in read_manifest(config.data.train)["splits"]:
    log.warning(
      "no %r split in %s: no validation during training", config.data.val_split, config.data.train
    )
    return []
  it = pipeline.make_eval_batches(
    config.data.train,
    config.data.val_split,
    batch_size=config.data.batch_size,
    bucket_lengths=tuple(config.data.bucket_lengths),
    max_len=config.data.max_len,
    sort_by_length=False,
  )
  batches = []
  for batch in it:
    batches.append(batch)
    if len(batches) == config.train.eval_batches:
      break
  it.close()
  return batches


def _check_finite(pending, max_bad: int) -> None:
  step, out = pending[0], jax.device_get(pending[1])
  if int(out["bad_in_a_row"]) >= max_bad:
    raise NonFiniteError(
      f"step {step}: {int(out['bad_in_a_row'])} consecutive batches with a non-finite loss, "
      f"gradient or parameters ({int(out['bad_batches'])} in all, {int(out['rollbacks'])} "
      "rollbacks); lower the learning rate or check the data"
    )


class _Window:
  """Host-side sums over one logging interval."""

  def __init__(self):
    self.reset()

  def reset(self):
    self.losses, self.norms, self.tokens, self.cells = [], [], 0, 0
    self.start = time.perf_counter()
    self.last = {}

  def add(self, pending):
    _, out, tokens, cells = pending
    out = jax.device_get(out)
    self.losses.append(float(out["loss"]))
    self.norms.append(float(out["grad_norm"]))
    self.tokens += tokens
    self.cells += cells
    self.last = out


def _log_interval(window: _Window, step, total, run, writer, config) -> None:
  seconds = time.perf_counter() - window.start
  finite = [x for x in window.losses if math.isfinite(x)]
  loss = float(np.mean(finite)) if finite else float("nan")
  tokens_per_s = window.tokens / max(seconds, 1e-9)
  steps_per_s = len(window.losses) / max(seconds, 1e-9)
  padding = 1.0 - window.tokens / max(window.cells, 1)
  lr = float(
    optim.lr_schedule(
      config.optim.lr, config.optim.warmup_steps, total, config.optim.schedule, config.optim.floor
    )(step - 1)
  )
  eta = (total - step) / max(steps_per_s, 1e-9)
  log.info(
    "step %d/%d  loss %.4f  grad %.3f  lr %.2e  %s tok/s  pad %.2f  bad %d  eta %s",
    step,
    total,
    loss,
    float(np.mean(window.norms)),
    lr,
    f"{tokens_per_s:,.0f}",
    padding,
    int(window.last.get("bad_batches", 0)),
    _hms(eta),
  )
  if writer is not None:
    scalars = {
      "train/loss": loss,
      "train/grad_norm": float(np.mean(window.norms)),
      "train/learning_rate": lr,
      "train/state_tokens_per_s": tokens_per_s,
      "train/padding_fraction": padding,
      "train/bad_batches": float(window.last.get("bad_batches", 0)),
      "train/rollbacks": float(window.last.get("rollbacks", 0)),
    }
    for tag, value in scalars.items():
      writer.add_scalar(tag, value, step)
    writer.flush()
  window.reset()


def _log_eval(result: dict, step: int, writer) -> None:
  log.info(
    "step %d validation: loss %.4f  labelwise %.4f  exact %.4f  trajectory %.4f",
    step,
    result["loss"],
    result["labelwise"],
    result["exact_state"],
    result["trajectory"],
  )
  if writer is None:
    return
  for key in ("loss", "labelwise", "exact_state", "trajectory", "nonfinite_logits"):
    writer.add_scalar(f"validation/{key}", result[key], step)
  for name, acc in result["groups"].items():
    writer.add_scalar(f"validation_groups/{name}", acc, step)
  writer.add_image(
    "validation/prefix_bins", plots.prefix_bins_image(result, "validation"), step, dataformats="HWC"
  )
  writer.flush()


def _summary_writer(workdir: Path):
  from tensorboardX import SummaryWriter

  return SummaryWriter(str(workdir / "tb"))


def _hms(seconds: float) -> str:
  if not math.isfinite(seconds):
    return "?"
  m, s = divmod(int(seconds), 60)
  h, m = divmod(m, 60)
  return f"{h}:{m:02d}:{s:02d}"
