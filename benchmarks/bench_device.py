"""The accelerator check: every train step and recurrence that matters, timed on one device.

    python -m benchmarks.bench_device --out runs/bench_device [--budget-minutes 7.5] [--toy]

Three parts, each row compiled ahead of time (compile seconds: lower + compile), run for
`--warmup` steps, then timed over `--iters` steps, each to completion (`block_until_ready`; the
median is reported):

1. `train`: the world-model train step (forward in train mode, the 75-label loss, backward,
   clipping, AdamW; as `benchmarks.bench_train_step`) of every family of the paper's grid
   (`chessjax.models.registry.FAMILIES`) in two cases, `d128 b32` (d128, batch 32) and
   `d512 b128` (d512, batch 128, the paper's slowest runs), games cut at `STEPS` = 256 steps
   (random valid moves and labels, no padding), under both precision policies `float32` and
   `bfloat16` (`model.dtype`: parameters and optimizer state float32 either way). Each family
   runs the implementation its `mixer_impl="auto"` picks on the device.
2. `recurrence`: each recurrence of `chessjax.ops.impl.RECURRENCES` in each of its
   implementations (chunked at several chunk sizes) at the d512 layer's shapes and the d512 case's
   batch and length: forward, and forward + backward (gradient of every input), float32 inputs.
3. `lm`: GPT-2 small's language-model step at the paper's batch, 60 games of 512 tokens
   (Toshniwal et al.; `configs/lm.py`), both precision policies.

Columns: tokens/s = batch x length / step time; MFU = tokens/s x the model's FLOPs per token
(`chessjax.flops`, training) over the device's peak for the policy (`chessjax.peaks`; the
measured matmul rate on a CPU); "program GiB" = the compiled program's buffers (XLA's memory
analysis: arguments, outputs, temporaries); "device peak GiB" = the device's
`peak_bytes_in_use` after the row, a running maximum over the rows so far ("-" where the
backend keeps no count, e.g. the CPU).

Sizing: about 60 programs; the compiles dominate. `--budget-minutes` (default 7.5, 0: none)
stops starting rows once spent; rows not run are listed as `skipped` in both outputs, so a slow
device still returns a table in time. The order puts the d512 train rows first.

Output: DIR/bench_device.md (the table) and DIR/bench_device.json (device kind, platform, jax
version, date, every row), also printed. `--only A,B` runs the rows whose names contain A or B
and lists the others as skipped. `--toy`: every row at toy shapes (d128 models at batch 2,
length 16, small recurrences, GPT-2 `tiny`), a few seconds per part on one CPU core: the suite
runs it (tests/test_bench_device.py) so the check cannot rot before a GPU runs it.
"""

import argparse
import dataclasses
import datetime
import json
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from benchmarks.bench_train_step import random_batch
from chessjax import flops, memory, peaks
from chessjax.models import create_model, model_config, registry
from chessjax.ops import delta_rule, slice_scan, ssd
from chessjax.ops.impl import RECURRENCES
from chessjax.world_model import metrics

STEPS = 256  # Game length of every world-model row (the paper's games are mostly shorter).
CASES = {"d128 b32": ("d128", 32), "d512 b128": ("d512", 128)}
DTYPES = ("float32", "bfloat16")
FAMILIES = registry.FAMILIES  # The paper's grid: main families and ablations (and MIMO).
CHUNKS = {"affine_scan": (16, 64, 256), "delta_rule": (32, 64, 128), "ssd": (32, 64, 128)}
LM = ("gpt2", "small", 60, 512)  # family, size, batch, tokens (configs/lm.py, docs/lm.md)
LM_VOCAB = 77  # chessjax.lm.tokens' vocabulary
GIB = 2**30
# --toy: XLA's quickest compile (the toy rows check that every row runs, not its speed).
TOY_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@dataclasses.dataclass(frozen=True)
class Shapes:
  """What a run measures at: the world-model cases' (size, batch), the length, chunk sizes, the
  recurrences' dimensions and the LM step."""

  cases: dict
  steps: int
  chunks: dict
  op_batch: int
  slice_dims: tuple  # (G blocks, block size b)
  delta_dims: tuple  # (H, K, V)
  ssd_dims: tuple  # (H, P, N)
  lm: tuple


