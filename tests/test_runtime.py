"""The trainer's environment (`chessjax.runtime.set_environment`): each default set where unset, a
value the user set kept, the XLA flags of the platform JAX will start (none of a GPU's on the CPU),
and all of it before any backend starts. A SLURM array task sees them too:
tests/cluster/test_cluster.py."""

import json
import logging
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import REPO

from chessjax import runtime

GPU_FLAG = "--xla_gpu_enable_latency_hiding_scheduler=true"
UNSET = ("XLA_PYTHON_CLIENT_MEM_FRACTION", "JAX_PLATFORMS")  # The suite's XLA_FLAGS are the CPU's.


@pytest.mark.parametrize(
  "platform, flags",
  [("gpu", GPU_FLAG), ("tpu", None), ("cpu", None)],
)
def test_unset_variables_get_the_defaults_of_the_platform(platform, flags):
  out = runtime.environment_defaults({"HOME": "/home/x"}, platform)
  assert out.pop("XLA_PYTHON_CLIENT_MEM_FRACTION") == "0.90"
  assert out.get("XLA_FLAGS") == flags
  assert not (set(out) - {"XLA_FLAGS"})


def test_values_the_user_set_are_kept():
  user = {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.5", "XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_foo"}
  # Their other flags stay, in their order; the GPU's default joins them.
  assert runtime.environment_defaults(user, "gpu") == {
    "XLA_FLAGS": f"--xla_dump_to=/tmp/x --xla_foo {GPU_FLAG}"
  }
  assert runtime.environment_defaults(user, "cpu") == {}  # Nothing for the CPU: theirs untouched.
  # A flag they set, whatever its value, is theirs.
  off = {"XLA_FLAGS": "--xla_gpu_enable_latency_hiding_scheduler=false"}
  assert runtime.environment_defaults(off, "gpu") == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.90"}


def test_the_cpu_gets_no_flag_of_another_platform():
  assert not [f for f in runtime.XLA_FLAGS_BY_PLATFORM["cpu"] if f.startswith("--xla_gpu")]
  assert not [f for f in runtime.XLA_FLAGS_BY_PLATFORM["tpu"] if f.startswith("--xla_gpu")]
  assert runtime.environment_defaults({}, "cpu") == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.90"}


def test_set_environment_sets_once_and_keeps_what_is_set():
  environ = {"JAX_PLATFORMS": "cuda", "XLA_FLAGS": "--xla_dump_to=/tmp/x"}
  assert runtime.set_environment(environ) == {
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.90",
    "XLA_FLAGS": f"--xla_dump_to=/tmp/x {GPU_FLAG}",
  }
  assert environ["XLA_FLAGS"] == f"--xla_dump_to=/tmp/x {GPU_FLAG}"
  assert runtime.set_environment(environ) == {}  # Idempotent.


@pytest.mark.parametrize(
  "platforms, platform",
  [("cuda", "gpu"), ("cuda,cpu", "gpu"), ("rocm", "gpu"), ("tpu,cpu", "tpu"), ("cpu", "cpu")],
)
def test_jax_platforms_names_the_platform(platforms, platform):
  assert runtime.default_platform({"JAX_PLATFORMS": platforms}) == platform


def test_without_jax_platforms_a_gpu_needs_its_plugin_and_its_driver(monkeypatch, tmp_path):
  monkeypatch.setattr(runtime, "jax", SimpleNamespace(config=SimpleNamespace(jax_platforms=None)))
  node = tmp_path / "nvidiactl"
  monkeypatch.setattr(runtime, "_GPU_DEVICES", (str(node),))
  monkeypatch.setattr(runtime.importlib.util, "find_spec", lambda name: None)  # No libtpu.
  for plugin, driver, platform in [(True, True, "gpu"), (True, False, "cpu"), (False, True, "cpu")]:
    monkeypatch.setattr(runtime, "_gpu_plugin", lambda plugin=plugin: plugin)
    node.unlink(missing_ok=True)
    if driver:
      node.touch()
    assert runtime.default_platform({}) == platform, (plugin, driver)


def test_after_a_backend_started_nothing_changes(monkeypatch, caplog):
  """This process's backend started with the suite: setting XLA's variables now would change
  nothing but the children's environment, so none is set, and a warning says why."""
  import jax

  jax.devices()
  monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
  with caplog.at_level(logging.WARNING, logger=runtime.__name__):
    assert runtime.set_environment() == {}
  assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in os.environ
  assert "backend already started" in caplog.text


@pytest.mark.multiprocess
def test_the_commands_set_it_before_any_backend_starts():
  """Importing the training and evaluation commands starts no backend, so `runtime.setup` (their
  first step after parsing flags) still sets the variables XLA reads: a fresh process on this
  CPU gets the memory fraction and no GPU flag, JAX then starts with them."""
  code = (
    "import json, os, jax\n"
    "import chessjax.main, chessjax.population\n"
    "import chessjax.world_model.evaluate, chessjax.lm.evaluate\n"
    "from chessjax import runtime\n"
    "before = runtime.backend_started()\n"
    "runtime.setup('')\n"
    "jax.devices()\n"
    "keys = ('XLA_PYTHON_CLIENT_MEM_FRACTION', 'XLA_FLAGS')\n"
    "print(json.dumps({'before': before, 'after': runtime.backend_started(),\n"
    "                  'env': {k: os.environ.get(k) for k in keys}}))\n"
  )
  env = {k: v for k, v in os.environ.items() if k not in UNSET}
  env["PYTHONPATH"] = str(REPO)
  proc = subprocess.run(
    [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  seen = json.loads(proc.stdout.strip().splitlines()[-1])
  assert seen["before"] is False and seen["after"] is True
  assert seen["env"]["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.90"
  assert seen["env"]["XLA_FLAGS"] == os.environ.get("XLA_FLAGS")  # The CPU's: left as it was.


@pytest.mark.multiprocess
def test_importing_chessjax_raises_the_collector_thresholds_before_jax():
  """A fresh process: `import chessjax` raises the default thresholds before jax is imported
  (its modules import jax after the package), and keeps thresholds set higher beforehand."""
  code = (
    "import gc, json, sys\n"
    "default = gc.get_threshold()\n"
    "import chessjax\n"
    "raised, jax_loaded = gc.get_threshold(), 'jax' in sys.modules\n"
    "gc.set_threshold(500000, 60, 200)\n"
    "import importlib; importlib.reload(chessjax)\n"
    "print(json.dumps([default, raised, jax_loaded, gc.get_threshold()]))\n"
  )
  proc = subprocess.run(
    [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  default, raised, jax_loaded, kept = json.loads(proc.stdout)
  assert default == [700, 10, 10] and raised == [100_000, 50, 100] and not jax_loaded
  assert kept == [500_000, 60, 200]
