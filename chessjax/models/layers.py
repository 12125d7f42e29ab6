"""Building blocks shared by the model families: PyTorch-compatible inits, matmul dtypes, RMSNorm,
the gated MLP, the embedding and the pre-norm residual block every family stacks.

PyTorch's defaults differ from Flax's, and parameter-for-parameter faithfulness to the released
models needs them: `nn.Linear` draws weights from kaiming-uniform(a=sqrt 5), which is
U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and biases from the same range; `nn.Embedding` draws N(0, 1).
Flax kernels are laid out (in, out), the transpose of torch's (out, in).
"""

import math

import jax
import jax.numpy as jnp
from flax import nnx

# The mixed-precision policy, one model config key `dtype` (configs/cwm.py, configs/lm.py):
# parameters and optimizer state are always float32; the value names how the matmuls compute.
# "float32": float32 at the backend's default precision (TF32 on Ampere and newer GPUs, full
# float32 on a CPU); "tf32": float32 inputs, TF32 products set explicitly for the process
# (`MATMUL_PRECISION`, applied by `chessjax.main`), the paper's `allow_tf32`; "bfloat16": the
# Linear matmuls (and attention products) in bfloat16 with norms, recurrent state, decays and
# the residual stream float32 (the paper's Mamba-3 autocast, Walker & Lyons, appendix B.2).
DTYPES = {"float32": jnp.float32, "tf32": jnp.float32, "bfloat16": jnp.bfloat16}
# Policy -> the process-wide `jax_default_matmul_precision` it needs (None: leave JAX's default).
MATMUL_PRECISION = {"tf32": "tensorfloat32"}


def check_config(cfg, rates: tuple[str, ...] = ("dropout",)) -> None:
  """The checks every family's config shares (call from its `__post_init__`): `cfg.dtype` names
  one of `DTYPES`, and each field named in `rates` (dropout probabilities) lies in [0, 1)."""
  if cfg.dtype not in DTYPES:
    raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {cfg.dtype!r}")
  for name in rates:
    if not 0.0 <= getattr(cfg, name) < 1.0:
      raise ValueError(f"{name} must be in [0, 1), got {getattr(cfg, name)}")


# torch kaiming_uniform_(a=sqrt(5)) on a (out, in) weight: bound = 1 / sqrt(fan_in).
torch_kernel_init = nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


def torch_bias_init(fan_in: int):
  """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), torch's default Linear/Conv bias init."""
  bound = 1.0 / fan_in**0.5

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


def scaled_init(init, scale: float):
  """An initializer whose draws are multiplied by `scale` (e.g. 1/sqrt(2 L) rescaling)."""

  def scaled(key, shape, dtype=jnp.float32):
    return init(key, shape, dtype) * scale

  return scaled


class Linear(nnx.Linear):
  """`nnx.Linear` applied to the tokens as one 2-D matrix: [..., in] -> [N, in] -> [..., out].

  Same parameters and values. On XLA:CPU a dot with two leading batch dimensions gets a
  transposing copy in its weight gradient; the 2-D dot does not, and the whole train step runs
  1.2-1.5x faster, by family (benchmarks/bench_train_step, d128, T=512). Elsewhere the reshape is
  free.
  """

  def __call__(self, x):
    lead = x.shape[:-1]
    return super().__call__(x.reshape(-1, x.shape[-1])).reshape(*lead, -1)


def torch_linear(
  in_features: int,
  out_features: int,
  *,
  rngs: nnx.Rngs,
  use_bias: bool = True,
  kernel_init=None,
  bias_init=None,
  dtype=None,
) -> Linear:
  """A `Linear` initialised like `torch.nn.Linear` unless inits are given."""
  return Linear(
    in_features,
    out_features,
    use_bias=use_bias,
    kernel_init=kernel_init if kernel_init is not None else torch_kernel_init,
    bias_init=bias_init if bias_init is not None else torch_bias_init(in_features),
    dtype=dtype,
    param_dtype=jnp.float32,
    rngs=rngs,
  )


def embedding(vocab_size: int, d: int, *, rngs: nnx.Rngs, stddev: float = 1.0) -> nnx.Embed:
  """Token embedding (for moves: the 20,482 move ids, START and PAD rows learned too), N(0,
  stddev^2) init (torch `nn.Embedding` default: stddev 1)."""
  return nnx.Embed(
    vocab_size,
    d,
    embedding_init=nnx.initializers.normal(stddev),
    param_dtype=jnp.float32,
    rngs=rngs,
  )


def inverse_softplus_dt_init(dt_min: float = 1e-3, dt_max: float = 1e-1, floor: float = 1e-4):
  """Init of a dt bias: softplus^-1(dt), dt = exp(U(log dt_min, log dt_max)) clamped >= floor.

  The time-step init of Mamba (Gu & Dao; Dao & Gu, Mamba-2) reused by Gated DeltaNet (Yang et al.,
  Gated Delta Networks): softplus(dt_bias) starts log-uniform over two decades of time scales.
  """
  lo, hi = math.log(dt_min), math.log(dt_max)

  def init(key, shape, dtype=jnp.float32):
    dt = jnp.maximum(jnp.exp(jax.random.uniform(key, shape, dtype, lo, hi)), floor)
    # softplus^-1(dt) = dt + log(1 - exp(-dt)), written with expm1 for accuracy at small dt.
    return dt + jnp.log(-jnp.expm1(-dt))

  return init


