"""The machine a timed CPU run ran on and how it is pinned: the CPU model each table's machine
line names (`cpu_model`), and the command prefix and environment that give a child process one
single-threaded core (`pinned_env`), so runs compared side by side share nothing but that core.
"""

import os
from pathlib import Path


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
  """The first `model name` of `cpuinfo`; "" where there is none (not Linux, no such line)."""
  try:
    for line in cpuinfo.read_text().splitlines():
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return ""


def pinned_env(core: int) -> tuple[list[str], dict]:
  """(`taskset -c CORE`, this environment with OMP/MKL/OpenBLAS at one thread, XLA's CPU backend
  single-threaded and JAX on the CPU): prefix a child's command with the first, run it with the
  second."""
  env = dict(os.environ)
  for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    env[var] = "1"
  env["XLA_FLAGS"] = (
    env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
  ).strip()
  env["JAX_PLATFORMS"] = "cpu"
  return ["taskset", "-c", str(core)], env
