"""Writing a prepared dataset: ArrayRecord shards per split plus `manifest.json`, atomically.

A dataset directory is complete iff its `manifest.json` exists; the manifest is written last, by
rename, after every shard is in place. Shards are first written under `DIR/.staging/` and moved
in when the whole run succeeds, so a killed run leaves no manifest and the next run into the same
directory starts over cleanly (stale staging files and unlisted shards are removed). An existing
complete dataset is only replaced with `overwrite=True`.

Layout: `DIR/{split}-{index:05d}.array_record`, each record a game from `chessjax.data.records`,
and `DIR/{split}-lengths.npy`, every game's steps (plies + 1) in record order (int32), so a loader
plans batches without reading each record's header (minutes at 10M games).
"""

import os
import shutil
from pathlib import Path

import numpy as np
from array_record.python.array_record_module import ArrayRecordWriter

from chessjax.files import as_path, write_json

MANIFEST = "manifest.json"
FORMAT = "chessjax-games"
FORMAT_VERSION = 1
STAGING = ".staging"
# Records are zstd-compressed by us; group_size 1 keeps random access to one record cheap.
WRITER_OPTIONS = "group_size:1,uncompressed"


def shard_name(split: str, index: int) -> str:
  return f"{split}-{index:05d}.array_record"


def lengths_name(split: str) -> str:
  return f"{split}-lengths.npy"


def read_lengths(path, split_info: dict) -> np.ndarray:
  """The steps of every game of a split from its lengths file (manifest entry `split_info`).

  `path` is a dataset directory or URL (read through `etils.epath`)."""
  file = as_path(path) / split_info["lengths"]
  with file.open("rb") as f:
    lengths = np.load(f, allow_pickle=False).astype(np.int32)
  if len(lengths) != split_info["games"]:
    raise ValueError(
      f"{file} holds {len(lengths)} lengths for "
      f"{split_info['games']} games: the dataset is damaged, prepare it again"
    )
  return lengths


class DatasetWriter:
  """Appends game records to per-split shards of at most `games_per_shard` records."""

  def __init__(self, out_dir, *, games_per_shard: int = 50_000, overwrite: bool = False):
    self.out_dir = Path(out_dir)
    self.games_per_shard = games_per_shard
    manifest = self.out_dir / MANIFEST
    if manifest.exists() and not overwrite:
      raise FileExistsError(
        f"{self.out_dir} already holds a complete dataset ({MANIFEST}); "
        "pass --overwrite to replace it"
      )
    self.out_dir.mkdir(parents=True, exist_ok=True)
    if manifest.exists():
      manifest.unlink()  # From here on the old dataset is incomplete, never half-replaced.
    clear_incomplete(self.out_dir)
    self.staging = self.out_dir / STAGING
    self.staging.mkdir()
    self._writers: dict[str, ArrayRecordWriter] = {}
    self._shards: dict[str, list[dict]] = {}
    self._steps: dict[str, list[int]] = {}

  def add(self, split: str, record: bytes, plies: int) -> None:
    shards = self._shards.setdefault(split, [])
    if not shards or shards[-1]["games"] >= self.games_per_shard:
      if split in self._writers:
        self._writers.pop(split).close()
      name = shard_name(split, len(shards))
      self._writers[split] = ArrayRecordWriter(str(self.staging / name), WRITER_OPTIONS)
      shards.append({"file": name, "games": 0, "plies": 0})
    self._writers[split].write(record)
    self._steps.setdefault(split, []).append(plies + 1)
    shards[-1]["games"] += 1
    shards[-1]["plies"] += plies

  def finish(self, manifest: dict) -> dict:
    """Closes the shards, moves them in place and writes the manifest. Returns the manifest."""
    for writer in self._writers.values():
      writer.close()
    self._writers.clear()
    splits = {
      split: {
        "games": sum(s["games"] for s in shards),
        "plies": sum(s["plies"] for s in shards),
        "shards": shards,
        "lengths": lengths_name(split),
      }
      for split, shards in sorted(self._shards.items())
    }
    for split, steps in self._steps.items():
      np.save(self.staging / lengths_name(split), np.asarray(steps, dtype=np.int32))
      os.replace(self.staging / lengths_name(split), self.out_dir / lengths_name(split))
    for shards in self._shards.values():
      for s in shards:
        os.replace(self.staging / s["file"], self.out_dir / s["file"])
    self.staging.rmdir()
    full = {"format": FORMAT, "format_version": FORMAT_VERSION, "splits": splits, **manifest}
    write_json(self.out_dir / MANIFEST, full)
    return full

  def abort(self) -> None:
    for writer in self._writers.values():
      writer.close()
    self._writers.clear()
    shutil.rmtree(self.staging, ignore_errors=True)


def clear_incomplete(out_dir: Path) -> list[str]:
  """Removes what an interrupted run left in a directory that has no manifest."""
  out_dir = Path(out_dir)
  if (out_dir / MANIFEST).exists():
    return []
  removed = []
  staging = out_dir / STAGING
  if staging.exists():
    shutil.rmtree(staging)
    removed.append(STAGING)
  for path in [*out_dir.glob("*.array_record"), *out_dir.glob("*-lengths.npy")]:
    path.unlink()
    removed.append(path.name)
  for path in out_dir.glob(f".{MANIFEST}.tmp-*"):
    path.unlink()
    removed.append(path.name)
  return removed
