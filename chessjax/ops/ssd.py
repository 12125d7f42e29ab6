"""State-space duality (SSD) cores of Mamba-2 and Mamba-3, each with a sequential reference.

Mamba-2 (Dao & Gu 2024, "Transformers are SSMs"; reference `mamba_ssm/ops/triton/ssd_combined.py`
and `mamba_ssm/modules/ssd_minimal.py`), per head with a scalar decay:

    h_t = exp(dt_t A_t) h_{t-1} + dt_t x_t B_t^T          h: [P, N], x_t: [P], B_t, C_t: [N]
    y_t = h_t C_t                                         (the D x_t skip is left to the caller)

Mamba-3 (Lahoti et al. 2026, "Mamba-3: improved sequence modeling using state space principles";
reference `mamba_ssm/modules/mamba3.py` and the step references in the kernel tests), the
exponential-trapezoidal rule with rank-R inputs (R = 1 is SISO, R > 1 MIMO):

    alpha_t = exp(dt_t A_t),  lam_t in (0, 1)
    S_t = alpha_t S_{t-1} + (1 - lam_t) dt_t alpha_t sum_r v_{t-1,r} k_{t-1,r}^T
          + lam_t dt_t sum_r v_{t,r} k_{t,r}^T           (v_0 = k_0 = 0 unless a state is given)
    y_{t,r} = S_t q_{t,r}

The term v_s k_s^T enters with lam_s dt_s at step s and with (1 - lam_{s+1}) dt_{s+1} alpha_{s+1}
at step s + 1, so for t > s its total weight is decay(s -> t) * (lam_s dt_s + (1 - lam_{s+1})
dt_{s+1}): the trapezoid rule is SSD with keys scaled by that sum, except on the diagonal t = s,
where the weight is only lam_s dt_s (one diagonal correction per token; Lahoti et al., Mamba-3).
Both mixers therefore share one chunked core whose key weight on the diagonal (`w_diag`) may
differ from the weight everywhere else (`w_off`); applying the correction there keeps y_t exactly
independent of token t + 1.

Chunked form (chunk length L, clamped to T, any T): within a chunk, y = ((Q K^T) * W) V with
W[i, j] = exp(sum_{j<u<=i} log a_u) w_off_j for j < i and w_diag_i on the diagonal; the segment sums
are summed term by term (no differences of long cumulative sums) and masked to -inf BEFORE exp, so
neither values nor gradients see overflow in the dead triangle. Chunk-final states are carried
across chunks by a scan over chunks. States and every cumulative decay are float32 (float64 when
the inputs are); matmul inputs keep their dtype (e.g. bfloat16) with float32 accumulation.

Mamba-3's data-dependent rotation: theta_t = sum_{s<=t} pi tanh(angle_s) dt_s per head (float32,
kept in [0, 2 pi)) rotates the adjacent pairs (2i, 2i+1), i < S, of B and C; the remaining state
dimensions are unrotated (S = N/4, i.e. half the state is rotated).

Shape legend (`chessjax.shapes`): B batch, T steps, R rank, H heads, G key/query groups (H a
multiple of G), P head (value) dim, N state dim, S rotation angles.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from chessjax.ops.impl import check


def _state_dtype(dtype) -> jnp.dtype:
  """float32 for float32/bfloat16 inputs, float64 for float64 ones."""
  return jnp.promote_types(dtype, jnp.float32)


def _log_decay(dt_BTH: jax.Array, A: jax.Array, sdt) -> jax.Array:
  """dt_t A_t in the state dtype; A is per head [H] or input-dependent [B, T, H]."""
  return dt_BTH.astype(sdt) * A.astype(sdt)


def _chunked_core(q, k, v, log_a, w_off, w_diag, s0, chunk_size: int):
  """Chunked linear recurrence shared by Mamba-2 and Mamba-3.

  Computes, per head, S_t = a_t S_{t-1} + w_off_t sum_r v_{t,r} k_{t,r}^T and
  y_{t,r} = (a_t S_{t-1} + w_diag_t sum_s v_{t,s} k_{t,s}^T) q_{t,r}, with a_t = exp(log_a_t).

  Args:
    q, k: [B, T, R, G, N] queries and keys, one per group of E = H / G heads.
    v: [B, T, R, G, E, P] values.
    log_a, w_off, w_diag: [B, T, G, E] log decays and key weights (state dtype).
    s0: [B, G, E, P, N] initial state (state dtype).
    chunk_size: chunk length L.

  Returns:
    y [B, T, R, G, E, P] in the state dtype and the final state [B, G, E, P, N].
  """
  b, t = v.shape[:2]
  sdt = s0.dtype
  cdt = jnp.result_type(q.dtype, k.dtype, v.dtype)
  # A sequence shorter than a chunk is one chunk of its own length, never padded (as the delta
  # rule, whose padded single chunk XLA's GPU compiler failed on at L = 16, T = 1 and 2).
  size = max(1, min(chunk_size, t))
  nc = -(-t // size)
  pad = nc * size - t

  def chunks(a):
    # Zero padding is inert: log a = 0 keeps the state, k = w = 0 adds nothing.
    if pad:
      a = jnp.pad(a, [(0, 0), (0, pad)] + [(0, 0)] * (a.ndim - 2))
    return a.reshape(b, nc, size, *a.shape[2:])

  q, k, v, log_a, w_off, w_diag = map(chunks, (q, k, v, log_a, w_off, w_diag))
  # Time last for the decay algebra: [B, nc, G, E, L].
  la = jnp.moveaxis(log_a, 2, -1)
  wo = jnp.moveaxis(w_off, 2, -1)
  wd = jnp.moveaxis(w_diag, 2, -1)

  idx = jnp.arange(size)
  strict = idx[:, None] > idx[None, :]  # (i, j) with j < i
  # seg[i, j] = sum_{j<u<=i} la[u], summed term by term for accuracy; -inf outside j < i.
  seg = jnp.cumsum(jnp.where(strict, la[..., :, None], 0.0), axis=-2)
  seg = jnp.where(strict, seg, -jnp.inf)
  weights = jnp.exp(seg) * wo[..., None, :] + jnp.eye(size, dtype=sdt) * wd[..., :, None]

  scores = jnp.einsum("bclrgn,bcmsgn->bcglrms", q, k, preferred_element_type=sdt)
  mix = scores[:, :, :, None] * weights[:, :, :, :, :, None, :, None]  # [B,nc,G,E,L,R,L,R]
  y = jnp.einsum("bcgelrms,bcmsgep->bclrgep", mix.astype(cdt), v, preferred_element_type=sdt)

  # Weight of each key in its chunk's final state: exp(sum_{u>j} la[u]) w_off_j.
  la_after = jnp.concatenate([la[..., 1:], jnp.zeros_like(la[..., :1])], axis=-1)
  to_end = jnp.flip(jnp.cumsum(jnp.flip(la_after, -1), axis=-1), -1)
  vw = v.astype(sdt) * jnp.moveaxis(jnp.exp(to_end) * wo, -1, 2)[:, :, :, None, :, :, None]
  chunk_states = jnp.einsum("bcmsgn,bcmsgep->bcgepn", k, vw.astype(cdt), preferred_element_type=sdt)
  from_start = jnp.cumsum(la, axis=-1)  # sum_{u<=i} la[u] within the chunk

  def carry(state, inputs):
    total, chunk_state = inputs
    return jnp.exp(total)[..., None, None] * state + chunk_state, state

  s_final, s_start = jax.lax.scan(
    carry, s0, (jnp.moveaxis(from_start[..., -1], 1, 0), jnp.moveaxis(chunk_states, 1, 0))
  )
  s_start = jnp.moveaxis(s_start, 0, 1)  # state entering each chunk
  y_prev = jnp.einsum("bclrgn,bcgepn->bclrgep", q, s_start.astype(cdt), preferred_element_type=sdt)
  y = y + y_prev * jnp.moveaxis(jnp.exp(from_start), -1, 2)[:, :, :, None, :, :, None]
  return y.reshape(b, nc * size, *y.shape[3:])[:, :t], s_final


# ------------------------------------------------------------------------------------------------
# Mamba-2


def ssd_step(state, x, dt, A, B, C):
  """One Mamba-2 step: h = exp(dt A) h + dt x B^T, y = h C.

  Args:
    state: [B, H, P, N] (float32 or float64).
    x: [B, H, P]; dt: [B, H]; A: [H] or [B, H]; B, C: [B, G, N].

  Returns:
    (new state, y [B, H, P] in the state dtype).
  """
  sdt = state.dtype
  heads = x.shape[1]
  e = heads // B.shape[1]
  B = jnp.repeat(B.astype(sdt), e, axis=1)
  C = jnp.repeat(C.astype(sdt), e, axis=1)
  dt = dt.astype(sdt)
  decay = jnp.exp(dt * A.astype(sdt))
  state = (
    decay[..., None, None] * state + (dt[..., None] * x.astype(sdt))[..., None] * B[:, :, None]
  )
  return state, jnp.einsum("bhpn,bhn->bhp", state, C)


def ssd(x, dt, A, B, C, *, initial_state=None, impl: str = "chunked", chunk_size: int = 64):
  """Mamba-2 selective state space (SSD) over a sequence.

  Args:
    x: [B, T, H, P] inputs; dt: [B, T, H] step sizes (already softplus'ed).
    A: [H] (Mamba-2) or [B, T, H] (input-dependent) negative decay rates.
    B, C: [B, T, G, N] keys and queries shared by H / G heads each.
    initial_state: optional [B, H, P, N]; zeros if None.
    impl: "chunked" (parallel SSD form) or "sequential" (lax.scan over `ssd_step`).
    chunk_size: chunk length of the chunked form (a pure performance choice).

  Returns:
    y [B, T, H, P] in x's dtype and the final state [B, H, P, N] (float32, float64 for f64 x).
  """
  check(impl, "ssd")
  b, t, h, p = x.shape
  g, n = B.shape[2:]
  if h % g:
    raise ValueError(f"heads {h} must be a multiple of the B/C groups {g}")
  sdt = _state_dtype(x.dtype)
  s0 = jnp.zeros((b, h, p, n), sdt) if initial_state is None else initial_state.astype(sdt)
  if impl == "sequential":
    A_T = jnp.broadcast_to(A, dt.shape)

    def body(state, inputs):
      return ssd_step(state, *inputs)

    xs = tuple(jnp.moveaxis(a, 1, 0) for a in (x, dt, A_T, B, C))
    s_final, y = jax.lax.scan(body, s0, xs)
    return jnp.moveaxis(y, 0, 1).astype(x.dtype), s_final

  e = h // g
  log_a = _log_decay(dt, A, sdt).reshape(b, t, g, e)
  w = dt.astype(sdt).reshape(b, t, g, e)
  y, s_final = _chunked_core(
    C[:, :, None],
    B[:, :, None],
    x.reshape(b, t, 1, g, e, p),
    log_a,
    w,
    w,
    s0.reshape(b, g, e, p, n),
    chunk_size,
  )
  return y.reshape(b, t, h, p).astype(x.dtype), s_final.reshape(b, h, p, n)


# ------------------------------------------------------------------------------------------------
# Mamba-3 (exponential-trapezoidal rule, SISO and MIMO)


class TrapezoidState(NamedTuple):
  """Carry of the Mamba-3 recurrence: S [B, H, P, N], last keys [B, R, G, N], last values
  [B, R, H, P] (the trapezoid's previous-token term needs them)."""

  ssm: jax.Array
  k_prev: jax.Array
  v_prev: jax.Array


def trapezoid_zero_state(batch, rank, heads, groups, head_dim, d_state, dtype=jnp.float32):
  """The empty Mamba-3 state (no previous token)."""
  return TrapezoidState(
    jnp.zeros((batch, heads, head_dim, d_state), dtype),
    jnp.zeros((batch, rank, groups, d_state), dtype),
    jnp.zeros((batch, rank, heads, head_dim), dtype),
  )


def _outer_sum(v, k, sdt):
  """sum_r v_r k_r^T per head: v [B, R, H, P], k [B, R, G, N] -> [B, H, P, N]."""
  k = jnp.repeat(k.astype(sdt), v.shape[2] // k.shape[2], axis=2)
  return jnp.einsum("brhp,brhn->bhpn", v.astype(sdt), k)


def trapezoid_step(state: TrapezoidState, x, dt, A, lam, B, C):
  """One Mamba-3 step (exponential-trapezoidal rule), straight from the equations.

  Args:
    state: `TrapezoidState` of the previous step.
    x: [B, R, H, P] (rank-projected) values; dt, lam: [B, H]; A: [H] or [B, H].
    B, C: [B, R, G, N] keys and queries (biased and rotated already).

  Returns:
    (new state, y [B, R, H, P] in the state dtype).
  """
  sdt = state.ssm.dtype
  dt = dt.astype(sdt)
  lam = lam.astype(sdt)
  alpha = jnp.exp(dt * A.astype(sdt))
  beta = (1 - lam) * dt * alpha
  gamma = lam * dt
  ssm = (
    alpha[..., None, None] * state.ssm
    + beta[..., None, None] * _outer_sum(state.v_prev, state.k_prev, sdt)
    + gamma[..., None, None] * _outer_sum(x, B, sdt)
  )
  C = jnp.repeat(C.astype(sdt), x.shape[2] // C.shape[2], axis=2)
  y = jnp.einsum("bhpn,brhn->brhp", ssm, C)
  return TrapezoidState(ssm, B.astype(state.k_prev.dtype), x.astype(state.v_prev.dtype)), y


def trapezoid_ssd(
  x, dt, A, lam, B, C, *, initial_state=None, impl: str = "chunked", chunk_size: int = 64
):
  """Mamba-3's trapezoidal state space over a sequence.

  Args:
    x: [B, T, R, H, P] values (for MIMO, x already multiplied by its per-rank up-projection).
    dt, lam: [B, T, H] step sizes and trapezoid mixing weights in (0, 1).
    A: [H] or [B, T, H] negative decay rates.
    B, C: [B, T, R, G, N] keys and queries (normalised, biased and rotated).
    initial_state: optional `TrapezoidState`; the empty state if None.
    impl: "chunked" (SSD with trapezoid key weights plus the diagonal correction) or
      "sequential" (lax.scan over `trapezoid_step`).
    chunk_size: chunk length in tokens of the chunked form (each token holds R keys).

  Returns:
    y [B, T, R, H, P] in x's dtype and the final `TrapezoidState`.
  """
  check(impl, "ssd")
  b, t, r, h, p = x.shape
  g, n = B.shape[3:]
  if h % g:
    raise ValueError(f"heads {h} must be a multiple of the B/C groups {g}")
  sdt = _state_dtype(x.dtype)
  if initial_state is None:
    initial_state = trapezoid_zero_state(b, r, h, g, p, n, sdt)
  if impl == "sequential":
    A_T = jnp.broadcast_to(A, dt.shape)

    def body(state, inputs):
      return trapezoid_step(state, *inputs)

    state0 = TrapezoidState(
      initial_state.ssm.astype(sdt), initial_state.k_prev.astype(sdt), initial_state.v_prev
    )
    xs = tuple(jnp.moveaxis(a, 1, 0) for a in (x, dt, A_T, lam, B, C))
    final, y = jax.lax.scan(body, state0, xs)
    final = final._replace(k_prev=final.k_prev.astype(B.dtype), v_prev=final.v_prev.astype(x.dtype))
    return jnp.moveaxis(y, 0, 1).astype(x.dtype), final

  e = h // g
  dt = dt.astype(sdt)
  lam = lam.astype(sdt)
  gamma = lam * dt
  # (1 - lam_{t+1}) dt_{t+1}: the weight token t receives at step t + 1 (none after the last).
  nxt = jnp.concatenate([((1 - lam) * dt)[:, 1:], jnp.zeros_like(dt[:, :1])], axis=1)
  # The previous call's last token enters at our first step with weight (1 - lam_1) dt_1 before
  # the first decay, exactly like the sequential beta_1 term.
  s0 = initial_state.ssm.astype(sdt) + ((1 - lam[:, 0]) * dt[:, 0])[..., None, None] * _outer_sum(
    initial_state.v_prev, initial_state.k_prev, sdt
  )
  y, s_final = _chunked_core(
    C,
    B,
    x.reshape(b, t, r, g, e, p),
    _log_decay(dt, A, sdt).reshape(b, t, g, e),
    (gamma + nxt).reshape(b, t, g, e),
    gamma.reshape(b, t, g, e),
    s0.reshape(b, g, e, p, n),
    chunk_size,
  )
  final = TrapezoidState(s_final.reshape(b, h, p, n), B[:, -1], x[:, -1])
  return y.reshape(b, t, r, h, p).astype(x.dtype), final


# ------------------------------------------------------------------------------------------------
# Mamba-3 data-dependent rotation


def _mod_2pi(a):
  return jnp.mod(a, 2 * math.pi)


def rotary_theta_step(theta, angles, dt):
  """theta <- (theta + pi tanh(angles) dt) mod 2 pi. theta [B, H, S], angles [B, S], dt [B, H]."""
  inc = (
    math.pi * jnp.tanh(angles.astype(theta.dtype))[:, None, :] * dt.astype(theta.dtype)[..., None]
  )
  return _mod_2pi(theta + inc)


def rotary_theta(angles, dt, *, initial=None, impl: str = "chunked"):
  """Cumulative rotation angles theta_t = sum_{s<=t} pi tanh(angles_s) dt_s, reduced mod 2 pi.

  Args:
    angles: [B, T, S] raw angle projections (shared by heads); dt: [B, T, H].
    initial: optional [B, H, S] angle state of a previous call.
    impl: "chunked" (parallel: associative scan of addition mod 2 pi, so no partial sum ever
      exceeds 4 pi and float32 keeps its precision on long sequences) or "sequential".

  Returns:
    theta [B, T, H, S] in float32 (float64 for float64 inputs), in [0, 2 pi].
  """
  check(impl, "ssd")
  sdt = _state_dtype(jnp.result_type(angles.dtype, dt.dtype))
  b, t, s = angles.shape
  h = dt.shape[-1]
  theta0 = jnp.zeros((b, h, s), sdt) if initial is None else initial.astype(sdt)
  if impl == "sequential":

    def body(theta, inputs):
      theta = rotary_theta_step(theta, *inputs)
      return theta, theta

    _, theta = jax.lax.scan(body, theta0, (jnp.moveaxis(angles, 1, 0), jnp.moveaxis(dt, 1, 0)))
    return jnp.moveaxis(theta, 0, 1)
  inc = math.pi * jnp.tanh(angles.astype(sdt))[:, :, None, :] * dt.astype(sdt)[..., None]
  inc = inc.at[:, 0].add(theta0)
  # The scan returns its first element untouched, hence the final reduction.
  return _mod_2pi(jax.lax.associative_scan(lambda u, w: _mod_2pi(u + w), inc, axis=1))


def rotate_pairs(x, theta):
  """Rotates adjacent pairs (2i, 2i+1), i < S, of x's last axis by theta_i; the rest unchanged.

  Args:
    x: [..., N] with N >= 2 S; theta: [..., S] broadcastable against x's leading axes.

  Returns:
    The rotated x, in x's dtype (the trigonometry runs in theta's dtype).
  """
  s = theta.shape[-1]
  head, tail = x[..., : 2 * s], x[..., 2 * s :]
  pairs = head.reshape(*head.shape[:-1], s, 2).astype(theta.dtype)
  x0, x1 = pairs[..., 0], pairs[..., 1]
  cos, sin = jnp.cos(theta), jnp.sin(theta)
  rot = jnp.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=-1)
  rot = rot.reshape(*rot.shape[:-2], 2 * s).astype(x.dtype)
  return jnp.concatenate([rot, jnp.broadcast_to(tail, (*rot.shape[:-1], tail.shape[-1]))], -1)
