"""Reading a prepared dataset: its manifest, a grain random-access source, and `read_games`.

A dataset path may be a local directory or a URL (`gs://bucket/data`): the manifest and lengths
files are read through `etils.epath` (`chessjax.files.as_path`), and shard URLs are handed to
grain's `ArrayRecordDataSource` unchanged (see `GameSource`).
"""

import json
from collections.abc import Iterator
from pathlib import Path

import grain.python as grain

from chessjax.data import records, shards
from chessjax.files import as_path, is_url


def read_manifest(path) -> dict:
  """The manifest of a complete dataset directory (raises with a clear message otherwise)."""
  manifest_path = as_path(path) / shards.MANIFEST
  if not manifest_path.exists():
    raise FileNotFoundError(
      f"{path} is not a prepared dataset (no {shards.MANIFEST}); "
      "run `python -m data_prep.process_pgn` or `python -m data_prep.random_uniform` first"
    )
  manifest = json.loads(manifest_path.read_text())
  if manifest.get("format") != shards.FORMAT:
    raise ValueError(f"{manifest_path} is not a {shards.FORMAT} manifest")
  if manifest.get("format_version") != shards.FORMAT_VERSION:
    raise ValueError(
      f"{manifest_path} has format version {manifest.get('format_version')}, "
      f"this chessjax reads version {shards.FORMAT_VERSION}: prepare the data again"
    )
  return manifest


def variant_of_manifest(manifest: dict) -> str:
  """The rules a dataset's games follow ("chess" or "atomic"); datasets prepared before the
  manifest recorded a variant are standard chess."""
  return manifest.get("encoding", {}).get("variant", "chess")


def shard_paths(path, split: str | None = None) -> list[str]:
  """Shard files of one split (or of every split, in manifest order) of a dataset."""
  manifest = read_manifest(path)
  splits = manifest["splits"]
  if split is not None and split not in splits:
    raise KeyError(f"{path} has no split {split!r}; it has {sorted(splits)}")
  names = [split] if split is not None else list(splits)
  # Local shard paths stay as given (relative or not); URLs are joined by epath.
  base = as_path(path) if is_url(path) else Path(path)
  return [str(base / s["file"]) for name in names for s in splits[name]["shards"]]


class GameSource(grain.RandomAccessDataSource):
  """Random access to the games of a dataset split: `source[i]` is a decoded game dict.

  The shard paths go to `grain.ArrayRecordDataSource` as strings, URLs unchanged: array_record
  opens `gs://` shards itself (its PyPI wheel carries riegeli's GCS reader). That path
  is not tested offline: array_record reads only local files and GCS, never fsspec's `memory://`,
  so the tests read shards from a local dataset and a URL dataset's manifest and lengths only.
  """

  def __init__(self, path, split: str | None = None):
    self.path, self.split = str(path), split
    paths = shard_paths(path, split)
    # array_record refuses an empty file list; a dataset with no kept games is still valid.
    self._records = grain.ArrayRecordDataSource(paths) if paths else []

  def __len__(self) -> int:
    return len(self._records)

  def __getitem__(self, index: int) -> dict:
    return records.decode_record(self._records[index])

  def __repr__(self) -> str:
    return f"GameSource(path={self.path!r}, split={self.split!r}, games={len(self)})"


def read_games(path, split: str | None = None) -> Iterator[dict]:
  """Yields every game of a split (or of all splits) in stored order.

  Each game is a dict: moves int32[T+1], states uint8[T+1, 75], example_id, result, plies.
  """
  source = GameSource(path, split)
  for i in range(len(source)):
    yield source[i]


# Datasets named on an evaluation command line (both tracks' `--data` / `--sets`).


def parse_data_arg(text: str) -> tuple[str, str, str | None]:
  """`NAME=PATH[:SPLIT]` -> (name, path, split or None). A `:` is a split separator only when
  what follows it contains no `/`."""
  name, sep, rest = text.partition("=")
  if not sep or not name or not rest:
    raise ValueError(f"--data {text!r} is not NAME=PATH[:SPLIT]")
  path, colon, split = rest.rpartition(":")
  if not colon or not path or not split or "/" in split:
    return name, rest, None
  return name, path, split


def resolve_split(path, split: str | None) -> str:
  """The split to evaluate: `split` if the dataset has it, else `test`, else its only split."""
  splits = sorted(read_manifest(path)["splits"])
  if split is not None:
    if split not in splits:
      raise ValueError(f"{path} has no split {split!r}; it has {splits}")
    return split
  if "test" in splits:
    return "test"
  if len(splits) == 1:
    return splits[0]
  raise ValueError(f"{path} has no 'test' split; name one of {splits} as {path}:SPLIT")
