"""The `gpt2` and `gpt2_w50` families: Hugging Face GPT-2 (`GPT2LMHeadModel`) as of 2021.

The base language model of Toshniwal et al. (Learning Chess Blindfolded, AAAI 2022, section 4 and
Tables 9 and 12): GPT2-small trained from scratch with 512 learned positions. The reference is the
paper's release (learning-chess-blindfolded, src/model_utils/gpt2_model.py, a copy of transformers
4.2.2's modeling_gpt2.py; `GPT2Config` defaults otherwise). Pre-LayerNorm blocks:

    h = Drop(W_te[tokens] + W_pe[0..T-1])                            (embd_pdrop 0.1)
    h += Drop(c_proj Attn(q, k, v)),   [q, k, v] = c_attn LN_1(h)    (resid_pdrop 0.1)
    h += Drop(c_proj gelu_tanh(c_fc LN_2(h)))                        (resid_pdrop 0.1)
    out = LN_f(h)                        (then a head: tied to W_te, no bias, `heads.TokenHead`)

    Attn: softmax(where(mask, q k^T / sqrt(K), -1e4)) v per head, then Drop (attn_pdrop 0.1)
    gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))         (HF "gelu_new")

c_attn: d -> 3d laid out (3, heads, head_dim), HF's fused Conv1D (whose (in, out) weight is the
Flax kernel as is); c_proj: d -> d; c_fc: d -> 4d; MLP c_proj: 4d -> d; all with bias. LayerNorm
eps 1e-5 with the exact (two-pass) variance, as torch. The causal mask keeps key j for query i
iff 0 <= i - j, and `gpt2_w50` (`window=50`, the release's `get_last_window_attn_mask`) iff
0 <= i - j <= 50. Masked logits are *replaced* by the finite -1e4 (HF's `masked_bias`), so even a
fully masked row gives finite (uniform) weights, never NaN.

Init (transformers 4.2.2 `GPT2PreTrainedModel._init_weights`, the version the paper pins): every
Linear/Conv1D and Embedding weight N(0, 0.02), biases 0, LayerNorm weight 1 and bias 0. Later 4.x
releases also redraw every `c_proj.weight` from N(0, 0.02 / sqrt(2 layers)) (the GPT-2 paper's
residual scaling); that is `scale_residual_init=True`, off by default.

Parameters at vocabulary V: (V + 512) d + layers (12 d^2 + 13 d) + 2 d; GPT2-small at V = 77 is
85,508,352 (tied head counted once).
"""

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax import flops
from chessjax.models import layers
from chessjax.models.stack import Stack

FAMILIES = {"gpt2": None, "gpt2_w50": 50}  # family -> attention window (None: full causal)
# (d, layers, heads). small / intermediate / medium: Toshniwal et al., Table 9 (GPT2-small is
# Hugging Face's `gpt2`); tiny, micro and mini: CPU sizes of this codebase.
SIZES = {
  "tiny": (64, 2, 2),
  "micro": (128, 4, 4),
  "mini": (256, 4, 4),
  "small": (768, 12, 12),
  "intermediate": (768, 16, 12),
  "medium": (1024, 24, 16),
}
MASK_VALUE = -1e4  # HF GPT-2's `masked_bias`: replaces (not added to) masked attention logits


@dataclasses.dataclass(frozen=True)
class GPT2Config:
  """Hyperparameters of GPT-2 (defaults: Hugging Face `GPT2Config` with n_positions 512)."""

  d: int
  layers: int
  heads: int
  n_positions: int = 512
  window: int | None = None  # key j visible to query i iff 0 <= i - j <= window (None: causal)
  dropout: float = 0.1  # embd_pdrop = attn_pdrop = resid_pdrop
  ff_mult: int = 4
  norm_eps: float = 1e-5
  init_std: float = 0.02  # initializer_range
  scale_residual_init: bool = False  # c_proj weights N(0, init_std / sqrt(2 layers)): HF >= 4.x
  dtype: str = "float32"  # matmul dtype: "float32" | "bfloat16"

  def __post_init__(self):
    layers.check_config(self)
    if self.d % self.heads:
      raise ValueError(f"d={self.d} must split into {self.heads} heads")
    if self.window is not None and self.window < 0:
      raise ValueError(f"window must be None or >= 0, got {self.window}")
    if self.n_positions < 1:
      raise ValueError(f"n_positions must be positive, got {self.n_positions}")

  @property
  def head_dim(self) -> int:
    return self.d // self.heads


