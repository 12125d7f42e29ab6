"""Linear probes of every layer's hidden state for the board, for a trained workdir (linear
classifier probes, Alain and Bengio 2016; README, "State-tracking backbones as UCI language
models").

    python -m chessjax.lm.linear_probe --workdir runs/gpt2_uci_s [--data PATH] [--checkpoint best]
        [--train-split train] [--test-split test] [--max-games 500] [--steps 500] [--out DIR]

For a trained workdir (language model or world model) the model is frozen and run once over
held-out and training games; the probe itself is `chessjax.probe`: at the input token that ends
each move (the task's `probe_positions`: the world model's step, the language model's to-square
token or promotion letter) every layer's hidden state is a feature vector for the board after
that move, and one linear classifier per layer (64 squares x 13 classes, AdamW, `steps`
mini-batch steps) is fitted on the training games' positions and scored on the test games'
positions: accuracy on all squares, on non-empty squares and on squares that changed in the last
move.

Two references: the same probe on a randomly initialised model of the same architecture
(`chessjax.workdir.initial(config)`, the control: what the architecture and token identities give
without training) and the majority-class baseline (per square, the most frequent class on the
training positions).

Writes OUT/linear_probe.json (everything), OUT/linear_probe.md (a table layer x {all, non-empty,
changed} for the model, the control and the majority baseline) and OUT/linear_probe.png
(accuracy by layer), atomically. The conventions of every evaluation of a workdir
(`chessjax.workdir`, `chessjax.cli`): OUT defaults to WORKDIR/eval, the checkpoint
(`--checkpoint`; `--which` is its old, deprecated name) to the best one when the workdir has
WORKDIR/best, else the latest.
"""

import logging
import sys
import time
from functools import partial

import numpy as np

from chessjax import cli
from chessjax.data import read_manifest
from chessjax.files import as_path, write_figure, write_json, write_text
from chessjax.probe import (
  SUBSETS,
  accuracies,
  extract_features,
  majority_classes,
  probe_layers,
  read_positions,
)
from chessjax.workdir import EVAL_DIR

log = logging.getLogger(__name__)

SUBSET_NAMES = {"all": "all squares", "nonempty": "non-empty squares", "changed": "changed squares"}


# ------------------------------------------------------------------------------------------------
# A workdir


def _default_test_split(path, val_split: str) -> str:
  splits = read_manifest(path)["splits"]
  for name in ("test", val_split, "validation", "dev"):
    if name in splits:
      return name
  raise ValueError(f"{path} has no test, validation or dev split; pass --test-split")


def layer_names(count: int) -> list[str]:
  return ["embedding"] + [f"block {i}" for i in range(1, count)]


def probe_workdir(
  workdir,
  *,
  data=None,
  train_split: str | None = None,
  test_split: str | None = None,
  max_games: int = 500,
  max_train_positions: int = 8000,
  which: str | None = None,
  steps: int = 500,
  batch_size: int = 1024,
  lr: float = 1e-2,
  weight_decay: float = 1e-4,
  control_seed: int | None = None,
  seed: int = 0,
) -> dict:
  """Probes of every layer of a workdir's model and of its untrained control; see the module
  docstring. `max_games` bounds the games read from each split; the training positions are then
  subsampled (fixed seed) to at most `max_train_positions`. The control is the architecture
  initialised with `control_seed` (default the config's seed, i.e. the trained model's own
  initialisation). `which`: "best", "latest" or None (best, else latest: `workdir.restore`)."""
  from chessjax import workdir as wd

  t0 = time.time()
  restored = wd.restore(workdir, which)
  spec, task = restored.spec, restored.task
  data = data or spec.data.train
  train_split = train_split or spec.data.train_split
  test_split = test_split or _default_test_split(data, spec.data.val_split)
  max_len, buckets = spec.data.max_len, spec.data.bucket_lengths
  read = partial(read_positions, data, task=task, max_games=max_games, max_len=max_len)
  train_pos, test_pos = read(train_split), read(test_split)
  keep = None
  n_train = len(train_pos["labels"])
  if n_train > max_train_positions:
    keep = np.sort(np.random.default_rng(seed).choice(n_train, max_train_positions, replace=False))
    train_pos = {**train_pos, "labels": train_pos["labels"][keep]}
    train_pos["changed"] = train_pos["changed"][keep]
  control_seed = spec.seed if control_seed is None else int(control_seed)
  control_config = restored.config.copy_and_resolve_references()
  control_config.seed = control_seed
  control_state = wd.initial(control_config).state
  extract = partial(extract_features, pad_id=task.pad_id, buckets=buckets, max_len=max_len)
  fit = {"steps": steps, "batch_size": batch_size, "lr": lr, "weight_decay": weight_decay}
  graphdef = restored.fns.graphdef
  results = {}
  for name, state in (("model", restored.state), ("control", control_state)):
    p, ms = state["params"], state["model_state"]
    ftr = extract(graphdef, p, ms, train_pos)
    if keep is not None:
      ftr = [f[keep] for f in ftr]
    fte = extract(graphdef, p, ms, test_pos)
    results[name] = probe_layers(ftr, fte, train_pos, test_pos, seed=seed, **fit)
    log.info("%s: last layer %s", name, results[name][-1])
  majority = majority_classes(train_pos["labels"])
  maj_pred = np.broadcast_to(majority, test_pos["labels"].shape)
  counts = {
    "all": int(test_pos["labels"].size),
    "nonempty": int(np.count_nonzero(test_pos["labels"])),
    "changed": int(test_pos["changed"].sum()),
  }
  return {
    "workdir": str(workdir),
    "checkpoint": restored.checkpoint,
    "step": int(restored.step),
    "task": spec.task,
    "family": spec.family,
    "size": spec.size,
    "data": str(data),
    "train_split": train_split,
    "test_split": test_split,
    "train_games": train_pos["games"],
    "test_games": test_pos["games"],
    "train_positions": int(len(train_pos["labels"])),
    "test_positions": int(len(test_pos["labels"])),
    "test_squares": counts,
    "probe": {**fit, "seed": seed, "control_seed": control_seed},
    "layers": layer_names(len(results["model"])),
    "model": results["model"],
    "control": results["control"],
    "majority": accuracies(maj_pred, test_pos["labels"], test_pos["changed"]),
    "seconds": round(time.time() - t0, 1),
  }


