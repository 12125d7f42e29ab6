"""Preemption: SIGTERM (a spot VM's or SLURM's notice before the kill) or SIGINT (Ctrl-C) ends a
training run cleanly at a step every process agrees on.

    with Preemption() as preemption:
      ...
      calls += 1                     # one call of the step: one step, or several
      if preemption.reached(calls):  # every process gets True after the same call
        save a checkpoint at its step, write the summary as preempted, raise Preempted(step)

* One process: a Python signal handler notes the signal; `reached(counter)` is then true at the
  next call the loop asks about (the call in progress finishes first).
* Several processes (`chessjax.processes`): JAX's preemption service carries the notice of any
  process to all of them (`multihost_utils.reached_preemption_sync_point`), which agree on the
  counter after the furthest one any process has reached; each process asks after every call,
  with a counter one more each time (JAX's sync point is that next counter: a counter that
  skipped it, such as a step count of calls of several steps, would never reach it). JAX
  catches SIGTERM itself in that case (its handler is not Python's); SIGINT is turned into a
  SIGTERM to this process so that it takes the same path.
* A second SIGINT while stopping interrupts at once (KeyboardInterrupt), as usual.

The command then exits with `EXIT_STATUS` (75, EX_TEMPFAIL: "try again"); rerunning it resumes
from the saved step, bitwise equal to a run never stopped (`chessjax.train`). launch/slurm.sh
requeues a job that ends so; launch/README.md says what happens on a spot TPU VM.
"""

import os
import signal
import threading

import jax

from chessjax import processes

EXIT_STATUS = 75


class Preempted(Exception):
  """Training stopped at `step` on a preemption notice; its state is saved there."""

  def __init__(self, step: int, signal_name: str):
    super().__init__(
      f"preempted ({signal_name}): stopped at step {step} with a checkpoint there; rerun the same "
      "command to resume"
    )
    self.step = step


def _multi_process() -> bool:
  """Whether JAX's preemption service is on (no public handle says so)."""
  return processes.distributed_state().preemption_sync_manager is not None


class Preemption:
  """The signal handlers of one training loop (module docstring); a context manager."""

  def __init__(self):
    self.signal_name = ""  # The signal noticed by this process ("" while none).
    self._previous: dict[int, object] = {}
    self._multi = False

  def __enter__(self) -> "Preemption":
    self._multi = jax.process_count() > 1 and _multi_process()
    if threading.current_thread() is not threading.main_thread():
      return self  # Signal handlers can only be set from the main thread (tests, notebooks).
    handled = (signal.SIGINT,) if self._multi else (signal.SIGTERM, signal.SIGINT)
    for sig in handled:
      self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def __exit__(self, *exc) -> None:
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    self._previous.clear()

  def _handle(self, signum, frame) -> None:
    if self.signal_name and signum == signal.SIGINT:
      raise KeyboardInterrupt  # A second Ctrl-C: stop now.
    self.signal_name = signal.Signals(signum).name
    if self._multi:  # Through JAX's preemption notifier, which tells every process.
      os.kill(os.getpid(), signal.SIGTERM)

  def reached(self, counter: int) -> bool:
    """Whether the loop should save and stop after its call number `counter` (the same answer in
    every process; the counter goes up by one at each call)."""
    if self._multi:
      from jax.experimental import multihost_utils

      if multihost_utils.reached_preemption_sync_point(counter):
        self.signal_name = self.signal_name or "SIGTERM"
        return True
      return False
    return bool(self.signal_name)
