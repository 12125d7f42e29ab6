"""The precision policy (`model.dtype`, chessjax.models.layers.DTYPES): a bfloat16 run's loss
tracks the float32 run's, and "tf32" sets the process's matmul precision.

Mamba-3 (the family the paper trains under bfloat16 autocast) at d128 with one layer, batch 4 of
T = 32 random games, 12 steps of the train step training runs (`chessjax.step.build`: AdamW with
clipping and the non-finite guard) at a constant lr 3e-3 on the same batch from the same initial
values: the bfloat16 loss stays within 0.5% of the float32 loss at every step (measured: at most
0.013%), while the loss itself falls by more than 10% (2.71 to 1.43: the two runs are tracked
while they learn).
"""

import jax
import numpy as np
import pytest

from benchmarks.harness import built_step, device_batches, random_batch, world_model_config
from chessjax import runtime

STEPS, TOLERANCE = 12, 0.005


def losses(dtype: str) -> np.ndarray:
  config = world_model_config("mamba3", "d128", batch=4, steps=32, dtype=dtype, layers=1)
  config.model.dropout = 0.0
  config.optim.lr, config.optim.warmup_steps, config.optim.schedule = 3e-3, 0, "constant"
  built = built_step(config)
  state = built.state
  assert all(x.dtype == np.float32 for x in jax.tree.leaves(state["params"]))  # float32 params
  (batch,) = device_batches(built, [random_batch(4, 32, seed=0)])
  out = []
  for _ in range(STEPS):
    state, step_out = built.fns.train_step(state, batch)
    out.append(float(step_out["loss"]))
  assert int(state["bad_batches"]) == 0
  floats = [x for x in jax.tree.leaves(state["opt_state"]) if np.issubdtype(x.dtype, np.floating)]
  assert floats and all(x.dtype == np.float32 for x in floats)  # optimizer state float32
  return np.array(out)


@pytest.mark.slow  # 8 s of CPU; 40 s of wall time on a shared core
def test_bfloat16_loss_tracks_float32():
  f32, bf16 = losses("float32"), losses("bfloat16")
  assert f32[-1] < 0.9 * f32[0], f32  # the runs learn
  np.testing.assert_array_less(np.abs(bf16 - f32) / f32, TOLERANCE)


def test_tf32_sets_the_matmul_precision():
  before = jax.config.jax_default_matmul_precision
  try:
    runtime.set_matmul_precision("float32")
    assert jax.config.jax_default_matmul_precision == before
    runtime.set_matmul_precision("tf32")
    assert jax.config.jax_default_matmul_precision == "tensorfloat32"
  finally:
    jax.config.update("jax_default_matmul_precision", before)