FULL = Shapes(CASES, STEPS, CHUNKS, 128, (64, 8), (8, 48, 96), (16, 64, 128), LM)
TOY = Shapes(
  {name: ("d128", 2) for name in CASES},
  16,
  {name: (2, 4, 8) for name in CHUNKS},  # Named in the table as the full run's chunks.
  2,
  (4, 4),
  (2, 8, 8),
  (2, 8, 8),
  ("gpt2", "tiny", 2, 32),
)


@dataclasses.dataclass
class Row:
  part: str  # train | recurrence | lm
  name: str  # unique within a run; the same in toy and full runs
  shape: str = ""
  status: str = "ok"
  compile_s: float = math.nan
  ms: float = math.nan  # median step (recurrence: forward + backward)
  forward_ms: float = math.nan  # recurrence rows only
  tokens_s: float = math.nan
  mfu: float = math.nan
  program_gib: float = math.nan
  device_peak_gib: float = math.nan


def _step(graphdef, tx, loss_of: Callable):
  """The pure, donated train step (params, rest, opt_state, batch) -> (..., loss)."""

  def step(params, rest, opt_state, batch):
    def loss(params, rest):
      model = nnx.merge(graphdef, params, rest, copy=True)
      return loss_of(model, batch), nnx.state(model, nnx.Not(nnx.Param))

    (value, rest), grads = jax.value_and_grad(loss, has_aux=True)(params, rest)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), rest, opt_state, value

  return jax.jit(step, donate_argnums=(0, 1, 2))


def _world_model_loss(model, batch):
  return metrics.loss_fn(model(batch["moves"], train=True), batch["states"], batch["mask"])


def _lm_loss(model, batch):
  logits = model(batch["tokens"][:, :-1], train=True).astype(jnp.float32)
  return optax.softmax_cross_entropy_with_integer_labels(logits, batch["tokens"][:, 1:]).mean()


def _lm_batch(batch: int, length: int, seed: int) -> dict:
  rng = np.random.default_rng(seed)
  return {"tokens": jnp.asarray(rng.integers(0, LM_VOCAB, (batch, length + 1), dtype=np.int32))}


def _timed(fn, args_of: Callable, warmup: int, iters: int) -> list[float]:
  """Seconds of each of `iters` calls after `warmup`; `args_of(i, out)` gives call i's arguments
  from the previous call's output (None first)."""
  out, times = None, []
  for i in range(warmup + iters):
    args = args_of(i, out)
    started = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    if i >= warmup:
      times.append(time.perf_counter() - started)
  return times


def _device_peak_gib() -> float:
  stats = jax.devices()[0].memory_stats() or {}
  return stats["peak_bytes_in_use"] / GIB if "peak_bytes_in_use" in stats else math.nan


def _program_gib(compiled) -> float:
  n = memory.program_bytes(compiled)
  return math.nan if n is None else n / GIB


def train_row(part, name, model_fn, batch_fn, loss_of, tokens, flops_per_token, dtype, opts):
  """One train step: built from `model_fn()`, fed `batch_fn(seed)` (two batches alternate)."""
  model = model_fn()
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-4, b2=0.95, weight_decay=0.0))
  opt_state = tx.init(params)
  batches = [batch_fn(0), batch_fn(1)]
  started = time.perf_counter()
  lowered = _step(graphdef, tx, loss_of).lower(params, rest, opt_state, batches[0])
  compiled = lowered.compile(TOY_COMPILE if opts.toy else None)
  compile_s = time.perf_counter() - started
  state = [params, rest, opt_state]

  def args_of(i, out):
    if out is not None:
      state[:] = out[:3]
    return (*state, batches[i % 2])

  med = statistics.median(_timed(compiled, args_of, opts.warmup, opts.iters))
  peak = peaks.peak_flops(dtype=dtype)
  return Row(
    part,
    name,
    compile_s=compile_s,
    ms=1e3 * med,
    tokens_s=tokens / med,
    mfu=flops.mfu(tokens / med, flops_per_token, peak),
    program_gib=_program_gib(compiled),
  )


