"""chessjax.ops.ssd: chunked SSD / trapezoid forms vs their sequential references and the equations.

Values and gradients with respect to every input, in float64 (rtol 1e-10) and in float32 under
`jax.default_matmul_precision("highest")` (rtol 1e-4), over lengths around the chunk size.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from chessjax.ops import ssd

CHUNK = 8
# Lengths 1, 2, chunk - 1, chunk, chunk + 1 and 3 chunk + 5.
LENGTHS = (1, 2, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5)


_ssd = jax.jit(ssd.ssd, static_argnames=("impl", "chunk_size"))
_trapezoid = jax.jit(ssd.trapezoid_ssd, static_argnames=("impl", "chunk_size"))


def _close(actual, expected, rtol):
  """Elementwise rtol, with an absolute floor of rtol * max|expected| for values near zero."""
  for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
    a, e = np.asarray(a, np.float64), np.asarray(e, np.float64)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(e))
    np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol * max(np.abs(e).max(), 1e-30))


def _ssd_inputs(rng, b, t, h, p, n, g, dtype, *, varying_a=False, log_decay_min=-3.0):
  dt = rng.uniform(0.05, 1.0, (b, t, h))
  a_shape = (b, t, h) if varying_a else (h,)
  # A chosen so that dt * A spans [log_decay_min, 0).
  A = -rng.uniform(0.01, -log_decay_min, a_shape)
  return dict(
    x=jnp.asarray(rng.normal(size=(b, t, h, p)), dtype),
    dt=jnp.asarray(dt, dtype),
    A=jnp.asarray(A, dtype),
    B=jnp.asarray(rng.normal(size=(b, t, g, n)), dtype),
    C=jnp.asarray(rng.normal(size=(b, t, g, n)), dtype),
    initial_state=jnp.asarray(rng.normal(size=(b, h, p, n)), dtype),
  )


def _trap_inputs(rng, b, t, r, h, p, n, g, dtype, *, lam=None, log_decay_min=-3.0):
  lam_v = rng.uniform(0.0, 1.0, (b, t, h)) if lam is None else np.full((b, t, h), lam)
  state = ssd.TrapezoidState(
    jnp.asarray(rng.normal(size=(b, h, p, n)), dtype),
    jnp.asarray(rng.normal(size=(b, r, g, n)), dtype),
    jnp.asarray(rng.normal(size=(b, r, h, p)), dtype),
  )
  return dict(
    x=jnp.asarray(rng.normal(size=(b, t, r, h, p)), dtype),
    dt=jnp.asarray(rng.uniform(0.05, 1.0, (b, t, h)), dtype),
    A=jnp.asarray(-rng.uniform(0.01, -log_decay_min, (b, t, h)), dtype),
    lam=jnp.asarray(lam_v, dtype),
    B=jnp.asarray(rng.normal(size=(b, t, r, g, n)), dtype),
    C=jnp.asarray(rng.normal(size=(b, t, r, g, n)), dtype),
    initial_state=state,
  )


@functools.partial(jax.jit, static_argnames=("fn", "impl", "chunk"))
def _outputs_and_grads(inputs, cot, *, fn, impl, chunk):
  """fn(**inputs) and d<cot, fn(**inputs)>/d(every input); jitted once per shape and setting."""

  def loss(inp):
    out = fn(**inp, impl=impl, chunk_size=chunk)
    dot = sum(
      jnp.sum(u * c) for u, c in zip(jax.tree.leaves(out), jax.tree.leaves(cot), strict=True)
    )
    return dot, out

  (_, out), grads = jax.value_and_grad(loss, has_aux=True)(inputs)
  return out, grads


def _compare(fn, inputs, chunk, rtol, seed=1):
  """Chunked vs sequential outputs and gradients (w.r.t. all inputs) agree to rtol."""
  shapes = jax.eval_shape(lambda i: fn(**i, impl="sequential", chunk_size=chunk), inputs)
  rng = np.random.default_rng(seed)
  cot = jax.tree.map(lambda a: jnp.asarray(rng.normal(size=a.shape), a.dtype), shapes)
  fast = _outputs_and_grads(inputs, cot, fn=fn, impl="chunked", chunk=chunk)
  seq = _outputs_and_grads(inputs, cot, fn=fn, impl="sequential", chunk=chunk)
  _close(fast, seq, rtol)
  return fast


# ------------------------------------------------------------------------------------------------
# Sequential references against the equations (plain numpy loops)


def _numpy_ssd(x, dt, A, B, C, s0):
  b, t, h, p = x.shape
  e = h // B.shape[2]
  A = np.broadcast_to(A, dt.shape)
  s, ys = s0.copy(), []
  for i in range(t):
    Bh, Ch = np.repeat(B[:, i], e, axis=1), np.repeat(C[:, i], e, axis=1)
    s = np.exp(dt[:, i] * A[:, i])[..., None, None] * s + np.einsum(
      "bh,bhp,bhn->bhpn", dt[:, i], x[:, i], Bh
    )
    ys.append(np.einsum("bhpn,bhn->bhp", s, Ch))
  return np.stack(ys, 1), s


def _numpy_trapezoid(x, dt, A, lam, B, C, state):
  t, h = x.shape[1], x.shape[3]
  e = h // B.shape[3]
  s, k_prev, v_prev = (np.asarray(a) for a in state)
  ys = []
  for i in range(t):
    alpha = np.exp(dt[:, i] * A[:, i])
    k = np.repeat(B[:, i], e, axis=2)
    prev = np.einsum("brhp,brhn->bhpn", v_prev, np.repeat(k_prev, e, axis=2))
    s = (
      alpha[..., None, None] * s
      + ((1 - lam[:, i]) * dt[:, i] * alpha)[..., None, None] * prev
      + (lam[:, i] * dt[:, i])[..., None, None] * np.einsum("brhp,brhn->bhpn", x[:, i], k)
    )
    ys.append(np.einsum("bhpn,brhn->brhp", s, np.repeat(C[:, i], e, axis=2)))
    k_prev, v_prev = B[:, i], x[:, i]
  return np.stack(ys, 1), s


def test_sequential_references_follow_the_equations():
  rng = np.random.default_rng(0)
  with jax.enable_x64(True):
    inp = _ssd_inputs(rng, 2, 11, 4, 3, 5, 2, jnp.float64, varying_a=True)
    y, s = _ssd(**inp, impl="sequential")
    y_np, s_np = _numpy_ssd(
      *(np.asarray(inp[k]) for k in ("x", "dt", "A", "B", "C")), np.asarray(inp["initial_state"])
    )
    _close((y, s), (y_np, s_np), 1e-12)

    inp = _trap_inputs(rng, 2, 11, 3, 4, 3, 5, 2, jnp.float64)
    y, st = _trapezoid(**inp, impl="sequential")
    arrays = [np.asarray(inp[k]) for k in ("x", "dt", "A", "lam", "B", "C")]
    y_np, s_np = _numpy_trapezoid(*arrays, inp["initial_state"])
    _close(
      (y, st.ssm, st.k_prev, st.v_prev), (y_np, s_np, arrays[4][:, -1], arrays[0][:, -1]), 1e-12
    )


def test_trapezoid_without_state_starts_from_zero_previous_token():
  # lam = 1 everywhere: the previous-token term vanishes and the rule is Mamba-2's SSD.
  rng = np.random.default_rng(1)
  with jax.enable_x64(True):
    inp = _trap_inputs(rng, 2, 9, 1, 4, 3, 5, 1, jnp.float64, lam=1.0)
    del inp["initial_state"]
    y, st = _trapezoid(**inp, impl="sequential")
    y2, s2 = _ssd(
      inp["x"][:, :, 0],
      inp["dt"],
      inp["A"],
      inp["B"][:, :, 0],
      inp["C"][:, :, 0],
      impl="sequential",
    )
    _close((y[:, :, 0], st.ssm), (y2, s2), 1e-12)
    # With lam = 0 the first token sees only its own (zero) previous-token term: y_1 = 0.
    inp["lam"] = jnp.zeros_like(inp["lam"])
    y, _ = _trapezoid(**inp, impl="chunked", chunk_size=4)
    assert np.all(np.asarray(y[:, 0]) == 0.0)


# ------------------------------------------------------------------------------------------------
# Chunked vs sequential, values and gradients


@pytest.mark.parametrize("t", LENGTHS)
def test_ssd_chunked_matches_sequential_float64(t):
  rng = np.random.default_rng(t)
  with jax.enable_x64(True):
    inp = _ssd_inputs(rng, 2, t, 4, 3, 5, 1, jnp.float64)
    _compare(ssd.ssd, inp, CHUNK, 1e-10)


@pytest.mark.parametrize("t", LENGTHS)
def test_trapezoid_chunked_matches_sequential_float64(t):
  rng = np.random.default_rng(100 + t)
  with jax.enable_x64(True):
    inp = _trap_inputs(rng, 2, t, 2, 4, 3, 6, 4, jnp.float64)
    _compare(ssd.trapezoid_ssd, inp, CHUNK, 1e-10)


@pytest.mark.parametrize(
  "chunk, t, rank, groups, varying_a",
  [
    pytest.param(1, 5, 1, 1, False, marks=pytest.mark.slow),
    (4, 13, 1, 2, True),
    (16, 37, 4, 1, False),
    pytest.param(64, 70, 3, 4, True, marks=pytest.mark.slow),
  ],
)
def test_chunk_sizes_ranks_and_groups_float64(chunk, t, rank, groups, varying_a):
  rng = np.random.default_rng(chunk)
  with jax.enable_x64(True):
    inp = _ssd_inputs(rng, 2, t, 4, 3, 5, groups, jnp.float64, varying_a=varying_a)
    _compare(ssd.ssd, inp, chunk, 1e-10)
    inp = _trap_inputs(rng, 2, t, rank, 4, 3, 6, groups, jnp.float64)
    _compare(ssd.trapezoid_ssd, inp, chunk, 1e-10)


def test_chunked_matches_sequential_float32():
  rng = np.random.default_rng(200)
  with jax.default_matmul_precision("highest"):
    inp = _ssd_inputs(rng, 2, 3 * CHUNK + 5, 4, 8, 16, 1, jnp.float32, varying_a=True)
    _compare(ssd.ssd, inp, CHUNK, 1e-4)
    inp = _trap_inputs(rng, 2, 3 * CHUNK + 5, 2, 4, 8, 16, 4, jnp.float32)
    _compare(ssd.trapezoid_ssd, inp, CHUNK, 1e-4)


@pytest.mark.parametrize("t", (1, 2, 15))
def test_at_most_one_chunk_runs_unpadded(t):
  """A sequence of at most one chunk builds the program of a chunk of its own length, not a padded
  chunk (the shape on which XLA's GPU compiler failed for the delta rule; docs/performance.md)."""
  rng = np.random.default_rng(t)
  for fn, inp in (
    (ssd.ssd, _ssd_inputs(rng, 2, t, 4, 3, 5, 1, jnp.float32)),
    (ssd.trapezoid_ssd, _trap_inputs(rng, 2, t, 2, 4, 3, 6, 4, jnp.float32)),
  ):

    def program(chunk, fn=fn, inp=inp):
      f = functools.partial(fn, chunk_size=chunk)
      return str(jax.make_jaxpr(lambda i: jax.vjp(lambda j: f(**j), i))(inp))

    assert program(16) == program(t)


@pytest.mark.slow
def test_long_sequence_float32():
  rng = np.random.default_rng(600)
  with jax.default_matmul_precision("highest"):
    inp = _ssd_inputs(rng, 2, 600, 4, 8, 16, 1, jnp.float32, varying_a=True)
    _compare(ssd.ssd, inp, 64, 1e-4)
    inp = _trap_inputs(rng, 2, 600, 4, 4, 8, 16, 4, jnp.float32)
    _compare(ssd.trapezoid_ssd, inp, 16, 1e-4)


# ------------------------------------------------------------------------------------------------
# Extremes


@pytest.mark.parametrize("lam", (1e-6, 1 - 1e-6))
def test_trapezoid_extreme_lambda_and_decay(lam):
  rng = np.random.default_rng(7)
  with jax.default_matmul_precision("highest"):
    # Log decays down to -30 per step (exp(-30 * chunk) underflows inside a chunk).
    inp = _trap_inputs(
      rng, 2, 3 * CHUNK + 5, 2, 4, 8, 16, 4, jnp.float32, lam=lam, log_decay_min=-30.0
    )
    inp["dt"] = jnp.ones_like(inp["dt"])
    out, grads = _compare(ssd.trapezoid_ssd, inp, CHUNK, 1e-4)
    assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads))


