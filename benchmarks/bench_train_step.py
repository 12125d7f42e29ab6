"""Training-step throughput of every model family: ms/step and tokens/s against sequence length.

    python -m benchmarks.bench_train_step [--families slice,transformer] [--sizes d128,d256]
        [--lens 128,256,512,1024] [--batch 16] [--warmup 2] [--iters 5] [--set mixer_impl=chunked]
        [--no-attention]

One step = the train step a training run executes: `chessjax.step.build` of the family's
`configs/cwm.py` cell with the batch and one length bucket set (`world_model_config`): forward in
train mode (dropout on), the training loss (chessjax.world_model.metrics.loss_fn: the 75
per-label cross-entropies of the chessjax.labels head layout, averaged over labels and steps),
backward, global-norm clipping and AdamW with the family's recipe, and the non-finite guard
(skip, snapshot, rollback), on random valid move ids (START first, then ids of real
from/to/promotion triples) and random labels, no padding. The state is donated to the step, as
in training. `--lr` sets the recipe's learning rate (a constant schedule after no warmup).

Each configuration compiles (ahead of time, with warm-up steps: excluded), then times `--iters`
steps, each to completion; the table gives the median. "growth" is the step-time ratio to the
previous length and "exponent" log(time ratio) / log(length ratio) (1 = linear, 2 = quadratic).
"other%" is the CPU time other processes took during the timed steps, as a share of the machine:
on a shared machine, numbers with a high other% are slowed by neighbours. "temp KiB/token" is the
size of XLA's temporary buffers in the compiled step (its memory analysis: activations, gradients
and scratch live at the peak, beyond the donated state), per token of the batch: the memory cost
of each implementation, read from the compiled program. "MFU%" is the model's FLOPs per token
(chessjax.flops, the implementation the step runs) times tokens/s over the device's peak
(chessjax.peaks: on a CPU the best float32 matmul rate XLA reaches on it, measured in this
process). Families whose module does not import yet are listed as missing. `--no-attention`
measures a cost floor, not a model: the Transformer's attention returns v, so the step costs what
it would with a free attention kernel.

The step is built and timed by `benchmarks.harness` (`world_model_config`, `built_step`,
`random_batch`, `time_step`), as every benchmark's is.
"""

import argparse
import math
import os
import time

import jax

from benchmarks.harness import (
  built_step,
  device_batches,
  random_batch,
  time_step,
  world_model_config,
)
from chessjax import flops, peaks
from chessjax.models import FAMILIES, count_params, model_config, transformer


class CpuShare:
  """CPU seconds used by other processes since creation (from /proc/stat minus our own)."""

  def __init__(self):
    self.t0, self.busy0, self.own0 = time.time(), self._busy(), self._own()

  @staticmethod
  def _busy():
    try:
      with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    except OSError:
      return None
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # less idle, iowait

  @staticmethod
  def _own():
    t = os.times()
    return t.user + t.system

  def other_percent(self) -> float:
    busy = self._busy()
    if busy is None or self.busy0 is None:
      return float("nan")
    other = max(0.0, busy - self.busy0 - (self._own() - self.own0))
    return 100.0 * other / (max(time.time() - self.t0, 1e-9) * os.cpu_count())


def bench_one(family, size, steps, opts, overrides) -> dict:
  config = world_model_config(family, size, batch=opts.batch, steps=steps, **overrides)
  config.seed = 0
  config.optim.lr, config.optim.warmup_steps, config.optim.schedule = opts.lr, 0, "constant"
  built = built_step(config)
  n_params = count_params(built.model)
  batches = device_batches(built, [random_batch(opts.batch, steps, seed=i) for i in range(2)])
  shares = []
  t = time_step(
    built.fns.train_step,
    built.state,
    batches,
    warmup=opts.warmup,
    iters=opts.iters,
    timing=lambda: shares.append(CpuShare()),
  )
  tok_s = opts.batch * steps / (t.ms / 1e3)
  cfg = built.model.cfg
  peak = peaks.peak_flops(dtype=getattr(cfg, "dtype", "float32"))
  mfu = flops.mfu(tok_s, flops.per_token(cfg, steps), peak) if flops.supported(cfg) else math.nan
  return {
    "params": n_params,
    "ms": t.ms,
    "min_ms": t.min_ms,
    "tok_s": tok_s,
    "mfu": mfu,
    "loss": t.loss,
    "warm_s": t.compile_s,
    "other": shares[0].other_percent(),
    # XLA's buffer plan of the compiled step: temporaries live at its peak, beyond the
    # (donated) arguments. Per token of the batch; None where the backend does not report it.
    "temp_kb_tok": None if t.temp_bytes is None else t.temp_bytes / 1024 / (opts.batch * steps),
  }