def train_rows(shapes: Shapes) -> list[tuple[str, str, Callable]]:
  """(part, name, run(opts) -> Row) of the world-model steps (d512 cases first), then the LM's."""
  out = []
  for case in sorted(shapes.cases, key=lambda c: "d512" not in c):
    size, batch = shapes.cases[case]
    for family in FAMILIES:
      for dtype in DTYPES:

        def run(opts, family=family, size=size, batch=batch, dtype=dtype):
          per_token = flops.per_token(model_config(family, size, dtype=dtype), shapes.steps)
          row = train_row(
            "train",
            "",
            lambda: create_model(family, size, dtype=dtype),
            lambda seed: random_batch(batch, shapes.steps, seed),
            _world_model_loss,
            batch * shapes.steps,
            per_token,
            dtype,
            opts,
          )
          row.shape = f"{size}, batch {batch}, {shapes.steps} steps"
          return row

        run.key = ("train", family, size, batch, dtype)
        out.append(("train", f"{family} {case} {dtype}", run))
  family, size, batch, length = shapes.lm
  for dtype in DTYPES:

    def run(opts, dtype=dtype):
      cfg = model_config(family, size, dtype=dtype)
      row = train_row(
        "lm",
        "",
        lambda: create_model(family, size, head="tokens", vocab_size=LM_VOCAB, dtype=dtype),
        lambda seed: _lm_batch(batch, length, seed),
        _lm_loss,
        batch * length,
        flops.per_token(cfg, length, head_dim=LM_VOCAB),
        dtype,
        opts,
      )
      row.shape = f"{family} {size}, batch {batch}, {length} tokens"
      return row

    run.key = ("lm", dtype)
    out.append(("lm", f"gpt2 small {dtype}", run))
  return out


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


def recurrence_row(recurrence: str, impl: str, chunk: int, shapes: Shapes, opts) -> Row:
  """Forward, and forward + backward (the gradient of every input), of one implementation."""
  inputs, fn = recurrence_inputs(recurrence, shapes)

  def forward(*xs):
    return fn(*xs, impl, chunk)

  def loss(*xs):
    return jnp.sum(forward(*xs).astype(jnp.float32) ** 2)

  started = time.perf_counter()
  options = TOY_COMPILE if opts.toy else None
  fwd = jax.jit(forward).lower(*inputs).compile(options)
  both = jax.jit(jax.value_and_grad(loss, argnums=tuple(range(len(inputs))))).lower(*inputs)
  both = both.compile(options)
  compile_s = time.perf_counter() - started
  fwd_s = statistics.median(_timed(fwd, lambda i, out: inputs, opts.warmup, opts.iters))
  both_s = statistics.median(_timed(both, lambda i, out: inputs, opts.warmup, opts.iters))
  tokens = shapes.op_batch * shapes.steps
  return Row(
    "recurrence",
    "",
    compile_s=compile_s,
    ms=1e3 * both_s,
    forward_ms=1e3 * fwd_s,
    tokens_s=tokens / both_s,
    program_gib=_program_gib(both),
  )


def recurrence_rows(shapes: Shapes) -> list[tuple[str, str, Callable]]:
  out = []
  for recurrence, impls in RECURRENCES.items():
    for impl in impls:
      chunks = shapes.chunks[recurrence] if impl == "chunked" else (0,)
      for chunk in chunks:
        name = f"{recurrence} {impl}"
        if impl == "chunked":  # The full run's chunk size, so toy and full rows share names.
          name += f" C{FULL.chunks[recurrence][chunks.index(chunk)]}"

        def run(opts, recurrence=recurrence, impl=str(impl), chunk=chunk or 64):
          row = recurrence_row(recurrence, impl, chunk, shapes, opts)
          row.shape = f"batch {shapes.op_batch}, {shapes.steps} steps" + (
            f", chunk {chunk}" if impl == "chunked" else ""
          )
          return row

        run.key = ("recurrence", name)
        out.append(("recurrence", name, run))
  return out


