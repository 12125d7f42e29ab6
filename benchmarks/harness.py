"""What the benchmarks time with, in one place: the train step a training run executes, timed
(`world_model_config`, `built_step`, `random_batch`, `device_batches`, `time_step`), a population
of K members of it (`member_configs`, `build_population`, `time_population`), and one
recurrence of `chessjax.ops` on random inputs of a layer's shapes (`recurrence_inputs`,
`recurrence_programs`, `median_seconds`). No benchmark imports another benchmark: each imports
these (tests/test_layout.py freezes the imports of a command).

A timed step is `chessjax.step.build`'s (or `chessjax.populations.Population`'s) jitted
`(state, batch) -> (state, outputs)` with the state donated: compiled ahead of time (compile
seconds: lower + compile), run `warmup` steps, then timed `iters` steps each to completion (the
median: "step ms") and steps dispatched back to back (the mean: "b2b ms", the rate a training
loop that never waits on the host reaches). World-model batches are random valid move ids (START
first, then ids of real from/to/promotion triples) and random labels, no padding.
"""

import contextlib
import dataclasses
import math
import statistics
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from chessjax import encoding, evaluation, labels, memory, populations, step
from chessjax.members import check_members, member_config
from chessjax.ops import delta_rule, slice_scan, ssd
from chessjax.spec import TrainSpec
from chessjax.task import get_task
from configs import cwm

B2B_SECONDS = 0.3  # Back-to-back timing runs at least this long (or `iters` steps, if more).
B2B_MAX = 400  # ... and at most this many steps.


def random_batch(batch: int, steps: int, seed: int) -> dict:
  """Random valid move ids (START first, no padding) and random labels of the right classes: a
  host batch (numpy) with the world-model task's keys, as the loader gives one."""
  rng = np.random.default_rng(seed)
  frm = rng.integers(0, 64, (batch, steps))
  to = (frm + rng.integers(1, 64, (batch, steps))) % 64
  promo = rng.integers(0, 5, (batch, steps)) * (rng.random((batch, steps)) < 0.02)
  moves = ((frm * 64 + to) * 5 + promo).astype(np.int32)
  moves[:, 0] = encoding.START_ID
  states = rng.integers(0, labels.LABEL_CLASSES, (batch, steps, labels.NUM_LABELS))
  return {"moves": moves, "states": states.astype(np.uint8), "mask": np.ones((batch, steps), bool)}


def world_model_config(
  family: str, size: str, *, batch: int, steps: int, dtype: str | None = None, **model
) -> ml_collections.ConfigDict:
  """The family's `configs/cwm.py` cell (its recipe) at `batch` x `steps`: one length bucket,
  games cut at `steps`, `model.dtype` set when given, `model` overrides (e.g. mixer_impl)."""
  config = cwm.get_config(f"family={family},size={size}")
  if dtype is not None and "dtype" in config.model:  # A family without the field is float32.
    config.model.dtype = dtype
  config.model.update(model)
  config.data.batch_size = batch
  config.data.max_len = steps
  config.data.bucket_lengths = (steps,)
  config.train.steps = 1000  # A run's length: the schedule needs one.
  return config


@dataclasses.dataclass
class Built:
  """What `chessjax.step.build` gives for a config: the model, its train state, its jitted steps
  (`fns.train_step` is the step training runs) and the spec."""

  model: object
  state: dict
  fns: step.StepFns
  spec: TrainSpec


def built_step(config: ml_collections.ConfigDict, *, devices=None) -> Built:
  """The train step (and state) a training run of `config` executes."""
  spec = TrainSpec.from_config(config)
  model, state, fns = step.build(spec, get_task(config), devices=devices)
  return Built(model, state, fns, spec)


