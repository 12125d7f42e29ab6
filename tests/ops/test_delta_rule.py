"""Chunked (WY/UT) gated delta rule vs the sequential scan: values and gradients, f64 and f32.

Tolerances are relative to the largest magnitude of the reference array (an elementwise rtol is
meaningless for entries that are zero up to rounding).
"""

import functools

import jax
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest

from chessjax.ops import delta_rule
from chessjax.ops.impl import RECURRENCES

H, K, V = 2, 8, 6


def _inputs(seed, t, dtype, *, b=2, beta_range=(0.0, 2.0), g_range=(-3.0, 0.0)):
  """Random (q, k, v, g, beta, initial state) drawn with numpy (no per-op compiles)."""
  rng = np.random.default_rng(seed)
  q = rng.standard_normal((b, t, H, K))
  k = rng.standard_normal((b, t, H, K))
  k /= np.linalg.norm(k, axis=-1, keepdims=True)  # the models L2-normalise keys
  v = rng.standard_normal((b, t, H, V))
  g = rng.uniform(*g_range, (b, t, H))
  beta = rng.uniform(*beta_range, (b, t, H))
  s0 = rng.standard_normal((b, H, V, K))
  return tuple(jnp.asarray(x, dtype) for x in (q, k, v, g, beta, s0))


@functools.partial(jax.jit, static_argnames=("impl", "chunk"))
def _value_and_grads(args, t, impl, chunk):
  """Outputs, final state and the vjp of a fixed cotangent w.r.t. all six inputs, in one jit.

  The cotangent of the outputs depends on the step, not on the sequence's length, and is zero from
  step `t` (traced) on: a sequence padded with identity steps gets the same gradients up to `t`.
  """

  def f(q, k, v, g, beta, s0):
    # The sequential form ignores the chunk size; callers pass 0 so its compile is shared.
    return delta_rule.gated_delta_rule(
      q, k, v, g, beta, initial_state=s0, impl=impl, chunk_size=max(chunk, 1)
    )

  (o, s), vjp = jax.vjp(f, *args)
  # A cotangent that weights every output and state entry differently.
  b, steps, h, vd = o.shape
  step = jnp.arange(steps, dtype=o.dtype)[None, :, None, None]
  co = jnp.cos(0.37 * step + jnp.arange(b * h * vd, dtype=o.dtype).reshape(b, 1, h, vd))
  co = jnp.where(step < t, co, 0)
  cs = jnp.sin(jnp.arange(s.size, dtype=s.dtype)).reshape(s.shape)
  return (o, s), vjp((co, cs))


def _reference(args):
  """The sequential form's outputs, final state and gradients, computed on the sequence padded
  with identity steps (q = k = v = 0, g = beta = 0: S_t = S_{t-1} exactly) to 65 steps or more, so
  that one compiled program serves every shorter length."""
  t = args[0].shape[1]
  padded = max(t, 65)
  widths = lambda x: [(0, 0), (0, padded - t)] + [(0, 0)] * (x.ndim - 2)
  seq = tuple(jnp.asarray(np.pad(np.asarray(x), widths(x)), x.dtype) for x in args[:5])
  (o, s), grads = _value_and_grads((*seq, args[5]), t, impl="sequential", chunk=0)
  # Sliced in numpy: an eager slice would compile a program per length.
  grads = [np.asarray(x) for x in grads]
  return (np.asarray(o)[:, :t], s), tuple(x[:, :t] for x in grads[:5]) + tuple(grads[5:])


def _assert_close(actual, expected, rtol, what):
  actual, expected = np.asarray(actual), np.asarray(expected)
  assert np.all(np.isfinite(actual)), f"{what}: non-finite values"
  scale = max(float(np.max(np.abs(expected))), 1e-30)
  np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


def _compare(args, chunk, rtol):
  (o_c, s_c), g_c = _value_and_grads(args, args[0].shape[1], impl="chunked", chunk=chunk)
  (o_s, s_s), g_s = _reference(args)
  _assert_close(o_c, o_s, rtol, "outputs")
  _assert_close(s_c, s_s, rtol, "final state")
  for name, a, e in zip(("q", "k", "v", "g", "beta", "initial_state"), g_c, g_s, strict=True):
    _assert_close(a, e, rtol, f"grad {name}")


