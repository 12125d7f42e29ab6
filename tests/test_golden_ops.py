"""chessjax's recurrences against the released pure-PyTorch references (tests/data/golden_ops.npz,
made by tests/data/make_golden_ops.py): FLA's naive gated delta rule and mamba_ssm's minimal SSD."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO

from chessjax.ops import delta_rule, ssd

GOLDEN = np.load(REPO / "tests" / "data" / "golden_ops.npz")


@pytest.mark.parametrize("impl,chunk", [("sequential", 1), ("chunked", 8), ("chunked", 64)])
def test_gated_delta_rule_equals_fla_naive_recurrent(impl, chunk):
  g = {key.split("/", 1)[1]: GOLDEN[key] for key in GOLDEN.files if key.startswith("gdn/")}
  assert g["beta"].max() > 1.5 and g["g"].min() < -4.0  # negative eigenvalues, strong decays
  with jax.default_matmul_precision("highest"):
    o, final = delta_rule.gated_delta_rule(
      *(jnp.asarray(g[x]) for x in ("q", "k", "v", "g", "beta")),
      initial_state=jnp.asarray(g["s0_BHKV"]).swapaxes(-1, -2),  # ours is [B, H, V, K]
      impl=impl,
      chunk_size=chunk,
    )
  scale = np.abs(g["o"]).max()
  assert scale > 0.5
  np.testing.assert_allclose(np.asarray(o), g["o"], rtol=1e-5, atol=1e-5 * scale)
  np.testing.assert_allclose(
    np.asarray(final).swapaxes(-1, -2), g["final_BHKV"], rtol=1e-5, atol=1e-5 * scale
  )


@pytest.mark.parametrize("impl,chunk", [("sequential", 1), ("chunked", 8), ("chunked", 7)])
def test_ssd_equals_mamba_ssd_minimal_float64(impl, chunk):
  s = {key.split("/", 1)[1]: GOLDEN[key] for key in GOLDEN.files if key.startswith("ssd/")}
  with jax.enable_x64():
    y, final = ssd.ssd(
      *(jnp.asarray(s[x]) for x in ("x", "dt", "A", "B", "C")),
      initial_state=jnp.asarray(s["s0_BHPN"]),
      impl=impl,
      chunk_size=chunk,
    )
    assert y.dtype == jnp.float64
  assert np.abs(s["y"]).max() > 1.0
  np.testing.assert_allclose(np.asarray(y), s["y"], rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(np.asarray(final), s["final_BHPN"], rtol=1e-10, atol=1e-12)
