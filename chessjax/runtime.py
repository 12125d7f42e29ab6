"""Process-level JAX set-up shared by every entry point: training (`chessjax.main`) and the
evaluation commands. Call `setup(...)` once, before the first compilation.

* The trainer's environment (`set_environment`, which `setup` calls first): the variables XLA
  reads when a backend starts, each set only where the user left it unset, so an exported value
  wins; the same in every launcher (`launch/gpu_host.sh`, `slurm.sh`, `slurm_array.sh`,
  `tpu_vm.sh` set none of them). `XLA_PYTHON_CLIENT_MEM_FRACTION=0.90`: most of each GPU's
  memory for the trainer (JAX preallocates 0.75; the GPU client alone reads it). `XLA_FLAGS` per
  platform (`XLA_FLAGS_BY_PLATFORM`): each flag added unless the user's `XLA_FLAGS` names it; on a
  GPU the latency-hiding scheduler (collectives overlapped with compute, NVIDIA JAX-Toolbox's
  default), on a TPU and the CPU none. The platform is the one JAX will start, read without
  starting it (`default_platform`). JAX_DEFAULT_MATMUL_PRECISION stays unset: float32 matmuls
  then use TF32 on Ampere and newer GPUs, as the paper's fp32 runs did (Walker & Lyons, B.2).
* A persistent XLA compilation cache, on by default in one directory per user shared by every
  run of the host (`$XDG_CACHE_HOME/chessjax/xla`, else `~/.cache/chessjax/xla`): a sweep's runs
  with the same shapes (same family, size, batch and length buckets; any seed or learning rate)
  compile each program once, later runs load it from disk. Programs of every size are cached
  (training steps on a CPU compile in seconds, each one worth keeping). `train.compilation_cache`
  names another directory (a bucket URL works too) or "" to switch it off; an explicit
  JAX_COMPILATION_CACHE_DIR in the environment wins over the default (the test suite uses it).
  Evaluation commands follow their workdir's setting (`setup_for_workdir`). This is the only
  place the cache's folder is chosen: the launch scripts leave it to this module.
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

import glob
import importlib.metadata
import importlib.util
import json
import logging
import os
import pkgutil
from collections.abc import MutableMapping

import jax
import ml_collections

from chessjax import processes
from chessjax.files import as_path
from chessjax.spec import TrainSpec

AUTO = "auto"  # The per-user default directory.
log = logging.getLogger(__name__)

MEM_FRACTION = "0.90"  # XLA_PYTHON_CLIENT_MEM_FRACTION unless set (module docstring).
XLA_FLAGS_BY_PLATFORM = {
  "gpu": ("--xla_gpu_enable_latency_hiding_scheduler=true",),
  "tpu": (),
  "cpu": (),
}
_GPU_NAMES = ("cuda", "rocm", "gpu")  # JAX_PLATFORMS names of a GPU.
_GPU_DEVICES = ("/dev/nvidiactl", "/dev/kfd")  # NVIDIA's and AMD's driver nodes.


def default_platform(environ: MutableMapping[str, str] | None = None) -> str:
  """The platform JAX will start first ("gpu", "tpu" or "cpu"), read without starting it. The
  first of JAX_PLATFORMS (or `jax_platforms`) when set; else a GPU when a CUDA or ROCm plugin
  is installed and the GPU driver's device node exists, a TPU when libtpu is installed and a TPU
  device node exists, else the CPU."""
  environ = os.environ if environ is None else environ
  named = environ.get("JAX_PLATFORMS") or jax.config.jax_platforms or ""
  first = named.split(",")[0].strip().lower()
  if first:
    return "gpu" if first in _GPU_NAMES else first
  if _gpu_plugin() and any(os.path.exists(d) for d in _GPU_DEVICES):
    return "gpu"
  if importlib.util.find_spec("libtpu") and (
    glob.glob("/dev/accel*") or os.path.isdir("/dev/vfio")
  ):
    return "tpu"
  return "cpu"


def _gpu_plugin() -> bool:
  """Whether a CUDA or ROCm PJRT plugin is installed (found as JAX finds plugins: entry points
  of the group `jax_plugins`, modules of the namespace package `jax_plugins`)."""
  names = {e.name for e in importlib.metadata.entry_points(group="jax_plugins")}
  try:
    import jax_plugins

    names |= {m.name for m in pkgutil.iter_modules(jax_plugins.__path__)}
  except ImportError:
    pass
  return any(kind in name for name in names for kind in ("cuda", "rocm"))


def environment_defaults(environ: MutableMapping[str, str], platform: str) -> dict[str, str]:
  """The variables `set_environment` would set in `environ` for `platform` ("gpu", "tpu",
  "cpu"): each default the user left unset; XLA_FLAGS as the user's flags followed by each
  default flag they do not name (a `--name=value` of theirs wins, whatever its value)."""
  out = {}
  if "XLA_PYTHON_CLIENT_MEM_FRACTION" not in environ:
    out["XLA_PYTHON_CLIENT_MEM_FRACTION"] = MEM_FRACTION
  given = environ.get("XLA_FLAGS", "").split()
  named = {flag.split("=", 1)[0] for flag in given}
  extra = [f for f in XLA_FLAGS_BY_PLATFORM.get(platform, ()) if f.split("=", 1)[0] not in named]
  if extra:
    out["XLA_FLAGS"] = " ".join([*given, *extra])
  return out


def set_environment(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
  """Sets the trainer's environment defaults in `environ` (this process's by default) where
  unset (module docstring) and returns what it set. XLA reads them when a backend starts: call
  before anything touches a device (`setup` does, first); once a backend has started it changes
  nothing, and says so if it would have."""
  environ = os.environ if environ is None else environ
  out = environment_defaults(environ, default_platform(environ))
  if out and environ is os.environ and backend_started():
    log.warning("chessjax.runtime: a JAX backend already started; its environment stays as it is")
    return {}
  environ.update(out)
  return out


def backend_started() -> bool:
  """Whether a JAX backend has started in this process (False where JAX's internals differ)."""
  try:
    from jax._src import xla_bridge  # No public API says whether backends started.

    return bool(xla_bridge.backends_are_initialized())
  except (ImportError, AttributeError):
    return False


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
  set_environment()  # First: XLA reads it when a backend starts.
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
