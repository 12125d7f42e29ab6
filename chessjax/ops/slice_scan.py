"""SLiCE's block-diagonal affine recurrence as pure functions of arrays.

With D = G * b split into G blocks of size b, per batch element:

    y_t = M_t y_{t-1} + c_t,    M_t = I + A_t (block diagonal, A_t: [G, b, b]),    t = 1..T

from a given y_0. Block size 1 is the diagonal ablation (M_t is a vector, products are
elementwise). Walker, Yang, Cirone, Salvi & Lyons, "Structured Linear CDEs: Maximally Expressive
and Parallel-in-Time Sequence Models" (NeurIPS 2025); reference implementation: the `SLiCE`
module of the `torch-slices` package (0.3.3, `_forward_recurrent` / `_forward_parallel`), used
by the released Chess-World-Model code.

Implementations, chosen by `impl` (tests hold them together in float64 and float32, values and
gradients):

* `"sequential"`: `lax.scan` over time of `affine_step`, read straight off the equation and
  differentiated by JAX. Fewest flops (one matrix-vector product per step); the fastest form on a
  CPU, where every step is cheap and the work is too small to parallelise.
* `"chunked"`: the parallel form of the reference. Each step is the affine map (M_t, c_t); their
  composition `(M_r, c_r) o (M_l, c_l) = (M_r M_l, M_r c_l + c_r)` is associative, so inside a
  chunk of C steps `lax.associative_scan` gives every prefix in log2(C) rounds of batched b x b
  matrix products, and a `lax.scan` carries y from chunk to chunk. The incoming y is folded into
  the first step's offset (c_1 <- M_1 y + c_1), so each prefix's offset is directly y_t. Its
  gradient is a custom VJP (below) rather than autodiff through the scan tree, so the backward
  pass keeps no [T, G, b, b] prefix products alive.
* `"associative"`: one associative scan over the whole sequence (chunk = T); for comparison.

Backward pass of the parallel forms. With G_t = dL/dy_t including the effect through later steps,

    G_T = g_T,   G_t = g_t + M_{t+1}^T G_{t+1}          (g_t: the incoming cotangent of y_t)
    dL/dc_t = G_t,   dL/dA_t = G_t y_{t-1}^T (per block),   dL/dy_0 = M_1^T G_1

which is the same kind of affine recurrence run backwards in time with transposed transitions, so
it reuses the chunked scan; its residuals are A, y_0 and the outputs y only.

Everything runs in the inputs' promoted dtype: the models pass float32 (the recurrent state stays
float32 whatever the matmul dtype) and the reference tests float64.

Shapes (legend: `chessjax.shapes`): B batch, T steps, D width, G blocks, b block size, C chunk
length.
"""

import functools

import jax
import jax.numpy as jnp
from jax import lax

from chessjax.ops.impl import check

DEFAULT_CHUNK_SIZE = 256


# ---------------------------------------------------------------------------------------------
# Block-diagonal or diagonal products. `a` and `m` are [..., G, b, b] (block) or [..., D] (diag).


def _matvec(m, v, diag):
  return m * v if diag else jnp.einsum("...ij,...j->...i", m, v)


def _matmul(m_r, m_l, diag):
  return m_r * m_l if diag else jnp.einsum("...ij,...jk->...ik", m_r, m_l)


def _eye_plus(a, diag):
  return 1.0 + a if diag else a + jnp.eye(a.shape[-1], dtype=a.dtype)


def _transpose(a, diag):
  return a if diag else jnp.swapaxes(a, -1, -2)


def affine_step(a_BGbb, c_BGb, y_BGb):
  """One step `y <- (I + A) y + c` (also the streaming form): returns the new y.

  Shapes are [B, G, b, b], [B, G, b], [B, G, b] for blocks, or [B, D] each for the diagonal form.
  """
  diag = a_BGbb.ndim == c_BGb.ndim
  return y_BGb + _matvec(a_BGbb, y_BGb, diag) + c_BGb


# ---------------------------------------------------------------------------------------------
# Forward forms on the canonical time-major layout: a [T, B, G, b, b] or [T, B, D], c and the
# outputs [T, B, G, b] or [T, B, D], y0 [B, G, b] or [B, D]. Time-major because XLA's transposes
# of the big [B, T, G, b, b] stack cost more on a CPU than the whole sequential scan.


def _sequential(a, c, y0):
  def step(y, ac):
    y = affine_step(*ac, y)
    return y, y

  return lax.scan(step, y0, (a, c))[1]


def _combine(diag, left, right):
  m_l, c_l = left
  m_r, c_r = right
  return _matmul(m_r, m_l, diag), _matvec(m_r, c_l, diag) + c_r


