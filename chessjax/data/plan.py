"""Which games form each batch, and how long it is: a pure function of lengths, seed and index.

A split's rows have lengths (tokens per game, from the track's row format: for the world model
a game's steps, plies + 1). The plan (`BatchPlan`) is a pure function of (lengths, `Batching`,
batch index):
  1. epoch e permutes the split with `default_rng([seed, e])` (identity when not shuffling);
  2. the permutation is cut into windows of `window_batches * batch_size` games;
  3. each window is stably sorted by (truncated) length and cut into consecutive batches, so a
     batch holds games of nearly equal length and only the bucket rounding is padded;
  4. the window's batches are emitted in an order drawn from `default_rng([seed, e, window])`,
     so long and short batches stay mixed in time (no curriculum inside a window);
  5. a batch's length `T` is the smallest bucket holding its longest row.
Every batch of a window is full; only the epoch's last, partial window can leave a remainder,
dropped (`drop_remainder=True`, a random subset of games when shuffling) or kept as one batch
whose missing rows are padding. Ties in the sort keep the permuted order, hence stay random.

Why a plan over lengths instead of a streaming bucketer with per-bucket buffers: batch i is a
pure function of i, so (a) the pipeline is a grain `MapDataset` and the iterator's state is the
next batch index: resuming is exact, with no buffered games to save; (b) batches do not depend on
the number of loader workers; (c) with several JAX processes, all of them compute the same plan
of *global* batches and process p takes rows [p*b, (p+1)*b) of each: every process yields the
same number of batches with the same `T`, which `jax.make_array_from_process_local_data` needs,
and the processes' games are disjoint and together cover each epoch.

Truncation: `max_len` caps a row's length; the row format keeps the *prefix* (state tracking
needs the game's start, a suffix would be unlearnable). Rows longer than the largest bucket (when
`max_len` allows them) are padded to a multiple of it.
"""

import dataclasses
import math
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

# Multiples of 32 growing by at most 1.5x above 64: on the lichess sample (median 65 steps) batches
# use 5 of these shapes at ~21% padding, random-uniform games (mean ~328 steps) 7 at ~17%.
DEFAULT_BUCKET_LENGTHS = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
# Each window is sorted as a whole; 64 batches make bucket-boundary batches rare (< 1 in 16).
DEFAULT_WINDOW_BATCHES = 64
_MAX_CACHED = 4


@dataclasses.dataclass(frozen=True)
class Batching:
  """How a split is cut into batches: everything the plan needs besides the row lengths.

  `batch_size` is global (all processes). `num_epochs=None` repeats forever, each epoch with its
  own permutation. `window_batches=None` sorts a whole epoch as one window (evaluation).
  """

  batch_size: int
  seed: int = 0
  shuffle: bool = True
  num_epochs: int | None = None
  drop_remainder: bool = True
  bucket_lengths: tuple[int, ...] = DEFAULT_BUCKET_LENGTHS
  max_len: int | None = None
  window_batches: int | None = DEFAULT_WINDOW_BATCHES

  def __post_init__(self):
    buckets = tuple(int(b) for b in self.bucket_lengths)
    if not buckets or any(b <= 0 for b in buckets) or list(buckets) != sorted(set(buckets)):
      raise ValueError(f"bucket_lengths must be positive and increasing, got {self.bucket_lengths}")
    object.__setattr__(self, "bucket_lengths", buckets)
    if self.batch_size <= 0:
      raise ValueError(f"batch_size must be positive, got {self.batch_size}")
    if self.max_len is not None and self.max_len < 1:
      raise ValueError(
        f"max_len must be >= 1 (it counts tokens, START included), got {self.max_len}"
      )
    if self.window_batches is not None and self.window_batches < 1:
      raise ValueError(f"window_batches must be >= 1 or None, got {self.window_batches}")
    if self.num_epochs is not None and self.num_epochs < 1:
      raise ValueError(f"num_epochs must be >= 1 or None (forever), got {self.num_epochs}")


def bucket_length(length: int, bucket_lengths: Sequence[int]) -> int:
  """The smallest bucket >= length; beyond the largest bucket, the next multiple of it."""
  for b in bucket_lengths:
    if length <= b:
      return int(b)
  top = int(bucket_lengths[-1])
  return top * math.ceil(length / top)


