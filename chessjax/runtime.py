"""Process-level JAX set-up shared by every entry point: training (`chessjax.main`) and the
evaluation commands. Call `setup(...)` once, before the first compilation.

* A persistent XLA compilation cache, on by default in one directory per user shared by every
  run of the host (`$XDG_CACHE_HOME/chessjax/xla`, else `~/.cache/chessjax/xla`): a sweep's runs
  with the same shapes (same family, size, batch and length buckets; any seed or learning rate)
  compile each program once, later runs load it from disk. Programs of every size are cached
  (training steps on a CPU compile in seconds, each one worth keeping). `train.compilation_cache`
  names another directory (a bucket URL works too) or "" to switch it off; an explicit
  JAX_COMPILATION_CACHE_DIR in the environment wins over the default (the test suite uses it).
  Evaluation commands follow their workdir's setting (`setup_for_workdir`).
* Random bits that compile faster on the CPU (`unroll_threefry_on_cpu`): JAX's threefry hash
  (dropout masks, initialisers) lowered with its rounds unrolled, as on every other backend,
  instead of as a loop: the same bits, about a fifth less time compiling the d128 Transformer's
  train step (dropout 0.1; docs/performance.md, "Compilation of a first-ever run").
* The precision policy's matmul precision (`set_matmul_precision`): `model.dtype="tf32"` sets
  `jax_default_matmul_precision` to TF32 for the whole process (a global setting, so the
  background compilations of `chessjax.compile.StepCompiler` see it too).
* Quiet backend probing: on a machine without an accelerator JAX tries the TPU (and GPU) plugins
  and logs "Unable to initialize backend 'tpu'" at INFO level on every run. That one logger
  (`jax._src.xla_bridge`) is raised to WARNING; a platform the user asked for that fails to start
  still raises, and JAX's warnings (e.g. a GPU present without a CUDA jaxlib) still show.
* Several processes (`initialize_distributed`, which `setup` calls): joins the other processes
  of a multi-host run before anything touches a backend, with bounded waits, so no process waits
  forever on a lost peer (`chessjax.processes`).
"""

import json
import logging
import os

import jax
import ml_collections

from chessjax import processes
from chessjax.files import as_path
from chessjax.spec import TrainSpec

AUTO = "auto"  # The per-user default directory.


def default_cache_dir() -> str:
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "chessjax", "xla")


def compilation_cache_dir(setting: str | None = AUTO) -> str:
  """The directory `setting` means: "auto"/None -> JAX_COMPILATION_CACHE_DIR if set, else the
  per-user default; "" -> "" (no cache); anything else -> itself (`~` expanded)."""
  if setting is None or setting == AUTO:
    return os.environ.get("JAX_COMPILATION_CACHE_DIR") or default_cache_dir()
  if not setting:
    return ""
  return setting if "://" in setting else os.path.expanduser(setting)


def enable_compilation_cache(setting: str | None = AUTO) -> str:
  """Points JAX's persistent compilation cache at `compilation_cache_dir(setting)` (or switches it
  off for ""), caching every program however small or quick to compile. Returns the directory."""
  directory = compilation_cache_dir(setting)
  if not directory:
    jax.config.update("jax_enable_compilation_cache", False)
    return ""
  if "://" not in directory:
    os.makedirs(directory, exist_ok=True)
  jax.config.update("jax_enable_compilation_cache", True)
  jax.config.update("jax_compilation_cache_dir", directory)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return directory


def unroll_threefry_on_cpu() -> bool:
  """Lowers JAX's threefry hash on the CPU as on every other backend: its 20 rounds unrolled into
  one elementwise computation (an out-of-line function), not JAX's CPU default of a loop of 5
  iterations. The bits are the same (the same 32-bit additions, rotations and xors, in the same
  order), hence the same dropout masks, initial parameters and training; only the compiled
  program changes: the d128 Transformer's train step (dropout 0.1, 4 draws a step) compiles in
  about 7.0 CPU s instead of 8.6, its steps as fast. A JAX whose internals differ keeps its own
  lowering (returns False). Call before the first compilation; idempotent."""
  try:
    from jax._src.interpreters import mlir
    from jax._src.random import threefry2x32 as threefry

    primitive, rule = threefry.threefry2x32_p, threefry._threefry2x32_lowering_rule
  except (ImportError, AttributeError):
    return False
  mlir.register_lowering(primitive, rule, platform="cpu", inline=False)
  return True


def quiet_backend_probe() -> None:
  """Hides JAX's INFO line for each accelerator plugin that fails to start when none was asked
  for (real failures raise; warnings still show)."""
  logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)


def setup(compilation_cache: str | None = AUTO) -> str:
  """All of the above; returns the compilation cache directory ("" when off)."""
  quiet_backend_probe()
  unroll_threefry_on_cpu()
  directory = enable_compilation_cache(compilation_cache)
  processes.initialize_distributed()
  return directory


def setup_for_workdir(workdir) -> str:
  """`setup` with the training run's own `train.compilation_cache` (evaluation commands)."""
  setting = AUTO
  try:
    config = ml_collections.ConfigDict(json.loads((as_path(workdir) / "config.json").read_text()))
    setting = TrainSpec.from_config(config).train.compilation_cache
  except (OSError, ValueError, KeyError, AttributeError, TypeError):
    pass  # Not a workdir (yet), or a config it refuses: the command reports that itself.
  return setup(setting)


def set_matmul_precision(dtype: str) -> None:
  """The process-wide matmul precision of the precision policy `dtype` (`layers.DTYPES`)."""
  from chessjax.models import layers

  precision = layers.MATMUL_PRECISION.get(dtype)
  if precision is not None:
    jax.config.update("jax_default_matmul_precision", precision)
