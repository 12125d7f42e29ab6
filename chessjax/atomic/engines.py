"""UCI chess engines of the atomic-chess track: locate, run, one pool per variant.

As in Co & Konuganti (2026, section 3), Stockfish scores standard chess (variant "chess") and
Fairy-Stockfish (`UCI_Variant=atomic`) scores atomic chess; `make engines` installs both into the
git-ignored `engines/` folder. `EnginePool` runs one engine process per worker (Threads=1, fixed
Hash, `ucinewgame` before every position, so a result does not depend on what the process analysed
before) at a fixed depth, validates every position with python-chess before an engine sees it,
restarts engines that crash or hang, and reads and writes results through an optional
`cache.AnalysisCache`, so reruns and repeated positions cost no engine time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import queue
import shutil
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import chess
import chess.engine
import chess.variant
import tqdm

from chessjax.atomic.cache import AnalysisCache, default_cache_path

LOG = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]
KINDS = ("stockfish", "fairy-stockfish")
_ENV_PATH = {"stockfish": "CHESSJAX_STOCKFISH", "fairy-stockfish": "CHESSJAX_FAIRY_STOCKFISH"}
_VARIANT_ENGINE = {"chess": "stockfish", "atomic": "fairy-stockfish"}
_ENGINE_FAILURES = (chess.engine.EngineError, chess.engine.EngineTerminatedError, TimeoutError)


class EngineMissingError(RuntimeError):
  """An engine executable was not found; `make engines` installs both."""


def engine_dir() -> Path:
  """$CHESSJAX_ENGINE_DIR, else `<repo root>/engines` (where `make engines` puts them)."""
  return Path(os.environ.get("CHESSJAX_ENGINE_DIR") or REPO / "engines")


def locate(kind: str) -> str:
  """Path of engine `kind`: $CHESSJAX_STOCKFISH / $CHESSJAX_FAIRY_STOCKFISH, engines/, PATH."""
  if kind not in KINDS:
    raise ValueError(f"unknown engine kind {kind!r}; expected one of {KINDS}")
  override = os.environ.get(_ENV_PATH[kind])
  if override:
    if os.access(override, os.X_OK) and Path(override).is_file():
      return override
    raise EngineMissingError(
      f"${_ENV_PATH[kind]}={override} is not an executable file; unset it to use `make engines`"
    )
  candidate = engine_dir() / kind
  if os.access(candidate, os.X_OK) and candidate.is_file():
    return str(candidate)
  found = shutil.which(kind)
  if found is None and kind == "stockfish":
    found = shutil.which(kind, path="/usr/games")
  if found is None:
    raise EngineMissingError(
      f"{kind} not found (looked at ${_ENV_PATH[kind]}, {candidate} and PATH); "
      "install it with `make engines` from the repository root"
    )
  return found


def engine_for_variant(variant: str) -> str:
  """The engine kind for `variant`: "chess" -> "stockfish", "atomic" -> "fairy-stockfish"."""
  try:
    return _VARIANT_ENGINE[variant]
  except KeyError:
    raise ValueError(
      f"no engine for variant {variant!r}; expected one of {tuple(_VARIANT_ENGINE)}"
    ) from None


@dataclasses.dataclass(frozen=True)
class EngineInfo:
  kind: str
  path: str
  name: str  # the full `id name`, e.g. "Stockfish 15.1"
  version: str  # e.g. "15.1", "221126"


@dataclasses.dataclass(frozen=True)
class Line:
  """One principal variation; the score is from the side to move's point of view."""

  move: str  # UCI
  cp: int | None
  mate: int | None  # exactly one of cp / mate is not None
  pv: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Analysis:
  """An engine's verdict on one position; `lines` best first, empty when the game is over."""

  engine: str  # EngineInfo.name
  version: str
  variant: str  # python-chess / UCI variant name: "chess", "atomic"
  fen: str  # as python-chess writes it (the cache key)
  depth: int
  multipv: int
  root_moves: tuple[str, ...] | None
  lines: tuple[Line, ...]
  cached: bool

  @property
  def best(self) -> Line:
    if not self.lines:
      raise ValueError(f"no legal moves (game over) in {self.fen}")
    return self.lines[0]

  def to_json(self) -> dict:
    """A JSON-serialisable dict (`cached` is not stored: it describes one answer)."""
    d = dataclasses.asdict(self)
    del d["cached"]
    d["root_moves"] = None if self.root_moves is None else list(self.root_moves)
    d["lines"] = [{**dataclasses.asdict(line), "pv": list(line.pv)} for line in self.lines]
    return d

  @classmethod
  def from_json(cls, data: dict | str, *, cached: bool = False) -> Analysis:
    """Inverse of `to_json`; accepts the dict or its JSON text."""
    d = json.loads(data) if isinstance(data, str) else dict(data)
    d.pop("cached", None)
    lines = tuple(Line(**{**line, "pv": tuple(line["pv"])}) for line in d.pop("lines"))
    root = d.pop("root_moves")
    return cls(**d, root_moves=None if root is None else tuple(root), lines=lines, cached=cached)


