"""Starting a run from another run's parameters: `--config.init.workdir=SOURCE`
(`chessjax.spec.InitSpec`).

    python -m chessjax.main --config=configs/cwm.py:family=slice,size=d128 --workdir=runs/ft \
        --config.data.train=data/atomic --config.init.workdir=runs/slice_d128 \
        [--config.init.checkpoint=best|latest|STEP] [--config.init.parts=backbone]

The training loop (`chessjax.train`) calls `initialise` after restoring: each member that has no
checkpoint of its own and whose spec names a source gets the source's parameters
(`chessjax.workdir.restore`: its best checkpoint, else its latest, unless `init.checkpoint` names
one) in its fresh train state. Everything else stays fresh: the optimizer state, the step (0),
the schedule, the dropout RNG; the non-finite guard's snapshot holds the source's parameters (a
rollback returns to them, not to a random initialisation). A rerun that finds the run's own
checkpoint resumes it and reads the source no more.

* `init.parts=all` (default): the source must be the same task, family and size, parameter for
  parameter; a source whose parameters differ (a missing path, another shape or dtype) is refused
  before step 1, naming the first such parameter, both shapes, and both runs' task, family and
  size. Same shapes under another family or task are refused too.
* `init.parts=backbone`: every parameter outside the task's head (`chessjax.models.heads.Model`'s
  `head`) whose path, shape and dtype both runs share is taken; the rest (the head, and e.g. a
  token embedding over another vocabulary) is left at its fresh initialisation and named. The
  family must be the same; under another size the first differing parameter is named, as above.

What was taken is recorded in WORKDIR/init.json (`RECORD`) and in the run's summary (`init`:
source workdir, checkpoint as resolved, its step, parts, and the parts left fresh); the run's
`config.json` holds the `init` block as given. The source's arrays are restored under the
shardings this run's own build gives (every device of the run's mesh, replicated), so they are
placed as the member's fresh parameters are.
"""

import json

import jax
import jax.numpy as jnp

from chessjax import workdir as workdir_lib
from chessjax.files import as_path, write_json
from chessjax.spec import TrainSpec

RECORD = "init.json"  # WORKDIR/init.json: where the run's parameters came from.
HEAD = "head"  # The task's head: the top-level part `init.parts=backbone` never takes.


class InitError(ValueError):
  """The source cannot initialise this run (missing, or another model); said in one line."""


def param_name(path) -> str:
  """A parameter's path as dotted names ("backbone.blocks.0.mlp.fc1.kernel"), without nnx's
  `.value`."""
  parts = []
  for key in path:
    name = getattr(key, "key", getattr(key, "idx", getattr(key, "name", key)))
    if isinstance(key, jax.tree_util.GetAttrKey) and name == "value":
      continue
    parts.append(str(name))
  return ".".join(parts)


