"""The `reformer` family: Hugging Face's Reformer (`ReformerModelWithLMHead`) as Toshniwal et al.
trained it (Learning Chess Blindfolded, AAAI 2022, Table 12 and appendix E.1; Kitaev et al.,
Reformer: The Efficient Transformer, ICLR 2020).

The reference is transformers 4.2.2's modeling_reformer.py (the version the paper pins, its
footnote 8) with the release's `ReformerConfig` (learning-chess-blindfolded,
src/model_utils/reformer_model.py): 12 layers in the enwik8 pattern `local local lsh local local
local lsh local local local lsh local`, 12 heads of 64, hidden 768, feed-forward 3072 with ReLU,
chunk length 50 for local and LSH attention (a chunk attends to itself and the one before),
8 hash buckets, 1 / 2 / 4 hashing rounds (sizes L / S / M), axial positions [14, 25] with dims
[256, 512], dropout 0.05 (0 inside LSH attention), LayerNorm eps 1e-12, untied output layer with
bias over both reversible streams. Parameters at vocabulary 77: 83,445,069 (the paper's "83M").

    e = Drop(W_e[tokens]) + P[0..T-1]                                   (hidden_dropout 0.05)
    P[i W + j] = [A_row[i], A_col[j]]   (axial, i < 14, j < W = 25; training drops whole columns j)
    x1 = x2 = e                                           (the two streams of the reversible net)
    y1 = x1 + Drop(W_o Attn(LN_a(x2)))                             (Y_1 = X_1 + f(X_2))
    y2 = x2 + Drop(W_2 relu(Drop(W_1 LN_f(y1) + b_1)) + b_2)       (Y_2 = X_2 + g(Y_1))
    out = Drop(LN([y1, y2]))                  (width 2 x hidden = `d`; then `heads.TokenHead`)

Local attention (per head, q, k, v without bias): q . k / sqrt(K) over the keys j <= i of query
i's chunk and the chunk before (chunks of `local_chunk_length`); masked logits are replaced by
-1e9; softmax as exp(s - logsumexp(s)); dropout 0.05 on the weights.

LSH attention (shared QK): one projection qk (no bias) gives the queries, the keys are the
queries normalised, k = qk / sqrt(mean(qk^2) + 1e-6) / sqrt(K) (so |k| ~ 1), and v its own
projection. Per hashing round r, a random rotation R_r [K, buckets / 2] per head hashes position
t to bucket argmax([qk_t R_r, -qk_t R_r]) (angular LSH). Positions are sorted by (round, bucket,
position), the sorted sequence of all rounds is cut into chunks of `lsh_chunk_length`, and each
chunk attends to itself and the chunk before it in that sorted order (so the first chunk of a
round also sees the last chunk of the previous round, and the first chunk of round 0 the last
chunk of the last round: the reference's roll over all chunks). Masks: a key at a later position
is replaced by -1e9; a key at the query's own position by -1e5 (a token attends to itself only
when nothing else is visible). Each round gives an output o_r and a logsumexp l_r per position;
the rounds combine as sum_r softmax_r(l_r) o_r. Sequences of at most one chunk skip hashing:
plain causal attention with the same masks.

Random rotations are drawn N(0, 1) at every forward, as the reference's (its `hash_seed=None`):
here from each LSH layer's `hash` rng stream (an `nnx.Rngs` stream, falling back to `default`),
or given explicitly (`Reformer.__call__(..., rotations=...)`, one [heads, K, rounds, buckets / 2]
array per LSH layer, the reference's layout) to fix them, as the golden test does.

Sequence lengths. The reference pads (in evaluation) a sequence longer than the smallest chunk
length to a multiple of the chunk lengths' least common multiple, with an attention mask: padded
keys are masked (-1e9) and hashed into an extra bucket `buckets` past the real ones. This model does
the same in training and evaluation (the reference refuses training lengths that are not a
multiple of the chunk length, and its axial positions require training sequences of exactly
14 x 25 = 350 tokens; here training at any length <= 350 uses the first positions of the axial
table). Sequences longer than 350 raise.

Causality: local attention and unhashed LSH attention (at most one chunk) are causal. Hashed LSH
attention never reads a later position's value, but a later token's bucket moves the chunk
boundaries of the sorted sequence, so it can change which earlier keys an earlier query sees:
as in the reference (and the Reformer paper's implementation), earlier outputs can change when
later tokens change. Right-padding therefore changes the real positions' outputs too, unless the
padding is the model's own (masked) padding described above.

Numerics as the reference's forward: reversible layers are computed forward (their recomputing
backward pass saves memory, not values); the chunked feed-forward and LM head (both chunk sizes 0
in the paper's configuration) change nothing numerically. Float32 throughout (`dtype` sets the
Linear matmuls only).

Init (transformers 4.2.2 `ReformerPreTrainedModel._init_weights`): Linear weights and the token
embedding N(0, 0.02), biases 0 (the LM head's too), LayerNorm weight 1 and bias 0, axial factors
N(0, 1) (`axial_norm_std`). The values differ from torch's draws (a different generator).

Hidden states (`return_hiddens=True`): [x1, x2] concatenated (width `d` = 2 x hidden), the
embedding's [e, e] then each layer's [y1, y2], before the final LayerNorm (the reference's own
`hidden_states` output lists only the second stream).
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax.models import layers

FAMILIES = {"reformer": None}

# The enwik8 configuration of the Reformer paper (Hugging Face's google/reformer-enwik8), 12 layers.
ENWIK8_LAYERS = tuple("local local lsh local local local lsh local local local lsh local".split())
ATTENTION_TYPES = ("local", "lsh")
LOCAL_MASK_VALUE = -1e9  # masked logits (causal, padding), local and LSH attention
SELF_MASK_VALUE = -1e5  # LSH: a query's own position, kept only when nothing else is visible
LEN_NORM_EPS = 1e-6  # LSH key normalisation

# size -> (hidden, heads, head_dim, feed-forward, attention layers, axial dims, hashing rounds).
# S / M / L: Toshniwal et al., Table 12 (the rounds tuned per training set); tiny and micro: CPU
# sizes of this codebase with the paper's chunking, buckets and axial shape.
SIZES = {
  "tiny": (64, 2, 32, 256, ("local", "lsh"), (32, 32), 2),
  "micro": (128, 4, 32, 512, ("local", "local", "lsh", "local"), (64, 64), 2),
  "S": (768, 12, 64, 3072, ENWIK8_LAYERS, (256, 512), 2),
  "M": (768, 12, 64, 3072, ENWIK8_LAYERS, (256, 512), 4),
  "L": (768, 12, 64, 3072, ENWIK8_LAYERS, (256, 512), 1),
}


@dataclasses.dataclass(frozen=True)
class ReformerConfig:
  """Hyperparameters of the Reformer (defaults: the paper's, Hugging Face `ReformerConfig` names
  in the comments). `d` = 2 x hidden, the width of the output (both reversible streams)."""

  hidden: int = 768  # hidden_size
  heads: int = 12  # num_attention_heads
  head_dim: int = 64  # attention_head_size
  ff: int = 3072  # feed_forward_size (hidden_act "relu")
  attn_layers: tuple[str, ...] = ENWIK8_LAYERS
  local_chunk_length: int = 50  # local_attn_chunk_length (local_num_chunks_before 1, after 0)
  lsh_chunk_length: int = 50  # lsh_attn_chunk_length (lsh_num_chunks_before 1, after 0)
  buckets: int = 8  # num_buckets (the reference sets 8 on the fly for 350 tokens)
  hashes: int = 1  # num_hashes
  axial_shape: tuple[int, int] = (14, 25)  # axial_pos_shape: positions up to 14 x 25 = 350
  axial_dims: tuple[int, int] = (256, 512)  # axial_pos_embds_dim, summing to hidden
  dropout: float = 0.05  # hidden_dropout_prob
  local_attn_dropout: float = 0.05  # local_attention_probs_dropout_prob
  lsh_attn_dropout: float = 0.0  # lsh_attention_probs_dropout_prob
  norm_eps: float = 1e-12  # layer_norm_eps
  init_std: float = 0.02  # initializer_range
  axial_init_std: float = 1.0  # axial_norm_std
  dtype: str = "float32"  # matmul dtype of the Linears: "float32" | "bfloat16"
  d: int = dataclasses.field(init=False)  # 2 x hidden: the head's input width

  def __post_init__(self):
    object.__setattr__(self, "d", 2 * self.hidden)
    object.__setattr__(self, "attn_layers", tuple(self.attn_layers))
    object.__setattr__(self, "axial_shape", tuple(self.axial_shape))
    object.__setattr__(self, "axial_dims", tuple(self.axial_dims))
    layers.check_config(self, rates=("dropout", "local_attn_dropout", "lsh_attn_dropout"))
    if not self.attn_layers or any(a not in ATTENTION_TYPES for a in self.attn_layers):
      raise ValueError(f"attn_layers must be a non-empty sequence of {ATTENTION_TYPES}")
    if len(self.axial_shape) != 2 or len(self.axial_dims) != 2:
      raise ValueError("axial_shape and axial_dims must have two factors each")
    if sum(self.axial_dims) != self.hidden:
      raise ValueError(f"axial_dims {self.axial_dims} must sum to hidden={self.hidden}")
    if self.buckets < 2 or self.buckets % 2:
      raise ValueError(f"buckets must be even and >= 2, got {self.buckets}")
    if self.hashes < 1 or self.local_chunk_length < 1 or self.lsh_chunk_length < 1:
      raise ValueError("hashes and chunk lengths must be positive")

  @property
  def layers(self) -> int:
    return len(self.attn_layers)

  @property
  def max_positions(self) -> int:
    return self.axial_shape[0] * self.axial_shape[1]

  def _chunks(self) -> list[int]:
    kinds = set(self.attn_layers)
    return [n for kind, n in (("local", self.local_chunk_length), ("lsh", self.lsh_chunk_length))
            if kind in kinds]  # fmt: skip

  def padded_length(self, t: int) -> int:
    """The reference's padding: a sequence longer than the smallest chunk length is padded to a
    multiple of the chunk lengths' least common multiple."""
    chunks = self._chunks()
    lcm = math.lcm(*chunks)
    return t if t <= min(chunks) or t % lcm == 0 else t + lcm - t % lcm


