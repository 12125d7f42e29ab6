"""The `population` part of `benchmarks.bench_device`: K members in one step against the step
alone, a K that does not fit refused before it runs, and its table."""

import dataclasses
import math

from benchmarks.device.common import (
  B2B_MS,
  COMPILE_S,
  DEVICE_PEAK,
  GIB,
  LOOP_FAMILY,
  MFU,
  MFU_B2B,
  NAME,
  PROGRAM_GIB,
  SHAPE,
  STATUS,
  STEP_MS,
  Catalogue,
  Context,
  Row,
  case_name,
  column,
  gib,
  markdown,
  mfus,
  population_seconds,
)
from benchmarks.device.steps import add_step, step_row
from benchmarks.harness import time_population, world_model_config
from chessjax import compile as compile_lib
from chessjax import flops, memory, peaks
from chessjax.models import model_config
from chessjax.ops.impl import width_of

POPULATION_FAMILY = LOOP_FAMILY
# (size, batch, the K of each row) of the H200's population rows (`measured`), under `auto`.
POPULATIONS = (
  ("d128", 32, (1, 4, 16, 64)),
  ("d128", 128, (1, 4, 16, 64)),
  ("d256", 128, (1, 4)),
  ("d512", 128, (1, 4)),
)
# The `population` part: each implementation of SLiCE's affine scan (chunked at two chunk sizes;
# at 256 steps a chunk of 256 is the associative scan) in populations of K at d128 batch 128, the
# grid's batch: what `chessjax.ops.impl`'s table needs at rows = batch x K (`bench_scans --device`).
IMPLS = (("sequential", None), ("chunked", 16), ("chunked", 64), ("associative", None))
IMPL_CASE, IMPL_KS = ("d128", 128), (16, 64)


def impl_label(impl: str | None, chunk: int | None) -> str:
  """The row name's implementation: "" for `auto`, else e.g. " chunked C64"."""
  return "" if impl is None else f" {impl}" + (f" C{chunk}" if chunk else "")


class Refused(Exception):
  """A population whose step would not fit the device (the memory check's estimate)."""

  def __init__(self, needed: float, limit: int, largest: int, how: str):
    super().__init__(f"refused: needs {needed / GIB:.1f} GiB > {limit / GIB:.1f} GiB ({how})")
    self.needed, self.largest, self.how = needed, largest, how


def memory_limit(ctx: Context) -> int | None:
  """The population check's limit in bytes: `--memory-limit-gb`, else the shapes' (the toy's,
  at most the device's), else the device's; None where the backend does not say."""
  if ctx.limit is None:
    gb = ctx.opts.memory_limit_gb or ctx.shapes.memory_limit_gb
    device = memory.available_bytes()
    ctx.limit = int(gb * GIB) if gb else device
    if gb and device is not None and not ctx.opts.memory_limit_gb:
      ctx.limit = min(ctx.limit, device)
  return ctx.limit


