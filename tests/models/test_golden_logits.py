"""chessjax's models against logits of the released PyTorch models (tests/data/golden_logits.npz,
made by tests/data/make_golden_logits.py with the same parameter values; `seed_name` maps today's
parameter paths to the names that seeded them)."""

import importlib.util

import jax
import numpy as np
import pytest
from conftest import REPO
from flax import nnx

from chessjax.models import count_params, create_model

_spec = importlib.util.spec_from_file_location(
  "make_golden_logits", REPO / "tests" / "data" / "make_golden_logits.py"
)
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)
GOLDEN = np.load(REPO / "tests" / "data" / "golden_logits.npz")

CELLS = [("transformer", {})] + [
  (name, {"mixer_impl": impl, "chunk_size": 8})
  for name in ("slice", "slice_diag")
  for impl in ("sequential", "chunked", "associative")
]


def golden_model(name: str, extra: dict):
  family, overrides, _, _ = golden.CASES[name]
  model = create_model(family, "d128", seed=0, **overrides, **extra)
  state = nnx.state(model, nnx.Param)
  flat = nnx.to_flat_state(state)
  for path, var in flat:
    name = golden.seed_name(".".join(map(str, path)))
    var.set_value(golden.param_value(name, tuple(var.get_value().shape)))
  nnx.update(model, nnx.from_flat_state(flat))
  return model


@nnx.jit
def _forward(model, moves):
  """The logits, jitted as training and evaluation run the models (one compiled program instead of
  a compilation per eager primitive)."""
  return model(moves)


@pytest.mark.parametrize("name,extra", CELLS)
def test_logits_equal_the_released_models(name, extra):
  np.testing.assert_array_equal(GOLDEN["moves"], golden.MOVES)
  model = golden_model(name, extra)
  assert count_params(model) == int(GOLDEN[name + "/params"])
  with jax.default_matmul_precision("highest"):
    got = np.asarray(_forward(model, GOLDEN["moves"]))
  want = GOLDEN[name]
  assert got.shape == want.shape == (*golden.MOVES.shape, 1878)
  assert np.abs(want).max() > 1.0  # the logits are not trivially small
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5 * np.abs(want).max())
