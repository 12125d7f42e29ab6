"""Compilation where users wait: the length buckets a short run compiles (`merge_rare_buckets`,
`data.min_bucket_batches`), the train step's lengths compiled ahead in a background thread
(`compile.StepCompiler`, `compile.compile_ahead`): each shape compiled once, errors raised by the
loop, and the same training as compiling in the loop; and random bits lowered unrolled on the CPU
(`runtime.unroll_threefry_on_cpu`): the same bits."""

import threading
import time
from collections import Counter
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from chessjax import compile as compiling
from chessjax import runtime, train, workdir
from chessjax import spec as spec_lib
from chessjax.data.plan import Batching, BatchPlan, bucket_length, merge_rare_buckets
from chessjax.spec import TrainSpec
from configs import cwm

BUCKETS = (64, 128, 192, 256)


# The buckets a run compiles.


def test_merge_rare_buckets():
  # Every bucket used often enough, or the option off: the configured buckets.
  lengths = [64] * 10 + [128] * 10 + [192] * 10 + [256] * 10
  assert merge_rare_buckets(BUCKETS, lengths, 10) == BUCKETS
  assert merge_rare_buckets(BUCKETS, lengths, 0) == BUCKETS
  # A rare bucket moves up to the next one; the longest used bucket stays however rare.
  lengths = [64] * 42 + [128] * 34 + [192] * 3 + [256] * 1
  assert merge_rare_buckets(BUCKETS, lengths, 8) == (64, 128, 256)
  assert merge_rare_buckets(BUCKETS, lengths, 40) == (64, 256)  # 34 + 3 < 40 pad to 256.
  assert merge_rare_buckets(BUCKETS, lengths, 43) == (128, 256)
  assert merge_rare_buckets(BUCKETS, lengths, 100) == (256,)
  # Merged batches count towards the next bucket: 3 + 5 = 8 batches keep 192.
  lengths = [64] * 20 + [128] * 3 + [192] * 5 + [256] * 1
  assert merge_rare_buckets(BUCKETS, lengths, 8) == (64, 192, 256)
  # Unused buckets go with a merge (no batch changes length for that), the largest stays.
  lengths = [64] * 20 + [128] * 2 + [256] * 30
  assert merge_rare_buckets((*BUCKETS, 512, 1024), lengths, 8) == (64, 256, 1024)
  assert merge_rare_buckets((*BUCKETS, 512, 1024), [64] * 9, 8) == (*BUCKETS, 512, 1024)


def _plan(lengths, buckets=BUCKETS, **kw) -> BatchPlan:
  return BatchPlan(
    np.asarray(lengths), Batching(batch_size=4, seed=3, bucket_lengths=buckets, **kw)
  )


def test_the_buckets_a_short_run_compiles():
  """A run's first N batches use a few lengths; merging the rare ones changes no batch's games,
  only its length, which moves up to the next kept bucket."""
  rng = np.random.default_rng(0)
  games = [(5, 64, 300), (65, 128, 200), (129, 193, 10), (193, 257, 100)]  # (low, high, count)
  lengths = np.concatenate([rng.integers(lo, hi, n) for lo, hi, n in games])
  plan = _plan(lengths, window_batches=16)
  steps = 40
  used = plan.batch_lengths(0, steps)
  assert list(used) == [plan.global_batch(i)[1] for i in range(steps)]
  assert list(plan.first_uses(0, steps)) == list(dict.fromkeys(used.tolist()))
  assert sorted(Counter(used.tolist()).items()) == [(64, 14), (128, 17), (192, 1), (256, 8)]
  merged = merge_rare_buckets(BUCKETS, used, 4)
  assert merged == (64, 128, 256)
  short = _plan(lengths, merged, window_batches=16)
  for i in range(steps):
    (rows, t), (rows_merged, t_merged) = plan.global_batch(i), short.global_batch(i)
    np.testing.assert_array_equal(rows, rows_merged)
    assert t_merged == bucket_length(t, merged) >= t
  assert set(short.batch_lengths(0, steps).tolist()) <= set(merged)
  # Padding cost of the merge, from lengths alone.
  assert short.padding_fraction() >= plan.padding_fraction()


