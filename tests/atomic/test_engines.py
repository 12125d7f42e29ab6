"""`chessjax.atomic.engines` and `.cache`: engine lookup, analysis, cache, crash recovery, pools.

The real engines come from `make engines` (which `make test` runs first); when one is missing the
tests fail with the EngineMissingError message that names that command. Crash and hang handling
uses a fake UCI engine, a small Python script written into tmp_path.
"""

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import chess
import chess.engine
import chess.variant
import pytest
from conftest import REPO

from chessjax.atomic import cache as cache_lib
from chessjax.atomic import engines

FIXTURE_TIERS = {"sf": "multiprocess", "ff": "multiprocess"}  # Engines (tests/conftest.py).
PAPER_FEN = "r1bqkbnr/1pp4p/4ppp1/3p4/3P3Q/2N1PN2/PPP2PPP/R1B1K2R w KQkq - 0 8"
FOOLS_MATE = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"
STALEMATE = "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"
ADJACENT_KINGS = "8/8/8/3kK3/8/8/8/R7 w - - 0 1"
KING_EXPLODED = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQ1BNR w kq - 0 1"  # atomic: white lost
OPENINGS = [
  chess.STARTING_FEN,
  "rnbqkbnr/pppp1ppp/8/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 1 2",
  "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R b KQkq - 3 3",
  "rnbqkb1r/pp2pppp/3p1n2/8/3NP3/8/PPP2PPP/RNBQKB1R w KQkq - 1 5",
  "rnbqkbnr/ppp2ppp/4p3/3p4/3PP3/8/PPP2PPP/RNBQKBNR w KQkq - 0 3",
]

FAKE_ENGINE = """\
#!{python}
# A tiny UCI engine: answers with the first legal move at "depth 1"; on FEN {trigger!r} it
# {mode}s ({once} only the first time: marker file {marker!r}); writes its pid to {pidfile!r}.
import os, sys, time
import chess

open({pidfile!r}, "a").write(f"{{os.getpid()}}\\n")
board = chess.Board()
for line in sys.stdin:
  cmd = line.split()
  if not cmd:
    continue
  if cmd[0] == "uci":
    print("id name FakeFish 1.0\\nuciok", flush=True)
  elif cmd[0] == "isready":
    print("readyok", flush=True)
  elif cmd[0] == "position":
    fen = chess.STARTING_FEN if cmd[1] == "startpos" else " ".join(cmd[2:8])
    board = chess.Board(fen)
  elif cmd[0] == "go":
    if board.fen() == {trigger!r} and not ({once} and os.path.exists({marker!r})):
      open({marker!r}, "w").close()
      if {mode!r} == "crash":
        os._exit(3)
      time.sleep(3600)
    move = sorted(m.uci() for m in board.legal_moves)[0]
    print(f"info depth 1 score cp 17 pv {{move}}\\nbestmove {{move}}", flush=True)
  elif cmd[0] == "quit":
    break
"""


def fake_engine(tmp_path, mode: str, trigger: str, once: bool = True) -> tuple[str, os.PathLike]:
  """Writes the fake engine; returns its path and its pid file."""
  path, pidfile = tmp_path / f"fake_{mode}.py", tmp_path / f"fake_{mode}.pids"
  path.write_text(
    FAKE_ENGINE.format(
      python=sys.executable,
      trigger=chess.Board(trigger).fen(),
      mode=mode,
      once=once,
      marker=str(tmp_path / f"fake_{mode}.done"),
      pidfile=str(pidfile),
    )
  )
  path.chmod(0o755)
  return str(path), pidfile


@pytest.fixture(scope="module")
def sf():
  with engines.EnginePool("stockfish", cache=None) as pool:
    yield pool


@pytest.fixture(scope="module")
def ff():
  with engines.EnginePool("fairy-stockfish", cache=None) as pool:
    yield pool


# -- lookup --------------------------------------------------------------------------------------


