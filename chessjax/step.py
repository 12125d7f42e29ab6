"""The pure training step of any task, and what builds it: `build(spec, task)` gives the model,
the initial train state and the jitted steps (`StepFns`) of a `chessjax.spec.TrainSpec`.

* `train_step(state, batch)`: one optimisation step with the non-finite guard of the
  Chess-World-Model release inside it (no host sync): a batch whose loss or gradient norm is
  non-finite is skipped; parameters that turn non-finite are rolled back to a snapshot taken every
  `snapshot_every` steps; after `max_bad_batches` bad batches in a row the state stops changing
  (the run has failed; the loop, which reads the counters only at its logging steps, then ends
  it where it stopped). `train.micro_batches` > 1 accumulates the batch's gradient over that
  many slices of it (`accumulated_loss_and_grads`): the same step, less activation memory.
* `eval_step` (the task's additive statistics) and `predict` (logits) under the same model.
* Data parallel over every device of every process: a 1-D mesh `("data",)`, parameters
  replicated, the batch sharded over its rows; the state's buffers are donated to the step.
* `StepFns.lr_at`: the learning-rate schedule the optimizer runs (`TrainSpec.lr_at`), for the
  loop's logs.
* `build`'s parts, which a population (`chessjax.populations`) builds its stacked state and step
  with: `new_state` (a spec's model and initial train state on the host), `replicate` (the state
  on the mesh, and its shardings) and `jit_train_step` (donated state, replicated outputs).

The loop that drives these is `chessjax.train`; their compilation per batch shape is
`chessjax.compile`.
"""

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import NamedSharding

from chessjax import optim, sharding
from chessjax.models import create_model
from chessjax.spec import TrainSpec
from chessjax.task import Task


@dataclasses.dataclass
class StepFns:
  """The jitted step functions of one model and task, with the shardings they run under (what the
  loop and every evaluator need besides the train state)."""

  task: Task
  graphdef: nnx.GraphDef
  train_step: object  # jitted (state, batch) -> (state, outputs)
  step_fn: object  # The pure (state, batch) -> (state, outputs) that `train_step` jits.
  eval_step: object  # jitted (params, model_state, batch) -> the task's additive statistics
  predict: object  # jitted (params, model_state, tokens int32[B, T]) -> logits float32[B, T, C]
  state_sharding: object
  data_sharding: NamedSharding
  lr_at: object  # step -> learning rate: the schedule inside `train_step`'s optimizer.


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


def _loss_and_grads(task: Task, model, batch: dict):
  # nnx.value_and_grad (not jax's) so that dropout may advance the model's RNG counters inside
  # the differentiated function; gradients are taken w.r.t. the nnx.Param variables only.
  return nnx.value_and_grad(lambda m: task.loss(m, batch, train=True))(model)


def accumulated_loss_and_grads(graphdef, task: Task, params, model_state, batch: dict, n: int):
  """Loss and gradients of a batch computed over `n` micro-batches of `B / n` rows in turn
  (`jax.lax.scan`, so only one micro-batch's activations live at a time).

  The task's loss pools over tokens (summed per-token losses / tokens of the whole batch), so
  micro-batch i, whose own loss is S_i / w_i, enters with weight w_i / sum(w) (`Task.loss_weight`):
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
    w = task.loss_weight(mb)
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
  graphdef,
  tx,
  task: Task,
  snapshot_every: int,
  max_bad_batches: int,
  state: dict,
  batch: dict,
  *,
  micro_batches=1,
):
  """One optimisation step with the non-finite guard. Pure; jitted once per batch shape.
  `micro_batches` > 1 accumulates the gradient over that many slices of the batch (same step,
  less memory: `accumulated_loss_and_grads`). A state already `max_bad_batches` bad batches in
  a row is returned unchanged (halted)."""

  loss, grads, model_state = accumulated_loss_and_grads(
    graphdef, task, state["params"], state["model_state"], batch, micro_batches
  )
  grad_norm = optax.tree.norm(grads)
  updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
  params = optax.apply_updates(state["params"], updates)

  # A halted state keeps its parameters and optimizer state as a skipped batch does (the same
  # selects: no extra pass over the state), and its scalars as they are.
  halted = state["bad_in_a_row"] >= max_bad_batches
  batch_ok = jnp.isfinite(loss) & jnp.isfinite(grad_norm) & ~halted
  params_ok = _all_finite(params)
  keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(batch_ok, n, o), new, old)  # noqa: E731
  params, opt_state = keep(params, state["params"]), keep(opt_state, state["opt_state"])
  rollback = batch_ok & ~params_ok
  snap = state["snapshot"]
  back = lambda cur, old: jax.tree.map(lambda c, o: jnp.where(rollback, o, c), cur, old)  # noqa: E731
  params, opt_state = back(params, snap["params"]), back(opt_state, snap["opt_state"])
  step = state["step"] + 1
  take = ((step % snapshot_every) == 0) & ~halted
  snap = jax.tree.map(
    lambda c, o: jnp.where(take, c, o), {"params": params, "opt_state": opt_state}, snap
  )
  bad = ~batch_ok | rollback
  scalars = {
    "step": step,
    "model_state": model_state,  # The dropout RNG's keys and counters: a few scalars.
    "bad_in_a_row": jnp.where(bad, state["bad_in_a_row"] + 1, 0),
    "bad_batches": state["bad_batches"] + bad,
    "rollbacks": state["rollbacks"] + rollback,
  }
  scalars = jax.tree.map(
    lambda n, o: jnp.where(halted, o, n), scalars, {k: state[k] for k in scalars}
  )
  new_state = {**scalars, "params": params, "opt_state": opt_state, "snapshot": snap}
  # The host reads these later, after further steps have donated `new_state`: they must not be
  # the state's buffers (XLA may hand back one buffer for two equal outputs), hence float.
  out = {
    "step": new_state["step"].astype(jnp.float32),
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
  """The model's logits of `tokens` in evaluation mode, in float32."""
  model = nnx.merge(graphdef, params, model_state)
  return model(tokens, train=False).astype(jnp.float32)


