"""The `lstm` family: the LSTM language model of Toshniwal et al. (Learning Chess Blindfolded, AAAI
2022, section 5.3 and Table 12), as released (learning-chess-blindfolded, src/model_utils/
rnn_model.py: `nn.Embedding` -> `nn.LSTM(num_layers, dropout)` -> untied `nn.Linear` decoder).

    x_0 = Drop(E[tokens])                                  (E: vocab x embed, torch N(0, 1) init)
    x_l = LSTM_l(Drop(x_(l-1)))   for l = 1..L      (no Drop before layer 1 beyond the embedding's)
    h = x_L   (Drop(x_L) iff `output_dropout`; the release feeds x_L to the decoder undropped)
    logits = W_dec h + b_dec                       (the untied token head, hidden -> V, with bias)

one layer, PyTorch's `nn.LSTM` with gates in the order i, f, g, o:

    [i, f, g, o] = W_ih x_t + b_ih + W_hh h_(t-1) + b_hh
    c_t = sigmoid(f) c_(t-1) + sigmoid(i) tanh(g),     h_t = sigmoid(o) tanh(c_t),   h_0 = c_0 = 0

Every W_ih, W_hh, b_ih, b_hh is drawn from U(-1/sqrt(hidden), 1/sqrt(hidden)) (torch's
`nn.LSTM.reset_parameters`); kernels are laid out (in, 4 hidden), the transpose of torch's.
The two bias vectors are kept (8 hidden biases per layer), as torch has them, so the parameter
count is torch's: at vocabulary V, embedding e, hidden H, L layers,

    V e  +  4H (e + H) + 8H  +  (L - 1) (8H^2 + 8H)  +  H V + V

Table 12's S (e 768, H 1024, 3 layers) at V = 77: 59,136 + 7,348,224 + 2 x 8,396,800 + 78,925 =
24,279,885 (the paper's 24.28M); M and L (4 layers): 32,676,685 (32.68M).

The backbone's width `d` is the hidden size (the head maps hidden -> V); a tied head needs
embed == hidden. The recurrence is a `jax.lax.scan` over time (time-major inside) with the
input projection of all steps done first as one matmul; `init_state` / `step` run the same cell
one token at a time.
"""

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax.models import layers

FAMILIES = ("lstm",)
# (embedding, hidden, layers). S / M / L: Toshniwal et al., Table 12 (3 layers for Train-S, 4 for
# Train-M and Train-L); tiny and micro: CPU sizes of this codebase (micro: 846,333 parameters
# at vocabulary 77, about GPT-2 micro's 868,736).
SIZES = {
  "tiny": (32, 64, 2),
  "micro": (128, 240, 2),
  "S": (768, 1024, 3),
  "M": (768, 1024, 4),
  "L": (768, 1024, 4),
}


@dataclasses.dataclass(frozen=True)
class LSTMConfig:
  """Hyperparameters of the LSTM language model (defaults: the paper's Table 12, bold values)."""

  embed: int
  hidden: int
  layers: int
  dropout: float = 0.2  # on the embedding and between layers (nn.LSTM's `dropout`)
  output_dropout: bool = False  # also on the last layer's output (not in the release)
  dtype: str = "float32"  # matmul dtype: "float32" | "bfloat16" (gates and state stay float32)

  def __post_init__(self):
    layers.check_config(self)
    if min(self.embed, self.hidden, self.layers) < 1:
      raise ValueError(f"embed, hidden and layers must be positive, got {self}")

  @property
  def d(self) -> int:
    """The backbone's output width (the head's input): the hidden size."""
    return self.hidden


def base_config(family: str, size: str) -> LSTMConfig:
  """The LSTM at `size` (`SIZES`)."""
  if family not in FAMILIES:
    raise ValueError(f"{family!r} is not the lstm family")
  embed, hidden, n_layers = SIZES[size]
  return LSTMConfig(embed=embed, hidden=hidden, layers=n_layers)


def lstm_cell(carry, gates_in_BG, w_hh_HG, *, dtype=jnp.float32):
  """One step of PyTorch's LSTM cell. `gates_in_BG` = W_ih x_t + b_ih + b_hh (float32 [B, 4H]);
  carry (h, c) float32 [B, H]. Returns (h, c)."""
  h, c = carry
  gates = gates_in_BG + jnp.dot(h.astype(dtype), w_hh_HG.astype(dtype)).astype(jnp.float32)
  i, f, g, o = jnp.split(gates, 4, axis=-1)
  c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
  return jax.nn.sigmoid(o) * jnp.tanh(c), c


