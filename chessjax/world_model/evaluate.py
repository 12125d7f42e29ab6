"""Evaluation of a trained workdir on prepared test splits: the paper's metrics, plots and boards.

    python -m chessjax.world_model.evaluate --workdir runs/t1 \
        --data real=runs/demo/data/real:test random=runs/demo/data/random \
        [--checkpoint best|latest] [--batch-size 64] [--max-games N] [--boards 5] [--max-len N]
        [--gallery N]

`--data NAME=PATH[:SPLIT]` names a prepared dataset directory; SPLIT defaults to `test` when the
dataset has one, else to its only split. A checkpoint of the workdir (default: the best one,
WORKDIR/best, when training validated, else the newest: `chessjax.workdir.restore`'s choice, as
every evaluator of a workdir) is scored on every game of each split (truncated to the config's
`max_len` steps, as in training, or to `--max-len` steps: whole games beyond the trained length)
and WORKDIR/eval/ (WORKDIR a local path or a URL such as `gs://bucket/run`) receives:
  NAME.json        all metrics (`chessjax.world_model.metrics`), checkpoint step, dataset,
                   throughput and the first wrong step of every game (`first_error_steps`, game
                   order, -1 = never); for atomic games also `after_divergence`, the metrics of
                   the steps where the rules differ (`chessjax.world_model.divergence`)
  NAME.md          the paper's table (Loss, Labelwise, ExactState, Trajectory), accuracy per label
                   group, first-error summary, non-finite logit counts, truncation, throughput
                   and the strata: ExactState and label groups on the hard steps (captures,
                   checks, king moves, promotions, lost castling rights, en passant and its
                   label's changes) and the steps right after, each beside the other steps at
                   the same plies (`chessjax.world_model.strata`)
  results.md       the same tables over every NAME.json in the folder, so evaluating another
                   dataset later adds its rows instead of replacing the earlier ones
  prefix_bins.png  ExactState and Labelwise per 20-step bin, one curve per dataset in results.md
  NAME_gallery.html  with `--gallery N`: the N worst-tracked games (lowest ExactState) as one
                   page to step through (`chessjax.world_model.page`)
  boards/NAME_gameI_stepT.svg  for the first `--boards` failing games (by game index): the model's
                   argmax board next to the true one at the game's first wrong step, wrong squares
                   shaded, wrong labels listed underneath
Files are written atomically (locally a temporary file, then rename; an object store replaces
whole objects) and only by JAX process 0. JSON values that are not
finite (a diverged model's loss) are written as `NaN`/`Infinity`, the policy of
`chessjax.files.json_text`.

One jitted function per batch runs the model once and returns both the additive statistics of
`metrics.batch_stats` (the same as training-time validation) and each game's argmax labels at its
first wrong step, so boards cost no second pass; batches go through the one evaluation loop of
`chessjax.evaluation`, and `metrics.GameScores` keeps the per-game scores. Every bucket shape is
compiled ahead of the timed pass (`evaluation.CompiledLengths`): `games_per_s` measures
evaluation, `compile_seconds` the compilation. The reports, boards and gallery are written by
`chessjax.world_model.eval_report`.
"""

import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from chessjax import cli, evaluation, labels, workdir
from chessjax.batches import eval_batches
from chessjax.data import pipeline
from chessjax.data.source import read_manifest, resolve_split, variant_of_manifest
from chessjax.files import as_path, is_url, write_json, write_text
from chessjax.world_model import divergence, eval_report, metrics, strata

# ------------------------------------------------------------------------------------------------
# Per-batch computation


def eval_batch(logits_fn, params, model_state, batch: dict) -> tuple[dict, dict]:
  """(`metrics.batch_stats`, per-game extras) of one batch from a single forward pass.

  Extras: `index` int32[B] (game position in the split, -1 pad rows), `pred_first` uint8[B, 75],
  the argmax labels at each game's first wrong step (meaningless for exact games and pad rows),
  `group_hits` uint8[B, T, G], the right labels of each label group at every step (for the
  strata and the per-game scores), `step_ce` float32[B, T], each step's cross-entropy summed
  over its labels (0 on padding), and `game_ce` float32[B], its sum over the game's steps.
  """
  logits = logits_fn(params, model_state, batch)
  stats = metrics.batch_stats(logits, batch["states"], batch["mask"])
  step = jnp.clip(stats["first_error"], 0, logits.shape[1] - 1)
  at_step = jnp.take_along_axis(logits, step[:, None, None], axis=1)[:, 0]  # [B, 1878]
  pred = labels.argmax_labels(at_step).astype(jnp.uint8)  # Every class count is <= 256.
  ce, hit = metrics.per_label(logits, batch["states"])
  step_ce = jnp.where(batch["mask"], ce.sum(-1), 0.0)  # [B, T], summed over labels
  game_ce = jnp.sum(step_ce, axis=1)  # [B]
  group_hits = jnp.stack(
    [hit[..., first : first + count].sum(-1) for _, first, count, _ in labels.GROUPS], axis=-1
  ).astype(jnp.uint8)  # A group has at most 64 labels.
  extras = {"index": batch["index"], "pred_first": pred, "group_hits": group_hits}
  return stats, {**extras, "game_ce": game_ce, "step_ce": step_ce}


