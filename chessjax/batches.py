"""From a run's spec to its batches: the one translator of the `data` settings into input
pipelines (`chessjax.data.pipeline`), for training, validation and evaluation.

* `train_batches(spec, rows)`: the training split, shuffled per epoch by the run's seed and
  length-bucketed; returns the spec with its epoch length known (`TrainSpec.epoch_steps`, which
  an epoch-based run's length needs), after merging the buckets few of the run's batches use
  (`data.min_bucket_batches`).
* `validation_batches(spec, rows)`: the first `train.eval_batches` batches of the validation
  split, kept in memory for the loop's validations.
* `eval_batches(spec, rows, path, split, ...)`: one pass over any dataset split, cut and
  bucketed as the run trained, so evaluation compiles the shapes training validated with.
"""

import logging

from chessjax.data import pipeline, read_manifest
from chessjax.data.plan import merge_rare_buckets
from chessjax.data.rows import RowFormat
from chessjax.spec import TrainSpec

log = logging.getLogger(__name__)


def _train_iterator(spec: TrainSpec, rows: RowFormat, bucket_lengths: tuple):
  d = spec.data
  return pipeline.make_batches(
    d.train,
    d.train_split,
    rows,
    max_games=d.max_train_games or None,
    batch_size=d.batch_size,
    seed=spec.seed,
    shuffle=d.shuffle,
    bucket_lengths=bucket_lengths,
    max_len=d.max_len,
    window_batches=d.window_batches,
    worker_count=d.worker_count,
    # No grain thread: the training loop reads its batches in its own prefetch thread
    # (`chessjax.prefetch`), already ahead of the device. A second Python thread handing batches
    # to it only adds GIL hand-offs and CPU (docs/performance.md, the loop's own cost).
    read_threads=0,
  )


def train_batches(spec: TrainSpec, rows: RowFormat) -> tuple[pipeline.BatchIterator, TrainSpec]:
  """The training batches of `spec` in the task's training `rows`, and `spec` with
  `epoch_steps` set. With `data.min_bucket_batches` > 0 the buckets that fewer of the run's
  batches use merge into longer ones; the merge is fixed by the plan and the run's length, so a
  resumed run merges the same buckets."""
  if not spec.data.train:
    raise ValueError("config.data.train is empty: point it at a prepared dataset directory")
  buckets = spec.data.bucket_lengths
  batches = _train_iterator(spec, rows, buckets)
  spec = spec.replace(epoch_steps=batches.plan.batches_per_epoch)
  if spec.data.min_bucket_batches > 0:
    used = batches.plan.batch_lengths(0, spec.total_steps)
    merged = merge_rare_buckets(buckets, used, spec.data.min_bucket_batches)
    log.info(
      "data.min_bucket_batches=%d: buckets %s -> %s", spec.data.min_bucket_batches, buckets, merged
    )
    if merged != buckets:
      batches.close()
      batches = _train_iterator(spec, rows, merged)
  return batches, spec


def eval_batches(
  spec: TrainSpec, rows: RowFormat, path, split: str, *, batch_size: int, max_len=None, **kwargs
) -> pipeline.BatchIterator:
  """One pass over a dataset split in the task's evaluation `rows`
  (`pipeline.make_eval_batches`), cut and bucketed as the run's spec says (`data.bucket_lengths`,
  `data.max_len`, unless `max_len` scores longer or shorter prefixes). `kwargs`: `max_games`,
  `sort_by_length` and the rest of `make_eval_batches`'."""
  return pipeline.make_eval_batches(
    path,
    split,
    rows,
    batch_size=batch_size,
    bucket_lengths=spec.data.bucket_lengths,
    max_len=spec.data.max_len if max_len is None else max_len,
    **kwargs,
  )


def validation_batches(spec: TrainSpec, rows: RowFormat) -> list[dict]:
  """The first `train.eval_batches` batches (0: all) of the validation split, read once and kept
  in memory, in the task's evaluation `rows`; [] (with a warning) when the training set has no
  validation split."""
  d = spec.data
  if d.val_split not in read_manifest(d.train)["splits"]:
    log.warning("no %r split in %s: no validation during training", d.val_split, d.train)
    return []
  it = eval_batches(spec, rows, d.train, d.val_split, batch_size=d.batch_size, sort_by_length=False)
  out = []
  for batch in it:
    out.append(batch)
    if len(out) == spec.train.eval_batches:  # 0 never matches: the whole split.
      break
  it.close()
  return out
