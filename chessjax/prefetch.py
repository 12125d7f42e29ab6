"""The loop's input side: the next calls' input prepared and on the devices while the current
call runs, and how long the loop waited for it.

`DevicePrefetch(items, depth)` walks the iterator `items` (read the next host batches, pad and
stack them, put them on the devices as global arrays: `chessjax.train`'s calls, which end at the
run's end, so no batch beyond it is read) in a background thread, at most `depth` items ahead of
the loop. `next(prefetch)` returns them in order; the seconds it blocked accumulate in `waited`
(the loop's "input wait"). An error in the thread is raised by the `next` that would have
returned its item. `close()` stops the thread (joined).
"""

import queue
import threading
import time
from collections.abc import Iterator

_DONE = object()
THREAD_NAME = "chessjax-prefetch"


class DevicePrefetch:
  def __init__(self, items: Iterator, *, depth: int = 2):
    if depth < 1:
      raise ValueError(f"prefetch depth must be >= 1, got {depth}")
    self._items: queue.Queue = queue.Queue(maxsize=depth)
    self._stop = threading.Event()
    self.waited = 0.0  # Seconds `__next__` blocked, since the loop last reset it.
    self._thread = threading.Thread(target=self._work, args=(items,), name=THREAD_NAME, daemon=True)
    self._thread.start()

  def _work(self, items: Iterator) -> None:
    try:
      for item in items:
        if not self._put(item):
          return
    except BaseException as e:  # noqa: BLE001 - raised by the loop's `next`
      self._put(e)
      return
    self._put(_DONE)

  def _put(self, item) -> bool:
    """Queues `item` unless the loop stops first; whether it was queued."""
    while not self._stop.is_set():
      try:
        self._items.put(item, timeout=0.1)
        return True
      except queue.Full:
        continue
    return False

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
