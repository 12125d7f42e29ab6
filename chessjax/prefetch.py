"""The loop's input side: the next batches prepared and on the devices while the current step
runs, and how long the loop waited for them.

`DevicePrefetch(produce, depth, count)` calls `produce()` (read the next host batches, pad them,
put them on the devices as global arrays: `chessjax.evaluation.device_batch`) in a background
thread, at most `depth` items ahead of the loop and `count` times in all (the run's remaining
steps, so no batch beyond the run's end is read). `next(prefetch)` returns them in order; the
seconds it blocked accumulate in `waited` (the loop's "input wait"). An error in the thread is
raised by the `next` that would have returned its item. `close()` stops the thread (joined).
"""

import queue
import threading
import time
from collections.abc import Callable

_DONE = object()


class DevicePrefetch:
  def __init__(self, produce: Callable[[], object], *, depth: int = 2, count: int):
    if depth < 1:
      raise ValueError(f"prefetch depth must be >= 1, got {depth}")
    self._items: queue.Queue = queue.Queue(maxsize=depth)
    self._stop = threading.Event()
    self.waited = 0.0  # Seconds `__next__` blocked, since the loop last reset it.
    self._thread = threading.Thread(
      target=self._work, args=(produce, count), name="chessjax-prefetch", daemon=True
    )
    self._thread.start()

  def _work(self, produce, count: int) -> None:
    try:
      for _ in range(count):
        item = produce()
        while not self._stop.is_set():
          try:
            self._items.put(item, timeout=0.1)
            break
          except queue.Full:
            continue
        if self._stop.is_set():
          return
    except BaseException as e:  # noqa: BLE001 - raised by the loop's `next`
      self._put_final(e)
      return
    self._put_final(_DONE)

  def _put_final(self, item) -> None:
    while not self._stop.is_set():
      try:
        self._items.put(item, timeout=0.1)
        return
      except queue.Full:
        continue

  def __iter__(self):
    return self

  def __next__(self):
    started = time.perf_counter()
    item = self._items.get()
    self.waited += time.perf_counter() - started
    if item is _DONE:
      self._items.put(_DONE)
      raise StopIteration
    if isinstance(item, BaseException):
      self._items.put(item)
      raise item
    return item

  def close(self) -> None:
    self._stop.set()
    self._thread.join()