def base_config(family: str, size: str) -> ReformerConfig:
  """The Reformer at `size` (`SIZES`); `family` is `reformer` or this module's dotted path."""
  hidden, heads, head_dim, ff, attn_layers, axial_dims, hashes = SIZES[size]
  return ReformerConfig(
    hidden=hidden,
    heads=heads,
    head_dim=head_dim,
    ff=ff,
    attn_layers=attn_layers,
    axial_dims=axial_dims,
    hashes=hashes,
  )


def _softmax_weights(logits):
  """exp(s - logsumexp(s)) over the last axis, and the logsumexp (the reference's form)."""
  lse = jax.nn.logsumexp(logits, axis=-1, keepdims=True)
  return jnp.exp(logits - lse), lse[..., 0]


def _look_back(x, axis: int = 2):
  """Chunks [..., n, c, ...] -> [..., n, 2c, ...]: the previous chunk (cyclically, as the
  reference's `_look_adjacent`), then the chunk itself, along the axis after `axis`."""
  return jnp.concatenate([jnp.roll(x, 1, axis=axis), x], axis=axis + 1)


def local_attention(q_BHTK, k_BHTK, v_BHTK, *, chunk: int, key_mask_T=None, drop=None):
  """Causal attention of each query to the keys j <= i in its chunk and the chunk before.

  [B, H, T, K] each, T a multiple of `chunk` or at most `chunk` (then plain causal attention).
  `key_mask_T` (bool[T], None: all real) masks padded keys; `drop` is the weights' dropout.
  """
  b, h, t, kd = q_BHTK.shape
  k_BHTK = k_BHTK / jnp.sqrt(jnp.float32(kd))
  pos = jnp.arange(t)
  if t <= chunk:
    logits = jnp.einsum("bhqk,bhsk->bhqs", q_BHTK, k_BHTK)
    visible = pos[:, None] >= pos[None, :]
    if key_mask_T is not None:
      visible = visible & key_mask_T[None, :]
    w, _ = _softmax_weights(jnp.where(visible, logits, LOCAL_MASK_VALUE))
    if drop is not None:
      w = drop(w)
    return jnp.einsum("bhqs,bhsk->bhqk", w, v_BHTK)
  n, kv = t // chunk, v_BHTK.shape[-1]
  q = q_BHTK.reshape(b, h, n, chunk, kd)
  k = _look_back(k_BHTK.reshape(b, h, n, chunk, kd))
  v = _look_back(v_BHTK.reshape(b, h, n, chunk, kv))
  q_pos = pos.reshape(n, chunk)
  k_pos = _look_back(q_pos, axis=0)  # [n, 2 chunk]
  visible = q_pos[:, :, None] >= k_pos[:, None, :]
  if key_mask_T is not None:
    visible = visible & key_mask_T[k_pos][:, None, :]
  logits = jnp.einsum("bhnqk,bhnsk->bhnqs", q, k)
  w, _ = _softmax_weights(jnp.where(visible, logits, LOCAL_MASK_VALUE))
  if drop is not None:
    w = drop(w)
  return jnp.einsum("bhnqs,bhnsk->bhnqk", w, v).reshape(b, h, t, kv)


