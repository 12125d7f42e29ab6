"""One run as several processes (JAX's multi-controller runtime): joining them, and stopping
them together.

A multi-host run (a TPU slice with several workers, a multi-node GPU job, or N processes on one
machine) runs the same command in every process; `initialize_distributed` connects them before
anything touches a backend:
* Explicit settings, on any machine: CHESSJAX_COORDINATOR (host:port of process 0),
  CHESSJAX_NUM_PROCESSES and CHESSJAX_PROCESS_ID, optionally CHESSJAX_LOCAL_DEVICE_IDS
  (comma-separated) to give each process some of the machine's accelerators. CPU devices then
  talk through gloo (JAX's CPU collectives).
* Otherwise JAX detects a multi-worker Cloud TPU slice (TPU_WORKER_HOSTNAMES), a multi-task SLURM
  job (SLURM_NTASKS > 1; one process per GPU) or Open MPI (OMPI_COMM_WORLD_SIZE > 1) by itself.

No process waits forever on another:
* a process that dies (SIGKILL, a crash below Python, a lost machine) is named by the others
  within CHESSJAX_PEER_TIMEOUT seconds (default 30), wherever they wait, a checkpoint's barrier
  or a collective included: each process's watcher thread (`_start_watcher`) publishes a
  heartbeat every `HEARTBEAT_SECONDS` in the coordination service's key-value store and watches
  the others'; a peer silent for that long ends this process with "error: process K of N stopped
  answering ... rerun the same command on every host: training resumes from its last
  checkpoint" (exit status 1). Where the lost peer's dropped connection fails a collective at
  once (gloo on one machine does), the error is followed by the same sentence within
  2.5 x `HEARTBEAT_SECONDS` (`lost_peers`). When process 0, which hosts the coordination
  service, is the one lost, JAX ends the others at once with its own message (the "leader task
  ... died"). JAX's own heartbeat (CHESSJAX_HEARTBEAT_TIMEOUT seconds, default 100) remains the
  last resort;
* a Python error in one process (`fail_together`, around every entry point) is published to the
  others, which print it, naming the failed process, and exit at once (within
  `WATCH_SECONDS`) instead of waiting in their next collective; the failed process exits without
  JAX's shutdown barrier, which would otherwise hold it for CHESSJAX_SHUTDOWN_TIMEOUT seconds;
* joining waits at most CHESSJAX_INIT_TIMEOUT seconds (default 300, JAX's) for every process.
"""

import atexit
import contextlib
import os
import sys
import threading
import time
import traceback

import jax

FAILED_PREFIX = "chessjax/failed/"  # Key-value store directory: process id -> error text.
WATCH_SECONDS = 0.5  # How often each process looks for a peer's published error.
ALIVE_PREFIX = "chessjax/alive/"  # Key-value store directory: process id -> heartbeat counter.
HEARTBEAT_SECONDS = 2.0  # How often each process publishes its heartbeat and reads the others'.
EXITED = "exited"  # The heartbeat of a process that is leaving normally.
_watcher: "threading.Thread | None" = None
_stopping = threading.Event()


def _int_env(name: str, default: int) -> int:
  value = os.environ.get(name, "")
  try:
    return int(value) if value else default
  except ValueError:
    raise ValueError(f"{name} must be an integer, got {value!r}") from None


def timeouts() -> dict:
  """`jax.distributed.initialize`'s time limits (seconds) from the CHESSJAX_* variables."""
  return {
    "initialization_timeout": _int_env("CHESSJAX_INIT_TIMEOUT", 300),
    "heartbeat_timeout_seconds": _int_env("CHESSJAX_HEARTBEAT_TIMEOUT", 100),
    "shutdown_timeout_seconds": _int_env("CHESSJAX_SHUTDOWN_TIMEOUT", 300),
  }


def detected_cluster() -> bool:
  """Whether JAX's own detection will find a multi-process cluster (TPU slice, SLURM, MPI)."""
  env = os.environ
  return (
    env.get("TPU_WORKER_HOSTNAMES", "").count(",") > 0
    or int(env.get("SLURM_NTASKS", "1") or 1) > 1
    or int(env.get("OMPI_COMM_WORLD_SIZE", "1") or 1) > 1
  )


def initialize_distributed() -> bool:
  """Joins the other processes of a multi-host run, if this is one; returns whether it is.

  Must run before anything touches a JAX backend (`chessjax.runtime.setup` calls it). Idempotent.
  """
  if _watcher is not None:
    return True
  if "CHESSJAX_COORDINATOR" in os.environ:
    # Cross-process collectives on CPU devices need gloo; GPU and TPU runs ignore this setting.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    ids = os.environ.get("CHESSJAX_LOCAL_DEVICE_IDS", "")
    jax.distributed.initialize(
      coordinator_address=os.environ["CHESSJAX_COORDINATOR"],
      num_processes=int(os.environ["CHESSJAX_NUM_PROCESSES"]),
      process_id=int(os.environ["CHESSJAX_PROCESS_ID"]),
      local_device_ids=[int(i) for i in ids.split(",")] if ids else None,
      **timeouts(),
    )
  elif detected_cluster():
    jax.distributed.initialize(**timeouts())
  else:
    return False
  _start_watcher()
  return True


def distributed_state():
  """JAX's multi-controller state (`jax._src.distributed.global_state`): its key-value store
  (`client`) and preemption service (`preemption_sync_manager`) have no public handle yet. The
  one place chessjax reads it (`_client`; `chessjax.preemption`)."""
  from jax._src import distributed

  return distributed.global_state


def _client():
  return distributed_state().client


def peer_timeout() -> float:
  """Seconds without a heartbeat after which a peer counts as lost (CHESSJAX_PEER_TIMEOUT)."""
  return float(_int_env("CHESSJAX_PEER_TIMEOUT", 30))


