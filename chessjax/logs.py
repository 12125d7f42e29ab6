"""What a training run reports: console lines, TensorBoard summaries and step timing.

`TrainLogger` sums each step's outputs on the host (read by the loop at its logging steps, so the
host never waits on the device in between) and, on process 0 only:
* every `log_every` steps prints an interval line (step, loss, gradient norm, learning rate,
  tokens/s, MFU, padding, bad batches, input wait, host ms/step, time left) and writes the same
  scalars to TensorBoard; MFU (`chessjax.flops.mfu`) is the model's FLOPs per scored token times
  tokens/s over the devices' peak (`chessjax.peaks`), given when the loop knows both;
* tokens/s and time left leave compilation out (`compiled`): the loop reports the seconds of each
  step call that compiled a new batch shape;
* between those, prints a progress line at least every `progress_seconds`, so a slow run is never
  silent (`make demo` trains for minutes);
* writes the task's validation summary (line, scalars, images).
TensorBoard goes through tensorboardX (no TensorFlow), into WORKDIR/tb. A local workdir is
written by tensorboardX itself; a URL workdir (`gs://bucket/run`, any fsspec filesystem) through
`FsspecRecordWriter`, registered for that URL's scheme, so `gs://` needs gcsfs (which orbax's
epath paths need anyway), not google-cloud-storage.
"""

import io
import math
import time

import fsspec
import numpy as np

from chessjax import flops
from chessjax.files import is_url


def hms(seconds: float) -> str:
  if not math.isfinite(seconds):
    return "?"
  m, s = divmod(int(seconds), 60)
  h, m = divmod(m, 60)
  return f"{h}:{m:02d}:{s:02d}"


class FsspecRecordWriter:
  """An event file on an fsspec filesystem, for tensorboardX's `RecordWriter`.

  Object stores cannot append, so the writer keeps the file's bytes and each flush replaces the
  whole object with them (as tensorboardX's own `gs://` writer does). Event files of a training
  run are small (a few scalars per logging step and one image per evaluation).
  """

  def __init__(self, path: str):
    self.path = path
    self.buffer = io.BytesIO()
    self.written = -1  # Bytes in the stored object; -1: nothing stored yet.
    self.closed = False

  def write(self, data: bytes) -> None:
    self.buffer.write(data)

  def flush(self) -> None:
    data = self.buffer.getvalue()
    if len(data) != self.written:
      with fsspec.open(self.path, "wb") as f:
        f.write(data)
      self.written = len(data)

  def close(self) -> None:
    if not self.closed:
      self.flush()
      self.closed = True


class FsspecRecordWriterFactory:
  """tensorboardX's writer factory (`register_writer_factory`) for fsspec URLs."""

  def open(self, path: str) -> FsspecRecordWriter:
    return FsspecRecordWriter(path)

  def directory_check(self, path: str) -> None:
    fsspec.filesystem(fsspec.utils.get_protocol(path)).makedirs(path, exist_ok=True)


def summary_writer(logdir):
  """A tensorboardX `SummaryWriter` into `logdir`: a local path as tensorboardX does it, a URL
  (`gs://...`, `memory://...`) through fsspec."""
  from tensorboardX import SummaryWriter, record_writer  # Lazily: only process 0 writes them.

  logdir = str(logdir)
  if is_url(logdir):
    scheme = logdir.split("://", 1)[0]
    if not isinstance(record_writer.REGISTERED_FACTORIES.get(scheme), FsspecRecordWriterFactory):
      record_writer.register_writer_factory(scheme, FsspecRecordWriterFactory())
  return SummaryWriter(logdir)


