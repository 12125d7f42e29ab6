"""The grain input pipeline: prepared games -> fixed-shape, length-bucketed batches for `jax.jit`.

Batches are dicts of numpy arrays (`b` = rows of this process, `L` = the batch's bucket length):
  moves  int32[b, L]      move ids, START first, `PAD_ID` after the game's last step
  states uint8[b, L, 75]  state labels, zeros after the game's last step
  mask   bool[b, L]       True on the game's steps (t = 0 included, as every step is scored)
  index  int32[b]         position of the game in the split (`GameSource` order), -1 on pad rows
`mask` is exactly `moves != PAD_ID`. `L` comes from a short list of bucket lengths, so a jitted
step compiles a handful of shapes; the row count is always `b` (pad rows are all-False).

Bucketing: sort within windows, planned from game lengths alone. Before reading any game the
pipeline scans the split for each game's step count (`game_lengths`, ~10 us a game). The plan
(`BatchPlan`) is then a pure function of (lengths, seed, batch index):
  1. epoch e permutes the split with `default_rng([seed, e])` (identity when not shuffling);
  2. the permutation is cut into windows of `window_batches * batch_size` games;
  3. each window is stably sorted by (truncated) length and cut into consecutive batches, so a
     batch holds games of nearly equal length and only the bucket rounding is padded;
  4. the window's batches are emitted in an order drawn from `default_rng([seed, e, window])`,
     so long and short batches stay mixed in time (no curriculum inside a window);
  5. a batch's length is the smallest bucket holding its longest game.
Every batch of a window is full; only the epoch's last, partial window can leave a remainder,
dropped (`drop_remainder=True`, a random subset of games when shuffling) or kept as one batch
whose missing rows are padding. Ties in the sort keep the permuted order, hence stay random.

Why a plan over lengths instead of a streaming bucketer with per-bucket buffers: batch i is a
pure function of i, so (a) the pipeline is a grain `MapDataset` and the iterator's state is the
next batch index: `get_state()`/`set_state()` resume exactly, with no buffered games to save;
(b) batches do not depend on `worker_count` (workers read disjoint batch indices and grain
interleaves them back in order); (c) with several JAX processes, all of them compute the same plan
of *global* batches and process p takes rows [p*b, (p+1)*b) of each: every process yields the
same number of batches with the same `L`, which `jax.make_array_from_process_local_data` needs,
and the processes' games are disjoint and together cover each epoch.

Truncation: `max_len` counts steps (START included) and keeps the *prefix* `moves[:max_len]`,
`states[:max_len]`: state tracking needs the game's start, a suffix would be unlearnable. Games
longer than the largest bucket (when `max_len` allows them) are padded to a multiple of it.

Workers: batches are assembled (records read, decoded, padded) by `read_threads` background
threads, in the main process or, with `worker_count > 0`, in each of that many grain worker
processes (`mp_prefetch`), a few batches ahead. Close iterators that use workers
(`iterator.close()`) when done. `BatchIterator` keeps its own state (the next batch index), not
grain's per-worker positions, so a checkpoint restores under any `worker_count`.
"""

import math
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import grain
import numpy as np
from absl import flags

from chessjax.data import records
from chessjax.data.source import GameSource, read_manifest, shard_paths
from chessjax.encoding import PAD_ID
from chessjax.labels import NUM_LABELS

# Multiples of 32 growing by at most 1.5x above 64: on the lichess sample (median 65 steps) batches
# use 5 of these shapes at ~21% padding, random-uniform games (mean ~328 steps) 7 at ~17%.
DEFAULT_BUCKET_LENGTHS = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
# Each window is sorted as a whole; 64 batches make bucket-boundary batches rare (< 1 in 16).
DEFAULT_WINDOW_BATCHES = 64
# A batch is up to batch_size * L * 77 bytes (10 MB at 128 x 1024): buffer a few, not grain's 500.
DEFAULT_PREFETCH_BATCHES = 4
_MAX_CACHED = 4


def bucket_length(steps: int, bucket_lengths: Sequence[int]) -> int:
  """The smallest bucket >= steps; beyond the largest bucket, the next multiple of it."""
  for b in bucket_lengths:
    if steps <= b:
      return int(b)
  top = int(bucket_lengths[-1])
  return top * math.ceil(steps / top)


def _check_buckets(bucket_lengths: Sequence[int]) -> tuple[int, ...]:
  buckets = tuple(int(b) for b in bucket_lengths)
  if not buckets or any(b <= 0 for b in buckets) or list(buckets) != sorted(set(buckets)):
    raise ValueError(f"bucket_lengths must be positive and increasing, got {bucket_lengths}")
  return buckets