def test_engine_for_variant():
  assert engines.engine_for_variant("chess") == "stockfish"
  assert engines.engine_for_variant("atomic") == "fairy-stockfish"
  with pytest.raises(ValueError, match="crazyhouse"):
    engines.engine_for_variant("crazyhouse")


def test_locate_errors_name_the_install_command(tmp_path, monkeypatch):
  with pytest.raises(ValueError, match="unknown engine kind"):
    engines.locate("gnuchess")
  monkeypatch.setenv("CHESSJAX_ENGINE_DIR", str(tmp_path))
  monkeypatch.setenv("PATH", str(tmp_path))
  monkeypatch.delenv("CHESSJAX_FAIRY_STOCKFISH", raising=False)
  with pytest.raises(engines.EngineMissingError, match="`make engines`"):
    engines.locate("fairy-stockfish")
  monkeypatch.setenv("CHESSJAX_STOCKFISH", str(tmp_path / "nope"))
  with pytest.raises(engines.EngineMissingError, match="CHESSJAX_STOCKFISH"):
    engines.locate("stockfish")
  path, _ = fake_engine(tmp_path, "crash", chess.STARTING_FEN)
  monkeypatch.setenv("CHESSJAX_STOCKFISH", path)
  assert engines.locate("stockfish") == path
  with pytest.raises(engines.EngineMissingError, match="`make engines`"):
    engines.EnginePool("fairy-stockfish", path=str(tmp_path / "missing"), cache=None)


def test_engine_info(sf, ff):
  assert sf.info.kind == "stockfish" and sf.info.name.startswith("Stockfish ")
  assert ff.info.kind == "fairy-stockfish" and ff.info.name.startswith("Fairy-Stockfish ")
  for info in (sf.info, ff.info):
    assert info.version and info.version in info.name and os.access(info.path, os.X_OK)


# -- analysis ------------------------------------------------------------------------------------


def test_stockfish_multipv_and_json(sf):
  a = sf.analyse(PAPER_FEN, depth=8, multipv=3)
  assert (a.engine, a.version) == (sf.info.name, sf.info.version)
  assert (a.variant, a.fen, a.depth, a.multipv, a.root_moves, a.cached) == (
    "chess",
    PAPER_FEN,
    8,
    3,
    None,
    False,
  )
  board = chess.Board(PAPER_FEN)
  assert len(a.lines) == 3 and len({line.move for line in a.lines}) == 3
  assert all(chess.Move.from_uci(line.move) in board.legal_moves for line in a.lines)
  assert all(
    line.pv[0] == line.move and (line.cp is None) != (line.mate is None) for line in a.lines
  )
  cps = [line.cp for line in a.lines]
  assert cps == sorted(cps, reverse=True) and a.best == a.lines[0]
  assert engines.Analysis.from_json(a.to_json()) == a
  assert engines.Analysis.from_json(json.dumps(a.to_json()), cached=True).cached


def test_root_moves_restrict_the_search(sf, ff):
  best = sf.analyse(PAPER_FEN, depth=8)
  other = "h2h3" if best.best.move != "h2h3" else "a2a3"
  forced = sf.analyse(PAPER_FEN, depth=8, root_moves=[other])
  assert forced.root_moves == (other,) and [line.move for line in forced.lines] == [other]
  two = ff.analyse(PAPER_FEN, variant="atomic", depth=6, multipv=3, root_moves=("e3e4", "a2a3"))
  assert sorted(line.move for line in two.lines) == ["a2a3", "e3e4"]


def test_atomic_and_standard_best_moves_differ(sf, ff):
  """The paper's example: the standard-best move is a mistake under atomic rules."""
  standard = sf.analyse(PAPER_FEN, depth=8).best
  atomic = ff.analyse(PAPER_FEN, variant="atomic", depth=8).best
  assert standard.move != atomic.move
  assert chess.Move.from_uci(atomic.move) in chess.variant.AtomicBoard(PAPER_FEN).legal_moves
  cross = ff.analyse(PAPER_FEN, variant="atomic", depth=8, root_moves=(standard.move,)).best
  assert cross.move == standard.move and cross.cp < atomic.cp - 100
  # Fairy-Stockfish follows the board's variant (python-chess sets UCI_Variant back to chess).
  assert ff.analyse(PAPER_FEN, variant="chess", depth=8).best.move != atomic.move


