r"""The `performer` family: lucidrains' `performer-pytorch` (`PerformerLM`) as Toshniwal et al.
trained it (Learning Chess Blindfolded, AAAI 2022, section 5.3 and Table 12; Choromanski et al.,
Rethinking Attention with Performers, ICLR 2021).

The reference is performer-pytorch 1.1.4 (performer_pytorch.py) with local-attention 1.11.2,
configured as the paper's release does (learning-chess-blindfolded, src/model_utils/
performer_model.py): 12 layers, 12 heads of 64, width 768, causal, generalized (ReLU) attention,
features redrawn every 1,000 training steps, reversible layers, feed-forward chunks 10 (no numeric
effect), dropout 0.1 on the embedding, the attention output and inside the feed-forward, 6 local
heads with window 50 for Train-S (size `S`) and none for Train-M and Train-L (`M`, `L`), untied
output layer with bias, PerformerLM's defaults otherwise (q, k, v and output projections without
bias, `nb_features` = int(K ln K) = 266 for K = 64, rotary positions, max length 512).

    e = Drop(W_e[tokens] + pos[0..T-1])                                        (emb_dropout)
        pos: `positions="rotary"` (1.1.4's default): the fixed sinusoid [sin(t w), cos(t w)],
             w_i = 10000^(-2i / d), halves concatenated, no parameter, and rotary q, k in the
             global heads; `"learned"`: a learned table (N(0, 1)) of `n_positions` rows.
    reversible (`reversible=True`, the release; Gomez et al. 2017 as in the Reformer):
        x1 = x2 = e;   y1 = x1 + f(x2);   y2 = x2 + g(y1)   per layer;   h = y1 + y2 at the end
    sequential (`reversible=False`):  h += f(h);  h += g(h)
    f(x) = Drop(W_o [FAVOR(LN_1 x) heads ; Local(LN_1 x) heads])                 (attn_dropout)
    g(x) = W_2 Drop(gelu(W_1 LN_2 x + b_1)) + b_2                (exact GELU, ff_dropout, mult 4)
    out = LN_f(h)                      (LayerNorm eps 1e-5; then the token head, `heads.TokenHead`)

Heads. q, k, v = W_q x, W_k x, W_v x split into `heads` heads of `head_dim` K; the first
`heads - local_heads` are global (FAVOR+), the last `local_heads` local; their outputs are
concatenated in that order before W_o.

Global heads, FAVOR+ with the generalized kernel (Choromanski et al., section 2.3 and appendix;
performer-pytorch `generalized_kernel`, `causal_linear_attention`):

    (rotary positions only) q, k <- q cos(t w) + rot2(q) sin(t w),  w_i = 10000^(-2i / K) on the
        feature pairs (2i, 2i + 1), rot2(x)_(2i, 2i+1) = (-x_(2i+1), x_(2i))
    phi(x) = relu(K^(-1/4) x P^T) + 0.001             (P: the M x K random projection, no 1/sqrt(M)
                                                        factor and no normalisation by the data)
    out_i = sum_(j<=i) (phi(q_i) . phi(k_j)) v_j / (phi(q_i) . (sum_(j<=i) phi(k_j) + 1e-6))

computed in chunks of `chunk` positions (`causal_linear_attention`): the state S = sum k^T v
and z = sum k of all earlier chunks enters as q S and q . z, the chunk itself as a masked C x C
product, so memory is linear in T (T / C states of M x K, T x C scores).

The random projection (`gaussian_orthogonal_random_matrix`, scaling 0): M rows made of
floor(M / K) K x K blocks and the first M mod K rows of one more, each block the transposed Q of
the QR decomposition of a K x K standard normal matrix (orthonormal rows), every row then
multiplied by the norm of an independent standard normal K-vector. M = int(K ln K) unless
`nb_features` > 0. Each layer holds its own (`RandomFeatures`, not a parameter: no gradient, no
weight decay, in the model state, checkpointed), drawn from the model's key at init.

Feature redraw (the reference's `ProjectionUpdater`, `auto_check_redraw`): a counter in the model
state counts training forwards (`train=True`); at the start of a training forward whose counter
has reached `feature_redraw_interval`, every layer's projection is redrawn and the counter reset
to 0, else it is incremented. So the projections change before training forwards number 1000,
2001, 3002, ... (0-based; period interval + 1), exactly as in the reference; evaluation forwards
neither count nor redraw; a forward per micro-batch counts, as the reference counts each
accumulated batch. New matrices come from fold_in(the model's feature key, number of redraws so
far, layer), so a resumed run draws what an uninterrupted one would. `feature_redraw_interval=0`
fixes the projections (the reference's `fix_projection_matrices_`); `set_features` sets them.
This happens inside the model's forward; the training loop needs no hook.

Local heads (local-attention 1.11.2 `LocalAttention(window_size=W, causal=True, look_backward=1,
look_forward=0, autopad=True, exact_windowsize=False)` with rotary relative positions): the
sequence is cut into blocks of W (padded at the end); query i in block b = i // W sees keys j with
(b - 1) W <= j <= i (so 1 to 2W keys, not a fixed window); logits q . k / sqrt(K) with rotary
positions of the rotate-half form (x1, x2) -> (-x2, x1) over the block pair (keys at positions
0..2W-1 of the pair, queries at W..2W-1); masked logits -max_float32; softmax; dropout
(attn_dropout) on the weights.

Parameters (vocabulary V, width d, L layers, untied head): V d + L (4 d^2 [q, k, v, o] + 8 d^2 + 5 d
[feed-forward] + 4 d [two LayerNorms]) + 2 d + d V + V, plus `n_positions` x d with learned
positions. The paper's configuration at V = 77: 85,137,485 (rotary) or 85,530,701 (learned
positions), whatever the number of local heads (local attention has no parameter in
local-attention 1.11.2). Table 12 gives "86" (million) for every training size. The release's
requirements.txt pins performer-pytorch 0.15.0 and local-attention 1.2.1, which have learned
absolute positions only, biased q, k, v and o, and a learned relative-position table of 2W x local
heads x K per layer in local attention: 86,028,365 parameters with 6 local heads (Train-S) and
85,567,565 without. Of the two 1.1.4 counts, the learned positions' 85.53M rounds to 86M, but the
table truncates elsewhere (GPT-2's 85.51M is "85", the LSTM's 32.68M "32"), so only the release's
pinned versions give its "86" for Train-S. This module implements 1.1.4 (both positions).

Init (torch defaults, the reference has no init of its own): Linear weights and biases
U(-1/sqrt(fan_in), 1/sqrt(fan_in)), embeddings N(0, 1), LayerNorm 1 and 0. The values differ from
torch's draws (a different generator).

Hidden states (`return_hiddens=True`): the embedding output, then each layer's output; reversible
layers give y1 + y2, the sum the final LayerNorm would read there (2 e for the embedding).
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax.models import layers

FAMILIES = ("performer",)
POSITIONS = ("rotary", "learned")
# (d, layers, heads, local heads). S / M / L: Toshniwal et al., Table 12 (6 local heads for
# Train-S, none for Train-M and Train-L); tiny and micro: CPU sizes of this codebase.
SIZES = {
  "tiny": (64, 2, 4, 2),
  "micro": (128, 4, 4, 2),
  "S": (768, 12, 12, 6),
  "M": (768, 12, 12, 0),
  "L": (768, 12, 12, 0),
}
FEATURE_EPS = 1e-6  # `causal_linear_attention`'s eps, added to the key prefix sum
LOCAL_MASK = float(jnp.finfo(jnp.float32).min)  # local-attention's -max_float of masked logits


@dataclasses.dataclass(frozen=True)
class PerformerConfig:
  """Hyperparameters of PerformerLM (defaults: the paper's release on performer-pytorch 1.1.4)."""

  d: int
  layers: int
  heads: int
  head_dim: int
  local_heads: int = 0
  local_window: int = 50
  nb_features: int = 0  # random features M; 0: int(head_dim ln head_dim), the reference's default
  kernel_epsilon: float = 0.001  # phi(x) = relu(x P^T / K^(1/4)) + kernel_epsilon
  feature_redraw_interval: int = 1000  # training forwards between redraws; 0: never
  positions: str = "rotary"  # "rotary" (1.1.4's default) | "learned" (absolute, n_positions)
  n_positions: int = 512  # max_seq_len
  reversible: bool = True  # the release's reversible=True
  dropout: float = 0.1  # emb_dropout = attn_dropout = ff_dropout
  ff_mult: int = 4
  norm_eps: float = 1e-5
  qkv_bias: bool = False  # PerformerLM 1.1.4 defaults
  out_bias: bool = False
  chunk: int = 64  # positions per chunk of the causal linear attention (no effect on values)
  dtype: str = "float32"  # matmul dtype of the Linears: "float32" | "bfloat16"

  def __post_init__(self):
    layers.check_config(self)
    if self.positions not in POSITIONS:
      raise ValueError(f"positions must be one of {POSITIONS}, got {self.positions!r}")
    if not 0 <= self.local_heads <= self.heads:
      raise ValueError(f"local_heads must be in [0, heads={self.heads}], got {self.local_heads}")
    if self.head_dim < 2 or self.head_dim % 2:
      raise ValueError(f"head_dim must be even (rotary pairs), got {self.head_dim}")
    if self.positions == "rotary" and self.d % 2:
      raise ValueError(f"rotary positions need an even d, got {self.d}")
    if min(self.local_window, self.chunk, self.n_positions) < 1:
      raise ValueError("local_window, chunk and n_positions must be positive")
    if self.nb_features < 0 or self.feature_redraw_interval < 0:
      raise ValueError("nb_features and feature_redraw_interval must be >= 0")

  @property
  def features(self) -> int:
    """M, the number of random features per global head."""
    return self.nb_features or int(self.head_dim * math.log(self.head_dim))

  @property
  def global_heads(self) -> int:
    return self.heads - self.local_heads


def base_config(family: str, size: str) -> PerformerConfig:
  """The Performer at `size` (`SIZES`), heads of d / heads."""
  if family not in FAMILIES and family != __name__:
    raise ValueError(f"{family!r} is not the performer family")
  d, n_layers, heads, local_heads = SIZES[size]
  return PerformerConfig(
    d=d, layers=n_layers, heads=heads, head_dim=d // heads, local_heads=local_heads
  )


class RandomFeatures(nnx.Variable):
  """A layer's random projection P [M, K] of FAVOR+: model state, not a parameter."""


class RedrawState(nnx.Variable):
  """The feature-redraw bookkeeping (counters, key): model state, not a parameter."""


def gaussian_orthogonal_random_matrix(key, rows: int, cols: int) -> jax.Array:
  """float32[rows, cols]: stacked orthonormal-row blocks (QR of K x K normals), rows scaled by
  the norms of independent standard normal vectors (performer-pytorch, scaling 0)."""
  n_blocks = -(-rows // cols)
  k_blocks, k_norms = jax.random.split(key)
  gauss = jax.random.normal(k_blocks, (n_blocks, cols, cols), jnp.float32)
  q, _ = jnp.linalg.qr(gauss)  # [n, K, K], orthonormal columns
  blocks = jnp.swapaxes(q, -1, -2).reshape(n_blocks * cols, cols)[:rows]
  norms = jnp.linalg.norm(jax.random.normal(k_norms, (rows, cols), jnp.float32), axis=1)
  return norms[:, None] * blocks


def generalized_kernel(x, projection, epsilon: float):
  """phi(x) = relu(K^(-1/4) x P^T) + epsilon for x [..., K], P [M, K] (float32)."""
  x = x.astype(jnp.float32) * x.shape[-1] ** -0.25
  return jax.nn.relu(jnp.einsum("...k,mk->...m", x, projection.astype(jnp.float32))) + epsilon


def causal_linear_attention(q, k, v, *, chunk: int = 64, eps: float = FEATURE_EPS):
  """out_i = sum_(j<=i) (q_i . k_j) v_j / (q_i . (sum_(j<=i) k_j + eps)), by chunked prefix sums.

  q, k [..., T, M] (features, positive), v [..., T, E] -> [..., T, E], in their dtype. Chunks of
  C positions: S_c = sum of k^T v over the chunks before c (an exclusive cumulative sum of the
  chunks' sums) enters as q S_c, the chunk itself as its C x C causally masked q k^T; memory
  O(T (C + M + E) + (T / C) M E).
  """
  *lead, t, m = q.shape
  e = v.shape[-1]
  c = max(1, min(chunk, t))
  pad = (-t) % c
  if pad:  # zero keys and values add nothing; padded queries are dropped
    widths = [(0, 0)] * len(lead) + [(0, pad), (0, 0)]
    q, k, v = (jnp.pad(x, widths) for x in (q, k, v))
  n = (t + pad) // c
  qc, kc = q.reshape(*lead, n, c, m), k.reshape(*lead, n, c, m)
  vc = v.reshape(*lead, n, c, e)
  kv = jnp.einsum("...ncm,...nce->...nme", kc, vc)  # each chunk's sum of k^T v
  ks = jnp.sum(kc, axis=-2)  # each chunk's sum of k
  # Exclusive prefix over chunks: the state every chunk starts from.
  state = jnp.cumsum(kv, axis=-3)
  state = jnp.concatenate([jnp.zeros_like(state[..., :1, :, :]), state[..., :-1, :, :]], axis=-3)
  zsum = jnp.cumsum(ks, axis=-2)
  zsum = jnp.concatenate([jnp.zeros_like(zsum[..., :1, :]), zsum[..., :-1, :]], axis=-2)
  scores = jnp.einsum("...ncm,...nsm->...ncs", qc, kc) * jnp.tril(jnp.ones((c, c), q.dtype))
  num = jnp.einsum("...ncs,...nse->...nce", scores, vc)
  num = num + jnp.einsum("...ncm,...nme->...nce", qc, state)
  den = jnp.sum(scores, axis=-1) + jnp.einsum("...ncm,...nm->...nc", qc, zsum)
  den = den + eps * jnp.sum(qc, axis=-1)
  out = num / den[..., None]
  return out.reshape(*lead, n * c, e)[..., :t, :]


def _inv_freq(dim: int):
  """w_i = 1 / 10000^(2i / dim), i < dim / 2, float32 (the references' `inv_freq`)."""
  return 1.0 / (10000.0 ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))


def sinusoid(t: int, dim: int):
  """float32[t, dim]: [sin(p w), cos(p w)] (halves concatenated), p = 0..t-1 (performer-pytorch
  `FixedPositionalEmbedding`)."""
  angles = jnp.arange(t, dtype=jnp.float32)[:, None] * _inv_freq(dim)[None]
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def rotary_interleaved(x, positions):
  """performer-pytorch's `apply_rotary_pos_emb`: x [..., T, K] rotated on pairs (2i, 2i + 1) by
  angle p w_i at position p (w_i = 10000^(-2i / K))."""
  angles = positions.astype(jnp.float32)[:, None] * _inv_freq(x.shape[-1])[None]
  sin, cos = (jnp.repeat(f(angles), 2, axis=-1) for f in (jnp.sin, jnp.cos))
  pairs = x.reshape(*x.shape[:-1], -1, 2)
  rot = jnp.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)
  return x * cos + rot * sin