def test_first_uses_stops_once_every_bucket_is_seen_and_copy_walks_its_own_caches():
  plan = _plan(np.arange(1, 257).repeat(4))  # Repeats forever: walks stop at the 4th length.
  walked = plan.copy()
  assert sorted(walked.first_uses(0, len(plan))) == list(BUCKETS)
  assert walked._windows and not plan._windows and not plan._perms
  for i in range(0, 200, 7):
    np.testing.assert_array_equal(walked.global_batch(i)[0], plan.global_batch(i)[0])


# StepCompiler with a fake jitted step: who compiles what, waiting, errors.


class FakeStep:
  """`lower(state, batch).compile()` of a jitted step, recording (length, thread) per compilation;
  `hold[length]` (an Event) makes that compilation wait, `fail` lengths raise."""

  def __init__(self, hold=None, fail=()):
    self.calls, self.hold, self.fail = [], hold or {}, fail

  def lower(self, state, batch):
    length = batch["x"].shape[1]
    assert isinstance(state["w"], jax.ShapeDtypeStruct | jax.Array)

    class Lowered:
      def compile(inner):
        self.calls.append((length, threading.current_thread().name))
        if length in self.hold:
          assert self.hold[length].wait(30)
        if length in self.fail:
          raise RuntimeError(f"cannot compile length {length}")
        return Compiled(length)

    return Lowered()


class Compiled:
  def __init__(self, length):
    self.length = length

  def __call__(self, state, batch):
    return self.length

  def memory_analysis(self):
    return SimpleNamespace(
      argument_size_in_bytes=1000,
      output_size_in_bytes=1000,
      alias_size_in_bytes=1000,
      temp_size_in_bytes=100 * self.length,
      generated_code_size_in_bytes=0,
    )


STATE = {"w": jnp.zeros(3), "rng": jax.random.key(0)}  # Dropout's RNG state is a typed key.


def _batch(length):
  return {"x": jnp.zeros((2, length), jnp.int32), "n": jnp.zeros(2)}


def _shape(length):
  return compiling.batch_shape(_batch(length), ("x", "n"))


def _wait_for(predicate):
  deadline = time.monotonic() + 30
  while not predicate():
    assert time.monotonic() < deadline
    time.sleep(0.01)


def test_step_compiler_compiles_each_shape_once_in_the_loop():
  step = FakeStep()
  compiler = compiling.StepCompiler(step)
  assert compiler.ready(_shape(8)) is None
  assert compiler.get(_shape(8), STATE, _batch(8))(None, None) == 8
  assert compiler.ready(_shape(8))(None, None) == 8
  assert compiler.get(_shape(8), STATE, _batch(8))(None, None) == 8
  assert step.calls == [(8, "MainThread")] and compiler.where == {_shape(8): "in the loop"}
  compiler.close()


def test_step_compiler_ahead_waits_for_the_thread_and_never_compiles_twice():
  hold = {16: threading.Event()}
  step = FakeStep(hold=hold)
  compiler = compiling.StepCompiler(step)
  compiler.get(_shape(8), STATE, _batch(8))
  compiler.start_ahead(STATE, _batch(8), ("x", "n"), iter([8, 16, 32, 64]))
  _wait_for(lambda: (16, "chessjax-compile-ahead") in step.calls)
  # 32 is not reached while the thread compiles 16: the loop compiles it, the thread skips it.
  assert compiler.get(_shape(32), STATE, _batch(32))(None, None) == 32
  # 16 is being compiled by the thread: the loop waits for its result.
  threading.Timer(0.2, hold[16].set).start()
  assert compiler.ready(_shape(16)) is None
  assert compiler.get(_shape(16), STATE, _batch(16))(None, None) == 16
  _wait_for(lambda: compiler.ready(_shape(64)) is not None)
  compiler.close()
  assert sorted(length for length, _ in step.calls) == [8, 16, 32, 64]
  assert compiler.where == {
    _shape(8): "in the loop",
    _shape(16): "ahead",
    _shape(32): "in the loop",
    _shape(64): "ahead",
  }


