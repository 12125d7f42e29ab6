"""Building blocks shared by the model families: PyTorch-compatible inits, RMSNorm, embedding, head.

PyTorch's defaults differ from Flax's, and parameter-for-parameter faithfulness to the released
models needs them: `nn.Linear` draws weights from kaiming-uniform(a=sqrt 5), which is
U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and biases from the same range; `nn.Embedding` draws N(0, 1).
Flax kernels are laid out (in, out), the transpose of torch's (out, in).
"""

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax import encoding, labels

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


def move_embedding(d: int, *, rngs: nnx.Rngs, stddev: float = 1.0) -> nnx.Embed:
  """Embedding of the 20,482 move ids (START and PAD rows learned too), N(0, stddev^2) init
  (torch `nn.Embedding` default: stddev 1)."""
  return nnx.Embed(
    encoding.MOVE_VOCAB_SIZE,
    d,
    embedding_init=nnx.initializers.normal(stddev),
    param_dtype=jnp.float32,
    rngs=rngs,
  )


def state_head(d: int, *, rngs: nnx.Rngs, kernel_init=None, bias_init=None, dtype=None):
  """The dense `d -> 1878` output head (SPEC section 4), with bias."""
  return torch_linear(
    d, labels.HEAD_DIM, rngs=rngs, kernel_init=kernel_init, bias_init=bias_init, dtype=dtype
  )


class NoWeightDecay(nnx.Param):
  """A trainable parameter the optimizer must not decay (e.g. Gated DeltaNet's A_log, dt_bias)."""