def _chunk(y, a, c, diag):
  """All outputs of one chunk (a: [C, B, ...]) starting from y; returns (y_last, ys)."""
  m = _eye_plus(a, diag)
  # Folding y into the first offset makes every prefix offset equal to y_t itself.
  c = c.at[0].add(_matvec(m[0], y, diag))
  _, ys = lax.associative_scan(functools.partial(_combine, diag), (m, c), axis=0)
  return ys[-1], ys


def _chunked(a, c, y0, diag, chunk_size):
  steps = c.shape[0]
  chunk_size = max(1, min(chunk_size, steps))
  full, tail = divmod(steps, chunk_size)
  outs, y = [], y0
  if full:
    split = lambda x: x[: full * chunk_size].reshape(full, chunk_size, *x.shape[1:])
    y, ys = lax.scan(lambda y, ac: _chunk(y, *ac, diag), y, (split(a), split(c)))
    outs.append(ys.reshape(full * chunk_size, *c.shape[1:]))
  if tail:
    outs.append(_chunk(y, a[full * chunk_size :], c[full * chunk_size :], diag)[1])
  return outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=0)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _parallel(a, c, y0, diag, chunk_size):
  return _chunked(a, c, y0, diag, chunk_size)


def _parallel_fwd(a, c, y0, diag, chunk_size):
  ys = _chunked(a, c, y0, diag, chunk_size)
  return ys, (a, y0, ys)


def _parallel_bwd(diag, chunk_size, res, g):
  a, y0, ys = res
  # G_t = g_t + M_{t+1}^T G_{t+1}: a forward scan over reversed time whose step-t transition is
  # A_{t+1}^T (zero after the last step).
  a_next_t = _transpose(jnp.concatenate([a[1:], jnp.zeros_like(a[:1])], axis=0), diag)
  big_g = jnp.flip(
    _chunked(jnp.flip(a_next_t, 0), jnp.flip(g, 0), jnp.zeros_like(y0), diag, chunk_size), 0
  )
  y_prev = jnp.concatenate([y0[None], ys[:-1]], axis=0)
  da = big_g * y_prev if diag else big_g[..., :, None] * y_prev[..., None, :]
  dy0 = big_g[0] + _matvec(_transpose(a[0], diag), big_g[0], diag)
  return da, big_g, dy0


_parallel.defvjp(_parallel_fwd, _parallel_bwd)


# ---------------------------------------------------------------------------------------------
# Public entry point.


def affine_scan(a, c, y0, *, impl="chunked", chunk_size=DEFAULT_CHUNK_SIZE, time_major=False):
  """All states y_1..y_T of `y_t = (I + A_t) y_{t-1} + c_t` (block diagonal A_t).

  Args:
    a: [B, T, G, b, b] per-step blocks A_t (row-major (block, row, col), so D = G * b), or
      [B, T, D] for the diagonal form. Blocks of size 1 are run as the diagonal form.
    c: [B, T, D] per-step offsets c_t.
    y0: [D] (shared by the batch) or [B, D] initial state.
    impl: "sequential" (reference), "chunked" (parallel within chunks) or "associative"
      (parallel over the whole sequence); see the module docstring.
    chunk_size: chunk length C of the "chunked" form (a performance choice only).
    time_major: if True, `a`, `c` and the result have T and B swapped ([T, B, ...]); callers
      that can produce that layout cheaply skip two transposes of the [B, T, G, b, b] stack.

  Returns:
    [B, T, D] (or [T, B, D]) states y_1..y_T in the promoted dtype of the inputs.
  """
  check(impl, "affine_scan")
  if not time_major:
    a, c = jnp.swapaxes(a, 0, 1), jnp.swapaxes(c, 0, 1)
  steps, batch, width = c.shape
  dtype = jnp.result_type(a.dtype, c.dtype, y0.dtype)
  a, c = a.astype(dtype), c.astype(dtype)
  y0 = jnp.broadcast_to(y0.astype(dtype), (batch, width))
  if a.ndim == 5 and a.shape[-1] == 1:
    a = a.reshape(steps, batch, width)
  diag = a.ndim == 3
  if diag and a.shape != c.shape:
    raise ValueError(f"diagonal a {a.shape} must match c {c.shape}")
  if not diag:
    if a.ndim != 5 or a.shape[:2] != (steps, batch) or a.shape[2] * a.shape[3] != width:
      raise ValueError(f"block a {a.shape} does not fit c {c.shape}: want [.., .., G, b, b]")
    c = c.reshape(steps, batch, a.shape[2], a.shape[3])
    y0 = y0.reshape(batch, a.shape[2], a.shape[3])
  if steps == 0:
    ys = c
  elif impl == "sequential":
    ys = _sequential(a, c, y0)
  else:
    ys = _parallel(a, c, y0, diag, steps if impl == "associative" else int(chunk_size))
  ys = ys.reshape(steps, batch, width)
  return ys if time_major else jnp.swapaxes(ys, 0, 1)
