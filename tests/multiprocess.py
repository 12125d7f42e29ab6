"""Runs a public command as N local JAX processes, as on N hosts: the test harness of multi-host
code (`tests/test_multiprocess.py`).

Each process gets its own fake CPU devices (`--xla_force_host_platform_device_count`), the
coordinator is process 0 on 127.0.0.1 at a free port, and the processes talk through gloo
(`chessjax.processes`). Every run has a hard deadline: a hang kills every process and fails the
test. A failing run shows every process's log (`Runs.logs`).
"""

import dataclasses
import errno
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO

# A lost process is named by the others within PEER_SECONDS (`chessjax.processes`' watcher),
# long before JAX's own heartbeat timeout (HEARTBEAT_SECONDS) would end them. Not shorter: a
# live process whose heartbeat thread waits for the GIL through a compilation on a loaded core
# was named lost at 5 s (two workers and a third process on 2 cores, 2026-11-29).
PEER_SECONDS = 10
HEARTBEAT_SECONDS = 30
DEFAULT_DEADLINE = 240  # Seconds a whole multi-process command may take before it counts as hung.


def free_port() -> int:
  """A port for process 0's coordinator, free on every address (it binds [::]), drawn at random
  (the other pytest worker draws too) below the kernel's ephemeral range: a port there cannot be
  handed to another socket (a connection's local end, a `bind` to port 0) between this check and
  the coordinator's bind, as one once was (the coordinator then failed to bind and crashed; the
  suite's SLURM takes its ports below it too, from 16817)."""
  low = _ephemeral_low()
  ports = range(20000, low) if low > 20000 + 1000 else range(1024, low)
  rng = random.Random()
  for _ in range(100):
    port = rng.choice(ports)
    if _bindable(port):
      return port
  raise RuntimeError(f"no free port among 100 drawn from {ports}")


def _ephemeral_low() -> int:
  """The first port of the kernel's ephemeral range (Linux; 32768 elsewhere, its default)."""
  try:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
  except (OSError, ValueError, IndexError):
    return 32768


def _bindable(port: int) -> bool:
  for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    try:
      with socket.socket(family) as s:
        s.bind((host, port))
    except OSError as e:
      if family == socket.AF_INET6 and e.errno == errno.EAFNOSUPPORT:
        continue  # No IPv6 on this machine: the IPv4 check is the one that counts.
      return False
  return True


def environment(process_id: int | None, processes: int, devices: int, port: int | None) -> dict:
  """The environment of one process: the suite's compilation settings (conftest.py puts them in
  os.environ), `devices` fake CPU devices, and the coordinator's address."""
  env = dict(os.environ)
  env["PYTHONPATH"] = str(REPO)
  env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
  env["PYTHONUNBUFFERED"] = "1"
  for key in ("CHESSJAX_COORDINATOR", "CHESSJAX_NUM_PROCESSES", "CHESSJAX_PROCESS_ID"):
    env.pop(key, None)
  if processes > 1:
    env.update(
      CHESSJAX_COORDINATOR=f"127.0.0.1:{port}",
      CHESSJAX_NUM_PROCESSES=str(processes),
      CHESSJAX_PROCESS_ID=str(process_id),
      CHESSJAX_HEARTBEAT_TIMEOUT=str(HEARTBEAT_SECONDS),
      CHESSJAX_PEER_TIMEOUT=str(PEER_SECONDS),
      CHESSJAX_INIT_TIMEOUT="120",
      CHESSJAX_SHUTDOWN_TIMEOUT="60",
    )
  return env


@dataclasses.dataclass
class Runs:
  """The processes of one command, started together (`start`)."""

  procs: list
  log_paths: list
  started: float

  @property
  def returncodes(self) -> list:
    return [p.returncode for p in self.procs]

  def logs(self) -> list[str]:
    return [Path(p).read_text(errors="replace") for p in self.log_paths]

  def report(self, tail: int = 6000) -> str:
    """Every process's log (its last `tail` characters), for a failure message."""
    parts = [
      f"--- process {i} (exit status {p.returncode}) ---\n{log[-tail:]}"
      for i, (p, log) in enumerate(zip(self.procs, self.logs(), strict=True))
    ]
    return "\n".join(parts)

  def wait(self, deadline: float = DEFAULT_DEADLINE) -> "Runs":
    """Waits for every process; past `deadline` seconds from the start, kills them all and
    raises AssertionError with every log (a hang fails the test instead of blocking)."""
    for p in self.procs:
      left = self.started + deadline - time.monotonic()
      try:
        p.wait(timeout=max(left, 0.1))
      except subprocess.TimeoutExpired:
        self.kill()
        raise AssertionError(
          f"processes still running after {deadline} s (hung?)\n{self.report()}"
        ) from None
    return self

  def kill(self, which=None) -> None:
    for i, p in enumerate(self.procs):
      if (which is None or i in which) and p.poll() is None:
        p.send_signal(signal.SIGKILL)
        p.wait()

  def check(self, deadline: float = DEFAULT_DEADLINE) -> list[str]:
    """Waits (`wait`), asserts every process succeeded, returns their logs."""
    self.wait(deadline)
    assert self.returncodes == [0] * len(self.procs), self.report()
    return self.logs()


def start(args, log_dir, *, processes: int = 2, devices: int = 2, tag: str = "run") -> Runs:
  """Starts `python ARGS` as `processes` JAX processes of `devices` CPU devices each (one plain
  process when `processes` is 1), logs in LOG_DIR/TAG.pN.log. `args` may be a function of the
  process id (a different input on one host)."""
  port = free_port() if processes > 1 else None
  log_dir = Path(log_dir)
  log_dir.mkdir(parents=True, exist_ok=True)
  procs, paths = [], []
  for i in range(processes):
    path = log_dir / f"{tag}.p{i}.log"
    with open(path, "w") as log:
      procs.append(
        subprocess.Popen(
          [sys.executable, *map(str, args(i) if callable(args) else args)],
          cwd=REPO,
          env=environment(i, processes, devices, port),
          stdout=log,
          stderr=subprocess.STDOUT,
          start_new_session=True,
        )
      )
    paths.append(path)
  return Runs(procs, paths, time.monotonic())


def run(args, log_dir, **kwargs) -> list[str]:
  """`start(...)` then `check()`: every process's log, asserting they all succeeded."""
  deadline = kwargs.pop("deadline", DEFAULT_DEADLINE)
  return start(args, log_dir, **kwargs).check(deadline)
