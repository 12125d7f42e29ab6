"""The train step's matmuls, XLA against torch on the same CPU: GFLOP/s per shape.

    python -m benchmarks.bench_matmul [--tokens 8192] [--d 128] [--torch-python PATH]

The d128 models' step is mostly token-wise matmuls: `tokens` rows (batch 16 x T=512 by default)
through d -> 8d (the Transformer's SwiGLU input), d -> 1878 (the state head), each forward
(x W), as the weight gradient (x^T g) and as the input gradient (g W^T). This times each in
float32 with jax (jitted) and, given `--torch-python` (an interpreter with torch), with torch
eager in a subprocess using the same number of threads, so the two columns are read on the same
machine minutes apart. It explains how fast a step can be: when the matmuls alone take half of
the yardstick's whole step, no 2x is possible without faster matmuls.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SHAPES = {"mlp in (d -> 8d)": 8, "state head (d -> 1878)": None}
OPS = ("forward x W", "weight grad x^T g", "input grad g W^T")


def cases(tokens: int, d: int):
  for name, mult in SHAPES.items():
    out = d * mult if mult else 1878
    for op in OPS:
      yield f"{name}, {op}", tokens, d, out, op


def time_it(fn, iters: int) -> float:
  fn()
  fn()
  times = []
  for _ in range(iters):
    t = time.perf_counter()
    fn()
    times.append(time.perf_counter() - t)
  return statistics.median(times)


def run_jax(tokens, d, iters):
  import jax

  out = {}
  key = jax.random.key(0)
  for label, n, k, m, op in cases(tokens, d):
    x, w, g = (jax.random.normal(key, s) for s in ((n, k), (k, m), (n, m)))
    f, args = {
      OPS[0]: (jax.jit(lambda x, w: x @ w), (x, w)),
      OPS[1]: (jax.jit(lambda x, g: x.T @ g), (x, g)),
      OPS[2]: (jax.jit(lambda g, w: g @ w.T), (g, w)),
    }[op]
    out[label] = 2 * n * k * m / time_it(lambda: jax.block_until_ready(f(*args)), iters) / 1e9  # noqa: B023
  return out


def run_torch(tokens, d, iters, threads):
  import torch

  torch.set_num_threads(threads)
  out = {}
  for label, n, k, m, op in cases(tokens, d):
    x, w, g = torch.randn(n, k), torch.randn(k, m), torch.randn(n, m)
    f = {OPS[0]: lambda: x @ w, OPS[1]: lambda: x.T @ g, OPS[2]: lambda: g @ w.T}[op]  # noqa: B023
    out[label] = 2 * n * k * m / time_it(f, iters) / 1e9
  return out


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--tokens", type=int, default=8192)
  ap.add_argument("--d", type=int, default=128)
  ap.add_argument("--iters", type=int, default=9)
  ap.add_argument("--torch-python", help="an interpreter with torch, for the torch column")
  ap.add_argument("--torch-only", action="store_true", help=argparse.SUPPRESS)  # the subprocess
  args = ap.parse_args(argv)
  threads = os.cpu_count()
  if args.torch_only:
    print(json.dumps(run_torch(args.tokens, args.d, args.iters, threads)))
    return
  jax_rates = run_jax(args.tokens, args.d, args.iters)
  torch_rates = {}
  if args.torch_python:
    cmd = [args.torch_python, __file__, "--torch-only", f"--tokens={args.tokens}", f"--d={args.d}"]
    done = subprocess.run(cmd + [f"--iters={args.iters}"], capture_output=True, text=True)
    if done.returncode:
      sys.exit(f"torch run failed:\n{done.stderr}")
    torch_rates = json.loads(done.stdout.strip().splitlines()[-1])
  print(f"tokens {args.tokens} | d {args.d} | float32 | {threads} threads | GFLOP/s, median")
  print("| matmul | jax (XLA) | torch | jax / torch |")
  print("|---|---:|---:|---:|")
  for label, rate in jax_rates.items():
    other = torch_rates.get(label)
    cols = f"{other:.0f} | {rate / other:.2f}" if other else "- | -"
    print(f"| {label} | {rate:.0f} | {cols} |")


if __name__ == "__main__":
  main()