def hash_buckets(qk_BHTK, rotations_HKRN, *, key_mask_T=None):
  """Angular LSH buckets int32[B, H, rounds, T] of the shared query-keys (no gradient).

  bucket = argmax([x R_r, -x R_r]) with `rotations_HKRN` [H, K, rounds, buckets / 2]; padded
  positions (`key_mask_T` False) go to an extra bucket `buckets` (the reference's)."""
  x = jax.lax.stop_gradient(qk_BHTK)
  rotated = jnp.einsum("bhtk,hkrn->bhrtn", x, rotations_HKRN.astype(x.dtype))
  buckets = jnp.argmax(jnp.concatenate([rotated, -rotated], axis=-1), axis=-1).astype(jnp.int32)
  if key_mask_T is not None:
    buckets = jnp.where(key_mask_T, buckets, 2 * rotations_HKRN.shape[-1])
  return buckets


def lsh_attention(qk_BHTK, v_BHTK, buckets_BHRT, *, chunk: int, key_mask_T=None, drop=None):
  """Shared-QK attention within the chunks of the bucket-sorted sequence, combined over rounds.

  [B, H, T, K] each and the buckets of `hash_buckets`; T a multiple of `chunk` (the caller
  pads). Sorting is by (round, bucket, position); each chunk of the sorted sequence of all rounds
  attends to itself and the one before; the rounds combine by their logsumexps.
  """
  b, h, t, kd = qk_BHTK.shape
  rounds = buckets_BHRT.shape[2]
  # A round offset past every bucket keeps the rounds apart (the reference's offsets); a stable
  # sort keeps positions in order within a bucket (its `_stable_argsort`).
  span = jnp.max(buckets_BHRT) + 1
  offsets = (jnp.arange(rounds, dtype=jnp.int32) * span)[None, None, :, None]
  keys = (buckets_BHRT + offsets).reshape(b, h, rounds * t)
  order = jnp.argsort(keys, axis=-1, stable=True)  # [B, H, R T]: sorted slot -> flat index
  undo = jnp.argsort(order, axis=-1)  # flat index -> sorted slot
  pos = order % t  # the sorted slots' positions
  gather = lambda x: jnp.take_along_axis(x, pos[..., None], axis=2)  # noqa: E731
  qk, v = gather(qk_BHTK), gather(v_BHTK)  # [B, H, R T, K]
  n, kv = rounds * t // chunk, v_BHTK.shape[-1]
  q = qk.reshape(b, h, n, chunk, kd)
  k = qk * jax.lax.rsqrt(jnp.mean(qk * qk, axis=-1, keepdims=True) + LEN_NORM_EPS)
  k = k * jax.lax.rsqrt(jnp.float32(kd))
  k = _look_back(k.reshape(b, h, n, chunk, kd))
  v = _look_back(v.reshape(b, h, n, chunk, kv))
  q_pos = pos.reshape(b, h, n, chunk)
  k_pos = _look_back(q_pos)
  logits = jnp.einsum("bhnqk,bhnsk->bhnqs", q, k)
  visible = q_pos[..., :, None] >= k_pos[..., None, :]
  if key_mask_T is not None:
    visible = visible & key_mask_T[k_pos][..., None, :]
  logits = jnp.where(visible, logits, LOCAL_MASK_VALUE)
  logits = jnp.where(q_pos[..., :, None] != k_pos[..., None, :], logits, SELF_MASK_VALUE)
  w, lse = _softmax_weights(logits)
  if drop is not None:
    w = drop(w)
  out = jnp.einsum("bhnqs,bhnsk->bhnqk", w, v).reshape(b, h, rounds * t, kv)
  lse = lse.reshape(b, h, rounds * t)
  out = jnp.take_along_axis(out, undo[..., None], axis=2).reshape(b, h, rounds, t, kv)
  lse = jnp.take_along_axis(lse, undo, axis=2).reshape(b, h, rounds, t)
  if rounds == 1:
    return out[:, :, 0]
  weights = jnp.exp(lse - jax.nn.logsumexp(lse, axis=2, keepdims=True))
  return jnp.sum(out * weights[..., None], axis=2)