@dataclasses.dataclass
class Timed:
  """One compiled step, timed: compile seconds (lower + compile), the median of steps each run
  to completion, the mean of steps dispatched back to back (the device never waits on the host
  between them, as in the training loop), the compiled program's bytes (the memory check's
  estimate, `chessjax.memory.program_bytes`), its temporaries, and the last loss."""

  compile_s: float
  ms: float
  min_ms: float
  b2b_ms: float
  program_bytes: int | None
  temp_bytes: int | None
  loss: float
  b2b_steps: int = 0


def time_step(
  jitted,
  state,
  batches: list,
  *,
  warmup: int,
  iters: int,
  options=None,
  tracing=None,
  admit=None,
  timing=None,
) -> Timed:
  """Compiles `jitted` (a jitted (state, batch) -> (state, outputs) step: the state donated) for
  `state` and `batches[0]` and times it on `batches` (alternating). `options`: XLA compile
  options; `tracing`: a context manager entered while the step is traced (e.g. a `lax.scan`
  setting); `admit(program bytes)`: called after compiling, before any step runs (it may raise:
  the memory check); `timing()`: called just before the timed steps. `state` is consumed."""
  started = time.perf_counter()
  with tracing if tracing is not None else contextlib.nullcontext():
    lowered = jitted.lower(state, batches[0])
  compiled = lowered.compile(options)
  compile_s = time.perf_counter() - started
  analysis = compiled.memory_analysis()
  if admit is not None:
    admit(memory.program_bytes(compiled))
  out = None
  for i in range(warmup):
    state, out = compiled(state, batches[i % len(batches)])
    jax.block_until_ready((state, out))
  if timing is not None:
    timing()
  times = []
  for i in range(iters):
    t = time.perf_counter()
    state, out = compiled(state, batches[i % len(batches)])
    jax.block_until_ready((state, out))
    times.append(time.perf_counter() - t)
  med = statistics.median(times)
  n = min(max(iters, math.ceil(B2B_SECONDS / max(med, 1e-9))), max(B2B_MAX, iters))
  t = time.perf_counter()
  for i in range(n):
    state, out = compiled(state, batches[i % len(batches)])
  jax.block_until_ready((state, out))
  b2b = (time.perf_counter() - t) / n
  return Timed(
    compile_s=compile_s,
    ms=1e3 * med,
    min_ms=1e3 * min(times),
    b2b_ms=1e3 * b2b,
    program_bytes=memory.program_bytes(compiled),
    temp_bytes=None if analysis is None else analysis.temp_size_in_bytes,
    loss=float(np.mean(np.asarray(out["loss"], np.float32))),
    b2b_steps=n,
  )


def device_batches(built: Built, host: list[dict]) -> list[dict]:
  """The host batches as the step's global arrays (sharded over the rows)."""
  return [evaluation.device_batch(b, built.fns) for b in host]


# --------------------------------------------------------------------------------------------
# A population of K members of the step.


def member_configs(config: ml_collections.ConfigDict, k: int) -> list[ml_collections.ConfigDict]:
  """`k` members of `config` that differ in learning rate only (the config's, times 2^(i / k)),
  made as `python -m chessjax.population --member` makes them (and checked the same way)."""
  lr = config.optim.lr
  members = [(f"m{i}", {"optim.lr": f"{lr * 2 ** (i / k):.6g}"}) for i in range(k)]
  configs = [(name, member_config(config, name, o)) for name, o in members]
  check_members(configs)
  return [c for _, c in configs]


def build_population(config: ml_collections.ConfigDict, k: int, *, devices=None):
  """The population of `k` members of `config` (`member_configs`): its state and one step."""
  configs = member_configs(config, k)
  specs = [TrainSpec.from_config(c) for c in configs]
  return populations.Population(specs, get_task(configs[0]), devices=devices)


