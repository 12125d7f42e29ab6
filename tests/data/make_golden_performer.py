"""Golden logits of lucidrains' performer-pytorch, for tests/models/test_performer.py.

The reference is `PerformerLM` of performer-pytorch 1.1.4 with local-attention 1.11.2 (the version
pip resolves for it), configured as Toshniwal et al.'s release (Learning Chess Blindfolded,
src/model_utils/performer_model.py: causal, generalized ReLU attention, reversible, feed-forward
chunks, dropout 0.1, local heads). It builds tiny PerformerLMs (`CASES`), loads into them the
parameters `param_value` defines for chessjax's parameter names and the random projections
`projections` defines (so no weights need storing; the projections are fixed, never redrawn),
runs them in eval mode in float64 on fixed tokens and saves the logits (as float32) and the
reference's parameter counts, of every case and of the paper's configurations (vocabulary 77).
Nothing of performer-pytorch is copied; it is imported from a virtual environment outside the
repo:

    python -m venv /tmp/perfref
    /tmp/perfref/bin/pip install torch performer-pytorch==1.1.4 local-attention==1.11.2 numpy
    cd tests/data && /tmp/perfref/bin/python make_golden_performer.py --out golden_performer.npz

(Made with torch 2.14.1 on CPU, einops 0.8.2, numpy 2.4.6. Without pytorch-fast-transformers
performer-pytorch uses its `causal_linear_attention_noncuda`, which computes the same function as
the CUDA kernel the paper's runs used.)

`VOCAB`, `CASES`, `tokens`, `projections` and `param_value` need only numpy, so the test imports
them from here.
"""

import argparse
import math
import re
import zlib

import numpy as np

VOCAB = 77
BATCH = 2
# Every case: tiny PerformerLMs of width 32, 2 layers, 4 heads of 8 (16 random features), as
# chessjax `performer` "tiny" overrides; and the sequence length (not a multiple of the window or
# of the test's linear-attention chunk).
BASE = {"d": 32, "layers": 2, "heads": 4, "head_dim": 8, "local_window": 4, "n_positions": 64}
CASES = {
  "paper": ({"local_heads": 2}, 19),  # rotary, reversible, 2 local heads (Train-S's layout)
  "no_local": ({"local_heads": 0}, 19),  # Train-M / L's layout
  "learned_sequential": ({"local_heads": 2, "positions": "learned", "reversible": False}, 19),
  "all_local_biases": ({"local_heads": 4, "qkv_bias": True, "out_bias": True}, 11),
  "long_window": ({"local_heads": 1, "local_window": 50, "n_positions": 128}, 120),
}
# The paper's configurations (Table 12) whose reference parameter counts are saved.
PAPER = {
  "S_rotary": {"local_heads": 6, "positions": "rotary"},
  "S_learned": {"local_heads": 6, "positions": "learned"},
  "M_rotary": {"local_heads": 0, "positions": "rotary"},
  "M_learned": {"local_heads": 0, "positions": "learned"},
}


def case_config(name: str) -> dict:
  """The chessjax config overrides of a case (on top of size "tiny")."""
  return {**BASE, **CASES[name][0]}


def features(cfg: dict) -> int:
  return int(cfg["head_dim"] * math.log(cfg["head_dim"]))


def tokens(name: str) -> np.ndarray:
  """int32[BATCH, T] of token ids 0..76, seeded by the case name."""
  rng = np.random.default_rng(zlib.crc32(("tokens/" + name).encode()))
  return rng.integers(0, VOCAB, (BATCH, CASES[name][1])).astype(np.int32)


