"""Workdirs and datasets at URLs (`gs://bucket/...`), tested offline on fsspec's `memory://`.

etils.epath knows `gs://`, `s3://`, `az://` and `hf://` only (`epath.Path("memory://x")` raises
KeyError), so the `memory_scheme` fixture registers `memory://` in etils' gpath tables for the
duration of a test, with etils' own fsspec backend pointed at fsspec's in-memory filesystem: the
same code path (`_FileSystemSpecBackend`) that a `gs://` path takes with gcsfs. This is test code
only; chessjax itself registers nothing in etils.

What cannot be tested on `memory://`, and how it is tested instead:
* Orbax checkpoints. Orbax does its directory work through epath (which works on `memory://`),
  but writes arrays with tensorstore, whose spec it builds from the path: `gs://` gets
  tensorstore's GCS driver, anything else must be an absolute local path ("Checkpoint path should
  be absolute. Got memory:/..."); `file://` fails the same way. `test_training_to_a_url_workdir`
  therefore sends only the `checkpoints/` directory of a `memory://` workdir to a local folder
  (it patches the `as_path` that `chessjax.checkpointing` uses); config.json,
  train_summary.json, TensorBoard events and the evaluation outputs go to `memory://`.
* Shards. array_record opens local files and `gs://` only, so shards are read from a local
  dataset; a dataset's manifest and lengths files are read from `memory://`.
"""

import json
import os

import fsspec
import numpy as np
import pytest
from conftest import SMOKE_FAMILY
from etils import epath
from etils.epath import backend, gpath, register

from chessjax import checkpointing, files, logs, train, workdir
from chessjax.data import pipeline, read_manifest
from chessjax.data.source import shard_paths
from chessjax.workdir import SUMMARY
from configs import cwm


class _MemoryBackend(backend._FileSystemSpecBackend):
  """etils' fsspec backend on fsspec's in-memory filesystem (etils maps unknown schemes to
  the local filesystem)."""

  def fs(self, path):
    return fsspec.filesystem("memory")


@pytest.fixture
def memory_scheme(monkeypatch):
  """Registers `memory://` with etils.epath for one test; yields a fresh `memory://` root."""
  monkeypatch.setattr(gpath, "_URI_PREFIXES", (*gpath._URI_PREFIXES, "memory://"))
  monkeypatch.setattr(gpath, "_URI_SCHEMES", gpath._URI_SCHEMES | {"memory"})
  monkeypatch.setitem(gpath._URI_MAP_ROOT, "memory://", "/memory/")
  monkeypatch.setitem(gpath._PREFIX_TO_BACKEND, "memory", _MemoryBackend())
  monkeypatch.setitem(register._URI_PREFIXES_TO_CLS, "memory://", gpath.PosixGPath)
  root = f"memory://chessjax-test-{os.getpid()}"
  mem = fsspec.filesystem("memory")
  if mem.exists(root):
    mem.rm(root, recursive=True)
  yield root
  if mem.exists(root):
    mem.rm(root, recursive=True)


def copy_to_memory(local_dir, url) -> None:
  for path in sorted(local_dir.iterdir()):
    (epath.Path(url) / path.name).write_bytes(path.read_bytes())


def test_is_url_and_as_path(memory_scheme, tmp_path, monkeypatch):
  assert files.is_url("gs://bucket/run") and files.is_url(memory_scheme)
  assert not files.is_url("runs/t1") and not files.is_url(tmp_path)
  url = files.as_path(f"{memory_scheme}/run")
  assert str(url) == f"{memory_scheme}/run"  # Not made absolute, not resolved.
  assert str(url / "tb") == f"{memory_scheme}/run/tb"
  assert str(files.as_path("gs://bucket/run") / "checkpoints") == "gs://bucket/run/checkpoints"
  monkeypatch.chdir(tmp_path)
  assert str(files.as_path("runs/t1")) == str(tmp_path / "runs" / "t1")


def test_write_text_and_json_to_a_url(memory_scheme):
  files.write_text(f"{memory_scheme}/run/a.txt", "one\n")
  files.write_text(f"{memory_scheme}/run/a.txt", "two\n")
  files.write_json(f"{memory_scheme}/run/b.json", {"x": 1})
  mem = fsspec.filesystem("memory")
  assert mem.cat(f"{memory_scheme}/run/a.txt") == b"two\n"
  assert json.loads(mem.cat(f"{memory_scheme}/run/b.json")) == {"x": 1}
  assert sorted(p.name for p in files.as_path(f"{memory_scheme}/run").iterdir()) == [
    "a.txt",
    "b.json",
  ]  # No temporary siblings on an object store.


