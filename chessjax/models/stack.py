"""The one backbone of every residual family: embedding -> blocks -> final norm.

    h_0 = Drop(embed(tokens) [+ pos_embed[0:T]])    (float32; dropout only if the family has it)
    h_l = block_l(h_{l-1})                           (`layers.ResidualBlock`, l = 1..L)
    out = norm(h_L)                                  (identity if the family has no final norm)

`__call__(tokens_BT, *, train, return_hiddens)` gives out float32[B, T, D], or (out, [h_0 .. h_L])
with every layer's residual stream for probes. A family module builds the parts in its own order
(which decides each part's rng draws, hence the initial values) and hands them in.

Streaming, for stacks whose every mixer has `init_state`/`step` (`streams`): `init_state(batch)`
and `step(state, tokens_B) -> (state, out float32[B, D])` reproduce the parallel forward
(train=False) position by position. Learned absolute positions make a stack non-streaming.
"""

import jax.numpy as jnp
from flax import nnx


class Stack(nnx.Module):
  # Recompute each block's activations in the backward pass (`nnx.remat`); set when the model is
  # built with `create_model(..., remat=True)` (`train.remat`). Values and parameters unchanged.
  remat: bool = False

  def __init__(self, cfg, *, embed, blocks, norm=None, embed_drop=None, pos_embed=None):
    self.cfg = cfg
    self.embed = embed
    self.pos_embed = pos_embed
    self.embed_drop = embed_drop
    self.blocks = nnx.List(blocks)
    self.norm = norm

  @property
  def streams(self) -> bool:
    """Whether `init_state` / `step` work: every mixer steps and no learned positions."""
    return self.pos_embed is None and all(hasattr(b.mixer, "step") for b in self.blocks)

  def _out(self, h):
    return h if self.norm is None else self.norm(h)

  def _embed(self, tokens_BT, train: bool):
    h = self.embed(tokens_BT)
    if self.pos_embed is not None:
      t, n = tokens_BT.shape[1], self.pos_embed.num_embeddings
      if t > n:
        raise ValueError(
          f"the model has {n} learned positions but got a sequence of {t} tokens; shorten it or "
          "build the model with more positions"
        )
      h = h + self.pos_embed.embedding[:t][None]
    h = h.astype(jnp.float32)
    return h if self.embed_drop is None else self.embed_drop(h, deterministic=not train)

  def __call__(self, tokens_BT, *, train: bool = False, return_hiddens: bool = False):
    h = self._embed(tokens_BT, train)
    hiddens = [h]
    for blk in self.blocks:
      if self.remat:
        h = nnx.remat(lambda b, x: b(x, train=train))(blk, h)
      else:
        h = blk(h, train=train)
      hiddens.append(h)
    return (self._out(h), hiddens) if return_hiddens else self._out(h)

  def _check_streams(self) -> None:
    if not self.streams:
      raise NotImplementedError(
        f"{type(self.cfg).__name__}: this model has no streaming step (attention or learned "
        "positions); run the full forward instead"
      )

  def init_state(self, batch: int):
    """Streaming state before the first token: one entry per block."""
    self._check_streams()
    return tuple(blk.init_state(batch) for blk in self.blocks)

  def step(self, state, tokens_B):
    """Consumes one token per sequence (no dropout): (state, int32[B]) -> (state, float32[B, D])."""
    self._check_streams()
    h = self.embed(tokens_B).astype(jnp.float32)
    new_state = []
    for blk, s in zip(self.blocks, state, strict=True):
      s, h = blk.step(s, h)
      new_state.append(s)
    return tuple(new_state), self._out(h)
