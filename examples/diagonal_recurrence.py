"""A diagonal linear recurrence as a chessjax model family: one file, outside the package.

    python -m chessjax.main --config=configs/cwm.py:family=examples.diagonal_recurrence,size=d128 \
        --workdir=runs/diag_d128 --config.data.train=data/lichess_2025-03

Mixer, per channel, with an input-dependent decay (x: the block's normalised input):

    a_t = sigmoid(W_a x_t),   h_t = a_t * h_{t-1} + (1 - a_t) * W_v x_t,   y_t = W_o h_t

parallel over time by an associative scan, and one step at a time for streaming. The block (pre-
norm mixer + gated MLP) and the backbone (embedding -> blocks -> final norm) are chessjax's own.
A family module provides `SIZES`, `base_config` and `build_backbone`
(`chessjax.models.registry.FamilyModule`); `RECIPE`, `head_options` and `forward_flops` (the
FLOPs behind MFU) are optional. The mixer has `init_state` / `step`, so the `Stack` streams.
"""

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax.models import layers
from chessjax.models.sizes import SIZES  # the paper's grid, d128 .. d512
from chessjax.models.stack import Stack

RECIPE = "slice"  # train with SLiCE's row of the paper's Table 7 (default: the Transformer's)


@dataclasses.dataclass(frozen=True)
class Config:
  d: int
  layers: int
  mlp_mult: int = 4
  norm_eps: float = 1e-6


def base_config(family: str, size: str) -> Config:
  d, n_layers, _ = SIZES[size]
  return Config(d=d, layers=n_layers)


def forward_flops(cfg: Config, t: int) -> dict[str, float]:
  """Forward FLOPs per token (2 per multiply-add of a matrix product): W_a, W_v, W_o; the scan's
  products are elementwise (none counted); the gated MLP d -> 2 (4d) -> d."""
  d, hidden = cfg.d, cfg.mlp_mult * cfg.d
  return {
    "projections": cfg.layers * 3 * 2 * d * d,
    "mixer": 0.0,
    "mlp": cfg.layers * (2 * 2 * hidden * d + 2 * hidden * d),
  }


class Mixer(nnx.Module):
  def __init__(self, d: int, *, rngs: nnx.Rngs):
    self.d = d
    self.w_a = layers.torch_linear(d, d, rngs=rngs)
    self.w_v = layers.torch_linear(d, d, rngs=rngs)
    self.w_o = layers.torch_linear(d, d, rngs=rngs)

  def _coefficients(self, x):
    a = jax.nn.sigmoid(self.w_a(x))
    return a, (1 - a) * self.w_v(x)

  def __call__(self, x_BTD, *, train: bool = False):  # no dropout: `train` changes nothing
    a, b = self._coefficients(x_BTD)
    # (a1, b1) then (a2, b2) is h -> a2 (a1 h + b1) + b2: associative, so scan in parallel.
    compose = lambda first, then: (first[0] * then[0], then[0] * first[1] + then[1])  # noqa: E731
    _, h = jax.lax.associative_scan(compose, (a, b), axis=1)
    return self.w_o(h)

  def init_state(self, batch: int):
    return jnp.zeros((batch, self.d), jnp.float32)

  def step(self, h_BD, x_BD):
    a, b = self._coefficients(x_BD)
    h_BD = a * h_BD + b
    return h_BD, self.w_o(h_BD)


def build_backbone(cfg: Config, *, vocab_size: int, rngs: nnx.Rngs) -> Stack:
  def block():
    norm1 = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
    mixer = Mixer(cfg.d, rngs=rngs)
    norm2 = nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
    return layers.ResidualBlock(
      norm1, mixer, norm2, layers.GatedMLP(cfg.d, cfg.mlp_mult * cfg.d, rngs=rngs)
    )

  embed = layers.embedding(vocab_size, cfg.d, rngs=rngs, stddev=0.02)
  blocks = [block() for _ in range(cfg.layers)]
  return Stack(
    cfg, embed=embed, blocks=blocks, norm=nnx.RMSNorm(cfg.d, epsilon=cfg.norm_eps, rngs=rngs)
  )
