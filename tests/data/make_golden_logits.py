"""Golden logits of the released PyTorch models, for tests/test_golden_logits.py.

Builds tiny versions of the released Chess-World-Model Transformer and SLiCE models (its
`models/factory.py` from the `*_d128_defaults_simple` presets, with d_model, layers and heads
made small), loads into them the parameters `param_value` defines for chessjax's parameter
names (`seed_name`; so no weights need storing), runs them in eval mode on fixed move ids and
saves the logits in chessjax's head layout. The test sets the same values into chessjax's models and
compares. Nothing of the released code is copied; it is imported from a checkout:

    python -m venv /tmp/ref && /tmp/ref/bin/pip install torch torch-slices numpy
    git clone https://github.com/Benjamin-Walker/Chess-World-Model /tmp/cwm
    /tmp/ref/bin/python tests/data/make_golden_logits.py --released /tmp/cwm \\
        --out tests/data/golden_logits.npz

`param_value`, `MOVES` and `CASES` need only numpy, so the test imports them from here.
"""

import argparse
import os
import re
import sys
import types
import zlib

import numpy as np

VOCAB, START_ID, PAD_ID = 20482, 20480, 20481
GROUP_KEYS = ("pieces", "side", "castle", "ep_file", "ep_rank", "halfmove", "fullmove")

# name -> (chessjax family, model overrides, released preset, released overrides)
CASES = {
  "transformer": (
    "transformer",
    {"d": 32, "layers": 2, "heads": 2},
    "transformer_d128_defaults_simple",
    {"d_model": 32, "n_layers": 2, "n_heads": 2},
  ),
  "slice": (
    "slice",
    {"d": 32, "layers": 2},
    "slice_d128_defaults_simple",
    {"d_model": 32, "n_layers": 2, "slice_chunk_size": 8},
  ),
  "slice_diag": (
    "slice_diag",
    {"d": 32, "layers": 2},
    "slice_d128_defaults_simple",
    {"d_model": 32, "n_layers": 2, "slice_chunk_size": 8, "slice_block_size": 1},
  ),
}


def moves() -> np.ndarray:
  """Two games of move ids int32[2, 24]: START, random real moves; the second right-padded."""
  rng = np.random.default_rng(20261122)
  out = rng.integers(0, 20480, (2, 24)).astype(np.int32)
  out[:, 0] = START_ID
  out[1, 17:] = PAD_ID
  return out


MOVES = moves()


def param_value(name: str, shape: tuple[int, ...]) -> np.ndarray:
  """The float32 value of chessjax parameter `name` (dotted path) of `shape`, seeded by name.

  Scales keep every activation of order one: N(0, 1) embeddings, N(0, 1/fan_in) kernels, biases
  and norm scales near 0 and 1, and the SLiCE recurrence's W_A, W_B and y_0 at a tenth of that so
  its state stays bounded over the game (as the released inits do).
  """
  rng = np.random.default_rng(zlib.crc32(name.encode()))
  z = rng.standard_normal(shape)
  leaf = name.rsplit(".", 1)[-1]
  if leaf == "embedding":
    scale = 1.0
  elif leaf == "scale":
    return (1.0 + 0.1 * z).astype(np.float32)
  elif leaf == "bias":
    scale = 0.1
  elif leaf == "kernel":
    scale = shape[0] ** -0.5
  else:
    scale = 0.1
  if ".mixer." in name:
    scale *= 0.1
  return (scale * z).astype(np.float32)


# The names that seed `param_value` are chessjax's parameter paths from before the models were
# split into backbone + head; golden_logits.npz was made with them, so they stay the seeds.
# Current path -> seed name: drop "backbone.", then rename what the Transformer's block calls
# differently now (attention is the block's `mixer`, SwiGLU the shared `layers.GatedMLP`). SLiCE's
# names are unchanged (its MLP is not the gated one).
SEED_RENAMES = (
  (".mixer.qkv.", ".attn.qkv."),
  (".mixer.out.", ".attn.out."),
  (".mlp.fc_in.", ".mlp.w1."),
  (".mlp.fc_out.", ".mlp.w2."),
)


def seed_name(path: str) -> str:
  """The name whose `param_value` the chessjax parameter at dotted `path` gets (see above)."""
  name = path.removeprefix("backbone.")
  for new, old in SEED_RENAMES:
    name = name.replace(new, old)
  return name


def _load_released(path: str):
  """The released `main` and `models.factory` modules, imported from the checkout `path`."""
  sys.path.insert(0, os.path.abspath(path))
  try:
    import orjson  # noqa: F401  (the released data loader imports it; nothing here loads data)
  except ImportError:
    sys.modules["orjson"] = types.ModuleType("orjson")
  import main as released_main
  from models import factory

  return released_main, factory