def test_ssd_extreme_decay_gradients_are_finite():
  rng = np.random.default_rng(8)
  with jax.default_matmul_precision("highest"):
    inp = _ssd_inputs(rng, 2, 3 * CHUNK + 5, 4, 8, 16, 1, jnp.float32, varying_a=True)
    inp["dt"] = jnp.ones_like(inp["dt"])
    inp["A"] = jnp.asarray(-rng.uniform(0.0, 30.0, inp["A"].shape), jnp.float32)
    out, grads = _compare(ssd.ssd, inp, CHUNK, 1e-4)
    assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads))


# ------------------------------------------------------------------------------------------------
# Rotation


def _theta_inputs(rng, b, t, h, s, scale, dt_max=1.0):
  angles = rng.normal(size=(b, t, s)) * scale
  dt = rng.uniform(0.0, dt_max, (b, t, h))
  return angles, dt, rng.uniform(0, 2 * math.pi, (b, h, s))


def test_rotary_theta_matches_running_sum_float64():
  rng = np.random.default_rng(9)
  with jax.enable_x64(True):
    angles, dt, theta0 = _theta_inputs(rng, 2, 13, 3, 4, 1.0)
    fast = ssd.rotary_theta(jnp.asarray(angles), jnp.asarray(dt), initial=jnp.asarray(theta0))
    seq = ssd.rotary_theta(
      jnp.asarray(angles), jnp.asarray(dt), initial=jnp.asarray(theta0), impl="sequential"
    )
    want = np.mod(
      theta0[:, None] + np.cumsum(math.pi * np.tanh(angles)[:, :, None] * dt[..., None], 1),
      2 * math.pi,
    )
    # Compare on the circle: values near 0 and 2 pi are the same angle.
    for got in (fast, seq):
      diff = np.angle(np.exp(1j * (np.asarray(got) - want)))
      assert np.abs(diff).max() < 1e-10
      assert np.all((np.asarray(got) >= 0) & (np.asarray(got) <= 2 * math.pi))