# ------------------------------------------------------------------------------------------------
# The evaluation pass


def evaluate_split(
  restored,
  path,
  split: str,
  *,
  batch_size: int = 64,
  max_games=None,
  max_len: int | None = None,
  logits_fn=None,
  programs: dict | None = None,
) -> dict:
  """Metrics of one dataset split under a restored model, plus per-game first errors.

  `restored` is `chessjax.workdir.restore(workdir)`. `logits_fn(params, model_state, batch)`
  replaces the model's logits (default: the restored model on `batch["moves"]`), e.g. by
  synthetic ones whose errors are known. `max_len` scores each game's first `max_len` steps
  (default: the training config's `data.max_len`; a larger one scores beyond the trained length).
  `programs`: a dict the calls for one `restored` and `logits_fn` share (`evaluate` passes one
  to each dataset), holding the jitted step and its executables by batch shape: a shape another
  dataset compiled is not compiled again.
  Returns the `metrics.Accumulator` result with `dataset`, `checkpoint_step`, timing,
  `first_error_steps` (int per game, -1 when never wrong), `exact_steps` (exact steps per game),
  `game_loss` (each game's loss: its mean per-label cross-entropy) and its maximum, `per_ply`
  (steps scored, exact steps and right labels at each step t, for curves at any resolution),
  `strata` (`chessjax.world_model.strata`), for an atomic dataset `after_divergence` (loss,
  Labelwise, ExactState and Trajectory over the steps from each game's first divergent ply on:
  `chessjax.world_model.divergence`), and `failures` (game index -> (first wrong step,
  predicted labels there), not JSON).
  """
  config, fns, state, step = restored.config, restored.fns, restored.state, restored.step
  total = int(read_manifest(path)["splits"][split]["games"])
  num_games = total if max_games is None else min(int(max_games), total)
  if num_games <= 0:
    raise ValueError(f"{path}:{split} has no games to evaluate")
  # A small split does not need a full batch of padding.
  batch_size = workdir.device_batch_size(min(int(batch_size), num_games))
  lengths = pipeline.game_lengths(path, split)[:num_games]
  max_len = restored.spec.data.max_len if max_len is None else int(max_len)
  truncated = 0 if max_len is None else int((lengths > max_len).sum())
  scored = lengths if max_len is None else np.minimum(lengths, max_len)
  variant = variant_of_manifest(read_manifest(path))
  flags = strata.dataset_flags(path, split, num_games, variant)

  task = restored.task
  keys = (*task.batch_keys, "index")
  replicated = NamedSharding(fns.data_sharding.mesh, P())
  programs = {} if programs is None else programs
  if "step" not in programs:
    logits = logits_fn or (lambda params, state, batch: fns.predict(params, state, batch["moves"]))
    programs["step"] = jax.jit(partial(eval_batch, logits), out_shardings=replicated)
  batches = eval_batches(
    restored.spec,
    task.eval_rows,
    path,
    split,
    batch_size=batch_size,
    max_games=num_games,
    max_len=max_len,
  )
  compiled = evaluation.CompiledLengths(
    programs["step"],
    state["params"],
    state["model_state"],
    batches.plan,
    task.eval_rows,
    keys=keys,
    sharding=fns.data_sharding,
    shared=programs.setdefault("shapes", {}),
  )

  after = None
  if variant == "atomic":  # The steps from each game's first divergent ply on.
    after = divergence.AfterDivergence(
      divergence.dataset_first_plies(path, split, num_games, scored)
    )
  acc = metrics.Accumulator()
  scores = metrics.GameScores(scored, flags, strata.names(variant), after=after)

  def consume(out):
    stats, extras = out
    acc.add(stats)
    scores.add(stats, extras)

  start = time.perf_counter()
  try:
    evaluation.run_batches(compiled, fns, batches, consume, keys=keys)
  finally:
    batches.close()
  seconds = time.perf_counter() - start
  if scores.unseen:
    raise RuntimeError(f"{scores.unseen} games of {path}:{split} were not seen")

  result = acc.result()
  result.update(
    checkpoint_step=int(step),
    family=config.family,
    size=config.size,
    dataset={
      "path": str(path),
      "split": split,
      "games": num_games,
      "games_in_split": total,
      "max_len": max_len,
      "truncated_games": truncated,
    },
    batch_size=batch_size,
    compiled_shapes=compiled.lengths,
    compile_seconds=compiled.seconds,
    eval_seconds=seconds,
    games_per_s=num_games / max(seconds, 1e-9),
    steps_per_s=result["steps"] / max(seconds, 1e-9),
    **scores.result(),
  )
  return result


