"""A profiler trace of chosen training steps: `--config.train.profile=START:STOP`.

The steps that take the run from step START to step STOP (numbered as the log lines and
checkpoints number them; `10:15` traces five steps) are recorded with `jax.profiler` into
WORKDIR/profile (one folder per process when there are several): an XPlane file for TensorBoard's
profile plugin (`tensorboard --logdir WORKDIR/profile`) and `perfetto_trace.json.gz` for
https://ui.perfetto.dev (opened from the file; no network needed to write it). Each loop iteration
is one `StepTraceAnnotation("train", step_num=N)`, N the step's number in the logs, so the
profile plugin's step-time breakdown covers the whole iteration: the batch's wait on the input
pipeline, the step's dispatch, and any logging, evaluation or checkpoint that follows it.
Compilation shows in the trace when a traced step compiles (the run's first step, or a new
batch length), so a START past the first steps gives the steady state.

Off (the default, `""`), every call is a no-op.
"""

import logging
import re

import jax

log = logging.getLogger(__name__)

KEY = "train.profile"
_RANGE = re.compile(r"\s*(\d+)\s*:\s*(\d+)\s*")


def parse_range(value) -> tuple[int, int] | None:
  """`"START:STOP"` as (START, STOP), `""` (or None) as None; anything else raises ValueError
  naming the config key."""
  if value is None or str(value).strip() == "":
    return None
  match = _RANGE.fullmatch(str(value))
  if match is None or int(match[1]) >= int(match[2]):
    raise ValueError(
      f"{KEY} must be START:STOP, two step numbers with START < STOP (e.g. '10:15' traces the "
      f"steps from step 10 to step 15), or '' for no trace; got {value!r}"
    )
  return int(match[1]), int(match[2])


class StepProfiler:
  """The trace of one run. The loop calls `step(done)` at the top of every iteration, `done` the
  steps done so far, and `close()` when it ends (also on an error)."""

  def __init__(self, value, directory):
    self.range = parse_range(value)
    if self.range is not None and jax.process_count() > 1:
      directory = directory / f"process_{jax.process_index()}"
    self.directory = directory
    self._tracing = self._finished = False
    self._annotation = None

  def step(self, done: int) -> None:
    """Ends the previous iteration's annotation; starts or stops the trace at the range's ends;
    opens this iteration's annotation while tracing."""
    if self.range is None:
      return
    self._end_annotation()
    start, stop = self.range
    if self._tracing and done >= stop:
      self._stop()
    if not (self._tracing or self._finished) and start <= done < stop:
      log.info("profiling steps %d to %d into %s", done, stop, self.directory)
      jax.profiler.start_trace(str(self.directory), create_perfetto_trace=True)
      self._tracing = True
    if self._tracing:
      self._annotation = jax.profiler.StepTraceAnnotation("train", step_num=done + 1)
      self._annotation.__enter__()

  def close(self) -> None:
    """Stops a trace still running (a run that ended inside the range)."""
    self._end_annotation()
    if self._tracing:
      self._stop()

  def _end_annotation(self) -> None:
    if self._annotation is not None:
      self._annotation.__exit__(None, None, None)
      self._annotation = None

  def _stop(self) -> None:
    # The traced steps were only dispatched: wait for the device to finish them first.
    jax.block_until_ready(jax.live_arrays())
    jax.profiler.stop_trace()
    self._tracing, self._finished = False, True
    log.info("profile written to %s", self.directory)
