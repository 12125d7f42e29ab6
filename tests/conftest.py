"""Shared fixtures and the JAX set-up of the whole suite.

* Several virtual CPU devices (`jax_num_cpu_devices`), so sharded code runs in process; the
  default mesh of the tests is one of them (`one_device_mesh_by_default`).
* A persistent compilation cache (`.jax_cache/`, shared by pytest workers and the subprocesses
  tests start): identical programs built again (a rebuilt train step, a rerun of a CLI) load
  instead of compiling.
* LLVM's optimisation level 0 (`jax_disable_most_optimizations`): tests spend most of their time
  compiling small XLA programs; it cuts that by about a third and changes no semantics (tests
  compare implementations, not speed). Training tests run slower with it, but the whole suite is
  faster: 10 min 42 s against 13 min 21 s without it, both from an empty compilation cache (2 AVX2
  vCPUs, 2026-11-24). The few compute-bound fixtures and modules (hundreds of steps of one
  program) turn full optimisation back on for their own programs (`optimized_xla`).
* XLA's CPU fusion emitters off (`--xla_cpu_use_fusion_emitters=false` in XLA_FLAGS, for this
  process and every subprocess; probed first, as an XLA that does not know the flag aborts): the
  older emitters compile the same programs 2-3 times faster (SLiCE's smoke train step 0.8 s
  against 2.6 s, Gated DeltaNet's 1.4 s against 5.2 s) and run them about a third slower;
  `make test`'s pytest from a fresh clone took 7 min 37 s with it against 10 min 12 s without
  (2 AMD EPYC vCPUs, 2026-11-27). Tests compare implementations; the golden files hold either way.
  With them, XLA's code generation in one piece (`--xla_cpu_parallel_codegen_split_count=1`:
  on the one core a worker has, splitting a program's LLVM module for parallel compilation only
  adds work): tests/ops/test_delta_rule.py 24-29 s against 29-35 s and tests/test_train.py 132-142
  s against 142-147 s, each pair run side by side on the 2 Intel Xeon vCPUs (2026-11-27).
* One core per pytest-xdist worker under `-n N` on N cores (`_one_core_per_worker`), and Python's
  garbage collector at higher thresholds: both cut CPU time, not checks. With them and the long
  termination walks at half their plies, pytest from an empty compilation cache took 12 min 32 s
  against 15 min 57 s an hour before on the same machine (2 Intel Xeon vCPUs, 2026-11-27; that
  shared machine's speed varies by a third within a day: docs/performance.md).
* Session-scoped data: the bundled real-game sample read once, one small prepared dataset, and
  the language-model tests' data and trained GPT-2 tiny (`lm_sample`, `trained_lm`), and the toy
  runs of the experiment commands that tests/cluster compares with SLURM's (`reproduce_mini_local`,
  `cwm_mini_local`, `lm_grid_local`), each made once per run for all pytest-xdist workers
  (`built_once`).
* Two tiers: the quick one (`make test-fast`) and the rest, marked `slow`, `multiprocess`,
  `browser` or `cluster` (pyproject.toml); rules add some markers at collection (a test using a
  fixture that trains, a module that imports the process harness), and a quick test that trains or
  starts a process fails (`TIERS`).
* Tests write only to temporary or in-memory locations: a run that leaves a new untracked file in
  the repository fails (`pytest_sessionfinish`).
"""

import bz2
import contextlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# XLA's optimisation off (see above): JAX's `jax_disable_most_optimizations` (LLVM level 0, no
# expensive LLVM passes), read at every compilation, so compute-bound tests can turn it back on
# for their own programs (`optimized_xla`); subprocesses inherit the environment variable.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(REPO / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
# XLA's CPU fusion emitters off and its code generation in one piece (see above): set before JAX
# starts its backend; subprocesses inherit them. Probed first, once per run: an XLA that no
# longer knows a flag aborts on it.
FAST_COMPILE_FLAGS = (
  "--xla_cpu_use_fusion_emitters=false",
  "--xla_cpu_parallel_codegen_split_count=1",
)


def _with_flag(flags: str, flag: str) -> str:
  return f"{flags} {flag}".strip()


def _xla_accepts(flag: str) -> bool:
  env = dict(os.environ, XLA_FLAGS=_with_flag(os.environ.get("XLA_FLAGS", ""), flag))
  probe = [sys.executable, "-c", "import jax; jax.devices()"]
  return subprocess.run(probe, env=env, capture_output=True).returncode == 0


