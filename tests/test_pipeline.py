"""The grain batch pipeline: shapes, padding, bucketing, determinism, sharding, resume, eval."""

import itertools
import json
import random

import chess
import grain
import numpy as np
import pytest

from chessjax.data import pipeline, plan
from chessjax.data.plan import Batching
from chessjax.data.records import encode_record
from chessjax.data.rows import GameRows
from chessjax.data.shards import DatasetWriter
from chessjax.encoding import PAD_ID, START_ID, encode_game

BUCKETS = (16, 32, 48, 64, 128, 256)
ROWS = GameRows()
WINDOW = 4  # Small windows so an epoch has several, plus a partial one.


def _random_game(rng: random.Random, plies: int) -> list[str]:
  board, ucis = chess.Board(), []
  while len(ucis) < plies and not board.is_game_over():
    move = rng.choice(list(board.legal_moves))
    ucis.append(move.uci())
    board.push(move)
  return ucis


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, sample_games_uci):
  """A dataset dir with a 'train' split (200 real + 60 short synthetic games, lengths 1..~250
  steps) and a 'val' split of 37 games; returns (path, {split: [(moves, states), ...]})."""
  rng = random.Random(7)
  short = [_random_game(rng, n) for n in range(60)]  # Includes the 0-ply game (1 step).
  splits = {"train": sample_games_uci[:200] + short, "val": sample_games_uci[200:237]}
  path = tmp_path_factory.mktemp("pipeline") / "ds"
  writer = DatasetWriter(path, games_per_shard=64)  # Several shards per split.
  games = {}
  for split, ucis_list in splits.items():
    rows = list(zip(ucis_list, range(len(ucis_list)), strict=True))
    rng.shuffle(rows)  # Stored order unrelated to length.
    games[split] = []
    for ucis, n in rows:
      moves, states = encode_game(ucis)
      writer.add(split, encode_record(moves, states, f"{split}-{n}", "*"), len(ucis))
      games[split].append((moves, states))
  writer.finish({})
  return path, games


def _kwargs(**kw):
  """make_batches arguments of the tests (one process unless overridden)."""
  base = {"batch_size": 8, "seed": 5, "bucket_lengths": BUCKETS, "window_batches": WINDOW}
  return {**base, "process_index": 0, "process_count": 1, **kw}


def _epoch(path, split, **kw):
  return list(pipeline.make_batches(path, split, ROWS, **_kwargs(num_epochs=1, **kw)))


def _same(a: list[dict], b: list[dict]) -> bool:
  return len(a) == len(b) and all(
    x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
    for x, y in zip(a, b, strict=True)
  )


def _assert_rows_match_games(batch, games, max_len=None):
  for r, g in enumerate(batch["index"]):
    valid = batch["mask"][r]
    if g < 0:
      assert not valid.any() and (batch["moves"][r] == PAD_ID).all()
      assert not batch["states"][r].any()
      continue
    moves, states = games[g]
    n = len(moves) if max_len is None else min(len(moves), max_len)
    assert valid.sum() == n and valid[:n].all()  # Valid steps form a prefix of the row.
    np.testing.assert_array_equal(batch["moves"][r, :n], moves[:n])
    np.testing.assert_array_equal(batch["states"][r, :n], states[:n])


def test_shapes_dtypes_mask_and_contents(dataset):
  path, games = dataset
  batches = _epoch(path, "train")
  assert len(batches) == 260 // 8  # 8 windows of 4 batches; the 4 leftover games dropped.
  for batch in batches:
    b, length = batch["moves"].shape
    assert b == 8 and length in BUCKETS
    assert batch["moves"].dtype == np.int32 and batch["states"].dtype == np.uint8
    assert batch["mask"].dtype == bool and batch["index"].dtype == np.int32
    assert batch["states"].shape == (8, length, 75) and batch["mask"].shape == (8, length)
    np.testing.assert_array_equal(batch["mask"], batch["moves"] != PAD_ID)
    assert not batch["states"][~batch["mask"]].any()
    assert (batch["moves"][:, 0] == START_ID).all()
    assert (batch["index"] >= 0).all()  # drop_remainder: no padding rows.
    # The bucket is the tightest one for the longest game.
    longest = batch["mask"].sum(axis=1).max()
    assert length == min(x for x in BUCKETS if x >= longest)
    _assert_rows_match_games(batch, games["train"])
  seen = np.concatenate([b["index"] for b in batches])
  assert len(np.unique(seen)) == len(seen) == 256


