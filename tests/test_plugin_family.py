"""A model family from outside the package (examples/diagonal_recurrence.py, the README's "Put your
own model on the benchmark") goes through the benchmark by its dotted module path alone: config
and recipe, parameters, streaming, training, evaluation and the game tracker."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO
from flax import nnx

from chessjax import flops, train, workdir
from chessjax.models import (
  abstract_model,
  count_params,
  create_model,
  family_module,
  model_config,
  streams,
)
from chessjax.world_model import evaluate, track
from chessjax.world_model.grid import FINAL
from configs import cwm

FAMILY = "examples.diagonal_recurrence"


@pytest.fixture(scope="module", autouse=True)
def importable_from_the_repository():
  """As `python -m chessjax.main` run from the repository root sees it (cwd on sys.path)."""
  with pytest.MonkeyPatch.context() as mp:
    mp.syspath_prepend(str(REPO))
    yield
  sys.modules.pop(FAMILY, None)


def test_config_takes_the_named_recipe_and_no_dtype():
  c = cwm.get_config(f"family={FAMILY},size=d256")
  assert c.family == FAMILY
  assert (c.optim.lr, c.optim.warmup_steps, c.optim.floor) == (
    FINAL["slice"]["d256"].lr,
    FINAL["slice"]["d256"].warmup_steps,
    FINAL["slice"]["d256"].floor,
  )
  assert "dtype" not in c.model  # the family's config has no dtype key
  c = cwm.get_config(f"family={FAMILY},size=d128,model.mlp_mult=2")
  assert c.model.mlp_mult == 2
  with pytest.raises(ValueError, match="valid keys"):
    cwm.get_config(f"family={FAMILY},model.not_a_key=1")


def test_bad_family_paths_fail_clearly():
  with pytest.raises(ValueError, match="no module examples.nope"):
    cwm.get_config("family=examples.nope")
  with pytest.raises(ValueError, match="is not a model family"):
    family_module("chessjax.files")
  with pytest.raises(ValueError, match="dotted module path"):
    cwm.get_config("family=no_such_family")


def test_parameter_count_is_the_closed_form():
  d, v = 128, 20482
  block = 2 * d + 3 * (d * d + d) + (d * 8 * d + 8 * d) + (4 * d * d + d)
  want = v * d + block + d + d * 1878 + 1878  # embedding, one block, final norm, state head
  assert count_params(create_model(FAMILY, "d128")) == want


def test_its_flop_hook_gives_mfu():
  """`forward_flops` on the family module: chessjax.flops counts the family (MFU in the logs and
  benchmarks), and its counts are the Linears the model builds."""
  cfg = model_config(FAMILY, "d128")
  assert flops.supported(cfg)
  count = flops.forward(cfg, 64)
  model = abstract_model(FAMILY, "d128")

  def linears(module):
    mods = [m for _, m in nnx.iter_modules(module) if isinstance(m, nnx.Linear)]
    return sum(2 * m.in_features * m.out_features for m in mods)

  blocks = model.backbone.blocks
  assert count["projections"] == sum(linears(b.mixer) for b in blocks)
  assert count["mlp"] == sum(linears(b.mlp) for b in blocks)
  assert count["head"] == linears(model.head) and count["mixer"] == 0
  per_token = flops.model_per_token(model, [64, 100])
  assert per_token == flops.TRAIN_MULTIPLIER * sum(count.values())
  assert flops.mfu(1e4, per_token, 1e12) == pytest.approx(1e4 * per_token / 1e12)


def test_streaming_equals_the_parallel_forward():
  assert streams(FAMILY)
  model = create_model(FAMILY, "d128", seed=3, layers=2)
  moves = jax.random.randint(jax.random.PRNGKey(0), (2, 9), 0, 20480, jnp.int32)
  whole = np.asarray(model(moves))
  state = model.init_state(2)
  for t in range(moves.shape[1]):
    state, logits = model.step(state, moves[:, t])
    np.testing.assert_allclose(np.asarray(logits), whole[:, t], rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_trains_evaluates_and_tracks(small_dataset, tmp_path):
  config = cwm.get_config(f"family={FAMILY},size=d128,smoke=True")
  config.data.train = str(small_dataset)
  config.data.bucket_lengths = (128,)
  config.train.steps = config.train.checkpoint_every = config.train.eval_every = 4
  summary = train.train_and_evaluate(config, tmp_path / "wd")
  assert summary["family"] == FAMILY and summary["steps"] == 4
  assert np.isfinite(summary["validation"]["loss"])

  restored = workdir.restore(tmp_path / "wd", which="latest")
  results = evaluate.evaluate(
    tmp_path / "wd", {"real": (str(small_dataset), "test")}, max_games=8, boards=1,
    restored=restored, verbose=False,
  )  # fmt: skip
  assert results["real"]["family"] == FAMILY and results["real"]["dataset"]["games"] == 8
  assert (tmp_path / "wd" / "eval" / "real.json").exists()

  steps = track.track(tmp_path / "wd", "e2e4 e7e5 g1f3", restored=restored)
  assert [s["move"] for s in steps] == [None, "e2e4", "e7e5", "g1f3"]
  assert all(s["pred"].shape == (75,) for s in steps)
