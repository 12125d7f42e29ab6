"""Released Chess-World-Model training steps (Walker & Lyons 2026), for tests/test_step_parity.py.

Builds the tiny released Transformer and SLiCE of make_golden_logits.py (same `CASES`, dropout
off), sets every parameter to `param_value` of its chessjax name, and runs STEPS optimizer steps
of the released training step on fixed padded batches of real games: its own `build_optimiser`
(AdamW, one decayed param group), `build_lr_scheduler` (linear warmup + cosine to a floor),
`compute_state_loss` and `clip_grad_norm_`, called in the order its `training.train` loop calls
them. Saves per step the loss, the gradient norm before clipping and the learning rate, the final
parameters keyed by chessjax parameter path, the batches, and the released schedule's factors
for a few (warmup, decay steps) pairs. Nothing of the released code is copied; it is imported
from a checkout (python-chess is needed to encode the games, with chessjax's `encode_game`):

    python -m venv /tmp/ref
    /tmp/ref/bin/pip install torch==2.13.0 torch-slices==0.3.3 numpy chess==1.11.2
    git clone https://github.com/Benjamin-Walker/Chess-World-Model /tmp/cwm  # d58e73a
    /tmp/ref/bin/python tests/data/make_step_parity.py --released /tmp/cwm \\
        --out tests/data/step_parity.npz

The output is deterministic (two runs give identical arrays; torch 2.13.0 CPU, d58e73a).

The embedding table (20482 x 32) is too big to store whole: the file keeps its final rows for the
move ids the batches use plus EXTRA_ROWS untouched ids (only weight decay moves those).
The constants and `chessjax_path` need only numpy, so the test imports them from here.
"""

import argparse
import bz2
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"

_spec = importlib.util.spec_from_file_location(
  "make_golden_logits", Path(__file__).with_name("make_golden_logits.py")
)
golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(golden)

FAMILIES = ("transformer", "slice")  # names of golden.CASES
STEPS, BATCH, LENGTH, POOL = 30, 4, 40, 16  # steps; rows, positions per batch; games drawn from
SEED = 20260413
EXTRA_ROWS = 32  # untouched embedding rows kept besides the used ones

# The optimizer of both sides: warmup short enough that the rate changes within STEPS, weight
# decay far above its paper values so that its effect is visible in 30 steps, a clip norm inside
# the range of the gradient norms so that some steps clip and some do not.
OPTIM = {
  "lr": 3e-3,
  "warmup_steps": 8,
  "b1": 0.9,  # fixed in the released build_optimiser
  "b2": 0.95,
  "eps": 1e-8,  # torch.optim.AdamW's default, which the released code keeps
  "weight_decay": 0.1,
  "schedule": "cosine",
  "floor": 0.1,
}
CLIP_NORM = {"transformer": 0.4, "slice": 0.6}  # per family: its gradient norms differ
# The same, in the released main.py's argument names (lr_decay_steps: the run's steps).
RELEASED_ARGS = {
  "lr": OPTIM["lr"],
  "beta2": OPTIM["b2"],
  "weight_decay": OPTIM["weight_decay"],
  "lr_scheduler": "cosine",
  "lr_warmup_steps": OPTIM["warmup_steps"],
  "lr_decay_steps": STEPS,
  "lr_min_ratio": OPTIM["floor"],
  "dropout": 0.0,
}
# (warmup, decay steps) pairs whose released schedule factors (lr 1, floor 0.1, steps 0 to
# decay + 5) are stored too: the edge cases of chessjax's `optim.lr_schedule`.
SCHEDULES = ((0, 20), (1, 20), (5, 20), (OPTIM["warmup_steps"], STEPS), (19, 20))


def chessjax_path(seed: str) -> str:
  """The chessjax parameter path whose `golden.seed_name` is `seed` (its inverse)."""
  if seed.startswith("head."):
    return seed
  for new, old in golden.SEED_RENAMES:
    seed = seed.replace(old, new)
  return "backbone." + seed


def make_batches() -> dict[str, np.ndarray]:
  """STEPS batches of BATCH rows and LENGTH positions, in chessjax's batch layout (moves, states,
  mask): prefixes of random length (6 to LENGTH steps) of games drawn from the first POOL
  sample games with at least LENGTH - 1 plies, right-padded; every 7th batch has an all-padding
  last row (as chessjax's pipeline pads a short last batch)."""
  import chess.pgn

  sys.path.insert(0, str(REPO))
  from chessjax.encoding import encode_game

  games = []
  with bz2.open(SAMPLE, "rt", encoding="utf-8") as f:
    while len(games) < POOL:
      ucis = [m.uci() for m in chess.pgn.read_game(f).mainline_moves()]
      if len(ucis) >= LENGTH - 1:
        games.append(encode_game(ucis[: LENGTH - 1]))
  rng = np.random.default_rng(SEED)
  moves = np.full((STEPS, BATCH, LENGTH), golden.PAD_ID, np.int32)
  states = np.zeros((STEPS, BATCH, LENGTH, 75), np.uint8)
  mask = np.zeros((STEPS, BATCH, LENGTH), bool)
  for s in range(STEPS):
    rows = BATCH - 1 if s % 7 == 3 else BATCH
    for r, (g, n) in enumerate(
      zip(rng.choice(POOL, rows, replace=False), rng.integers(6, LENGTH + 1, rows), strict=True)
    ):
      moves[s, r, :n] = games[g][0][:n]
      states[s, r, :n] = games[g][1][:n]
      mask[s, r, :n] = True
  assert (mask == (moves != golden.PAD_ID)).all()
  return {"moves": moves, "states": states, "mask": mask}


