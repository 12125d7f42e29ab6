"""Configs, optimizer schedule, training loop, resume, non-finite guard, sharding (several
processes: test_multiprocess.py)."""

import json
import math
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, SMOKE_FAMILY

from chessjax import evaluation, optim, preemption, train, workdir
from chessjax.checkpointing import Checkpointer
from chessjax.compile import StepCompiler
from chessjax.data import pipeline
from chessjax.data.rows import GameRows
from chessjax.models import FAMILIES, SIZES, abstract_model, count_params
from chessjax.spec import TrainSpec
from chessjax.step import build
from chessjax.task import get_task
from chessjax.world_model import grid
from configs import cwm

FAMILY = SMOKE_FAMILY


@pytest.fixture(scope="module")
def dataset(small_dataset):
  return small_dataset


# Games cut to their first 31 moves (START + 31): one training shape, one compilation, and steps
# a quarter of the smoke config's 128 (what these tests check does not depend on the length).
LENGTH = 32


def smoke_config(dataset, family=FAMILY, **train_overrides):
  config = cwm.get_config(f"family={family},size=d128,smoke=True")
  config.data.train = str(dataset)
  config.data.max_len, config.data.bucket_lengths = LENGTH, (LENGTH,)
  for k, v in train_overrides.items():
    setattr(config.train, k, v)
  return config


def smoke_batches(dataset):
  """The training batches of `smoke_config` (batch 8, seed 0, one length), outside the loop."""
  return pipeline.make_batches(
    str(dataset),
    "train",
    GameRows(),
    batch_size=8,
    seed=0,
    bucket_lengths=(LENGTH,),
    max_len=LENGTH,
  )


def subprocess_env(tmp_path, **extra):
  env = dict(os.environ)
  env.update(PYTHONPATH=str(REPO))  # The compilation cache settings come from conftest.py.
  env.update(extra)
  return env


def main_cmd(dataset, workdir, *overrides):
  return [
    sys.executable, "-m", "chessjax.main",
    f"--config={REPO / 'configs' / 'cwm.py'}:family={FAMILY},size=d128,smoke=True",
    f"--workdir={workdir}", f"--config.data.train={dataset}", f"--config.data.max_len={LENGTH}",
    f"--config.data.bucket_lengths=({LENGTH},)", *overrides,
  ]  # fmt: skip


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_config_locks_and_builds(family):
  for size in SIZES:
    config = cwm.get_config(f"family={family},size={size}")
    config.lock()
    with pytest.raises(AttributeError):
      config.optim.not_a_key = 1
    model = abstract_model(family, size, **config.model.to_dict())
    assert count_params(model) > 1_000_000
    json.dumps(config.to_dict())
  main = grid.recipe_family(family)
  assert cwm.get_config(f"family={family},size=d256").optim.lr == grid.FINAL[main]["d256"][0]


def test_config_arg_errors():
  with pytest.raises(ValueError, match="unknown model family 'nope'"):
    cwm.get_config("family=nope")
  with pytest.raises(ValueError, match="unknown size 'd128' for lstm"):  # a family, not of the grid
    cwm.get_config("family=lstm")
  with pytest.raises(ValueError, match="unknown config arg"):
    cwm.get_config("famly=slice")
  with pytest.raises(ValueError, match="key=value"):
    cwm.get_config("slice")
  smoke = cwm.get_config("smoke=True")
  assert smoke.train.steps < 100 and smoke.data.batch_size <= 16


def test_config_arg_sets_model_keys_typed_by_the_family():
  """`model.KEY=VALUE` items reach config.model with the family config's types (the command
  line's --config.model.KEY can only change keys already there), and build that model."""
  from configs import lm

  c = cwm.get_config("family=mamba3,size=d128,smoke=True,model.layers=3,model.mlp_hidden=384")
  assert c.model.to_dict() == {"dtype": "float32", "layers": 3, "mlp_hidden": 384}
  c = cwm.get_config("family=slice,model.final_norm=true,model.dtype=bfloat16,model.dropout=0")
  assert c.model.to_dict() == {"dtype": "bfloat16", "final_norm": True, "dropout": 0.0}
  c = lm.get_config("family=gated_deltanet,size=d128,model.layers=3,model.mlp_width=480")
  # mlp_width's default is None; dtype is the precision policy every config sets.
  assert c.model.to_dict() == {"layers": 3, "mlp_width": 480, "dtype": "float32"}
  task = get_task(c)
  model = abstract_model(c.family, c.size, head=task.head, **task.model_kwargs, **c.model)
  assert len(model.backbone.blocks) == 3 and count_params(model) == 875_001
  with pytest.raises(ValueError, match="unknown slice model key 'nope'"):
    cwm.get_config("family=slice,model.nope=1")
  with pytest.raises(ValueError, match="model.layers='x': expected int"):
    lm.get_config("family=slice,size=d128,model.layers=x")
  with pytest.raises(ValueError, match="heads \\* head_dim"):  # Mamba's own check, at once.
    lm.get_config("family=mamba3,size=d128,model.d=120")
  with pytest.raises(ValueError, match="cannot be set in the config arg"):
    cwm.get_config("family=mamba2,model.a_init_range=1")