def test_step_compiler_raises_background_errors_in_the_loop():
  step = FakeStep(fail=(16,))
  compiler = compiling.StepCompiler(step)
  compiler.start_ahead(STATE, _batch(8), ("x", "n"), iter([16, 32]))
  _wait_for(lambda: compiler.ready(_shape(32)) is not None)
  with pytest.raises(RuntimeError, match="cannot compile length 16"):
    compiler.ready(_shape(16))
  with pytest.raises(RuntimeError, match="cannot compile length 16"):
    compiler.get(_shape(16), STATE, _batch(16))
  assert [length for length, _ in step.calls] == [16, 32]  # Not compiled again.
  compiler.close()

  def broken_plan():
    yield 8
    raise ValueError("the plan broke")

  compiler = compiling.StepCompiler(FakeStep())
  compiler.start_ahead(STATE, _batch(8), ("x", "n"), broken_plan())
  compiler.close()
  with pytest.raises(ValueError, match="the plan broke"):
    compiler.ready(_shape(8))


def test_the_memory_check_keeps_the_longest_step_it_compiles():
  """When the longest batch's step, extrapolated from the first one's, may not fit, the check
  compiles it exactly; the loop then finds it compiled."""
  config = cwm.get_config("family=gated_deltanet,size=d128,smoke=True")
  step = FakeStep()
  compiler = compiling.StepCompiler(step)
  compiler.get(_shape(8), STATE, _batch(8))  # 1,000 + 800 bytes: 1,000 + 4 x 800 at length 16?
  config.train.memory_limit_gb = 3000 / 2**30
  keys = ("x", "n")
  spec = TrainSpec.from_config(config)
  compiling.check_memory(spec, keys, STATE, _batch(8), compiler, 16)  # No: 1,000 + 1,600 fits.
  assert compiler.ready(_shape(16)) is not None and [n for n, _ in step.calls] == [8, 16]
  config.train.memory_limit_gb = 5000 / 2**30
  compiler = compiling.StepCompiler(step)
  compiler.get(_shape(8), STATE, _batch(8))
  spec = TrainSpec.from_config(config)
  compiling.check_memory(spec, keys, STATE, _batch(8), compiler, 16)  # The estimate fits.
  assert compiler.ready(_shape(16)) is None


def test_compile_ahead_setting(monkeypatch):
  config = cwm.get_config("family=gated_deltanet,size=d128,smoke=True")

  def ahead(config) -> bool:
    return TrainSpec.from_config(config).compile_ahead

  for value, want in (("true", True), ("off", False), ("False", False), ("1", True)):
    config.train.compile_ahead = value
    assert ahead(config) is want
  for value in (True, False):  # A config built in code may hold a bool.
    in_code = config.to_dict()
    in_code["train"]["compile_ahead"] = value
    assert ahead(ml_collections.ConfigDict(in_code)) is value
  config.train.compile_ahead = "auto"
  monkeypatch.setattr(spec_lib, "_usable_cores", lambda: 1)
  assert ahead(config) is (jax.default_backend() != "cpu")
  monkeypatch.setattr(spec_lib, "_usable_cores", lambda: 2)
  assert ahead(config) is True
  config.train.compile_ahead = "sometimes"
  with pytest.raises(ValueError, match="compile_ahead"):
    ahead(config)


# Random bits lowered unrolled on the CPU (chessjax.runtime).


