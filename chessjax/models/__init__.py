"""Model families of the Chess-World-Model benchmark and the one way to build them.

    model = create_model("slice", "d256", seed=0, dropout=0.0)
    logits = model(moves_BT, train=False)          # float[B, T, 1878]
    groups = split_logits(logits)                  # 7 named groups (SPEC section 4)

Each family lives in its own module, which exposes `base_config(family, size)` returning a frozen
dataclass (hyperparameters of the released configuration for that size) and `Model(cfg, rngs=...)`,
an `nnx.Module` whose `__call__(moves, *, train=False)` maps int32[B, T] move ids (right-padded
with PAD) to logits float[B, T, 1878]. Dropout is active only when `train=True`.
"""

import dataclasses
import importlib

import jax
import jax.numpy as jnp
from flax import nnx

from chessjax import labels

# (d, layers, heads) per size (SPEC section 5).
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


def _family_module(family: str):
  if family not in FAMILIES:
    raise ValueError(f"unknown model family {family!r}; expected one of {sorted(FAMILIES)}")
  return importlib.import_module(f"chessjax.models.{FAMILIES[family]}")


def model_config(family: str, size: str, **overrides):
  """The frozen config of a family and size, with `overrides` applied (unknown keys raise)."""
  if size not in SIZES:
    raise ValueError(f"unknown model size {size!r}; expected one of {sorted(SIZES)}")
  cfg = _family_module(family).base_config(family, size)
  known = {f.name for f in dataclasses.fields(cfg)}
  unknown = sorted(set(overrides) - known)
  if unknown:
    raise ValueError(f"unknown {family} config key(s) {unknown}; valid keys are {sorted(known)}")
  return dataclasses.replace(cfg, **overrides)


def create_model(family: str, size: str, *, seed: int = 0, **overrides) -> nnx.Module:
  """Builds a family's model at a size, initialised from `seed` like the released code."""
  cfg = model_config(family, size, **overrides)
  return _family_module(family).Model(cfg, rngs=nnx.Rngs(seed))


def abstract_model(family: str, size: str, **overrides) -> nnx.Module:
  """The model with shape-only parameters (no memory, no compute): for counting and sharding."""
  return nnx.eval_shape(lambda: create_model(family, size, **overrides))


def count_params(model: nnx.Module) -> int:
  """Number of trainable parameters (works on concrete and abstract models)."""
  return sum(int(x.size) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))


def split_logits(logits: jax.Array) -> dict[str, jax.Array]:
  """Splits head output [..., 1878] into the 7 label groups of SPEC section 4.

  Returns pieces [..., 64, 13], side [..., 2], castling [..., 4, 2], ep_file [..., 9],
  ep_rank [..., 3], halfmove [..., 2, 256] and fullmove [..., 2, 256] (high byte first).
  """
  out, start = {}, 0
  batch = logits.shape[:-1]
  for name, _, count, classes in labels.GROUPS:
    chunk = logits[..., start : start + count * classes]
    out[name] = chunk if count == 1 else jnp.reshape(chunk, (*batch, count, classes))
    start += count * classes
  return out
