"""The train steps and recurrences, timed: the `unreached` and `measured` parts of
`benchmarks.bench_device` (and the steps alone that the loop, population and A/B parts compare
with), and their table, which docs/performance.md renders the H200's rows with."""

from collections.abc import Callable

import jax
import numpy as np

from benchmarks.device.common import (
  B2B_MS,
  CASES,
  COMPILE_S,
  DEVICE_PEAK,
  DTYPES,
  FAMILIES,
  FULL,
  LOOP_FAMILY,
  MFU,
  MFU_B2B,
  PROGRAM_GIB,
  SECONDS,
  SHAPE,
  STATUS,
  STEP_MS,
  Catalogue,
  Context,
  Row,
  Shapes,
  case_name,
  column,
  gib,
  markdown,
  mfus,
)
from benchmarks.harness import (
  built_step,
  device_batches,
  median_seconds,
  random_batch,
  recurrence_inputs,
  recurrence_programs,
  time_step,
  world_model_config,
)
from chessjax import flops, memory, peaks
from chessjax.ops.impl import RECURRENCES, width_of
from configs import lm as lm_configs

UNREACHED_FAMILIES = ("mamba2", "mamba3", "mamba3_mimo")  # Their d128 b32 rows (H200: not run).
LM_SECONDS, RECURRENCE_SECONDS = 45, 5


class ScanUnroll:
  """`jax.lax.scan` called with `unroll=k` (where it asks for 1) for everything traced inside, and
  how many scans it reached (`count`). `chessjax.ops` takes no unroll argument; this is the
  smallest hook that reaches its scans without changing them: the sequential forms' scans over
  time (and, in a chunked form, its scan over chunks)."""

  def __init__(self, k: int):
    self.k, self.count, self._original = k, 0, None

  def __enter__(self):
    self._original = original = jax.lax.scan

    def scan(f, init, xs=None, length=None, reverse=False, unroll=1, **kwargs):
      if unroll == 1 and not isinstance(unroll, bool):  # unroll=True: fully unrolled, kept.
        unroll, self.count = self.k, self.count + 1
      return original(f, init, xs, length=length, reverse=reverse, unroll=unroll, **kwargs)

    jax.lax.scan = scan
    return self

  def __exit__(self, *exc):
    jax.lax.scan = self._original


def step_row(ctx: Context, family: str, size: str, batch: int, dtype: str, unroll: int = 1) -> Row:
  """The world-model train step of `family` at `size` x `batch` (full-run names), measured once."""
  sh = ctx.shapes
  size_run, batch_run = sh.size[size], sh.batch[batch]

  def measure() -> Row:
    config = world_model_config(family, size_run, batch=batch_run, steps=sh.steps, dtype=dtype)
    built = built_step(config)
    host = [random_batch(batch_run, sh.steps, seed) for seed in (0, 1)]
    unrolled = ScanUnroll(unroll) if unroll > 1 else None
    t = time_step(built.fns.train_step, built.state, device_batches(built, host),
                  warmup=ctx.opts.warmup, iters=ctx.opts.iters, tracing=unrolled)  # fmt: skip
    tokens_s = batch_run * sh.steps / (t.ms / 1e3)
    per_token = flops.per_token(built.model.cfg, sh.steps)
    mfu, mfu_b2b = mfus(batch_run * sh.steps, per_token, peaks.peak_flops(dtype=dtype), t.ms,
                        t.b2b_ms)  # fmt: skip
    row = Row("train", "", shape=f"{size_run}, batch {batch_run}, {sh.steps} steps",
              compile_s=t.compile_s, ms=t.ms, b2b_ms=t.b2b_ms, tokens_s=tokens_s, mfu=mfu,
              mfu_b2b=mfu_b2b, program_gib=gib(t.program_bytes))  # fmt: skip
    if unrolled is not None:
      row.extra.update(unroll=unroll, scans_unrolled=unrolled.count)
    return row

  return ctx.measure(("step", family, size_run, batch_run, dtype, sh.steps, unroll), measure)


def lm_row(ctx: Context, dtype: str) -> Row:
  """The language model's train step (`configs/lm.py`, UCI) at the paper's batch."""
  family, size, batch, length = ctx.shapes.lm

  def measure() -> Row:
    config = lm_configs.get_config(f"family={family},size={size},notation=uci")
    if "dtype" in config.model:
      config.model.dtype = dtype
    config.train.epochs, config.train.steps = 0, 1000
    config.data.batch_size, config.data.max_len = batch, length
    config.data.bucket_lengths = (length,)
    built = built_step(config)
    vocab = built.fns.task.model_kwargs["vocab_size"]
    host = [lm_batch(batch, length, vocab, seed) for seed in (0, 1)]
    t = time_step(built.fns.train_step, built.state, device_batches(built, host),
                  warmup=ctx.opts.warmup, iters=ctx.opts.iters)  # fmt: skip
    tokens_s = batch * length / (t.ms / 1e3)
    per_token = flops.per_token(built.model.cfg, length, head_dim=vocab)
    mfu, mfu_b2b = mfus(batch * length, per_token, peaks.peak_flops(dtype=dtype), t.ms, t.b2b_ms)
    return Row("lm", "", shape=f"{family} {size}, batch {batch}, {length} tokens",
               compile_s=t.compile_s, ms=t.ms, b2b_ms=t.b2b_ms, tokens_s=tokens_s, mfu=mfu,
               mfu_b2b=mfu_b2b, program_gib=gib(t.program_bytes))  # fmt: skip

  return ctx.measure(("lm", family, size, batch, length, dtype), measure)


