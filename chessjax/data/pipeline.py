"""The grain input pipeline: prepared games -> fixed-shape, length-bucketed batches for `jax.jit`.

Batches are dicts of numpy arrays with `b` rows (this process's share of the global batch) and
`T` positions (the batch's bucket length): the arrays of the track's row format
(`chessjax.data.rows`; the world model's are moves, states and mask) plus
  index  int32[b]         position of the game in the split (`GameSource` order), -1 on pad rows.
`T` comes from a short list of bucket lengths, so a jitted step compiles a handful of shapes; the
row count is always `b` (pad rows are all padding).

Which games form batch i and its `T` is a pure function of (row lengths, `Batching`, i): see
`chessjax.data.plan`. Row lengths come from each game's steps, which the manifest stores per split
(`{split}-lengths.npy`); datasets written before it did are scanned once (about 10 us a game).

Workers: batches are assembled (records read, decoded, padded) by `read_threads` background
threads, in the main process or, with `worker_count > 0`, in each of that many grain worker
processes (`mp_prefetch`), a few batches ahead. Close iterators that use workers
(`iterator.close()`) when done. `BatchIterator` keeps its own state (the next batch index), not
grain's per-worker positions, so a checkpoint restores under any `worker_count`.
"""

import json
import logging

import grain
import numpy as np
from absl import flags

from chessjax.data import records, shards
from chessjax.data.plan import Batching, BatchPlan
from chessjax.data.rows import RowFormat
from chessjax.data.source import GameSource, read_manifest, shard_paths

# A batch is up to batch_size * T * 77 bytes (10 MB at 128 x 1024): buffer a few, not grain's 500.
DEFAULT_PREFETCH_BATCHES = 4

_LENGTHS_CACHE: dict[tuple, np.ndarray] = {}
log = logging.getLogger(__name__)


def game_lengths(path, split: str) -> np.ndarray:
  """Steps (plies + 1) of every game of a split, in `GameSource` order: int32[N].

  Read from the split's lengths file when the manifest names one, else from every record's
  header (one zstd call per game). Cached per process while the manifest is unchanged, so
  training and evaluation pipelines share one read.
  """
  manifest = read_manifest(path)  # Clear error for an incomplete or foreign directory.
  if split not in manifest["splits"]:
    raise KeyError(f"{path} has no split {split!r}; it has {sorted(manifest['splits'])}")
  info = manifest["splits"][split]
  key = (str(path), split, json.dumps(info, sort_keys=True))
  if key not in _LENGTHS_CACHE:
    if info.get("lengths"):
      lengths = shards.read_lengths(path, info)
    else:
      lengths = _scan_lengths(path, split)
    _LENGTHS_CACHE[key] = lengths
  return _LENGTHS_CACHE[key]


def _scan_lengths(path, split: str) -> np.ndarray:
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
  return lengths


class AssembleBatch:
  """grain map: batch index -> this process's batch dict (reads its games, the row format pads)."""

  def __init__(self, plan: BatchPlan, path, split: str, rows: RowFormat):
    self.plan, self.path, self.split, self.rows = plan, str(path), split, rows
    self._source = None

  def __getstate__(self):
    # Each worker opens its own file handles.
    return {**self.__dict__, "_source": None}

  def __call__(self, i: int) -> dict[str, np.ndarray]:
    if self._source is None:
      self._source = GameSource(self.path, self.split)
    index, length = self.plan.local_batch(int(i))
    games = [None if g < 0 else (int(g), self._source[int(g)]) for g in index]
    batch = self.rows.batch(
      games, length, max_len=self.plan.max_len, epoch=self.plan.epoch_of(int(i))
    )
    batch["index"] = index.astype(np.int32)
    return batch


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
  rows: RowFormat,
  batching: Batching,
  *,
  max_games: int | None = None,
  process_index: int | None = None,
  process_count: int | None = None,
) -> BatchPlan:
  """The `BatchPlan` of a split's (first `max_games`) games; process defaults from JAX."""
  process_index, process_count = _process_defaults(process_index, process_count)
  lengths = rows.lengths(game_lengths(path, split)[:max_games])
  return BatchPlan(lengths, batching, process_index=process_index, process_count=process_count)