def projections(name: str) -> np.ndarray:
  """float32[layers, M, K]: one Gaussian orthogonal random matrix per layer (orthonormal-row
  blocks scaled by norms of normal vectors), seeded by the case name."""
  cfg = case_config(name)
  m, k = features(cfg), cfg["head_dim"]
  rng = np.random.default_rng(zlib.crc32(("projections/" + name).encode()))
  out = []
  for _ in range(cfg["layers"]):
    blocks = [np.linalg.qr(rng.standard_normal((k, k)))[0].T for _ in range(-(-m // k))]
    norms = np.linalg.norm(rng.standard_normal((m, k)), axis=1)
    out.append(norms[:, None] * np.concatenate(blocks)[:m])
  return np.stack(out).astype(np.float32)


def param_value(name: str, shape: tuple[int, ...]) -> np.ndarray:
  """The float32 value of chessjax parameter `name` (dotted path) of `shape`, seeded by name:
  N(0, 1) embeddings, N(0, 1/fan_in) kernels, biases near 0, norm scales near 1."""
  rng = np.random.default_rng(zlib.crc32(name.encode()))
  z = rng.standard_normal(shape)
  leaf = name.rsplit(".", 1)[-1]
  if leaf == "embedding":
    return z.astype(np.float32)
  if leaf == "scale":
    return (1.0 + 0.1 * z).astype(np.float32)
  if leaf == "kernel":
    return (shape[0] ** -0.5 * z).astype(np.float32)
  return (0.1 * z).astype(np.float32)


# Reference parameter name pattern (layer index as {i}; reversible `net.blocks.{i}.f.net` /
# `.g.net`, sequential `net.layers.{i}.0` / `.1`) -> chessjax parameter name. torch Linear
# weights are (out, in), chessjax kernels (in, out): every ".kernel" is transposed.
_BLOCK = {
  "{f}.norm.weight": "attn_norm.scale",
  "{f}.norm.bias": "attn_norm.bias",
  "{f}.fn.to_q.weight": "attention.to_q.kernel",
  "{f}.fn.to_k.weight": "attention.to_k.kernel",
  "{f}.fn.to_v.weight": "attention.to_v.kernel",
  "{f}.fn.to_q.bias": "attention.to_q.bias",
  "{f}.fn.to_k.bias": "attention.to_k.bias",
  "{f}.fn.to_v.bias": "attention.to_v.bias",
  "{f}.fn.to_out.weight": "attention.to_out.kernel",
  "{f}.fn.to_out.bias": "attention.to_out.bias",
  "{g}.norm.weight": "ff_norm.scale",
  "{g}.norm.bias": "ff_norm.bias",
  "{g}.fn.fn.w1.weight": "ff.w1.kernel",
  "{g}.fn.fn.w1.bias": "ff.w1.bias",
  "{g}.fn.fn.w2.weight": "ff.w2.kernel",
  "{g}.fn.fn.w2.bias": "ff.w2.bias",
}
_TOP = {
  "token_emb.weight": "backbone.embed.embedding",
  "pos_emb.emb.weight": "backbone.pos_embed.embedding",
  "norm.weight": "backbone.norm.scale",
  "norm.bias": "backbone.norm.bias",
  "to_out.weight": "head.linear.kernel",
  "to_out.bias": "head.linear.bias",
}


def chessjax_name(ref_name: str) -> str | None:
  """The chessjax parameter name of a reference parameter (None if it has none)."""
  if ref_name in _TOP:
    return _TOP[ref_name]
  for prefix, f, g in (
    (r"performer\.net\.blocks\.(\d+)\.", "f.net", "g.net"),
    (r"performer\.net\.layers\.(\d+)\.", "0", "1"),
  ):
    match = re.match(prefix, ref_name)
    if match:
      rest = ref_name[match.end() :]
      for pattern, name in _BLOCK.items():
        if rest == pattern.format(f=f, g=g):
          return f"backbone.blocks.{match.group(1)}.{name}"
  return None


def reference_kwargs(cfg: dict, vocab: int = VOCAB) -> dict:
  """`PerformerLM` arguments for a chessjax config dict, as the release's `get_performer`
  passes them (everything else is PerformerLM 1.1.4's default)."""
  import torch

  kwargs = {
    "num_tokens": vocab,
    "max_seq_len": cfg.get("n_positions", 512),
    "dim": cfg["d"],
    "depth": cfg["layers"],
    "heads": cfg["heads"],
    "dim_head": cfg["head_dim"],
    "causal": True,
    "feature_redraw_interval": 1000,
    "generalized_attention": True,
    "kernel_fn": torch.nn.ReLU(),
    "reversible": cfg.get("reversible", True),
    "ff_chunks": 10,
    "use_scalenorm": False,
    "use_rezero": False,
    "ff_glu": False,
    "emb_dropout": 0.1,
    "ff_dropout": 0.1,
    "attn_dropout": 0.1,
    "local_attn_heads": cfg.get("local_heads", 0),
    "local_window_size": cfg.get("local_window", 50),
    "rotary_position_emb": cfg.get("positions", "rotary") == "rotary",
    "qkv_bias": cfg.get("qkv_bias", False),
    "attn_out_bias": cfg.get("out_bias", False),
  }
  return kwargs


def _fast_attentions(model):
  from performer_pytorch.performer_pytorch import FastAttention

  return [m for m in model.modules() if isinstance(m, FastAttention)]


def _reference_logits(name: str) -> tuple[np.ndarray, int]:
  import torch
  from performer_pytorch import PerformerLM

  cfg = case_config(name)
  model = PerformerLM(**reference_kwargs(cfg))
  for ref_name, tensor in model.named_parameters():
    key = chessjax_name(ref_name)
    if key is None:
      raise SystemExit(f"reference parameter {ref_name} has no chessjax counterpart")
    shape = tuple(tensor.shape)
    value = param_value(key, shape[::-1]).T if key.endswith(".kernel") else param_value(key, shape)
    tensor.data = torch.from_numpy(np.ascontiguousarray(value))
  fast = _fast_attentions(model)
  proj = projections(name)
  if len(fast) != len(proj):
    raise SystemExit(f"{len(fast)} FastAttention modules for {len(proj)} projections")
  for module, p in zip(fast, proj, strict=True):
    module.projection_matrix.copy_(torch.from_numpy(p))
  model.fix_projection_matrices_()
  model = model.double().eval()
  with torch.no_grad():
    logits = model(torch.from_numpy(tokens(name)).long())
  return logits.numpy().astype(np.float32), sum(p.numel() for p in model.parameters())


def main() -> None:
  import torch
  from performer_pytorch import PerformerLM

  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", required=True)
  args = parser.parse_args()
  out = {}
  for name in CASES:
    out[f"{name}/logits"], params = _reference_logits(name)
    out[f"{name}/params"] = np.int64(params)
    print(name, out[f"{name}/logits"].shape)
  paper = {"d": 768, "layers": 12, "heads": 12, "head_dim": 64, "local_window": 50}
  for name, overrides in PAPER.items():
    model = PerformerLM(**reference_kwargs({**paper, **overrides}))
    out[f"paper/{name}/params"] = np.int64(sum(p.numel() for p in model.parameters()))
    print(name, int(out[f"paper/{name}/params"]))
  out["versions/torch"] = np.array(torch.__version__)
  np.savez_compressed(args.out, **out)


if __name__ == "__main__":
  main()