def _flat(tree) -> dict:
  return {param_name(p): x for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _describe(x) -> str:
  return f"{tuple(x.shape)} {x.dtype}"


def _identity(spec: TrainSpec) -> str:
  return f"{spec.task} {spec.family} {spec.size}"


def plan(source: dict, target: dict, source_spec: TrainSpec, spec: TrainSpec, parts: str):
  """(taken, left): the names of the target's parameters (`_flat` dicts of arrays or shapes) taken
  from the source and those left fresh, per `parts` (module docstring); raises `InitError`."""
  who = f"source {_identity(source_spec)}, this run {_identity(spec)}"

  def differs(name: str) -> str | None:
    if name not in source:
      return f"parameter {name} is missing in the source (this run's is {_describe(target[name])})"
    if name not in target:
      return f"parameter {name} ({_describe(source[name])}) is missing in this run"
    a, b = source[name], target[name]
    if a.shape != b.shape or a.dtype != b.dtype:
      return f"parameter {name}: the source's is {_describe(a)}, this run's {_describe(b)}"
    return None

  names = list(dict.fromkeys([*target, *source]))
  if parts == "all":
    first = next((why for n in names if (why := differs(n))), None)
    if first is not None:
      hint = "; init.parts=backbone takes the shared blocks only" if (
        source_spec.task != spec.task) else ""  # fmt: skip
      raise InitError(f"init.workdir: {first} ({who}){hint}")
    if (source_spec.task, source_spec.family, source_spec.size) != (
      spec.task, spec.family, spec.size,
    ):  # fmt: skip
      raise InitError(f"init.workdir: another model ({who}); init.parts=all needs the same one")
    return list(target), []
  if source_spec.family != spec.family:
    raise InitError(f"init.workdir: another family ({who}); init.parts=backbone needs the same")
  body = [n for n in names if n.split(".")[0] != HEAD]
  if source_spec.size != spec.size:
    first = next((why for n in body if (why := differs(n))), f"no parameter differs ({who})")
    raise InitError(f"init.workdir: another size: {first} ({who})")
  taken = [n for n in target if n.split(".")[0] != HEAD and differs(n) is None]
  return taken, [n for n in target if n not in taken]


def left_parts(left: list[str]) -> list[str]:
  """The modules the parameters `left` belong to (each name without its last part), in order."""
  return list(dict.fromkeys(n.rsplit(".", 1)[0] if "." in n else n for n in left))


def source_params(spec: TrainSpec, target_params) -> tuple[object, dict]:
  """The parameters a run of `spec` starts from (its `init` source's where taken, else
  `target_params`, the member's fresh ones, whose tree and shardings the result has) and the
  record of what was taken."""
  init = spec.init
  try:
    source_spec = TrainSpec.from_config(workdir_lib.read_config(init.workdir))
    restored = workdir_lib.restore(init.workdir, init.which, step=init.step)
  except FileNotFoundError as e:
    raise InitError(f"init.workdir={init.workdir}: {e}") from None
  source = _flat(restored.state["params"])
  leaves, treedef = jax.tree_util.tree_flatten_with_path(target_params)
  target = {param_name(p): x for p, x in leaves}
  taken, left = plan(source, target, source_spec, spec, init.parts)
  taken = set(taken)

  def placed(name, fresh):
    if name not in taken:
      return fresh
    x = source[name]
    # The same mesh and replication as the member's own build: no copy. (Another sharding is
    # put in place; in one process only, where every device is this process's.)
    return x if x.sharding == fresh.sharding else jax.device_put(x, fresh.sharding)

  params = jax.tree_util.tree_unflatten(treedef, [placed(param_name(p), x) for p, x in leaves])
  record = {
    "workdir": str(init.workdir),
    "checkpoint": restored.checkpoint,
    "step": int(restored.step),
    "parts": init.parts,
    "left": left_parts(left),
    "source": {"task": source_spec.task, "family": source_spec.family, "size": source_spec.size},
  }
  return params, record


_copy = jax.jit(lambda tree: jax.tree.map(jnp.copy, tree))  # New buffers (the step donates).


def initialise(runs, state: dict, members, fresh: list[int], messages) -> dict:
  """`state` (the loop's `Runs` state) with each member of `fresh` (indices of `members`, those
  that restored no checkpoint of their own) whose spec names an init source started from it:
  its parameters and the guard's snapshot of them replaced, the rest of its fresh state kept.
  Writes WORKDIR/init.json (process 0) and says what was taken (`messages[i](line)`)."""
  for i in fresh:
    member = members[i]
    if not member.spec.init.workdir:
      continue
    one = runs.member(state, i)
    params, record = source_params(member.spec, one["params"])
    snapshot = {**one["snapshot"], "params": _copy(params)}
    state = runs.with_members(state, {i: {**one, "params": params, "snapshot": snapshot}})
    if jax.process_index() == 0:
      write_json(as_path(member.workdir) / RECORD, record)
    messages[i](describe(record))
  return state


def describe(record: dict) -> str:
  """One line: where the run's parameters came from and what was left fresh."""
  s = record["source"]
  line = (
    f"initialised from {record['workdir']} ({s['task']} {s['family']} {s['size']}, "
    f"{record['checkpoint']} checkpoint, step {record['step']}, parts {record['parts']})"
  )
  if record["left"]:
    line += f"; left at their fresh initialisation: {', '.join(record['left'])}"
  return line


def read_record(workdir) -> dict | None:
  """WORKDIR/init.json, or None for a run not started from another one."""
  try:
    return json.loads((as_path(workdir) / RECORD).read_text())
  except (OSError, ValueError):
    return None