def _start_watcher() -> None:
  """A daemon thread that ends this process as soon as another one publishes its error, or stops
  answering (module docstring)."""
  global _watcher
  client = _client()
  me, count = jax.process_index(), jax.process_count()
  timeout = peer_timeout()

  def watch():
    heard = dict.fromkeys(range(count), time.monotonic())  # Peer -> when its counter last moved.
    values: dict[int, str] = {}
    beat, next_beat = 0, 0.0
    while not _stopping.wait(WATCH_SECONDS):
      try:
        failed = client.key_value_dir_get(FAILED_PREFIX)
        now = time.monotonic()
        if now >= next_beat:
          beat, next_beat = beat + 1, now + HEARTBEAT_SECONDS
          client.key_value_set(f"{ALIVE_PREFIX}{me}", str(beat), allow_overwrite=True)
          for key, value in client.key_value_dir_get(ALIVE_PREFIX):
            peer = int(key.rsplit("/", 1)[-1])
            if value == EXITED:  # Left normally (waits in JAX's shutdown): never lost.
              heard.pop(peer, None)
            elif values.get(peer) != value:
              values[peer], heard[peer] = value, now
      except Exception:  # noqa: BLE001 - the coordinator is gone: JAX's own health check reports it.
        return
      if failed and not _stopping.is_set():
        key, message = sorted(failed)[0]
        who = key.rsplit("/", 1)[-1]
        _exit_now(f"error: process {who} of {count} failed, stopping process {me} too:\n{message}")
      lost = sorted(p for p, t in heard.items() if p != me and now - t > timeout)
      if lost and not _stopping.is_set():
        _exit_now(f"{_lost_message(lost)} (No heartbeat for {timeout:g} s.)")

  _watcher = threading.Thread(target=watch, name="chessjax-peer-errors", daemon=True)
  _watcher.start()
  # Registered after jax.distributed's own exit handler, hence run before it: the thread stops
  # asking the key-value store before JAX disconnects from it.
  atexit.register(_stop_watcher)


def lost_peers(wait: float = 2.5 * HEARTBEAT_SECONDS) -> list[int]:
  """The other processes whose heartbeat does not move within `wait` seconds (all of them when
  the key-value store, i.e. process 0, cannot be reached); returns as soon as every peer's has."""
  client, me, count = _client(), jax.process_index(), jax.process_count()
  peers = set(range(count)) - {me}
  try:
    first = dict(client.key_value_dir_get(ALIVE_PREFIX))
    moved = {p for p in peers if first.get(f"{ALIVE_PREFIX}{p}") == EXITED}
    deadline = time.monotonic() + wait
    while moved != peers and time.monotonic() < deadline:
      time.sleep(WATCH_SECONDS / 2)
      now = dict(client.key_value_dir_get(ALIVE_PREFIX))
      moved |= {
        p for p in peers if now.get(f"{ALIVE_PREFIX}{p}") != first.get(f"{ALIVE_PREFIX}{p}")
      }
  except Exception:  # noqa: BLE001 - the coordinator is gone.
    return [0] if me != 0 else sorted(peers)
  return sorted(peers - moved)


def _lost_message(lost: list[int]) -> str:
  names = ", ".join(map(str, lost))
  return (
    f"error: process {names} of {jax.process_count()} stopped answering (it crashed, was killed "
    f"or lost its network); stopping process {jax.process_index()} too. Rerun the same command "
    "on every host: training resumes from its last checkpoint."
  )


def _exit_now(message: str) -> None:
  print(message, file=sys.stderr, flush=True)
  os._exit(1)


def _stop_watcher() -> None:
  """Stops the watcher and tells the others that this process leaves normally, so that the
  ones still working (e.g. process 0 writing reports) do not take it for lost while it waits in
  JAX's shutdown."""
  _stopping.set()
  if _watcher is not None:
    _watcher.join(timeout=5 * WATCH_SECONDS)
  try:
    _client().key_value_set(f"{ALIVE_PREFIX}{jax.process_index()}", EXITED, allow_overwrite=True)
  except Exception:  # noqa: BLE001 - the coordinator is gone already; nothing to tell.
    pass


@contextlib.contextmanager
def fail_together():
  """Around an entry point: in a multi-process run, an exception (or a non-zero `SystemExit`, e.g.
  argparse's error) is printed, published to the other processes (which then stop, showing it)
  and ends this process at once. Single-process runs are untouched."""
  try:
    yield
  except BaseException as e:
    if _watcher is None or (isinstance(e, SystemExit) and e.code in (None, 0)):
      raise
    if isinstance(e, SystemExit):
      text = e.code if isinstance(e.code, str) else f"exit status {e.code}"
      code = e.code if isinstance(e.code, int) else 1
    else:
      text = "".join(traceback.format_exception(e)).rstrip()
      code = 1
      # A collective or a checkpoint's barrier fails at once when a peer's connection drops:
      # name the peer that stopped answering, if one did, rather than the transport's error.
      lost = lost_peers()
      if lost:
        text = f"{text}\n{_lost_message(lost)}"
    print(text, file=sys.stderr, flush=True)
    _publish_failure(text)
    sys.stdout.flush()
    os._exit(code)


def _publish_failure(text: str) -> None:
  _stopping.set()
  try:
    _client().key_value_set(f"{FAILED_PREFIX}{jax.process_index()}", text[-4000:])
    # Process 0 hosts the key-value store: stay up until the others have had time to read it.
    time.sleep(4 * WATCH_SECONDS)
  except Exception as e:  # noqa: BLE001 - the run is failing anyway; say why peers may not know.
    print(f"(could not tell the other processes: {e})", file=sys.stderr, flush=True)