def model_arguments(spec: TrainSpec, task: Task) -> dict:
  """What `build_model` builds the spec's model from (`models.registry.create_model`'s
  arguments): two specs with equal arguments get the same initial values, bit for bit."""
  return dict(
    family=spec.family,
    size=spec.size,
    seed=spec.seed,
    head=task.head,
    remat=spec.train.remat,
    **task.model_kwargs,
    **spec.model,
  )


def build_model(spec: TrainSpec, task: Task) -> nnx.Module:
  """The spec's model under the task's head; `train.remat` builds it rematerialised."""
  arguments = model_arguments(spec, task)
  return create_model(arguments.pop("family"), arguments.pop("size"), **arguments)


def new_state(spec: TrainSpec, task: Task, *, abstract: bool = False, model=None):
  """The spec's model, its graph definition, its optimizer and its initial train state on the
  host (`init_state`; `abstract`: model and state as shapes only, nothing initialised). `model`:
  the spec's model already built (`build_model`), e.g. one that population members with the
  same `model_arguments` share."""
  if model is None:
    model = nnx.eval_shape(lambda: build_model(spec, task)) if abstract else build_model(spec, task)
  graphdef, params, model_state = nnx.split(model, nnx.Param, ...)
  tx = optim.make_optimizer(spec.optim, spec.lr_at, params)
  if abstract:
    state = jax.eval_shape(lambda p, s: init_state(p, s, tx), params, model_state)
  else:
    state = init_state(params, model_state, tx)
  return model, graphdef, tx, state


def replicate(state: dict, mesh) -> tuple[dict, object]:
  """A host train state replicated over `mesh` (shapes: as shapes with that sharding), and its
  shardings: where the step keeps it."""
  replicated = sharding.replicated(mesh)
  if all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(state)):
    state = jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated), state
    )
  else:
    state = sharding.put_replicated(state, mesh)
  return state, jax.tree.map(lambda x: x.sharding, state)


def jit_train_step(fn, state_sharding, mesh):
  """`fn(state, batch) -> (state, outputs)` jitted as the loop runs it: the state's buffers
  donated and kept where they are (`state_sharding`), the outputs replicated."""
  return jax.jit(fn, out_shardings=(state_sharding, sharding.replicated(mesh)), donate_argnums=0)


def build(spec: TrainSpec, task: Task, *, devices=None, abstract: bool = False):
  """Model, initial train state and jitted steps (`StepFns`) of a spec, data parallel over
  `devices` (default: every device of every process). `abstract`: the model and state as shapes
  only (`jax.ShapeDtypeStruct`s with their shardings; nothing initialised), the template a
  checkpoint is restored into."""
  model, graphdef, tx, state = new_state(spec, task, abstract=abstract)
  mesh = sharding.make_mesh(devices)
  state, state_sharding = replicate(state, mesh)
  t = spec.train
  fn = partial(train_step, graphdef, tx, task, t.snapshot_every, t.max_bad_batches,
               micro_batches=spec.micro_batches)  # fmt: skip
  fns = StepFns(
    task=task,
    graphdef=graphdef,
    train_step=jit_train_step(fn, state_sharding, mesh),
    step_fn=fn,
    eval_step=jax.jit(partial(eval_step, graphdef, task), out_shardings=sharding.replicated(mesh)),
    predict=jax.jit(partial(predict, graphdef)),
    state_sharding=state_sharding,
    data_sharding=sharding.batch_sharding(mesh),
    lr_at=spec.lr_at,
  )
  return model, state, fns