def all_rows(shapes: Shapes) -> list[tuple[str, str, Callable]]:
  """Every row in run order: d512 train steps, d128 train steps, GPT-2, recurrences."""
  return [*train_rows(shapes), *recurrence_rows(shapes)]


def _fmt(x, spec: str) -> str:
  return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def table(rows: list[Row]) -> str:
  lines = [
    "| part | row | shape | status | compile s | step ms | forward ms | tokens/s | MFU % "
    "| program GiB | device peak GiB |",
    "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for r in rows:
    lines.append(
      f"| {r.part} | {r.name} | {r.shape} | {r.status} | {_fmt(r.compile_s, '.1f')} | "
      f"{_fmt(r.ms, '.2f')} | {_fmt(r.forward_ms, '.2f')} | {_fmt(r.tokens_s, ',.0f')} | "
      f"{_fmt(100 * r.mfu, '.1f')} | {_fmt(r.program_gib, '.2f')} | "
      f"{_fmt(r.device_peak_gib, '.2f')} |"
    )
  return "\n".join(lines) + "\n"


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
  }


def run(opts) -> dict:
  """Runs every row within the budget; returns the JSON document (also written to opts.out)."""
  shapes = TOY if opts.toy else FULL
  budget = opts.budget_minutes * 60 if opts.budget_minutes > 0 else math.inf
  started, rows, done = time.perf_counter(), [], {}
  only = [p for p in opts.only.split(",") if p]
  for part, name, fn in all_rows(shapes):
    if only and not any(p in name for p in only):
      rows.append(Row(part, name, status="skipped (--only)"))
    elif time.perf_counter() - started > budget:
      rows.append(Row(part, name, status="skipped (budget)"))
    else:
      try:
        # Toy cases share their shapes: a program already measured is reported again.
        row = dataclasses.replace(done[fn.key]) if fn.key in done else fn(opts)
        done[fn.key] = row
      except Exception as e:  # One failing row (e.g. out of memory) must not lose the others.
        row = Row(part, name, status=f"failed: {type(e).__name__}: {str(e)[:200]}")
      row.part, row.name = part, name
      row.device_peak_gib = _device_peak_gib()
      rows.append(row)
      jax.clear_caches()  # Free the compiled programs; a long run holds ~60 of them otherwise.
    print(table([rows[-1]]).splitlines()[-1], flush=True)
  doc = {
    **header(),
    "toy": opts.toy,
    "warmup": opts.warmup,
    "iters": opts.iters,
    "seconds": round(time.perf_counter() - started, 1),
    "rows": [dataclasses.asdict(r) for r in rows],
  }
  out = Path(opts.out)
  out.mkdir(parents=True, exist_ok=True)
  title = (
    f"bench_device on {doc['device_kind']} ({doc['platform']}), jax {doc['jax']}, {doc['date']}"
    f"{', TOY shapes' if opts.toy else ''}: {doc['seconds']} s\n\n"
  )
  (out / "bench_device.md").write_text(title + table(rows))
  (out / "bench_device.json").write_text(json.dumps(doc, indent=1, allow_nan=True) + "\n")
  print(f"\n{title}{table(rows)}\nwrote {out / 'bench_device.md'} and {out / 'bench_device.json'}")
  return doc


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--out", default="runs/bench_device", help="folder for the .md and .json")
  p.add_argument("--toy", action="store_true", help="toy shapes: seconds on one CPU core")
  p.add_argument("--budget-minutes", type=float, default=7.5, help="0: no limit")
  p.add_argument("--warmup", type=int, default=2)
  p.add_argument("--iters", type=int, default=5)
  p.add_argument(
    "--only", default="", help="run only rows whose name contains one of these (comma-separated)"
  )
  opts = p.parse_args(argv)
  if opts.toy:  # Every row, whatever the machine's speed; the fewest timed steps.
    opts.budget_minutes = 0
    if "--warmup" not in (argv or []):
      opts.warmup, opts.iters = 1, 2
  return opts


def main(argv=None) -> dict:
  return run(parse_args(argv))


if __name__ == "__main__":
  main()