def rotary_half(x, positions):
  """local-attention's `apply_rotary_pos_emb`: x [..., T, K] with halves (x1, x2) rotated as
  x cos + (-x2, x1) sin, angles p w_i repeated over both halves."""
  angles = positions.astype(jnp.float32)[:, None] * _inv_freq(x.shape[-1])[None]
  angles = jnp.concatenate([angles, angles], axis=-1)
  x1, x2 = jnp.split(x, 2, axis=-1)
  return x * jnp.cos(angles) + jnp.concatenate([-x2, x1], axis=-1) * jnp.sin(angles)


def local_attention(q, k, v, *, window: int, drop=None):
  """local-attention's causal LocalAttention (look-backward 1, autopad, rotary): q, k, v
  [B, H, T, K] -> [B, H, T, K] float32. Query i in block b = i // window sees keys j with
  (b - 1) window <= j <= i."""
  b, h, t, kd = q.shape
  w = window
  pad = (-t) % w
  q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
  if pad:
    widths = [(0, 0), (0, 0), (0, pad), (0, 0)]
    q, k, v = (jnp.pad(x, widths) for x in (q, k, v))
  n = (t + pad) // w
  bq = q.reshape(b, h, n, w, kd) * kd**-0.5

  def pair(x):  # [B, H, n, 2w, K]: the block before (zeros before block 0), then the block
    x = x.reshape(b, h, n, w, kd)
    prev = jnp.concatenate([jnp.zeros_like(x[:, :, :1]), x[:, :, :-1]], axis=2)
    return jnp.concatenate([prev, x], axis=3)

  bk, bv = pair(k), pair(v)
  pos = jnp.arange(2 * w)
  bq = rotary_half(bq, pos[w:])
  bk = rotary_half(bk, pos)
  logits = jnp.einsum("bhnik,bhnjk->bhnij", bq, bk)
  blocks = jnp.arange(n)[:, None, None]
  q_pos = blocks * w + jnp.arange(w)[None, :, None]  # absolute positions
  k_pos = (blocks - 1) * w + jnp.arange(2 * w)[None, None, :]
  visible = (k_pos <= q_pos) & (k_pos >= 0)
  weights = jax.nn.softmax(jnp.where(visible, logits, LOCAL_MASK), axis=-1)
  if drop is not None:
    weights = drop(weights)
  out = jnp.einsum("bhnij,bhnjk->bhnik", weights, bv)
  return out.reshape(b, h, n * w, kd)[:, :, :t]


