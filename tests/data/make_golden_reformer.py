"""Golden logits of Hugging Face's Reformer, for tests/models/test_reformer.py.

The reference is `ReformerModelWithLMHead` of transformers 4.2.2, the version Toshniwal et al.
(Learning Chess Blindfolded) trained with. It builds tiny Reformers (`CASES`, all sharing one set
of parameter shapes), loads into them the parameters `param_value` defines for chessjax's
parameter names (so no weights need storing), fixes the LSH random rotations (the reference draws
them with `torch.randn` at every forward; here that call is answered with `rotations`, one array
per LSH layer in layer order), runs them in eval mode on fixed tokens and saves the logits, the
rotations and the reference's parameter count of the paper's configuration (vocabulary 77).
Nothing of transformers is copied; it is imported from a virtual environment outside the repo:

    python -m venv /tmp/hfref
    /tmp/hfref/bin/pip install torch numpy "setuptools<81" sacremoses regex requests tqdm \\
        packaging filelock
    /tmp/hfref/bin/pip install --no-deps transformers==4.2.2
    /tmp/hfref/bin/python tests/data/make_golden_reformer.py --out tests/data/golden_reformer.npz

(transformers 4.2.2 checks sacremoses and, through pkg_resources, the versions of its other
dependencies when imported; the tokenizers it pins has no wheel for current Pythons and is only
checked when installed: the Reformer needs none. Made with torch 2.14.1 on CPU.)

`CONFIG`, `CASES`, `tokens`, `rotations` and `param_value` need only numpy, so the test imports
them from here.
"""

import argparse
import re
import zlib

import numpy as np

VOCAB = 77
PAPER_PARAMS_KEY = "paper/params"

# The chessjax config of every case (overrides of `reformer` size "tiny"), and per case the
# sequence length and the overrides that change no parameter shape.
CONFIG = {
  "hidden": 32,
  "heads": 2,
  "head_dim": 16,
  "ff": 64,
  "attn_layers": ("local", "lsh", "local", "lsh"),
  "local_chunk_length": 4,
  "lsh_chunk_length": 4,
  "buckets": 4,
  "hashes": 2,
  "axial_shape": (4, 6),
  "axial_dims": (12, 20),
}
CASES = {
  "chunked": (16, {}),  # 4 chunks a round, 2 rounds
  "padded": (14, {}),  # the reference pads to 16 with a mask (extra bucket for the padding)
  "one_round": (16, {"hashes": 1}),
  "three_rounds": (24, {"hashes": 3, "buckets": 6}),
  "one_chunk": (3, {}),  # at most one chunk: no hashing, plain causal attention
  "lcm": (21, {"lsh_chunk_length": 8}),  # local 4, LSH 8: padded to 24
}
BATCH = 2


def hf_config_kwargs(cfg: dict) -> dict:
  """`transformers.ReformerConfig` arguments for a chessjax config dict (the paper's release
  passes the same keys; everything else is the config's default)."""
  return {
    "vocab_size": VOCAB,
    "hidden_size": cfg["hidden"],
    "num_attention_heads": cfg["heads"],
    "attention_head_size": cfg["head_dim"],
    "feed_forward_size": cfg["ff"],
    "attn_layers": list(cfg["attn_layers"]),
    "local_attn_chunk_length": cfg["local_chunk_length"],
    "lsh_attn_chunk_length": cfg["lsh_chunk_length"],
    "num_buckets": cfg["buckets"],
    "num_hashes": cfg["hashes"],
    "axial_pos_shape": list(cfg["axial_shape"]),
    "axial_pos_embds_dim": list(cfg["axial_dims"]),
    "max_position_embeddings": cfg["axial_shape"][0] * cfg["axial_shape"][1],
    "is_decoder": True,
    "hidden_act": "relu",
    "hash_seed": None,
    "chunk_size_feed_forward": 0,
    "chunk_size_lm_head": 0,
    "eos_token_id": 2,
  }


def case_config(name: str) -> dict:
  return {**CONFIG, **CASES[name][1]}


def tokens(name: str) -> np.ndarray:
  """int32[BATCH, T] of token ids 1..76, seeded by the case name."""
  rng = np.random.default_rng(zlib.crc32(("tokens/" + name).encode()))
  return rng.integers(1, VOCAB, (BATCH, CASES[name][0])).astype(np.int32)


