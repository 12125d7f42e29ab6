"""The accelerator check: the train step training runs, the training loop, populations and the
recurrences, timed on one device.

    python -m benchmarks.bench_device --out runs/bench_device [--budget-minutes 7.5]
        [--only PART_OR_ROW,...] [--toy]

Every timed train step is the one a training run executes: `chessjax.step.build` of the family's
config (`benchmarks.bench_train_step.world_model_config`, `configs/lm.py`): forward in train mode,
the loss, backward, clipping, AdamW with the family's recipe and the non-finite guard, the state
donated. Each is compiled ahead of time (compile seconds: lower + compile), run `--warmup` steps,
then timed over `--iters` steps each to completion ("step ms", the median) and over steps
dispatched back to back ("b2b ms": the rate a training loop can reach, which keeps the device
busy). World-model steps run on random valid moves and labels, games cut at `STEPS` = 256 steps,
no padding. The parts, in run order (a lent device's first run measures first what no device has
measured yet; `--help` lists each part's rows and rough seconds):

1. `loop`: the real training loop (`chessjax.train.train_and_evaluate`: batches prefetched to the
   device, the guard, logging every `log_every` steps; no validation, no checkpoint before the
   last step) on the bundled sample (`data_prep.process_pgn`, prepared once under OUT/data), at
   d128 batch 32 and d512 batch 128 (SLiCE, float32), one length bucket of 256 steps so that
   every batch has the step's shape, beside the same step timed alone ("slice d128 b32 float32",
   "slice d512 b128 float32"). The loop's ms/step is taken from its log intervals after the first
   (which holds the compilation and start-up): efficiency = the step alone back to back / the
   loop's ms/step; with the loop's own input wait (share of its time) and host ms/step, its
   padding and real tokens/s.
2. `population`: K SLiCE members (float32, differing in learning rate: one shared batch, as a
   grid cell's members) in one step (`chessjax.population.Population`): K = 1, 4, 16, 64 at d128
   batch 32 and 128, K = 1, 4 at d256 and d512 batch 128; ms/step, member-steps/s and the
   speed-up over K steps of the run alone one after another (back to back both). A K whose step
   does not fit is refused before it runs, with the largest K that fits (the memory check's
   estimate, `chessjax.compile.largest_population`): from a smaller K's program when that
   already says so (nothing built), else from its own compiled program.
3. `ab`: XLA's command buffers (CUDA graphs) for while loops and conditionals,
   `XLA_FLAGS=--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL --xla_gpu_graph_min_graph_size=1`,
   "off" (XLA's default) against "on", each setting in a fresh process (XLA reads its flags once;
   XLA_PYTHON_CLIENT_MEM_FRACTION=0.10 of the device), on `AB_TARGETS` (SLiCE's d128 batch-32
   step, a population of 16 of it, the affine scan sequential); and `lax.scan` unrolled
   `UNROLLS` = 4 and 16 times on the sequential forms (SLiCE's d128 step, whose `auto` is
   sequential on GPU, and each recurrence's sequential form), against the same rows at unroll 1.
   `chessjax.ops` has no unroll argument: `ScanUnroll` gives every `lax.scan` traced inside the
   step `unroll=k` (the row says how many scans it reached).
4. `unreached`: the rows the H200 did not reach (docs/performance.md): Mamba-2, Mamba-3 and
   Mamba-3 MIMO at d128 batch 32, GPT-2 small's LM step (60 games of 512 tokens, Toshniwal et
   al.), both precision policies; and SLiCE's bfloat16 steps under its `auto` implementation
   (its float32 steps are the loop part's).
5. `measured`: the rest of the H200's rows, again: every other family of the grid at d128 batch 32
   and d512 batch 128, float32 and bfloat16 (`model.dtype`), and each recurrence of
   `chessjax.ops.impl.RECURRENCES` in each implementation (chunked at several chunk sizes) at the
   d512 layer's shapes, forward and forward + backward.

Columns: tokens/s = batch x length / step ms; MFU = tokens/s x the model's FLOPs per token
(`chessjax.flops`, training) over the device's peak for the policy (`chessjax.peaks`; the measured
matmul rate on a CPU); "program GiB" = the compiled program's memory (XLA's memory analysis:
arguments, outputs, temporaries; `chessjax.memory.program_bytes`, the memory check's estimate,
which `chessjax.compile.check_memory` compares with the device's limit); "device peak GiB" = the
device's `peak_bytes_in_use` after the row, the row's own peak where the row raised it, else
"<= X" (the counter is a running maximum and cannot be reset: the row's own peak is at most the
peak so far); "-" where the backend keeps no count (the CPU). Rows are ordered by growing memory
where that is cheap (a population's K), so most peaks are the row's own.

Sizing: `--budget-minutes` (default 7.5 from the process's start, 0: none) keeps a run inside 8
minutes: a row whose rough seconds (`--help`) would overrun it is not started, and it and every
later row are listed as `skipped (budget)`; the output names the parts left for a second run
(`--only PART,...`). `--only A,B` runs the parts named A or B and the rows whose names contain A
or B; the others are listed as skipped. The process runs with XLA_PYTHON_CLIENT_MEM_FRACTION=0.85
unless set (training's scripts use 0.90; the rest leaves room for the A/B's processes).

Output: DIR/bench_device.md (the tables) and DIR/bench_device.json (device kind, platform, jax
version, date, XLA flags, every row), also printed. `--toy`: every row at toy shapes (d128 at
batch 2 x 16 steps, small recurrences, GPT-2 `tiny`, K = 1, 2 and a K = 64 refused under a 1 GiB
limit, a 48-game sample) with XLA's quickest compile, seconds per row on one CPU core: the suite
runs it (tests/test_bench_device.py) so the check cannot rot before a device runs it.
"""

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import bench_population
from benchmarks.bench_train_step import (
  built_step,
  device_batches,
  random_batch,
  time_step,
  world_model_config,
)
from chessjax import compile as compile_lib
from chessjax import flops, logs, memory, peaks, train
from chessjax.models import model_config, registry
from chessjax.ops import delta_rule, slice_scan, ssd
from chessjax.ops.impl import RECURRENCES
from configs import lm as lm_configs