def _linear(cfg: PerformerConfig, d_in: int, d_out: int, *, bias: bool, rngs: nnx.Rngs):
  return layers.torch_linear(d_in, d_out, use_bias=bias, dtype=layers.DTYPES[cfg.dtype], rngs=rngs)


def _layer_norm(cfg: PerformerConfig, *, rngs: nnx.Rngs) -> nnx.LayerNorm:
  """torch `nn.LayerNorm(d)`: eps 1e-5, weight 1, bias 0, exact (two-pass) variance."""
  return nnx.LayerNorm(cfg.d, epsilon=cfg.norm_eps, use_fast_variance=False, rngs=rngs)


class Attention(nnx.Module):
  """performer-pytorch `SelfAttention`: global FAVOR+ heads then local heads, W_o, dropout."""

  def __init__(self, cfg: PerformerConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    inner = cfg.heads * cfg.head_dim
    self.to_q = _linear(cfg, cfg.d, inner, bias=cfg.qkv_bias, rngs=rngs)
    self.to_k = _linear(cfg, cfg.d, inner, bias=cfg.qkv_bias, rngs=rngs)
    self.to_v = _linear(cfg, cfg.d, inner, bias=cfg.qkv_bias, rngs=rngs)
    self.to_out = _linear(cfg, inner, cfg.d, bias=cfg.out_bias, rngs=rngs)
    self.features = RandomFeatures(
      gaussian_orthogonal_random_matrix(rngs.params(), cfg.features, cfg.head_dim)
    )
    self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)

  def __call__(self, x_BTD, *, train: bool = False):
    cfg = self.cfg
    b, t, _ = x_BTD.shape
    split = lambda y: y.reshape(b, t, cfg.heads, cfg.head_dim).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = (split(f(x_BTD).astype(jnp.float32)) for f in (self.to_q, self.to_k, self.to_v))
    gh, outs = cfg.global_heads, []
    if gh:
      qg, kg = q[:, :gh], k[:, :gh]
      if cfg.positions == "rotary":
        pos = jnp.arange(t)
        qg, kg = rotary_interleaved(qg, pos), rotary_interleaved(kg, pos)
      p = self.features[...]
      phi_q = generalized_kernel(qg, p, cfg.kernel_epsilon)
      phi_k = generalized_kernel(kg, p, cfg.kernel_epsilon)
      outs.append(causal_linear_attention(phi_q, phi_k, v[:, :gh], chunk=cfg.chunk))
    if cfg.local_heads:
      drop = None
      if train and cfg.dropout > 0.0:
        drop = lambda w: self.drop(w, deterministic=False)  # noqa: E731
      outs.append(
        local_attention(q[:, gh:], k[:, gh:], v[:, gh:], window=cfg.local_window, drop=drop)
      )
    o = jnp.concatenate(outs, axis=1).transpose(0, 2, 1, 3).reshape(b, t, -1)
    y = self.to_out(o.astype(layers.DTYPES[cfg.dtype])).astype(jnp.float32)
    return self.drop(y, deterministic=not train)


