"""Families and the one way to build a model: a family's backbone plus a head.

A family lives in one module, a `FamilyModule`: built-in families in the modules of `BUILTIN`
(under `chessjax.models`), any other by its dotted module path (`family="my_lab.my_mixer"`, the
module importable from the working directory or an installed package), which then names exactly
one family, the path itself. Nothing else has to change for a new family to train, evaluate,
track and report (README, "Put your own model on the benchmark").

`FAMILIES` are the built-in families of the Chess-World-Model grid (their modules declare
`GRID = True`: every one at every size of `sizes.SIZES`); `LM_FAMILIES` are the language-model
baselines of Toshniwal et al. (Learning Chess Blindfolded, AAAI 2022) with size tables of their
own. `create_model`, `model_config`,
`family_sizes` and `abstract_model` take any family.
"""

import dataclasses
import functools
import importlib
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import jax
from flax import nnx

from chessjax import encoding
from chessjax.models import heads
from chessjax.models.stack import Stack


@runtime_checkable
class FamilyModule(Protocol):
  """What a family module provides.

  * `SIZES`: size name -> what `base_config` needs (the world-model grid: `sizes.SIZES`).
  * `base_config(family, size)`: a frozen dataclass with at least `d` (the backbone's output
    width); its fields are the `model.KEY=VALUE` keys of the configs.
  * `build_backbone(cfg, *, vocab_size, rngs)`: token ids int32[B, T] -> float32[B, T, d], with
    `return_hiddens=True` also every layer's residual stream (`stack.Stack` does all of this).
    A backbone that streams (one token at a time, equal to the parallel forward) has
    `init_state` / `step` and a true `streams`; a `stack.Stack` works that out from its mixers,
    and `streams(family)` reads it.
  Optional: `FAMILIES` (the names a built-in module builds), `GRID` (True: a built-in module of
  the world-model grid, at the sizes of `sizes.SIZES`), `head_options(cfg)` (kernel/bias inits
  and matmul dtype of the output Linear; torch defaults without it), `forward_flops(cfg, t)`
  (the backbone's forward FLOPs per token at length t, {"projections", "mixer", "mlp"}:
  `chessjax.flops` finds it on the module that defines the config's class and adds the head's,
  for MFU in the training logs and benchmarks; without it no MFU is reported), `RECIPE` (the
  main family of the paper's Table 7 whose hyperparameters its families train with) and
  `ABLATIONS` (those of its families that are the paper's less expressive variants of
  `RECIPE`): both read by `chessjax.world_model.grid`.
  """

  SIZES: Mapping[str, Any]

  def base_config(self, family: str, size: str) -> Any: ...

  def build_backbone(self, cfg: Any, *, vocab_size: int, rngs: nnx.Rngs) -> nnx.Module: ...


# Modules under chessjax.models, each building the families it lists in FAMILIES.
BUILTIN = (
  "transformer", "slice", "gated_deltanet", "mamba", "gpt2", "lstm", "reformer", "performer",
)  # fmt: skip
_BUILTIN_MODULES = {m: importlib.import_module(f"chessjax.models.{m}") for m in BUILTIN}
_BUILTIN_FAMILIES = {f: mod for mod in _BUILTIN_MODULES.values() for f in mod.FAMILIES}
FAMILIES = tuple(f for f, mod in _BUILTIN_FAMILIES.items() if getattr(mod, "GRID", False))
LM_FAMILIES = tuple(f for f, mod in _BUILTIN_FAMILIES.items() if not getattr(mod, "GRID", False))

HEADS = ("state", "tokens")


