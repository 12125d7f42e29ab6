"""An in-order parallel map over spawned worker processes, for the data preparation commands.

`ordered_map(fn, jobs, workers)` yields `fn(job)` for each job, in the jobs' order. At most
`ahead` jobs a worker are in flight, and jobs are drawn from their iterator only as results are
taken, so a lazy source (a PGN reader) is read as fast as the workers go, not ahead of them.

Closing the generator (the caller stopped early, or raised) cancels the jobs not started and
waits for the few running: no worker is killed. `multiprocessing.Pool.terminate` kills its
workers, and one killed while it holds a queue's lock leaves that lock held; in one full
test-suite run here (a process-accounting hook loaded), the random-uniform abort test waited 273 s
in `Pool._terminate_pool`, joining the pool's task thread. A worker that dies (killed, out of
memory) raises `concurrent.futures.process.BrokenProcessPool` here, where a `Pool` would wait for
its job forever.

Workers ignore SIGINT: the parent handles Ctrl-C, and closing the pool lets each worker finish the
job it holds. A worker whose parent was killed outright (no shutdown) exits within a second. They
are spawned, not forked: the parent may hold threads (tqdm's monitor, JAX), and a forked child of
a threaded process can deadlock. `workers == 1` is a plain `map` here.
"""

import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any


def _worker_init(parent: int) -> None:
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  signal.signal(signal.SIGTERM, signal.SIG_DFL)
  threading.Thread(target=_exit_with, args=(parent,), daemon=True).start()


def _exit_with(parent: int) -> None:
  """Ends this worker once `parent` is gone: a parent killed outright (SIGTERM, SIGKILL) shuts
  nothing down, and its workers would wait forever to hand back results nobody reads."""
  while os.getppid() == parent:
    time.sleep(0.5)
  os._exit(1)


def ordered_map(fn: Callable, jobs: Iterable, workers: int, ahead: int = 4) -> Iterator[Any]:
  """`fn(job)` for each job in order, on `workers` spawned processes (`fn` and each job must
  pickle)."""
  if workers == 1:
    yield from map(fn, jobs)
    return
  context = multiprocessing.get_context("spawn")
  pool = ProcessPoolExecutor(
    workers, mp_context=context, initializer=_worker_init, initargs=(os.getpid(),)
  )
  in_flight: deque[Future] = deque()
  try:
    for job in jobs:
      in_flight.append(pool.submit(fn, job))
      if len(in_flight) >= ahead * workers:
        yield in_flight.popleft().result()
    while in_flight:
      yield in_flight.popleft().result()
  finally:
    pool.shutdown(wait=True, cancel_futures=True)