def test_invalid_positions_never_reach_the_engine(sf, ff):
  before = sf.stats["misses"], ff.stats["misses"]
  with pytest.raises(ValueError, match="3kK3"):
    sf.analyse(ADJACENT_KINGS, depth=6)  # adjacent kings: illegal in chess (Stockfish crashes)
  with pytest.raises(ValueError, match="not a fen"):
    sf.analyse("not a fen", depth=6)
  with pytest.raises(ValueError, match="does not support variant 'atomic'"):
    sf.analyse(PAPER_FEN, variant="atomic", depth=6)
  with pytest.raises(ValueError, match="unknown variant"):
    ff.analyse(PAPER_FEN, variant="bughouse-xyz", depth=6)
  with pytest.raises(ValueError, match="e2e4"):
    sf.analyse(PAPER_FEN, depth=6, root_moves=("e2e4",))
  with pytest.raises(ValueError, match="invalid chess position"):
    sf.analyse(KING_EXPLODED, depth=6)
  assert (sf.stats["misses"], ff.stats["misses"]) == before
  # Adjacent kings are legal in atomic chess (they cannot give check) and Fairy-Stockfish copes.
  a = ff.analyse(ADJACENT_KINGS, variant="atomic", depth=6)
  assert a.best.move in {m.uci() for m in chess.variant.AtomicBoard(ADJACENT_KINGS).legal_moves}


def test_game_over_positions_have_no_lines(sf, ff):
  for pool, fen, variant in (
    (sf, FOOLS_MATE, "chess"),
    (sf, STALEMATE, "chess"),
    (ff, KING_EXPLODED, "atomic"),
  ):
    before = pool.stats["misses"]
    a = pool.analyse(fen, variant=variant, depth=6)
    assert a.lines == () and pool.stats["misses"] == before
    with pytest.raises(ValueError, match="game over"):
      _ = a.best


def test_mate_scores_are_kept(sf):
  mate_in_one = sf.analyse("6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1", depth=6)
  assert (mate_in_one.best.move, mate_in_one.best.cp, mate_in_one.best.mate) == ("d1d8", None, 1)
  mated = sf.analyse("3R2k1/5ppp/8/8/8/8/5PPP/6K1 b - - 1 1", depth=6)
  assert mated.lines == ()  # checkmated: game over
  losing = sf.analyse("k7/8/1K6/8/8/8/8/7Q b - - 0 1", depth=6)  # the side to move's view
  assert (losing.best.move, losing.best.cp, losing.best.mate) == ("a8b8", None, -1)


def test_results_do_not_depend_on_analysis_order(sf, ff):
  alone = sf.analyse(OPENINGS[3], depth=10)
  for fen in OPENINGS:
    sf.analyse(fen, depth=10)
  assert sf.analyse(OPENINGS[3], depth=10).lines == alone.lines
  atomic = [ff.analyse(fen, variant="atomic", depth=8).lines for fen in OPENINGS]
  again = [ff.analyse(fen, variant="atomic", depth=8).lines for fen in reversed(OPENINGS)]
  assert again[::-1] == atomic


def test_analyse_many_keeps_order_with_two_workers(sf):
  requests = [engines.Request(fen, depth=7) for fen in OPENINGS]
  requests += [
    engines.Request(FOOLS_MATE, depth=7),
    engines.Request(OPENINGS[1], depth=7),  # a duplicate: analysed once
    engines.Request(PAPER_FEN, depth=7, multipv=2),
    engines.Request(PAPER_FEN, depth=7, root_moves=("a2a3",)),
  ]
  with engines.EnginePool("stockfish", workers=2, cache=None) as pool:
    got = pool.analyse_many(requests)
    assert pool.stats["misses"] == len(requests) - 2  # duplicate and game over
  assert [a.fen for a in got] == [chess.Board(r.fen).fen() for r in requests]
  assert [(a.multipv, a.root_moves) for a in got] == [(r.multipv, r.root_moves) for r in requests]
  assert got[5].lines == () and got[6] == got[1] and got[8].best.move == "a2a3"
  singles = [
    sf.analyse(r.fen, depth=7, multipv=r.multipv, root_moves=r.root_moves) for r in requests
  ]
  assert [a.lines for a in got] == [a.lines for a in singles]