STARTED = time.perf_counter()  # The budget counts from the process's start.
REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
STEPS = 256  # Game length of every world-model row (the paper's games are mostly shorter).
CASES = {"d128 b32": ("d128", 32), "d512 b128": ("d512", 128)}
DTYPES = ("float32", "bfloat16")
FAMILIES = registry.FAMILIES  # The paper's grid: main families and ablations (and MIMO).
CHUNKS = {"affine_scan": (16, 64, 256), "delta_rule": (32, 64, 128), "ssd": (32, 64, 128)}
LM = ("gpt2", "small", 60, 512)  # family, size, batch, tokens (configs/lm.py, docs/lm.md)
LOOP_FAMILY = POPULATION_FAMILY = "slice"  # The paper's main family, the demo's.
LOOP_CASES = ("d128 b32", "d512 b128")
# (size, batch, the K of each row) of the population part.
POPULATIONS = (
  ("d128", 32, (1, 4, 16, 64)),
  ("d128", 128, (1, 4, 16, 64)),
  ("d256", 128, (1, 4)),
  ("d512", 128, (1, 4)),
)
COMMAND_BUFFERS = (
  "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL --xla_gpu_graph_min_graph_size=1"
)
CHILD_MEM_FRACTION = "0.10"  # An A/B process's share of the device (the parent holds 0.85).
# The rows each command-buffer setting runs: the 256-step while loop of a sequential scan in
# SLiCE's d128 step (`auto` on GPU: launch-bound, where command buffers can help), in a population
# of 16 of it, and in the affine scan alone at the d512 layer's shapes.
AB_TARGETS = ("slice d128 b32 float32", "population slice d128 b32 K16", "affine_scan sequential")
UNROLLS = (4, 16)
UNREACHED_FAMILIES = ("mamba2", "mamba3", "mamba3_mimo")  # Their d128 b32 rows (H200: not run).
GIB = 2**30
# Rough seconds of a row on an H100/H200 (compile + timing; the H200's compiles took 4-34 s): the
# budget's guess and `--help`'s.
SECONDS = {"d128": 12, "d256": 16, "d512": 25}
LM_SECONDS, RECURRENCE_SECONDS, PREPARE_SECONDS, CHILD_SECONDS = 45, 5, 20, 20


@dataclasses.dataclass(frozen=True)
class Shapes:
  """What a run measures at: full-run sizes, batches and K mapped to those run (the identity but
  at toy shapes), the length, chunk sizes, the recurrences' dimensions, the LM step, the loop's
  logging interval per size and how many intervals it times, the sample's games (0: all) and the
  population check's memory limit (0: the device's)."""

  toy: bool
  size: dict
  batch: dict
  k: dict
  steps: int
  chunks: dict
  op_batch: int
  slice_dims: tuple  # (G blocks, block size b)
  delta_dims: tuple  # (H, K, V)
  ssd_dims: tuple  # (H, P, N)
  lm: tuple
  log_every: dict
  intervals: int
  sample_games: int
  memory_limit_gb: float


_SIZES = ("d128", "d256", "d512")
_BATCHES = (32, 128)
_KS = (1, 4, 16, 64)
FULL = Shapes(
  False,
  {s: s for s in _SIZES},
  {b: b for b in _BATCHES},
  {k: k for k in _KS},
  STEPS,
  CHUNKS,
  128,
  (64, 8),
  (8, 48, 96),
  (16, 64, 128),
  LM,
  {"d128": 100, "d512": 50},  # The configs' log_every at d128; a d512 interval is seconds.
  3,
  0,
  0.0,
)
TOY = Shapes(
  True,
  {s: "d128" for s in _SIZES},
  {b: 2 for b in _BATCHES},
  {1: 1, 4: 2, 16: 2, 64: 64},  # K = 64 is refused under the toy limit (from K = 2's program).
  16,
  {name: (2, 4, 8) for name in CHUNKS},  # Named in the table as the full run's chunks.
  2,
  (4, 4),
  (2, 8, 8),
  (2, 8, 8),
  ("gpt2", "tiny", 2, 32),
  {"d128": 1, "d512": 1},
  2,
  48,
  1.0,
)


@dataclasses.dataclass
class Row:
  part: str  # train | lm | recurrence | loop | population | cmdbuf | unroll
  name: str  # unique within a run; the same in toy and full runs
  shape: str = ""
  status: str = "ok"
  compile_s: float = math.nan
  ms: float = math.nan  # median step, each to completion (recurrence: forward + backward)
  forward_ms: float = math.nan  # recurrence rows only
  tokens_s: float = math.nan
  mfu: float = math.nan
  program_gib: float = math.nan  # the memory check's estimate
  device_peak_gib: float = math.nan
  b2b_ms: float = math.nan  # steps dispatched back to back
  peak_own: bool | None = None  # whether the row raised the device's peak (None: not known)
  extra: dict = dataclasses.field(default_factory=dict)  # the part's own numbers


@dataclasses.dataclass
class Unit:
  """What runs at once: one row (or an A/B setting's rows, from one process), with its run-order
  part (`GROUPS`), its rough seconds and `run(ctx) -> rows` (one per name)."""

  group: str
  part: str
  names: tuple
  run: Callable
  seconds: float