def lsh_full_attention(qk_BHTK, v_BHTK, *, key_mask_T=None, drop=None):
  """LSH attention of a sequence of at most one chunk: no hashing, causal shared-QK attention
  with the self mask (the reference's `do_standard_self_attention`)."""
  t, kd = qk_BHTK.shape[2], qk_BHTK.shape[3]
  k = qk_BHTK * jax.lax.rsqrt(jnp.mean(qk_BHTK * qk_BHTK, axis=-1, keepdims=True) + LEN_NORM_EPS)
  k = k * jax.lax.rsqrt(jnp.float32(kd))
  pos = jnp.arange(t)
  logits = jnp.einsum("bhqk,bhsk->bhqs", qk_BHTK, k)
  visible = pos[:, None] >= pos[None, :]
  if key_mask_T is not None:
    visible = visible & key_mask_T[None, :]
  logits = jnp.where(visible, logits, LOCAL_MASK_VALUE)
  logits = jnp.where(pos[:, None] != pos[None, :], logits, SELF_MASK_VALUE)
  w, _ = _softmax_weights(logits)
  if drop is not None:
    w = drop(w)
  return jnp.einsum("bhqs,bhsk->bhqk", w, v_BHTK)


def _linear(cfg: ReformerConfig, d_in: int, d_out: int, *, rngs: nnx.Rngs, bias: bool):
  """torch nn.Linear as the reference initialises it: weight N(0, init_std), bias 0."""
  return layers.Linear(
    d_in,
    d_out,
    use_bias=bias,
    kernel_init=nnx.initializers.normal(cfg.init_std),
    bias_init=nnx.initializers.zeros_init(),
    dtype=layers.DTYPES[cfg.dtype],
    param_dtype=jnp.float32,
    rngs=rngs,
  )