def base_config(family: str, size: str) -> GPT2Config:
  """GPT-2 at `size` (`SIZES`); `gpt2_w50` attends to the last 50 tokens."""
  if family not in FAMILIES:
    raise ValueError(f"{family!r} is not a GPT-2 family {sorted(FAMILIES)}")
  d, n_layers, heads = SIZES[size]
  return GPT2Config(d=d, layers=n_layers, heads=heads, window=FAMILIES[family])


def attention_mask(queries, keys, window: int | None = None):
  """bool[len(queries), len(keys)]: key j visible to query i iff 0 <= i - j (<= window)."""
  diff = jnp.asarray(queries)[:, None] - jnp.asarray(keys)[None, :]
  visible = diff >= 0
  return visible if window is None else visible & (diff <= window)


def attention(q_BTHK, k_BTHK, v_BTHK, *, window=None, dtype=jnp.float32, drop=None, block=128):
  """softmax(where(mask, q k^T / sqrt(K), -1e4)) v per head, [B, T, H, K] each.

  Products in `dtype`, logits and softmax in float32. `drop` (a function of the weights [B, H,
  queries, keys]) is the attention dropout. Queries go `block` at a time against only the keys
  they can see, [max(0, start - window), end), so the causal triangle (and, with a window, the
  far past) is never formed; the values are those of the dense T x T form, since a masked weight
  exp(-1e4 - max) is exactly 0 in float32 whenever the row has a visible logit above -9,900.
  """
  q, k, v = (x.astype(dtype).transpose(0, 2, 1, 3) for x in (q_BTHK, k_BTHK, v_BTHK))  # BHTK
  t, scale, outs = q.shape[2], q.shape[-1] ** -0.5, []
  for start in range(0, t, block):
    end = min(start + block, t)
    lo = 0 if window is None else max(0, start - window)
    logits = jnp.einsum("bhqk,bhsk->bhqs", q[:, :, start:end], k[:, :, lo:end])
    logits = logits.astype(jnp.float32) * scale
    mask = attention_mask(jnp.arange(start, end), jnp.arange(lo, end), window)
    weights = jax.nn.softmax(jnp.where(mask, logits, MASK_VALUE), axis=-1)
    if drop is not None:
      weights = drop(weights)
    outs.append(jnp.einsum("bhqs,bhsk->bhqk", weights.astype(dtype), v[:, :, lo:end]))
  return jnp.concatenate(outs, axis=2).transpose(0, 2, 1, 3).astype(jnp.float32)


def _linear(cfg: GPT2Config, d_in: int, d_out: int, *, rngs: nnx.Rngs, std=None) -> layers.Linear:
  """HF's Conv1D: weight N(0, std) (default init_std), bias 0, matmul in the config's dtype."""
  return layers.Linear(
    d_in,
    d_out,
    use_bias=True,
    kernel_init=nnx.initializers.normal(cfg.init_std if std is None else std),
    bias_init=nnx.initializers.zeros_init(),
    dtype=layers.DTYPES[cfg.dtype],
    param_dtype=jnp.float32,
    rngs=rngs,
  )


def _proj_std(cfg: GPT2Config) -> float:
  return cfg.init_std / (2 * cfg.layers) ** 0.5 if cfg.scale_residual_init else cfg.init_std


def _layer_norm(cfg: GPT2Config, *, rngs: nnx.Rngs) -> nnx.LayerNorm:
  """torch `nn.LayerNorm(d, eps=1e-5)`: weight 1, bias 0, exact (two-pass) variance."""
  return nnx.LayerNorm(cfg.d, epsilon=cfg.norm_eps, use_fast_variance=False, rngs=rngs)