def test_lr_schedule_matches_spec():
  fn = optim.lr_schedule(1e-3, 10, 110, "cosine", 0.1)
  assert float(fn(0)) == pytest.approx(1e-4)  # (step + 1) / warmup
  assert float(fn(9)) == pytest.approx(1e-3)
  assert float(fn(10)) == pytest.approx(1e-3)
  assert float(fn(60)) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))
  assert float(fn(110)) == pytest.approx(1e-4)
  const = optim.lr_schedule(3e-4, 4, 100, "constant", 0.1)
  assert [float(const(s)) for s in (0, 3, 50, 99)] == pytest.approx([7.5e-5, 3e-4, 3e-4, 3e-4])
  with pytest.raises(ValueError):
    optim.lr_schedule(1e-3, 10, 100, "exponential", 0.1)  # "linear" exists: the LM recipe


def test_weight_decay_mask_excludes_gdn_gates():
  from flax import nnx

  from chessjax.models import create_model

  model = create_model("gated_deltanet", "d128")
  mask = optim.decay_mask(nnx.state(model, nnx.Param)).to_pure_dict()
  flat = {"/".join(map(str, k)): v for k, v in jax.tree_util.tree_flatten_with_path(mask)[0]}
  off = sorted(k for k, v in flat.items() if not v)
  assert off and all(k.split("/")[-1].strip("'[]") in ("A_log", "dt_bias") for k in off)
  assert sum(flat.values()) == len(flat) - len(off)


class CrashingCompiler(StepCompiler):
  """The loop's step compiler, whose programs die at the 7th step they run (after step 4's
  checkpoint): a crash in the middle of a run."""

  def __init__(self, jitted, **kwargs):
    super().__init__(jitted, **kwargs)
    self.calls = 0

  def ready(self, shape):
    compiled = super().ready(shape)
    return None if compiled is None else _Crashing(compiled, self)

  def get(self, shape, state, batch):
    return _Crashing(super().get(shape, state, batch), self)


class _Crashing:
  def __init__(self, compiled, compiler: CrashingCompiler):
    self.compiled, self.compiler = compiled, compiler

  def __getattr__(self, name):  # memory_analysis, for the loop's memory check
    return getattr(self.compiled, name)

  def __call__(self, state, batch):
    self.compiler.calls += 1
    if self.compiler.calls == 7:
      raise KeyboardInterrupt("simulated crash")
    return self.compiled(state, batch)