class LSTMLayer(nnx.Module):
  """One `nn.LSTM` layer: `w_ih` (in -> 4H, bias b_ih) and `w_hh` (H -> 4H, bias b_hh)."""

  def __init__(self, in_features: int, hidden: int, *, rngs: nnx.Rngs, dtype=jnp.float32):
    self.hidden = hidden
    self.dtype = dtype
    init = layers.torch_bias_init(hidden)  # U(-1/sqrt(H), 1/sqrt(H)), any shape
    kw = {"use_bias": True, "kernel_init": init, "bias_init": init, "dtype": dtype}
    self.w_ih = layers.Linear(in_features, 4 * hidden, param_dtype=jnp.float32, rngs=rngs, **kw)
    self.w_hh = layers.Linear(hidden, 4 * hidden, param_dtype=jnp.float32, rngs=rngs, **kw)

  def _gates_in(self, x):
    """W_ih x + b_ih + b_hh (the h-independent part of the gates), float32."""
    return self.w_ih(x).astype(jnp.float32) + self.w_hh.bias[...]

  def __call__(self, x_BTI, carry=None):
    """Outputs h float32[B, T, H] for inputs [B, T, in], from `carry` (h, c) or zeros."""
    b = x_BTI.shape[0]
    if carry is None:
      carry = self.init_state(b)
    gates_TBG = jnp.swapaxes(self._gates_in(x_BTI), 0, 1)  # time-major for the scan
    w_hh = self.w_hh.kernel[...]

    def scan_fn(carry, gates_in):
      h, c = lstm_cell(carry, gates_in, w_hh, dtype=self.dtype)
      return (h, c), h

    _, h_TBH = jax.lax.scan(scan_fn, carry, gates_TBG)
    return jnp.swapaxes(h_TBH, 0, 1)

  def init_state(self, batch: int):
    zeros = jnp.zeros((batch, self.hidden), jnp.float32)
    return zeros, zeros

  def step(self, carry, x_BI):
    """One token: (h, c) -> (h, c); the output is h."""
    return lstm_cell(carry, self._gates_in(x_BI), self.w_hh.kernel[...], dtype=self.dtype)


def head_options(cfg: LSTMConfig) -> dict:
  """The decoder: torch `nn.Linear(hidden, V)` default inits (the release), the matmul dtype."""
  return {"dtype": layers.DTYPES[cfg.dtype]}


class Backbone(nnx.Module):
  """Embedding -> dropout -> LSTM layers (dropout between): token ids int32[B, T] -> h float32[B,
  T, hidden].

  `return_hiddens` adds the layers + 1 arrays: the embedding output float32[B, T, embed] (after
  its dropout, as fed to layer 1) and each layer's output float32[B, T, hidden] (before the
  dropout that follows it). Streaming: `init_state(batch)` (zeros (h, c) per layer) and
  `step(state, tokens_B) -> (state, h [B, hidden])`, equal to the parallel forward (eval mode).
  """

  streams = True

  def __init__(self, cfg: LSTMConfig, *, vocab_size: int, rngs: nnx.Rngs):
    self.cfg = cfg
    mm = layers.DTYPES[cfg.dtype]
    self.embed = layers.embedding(vocab_size, cfg.embed, rngs=rngs)  # torch nn.Embedding: N(0, 1)
    self.embed_drop = nnx.Dropout(cfg.dropout, rngs=rngs)
    self.lstm = nnx.List(
      [
        LSTMLayer(cfg.embed if i == 0 else cfg.hidden, cfg.hidden, rngs=rngs, dtype=mm)
        for i in range(cfg.layers)
      ]
    )
    self.drop = nnx.Dropout(cfg.dropout, rngs=rngs)  # between layers (and after the last)

  def __call__(self, tokens_BT, *, train: bool = False, return_hiddens: bool = False):
    x = self.embed_drop(self.embed(tokens_BT).astype(jnp.float32), deterministic=not train)
    hiddens = [x]
    for i, layer in enumerate(self.lstm):
      if i > 0:
        x = self.drop(x, deterministic=not train)
      x = layer(x)
      hiddens.append(x)
    if self.cfg.output_dropout:
      x = self.drop(x, deterministic=not train)
    return (x, hiddens) if return_hiddens else x

  def init_state(self, batch: int):
    return tuple(layer.init_state(batch) for layer in self.lstm)

  def step(self, state, tokens_B):
    """One token per sequence (no dropout): returns (new state, h float32[B, hidden])."""
    x = self.embed(tokens_B).astype(jnp.float32)
    new_state = []
    for carry, layer in zip(state, self.lstm, strict=True):
      carry = layer.step(carry, x)
      new_state.append(carry)
      x = carry[0]
    return tuple(new_state), x


def build_backbone(cfg: LSTMConfig, *, vocab_size: int, rngs: nnx.Rngs) -> Backbone:
  """The LSTM keeps a loop of its own: it is not a residual stack (no residual stream, dropout
  between layers instead of on residual branches), so `chessjax.models.stack` does not fit it."""
  return Backbone(cfg, vocab_size=vocab_size, rngs=rngs)
