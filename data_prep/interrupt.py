"""SIGTERM as Ctrl-C for the data commands: a plain `kill` (or SLURM's or a VM's notice) raises
KeyboardInterrupt in the main thread, so the command unwinds as it does on Ctrl-C: its dataset
writer removes the staged shards, its worker pool stops (`ordered_pool`), and it says so.

    with sigterm_as_interrupt():
      manifest = run(args)
"""

import contextlib
import signal


def _raise(signum, frame):
  raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def sigterm_as_interrupt():
  """SIGTERM raises KeyboardInterrupt inside; the previous handler comes back after."""
  previous = signal.signal(signal.SIGTERM, _raise)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)
