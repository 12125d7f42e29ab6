"""Several train steps per compiled call (`train.steps_per_call`, `chessjax.dispatch`): the same
steps, bit for bit.

A run with k steps per call ends with the parameters and optimizer state of the same run at one
step per call, bit for bit: a world model across its two length buckets, a language model and a
population whose members read different data orders (padded steps), each with a step count that
k does not divide and calls cut at log steps and where the bucket changes; and the issue's
command, `chessjax.main` on Gated DeltaNet's smoke model, under XLA's default flags (the suite's
own, quicker to compile, hid the difference the k-step program once had there: `_NESTED` in
`chessjax.dispatch`). A k-step run that is preempted saves at the end of its call and resumes to
the same state. The dispatch itself (the state as a list, the stacked batches, the outputs) is
checked on a toy step in the quick tier.
"""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, SMOKE_FAMILY, host_bits

from chessjax import dispatch, populations, preemption, sharding, train, workdir
from chessjax.spec import TrainSpec
from configs import cwm
from configs import lm as lm_config

STEPS = 7  # Not a multiple of the k the runs use.


def assert_same_state(a, b) -> None:
  """Two workdirs' latest train states (parameters, optimizer state, guard, dropout RNG) bit for
  bit."""
  sa = workdir.restore(a, which="latest").state
  sb = workdir.restore(b, which="latest").state
  leaves_a, leaves_b = jax.tree.leaves(sa), jax.tree.leaves(sb)
  assert len(leaves_a) == len(leaves_b) > 0
  for x, y in zip(leaves_a, leaves_b, strict=True):
    np.testing.assert_array_equal(host_bits(x), host_bits(y))
  assert int(sa["step"]) == int(sb["step"])


def world_model(dataset, k: int):
  """The smoke model: games up to 128 steps in buckets 64 and 128, no validation, a log line
  every 5 steps and one checkpoint at the end."""
  c = cwm.get_config(f"family={SMOKE_FAMILY},size=d128,smoke=True")
  c.data.train, c.data.val_split = str(dataset), "none"
  c.train.update(steps=STEPS, log_every=5, checkpoint_every=1000, steps_per_call=k)
  c.train.compile_ahead = "false"
  return c


@pytest.fixture(scope="module")
def one_step_run(small_dataset, tmp_path_factory):
  """The world model at one step per call: what every k must reach."""
  work = tmp_path_factory.mktemp("k1") / "run"
  train.train_and_evaluate(world_model(small_dataset, 1), work)
  return work


def test_steps_per_call_is_checked():
  c = cwm.get_config("family=slice,size=d128")
  c.train.steps_per_call = 0
  with pytest.raises(ValueError, match="train.steps_per_call must be >= 1, got 0"):
    TrainSpec.from_config(c)


def _toy_step(state, batch):
  """A step whose state holds a typed PRNG key and whose outputs are float32 numbers."""
  key, sub = jax.random.split(state["key"])
  w = state["w"] + batch["x"].sum(axis=0) * 0.5 + jax.random.uniform(sub, (3,))
  out = {"loss": w.sum(), "step": (state["step"] + 1).astype(jnp.float32)}
  return {"key": key, "w": w, "step": state["step"] + 1}, out


def test_a_call_of_k_steps_is_k_steps():
  """The toy step three times: one step per call, then calls of 2 and 1 of at most 2 steps (the
  padded slot ignored): the same state and outputs, the key kept typed."""
  mesh = sharding.make_mesh()
  host = [{"x": np.full((4, 3), i, np.float32)} for i in range(3)]
  data = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))

  def fresh():
    state = {"key": jax.random.key(0), "w": jnp.zeros(3), "step": jnp.zeros((), jnp.int32)}
    return sharding.put_replicated(state, mesh)

  one = dispatch.StepCall(_toy_step, fresh(), data, length_axis=1)
  leaves, outs = one.flat(fresh()), []
  for h in host:
    leaves, out = one.jitted(leaves, one.device_input([h], ["x"]))
    outs += one.step_outputs(jax.device_get(out), 1)
  two = dispatch.StepCall(_toy_step, fresh(), data, length_axis=1, steps_per_call=2)
  assert two.length_axis == 2
  leaves2, outs2 = two.flat(fresh()), []
  for hs in (host[:2], host[2:]):
    batch = two.device_input(hs, ["x"])
    assert batch["x"].shape == (2, 4, 3) and int(batch[dispatch.COUNT]) == len(hs)
    leaves2, out = two.jitted(leaves2, batch)
    outs2 += two.step_outputs(jax.device_get(out), len(hs))
  assert outs2 == outs and [o["step"] for o in outs] == [1, 2, 3]
  a, b = one.tree(leaves), two.tree(leaves2)
  assert jax.dtypes.issubdtype(b["key"].dtype, jax.dtypes.prng_key)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_array_equal(host_bits(x), host_bits(y))
  with pytest.raises(ValueError, match="takes 1 to 2 batches"):
    two.device_input(host, ["x"])