_LENGTHS_CACHE: dict[tuple, np.ndarray] = {}


def game_lengths(path, split: str) -> np.ndarray:
  """Steps (plies + 1) of every game of a split, in `GameSource` order: int32[N].

  Reads each record's header (one zstd call per game, about 10 us). Cached per process while the
  dataset's manifest is unchanged, so training and evaluation pipelines share one scan.
  """
  manifest = Path(path) / "manifest.json"
  read_manifest(path)  # Clear error for an incomplete or foreign directory.
  key = (str(Path(path).resolve()), split, manifest.stat().st_mtime_ns)
  if key not in _LENGTHS_CACHE:
    paths = shard_paths(path, split)
    # array_record refuses an empty file list; a split with no kept games has no lengths.
    source = grain.sources.ArrayRecordDataSource(paths) if paths else []
    lengths = np.empty(len(source), dtype=np.int32)
    chunk = 4096
    for start in range(0, len(source), chunk):
      stop = min(start + chunk, len(source))
      for i, rec in enumerate(source.__getitems__(list(range(start, stop))), start):
        try:
          lengths[i] = records.record_steps(rec)
        except ValueError as e:
          raise ValueError(f"record {i} of {path}:{split}: {e}") from None
    _LENGTHS_CACHE[key] = lengths
  return _LENGTHS_CACHE[key]