def test_unrolled_threefry_draws_the_same_bits():
  """The same dropout masks, draws and initial values with the rounds unrolled; on the CPU the
  program changes (no loop)."""
  from jax._src.interpreters import mlir
  from jax._src.random import threefry2x32 as threefry

  def draws(key):
    return (
      jax.random.bernoulli(jax.random.fold_in(key, 1), 0.9, (4, 33, 17)),
      jax.random.bits(key, (1000,)),
      jax.random.normal(jax.random.fold_in(key, 2), (5, 7)),
    )

  def lower_and_run():
    jax.clear_caches()
    f = jax.jit(draws)
    return f.lower(jax.random.key(3)).as_text(), [np.asarray(x) for x in f(jax.random.key(3))]

  # An earlier test of this worker may have run chessjax.runtime.setup (every run does): JAX's own
  # CPU lowering first, and whatever this worker had registered back afterwards.
  cpu_rules = mlir._platform_specific_lowerings["cpu"]
  before = cpu_rules.get(threefry.threefry2x32_p)
  try:
    mlir.register_lowering(
      threefry.threefry2x32_p, threefry._threefry2x32_cpu_lowering_rule, platform="cpu"
    )
    loop, want = lower_and_run()
    assert runtime.unroll_threefry_on_cpu()
    unrolled, got = lower_and_run()
  finally:
    if before is None:
      cpu_rules.pop(threefry.threefry2x32_p, None)
    else:
      cpu_rules[threefry.threefry2x32_p] = before
    jax.clear_caches()
  if jax.default_backend() == "cpu":
    assert "stablehlo.while" in loop and "stablehlo.while" not in unrolled
  for a, b in zip(want, got, strict=True):
    np.testing.assert_array_equal(a, b)


# The training loop.


def _config(dataset, **train_overrides):
  # The Transformer: dropout, so the train state holds RNG keys and the masks must match too.
  config = cwm.get_config("family=transformer,size=d128,smoke=True")
  config.data.train = str(dataset)
  config.data.bucket_lengths = (64, 128)
  config.train.steps, config.train.log_every, config.train.checkpoint_every = 6, 1, 6
  config.data.val_split = "none"  # No validation: nothing else to compile.
  for k, v in train_overrides.items():
    setattr(config.train, k, v)
  return config


def _compilations(caplog) -> list[tuple[str, str]]:
  return [
    (r.getMessage().split(" compiled ")[0], r.getMessage().split(" compiled ")[1].split(" in ")[0])
    for r in caplog.records
    if r.getMessage().startswith("train step for batch shapes")
  ]


def _losses(text: str) -> list[str]:
  return [line.split("loss")[1].split()[0] for line in text.splitlines() if "grad" in line]


@pytest.mark.slow
def test_compiling_ahead_trains_as_compiling_in_the_loop(
  small_dataset, tmp_path, caplog, capsys, monkeypatch
):
  """The same losses and parameters, bit for bit, with the second length's step compiled in the
  loop or ahead (made certain here: the loop waits for the thread before its first step)."""
  start_ahead = compiling.StepCompiler.start_ahead

  def start_and_finish(self, *args):
    start_ahead(self, *args)
    self._thread.join()

  monkeypatch.setattr(compiling.StepCompiler, "start_ahead", start_and_finish)
  caplog.set_level("INFO", logger="chessjax.compile")
  runs = {}
  for ahead in ("false", "true"):
    caplog.clear()
    train.train_and_evaluate(_config(small_dataset, compile_ahead=ahead), tmp_path / ahead)
    runs[ahead] = (_compilations(caplog), _losses(capsys.readouterr().out))
  # Each of the two lengths the 6 steps use compiled once, the second one ahead.
  assert [where for _, where in runs["false"][0]] == ["in the loop", "in the loop"]
  assert [where for _, where in runs["true"][0]] == ["in the loop", "ahead"]
  assert [shape for shape, _ in runs["true"][0]] == [shape for shape, _ in runs["false"][0]]
  assert len({shape for shape, _ in runs["true"][0]}) == 2
  assert runs["true"][1] == runs["false"][1] and len(runs["true"][1]) == 6
  want = workdir.restore(tmp_path / "false", which="latest").state
  got = workdir.restore(tmp_path / "true", which="latest").state
  for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
    if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
      a, b = jax.random.key_data(a), jax.random.key_data(b)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_min_bucket_batches_compiles_fewer_lengths(small_dataset, tmp_path, caplog):
  caplog.set_level("INFO", logger="chessjax.batches")
  caplog.set_level("INFO", logger="chessjax.compile")
  config = _config(small_dataset, compile_ahead="false")
  config.data.min_bucket_batches = 100  # More than the run's 6 batches: one length, the longest.
  summary = train.train_and_evaluate(config, tmp_path / "merged")
  assert summary["steps"] == 6
  (compiled,) = _compilations(caplog)
  assert "(8, 128)" in compiled[0]
  assert "buckets (64, 128) -> (128,)" in caplog.text