# -- cache ---------------------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_cache_hits_never_start_an_engine(tmp_path, monkeypatch):
  db = tmp_path / "sub" / "cache.sqlite"
  with (
    cache_lib.AnalysisCache(db) as cache,
    engines.EnginePool("fairy-stockfish", cache=cache) as pool,
  ):
    first = pool.analyse(PAPER_FEN, variant="atomic", depth=6, multipv=2)
    second = pool.analyse(PAPER_FEN, variant="atomic", depth=6, multipv=2)
    assert not first.cached and second.cached and second.lines == first.lines
    assert pool.stats == {"hits": 1, "misses": 1, "restarts": 0}

  def no_engine(*args, **kwargs):
    raise AssertionError("an engine was started")

  monkeypatch.setattr(chess.engine.SimpleEngine, "popen_uci", no_engine)
  with (
    cache_lib.AnalysisCache(db) as cache,
    engines.EnginePool("fairy-stockfish", cache=cache) as pool,
  ):
    (again,) = pool.analyse_many(
      [engines.Request(PAPER_FEN, "atomic", 6, 2)]
    )  # persisted across pools
    assert again.cached and again.lines == first.lines and pool.info.name == first.engine
    assert pool.stats == {"hits": 1, "misses": 0, "restarts": 0}
    with pytest.raises(AssertionError, match="an engine was started"):
      pool.analyse(PAPER_FEN, variant="atomic", depth=7)  # a miss needs the engine
  with cache_lib.AnalysisCache(db) as cache:
    assert len(cache) == 1


def test_default_cache_path(monkeypatch, tmp_path):
  monkeypatch.setenv("CHESSJAX_ENGINE_CACHE", str(tmp_path / "c.sqlite"))
  assert cache_lib.default_cache_path() == tmp_path / "c.sqlite"
  assert engines.cache_arg(None) == tmp_path / "c.sqlite"
  assert engines.cache_arg("none") is None
  assert engines.cache_arg(str(tmp_path / "d.sqlite")) == tmp_path / "d.sqlite"
  monkeypatch.delenv("CHESSJAX_ENGINE_CACHE")
  assert cache_lib.default_cache_path().name == "engine_cache.sqlite"


def test_cache_is_shared_between_threads(tmp_path):
  cache = cache_lib.AnalysisCache(tmp_path / "c.sqlite")
  base = engines.Analysis("E 1", "1", "chess", PAPER_FEN, 1, 1, None, (), False)

  def write(i):
    for d in range(20):
      cache.put(engines.Analysis(**{**base.__dict__, "depth": 100 * i + d}).to_json())

  threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert len(cache) == 80
  record = cache.get("E 1", "1", "chess", PAPER_FEN, 305, 1, None)
  assert engines.Analysis.from_json(record) == engines.Analysis(**{**base.__dict__, "depth": 305})
  assert cache.get("E 1", "1", "chess", PAPER_FEN, 305, 1, ("e2e4",)) is None
  cache.close()


@pytest.mark.multiprocess
def test_cache_is_shared_between_processes(tmp_path):
  script = (
    "import sys\n"
    "from chessjax.atomic import cache, engines\n"
    "db = cache.AnalysisCache(sys.argv[1])\n"
    "base = engines.Analysis('E 1', '1', 'chess', 'x', 1, 1, None, (), False)\n"
    "for d in range(50):\n"
    "  a = engines.Analysis(**{**base.__dict__, 'depth': 1000 * int(sys.argv[2]) + d})\n"
    "  db.put(a.to_json())\n"
  )
  db = tmp_path / "c.sqlite"
  procs = [
    subprocess.Popen([sys.executable, "-c", script, str(db), str(i)], cwd=REPO) for i in range(3)
  ]
  assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
  with cache_lib.AnalysisCache(db) as cache:
    assert len(cache) == 150


