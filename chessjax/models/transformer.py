"""The `transformer` family: a small LLaMA-like causal decoder.

The released configuration is the Chess-World-Model `ChessCausalTransformer` (models/
transformer.py of the release; Walker & Lyons, Chess-World-Model, appendix B.2). Pre-norm blocks,
head_dim = d / heads = 64 at every size:

    h = Drop(Embed(moves))                                    (embedding N(0, 1), torch default)
    h += Drop(W_o Attn(RoPE(q), RoPE(k), v)),   [q, k, v] = W_qkv RMSNorm1(h)    (biases on)
    h += Drop(W_2 (silu(g) * v)),               [g, v] = W_1 RMSNorm2(h)         (gate first)
    out = RMSNorm(h)                                     (then a head, `chessjax.models.heads`)

W_qkv: d -> 3d laid out (3, heads, head_dim); W_o: d -> d; W_1: d -> 8d; W_2: 4d -> d; all with
bias and torch default inits; RMSNorm eps 1e-6; causal softmax attention scaled by
1/sqrt(head_dim) with dropout on the attention weights (torch's scaled_dot_product_attention);
positions are absolute step indices (START at 0).

RoPE with inverse frequencies w_i = 1 / 10000^(2i / K), i < K/2, at position t:

* `rope="reference"` (default, faithful): the release builds cos/sin tables as concat(freqs,
  freqs) but rotates adjacent pairs, `x' = x cos + rotate_pairs(x) sin` with rotate_pairs(x) =
  (-x_1, x_0, -x_3, x_2, ...), so element j uses angle t w_(j mod K/2) and a pair (2i, 2i+1) mixes
  two different angles: not a true rotation, but what produced the published numbers.
* `rope="standard"`: pair (2i, 2i+1) rotated by t w_i (a proper rotation, GPT-J layout).

Padding is on the right and attention is causal, so valid positions never see PAD tokens.
`dtype="bfloat16"` runs the Linear matmuls and the attention products in bfloat16 (the softmax,
norms, residual stream and parameters stay float32).
"""

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax import flops
from chessjax.models import layers
from chessjax.models.sizes import SIZES
from chessjax.models.stack import Stack

FAMILIES = ("transformer",)
GRID = True  # every size of models.sizes.SIZES, a family of the paper's grid
RECIPE = "transformer"  # its row of Table 7 (chessjax.world_model.grid)
ROPES = ("reference", "standard")


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
  """Hyperparameters of the Transformer (defaults: the released configuration)."""

  d: int
  layers: int
  heads: int
  dropout: float = 0.1  # embedding, attention weights and both residual branches
  ff_mult: int = 4
  norm_eps: float = 1e-6
  rope: str = "reference"  # "reference" (the release's quirk) | "standard"
  rope_base: float = 10000.0
  dtype: str = "float32"  # matmul dtype: "float32" | "bfloat16"

  def __post_init__(self):
    if self.rope not in ROPES:
      raise ValueError(f"rope must be one of {ROPES}, got {self.rope!r}")
    layers.check_config(self)
    if self.d % self.heads or (self.d // self.heads) % 2:
      raise ValueError(f"d={self.d} must split into {self.heads} heads of even size")

  @property
  def head_dim(self) -> int:
    return self.d // self.heads


def base_config(family: str, size: str) -> TransformerConfig:
  """The released configuration of the Transformer at `size`."""
  if family not in FAMILIES:
    raise ValueError(f"{family!r} is not the transformer family")
  d, n_layers, heads = SIZES[size]
  return TransformerConfig(d=d, layers=n_layers, heads=heads)


def rope_angles(steps: int, head_dim: int, *, mode: str = "reference", base: float = 10000.0):
  """Per-element angles [T, K]: element j at step t turns by t w_(j mod K/2) ("reference") or
  t w_(j // 2) ("standard")."""
  inv_freq = 1.0 / base ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)
  freqs = jnp.arange(steps, dtype=jnp.float32)[:, None] * inv_freq[None, :]  # [T, K/2]
  if mode == "reference":
    return jnp.concatenate([freqs, freqs], axis=-1)
  if mode == "standard":
    return jnp.repeat(freqs, 2, axis=-1)
  raise ValueError(f"rope must be one of {ROPES}, got {mode!r}")


def apply_rope(x_BTHK, angles_TK):
  """`x cos + rotate_pairs(x) sin` with rotate_pairs(x)_(2i, 2i+1) = (-x_(2i+1), x_(2i))."""
  cos = jnp.cos(angles_TK)[:, None, :]
  sin = jnp.sin(angles_TK)[:, None, :]
  pairs = x_BTHK.reshape(*x_BTHK.shape[:-1], -1, 2)
  rotated = jnp.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x_BTHK.shape)
  return x_BTHK * cos + rotated * sin


