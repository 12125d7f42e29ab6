"""Populations: many runs of one model in one compiled program, so that small models fill an
accelerator. The library of the command `chessjax.population` (which says what a population is
and how its members may differ): `Population`, the members' stacked train state and their one
jitted step (a `chessjax.runs.Runs`), and `train_population`, the training loop of
`chessjax.train` over them. A library module, so that scripts (the benchmarks) train populations
without importing the command.

One train step trains every member: `jax.vmap` over the members' parameters, optimizer state,
dropout RNG and the non-finite guard's counters, the batch sharded over the devices as for one
run and the members' states replicated. The numbers in which members differ are arrays of the
population's state that the step reads (those they share stay constants of the program, as in a
run alone). Members with different seeds read different batches; a step pads them to the longest
of its batches (the task's own padding, masked out).
"""

import dataclasses
import json
import logging
from functools import partial
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from chessjax import evaluation, optim, sharding, step, train
from chessjax.files import as_path
from chessjax.members import check_members, member_config, parse_member
from chessjax.ops import impl
from chessjax.runs import Member
from chessjax.spec import TrainSpec
from chessjax.task import Task, get_task

log = logging.getLogger(__name__)

# The optimizer's numbers a member's step reads from the population's state.
_NUMBERS = ("lr", "b1", "b2", "eps", "weight_decay", "floor", "clip_norm")


class Population:
  """The members' train states stacked on a leading axis and one jitted step for all of them
  (`chessjax.runs.Runs`). The state: {"members": every member's train state (the structure of
  one run's, `chessjax.step.init_state`) stacked, "hparams": each member's optimizer numbers,
  warmup and length where they differ}. A member that no longer trains is halted as the
  non-finite guard halts one (`with_active`): its state stays as it is, at no extra cost."""

  length_axis = 2  # Of a stacked batch [K, B, T, ...]; 1 when the members share their batch.

  def __init__(self, specs: list[TrainSpec], task: Task, *, devices=None):
    self.specs, self.task = specs, task
    spec = specs[0]
    # Each member's model and state, as alone. Members that differ in optimizer numbers only
    # (a learning-rate sweep) have the same initial values: their model is built once.
    models, built = {}, []
    for s in specs:
      key = json.dumps(step.model_arguments(s, task), sort_keys=True, default=repr)
      if key not in models:
        models[key] = step.build_model(s, task)
      built.append(step.new_state(s, task, model=models[key]))
    self.model, graphdef, _, first = built[0]
    params0 = first["params"]  # The weight-decay groups, every member's (`_member_step`).
    states = [state for *_, state in built]
    del built
    mesh = sharding.make_mesh(devices)
    self.mesh, replicated = mesh, sharding.replicated(mesh)
    self.shared_batch = len({s.seed for s in specs}) == 1  # One data order for all.
    if self.shared_batch:
      self.length_axis = 1
    host = {"members": jax.tree.map(lambda *xs: jnp.stack(xs), *states), "hparams": _hparams(specs)}
    del states
    self.state, state_sharding = step.replicate(host, mesh)
    self.data_sharding = NamedSharding(mesh, P("data") if self.shared_batch else P(None, "data"))
    self.eval_sharding = sharding.batch_sharding(mesh)  # Validation batches are shared.
    member_step = partial(
      _member_step, graphdef, task, spec, params0, micro_batches=spec.micro_batches
    )
    k = len(specs)
    self.step_fn = partial(_population_step, member_step, None if self.shared_batch else 0, k)
    self.train_step = step.jit_train_step(self.step_fn, state_sharding, mesh)
    max_bad = spec.train.max_bad_batches
    self._halt = jax.jit(
      lambda members, active: {
        **members,
        "bad_in_a_row": jnp.where(
          active, members["bad_in_a_row"], jnp.maximum(members["bad_in_a_row"], max_bad)
        ),
      },
      out_shardings=state_sharding["members"],
      donate_argnums=0,
    )
    member_eval = jax.vmap(partial(step.eval_step, graphdef, task), in_axes=(0, 0, None))
    self.eval_step = jax.jit(partial(_members_of, k, member_eval), out_shardings=replicated)
    self._take = jax.jit(
      lambda members, i: jax.tree.map(lambda x: x[i], members), out_shardings=replicated
    )
    self._put = jax.jit(
      lambda members, i, m: jax.tree.map(lambda a, b: a.at[i].set(b), members, m),
      out_shardings=state_sharding["members"],
      donate_argnums=0,
    )

  def host_batch(self, host: list[dict]) -> dict:
    """One step's batch on the host: the shared one, or each member's padded to the longest
    and stacked [K, B, T, ...]."""
    keys = self.task.batch_keys
    if self.shared_batch:
      return {k: host[0][k] for k in keys}
    length = max(b["mask"].shape[1] for b in host)
    padded = [self._padded(b, length) for b in host]
    return {k: np.stack([b[k] for b in padded]) for k in keys}

  def device_batch(self, host: list[dict]) -> dict:
    keys = self.task.batch_keys
    return sharding.global_batch(self.host_batch(host), keys, self.data_sharding)

  def _padded(self, batch: dict, length: int) -> dict:
    """`batch` with `length` positions: the task's own padding (its row format's batch of pad
    rows) after the batch's."""
    rows, t = batch["mask"].shape
    if t == length:
      return batch
    out = self.task.rows.batch([None] * rows, length, max_len=None, epoch=0)
    for k, x in batch.items():
      if k in out:
        if x.ndim > 1:
          out[k][:, :t] = x
        else:
          out[k] = x
    return out

  def member_like(self) -> dict:
    replicated = sharding.replicated(self.mesh)
    return jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype, sharding=replicated),
      self.state["members"],
    )

  def member(self, state: dict, i: int) -> dict:
    return self._take(state["members"], np.int32(i))

  def with_members(self, state: dict, members: dict[int, dict]) -> dict:
    stacked = state["members"]
    for i, m in members.items():
      stacked = self._put(stacked, np.int32(i), m)
    return {**state, "members": stacked}

  def with_active(self, state: dict, active: list[bool]) -> dict:
    """The members not `active` halted: their counters set to the guard's limit, so the step
    leaves them as they are (`chessjax.step.train_step`); members never train again once they
    stop."""
    if all(active):
      return state
    flags = sharding.put_replicated(np.asarray(active, bool), self.mesh)
    return {**state, "members": self._halt(state["members"], flags)}

  def outputs(self, out: dict, i: int) -> dict:
    return {k: v[i] for k, v in out.items()}

  def validate(self, state: dict, batches: list[dict]) -> list[dict]:
    accs = [self.task.accumulator() for _ in self.specs]
    members = state["members"]

    def consume(stats):
      for i, acc in enumerate(accs):
        acc.add(jax.tree.map(lambda x, i=i: x[i], stats))

    fns = SimpleNamespace(task=self.task, data_sharding=self.eval_sharding)
    run = lambda b: self.eval_step(members["params"], members["model_state"], b)  # noqa: E731
    evaluation.run_batches(run, fns, batches, consume)
    return [acc.result() for acc in accs]

  def lr_at(self, i: int):
    return self.specs[i].lr_at


