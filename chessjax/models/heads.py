"""Output heads on a family's backbone, and `Model`, the backbone + head pair `create_model` builds.

* `StateHead`: the dense d -> 1878 world-model head with bias (Walker & Lyons, Chess-World-Model,
  appendix B.2): logits of the seven board-state label groups of `chessjax.labels`.
* `TokenHead`: d -> V next-token logits of a language model; tied to the backbone's embedding
  (logits = h E^T, no parameters of its own) or a Linear of its own.

A head maps hidden states float32[..., D] to logits float32[..., out] (shape letters:
`chessjax.shapes`).
"""

import jax.numpy as jnp
from flax import nnx

from chessjax import labels
from chessjax.models import layers


class StateHead(layers.Linear):
  """The 1878-wide state head, a Linear d -> 1878 with bias (parameters `kernel`, `bias`).

  Initialised like torch's `nn.Linear` unless the family gives inits (Gated DeltaNet: N(0, 0.02)
  kernel, zero bias; Mamba: zero bias); `dtype` is the family's matmul dtype. Logits float32.
  """

  def __init__(self, d: int, *, rngs: nnx.Rngs, kernel_init=None, bias_init=None, dtype=None):
    super().__init__(
      d,
      labels.HEAD_DIM,
      use_bias=True,
      kernel_init=kernel_init if kernel_init is not None else layers.torch_kernel_init,
      bias_init=bias_init if bias_init is not None else layers.torch_bias_init(d),
      dtype=dtype,
      param_dtype=jnp.float32,
      rngs=rngs,
    )

  def __call__(self, h):
    return super().__call__(h).astype(jnp.float32)


class TokenHead(nnx.Module):
  """Next-token logits over a vocabulary of `vocab_size`.

  With `tie_to` (the backbone's `nnx.Embed`) the logits are h E^T in float32: the embedding is
  shared, not copied, so the head adds no parameter. Otherwise a Linear d -> V (bias iff
  `use_bias`), initialised like torch's `nn.Linear` unless inits are given.
  """

  def __init__(
    self,
    d: int,
    vocab_size: int,
    *,
    rngs: nnx.Rngs,
    tie_to: nnx.Embed | None = None,
    use_bias: bool = True,
    kernel_init=None,
    bias_init=None,
    dtype=None,
  ):
    self.vocab_size = vocab_size
    if tie_to is not None:
      if tie_to.num_embeddings != vocab_size or tie_to.features != d:
        raise ValueError(
          f"cannot tie a [{d} -> {vocab_size}] head to an embedding of "
          f"[{tie_to.num_embeddings}, {tie_to.features}]"
        )
      self.tied = tie_to
      self.linear = None
    else:
      self.tied = None
      self.linear = layers.torch_linear(
        d,
        vocab_size,
        rngs=rngs,
        use_bias=use_bias,
        kernel_init=kernel_init,
        bias_init=bias_init,
        dtype=dtype,
      )

  @property
  def out_features(self) -> int:
    return self.vocab_size

  def __call__(self, h):
    if self.tied is not None:
      table = self.tied.embedding[...].astype(jnp.float32)
      return jnp.einsum("...d,vd->...v", h.astype(jnp.float32), table)
    return self.linear(h).astype(jnp.float32)


class Model(nnx.Module):
  """A family's backbone followed by a head: token ids int32[B, T] -> logits float32[B, T, out].

  `__call__(tokens_BT, *, train=False, return_hiddens=False)` returns the logits, or (logits,
  hiddens) with the backbone's `layers + 1` residual-stream arrays float32[B, T, D] (embedding
  output, then each block's output). Dropout is active only when `train=True`. Streaming:
  `init_state(batch)` and `step(state, tokens_B) -> (state, logits float32[B, out])` reproduce
  the parallel forward (train=False) position by position, for backbones that stream.
  """

  def __init__(self, backbone: nnx.Module, head: nnx.Module):
    self.backbone = backbone
    self.head = head

  @property
  def cfg(self):
    return self.backbone.cfg

  def __call__(self, tokens_BT, *, train: bool = False, return_hiddens: bool = False):
    if return_hiddens:
      h_BTD, hiddens = self.backbone(tokens_BT, train=train, return_hiddens=True)
      return self.head(h_BTD), hiddens
    return self.head(self.backbone(tokens_BT, train=train))

  def init_state(self, batch: int):
    return self.backbone.init_state(batch)

  def step(self, state, tokens_B):
    state, h_BD = self.backbone.step(state, tokens_B)
    return state, self.head(h_BD)
