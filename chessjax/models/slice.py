"""SLiCE families: `slice` (block-diagonal transitions, block size 8) and `slice_diag` (size 1).

The released configuration is the Chess-World-Model `ChessSLiCEStateModel` built on
`slices.SLiCELayer` from the `torch-slices` package (0.3.3) with path_mode "values", Euler
transitions, init_std 0.1 and scale 0.1 (Walker, Yang, Cirone, Salvi & Lyons, "Structured Linear
CDEs", NeurIPS 2025; Walker & Lyons, Chess-World-Model, appendix B.2).

Backbone: embedding (N(0, 1)) -> dropout -> layers (no final norm by default). Layer:

    h += Drop(SLiCE(RMSNorm1(h)));    h += Drop(W2 GELU(W1 RMSNorm2(h)))     (W1: d -> 4d, biases)

SLiCE on the normalised input x_t (t = 1..T, x_0 = 0), width d = G b in G blocks of size b:

    u_t = s [1, x_t - x_{t-1}]                    (d + 1 values, constant channel first; s = 0.1)
    A_t = reshape(W_A u_t, (G, b, b))             W_A: (d+1) -> d b, no bias, (block, row, col)
    c_t = W_B u_t                                 W_B: (d+1) -> d, no bias
    y_t = (I + A_t) y_{t-1} + c_t                 y_0 learned; the output is y_t itself

Inits: W_A ~ N(0, (0.1 / sqrt b)^2), W_B ~ N(0, 0.1^2), y_0 ~ N(0, 0.1^2), RMSNorm weights 1,
other Linears torch defaults. The recurrence is unbounded by design (diagonal SLiCE's loss reaches
4e17 out of distribution in the paper): it always runs in float32, and the training loop's
non-finite guard handles blow-ups.

The recurrence is `chessjax.ops.slice_scan.affine_scan`. `mixer_impl` is the one switch of
`chessjax.ops.impl`: "sequential" (a scan over steps), "chunked" (the reference's parallel form:
associative scan in chunks of `chunk_size`, y carried between chunks), "associative" (one
associative scan), or "auto" (default): "sequential" on CPU (3-4x faster than "chunked" for d128
there) and GPU (1.4-1.7x faster than the parallel forms on an H200 at d512), "chunked" on TPU (not
measured; `chessjax.ops.impl`). All forms give the same numbers up to rounding.

`dtype="bfloat16"` runs the Linear matmuls (W_A, W_B, MLP, head) in bfloat16; the embedding,
norms, residual stream and the recurrent state stay float32.

Streaming: `init_state(batch)` and `step(state, tokens_B) -> (state, h_BD)` carry, per layer, the
previous normalised input x_{t-1} and the state y_{t-1}; feeding a game one move at a time gives
the hidden states of the parallel forward (dropout off).
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
from chessjax.ops import impl, slice_scan

FAMILIES = {"slice": 8, "slice_diag": 1}  # family -> block size
GRID = True  # every size of models.sizes.SIZES, families of the paper's grid
RECIPE = "slice"  # both train with SLiCE's row of Table 7 (chessjax.world_model.grid)
ABLATIONS = ("slice_diag",)  # the less expressive variant of RECIPE (Tables 9-10)


@dataclasses.dataclass(frozen=True)
class SLiCEConfig:
  """Hyperparameters of a SLiCE model (defaults: the released configuration)."""

  d: int
  layers: int
  block_size: int = 8
  dropout: float = 0.1
  ff_mult: int = 4
  norm_eps: float = 1e-6
  init_std: float = 0.1  # W_B and y_0 std; W_A uses init_std / sqrt(block_size)
  input_scale: float = 0.1  # s in u_t = s [1, dx_t]
  final_norm: bool = False  # the release has none (slice_final_norm=False)
  mixer_impl: str = "auto"  # `chessjax.ops.impl.Impl` of the affine scan
  chunk_size: int = slice_scan.DEFAULT_CHUNK_SIZE
  dtype: str = "float32"  # matmul dtype: "float32" | "bfloat16"

  def __post_init__(self):
    impl.parse(self.mixer_impl, "affine_scan")
    layers.check_config(self)
    if self.block_size < 1 or self.d % self.block_size:
      raise ValueError(f"block_size {self.block_size} must be >= 1 and divide d={self.d}")
    if self.chunk_size < 1:
      raise ValueError(f"chunk_size must be positive, got {self.chunk_size}")


def base_config(family: str, size: str) -> SLiCEConfig:
  """The released configuration of `family` ("slice" or "slice_diag") at `size`."""
  if family not in FAMILIES:
    raise ValueError(f"{family!r} is not a SLiCE family {sorted(FAMILIES)}")
  d, n_layers, _ = SIZES[size]  # SLiCE has no heads
  return SLiCEConfig(d=d, layers=n_layers, block_size=FAMILIES[family])


class SLiCEMixer(nnx.Module):
  """One SLiCE recurrence on normalised inputs x [B, T, d] -> y [B, T, d] (float32)."""

  def __init__(self, cfg: SLiCEConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    d, b = cfg.d, cfg.block_size
    mm = layers.DTYPES[cfg.dtype]
    normal = nnx.initializers.normal
    self.w_a = layers.torch_linear(
      d + 1, d * b, rngs=rngs, use_bias=False, kernel_init=normal(cfg.init_std / b**0.5), dtype=mm
    )
    self.w_b = layers.torch_linear(
      d + 1, d, rngs=rngs, use_bias=False, kernel_init=normal(cfg.init_std), dtype=mm
    )
    self.y0 = nnx.Param(normal(cfg.init_std)(rngs.params(), (d,), jnp.float32))

  def _transition(self, x, x_prev):
    """A_t ([..., G, b, b], or [..., d] for b = 1) and c_t ([..., d]) in float32."""
    cfg = self.cfg
    ones = jnp.ones((*x.shape[:-1], 1), x.dtype)
    u = cfg.input_scale * jnp.concatenate([ones, x - x_prev], axis=-1)
    a = self.w_a(u).astype(jnp.float32)
    if cfg.block_size > 1:
      n = cfg.d // cfg.block_size
      a = a.reshape(*a.shape[:-1], n, cfg.block_size, cfg.block_size)
    return a, self.w_b(u).astype(jnp.float32)

  def __call__(self, x_BTD, *, train: bool = False):  # no dropout: `train` changes nothing
    # Time-major: transposing x (d per token) is cheap, transposing A (d b per token) is not.
    x = jnp.swapaxes(x_BTD, 0, 1)
    x_prev = jnp.concatenate([jnp.zeros_like(x[:1]), x[:-1]], axis=0)
    a, c = self._transition(x, x_prev)
    y = slice_scan.affine_scan(
      a,
      c,
      self.y0[...],
      impl=impl.resolve(
        self.cfg.mixer_impl,
        "affine_scan",
        rows=math.prod(x_BTD.shape[:-2]),
        length=x_BTD.shape[-2],
        width=impl.width_of(
          "affine_scan", (self.cfg.d // self.cfg.block_size, self.cfg.block_size)
        ),
      ),
      chunk_size=self.cfg.chunk_size,
      time_major=True,
    )
    return jnp.swapaxes(y, 0, 1)

  def init_state(self, batch: int):
    """x_0 = 0 and the learned y_0, per game."""
    d = self.cfg.d
    return {
      "x_prev": jnp.zeros((batch, d), jnp.float32),
      "y": jnp.broadcast_to(self.y0[...], (batch, d)),
    }

  def step(self, state, x_BD):
    """One token: returns (new state, y_t [B, d])."""
    a, c = self._transition(x_BD, state["x_prev"])
    b = self.cfg.block_size
    if b > 1:
      y = state["y"].reshape(*c.shape[:-1], self.cfg.d // b, b)
      y = slice_scan.affine_step(a, c.reshape(y.shape), y).reshape(c.shape)
    else:
      y = slice_scan.affine_step(a, c, state["y"])
    return {"x_prev": x_BD, "y": y}, y


class MLP(nnx.Module):
  """W2 GELU(W1 x), d -> ff_mult d -> d, biases on, exact (erf) GELU as torch's nn.GELU."""

  def __init__(self, cfg: SLiCEConfig, *, rngs: nnx.Rngs):
    mm = layers.DTYPES[cfg.dtype]
    hidden = cfg.ff_mult * cfg.d
    self.fc1 = layers.torch_linear(cfg.d, hidden, rngs=rngs, dtype=mm)
    self.fc2 = layers.torch_linear(hidden, cfg.d, rngs=rngs, dtype=mm)

  def __call__(self, x):
    return self.fc2(jax.nn.gelu(self.fc1(x), approximate=False)).astype(jnp.float32)