GROUPS = {
  "loop": "the training loop against the step alone, d128 b32 and d512 b128 (SLiCE)",
  "population": "K members in one step, d128 b32/b128 K 1-64, d256/d512 b128 K 1, 4 (SLiCE)",
  "ab": "XLA command buffers off/on (a process each) and lax.scan unroll 4/16",
  "unreached": "Mamba-2/3/MIMO d128 b32, GPT-2 small's LM step, SLiCE bfloat16 (auto)",
  "measured": "the H200's other rows again: every family's step, every recurrence",
}


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


class LoopIntervals:
  """The training loop's log intervals as its logger sees them: each `write_interval` call's time,
  step, input wait and host ms/step, and the tokens `dispatched` since the previous one (the
  public calls of `chessjax.logs.TrainLogger`, wrapped while inside)."""

  def __enter__(self):
    self.marks = []  # dicts: time, step, tokens, cells, input_wait, host_ms
    counts = {"tokens": 0, "cells": 0}
    self._saved = logs.TrainLogger.dispatched, logs.TrainLogger.write_interval
    dispatched, write_interval = self._saved

    def counted(logger, tokens, cells):
      counts["tokens"] += tokens
      counts["cells"] += cells
      return dispatched(logger, tokens, cells)

    def marked(logger, step, *, input_wait=0.0, host_ms=0.0):
      mark = {"time": time.perf_counter(), "step": step, "input_wait": input_wait}
      self.marks.append({**mark, **counts, "host_ms": host_ms})
      counts.update(tokens=0, cells=0)
      return write_interval(logger, step, input_wait=input_wait, host_ms=host_ms)

    logs.TrainLogger.dispatched, logs.TrainLogger.write_interval = counted, marked
    return self

  def __exit__(self, *exc):
    logs.TrainLogger.dispatched, logs.TrainLogger.write_interval = self._saved

  def summary(self) -> dict:
    """The intervals after the first (compilation and start-up): ms/step, input wait (share of
    their time), host ms/step, padding and real tokens/s."""
    marks = self.marks
    if len(marks) < 2:
      raise RuntimeError(f"the loop logged {len(marks)} interval(s); 2 or more are needed")
    seconds = marks[-1]["time"] - marks[0]["time"]
    steps = marks[-1]["step"] - marks[0]["step"]
    later = marks[1:]
    spans = [b["time"] - a["time"] for a, b in zip(marks, later, strict=False)]
    counts = [b["step"] - a["step"] for a, b in zip(marks, later, strict=False)]
    tokens, cells = sum(m["tokens"] for m in later), sum(m["cells"] for m in later)
    return {
      "loop_ms": 1e3 * seconds / steps,
      "timed_steps": steps,
      "input_wait": sum(m["input_wait"] * s for m, s in zip(later, spans, strict=True)) / seconds,
      "host_ms": sum(m["host_ms"] * n for m, n in zip(later, counts, strict=True)) / steps,
      "padding": 1 - tokens / max(cells, 1),
      "real_tokens_s": tokens / seconds,
    }


class Context:
  """One run's settings and what its rows share: measured results by key (a row measured once
  serves every row that needs it: a loop's step alone, a toy case that shares its shapes), the
  prepared sample and the population check's limit."""

  def __init__(self, opts, shapes: Shapes):
    self.opts, self.shapes, self.out = opts, shapes, Path(opts.out)
    self.memo: dict = {}
    self.limit = None
    self.only = [p.strip() for p in opts.only.split(",") if p.strip()]
    budget = opts.budget_minutes * 60 if opts.budget_minutes > 0 else math.inf
    self.deadline = STARTED + budget  # A process of the A/B is stopped 2 minutes past it.

  def measure(self, key, fn) -> Row:
    if key not in self.memo:
      self.memo[key] = fn()
    return dataclasses.replace(self.memo[key], extra=dict(self.memo[key].extra))

  def memory_limit(self) -> int | None:
    if self.limit is None:
      gb = self.opts.memory_limit_gb or self.shapes.memory_limit_gb
      device = memory.available_bytes()
      self.limit = int(gb * GIB) if gb else device
      if gb and device is not None and not self.opts.memory_limit_gb:
        self.limit = min(self.limit, device)
    return self.limit

  def prepared_sample(self) -> tuple[Path, float]:
    """`--data`, or the bundled sample prepared (`data_prep.process_pgn`, every game in `train`)
    under OUT/data, once; returns its directory and the seconds this call spent preparing it."""
    from data_prep import process_pgn

    if self.opts.data:
      return Path(self.opts.data), 0.0
    games = self.shapes.sample_games
    path = self.out / "data" / (f"sample{games}" if games else "sample")
    if (path / "manifest.json").exists():
      return path, 0.0
    started = time.perf_counter()
    args = ["--pgn", str(SAMPLE), "--out", str(path), "--split", "train", "--overwrite"]
    if not self.shapes.toy:  # A few dozen games: worker processes would take longer to start.
      args += ["--workers", str(min(8, os.cpu_count() or 1))]
    if games:
      args += ["--max-games", str(games)]
    process_pgn.run(process_pgn.parse_args(args))
    return path, time.perf_counter() - started


def _gib(n) -> float:
  return math.nan if n is None else n / GIB


def _device_peak_gib() -> float:
  stats = jax.devices()[0].memory_stats() or {}
  return stats["peak_bytes_in_use"] / GIB if "peak_bytes_in_use" in stats else math.nan