def _layer_norm(cfg: ReformerConfig, width: int, *, rngs: nnx.Rngs) -> nnx.LayerNorm:
  """torch `nn.LayerNorm(width, eps=1e-12)`: weight 1, bias 0, exact (two-pass) variance."""
  return nnx.LayerNorm(width, epsilon=cfg.norm_eps, use_fast_variance=False, rngs=rngs)


class LocalSelfAttention(nnx.Module):
  """Chunked causal attention (query, key, value projections without bias)."""

  def __init__(self, cfg: ReformerConfig, *, rngs: nnx.Rngs):
    inner = cfg.heads * cfg.head_dim
    self.cfg = cfg
    self.query = _linear(cfg, cfg.hidden, inner, rngs=rngs, bias=False)
    self.key = _linear(cfg, cfg.hidden, inner, rngs=rngs, bias=False)
    self.value = _linear(cfg, cfg.hidden, inner, rngs=rngs, bias=False)
    self.attn_drop = nnx.Dropout(cfg.local_attn_dropout, rngs=rngs)

  def __call__(self, x_BTD, *, train: bool = False, key_mask_T=None, rotations=None):
    del rotations
    cfg = self.cfg
    split = lambda y: _heads(y, cfg)  # noqa: E731
    drop = None
    if train and cfg.local_attn_dropout > 0.0:
      drop = lambda w: self.attn_drop(w, deterministic=False)  # noqa: E731
    o = local_attention(
      split(self.query(x_BTD)),
      split(self.key(x_BTD)),
      split(self.value(x_BTD)),
      chunk=cfg.local_chunk_length,
      key_mask_T=key_mask_T,
      drop=drop,
    )
    return _merge(o)