class FeedForward(nnx.Module):
  """performer-pytorch `FeedForward`: w2(Drop(gelu(w1 x))), exact GELU, biases."""

  def __init__(self, cfg: PerformerConfig, *, rngs: nnx.Rngs):
    self.w1 = _linear(cfg, cfg.d, cfg.ff_mult * cfg.d, bias=True, rngs=rngs)
    self.w2 = _linear(cfg, cfg.ff_mult * cfg.d, cfg.d, bias=True, rngs=rngs)
    self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)

  def __call__(self, x, *, train: bool = False):
    hid = jax.nn.gelu(self.w1(x).astype(jnp.float32), approximate=False)
    hid = self.drop(hid, deterministic=not train)
    return self.w2(hid).astype(jnp.float32)


class Block(nnx.Module):
  """One layer: f = attention after LN_1, g = feed-forward after LN_2 (`PreLayerNorm`)."""

  def __init__(self, cfg: PerformerConfig, *, rngs: nnx.Rngs):
    self.attn_norm = _layer_norm(cfg, rngs=rngs)
    self.attention = Attention(cfg, rngs=rngs)
    self.ff_norm = _layer_norm(cfg, rngs=rngs)
    self.ff = FeedForward(cfg, rngs=rngs)

  def f(self, x, train: bool):
    return self.attention(self.attn_norm(x), train=train)

  def g(self, x, train: bool):
    return self.ff(self.ff_norm(x), train=train)


