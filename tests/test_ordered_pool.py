"""data_prep.ordered_pool: results in the jobs' order, jobs drawn only a few ahead of the results
taken, the pool closed by closing the generator, and a worker that dies named by an exception
instead of a wait."""

import operator
import os
import subprocess
import sys
import time
from concurrent.futures.process import BrokenProcessPool

import pytest
from conftest import REPO

from data_prep import ordered_pool

pytestmark = pytest.mark.multiprocess  # Spawned worker processes.


def test_results_come_in_the_jobs_order_and_jobs_are_drawn_a_few_ahead():
  drawn = []

  def jobs():
    for i in range(1000):
      drawn.append(i)
      yield i

  results = ordered_pool.ordered_map(operator.neg, jobs(), workers=2, ahead=2)
  taken = [next(results) for _ in range(10)]
  assert taken == [-i for i in range(10)]
  assert len(drawn) <= 10 + 2 * 2  # At most `ahead` jobs a worker beyond the results taken.
  results.close()  # Cancels what has not started, waits for what runs.
  assert len(drawn) <= 10 + 2 * 2
  assert list(ordered_pool.ordered_map(operator.neg, range(50), workers=2)) == [
    -i for i in range(50)
  ]
  assert list(ordered_pool.ordered_map(operator.neg, range(5), workers=1)) == [-i for i in range(5)]


def test_a_worker_that_dies_raises_instead_of_waiting():
  with pytest.raises(BrokenProcessPool):
    list(ordered_pool.ordered_map(os._exit, [3], workers=2))


def _alive(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # A zombie has exited.
  except FileNotFoundError:
    return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc (Linux)")
def test_workers_of_a_parent_killed_outright_exit():
  """A parent killed with SIGKILL shuts nothing down; its workers end on their own (they
  would otherwise wait forever to hand back results nobody reads)."""
  code = (
    "import time; from data_prep import ordered_pool; "
    "list(ordered_pool.ordered_map(time.sleep, [60, 60], workers=2))"
  )
  parent = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
  try:
    deadline = time.monotonic() + 60
    while len(workers := _children(parent.pid)) < 2:
      assert time.monotonic() < deadline and parent.poll() is None, "no workers started"
      time.sleep(0.1)
  finally:
    parent.kill()
    parent.wait()
  deadline = time.monotonic() + 20
  while [w for w in workers if _alive(w)] and time.monotonic() < deadline:
    time.sleep(0.1)
  assert not [w for w in workers if _alive(w)], workers


def _children(pid: int) -> list[int]:
  """`pid`'s worker processes (multiprocessing's spawn_main, not its resource tracker)."""
  out = []
  for task in os.listdir(f"/proc/{pid}/task"):
    with open(f"/proc/{pid}/task/{task}/children") as f:
      for child in map(int, f.read().split()):
        with open(f"/proc/{child}/cmdline", "rb") as c:
          if b"spawn_main" in c.read():
            out.append(child)
  return out
