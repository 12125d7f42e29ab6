"""Paths and atomic file writes: readers see the old content or the new, never a partial file.

A path is a local path or a URL (`gs://bucket/run`, any filesystem `etils.epath` knows, as orbax
and grain use). A local write goes to a temporary sibling (same directory, so the rename stays on
one filesystem), is flushed to disk and then renamed over the target; object stores replace a
whole object on each write, which is atomic already.
"""

import io
import json
import os
from pathlib import Path

from etils import epath


def is_url(path) -> bool:
  """Whether `path` names a non-local filesystem (`scheme://...`)."""
  return "://" in os.fspath(path)


def as_path(path) -> epath.Path:
  """`path` as an `etils.epath.Path`: URLs as they are, local paths made absolute."""
  text = os.fspath(path)
  return epath.Path(text if is_url(text) else os.path.abspath(text))


def write_text(path, text: str) -> None:
  """Writes `text` to `path` atomically."""
  if is_url(path):
    as_path(path).write_text(text)
    return
  path = Path(path)
  tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
  with open(tmp, "w") as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def json_text(obj, *, flat: bool = False) -> str:
  """`obj` as JSON text with one trailing newline: indented, or with `flat` one top-level key per
  line and each value on one line (a per-game list of thousands of numbers stays one line).

  The one policy for numbers that are not finite (a diverged run's loss or perplexity): they are
  written as `NaN`, `Infinity` and `-Infinity`, the tokens Python's `json` writes and reads back
  as floats, so a file reads back to the numbers it was written from. Strict JSON parsers (a
  browser's `JSON.parse`) reject these tokens; every reader of these files here is Python.
  """
  if not flat:
    return json.dumps(obj, indent=2, allow_nan=True) + "\n"
  items = [f"  {json.dumps(k)}: {json.dumps(v, allow_nan=True)}" for k, v in obj.items()]
  return "{\n" + ",\n".join(items) + "\n}\n"


def write_json(path, obj, *, flat: bool = False) -> None:
  """Writes `json_text(obj, flat=flat)` to `path` atomically (non-finite numbers: `json_text`)."""
  write_text(path, json_text(obj, flat=flat))


def write_figure(path, fig) -> None:
  """Saves a matplotlib figure to `path` atomically, in the format its suffix names (e.g. .png)."""
  if is_url(path):
    buf = io.BytesIO()
    fig.savefig(buf, format=as_path(path).suffix.lstrip(".") or None)
    as_path(path).write_bytes(buf.getvalue())
    return
  path = Path(path)
  tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
  with open(tmp, "wb") as f:
    fig.savefig(f, format=path.suffix.lstrip(".") or None)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def read_jsonl(path, required=()) -> tuple[list[dict], list[str]]:
  """Objects of a JSONL file and one message per line that is not an object with `required` keys.

  Blank lines are skipped; a message names the file and line (`path:3: not JSON (...)`).
  """
  rows, problems = [], []
  with open(path) as f:
    for number, line in enumerate(f, start=1):
      if not line.strip():
        continue
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        problems.append(f"{path}:{number}: not JSON ({e.msg})")
        continue
      missing = [k for k in required if not isinstance(row, dict) or k not in row]
      if not isinstance(row, dict) or missing:
        why = f"missing {', '.join(missing)}" if missing else "not a JSON object"
        problems.append(f"{path}:{number}: {why}")
        continue
      rows.append(row)
  return rows, problems
