"""Mamba-2 (ablation) and Mamba-3 (main, SISO or MIMO) backbones (Walker & Lyons,
Chess-World-Model, appendix B.2).

Backbone (mamba_ssm `modules/block.py` with `residual_in_fp32=True`, as the released
Chess-World-Model `models/mamba.py` builds it), residual stream r in float32, RMSNorm eps 1e-5:

    r = Drop(Embed(moves))                         dropout on the embedding only
    per layer:  r = r + Mixer(RMSNorm(r))
                r = r + fc2(y * silu(gate)),  [y, gate] = fc1(RMSNorm(r))   fc1 d -> 8d, no biases
    out = RMSNorm(r)                               (then the head, `chessjax.models.heads`)

Mamba-2 mixer (Dao & Gu 2024; mamba_ssm `modules/mamba2.py`), inner width 2d, H = 2d/64 heads of
P = 64, state N = 128, one group:

    [z, xBC, dt_raw] = in_proj(u);   [x, B, C] = silu(conv4(xBC))   (causal depthwise, with bias)
    dt = softplus(dt_raw + dt_bias);  A = -exp(A_log)
    h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T;  y_t = h_t C_t + D x_t
    out = out_proj(RMSNorm_{2d}(y * silu(z)))

Mamba-3 mixer (Lahoti et al. 2026; mamba_ssm `modules/mamba3.py`), no conv, rank R (1 = SISO):

    [z, x, B, C, dd_dt, dd_A, trap, angles] = in_proj(u)       B, C: R*N each; angles: N/4
    A_t = min(-softplus(dd_A_t), -1e-4);  dt_t = softplus(dd_dt_t + dt_bias)
    lam_t = sigmoid(trap_t)
    k = Rot(theta) (RMSNorm_N(B) + B_bias);  q = Rot(theta) (RMSNorm_N(C) + C_bias)  (bias [H,R,N])
    theta_t = sum_{s<=t} pi tanh(angles_s) dt_s   (per head, mod 2 pi; adjacent pairs, dims < N/2)
    v_r = x * mimo_x_r,  z_r = z * mimo_z_r      (MIMO only; SISO: v = x, z_1 = z)
    S_t = alpha_t S_{t-1} + (1 - lam_t) dt_t alpha_t sum_r v_{t-1,r} k_{t-1,r}^T
          + lam_t dt_t sum_r v_{t,r} k_{t,r}^T,   alpha_t = exp(A_t dt_t)
    y = sum_r mimo_o_r * (S_t q_{t,r} + D v_{t,r}) * silu(z_r);   out = out_proj(y)

Memory (`remat_segment` > 0; Mamba-3 MIMO's default, 64 tokens): the mixer runs as a scan over
segments that carries its streaming state (rotation angles and `ssd.TrapezoidState`), each segment
rematerialised (`jax.checkpoint`): the backward pass keeps a segment's input and entering state and
recomputes its rank-R keys, per-chunk tensors and outputs one segment at a time, instead of keeping
them for every layer and token (d512, batch 128, 1024 steps: 40 GiB instead of 385 GiB in XLA's
CPU memory analysis of the bfloat16 train step; docs/performance.md). Same outputs and gradients
up to float32 rounding.

The released MIMO kernel rotates the pairs (i, i + N/2) instead of adjacent ones; with the
per-dimension B/C projections, norm weights and biases all initialised identically, that is a
fixed permutation of the state dimensions, so the adjacent layout of the Mamba-3 paper describes
the same model.

Inits (mamba_ssm `_init_weights` applied to the whole model): embedding N(0, 0.02); every Linear
bias (the head's) zero; out_proj and fc2 kaiming-uniform(a=sqrt 5) / sqrt(2 L); other Linear and
the conv torch defaults; A_log = log U(1, 16); dt_bias = softplus^-1(dt), dt log-uniform in
[1e-3, 1e-1] clamped >= 1e-4; D = 1; B/C biases 1; mimo_x = mimo_o = 1/R, mimo_z = 1.
Numeric cores: `chessjax.ops.ssd` (chunked SSD and sequential references).

Weight decay, as the release: every parameter, A_log, dt_bias and D included (plain `nnx.Param`s).
mamba_ssm marks those `_no_weight_decay`, but the released `training.py` (`build_optimiser`)
honours the marks for `--arch gated_deltanet` only, so its Mamba runs decay them; Gated DeltaNet's
A_log and dt_bias are exempt (`chessjax.models.gated_deltanet`; tests/test_optim.py).
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
from chessjax.ops import impl, ssd

FAMILIES = ("mamba2", "mamba3", "mamba3_mimo")
GRID = True  # every size of models.sizes.SIZES, families of the paper's grid
RECIPE = "mamba3"  # all train with Mamba-3's row of Table 7 (chessjax.world_model.grid)
# The less expressive variant of RECIPE (Tables 9-10); MIMO is Mamba-3 at another rank, no ablation.
ABLATIONS = ("mamba2",)
VERSIONS = ("mamba2", "mamba3")


# MIMO's mixer runs over rematerialised segments of this many tokens by default (MambaConfig's
# `remat_segment`; docs/performance.md, "Mamba-3 MIMO's memory").
MIMO_REMAT_SEGMENT = 64


@dataclasses.dataclass(frozen=True)
class MambaConfig:
  """Hyperparameters of a Mamba-2 / Mamba-3 world model (defaults: the released configuration)."""

  version: str  # "mamba2" | "mamba3"
  d: int
  layers: int
  heads: int  # H = expand * d / head_dim
  d_state: int = 128
  head_dim: int = 64
  expand: int = 2
  groups: int = 1  # B/C groups (mamba_ssm ngroups)
  d_conv: int = 4  # Mamba-2 only
  mlp_hidden: int = 0  # 0 means 4 d
  mimo_rank: int = 1  # Mamba-3 only; 1 = SISO
  rope_fraction: float = 0.5  # Mamba-3: fraction of the state dims that rotate
  mixer_impl: str = "auto"  # `chessjax.ops.impl.Impl` of the SSD
  chunk_size: int = 64  # pure performance choice
  # Mamba-3: tokens per rematerialised segment of the mixer (0: the whole sequence in one pass,
  # nothing recomputed); a memory/compute trade-off with the same results up to rounding.
  remat_segment: int = 0
  dropout: float = 0.1
  norm_eps: float = 1e-5
  dt_min: float = 1e-3
  dt_max: float = 1e-1
  dt_init_floor: float = 1e-4
  a_init_range: tuple[float, float] = (1.0, 16.0)  # Mamba-2
  a_floor: float = 1e-4  # Mamba-3
  dtype: str = "float32"  # matmul dtype; state, decays, angles and residual stay float32

  def __post_init__(self):
    if self.version not in VERSIONS:
      raise ValueError(f"unknown Mamba version {self.version!r}; expected one of {VERSIONS}")
    impl.parse(self.mixer_impl, "ssd")
    layers.check_config(self)
    if self.heads * self.head_dim != self.expand * self.d:
      raise ValueError(
        f"heads * head_dim ({self.heads} * {self.head_dim}) must equal expand * d "
        f"({self.expand} * {self.d})"
      )
    if self.heads % self.groups:
      raise ValueError(f"heads {self.heads} must be a multiple of groups {self.groups}")
    if self.mimo_rank < 1 or (self.version == "mamba2" and self.mimo_rank != 1):
      raise ValueError(f"mimo_rank {self.mimo_rank} invalid for {self.version}")
    if self.rope_fraction not in (0.5, 1.0):
      raise ValueError(f"rope_fraction must be 0.5 or 1.0, got {self.rope_fraction}")
    if self.chunk_size < 1:
      raise ValueError(f"chunk_size must be positive, got {self.chunk_size}")
    if self.remat_segment < 0 or (self.version == "mamba2" and self.remat_segment):
      raise ValueError(f"remat_segment {self.remat_segment} invalid for {self.version}")

  @property
  def inner(self) -> int:
    return self.expand * self.d

  @property
  def num_angles(self) -> int:
    """Rotation angles per head (mamba_ssm: the even part of N * rope_fraction, halved)."""
    return (int(self.d_state * self.rope_fraction) // 2 * 2) // 2

  @property
  def hidden(self) -> int:
    return self.mlp_hidden or 4 * self.d


def base_config(family: str, size: str) -> MambaConfig:
  """The released configuration of `mamba2`, `mamba3` (SISO) or `mamba3_mimo` (rank 4) at a size."""
  if family not in FAMILIES:
    raise ValueError(f"{family!r} is not a Mamba family")
  d, num_layers, _ = SIZES[size]
  rank = 4 if family == "mamba3_mimo" else 1
  return MambaConfig(
    version="mamba2" if family == "mamba2" else "mamba3",
    d=d,
    layers=num_layers,
    heads=2 * d // 64,
    mimo_rank=rank,
    # 64 tokens per chunk (16 for MIMO: 64 keys of 4 ranks), as the released Mamba-3 kernels.
    chunk_size=64 // rank,
    remat_segment=MIMO_REMAT_SEGMENT if rank > 1 else 0,
  )


# ------------------------------------------------------------------------------------------------
# Initialisers


def _uniform(bound: float):
  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


def _dt_bias(key, heads: int, cfg: MambaConfig) -> jax.Array:
  """softplus^-1 of dt ~ exp(U(log dt_min, log dt_max)), clamped >= dt_init_floor."""
  init = layers.inverse_softplus_dt_init(cfg.dt_min, cfg.dt_max, cfg.dt_init_floor)
  return init(key, (heads,), jnp.float32)


def _out_init(cfg: MambaConfig):
  # kaiming-uniform(a=sqrt 5) / sqrt(n_residuals_per_layer * n_layer), 2 residuals per layer.
  return layers.scaled_init(layers.torch_kernel_init, 1.0 / math.sqrt(2 * cfg.layers))


# ------------------------------------------------------------------------------------------------
# Modules


RMSNorm = layers.RMSNorm  # float32 in and out, weight init 1, draws no rng key


def gated_mlp(cfg: MambaConfig, *, rngs: nnx.Rngs) -> layers.GatedMLP:
  """mamba_ssm GatedMLP: fc2(y * silu(gate)), [y, gate] = fc1(x) (value first), no biases."""
  return layers.GatedMLP(
    cfg.d,
    cfg.hidden,
    rngs=rngs,
    layout="value_gate",
    use_bias=False,
    out_kernel_init=_out_init(cfg),
    dtype=layers.DTYPES[cfg.dtype],
  )


def _resolve(cfg: MambaConfig, u_BTD) -> impl.Impl:
  """The SSD's implementation for a call on `u_BTD`: `chessjax.ops.impl.resolve` at its rows,
  length and state width (H P N, whatever the MIMO rank)."""
  return impl.resolve(
    cfg.mixer_impl,
    "ssd",
    rows=math.prod(u_BTD.shape[:-2]),
    length=u_BTD.shape[-2],
    width=impl.width_of("ssd", (cfg.heads, cfg.head_dim, cfg.d_state)),
  )


class Mamba2Mixer(nnx.Module):
  """Mamba-2 mixer: in_proj, causal depthwise conv, SSD, gated RMSNorm, out_proj."""

  def __init__(self, cfg: MambaConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    cdt = layers.DTYPES[cfg.dtype]
    h, n, g = cfg.heads, cfg.d_state, cfg.groups
    self.conv_dim = cfg.inner + 2 * g * n
    self.in_proj = layers.torch_linear(
      cfg.d, cfg.inner + self.conv_dim + h, use_bias=False, rngs=rngs, dtype=cdt
    )
    # torch Conv1d(groups=channels) defaults: fan_in = kernel width, weight and bias U(+-1/sqrt 4).
    # Stored [width, channels]; tap width-1 multiplies the current step.
    bound = 1.0 / math.sqrt(cfg.d_conv)
    self.conv_weight = nnx.Param(_uniform(bound)(rngs.params(), (cfg.d_conv, self.conv_dim)))
    self.conv_bias = nnx.Param(_uniform(bound)(rngs.params(), (self.conv_dim,)))
    self.dt_bias = nnx.Param(_dt_bias(rngs.params(), h, cfg))
    lo, hi = cfg.a_init_range
    self.A_log = nnx.Param(jnp.log(jax.random.uniform(rngs.params(), (h,), jnp.float32, lo, hi)))
    self.D = nnx.Param(jnp.ones((h,), jnp.float32))
    self.norm = RMSNorm(cfg.inner, cfg.norm_eps)
    self.out_proj = layers.torch_linear(
      cfg.inner, cfg.d, use_bias=False, kernel_init=_out_init(cfg), rngs=rngs, dtype=cdt
    )

  def _split(self, zxbcdt):
    cfg = self.cfg
    return jnp.split(zxbcdt, [cfg.inner, cfg.inner + self.conv_dim], axis=-1)

  def _ssm_inputs(self, xbc, dt_raw):
    cfg = self.cfg
    x, B, C = jnp.split(xbc, [cfg.inner, cfg.inner + cfg.groups * cfg.d_state], axis=-1)
    lead = x.shape[:-1]
    dt = jax.nn.softplus(dt_raw.astype(jnp.float32) + self.dt_bias[...])
    return (
      x.reshape(*lead, cfg.heads, cfg.head_dim),
      dt,
      -jnp.exp(self.A_log[...]),
      B.reshape(*lead, cfg.groups, cfg.d_state),
      C.reshape(*lead, cfg.groups, cfg.d_state),
    )

  def _output(self, y, x, z):
    y = y.astype(jnp.float32) + self.D[...][:, None] * x.astype(jnp.float32)
    y = y.reshape(*y.shape[:-2], self.cfg.inner)
    y = self.norm(y * jax.nn.silu(z.astype(jnp.float32)))
    return self.out_proj(y.astype(layers.DTYPES[self.cfg.dtype]))

  def __call__(self, u_BTD, *, train: bool = False):  # no dropout: `train` changes nothing
    cfg = self.cfg
    z, xbc, dt_raw = self._split(self.in_proj(u_BTD))
    conv = layers.causal_conv(xbc.astype(jnp.float32), self.conv_weight[...], self.conv_bias[...])
    xbc = jax.nn.silu(conv).astype(xbc.dtype)
    x, dt, A, B, C = self._ssm_inputs(xbc, dt_raw)
    how = _resolve(cfg, u_BTD)
    y, _ = ssd.ssd(x, dt, A, B, C, impl=how, chunk_size=cfg.chunk_size)
    return self._output(y, x, z)

  def init_state(self, batch: int):
    """Conv window (last d_conv - 1 inputs) and SSM state, both float32."""
    cfg = self.cfg
    return (
      jnp.zeros((batch, cfg.d_conv - 1, self.conv_dim), jnp.float32),
      jnp.zeros((batch, cfg.heads, cfg.head_dim, cfg.d_state), jnp.float32),
    )

  def step(self, state, u_BD):
    """One token: (state, u [B, d]) -> (state, out [B, d])."""
    window, h = state
    z, xbc, dt_raw = self._split(self.in_proj(u_BD))
    window, conv = layers.causal_conv_step(
      window, xbc.astype(jnp.float32), self.conv_weight[...], self.conv_bias[...]
    )
    xbc = jax.nn.silu(conv).astype(xbc.dtype)
    x, dt, A, B, C = self._ssm_inputs(xbc, dt_raw)
    h, y = ssd.ssd_step(h, x, dt, A, B, C)
    return (window, h), self._output(y, x, z)


class Mamba3Mixer(nnx.Module):
  """Mamba-3 mixer: in_proj, B/C norm + bias + data-dependent rotation, trapezoid SSD, out_proj."""

  def __init__(self, cfg: MambaConfig, *, rngs: nnx.Rngs):
    self.cfg = cfg
    cdt = layers.DTYPES[cfg.dtype]
    h, n, g, r, p = cfg.heads, cfg.d_state, cfg.groups, cfg.mimo_rank, cfg.head_dim
    self.sizes = (cfg.inner, cfg.inner, r * g * n, r * g * n, h, h, h, cfg.num_angles)
    self.in_proj = layers.torch_linear(cfg.d, sum(self.sizes), use_bias=False, rngs=rngs, dtype=cdt)
    self.dt_bias = nnx.Param(_dt_bias(rngs.params(), h, cfg))
    self.B_bias = nnx.Param(jnp.ones((h, r, n), jnp.float32))
    self.C_bias = nnx.Param(jnp.ones((h, r, n), jnp.float32))
    self.B_norm = RMSNorm(n, cfg.norm_eps)
    self.C_norm = RMSNorm(n, cfg.norm_eps)
    if r > 1:
      self.mimo_x = nnx.Param(jnp.full((h, r, p), 1.0 / r, jnp.float32))
      self.mimo_z = nnx.Param(jnp.ones((h, r, p), jnp.float32))
      self.mimo_o = nnx.Param(jnp.full((h, r, p), 1.0 / r, jnp.float32))
    self.D = nnx.Param(jnp.ones((h,), jnp.float32))
    self.out_proj = layers.torch_linear(
      cfg.inner, cfg.d, use_bias=False, kernel_init=_out_init(cfg), rngs=rngs, dtype=cdt
    )

  def _inputs(self, u):
    """Splits in_proj(u) ([..., d], leading axes kept) into the recurrence's inputs."""
    cfg = self.cfg
    h, n, g, r, p = cfg.heads, cfg.d_state, cfg.groups, cfg.mimo_rank, cfg.head_dim
    lead = u.shape[:-1]
    offsets = [sum(self.sizes[: i + 1]) for i in range(len(self.sizes) - 1)]
    z, x, B, C, dd_dt, dd_A, trap, angles = jnp.split(self.in_proj(u), offsets, axis=-1)
    A = jnp.minimum(-jax.nn.softplus(dd_A.astype(jnp.float32)), -cfg.a_floor)
    dt = jax.nn.softplus(dd_dt.astype(jnp.float32) + self.dt_bias[...])
    lam = jax.nn.sigmoid(trap.astype(jnp.float32))

    def keys(a, norm, bias):
      # [..., (R G N)] -> [..., R, H, N]: norm per group, shared by the group's heads, then bias.
      a = norm(a.reshape(*lead, r, g, n))
      a = jnp.repeat(a, h // g, axis=-2)
      return a + jnp.swapaxes(bias[...], 0, 1)

    x = x.reshape(*lead, h, p)
    z = z.reshape(*lead, h, p)
    if r > 1:
      v = x[..., None, :, :] * jnp.swapaxes(self.mimo_x[...], 0, 1).astype(x.dtype)
    else:
      v = x[..., None, :, :]
    return (
      v,
      z,
      dt,
      A,
      lam,
      keys(B, self.B_norm, self.B_bias),
      keys(C, self.C_norm, self.C_bias),
      angles.astype(jnp.float32),
    )

  def _output(self, y, v, z):
    cfg = self.cfg
    y = y.astype(jnp.float32) + self.D[...][:, None] * v.astype(jnp.float32)
    z = z.astype(jnp.float32)[..., None, :, :]
    if cfg.mimo_rank > 1:
      z = z * jnp.swapaxes(self.mimo_z[...], 0, 1)
      y = jnp.sum(y * jax.nn.silu(z) * jnp.swapaxes(self.mimo_o[...], 0, 1), axis=-3)
    else:
      y = (y * jax.nn.silu(z))[..., 0, :, :]
    y = y.reshape(*y.shape[:-2], cfg.inner)
    return self.out_proj(y.astype(layers.DTYPES[cfg.dtype]))

  def __call__(self, u_BTD, *, train: bool = False):  # no dropout: `train` changes nothing
    seg = self.cfg.remat_segment
    b, t, d = u_BTD.shape
    if not seg or t <= seg:
      return self._run(u_BTD)[1]
    # A scan over segments whose body is rematerialised: the backward pass keeps each segment's
    # input and entering state and recomputes the rest one segment at a time. A `jax.checkpoint`
    # without the loop saved nothing in XLA:CPU's memory analysis (nor does `train.remat` there):
    # XLA may schedule every recomputation at once; inside the loop it cannot.
    run = jax.checkpoint(lambda state, u: self._run(u, state))
    full, tail = divmod(t, seg)
    u_MBSD = jnp.moveaxis(u_BTD[:, : full * seg].reshape(b, full, seg, d), 1, 0)
    state, out_MBSD = jax.lax.scan(run, self.init_state(b), u_MBSD)
    out = jnp.moveaxis(out_MBSD, 0, 1).reshape(b, full * seg, -1)
    if tail:  # the remainder as one shorter segment (no padding)
      out = jnp.concatenate([out, run(state, u_BTD[:, full * seg :])[1]], axis=1)
    return out

  def _run(self, u_BTD, state=None):
    """The mixer over a sequence from `state` (`init_state`'s form; None: the empty state):
    (final state, out [B, T, d]). Chained over consecutive pieces it gives the whole sequence's
    outputs, up to rounding."""
    cfg = self.cfg
    how = _resolve(cfg, u_BTD)
    cdt = layers.DTYPES[cfg.dtype]
    theta0, trap0 = (None, None) if state is None else state
    v, z, dt, A, lam, B, C, angles = self._inputs(u_BTD)
    theta = ssd.rotary_theta(angles, dt, initial=theta0, impl=how)  # [B, T, H, S]
    k = ssd.rotate_pairs(B, theta[:, :, None]).astype(cdt)
    q = ssd.rotate_pairs(C, theta[:, :, None]).astype(cdt)
    y, trap = ssd.trapezoid_ssd(
      v, dt, A, lam, k, q, initial_state=trap0, impl=how, chunk_size=cfg.chunk_size
    )
    # The carried keys and values in float32 as `init_state` makes them (exact for bfloat16).
    trap = trap._replace(
      k_prev=trap.k_prev.astype(jnp.float32), v_prev=trap.v_prev.astype(jnp.float32)
    )
    return (theta[:, -1], trap), self._output(y, v, z)

  def init_state(self, batch: int):
    """Rotation angles [B, H, S] and the trapezoid state (S, last keys, last values), float32."""
    cfg = self.cfg
    theta = jnp.zeros((batch, cfg.heads, cfg.num_angles), jnp.float32)
    trap = ssd.trapezoid_zero_state(
      batch, cfg.mimo_rank, cfg.heads, cfg.heads, cfg.head_dim, cfg.d_state, jnp.float32
    )
    return theta, trap

  def step(self, state, u_BD):
    """One token: (state, u [B, d]) -> (state, out [B, d])."""
    theta, trap = state
    cdt = layers.DTYPES[self.cfg.dtype]
    v, z, dt, A, lam, B, C, angles = self._inputs(u_BD)
    theta = ssd.rotary_theta_step(theta, angles, dt)
    k = ssd.rotate_pairs(B, theta[:, None]).astype(cdt)
    q = ssd.rotate_pairs(C, theta[:, None]).astype(cdt)
    trap, y = ssd.trapezoid_step(trap, v, dt, A, lam, k, q)
    return (theta, trap), self._output(y, v, z)


def block(cfg: MambaConfig, *, rngs: nnx.Rngs) -> layers.ResidualBlock:
  """Pre-norm residual block: mixer then gated MLP, residual stream in float32, no dropout."""
  norm1 = RMSNorm(cfg.d, cfg.norm_eps)
  mixer = (Mamba2Mixer if cfg.version == "mamba2" else Mamba3Mixer)(cfg, rngs=rngs)
  norm2 = RMSNorm(cfg.d, cfg.norm_eps)
  return layers.ResidualBlock(norm1, mixer, norm2, gated_mlp(cfg, rngs=rngs))


def head_options(cfg: MambaConfig) -> dict:
  """Output head as mamba_ssm's `_init_weights`: torch-default kernel, zero bias; matmul dtype."""
  return {"bias_init": nnx.initializers.zeros_init(), "dtype": layers.DTYPES[cfg.dtype]}


def forward_flops(cfg: MambaConfig, t: int) -> dict[str, float]:
  """Forward FLOPs per token of the backbone at length `t` (`chessjax.flops`): in_proj and
  out_proj; the state space sequentially (the state update v k^T and the read-out S q per rank,
  Mamba-3 adding the previous token's term) or as chunked SSD (chunk L: the scores q k^T, their
  masked product with v, each chunk's state and the entering state's contribution); the MLP.
  Mamba-3's keys and queries are per head (each head's own bias and rotation), Mamba-2's per
  group, so Mamba-3's scores are formed for every head. The one product per sequence that folds
  the initial state in is left out."""
  d, inner, n, r, mm = cfg.d, cfg.inner, cfg.d_state, cfg.mimo_rank, flops.mm
  if cfg.version == "mamba2":
    width = 2 * inner + 2 * cfg.groups * n + cfg.heads
    key_groups = cfg.groups
  else:
    width = 2 * inner + 2 * r * cfg.groups * n + 3 * cfg.heads + cfg.num_angles
    key_groups = cfg.heads
  if impl.resolve(cfg.mixer_impl, "ssd") is impl.Impl.SEQUENTIAL:
    terms = 2 if cfg.version == "mamba2" else 3
    mixer = r * terms * mm(inner, n)
  else:
    chunk = min(cfg.chunk_size, t)
    mixer = (
      mm(chunk * r * r, key_groups * n)  # scores q k^T within the chunk
      + mm(chunk * r * r, inner)  # the masked scores times v, every head
      + mm(r * inner, n)  # each chunk's state from its keys and values
      + mm(r * inner, n)  # the contribution of the state entering the chunk
    )
  return {
    "projections": cfg.layers * (mm(width, d) + mm(d, inner)),
    "mixer": cfg.layers * mixer,
    "mlp": cfg.layers * (mm(2 * cfg.hidden, d) + mm(d, cfg.hidden)),
  }


def build_backbone(cfg: MambaConfig, *, vocab_size: int, rngs: nnx.Rngs) -> Stack:
  """Embedding (N(0, 0.02)) -> dropout -> Mamba blocks -> RMSNorm (mamba_ssm's norm_f). Streams."""
  embed = nnx.Embed(vocab_size, cfg.d, embedding_init=nnx.initializers.normal(0.02), rngs=rngs)
  embed_drop = nnx.Dropout(cfg.dropout, rngs=rngs)
  blocks = [block(cfg, rngs=rngs) for _ in range(cfg.layers)]
  norm = RMSNorm(cfg.d, cfg.norm_eps)
  return Stack(cfg, embed=embed, blocks=blocks, norm=norm, embed_drop=embed_drop)
