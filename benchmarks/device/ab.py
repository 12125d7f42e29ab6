"""The `cmdbuf` and `unroll` parts of `benchmarks.bench_device`: XLA's command buffers off and on,
each in a process of its own, and `lax.scan` unrolled on the sequential forms, each against its
baseline; and their table."""

import dataclasses
import json
import os
import subprocess
import sys
import time

from benchmarks.device.common import (
  B2B_MS,
  COMPILE_S,
  DEVICE_PEAK,
  LOOP_FAMILY,
  MFU,
  MFU_B2B,
  NAME,
  PROGRAM_GIB,
  REPO,
  SECONDS,
  SHAPE,
  STATUS,
  STEP_MS,
  Catalogue,
  Context,
  Row,
  Unit,
  markdown,
  matches,
  population_seconds,
)
from benchmarks.device.steps import RECURRENCE_SECONDS, recurrence_row, step_row
from chessjax.ops.impl import RECURRENCES

COMMAND_BUFFERS = (
  "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL --xla_gpu_graph_min_graph_size=1"
)
CHILD_MEM_FRACTION = "0.10"  # An A/B process's share of the device (the parent holds 0.85).
# The rows each command-buffer setting runs: the 256-step while loop of a sequential scan in
# SLiCE's d128 step (`auto` on GPU: launch-bound, where command buffers can help), in a population
# of 16 of it, and in the affine scan alone at the d512 layer's shapes.
AB_TARGETS = ("slice d128 b32 float32", "population slice d128 b32 K16", "affine_scan sequential")
UNROLLS = (4, 16)
CHILD_SECONDS = 20  # Rough seconds of an A/B process's start (not measured yet: a guess).


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
  wanted = [t for t in AB_TARGETS if matches(names[t], "cmdbuf", ctx.only)]
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


def command_buffers(cat: Catalogue) -> None:
  """The `cmdbuf` part: a unit per setting (its rows come from one process of its own)."""
  for setting in ("off", "on"):
    names = tuple(f"cmdbuf {setting}: {t}" for t in AB_TARGETS)
    seconds = CHILD_SECONDS + SECONDS["d128"] + population_seconds("d128", 32, 16)
    cat.add(Unit("cmdbuf", "cmdbuf", names, lambda ctx, s=setting: command_buffer_rows(ctx, s),
                 seconds + RECURRENCE_SECONDS))  # fmt: skip


def unrolls(cat: Catalogue) -> None:
  """The `unroll` part: each sequential form at each unroll."""
  unroll_targets = [(f"{LOOP_FAMILY} d128 b32 float32", ("step", LOOP_FAMILY, "d128", 32,
                     "float32"), SECONDS["d128"] + 3)]  # fmt: skip
  for recurrence in RECURRENCES:
    unroll_targets.append((f"{recurrence} sequential", ("recurrence", recurrence, "sequential"),
                           RECURRENCE_SECONDS + 2))  # fmt: skip
  for name, target, seconds in unroll_targets:
    for k in UNROLLS:
      cat.one("unroll", "unroll", f"{name} unroll{k}",
              lambda ctx, t=target, k=k: unroll_row(ctx, t, k), seconds)  # fmt: skip


def against(r: Row) -> str:
  """The row's step against its baseline's: command buffers off, or unroll 1."""
  ratio = r.extra.get("vs_off", r.extra.get("vs_unroll1"))
  out = (
    "-"
    if ratio is None
    else f"{ratio:.2f}x" + (" of off" if "vs_off" in r.extra else " of unroll 1")
  )
  if "scans_unrolled" in r.extra:
    out += f" (scans traced: {r.extra['scans_unrolled']})"
  return out


COLUMNS = (
  NAME,
  SHAPE,
  STATUS,
  COMPILE_S,
  STEP_MS,
  B2B_MS,
  ("against the baseline", "---:", against),
  MFU,
  MFU_B2B,
  PROGRAM_GIB,
  DEVICE_PEAK,
)


def table(rows: list[Row]) -> str:
  return markdown(rows, COLUMNS)
