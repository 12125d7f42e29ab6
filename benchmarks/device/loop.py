"""The `loop` part of `benchmarks.bench_device`: the real training loop on the bundled sample
against the same step timed alone, and its table."""

import math
import os
import shutil
import time
from pathlib import Path

from benchmarks.device.common import (
  CASES,
  DEVICE_PEAK,
  LOOP_FAMILY,
  LOOP_SECONDS,
  NAME,
  PROGRAM_GIB,
  REPO,
  SHAPE,
  STATUS,
  Catalogue,
  Context,
  Row,
  case_name,
  column,
  markdown,
)
from benchmarks.device.steps import add_step, step_row
from benchmarks.harness import world_model_config
from chessjax import flops, logs, peaks, train
from chessjax.models import model_config

SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
PREPARE_SECONDS = 3  # Rough seconds to prepare the sample (the H200's: 2.6 s).
STEPS_PER_CALL = 8  # The loop part's second row: `train.steps_per_call` = 8.
K_COMPILE_SECONDS = 10  # Rough seconds to compile the k-step call besides the step (a guess).


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


def prepared_sample(ctx: Context) -> tuple[Path, float]:
  """`--data`, or the bundled sample prepared (`data_prep.process_pgn`, every game in `train`)
  under OUT/data, once; returns its directory and the seconds this call spent preparing it."""
  from data_prep import process_pgn

  if ctx.opts.data:
    return Path(ctx.opts.data), 0.0
  games = ctx.shapes.sample_games
  path = ctx.out / "data" / (f"sample{games}" if games else "sample")
  if (path / "manifest.json").exists():
    return path, 0.0
  started = time.perf_counter()
  args = ["--pgn", str(SAMPLE), "--out", str(path), "--split", "train", "--overwrite"]
  if not ctx.shapes.toy:  # A few dozen games: worker processes would take longer to start.
    args += ["--workers", str(min(8, os.cpu_count() or 1))]
  if games:
    args += ["--max-games", str(games)]
  process_pgn.run(process_pgn.parse_args(args))
  return path, time.perf_counter() - started


def loop_name(size: str, batch: int, dtype: str, k: int = 1) -> str:
  """The loop row's name: the H200's for one step a call, `k8` appended for 8."""
  return f"loop {LOOP_FAMILY} {case_name(size, batch)} {dtype}" + (f" k{k}" if k > 1 else "")


def loop_row(ctx: Context, family: str, size: str, batch: int, dtype: str, k: int = 1) -> Row:
  """The training loop on the prepared sample at the step's shapes, `k` steps a call
  (`train.steps_per_call`), against the step alone."""
  sh = ctx.shapes
  alone = step_row(ctx, family, size, batch, dtype)
  size_run, batch_run = sh.size[size], sh.batch[batch]

  def measure() -> Row:
    data, prepare_s = prepared_sample(ctx)
    config = world_model_config(family, size_run, batch=batch_run, steps=sh.steps, dtype=dtype)
    config.data.train, config.data.val_split = str(data), "none"  # No validation split.
    every = sh.log_every[size]
    config.train.steps, config.train.log_every = every * (sh.intervals + 1), every
    config.train.checkpoint_every = 10**9  # Only the last step saves.
    config.train.progress_seconds, config.train.compile_ahead = 1e9, "false"
    if k != 1:
      if "steps_per_call" not in config.train:
        raise RuntimeError(
          f"this checkout's training has no train.steps_per_call: the k = {k} row needs it "
          "(issue 52, item 2: several steps a call)"
        )
      config.train.steps_per_call = k  # --config.train.steps_per_call=k
    workdir = ctx.out / "loop_runs" / f"{family}_{size_run}_b{batch_run}_{dtype}_k{k}"
    shutil.rmtree(workdir, ignore_errors=True)
    started = time.perf_counter()
    with LoopIntervals() as intervals:
      train.train_and_evaluate(config, workdir)
    wall_s = time.perf_counter() - started
    shutil.rmtree(workdir, ignore_errors=True)
    s = intervals.summary()
    cells = batch_run * sh.steps  # The loop's steps are cut at the bucket: every cell computed.
    per_token = flops.per_token(model_config(family, size_run), sh.steps)
    mfu = flops.mfu(cells / (s["loop_ms"] / 1e3), per_token, peaks.peak_flops(dtype=dtype))
    return Row("loop", "", shape=f"{size_run}, batch {batch_run}, {sh.steps} steps (bucket)"
               + (f", {k} steps a call" if k > 1 else ""),
               ms=s["loop_ms"], b2b_ms=s["loop_ms"], tokens_s=s["real_tokens_s"], mfu=mfu,
               mfu_b2b=mfu, program_gib=alone.program_gib,
               extra={**s, "alone_b2b_ms": alone.b2b_ms, "efficiency": alone.b2b_ms / s["loop_ms"],
                      "alone_ms": alone.ms, "alone_mfu": alone.mfu,
                      "alone_mfu_b2b": alone.mfu_b2b, "steps_per_call": k,
                      "log_every": every, "wall_s": wall_s, "prepare_s": prepare_s})  # fmt: skip

  return ctx.measure(("loop", family, size_run, batch_run, dtype, sh.steps, k), measure)


def _add(cat: Catalogue, group: str, case: str, k: int) -> None:
  size, batch = CASES[case]
  add_step(cat, group, LOOP_FAMILY, size, batch, "float32")
  first = not any(u.part == "loop" for u in cat.units)  # It prepares the sample.
  cat.one(group, "loop", loop_name(size, batch, "float32", k),
          lambda ctx: loop_row(ctx, LOOP_FAMILY, size, batch, "float32", k),
          LOOP_SECONDS[size] + K_COMPILE_SECONDS * (k > 1) + PREPARE_SECONDS * first)  # fmt: skip


def units(cat: Catalogue) -> None:
  """The d128 batch-32 step alone, then the loop at its shapes at one step a call and at
  `STEPS_PER_CALL` (the `loop` part)."""
  for k in (1, STEPS_PER_CALL):
    _add(cat, "loop", "d128 b32", k)


def measured(cat: Catalogue) -> None:
  """The d512 batch-128 step alone and the loop at its shapes (the H200's, 2026-11-28)."""
  _add(cat, "measured", "d512 b128", 1)


COLUMNS = (
  NAME,
  SHAPE,
  STATUS,
  column("step alone ms", lambda r: r.extra.get("alone_ms"), ".2f"),
  column("step alone b2b ms", lambda r: r.extra.get("alone_b2b_ms"), ".2f"),
  column("loop ms/step", lambda r: r.extra.get("loop_ms"), ".2f"),
  column("efficiency %", lambda r: 100 * r.extra.get("efficiency", math.nan), ".1f"),
  column("input wait %", lambda r: 100 * r.extra.get("input_wait", math.nan), ".1f"),
  column("host ms/step", lambda r: r.extra.get("host_ms"), ".2f"),
  column("padding", lambda r: r.extra.get("padding"), ".2f"),
  column("real tokens/s", lambda r: r.extra.get("real_tokens_s"), ",.0f"),
  column("step alone MFU %", lambda r: 100 * r.extra.get("alone_mfu", math.nan), ".1f"),
  column("step alone MFU b2b %", lambda r: 100 * r.extra.get("alone_mfu_b2b", math.nan), ".1f"),
  column("loop MFU %", lambda r: 100 * r.mfu, ".1f"),
  column("timed steps", lambda r: r.extra.get("timed_steps"), "d"),
  PROGRAM_GIB,
  DEVICE_PEAK,
)


def table(rows: list[Row]) -> str:
  return markdown(rows, COLUMNS)