def _case(size: str, batch: int) -> str:
  return f"{size} b{batch}"


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
    row = Row("train", "", shape=f"{size_run}, batch {batch_run}, {sh.steps} steps",
              compile_s=t.compile_s, ms=t.ms, b2b_ms=t.b2b_ms, tokens_s=tokens_s,
              mfu=flops.mfu(tokens_s, per_token, peaks.peak_flops(dtype=dtype)),
              program_gib=_gib(t.program_bytes))  # fmt: skip
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
    return Row("lm", "", shape=f"{family} {size}, batch {batch}, {length} tokens",
               compile_s=t.compile_s, ms=t.ms, b2b_ms=t.b2b_ms, tokens_s=tokens_s,
               mfu=flops.mfu(tokens_s, per_token, peaks.peak_flops(dtype=dtype)),
               program_gib=_gib(t.program_bytes))  # fmt: skip

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


def recurrence_inputs(recurrence: str, shapes: Shapes, seed: int = 0) -> tuple[tuple, Callable]:
  """Random float32 inputs of one layer's recurrence at `shapes`, and fn(*inputs, impl, chunk)
  returning its output sequence."""
  rng = np.random.default_rng(seed)
  b, t = shapes.op_batch, shapes.steps

  def normal(*shape, scale=1.0):
    return jnp.asarray(scale * rng.standard_normal(shape), jnp.float32)

  if recurrence == "affine_scan":
    g, n = shapes.slice_dims
    inputs = (normal(b, t, g, n, n, scale=0.1 / n), normal(b, t, g * n), normal(g * n))
    return inputs, lambda a, c, y0, impl, chunk: slice_scan.affine_scan(
      a, c, y0, impl=impl, chunk_size=chunk
    )
  if recurrence == "delta_rule":
    h, k, v = shapes.delta_dims
    q, kk = normal(b, t, h, k), normal(b, t, h, k)
    q, kk = (x / jnp.linalg.norm(x, axis=-1, keepdims=True) for x in (q, kk))
    g = -jnp.abs(normal(b, t, h, scale=0.1))
    beta = jax.nn.sigmoid(normal(b, t, h))
    inputs = (q, kk, normal(b, t, h, v), g, beta)
    return inputs, lambda q, k, v, g, beta, impl, chunk: delta_rule.gated_delta_rule(
      q, k, v, g, beta, impl=impl, chunk_size=chunk
    )[0]
  if recurrence == "ssd":
    h, p, n = shapes.ssd_dims
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


def _timed(fn, inputs, warmup: int, iters: int) -> float:
  """The median seconds of `iters` calls of `fn(*inputs)` after `warmup`, each to completion."""
  times = []
  for i in range(warmup + iters):
    started = time.perf_counter()
    jax.block_until_ready(fn(*inputs))
    if i >= warmup:
      times.append(time.perf_counter() - started)
  return statistics.median(times)


def recurrence_row(ctx: Context, recurrence: str, impl: str, chunk: int, unroll: int = 1) -> Row:
  """Forward, and forward + backward (the gradient of every input), of one implementation."""
  sh, opts = ctx.shapes, ctx.opts

  def measure() -> Row:
    inputs, fn = recurrence_inputs(recurrence, sh)

    def forward(*xs):
      return fn(*xs, impl, chunk)

    def loss(*xs):
      return jnp.sum(forward(*xs).astype(jnp.float32) ** 2)

    unrolled = ScanUnroll(unroll) if unroll > 1 else contextlib.nullcontext()
    started = time.perf_counter()
    with unrolled:
      fwd = jax.jit(forward).lower(*inputs)
      both = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(inputs))))).lower(*inputs)
    fwd, both = fwd.compile(), both.compile()
    compile_s = time.perf_counter() - started
    fwd_s = _timed(fwd, inputs, opts.warmup, opts.iters)
    both_s = _timed(both, inputs, opts.warmup, opts.iters)
    row = Row("recurrence", "", shape=f"batch {sh.op_batch}, {sh.steps} steps"
              + (f", chunk {chunk}" if impl == "chunked" else ""), compile_s=compile_s,
              ms=1e3 * both_s, forward_ms=1e3 * fwd_s, tokens_s=sh.op_batch * sh.steps / both_s,
              program_gib=_gib(memory.program_bytes(both)))  # fmt: skip
    if unroll > 1:
      row.extra.update(unroll=unroll, scans_unrolled=unrolled.count)
    return row

  return ctx.measure(("recurrence", recurrence, impl, chunk, sh.steps, unroll), measure)


def loop_row(ctx: Context, family: str, size: str, batch: int, dtype: str) -> Row:
  """The training loop on the prepared sample at the step's shapes, against the step alone."""
  sh = ctx.shapes
  alone = step_row(ctx, family, size, batch, dtype)
  size_run, batch_run = sh.size[size], sh.batch[batch]

  def measure() -> Row:
    data, prepare_s = ctx.prepared_sample()
    config = world_model_config(family, size_run, batch=batch_run, steps=sh.steps, dtype=dtype)
    config.data.train, config.data.val_split = str(data), "none"  # No validation split.
    every = sh.log_every[size]
    config.train.steps, config.train.log_every = every * (sh.intervals + 1), every
    config.train.checkpoint_every = 10**9  # Only the last step saves.
    config.train.progress_seconds, config.train.compile_ahead = 1e9, "false"
    workdir = ctx.out / "loop_runs" / f"{family}_{size_run}_b{batch_run}_{dtype}"
    shutil.rmtree(workdir, ignore_errors=True)
    started = time.perf_counter()
    with LoopIntervals() as intervals:
      train.train_and_evaluate(config, workdir)
    wall_s = time.perf_counter() - started
    shutil.rmtree(workdir, ignore_errors=True)
    s = intervals.summary()
    return Row("loop", "", shape=f"{size_run}, batch {batch_run}, {sh.steps} steps (bucket)",
               ms=s["loop_ms"], b2b_ms=s["loop_ms"], tokens_s=s["real_tokens_s"],
               program_gib=alone.program_gib,
               extra={**s, "alone_b2b_ms": alone.b2b_ms, "efficiency": alone.b2b_ms / s["loop_ms"],
                      "log_every": every, "wall_s": wall_s, "prepare_s": prepare_s})  # fmt: skip

  return ctx.measure(("loop", family, size_run, batch_run, dtype, sh.steps), measure)


