"""Sizes, families and the one way to build a model: a family's backbone plus a head.

Each family module (`transformer`, `slice`, `gated_deltanet`, `mamba`, `gpt2`, `lstm`) exposes
`base_config(family, size)` (the frozen released configuration), `Backbone(cfg, *, vocab_size,
rngs)` and `head_options(cfg)` (the kernel/bias inits and matmul dtype of its output Linear).
Family modules import `SIZES` (or their own size table) from here; this module imports them
lazily (importlib), so there is no import cycle.

Two kinds of family: `FAMILIES`, the Chess-World-Model grid, every one at every size of `SIZES`;
and `LM_FAMILIES`, the language-model baselines of Toshniwal et al. (Learning Chess Blindfolded,
AAAI 2022), each with its own sizes (`GPT2_SIZES`, `LSTM_SIZES`). `family_sizes(family)` gives a
family's size table; `create_model`, `model_config` and `abstract_model` take either kind.
"""

import dataclasses
import importlib

import jax
from flax import nnx

from chessjax import encoding
from chessjax.models import heads

# (d, layers, heads) per size (Walker & Lyons, Chess-World-Model, appendix B.2).
SIZES = {"d128": (128, 1, 2), "d256": (256, 2, 4), "d384": (384, 4, 6), "d512": (512, 6, 8)}

# family -> module under chessjax.models that implements it.
FAMILIES = {
  "transformer": "transformer",
  "slice": "slice",
  "slice_diag": "slice",
  "gated_deltanet": "gated_deltanet",
  "gated_deltanet_pos": "gated_deltanet",
  "mamba2": "mamba",
  "mamba3": "mamba",
  "mamba3_mimo": "mamba",
}

# Language-model families (Toshniwal et al., Learning Chess Blindfolded, section 4 and Table 12),
# kept apart from FAMILIES because their sizes are their own (and they have no world-model recipe
# in configs/cwm.py). family -> module under chessjax.models.
LM_FAMILIES = {"gpt2": "gpt2", "gpt2_w50": "gpt2", "lstm": "lstm"}

# GPT-2 (d, layers, heads), the order of SIZES. small / intermediate / medium: the paper's Table 9
# (GPT2-small is Hugging Face's `gpt2`); tiny, micro and mini: CPU sizes of this codebase.
GPT2_SIZES = {
  "tiny": (64, 2, 2),
  "micro": (128, 4, 4),
  "mini": (256, 4, 4),
  "small": (768, 12, 12),
  "intermediate": (768, 16, 12),
  "medium": (1024, 24, 16),
}

# LSTM (embedding, hidden, layers). S / M / L: the paper's Table 12 (3 layers for Train-S, 4 for
# Train-M and Train-L); tiny: a CPU size of this codebase.
LSTM_SIZES = {
  "tiny": (32, 64, 2),
  "S": (768, 1024, 3),
  "M": (768, 1024, 4),
  "L": (768, 1024, 4),
}

_LM_SIZES = {"gpt2": GPT2_SIZES, "gpt2_w50": GPT2_SIZES, "lstm": LSTM_SIZES}

HEADS = ("state", "tokens")


def _check_family(family: str) -> str:
  """The module name of `family` (either kind); unknown families raise."""
  if family in FAMILIES:
    return FAMILIES[family]
  if family in LM_FAMILIES:
    return LM_FAMILIES[family]
  known = sorted(FAMILIES) + sorted(LM_FAMILIES)
  raise ValueError(f"unknown model family {family!r}; expected one of {known}")


def _family_module(family: str):
  return importlib.import_module(f"chessjax.models.{_check_family(family)}")


def family_sizes(family: str) -> dict:
  """The size table of `family`: `SIZES` for the world-model families, else the family's own."""
  _check_family(family)
  return _LM_SIZES.get(family, SIZES)


def model_config(family: str, size: str, **overrides):
  """The frozen config of a family and size, with `overrides` applied (unknown keys raise)."""
  sizes = family_sizes(family)
  if size not in sizes:
    raise ValueError(f"unknown model size {size!r} for {family}; expected one of {list(sizes)}")
  cfg = _family_module(family).base_config(family, size)
  known = {f.name for f in dataclasses.fields(cfg)}
  unknown = sorted(set(overrides) - known)
  if unknown:
    raise ValueError(f"unknown {family} config key(s) {unknown}; valid keys are {sorted(known)}")
  return dataclasses.replace(cfg, **overrides)


def create_model(
  family: str,
  size: str,
  *,
  seed: int = 0,
  head: str = "state",
  vocab_size: int | None = None,
  tie_embeddings: bool = False,
  **overrides,
) -> heads.Model:
  """Builds a family's model at a size, initialised from `seed` like the released code.

  `head="state"`: the world model, move ids -> 1878 state logits (`vocab_size` must be None or
  `encoding.MOVE_VOCAB_SIZE`; no tying). `head="tokens"`: a language model over `vocab_size`
  tokens, its head tied to the embedding iff `tie_embeddings` (else a Linear with bias, inits and
  dtype as the family's state head). `overrides` are config keys (`model_config`).

  The backbone is built before the head from one `nnx.Rngs(seed)`, the order of the released
  models, so the state model's initial values are those of the released code for the seed.
  """
  if head not in HEADS:
    raise ValueError(f"head must be one of {HEADS}, got {head!r}")
  if head == "state":
    if vocab_size not in (None, encoding.MOVE_VOCAB_SIZE):
      raise ValueError(f"the state head reads move ids (vocab {encoding.MOVE_VOCAB_SIZE})")
    if tie_embeddings:
      raise ValueError("the state head cannot be tied to the move embedding (1878 != vocab)")
    vocab_size = encoding.MOVE_VOCAB_SIZE
  elif vocab_size is None or vocab_size < 1:
    raise ValueError(f'head="tokens" needs a positive vocab_size, got {vocab_size!r}')
  module = _family_module(family)
  cfg = model_config(family, size, **overrides)
  rngs = nnx.Rngs(seed)
  backbone = module.Backbone(cfg, vocab_size=vocab_size, rngs=rngs)
  options = module.head_options(cfg)
  if head == "state":
    out = heads.StateHead(cfg.d, rngs=rngs, **options)
  else:
    tie_to = backbone.embed if tie_embeddings else None
    out = heads.TokenHead(cfg.d, vocab_size, rngs=rngs, tie_to=tie_to, **options)
  return heads.Model(backbone, out)


def abstract_model(family: str, size: str, **kwargs) -> heads.Model:
  """`create_model` with shape-only parameters (no memory, no compute): for counting, sharding."""
  return nnx.eval_shape(lambda: create_model(family, size, **kwargs))


def count_params(model: nnx.Module) -> int:
  """Number of trainable parameters (concrete or abstract models; a tied embedding counts once)."""
  return sum(int(x.size) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
