"""The gated delta rule (Gated DeltaNet's recurrence) as pure functions of arrays.

Per batch element and head, with key dim K and value dim V (state S is V x K):

    S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,    alpha_t = exp(g_t)
    o_t = scale * S_t q_t                                                scale = 1/sqrt(K) default

Yang, Kautz & Hatamizadeh, "Gated Delta Networks: Improving Mamba2 with Delta Rule" (ICLR 2025);
reference implementation: flash-linear-attention's `chunk_gated_delta_rule` /
`fused_recurrent_gated_delta_rule` (state laid out V x K as with `state_v_first=True`).

Two implementations with identical results (tests hold them together in float64 and float32):

* `impl="sequential"`: `lax.scan` over time of `gated_delta_rule_step`, read straight off the
  equations. Also the streaming (one token at a time) form.
* `impl="chunked"`: the chunkwise WY / UT form. Write the update as
  S_t = alpha_t S_{t-1} + u_t k_t^T with u_t = beta_t (v_t - alpha_t S_{t-1} k_t). Inside a chunk of
  C steps starting from state S_0, with cumulative log-decays G_i = g_1 + ... + g_i (fp32),

      (I + A) U = diag(beta) V - diag(beta e^G) K S_0^T,  A_ij = beta_i e^(G_i-G_j) k_i.k_j (j < i)

  so with T = (I + A)^-1 (the UT transform; `unit_lower_inverse`, blocked forward substitution):
  U = T diag(beta) V - (T diag(beta e^G) K) S_0^T = U0 - W S_0^T, and

      o_i   = scale (e^(G_i) S_0 q_i + sum_{j<=i} e^(G_i - G_j) (q_i.k_j) u_j)
      S_end = e^(G_C) S_0 + sum_j e^(G_C - G_j) u_j k_j^T.

  Everything except S_0 -> S_end is computed for all chunks at once; only that C-fold shorter state
  recurrence is a scan. Sequences are padded to a multiple of C with g = 0, beta = 0 (identity
  steps), so the final state is exact for any length. A sequence shorter than C is one chunk of
  its own length (C clamped to T), never padded: XLA's GPU compiler failed on the padded form at
  C = 16, T = 1 and 2 (`loop_multiply_pad_fusion`, docs/performance.md), and the clamped one does
  less work for the same result.

The recurrent state, the cumulative decays and the UT inverse run in float32 (float64 if the
inputs are float64) whatever the input dtype; outputs come back in the dtype of `v`.

JAX trap: e^(G_i - G_j) is only needed for j <= i, but the unused triangle has G_i - G_j >= 0 and
overflows for strong decays. The exponent is masked to -inf *before* `exp`; masking the result
instead (`where(mask, exp(.), 0)`) leaves inf * 0 = NaN in the backward pass.

Shapes (legend: `chessjax.shapes`): B batch, T steps, H heads, K key dim, V value dim, M chunks,
C chunk length (T = M C after padding).
"""

import jax
import jax.numpy as jnp
from jax import lax

from chessjax.ops.impl import check


def _compute_dtype(*xs):
  """float32, or float64 when an input is float64 (the x64 reference tests)."""
  return jnp.result_type(jnp.float32, *[x.dtype for x in xs])


def _default_scale(q):
  return q.shape[-1] ** -0.5


def gated_delta_rule_step(state_BHVK, q_BHK, k_BHK, v_BHV, g_BH, beta_BH, *, scale=None):
  """One step of the gated delta rule: returns (o_BHV, new state_BHVK).

  The state stays in its own dtype (float32 in the models); inputs are cast to it. `scale`
  defaults to 1/sqrt(K) (flash-linear-attention's default).
  """
  scale = _default_scale(q_BHK) if scale is None else scale
  dt = state_BHVK.dtype
  q, k, v = (x.astype(dt) for x in (q_BHK, k_BHK, v_BHV))
  g, beta = g_BH.astype(dt), beta_BH.astype(dt)
  s = jnp.exp(g)[..., None, None] * state_BHVK
  # Delta rule: move the prediction S k towards v by a step beta (alpha already applied).
  u = beta[..., None] * (v - jnp.einsum("bhvk,bhk->bhv", s, k))
  s = s + u[..., :, None] * k[..., None, :]
  o = scale * jnp.einsum("bhvk,bhk->bhv", s, q)
  return o, s


def _init_state(q, v, initial_state, dt):
  b, _, h, kd = q.shape
  if initial_state is None:
    return jnp.zeros((b, h, v.shape[-1], kd), dt)
  expected = (b, h, v.shape[-1], kd)
  if initial_state.shape != expected:
    raise ValueError(
      f"initial_state has shape {initial_state.shape}, expected {expected} [B,H,V,K]"
    )
  return initial_state.astype(dt)


def _sequential(q, k, v, g, beta, s0, scale):
  def body(s, xs):
    o, s = gated_delta_rule_step(s, *xs, scale=scale)
    return s, o

  # Time-major for the scan.
  xs = tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, g, beta))
  s, o_THBV = lax.scan(body, s0, xs)
  return jnp.moveaxis(o_THBV, 0, 1), s


