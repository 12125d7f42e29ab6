"""Streaming PGN files (plain, .gz, .bz2, .zst) into batches of game texts.

Files are read in blocks, decoded incrementally as UTF-8 (bad bytes become U+FFFD so the games
holding them can be counted and skipped, not crash the run) and split into games at a blank line
followed by a tag line. The raw bytes are hashed while they are read, so the manifest can record
each source's SHA-256 without a second pass. A compressed file that ends early is reported as
truncated; the games before the cut are kept.
"""

import bz2
import codecs
import gzip
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import zstandard

SUFFIXES = (".pgn", ".pgn.gz", ".pgn.bz2", ".pgn.zst")  # The files it reads.
_GAME_BREAK = re.compile(r"\r?\n(?:[ \t\r]*\n)+(?=\[)")
_BLOCK = 1 << 22
_PIECE = 1 << 16


@dataclass
class SourceInfo:
  """What the manifest records about one input file."""

  path: str
  bytes: int = 0
  sha256: str = ""
  games: int = 0
  truncated: bool = False
  error: str = ""
  _hash: "hashlib._Hash" = field(default_factory=hashlib.sha256, repr=False)

  def as_dict(self) -> dict:
    return {
      "file": Path(self.path).name,
      "bytes": self.bytes,
      "sha256": self.sha256,
      "games": self.games,
      "truncated": self.truncated,
      **({"error": self.error} if self.error else {}),
    }


class _HashingReader:
  """Wraps a raw binary file, hashing and counting every byte read through it."""

  def __init__(self, raw, info: SourceInfo):
    self._raw, self._info = raw, info

  def read(self, n=-1):
    data = self._raw.read(n)
    self._info._hash.update(data)
    self._info.bytes += len(data)
    return data

  def readable(self):
    return True

  def close(self):
    self._raw.close()


def _open_decompressed(path: Path, raw):
  name = path.name.lower()
  if name.endswith(".gz"):
    return gzip.GzipFile(fileobj=raw)
  if name.endswith(".bz2"):
    return bz2.BZ2File(raw)
  if name.endswith(".zst"):
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
  return raw


def split_games(text: str) -> list[str]:
  """Splits PGN text into game texts at a blank line followed by a tag line."""
  return [t for t in _GAME_BREAK.split(text) if t.strip()]


_TRUNCATION_ERRORS = (EOFError, OSError, zstandard.ZstdError)


def _read_block(stream, info: SourceInfo) -> bytes:
  """About `_BLOCK` bytes, read in small pieces so that a stream which ends early loses at most
  one piece before the cut; sets `info.truncated` then."""
  pieces, size = [], 0
  while size < _BLOCK and not info.truncated:
    try:
      piece = stream.read(_PIECE)
    except _TRUNCATION_ERRORS as e:
      info.truncated, info.error = True, f"{type(e).__name__}: {e}"
      break
    if not piece:
      break
    pieces.append(piece)
    size += len(piece)
  return b"".join(pieces)


def iter_game_batches(
  path, info: SourceInfo, batch_games: int = 2000
) -> Iterator[tuple[list[str], bool]]:
  """Yields (game texts, is_last_batch_of_file) for one PGN file, in file order."""
  path = Path(path)
  decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
  pending, tail = [], ""
  with open(path, "rb") as raw_file:
    stream = _open_decompressed(path, _HashingReader(raw_file, info))
    while True:
      block = _read_block(stream, info)
      text = tail + decoder.decode(block, final=not block)
      if not block:
        tail = text
        break
      pieces = _GAME_BREAK.split(text)
      tail = pieces.pop()
      pending.extend(pieces)
      while len(pending) >= batch_games:
        info.games += batch_games
        yield pending[:batch_games], False
        pending = pending[batch_games:]
  info.sha256 = info._hash.hexdigest()
  if tail.strip():
    pending.append(tail)
  info.games += len(pending)
  yield pending, True


def game_batches(paths, infos, progress) -> Iterator[tuple[list[str], bool]]:
  """`iter_game_batches` of each file of `paths` in turn (`infos` their `SourceInfo`s), the bytes
  read so far counted into `progress` (a tqdm bar)."""
  for path, info in zip(paths, infos, strict=True):
    before = 0
    for batch in iter_game_batches(path, info):
      progress.update(info.bytes - before)
      before = info.bytes
      yield batch