def test_padding_fraction(dataset):
  path, _ = dataset
  batches = _epoch(path, "train")
  for batch in batches:
    assert pipeline.padding_fraction(batch) == pytest.approx(
      (batch["moves"] == PAD_ID).sum() / batch["moves"].size
    )
  pad = sum((b["moves"] == PAD_ID).sum() for b in batches)
  total = sum(b["moves"].size for b in batches)
  planned = pipeline.epoch_padding_fraction(
    path, "train", ROWS, batch_size=8, seed=5, bucket_lengths=BUCKETS, window_batches=WINDOW
  )
  assert planned == pytest.approx(pad / total)
  # Sorting within windows beats one fixed length, and larger windows sort better.
  single = pipeline.epoch_padding_fraction(path, "train", ROWS, batch_size=8, bucket_lengths=(256,))
  whole = pipeline.epoch_padding_fraction(
    path, "train", ROWS, batch_size=8, bucket_lengths=BUCKETS, window_batches=None
  )
  print(f"padding: one bucket {single:.3f}, window 4 {planned:.3f}, whole epoch {whole:.3f}")
  assert whole < planned < 0.6 * single


def test_same_seed_same_batches_other_seed_differs(dataset):
  path, _ = dataset
  a, b = _epoch(path, "train", seed=3), _epoch(path, "train", seed=3)
  assert _same(a, b)
  c = _epoch(path, "train", seed=4)
  assert not _same(a, c)
  assert [x["index"].tolist() for x in a] != [x["index"].tolist() for x in c]
  # Each epoch has its own permutation.
  it = pipeline.make_batches(path, "train", ROWS, **_kwargs(seed=3))
  two = [next(it) for _ in range(2 * len(a))]
  assert _same(two[: len(a)], a)
  assert not _same(two[len(a) :], a)


def test_unshuffled_batches_are_the_stored_order_every_epoch(dataset):
  """`shuffle=False` with one-batch windows and one bucket: consecutive stored games in each batch
  (rows sorted by length inside it), the same batches every epoch (the released loader's order;
  `config.data.shuffle`)."""
  path, games = dataset
  kw = {"shuffle": False, "window_batches": 1, "bucket_lengths": (512,), "max_len": 512}
  it = pipeline.make_batches(path, "train", ROWS, **_kwargs(**kw))
  per_epoch = len(games["train"]) // 8
  two = [next(it) for _ in range(2 * per_epoch)]
  assert [sorted(b["index"].tolist()) for b in two[:per_epoch]] == [
    list(range(8 * i, 8 * i + 8)) for i in range(per_epoch)
  ]
  assert _same(two[:per_epoch], two[per_epoch:])
  for batch in two[:3]:
    _assert_rows_match_games(batch, games["train"])


@pytest.mark.parametrize("drop_remainder", [True, False])
def test_process_shards_disjoint_and_covering(dataset, drop_remainder):
  path, games = dataset
  kw = {"batch_size": 6, "process_count": 3, "drop_remainder": drop_remainder}
  shards = [_epoch(path, "train", process_index=p, **kw) for p in range(3)]
  # Same step count and shape on every process (multi-host jit needs both).
  assert len({len(s) for s in shards}) == 1
  for step in zip(*shards, strict=True):
    assert len({b["moves"].shape for b in step}) == 1
    assert all(b["moves"].shape[0] == 2 for b in step)
  per_process = [{int(i) for b in s for i in b["index"] if i >= 0} for s in shards]
  for x, y in itertools.combinations(per_process, 2):
    assert not x & y
  union = set().union(*per_process)
  counts = sum(int((b["index"] >= 0).sum()) for s in shards for b in s)
  assert counts == len(union)  # Nothing twice inside a process either.
  if drop_remainder:
    assert len(union) == 260 - 260 % 6
  else:
    assert union == set(range(len(games["train"])))
  for s in shards:
    for b in s:
      _assert_rows_match_games(b, games["train"])