def merge_rare_buckets(
  bucket_lengths: Sequence[int], batch_lengths: Iterable[int], min_batches: int
) -> tuple[int, ...]:
  """`bucket_lengths` less the buckets that fewer than `min_batches` of a run's batches use
  (`batch_lengths`, their lengths T): each such bucket's batches move up to the next bucket kept,
  so a short run compiles one train step fewer per merged bucket, and pads those batches to the
  longer length. Merging goes upwards only (a batch never gets shorter): a bucket whose batches,
  together with those merged into it, are still too few merges on, and the longest bucket used
  stays. Buckets no batch uses are dropped with them (no batch changes length for that); the
  largest configured bucket stays (longer rows pad to its multiples). Unchanged when nothing
  merges.
  """
  counts = Counter(int(t) for t in batch_lengths)
  used = [int(b) for b in bucket_lengths if counts[b]]
  merged, carry = set(), 0
  for b in used[:-1]:
    carry += counts[b]
    if carry < min_batches:
      merged.add(b)
    else:
      carry = 0
  if not merged:
    return tuple(int(b) for b in bucket_lengths)
  top = int(bucket_lengths[-1])
  return tuple(b for b in used if b not in merged) + (() if top in used else (top,))


class BatchPlan:
  """The batches of one split: `global_batch(i)` -> (game indices, -1 on pad rows; length T).

  This process's rows are `[process_index * b, (process_index + 1) * b)` with
  `b = batch_size // process_count`. Batch i belongs to epoch `i // batches_per_epoch`.
  """

  def __init__(
    self,
    lengths: np.ndarray,
    batching: Batching,
    *,
    process_index: int = 0,
    process_count: int = 1,
  ):
    if batching.batch_size % process_count:
      raise ValueError(
        f"batch_size {batching.batch_size} must be divisible by process_count {process_count}"
      )
    if not 0 <= process_index < process_count:
      raise ValueError(f"process_index {process_index} not in [0, {process_count})")
    self.batching = batching
    self.num_games = len(lengths)
    # int32 halves what every worker receives (about 40 MB per 10M games).
    lengths = np.asarray(lengths, dtype=np.int32)
    self.lengths = lengths if batching.max_len is None else np.minimum(lengths, batching.max_len)
    # Once: the loop asks for the fingerprint after every batch (its iterator's state), and a
    # sum over every game's length costs milliseconds at 10M games.
    self._lengths_sum = int(self.lengths.sum(dtype=np.int64))
    self.batch_size, self.max_len = batching.batch_size, batching.max_len
    self.process_index, self.process_count = process_index, process_count
    self.local_batch_size = batching.batch_size // process_count
    n, b = self.num_games, batching.batch_size
    if batching.window_batches is None:
      self.window_games, self._window_batches, full_windows, rest = n, 0, 0, n
    else:
      self.window_games, self._window_batches = batching.window_batches * b, batching.window_batches
      full_windows, rest = divmod(n, self.window_games)
    last = rest // b if batching.drop_remainder else -(-rest // b)
    self.batches_per_epoch = full_windows * self._window_batches + last
    if self.batches_per_epoch == 0:
      raise ValueError(
        f"{n} games make no batch of {b}"
        + (" with drop_remainder=True" if batching.drop_remainder else "")
      )
    self._lock = threading.Lock()
    self._perms: dict[int, np.ndarray] = {}
    self._windows: dict[tuple[int, int], list[tuple[np.ndarray, int]]] = {}

  def __len__(self) -> int:
    """Batches in all epochs; effectively unbounded when `num_epochs` is None."""
    if self.batching.num_epochs is None:
      return sys.maxsize
    return self.batching.num_epochs * self.batches_per_epoch

  def fingerprint(self) -> dict:
    """What fixes the sequence of global batches; a saved iterator state must match it.

    The process layout is left out on purpose: global batch i is the same for any process count,
    so a run may resume on a different number of hosts (with the same global batch size).
    """
    g = self.batching
    return {
      "num_games": self.num_games,
      "lengths_sum": self._lengths_sum,
      "batch_size": g.batch_size,
      "seed": g.seed,
      "shuffle": g.shuffle,
      "num_epochs": g.num_epochs,
      "drop_remainder": g.drop_remainder,
      "bucket_lengths": list(g.bucket_lengths),
      "max_len": g.max_len,
      "window_games": self.window_games,
    }

  def __getstate__(self):
    # Workers rebuild the caches; shipping them (and the lock) would only cost pickling time.
    state = self.__dict__.copy()
    state.update(_lock=None, _perms={}, _windows={})
    return state

  def __setstate__(self, state):
    self.__dict__.update(state)
    self._lock = threading.Lock()

  def epoch_of(self, i: int) -> int:
    return i // self.batches_per_epoch

  def copy(self) -> "BatchPlan":
    """The same plan with caches of its own, for another thread to walk without evicting the
    windows the loader reads."""
    plan = object.__new__(BatchPlan)
    plan.__setstate__(self.__getstate__())
    return plan

  def batch_lengths(self, start: int, stop: int) -> np.ndarray:
    """Lengths T of global batches [start, stop) (stop clipped to the plan): int32."""
    stop = min(stop, len(self))
    return np.array([self.global_batch(i)[1] for i in range(start, stop)], np.int32)

  def first_uses(self, start: int, stop: int) -> Iterator[int]:
    """The distinct lengths T of global batches [start, stop), in the order the batches first
    use them; stops early once every bucket some game maps to has been seen."""
    buckets = self.batching.bucket_lengths
    possible = {bucket_length(int(n), buckets) for n in np.unique(self.lengths)}
    seen = set()
    for i in range(start, min(stop, len(self))):
      t = self.global_batch(i)[1]
      if t not in seen:
        seen.add(t)
        yield t
        if seen >= possible:
          return

  def _permutation(self, epoch: int) -> np.ndarray:
    if epoch not in self._perms:
      if self.batching.shuffle:
        perm = np.random.default_rng([self.batching.seed, epoch]).permutation(self.num_games)
      else:
        perm = np.arange(self.num_games)
      perm = perm.astype(np.int32 if self.num_games < 2**31 else np.int64)
      if len(self._perms) >= 2:
        self._perms.pop(next(iter(self._perms)))
      self._perms[epoch] = perm
    return self._perms[epoch]

  def _window(self, epoch: int, window: int) -> list[tuple[np.ndarray, int]]:
    """The batches (global game indices, length) of one window, in emission order."""
    key = (epoch, window)
    if key not in self._windows:
      g = self.batching
      w, b = self.window_games, g.batch_size
      games = self._permutation(epoch)[window * w : (window + 1) * w]
      if g.drop_remainder:
        # Dropping the tail of the permuted order drops a random subset when shuffling.
        games = games[: len(games) // b * b]
      games = games[np.argsort(self.lengths[games], kind="stable")]
      batches = []
      for start in range(0, len(games), b):
        rows = games[start : start + b]
        length = bucket_length(int(self.lengths[rows].max()), g.bucket_lengths)
        rows = np.concatenate([rows, np.full(b - len(rows), -1, dtype=rows.dtype)])
        batches.append((rows, length))
      if g.shuffle:
        order = np.random.default_rng([g.seed, epoch, window]).permutation(len(batches))
        batches = [batches[k] for k in order]
      if len(self._windows) >= _MAX_CACHED:
        self._windows.pop(next(iter(self._windows)))
      self._windows[key] = batches
    return self._windows[key]

  def global_batch(self, i: int) -> tuple[np.ndarray, int]:
    """(game indices int[batch_size], -1 for padding rows; length T) of global batch i."""
    if not 0 <= i < len(self):
      raise IndexError(f"batch {i} out of range [0, {len(self)})")
    epoch, j = divmod(i, self.batches_per_epoch)
    if self._window_batches:
      window, k = divmod(j, self._window_batches)
    else:
      window, k = 0, j
    with self._lock:
      return self._window(epoch, window)[k]

  def local_batch(self, i: int) -> tuple[np.ndarray, int]:
    """This process's rows of global batch i: (game indices int[b], -1 for padding; T)."""
    rows, length = self.global_batch(i)
    b = self.local_batch_size
    return rows[self.process_index * b : (self.process_index + 1) * b], length

  def padding_fraction(self, epoch: int = 0) -> float:
    """Fraction of padded tokens over one epoch's global batches, from lengths alone."""
    total = valid = 0
    for i in range(epoch * self.batches_per_epoch, (epoch + 1) * self.batches_per_epoch):
      rows, length = self.global_batch(i)
      total += length * len(rows)
      valid += int(self.lengths[rows[rows >= 0]].sum(dtype=np.int64))
    return 1.0 - valid / total