class LSHSelfAttention(nnx.Module):
  """Shared-QK attention over locality-sensitive hash buckets (query_key and value projections
  without bias); rotations drawn from the `hash` stream at every call unless given."""

  def __init__(self, cfg: ReformerConfig, *, rngs: nnx.Rngs):
    inner = cfg.heads * cfg.head_dim
    self.cfg = cfg
    self.query_key = _linear(cfg, cfg.hidden, inner, rngs=rngs, bias=False)
    self.value = _linear(cfg, cfg.hidden, inner, rngs=rngs, bias=False)
    self.attn_drop = nnx.Dropout(cfg.lsh_attn_dropout, rngs=rngs)
    self.hash_rngs = rngs["hash"].fork()

  @property
  def rotations_shape(self) -> tuple[int, int, int, int]:
    cfg = self.cfg
    return (cfg.heads, cfg.head_dim, cfg.hashes, cfg.buckets // 2)

  def __call__(self, x_BTD, *, train: bool = False, key_mask_T=None, rotations=None):
    cfg = self.cfg
    qk = _heads(self.query_key(x_BTD), cfg)
    v = _heads(self.value(x_BTD), cfg)
    drop = None
    if train and cfg.lsh_attn_dropout > 0.0:
      drop = lambda w: self.attn_drop(w, deterministic=False)  # noqa: E731
    if x_BTD.shape[1] <= cfg.lsh_chunk_length:
      return _merge(lsh_full_attention(qk, v, key_mask_T=key_mask_T, drop=drop))
    if rotations is None:
      rotations = jax.random.normal(self.hash_rngs(), self.rotations_shape, jnp.float32)
    elif tuple(rotations.shape) != self.rotations_shape:
      raise ValueError(f"rotations must have shape {self.rotations_shape}, got {rotations.shape}")
    buckets = hash_buckets(qk, jnp.asarray(rotations), key_mask_T=key_mask_T)
    o = lsh_attention(qk, v, buckets, chunk=cfg.lsh_chunk_length, key_mask_T=key_mask_T, drop=drop)
    return _merge(o)


def _heads(x_BTD, cfg: ReformerConfig):
  b, t, _ = x_BTD.shape
  return x_BTD.astype(jnp.float32).reshape(b, t, cfg.heads, cfg.head_dim).transpose(0, 2, 1, 3)


def _merge(o_BHTK):
  b, h, t, k = o_BHTK.shape
  return o_BHTK.transpose(0, 2, 1, 3).reshape(b, t, h * k)


class ReformerLayer(nnx.Module):
  """One reversible layer: y1 = x1 + Drop(W_o Attn(LN(x2))), y2 = x2 + FF(y1)."""

  def __init__(self, cfg: ReformerConfig, kind: str, *, rngs: nnx.Rngs):
    self.kind = kind
    self.attn_norm = _layer_norm(cfg, cfg.hidden, rngs=rngs)
    attention = LSHSelfAttention if kind == "lsh" else LocalSelfAttention
    self.attention = attention(cfg, rngs=rngs)
    self.attn_out = _linear(cfg, cfg.heads * cfg.head_dim, cfg.hidden, rngs=rngs, bias=False)
    self.ff_norm = _layer_norm(cfg, cfg.hidden, rngs=rngs)
    self.ff_in = _linear(cfg, cfg.hidden, cfg.ff, rngs=rngs, bias=True)
    self.ff_out = _linear(cfg, cfg.ff, cfg.hidden, rngs=rngs, bias=True)
    self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)

  def _drop(self, x, train: bool):
    return self.drop(x.astype(jnp.float32), deterministic=not train)

  def __call__(self, x1, x2, *, train: bool = False, key_mask_T=None, rotations=None):
    a = self.attention(self.attn_norm(x2), train=train, key_mask_T=key_mask_T, rotations=rotations)
    y1 = x1 + self._drop(self.attn_out(a), train)
    f = jax.nn.relu(self._drop(self.ff_in(self.ff_norm(y1)), train))
    y2 = x2 + self._drop(self.ff_out(f), train)
    return y1, y2