def test_read_manifest_and_game_lengths_at_a_url(memory_scheme, small_dataset):
  url = f"{memory_scheme}/data"
  copy_to_memory(small_dataset, url)
  assert read_manifest(url) == read_manifest(small_dataset)
  for split in ("train", "validation", "test"):
    lengths = pipeline.game_lengths(url, split)
    np.testing.assert_array_equal(lengths, pipeline.game_lengths(small_dataset, split))
    assert len(lengths) == read_manifest(url)["splits"][split]["games"] > 0
  assert shard_paths(url, "test")[0].startswith(f"{url}/test-")  # URLs go to array_record as is.
  with pytest.raises(FileNotFoundError, match="not a prepared dataset"):
    read_manifest(f"{memory_scheme}/nothing")


def test_tensorboard_events_to_a_url(memory_scheme, tmp_path):
  from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

  writer = logs.summary_writer(files.as_path(f"{memory_scheme}/run") / "tb")
  for step in (1, 2):
    writer.add_scalar("train/loss", 1.0 / step, step)
    writer.flush()
  writer.close()
  mem = fsspec.filesystem("memory")
  (event_file,) = mem.glob(f"{memory_scheme}/run/tb/events.out.tfevents.*")
  local = tmp_path / "tb"
  local.mkdir()
  (local / event_file.rsplit("/", 1)[-1]).write_bytes(mem.cat(event_file))  # Read back locally.
  events = EventAccumulator(str(local))
  events.Reload()
  assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(1, 1.0), (2, 0.5)]


@pytest.mark.slow
def test_training_to_a_url_workdir(memory_scheme, small_dataset, tmp_path, monkeypatch):
  """A smoke run whose workdir is `memory://...`; only checkpoints/ go to a local folder, since
  orbax's tensorstore writes need `gs://` or a local path (module docstring)."""
  local_checkpoints = tmp_path / "checkpoints_of_memory"

  def checkpoint_as_path(path):
    if str(path).startswith("memory://"):
      return epath.Path(local_checkpoints / str(path).removeprefix("memory://"))
    return files.as_path(path)

  monkeypatch.setattr(checkpointing, "as_path", checkpoint_as_path)
  url = f"{memory_scheme}/run"
  config = cwm.get_config(f"family={SMOKE_FAMILY},size=d128,smoke=True")
  config.data.train = str(small_dataset)
  config.data.bucket_lengths = (128,)
  config.train.steps = 4
  summary = train.train_and_evaluate(config, url)
  assert summary["steps"] == 4 and summary["validation"]

  mem = fsspec.filesystem("memory")
  assert json.loads(mem.cat(f"{url}/config.json")) == json.loads(train.config_json(config))
  assert json.loads(mem.cat(f"{url}/{SUMMARY}"))["steps"] == 4
  (event_file,) = mem.glob(f"{url}/tb/events.out.tfevents.*")
  assert mem.size(event_file) > 100
  assert not mem.exists(f"{url}/checkpoints")
  assert (local_checkpoints / url.removeprefix("memory://") / "checkpoints" / "4").is_dir()

  assert workdir.read_config(url).train.steps == 4
  restored = workdir.restore(url, which="latest")
  assert restored.step == 4

  from chessjax.world_model import evaluate

  results = evaluate.evaluate(
    url, {"real": (str(small_dataset), "test")}, max_games=8, boards=1, restored=restored,
    verbose=False,
  )  # fmt: skip
  assert results["real"]["checkpoint_step"] == 4
  names = {p.rsplit("/", 1)[-1] for p in mem.find(f"{url}/eval")}
  assert {"real.json", "real.md", "results.md", "prefix_bins.png"} <= names
  assert json.loads(mem.cat(f"{url}/eval/real.json"))["checkpoint_step"] == 4
  assert mem.cat(f"{url}/eval/prefix_bins.png").startswith(b"\x89PNG")
  assert f"# Evaluation of `{url}`" in mem.cat(f"{url}/eval/results.md").decode()
  assert len(results["real"]["boards"]) == len([n for n in names if n.endswith(".svg")])