# ------------------------------------------------------------------------------------------------
# Report


def _pct(value) -> str:
  return "-" if value is None else f"{100 * value:.2f}"


def markdown(result: dict) -> str:
  """The report: held-out accuracy (%) by layer of the model's probe and the control's, and the
  majority baseline, on all squares, non-empty squares and squares changed by the last move."""
  r = result
  lines = [
    f"# Linear probes: {r['family']} {r['size']} ({r['task']}), step {r['step']}",
    "",
    f"Probes fitted on {r['train_positions']:,} positions of `{r['data']}:{r['train_split']}` "
    f"({r['train_games']} games), scored on {r['test_positions']:,} positions of "
    f"`{r['test_split']}` ({r['test_games']} games; {r['test_squares']['nonempty']:,} non-empty "
    f"and {r['test_squares']['changed']:,} changed squares). Control: the same architecture, "
    f"randomly initialised (seed {r['probe']['control_seed']}). Accuracy in %.",
    "",
    "| layer | all: model | all: control | non-empty: model | non-empty: control "
    "| changed: model | changed: control |",
    "|---|---:|---:|---:|---:|---:|---:|",
  ]
  for name, m, c in zip(r["layers"], r["model"], r["control"], strict=True):
    cells = [f"{_pct(m[k])} | {_pct(c[k])}" for k in SUBSETS]
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  maj = r["majority"]
  lines.append("| majority class | " + " | ".join(f"{_pct(maj[k])} | " for k in SUBSETS) + " |")
  p = r["probe"]
  lines += [
    "",
    f"Probe: softmax regression on standardised features, AdamW lr {p['lr']:g}, weight decay "
    f"{p['weight_decay']:g}, {p['steps']} steps of {p['batch_size']} positions.",
  ]
  return "\n".join(lines) + "\n"


def figure(result: dict):
  """Accuracy by layer (model, control, majority) for each square subset: a matplotlib figure."""
  from chessjax import plotting

  fig, axes = plotting.subplots(1, 3, figsize=(13, 3.8), sharey=True)
  x = np.arange(len(result["layers"]))
  for ax, k in zip(axes, SUBSETS, strict=True):
    for name, style in (("model", "o-"), ("control", "s--")):
      ys = [np.nan if row[k] is None else 100 * row[k] for row in result[name]]
      ax.plot(x, ys, style, label=name)
    if result["majority"][k] is not None:
      ax.axhline(100 * result["majority"][k], color="gray", ls=":", label="majority class")
    ax.set_title(SUBSET_NAMES[k])
    ax.set_xticks(x, result["layers"], rotation=30, ha="right")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
  axes[0].set_ylabel("held-out accuracy (%)")
  axes[0].legend(loc="lower right")
  fig.suptitle(
    f"Linear probes of the board: {result['family']} {result['size']} ({result['task']})"
  )
  fig.tight_layout()
  return fig


def write_report(result: dict, out_dir) -> None:
  """OUT/linear_probe.json, .md and .png, each written atomically."""
  out = as_path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  write_json(out / "linear_probe.json", result)
  write_text(out / "linear_probe.md", markdown(result))
  write_figure(out / "linear_probe.png", figure(result))


# ------------------------------------------------------------------------------------------------
# Command line


def main(argv=None) -> int:
  ap = cli.workdir_parser(
    "chessjax.lm.linear_probe",
    __doc__,
    batch_size=1024,
    batch_help="probe mini-batch (positions)",
    deprecated_checkpoint=("--which",),
  )
  ap.add_argument("--data", default=None, help="prepared dataset (default: the config's)")
  ap.add_argument("--train-split", default=None, help="default: the config's training split")
  ap.add_argument("--test-split", default=None, help="default: test, else validation or dev")
  ap.add_argument("--max-games", type=int, default=500, help="games read from each split")
  ap.add_argument("--max-train-positions", type=int, default=8000)
  ap.add_argument("--steps", type=int, default=500, help="probe optimisation steps")
  ap.add_argument("--lr", type=float, default=1e-2)
  ap.add_argument("--weight-decay", type=float, default=1e-4)
  ap.add_argument("--control-seed", type=int, default=None, help="default: the config's seed")
  ap.add_argument("--out", default=None, help="output directory (default: WORKDIR/eval)")
  args = ap.parse_args(argv)
  if min(args.max_games, args.max_train_positions, args.steps, args.batch_size) < 1:
    ap.error("--max-games, --max-train-positions, --steps and --batch-size must be positive")

  def run():  # Every other flag but --out is a parameter of `probe_workdir`.
    return probe_workdir(args.workdir, which=args.checkpoint, **cli.other_flags(args, "out"))

  def report(result):
    out = args.out or as_path(args.workdir) / EVAL_DIR
    write_report(result, out)
    print(markdown(result))
    print(f"written: {as_path(out) / 'linear_probe.json'}, .md, .png")

  return cli.run_workdir_command(ap, args, run, report=report, logs=True)


if __name__ == "__main__":
  sys.exit(main())
