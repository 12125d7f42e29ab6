"""The precision policy (`model.dtype`, chessjax.models.layers.DTYPES): a bfloat16 run's loss
tracks the float32 run's, and "tf32" sets the process's matmul precision.

Mamba-3 (the family the paper trains under bfloat16 autocast) at d128 with one layer, batch 4 of
T = 32 random games, 12 AdamW steps at lr 3e-3 on the same batch from the same initial values: the
bfloat16 loss stays within 0.5% of the float32 loss at every step (measured: at most 0.016%), while
the loss itself falls by more than 10% (2.71 to 1.43: the two runs are tracked while they learn).
"""

import jax
import numpy as np
import optax
import pytest
from flax import nnx

from benchmarks.bench_train_step import make_train_step, random_batch
from chessjax import runtime
from chessjax.models import create_model

STEPS, TOLERANCE = 12, 0.005


def losses(dtype: str) -> np.ndarray:
  model = create_model("mamba3", "d128", seed=0, layers=1, dropout=0.0, dtype=dtype)
  graphdef, params, rest = nnx.split(model, nnx.Param, ...)
  assert all(x.dtype == np.float32 for x in jax.tree.leaves(params))  # parameters stay float32
  tx = optax.adamw(3e-3)
  opt_state = tx.init(params)
  step = make_train_step(graphdef, tx)
  batch = random_batch(4, 32, seed=0)
  out = []
  for _ in range(STEPS):
    params, rest, opt_state, loss = step(params, rest, opt_state, batch)
    out.append(float(loss))
  floats = [x for x in jax.tree.leaves(opt_state) if np.issubdtype(x.dtype, np.floating)]
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