class AxialPositions(nnx.Module):
  """Axial position embeddings: position i W + j -> [row[i], col[j]] (W = axial_shape[1]).

  In training, dropout (the hidden dropout) zeroes whole columns j of the [rows, W] grid per
  sequence and scales the rest by 1 / (1 - p), the reference's `dropout2d` on the transposed grid.
  """

  def __init__(self, cfg: ReformerConfig, *, rngs: nnx.Rngs):
    (rows, cols), (d_row, d_col) = cfg.axial_shape, cfg.axial_dims
    init = nnx.initializers.normal(cfg.axial_init_std)
    self.row = nnx.Param(init(rngs.params(), (rows, d_row), jnp.float32))
    self.col = nnx.Param(init(rngs.params(), (cols, d_col), jnp.float32))
    self.drop = nnx.Dropout(cfg.dropout, broadcast_dims=(1, 3), rngs=rngs)

  def __call__(self, batch: int, t: int, *, train: bool = False):
    row, col = self.row[...], self.col[...]
    rows, cols = row.shape[0], col.shape[0]
    grid = jnp.concatenate(
      [
        jnp.broadcast_to(row[:, None, :], (rows, cols, row.shape[1])),
        jnp.broadcast_to(col[None, :, :], (rows, cols, col.shape[1])),
      ],
      axis=-1,
    )  # [rows, cols, hidden]
    if not train or self.drop.rate == 0.0:
      return grid.reshape(rows * cols, -1)[None, :t]
    grid = jnp.broadcast_to(grid[None], (batch, *grid.shape))
    grid = self.drop(grid, deterministic=False)  # one draw per (sequence, column)
    return grid.reshape(batch, rows * cols, -1)[:, :t]