def population_row(ctx: Context, family: str, size: str, batch: int, k: int,
                   impl: str | None = None, chunk: int | None = None) -> Row:  # fmt: skip
  """A population of K members of the float32 step, against the step alone (back to back), its
  recurrence under `auto` or as `impl` (chunked at `chunk`)."""
  sh = ctx.shapes
  size_run, batch_run = sh.size[size], sh.batch[batch]
  k_run = (sh.k_impl if impl else sh.k)[k]
  alone = step_row(ctx, family, size, batch, "float32")
  limit = memory_limit(ctx)
  shape = f"{size_run}, batch {batch_run}, {sh.steps} steps, K = {k_run}" + (
    f", {impl}" + (f", chunk {chunk}" if chunk else "") if impl else ""
  )
  key = ("population", family, size_run, batch_run, sh.steps, impl, chunk)
  overrides = {"mixer_impl": impl} if impl else {}
  if chunk:
    overrides["chunk_size"] = chunk
  cfg = dataclasses.replace(model_config(family, size_run), **overrides)
  recurrence = {}
  if impl:  # The shape `chessjax.ops.impl`'s table keys on (`benchmarks.bench_scans --device`).
    dims = (cfg.d // cfg.block_size, cfg.block_size)
    recurrence = {"recurrence": "affine_scan", "impl": impl, "chunk": chunk, "family": family,
                  "size": size_run, "rows": batch_run * k_run, "length": sh.steps,
                  "width": width_of("affine_scan", dims)}  # fmt: skip

  def measure() -> Row:
    # A smaller K of the same shapes already measured: its program per member (memory taken as
    # proportional to K, `compile.largest_population`) may refuse this K before anything is built.
    smaller = [
      r
      for memo_key, r in ctx.memo.items()
      if memo_key[:7] == key
      and memo_key[7] < k_run
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
                                  dtype="float32", **overrides)  # fmt: skip
      t, build_s = time_population(config, k_run, warmup=ctx.opts.warmup, iters=ctx.opts.iters,
                                   admit=admit)  # fmt: skip
    except Refused as e:
      return Row("population", "", shape=shape, status=str(e), program_gib=e.needed / GIB,
                 extra={"k": k_run, "largest_k": e.largest, "limit_gib": limit / GIB,
                        **recurrence})  # fmt: skip
    tokens = k_run * batch_run * sh.steps
    mfu, mfu_b2b = mfus(tokens, flops.per_token(cfg, sh.steps),
                        peaks.peak_flops(dtype="float32"), t.ms, t.b2b_ms)  # fmt: skip
    return Row("population", "", shape=shape, compile_s=t.compile_s, ms=t.ms, b2b_ms=t.b2b_ms,
               tokens_s=tokens / (t.b2b_ms / 1e3), mfu=mfu, mfu_b2b=mfu_b2b,
               program_gib=gib(t.program_bytes),
               extra={**recurrence, "k": k_run, "member_steps_s": 1e3 * k_run / t.b2b_ms,
                      "alone_b2b_ms": alone.b2b_ms, "speedup": k_run * alone.b2b_ms / t.b2b_ms,
                      "build_s": build_s, "program_bytes": t.program_bytes or math.nan,
                      "largest_k": None if limit is None or t.program_bytes is None else
                      compile_lib.largest_population(t.program_bytes, k_run, limit),
                      "limit_gib": gib(limit)})  # fmt: skip

  return ctx.measure((*key, k_run), measure)


def _add(cat: Catalogue, group: str, size: str, batch: int, k: int, impl=None, chunk=None):
  name = f"population {POPULATION_FAMILY} {case_name(size, batch)} K{k}{impl_label(impl, chunk)}"
  cat.one(group, "population", name,
          lambda ctx: population_row(ctx, POPULATION_FAMILY, size, batch, k, impl, chunk),
          population_seconds(size, batch, k))  # fmt: skip


def units(cat: Catalogue) -> None:
  """The `population` part: the step alone at d128 batch 128, then each implementation at each
  K of `IMPL_KS` in growing order (the device peak is then the row's)."""
  size, batch = IMPL_CASE
  add_step(cat, "population", POPULATION_FAMILY, size, batch, "float32")
  for k in IMPL_KS:
    for impl, chunk in IMPLS:
      _add(cat, "population", size, batch, k, impl, chunk)


def measured(cat: Catalogue) -> None:
  """The H200's population rows (2026-11-28), under `auto`: each shape's step alone, then its K in
  growing order."""
  for size, batch, ks in POPULATIONS:
    add_step(cat, "measured", POPULATION_FAMILY, size, batch, "float32")
    for k in ks:
      _add(cat, "measured", size, batch, k)


COLUMNS = (
  NAME,
  SHAPE,
  STATUS,
  COMPILE_S,
  STEP_MS,
  B2B_MS,
  column("member-steps/s", lambda r: r.extra.get("member_steps_s"), ",.1f"),
  column("alone b2b ms", lambda r: r.extra.get("alone_b2b_ms"), ".2f"),
  column("speed-up over K alone", lambda r: r.extra.get("speedup"), ".2f"),
  MFU,
  MFU_B2B,
  PROGRAM_GIB,
  column("largest K that fits", lambda r: r.extra.get("largest_k"), "d"),
  DEVICE_PEAK,
)


def table(rows: list[Row]) -> str:
  return markdown(rows, COLUMNS)