@pytest.mark.parametrize("t", (1, 2, pytest.param(600, marks=pytest.mark.slow)))
def test_rotary_theta_large_angles_float32(t):
  rng = np.random.default_rng(10)
  # tanh saturates (steps of nearly +-pi dt) and dt reaches 4: theta winds ~200 times in 600 steps.
  angles, dt, _ = _theta_inputs(rng, 2, t, 4, 32, 50.0, dt_max=4.0)
  exact = np.mod(np.cumsum(math.pi * np.tanh(angles)[:, :, None] * dt[..., None], 1), 2 * math.pi)
  angles, dt = jnp.asarray(angles, jnp.float32), jnp.asarray(dt, jnp.float32)

  def f(impl):
    def g(a, d):
      th = ssd.rotary_theta(a, d, impl=impl)
      return jnp.sum(jnp.sin(th)) + jnp.sum(jnp.cos(2 * th)), th

    (val, th), grads = jax.jit(jax.value_and_grad(g, argnums=(0, 1), has_aux=True))(angles, dt)
    return np.asarray(th), val, grads

  th_f, val_f, g_f = f("chunked")
  th_s, val_s, g_s = f("sequential")
  # Partial sums stay below 4 pi + one step, so float32 errors grow like ulp(step) sqrt(T).
  for th in (th_f, th_s):
    assert np.abs(np.angle(np.exp(1j * (th - exact)))).max() < 1e-4
  _close((val_f, g_f), (val_s, g_s), 1e-4)


