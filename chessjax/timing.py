"""Where the training loop's time goes between two log lines (`chessjax.train`): compiling,
waiting on the input (`chessjax.prefetch`), waiting on the device, validating and saving; the
rest is the host's own work. Every log line reports the input wait (a share of the interval)
and the host's milliseconds per step.
"""

import contextlib
import time

from chessjax.prefetch import DevicePrefetch


class IntervalTiming:
  """One logging interval's time by where it went; the loop counts its `steps`, and `interval`
  reads the figures and starts the next interval."""

  def __init__(self):
    self._reset()

  def _reset(self) -> None:
    self.start, self.steps = time.perf_counter(), 0
    self.compile_s = self.device_s = self.aside_s = 0.0

  def compiled(self, seconds: float) -> None:
    self.compile_s += seconds

  def device(self, wait) -> None:
    started = time.perf_counter()
    wait()
    self.device_s += time.perf_counter() - started

  @contextlib.contextmanager
  def aside(self):
    """Around work (validation, starting checkpoints) whose time is left out of the host's."""
    started = time.perf_counter()
    try:
      yield
    finally:
      self.aside_s += time.perf_counter() - started

  def interval(self, prefetch: DevicePrefetch) -> dict:
    """`input_wait` (share of the interval's time, compilation left out) and `host_ms` (per
    step) since the last call."""
    wall = max(time.perf_counter() - self.start - self.compile_s, 1e-9)
    steps = max(self.steps, 1)
    input_s = prefetch.waited
    prefetch.waited = 0.0
    host_s = max(wall - input_s - self.device_s - self.aside_s, 0.0)
    out = {"input_wait": min(input_s / wall, 1.0), "host_ms": 1e3 * host_s / steps}
    self._reset()
    return out
