"""How the training loop (`chessjax.train`) calls its compiled step: the train state held as the
flat list of its buffers, and up to `train.steps_per_call` steps in one call.

* The state as a list (`StepCall.flat` / `StepCall.tree`). A compiled program called with the
  train state as a pytree flattens it, and builds the new state's tree, in Python on every call:
  nnx's `State` and `Variable` nodes flatten through Python functions, and a typed PRNG key is
  rebuilt in Python for every output that holds one (together about a third of a millisecond a
  step for the smoke world model's 84 buffers on a 2-core CPU, more than the rest of the loop's
  own work). The loop holds the list, the dropout keys as their raw bits, and builds the tree
  only at the steps that read it (validation, checkpoints, members that stop); the step's
  outputs come back as one array (one buffer to wait on and read per call). The program is the
  step's own: its parameters are the state's leaves in the same order either way, so the results
  are bit for bit those of the step called with the tree.
* Several steps per call (`steps_per_call` = k > 1). A call takes up to k batches of one shape
  stacked on a new leading axis (the unused slots zeros) and how many of them to train on, n;
  a loop over the first n (`lax.fori_loop` with n a traced bound: a scan whose length is known
  only when the call runs, so the short calls before a log step or a new length bucket use the
  same program as the full ones, with no compilation of their own) runs the train step on each
  in turn, the non-finite guard included, and returns the n steps' outputs stacked [k, ...]
  (the slots after n zeros). The same step in the same order: the parameters and optimizer state
  after any number of steps equal k = 1's bit for bit (tests/test_steps_per_call.py). What it
  buys is one dispatch per k steps: the host's Python, the state's buffers passed once, one
  input transfer for k batches. What it costs: the k batches on the device at once (the memory
  check counts them), the loop's view of a call's steps only after the whole call, and on a CPU
  a program whose steps XLA may run slower or faster than the one-step program's, by model
  (docs/performance.md, the loop's own cost).

Where the loop cuts its calls (at each log, validation and checkpoint step, the run's end and
where the batch shape changes) is the loop's own cadence (`chessjax.train`); this module makes
the program and its input.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from chessjax import sharding

COUNT = "call_steps"  # The key of a k-step call's input that holds n, the steps it trains.
# XLA's options for the k-step program: no loop-invariant code motion. With it, XLA hoists the
# invariants of the step's own loops (a chunked scan's) differently when the step sits inside the
# loop over steps than when it is the program, and Gated DeltaNet's step at two chunks of its
# delta rule then differed from the one-step program's in the last bits (XLA's default flags; the
# test suite's quicker ones hid it). Without the pass the k-step program's steps are the one-step
# program's, bit for bit, for every family checked (tests/test_steps_per_call.py).
_NESTED = {"xla_disable_hlo_passes": "while-loop-invariant-code-motion"}


class StepCall:
  """The loop's compiled call of a pure train step `step_fn(state, batch) -> (state, outputs)`
  (`chessjax.runs.Runs.step_fn`) on the state `state` (its buffers' shardings are where the
  call keeps them) with batches sharded as `data_sharding`, `steps_per_call` steps a call.

  `jitted(leaves, batch)` -> (leaves, outputs): the state's buffers donated (`flat`'s list);
  `batch` is `device_input`'s; the outputs are the step's stacked in one array ([k, ...] for
  k > 1; `step_outputs` reads them). `length_axis`: the positions axis of the call's input
  (`chessjax.compile`), one more than a step's for k > 1."""

  def __init__(self, step_fn, state, data_sharding: NamedSharding, *, length_axis: int,
               steps_per_call: int = 1):  # fmt: skip
    if steps_per_call < 1:
      raise ValueError(f"steps_per_call must be >= 1, got {steps_per_call}")
    self.step_fn, self.k = step_fn, steps_per_call
    leaves, self.treedef = jax.tree.flatten(state)
    # Typed PRNG keys (dropout's) travel as their raw bits: a key array is rebuilt in Python for
    # every output that holds one, the bits are plain buffers (the program is the same).
    self._keys = {
      i: jax.random.key_impl(x)
      for i, x in enumerate(leaves)
      if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
    }
    self._out_keys = None  # The step's output names, in the packed order (set when traced).
    mesh = data_sharding.mesh
    many = steps_per_call > 1
    self.length_axis = length_axis + many
    self.data_sharding = (
      NamedSharding(mesh, P(None, *data_sharding.spec)) if many else data_sharding
    )
    replicated = sharding.replicated(mesh)
    # n as a device scalar per n, made once: a call passes its own without a transfer.
    self._counts = {n: sharding.put_replicated(np.int32(n), mesh) for n in range(1, self.k + 1)}
    self.jitted = jax.jit(
      self._many if many else self._one,
      out_shardings=([x.sharding for x in leaves], replicated),
      donate_argnums=0,
      compiler_options=_NESTED if many else None,
    )

  def flat(self, state) -> list:
    """The state's buffers, as the call takes them."""
    leaves = self.treedef.flatten_up_to(state)
    for i in self._keys:
      leaves[i] = jax.random.key_data(leaves[i])
    return leaves

  def tree(self, leaves: list):
    """The state of the call's buffers (the same arrays)."""
    leaves = list(leaves)
    for i, impl in self._keys.items():
      leaves[i] = jax.random.wrap_key_data(leaves[i], impl=impl)
    return jax.tree.unflatten(self.treedef, leaves)

  def device_input(self, hosts: list[dict], keys) -> dict:
    """A call's input on the devices from the host batches of its steps (one step's batch each,
    of one shape; `keys`: the task's `batch_keys`): the batch itself for k = 1, else the
    batches stacked on a leading axis of k (the slots after them zeros) and their count."""
    if self.k == 1:
      (host,) = hosts
      return sharding.global_batch(host, keys, self.data_sharding)
    if not 1 <= len(hosts) <= self.k:
      raise ValueError(f"a call takes 1 to {self.k} batches, got {len(hosts)}")
    stacked = {}
    for key in keys:
      first = hosts[0][key]
      out = np.zeros((self.k, *first.shape), first.dtype)
      for j, host in enumerate(hosts):
        out[j] = host[key]
      stacked[key] = out
    arrays = sharding.global_batch(stacked, keys, self.data_sharding)
    return {**arrays, COUNT: self._counts[len(hosts)]}

  def step_outputs(self, out, n: int) -> list[dict]:
    """Each step's outputs, a dict as the step returns them, of a call of `n` steps from the
    call's outputs read on the host (`jax.device_get`'s)."""
    names = self._out_keys
    if self.k == 1:
      return [dict(zip(names, out, strict=True))]
    return [dict(zip(names, out[j], strict=True)) for j in range(n)]

  def _one(self, leaves: list, batch: dict):
    leaves = list(leaves)
    for i, impl in self._keys.items():
      leaves[i] = jax.random.wrap_key_data(leaves[i], impl=impl)
    state, out = self.step_fn(jax.tree.unflatten(self.treedef, leaves), batch)
    leaves = self.treedef.flatten_up_to(state)
    for i in self._keys:
      leaves[i] = jax.random.key_data(leaves[i])
    # The outputs (float32 numbers, [K] in a population) in one array: one buffer to wait on
    # and read back per call instead of one per output.
    self._out_keys = sorted(out)
    return leaves, jnp.stack([out[name] for name in self._out_keys])

  def _many(self, leaves: list, stacked: dict):
    batches = {key: x for key, x in stacked.items() if key != COUNT}
    first = jax.tree.map(lambda x: x[0], batches)
    like = jax.eval_shape(self._one, leaves, first)[1]
    outs = jnp.zeros((self.k, *like.shape), like.dtype)

    def body(i, carry):
      leaves, outs = carry
      batch = jax.tree.map(lambda x: jax.lax.dynamic_index_in_dim(x, i, keepdims=False), batches)
      leaves, out = self._one(leaves, batch)
      return leaves, jax.lax.dynamic_update_index_in_dim(outs, out, i, 0)

    return jax.lax.fori_loop(0, stacked[COUNT], body, (leaves, outs))
