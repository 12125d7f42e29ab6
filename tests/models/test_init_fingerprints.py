"""Every family builds the same initial model and forward pass as before the backbone + head split.

tests/data/init_fingerprints.npz was made by tests/data/make_init_fingerprints.py with the models
as they were before the split (one `Model` per family building its own head), seed 0, d128, two
layers. Per parameter it holds (sum, sum of squares, size, shape); the split renamed paths
(`blocks.0...` -> `backbone.blocks.0...`, the Transformer's `attn` -> `mixer`, ...) and
`nnx.to_flat_state` orders by path, so rows are compared as multisets: both sides sorted by
(shape, size, sum, sum of squares). Equal multisets mean every initial tensor is drawn from the same
rng key with the same init (a shifted draw order changes the sums). Sums to rtol 1e-6, relative to
max(|sum|, sqrt(size * sum of squares)) so a sum that cancels to near zero is not held to 1e-6 of
itself: the file was made without tests/conftest.py's XLA flag (optimisation level 0), under which
the transcendental inits (log, exp, expm1 of the dt and A_log draws) can differ in the last bit.
The values were also checked bit for bit against the pre-split code when the split was made.

Logits (eval mode, matmul precision "highest") to rtol 1e-5, atol 1e-5 * max |logit|: the same
float32 program should give identical bits, and the tolerance allows only for XLA reassociating a
reduction differently after a change of code structure.
"""

import importlib.util

import jax
import numpy as np
import pytest
from conftest import REPO
from flax import nnx

_spec = importlib.util.spec_from_file_location(
  "make_init_fingerprints", REPO / "tests" / "data" / "make_init_fingerprints.py"
)
fingerprints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fingerprints)
FINGERPRINTS = np.load(REPO / "tests" / "data" / "init_fingerprints.npz")


@nnx.jit
def _forward(model, moves):
  """The eval-mode logits, jitted as training and evaluation run the models (one compiled program
  instead of a compilation per eager primitive)."""
  return model(moves, train=False)


def _sorted_rows(rows: np.ndarray) -> np.ndarray:
  # Sort key, most significant first: shape (columns 3..), size (2), sum (0), sum of squares (1).
  keys = [rows[:, 1], rows[:, 0], rows[:, 2]] + [
    rows[:, c] for c in range(rows.shape[1] - 1, 2, -1)
  ]
  return rows[np.lexsort(keys)]


@pytest.mark.parametrize("family", sorted(fingerprints.CASES))
def test_initial_parameters_and_logits_are_unchanged(family):
  from chessjax.models import create_model

  np.testing.assert_array_equal(FINGERPRINTS["moves"], fingerprints.MOVES)
  model = create_model(family, "d128", seed=0, **fingerprints.CASES[family])
  got = _sorted_rows(fingerprints.param_rows(model))
  want = _sorted_rows(FINGERPRINTS[family + "/params"])
  assert got.shape == want.shape, "number of parameter tensors changed"
  np.testing.assert_array_equal(got[:, 2:], want[:, 2:])  # sizes and shapes
  # |sum| <= sqrt(size * sum of squares): the scale of a sum that cancels to near zero.
  scale = np.sqrt(want[:, 2] * want[:, 1])[:, None]
  assert np.all(np.abs(got[:, :2] - want[:, :2]) <= 1e-6 * np.maximum(np.abs(want[:, :2]), scale))

  with jax.default_matmul_precision("highest"):
    logits = np.asarray(_forward(model, fingerprints.MOVES))
  assert logits.dtype == np.float32
  want_logits = FINGERPRINTS[family + "/logits"]
  scale = float(np.abs(want_logits).max())
  np.testing.assert_allclose(
    logits[..., :: fingerprints.LOGIT_STRIDE], want_logits, rtol=1e-5, atol=1e-5 * scale
  )
  sums = fingerprints.logit_sums(logits)
  np.testing.assert_allclose(sums, FINGERPRINTS[family + "/logit_sums"], rtol=1e-5, atol=1e-3)