def evaluate(
  run_dir,
  datasets: dict,
  *,
  batch_size: int = 64,
  max_games: int | None = None,
  boards: int = 5,
  max_len: int | None = None,
  gallery: int = 0,
  which: str | None = None,
  restored=None,
  verbose: bool = True,
  logits_fn=None,
) -> dict[str, dict]:
  """Evaluates checkpoint `which` of `workdir` ("best", "latest"; None: best, else latest, as
  `chessjax.workdir.restore` picks) on `datasets` and writes WORKDIR/eval/.

  `datasets` maps a name to `(path, split)` (split None: `test`, else the only split). `max_len`
  as in `evaluate_split`. `gallery` > 0 also writes NAME_gallery.html, a page of the `gallery`
  worst-tracked games (lowest ExactState; `chessjax.world_model.page`). `restored` may pass an
  already restored `chessjax.workdir.restore(run_dir, which)`; `logits_fn` as in
  `evaluate_split`. Returns {name: result}, each result being what NAME.json holds (metrics plus
  dataset, checkpoint step, throughput, first wrong step per game, strata and the boards drawn).
  """
  # WORKDIR/eval through etils.epath: a URL workdir (`gs://bucket/run`) gets its results there.
  label = str(as_path(run_dir)) if is_url(run_dir) else str(Path(run_dir))  # As the user gave it.
  # Check every dataset before paying for the model, so a typo fails in a second.
  resolved = {}
  for name, (path, split) in datasets.items():
    if not name or "/" in name or name.startswith("."):
      raise ValueError(f"dataset name {name!r} must be a plain file name")
    resolved[name] = (path if is_url(path) else Path(path), resolve_split(path, split))
  if restored is None:
    restored = workdir.restore(run_dir, which)
  chief = jax.process_index() == 0
  out_dir = as_path(run_dir) / workdir.EVAL_DIR
  if chief:
    (out_dir / "boards").mkdir(parents=True, exist_ok=True)

  results, programs = {}, {}  # The datasets share the step's executables (`evaluate_split`).
  for name, (path, split) in resolved.items():
    result = evaluate_split(
      restored,
      path,
      split,
      batch_size=batch_size,
      max_games=max_games,
      max_len=max_len,
      logits_fn=logits_fn,
      programs=programs,
    )
    failures = result.pop("failures")
    result["boards"] = []
    if gallery > 0:  # Every process runs the model; process 0 writes.
      views = eval_report.gallery_views(restored, path, split, result, gallery)
      if chief:
        eval_report.write_gallery(out_dir, name, label, result, views)
    if chief:
      boards_dir = out_dir / "boards"
      result["boards"] = eval_report.draw_failures(name, path, split, failures, boards, boards_dir)
      write_json(out_dir / f"{name}.json", result, flat=True)
      write_text(out_dir / f"{name}.md", eval_report.results_markdown({name: result}, label))
    results[name] = result
    if verbose:
      print(eval_report.progress_line(name, result), flush=True)
  if chief:
    eval_report.write_summary(out_dir, label, as_path(run_dir).name)
  return results


# ------------------------------------------------------------------------------------------------
# Command line


def main(argv=None) -> int:
  ap = cli.workdir_parser(
    "chessjax.world_model.evaluate", __doc__, datasets="required", batch_size=64
  )
  ap.add_argument("--max-games", type=int, default=None, help="only the first N games of each")
  ap.add_argument("--boards", type=int, default=5, help="failure boards drawn per dataset")
  ap.add_argument(
    "--max-len", type=int, default=None, help="steps scored per game (default: the training cut)"
  )
  ap.add_argument(
    "--gallery", type=int, default=0, metavar="N", help="page of the N worst games per dataset"
  )
  args = ap.parse_args(argv)
  if args.batch_size < 1 or any(x is not None and x < 1 for x in (args.max_games, args.max_len)):
    ap.error("--batch-size, --max-games and --max-len must be positive")
  if args.gallery < 0:
    ap.error("--gallery must be >= 0")

  def run():  # Every other flag but --data is a parameter of `evaluate`.
    datasets = cli.datasets(args)
    return evaluate(args.workdir, datasets, which=args.checkpoint, **cli.other_flags(args, "data"))

  report = partial(_print_report, args.workdir)
  return cli.run_workdir_command(ap, args, run, report=report, logs=True)


def _print_report(run_dir, results: dict) -> None:
  out = as_path(run_dir) if is_url(run_dir) else Path(run_dir)
  out = out / workdir.EVAL_DIR
  print()
  print((out / "results.md").read_text().split("\n## ")[0].strip())
  print()
  print(f"metrics:  {', '.join(str(out / f'{n}.json') for n in results)}")
  print(f"report:   {out / 'results.md'}")
  print(f"plot:     {out / 'prefix_bins.png'}")
  n_boards = sum(len(r["boards"]) for r in results.values())
  print(f"boards:   {n_boards} SVGs under {out / 'boards'}")


if __name__ == "__main__":
  sys.exit(main())