def dataset_from_plan(
  plan: BatchPlan,
  path,
  split: str,
  rows: RowFormat,
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
  ds = grain.MapDataset.range(start, len(plan)).map(AssembleBatch(plan, path, split, rows))
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
    rows: RowFormat,
    *,
    worker_count: int = 0,
    read_threads: int = 1,
    prefetch_batches: int = DEFAULT_PREFETCH_BATCHES,
  ):
    super().__init__()
    self.plan, self.path, self.split, self.rows = plan, path, split, rows
    self._options = {
      "worker_count": worker_count,
      "read_threads": read_threads,
      "prefetch_batches": prefetch_batches,
    }
    self._next_batch = 0
    self._inner = None
    # Games this process has read (pad rows left out), logged on `close`: with several processes
    # each reads only its rows of every global batch.
    self.records_read = 0

  def _ensure_started(self) -> None:
    if self._inner is None:
      ds = dataset_from_plan(
        self.plan, self.path, self.split, self.rows, start=self._next_batch, **self._options
      )
      self._inner = iter(ds)

  def __next__(self) -> dict[str, np.ndarray]:
    self._assert_not_closed()
    self._ensure_started()
    batch = next(self._inner)
    self._next_batch += 1
    self.records_read += int(np.count_nonzero(batch["index"] >= 0))
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
    if self.records_read:
      plan = self.plan
      log.info(
        "process %d of %d read %d records of %s:%s (%d rows of each global batch of %d)",
        plan.process_index,
        plan.process_count,
        self.records_read,
        self.path,
        self.split,
        plan.local_batch_size,
        plan.batch_size,
      )
      self.records_read = 0
    super().close()

  def __str__(self) -> str:
    return f"BatchIterator({self.path}:{self.split}, next_batch={self._next_batch})"


def make_batches(
  path,
  split: str,
  rows: RowFormat,
  *,
  max_games: int | None = None,
  process_index: int | None = None,
  process_count: int | None = None,
  worker_count: int = 0,
  read_threads: int = 1,
  prefetch_batches: int = DEFAULT_PREFETCH_BATCHES,
  **batching,
) -> BatchIterator:
  """Training batches of a split (or of its first `max_games` games): shuffled per epoch,
  length-bucketed, sharded by JAX process.

  `batching` are the fields of `Batching` (`batch_size` and `seed` at least). Returns an
  iterator of batch dicts (module docstring) with `get_state()`/`set_state()`; restoring a state
  yields exactly the remaining batches. This process yields `batch_size // process_count` rows
  per batch. `iterator.plan.batches_per_epoch` counts the steps of an epoch.
  """
  plan = make_plan(
    path,
    split,
    rows,
    Batching(**batching),
    max_games=max_games,
    process_index=process_index,
    process_count=process_count,
  )
  return BatchIterator(
    plan,
    path,
    split,
    rows,
    worker_count=worker_count,
    read_threads=read_threads,
    prefetch_batches=prefetch_batches,
  )


def make_eval_batches(
  path,
  split: str,
  rows: RowFormat,
  *,
  batch_size: int,
  bucket_lengths=None,
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
  False, index -1); every process yields the same number of batches, its share of each global
  batch, so pad rows land on the last processes.
  """
  batching = Batching(
    batch_size=batch_size,
    shuffle=False,
    num_epochs=1,
    drop_remainder=False,
    max_len=max_len,
    window_batches=None if sort_by_length else 1,
    **({} if bucket_lengths is None else {"bucket_lengths": tuple(bucket_lengths)}),
  )
  plan = make_plan(
    path,
    split,
    rows,
    batching,
    max_games=max_games,
    process_index=process_index,
    process_count=process_count,
  )
  return BatchIterator(
    plan,
    path,
    split,
    rows,
    worker_count=worker_count,
    read_threads=read_threads,
    prefetch_batches=prefetch_batches,
  )


def epoch_padding_fraction(
  path, split: str, rows: RowFormat, *, epoch: int = 0, **batching
) -> float:
  """Fraction of padded tokens over one training epoch (all processes), without reading games."""
  plan = BatchPlan(rows.lengths(game_lengths(path, split)), Batching(**batching))
  return plan.padding_fraction(epoch)
