"""Peak FLOP/s and memory bandwidth of the devices chessjax runs on: the denominators of MFU
(`chessjax.flops.mfu`) and of the roofline estimates of docs/performance.md.

Accelerators: the vendors' dense (no 2:4 sparsity) per-chip numbers, matched on JAX's
`device.device_kind`. GPUs have two matmul peaks: bfloat16, and TF32 for float32 matmuls (which
XLA runs at TF32 on Ampere and newer unless `jax_default_matmul_precision` asks for more, as the
paper's PyTorch runs did with `allow_tf32`). TPUs multiply in bfloat16 (float32 at the default
precision is bfloat16 passes), so their one peak stands for both.

The CPU has no datasheet number worth using (clocks, vector units and thread counts vary by
machine and by what else runs): its peak is measured, the best float32 matmul rate XLA reaches on
it (`measured_cpu_peak`). An MFU against it says how far a step is from the matmul speed this CPU
shows, not from a theoretical limit.
"""

import functools
import time
from typing import NamedTuple


class Peak(NamedTuple):
  """One chip: matmul FLOP/s in bfloat16 and for float32 inputs, and HBM bytes/s."""

  bf16: float
  fp32: float  # TF32 on GPUs; the bfloat16 peak on TPUs (see module docstring)
  bandwidth: float


T = 1e12
# NVIDIA datasheets (SXM parts; dense): H100 SXM5 80 GB, H200 141 GB, A100 SXM4 80 GB.
# Google Cloud TPU system architecture pages, per chip.
PEAKS = {
  "H100": Peak(989.4 * T, 494.7 * T, 3.35e12),
  "H200": Peak(989.4 * T, 494.7 * T, 4.8e12),
  "A100": Peak(312.0 * T, 156.0 * T, 2.039e12),
  "TPU v4": Peak(275.0 * T, 275.0 * T, 1.228e12),
  "TPU v5e": Peak(197.0 * T, 197.0 * T, 0.819e12),
  "TPU v5p": Peak(459.0 * T, 459.0 * T, 2.765e12),
  "TPU v6e": Peak(918.0 * T, 918.0 * T, 1.64e12),
}
# `device_kind` strings JAX reports -> the table's name ("TPU v5 lite" is v5e, "TPU v6 lite" v6e).
_KINDS = (
  ("h100", "H100"),
  ("h200", "H200"),
  ("a100", "A100"),
  ("tpu v4", "TPU v4"),
  ("tpu v5 lite", "TPU v5e"),
  ("tpu v5e", "TPU v5e"),
  ("tpu v5p", "TPU v5p"),
  ("tpu v5", "TPU v5p"),
  ("tpu v6", "TPU v6e"),
)


def chip(device_kind: str) -> str | None:
  """The `PEAKS` name of a JAX `device_kind`, or None for a device the table lacks."""
  kind = device_kind.lower()
  return next((name for key, name in _KINDS if key in kind), None)


def measured_cpu_peak(n: int = 1024, repeats: int = 5) -> float:
  """FLOP/s of the fastest of `repeats` float32 n x n matmuls, jitted, on the default CPU device
  (2 n^3 FLOPs each, after one warm-up call)."""
  return _cpu_peak(n, repeats)


@functools.cache
def _cpu_peak(n: int, repeats: int) -> float:
  import jax
  import jax.numpy as jnp

  cpu = jax.devices("cpu")[0]
  a = jax.device_put(jnp.ones((n, n), jnp.float32), cpu)
  matmul = jax.jit(jnp.matmul)
  matmul(a, a).block_until_ready()
  best = float("inf")
  for _ in range(repeats):
    started = time.perf_counter()
    matmul(a, a).block_until_ready()
    best = min(best, time.perf_counter() - started)
  return 2.0 * n**3 / best


def peak_flops(device=None, dtype: str = "float32") -> float | None:
  """Peak matmul FLOP/s of `device` (default: JAX's first) for `dtype` ("float32" or "bfloat16"):
  the table's for an accelerator it lists, the measured matmul rate on a CPU, None otherwise."""
  import jax

  device = device or jax.devices()[0]
  if device.platform == "cpu":
    return measured_cpu_peak()
  name = chip(device.device_kind)
  if name is None:
    return None
  peak = PEAKS[name]
  return peak.bf16 if dtype == "bfloat16" else peak.fp32


def system_peak(dtype: str = "float32") -> float | None:
  """Peak FLOP/s of every device this process trains on together (the MFU of a data-parallel
  step): the sum over JAX's devices for accelerators; for CPU devices the measured rate once,
  since virtual CPU devices share the machine's cores."""
  import jax

  devices = jax.devices()
  if devices[0].platform == "cpu":
    return measured_cpu_peak()
  one = peak_flops(devices[0], dtype)
  return None if one is None else one * len(devices)