if "CHESSJAX_TEST_XLA_FLAGS" not in os.environ:  # pytest-xdist workers inherit the controller's.
  flags = " ".join(FAST_COMPILE_FLAGS)
  if not _xla_accepts(flags):
    flags = " ".join(f for f in FAST_COMPILE_FLAGS if _xla_accepts(f))
  os.environ["CHESSJAX_TEST_XLA_FLAGS"] = flags
  os.environ["XLA_FLAGS"] = _with_flag(os.environ.get("XLA_FLAGS", ""), flags)


def _one_core_per_worker() -> None:
  """Under `pytest -n N` on N cores, pins pytest-xdist worker K (and the subprocesses it starts)
  to core K, before JAX sizes its thread pools: two workers whose XLA runtimes each spread over
  both cores contend for them, and pinned ones do the same work in about a tenth less time (two
  test modules side by side, 2 Intel Xeon vCPUs, 2026-11-27)."""
  worker = os.environ.get("PYTEST_XDIST_WORKER", "")
  workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
  if not (worker.startswith("gw") and hasattr(os, "sched_setaffinity")):
    return
  cores = sorted(os.sched_getaffinity(0))
  if workers == len(cores) > 1:
    os.sched_setaffinity(0, {cores[int(worker[2:]) % len(cores)]})


_one_core_per_worker()
# Python's cyclic garbage collector less often (chessjax/__init__.py raises its thresholds when
# imported, here before jax): four compile-heavy modules under `-n 2` took 120-123 CPU s against
# 129 with the default thresholds (2 Intel Xeon vCPUs, 2026-11-27).
import chessjax  # noqa: E402, F401

# isort: split
import chess.pgn  # noqa: E402
import jax  # noqa: E402
import pytest  # noqa: E402

NUM_CPU_DEVICES = 4
jax.config.update("jax_num_cpu_devices", NUM_CPU_DEVICES)
_TRUE = ("y", "yes", "t", "true", "on", "1")  # jax's own reading of a boolean variable
jax.config.update(
  "jax_disable_most_optimizations",
  os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"].strip().lower() in _TRUE,
)


@contextlib.contextmanager
def optimized_xla():
  """XLA's full optimisation for the programs compiled inside (the suite's default is off): for
  the few compute-bound tests and fixtures, whose hundreds of training steps run about 2.5 times
  faster optimised, while a compilation takes about twice as long (GPT-2 tiny's train step at
  batch 32 x 128, one shared core, 2026-11-26: 12.2 s to compile and 0.15 s a step, against 6.5 s
  and 0.37 s). The programs compute the same thing either way. The persistent compilation cache
  keys them by their options; JAX's in-memory caches do not, so a program first compiled inside
  is reused as it is outside (and the other way round)."""
  before = jax.config.values["jax_disable_most_optimizations"]
  jax.config.update("jax_disable_most_optimizations", False)
  try:
    yield
  finally:
    jax.config.update("jax_disable_most_optimizations", before)


@pytest.fixture(autouse=True, scope="session")
def one_device_mesh_by_default():
  """Training and evaluation in tests run on one device, as on a laptop, unless a test names its
  devices (`step.build(..., devices=...)`): four virtual devices on two cores make every step
  about twice as slow, and only the sharding tests need them."""
  from chessjax import sharding

  real = sharding.make_mesh
  sharding.make_mesh = lambda devices=None: real(jax.devices()[:1] if devices is None else devices)
  yield
  sharding.make_mesh = real


SAMPLE_PGN = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
TEST_DATA = Path(__file__).resolve().parent / "data"
# The world-model family of the tests that train "a model" at smoke size (d128, one layer): SLiCE
# compiles and starts fastest (a 12-step `chessjax.main` run: 10.0 CPU s from a cold compilation
# cache against 11.1 for the Transformer and 12.6 for Gated DeltaNet, 2026-11-27). Tests written
# with the same config share its compiled programs through the compilation cache.
SMOKE_FAMILY = "slice"


def host_bits(x):
  """An array as a host numpy array, a PRNG key as its key data: what bit-for-bit state
  comparisons compare."""
  import numpy as np

  if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    x = jax.random.key_data(x)
  return np.asarray(x)


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


