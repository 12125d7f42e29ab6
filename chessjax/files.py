"""Atomic file writes: readers see the old content or the new, never a partial file.

Each write goes to a temporary sibling (same directory, so the rename stays on one filesystem),
is flushed to disk and then renamed over the target.
"""

import json
import os
from pathlib import Path


def write_text(path, text: str) -> None:
  """Writes `text` to `path` atomically."""
  path = Path(path)
  tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
  with open(tmp, "w") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def write_json(path, obj) -> None:
  """Writes `obj` as indented JSON (one trailing newline) to `path` atomically."""
  write_text(path, json.dumps(obj, indent=2) + "\n")