@dataclasses.dataclass(frozen=True)
class Request:
  fen: str
  variant: str = "chess"
  depth: int = 12
  multipv: int = 1
  root_moves: tuple[str, ...] | None = None


def _version(name: str) -> str:
  """ "Stockfish 15.1" -> "15.1", "Fairy-Stockfish 221126 LB" -> "221126"."""
  return next((t for t in name.split()[1:] if any(c.isdigit() for c in t)), "unknown")


def _variants(engine: chess.engine.SimpleEngine) -> list[str]:
  option = engine.options.get("UCI_Variant")
  return ["chess"] if option is None else sorted(set(option.var) | {"chess"})


class EnginePool:
  """Engine processes of one kind, one per worker, behind an analysis cache.

  `cache` is an open `AnalysisCache` (which the caller closes; pools may share one) or None for
  none. Engines start on the first cache miss. A request whose engine dies or runs past `timeout_s`
  is logged, its engine restarted and the request retried up to `max_retries` times; then a
  RuntimeError names the FEN. Use as a context manager or call `close()`.
  """

  def __init__(
    self,
    kind: str,
    *,
    cache: AnalysisCache | None,
    workers: int = 1,
    hash_mb: int = 16,
    timeout_s: float = 300.0,
    path: str | None = None,
    max_retries: int = 2,
  ):
    if workers < 1:
      raise ValueError(f"workers must be >= 1, got {workers}")
    path = path or locate(kind)
    if not (os.access(path, os.X_OK) and Path(path).is_file()):
      raise EngineMissingError(
        f"{kind} engine {path} is not an executable file; run `make engines`"
      )
    self.cache = cache
    self.workers = workers
    self.hash_mb = hash_mb
    self.timeout_s = timeout_s
    self.max_retries = max_retries
    self._path = path
    self._lock = threading.Lock()
    self._stats = {"hits": 0, "misses": 0, "restarts": 0}
    self._slots: queue.SimpleQueue[list] = queue.SimpleQueue()  # [engine or None] per worker
    self._executor: concurrent.futures.ThreadPoolExecutor | None = None
    self._closed = False
    first = None
    ident = self.cache.engine_id(path) if self.cache is not None else None
    if ident is None:
      first = self._start()  # kept as worker 0's engine
      ident = {"name": first.id.get("name", kind), "variants": _variants(first)}
      if self.cache is not None:
        self.cache.put_engine_id(path, ident)
    self.info = EngineInfo(
      kind=kind, path=path, name=ident["name"], version=_version(ident["name"])
    )
    self._supported = frozenset(ident["variants"])
    for i in range(workers):
      self._slots.put([first if i == 0 else None])

  # -- engine processes ----------------------------------------------------------------------------

  def _start(self) -> chess.engine.SimpleEngine:
    engine = chess.engine.SimpleEngine.popen_uci(self._path, timeout=min(self.timeout_s, 60.0))
    wanted = {"Threads": 1, "Hash": self.hash_mb}
    engine.configure({k: v for k, v in wanted.items() if k in engine.options})
    return engine

  @staticmethod
  def _stop(engine: chess.engine.SimpleEngine) -> None:
    engine.close()  # kills the process if it is still running
    try:
      engine.returncode.result(timeout=10)
    except concurrent.futures.TimeoutError:
      LOG.warning("engine process %s did not exit within 10 s", engine)

  def _search(self, engine, board, depth, multipv, root_moves) -> list[dict]:
    """One fixed-depth search after `ucinewgame`, killed after `timeout_s`."""
    if engine.returncode.done():
      raise chess.engine.EngineTerminatedError(f"exited with code {engine.returncode.result()}")
    # SimpleEngine.analyse has no timeout for depth limits: drive the protocol directly.
    coro = engine.protocol.analyse(
      board, chess.engine.Limit(depth=depth), multipv=multipv, game=object(), root_moves=root_moves
    )
    try:
      future = asyncio.run_coroutine_threadsafe(coro, engine.protocol.loop)
    except RuntimeError as e:  # the engine's event loop already closed: it exited
      coro.close()
      raise chess.engine.EngineTerminatedError(str(e)) from e
    try:
      return future.result(timeout=self.timeout_s)
    except concurrent.futures.TimeoutError:
      # Kill the process and let the search fail with it: cancelling the coroutine instead
      # leaves python-chess unable to report the process's exit.
      engine.close()
      raise TimeoutError(f"no result within {self.timeout_s:g} s") from None

  # -- analysis ------------------------------------------------------------------------------------

  def _validate(self, request: Request) -> tuple[chess.Board, str, tuple[chess.Move, ...] | None]:
    try:
      board_cls = chess.variant.find_variant(request.variant)
    except ValueError:
      raise ValueError(f"unknown variant {request.variant!r}") from None
    variant = board_cls.uci_variant
    if variant not in self._supported:
      raise ValueError(f"{self.info.name} does not support variant {variant!r}")
    try:
      board = board_cls(request.fen)
    except ValueError as e:
      raise ValueError(f"bad FEN {request.fen!r}: {e}") from None
    if not board.is_valid():
      raise ValueError(f"invalid {variant} position {request.fen!r}: {board.status()!r}")
    if request.depth < 1 or request.multipv < 1:
      raise ValueError(f"depth and multipv must be >= 1 (FEN {request.fen!r})")
    moves = None
    if request.root_moves is not None:
      if not request.root_moves:
        raise ValueError("root_moves must be None or non-empty")
      try:
        moves = tuple(chess.Move.from_uci(m) for m in request.root_moves)
      except chess.InvalidMoveError as e:
        raise ValueError(f"bad root move in {request.root_moves} for {request.fen!r}") from e
      illegal = [m.uci() for m in moves if not board.is_legal(m)]
      if illegal:
        raise ValueError(f"root moves {illegal} are not legal in {variant} {request.fen!r}")
    return board, variant, moves

  def _analysis(self, request: Request, board, variant, lines, cached) -> Analysis:
    return Analysis(
      engine=self.info.name,
      version=self.info.version,
      variant=variant,
      fen=board.fen(),
      depth=request.depth,
      multipv=request.multipv,
      root_moves=None if request.root_moves is None else tuple(request.root_moves),
      lines=lines,
      cached=cached,
    )

  def _lookup(self, request: Request):
    """Validates; returns (board, variant, moves, Analysis or None) and counts hits."""
    if self._closed:
      raise RuntimeError("EnginePool is closed")
    board, variant, moves = self._validate(request)
    found = None
    if board.is_variant_end() or not any(board.legal_moves):
      found = self._analysis(request, board, variant, (), cached=False)
    elif self.cache is not None:
      record = self.cache.get(
        self.info.name,
        self.info.version,
        variant,
        board.fen(),
        request.depth,
        request.multipv,
        request.root_moves,
      )
      found = None if record is None else Analysis.from_json(record, cached=True)
    if found is not None and found.cached:
      with self._lock:
        self._stats["hits"] += 1
    return board, variant, moves, found

  def _run(self, request: Request, board, variant, moves) -> Analysis:
    """Analyses a cache miss on a free worker's engine, restarting it on crash or hang."""
    slot = self._slots.get()
    try:
      error = None
      for attempt in range(self.max_retries + 1):
        try:
          if slot[0] is None:
            slot[0] = self._start()
          infos = self._search(slot[0], board, request.depth, request.multipv, moves)
          break
        except _ENGINE_FAILURES as e:
          error = e
          LOG.warning(
            "%s: %s (%s) on %s FEN %r, attempt %d of %d; restarting the engine",
            self.info.name,
            type(e).__name__,
            e,
            variant,
            request.fen,
            attempt + 1,
            self.max_retries + 1,
          )
          if slot[0] is not None:
            self._stop(slot[0])
            slot[0] = None
            with self._lock:
              self._stats["restarts"] += 1
      else:
        raise RuntimeError(
          f"{self.info.name} failed {self.max_retries + 1} times on {variant} FEN "
          f"{request.fen!r} (depth {request.depth}): {type(error).__name__}: {error}"
        ) from error
    finally:
      self._slots.put(slot)
    lines = []
    for info in infos:
      if not info.get("pv"):
        raise RuntimeError(f"{self.info.name} gave no principal variation for {request.fen!r}")
      score = info["score"].relative
      pv = tuple(m.uci() for m in info["pv"])
      lines.append(Line(move=pv[0], cp=score.score(), mate=score.mate(), pv=pv))
    analysis = self._analysis(request, board, variant, tuple(lines), cached=False)
    if self.cache is not None:
      self.cache.put(analysis.to_json())
    with self._lock:
      self._stats["misses"] += 1
    return analysis

  def analyse(self, fen, *, variant="chess", depth=12, multipv=1, root_moves=None) -> Analysis:
    """Analyses one position to `depth`; `root_moves` restricts the search to those moves."""
    request = Request(
      fen, variant, depth, multipv, None if root_moves is None else tuple(root_moves)
    )
    board, variant, moves, found = self._lookup(request)
    return found if found is not None else self._run(request, board, variant, moves)

  def analyse_many(self, requests: Sequence[Request], progress: bool = False) -> list[Analysis]:
    """Analyses `requests` (order kept) in parallel over the workers; duplicates run once."""
    results: list[Analysis | None] = [None] * len(requests)
    pending: dict[tuple, list[int]] = {}
    todo = []
    for i, r in enumerate(requests):
      if r.root_moves is not None:
        r = dataclasses.replace(r, root_moves=tuple(r.root_moves))
      board, variant, moves, found = self._lookup(r)
      if found is not None:
        results[i] = found
        continue
      key = (variant, board.fen(), r.depth, r.multipv, r.root_moves)
      if key not in pending:
        pending[key] = []
        todo.append((i, r, board, variant, moves))
      pending[key].append(i)
    if todo:
      if self._executor is None:
        self._executor = concurrent.futures.ThreadPoolExecutor(self.workers, "engine-worker")
      futures = {self._executor.submit(self._run, *job[1:]): job for job in todo}
      bar = None
      if progress:
        bar = tqdm.tqdm(total=len(todo), desc=self.info.name, unit="pos", file=sys.stderr)
      try:
        for future in concurrent.futures.as_completed(futures):
          _, r, board, variant, _ = futures[future]
          analysis = future.result()
          for j in pending[variant, board.fen(), r.depth, r.multipv, r.root_moves]:
            results[j] = analysis
          if bar is not None:
            bar.update()
      finally:
        if bar is not None:
          bar.close()
    return results

  @property
  def stats(self) -> dict:
    """Cache hits, engine searches (misses), engine restarts; game-over positions count in none."""
    with self._lock:
      return dict(self._stats)

  def close(self) -> None:
    if self._closed:
      return
    self._closed = True
    if self._executor is not None:
      self._executor.shutdown(wait=True, cancel_futures=True)
    for _ in range(self.workers):
      slot = self._slots.get()
      if slot[0] is not None:
        self._stop(slot[0])
        slot[0] = None
      self._slots.put(slot)

  def __enter__(self) -> EnginePool:
    return self

  def __exit__(self, *exc) -> None:
    self.close()


# ------------------------------------------------------------------------------------------------
# One pool per variant, as the command lines open them


def cache_arg(value: str | None) -> Path | None:
  """A `--cache` flag as a cache path: "none" disables the cache, no value is the user default."""
  if value == "none":
    return None
  return Path(value) if value else default_cache_path()


@contextlib.contextmanager
def variant_pools(
  variants: Iterable[str], *, cache_path: Path | None, workers: int = 1, hash_mb: int = 16
) -> Iterator[dict[str, EnginePool]]:
  """{variant: EnginePool of its engine} (Stockfish for "chess", Fairy-Stockfish for "atomic").

  The pools share one `AnalysisCache` at `cache_path` (None: no cache); pools and cache are closed
  on exit. Raises `EngineMissingError` naming `make engines` when an engine is not installed.
  """
  with contextlib.ExitStack() as stack:
    cache = None if cache_path is None else stack.enter_context(AnalysisCache(cache_path))
    yield {
      variant: stack.enter_context(
        EnginePool(engine_for_variant(variant), cache=cache, workers=workers, hash_mb=hash_mb)
      )
      for variant in variants
    }
