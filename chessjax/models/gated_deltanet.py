"""Gated DeltaNet families: `gated_deltanet` (negative eigenvalues) and `gated_deltanet_pos`.

The released configuration is flash-linear-attention's `GatedDeltaNetForCausalLM` (layer
`fla.layers.GatedDeltaNet`, chunk mode, qk L2-norm in the kernel, output gate, short conv 4) with
head dim K = 48, expand_v = 2 (V = 96) and the Transformer's head schedule (Walker & Lyons,
Chess-World-Model, appendix B.2; Yang, Kautz & Hatamizadeh, "Gated Delta Networks", ICLR 2025;
negative eigenvalues: Grazzi et al., ICLR 2025).

Block (pre-norm, no dropout anywhere):  h += GDN(RMSNorm(h));  h += down(silu(gate(x)) * up(x)),
x = RMSNorm(h), MLP width I = 256 ceil(floor(8d/3) / 256), no biases; final RMSNorm; eps 1e-6.
GDN per head (q, k: K values; v, o: V values; x the normalised input):

    q, k, v = silu(conv4(W_q x)), silu(conv4(W_k x)), silu(conv4(W_v x))   depthwise causal, no bias
    q, k   <- q / sqrt(|q|^2 + 1e-6), k / sqrt(|k|^2 + 1e-6)
    beta_t = sigmoid(W_b x_t) * (2 if negative eigenvalues else 1)
    g_t    = -exp(A_log) * softplus(W_a x_t + dt_bias),  alpha_t = exp(g_t)
    S_t    = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T    (S: V x K, float32)
    o_t    = S_t q_t / sqrt(K)
    out    = W_o(RMSNorm_V(o) * w * silu(W_g x))            (w: V values shared by heads)

The recurrence itself is `chessjax.ops.delta_rule.gated_delta_rule`; `mixer_impl` is the one
switch of `chessjax.ops.impl` ("auto": the chunked WY/UT form on every backend; "sequential": the
scan over steps). Inits as the reference's
`_init_weights`: every Linear, Conv and the embedding N(0, 0.02), head N(0, 0.02) with bias 0,
RMSNorm weights 1, A_log = log U(0, 16), dt_bias = softplus^-1(dt) with
dt = exp(U(log 1e-3, log 1e-1)) clamped >= 1e-4 (`layers.inverse_softplus_dt_init`).

Weight decay, as the release: every parameter except A_log and dt_bias (in both families). fla
marks those two `_no_weight_decay` (`fla/layers/gated_deltanet.py`), and the released
`training.py` (`build_optimiser`) puts marked parameters in a group without decay for
`--arch gated_deltanet` only (for Mamba it ignores mamba_ssm's marks: `chessjax.models.mamba`).
Here they are `layers.NoWeightDecay` variables, a subclass of `nnx.Param` (so they train and are
counted as usual); `chessjax.optim.decay_mask(nnx.state(model, nnx.Param))` gives the matching
boolean tree for `optax.adamw(..., mask=...)` (tests/test_optim.py).

`dtype="bfloat16"` runs the Linear matmuls inside the blocks in bfloat16 (parameters stay float32);
the embedding, norms, conv, recurrence (state and decays), residual stream and head stay float32.

Streaming: `init_state(batch)` and `step(state, tokens_B) -> (state, h_BD)` carry, per layer, the
last `conv_size - 1` projected q/k/v inputs and the float32 recurrent state; feeding a game one
move at a time gives the hidden states of the parallel forward.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax import flops
from chessjax.models import layers
from chessjax.models.sizes import SIZES
from chessjax.models.stack import Stack
from chessjax.ops import delta_rule, impl

FAMILIES = ("gated_deltanet", "gated_deltanet_pos")
GRID = True  # every size of models.sizes.SIZES, families of the paper's grid
RECIPE = "gated_deltanet"  # both train with its row of Table 7 (chessjax.world_model.grid)
ABLATIONS = ("gated_deltanet_pos",)  # the less expressive variant of RECIPE (Tables 9-10)


@dataclasses.dataclass(frozen=True)
class GatedDeltaNetConfig:
  """Hyperparameters of a Gated DeltaNet model (defaults: the released configuration)."""

  d: int
  layers: int
  heads: int
  head_k_dim: int = 48
  head_v_dim: int = 96
  conv_size: int = 4
  negative_eigenvalues: bool = True
  mlp_width: int | None = None  # None: 256 * ceil(floor(8d/3) / 256), as the reference
  norm_eps: float = 1e-6
  qk_norm_eps: float = 1e-6
  init_std: float = 0.02
  mixer_impl: str = "auto"  # `chessjax.ops.impl.Impl` of the delta rule
  chunk_size: int = 64
  dtype: str = "float32"  # matmul dtype of the block Linears: "float32" | "bfloat16"
  dropout: float = 0.0  # accepted for uniformity with other families; the reference has none

  def __post_init__(self):
    impl.parse(self.mixer_impl, "delta_rule")
    layers.check_config(self)
    if self.dropout != 0.0:
      raise ValueError(f"Gated DeltaNet uses no dropout (reference config); got {self.dropout}")
    if self.chunk_size < 1 or self.conv_size < 1:
      raise ValueError(f"chunk_size and conv_size must be positive: {self}")

  @property
  def intermediate(self) -> int:
    """MLP width: fla's GatedMLP rounds int(d * 4 * 2/3) up to a multiple of 256."""
    if self.mlp_width is not None:
      return self.mlp_width
    return 256 * math.ceil((8 * self.d // 3) / 256)


def base_config(family: str, size: str) -> GatedDeltaNetConfig:
  """The released configuration of `family` ("gated_deltanet" or "gated_deltanet_pos") at `size`."""
  if family not in FAMILIES:
    raise ValueError(f"{family!r} is not a Gated DeltaNet family {FAMILIES}")
  d, n_layers, heads = SIZES[size]
  return GatedDeltaNetConfig(
    d=d, layers=n_layers, heads=heads, negative_eigenvalues=family == "gated_deltanet"
  )


def _a_log_init(key, shape, dtype=jnp.float32):
  return jnp.log(jax.random.uniform(key, shape, dtype, 0.0, 16.0))


_dt_bias_init = layers.inverse_softplus_dt_init(1e-3, 1e-1, 1e-4)


def _l2_normalize(x, eps):
  return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + eps)


class ShortConv(nnx.Module):
  """`layers.causal_conv` (no bias) followed by silu, as fla's `ShortConvolution`; `kernel` is
  [W, F], `kernel[W-1]` on the current step."""

  def __init__(self, channels: int, width: int, *, init, rngs: nnx.Rngs):
    self.kernel = nnx.Param(init(rngs.params(), (width, channels), jnp.float32))

  def __call__(self, x_BTF):
    """Causal conv of a whole sequence (zero history)."""
    return jax.nn.silu(layers.causal_conv(x_BTF, self.kernel[...]))

  def step(self, cache_BWF, x_BF):
    """One step from the last W-1 inputs; returns (new cache, output)."""
    cache_BWF, y = layers.causal_conv_step(cache_BWF, x_BF, self.kernel[...])
    return cache_BWF, jax.nn.silu(y)


class GatedDeltaNetMixer(nnx.Module):
  """fla's `GatedDeltaNet` layer (use_gate, use_short_conv, qk L2-norm) on normalised inputs."""

  def __init__(self, cfg: GatedDeltaNetConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    h, kd, vd = cfg.heads, cfg.head_k_dim, cfg.head_v_dim
    init = nnx.initializers.normal(cfg.init_std)
    mm = layers.DTYPES[cfg.dtype]

    def lin(i, o):
      return layers.torch_linear(i, o, rngs=rngs, use_bias=False, kernel_init=init, dtype=mm)

    self.q_proj = lin(cfg.d, h * kd)
    self.k_proj = lin(cfg.d, h * kd)
    self.v_proj = lin(cfg.d, h * vd)
    self.a_proj = lin(cfg.d, h)
    self.b_proj = lin(cfg.d, h)
    self.g_proj = lin(cfg.d, h * vd)
    self.o_proj = lin(h * vd, cfg.d)
    self.q_conv = ShortConv(h * kd, cfg.conv_size, init=init, rngs=rngs)
    self.k_conv = ShortConv(h * kd, cfg.conv_size, init=init, rngs=rngs)
    self.v_conv = ShortConv(h * vd, cfg.conv_size, init=init, rngs=rngs)
    self.A_log = layers.NoWeightDecay(_a_log_init(rngs.params(), (h,)))
    self.dt_bias = layers.NoWeightDecay(_dt_bias_init(rngs.params(), (h,)))
    self.o_norm = nnx.Param(jnp.ones((vd,), jnp.float32))

  def _gates(self, x):
    """beta and log-decay g (float32) from the normalised input x [..., d]."""
    beta = jax.nn.sigmoid(self.b_proj(x).astype(jnp.float32))
    if self.cfg.negative_eigenvalues:
      beta = 2.0 * beta  # eigenvalues of I - beta k k^T in (-1, 1]
    a = self.a_proj(x).astype(jnp.float32)
    g = -jnp.exp(self.A_log[...]) * jax.nn.softplus(a + self.dt_bias[...])
    return beta, g

  def _heads(self, q, k, v):
    cfg = self.cfg
    q = q.reshape(*q.shape[:-1], cfg.heads, cfg.head_k_dim)
    k = k.reshape(*k.shape[:-1], cfg.heads, cfg.head_k_dim)
    v = v.reshape(*v.shape[:-1], cfg.heads, cfg.head_v_dim)
    return _l2_normalize(q, cfg.qk_norm_eps), _l2_normalize(k, cfg.qk_norm_eps), v

  def _output(self, x, o):
    """W_o(RMSNorm_V(o) * w * silu(W_g x)) for o [..., H, V]."""
    cfg = self.cfg
    gate = self.g_proj(x).astype(jnp.float32).reshape(o.shape)
    y = layers.rms_norm(o, self.o_norm[...], cfg.norm_eps) * jax.nn.silu(gate)
    return self.o_proj(y.reshape(*y.shape[:-2], -1)).astype(jnp.float32)

  def __call__(self, x_BTD, *, train: bool = False):  # no dropout: `train` changes nothing
    f32 = jnp.float32
    q = self.q_conv(self.q_proj(x_BTD).astype(f32))
    k = self.k_conv(self.k_proj(x_BTD).astype(f32))
    v = self.v_conv(self.v_proj(x_BTD).astype(f32))
    q, k, v = self._heads(q, k, v)
    beta, g = self._gates(x_BTD)
    o, _ = delta_rule.gated_delta_rule(
      q,
      k,
      v,
      g,
      beta,
      impl=impl.resolve(
        self.cfg.mixer_impl,
        "delta_rule",
        rows=math.prod(x_BTD.shape[:-2]),
        length=x_BTD.shape[-2],
        width=impl.width_of(
          "delta_rule", (self.cfg.heads, self.cfg.head_k_dim, self.cfg.head_v_dim)
        ),
      ),
      chunk_size=self.cfg.chunk_size,
    )
    return self._output(x_BTD, o)

  def init_state(self, batch: int):
    """Zero conv caches (last W-1 projected inputs) and a zero float32 recurrent state."""
    cfg = self.cfg
    w = cfg.conv_size - 1
    hk, hv = cfg.heads * cfg.head_k_dim, cfg.heads * cfg.head_v_dim
    return {
      "conv_q": jnp.zeros((batch, w, hk), jnp.float32),
      "conv_k": jnp.zeros((batch, w, hk), jnp.float32),
      "conv_v": jnp.zeros((batch, w, hv), jnp.float32),
      "ssm": jnp.zeros((batch, cfg.heads, cfg.head_v_dim, cfg.head_k_dim), jnp.float32),
    }

  def step(self, state, x_BD):
    """One token: returns (new state, output [B, d])."""
    f32 = jnp.float32
    cq, q = self.q_conv.step(state["conv_q"], self.q_proj(x_BD).astype(f32))
    ck, k = self.k_conv.step(state["conv_k"], self.k_proj(x_BD).astype(f32))
    cv, v = self.v_conv.step(state["conv_v"], self.v_proj(x_BD).astype(f32))
    q, k, v = self._heads(q, k, v)
    beta, g = self._gates(x_BD)
    o, s = delta_rule.gated_delta_rule_step(state["ssm"], q, k, v, g, beta)
    new_state = {"conv_q": cq, "conv_k": ck, "conv_v": cv, "ssm": s}
    return new_state, self._output(x_BD, o)


def gated_mlp(cfg: GatedDeltaNetConfig, *, rngs: nnx.Rngs) -> layers.GatedMLP:
  """down(silu(gate(x)) * up(x)), no biases, N(0, init_std) kernels (fla's `GatedMLP`, swish)."""
  init = nnx.initializers.normal(cfg.init_std)
  return layers.GatedMLP(
    cfg.d,
    cfg.intermediate,
    rngs=rngs,
    layout="split",
    use_bias=False,
    kernel_init=init,
    out_kernel_init=init,
    dtype=layers.DTYPES[cfg.dtype],
  )


def block(cfg: GatedDeltaNetConfig, *, rngs: nnx.Rngs) -> layers.ResidualBlock:
  """Pre-norm residual block: h += GDN(RMSNorm(h)); h += MLP(RMSNorm(h)); no dropout."""
  attn_norm = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  mixer = GatedDeltaNetMixer(cfg, rngs=rngs)
  mlp_norm = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  return layers.ResidualBlock(attn_norm, mixer, mlp_norm, gated_mlp(cfg, rngs=rngs))


def head_options(cfg: GatedDeltaNetConfig) -> dict:
  """Output head as the reference's `_init_weights`: N(0, init_std) kernel, zero bias, float32."""
  return {
    "kernel_init": nnx.initializers.normal(cfg.init_std),
    "bias_init": nnx.initializers.zeros_init(),
  }


def forward_flops(cfg: GatedDeltaNetConfig, t: int) -> dict[str, float]:
  """Forward FLOPs per token of the backbone at length `t` (`chessjax.flops`): the q, k, v, a, b,
  g and o projections; the gated delta rule sequentially (S k, the rank-1 update v k^T, S q: three
  V x K products per head) or chunked (chunk C: k k^T, the triangular solve by blocked
  substitution, the UT transform, the chunk's state update, and the inter- and intra-chunk
  outputs); the gated MLP."""
  d, h, k, v, mm = cfg.d, cfg.heads, cfg.head_k_dim, cfg.head_v_dim, flops.mm
  if impl.resolve(cfg.mixer_impl, "delta_rule") is impl.Impl.SEQUENTIAL:
    mixer = h * 3 * mm(v, k)
  else:
    c = min(cfg.chunk_size, t)
    per_head = (
      mm(c, k)  # k k^T within the chunk
      + mm(c, c) / 3  # (I + A)^-1 by blocked substitution: about C^3 / 3 per chunk
      + mm(v + k, c)  # the UT transform T [beta v, beta e^g k]
      + 2 * mm(v, k)  # u -= w S; S += u^T k (the chunk's state, per token)
      + mm(v, k)  # inter-chunk output q S
      + mm(c, k)
      + mm(v, c)  # intra-chunk q k^T and its product with u
    )
    mixer = h * per_head
  return {
    "projections": cfg.layers * (mm(2 * h * k + 2 * h * v + 2 * h, d) + mm(d, h * v)),
    "mixer": cfg.layers * mixer,
    "mlp": cfg.layers * 3 * mm(cfg.intermediate, d),
  }


def build_backbone(cfg: GatedDeltaNetConfig, *, vocab_size: int, rngs: nnx.Rngs) -> Stack:
  """Embedding (N(0, init_std^2)) -> Gated DeltaNet blocks -> RMSNorm; no dropout. Streams."""
  embed = layers.embedding(vocab_size, cfg.d, rngs=rngs, stddev=cfg.init_std)
  blocks = [block(cfg, rngs=rngs) for _ in range(cfg.layers)]
  norm = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  return Stack(cfg, embed=embed, blocks=blocks, norm=norm)