# Lengths 1, 2, C-1, C, C+1 for C = 16, 32, 64, and several chunks (3C+5) for C = 16 and 64. Below
# one chunk the chunk is clamped to T, so T = 1 and 2 build the same program for every C (a
# persistent-cache hit after the first).
CASES = [(c, t) for c in (16, 32, 64) for t in (1, 2, c - 1, c, c + 1)] + [(16, 53), (64, 197)]


@pytest.mark.parametrize("chunk,t", CASES)
def test_chunked_matches_sequential_float64(chunk, t):
  with jax.enable_x64(True):
    args = _inputs(t, t, jnp.float64)
    assert args[0].dtype == jnp.float64
    _compare(args, chunk, 1e-10)


@pytest.mark.parametrize("chunk,t", CASES)
def test_chunked_matches_sequential_float32(chunk, t):
  with jax.default_matmul_precision("highest"):
    _compare(_inputs(t, t, jnp.float32), chunk, 1e-4)


@pytest.mark.parametrize(
  "beta_range,g_range",
  [((0.0, 1e-6), (-30.0, 0.0)), ((2.0 - 1e-6, 2.0), (-1e-3, 0.0)), ((1.999, 2.0), (-30.0, -29.0))],
  ids=["beta~0,g>=-30", "beta~2,g~0", "beta~2,g~-30"],
)
def test_extreme_gates(beta_range, g_range):
  """Gates at the edges: float64 agreement, and finite float32 gradients of both forms.

  Log-decays of -30 make G_i - G_j overflow float32's exp in the unused triangle within two steps,
  which is what turns `where(mask, exp(.), 0)` into NaN gradients.
  """
  t, chunk = 53, 16  # shapes shared with the tests above, so the compiles are reused
  with jax.enable_x64(True):
    args = _inputs(7, t, jnp.float64, beta_range=beta_range, g_range=g_range)
    _compare(args, chunk, 1e-10)
  args32 = _inputs(7, t, jnp.float32, beta_range=beta_range, g_range=g_range)
  with jax.default_matmul_precision("highest"):
    (o_c, s_c), g_c = _value_and_grads(args32, t, impl="chunked", chunk=chunk)
    (o_s, _), g_s = _reference(args32)
  for x in (o_c, s_c, *g_c, *g_s):
    assert np.all(np.isfinite(np.asarray(x)))
  _assert_close(o_c, o_s, 1e-4, "float32 outputs")
  for a, e in zip(g_c, g_s, strict=True):
    _assert_close(a, e, 1e-3, "float32 grads")


@pytest.mark.parametrize("c", [1, 5, 17, 48, 64])
def test_unit_lower_inverse(c):
  """Blocked forward-substitution UT inverse and its custom VJP vs numpy and finite differences."""
  with jax.enable_x64(True):
    rng = np.random.default_rng(c)
    # A as the chunked delta rule builds it: beta_i e^(G_i - G_j) k_i.k_j below the diagonal.
    k = rng.standard_normal((3, c, K))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    g_cum = np.cumsum(rng.uniform(-1.0, 0.0, (3, c)), axis=-1)
    beta = rng.uniform(0.0, 2.0, (3, c))
    decay = np.exp(np.minimum(g_cum[:, :, None] - g_cum[:, None, :], 0.0))
    a = np.tril(beta[:, :, None] * decay * (k @ k.transpose(0, 2, 1)), -1)
    noise = np.triu(rng.standard_normal((3, c, c)))  # must be ignored (diagonal and above)
    inverse = jax.jit(delta_rule.unit_lower_inverse)
    t = inverse(jnp.asarray(a + noise))
    _assert_close(t, np.linalg.inv(np.eye(c) + a), 1e-10, "inverse")
    jax.test_util.check_grads(inverse, (jnp.asarray(a[:1]),), order=1, modes=["rev"])


def test_no_initial_state_is_zero_state():
  q, k, v, g, beta, s0 = _inputs(3, 21, jnp.float32)
  run = jax.jit(delta_rule.gated_delta_rule, static_argnames=("impl", "chunk_size"))
  for impl in RECURRENCES["delta_rule"]:
    o1, s1 = run(q, k, v, g, beta, impl=impl, chunk_size=8)
    o2, s2 = run(q, k, v, g, beta, initial_state=jnp.zeros_like(s0), impl=impl, chunk_size=8)
    np.testing.assert_array_equal(o1, o2)
    np.testing.assert_array_equal(s1, s2)
    assert s1.dtype == jnp.float32


