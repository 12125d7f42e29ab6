r"""Learning Chess Blindfolded (Toshniwal et al. 2022): a UCI language model with its recipe.

    python -m chessjax.main --config=configs/lm.py:family=gpt2,notation=rap,train=S \
        --workdir=runs/lm_gpt2_rap_S --config.data.train=data/lm_masters

`arg` is `key=value` pairs separated by commas:
* `family`: `gpt2` (Hugging Face GPT-2 as the paper trains it), `gpt2_w50` (attention window 50),
  `lstm`, `reformer`, `performer` (the paper's Table 6 baselines), or any chessjax family
  (`transformer`, `slice`, `gated_deltanet`, `mamba3`, ..., or a dotted module path: README, "Put
  your own model on the benchmark") as a language model through the token head;
* `size`: the model's size (default: GPT-2 `small`; LSTM, Reformer and Performer `S` / `M` / `L`
  by the training size, as the paper's Table 12; `d256` for the chessjax families);
* `notation`: `uci` | `rap` | `ap` (section 3.1); `rap_p` (default 0.25 for Train-S and M, 0.15
  for L, the paper's tuned values);
* `train`: `S` | `M` | `L` | `all`, the first 15K / 50K / 200K training games or all of them
  (`data_prep.lm_data` writes the split in its shuffled order; a split holding fewer games is
  used whole, with a warning that gives both numbers, `chessjax.lm.task.check_config`);
* `epochs` (default 10, the paper's cap) or `steps` (a fixed number of batches instead; sets
  `train.epochs` to 0): the run's length, which also sets the schedule's horizon. Not both.
* `model.KEY=VALUE`: any key of the family's model config, e.g. `model.layers=3` (typed by it);
  `model.dtype` is the precision policy (`float32` default, `tf32`, `bfloat16`: compute dtype;
  parameters and optimizer state stay float32; chessjax.models.layers.DTYPES).
The paper's recipe (section 4, appendix B): AdamW lr 5e-4, betas (0.9, 0.999), eps 1e-8, weight
decay 0.01 on all parameters, global-norm clipping 1.0, batch 60, linear warmup over 10% of a
10-epoch horizon then linear decay to 0, at most 10 epochs, early stopping when the per-move dev
loss does not improve for one epoch, the best checkpoint kept for testing (WORKDIR/best).

Length on the command line: `--config.train.epochs=N` shortens the run to N epochs;
`--config.train.epochs=0 --config.train.steps=N` runs N steps. `train.steps` counts only when
`train.epochs` is 0: a config with both above 0 is refused when training starts (ValueError, from
`chessjax.lm.task.check_config`), never silently resolved.
"""

import dataclasses

import ml_collections

from chessjax.models import family_module, model_config
from configs import common

EPOCHS = 10  # The paper's cap (section 4); early stopping usually ends a run sooner.
TRAIN_GAMES = {"S": 15_000, "M": 50_000, "L": 200_000, "all": 0}
RAP_P = {"S": 0.25, "M": 0.25, "L": 0.15, "all": 0.15}
# GPT-2 ties its token head to the input embedding; the LSTM and chessjax families do not (their
# embeddings are N(0, 1), far too large as output weights).
TIED = {"gpt2": True, "gpt2_w50": True}


def default_size(family: str, train: str) -> str:
  if family.startswith("gpt2"):
    return "small"
  if family == "lstm":
    return "S" if train == "S" else "M"
  if family in ("reformer", "performer"):  # Table 12: hashing rounds / local heads per size
    return {"S": "S", "M": "M"}.get(train, "L")
  return "d256"