class Refused(Exception):
  """A population whose step would not fit the device (the memory check's estimate)."""

  def __init__(self, needed: float, limit: int, largest: int, how: str):
    super().__init__(f"refused: needs {needed / GIB:.1f} GiB > {limit / GIB:.1f} GiB ({how})")
    self.needed, self.largest, self.how = needed, largest, how


def population_row(ctx: Context, family: str, size: str, batch: int, k: int) -> Row:
  """A population of K members of the float32 step, against the step alone (back to back)."""
  sh = ctx.shapes
  size_run, batch_run, k_run = sh.size[size], sh.batch[batch], sh.k[k]
  alone = step_row(ctx, family, size, batch, "float32")
  limit = ctx.memory_limit()
  shape = f"{size_run}, batch {batch_run}, {sh.steps} steps, K = {k_run}"

  def measure() -> Row:
    # A smaller K of the same shapes already measured: its program per member (memory taken as
    # proportional to K, `compile.largest_population`) may refuse this K before anything is built.
    smaller = [
      r
      for key, r in ctx.memo.items()
      if key[:5] == ("population", family, size_run, batch_run, sh.steps)
      and key[5] < k_run
      and math.isfinite(r.extra.get("program_bytes", math.nan))
    ]
    try:
      if smaller and limit is not None:
        prev = max(smaller, key=lambda r: r.extra["k"])
        per = prev.extra["program_bytes"] / prev.extra["k"]
        if per * k_run > limit:
          raise Refused(per * k_run, limit, compile_lib.largest_population(
            prev.extra["program_bytes"], prev.extra["k"], limit), f"estimated from K = "
            f"{prev.extra['k']}'s program")  # fmt: skip

      def admit(needed):
        if needed is not None and limit is not None and needed > limit:
          largest = compile_lib.largest_population(needed, k_run, limit)
          raise Refused(needed, limit, largest, "its compiled program")

      config = world_model_config(family, size_run, batch=batch_run, steps=sh.steps,
                                  dtype="float32")  # fmt: skip
      t, build_s = bench_population.time_population(config, k_run, warmup=ctx.opts.warmup,
                                                    iters=ctx.opts.iters, admit=admit)  # fmt: skip
    except Refused as e:
      return Row("population", "", shape=shape, status=str(e), program_gib=e.needed / GIB,
                 extra={"k": k_run, "largest_k": e.largest, "limit_gib": limit / GIB})  # fmt: skip
    tokens_s = k_run * batch_run * sh.steps / (t.b2b_ms / 1e3)
    cfg = model_config(family, size_run)
    return Row("population", "", shape=shape, compile_s=t.compile_s, ms=t.ms, b2b_ms=t.b2b_ms,
               tokens_s=tokens_s, mfu=flops.mfu(tokens_s, flops.per_token(cfg, sh.steps),
                                                peaks.peak_flops(dtype="float32")),
               program_gib=_gib(t.program_bytes),
               extra={"k": k_run, "member_steps_s": 1e3 * k_run / t.b2b_ms,
                      "alone_b2b_ms": alone.b2b_ms, "speedup": k_run * alone.b2b_ms / t.b2b_ms,
                      "build_s": build_s, "program_bytes": t.program_bytes or math.nan,
                      "largest_k": None if limit is None or t.program_bytes is None else
                      compile_lib.largest_population(t.program_bytes, k_run, limit),
                      "limit_gib": _gib(limit)})  # fmt: skip

  return ctx.measure(("population", family, size_run, batch_run, sh.steps, k_run), measure)


def unroll_row(ctx: Context, target: tuple, k: int) -> Row:
  """`target` (("step", family, size, batch, dtype) or ("recurrence", name, impl)) with its scans
  unrolled `k` times, against the same at unroll 1."""
  if target[0] == "step":
    base, row = step_row(ctx, *target[1:]), step_row(ctx, *target[1:], unroll=k)
  else:
    base = recurrence_row(ctx, target[1], target[2], 64)
    row = recurrence_row(ctx, target[1], target[2], 64, unroll=k)
  row.part = "unroll"
  row.extra["vs_unroll1"] = row.ms / base.ms
  return row