def test_rotate_pairs_rotates_adjacent_pairs_of_the_first_dims():
  rng = np.random.default_rng(11)
  x = jnp.asarray(rng.normal(size=(3, 2, 16)), jnp.float32)
  theta = jnp.asarray(rng.uniform(0, 2 * math.pi, (3, 2, 4)), jnp.float32)
  y = np.asarray(ssd.rotate_pairs(x, theta))
  xn, th = np.asarray(x), np.asarray(theta)
  np.testing.assert_array_equal(y[..., 8:], xn[..., 8:])
  c, s = np.cos(th), np.sin(th)
  np.testing.assert_allclose(y[..., 0:8:2], xn[..., 0:8:2] * c - xn[..., 1:8:2] * s, atol=1e-6)
  np.testing.assert_allclose(y[..., 1:8:2], xn[..., 0:8:2] * s + xn[..., 1:8:2] * c, atol=1e-6)
  # Same rotation on q and k leaves q . k unchanged (the trapezoid's diagonal term relies on it).
  q = jnp.asarray(rng.normal(size=(3, 2, 16)), jnp.float32)
  np.testing.assert_allclose(
    np.sum(np.asarray(ssd.rotate_pairs(q, theta)) * y, -1),
    np.sum(np.asarray(q) * xn, -1),
    rtol=1e-5,
  )