class TrainLogger:
  """Host-side sums over one logging interval of one run, and where they are written (see the
  module doc). The loop tells it each dispatched step's token counts (`dispatched`, known on the
  host) and, when it reads them, the step's outputs (`add`): no device value is read here."""

  def __init__(
    self,
    workdir,
    *,
    total: int,
    progress_seconds: float,
    name: str = "",
    clock=time.perf_counter,
    flops_per_token: float | None = None,
    peak_flops: float | None = None,
  ):
    self.total, self.progress_seconds = total, progress_seconds
    self.prefix = f"[{name}] " if name else ""
    self.flops_per_token, self.peak_flops = flops_per_token, peak_flops
    self.clock = clock
    self.lr_at = None
    self.chief = workdir is not None
    self.writer = None
    if self.chief:
      self.writer = summary_writer(workdir / "tb")
    self.last_line = self.clock()
    self._reset()

  def start(self, *, lr_at) -> None:
    """The run's learning-rate schedule (step -> rate), for the log lines; starts the first
    interval."""
    self.lr_at = lr_at
    self._reset()

  def _reset(self) -> None:
    self.losses, self.norms, self.steps, self.tokens, self.cells = [], [], 0, 0, 0
    self.start_time = self.clock()
    self.compile_seconds = 0.0  # Of this interval: left out of tokens/s and time left.
    self.last_out = {}

  def compiled(self, seconds: float) -> None:
    """`seconds` of this interval went into compiling a step (the call of a step whose batch
    shape was new): tokens/s and time left count only the time spent running steps, so the
    first estimates of a run are not inflated by its compilations."""
    self.compile_seconds += seconds

  def message(self, text: str) -> None:
    if self.chief:
      print(self.prefix + text, flush=True)
      self.last_line = self.clock()

  def dispatched(self, tokens: int, cells: int) -> None:
    """One more step started, with `tokens` scored positions of `cells` (padding included)."""
    self.steps += 1
    self.tokens += tokens
    self.cells += cells

  def add(self, out: dict) -> None:
    """One step's outputs, read on the host (floats)."""
    self.losses.append(float(out["loss"]))
    self.norms.append(float(out["grad_norm"]))
    self.last_out = out

  def _rates(self, step: int) -> dict:
    seconds = max(self.clock() - self.start_time - self.compile_seconds, 1e-9)
    finite = [x for x in self.losses if math.isfinite(x)]
    steps_per_s = self.steps / seconds
    return {
      "loss": float(np.mean(finite)) if finite else float("nan"),
      "grad_norm": float(np.mean(self.norms)) if self.norms else float("nan"),
      "tokens_per_s": self.tokens / seconds,
      "mfu": flops.mfu(self.tokens / seconds, self.flops_per_token or math.nan, self.peak_flops),
      "padding": 1.0 - self.tokens / max(self.cells, 1),
      "eta": (self.total - step) / steps_per_s if steps_per_s > 0 else float("inf"),
    }

  def progress_due(self) -> bool:
    return self.chief and self.clock() - self.last_line >= self.progress_seconds

  def progress(self, step: int) -> None:
    """A progress line from the interval so far: its loss over the steps read so far."""
    if not self.steps:
      return
    r = self._rates(step)
    loss = f"loss {r['loss']:.4f}  " if self.losses else ""
    self.message(
      f"step {step}/{self.total}  {loss}{r['tokens_per_s']:,.0f} tok/s  eta {hms(r['eta'])}"
    )

  def write_interval(self, step: int, *, input_wait: float = 0.0, host_ms: float = 0.0) -> None:
    """The interval line and scalars at a logging step; starts the next interval. `input_wait`:
    the share of the interval the loop waited on its input; `host_ms`: the host's own time per
    step (`chessjax.train`)."""
    r = self._rates(step)
    lr = float(self.lr_at(step - 1))
    bad = int(self.last_out.get("bad_batches", 0))
    mfu = f"mfu {100 * r['mfu']:.1f}%  " if math.isfinite(r["mfu"]) else ""
    self.message(
      f"step {step}/{self.total}  loss {r['loss']:.4f}  grad {r['grad_norm']:.3f}  lr {lr:.2e}  "
      f"{r['tokens_per_s']:,.0f} tok/s  {mfu}pad {r['padding']:.2f}  bad {bad}  "
      f"input wait {100 * input_wait:.1f}%  host {host_ms:.1f} ms/step  eta {hms(r['eta'])}"
    )
    if self.writer is not None:
      scalars = {
        "train/loss": r["loss"],
        "train/grad_norm": r["grad_norm"],
        "train/learning_rate": lr,
        "train/tokens_per_s": r["tokens_per_s"],
        **({"train/mfu": r["mfu"]} if math.isfinite(r["mfu"]) else {}),
        "train/padding_fraction": r["padding"],
        "train/bad_batches": float(bad),
        "train/rollbacks": float(self.last_out.get("rollbacks", 0)),
        "train/input_wait_fraction": input_wait,
        "train/host_ms_per_step": host_ms,
      }
      for tag, value in scalars.items():
        self.writer.add_scalar(tag, value, step)
      self.writer.flush()
    self._reset()

  def write_eval(self, step: int, line: str, scalars: dict, images: dict) -> None:
    """The task's validation summary (`Task.summarize`) at `step`."""
    self.message(f"step {step} validation: {line}")
    if self.writer is None:
      return
    for tag, value in scalars.items():
      self.writer.add_scalar(tag, value, step)
    for tag, image in images.items():
      self.writer.add_image(tag, image, step, dataformats="HWC")
    self.writer.flush()

  def close(self) -> None:
    if self.writer is not None:
      self.writer.close()