def command_buffer_rows(ctx: Context, setting: str) -> list[Row]:
  """`AB_TARGETS` (those `--only` selects) in a fresh process with XLA's command buffers
  `setting` ("off": XLA's default flags, "on": `COMMAND_BUFFERS` added); "on" rows carry their
  ratio to "off"'s."""
  env = dict(os.environ, XLA_PYTHON_CLIENT_MEM_FRACTION=CHILD_MEM_FRACTION)
  if setting == "on":
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {COMMAND_BUFFERS}".strip()
  names = {t: f"cmdbuf {setting}: {t}" for t in AB_TARGETS}
  wanted = [t for t in AB_TARGETS if matches(names[t], "ab", ctx.only)]
  out, failed = ctx.out / f"cmdbuf_{setting}", "failed: not in the process's output"
  cmd = [sys.executable, "-m", "benchmarks.bench_device", "--out", str(out)]
  cmd += ["--rows", ";".join(wanted), "--warmup", str(ctx.opts.warmup)]
  cmd += ["--iters", str(ctx.opts.iters)] + (["--toy"] if ctx.shapes.toy else [])
  try:
    timeout = min(900.0, max(ctx.deadline - time.perf_counter(), 0.0) + 120.0)
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
      tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
      raise RuntimeError(f"the {setting} process exited {proc.returncode}: {tail}")
    child = {r["name"]: r for r in json.loads((out / "bench_device.json").read_text())["rows"]}
  except (RuntimeError, subprocess.TimeoutExpired, OSError, ValueError) as e:
    child, failed = {}, f"failed: {str(e)[:400]}"
  fields = {f.name for f in dataclasses.fields(Row)}
  rows = []
  for target in AB_TARGETS:
    if target not in wanted:
      rows.append(Row("cmdbuf", names[target], status="skipped (--only)"))
      continue
    if target not in child:
      rows.append(Row("cmdbuf", names[target], status=failed))
      continue
    row = Row(**{k: v for k, v in child[target].items() if k in fields})
    row.part, row.name = "cmdbuf", names[target]
    row.extra.update(setting=setting, xla_flags=env.get("XLA_FLAGS", ""), target=target)
    off = ctx.memo.get(("cmdbuf", "off", target))
    if setting == "on" and off is not None:
      row.extra["vs_off"] = row.ms / off.ms
    ctx.memo[("cmdbuf", setting, target)] = row
    rows.append(row)
  return rows


def units(shapes: Shapes) -> list[Unit]:
  """Every row of a run, in run order (`GROUPS`)."""
  out, listed = [], set()

  def one(group, part, name, fn, seconds):
    listed.add(name)
    out.append(Unit(group, part, (name,), lambda ctx: [fn(ctx)], seconds))

  def step(group, family, size, batch, dtype):
    name = f"{family} {_case(size, batch)} {dtype}"
    if name not in listed:
      extra = 15 if family == "mamba3_mimo" and size == "d512" else 0
      one(group, "train", name, lambda ctx: step_row(ctx, family, size, batch, dtype),
          SECONDS[size] + extra)  # fmt: skip

  first_loop = True
  for case in LOOP_CASES:
    size, batch = CASES[case]
    step("loop", LOOP_FAMILY, size, batch, "float32")
    one("loop", "loop", f"loop {LOOP_FAMILY} {case} float32",
        lambda ctx, s=size, b=batch: loop_row(ctx, LOOP_FAMILY, s, b, "float32"),
        SECONDS[size] + 25 + PREPARE_SECONDS * first_loop)  # fmt: skip
    first_loop = False
  for size, batch, ks in POPULATIONS:
    step("population", POPULATION_FAMILY, size, batch, "float32")
    for k in ks:
      one("population", "population", f"population {POPULATION_FAMILY} {_case(size, batch)} K{k}",
          lambda ctx, s=size, b=batch, k=k: population_row(ctx, POPULATION_FAMILY, s, b, k),
          SECONDS[size] + 5 + 0.15 * k)  # fmt: skip
  for setting in ("off", "on"):
    names = tuple(f"cmdbuf {setting}: {t}" for t in AB_TARGETS)
    listed.update(names)
    seconds = CHILD_SECONDS + 2 * SECONDS["d128"] + 8 + RECURRENCE_SECONDS
    out.append(Unit("ab", "cmdbuf", names, lambda ctx, s=setting: command_buffer_rows(ctx, s),
                    seconds))  # fmt: skip
  unroll_targets = [(f"{LOOP_FAMILY} d128 b32 float32", ("step", LOOP_FAMILY, "d128", 32,
                     "float32"), SECONDS["d128"] + 3)]  # fmt: skip
  for recurrence in RECURRENCES:
    unroll_targets.append((f"{recurrence} sequential", ("recurrence", recurrence, "sequential"),
                           RECURRENCE_SECONDS + 2))  # fmt: skip
  for name, target, seconds in unroll_targets:
    for k in UNROLLS:
      one("ab", "unroll", f"{name} unroll{k}", lambda ctx, t=target, k=k: unroll_row(ctx, t, k),
          seconds)  # fmt: skip
  for family in UNREACHED_FAMILIES:
    for dtype in DTYPES:
      step("unreached", family, "d128", 32, dtype)
  for case in LOOP_CASES:
    step("unreached", LOOP_FAMILY, *CASES[case], "bfloat16")
  for dtype in DTYPES:
    one("unreached", "lm", f"gpt2 small {dtype}", lambda ctx, d=dtype: lm_row(ctx, d), LM_SECONDS)
  for case in sorted(CASES, key=lambda c: "d512" not in c):
    for family in FAMILIES:
      for dtype in DTYPES:
        step("measured", family, *CASES[case], dtype)
  for recurrence, impls in RECURRENCES.items():
    for impl in impls:
      chunks = shapes.chunks[recurrence] if impl == "chunked" else (0,)
      for chunk in chunks:
        name = f"{recurrence} {impl}"
        if impl == "chunked":  # The full run's chunk size, so toy and full rows share names.
          name += f" C{FULL.chunks[recurrence][chunks.index(chunk)]}"
        one("measured", "recurrence", name,
            lambda ctx, r=recurrence, i=str(impl), c=chunk or 64: recurrence_row(ctx, r, i, c),
            RECURRENCE_SECONDS)  # fmt: skip
  return out


def matches(name: str, group: str, only: list[str]) -> bool:
  """Whether `--only` (its items) selects the row `name` of part `group`."""
  return not only or any(o == group or o in name for o in only)


def selected(unit: Unit, only: list[str]) -> bool:
  return any(matches(n, unit.group, only) for n in unit.names)


