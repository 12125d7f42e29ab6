"""Gradient accumulation (`train.micro_batches`) and rematerialisation (`train.remat`): the same
optimisation step as the one-shot batch, for the world-model and the language-model task."""

import jax
import numpy as np
import pytest

from chessjax import evaluation, step
from chessjax.spec import TrainSpec
from chessjax.task import get_task
from configs import cwm
from configs import lm as lm_config

B, T = 8, 32


def world_model_config():
  # Gated DeltaNet: no dropout, so the accumulated step must equal the one-shot step.
  config = cwm.get_config("family=gated_deltanet,size=d128,smoke=True")
  config.data.batch_size = B
  return config


def lm_config_tiny(**model):
  config = lm_config.get_config("family=gpt2,size=tiny,notation=uci,train=S")
  config.data.batch_size = B
  config.model.update(model)
  return config


def world_model_batch(rng):
  lengths = rng.integers(1, T + 1, size=B)
  lengths[0] = 0  # A row without scored steps: it must weigh nothing.
  mask = np.arange(T)[None] < lengths[:, None]
  return {
    "moves": rng.integers(1, 1900, size=(B, T)).astype(np.int32),
    "states": rng.integers(0, 3, size=(B, T, 75)).astype(np.uint8),
    "mask": mask,
  }


def lm_batch(rng):
  lengths = rng.integers(2, T + 1, size=B)
  weights = (np.arange(T)[None] < lengths[:, None]).astype(np.float32)
  return {
    "inputs": rng.integers(0, 70, size=(B, T)).astype(np.int32),
    "targets": rng.integers(0, 70, size=(B, T)).astype(np.int32),
    "weights": weights,
    "mask": weights > 0,
    "moves": lengths.astype(np.float32) / 3,
  }


def spec_of(config, **train_keys) -> TrainSpec:
  """The config's spec with `train_keys` changed, its schedule 10 steps long."""
  config = config.copy_and_resolve_references()
  config.train.update(train_keys)
  if config.train.epochs:
    return TrainSpec.from_config(config, epoch_steps=10 // config.train.epochs)
  config.train.steps = 10
  return TrainSpec.from_config(config)


def build(config, **train_keys):
  return step.build(spec_of(config, **train_keys), get_task(config))


def one_step(config, batch, **train_keys):
  """Parameters and outputs after one train step."""
  _, state, fns = build(config, **train_keys)
  state, out = fns.train_step(state, evaluation.device_batch(batch, fns))
  return jax.device_get(state["params"]), jax.device_get(out)


def loss_and_grads(config, batch, n, **train_keys):
  """The step's loss and gradients over `n` micro-batches (before the optimizer)."""
  _, state, fns = build(config, **train_keys)
  fn = jax.jit(
    lambda p, s, b: step.accumulated_loss_and_grads(fns.graphdef, fns.task, p, s, b, n)[:2]
  )
  device = evaluation.device_batch(batch, fns)
  return jax.device_get(fn(state["params"], state["model_state"], device))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["world_model", "lm"])
def test_micro_batches_make_the_full_batch_step(task):
  rng = np.random.default_rng(0)
  if task == "world_model":
    config, batch = world_model_config(), world_model_batch(rng)
  else:
    config, batch = lm_config_tiny(dropout=0.0), lm_batch(rng)
  full_loss, full_grads = loss_and_grads(config, batch, 1)
  loss, grads = loss_and_grads(config, batch, 4)
  np.testing.assert_allclose(loss, full_loss, rtol=1e-6)
  leaves, full_leaves = jax.tree.leaves(grads), jax.tree.leaves(full_grads)
  assert len(leaves) == len(full_leaves) > 0
  for g, f in zip(leaves, full_leaves, strict=True):
    np.testing.assert_allclose(g, f, rtol=1e-4, atol=1e-6 * max(np.abs(f).max(), 1e-12))
  # The micro-batches hold different numbers of scored tokens, so 1/n weights would be wrong.
  weight = get_task(config).loss_weight
  assert len({float(weight({k: v[i::4] for k, v in batch.items()})) for i in range(4)}) > 1
  # The jitted train step (guard and optimizer around it) reports the same loss and norm.
  out_full, out = one_step(config, batch)[1], one_step(config, batch, micro_batches=4)[1]
  np.testing.assert_allclose(out["loss"], out_full["loss"], rtol=1e-6)
  np.testing.assert_allclose(out["grad_norm"], out_full["grad_norm"], rtol=1e-5)


@pytest.mark.slow
def test_remat_recomputes_the_same_step_dropout_included():
  """The backward pass recomputes the forward one, dropout masks included: the same loss and
  gradients up to float32 rounding (another mask would move them by percents). After Adam the
  parameters agree to a thousandth of the learning rate wherever Adam's first step is well
  conditioned: its update lr * g / (|g| + eps) turns a rounding in a gradient within a hundred
  eps of zero (XLA fuses the recomputed forward differently) into a change of up to a percent of
  the learning rate (measured 1.1%, at a gradient of 3e-8); there the two agree to one step."""
  config, batch = lm_config_tiny(dropout=0.1), lm_batch(np.random.default_rng(1))
  (loss, grads), (remat_loss, remat_grads) = (
    loss_and_grads(config, batch, 1, remat=remat) for remat in (False, True)
  )
  np.testing.assert_allclose(remat_loss, loss, rtol=1e-6)
  for g, f in zip(jax.tree.leaves(remat_grads), jax.tree.leaves(grads), strict=True):
    np.testing.assert_allclose(g, f, rtol=1e-5, atol=1e-6 * max(np.abs(f).max(), 1e-12))
  (params, out), (remat_params, remat_out) = (
    one_step(config, batch, remat=remat) for remat in (False, True)
  )
  np.testing.assert_allclose(remat_out["loss"], out["loss"], rtol=1e-6)
  np.testing.assert_allclose(remat_out["grad_norm"], out["grad_norm"], rtol=1e-6)
  lr, conditioned = config.optim.lr, 100 * config.optim.eps
  leaves = zip(
    jax.tree.leaves(remat_params), jax.tree.leaves(params), jax.tree.leaves(grads), strict=True
  )
  for x, y, g in leaves:
    well = np.abs(g) > conditioned
    assert well.any()
    np.testing.assert_allclose(x[well], y[well], rtol=1e-6, atol=1e-3 * lr)
    np.testing.assert_allclose(x, y, rtol=0, atol=lr)
  # Both together, dropout on (the memory-saving setting of a large LM): a finite step.
  _, out = one_step(config, batch, remat=True, micro_batches=2)
  assert np.isfinite(out["loss"]) and np.isfinite(out["grad_norm"])


def test_micro_batches_must_divide_the_batch():
  with pytest.raises(ValueError, match="train.micro_batches=3 must be >= 1 and divide"):
    spec_of(world_model_config(), micro_batches=3)


def test_remat_needs_a_residual_stack():
  config = lm_config.get_config("family=lstm,size=tiny,notation=uci,train=S")
  with pytest.raises(ValueError, match="no residual stack"):
    build(config, remat=True)