# -- crashes and hangs (fake engine) -------------------------------------------------------------


@pytest.mark.multiprocess
def test_restart_after_crash(tmp_path, caplog):
  path, _ = fake_engine(tmp_path, "crash", PAPER_FEN)
  with engines.EnginePool("stockfish", path=path, cache=None) as pool:
    assert pool.analyse(OPENINGS[1], depth=3).best.move
    with caplog.at_level(logging.WARNING, logger="chessjax.atomic.engines"):
      a = pool.analyse(PAPER_FEN, depth=3)
    assert a.best.move == "a1b1" and a.best.cp == 17
    assert pool.stats == {"hits": 0, "misses": 2, "restarts": 1}
  assert any(PAPER_FEN in r.message and "FakeFish" in r.message for r in caplog.records)


@pytest.mark.multiprocess
def test_restart_after_hang(tmp_path, caplog):
  path, _ = fake_engine(tmp_path, "hang", PAPER_FEN)
  requests = [engines.Request(fen, depth=3) for fen in (OPENINGS[0], PAPER_FEN, OPENINGS[2])]
  with engines.EnginePool("stockfish", path=path, cache=None, timeout_s=1.0, workers=2) as pool:
    with caplog.at_level(logging.WARNING, logger="chessjax.atomic.engines"):
      got = pool.analyse_many(requests)
    assert [a.fen for a in got] == [r.fen for r in requests] and got[1].best.cp == 17
    assert pool.stats["restarts"] == 1
  assert any("TimeoutError" in r.message and PAPER_FEN in r.message for r in caplog.records)


@pytest.mark.multiprocess
def test_gives_up_after_max_retries(tmp_path):
  path, _ = fake_engine(tmp_path, "crash", PAPER_FEN, once=False)
  with engines.EnginePool("stockfish", path=path, cache=None, max_retries=1) as pool:
    with pytest.raises(RuntimeError, match="failed 2 times.*1pp4p"):
      pool.analyse(PAPER_FEN, depth=3)
    assert pool.stats["restarts"] == 2
    assert pool.analyse(OPENINGS[0], depth=3).best.move  # the pool still works


@pytest.mark.multiprocess
def test_engine_killed_mid_search(tmp_path):
  path, pidfile = fake_engine(tmp_path, "hang", PAPER_FEN)
  with engines.EnginePool("stockfish", path=path, cache=None, timeout_s=60.0) as pool:

    def kill_when_hung():
      time.sleep(1.0)
      os.kill(int(pidfile.read_text().split()[-1]), signal.SIGKILL)

    killer = threading.Thread(target=kill_when_hung)
    killer.start()
    start = time.monotonic()
    a = pool.analyse(PAPER_FEN, depth=3)
    killer.join()
    assert a.best.move == "a1b1" and time.monotonic() - start < 30
    assert pool.stats["restarts"] == 1 and len(pidfile.read_text().split()) == 2


# -- one pool per variant ------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_variant_pools_share_one_cache(tmp_path):
  db = tmp_path / "shared.sqlite"
  with engines.variant_pools(("chess", "atomic"), cache_path=db) as pools:
    assert pools["chess"].info.kind == "stockfish"
    assert pools["atomic"].info.kind == "fairy-stockfish"
    assert pools["chess"].cache is pools["atomic"].cache is not None
    pools["chess"].analyse(PAPER_FEN, depth=4)
    pools["atomic"].analyse(PAPER_FEN, variant="atomic", depth=4)
    cache = pools["chess"].cache
  with pytest.raises(sqlite3.ProgrammingError, match="closed"):
    len(cache)  # closed with the pools
  with cache_lib.AnalysisCache(db) as cache:
    assert len(cache) == 2
  with engines.variant_pools(["atomic"], cache_path=None) as pools:
    assert pools["atomic"].cache is None