def time_population(
  config: ml_collections.ConfigDict,
  k: int,
  *,
  warmup: int,
  iters: int,
  options=None,
  admit=None,
  devices=None,
) -> tuple[Timed, float]:
  """A `k`-member population of `config`'s step timed on two random batches (shared by the
  members); returns the timing and the seconds spent building the members. `admit(bytes)` is
  called with the compiled step's memory before it runs (it may raise to refuse it)."""
  started = time.perf_counter()
  pop = build_population(config, k, devices=devices)
  build_s = time.perf_counter() - started
  b, t = config.data.batch_size, config.data.max_len
  batches = [pop.device_batch([random_batch(b, t, seed)]) for seed in (0, 1)]
  timed = time_step(
    pop.train_step, pop.state, batches, warmup=warmup, iters=iters, options=options, admit=admit
  )
  return timed, build_s


# --------------------------------------------------------------------------------------------
# One recurrence of `chessjax.ops`, alone.


def recurrence_inputs(recurrence: str, batch: int, steps: int, dims: tuple, seed: int = 0):
  """Random float32 inputs of one layer's recurrence, batch-major ([B, T, ...]), and
  fn(*inputs, impl, chunk) returning its output sequence. `dims`: the affine scan's (G blocks,
  block size b; b = 1: the diagonal form, a [B, T, G]), the delta rule's (H, K, V), SSD's
  (H, P, N)."""
  rng = np.random.default_rng(seed)
  b, t = batch, steps

  def normal(*shape, scale=1.0):
    return jnp.asarray(scale * rng.standard_normal(shape), jnp.float32)

  if recurrence == "affine_scan":
    g, n = dims
    a = normal(b, t, g, scale=0.1) if n == 1 else normal(b, t, g, n, n, scale=0.1 / n)
    inputs = (a, normal(b, t, g * n), normal(g * n))
    return inputs, lambda a, c, y0, impl, chunk: slice_scan.affine_scan(
      a, c, y0, impl=impl, chunk_size=chunk
    )
  if recurrence == "delta_rule":
    h, k, v = dims
    q, kk = normal(b, t, h, k), normal(b, t, h, k)
    q, kk = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, kk))
    g = -jnp.abs(normal(b, t, h, scale=0.1))
    beta = jax.nn.sigmoid(normal(b, t, h))
    inputs = (q, kk, normal(b, t, h, v), g, beta)
    return inputs, lambda q, k, v, g, beta, impl, chunk: delta_rule.gated_delta_rule(
      q, k, v, g, beta, impl=impl, chunk_size=chunk
    )[0]
  if recurrence == "ssd":
    h, p, n = dims
    dt = jax.nn.softplus(normal(b, t, h) - 3.0)
    inputs = (
      normal(b, t, h, p),
      dt,
      -jnp.exp(normal(h, scale=0.5)),
      normal(b, t, 1, n),
      normal(b, t, 1, n),
    )
    return inputs, lambda x, dt, a, bb, c, impl, chunk: ssd.ssd(
      x, dt, a, bb, c, impl=impl, chunk_size=chunk
    )[0]
  raise ValueError(f"no inputs for recurrence {recurrence!r}")


def recurrence_programs(fn, inputs, impl: str, chunk: int, *, tracing=None):
  """The forward and the forward + backward (the gradient of every input) of one implementation,
  compiled: (forward, both, compile seconds)."""

  def forward(*xs):
    return fn(*xs, impl, chunk)

  def loss(*xs):
    return jnp.sum(forward(*xs).astype(jnp.float32) ** 2)

  started = time.perf_counter()
  with tracing if tracing is not None else contextlib.nullcontext():
    fwd = jax.jit(forward).lower(*inputs)
    both = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(inputs))))).lower(*inputs)
  fwd, both = fwd.compile(), both.compile()
  return fwd, both, time.perf_counter() - started


def median_seconds(fn, inputs, warmup: int, iters: int) -> float:
  """The median seconds of `iters` calls of `fn(*inputs)` after `warmup`, each to completion."""
  times = []
  for i in range(warmup + iters):
    started = time.perf_counter()
    jax.block_until_ready(fn(*inputs))
    if i >= warmup:
      times.append(time.perf_counter() - started)
  return statistics.median(times)