def lm_batch(batch: int, length: int, vocab: int, seed: int) -> dict:
  """Random tokens (past the three special ids) with every position scored: an LM host batch."""
  rng = np.random.default_rng(seed)
  return {
    "inputs": rng.integers(3, vocab, (batch, length)).astype(np.int32),
    "targets": rng.integers(3, vocab, (batch, length)).astype(np.int32),
    "weights": np.ones((batch, length), np.float32),
    "mask": np.ones((batch, length), bool),
    "moves": np.full(batch, length / 2, np.float32),
  }


def layer_dims(recurrence: str, shapes: Shapes) -> tuple:
  """The recurrence's dimensions at `shapes`: the d512 layer's, or the toy's."""
  return {"affine_scan": shapes.slice_dims, "delta_rule": shapes.delta_dims,
          "ssd": shapes.ssd_dims}[recurrence]  # fmt: skip


def layer_inputs(recurrence: str, shapes: Shapes, seed: int = 0) -> tuple[tuple, Callable]:
  """Random inputs of one layer's recurrence at `shapes` (`benchmarks.harness.recurrence_inputs`)
  and fn(*inputs, impl, chunk)."""
  dims = layer_dims(recurrence, shapes)
  return recurrence_inputs(recurrence, shapes.op_batch, shapes.steps, dims, seed)


def recurrence_row(ctx: Context, recurrence: str, impl: str, chunk: int, unroll: int = 1) -> Row:
  """Forward, and forward + backward (the gradient of every input), of one implementation."""
  sh, opts = ctx.shapes, ctx.opts

  def measure() -> Row:
    inputs, fn = layer_inputs(recurrence, sh)
    unrolled = ScanUnroll(unroll) if unroll > 1 else None
    fwd, both, compile_s = recurrence_programs(fn, inputs, impl, chunk, tracing=unrolled)
    fwd_s = median_seconds(fwd, inputs, opts.warmup, opts.iters)
    both_s = median_seconds(both, inputs, opts.warmup, opts.iters)
    row = Row("recurrence", "", shape=f"batch {sh.op_batch}, {sh.steps} steps"
              + (f", chunk {chunk}" if impl == "chunked" else ""), compile_s=compile_s,
              ms=1e3 * both_s, forward_ms=1e3 * fwd_s, tokens_s=sh.op_batch * sh.steps / both_s,
              program_gib=gib(memory.program_bytes(both)))  # fmt: skip
    # The shape `chessjax.ops.impl`'s table keys on (`benchmarks.bench_scans --device`).
    row.extra.update(rows=sh.op_batch, length=sh.steps,
                     width=width_of(recurrence, layer_dims(recurrence, sh)))  # fmt: skip
    if unroll > 1:
      row.extra.update(unroll=unroll, scans_unrolled=unrolled.count)
    return row

  return ctx.measure(("recurrence", recurrence, impl, chunk, sh.steps, unroll), measure)


def add_step(cat: Catalogue, group: str, family: str, size: str, batch: int, dtype: str) -> None:
  """The train step of `family` at `size` x `batch` in `dtype`, unless a part before listed it."""
  name = f"{family} {case_name(size, batch)} {dtype}"
  if name not in cat.listed:
    extra = 15 if family == "mamba3_mimo" and size == "d512" else 0
    cat.one(group, "train", name, lambda ctx: step_row(ctx, family, size, batch, dtype),
            SECONDS[size] + extra)  # fmt: skip


def unreached(cat: Catalogue) -> None:
  """The steps no device has timed: three Mamba families at d128 b32, GPT-2 small's LM step and
  SLiCE's d128 b32 step in bfloat16 (its d512 one: the H200's, 2026-11-28)."""
  for family in UNREACHED_FAMILIES:
    for dtype in DTYPES:
      add_step(cat, "unreached", family, "d128", 32, dtype)
  for dtype in DTYPES:
    cat.one("unreached", "lm", f"gpt2 small {dtype}", lambda ctx, d=dtype: lm_row(ctx, d),
            LM_SECONDS)  # fmt: skip
  add_step(cat, "unreached", LOOP_FAMILY, "d128", 32, "bfloat16")


def measured(cat: Catalogue, shapes: Shapes) -> None:
  """The H200's other rows again: every family's step (d512 b128 first), every recurrence in
  each implementation."""
  for case in sorted(CASES, key=lambda c: "d512" not in c):
    for family in FAMILIES:
      for dtype in DTYPES:
        add_step(cat, "measured", family, *CASES[case], dtype)
  for recurrence, impls in RECURRENCES.items():
    for impl in impls:
      chunks = shapes.chunks[recurrence] if impl == "chunked" else (0,)
      for chunk in chunks:
        name = f"{recurrence} {impl}"
        if impl == "chunked":  # The full run's chunk size, so toy and full rows share names.
          name += f" C{FULL.chunks[recurrence][chunks.index(chunk)]}"
        cat.one("measured", "recurrence", name,
                lambda ctx, r=recurrence, i=str(impl), c=chunk or 64: recurrence_row(ctx, r, i, c),
                RECURRENCE_SECONDS)  # fmt: skip


COLUMNS = (
  column("part", lambda r: r.part),
  column("row", lambda r: r.name),
  SHAPE,
  STATUS,
  COMPILE_S,
  STEP_MS,
  column("forward ms", lambda r: r.forward_ms, ".2f"),
  B2B_MS,
  column("tokens/s", lambda r: r.tokens_s, ",.0f"),
  MFU,
  MFU_B2B,
  PROGRAM_GIB,
  DEVICE_PEAK,
)


def table(rows: list[Row]) -> str:
  """The table of train, LM and recurrence rows (docs/performance.md renders the H200's with it)."""
  return markdown(rows, COLUMNS)
