"""SLiCE's affine recurrence: the parallel forms against the sequential reference.

Values and gradients with respect to every input (A, c, y_0), in float64 (tight) and in float32
under highest matmul precision, for block-diagonal and diagonal transitions, lengths around the
chunk boundaries and several chunk sizes.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from chessjax.ops import slice_scan
from chessjax.ops.impl import RECURRENCES

B, G, BLOCK = 2, 3, 4
D = G * BLOCK


def _inputs(steps, *, diag, dtype, key=0, scale=0.2, shared_y0=True):
  # numpy draws: jax.random would compile a sampler for every shape and dtype (seconds per case).
  rng = np.random.default_rng(key)
  a_shape = (B, steps, D) if diag else (B, steps, G, BLOCK, BLOCK)
  # Entries of A ~ scale / sqrt(b) keep |I + A| near 1, like the model's init, so long sequences
  # stay well conditioned and relative tolerances mean something.
  a = scale / (1 if diag else BLOCK**0.5) * rng.standard_normal(a_shape)
  c = rng.standard_normal((B, steps, D))
  y0 = rng.standard_normal((D,) if shared_y0 else (B, D))
  w = rng.standard_normal((B, steps, D))
  return tuple(jnp.asarray(x, dtype) for x in (a, c, y0, w))


_scan = jax.jit(slice_scan.affine_scan, static_argnames=("impl", "chunk_size", "time_major"))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _value_and_grads(impl, chunk_size, a, c, y0, w):
  def loss(a, c, y0):
    y = slice_scan.affine_scan(a, c, y0, impl=impl, chunk_size=chunk_size)
    return jnp.sum(w * jnp.sin(y)), y  # sin: cotangents depend on y, not only on w

  (_, y), grads = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(a, c, y0)
  return y, grads


def _assert_close(got, want, rtol):
  """Relative to the array's scale: entries near zero are sums of larger cancelling terms."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.shape == want.shape and got.dtype == want.dtype
  np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(np.abs(want).max(), 1e-30))


def _check(steps, chunk_size, impl, *, diag, dtype, rtol, shared_y0=True, scale=0.2):
  a, c, y0, w = _inputs(steps, diag=diag, dtype=dtype, key=steps, scale=scale, shared_y0=shared_y0)
  y_ref, g_ref = _value_and_grads("sequential", 0, a, c, y0, w)
  y, g = _value_and_grads(impl, chunk_size, a, c, y0, w)
  assert y.shape == (B, steps, D)
  _assert_close(y, y_ref, rtol)
  for got, want in zip(g, g_ref, strict=True):
    _assert_close(got, want, rtol)


def _lengths(chunk):
  return [1, 2, chunk - 1, chunk, chunk + 1, 3 * chunk + 5]


# Every length around chunk 4's boundaries for both forms; the block form again around chunk 16's
# (lengths up to the chunk size run as a single chunk of that length whatever the chunk size, so
# the short ones are not repeated). Compilation dominates the run time, hence the selection.
F64_CASES = [(t, 4, d) for t in _lengths(4) for d in ("block", "diag")]
F64_CASES += [(t, 16, "block") for t in _lengths(16)[2:]]
F32_CASES = [(t, 8, "block") for t in _lengths(8) if t != 2] + [(29, 8, "diag")]


@pytest.mark.parametrize("steps,chunk,form", F64_CASES)
def test_chunked_matches_sequential_float64(steps, chunk, form):
  with jax.enable_x64(True):
    _check(steps, chunk, "chunked", diag=form == "diag", dtype=jnp.float64, rtol=1e-10)


@pytest.mark.parametrize("steps,chunk,form", F32_CASES)
def test_chunked_matches_sequential_float32(steps, chunk, form):
  with jax.default_matmul_precision("highest"):
    _check(steps, chunk, "chunked", diag=form == "diag", dtype=jnp.float32, rtol=1e-4)


@pytest.mark.parametrize("form", ["block", "diag"])
def test_associative_matches_sequential(form):
  with jax.enable_x64(True):
    _check(29, 0, "associative", diag=form == "diag", dtype=jnp.float64, rtol=1e-10)


def test_per_game_initial_state():
  with jax.enable_x64(True):
    _check(21, 8, "chunked", diag=False, dtype=jnp.float64, rtol=1e-10, shared_y0=False)


@pytest.mark.slow
@pytest.mark.parametrize("diag", [False, True], ids=["block", "diag"])
def test_long_sequence_float32(diag):
  with jax.default_matmul_precision("highest"):
    _check(600, 256, "chunked", diag=diag, dtype=jnp.float32, rtol=1e-4, scale=0.05)


def test_sequential_is_the_recurrence():
  """The reference itself, against a numpy loop of y_t = (I + A_t) y_{t-1} + c_t."""
  with jax.enable_x64(True):
    a, c, y0, _ = _inputs(9, diag=False, dtype=jnp.float64)
    got = np.asarray(slice_scan.affine_scan(a, c, y0, impl="sequential"))
  a, c, y0 = np.asarray(a), np.asarray(c), np.asarray(y0)
  for bi in range(B):
    m = np.zeros((9, D, D))
    for g in range(G):
      s = slice(g * BLOCK, (g + 1) * BLOCK)
      m[:, s, s] = a[bi, :, g]
    y = y0
    for t in range(9):
      y = y + m[t] @ y + c[bi, t]
      np.testing.assert_allclose(got[bi, t], y, rtol=1e-12, atol=1e-12)


def test_block_size_one_is_the_diagonal_form():
  with jax.enable_x64(True):
    a, c, y0, _ = _inputs(11, diag=True, dtype=jnp.float64)
    for impl in RECURRENCES["affine_scan"]:
      as_blocks = _scan(a[..., None, None], c, y0, impl=impl, chunk_size=4)
      diagonal = _scan(a, c, y0, impl=impl, chunk_size=4)
      np.testing.assert_array_equal(np.asarray(as_blocks), np.asarray(diagonal))


@pytest.mark.parametrize("impl", RECURRENCES["affine_scan"])
def test_time_major_layout(impl):
  a, c, y0, _ = _inputs(10, diag=False, dtype=jnp.float32)
  want = _scan(a, c, y0, impl=impl, chunk_size=4)
  got = _scan(
    jnp.swapaxes(a, 0, 1), jnp.swapaxes(c, 0, 1), y0, impl=impl, chunk_size=4, time_major=True
  )
  np.testing.assert_allclose(np.asarray(jnp.swapaxes(got, 0, 1)), np.asarray(want), rtol=1e-6)


def test_affine_step_matches_scan():
  a, c, y0, _ = _inputs(5, diag=False, dtype=jnp.float32)
  want = slice_scan.affine_scan(a, c, y0, impl="sequential")
  y = jnp.broadcast_to(y0, (B, D)).reshape(B, G, BLOCK)
  for t in range(5):
    y = slice_scan.affine_step(a[:, t], c[:, t].reshape(B, G, BLOCK), y)
    np.testing.assert_allclose(np.asarray(y.reshape(B, D)), np.asarray(want[:, t]), rtol=1e-6)


def test_bad_arguments_raise():
  a, c, y0, _ = _inputs(4, diag=False, dtype=jnp.float32)
  with pytest.raises(ValueError, match="impl"):
    slice_scan.affine_scan(a, c, y0, impl="magic")
  with pytest.raises(ValueError, match="does not fit"):
    slice_scan.affine_scan(a[:, :, :2], c, y0)
  with pytest.raises(ValueError, match="diagonal"):
    slice_scan.affine_scan(c[..., :5], c, y0)