# Released parameter name (layer index as {i}) -> chessjax parameter name, per architecture.
# torch Linear weights are (out, in), chessjax kernels (in, out): every ".kernel" is transposed.
TORCH_TO_CHESSJAX = {
  "transformer": {
    "tok_emb.weight": "embed.embedding",
    "blocks.{i}.norm1.weight": "blocks.{i}.norm1.scale",
    "blocks.{i}.norm2.weight": "blocks.{i}.norm2.scale",
    "blocks.{i}.attn.qkv.weight": "blocks.{i}.attn.qkv.kernel",
    "blocks.{i}.attn.qkv.bias": "blocks.{i}.attn.qkv.bias",
    "blocks.{i}.attn.out_proj.weight": "blocks.{i}.attn.out.kernel",
    "blocks.{i}.attn.out_proj.bias": "blocks.{i}.attn.out.bias",
    "blocks.{i}.mlp.in_proj.weight": "blocks.{i}.mlp.w1.kernel",
    "blocks.{i}.mlp.in_proj.bias": "blocks.{i}.mlp.w1.bias",
    "blocks.{i}.mlp.out_proj.weight": "blocks.{i}.mlp.w2.kernel",
    "blocks.{i}.mlp.out_proj.bias": "blocks.{i}.mlp.w2.bias",
    "final_norm.weight": "norm.scale",
    "output_head.weight": "head.kernel",
    "output_head.bias": "head.bias",
  },
  "slice": {
    "embedding.weight": "embed.embedding",
    "layers.{i}.norm1.weight": "blocks.{i}.norm1.scale",
    "layers.{i}.norm2.weight": "blocks.{i}.norm2.scale",
    "layers.{i}.slice.init": "blocks.{i}.mixer.y0",
    "layers.{i}.slice.vf_A.weight": "blocks.{i}.mixer.w_a.kernel",
    "layers.{i}.slice.vf_B.weight": "blocks.{i}.mixer.w_b.kernel",
    "layers.{i}.token_mlp.0.weight": "blocks.{i}.mlp.fc1.kernel",
    "layers.{i}.token_mlp.0.bias": "blocks.{i}.mlp.fc1.bias",
    "layers.{i}.token_mlp.2.weight": "blocks.{i}.mlp.fc2.kernel",
    "layers.{i}.token_mlp.2.bias": "blocks.{i}.mlp.fc2.bias",
    "output_head.weight": "head.kernel",
    "output_head.bias": "head.bias",
  },
}


def _set_torch_params(arch: str, model) -> None:
  """Sets every released parameter to `param_value` of its chessjax name; fails on one that has
  no chessjax counterpart."""
  import torch

  names = TORCH_TO_CHESSJAX[arch]
  for torch_name, tensor in model.named_parameters():
    layer = re.search(r"\.(\d+)\.", torch_name)
    pattern = torch_name.replace(layer.group(0), ".{i}.", 1) if layer else torch_name
    if pattern not in names:
      raise SystemExit(f"{arch}: released parameter {torch_name} has no chessjax counterpart")
    key = names[pattern].replace("{i}", layer.group(1)) if layer else names[pattern]
    if key.endswith(".kernel"):
      tensor.data = torch.from_numpy(param_value(key, tuple(tensor.shape[::-1])).T.copy())
    else:
      tensor.data = torch.from_numpy(param_value(key, tuple(tensor.shape)))


def main(argv=None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--released", required=True, help="checkout of the released Chess-World-Model")
  ap.add_argument("--out", required=True)
  args = ap.parse_args(argv)
  import torch

  released_main, factory = _load_released(args.released)
  out = {"moves": MOVES}
  for name, (_, _, preset, overrides) in CASES.items():
    cfg = released_main.load_experiment_config(preset)
    cfg.update(overrides, cpu=True)
    model = factory.build_world_model(
      argparse.Namespace(**cfg), move_vocab=VOCAB, device=torch.device("cpu"), pad_move_id=PAD_ID
    )
    _set_torch_params(preset.split("_")[0], model.eval())  # "transformer" or "slice"
    n_set = sum(p.numel() for p in model.parameters())
    with torch.no_grad():
      groups = model(torch.from_numpy(MOVES).long())
    logits = torch.cat([groups[k].reshape(*MOVES.shape, -1) for k in GROUP_KEYS], -1)
    out[name] = logits.numpy().astype(np.float32)
    out[name + "/params"] = np.int64(n_set)
    print(f"{name}: logits {tuple(logits.shape)}, {n_set} parameters, torch {torch.__version__}")
  np.savez_compressed(args.out, **out)


if __name__ == "__main__":
  main()