class BatchPlan:
  """Which games form each batch and its length: a pure function of lengths, seed and index.

  `batch_size` is the global batch (all processes); this process's rows are
  `[process_index * b, (process_index + 1) * b)` with `b = batch_size // process_count`.
  Batch i belongs to epoch `i // batches_per_epoch`. See the module docstring for the scheme.
  """

  def __init__(
    self,
    lengths: np.ndarray,
    *,
    batch_size: int,
    seed: int = 0,
    shuffle: bool = True,
    num_epochs: int | None = None,
    drop_remainder: bool = True,
    bucket_lengths: Sequence[int] = DEFAULT_BUCKET_LENGTHS,
    max_len: int | None = None,
    window_batches: int | None = DEFAULT_WINDOW_BATCHES,
    process_index: int = 0,
    process_count: int = 1,
  ):
    if batch_size <= 0 or batch_size % process_count:
      raise ValueError(
        f"batch_size {batch_size} must be positive and divisible by process_count {process_count}"
      )
    if not 0 <= process_index < process_count:
      raise ValueError(f"process_index {process_index} not in [0, {process_count})")
    if max_len is not None and max_len < 1:
      raise ValueError(f"max_len must be >= 1 (it counts steps, START included), got {max_len}")
    if window_batches is not None and window_batches < 1:
      raise ValueError(f"window_batches must be >= 1 or None, got {window_batches}")
    if num_epochs is not None and num_epochs < 1:
      raise ValueError(f"num_epochs must be >= 1 or None (forever), got {num_epochs}")
    self.num_games = len(lengths)
    # int32 halves what every worker receives (about 40 MB per 10M games).
    steps = np.asarray(lengths, dtype=np.int32)
    self.steps = steps if max_len is None else np.minimum(steps, max_len)
    self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
    self.num_epochs, self.drop_remainder = num_epochs, drop_remainder
    self.bucket_lengths = _check_buckets(bucket_lengths)
    self.max_len, self.process_index, self.process_count = max_len, process_index, process_count
    self.local_batch_size = batch_size // process_count
    n, b = self.num_games, batch_size
    if window_batches is None:
      # One window per epoch: eval sorts the whole split.
      self.window_games, self._window_batches, full_windows, rest = n, 0, 0, n
    else:
      self.window_games, self._window_batches = window_batches * b, window_batches
      full_windows, rest = divmod(n, self.window_games)
    last = rest // b if drop_remainder else -(-rest // b)
    self.batches_per_epoch = full_windows * self._window_batches + last
    if self.batches_per_epoch == 0:
      raise ValueError(
        f"{n} games make no batch of {batch_size}"
        + (" with drop_remainder=True" if drop_remainder else "")
      )
    self._lock = threading.Lock()
    self._perms: dict[int, np.ndarray] = {}
    self._windows: dict[tuple[int, int], list[tuple[np.ndarray, int]]] = {}

  def __len__(self) -> int:
    """Batches in all epochs; effectively unbounded when `num_epochs` is None."""
    if self.num_epochs is None:
      return sys.maxsize
    return self.num_epochs * self.batches_per_epoch

  def fingerprint(self) -> dict:
    """What fixes the sequence of global batches; a saved iterator state must match it.

    The process layout is left out on purpose: global batch i is the same for any process count,
    so a run may resume on a different number of hosts (with the same global batch size).
    """
    return {
      "num_games": self.num_games,
      "steps_sum": int(self.steps.sum(dtype=np.int64)),
      "batch_size": self.batch_size,
      "seed": self.seed,
      "shuffle": self.shuffle,
      "num_epochs": self.num_epochs,
      "drop_remainder": self.drop_remainder,
      "bucket_lengths": list(self.bucket_lengths),
      "max_len": self.max_len,
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

  def _permutation(self, epoch: int) -> np.ndarray:
    if epoch not in self._perms:
      if self.shuffle:
        perm = np.random.default_rng([self.seed, epoch]).permutation(self.num_games)
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
      w, b = self.window_games, self.batch_size
      games = self._permutation(epoch)[window * w : (window + 1) * w]
      if self.drop_remainder:
        # Dropping the tail of the permuted order drops a random subset when shuffling.
        games = games[: len(games) // b * b]
      games = games[np.argsort(self.steps[games], kind="stable")]
      batches = []
      for start in range(0, len(games), b):
        rows = games[start : start + b]
        length = bucket_length(int(self.steps[rows].max()), self.bucket_lengths)
        rows = np.concatenate([rows, np.full(b - len(rows), -1, dtype=rows.dtype)])
        batches.append((rows, length))
      if self.shuffle:
        order = np.random.default_rng([self.seed, epoch, window]).permutation(len(batches))
        batches = [batches[k] for k in order]
      if len(self._windows) >= _MAX_CACHED:
        self._windows.pop(next(iter(self._windows)))
      self._windows[key] = batches
    return self._windows[key]

  def global_batch(self, i: int) -> tuple[np.ndarray, int]:
    """(game indices int[batch_size], -1 for padding rows; length L) of global batch i."""
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
    """This process's rows of global batch i: (game indices int[b], -1 for padding; L)."""
    rows, length = self.global_batch(i)
    b = self.local_batch_size
    return rows[self.process_index * b : (self.process_index + 1) * b], length

  def padding_fraction(self, epoch: int = 0) -> float:
    """Fraction of padded tokens (steps) over one epoch's global batches, from lengths alone."""
    total = valid = 0
    for i in range(epoch * self.batches_per_epoch, (epoch + 1) * self.batches_per_epoch):
      rows, length = self.global_batch(i)
      total += length * len(rows)
      valid += int(self.steps[rows[rows >= 0]].sum(dtype=np.int64))
    return 1.0 - valid / total


class AssembleBatch:
  """grain map: batch index -> this process's padded batch dict (reads and decodes its games)."""

  def __init__(self, plan: BatchPlan, path, split: str):
    self.plan, self.path, self.split = plan, str(path), split
    self._source = None

  def __getstate__(self):
    # Each worker opens its own file handles.
    return {**self.__dict__, "_source": None}

  def __call__(self, i: int) -> dict[str, np.ndarray]:
    if self._source is None:
      self._source = GameSource(self.path, self.split)
    rows, length = self.plan.local_batch(int(i))
    b, max_len = len(rows), self.plan.max_len
    moves = np.full((b, length), PAD_ID, dtype=np.int32)
    states = np.zeros((b, length, NUM_LABELS), dtype=np.uint8)
    mask = np.zeros((b, length), dtype=bool)
    for r, g in enumerate(rows):
      if g < 0:
        continue
      game = self._source[int(g)]
      n = len(game["moves"]) if max_len is None else min(len(game["moves"]), max_len)
      moves[r, :n] = game["moves"][:n]
      states[r, :n] = game["states"][:n]
      mask[r, :n] = True
    return {"moves": moves, "states": states, "mask": mask, "index": rows.astype(np.int32)}


def padding_fraction(batch: dict) -> float:
  """Fraction of padded tokens in one batch (pad rows included): 1 - mean(mask)."""
  return 1.0 - float(np.mean(batch["mask"]))


def _process_defaults(process_index, process_count) -> tuple[int, int]:
  if process_index is None or process_count is None:
    import jax  # Lazily: grain workers unpickle this module and need no jax.

    process_index = jax.process_index() if process_index is None else process_index
    process_count = jax.process_count() if process_count is None else process_count
  return int(process_index), int(process_count)


def make_plan(
  path,
  split: str,
  *,
  batch_size: int,
  seed: int = 0,
  shuffle: bool = True,
  num_epochs: int | None = None,
  drop_remainder: bool = True,
  bucket_lengths: Sequence[int] = DEFAULT_BUCKET_LENGTHS,
  max_len: int | None = None,
  window_batches: int | None = DEFAULT_WINDOW_BATCHES,
  process_index: int | None = None,
  process_count: int | None = None,
) -> BatchPlan:
  """The `BatchPlan` of a dataset split (scans its game lengths; process defaults from JAX)."""
  process_index, process_count = _process_defaults(process_index, process_count)
  return BatchPlan(
    game_lengths(path, split),
    batch_size=batch_size,
    seed=seed,
    shuffle=shuffle,
    num_epochs=num_epochs,
    drop_remainder=drop_remainder,
    bucket_lengths=bucket_lengths,
    max_len=max_len,
    window_batches=window_batches,
    process_index=process_index,
    process_count=process_count,
  )


def dataset_from_plan(
  plan: BatchPlan,
  path,
  split: str,
  *,
  start: int = 0,
  worker_count: int = 0,
  read_threads: int = 1,
  prefetch_batches: int = DEFAULT_PREFETCH_BATCHES,
) -> grain.IterDataset:
  """The grain dataset of `plan`'s batches `start, start + 1, ...` for this process.

  `read_threads` threads assemble batches in each process (the main one, or each worker);
  `prefetch_batches` bounds the batches buffered per process. `worker_count` > 0 moves assembly
  into that many worker processes; batches and their order do not depend on it.
  """
  ds = grain.MapDataset.range(start, len(plan)).map(AssembleBatch(plan, path, split))
  ds = ds.to_iter_dataset(
    grain.ReadOptions(num_threads=read_threads, prefetch_buffer_size=prefetch_batches)
  )
  if worker_count > 0:
    if not flags.FLAGS.is_parsed():
      # grain 0.2.18 reads an absl flag (worker profiling) when starting workers and fails with
      # UnparsedFlagAccessError outside an absl app (tests, scripts); absl apps parse it anyway.
      flags.FLAGS.mark_as_parsed()
    ds = ds.mp_prefetch(
      grain.MultiprocessingOptions(
        num_workers=worker_count, per_worker_buffer_size=max(1, prefetch_batches // worker_count)
      )
    )
  return ds


class BatchIterator(grain.DatasetIterator):
  """Iterator over a plan's batches whose checkpoint state is just the next batch index.

  `get_state()` is `{"next_batch": n, "plan": plan.fingerprint()}` (JSON), so it restores into an
  iterator with any `worker_count` or process count; `set_state` refuses a state from a different
  plan (other seed, batch size, buckets, data...). A `grain.DatasetIterator`, so grain's orbax
  handler (`grain.checkpoint.CheckpointSave/CheckpointRestore`) saves and restores it. The grain
  pipeline starts on the first `next()` (or `start_prefetch()`), after any `set_state`.
  """

  def __init__(
    self,
    plan: BatchPlan,
    path,
    split: str,
    *,
    worker_count: int = 0,
    read_threads: int = 1,
    prefetch_batches: int = DEFAULT_PREFETCH_BATCHES,
  ):
    super().__init__()
    self.plan, self.path, self.split = plan, path, split
    self._options = {
      "worker_count": worker_count,
      "read_threads": read_threads,
      "prefetch_batches": prefetch_batches,
    }
    self._next_batch = 0
    self._inner = None

  def _ensure_started(self) -> None:
    if self._inner is None:
      ds = dataset_from_plan(
        self.plan, self.path, self.split, start=self._next_batch, **self._options
      )
      self._inner = iter(ds)

  def __next__(self) -> dict[str, np.ndarray]:
    self._assert_not_closed()
    self._ensure_started()
    batch = next(self._inner)
    self._next_batch += 1
    return batch

  def get_state(self) -> dict:
    return {"next_batch": self._next_batch, "plan": self.plan.fingerprint()}

  def set_state(self, state: dict) -> None:
    saved, mine = state.get("plan"), self.plan.fingerprint()
    if saved != mine:
      diff = sorted(k for k in mine if (saved or {}).get(k) != mine[k])
      raise ValueError(f"iterator state is from a different batch plan (differs in {diff})")
    if self._inner is not None:
      self._inner.close()  # Its prefetched batches belong to the old position.
      self._inner = None
    self._next_batch = int(state["next_batch"])

  def start_prefetch(self) -> None:
    self._ensure_started()
    self._inner.start_prefetch()

  def close(self) -> None:
    if self._inner is not None:
      self._inner.close()
      self._inner = None
    super().close()

  def __str__(self) -> str:
    return f"BatchIterator({self.path}:{self.split}, next_batch={self._next_batch})"


def make_batches(
  path,
  split: str,
  *,
  batch_size: int,
  seed: int,
  shuffle: bool = True,
  num_epochs: int | None = None,
  bucket_lengths: Sequence[int] = DEFAULT_BUCKET_LENGTHS,
  max_len: int | None = None,
  window_batches: int | None = DEFAULT_WINDOW_BATCHES,
  process_index: int | None = None,
  process_count: int | None = None,
  worker_count: int = 0,
  drop_remainder: bool = True,
  read_threads: int = 1,
  prefetch_batches: int = DEFAULT_PREFETCH_BATCHES,
) -> BatchIterator:
  """Training batches of a split: shuffled per epoch, length-bucketed, sharded by JAX process.

  Returns an iterator of batch dicts (module docstring) with `get_state()`/`set_state()`;
  restoring a state yields exactly the remaining batches. `batch_size` is global; this process
  yields `batch_size // process_count` rows per batch. `num_epochs=None` repeats forever, each
  epoch with its own permutation. `drop_remainder=False` keeps each epoch's last partial batch,
  filled up with padding rows. `iterator.plan.batches_per_epoch` counts the steps of an epoch.
  """
  plan = make_plan(
    path,
    split,
    batch_size=batch_size,
    seed=seed,
    shuffle=shuffle,
    num_epochs=num_epochs,
    drop_remainder=drop_remainder,
    bucket_lengths=bucket_lengths,
    max_len=max_len,
    window_batches=window_batches,
    process_index=process_index,
    process_count=process_count,
  )
  return BatchIterator(
    plan,
    path,
    split,
    worker_count=worker_count,
    read_threads=read_threads,
    prefetch_batches=prefetch_batches,
  )


def make_eval_batches(
  path,
  split: str,
  *,
  batch_size: int,
  bucket_lengths: Sequence[int] = DEFAULT_BUCKET_LENGTHS,
  max_len: int | None = None,
  max_games: int | None = None,
  sort_by_length: bool = True,
  process_index: int | None = None,
  process_count: int | None = None,
  worker_count: int = 0,
  read_threads: int = 1,
  prefetch_batches: int = DEFAULT_PREFETCH_BATCHES,
) -> BatchIterator:
  """One deterministic pass over a split (or its first `max_games` games): every game exactly
  once, nothing shuffled.

  With `sort_by_length` (default) the whole split is stably sorted by length, so batches run from
  short to long and each bucket shape is compiled once; otherwise batch k holds stored games
  [k * batch_size, (k + 1) * batch_size). The last batch is filled up with padding rows (mask all
  False, moves PAD, index -1); every process yields the same number of batches, its share of each
  global batch, so pad rows land on the last processes.
  """
  process_index, process_count = _process_defaults(process_index, process_count)
  plan = BatchPlan(
    game_lengths(path, split)[:max_games],
    batch_size=batch_size,
    shuffle=False,
    num_epochs=1,
    drop_remainder=False,
    bucket_lengths=bucket_lengths,
    max_len=max_len,
    window_batches=None if sort_by_length else 1,
    process_index=process_index,
    process_count=process_count,
  )
  return BatchIterator(
    plan,
    path,
    split,
    worker_count=worker_count,
    read_threads=read_threads,
    prefetch_batches=prefetch_batches,
  )


def epoch_padding_fraction(
  path,
  split: str,
  *,
  batch_size: int,
  seed: int = 0,
  epoch: int = 0,
  bucket_lengths: Sequence[int] = DEFAULT_BUCKET_LENGTHS,
  max_len: int | None = None,
  window_batches: int | None = DEFAULT_WINDOW_BATCHES,
  drop_remainder: bool = True,
) -> float:
  """Fraction of padded tokens over one training epoch (all processes), without reading games."""
  plan = BatchPlan(
    game_lengths(path, split),
    batch_size=batch_size,
    seed=seed,
    drop_remainder=drop_remainder,
    bucket_lengths=bucket_lengths,
    max_len=max_len,
    window_batches=window_batches,
  )
  return plan.padding_fraction(epoch)