def causal_attention(q_BTHK, k_BTHK, v_BTHK, *, dtype=jnp.float32, drop=None, block=128):
  """softmax(q k^T / sqrt(K) + causal mask) v, [B, T, H, K] each; products in `dtype`.

  With `drop` (a function of float32 (float64) weights [B, H, queries, keys]) the weights are formed
  explicitly so dropout can act on them, as torch's scaled_dot_product_attention does in
  training; without it `jax.nn.dot_product_attention` runs (a fused kernel where the backend has
  one). The explicit form goes `block` queries at a time against the keys up to the block's
  end, so the masked triangle right of each block is never formed: the values are those of the
  full T x T form (masked weights are zero either way) at about half its cost for long games.
  """
  if drop is None:
    q, k, v = (x.astype(dtype) for x in (q_BTHK, k_BTHK, v_BTHK))
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)
  q, k, v = (x.astype(dtype).transpose(0, 2, 1, 3) for x in (q_BTHK, k_BTHK, v_BTHK))  # BHTK
  t, outs = q.shape[2], []
  for start in range(0, t, block):
    end = min(start + block, t)
    logits = jnp.einsum("bhqk,bhsk->bhqs", q[:, :, start:end], k[:, :, :end])
    logits = logits.astype(jnp.promote_types(dtype, jnp.float32)) * q.shape[-1] ** -0.5
    causal = jnp.arange(start, end)[:, None] >= jnp.arange(end)[None, :]
    weights = jax.nn.softmax(jnp.where(causal, logits, -jnp.inf), axis=-1)
    outs.append(jnp.einsum("bhqs,bhsk->bhqk", drop(weights).astype(dtype), v[:, :, :end]))
  return jnp.concatenate(outs, axis=2).transpose(0, 2, 1, 3)


class Attention(nnx.Module):
  """Causal multi-head self-attention with RoPE (torch `CausalSelfAttention` of the release)."""

  def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    mm = layers.DTYPES[cfg.dtype]
    self.qkv = layers.torch_linear(cfg.d, 3 * cfg.d, rngs=rngs, dtype=mm)
    self.out = layers.torch_linear(cfg.d, cfg.d, rngs=rngs, dtype=mm)
    self.attn_drop = nnx.Dropout(cfg.dropout, rngs=rngs)

  def __call__(self, x_BTD, *, train: bool = False):
    cfg = self.cfg
    b, t, _ = x_BTD.shape
    qkv = self.qkv(x_BTD).reshape(b, t, 3, cfg.heads, cfg.head_dim)
    angles = rope_angles(t, cfg.head_dim, mode=cfg.rope, base=cfg.rope_base)
    # RoPE in float32: angles reach t * 1 rad and bfloat16 would blur them.
    q = apply_rope(qkv[:, :, 0].astype(jnp.float32), angles)
    k = apply_rope(qkv[:, :, 1].astype(jnp.float32), angles)
    v = qkv[:, :, 2]
    drop = None
    if train and cfg.dropout > 0.0:
      drop = lambda w: self.attn_drop(w, deterministic=False)  # noqa: E731
    o = causal_attention(q, k, v, dtype=layers.DTYPES[cfg.dtype], drop=drop)
    return self.out(o.reshape(b, t, cfg.d)).astype(jnp.float32)


def swiglu(cfg: TransformerConfig, *, rngs: nnx.Rngs) -> layers.GatedMLP:
  """W_2(silu(g) * v) with [g, v] = W_1 x (first half is the gate), biases on, torch inits."""
  return layers.GatedMLP(
    cfg.d, cfg.ff_mult * cfg.d, rngs=rngs, layout="gate_value", dtype=layers.DTYPES[cfg.dtype]
  )


def block(cfg: TransformerConfig, *, rngs: nnx.Rngs) -> layers.ResidualBlock:
  """Pre-norm decoder block (the release's `ModernDecoderBlock`); modules built in its order."""
  norm1 = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  attn = Attention(cfg, rngs=rngs)
  norm2 = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  mlp = swiglu(cfg, rngs=rngs)
  drop = nnx.Dropout(cfg.dropout, rngs=rngs)
  return layers.ResidualBlock(norm1, attn, norm2, mlp, drop)


def head_options(cfg: TransformerConfig) -> dict:
  """Output head: torch-default Linear inits, the model's matmul dtype."""
  return {"dtype": layers.DTYPES[cfg.dtype]}


def forward_flops(cfg: TransformerConfig, t: int) -> dict[str, float]:
  """Forward FLOPs per token of the backbone at length `t` (`chessjax.flops`): W_qkv and W_o,
  causal attention in blocks of 128 queries (q k^T and the weights times v against the keys up to
  each block's end), the gated MLP (d -> 8d, 4d -> d)."""
  d, mm = cfg.d, flops.mm
  return {
    "projections": cfg.layers * (mm(3 * d, d) + mm(d, d)),
    "mixer": cfg.layers * 2 * mm(flops.attended_keys(t), d),
    "mlp": cfg.layers * (mm(2 * cfg.ff_mult * d, d) + mm(d, cfg.ff_mult * d)),
  }


def build_backbone(cfg: TransformerConfig, *, vocab_size: int, rngs: nnx.Rngs) -> Stack:
  """Embedding (N(0, 1), torch default) -> dropout -> decoder blocks -> RMSNorm. No streaming step
  (the released model is evaluated on whole games; no KV cache)."""
  embed = layers.embedding(vocab_size, cfg.d, rngs=rngs)
  embed_drop = nnx.Dropout(cfg.dropout, rngs=rngs)
  blocks = [block(cfg, rngs=rngs) for _ in range(cfg.layers)]
  norm = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  return Stack(cfg, embed=embed, blocks=blocks, norm=norm, embed_drop=embed_drop)
