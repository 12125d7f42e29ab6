"""Model FLOPs per trained token, analytic, per component; and MFU against a device's peak.

MFU (model FLOPs utilisation, PaLM appendix B; what MaxText and levanter log) is the model's
FLOPs per second over the device's peak: `mfu(tokens_per_s, flops_per_token, peak)`. The model's
FLOPs are counted here from its config, not measured, so a faster implementation of the same
model shows as a higher MFU.

What is counted: the matrix products, 2 m n k FLOPs each (one multiply, one add), of the forward
pass at a sequence length T, per token, in four components:

* `projections`: the mixer's Linear layers (Transformer qkv and out; SLiCE W_A, W_B; Gated
  DeltaNet q, k, v, a, b, g, o; Mamba in_proj and out_proj);
* `mixer`: attention or the recurrence, in the form the model runs (`chessjax.ops.impl`): causal
  attention in blocks of 128 queries against the keys up to the block's end (the masked
  triangle right of each block is never formed); the affine scan step by step (b x b
  matrix-vector) or as an associative scan in chunks (b x b matrix products); the chunked WY/UT
  delta rule (chunk C) or its sequential scan; the chunked SSD (chunk L) or its scan;
* `mlp`: the MLP's Linears;
* `head`: the output Linear d -> 1878 (the state head; a language model's d -> V).

Training costs `TRAIN_MULTIPLIER` = 3 times the forward: the backward pass of a product computes
two products of the same size (the gradients of both operands). Elementwise work (norms,
activations, softmax, decays, the optimizer update) is not counted: it is memory-bound and
usually left out of MFU; the embedding is a gather (no FLOPs).

Against XLA: `tests/test_flops.py` compares 3 x `forward(...)` with the FLOPs that XLA's cost
analysis gives for the compiled train step on the CPU (`compiled.cost_analysis()["flops"]`) at
T = 64 with loop-free (chunked) recurrences. XLA counts every op, elementwise ones and the optimizer
included, so its number is higher: the test states the band per family and docs/performance.md
the ratios. XLA counts a while loop's body once whatever its trip count, so it cannot check a
sequential scan (its count there is low by about a factor of T).
"""

import math

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


def _transformer(cfg, t):
  d = cfg.d
  return {
    "projections": mm(3 * d, d) + mm(d, d),
    # q k^T and the weights times v, every head: 2 products of K per head and key.
    "mixer": 2 * mm(attended_keys(t), d),
    "mlp": mm(2 * cfg.ff_mult * d, d) + mm(d, cfg.ff_mult * d),
  }


def _slice(cfg, t):
  d, b = cfg.d, cfg.block_size
  how = impls.resolve(cfg.mixer_impl, "affine_scan")
  matvec = mm(d, b)  # (I + A_t) y: G blocks of b x b times b
  if how is impls.Impl.SEQUENTIAL:
    mixer = matvec
  else:
    # lax.associative_scan over C steps makes about 2 C combines (up and down sweeps), each a
    # b x b product per block (d b^2 multiply-adds) and a matrix-vector product.
    chunk = t if how is impls.Impl.ASSOCIATIVE else min(cfg.chunk_size, t)
    combines = 2.0 * (chunk - 1) / chunk
    mixer = combines * (mm(d * b, b) + matvec) + matvec
  return {
    "projections": mm(d * b, d + 1) + mm(d, d + 1),
    "mixer": mixer,
    "mlp": mm(cfg.ff_mult * d, d) + mm(d, cfg.ff_mult * d),
  }


def _gated_deltanet(cfg, t):
  d, h, k, v = cfg.d, cfg.heads, cfg.head_k_dim, cfg.head_v_dim
  how = impls.resolve(cfg.mixer_impl, "delta_rule")
  if how is impls.Impl.SEQUENTIAL:
    # S k, the rank-1 update v k^T, S q: three V x K products per head.
    mixer = h * 3 * mm(v, k)
  else:
    c = min(cfg.chunk_size, t)
    per_head = (
      mm(c, k)  # k k^T within the chunk
      + mm(c, c) / 3  # (I + A)^-1 by blocked substitution: about C^3 / 3 per chunk
      + mm(v + k, c)  # the UT transform T [beta v, beta e^g k]
      + 2 * mm(v, k)  # u -= w S; S += u^T k (the chunk's state, per token)
      + mm(v, k)  # inter-chunk output q S
      + mm(c, k)
      + mm(v, c)  # intra-chunk q k^T and its product with u
    )
    mixer = h * per_head
  return {
    "projections": mm(2 * h * k + 2 * h * v + 2 * h, d) + mm(d, h * v),
    "mixer": mixer,
    "mlp": 3 * mm(cfg.intermediate, d),
  }


def _mamba(cfg, t):
  d, inner, n, r = cfg.d, cfg.inner, cfg.d_state, cfg.mimo_rank
  how = impls.resolve(cfg.mixer_impl, "ssd")
  if cfg.version == "mamba2":
    width = 2 * inner + 2 * cfg.groups * n + cfg.heads
  else:
    width = 2 * inner + 2 * r * cfg.groups * n + 3 * cfg.heads + cfg.num_angles
  if how is impls.Impl.SEQUENTIAL:
    # State update v k^T and read-out S q per rank (Mamba-3 adds the previous token's term).
    terms = 2 if cfg.version == "mamba2" else 3
    mixer = r * terms * mm(inner, n)
  else:
    chunk = min(cfg.chunk_size, t)
    mixer = (
      mm(chunk * r * r, cfg.groups * n)  # scores q k^T within the chunk, per group
      + mm(chunk * r * r, inner)  # the masked scores times v, every head
      + mm(r * inner, n)  # each chunk's state from its keys and values
      + mm(r * inner, n)  # the contribution of the state entering the chunk
    )
  return {
    "projections": mm(width, d) + mm(d, inner),
    "mixer": mixer,
    "mlp": mm(2 * cfg.hidden, d) + mm(d, cfg.hidden),
  }


def _gpt2(cfg, t):
  d = cfg.d
  keys = attended_keys(t) if cfg.window is None else min(attended_keys(t), cfg.window + 128)
  return {
    "projections": mm(3 * d, d) + mm(d, d),
    "mixer": 2 * mm(keys, d),
    "mlp": mm(4 * d, d) + mm(d, 4 * d),
  }


_BY_CONFIG = {
  "TransformerConfig": _transformer,
  "SLiCEConfig": _slice,
  "GatedDeltaNetConfig": _gated_deltanet,
  "MambaConfig": _mamba,
  "GPT2Config": _gpt2,
}


def supported(cfg) -> bool:
  return type(cfg).__name__ in _BY_CONFIG


def forward(cfg, t: int, *, head_dim: int = labels.HEAD_DIM) -> dict[str, float]:
  """Forward FLOPs per token at sequence length `t`, per component (`COMPONENTS`), for a family's
  frozen model config (`chessjax.models.model_config`); `head_dim` is the head's width (1878: the
  state head; V for a language model)."""
  name = type(cfg).__name__
  if name not in _BY_CONFIG:
    raise ValueError(f"no FLOP model for {name}; known: {sorted(_BY_CONFIG)}")
  layer = _BY_CONFIG[name](cfg, t)
  out = {c: cfg.layers * layer[c] for c in ("projections", "mixer", "mlp")}
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