_SUBSTITUTION_BLOCK = 16


def _forward_substitution(a):
  """(I + a)^-1 for strictly lower triangular a [..., b, b], one row at a time."""
  b = a.shape[-1]
  eye = jnp.eye(b, dtype=a.dtype)

  def row(i, t):
    # Row i of T solves T_i + sum_{j<i} a_ij T_j = e_i; rows j >= i of t are still e_j but their
    # coefficients a_ij are zero.
    a_i = lax.dynamic_index_in_dim(a, i, axis=-2, keepdims=False)
    t_i = lax.dynamic_index_in_dim(eye, i, axis=0, keepdims=False) - jnp.einsum(
      "...j,...jk->...k", a_i, t
    )
    return lax.dynamic_update_index_in_dim(t, t_i, i, axis=-2)

  return lax.fori_loop(1, b, row, jnp.broadcast_to(eye, a.shape))


def _unit_lower_inverse_impl(a):
  c = a.shape[-1]
  blk = min(_SUBSTITUTION_BLOCK, c)
  size = blk
  while size < c:
    size *= 2
  # Zero padding extends I + a by an identity block, whose inverse is the identity block.
  if size > c:
    a = jnp.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, size - c), (0, size - c)])
  blocks = [a[..., i : i + blk, i : i + blk] for i in range(0, size, blk)]
  t = _forward_substitution(jnp.stack(blocks, axis=-3))  # [..., size/blk, blk, blk]
  s = blk
  while s < size:
    # Merge inverses of neighbouring diagonal blocks: inv([[L1, 0], [L21, L2]]) =
    # [[X, 0], [-Z L21 X, Z]] with X = inv(L1), Z = inv(L2).
    x, z = t[..., 0::2, :, :], t[..., 1::2, :, :]
    l21 = jnp.stack([a[..., i + s : i + 2 * s, i : i + s] for i in range(0, size, 2 * s)], axis=-3)
    y = -jnp.einsum("...ij,...jk,...kl->...il", z, l21, x)
    top = jnp.concatenate([x, jnp.zeros_like(x)], axis=-1)
    t = jnp.concatenate([top, jnp.concatenate([y, z], axis=-1)], axis=-2)
    s *= 2
  return t[..., 0, :c, :c]


@jax.custom_vjp
def unit_lower_inverse(a):
  """(I + a)^-1 for a strictly lower triangular [..., C, C] (entries on/above the diagonal ignored).

  Forward substitution on 16 x 16 diagonal blocks, merged pairwise with matmuls (the structure of
  fla's `solve_tril`). Not `lax.linalg.triangular_solve`: jaxlib's CPU kernel for it can deadlock
  when two batched solves run at once on a small thread pool (seen on 2 cores at T = 1024), and
  its gradient needs two more solves. The VJP uses dT = -T dA T.
  """
  idx = jnp.arange(a.shape[-1])
  return _unit_lower_inverse_impl(jnp.where(idx[:, None] > idx[None, :], a, 0))


def _unit_lower_inverse_fwd(a):
  t = unit_lower_inverse(a)
  return t, t


def _unit_lower_inverse_bwd(t, g_t):
  idx = jnp.arange(t.shape[-1])
  g_a = -jnp.einsum("...ji,...jk,...lk->...il", t, g_t, t)  # -T^T g T^T
  return (jnp.where(idx[:, None] > idx[None, :], g_a, 0),)


unit_lower_inverse.defvjp(_unit_lower_inverse_fwd, _unit_lower_inverse_bwd)