def _fmt(x, spec: str) -> str:
  return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def _peak(r: Row) -> str:
  return ("<= " if r.peak_own is False else "") + _fmt(r.device_peak_gib, ".2f")


def table(rows: list[Row]) -> str:
  """The table of train, LM and recurrence rows (docs/performance.md renders the H200's with it)."""
  lines = [
    "| part | row | shape | status | compile s | step ms | forward ms | tokens/s | MFU % "
    "| program GiB | device peak GiB |",
    "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for r in rows:
    lines.append(
      f"| {r.part} | {r.name} | {r.shape} | {r.status} | {_fmt(r.compile_s, '.1f')} | "
      f"{_fmt(r.ms, '.2f')} | {_fmt(r.forward_ms, '.2f')} | {_fmt(r.tokens_s, ',.0f')} | "
      f"{_fmt(100 * r.mfu, '.1f')} | {_fmt(r.program_gib, '.2f')} | {_peak(r)} |"
    )
  return "\n".join(lines) + "\n"


def loop_table(rows: list[Row]) -> str:
  lines = [
    "| row | shape | status | step alone b2b ms | loop ms/step | efficiency % | input wait % "
    "| host ms/step | padding | real tokens/s | timed steps | program GiB | device peak GiB |",
    "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for r in rows:
    e = r.extra
    lines.append(
      f"| {r.name} | {r.shape} | {r.status} | {_fmt(e.get('alone_b2b_ms'), '.2f')} | "
      f"{_fmt(e.get('loop_ms'), '.2f')} | {_fmt(100 * e.get('efficiency', math.nan), '.1f')} | "
      f"{_fmt(100 * e.get('input_wait', math.nan), '.1f')} | {_fmt(e.get('host_ms'), '.2f')} | "
      f"{_fmt(e.get('padding'), '.2f')} | {_fmt(e.get('real_tokens_s'), ',.0f')} | "
      f"{_fmt(e.get('timed_steps'), 'd')} | {_fmt(r.program_gib, '.2f')} | {_peak(r)} |"
    )
  return "\n".join(lines) + "\n"


def population_table(rows: list[Row]) -> str:
  lines = [
    "| row | shape | status | compile s | step ms | b2b ms | member-steps/s | alone b2b ms "
    "| speed-up over K alone | MFU % | program GiB | largest K that fits | device peak GiB |",
    "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for r in rows:
    e = r.extra
    lines.append(
      f"| {r.name} | {r.shape} | {r.status} | {_fmt(r.compile_s, '.1f')} | {_fmt(r.ms, '.2f')} | "
      f"{_fmt(r.b2b_ms, '.2f')} | {_fmt(e.get('member_steps_s'), ',.1f')} | "
      f"{_fmt(e.get('alone_b2b_ms'), '.2f')} | {_fmt(e.get('speedup'), '.2f')} | "
      f"{_fmt(100 * r.mfu, '.1f')} | {_fmt(r.program_gib, '.2f')} | "
      f"{_fmt(e.get('largest_k'), 'd')} | {_peak(r)} |"
    )
  return "\n".join(lines) + "\n"


def ab_table(rows: list[Row]) -> str:
  lines = [
    "| row | shape | status | compile s | step ms | b2b ms | against the baseline "
    "| program GiB | device peak GiB |",
    "|---|---|---|---:|---:|---:|---:|---:|---:|",
  ]
  for r in rows:
    ratio = r.extra.get("vs_off", r.extra.get("vs_unroll1"))
    against = (
      "-"
      if ratio is None
      else f"{ratio:.2f}x" + (" of off" if "vs_off" in r.extra else " of unroll 1")
    )
    if "scans_unrolled" in r.extra:
      against += f" (scans traced: {r.extra['scans_unrolled']})"
    lines.append(
      f"| {r.name} | {r.shape} | {r.status} | {_fmt(r.compile_s, '.1f')} | {_fmt(r.ms, '.2f')} | "
      f"{_fmt(r.b2b_ms, '.2f')} | {against} | {_fmt(r.program_gib, '.2f')} | {_peak(r)} |"
    )
  return "\n".join(lines) + "\n"


TABLES = (
  ("Training loop against the step alone", ("loop",), loop_table),
  ("Populations", ("population",), population_table),
  ("A/B: command buffers and scan unrolling", ("cmdbuf", "unroll"), ab_table),
  ("Train steps and recurrences", ("train", "lm", "recurrence"), table),
)


def report(rows: list[Row]) -> str:
  out = []
  for title, parts, fn in TABLES:
    mine = [r for r in rows if r.part in parts]
    if mine:
      out.append(f"### {title}\n\n{fn(mine)}")
  return "\n".join(out)


def header() -> dict:
  device = jax.devices()[0]
  return {
    "device_kind": device.device_kind,
    "platform": device.platform,
    "device_count": jax.device_count(),
    "chip": peaks.chip(device.device_kind),
    "jax": jax.__version__,
    "jaxlib": getattr(jax.lib, "__version__", None) or jax.__version__,
    "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    "xla_flags": os.environ.get("XLA_FLAGS", ""),
    "mem_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", ""),
  }


def run(opts) -> dict:
  """Runs the selected rows within the budget; returns the JSON document (also written to
  opts.out)."""
  shapes = TOY if opts.toy else FULL
  budget = opts.budget_minutes * 60 if opts.budget_minutes > 0 else math.inf
  ctx, rows, left = Context(opts, shapes), [], set()
  only = ctx.only
  stopped = False
  before = jax.config.values["jax_disable_most_optimizations"]
  if opts.toy:  # XLA's quickest compile: the toy rows check that every row runs, not its speed.
    jax.config.update("jax_disable_most_optimizations", True)
  started = time.perf_counter()
  try:
    for unit in catalogue(shapes, opts):
      if not selected(unit, only):
        rows += [Row(unit.part, n, status="skipped (--only)") for n in unit.names]
        continue
      stopped = stopped or time.perf_counter() - STARTED + unit.seconds > budget
      if stopped:
        rows += [Row(unit.part, n, status="skipped (budget)") for n in unit.names]
        left.add(unit.group)
        continue
      peak, unit_started = _device_peak_gib(), time.perf_counter()
      try:
        got = unit.run(ctx)
      except Exception as e:  # One failing row (e.g. out of memory) must not lose the others.
        got = [Row(unit.part, n, status=f"failed: {type(e).__name__}: {str(e)[:300]}")
               for n in unit.names]  # fmt: skip
      now = _device_peak_gib()
      unit_s = time.perf_counter() - unit_started
      for name, row in zip(unit.names, got, strict=True):
        row.part, row.name = unit.part, name
        row.extra["unit_s"] = (
          unit_s  # Wall seconds of the row's unit (the budget's guess: seconds).
        )
        if unit.part != "cmdbuf":  # A/B rows carry their own process's peak.
          row.device_peak_gib = now
          row.peak_own = None if not math.isfinite(now) else bool(now > peak)
        rows.append(row)
        print(f"{unit.group}: {name}: {row.status}, {_fmt(row.ms, '.2f')} ms ({unit_s:.1f} s)",
              flush=True)  # fmt: skip
      gc.collect()
      jax.clear_caches()  # Free the compiled programs; a long run holds ~90 of them otherwise.
  finally:
    jax.config.update("jax_disable_most_optimizations", before)
  doc = {
    **header(),
    "toy": opts.toy,
    "warmup": opts.warmup,
    "iters": opts.iters,
    "budget_minutes": opts.budget_minutes,
    "only": opts.only,
    "seconds": round(time.perf_counter() - started, 1),
    "rows": [dataclasses.asdict(r) for r in rows],
  }
  out = Path(opts.out)
  out.mkdir(parents=True, exist_ok=True)
  title = (
    f"bench_device on {doc['device_kind']} ({doc['platform']}), jax {doc['jax']}, {doc['date']}"
    f"{', TOY shapes' if opts.toy else ''}: {doc['seconds']} s\n\n"
  )
  if left:
    groups = ",".join(g for g in GROUPS if g in left)
    title += f"Not reached within the budget: parts {groups} (`--only {groups}`).\n\n"
  text = title + report(rows)
  (out / "bench_device.md").write_text(text)
  (out / "bench_device.json").write_text(json.dumps(doc, indent=1, allow_nan=True) + "\n")
  print(f"\n{text}\nwrote {out / 'bench_device.md'} and {out / 'bench_device.json'}")
  return doc


def catalogue(shapes: Shapes, opts) -> list[Unit]:
  """`units(shapes)`, or with `--rows` (an A/B process) only the units of those exact names."""
  every = units(shapes)
  if not opts.rows:
    return every
  names = [n for n in opts.rows.split(";") if n]
  chosen = [u for u in every if set(u.names) & set(names)]
  missing = set(names) - {n for u in chosen for n in u.names}
  if missing:
    raise SystemExit(f"error: no rows named {sorted(missing)}")
  return chosen


def parts_help() -> str:
  lines = ["parts, in run order (rough seconds on an H100/H200, compilation included):"]
  every = units(FULL)
  for group, what in GROUPS.items():
    mine = [u for u in every if u.group == group]
    rows, seconds = sum(len(u.names) for u in mine), sum(u.seconds for u in mine)
    lines.append(f"  {group:<11} {rows:>3} rows, ~{seconds / 60:.1f} min: {what}")
  total = sum(u.seconds for u in every)
  lines.append(
    f"  all: ~{total / 60:.0f} min; the default budget stops at 7.5 min (--only PART,...)"
  )
  return "\n".join(lines)


def parse_args(argv=None):
  p = argparse.ArgumentParser(
    description=__doc__, epilog=parts_help(), formatter_class=argparse.RawTextHelpFormatter
  )
  p.add_argument("--out", default="runs/bench_device", help="folder for the .md and .json")
  p.add_argument("--toy", action="store_true", help="toy shapes: seconds per row on one CPU core")
  p.add_argument("--budget-minutes", type=float, default=7.5, help="0: no limit")
  p.add_argument("--warmup", type=int, default=2)
  p.add_argument("--iters", type=int, default=5)
  p.add_argument(
    "--only", default="", help="run only these parts, and rows whose name contains one of these"
  )
  p.add_argument(
    "--memory-limit-gb",
    type=float,
    default=0.0,
    help="the population check's limit (0: the device's; --toy: 1 GiB at most)",
  )
  p.add_argument(
    "--data", default="", help="the loop's prepared dataset (default: the sample, under OUT/data)"
  )
  p.add_argument("--rows", default="", help=argparse.SUPPRESS)  # An A/B process's rows (exact).
  opts = p.parse_args(argv)
  if opts.toy:  # Every row, whatever the machine's speed; the fewest timed steps.
    opts.budget_minutes = 0
    if "--warmup" not in (argv or sys.argv[1:]):
      opts.warmup, opts.iters = 0, 1
  if opts.rows:
    opts.budget_minutes = 0
  return opts


def main(argv=None) -> dict:
  return run(parse_args(argv))


if __name__ == "__main__":
  # Before JAX starts its backend: the memory the device gives this process (see the docstring).
  # Here, not at import: a process that imports the module (the tests) keeps its own setting.
  os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.85")
  main()
