"""Shared fixtures and the JAX set-up of the whole suite.

* Several virtual CPU devices (`jax_num_cpu_devices`), so sharded code runs in process; the
  default mesh of the tests is one of them (`one_device_mesh_by_default`).
* A persistent compilation cache (`.jax_cache/`, shared by pytest workers and the subprocesses
  tests start): identical programs built again (a rebuilt train step, a rerun of a CLI) load
  instead of compiling.
* LLVM's optimisation level 0: tests spend most of their time compiling small XLA programs; it
  cuts that by about a third and changes no semantics (tests compare implementations, not speed).
  Training tests run slower with it, but the whole suite is faster: 10 min 42 s against 13 min 21 s
  without it, both from an empty compilation cache (2 AVX2 vCPUs, 2026-11-24).
* Session-scoped data: the bundled real-game sample read once, one small prepared dataset.
* Tests write only to temporary or in-memory locations: a run that leaves a new untracked file in
  the repository fails (`pytest_sessionfinish`).
"""

import bz2
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ["XLA_FLAGS"] = (
  os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0"
).strip()
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(REPO / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import chess.pgn  # noqa: E402
import jax  # noqa: E402
import pytest  # noqa: E402

NUM_CPU_DEVICES = 4
jax.config.update("jax_num_cpu_devices", NUM_CPU_DEVICES)


@pytest.fixture(autouse=True, scope="session")
def one_device_mesh_by_default():
  """Training and evaluation in tests run on one device, as on a laptop, unless a test names its
  devices (`train.build(..., devices=...)`): four virtual devices on two cores make every step
  about twice as slow, and only the sharding tests need them."""
  from chessjax import sharding

  real = sharding.make_mesh
  sharding.make_mesh = lambda devices=None: real(jax.devices()[:1] if devices is None else devices)
  yield
  sharding.make_mesh = real


SAMPLE_PGN = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def sample_games_uci() -> list[list[str]]:
  """The first 1,600 games of the bundled lichess sample as UCI move lists (python-chess parse)."""
  games = []
  with bz2.open(SAMPLE_PGN, "rt", encoding="utf-8") as f:
    while len(games) < 1600:
      game = chess.pgn.read_game(f)
      if game is None:
        break
      games.append([m.uci() for m in game.mainline_moves()])
  return games


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory) -> Path:
  """The first 200 sample games prepared by `data_prep.process_pgn`: train, validation (5%) and
  test (20%) splits. Shared by every test that trains or evaluates; never modify it."""
  from data_prep import process_pgn

  out = tmp_path_factory.mktemp("data") / "small"
  args = ["--pgn", str(SAMPLE_PGN), "--out", str(out), "--max-games", "200"]
  process_pgn.run(
    process_pgn.parse_args(args + ["--val-fraction", "0.05", "--test-fraction", "0.2"])
  )
  return out


# The modules whose tests take longest in `make test`'s durations, longest first.
LONGEST_MODULES = (
  "test_train",
  "test_lm_learns",
  "test_termination_atomic",
  "test_termination",
  "test_report",
  "test_lm_linear_probe",
  "test_reformer",
  "test_micro_batches",
  "test_encoding",
  "test_lm_task",
  "test_performer",
  "test_llm_pickers",
  "test_lm_probe_shared_prefix",
  "test_plugin_family",
  "test_lm_picker",
)


def pytest_collection_modifyitems(config, items):
  """The longest modules first, then the others with slow tests, then the rest (stable
  otherwise): with `-n 2 --dist loadscope` long modules start early instead of leaving one worker
  busy at the end."""
  slow = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
  rank = {name: i for i, name in enumerate(LONGEST_MODULES)}
  order = {id(item): i for i, item in enumerate(items)}

  def key(item):
    name = item.module.__name__
    return (rank.get(name, len(rank) + (name not in slow)), order[id(item)])

  items.sort(key=key)


def _untracked_files() -> set[str] | None:
  """Files in the repository that git neither tracks nor ignores (None outside a git checkout)."""
  try:
    out = subprocess.run(
      ["git", "ls-files", "--others", "--exclude-standard", "-z"],
      cwd=REPO, capture_output=True, check=True,
    )  # fmt: skip
  except (OSError, subprocess.CalledProcessError):
    return None
  return set(filter(None, out.stdout.decode("utf-8", "replace").split("\0")))


def _is_controller(config) -> bool:
  return not hasattr(config, "workerinput")  # pytest-xdist workers have it


def pytest_sessionstart(session):
  if _is_controller(session.config):
    session.config.stash[_UNTRACKED_AT_START] = _untracked_files()


def pytest_sessionfinish(session, exitstatus):
  """Fails the run if it left files in the repository (tests write to tmp_path or memory)."""
  if not _is_controller(session.config):
    return
  before = session.config.stash.get(_UNTRACKED_AT_START, None)
  after = _untracked_files()
  if before is None or after is None:
    return
  left = sorted(after - before)
  if left:
    shown = "\n  ".join(left[:20]) + ("\n  ..." if len(left) > 20 else "")
    print(f"\nERROR: the tests left {len(left)} untracked file(s) in the repository:\n  {shown}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


_UNTRACKED_AT_START = pytest.StashKey[set[str] | None]()