def _torch_to_chessjax(arch: str, torch_name: str) -> str:
  """The seed (old chessjax) name of a released parameter, as golden._set_torch_params maps it."""
  names = golden.TORCH_TO_CHESSJAX[arch]
  layer = re.search(r"\.(\d+)\.", torch_name)
  pattern = torch_name.replace(layer.group(0), ".{i}.", 1) if layer else torch_name
  return names[pattern].replace("{i}", layer.group(1)) if layer else names[pattern]


def run_released(released_main, training, metrics, factory, name: str, batches: dict) -> dict:
  """Per-step loss, grad norm, lr and final parameters of the released step for golden case
  `name`."""
  import torch

  _, _, preset, overrides = golden.CASES[name]
  arch = preset.split("_")[0]
  cfg = released_main.load_experiment_config(preset)
  cfg.update(overrides, cpu=True, grad_clip=CLIP_NORM[name], **RELEASED_ARGS)
  args = argparse.Namespace(**cfg)
  model = factory.build_world_model(
    args, move_vocab=golden.VOCAB, device=torch.device("cpu"), pad_move_id=golden.PAD_ID
  )
  golden._set_torch_params(arch, model)
  optim = training.build_optimiser(args, model)
  lr_scheduler = training.build_lr_scheduler(args, optim)
  assert len(optim.param_groups) == 1  # every parameter decayed (no gated_deltanet split)
  model.train()  # as the released loop; dropout is 0
  losses, grad_norms, lrs = [], [], []
  for s in range(STEPS):
    moves = torch.from_numpy(batches["moves"][s]).long()
    states = torch.from_numpy(batches["states"][s]).long()
    pad_mask = torch.from_numpy(~batches["mask"][s])
    lrs.append(optim.param_groups[0]["lr"])
    optim.zero_grad(set_to_none=True)
    out = model(moves)
    loss, _, _ = metrics.compute_state_loss(out, states, pad_mask)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    optim.step()
    lr_scheduler.step()
    losses.append(loss.item())
    grad_norms.append(grad_norm.item())
  used = np.unique(batches["moves"])
  unused = np.setdiff1d(np.arange(golden.VOCAB), used)
  rows = np.sort(np.concatenate([used, np.random.default_rng(SEED).choice(unused, EXTRA_ROWS)]))
  out = {
    f"{name}/loss": np.float32(losses),
    f"{name}/grad_norm": np.float32(grad_norms),
    f"{name}/lr": np.float64(lrs),
    f"{name}/embedding_rows": rows.astype(np.int32),
  }
  for torch_name, p in model.named_parameters():
    key = _torch_to_chessjax(arch, torch_name)
    value = p.detach().numpy().astype(np.float32)
    if key.endswith(".kernel"):
      value = value.T
    if key.endswith("embedding"):
      value = value[rows]
    out[f"{name}/final/{chessjax_path(key)}"] = np.ascontiguousarray(value)
  print(
    f"{name}: loss {losses[0]:.4f} -> {losses[-1]:.4f}, grad norm {min(grad_norms):.3f} to "
    f"{max(grad_norms):.3f} ({sum(g > args.grad_clip for g in grad_norms)} of {STEPS} clipped), "
    f"lr {min(lrs):.2e} to {max(lrs):.2e}"
  )
  return out


def released_schedules(training) -> dict:
  """The released LambdaLR factors, steps 0 to decay + 5, for each of SCHEDULES."""
  import torch

  out = {}
  for warmup, decay in SCHEDULES:
    args = argparse.Namespace(
      lr_scheduler="cosine", lr_warmup_steps=warmup, lr_decay_steps=decay, lr_min_ratio=0.1
    )
    optim = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = training.build_lr_scheduler(args, optim)
    lrs = []
    for _ in range(decay + 6):
      lrs.append(optim.param_groups[0]["lr"])
      optim.step()
      sched.step()
    out[f"schedule/{warmup}_{decay}"] = np.float64(lrs)
  return out


def main(argv=None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--released", required=True, help="checkout of the released Chess-World-Model")
  ap.add_argument("--out", required=True)
  args = ap.parse_args(argv)
  import torch

  torch.set_num_threads(1)
  released_main, factory = golden._load_released(args.released)
  import training
  from evaluation import metrics

  batches = make_batches()
  out = dict(batches)
  out.update(released_schedules(training))
  for name in FAMILIES:
    out.update(run_released(released_main, training, metrics, factory, name, batches))
  out["torch_version"] = np.str_(torch.__version__)
  np.savez_compressed(args.out, **out)
  mask = batches["mask"]
  print(f"{int(mask.sum())} scored steps of {mask.size}; torch {torch.__version__}")


if __name__ == "__main__":
  main()