def test_step_matches_definition():
  """One step against the literal S_t = a S (I - b k k^T) + b v k^T, o = S q / sqrt(K)."""
  with jax.enable_x64(True):
    q, k, v, g, beta, s0 = (x[:, 0] if x.ndim > 3 else x for x in _inputs(5, 1, jnp.float64))
    g, beta = g[:, 0], beta[:, 0]
    eye = jnp.eye(K)
    expected_s = (
      jnp.exp(g)[..., None, None]
      * s0
      @ (eye - beta[..., None, None] * k[..., :, None] * k[..., None, :])
      + beta[..., None, None] * v[..., :, None] * k[..., None, :]
    )
    expected_o = jnp.einsum("bhvk,bhk->bhv", expected_s, q) / np.sqrt(K)
    o, s = delta_rule.gated_delta_rule_step(s0, q, k, v, g, beta)
    np.testing.assert_allclose(s, expected_s, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(o, expected_o, rtol=1e-12, atol=1e-12)


def test_streaming_steps_match_chunked():
  q, k, v, g, beta, s0 = _inputs(11, 29, jnp.float32)
  step = jax.jit(delta_rule.gated_delta_rule_step)
  with jax.default_matmul_precision("highest"):
    o_ref, s_ref = jax.jit(delta_rule.gated_delta_rule, static_argnames="chunk_size")(
      q, k, v, g, beta, initial_state=s0, chunk_size=8
    )
    s, outs = s0, []
    for t in range(q.shape[1]):
      o, s = step(s, q[:, t], k[:, t], v[:, t], g[:, t], beta[:, t])
      outs.append(o)
  _assert_close(jnp.stack(outs, axis=1), o_ref, 1e-5, "streamed outputs")
  _assert_close(s, s_ref, 1e-5, "streamed state")


def test_bfloat16_inputs_keep_float32_state():
  q, k, v, g, beta, _ = (x.astype(jnp.bfloat16) for x in _inputs(2, 19, jnp.float32))
  o, s = delta_rule.gated_delta_rule(q, k, v, g, beta, chunk_size=8)
  assert o.dtype == jnp.bfloat16 and s.dtype == jnp.float32
  assert np.all(np.isfinite(np.asarray(o, np.float32)))


def test_bad_arguments_raise():
  q, k, v, g, beta, s0 = _inputs(0, 4, jnp.float32)
  with pytest.raises(ValueError, match="impl"):
    delta_rule.gated_delta_rule(q, k, v, g, beta, impl="associative")
  with pytest.raises(ValueError, match="initial_state"):
    delta_rule.gated_delta_rule(q, k, v, g, beta, initial_state=s0[:, :, :, :-1])
  with pytest.raises(ValueError, match="must match"):
    delta_rule.gated_delta_rule(q, k, v[:, :-1], g, beta)
  with pytest.raises(ValueError, match="chunk_size"):
    delta_rule.gated_delta_rule(q, k, v, g, beta, chunk_size=0)


@pytest.mark.slow
def test_long_sequence_600():
  with jax.enable_x64(True):
    _compare(_inputs(600, 600, jnp.float64, b=1), 64, 1e-10)
  with jax.default_matmul_precision("highest"):
    _compare(_inputs(600, 600, jnp.float32, b=1), 64, 1e-4)


@pytest.mark.parametrize("t", (1, 2, 15))
def test_at_most_one_chunk_runs_unpadded(t):
  """A sequence of at most one chunk builds the program of a chunk of its own length: never the
  padded single chunk that XLA's GPU compiler failed on (C = 16, T = 1 and 2; docs/performance.md).
  """
  args = _inputs(t, t, jnp.float32)

  def program(chunk):
    f = functools.partial(delta_rule.gated_delta_rule, chunk_size=chunk)
    return str(jax.make_jaxpr(jax.vjp, static_argnums=0)(f, *args[:5]))

  assert program(16) == program(t)