@pytest.mark.slow
def test_train_resume_after_crash_is_bit_exact(dataset, tmp_path, monkeypatch):
  reference = train.train_and_evaluate(
    smoke_config(dataset, steps=8, checkpoint_every=4), tmp_path / "a"
  )
  assert reference["steps"] == 8 and reference["resumed_from"] == 0
  assert math.isfinite(reference["validation"]["loss"])
  want = workdir.restore(tmp_path / "a", which="latest").state

  with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
    patch.setattr(train, "StepCompiler", CrashingCompiler)
    train.train_and_evaluate(smoke_config(dataset, steps=8, checkpoint_every=4), tmp_path / "b")
  resumed = train.train_and_evaluate(
    smoke_config(dataset, steps=8, checkpoint_every=4), tmp_path / "b"
  )
  assert resumed["resumed_from"] == 4 and resumed["steps"] == 8
  again = train.train_and_evaluate(
    smoke_config(dataset, steps=8, checkpoint_every=4), tmp_path / "b"
  )  # A finished run: nothing to train, the summary keeps its validation metrics.
  assert again["resumed_from"] == 8 and again["validation"]["loss"] == resumed["validation"]["loss"]
  got = workdir.restore(tmp_path / "b", which="latest").state
  for a, b in zip(jax.tree.leaves(want["params"]), jax.tree.leaves(got["params"]), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert json.loads((tmp_path / "b" / "config.json").read_text())["family"] == FAMILY
  assert list((tmp_path / "b" / "tb").iterdir())


@pytest.mark.slow
def test_corrupt_latest_checkpoint_falls_back(dataset, tmp_path, caplog):
  train.train_and_evaluate(smoke_config(dataset, steps=4, checkpoint_every=2), tmp_path / "w")
  latest = tmp_path / "w" / "checkpoints" / "4" / "state"
  for path in latest.rglob("*"):
    if path.is_file() and path.stat().st_size > 0:
      path.write_bytes(b"\0" * path.stat().st_size)
  assert workdir.restore(tmp_path / "w", which="latest").step == 2
  assert "unreadable" in caplog.text
  # A checkpoint named by its step: that one, or a clear error (never a silent fallback).
  by_step = workdir.restore(tmp_path / "w", step=2)
  assert by_step.step == 2
  jax.tree.map(
    np.testing.assert_array_equal,
    by_step.state["params"],
    workdir.restore(tmp_path / "w", which="latest").state["params"],
  )
  with pytest.raises(FileNotFoundError, match="no checkpoint at step 3"):
    workdir.restore(tmp_path / "w", step=3)
  with pytest.raises(Exception):  # noqa: B017 - orbax's own error for the corrupted files
    workdir.restore(tmp_path / "w", step=4)


@pytest.mark.slow
def test_non_finite_guard_rolls_back_and_aborts(dataset, tmp_path):
  config = smoke_config(dataset, steps=8, max_bad_batches=3, snapshot_every=2)
  _, state, fns = build(TrainSpec.from_config(config), get_task(config))
  it = smoke_batches(dataset)
  batch = evaluation.device_batch(next(it), fns)
  state, out = fns.train_step(state, batch)
  assert float(out["bad_batches"]) == 0
  # Non-finite parameters make the loss non-finite: the batch is skipped and counted.
  poisoned = dict(state, params=jax.tree.map(lambda x: x * jnp.nan, state["params"]))
  poisoned, out = fns.train_step(poisoned, batch)
  assert float(out["bad_in_a_row"]) == 1 and not math.isfinite(float(out["loss"]))
  assert int(poisoned["step"]) == 2
  it.close()
  # A learning rate that blows the parameters up: rolled back to the snapshot, then abort.
  config = smoke_config(dataset, steps=8, max_bad_batches=3, snapshot_every=2)
  config.optim.lr = 1e38
  config.optim.warmup_steps = 1
  with pytest.raises(train.NonFiniteError, match="consecutive"):
    train.train_and_evaluate(config, tmp_path / "nan")
  # The aborted run leaves its health for the sweep's selection rule.
  summary = workdir.read_summary(tmp_path / "nan")
  assert summary["aborted"] and "consecutive" in summary["abort_reason"]
  assert summary["bad_batches"] >= 3 and summary["steps"] < 8


def run_losses(dataset, devices, steps=3) -> list[float]:
  """Per-step losses of `steps` training steps, data parallel over `devices`."""
  c = smoke_config(dataset, steps=8)  # The 8-step runs' schedule: one device reuses their program.
  _, state, fns = build(TrainSpec.from_config(c), get_task(c), devices=devices)
  it = smoke_batches(dataset)
  losses = []
  for _ in range(steps):
    state, out = fns.train_step(state, evaluation.device_batch(next(it), fns))
    losses.append(float(out["loss"]))
  it.close()
  return losses


@pytest.mark.slow
def test_data_parallel_on_four_devices_matches_one(dataset):
  assert jax.device_count() >= 4, "conftest.py sets several virtual CPU devices"
  one = run_losses(dataset, jax.devices()[:1])
  four = run_losses(dataset, jax.devices()[:4])
  np.testing.assert_allclose(four, one, rtol=2e-5)


@pytest.mark.multiprocess
@pytest.mark.slow
def test_sigterm_then_kill_9_then_rerun_reaches_the_same_parameters(dataset, tmp_path):
  """SIGTERM (preemption) after checkpoint 2 of 12: the run finishes its step, saves a checkpoint
  at it, writes its summary as preempted and exits with status 75 within 60 s. The rerun resumes
  there; SIGKILL after its checkpoint 8; the next rerun resumes from checkpoint 8 and ends bit for
  bit as the uninterrupted run."""
  overrides = [
    "--config.train.steps=12",
    "--config.train.checkpoint_every=2",
    "--config.train.eval_every=1000",
    "--config.train.log_every=2",
  ]
  env = subprocess_env(tmp_path)

  def start(work) -> subprocess.Popen:
    return subprocess.Popen(
      main_cmd(dataset, work, *overrides), cwd=REPO, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip

  def signal_after(proc, work, checkpoint: int, sig) -> None:
    deadline = time.time() + 600
    while time.time() < deadline and not (work / "checkpoints" / str(checkpoint)).exists():
      assert proc.poll() is None, proc.communicate()[0][-3000:]
      time.sleep(0.01)
    proc.send_signal(sig)

  # The uninterrupted run as a separate process too: trained in this process instead (4 virtual
  # devices, the suite's set-up), its parameters differ from `chessjax.main`'s in the last bits.
  ref = start(tmp_path / "ref")
  assert ref.wait(600) == 0, ref.communicate()[0][-3000:]
  work = tmp_path / "work"

  proc = start(work)
  signal_after(proc, work, 2, signal.SIGTERM)
  signalled = time.monotonic()
  out = proc.communicate(timeout=60)[0]
  assert time.monotonic() - signalled < 60
  assert proc.returncode == preemption.EXIT_STATUS, out[-3000:]
  summary = workdir.read_summary(work)
  stop = summary["steps"]
  assert summary["preempted"] and 2 <= stop < 8, summary
  assert f"preempted (SIGTERM): stopped at step {stop}" in out
  assert stop in Checkpointer(work).steps() and not workdir.finished(work)

  proc = start(work)
  signal_after(proc, work, 8, signal.SIGKILL)
  out = proc.communicate()[0]
  assert f"resumed from step {stop}" in out, out[-3000:]

  rerun = start(work)
  out = rerun.communicate(timeout=600)[0]
  assert rerun.returncode == 0, out[-3000:]
  summary = workdir.read_summary(work)
  assert summary["resumed_from"] >= 8 and summary["steps"] == 12 and not summary["preempted"]
  want = workdir.restore(tmp_path / "ref", which="latest").state
  got = workdir.restore(work, which="latest").state
  for a, b in zip(jax.tree.leaves(want["params"]), jax.tree.leaves(got["params"]), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.slow
def test_a_new_task_trains_without_touching_the_loop(dataset, tmp_path):
  """`config.task` names a module outside chessjax (tests/tasks/next_move.py): the one training
  loop runs its rows, loss and metrics, checkpoints it and restores it for evaluation. Gated
  DeltaNet: its final norm keeps the 20,482 logits of a fresh model small (SLiCE's d128 recipe has
  none, and 12 steps do not bring its loss under chance)."""
  config = smoke_config(dataset, "gated_deltanet", steps=12, checkpoint_every=12, eval_every=6)
  config.task = "tasks.next_move"
  config.optim.lr, config.optim.warmup_steps = 3e-3, 2
  summary = train.train_and_evaluate(config, tmp_path / "lm")
  assert summary["task"] == "tasks.next_move" and summary["steps"] == 12
  val = summary["validation"]
  # Chance is 1 / 20,482 moves: a few steps already learn common replies.
  assert math.isfinite(val["loss"]) and val["loss"] < math.log(20482) and val["accuracy"] > 0.01
  restored = workdir.restore(tmp_path / "lm", which="latest")
  assert restored.step == 12 and type(restored.task).__name__ == "NextMoveTask"
  logits = restored.predict(jnp.zeros((1, 5), jnp.int32))
  assert logits.shape == (1, 5, 20482)


@pytest.mark.slow
def test_progress_lines_and_tensorboard_logs(dataset, tmp_path, capsys):
  """A run prints step, tokens/s and time left between its log lines (here every step:
  `progress_seconds=0`), with the loss of the steps the device has finished (never waiting for
  one: from step IN_FLIGHT + 1 on, the host has waited on an older step, so there is one), and
  the `tensorboard` the README names reads its summaries."""
  from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

  # 8 steps: the other 8-step smoke runs' compiled train step.
  config = smoke_config(dataset, steps=8, log_every=100, checkpoint_every=8, eval_every=8)
  config.train.progress_seconds = 0.0
  train.train_and_evaluate(config, tmp_path / "p")
  lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("step ")]
  progress = [x for x in lines if "tok/s" in x and "eta" in x]
  assert [x.split()[1] for x in progress] == [f"{s}/8" for s in range(1, 9)], lines
  assert all("loss" in x for x in progress[train.IN_FLIGHT :]), lines
  assert "input wait" in progress[-1] and "ms/step" in progress[-1], lines  # The log line's waits.
  events = EventAccumulator(str(tmp_path / "p" / "tb"))
  events.Reload()
  tags = events.Tags()
  assert {"train/loss", "train/tokens_per_s", "train/mfu", "validation/exact_state"} <= set(
    tags["scalars"]
  )
  assert {"train/input_wait_fraction", "train/host_ms_per_step"} <= set(tags["scalars"])
  assert "validation/prefix_bins" in tags["images"]
  assert [e.step for e in events.Scalars("train/loss")] == [8]