def rms_norm(x, weight, eps: float):
  """x / sqrt(mean(x^2) + eps) * weight over the last axis, computed in float32."""
  x = x.astype(jnp.float32)
  return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def causal_conv(x_BTF, kernel_WF, bias_F=None):
  """Depthwise causal convolution of a whole sequence from zero history (Gated DeltaNet's short
  conv, Mamba-2's conv1d): y_t = sum_i kernel[i] x_{t-(W-1)+i} (+ bias), the last tap on the
  current step, i.e. torch's Conv1d(groups=F) `weight[:, 0, i]` with left padding W-1."""
  steps, width = x_BTF.shape[1], kernel_WF.shape[0]
  xp = jnp.pad(x_BTF, ((0, 0), (width - 1, 0), (0, 0)))
  y = sum(xp[:, i : i + steps] * kernel_WF[i] for i in range(width))
  return y if bias_F is None else y + bias_F


def causal_conv_step(window_BWF, x_BF, kernel_WF, bias_F=None):
  """One step of `causal_conv` from the last W-1 inputs: returns (their successor, y [B, F])."""
  window = jnp.concatenate([window_BWF, x_BF[:, None]], axis=1)
  y = jnp.einsum("bwc,wc->bc", window, kernel_WF)
  return window[:, 1:], y if bias_F is None else y + bias_F


class RMSNorm(nnx.Module):
  """`rms_norm` with a learned weight (init 1); returns float32 (mamba_ssm's / fla's RMSNorm).

  The Transformer, SLiCE and Gated DeltaNet blocks use `nnx.RMSNorm` instead and must keep it:
  its constructor draws an rng key (for the ones init), so swapping it for this class would shift
  every later draw and change those families' initial values; and it computes x * (rsqrt * w)
  rather than (x * rsqrt) * w, which differs in the last bit.
  """

  def __init__(self, dim: int, eps: float):
    self.weight = nnx.Param(jnp.ones((dim,), jnp.float32))
    self.eps = eps

  def __call__(self, x):
    return rms_norm(x, self.weight[...], self.eps)


class GatedMLP(nnx.Module):
  """out(act(gate) * value): the gated MLP of the Transformer (SwiGLU), Gated DeltaNet and Mamba.

  The families differ only in layout and inits, kept so their parameters stay the released ones:

  * `layout="gate_value"`: one fused input Linear `fc_in` d -> 2 hidden, gate half first (the
    Transformer); `"value_gate"`: the same, value half first (mamba_ssm's GatedMLP);
    `"split"`: two Linears `fc_gate`, `fc_up` d -> hidden, created in that order (fla's GatedMLP).
  * `fc_out` hidden -> d. Biases, kernel inits and matmul dtype as given (torch defaults if None).
  """

  LAYOUTS = ("gate_value", "value_gate", "split")

  def __init__(
    self,
    d: int,
    hidden: int,
    *,
    rngs: nnx.Rngs,
    layout: str = "gate_value",
    use_bias: bool = True,
    kernel_init=None,
    out_kernel_init=None,
    dtype=None,
  ):
    if layout not in self.LAYOUTS:
      raise ValueError(f"layout must be one of {self.LAYOUTS}, got {layout!r}")
    self.layout = layout
    kw = {"rngs": rngs, "use_bias": use_bias, "dtype": dtype}
    if layout == "split":
      self.fc_gate = torch_linear(d, hidden, kernel_init=kernel_init, **kw)
      self.fc_up = torch_linear(d, hidden, kernel_init=kernel_init, **kw)
    else:
      self.fc_in = torch_linear(d, 2 * hidden, kernel_init=kernel_init, **kw)
    self.fc_out = torch_linear(hidden, d, kernel_init=out_kernel_init, **kw)

  def __call__(self, x):
    if self.layout == "split":
      gate, value = self.fc_gate(x), self.fc_up(x)
    elif self.layout == "gate_value":
      gate, value = jnp.split(self.fc_in(x), 2, axis=-1)
    else:
      value, gate = jnp.split(self.fc_in(x), 2, axis=-1)
    return self.fc_out(jax.nn.silu(gate) * value).astype(jnp.float32)


class ResidualBlock(nnx.Module):
  """The pre-norm residual block of every family (cf. recurrentgemma's `ResidualBlock`):

      h += Drop(mixer(norm1(h)));    h += Drop(mlp(norm2(h)))      (residual stream float32)

  The submodules are built by the family, in its own order (the order decides which rng key
  each one draws, hence the initial values), and handed in. `drop` is None for families without
  residual dropout. Every mixer is called `mixer(x, train=...)` (the attention mixers apply
  dropout when training; the others ignore it); a mixer with `init_state`/`step` makes the block
  streamable.
  """

  def __init__(self, norm1, mixer, norm2, mlp, drop=None):
    self.norm1 = norm1
    self.mixer = mixer
    self.norm2 = norm2
    self.mlp = mlp
    self.drop = drop

  def _drop(self, x, train: bool):
    x = x.astype(jnp.float32)
    return x if self.drop is None else self.drop(x, deterministic=not train)

  def __call__(self, h_BTD, *, train: bool = False):
    x = self.norm1(h_BTD)
    h_BTD = h_BTD + self._drop(self.mixer(x, train=train), train)
    return h_BTD + self._drop(self.mlp(self.norm2(h_BTD)), train)

  def init_state(self, batch: int):
    return self.mixer.init_state(batch)

  def step(self, state, h_BD):
    """One token (no dropout): returns (new mixer state, h [B, D])."""
    state, y = self.mixer.step(state, self.norm1(h_BD))
    h_BD = h_BD + y.astype(jnp.float32)
    return state, h_BD + self.mlp(self.norm2(h_BD)).astype(jnp.float32)


class NoWeightDecay(nnx.Param):
  """A trainable parameter the optimizer must not decay (e.g. Gated DeltaNet's A_log, dt_bias)."""