class Attention(nnx.Module):
  """GPT-2 causal (or windowed) self-attention: fused c_attn, c_proj, dropout on the weights."""

  def __init__(self, cfg: GPT2Config, *, rngs: nnx.Rngs):
    self.cfg = cfg
    self.c_attn = _linear(cfg, cfg.d, 3 * cfg.d, rngs=rngs)
    self.c_proj = _linear(cfg, cfg.d, cfg.d, rngs=rngs, std=_proj_std(cfg))
    self.attn_drop = nnx.Dropout(cfg.dropout, rngs=rngs)

  def __call__(self, x_BTD, *, train: bool = False):
    cfg = self.cfg
    b, t, _ = x_BTD.shape
    qkv = self.c_attn(x_BTD).reshape(b, t, 3, cfg.heads, cfg.head_dim)
    drop = None
    if train and cfg.dropout > 0.0:
      drop = lambda w: self.attn_drop(w, deterministic=False)  # noqa: E731
    o = attention(
      qkv[:, :, 0],
      qkv[:, :, 1],
      qkv[:, :, 2],
      window=cfg.window,
      dtype=layers.DTYPES[cfg.dtype],
      drop=drop,
    )
    return self.c_proj(o.reshape(b, t, cfg.d)).astype(jnp.float32)


class MLP(nnx.Module):
  """c_proj(gelu_tanh(c_fc(x))), d -> 4d -> d with biases (HF GPT-2 `MLP`, "gelu_new")."""

  def __init__(self, cfg: GPT2Config, *, rngs: nnx.Rngs):
    self.c_fc = _linear(cfg, cfg.d, cfg.ff_mult * cfg.d, rngs=rngs)
    self.c_proj = _linear(cfg, cfg.ff_mult * cfg.d, cfg.d, rngs=rngs, std=_proj_std(cfg))

  def __call__(self, x):
    return self.c_proj(jax.nn.gelu(self.c_fc(x), approximate=True)).astype(jnp.float32)


def block(cfg: GPT2Config, *, rngs: nnx.Rngs) -> layers.ResidualBlock:
  """HF GPT-2 `Block` (ln_1, attn, ln_2, mlp; resid dropout on both branches), in HF's order."""
  ln_1 = _layer_norm(cfg, rngs=rngs)
  attn = Attention(cfg, rngs=rngs)
  ln_2 = _layer_norm(cfg, rngs=rngs)
  mlp = MLP(cfg, rngs=rngs)
  drop = nnx.Dropout(cfg.dropout, rngs=rngs)
  return layers.ResidualBlock(ln_1, attn, ln_2, mlp, drop)


def head_options(cfg: GPT2Config) -> dict:
  """An untied head (token or state): N(0, init_std) kernel, zero bias, the model's matmul dtype.

  (HF's lm_head is tied and has no bias; `create_model(..., tie_embeddings=True)` is that head.)
  """
  return {
    "kernel_init": nnx.initializers.normal(cfg.init_std),
    "bias_init": nnx.initializers.zeros_init(),
    "dtype": layers.DTYPES[cfg.dtype],
  }


def forward_flops(cfg: GPT2Config, t: int) -> dict[str, float]:
  """Forward FLOPs per token of the backbone at length `t` (`chessjax.flops`): c_attn and c_proj,
  attention in blocks of 128 queries (the window-50 variant: at most its window plus a block of
  keys), the MLP (d -> 4d -> d)."""
  d, mm = cfg.d, flops.mm
  keys = flops.attended_keys(t)
  if cfg.window is not None:
    keys = min(keys, cfg.window + flops.ATTENTION_BLOCK)
  return {
    "projections": cfg.layers * (mm(3 * d, d) + mm(d, d)),
    "mixer": cfg.layers * 2 * mm(keys, d),
    "mlp": cfg.layers * (mm(4 * d, d) + mm(d, 4 * d)),
  }


def build_backbone(cfg: GPT2Config, *, vocab_size: int, rngs: nnx.Rngs) -> Stack:
  """wte + wpe -> dropout -> GPT-2 blocks -> LN_f. `embed` is wte (the tied head's matrix),
  `pos_embed` is wpe: positions 0..T-1, T at most `n_positions` (longer sequences raise). No
  streaming step (no KV cache)."""
  embed = layers.embedding(vocab_size, cfg.d, rngs=rngs, stddev=cfg.init_std)  # wte
  pos_embed = layers.embedding(cfg.n_positions, cfg.d, rngs=rngs, stddev=cfg.init_std)  # wpe
  embed_drop = nnx.Dropout(cfg.dropout, rngs=rngs)
  blocks = [block(cfg, rngs=rngs) for _ in range(cfg.layers)]
  norm = _layer_norm(cfg, rngs=rngs)  # ln_f
  return Stack(
    cfg, embed=embed, blocks=blocks, norm=norm, embed_drop=embed_drop, pos_embed=pos_embed
  )