@pytest.mark.slow
def test_a_world_model_at_k_steps_per_call_is_bit_exact(small_dataset, one_step_run, tmp_path):
  """7 steps at 3 per call (calls cut at step 5's log line, at the run's end and where the
  length bucket changes) end where 7 steps at 1 per call end."""
  train.train_and_evaluate(world_model(small_dataset, 3), tmp_path / "k3")
  assert_same_state(tmp_path / "k3", one_step_run)


class _PreemptedInTheFirstCall(preemption.Preemption):
  """A SIGTERM noticed while the first call runs: that call finishes first."""

  def reached(self, counter: int) -> bool:
    self.signal_name = "SIGTERM"
    return True


@pytest.mark.slow
def test_a_preempted_k_step_run_resumes_bit_exact(
  small_dataset, one_step_run, tmp_path, monkeypatch
):
  """Preempted in its first call at 4 steps per call: the run stops and saves at the end of that
  call (step 4, or earlier where the bucket changed), and the rerun ends bit for bit as the run
  at one step per call."""
  config = world_model(small_dataset, 4)
  work = tmp_path / "k4"
  with monkeypatch.context() as patch:
    patch.setattr(train, "Preemption", _PreemptedInTheFirstCall)
    with pytest.raises(preemption.Preempted) as stopped:
      train.train_and_evaluate(config, work)
  assert 1 <= stopped.value.step <= 4
  assert workdir.read_summary(work)["preempted"]
  resumed = train.train_and_evaluate(world_model(small_dataset, 4), work)
  assert resumed["resumed_from"] == stopped.value.step and resumed["steps"] == STEPS
  assert_same_state(work, one_step_run)


@pytest.mark.slow
def test_a_language_model_at_k_steps_per_call_is_bit_exact(lm_sample, tmp_path):
  """GPT-2 tiny on RAP rows, 7 steps at 1 and at 4 per call (4 + 3)."""
  for k in (1, 4):
    c = lm_config.get_config(f"family=gpt2,size=tiny,notation=rap,steps={STEPS}")
    c.data.train, c.data.batch_size, c.data.val_split = str(lm_sample["data"]), 8, "none"
    c.data.max_len, c.data.bucket_lengths = 256, (256,)  # RAP rows of 60 plies fit.
    c.train.update(log_every=100, checkpoint_every=1000, steps_per_call=k, compile_ahead="false")
    train.train_and_evaluate(c, tmp_path / f"k{k}")
  assert_same_state(tmp_path / "k4", tmp_path / "k1")


@pytest.mark.slow
def test_a_population_at_k_steps_per_call_is_bit_exact(small_dataset, tmp_path):
  """Two members with their own data orders (their steps padded to the longer batch where the
  orders fall in different buckets), 7 steps at 1 and at 3 per call: each member bit for bit."""
  members = ["a", "b:seed=1,optim.lr=3e-4"]
  for k in (1, 3):
    c = cwm.get_config("family=slice,size=d128,smoke=True")
    c.data.train, c.data.val_split = str(small_dataset), "none"
    c.train.update(steps=STEPS, log_every=5, checkpoint_every=1000, steps_per_call=k)
    c.train.compile_ahead = "false"
    populations.train_population(c, tmp_path / f"k{k}", members)
  for name in ("a", "b"):
    assert_same_state(tmp_path / "k3" / name, tmp_path / "k1" / name)


@pytest.mark.multiprocess
@pytest.mark.slow
def test_the_command_at_4_steps_per_call_is_bit_exact_under_default_flags(small_dataset, tmp_path):
  """`python -m chessjax.main` on Gated DeltaNet's smoke model, 5 steps of games cut at 128
  steps (two chunks of its delta rule, one bucket: one compilation a run) at 4 steps per call
  (4 + 1) and at 1, in processes with XLA's default flags and optimisation."""
  env = {
    k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_DISABLE_MOST_OPTIMIZATIONS")
  }
  env["PYTHONPATH"] = str(REPO)
  for k in (1, 4):
    argv = [
      sys.executable, "-m", "chessjax.main",
      f"--config={REPO / 'configs' / 'cwm.py'}:family=gated_deltanet,size=d128,smoke=True",
      f"--workdir={tmp_path / f'k{k}'}", f"--config.data.train={small_dataset}",
      "--config.data.val_split=none", "--config.data.bucket_lengths=(128,)",
      "--config.train.steps=5", f"--config.train.steps_per_call={k}",
      "--config.train.compile_ahead=false",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  assert_same_state(tmp_path / "k4", tmp_path / "k1")