def _numbers(spec: TrainSpec) -> dict:
  """A member's optimizer numbers, warmup and length."""
  out = {k: getattr(spec.optim, k) for k in _NUMBERS}
  return {**out, "warmup": spec.warmup_steps, "total": spec.total_steps}


def _hparams(specs: list[TrainSpec]) -> dict:
  """The numbers in which the members differ: float32 / int32 arrays [K] (those they share stay
  Python constants of the program, so the step computes them exactly as a run alone does)."""
  numbers = [_numbers(s) for s in specs]
  return {
    k: np.asarray([n[k] for n in numbers], np.int32 if k in ("warmup", "total") else np.float32)
    for k in numbers[0]
    if len({n[k] for n in numbers}) > 1
  }


def _member_step(graphdef, task, spec: TrainSpec, params0, hp, state, batch, *, micro_batches):
  """One member's train step (`chessjax.step.train_step`) with its optimizer built from its
  numbers: `hp` (traced, one member's) where the members differ, else the population's."""
  o = spec.optim
  n = {**_numbers(spec), **hp}
  numbers = dataclasses.replace(o, **{k: n[k] for k in _NUMBERS})
  lr_at = optim.lr_schedule(n["lr"], n["warmup"], n["total"], o.schedule, n["floor"])
  tx = optim.make_optimizer(numbers, lr_at, params0)  # params0: the weight-decay groups only.
  t = spec.train
  return step.train_step(
    graphdef, tx, task, t.snapshot_every, t.max_bad_batches, state, batch,
    micro_batches=micro_batches,
  )  # fmt: skip


def _population_step(member_step, batch_axis, k, state, batch):
  """Every member's step at once (a halted member keeps its state, as in a run alone). Traced
  with the K members counted in each recurrence's rows (`chessjax.ops.impl.members`): `auto`
  picks an implementation for the population's shape, not one member's."""
  members = state["members"]
  with impl.members(k):
    new, out = jax.vmap(member_step, in_axes=(0, 0, batch_axis))(state["hparams"], members, batch)
  return {**state, "members": new}, out


def _members_of(k, fn, *args):
  """`fn(*args)` traced with the K members counted in each recurrence's rows (as the step)."""
  with impl.members(k):
    return fn(*args)


def train_population(base: ml_collections.ConfigDict, root, members: list[str]) -> list[dict]:
  """Trains the population of `members` (`--member` texts) of `base` under ROOT/NAME; returns
  each member's summary."""
  configs = [(name, member_config(base, name, o)) for name, o in map(parse_member, members)]
  check_members(configs)
  root = as_path(root)
  population = [
    Member(name, config, TrainSpec.from_config(config), root / name) for name, config in configs
  ]
  task = get_task(configs[0][1])
  return train.train_runs(population, task, lambda specs: Population(specs, task))