def rotations(name: str) -> np.ndarray:
  """float32[LSH layers, heads, head_dim, hashes, buckets / 2], N(0, 1), seeded by the name."""
  cfg = case_config(name)
  n_lsh = sum(kind == "lsh" for kind in cfg["attn_layers"])
  shape = (n_lsh, cfg["heads"], cfg["head_dim"], cfg["hashes"], cfg["buckets"] // 2)
  rng = np.random.default_rng(zlib.crc32(("rotations/" + name).encode()))
  return rng.standard_normal(shape).astype(np.float32)


def param_value(name: str, shape: tuple[int, ...]) -> np.ndarray:
  """The float32 value of chessjax parameter `name` (dotted path) of `shape`, seeded by name:
  N(0, 1) embeddings and axial factors, N(0, 1/fan_in) kernels, biases near 0, norm scales
  near 1."""
  rng = np.random.default_rng(zlib.crc32(name.encode()))
  z = rng.standard_normal(shape)
  leaf = name.rsplit(".", 1)[-1]
  if leaf in ("embedding", "row", "col"):
    return z.astype(np.float32)
  if leaf == "scale":
    return (1.0 + 0.1 * z).astype(np.float32)
  if leaf == "kernel":
    return (shape[0] ** -0.5 * z).astype(np.float32)
  return (0.1 * z).astype(np.float32)


# Reference parameter name (layer index as {i}) -> chessjax parameter name. torch Linear weights
# are (out, in), chessjax kernels (in, out): every ".kernel" is transposed; the axial factors
# [rows, 1, d] and [1, cols, d] are chessjax's [rows, d] and [cols, d].
HF_TO_CHESSJAX = {
  "reformer.embeddings.word_embeddings.weight": "backbone.embed.embedding",
  "reformer.embeddings.position_embeddings.weights.0": "backbone.pos_embed.row",
  "reformer.embeddings.position_embeddings.weights.1": "backbone.pos_embed.col",
  "reformer.encoder.layers.{i}.attention.layer_norm.weight": "backbone.layers.{i}.attn_norm.scale",
  "reformer.encoder.layers.{i}.attention.layer_norm.bias": "backbone.layers.{i}.attn_norm.bias",
  "reformer.encoder.layers.{i}.attention.self_attention.query.weight": (
    "backbone.layers.{i}.attention.query.kernel"
  ),
  "reformer.encoder.layers.{i}.attention.self_attention.key.weight": (
    "backbone.layers.{i}.attention.key.kernel"
  ),
  "reformer.encoder.layers.{i}.attention.self_attention.value.weight": (
    "backbone.layers.{i}.attention.value.kernel"
  ),
  "reformer.encoder.layers.{i}.attention.self_attention.query_key.weight": (
    "backbone.layers.{i}.attention.query_key.kernel"
  ),
  "reformer.encoder.layers.{i}.attention.output.dense.weight": (
    "backbone.layers.{i}.attn_out.kernel"
  ),
  "reformer.encoder.layers.{i}.feed_forward.layer_norm.weight": "backbone.layers.{i}.ff_norm.scale",
  "reformer.encoder.layers.{i}.feed_forward.layer_norm.bias": "backbone.layers.{i}.ff_norm.bias",
  "reformer.encoder.layers.{i}.feed_forward.dense.dense.weight": "backbone.layers.{i}.ff_in.kernel",
  "reformer.encoder.layers.{i}.feed_forward.dense.dense.bias": "backbone.layers.{i}.ff_in.bias",
  "reformer.encoder.layers.{i}.feed_forward.output.dense.weight": (
    "backbone.layers.{i}.ff_out.kernel"
  ),
  "reformer.encoder.layers.{i}.feed_forward.output.dense.bias": "backbone.layers.{i}.ff_out.bias",
  "reformer.encoder.layer_norm.weight": "backbone.norm.scale",
  "reformer.encoder.layer_norm.bias": "backbone.norm.bias",
  "lm_head.decoder.weight": "head.linear.kernel",
  "lm_head.bias": "head.linear.bias",
}


def _set_hf_params(model) -> int:
  """Sets every reference parameter to `param_value` of its chessjax name; fails on one that has
  no chessjax counterpart. Returns the number of values set."""
  import torch

  n = 0
  for hf_name, tensor in model.named_parameters():
    layer = re.search(r"\.layers\.(\d+)\.", hf_name)
    pattern = hf_name.replace(layer.group(0), ".layers.{i}.", 1) if layer else hf_name
    if pattern not in HF_TO_CHESSJAX:
      raise SystemExit(f"reference parameter {hf_name} has no chessjax counterpart")
    key = (
      HF_TO_CHESSJAX[pattern].replace("{i}", layer.group(1)) if layer else HF_TO_CHESSJAX[pattern]
    )
    shape = tuple(tensor.shape)
    if key.endswith(".kernel"):
      value = param_value(key, shape[::-1]).T
    elif key.endswith((".row", ".col")):
      value = param_value(key, (max(shape[:-1]), shape[-1])).reshape(shape)
    else:
      value = param_value(key, shape)
    tensor.data = torch.from_numpy(np.ascontiguousarray(value))
    n += tensor.numel()
  return n


def _run_with_rotations(model, ids: np.ndarray, rots: np.ndarray):
  """The model's eval logits with the LSH layers' `torch.randn` answered by `rots` in order;
  returns (logits, number of rotation arrays used)."""
  import torch

  queue = list(rots)
  used = [0]
  original = torch.randn

  def fixed_randn(*size, **kwargs):
    shape = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else tuple(size)
    value = queue.pop(0)
    if tuple(value.shape) != shape:
      raise SystemExit(f"rotation shape {value.shape} != requested {shape}")
    used[0] += 1
    return torch.from_numpy(value.copy()).to(kwargs.get("dtype") or torch.float32)

  torch.randn = fixed_randn
  try:
    with torch.no_grad():
      logits = model(input_ids=torch.from_numpy(ids).long())[0]
  finally:
    torch.randn = original
  return logits.numpy().astype(np.float32), used[0]


def _hash_margin(model, ids: np.ndarray, rots: np.ndarray) -> float:
  """The smallest gap between the best and second-best rotated coordinate over every hashed
  position (a tie within float error could hash differently in another implementation)."""
  import torch
  from transformers.models.reformer import modeling_reformer as mr

  gaps = []
  original = mr.LSHSelfAttention._hash_vectors

  def spy(self, vectors, num_hashes, attention_mask, increase_num_buckets=False):
    r = torch.einsum("bmtd,mdhr->bmhtr", vectors, torch.from_numpy(rots[len(gaps)].copy()))
    r = torch.cat([r, -r], dim=-1).sort(dim=-1, descending=True).values
    gap = r[..., 0] - r[..., 1]
    if attention_mask is not None:
      gap = gap[attention_mask.bool()[:, None, None, :].expand(gap.shape)]
    gaps.append(float(gap.min()))
    return original(self, vectors, num_hashes, attention_mask, increase_num_buckets)

  mr.LSHSelfAttention._hash_vectors = spy
  try:
    _run_with_rotations(model, ids, rots)
  finally:
    mr.LSHSelfAttention._hash_vectors = original
  return min(gaps) if gaps else float("inf")


def main(argv=None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--out", required=True)
  args = ap.parse_args(argv)
  import torch
  import transformers
  from transformers import ReformerConfig, ReformerModelWithLMHead

  torch.manual_seed(0)
  paper = ReformerModelWithLMHead(
    ReformerConfig(
      **{
        **hf_config_kwargs({**CONFIG, "hidden": 768, "heads": 12, "head_dim": 64, "ff": 3072}),
        "attn_layers": ["local", "local", "lsh", "local", "local", "local", "lsh", "local"]
        + ["local", "local", "lsh", "local"],
        "local_attn_chunk_length": 50,
        "lsh_attn_chunk_length": 50,
        "num_buckets": None,
        "num_hashes": 1,
        "axial_pos_shape": [14, 25],
        "axial_pos_embds_dim": [256, 512],
        "max_position_embeddings": 350,
      }
    )
  )
  out = {
    PAPER_PARAMS_KEY: np.int64(sum(p.numel() for p in paper.parameters())),
    "versions": np.array(f"transformers {transformers.__version__}, torch {torch.__version__}"),
  }
  del paper
  print(f"paper configuration: {int(out[PAPER_PARAMS_KEY]):,} parameters")
  for name in CASES:
    cfg = case_config(name)
    model = ReformerModelWithLMHead(ReformerConfig(**hf_config_kwargs(cfg))).eval()
    n_set = _set_hf_params(model)
    ids, rots = tokens(name), rotations(name)
    logits, used = _run_with_rotations(model, ids, rots)
    margin = _hash_margin(model, ids, rots)
    out[name] = logits
    out[name + "/tokens"] = ids
    out[name + "/rotations"] = rots
    out[name + "/params"] = np.int64(n_set)
    out[name + "/rotations_used"] = np.int64(used)
    print(
      f"{name}: logits {logits.shape}, {n_set} parameters, {used} rotation draws, "
      f"smallest hash margin {margin:.3g}"
    )
  np.savez_compressed(args.out, **out)
  print("versions:", out["versions"])


if __name__ == "__main__":
  main()
