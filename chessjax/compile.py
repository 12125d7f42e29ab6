"""Compiling the train step where users wait: once per batch shape, ahead of time where a core is
free, and checked against the machine's memory before the first step.

* `StepCompiler`: the jitted step's compiled programs, one per batch shape (the length buckets
  give a few), each compiled exactly once, by the loop or ahead in a background thread.
* `check_memory`: the first program's memory, and the run's longest batch's, against what the
  machine has (`chessjax.memory`), so a run that cannot fit stops before its first step.
* `batch_shape` / `batch_like`: what a program is kept under, and abstract batches of any length.
"""

import logging
import threading
import time
from concurrent.futures import Future

import jax

from chessjax import memory
from chessjax.spec import TrainSpec

log = logging.getLogger(__name__)


def batch_shape(batch: dict, keys) -> tuple:
  """What a compiled train step is kept under: the shapes of the batch's `keys` arrays."""
  return tuple(tuple(batch[k].shape) for k in keys)


def batch_like(batch: dict, length: int, axis: int = 1) -> dict:
  """Abstract arrays (shape, dtype, sharding) of `batch` (global arrays, or abstract ones) with
  `length` positions: axis `axis` (1; 2 for a population's stacked batches) of every array that
  has it."""
  return {
    k: jax.ShapeDtypeStruct(
      (*x.shape[:axis], length, *x.shape[axis + 1 :]) if len(x.shape) > axis else x.shape,
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

  def __init__(self, jitted, *, length_axis: int = 1):
    self._jitted, self.length_axis = jitted, length_axis
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
          like = batch_like(template, length, self.length_axis)
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


def check_memory(
  spec: TrainSpec,
  keys,
  state,
  batch: dict,
  compiler: StepCompiler,
  longest: int,
  *,
  members: int = 1,
  length_axis: int = 1,
) -> None:
  """Stops before the first step when the run's steps will not fit in memory
  (`chessjax.memory`): the first step's compiled program exactly, the run's longest batch
  (`longest` tokens) extrapolated from it, and compiled and checked exactly when that estimate
  does not fit (the program is kept in `compiler`). `keys`: the task's `batch_keys`; `members`:
  how many runs the step trains together (a population: its refusal names the largest number
  of members that would fit, `largest_population`). With `train.steps_per_call` = k > 1 the
  program is the k-step call (`chessjax.dispatch`), whose arguments hold the k stacked batches:
  they are counted, and `length_axis` is that of the stacked batch."""
  limit = spec.memory_limit_bytes
  limit = memory.available_bytes() if limit is None else limit
  compiled = compiler.ready(batch_shape(batch, keys))
  needed = memory.program_bytes(compiled)
  n, k = spec.micro_batches, spec.train.steps_per_call
  what = (
    f"the train step ({spec.family} {spec.size}, batch {spec.data.batch_size}"
    + (f" in {n} micro-batches" if n > 1 else "")
    + (", remat" if spec.train.remat else "")
    + (f", {members} members" if members > 1 else "")
    + (f", {k} batches a call" if k > 1 else "")
  )
  t = max(x.shape[length_axis] for x in batch.values() if x.ndim > length_axis)
  fit = _population_hint(spec, members, limit)
  memory.check(needed, limit, f"{what}, {t} tokens)", hint=fit(needed, t))
  if needed is None or limit is None or longest <= t:
    return
  args = compiled.memory_analysis().argument_size_in_bytes
  if args + (needed - args) * (longest / t) ** 2 <= limit:
    return
  like = batch_like(batch, longest, length_axis)
  longest_step = compiler.get(batch_shape(like, keys), state, like)
  needed = memory.program_bytes(longest_step)
  memory.check(needed, limit, f"{what}, {longest} tokens)", hint=fit(needed, longest))


def _population_hint(spec: TrainSpec, members: int, limit):
  """For a population, a function (bytes needed by its K members' step at length t) -> the
  sentence that names the largest K that fits, assuming memory grows linearly with K."""

  def hint(needed, t) -> str:
    if members <= 1 or needed is None or limit is None or needed <= limit:
      return ""
    k = largest_population(needed, members, limit)
    return (
      f" At most {k} members of this population fit ({memory.gib(needed / members)} each at "
      f"{t} tokens): split it (`launch.sweep --population {max(k, 1)}`)."
      if k
      else " Not even one member fits: see the remedies below."
    )

  return hint


def largest_population(needed: int, members: int, limit: int) -> int:
  """The most members whose step fits in `limit` bytes, when `members` of them need `needed`:
  memory taken as proportional to the members (each holds its own parameters, optimizer state and
  activations), which it is to within the small shared part."""
  return int(limit // max(needed / members, 1))
