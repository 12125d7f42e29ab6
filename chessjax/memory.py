"""Will a compiled train step fit in memory? Checked before it first runs, so a run too large for
the machine stops with a message that names the remedies instead of being killed by the kernel.

XLA knows a compiled program's memory (`Compiled.memory_analysis()`: arguments, outputs, the
temporaries of its buffer assignment) on every backend, the CPU included, without running it.
The limit is the device's own (`memory_stats()["bytes_limit"]`) on an accelerator and, on a CPU,
the memory the host has available (MemAvailable, capped by the cgroup's limit when there is one)
plus what this process already holds. The training loop (`chessjax.compile.check_memory`) checks
the first step's program and extrapolates to the run's longest batch (quadratically in its
length: at worst attention's scores); when that estimate does not fit, it compiles the longest
batch's step and checks it exactly.
"""

import os

import jax

REMEDY = (
  "lower the memory per step with --config.train.micro_batches=N (the same step over N slices "
  "of the batch; N divides data.batch_size) and/or --config.train.remat=True (recompute each "
  "block's activations in the backward pass), or a smaller data.batch_size / data.max_len / "
  "train.steps_per_call (a call's batches are on the device together)"
)


class StepTooLarge(MemoryError):
  """A train step needs more memory than the machine has (`needed` and `limit`, in bytes)."""

  def __init__(self, message: str, *, needed: int = 0, limit: int = 0):
    super().__init__(message)
    self.needed, self.limit = needed, limit


def program_bytes(compiled) -> int | None:
  """Bytes a compiled program holds while it runs (None when the backend does not say)."""
  try:
    m = compiled.memory_analysis()
  except (AttributeError, NotImplementedError, RuntimeError):
    return None
  if m is None:
    return None
  return int(
    m.argument_size_in_bytes
    + m.output_size_in_bytes
    - m.alias_size_in_bytes
    + m.temp_size_in_bytes
    + m.generated_code_size_in_bytes
  )


def _meminfo_bytes(field: str) -> int | None:
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith(field + ":"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return None


def _cgroup_room() -> int | None:
  try:
    with open("/sys/fs/cgroup/memory.max") as f:
      limit = f.read().strip()
    with open("/sys/fs/cgroup/memory.current") as f:
      used = int(f.read().strip())
  except (OSError, ValueError):
    return None
  return None if limit == "max" else int(limit) - used


def _rss_bytes() -> int:
  try:
    with open("/proc/self/statm") as f:
      return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
  except (OSError, ValueError):
    return 0


def available_bytes(device=None) -> int | None:
  """Memory a step on `device` (default: the first device) may use; None if unknown."""
  device = jax.devices()[0] if device is None else device
  if device.platform != "cpu":
    stats = device.memory_stats() or {}
    return stats.get("bytes_limit")
  rooms = [r for r in (_meminfo_bytes("MemAvailable"), _cgroup_room()) if r is not None]
  if not rooms:
    try:
      return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
      return None
  # The state and data this process already holds count as available to its steps: they are
  # the step's arguments.
  return min(rooms) + _rss_bytes()


def gib(n: float) -> str:
  return f"{n / 2**30:.1f} GiB"


def check(needed: int | None, limit: int | None, what: str, *, hint: str = "") -> None:
  """Raises `StepTooLarge` when `needed` bytes exceed `limit` (either None: nothing known);
  `hint` goes before the remedies."""
  if needed is None or limit is None or needed <= limit:
    return
  raise StepTooLarge(
    f"{what} needs about {gib(needed)} of memory, more than the {gib(limit)} available."
    + hint
    + " Otherwise "
    + REMEDY,
    needed=needed,
    limit=limit,
  )