class Reformer(nnx.Module):
  """Token ids int32[B, T] -> float32[B, T, 2 hidden] (LN of both reversible streams)."""

  streams = False  # chunked and hashed attention over the whole sequence; no incremental step

  def __init__(self, cfg: ReformerConfig, *, vocab_size: int, rngs: nnx.Rngs):
    self.cfg = cfg
    self.embed = layers.embedding(vocab_size, cfg.hidden, rngs=rngs, stddev=cfg.init_std)
    self.pos_embed = AxialPositions(cfg, rngs=rngs)
    self.embed_drop = nnx.Dropout(cfg.dropout, rngs=rngs)
    self.layers = nnx.List([ReformerLayer(cfg, kind, rngs=rngs) for kind in cfg.attn_layers])
    self.norm = _layer_norm(cfg, cfg.d, rngs=rngs)
    self.out_drop = nnx.Dropout(cfg.dropout, rngs=rngs)

  @property
  def lsh_layers(self) -> list[int]:
    return [i for i, kind in enumerate(self.cfg.attn_layers) if kind == "lsh"]

  def __call__(
    self, tokens_BT, *, train: bool = False, return_hiddens: bool = False, rotations=None
  ):
    """`rotations`: None (drawn) or one [heads, head_dim, hashes, buckets / 2] array (or None)
    per LSH layer, in layer order."""
    cfg = self.cfg
    b, t = tokens_BT.shape
    padded = cfg.padded_length(t)
    if padded > cfg.max_positions:
      raise ValueError(
        f"the Reformer has {cfg.max_positions} axial positions ({cfg.axial_shape}) but got a "
        f"sequence of {t} tokens (padded to {padded}); shorten it or change axial_shape"
      )
    lsh = self.lsh_layers
    if rotations is None:
      rotations = [None] * len(lsh)
    if len(rotations) != len(lsh):
      raise ValueError(f"expected {len(lsh)} rotation arrays (one per LSH layer)")
    per_layer = dict(zip(lsh, rotations, strict=True))
    key_mask = None
    if padded != t:
      tokens_BT = jnp.pad(tokens_BT, ((0, 0), (0, padded - t)))  # the reference's pad id 0
      key_mask = jnp.arange(padded) < t
    e = self.embed_drop(self.embed(tokens_BT).astype(jnp.float32), deterministic=not train)
    x1 = x2 = e + self.pos_embed(b, padded, train=train)
    hiddens = [jnp.concatenate([x1, x2], axis=-1)[:, :t]] if return_hiddens else []
    for i, layer in enumerate(self.layers):
      x1, x2 = layer(x1, x2, train=train, key_mask_T=key_mask, rotations=per_layer.get(i))
      if return_hiddens:
        hiddens.append(jnp.concatenate([x1, x2], axis=-1)[:, :t])
    out = self.norm(jnp.concatenate([x1, x2], axis=-1))
    out = self.out_drop(out, deterministic=not train)[:, :t]
    return (out, hiddens) if return_hiddens else out

  def init_state(self, batch: int):
    raise NotImplementedError(
      "ReformerConfig: this model has no streaming step (chunked and hashed attention); run the "
      "full forward instead"
    )

  def step(self, state, tokens_B):
    self.init_state(0)  # raises


def head_options(cfg: ReformerConfig) -> dict:
  """The untied head over both streams, 2 hidden -> V: N(0, init_std) kernel, zero bias (the
  reference's `lm_head.decoder` with its bias)."""
  return {
    "kernel_init": nnx.initializers.normal(cfg.init_std),
    "bias_init": nnx.initializers.zeros_init(),
    "dtype": layers.DTYPES[cfg.dtype],
  }


def build_backbone(cfg: ReformerConfig, *, vocab_size: int, rngs: nnx.Rngs) -> Reformer:
  """Token embedding, axial positions, the reversible layers, the final LayerNorm over both
  streams, in the reference's order. No streaming step."""
  return Reformer(cfg, vocab_size=vocab_size, rngs=rngs)