def test_resume_from_state_equals_continuation(dataset):
  path, _ = dataset
  steps = 32 + 3  # Past the first epoch boundary (32 batches per epoch).
  full = pipeline.make_batches(path, "train", ROWS, **_kwargs())
  expected = [next(full) for _ in range(steps + 10)]
  it = pipeline.make_batches(path, "train", ROWS, **_kwargs())
  for _ in range(steps):
    next(it)
  state = json.loads(json.dumps(it.get_state()))  # Checkpoints store it as JSON.
  assert state["next_batch"] == steps
  resumed = pipeline.make_batches(path, "train", ROWS, **_kwargs())
  resumed.set_state(state)
  assert _same([next(resumed) for _ in range(10)], expected[steps:])
  # set_state on a running iterator discards what it had prefetched.
  it.set_state({**state, "next_batch": 2})
  assert _same([next(it) for _ in range(3)], expected[2:5])


def test_state_from_another_plan_is_refused(dataset):
  path, _ = dataset
  state = pipeline.make_batches(path, "train", ROWS, **_kwargs()).get_state()
  other = pipeline.make_batches(path, "train", ROWS, **_kwargs(seed=6))
  with pytest.raises(ValueError, match="seed"):
    other.set_state(state)
  other = pipeline.make_batches(path, "train", ROWS, **_kwargs(batch_size=16))
  with pytest.raises(ValueError, match="batch_size"):
    other.set_state(state)


def test_resume_on_another_process_count(dataset):
  path, _ = dataset
  one = pipeline.make_batches(path, "train", ROWS, **_kwargs())
  for _ in range(5):
    next(one)
  state = one.get_state()
  expected = [next(one) for _ in range(3)]
  halves = []
  for p in range(2):
    it = pipeline.make_batches(path, "train", ROWS, **_kwargs(process_index=p, process_count=2))
    it.set_state(state)
    halves.append([next(it) for _ in range(3)])
  for whole, a, b in zip(expected, *halves, strict=True):
    for key in whole:
      np.testing.assert_array_equal(whole[key], np.concatenate([a[key], b[key]]))


def test_grain_orbax_handler_round_trip(dataset, tmp_path):
  path, _ = dataset
  it = pipeline.make_batches(path, "train", ROWS, **_kwargs())
  assert isinstance(it, grain.DatasetIterator)
  for _ in range(4):
    next(it)
  grain.checkpoint.CheckpointHandler().save(tmp_path, item=it)
  expected = next(it)
  restored = grain.checkpoint.CheckpointHandler().restore(
    tmp_path, item=pipeline.make_batches(path, "train", ROWS, **_kwargs())
  )
  assert _same([next(restored)], [expected])


@pytest.mark.slow  # Spawning grain workers (each imports jax) takes ~10 s on 2 shared cores.
def test_resume_with_workers_and_worker_independence(dataset):
  path, _ = dataset
  reference = _epoch(path, "train")
  it = pipeline.make_batches(path, "train", ROWS, **_kwargs(num_epochs=1, worker_count=2))
  try:
    head = [next(it) for _ in range(7)]
    state = json.loads(json.dumps(it.get_state()))
  finally:
    it.close()
  resumed = pipeline.make_batches(path, "train", ROWS, **_kwargs(num_epochs=1, worker_count=2))
  try:
    resumed.set_state(state)
    tail = list(resumed)
  finally:
    resumed.close()
  assert _same(head, reference[:7])  # Workers do not change the batches.
  assert _same(tail, reference[7:])
  # The state does not depend on the worker count either.
  single = pipeline.make_batches(path, "train", ROWS, **_kwargs(num_epochs=1))
  single.set_state(state)
  assert _same(list(single), reference[7:])


def test_truncation_keeps_prefix(dataset):
  path, games = dataset
  batches = _epoch(path, "train", max_len=40)
  assert any(len(games["train"][i][0]) > 40 for b in batches for i in b["index"])
  for batch in batches:
    assert batch["moves"].shape[1] <= 48
    assert batch["mask"].sum(axis=1).max() <= 40
    _assert_rows_match_games(batch, games["train"], max_len=40)


def test_long_games_round_up_to_multiples_of_the_largest_bucket(dataset):
  assert plan.bucket_length(1, (32, 64)) == 32
  assert plan.bucket_length(64, (32, 64)) == 64
  assert plan.bucket_length(65, (32, 64)) == 128
  assert plan.bucket_length(200, (32, 64)) == 256
  path, games = dataset
  batches = _epoch(path, "train", bucket_lengths=(16, 32))
  lengths = {b["moves"].shape[1] for b in batches}
  assert all(x in (16, 32) or x % 32 == 0 for x in lengths) and max(lengths) > 32
  for batch in batches:
    _assert_rows_match_games(batch, games["train"])