def built_once(tmp_path_factory, name: str, build) -> Path:
  """The directory `build(path)` makes, made once per test run: the pytest-xdist workers share
  it (it lies under the run's common base temporary directory). The first worker that asks builds
  it under a file lock; another one asking meanwhile waits for it, then reads it."""
  import fcntl
  import shutil

  base = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):
    base = base.parent  # pytest-N/popen-gwK -> pytest-N, common to the workers of this run.
  shared = base / "shared"
  shared.mkdir(exist_ok=True)
  out, done = shared / name, shared / f"{name}.done"
  with open(shared / f"{name}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
      if not done.exists():
        shutil.rmtree(out, ignore_errors=True)  # Left by a build that failed.
        build(out)
        done.touch()
    finally:
      fcntl.flock(lock, fcntl.LOCK_UN)
  return out


@pytest.fixture(scope="session")
def lm_sample(tmp_path_factory) -> dict[str, Path]:
  """Language-model data of the bundled sample (`data_prep.lm_data`, `data`): its 2,306 games of
  at most 60 plies, fewer than the 2,000 + 400 + 40 + 40 asked for, so split in proportion into
  1,861 training games, a probing pool of 371 and dev and test splits of 37; and a probing set of
  100 rows with prefixes of 8-20 plies drawn from that pool (`sets`). Made once per run
  (`built_once`); never modify it."""
  from data_prep import lm_data, probing_sets

  def build(out):
    data, sets = out / "data", out / "sets"
    argv = ["--pgn", str(SAMPLE_PGN), "--out", str(data), "--train-size", "2000"]
    argv += ["--pool-size", "400", "--dev-size", "40", "--test-size", "40", "--max-plies", "60"]
    assert lm_data.main(argv) == 0
    argv = ["--pool", str(data), "--train", str(data), "--out", str(sets), "--count", "100"]
    assert probing_sets.main(argv + ["--min-len", "8", "--max-len", "20"]) == 0

  root = built_once(tmp_path_factory, "lm_sample", build)
  return {"data": root / "data", "sets": root / "sets"}


@pytest.fixture(scope="session")
def trained_lm(tmp_path_factory, lm_sample) -> Path:
  """The workdir of GPT-2 tiny (2 layers x 64, 137,792 parameters) trained as a UCI language
  model on `lm_sample`: 3 epochs over its 1,861 training games (Train-S: the split holds fewer
  than 15,000, all used), 174 steps of 32 games at lr 1e-2, one training shape (128 tokens),
  validation and a checkpoint (WORKDIR/best) after each epoch. The language-model tests that need
  a trained model share it: made once per run (`built_once`) with XLA's full optimisation (its
  steps dominate, `optimized_xla`). Never modify it: a test that writes into a workdir
  (evaluation writes WORKDIR/eval) copies it first."""
  from chessjax import train
  from configs import lm as lm_config

  def build(out):
    config = lm_config.get_config("family=gpt2,size=tiny,notation=uci,train=S")
    config.data.train, config.data.batch_size = str(lm_sample["data"]), 32
    config.data.max_len, config.data.bucket_lengths = 128, (128,)  # 60 plies: 122 tokens.
    config.optim.lr = 1e-2
    config.train.update(epochs=3, log_every=50, checkpoint_every=1000)
    with optimized_xla():
      train.train_and_evaluate(config, out)

  return built_once(tmp_path_factory, "trained_lm", build)


# `launch.reproduce_mini` at toy size: one family, one learning rate, a few steps, a slice of the
# sample (`reproduce_mini_local`; tests/cluster sends the same flags through SLURM).
MINI_FLAGS = (
  "--families", "slice", "--lrs", "3e-3", "--warmup", "2", "--stage1-steps", "3",
  "--stage2-steps", "4", "--batch-size", "8", "--max-len", "64", "--sample-games", "300",
  "--random-games", "10", "--eval-games", "16",
)  # fmt: skip


@pytest.fixture(scope="session")
def reproduce_mini_local(tmp_path_factory) -> Path:
  """The workdir of `launch.reproduce_mini` with `MINI_FLAGS`, run here one command at a time on
  one core (`taskset`: a SLURM task asking for one CPU is bound to one, and XLA's CPU threads, so
  the last bits of a reduction, follow the CPUs a process may use). Made once per run
  (`built_once`); never modify it."""

  def build(out):
    pin = ["taskset", "-c", str(min(os.sched_getaffinity(0)))]
    argv = [*pin, sys.executable, "-m", "launch.reproduce_mini", "--workdir", str(out)]
    done = subprocess.run(
      [*argv, *MINI_FLAGS, "--jobs", "1"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

  return built_once(tmp_path_factory, "reproduce_mini", build)


# `launch.cwm_mini` and the LM grid (`launch.lm_sweep`) at toy size, run here (`cwm_mini_local`,
# `lm_grid_local`; tests/cluster sends the same flags through SLURM and compares). cwm_mini: two
# families, one seed, 3 steps on the first 200 sample games, scored on 6 test games of the next
# 100 (`toy_pgns`); the LM grid: GPT-2 tiny, UCI and RAP at p = 5%, 2 steps, on the data and
# probing sets the grid builds from the sample's first 600 games.
CWM_MINI_FLAGS = (
  "--families", "slice,transformer", "--seeds", "0", "--ablation-seeds", "", "--steps", "3",
  "--batch-size", "4", "--max-len", "32", "--test-games", "6", "--eval-every", "3",
  "--eval-batches", "1", "--record", "",
)  # fmt: skip
LM_GRID_FLAGS = (
  "--pgn", str(SAMPLE_PGN), "--max-games", "600", "--max-plies", "60", "--probe-count", "20",
  "--probe-min-len", "8", "--probe-max-len", "20", "--trains", "S", "--ps", "0,0.05",
  "--size", "tiny", "--steps", "2", "--batch-size", "8", "--set", "data.max_len=128",
  "--set", "data.bucket_lengths=(128,)",
)  # fmt: skip


@pytest.fixture(scope="session")
def toy_pgns(tmp_path_factory) -> dict[str, Path]:
  """{"train": the first 200 games of the bundled sample, "test": the next 100}, as PGN files."""

  def build(out):
    out.mkdir()
    with bz2.open(SAMPLE_PGN, "rt", encoding="utf-8") as f:
      games = f.read().split("\n\n[Event ")[:300]
    games = [g if g.startswith("[Event ") else "[Event " + g for g in games]
    (out / "train.pgn").write_text("\n\n".join(games[:200]) + "\n")
    (out / "test.pgn").write_text("\n\n".join(games[200:]) + "\n")

  root = built_once(tmp_path_factory, "toy_pgns", build)
  return {"train": root / "train.pgn", "test": root / "test.pgn"}


def cwm_mini_flags(pgns: dict[str, Path]) -> list[str]:
  return [*CWM_MINI_FLAGS, "--train-pgn", str(pgns["train"]), "--test-pgn", str(pgns["test"])]


def _toy_run(module: str, out: Path, flags) -> None:
  """`python -m MODULE` into `out`, here, one task at a time on one core (`taskset`: a SLURM task
  asking for one CPU is bound to one, and XLA's CPU threads, so the last bits of a reduction,
  follow the CPUs a process may use)."""
  where = "--work" if module == "launch.cwm_mini" else "--root"
  pin = ["taskset", "-c", str(min(os.sched_getaffinity(0)))]
  argv = [*pin, sys.executable, "-m", module, where, str(out), *flags, "--jobs", "1"]
  done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="session")
def cwm_mini_local(tmp_path_factory, toy_pgns) -> Path:
  """The WORK of `launch.cwm_mini` at toy size (`cwm_mini_flags`), run here. Made once per run
  (`built_once`); never modify it."""
  return built_once(
    tmp_path_factory,
    "cwm_mini",
    lambda out: _toy_run("launch.cwm_mini", out, cwm_mini_flags(toy_pgns)),
  )


@pytest.fixture(scope="session")
def lm_grid_local(tmp_path_factory) -> Path:
  """The ROOT of `launch.lm_sweep` at toy size (`LM_GRID_FLAGS`), run here. Made once per run
  (`built_once`); never modify it."""
  return built_once(
    tmp_path_factory, "lm_grid", lambda out: _toy_run("launch.lm_sweep", out, LM_GRID_FLAGS)
  )


# `launch.transfer` at toy size (issue 53): one family, its source trained here on
# `small_dataset`, the four arms at two Ns (`transfer_local`; tests/cluster sends the same flags
# through SLURM and compares the records).
def transfer_flags(work, data) -> list[str]:
  return [
    "--work", str(work), "--families", "gated_deltanet", "--chess-train", str(data),
    "--source-steps", "3", "--steps", "2", "--batch-size", "4", "--max-len", "32",
    "--test-games", "6", "--train-games", "8,16", "--eval-every", "3", "--eval-batches", "1",
    "--checkpoint-every", "2",
  ]  # fmt: skip


@pytest.fixture(scope="session")
def transfer_local(tmp_path_factory, small_dataset) -> Path:
  """The WORK of `launch.transfer` with `transfer_flags`, run here one task at a time on this
  worker's core (`--cores`: taskset, one XLA thread; a SLURM task asking for one CPU is bound to
  one). Its output is in WORK.out beside it. Made once per run (`built_once`); never modify it."""

  def build(out):
    core = str(min(os.sched_getaffinity(0)))
    argv = [sys.executable, "-m", "launch.transfer", *transfer_flags(out, small_dataset)]
    done = subprocess.run(
      [*argv, "--cores", core], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    out.with_suffix(".out").write_text(done.stdout + done.stderr)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

  return built_once(tmp_path_factory, "transfer_local", build)


# The tiers (README, "Two commands"): `make test` runs every test; `make test-fast` runs the quick
# tier, the tests with none of these markers: the checks that need no training run, no second
# process and no browser. Markers come from the tests' own `pytest.mark` and from the rules below;
# `_check_quick_tier` fails a test without one of them that trains or starts a process, so the
# quick tier cannot grow silently.
TIERS = ("slow", "multiprocess", "browser", "cluster")
QUICK_TIER = "not (" + " or ".join(TIERS) + ")"
# The tier of a test that uses one of these fixtures (they train, or start a process); a test
# module adds its own in a module-level `FIXTURE_TIERS` of the same form.
FIXTURE_TIERS = {
  "trained_lm": "slow",
  "reproduce_mini_local": "slow",
  "cwm_mini_local": "slow",
  "lm_grid_local": "slow",
  "transfer_local": "slow",
}
# The tier of a test module that imports from one of these helper modules (tests/NAME.py).
HELPER_TIERS = {"multiprocess": "multiprocess"}


def _mark_tiers(items) -> None:
  """The markers of the rules above, added at collection. A module's `FIXTURE_TIERS` that names
  no fixture of that module, or no tier, stops the run: it would mark nothing, silently."""
  for module in {item.module for item in items}:
    own = getattr(module, "FIXTURE_TIERS", {})
    wrong = {k: v for k, v in own.items() if k not in vars(module) or v not in TIERS}
    if wrong:
      raise pytest.UsageError(f"{module.__name__}.FIXTURE_TIERS: no such fixture or tier: {wrong}")
  for item in items:
    fixtures = FIXTURE_TIERS | getattr(item.module, "FIXTURE_TIERS", {})
    tiers = {tier for name, tier in fixtures.items() if name in item.fixturenames}
    imported = {getattr(v, "__module__", None) for v in vars(item.module).values()}
    imported |= {getattr(v, "__name__", None) for v in vars(item.module).values()}
    tiers |= {tier for name, tier in HELPER_TIERS.items() if name in imported}
    for tier in sorted(tiers):
      item.add_marker(tier)


_RUNNING = []  # the test this process runs now (its setup, call and teardown)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
  _guard_quick_tier()
  _RUNNING.append(item)
  try:
    return (yield)
  finally:
    _RUNNING.pop()


class QuickTierError(RuntimeError):
  """A test with no tier marker trains or starts a process."""


def _check_quick_tier(what: str, marker: str) -> None:
  """Fails the running test if it has no tier marker: it does `what`, which the quick tier does
  not. Raises, and the test fails even if the code under test catches the error."""
  if _RUNNING and not any(_RUNNING[-1].get_closest_marker(tier) for tier in TIERS):
    item = _RUNNING[-1]
    message = (
      f"{item.nodeid} {what}, so it is not a quick test: mark it @pytest.mark.{marker} "
      "(tests/conftest.py: TIERS)"
    )
    item.stash.setdefault(_NOT_QUICK, message)
    raise QuickTierError(message)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
  """A test that `_check_quick_tier` stopped fails once, in the phase that ran the check."""
  report = yield
  message = item.stash.get(_NOT_QUICK, None)
  if message is not None:
    del item.stash[_NOT_QUICK]
    if report.passed:
      report.outcome, report.longrepr = "failed", message
  return report


def _guard(owner, name: str, check) -> None:
  """Calls `check(*args, **kwargs)` before each call of `owner.name`, once wrapped."""
  real = getattr(owner, name)
  if getattr(real, "_quick_tier_guard", False):
    return

  def guarded(*args, **kwargs):
    check(*args, **kwargs)
    return real(*args, **kwargs)

  guarded._quick_tier_guard = True
  setattr(owner, name, guarded)


def _process(_popen, *args, **kwargs) -> None:
  argv = kwargs.get("args", args[0] if args else "")
  program = Path(str(argv if isinstance(argv, str | bytes | os.PathLike) else argv[0])).name
  marker = "browser" if program.startswith("chromium") else "multiprocess"
  _check_quick_tier(f"started a process ({program})", marker)


def _pool(*_, **__) -> None:
  _check_quick_tier("made a process pool (multiprocessing)", "multiprocess")


def _fork(*_, **__) -> None:
  _check_quick_tier("started a process (multiprocessing)", "multiprocess")


def _training(*_, **__) -> None:
  _check_quick_tier("ran a training run", "slow")


def _guard_quick_tier() -> None:
  """Guards what the quick tier does not do: start a process (`subprocess`: CLIs, engines, the
  browser; `multiprocessing`: pools, processes) or a training run (`chessjax.train.train_runs`,
  once a test module has imported `chessjax.train`). Each is checked before it allocates anything
  (a pool as it is made, before it starts its workers)."""
  import multiprocessing.context
  import multiprocessing.process
  import platform

  # The processor field of `platform.uname()` runs `uname -p` the first time any code reads it
  # (the LLM SDKs do, building their request headers): read once here, before the guard.
  platform.processor()
  _guard(subprocess.Popen, "__init__", _process)
  _guard(multiprocessing.context.BaseContext, "Pool", _pool)
  _guard(multiprocessing.process.BaseProcess, "start", _fork)
  train = sys.modules.get("chessjax.train")
  if train is not None:
    _guard(train, "train_runs", _training)


# The modules whose tests take longest in `make test`'s durations, longest first: every module of
# over about 10 worker-seconds (worker time per module in a fresh clone's `make test`, 2 Intel Xeon
# vCPUs, 2026-11-27), so that the short ones come last and neither worker waits long for the
# other at the end (with the shorter list before it, one worker ran its last module for 37 s
# after the other had finished).
LONGEST_MODULES = (
  "test_cluster",  # Its tests wait on SLURM jobs: first, on one worker.
  # First on the other worker: its local toy transfer run (`transfer_local`) has ended long before
  # test_cluster's last tests send the same plan through SLURM, whose tasks then load the programs
  # it compiled instead of compiling them again.
  "test_transfer",
  "test_multiprocess",
  "test_train",
  "test_population",
  "test_steps_per_call",
  "test_cwm_mini",
  "test_lm_sweep",
  "test_init_from",
  "test_lm_linear_probe",
  "test_lm_learns",
  "test_reformer",
  "test_encoding",
  "test_heads",
  "test_micro_batches",
  "test_termination_atomic",
  "test_report",
  "test_lm_task",
  "test_transformer_slice",
  "test_bench_device",
  "test_performer",
  "test_step_parity",
  "test_termination",
  "test_ssd",
  "test_delta_rule",
  "test_atomic_encoding",
  "test_mamba",
  "test_lm_probe_shared_prefix",
  "test_compile_ahead",
  "test_bench_loop_overhead",
  "test_evaluate",
  "test_llm_pickers",
  "test_precision",
  "test_gated_deltanet",
  "test_slice_scan",
  "test_gpt2",
  "test_flops",
  "test_random_uniform",
  "test_process_pgn",
  "test_plugin_family",
  "test_lm_picker",
  "test_local_runner",
)


def pytest_configure(config):
  """Keeps the order below under `-n 2 --dist loadscope`: pytest-xdist (3.x) otherwise sorts the
  modules by their number of tests (`--loadscope-reorder`, on by default), which starts the many
  quick parametrized modules first and leaves the long ones with few tests for the end. A name
  in `LONGEST_MODULES` that no test file has (a module renamed) stops the run: it would order
  nothing, silently; so does a `make test-fast` that selects other tests than `QUICK_TIER`."""
  if hasattr(config.option, "loadscopereorder"):
    config.option.loadscopereorder = False
  files = {path.stem for path in Path(__file__).parent.rglob("test_*.py")}
  unknown = [name for name in LONGEST_MODULES if name not in files]
  if unknown:
    raise pytest.UsageError(f"conftest.py LONGEST_MODULES names no test file: {unknown}")
  if f'-m "{QUICK_TIER}"' not in (REPO / "Makefile").read_text():
    raise pytest.UsageError(f'the Makefile\'s test-fast does not select -m "{QUICK_TIER}"')


@pytest.hookimpl(tryfirst=True)  # Before `-m` deselects by the markers it adds.
def pytest_collection_modifyitems(config, items):
  """The longest modules first, then the others with slow tests, then the rest (stable
  otherwise): with `-n 2 --dist loadscope` long modules start early instead of leaving one worker
  busy at the end."""
  _mark_tiers(items)
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
_NOT_QUICK = pytest.StashKey[str]()
