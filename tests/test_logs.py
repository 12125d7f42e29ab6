"""The training log's rates: time left and tokens/s leave compilation out; MFU beside them."""

import numpy as np

from chessjax import logs


class FakeClock:
  def __init__(self):
    self.now = 0.0

  def __call__(self) -> float:
    return self.now


def one_step(logger: logs.TrainLogger) -> None:
  """One step of 100 scored tokens of 128, dispatched and its outputs read."""
  logger.dispatched(100, 128)
  logger.add({"loss": np.float32(1.0), "grad_norm": np.float32(0.5), "bad_batches": np.float32(0)})


def make(workdir, **kwargs) -> logs.TrainLogger:
  logger = logs.TrainLogger(workdir, **kwargs)
  logger.start(lr_at=lambda s: 1e-3)
  return logger


def test_time_left_leaves_compilation_out():
  clock = FakeClock()
  logger = make(None, total=100, progress_seconds=10.0, clock=clock)
  # Step 1 compiles for 60 s and runs for 1 s; steps 2..11 run 1 s each; step 6 compiles a second
  # shape for 30 s.
  for step in range(1, 12):
    compile_s = 60.0 if step == 1 else 30.0 if step == 6 else 0.0
    clock.now += compile_s + 1.0
    if compile_s:
      logger.compiled(compile_s)
    one_step(logger)
  rates = logger._rates(11)
  assert rates["eta"] == 89.0  # 89 steps left at 1 step/s; counting compilation: 89 * 101 / 11.
  assert rates["tokens_per_s"] == 100.0
  logger.write_interval(11)  # Starts the next interval: no compilation in it.
  clock.now += 4.0
  for _ in range(12, 16):
    one_step(logger)
  assert logger._rates(15)["eta"] == 85.0


def test_mfu_in_the_line_and_tensorboard(tmp_path, capsys):
  clock = FakeClock()
  logger = make(
    tmp_path, total=10, progress_seconds=10.0, clock=clock, flops_per_token=3e6, peak_flops=1e9
  )
  for _ in (1, 2):
    clock.now += 1.0
    one_step(logger)
  assert logger._rates(2)["mfu"] == 0.3  # 100 tokens/s x 3 MFLOP over 1 GFLOP/s
  scalars = {}
  logger.writer.add_scalar = lambda tag, value, step: scalars.__setitem__(tag, value)
  logger.write_interval(2, input_wait=0.25, host_ms=1.5)
  logger.close()
  line = capsys.readouterr().out
  assert "mfu 30.0%" in line and "input wait 25.0%" in line and "host 1.5 ms/step" in line
  assert scalars["train/mfu"] == 0.3
  assert scalars["train/input_wait_fraction"] == 0.25 and scalars["train/host_ms_per_step"] == 1.5


def test_no_mfu_without_a_flop_count():
  logger = make(None, total=10, progress_seconds=1)
  one_step(logger)
  assert np.isnan(logger._rates(1)["mfu"])  # a plug-in family: no count, no MFU column