@pytest.mark.parametrize("sort_by_length", [True, False])
def test_eval_covers_every_game_once(dataset, sort_by_length):
  path, games = dataset
  kw = {"batch_size": 8, "bucket_lengths": BUCKETS, "sort_by_length": sort_by_length}
  # process_index/count default to JAX's (one CPU process).
  batches = list(pipeline.make_eval_batches(path, "val", ROWS, **kw))
  assert _same(batches, list(pipeline.make_eval_batches(path, "val", ROWS, **kw)))
  assert len(batches) == 5  # ceil(37 / 8)
  index = np.concatenate([b["index"] for b in batches])
  real = index[index >= 0]
  assert sorted(real.tolist()) == list(range(37))
  assert (index[-3:] == -1).all() and (index[:-3] >= 0).all()  # Only the tail is padding.
  assert not batches[-1]["mask"][-3:].any()
  lengths = np.array([len(games["val"][i][0]) for i in real])
  if sort_by_length:
    assert (np.diff(lengths) >= 0).all()
    shapes = [b["moves"].shape[1] for b in batches]
    assert shapes == sorted(shapes)
  else:
    # Batches hold consecutive stored games.
    assert [sorted(b["index"][b["index"] >= 0].tolist()) for b in batches] == [
      list(range(s, min(s + 8, 37))) for s in range(0, 37, 8)
    ]
  for batch in batches:
    _assert_rows_match_games(batch, games["val"])


def test_eval_process_shards(dataset):
  path, _ = dataset
  kw = {"batch_size": 8, "bucket_lengths": BUCKETS, "process_count": 4}
  shards = [
    list(pipeline.make_eval_batches(path, "val", ROWS, process_index=p, **kw)) for p in range(4)
  ]
  assert len({len(s) for s in shards}) == 1
  real = [int(i) for s in shards for b in s for i in b["index"] if i >= 0]
  assert sorted(real) == list(range(37))
  for step in zip(*shards, strict=True):
    assert len({b["moves"].shape for b in step}) == 1


def test_eval_max_games_is_a_prefix(dataset):
  path, games = dataset
  batches = list(pipeline.make_eval_batches(path, "val", ROWS, batch_size=8, max_games=11))
  index = np.concatenate([b["index"] for b in batches])
  assert len(batches) == 2 and sorted(index[index >= 0].tolist()) == list(range(11))
  for batch in batches:
    _assert_rows_match_games(batch, games["val"])


def test_game_lengths_match_manifest(dataset):
  path, games = dataset
  for split in ("train", "val"):
    lengths = pipeline.game_lengths(path, split)
    assert lengths.tolist() == [len(m) for m, _ in games[split]]
    manifest = json.loads((path / "manifest.json").read_text())
    assert int((lengths - 1).sum()) == manifest["splits"][split]["plies"]
    # The manifest's lengths file and a scan of every record header agree.
    assert manifest["splits"][split]["lengths"] == f"{split}-lengths.npy"
    np.testing.assert_array_equal(pipeline._scan_lengths(path, split), lengths)


def test_dataset_without_lengths_file_is_scanned(dataset, tmp_path):
  """Datasets prepared before the manifest named a lengths file still load (by a scan)."""
  import shutil

  path, games = dataset
  old = tmp_path / "old"
  shutil.copytree(path, old)
  manifest = json.loads((old / "manifest.json").read_text())
  for info in manifest["splits"].values():
    (old / info.pop("lengths")).unlink()
  (old / "manifest.json").write_text(json.dumps(manifest))
  lengths = pipeline.game_lengths(old, "train")
  assert lengths.tolist() == [len(m) for m, _ in games["train"]]


def test_bad_arguments_raise_clear_errors(dataset):
  path, _ = dataset

  def plan(process_count=1, **batching):
    return pipeline.make_plan(
      path, "val", ROWS, Batching(**batching), process_index=0, process_count=process_count
    )

  with pytest.raises(ValueError, match="divisible by process_count"):
    plan(batch_size=6, process_count=4)
  with pytest.raises(ValueError, match="make no batch"):
    plan(batch_size=64)
  with pytest.raises(ValueError, match="increasing"):
    plan(batch_size=8, bucket_lengths=(64, 32))
  with pytest.raises(KeyError, match="no split"):
    pipeline.game_lengths(path, "test")
  plan = plan(batch_size=8, num_epochs=2)
  assert len(plan) == 2 * 4
  with pytest.raises(IndexError):
    plan.global_batch(len(plan))
