"""Training-step throughput of every model family: ms/step and tokens/s against sequence length.

    python -m benchmarks.bench_train_step [--families slice,transformer] [--sizes d128,d256]
        [--lens 128,256,512,1024] [--batch 16] [--warmup 2] [--iters 5] [--set mixer_impl=chunked]
        [--no-attention]

One step = forward (train mode, dropout on) + the training loss
(chessjax.world_model.metrics.loss_fn: the 75 per-label cross-entropies of the chessjax.labels head
layout, averaged over labels and steps) + backward + global-norm clipping (1.0) + an optax AdamW
update, on random valid move ids (START first, then ids of real from/to/promotion triples) and
random labels, no padding. The step is a pure function of (params, rest, opt_state, batch), split
from the nnx model once with `nnx.split` and compiled with `jax.jit` with the state donated, as the
training loop does.

Each configuration compiles (warm-up steps, excluded), then times `--iters` steps, each to
completion; the table gives the median. "growth" is the step-time ratio to the previous length
and "exponent" log(time ratio) / log(length ratio) (1 = linear, 2 = quadratic). "other%" is the
CPU time other processes took during the timed steps, as a share of the machine: on a shared
machine, numbers with a high other% are slowed by neighbours. "temp KiB/token" is the size of XLA's
temporary buffers in the compiled step (its memory analysis: activations, gradients and scratch
live at the peak, beyond the donated state), per token of the batch: the memory cost of each
implementation, read from the compiled program. "MFU%" is the model's FLOPs per token
(chessjax.flops, the implementation the step runs) times tokens/s over the device's peak
(chessjax.peaks: on a CPU the best float32 matmul rate XLA reaches on it, measured in this
process). Families whose module does not
import yet are listed as missing. `--no-attention` measures a cost floor, not a model: the
Transformer's attention returns v, so the step costs what it would with a free attention kernel.
"""

import argparse
import math
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from chessjax import encoding, flops, labels, peaks
from chessjax.models import FAMILIES, count_params, create_model, model_config, transformer
from chessjax.optim import decay_mask
from chessjax.world_model import metrics


def random_batch(batch: int, steps: int, seed: int) -> dict:
  """Random valid move ids (START first, no padding) and random labels of the right classes."""
  rng = np.random.default_rng(seed)
  frm = rng.integers(0, 64, (batch, steps))
  to = (frm + rng.integers(1, 64, (batch, steps))) % 64
  promo = rng.integers(0, 5, (batch, steps)) * (rng.random((batch, steps)) < 0.02)
  moves = ((frm * 64 + to) * 5 + promo).astype(np.int32)
  moves[:, 0] = encoding.START_ID
  states = rng.integers(0, labels.LABEL_CLASSES, (batch, steps, labels.NUM_LABELS))
  return {
    "moves": jnp.asarray(moves),
    "states": jnp.asarray(states.astype(np.uint8)),
    "mask": jnp.ones((batch, steps), bool),
  }


def make_train_step(graphdef, tx):
  """The pure step (params, rest, opt_state, batch) -> (params, rest, opt_state, loss)."""

  def train_step(params, rest, opt_state, batch):
    def loss_of(params, rest):
      model = nnx.merge(graphdef, params, rest, copy=True)
      logits = model(batch["moves"], train=True)
      loss = metrics.loss_fn(logits, batch["states"], batch["mask"])
      return loss, nnx.state(model, nnx.Not(nnx.Param))  # dropout RNG counters move on

    (loss, new_rest), grads = jax.value_and_grad(loss_of, has_aux=True)(params, rest)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), new_rest, opt_state, loss

  return jax.jit(train_step, donate_argnums=(0, 1, 2))


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
  model = create_model(family, size, seed=0, **overrides)
  n_params = count_params(model)
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  tx = optax.chain(
    optax.clip_by_global_norm(1.0),
    optax.adamw(opts.lr, b1=0.9, b2=0.95, eps=1e-8, weight_decay=1e-3, mask=decay_mask(params)),
  )
  opt_state = tx.init(params)
  step = make_train_step(graphdef, tx)
  batches = [random_batch(opts.batch, steps, seed=i) for i in range(2)]
  t0 = time.perf_counter()
  step = step.lower(params, rest, opt_state, batches[0]).compile()  # ahead of time, timed below
  memory = step.memory_analysis()
  for i in range(opts.warmup):
    params, rest, opt_state, loss = step(params, rest, opt_state, batches[i % 2])
    jax.block_until_ready(loss)
  compile_s = time.perf_counter() - t0
  share, times = CpuShare(), []
  for i in range(opts.iters):
    t = time.perf_counter()
    params, rest, opt_state, loss = step(params, rest, opt_state, batches[i % 2])
    jax.block_until_ready(loss)
    times.append(time.perf_counter() - t)
  med = statistics.median(times)
  tok_s = opts.batch * steps / med
  peak = peaks.peak_flops(dtype=getattr(model.cfg, "dtype", "float32"))
  mfu = (
    flops.mfu(tok_s, flops.per_token(model.cfg, steps), peak)
    if flops.supported(model.cfg)
    else math.nan
  )
  return {
    "params": n_params,
    "ms": 1e3 * med,
    "min_ms": 1e3 * min(times),
    "tok_s": tok_s,
    "mfu": mfu,
    "loss": float(loss),
    "warm_s": compile_s,
    "other": share.other_percent(),
    # XLA's buffer plan of the compiled step: temporaries live at its peak, beyond the
    # (donated) arguments. Per token of the batch; None where the backend does not report it.
    "temp_kb_tok": None
    if memory is None
    else memory.temp_size_in_bytes / 1024 / (opts.batch * steps),
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
          f"(compile+warmup {r['warm_s']:.1f}s, loss {r['loss']:.3f}, other {r['other']:.0f}%)",
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
