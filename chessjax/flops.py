"""Model FLOPs per trained token, analytic, per component; and MFU against a device's peak.

MFU (model FLOPs utilisation, PaLM appendix B; what MaxText and levanter log) is the model's
FLOPs per second over the device's peak: `mfu(tokens_per_s, flops_per_token, peak)`. The model's
FLOPs are counted here from its config, not measured, so a faster implementation of the same
model shows as a higher MFU.

What is counted: the matrix products, 2 m n k FLOPs each (one multiply, one add), of the forward
pass at a sequence length T, per token, in four components:

* `projections`: the mixer's Linear layers (Transformer qkv and out; SLiCE W_A, W_B; Gated
  DeltaNet q, k, v, a, b, g, o; Mamba in_proj and out_proj);
* `mixer`: attention or the recurrence, in the form the model runs (`chessjax.ops.impl`);
* `mlp`: the MLP's Linears;
* `head`: the output Linear d -> 1878 (the state head; a language model's d -> V).

The first three are the family's to count: its module's optional `forward_flops(cfg, t)` (the
hook of `chessjax.models.registry.FamilyModule`; each built-in family's docstring says what its
count holds), so a plug-in family gets MFU by defining it; the head is counted here. A family
without the hook trains as well, with no MFU.

Training costs `TRAIN_MULTIPLIER` = 3 times the forward: the backward pass of a product computes
two products of the same size (the gradients of both operands). Elementwise work (norms,
activations, softmax, decays, the optimizer update) is not counted: it is memory-bound and
usually left out of MFU; the embedding is a gather (no FLOPs).

Against XLA (`tests/test_flops.py`, T = 64, loop-free (chunked) recurrences): each component on
its own, the projections, MLP and head from the Linears the model builds and the mixer from the
matrix products in one layer's lowered mixer (its Linears' taken out); and the whole train step
against XLA's cost analysis, which counts every op (elementwise ones and the optimizer included),
so its number is higher. XLA counts a while loop's body once whatever its trip count, so it
cannot check a sequential scan.
"""

import math
import sys

import numpy as np

from chessjax import labels
from chessjax.ops import impl as impls

TRAIN_MULTIPLIER = 3  # forward + backward (two products per forward product)
COMPONENTS = ("projections", "mixer", "mlp", "head")
ATTENTION_BLOCK = 128  # query block of the explicit attention (transformer.causal_attention)


def mm(m_n: float, k: float) -> float:
  """FLOPs of a product with m n outputs and inner size k."""
  return 2.0 * m_n * k


def attended_keys(t: int, block: int = ATTENTION_BLOCK) -> float:
  """Keys each query meets on average when `block` queries go against the keys up to the block's
  end (transformer.causal_attention, gpt2.attention): sum over blocks of size x end, over T."""
  total = sum(min(block, t - s) * min(s + block, t) for s in range(0, t, block))
  return total / t


BACKBONE = ("projections", "mixer", "mlp")


def count_of(cfg):
  """The family's FLOP count, `forward_flops(cfg, t)`, or None: the optional hook of a family
  module (`chessjax.models.registry.FamilyModule`), looked up on the module that defines the
  config's class (the family module, whose `base_config` returns it)."""
  return getattr(sys.modules.get(type(cfg).__module__), "forward_flops", None)


def supported(cfg) -> bool:
  """Whether the family of `cfg` counts its FLOPs (MFU can be reported)."""
  return count_of(cfg) is not None


def forward(cfg, t: int, *, head_dim: int = labels.HEAD_DIM) -> dict[str, float]:
  """Forward FLOPs per token at sequence length `t`, per component (`COMPONENTS`), for a family's
  frozen model config (`chessjax.models.model_config`): the backbone's from its family module's
  `forward_flops`, the head's here; `head_dim` is the head's width (1878: the state head; V for a
  language model)."""
  count = count_of(cfg)
  if count is None:
    raise ValueError(
      f"no FLOP count for {type(cfg).__name__}: its module {type(cfg).__module__} has no "
      "forward_flops(cfg, t) (chessjax.models.registry.FamilyModule)"
    )
  backbone = count(cfg, t)
  if set(backbone) != set(BACKBONE):
    raise ValueError(
      f"forward_flops of {type(cfg).__module__} gave {sorted(backbone)}, not {BACKBONE}"
    )
  out = {c: float(backbone[c]) for c in BACKBONE}
  out["head"] = mm(head_dim, cfg.d)
  return out


def per_token(cfg, t: int, *, train: bool = True, head_dim: int = labels.HEAD_DIM) -> float:
  """Model FLOPs per token: the forward's sum, times `TRAIN_MULTIPLIER` when `train`."""
  total = sum(forward(cfg, t, head_dim=head_dim).values())
  return total * (TRAIN_MULTIPLIER if train else 1)


def mean_per_token(cfg, lengths, *, head_dim: int = labels.HEAD_DIM) -> float:
  """Training FLOPs per token averaged over games of `lengths` steps (each game's tokens weigh
  by its length: the attention term grows with T)."""
  values, counts = np.unique(np.asarray(lengths, np.int64), return_counts=True)
  tokens = values * counts
  each = [per_token(cfg, int(n), head_dim=head_dim) for n in values]
  return float(np.dot(tokens, each) / max(tokens.sum(), 1))


def model_per_token(model, lengths) -> float | None:
  """`mean_per_token` of a built model (`chessjax.models.create_model`) over its training games'
  `lengths`; None for a family this module has no count for (a plug-in family)."""
  cfg = model.cfg
  if not supported(cfg):
    return None
  return mean_per_token(cfg, lengths, head_dim=model.head.out_features)


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops: float | None) -> float:
  """Model FLOPs utilisation: tokens/s x FLOPs per token over the peak FLOP/s (nan without one)."""
  if not peak_flops or not math.isfinite(peak_flops):
    return float("nan")
  return tokens_per_s * flops_per_token / peak_flops


def describe(cfg) -> str:
  """The implementation the count assumes, e.g. 'chunked (64)'."""
  for field, recurrence in (("block_size", "affine_scan"), ("head_k_dim", "delta_rule")):
    if hasattr(cfg, field):
      return f"{impls.resolve(cfg.mixer_impl, recurrence)} ({cfg.chunk_size})"
  if hasattr(cfg, "d_state"):
    return f"{impls.resolve(cfg.mixer_impl, 'ssd')} ({cfg.chunk_size})"
  return "attention"
