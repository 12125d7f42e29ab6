"""An append-only answer file that a killed run resumes without a duplicate or a lost row.

Each answer is one JSON line written by a single `os.write` on a descriptor opened with
`O_APPEND` and flushed to disk (`fsync`) before the next answer is taken, so a reader (or a
restarted run) sees whole rows only, except at worst a last line cut by a crash mid-write. Opening
the log repairs that: a last line without its newline is cut off (its request is simply asked
again). Rows are keyed by `answer_key`; `AnswerLog.has(key)` says which questions are answered.
"""

import json
import os
import threading
from pathlib import Path

from chessjax.files import read_jsonl

KEY_FIELDS = ("fen", "variant", "prompt", "model", "reasoning_effort")


def answer_key(row: dict) -> tuple:
  """What identifies an answer: position, variant, prompt, model and reasoning effort."""
  return tuple(str(row.get(k, "")) for k in KEY_FIELDS)


def repair_tail(path: Path) -> int:
  """Cuts a last line that lacks its newline (a write cut by a crash); returns bytes removed."""
  if not path.exists():
    return 0
  size = path.stat().st_size
  if size == 0:
    return 0
  with open(path, "rb+") as f:
    f.seek(max(0, size - 1))
    if f.read(1) == b"\n":
      return 0
    keep, chunk = 0, 1 << 16
    end = size
    while end > 0:  # the last newline, reading backwards
      start = max(0, end - chunk)
      f.seek(start)
      block = f.read(end - start)
      at = block.rfind(b"\n")
      if at >= 0:
        keep = start + at + 1
        break
      end = start
    f.truncate(keep)
    f.flush()
    os.fsync(f.fileno())
  return size - keep


class AnswerLog:
  """The answers already in `path` (read at opening) and atomic appends of new ones."""

  def __init__(self, path):
    self.path = Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self.repaired_bytes = repair_tail(self.path)
    rows, self.problems = read_jsonl(self.path) if self.path.exists() else ([], [])
    self.keys = {answer_key(r) for r in rows}
    self.count = len(rows)
    self._lock = threading.Lock()
    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

  def has(self, key: tuple) -> bool:
    return key in self.keys

  def append(self, row: dict) -> bool:
    """Writes `row` as one line unless its key is answered already; whether it was written."""
    data = (json.dumps(row) + "\n").encode()
    key = answer_key(row)
    with self._lock:
      if key in self.keys:
        return False
      written = os.write(self._fd, data)
      while written < len(data):  # a short write (disk full): finish the line or fail loudly
        written += os.write(self._fd, data[written:])
      os.fsync(self._fd)
      self.keys.add(key)
      self.count += 1
    return True

  def close(self) -> None:
    os.close(self._fd)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()