class Performer(nnx.Module):
  """PerformerLM without its output layer: tokens int32[B, T] -> float32[B, T, d]."""

  streams = False  # no init_state / step (not built; the full forward only)

  def __init__(self, cfg: PerformerConfig, *, vocab_size: int, rngs: nnx.Rngs):
    self.cfg = cfg
    self.embed = layers.embedding(vocab_size, cfg.d, rngs=rngs)  # token_emb, N(0, 1)
    self.pos_embed = nnx.data(None)
    if cfg.positions == "learned":  # AbsolutePositionalEmbedding, N(0, 1)
      self.pos_embed = layers.embedding(cfg.n_positions, cfg.d, rngs=rngs)
    self.embed_drop = nnx.Dropout(cfg.dropout, rngs=rngs)
    self.blocks = nnx.List([Block(cfg, rngs=rngs) for _ in range(cfg.layers)])
    self.norm = _layer_norm(cfg, rngs=rngs)
    self.feature_key = RedrawState(jax.random.key_data(rngs.params()))
    self.redraw_calls = RedrawState(jnp.zeros((), jnp.int32))  # calls_since_last_redraw
    self.redraws = RedrawState(jnp.zeros((), jnp.int32))

  def features(self) -> list[jax.Array]:
    """Every layer's random projection [M, K]."""
    return [blk.attention.features[...] for blk in self.blocks]

  def set_features(self, projections) -> None:
    """Sets every layer's random projection (a sequence of [M, K] arrays, one per layer)."""
    projections = list(projections)
    if len(projections) != len(self.blocks):
      raise ValueError(f"{len(projections)} projections for {len(self.blocks)} layers")
    for blk, p in zip(self.blocks, projections, strict=True):
      p = jnp.asarray(p, jnp.float32)
      if p.shape != blk.attention.features[...].shape:
        raise ValueError(f"projection shape {p.shape} != {blk.attention.features[...].shape}")
      blk.attention.features.set_value(p)

  def draw_features(self, draw) -> list[jax.Array]:
    """The projections of redraw number `draw` (int), from the model's feature key."""
    cfg = self.cfg
    key = jax.random.fold_in(jax.random.wrap_key_data(self.feature_key[...]), draw)
    return [
      gaussian_orthogonal_random_matrix(jax.random.fold_in(key, i), cfg.features, cfg.head_dim)
      for i in range(cfg.layers)
    ]

  def redraw_features(self) -> None:
    """Redraws every layer's projection now (the reference's `redraw_projection_matrix`)."""
    self.redraws.set_value(self.redraws[...] + 1)
    self.set_features(self.draw_features(self.redraws[...]))

  def _check_redraw(self) -> None:
    """The reference's `ProjectionUpdater.redraw_projections`, once per training forward."""
    interval = self.cfg.feature_redraw_interval
    if not interval:
      return
    calls = self.redraw_calls[...]
    due = calls >= interval
    self.redraw_calls.set_value(jnp.where(due, 0, calls + 1).astype(jnp.int32))
    draws = self.redraws[...] + due.astype(jnp.int32)
    self.redraws.set_value(draws)
    current = self.features()
    new = jax.lax.cond(due, lambda: self.draw_features(draws), lambda: current)
    for blk, p in zip(self.blocks, new, strict=True):
      blk.attention.features.set_value(p)

  def _embed(self, tokens_BT, train: bool):
    t = tokens_BT.shape[1]
    if t > self.cfg.n_positions:
      raise ValueError(
        f"the model has {self.cfg.n_positions} positions but got a sequence of {t} tokens"
      )
    h = self.embed(tokens_BT).astype(jnp.float32)
    if self.pos_embed is not None:
      h = h + self.pos_embed.embedding[:t][None]
    else:
      h = h + sinusoid(t, self.cfg.d)[None]
    return self.embed_drop(h, deterministic=not train)

  def __call__(self, tokens_BT, *, train: bool = False, return_hiddens: bool = False):
    if train:
      self._check_redraw()
    h = self._embed(tokens_BT, train)
    if self.cfg.reversible:
      x1 = x2 = h
      hiddens = [x1 + x2]
      for blk in self.blocks:
        x1 = x1 + blk.f(x2, train)
        x2 = x2 + blk.g(x1, train)
        hiddens.append(x1 + x2)
      h = x1 + x2
    else:
      hiddens = [h]
      for blk in self.blocks:
        h = h + blk.f(h, train)
        h = h + blk.g(h, train)
        hiddens.append(h)
    out = self.norm(h)
    return (out, hiddens) if return_hiddens else out

  def init_state(self, batch: int):
    raise NotImplementedError("the performer has no streaming step; run the full forward instead")

  def step(self, state, tokens_B):
    raise NotImplementedError("the performer has no streaming step; run the full forward instead")


def build_backbone(cfg: PerformerConfig, *, vocab_size: int, rngs: nnx.Rngs) -> Performer:
  """token_emb [+ learned positions] -> blocks -> LayerNorm. `embed` is token_emb (a tied
  head's matrix; the paper's head is untied: `heads.TokenHead` with torch's Linear init, the
  reference's `to_out`)."""
  return Performer(cfg, vocab_size=vocab_size, rngs=rngs)