def available(family: str) -> str | None:
  """None if the family's module imports, else the reason it does not."""
  try:
    model_config(family, "d128")
  except Exception as e:  # a module not written yet, or one that does not import
    return f"{type(e).__name__}: {e}"
  return None


def parse_sets(items) -> dict:
  out = {}
  for item in items:
    key, _, value = item.partition("=")
    for cast in (int, float):
      try:
        value = cast(value)
        break
      except ValueError:
        pass
    out[key] = value
  return out


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--families", default=",".join(FAMILIES))
  p.add_argument("--sizes", default="d128,d256")
  p.add_argument("--lens", default="128,256,512,1024")
  p.add_argument("--batch", type=int, default=16)
  p.add_argument("--warmup", type=int, default=2)
  p.add_argument("--iters", type=int, default=5)
  p.add_argument("--lr", type=float, default=1e-3)
  p.add_argument(
    "--set",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="model config override, applied to the families whose config has KEY",
  )
  p.add_argument(
    "--no-attention",
    action="store_true",
    help="cost floor, not a model: the Transformer's attention returns v unchanged, so the\n"
    "step costs what it would with a free attention kernel",
  )
  opts = p.parse_args(argv)
  if opts.no_attention:
    transformer.causal_attention = lambda q, k, v, **_: v
  families = [f for f in opts.families.split(",") if f]
  sizes = [s for s in opts.sizes.split(",") if s]
  lens = [int(t) for t in opts.lens.split(",") if t]
  sets = parse_sets(opts.set)

  print(
    f"jax {jax.__version__} | backend {jax.default_backend()} | devices {jax.device_count()} | "
    f"cpus {os.cpu_count()} | loadavg {os.getloadavg()[0]:.2f} | batch {opts.batch} | "
    f"warmup {opts.warmup} | timed {opts.iters} | overrides {sets or '-'}"
    + (" | NO ATTENTION (cost floor)" if opts.no_attention else ""),
    flush=True,
  )
  rows, missing = [], {}
  for family in families:
    why = available(family)
    if why is not None:
      missing[family] = why
      print(f"[missing] {family}: {why}", flush=True)
      continue
    for size in sizes:
      cfg = model_config(family, size)
      overrides = {k: v for k, v in sets.items() if hasattr(cfg, k)}
      prev = None
      for steps in lens:
        try:
          r = bench_one(family, size, steps, opts, overrides)
        except Exception as e:  # report and carry on with the other configurations
          print(f"[fail] {family} {size} T={steps}: {type(e).__name__}: {e}", flush=True)
          continue
        r.update(family=family, size=size, steps=steps, growth="", exponent="")
        if prev is not None:
          ratio = r["ms"] / prev["ms"]
          r["growth"] = f"{ratio:.2f}x"
          r["exponent"] = f"{math.log(ratio) / math.log(steps / prev['steps']):.2f}"
        prev = r
        rows.append(r)
        print(
          f"[done] {family} {size} T={steps}: {r['ms']:.1f} ms/step, {r['tok_s']:,.0f} tok/s, "
          f"MFU {100 * r['mfu']:.1f}% "
          f"(compile {r['warm_s']:.1f}s, loss {r['loss']:.3f}, other {r['other']:.0f}%)",
          flush=True,
        )

  print()
  print(
    "| family | size | params | T | ms/step (median) | min ms | tokens/s | MFU% | growth "
    "| exponent | temp KiB/token | other% |"
  )
  print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  for r in rows:
    print(
      f"| {r['family']} | {r['size']} | {r['params']:,} | {r['steps']} | {r['ms']:.1f} | "
      f"{r['min_ms']:.1f} | {r['tok_s']:,.0f} | {100 * r['mfu']:.1f} | {r['growth']} | "
      f"{r['exponent']} | "
      f"{'n/a' if r['temp_kb_tok'] is None else format(r['temp_kb_tok'], '.1f')} | "
      f"{r['other']:.0f} |"
    )
  for family in missing:
    print(f"| {family} | missing | | | | | | | | | | |")
  if missing:
    print()
    for family, why in missing.items():
      print(f"* {family} missing: {why}")


if __name__ == "__main__":
  main()