def block(cfg: SLiCEConfig, *, rngs: nnx.Rngs) -> layers.ResidualBlock:
  """`slices.SLiCELayer` with prenorm, second norm and residual-branch dropout (built in order)."""
  norm1 = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  mixer = SLiCEMixer(cfg, rngs=rngs)
  norm2 = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  mlp = MLP(cfg, rngs=rngs)
  drop = nnx.Dropout(cfg.dropout, rngs=rngs)
  return layers.ResidualBlock(norm1, mixer, norm2, mlp, drop)


def head_options(cfg: SLiCEConfig) -> dict:
  """Output head: torch-default Linear inits, the model's matmul dtype."""
  return {"dtype": layers.DTYPES[cfg.dtype]}


def forward_flops(cfg: SLiCEConfig, t: int) -> dict[str, float]:
  """Forward FLOPs per token of the backbone at length `t` (`chessjax.flops`).

  W_A and W_B read [1, x_t - x_{t-1}] (d + 1 wide). The sequential scan makes one matrix-vector
  product (I + A_t) y per step (G blocks of b x b times b). The parallel forms run
  `lax.associative_scan` over chunks of C steps, which keeps only the offsets (y_t): of its
  combines (M_r M_l, M_r c_l + c_r), the matrix products feed the next round only, C - 2 of them
  per chunk for C a power of two, against 2 C - log2(C) - 1 matrix-vector products, plus the
  one that folds the incoming y into each chunk (exact for a power of two, close otherwise).
  """
  d, b, mm = cfg.d, cfg.block_size, flops.mm
  how = impl.resolve(cfg.mixer_impl, "affine_scan")
  matvec = mm(d, b)
  if how is impl.Impl.SEQUENTIAL:
    mixer = matvec
  else:
    c = t if how is impl.Impl.ASSOCIATIVE else min(cfg.chunk_size, t)
    products = max(c - 2, 0) * mm(d * b, b)
    matvecs = (max(2 * c - math.log2(c) - 1, 0) + 1) * matvec
    mixer = (products + matvecs) / c
  return {
    "projections": cfg.layers * (mm(d * b, d + 1) + mm(d, d + 1)),
    "mixer": cfg.layers * mixer,
    "mlp": cfg.layers * (mm(cfg.ff_mult * d, d) + mm(d, cfg.ff_mult * d)),
  }


def build_backbone(cfg: SLiCEConfig, *, vocab_size: int, rngs: nnx.Rngs) -> Stack:
  """Embedding (N(0, 1), torch default) -> dropout -> SLiCE blocks -> RMSNorm only if
  `final_norm` (the release has none). Streams: per layer, the previous normalised input x_{t-1}
  and the state y_{t-1}."""
  embed = layers.embedding(vocab_size, cfg.d, rngs=rngs)
  embed_drop = nnx.Dropout(cfg.dropout, rngs=rngs)
  blocks = [block(cfg, rngs=rngs) for _ in range(cfg.layers)]
  norm = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs) if cfg.final_norm else None
  return Stack(cfg, embed=embed, blocks=blocks, norm=norm, embed_drop=embed_drop)