def _chunked(q, k, v, g, beta, s0, scale, chunk):
  b, t, h, kd = q.shape
  vd = v.shape[-1]
  dt = s0.dtype
  chunk = max(1, min(chunk, t))  # below one chunk: no padding (see the module docstring)
  n = -(-t // chunk)
  pad = n * chunk - t

  def to_chunks(x):
    # [B, T, H, ...] -> [M, B, H, C, ...]: padding steps have g = beta = 0, i.e. S_t = S_{t-1}.
    x = x.astype(dt)
    if pad:
      x = jnp.pad(x, [(0, 0), (0, pad)] + [(0, 0)] * (x.ndim - 2))
    x = x.reshape(b, n, chunk, h, *x.shape[3:])
    return jnp.moveaxis(x, (1, 3), (0, 2))

  q, k, v, g, beta = (to_chunks(x) for x in (q, k, v, g, beta))
  q = q * scale
  g_cum = jnp.cumsum(g, axis=-1)  # [M, B, H, C]
  diff = g_cum[..., :, None] - g_cum[..., None, :]
  idx = jnp.arange(chunk)
  strict = idx[:, None] > idx[None, :]
  # Mask the exponent, not the result (see module docstring).
  decay_strict = jnp.exp(jnp.where(strict, diff, -jnp.inf))
  # The diagonal is exactly 1; taking it as exp(G_i - G_i) would add and cancel O(1) terms in the
  # gradient of g, swamping the true (possibly tiny, e^-30-scale) gradient with rounding.
  decay_incl = decay_strict + jnp.eye(chunk, dtype=dt)

  kk = jnp.einsum("nbhik,nbhjk->nbhij", k, k)
  a = beta[..., :, None] * kk * decay_strict
  rhs = jnp.concatenate([beta[..., None] * v, (beta * jnp.exp(g_cum))[..., None] * k], axis=-1)
  sol = jnp.einsum("nbhij,nbhjx->nbhix", unit_lower_inverse(a), rhs)  # the UT transform
  u0, w = sol[..., :vd], sol[..., vd:]  # [M, B, H, C, V], [M, B, H, C, K]

  g_last = g_cum[..., -1]  # [M, B, H]
  # G_C - G_j = g_{j+1} + ... + g_C as an exclusive reverse cumsum rather than a difference of
  # cumsums: no cancellation in float32 values or in gradients (exactly 0 for j = C).
  g_after = jnp.flip(jnp.cumsum(jnp.flip(g, -1), -1), -1)
  g_to_end = jnp.concatenate([g_after[..., 1:], jnp.zeros_like(g_after[..., :1])], axis=-1)
  k_to_end = jnp.exp(g_to_end)[..., None] * k  # each key decayed to the chunk end

  def body(s, xs):
    u0_n, w_n, k_end_n, g_last_n = xs
    u = u0_n - jnp.einsum("bhck,bhvk->bhcv", w_n, s)
    s_next = jnp.exp(g_last_n)[..., None, None] * s + jnp.einsum("bhcv,bhck->bhvk", u, k_end_n)
    return s_next, (s, u)

  s_final, (s_start, u) = lax.scan(body, s0, (u0, w, k_to_end, g_last))

  # Outputs of all chunks at once: inter-chunk part from each chunk's start state, intra-chunk part
  # as decayed causal attention over the corrected values u.
  o_inter = jnp.exp(g_cum)[..., None] * jnp.einsum("nbhck,nbhvk->nbhcv", q, s_start)
  qk = jnp.einsum("nbhik,nbhjk->nbhij", q, k) * decay_incl
  o = o_inter + jnp.einsum("nbhij,nbhjv->nbhiv", qk, u)
  o = jnp.moveaxis(o, (0, 2), (1, 3)).reshape(b, n * chunk, h, vd)
  return o[:, :t], s_final


def gated_delta_rule(
  q_BTHK,
  k_BTHK,
  v_BTHV,
  g_BTH,
  beta_BTH,
  *,
  initial_state=None,
  scale=None,
  impl="chunked",
  chunk_size=64,
):
  """Runs the gated delta rule over a sequence; returns (o float[B,T,H,V], final state [B,H,V,K]).

  Args:
    q_BTHK, k_BTHK: queries and keys (the models L2-normalise them first; this function does not).
    v_BTHV: values.
    g_BTH: log-decays, alpha_t = exp(g_t) (<= 0 in the models).
    beta_BTH: delta-rule step sizes (in (0, 1), or (0, 2) with negative eigenvalues).
    initial_state: optional float[B,H,V,K] state S_0 (zeros if None).
    scale: output scale, 1/sqrt(K) if None.
    impl: "chunked" (parallel, chunkwise WY/UT transform) or "sequential" (scan over steps).
    chunk_size: chunk length C of the chunked form (at most T); a pure performance choice.

  The final state is float32 (float64 for float64 inputs); `o` has the dtype of `v_BTHV`.
  """
  check(impl, "delta_rule")
  if q_BTHK.shape != k_BTHK.shape or q_BTHK.ndim != 4:
    raise ValueError(f"q and k must both be [B,T,H,K]; got {q_BTHK.shape} and {k_BTHK.shape}")
  if v_BTHV.shape[:3] != q_BTHK.shape[:3] or g_BTH.shape != q_BTHK.shape[:3]:
    raise ValueError(
      f"v [B,T,H,V], g and beta [B,T,H] must match q [B,T,H,K]; got v {v_BTHV.shape}, "
      f"g {g_BTH.shape}, beta {beta_BTH.shape}, q {q_BTHK.shape}"
    )
  if beta_BTH.shape != g_BTH.shape:
    raise ValueError(f"beta has shape {beta_BTH.shape}, expected {g_BTH.shape}")
  if chunk_size < 1:
    raise ValueError(f"chunk_size must be positive, got {chunk_size}")
  dt = _compute_dtype(q_BTHK, k_BTHK, v_BTHV, g_BTH, beta_BTH)
  s0 = _init_state(q_BTHK, v_BTHV, initial_state, dt)
  scale = _default_scale(q_BTHK) if scale is None else scale
  args = (q_BTHK, k_BTHK, v_BTHV, g_BTH, beta_BTH, s0, scale)
  if impl == "sequential":
    o, s = _sequential(*args)
  else:
    o, s = _chunked(*args, chunk_size)
  return o.astype(v_BTHV.dtype), s
