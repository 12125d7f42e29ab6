"""chessjax's recurrences against the released pure-PyTorch references (tests/data/golden_ops.npz,
made by tests/data/make_golden_ops.py): FLA's naive gated delta rule and mamba_ssm's minimal SSD."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO

from chessjax.ops import delta_rule, ssd

GOLDEN = np.load(REPO / "tests" / "data" / "golden_ops.npz")

# Jitted, as the models run them (and as the other tests of chessjax.ops do): one compiled program
# per case instead of a compilation per eager primitive of the chunked forms.
_gated_delta_rule = jax.jit(delta_rule.gated_delta_rule, static_argnames=("impl", "chunk_size"))
_ssd = jax.jit(ssd.ssd, static_argnames=("impl", "chunk_size"))


@pytest.mark.parametrize("impl,chunk", [("sequential", 1), ("chunked", 8), ("chunked", 64)])
def test_gated_delta_rule_equals_fla_naive_recurrent(impl, chunk):
  g = {key.split("/", 1)[1]: GOLDEN[key] for key in GOLDEN.files if key.startswith("gdn/")}
  assert g["beta"].max() > 1.5 and g["g"].min() < -4.0  # negative eigenvalues, strong decays
  with jax.default_matmul_precision("highest"):
    o, final = _gated_delta_rule(
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
    y, final = _ssd(
      *(jnp.asarray(s[x]) for x in ("x", "dt", "A", "B", "C")),
      initial_state=jnp.asarray(s["s0_BHPN"]),
      impl=impl,
      chunk_size=chunk,
    )
    assert y.dtype == jnp.float64
  assert np.abs(s["y"]).max() > 1.0
  np.testing.assert_allclose(np.asarray(y), s["y"], rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(np.asarray(final), s["final_BHPN"], rtol=1e-10, atol=1e-12)


def trapezoid_case(prefix: str):
  """The stored Mamba-3 case and its dt, A, lambda [B, T, H] (the reference keeps [B, H, T])."""
  m = {key.split("/", 1)[1]: GOLDEN[key] for key in GOLDEN.files if key.startswith(prefix + "/")}
  dt = jnp.asarray(m["dt"]).transpose(0, 2, 1)
  a = jnp.asarray(m["adt"] / m["dt"]).transpose(0, 2, 1)
  lam = jax.nn.sigmoid(jnp.asarray(m["trap"])).transpose(0, 2, 1)
  return m, dt, a, lam


@partial(jax.jit, static_argnames=("impl", "chunk"))
def _siso(angles, k, q, v, dt, a, lam, *, impl, chunk):
  theta = ssd.rotary_theta(angles, dt, impl=impl)
  k, q = (ssd.rotate_pairs(x, theta)[:, :, None] for x in (k, q))
  y, state = ssd.trapezoid_ssd(v[:, :, None], dt, a, lam, k, q, impl=impl, chunk_size=chunk)
  return theta, y, state


@pytest.mark.parametrize("impl,chunk", [("sequential", 1), ("chunked", 8), ("chunked", 64)])
def test_mamba3_trapezoid_and_rotation_equal_mamba_ssm_reference(impl, chunk):
  """rotary_theta + rotate_pairs + trapezoid_ssd against mamba3_siso_fwd_ref (empty state)."""
  m, dt, a, lam = trapezoid_case("mamba3")
  with jax.default_matmul_precision("highest"):
    theta, y, state = _siso(
      *(jnp.asarray(m[x]) for x in ("angles", "k", "q", "v")), dt, a, lam, impl=impl, chunk=chunk
    )
  scale = np.abs(m["y"]).max()
  assert scale > 1.0 and np.ptp(m["trap"]) > 4.0  # lambda spans (0.05, 0.95)
  np.testing.assert_allclose(np.asarray(y[:, :, 0]), m["y"], rtol=1e-5, atol=2e-6 * scale)
  np.testing.assert_allclose(np.asarray(state.ssm), m["final_ssm_BHPN"], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(theta[:, -1]), m["final_theta_BHS"], atol=1e-5)
  np.testing.assert_allclose(np.asarray(state.k_prev[:, 0]), m["final_k_BHN"], atol=1e-5)


@partial(jax.jit, static_argnames=("impl", "chunk"))
def _mimo(angles, k, q, v, mimo_v, mimo_o, dt, a, lam, *, impl, chunk):
  theta = ssd.rotary_theta(angles, dt, impl=impl)[:, :, None]  # over ranks
  k, q = (ssd.rotate_pairs(x, theta) for x in (k, q))
  x = jnp.einsum("bthp,hrp->btrhp", v, mimo_v)
  y, state = ssd.trapezoid_ssd(x, dt, a, lam, k, q, impl=impl, chunk_size=chunk)
  return jnp.einsum("btrhp,hrp->bthp", y, mimo_o), state


@pytest.mark.parametrize("impl,chunk", [("sequential", 1), ("chunked", 8), ("chunked", 5)])
def test_mamba3_mimo_equals_mamba_ssm_step_reference(impl, chunk):
  """Rank-4 trapezoid (values up-projected per rank, outputs down-projected as the module does)
  against mamba3_MIMO_step_ref (empty state)."""
  m, dt, a, lam = trapezoid_case("mimo")
  with jax.default_matmul_precision("highest"):
    out, state = _mimo(
      *(jnp.asarray(m[x]) for x in ("angles", "k", "q", "v", "mimo_v", "mimo_o")),
      dt,
      a,
      lam,
      impl=impl,
      chunk=chunk,
    )
  scale = np.abs(m["y"]).max()
  assert scale > 1.0 and m["q"].shape[2] == 4
  np.testing.assert_allclose(np.asarray(out), m["y"], rtol=1e-5, atol=1e-6 * scale)
  np.testing.assert_allclose(np.asarray(state.ssm), m["final_ssm_BHPN"], rtol=1e-5, atol=2e-5)
