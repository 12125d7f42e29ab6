"""The persistent store of engine analyses: one sqlite file, shared by threads and processes.

An analysis is stored as its JSON record (`engines.Analysis.to_json()`), keyed by engine name and
version, variant, FEN, depth, MultiPV and root moves, so reruns and repeated positions cost no
engine time. The store also remembers each engine binary's identity (`id name`, variants) by path,
size and mtime, so that a pool answering only from the cache never starts an engine.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path


def default_cache_path() -> Path:
  """$CHESSJAX_ENGINE_CACHE, else ~/.cache/chessjax/engine_cache.sqlite."""
  env = os.environ.get("CHESSJAX_ENGINE_CACHE")
  return Path(env) if env else Path.home() / ".cache" / "chessjax" / "engine_cache.sqlite"


def _write_ahead_log(db: sqlite3.Connection, timeout: float) -> None:
  """Puts the file in WAL mode (kept in the file: later connections find it set). Switching takes
  the file's exclusive lock, and sqlite answers "database is locked" at once, without its busy
  handler, when another connection opens the new file at the same moment (three processes
  starting on one new cache): retried until `timeout` seconds have passed."""
  deadline = time.monotonic() + timeout
  while True:
    try:
      if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        db.execute("PRAGMA journal_mode = WAL")
      return
    except sqlite3.OperationalError as e:
      if "locked" not in str(e) or time.monotonic() > deadline:
        raise
      time.sleep(0.02)


class AnalysisCache:
  """Analysis records in sqlite (WAL): safe to share between threads and processes.

  Use as a context manager or call `close()`.
  """

  def __init__(self, path):
    self.path = Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self._lock = threading.Lock()
    self._db = sqlite3.connect(
      self.path, timeout=60.0, isolation_level=None, check_same_thread=False
    )
    self._db.execute("PRAGMA busy_timeout = 60000")
    _write_ahead_log(self._db, 60.0)
    self._db.execute(
      "CREATE TABLE IF NOT EXISTS analyses (engine TEXT, version TEXT, variant TEXT, fen TEXT,"
      " depth INTEGER, multipv INTEGER, root_moves TEXT, value TEXT NOT NULL,"
      " PRIMARY KEY (engine, version, variant, fen, depth, multipv, root_moves))"
    )
    self._db.execute(
      "CREATE TABLE IF NOT EXISTS engine_ids (path TEXT, size INTEGER, mtime_ns INTEGER,"
      " value TEXT NOT NULL, PRIMARY KEY (path, size, mtime_ns))"
    )

  @staticmethod
  def _key(engine, version, variant, fen, depth, multipv, root_moves: Sequence[str] | None):
    return (engine, version, variant, fen, depth, multipv, " ".join(root_moves or ()))

  def get(self, engine, version, variant, fen, depth, multipv, root_moves) -> dict | None:
    """The stored record of that analysis, or None."""
    key = self._key(engine, version, variant, fen, depth, multipv, root_moves)
    with self._lock:
      row = self._db.execute(
        "SELECT value FROM analyses WHERE engine=? AND version=? AND variant=? AND fen=?"
        " AND depth=? AND multipv=? AND root_moves=?",
        key,
      ).fetchone()
    return None if row is None else json.loads(row[0])

  def put(self, record: dict) -> None:
    """Stores an analysis record (`Analysis.to_json()`) under the key its fields name."""
    r = record
    key = self._key(
      r["engine"], r["version"], r["variant"], r["fen"], r["depth"], r["multipv"], r["root_moves"]
    )
    with self._lock:
      self._db.execute(
        "INSERT OR REPLACE INTO analyses VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (*key, json.dumps(r))
      )

  def __len__(self) -> int:
    with self._lock:
      return self._db.execute("SELECT COUNT(*) FROM analyses").fetchone()[0]

  def engine_id(self, path: str) -> dict | None:
    st = os.stat(path)
    with self._lock:
      row = self._db.execute(
        "SELECT value FROM engine_ids WHERE path=? AND size=? AND mtime_ns=?",
        (os.path.realpath(path), st.st_size, st.st_mtime_ns),
      ).fetchone()
    return None if row is None else json.loads(row[0])

  def put_engine_id(self, path: str, value: dict) -> None:
    st = os.stat(path)
    with self._lock:
      self._db.execute(
        "INSERT OR REPLACE INTO engine_ids VALUES (?, ?, ?, ?)",
        (os.path.realpath(path), st.st_size, st.st_mtime_ns, json.dumps(value)),
      )

  def close(self) -> None:
    with self._lock:
      self._db.close()

  def __enter__(self) -> AnalysisCache:
    return self

  def __exit__(self, *exc) -> None:
    self.close()
