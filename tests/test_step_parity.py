"""chessjax's training step against the released PyTorch training step of Chess-World-Model.

The released code is that of Walker & Lyons (2026), Chess-World-Model; the measured differences
are reported in docs/world_model.md, "Training parity with the released code".

tests/data/step_parity.npz, made by tests/data/make_step_parity.py, holds 30 steps of the released
training loop (its AdamW param groups, LambdaLR warmup + cosine, `compute_state_loss`,
`clip_grad_norm_`) on tiny Transformer and SLiCE models from the golden-logits parameter values,
on fixed padded batches of real games. Here chessjax's jitted `step.build(spec, task)` step runs the
same 30 steps from the same values with the matching `optim` block, and must give per step the
same loss and gradient norm (before clipping), the same learning rate, and at the end the same
parameters.

Both sides run in float32 and sum in different orders (here over 4 devices too), so the
differences grow with the steps. Largest seen (transformer / slice): loss 5.0e-7 / 3.2e-7
relative, gradient norm 9.2e-6 / 5.7e-6 relative, final parameters 2.1e-5 / 3.3e-6 absolute
(the learning rates sum to 0.051 over the 30 steps; the parameters move by up to 0.06). Asserted:
loss rtol 2e-5, gradient norm rtol 1e-4, learning rate rtol 1e-6, final parameters atol 1e-4.
Each of these changes to chessjax's side fails the test by 10x or more (largest per-step loss
difference, transformer): no weight decay 1.8e-3, decay of matrices only (no biases, norm scales
or embeddings) 2.0e-3, no clipping 2.0e-3, eps 1e-6 2.1e-3, warmup one step longer 2.4e-2, loss
averaged per game instead of over all valid steps 0.29.

One deliberate difference, below the float32 noise: torch's `clip_grad_norm_` scales by
max_norm / (norm + 1e-6), optax's `clip_by_global_norm` by max_norm / norm, a relative
difference of 1e-6 / norm (1e-6 to 3e-6 here) in the clipped steps' gradients, which Adam's
normalisation all but cancels. With torch's formula put into chessjax's chain the largest loss
difference stays 5.0e-7 and the parameters' 3.1e-5 (noise of the same size as 2.1e-5).

The schedule check also covers warmup 0, where chessjax's `lr_schedule` used to start the cosine
one step late (it treated warmup 0 as 1); fixed to the released behaviour.
"""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO
from flax import nnx

from chessjax import evaluation, optim
from chessjax.spec import TrainSpec
from chessjax.step import build
from chessjax.task import get_task
from configs import cwm

_spec = importlib.util.spec_from_file_location(
  "make_step_parity", REPO / "tests" / "data" / "make_step_parity.py"
)
parity = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parity)
golden = parity.golden
DATA = np.load(REPO / "tests" / "data" / "step_parity.npz")


def parity_config(name: str):
  family, overrides, _, _ = golden.CASES[name]
  config = cwm.get_config(f"family={family},size=d128")
  config.model.update(overrides, dropout=0.0)
  config.optim.update(parity.OPTIM, clip_norm=parity.CLIP_NORM[name])
  config.train.steps = parity.STEPS
  config.train.snapshot_every = parity.STEPS + 1
  return config


def set_params(params: nnx.State) -> nnx.State:
  """`params` with every value set to the golden `param_value` of its path."""
  flat = nnx.to_flat_state(params)
  for path, var in flat:
    name = golden.seed_name(".".join(map(str, path)))
    var.set_value(jnp.asarray(golden.param_value(name, tuple(var.get_value().shape))))
  return nnx.from_flat_state(flat)


def test_the_golden_file_exercises_padding_warmup_and_clipping():
  mask = DATA["mask"]
  assert mask.shape == (parity.STEPS, parity.BATCH, parity.LENGTH)
  assert 0.3 < 1 - mask.mean() < 0.7 and not mask.all(axis=(1, 2)).any()  # padding everywhere
  assert (mask.sum(-1) == 0).any()  # and some all-padding rows
  for name in parity.FAMILIES:
    lr, norm = DATA[f"{name}/lr"], DATA[f"{name}/grad_norm"]
    assert lr.argmax() == parity.OPTIM["warmup_steps"] - 1 and lr[-1] < 0.2 * lr.max()
    clipped = (norm > parity.CLIP_NORM[name]).sum()
    assert 5 <= clipped <= parity.STEPS - 5, (name, clipped)


def test_released_schedules():
  """chessjax's `lr_schedule` gives the released LambdaLR factors, edge cases included."""
  for warmup, decay in parity.SCHEDULES:
    want = DATA[f"schedule/{warmup}_{decay}"]
    fn = optim.lr_schedule(1.0, warmup, decay, "cosine", 0.1)
    got = np.array([float(fn(s)) for s in range(len(want))])
    np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"warmup {warmup}, decay {decay}")


@pytest.mark.slow
@pytest.mark.parametrize("name", parity.FAMILIES)
def test_steps_equal_the_released_steps(name):
  config = parity_config(name)
  _, state, fns = build(TrainSpec.from_config(config), get_task(config), devices=jax.devices()[:4])
  params = set_params(state["params"])
  state["params"] = params
  state["snapshot"]["params"] = jax.tree.map(jnp.copy, params)
  state = jax.device_put(state, fns.state_sharding)

  keys = ("moves", "states", "mask")
  losses, grad_norms = [], []
  for s in range(parity.STEPS):
    batch = {k: DATA[k][s] for k in keys}
    state, out = fns.train_step(state, evaluation.device_batch(batch, fns))
    losses.append(float(out["loss"]))
    grad_norms.append(float(out["grad_norm"]))
  assert int(state["bad_batches"]) == 0

  lrs = [float(fns.lr_at(s)) for s in range(parity.STEPS)]  # The optimizer's, as the log's
  np.testing.assert_allclose(lrs, DATA[f"{name}/lr"], rtol=1e-6)
  np.testing.assert_allclose(losses, DATA[f"{name}/loss"], rtol=2e-5)
  np.testing.assert_allclose(grad_norms, DATA[f"{name}/grad_norm"], rtol=1e-4)

  prefix = f"{name}/final/"
  want = {k.removeprefix(prefix): DATA[k] for k in DATA.files if k.startswith(prefix)}
  got = {
    ".".join(map(str, p)): np.asarray(v.get_value()) for p, v in nnx.to_flat_state(state["params"])
  }
  assert sorted(got) == sorted(want)
  rows = DATA[f"{name}/embedding_rows"]
  for path, value in got.items():
    if path.endswith("embedding"):
      value = value[rows]
    np.testing.assert_allclose(value, want[path], rtol=0, atol=1e-4, err_msg=path)