def test_rotation_then_trapezoid_large_angles_float32():
  """The Mamba-3 pipeline (angles -> theta -> rotated keys -> trapezoid), fast vs sequential."""
  rng = np.random.default_rng(12)
  b, t, r, h, p, n, s = 2, 3 * CHUNK + 5, 2, 4, 8, 16, 4
  inp = _trap_inputs(rng, b, t, r, h, p, n, h, jnp.float32)
  inp["angles"] = jnp.asarray(rng.normal(size=(b, t, s)) * 30.0, jnp.float32)
  inp["dt"] = inp["dt"] * 4.0

  def fn(x, dt, A, lam, B, C, angles, initial_state, impl, chunk_size):
    theta = ssd.rotary_theta(angles, dt, impl=impl)[:, :, None]
    k, q = ssd.rotate_pairs(B, theta), ssd.rotate_pairs(C, theta)
    return ssd.trapezoid_ssd(
      x, dt, A, lam, k, q, initial_state=initial_state, impl=impl, chunk_size=chunk_size
    )

  with jax.default_matmul_precision("highest"):
    out, grads = _compare(fn, inp, CHUNK, 1e-4)
  assert all(np.all(np.isfinite(np.asarray(g))) for g in jax.tree.leaves(grads))


# ------------------------------------------------------------------------------------------------
# State passing and argument checks


def test_split_sequence_continues_from_final_state():
  """Two calls chained through the final TrapezoidState equal one call (keys, values, S)."""
  rng = np.random.default_rng(13)
  with jax.enable_x64(True):
    inp = _trap_inputs(rng, 2, 21, 2, 4, 3, 5, 4, jnp.float64)
    y, st = _trapezoid(**inp, chunk_size=4)
    seq = {k: v for k, v in inp.items() if k != "initial_state"}
    y1, st1 = _trapezoid(
      **{k: v[:, :9] for k, v in seq.items()}, initial_state=inp["initial_state"], chunk_size=4
    )
    y2, st2 = _trapezoid(**{k: v[:, 9:] for k, v in seq.items()}, initial_state=st1, chunk_size=4)
    _close((jnp.concatenate([y1, y2], 1), tuple(st2)), (y, tuple(st)), 1e-12)


def test_bad_arguments_raise():
  x = jnp.zeros((1, 3, 4, 2))
  with pytest.raises(ValueError, match="unknown impl"):
    ssd.ssd(
      x,
      jnp.ones((1, 3, 4)),
      -jnp.ones(4),
      jnp.zeros((1, 3, 1, 2)),
      jnp.zeros((1, 3, 1, 2)),
      impl="fast",
    )
  with pytest.raises(ValueError, match="multiple of the B/C groups"):
    ssd.ssd(x, jnp.ones((1, 3, 4)), -jnp.ones(4), jnp.zeros((1, 3, 3, 2)), jnp.zeros((1, 3, 3, 2)))
  with pytest.raises(ValueError, match="unknown impl"):
    ssd.rotary_theta(jnp.zeros((1, 3, 2)), jnp.ones((1, 3, 4)), impl="parallel")