def family_module(family: str) -> FamilyModule:
  """The module that builds `family`: a built-in name or a dotted module path."""
  if family in _BUILTIN_FAMILIES:
    return _BUILTIN_FAMILIES[family]
  if "." not in family:
    known = sorted(FAMILIES) + sorted(LM_FAMILIES)
    raise ValueError(
      f"unknown model family {family!r}; expected one of {known} or a dotted module path"
    )
  try:
    module = importlib.import_module(family)
  except ModuleNotFoundError as e:
    if e.name is not None and family.startswith(e.name):
      raise ValueError(f"unknown model family {family!r}: no module {family}") from None
    raise
  missing = [a for a in ("SIZES", "base_config", "build_backbone") if not hasattr(module, a)]
  if missing:
    raise ValueError(
      f"module {family} is not a model family: it lacks {missing} "
      "(see chessjax.models.registry.FamilyModule)"
    )
  return module


def family_sizes(family: str) -> Mapping[str, Any]:
  """The size table of `family`."""
  return family_module(family).SIZES


@functools.cache
def streams(family: str) -> bool:
  """Whether `family`'s models have a streaming `init_state` / `step`: the `streams` of its
  backbone (False if it has none), read off a shape-only backbone at its first size."""
  module = family_module(family)
  cfg = module.base_config(family, next(iter(module.SIZES)))
  backbone = nnx.eval_shape(
    lambda: module.build_backbone(cfg, vocab_size=encoding.MOVE_VOCAB_SIZE, rngs=nnx.Rngs(0))
  )
  return bool(getattr(backbone, "streams", False))


def model_config(family: str, size: str, **overrides):
  """The frozen config of a family and size, with `overrides` applied (unknown keys raise)."""
  module = family_module(family)
  if size not in module.SIZES:
    raise ValueError(
      f"unknown model size {size!r} for {family}; expected one of {list(module.SIZES)}"
    )
  cfg = module.base_config(family, size)
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
  remat: bool = False,
  **overrides,
) -> heads.Model:
  """Builds a family's model at a size, initialised from `seed` like the released code.

  `head="state"`: the world model, move ids -> 1878 state logits (`vocab_size` must be None or
  `encoding.MOVE_VOCAB_SIZE`; no tying). `head="tokens"`: a language model over `vocab_size`
  tokens, its head tied to the embedding iff `tie_embeddings` (else a Linear with bias, inits and
  dtype as the family's state head). `overrides` are config keys (`model_config`). `remat`:
  the backbone's residual blocks recompute their activations in the backward pass (`_remat`).

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
  module = family_module(family)
  cfg = model_config(family, size, **overrides)
  rngs = nnx.Rngs(seed)
  backbone = module.build_backbone(cfg, vocab_size=vocab_size, rngs=rngs)
  if remat:
    _remat(backbone, family)
  options = module.head_options(cfg) if hasattr(module, "head_options") else {}
  if head == "state":
    out = heads.StateHead(cfg.d, rngs=rngs, **options)
  else:
    tie_to = backbone.embed if tie_embeddings else None
    out = heads.TokenHead(cfg.d, vocab_size, rngs=rngs, tie_to=tie_to, **options)
  return heads.Model(backbone, out)


def _remat(backbone: nnx.Module, family: str) -> None:
  """Rematerialisation: every residual stack (`stack.Stack`) of `backbone` keeps only each block's
  input for the backward pass and recomputes the block's activations there (`nnx.remat`, i.e.
  `jax.checkpoint`): activation memory of one block instead of all, for about one more forward
  pass of compute. Same values; parameters and checkpoints are unchanged."""
  stacks = [m for _, m in nnx.iter_modules(backbone) if isinstance(m, Stack)]
  if not stacks:
    raise ValueError(
      f"remat: the {family} backbone ({type(backbone).__name__}) has no residual stack "
      "(chessjax.models.stack.Stack) whose blocks could be recomputed"
    )
  for s in stacks:
    s.remat = True


def abstract_model(family: str, size: str, **kwargs) -> heads.Model:
  """`create_model` with shape-only parameters (no memory, no compute): for counting, sharding."""
  return nnx.eval_shape(lambda: create_model(family, size, **kwargs))


def count_params(model: nnx.Module) -> int:
  """Number of trainable parameters (concrete or abstract models; a tied embedding counts once)."""
  return sum(int(x.size) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
