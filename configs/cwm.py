r"""Chess-World-Model: one cell of the paper's grid with its final hyperparameters
(Walker & Lyons, Chess-World-Model, section 3.3 and Table 7).

    python -m chessjax.main --config=configs/cwm.py:family=slice,size=d256 \
        --workdir=runs/slice_d256 --config.data.train=data/lichess_2025-03 \
        --config.optim.lr=3e-4

`arg` is `key=value` pairs separated by commas: `family` (a built-in family of
`chessjax.models.FAMILIES` or a dotted module path, `family=my_lab.my_mixer`: see
`chessjax.models.registry.FamilyModule`), `size` (one of the family's sizes; d128 | d256 | d384 |
d512 for the grid), `smoke` (True: a tiny model and a few steps on a CPU), `model.KEY=VALUE` (any
key of the family's model config, e.g. `model.mixer_impl=chunked`).

Hyperparameters: the row of the paper's Table 7 (`chessjax.world_model.grid.FINAL`) of the
family its module names (`RECIPE = "slice"`: the built-in ablations name their main family); a
family that names none gets the Transformer's row at its size, the tuned recipe of the baseline
every new model is compared against, which favours no recurrent family (a fair comparison runs
the stage-1 sweep for it: `python -m launch.sweep`). A size outside Table 7's
columns (a family's own size names) takes the d128 column; `--config.optim.lr`, `warmup_steps`,
`b2`, `weight_decay` and `floor` override any of it. Expected result of the full recipe: Walker &
Lyons, Table 8 (e.g. slice d256: 96.57% ExactState on the real test split).
"""

import dataclasses

import ml_collections

from chessjax.models import family_module, model_config
from chessjax.world_model import grid
from configs import common

# Mamba-3 trains under bfloat16 autocast, every other family (the Mamba-2 ablation included) in
# float32: Walker & Lyons, appendix B.2, and the released code (autocast only for mamba-3).
BFLOAT16_FAMILIES = ("mamba3", "mamba3_mimo")


def parse_arg(arg: str | None) -> dict:
  defaults = {"family": "slice", "size": "d128", "smoke": False, common.MODEL_PREFIX: {}}
  out = common.parse_arg(arg, defaults, {"smoke": common.boolean})
  sizes = family_module(out["family"]).SIZES  # Unknown families raise here, with the valid ones.
  if out["size"] not in sizes:
    raise ValueError(
      f"unknown size {out['size']!r} for {out['family']}; expected one of {sorted(sizes)}"
    )
  out[common.MODEL_PREFIX] = common.model_overrides(
    out["family"], out["size"], out[common.MODEL_PREFIX]
  )
  return out


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  a = parse_arg(arg)
  lr, warmup, b2, wd, floor = grid.recipe(a["family"], a["size"])
  c = ml_collections.ConfigDict()
  c.task = "world_model"  # chessjax.world_model.task
  c.family, c.size, c.seed = a["family"], a["size"], 0
  # Overrides of the family's frozen model config (e.g. mixer_impl, chunk_size, dtype).
  c.model = ml_collections.ConfigDict()
  # The precision policy (chessjax.models.layers.DTYPES: "float32" | "tf32" | "bfloat16";
  # parameters and optimizer state float32 in all three). Mamba-3 trains under bfloat16 autocast,
  # every other family (the Mamba-2 ablation included) in float32: Walker & Lyons, appendix B.2,
  # and the released code (autocast only for mamba-3); its GPUs ran float32 matmuls as TF32.
  if "dtype" in _fields(a["family"], a["size"]):
    c.model.dtype = "bfloat16" if a["family"] in BFLOAT16_FAMILIES else "float32"

  # The loader and batches (chessjax.spec.DataSpec: what each key means and its default).
  c.data = common.data_block(
    batch_size=128,  # Global, over all processes and devices.
    max_len=1024,  # Steps kept per game (START included); longer games are cut.
    bucket_lengths=(64, 128, 192, 256, 384, 512, 768, 1024),
  )

  # AdamW (b1 0.9, eps 1e-8, clipping 1.0) with the cell's recipe; "cosine" (stage 2) to the floor
  # (a fraction of lr), or "constant" after warmup (stage 1).
  c.optim = common.optim_block(
    lr=lr, warmup_steps=warmup, b2=b2, weight_decay=wd, floor=floor, schedule="cosine"
  )

  # The loop (chessjax.spec.LoopSpec: every key, its default and meaning): the paper's 4 epochs,
  # validation on 10 fixed batches and a checkpoint every 5,000 steps.
  c.train = common.train_block(
    steps=grid.STEPS_4_EPOCHS, eval_every=5000, eval_batches=10, checkpoint_every=5000
  )

  # The run whose parameters this one starts from (chessjax.spec.InitSpec; none by default):
  # --config.init.workdir=RUN [--config.init.checkpoint=best|latest|STEP]
  # [--config.init.parts=backbone].
  c.init = common.init_block()

  if a["smoke"]:
    if "dtype" in c.model:
      c.model.dtype = "float32"
    c.data.batch_size = 8
    c.data.max_len = 128
    c.data.bucket_lengths = (64, 128)
    c.optim.warmup_steps = 5
    c.optim.lr = 1e-3
    c.train.steps = 20
    c.train.log_every = 5
    c.train.eval_every = 10
    c.train.eval_batches = 2
    c.train.checkpoint_every = 10
  c.model.update(a[common.MODEL_PREFIX])  # The arg's model.KEY=VALUE items, last.
  return c


def _fields(family: str, size: str) -> set[str]:
  return {f.name for f in dataclasses.fields(model_config(family, size))}