def parse_arg(arg: str | None) -> dict:
  defaults = {"family": "gpt2", "size": None, "notation": "uci", "rap_p": None, "train": "S"}
  defaults.update(epochs=None, steps=None)
  defaults[common.MODEL_PREFIX] = {}
  out = common.parse_arg(arg, defaults, {"rap_p": float, "epochs": int, "steps": int})
  family_module(out["family"])  # Unknown families raise here, naming the valid ones.
  if out["notation"] not in ("uci", "rap", "ap"):
    raise ValueError(f"notation must be uci, rap or ap, got {out['notation']!r}")
  if out["train"] not in TRAIN_GAMES:
    raise ValueError(f"train must be one of {sorted(TRAIN_GAMES)}, got {out['train']!r}")
  out["size"] = out["size"] or default_size(out["family"], out["train"])
  if out["size"] not in family_module(out["family"]).SIZES:
    sizes = sorted(family_module(out["family"]).SIZES)
    raise ValueError(f"unknown size {out['size']!r} for {out['family']}; expected one of {sizes}")
  out[common.MODEL_PREFIX] = common.model_overrides(
    out["family"], out["size"], out[common.MODEL_PREFIX]
  )
  if out["rap_p"] is None:
    out["rap_p"] = RAP_P[out["train"]] if out["notation"] == "rap" else 0.0
  if out["epochs"] is not None and out["steps"] is not None:
    raise ValueError(
      f"config arg gives both epochs={out['epochs']} and steps={out['steps']}: give one (steps "
      "runs a fixed number of batches, epochs whole passes over the training games)"
    )
  if out["steps"] is not None:
    if out["steps"] < 1:
      raise ValueError(f"steps must be >= 1, got {out['steps']}")
    out["epochs"] = 0
  else:
    out["steps"] = 0
    out["epochs"] = EPOCHS if out["epochs"] is None else out["epochs"]
    if out["epochs"] < 1:
      raise ValueError(f"epochs must be >= 1, got {out['epochs']}")
  return out


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  a = parse_arg(arg)
  c = ml_collections.ConfigDict()
  c.task = "lm"  # chessjax.lm.task
  c.family, c.size, c.seed = a["family"], a["size"], 0
  c.model = ml_collections.ConfigDict(a[common.MODEL_PREFIX])  # Overrides of the family config.
  # The precision policy, for models that have one (chessjax.models.layers.DTYPES: "float32" |
  # "tf32" | "bfloat16"; parameters and optimizer state float32 in all three).
  fields = {f.name for f in dataclasses.fields(model_config(a["family"], a["size"]))}
  if "dtype" in fields and "dtype" not in c.model:
    c.model.dtype = "float32"

  c.lm = ml_collections.ConfigDict()
  c.lm.notation, c.lm.rap_p, c.lm.train = a["notation"], a["rap_p"], a["train"]
  c.lm.vocab = ""  # A vocab file (one token per line); empty: chessjax's own order.
  c.lm.tie_embeddings = TIED.get(a["family"], False)
  c.lm.score_piece_tokens = True  # Inserted piece letters are prediction targets.

  c.data = common.data_block(
    val_split="dev",
    max_train_games=TRAIN_GAMES[a["train"]],
    batch_size=60,  # The released code's effective batch is 64.
    max_len=512,  # GPT-2's positions; games of up to 150 plies need at most 2 + 4 x 150.
    bucket_lengths=(128, 192, 256, 320, 384, 448, 512),
  )
  if a["family"] == "reformer":
    # Axial positions 14 x 25 = 350 (Table 12). Games of up to 150 plies fit with UCI; AP needs
    # up to 2 + 3 x 150 tokens, so prepare AP data for the Reformer with `--max-plies 116`.
    c.data.max_len, c.data.bucket_lengths = 350, (100, 150, 200, 250, 300, 350)

  c.optim = common.optim_block(
    lr=5e-4,
    b2=0.999,
    weight_decay=0.01,
    schedule="linear",
    warmup_steps=0,  # Unused: warmup_fraction is set.
    warmup_fraction=0.1,
    floor=0.0,
    decay_all=True,  # Weight decay on every parameter, as the paper's AdamW.
  )

  # The loop (chessjax.spec.LoopSpec): whole epochs (or steps), validation on the whole dev split
  # once per epoch, early stopping after one epoch without improvement.
  c.train = common.train_block(
    epochs=a["epochs"],  # Whole epochs; 0: `steps` batches instead.
    steps=a["steps"],  # Counts only when epochs is 0 (both > 0 is refused).
    eval_every=0,
    eval_batches=0,
    early_stopping_patience=1,
    checkpoint_every=1000,
    keep_checkpoints=2,
  )

  # The run whose parameters this one starts from (chessjax.spec.InitSpec; none by default):
  # --config.init.workdir=RUN [--config.init.checkpoint=best|latest|STEP]
  # [--config.init.parts=backbone].
  c.init = common.init_block()
  return c
