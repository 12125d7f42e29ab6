"""Evaluation of a trained workdir on prepared test splits: the paper's metrics, plots and boards.

    python -m chessjax.world_model.evaluate --workdir runs/t1 \
        --data real=runs/demo/data/real:test random=runs/demo/data/random \
        [--checkpoint best|latest] [--batch-size 64] [--max-games N] [--boards 5] [--max-len N]
        [--gallery N]

`--data NAME=PATH[:SPLIT]` names a prepared dataset directory; SPLIT defaults to `test` when the
dataset has one, else to its only split. A checkpoint of the workdir (default: the best one,
WORKDIR/best, when training validated, else the newest: `chessjax.workdir.default_checkpoint`, as
every evaluator of a workdir) is scored on every game of each split (truncated to the config's
`max_len` steps, as in training, or to `--max-len` steps: whole games beyond the trained length)
and WORKDIR/eval/ (WORKDIR a local path or a URL such as `gs://bucket/run`) receives:
  NAME.json        all metrics (`chessjax.world_model.metrics`), checkpoint step, dataset,
                   throughput and the first wrong step of every game (`first_error_steps`, game
                   order, -1 = never)
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
`chessjax.evaluation`. Every bucket shape is compiled ahead of the timed pass:
`games_per_s` measures evaluation, `compile_seconds` the compilation.
"""

import argparse
import json
import logging
import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from chessjax import evaluation, labels, processes, runtime, workdir
from chessjax.data import pipeline
from chessjax.data.source import GameSource, read_manifest, resolve_split, variant_of_manifest
from chessjax.encoding import id_to_move
from chessjax.files import as_path, is_url, write_figure, write_json, write_text
from chessjax.plotting import plt
from chessjax.world_model import metrics, page, plots, strata
from chessjax.world_model.boards import failure_svg
from chessjax.world_model.task import WorldModelTask

INT32_MAX = np.iinfo(np.int32).max
EVAL_KEYS = (*WorldModelTask.batch_keys, "index")


# ------------------------------------------------------------------------------------------------
# Per-batch computation


def eval_batch(logits_fn, params, model_state, batch: dict) -> tuple[dict, dict]:
  """(`metrics.batch_stats`, per-game extras) of one batch from a single forward pass.

  Extras: `index` int32[B] (game position in the split, -1 pad rows), `pred_first` uint8[B, 75],
  the argmax labels at each game's first wrong step (meaningless for exact games and pad rows),
  `group_hits` uint8[B, T, G], the right labels of each label group at every step (for the
  strata and the per-game scores), and `game_ce` float32[B], each game's cross-entropy summed
  over its steps and labels.
  """
  logits = logits_fn(params, model_state, batch)
  stats = metrics.batch_stats(logits, batch["states"], batch["mask"])
  step = jnp.clip(stats["first_error"], 0, logits.shape[1] - 1)
  at_step = jnp.take_along_axis(logits, step[:, None, None], axis=1)[:, 0]  # [B, 1878]
  pred = labels.argmax_labels(at_step).astype(jnp.uint8)  # Every class count is <= 256.
  ce, hit = metrics.per_label(logits, batch["states"])
  game_ce = jnp.sum(jnp.where(batch["mask"], ce.sum(-1), 0.0), axis=1)  # [B], summed over labels
  group_hits = jnp.stack(
    [hit[..., first : first + count].sum(-1) for _, first, count, _ in labels.GROUPS], axis=-1
  ).astype(jnp.uint8)  # A group has at most 64 labels.
  extras = {"index": batch["index"], "pred_first": pred, "group_hits": group_hits}
  return stats, {**extras, "game_ce": game_ce}


# ------------------------------------------------------------------------------------------------
# Datasets and the evaluation pass


def _compile_shapes(step_fn, params, model_state, plan, sharding) -> dict[int, object]:
  """Ahead-of-time executables for every bucket length of `plan`, keyed by length; the batch
  shapes are those the task's evaluation row format writes (an all-padding batch of it)."""
  b = plan.batch_size
  compiled = {}
  for length in sorted({plan.global_batch(i)[1] for i in range(len(plan))}):
    example = WorldModelTask.eval_rows.batch([None] * b, length, max_len=None, epoch=0)
    example["index"] = np.zeros(b, np.int32)  # The loader adds each row's game index.
    spec = {
      key: jax.ShapeDtypeStruct(example[key].shape, example[key].dtype, sharding=sharding)
      for key in EVAL_KEYS
    }
    compiled[length] = step_fn.lower(params, model_state, spec).compile()
  return compiled


def evaluate_split(
  restored,
  path,
  split: str,
  *,
  batch_size: int = 64,
  max_games=None,
  max_len: int | None = None,
  logits_fn=None,
) -> dict:
  """Metrics of one dataset split under a restored model, plus per-game first errors.

  `restored` is `chessjax.workdir.restore(workdir)`. `logits_fn(params, model_state, batch)`
  replaces the model's logits (default: the restored model on `batch["moves"]`), e.g. by
  synthetic ones whose errors are known. `max_len` scores each game's first `max_len` steps
  (default: the training config's `data.max_len`; a larger one scores beyond the trained length).
  Returns the `metrics.Accumulator` result with `dataset`, `checkpoint_step`, timing,
  `first_error_steps` (int per game, -1 when never wrong), `exact_steps` (exact steps per game),
  `game_loss` (each game's loss: its mean per-label cross-entropy) and its maximum, `per_ply`
  (steps scored, exact steps and right labels at each step t, for curves at any resolution),
  `strata` (`chessjax.world_model.strata`) and `failures` (game index -> (first wrong step,
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
  max_len = config.data.max_len if max_len is None else int(max_len)
  truncated = 0 if max_len is None else int((lengths > max_len).sum())
  scored = lengths if max_len is None else np.minimum(lengths, max_len)
  flags = strata.dataset_flags(path, split, num_games, variant_of_manifest(read_manifest(path)))

  replicated = NamedSharding(fns.data_sharding.mesh, P())
  if logits_fn is None:
    logits_fn = lambda params, model_state, batch: fns.predict(params, model_state, batch["moves"])  # noqa: E731
  step_fn = jax.jit(partial(eval_batch, logits_fn), out_shardings=replicated)
  params, model_state = state["params"], state["model_state"]
  batches = workdir.eval_batches(
    config,
    WorldModelTask.eval_rows,
    path,
    split,
    batch_size=batch_size,
    max_games=num_games,
    max_len=max_len,
  )
  start = time.perf_counter()
  compiled = _compile_shapes(step_fn, params, model_state, batches.plan, fns.data_sharding)
  compile_seconds = time.perf_counter() - start

  acc, by_stratum = metrics.Accumulator(), strata.StrataAccumulator()
  first_steps = np.full(num_games, -2, dtype=np.int64)  # -2: not seen yet.
  exact_steps = np.zeros(num_games, dtype=np.int64)
  game_loss = np.zeros(num_games, dtype=np.float64)
  ply = {k: np.zeros(int(scored.max()), np.int64) for k in ("steps", "exact", "correct")}
  failures: dict[int, tuple[int, np.ndarray]] = {}

  def consume(out):
    stats, extra = out
    acc.add(stats)
    rows = zip(
      extra["index"],
      stats["first_error"],
      extra["pred_first"],
      extra["group_hits"],
      extra["game_ce"],
      strict=True,
    )
    for g, first, pred, hits, ce in rows:
      if g < 0:
        continue
      game_loss[g] = ce / (labels.NUM_LABELS * scored[g])
      n = scored[g]
      hits = hits[:n]
      exact = (hits == strata.GROUP_SIZES).all(-1)
      exact_steps[g] = exact.sum()
      ply["steps"][:n] += 1
      ply["exact"][:n] += exact
      ply["correct"][:n] += hits.sum(-1, dtype=np.int64)
      by_stratum.add(flags[g][: scored[g]], exact, hits)
      if first == INT32_MAX:
        first_steps[g] = -1
      else:
        first_steps[g] = first
        failures[int(g)] = (int(first), np.array(pred))

  def eval_step(arrays):
    return compiled[arrays["moves"].shape[1]](params, model_state, arrays)

  start = time.perf_counter()
  try:
    evaluation.run_batches(eval_step, fns, batches, consume, keys=EVAL_KEYS)
  finally:
    batches.close()
  seconds = time.perf_counter() - start
  if (first_steps == -2).any():
    raise RuntimeError(f"{int((first_steps == -2).sum())} games of {path}:{split} were not seen")

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
    compiled_shapes=sorted(compiled),
    compile_seconds=compile_seconds,
    eval_seconds=seconds,
    games_per_s=num_games / max(seconds, 1e-9),
    steps_per_s=result["steps"] / max(seconds, 1e-9),
    first_error_steps=first_steps.tolist(),
    exact_steps=exact_steps.tolist(),
    game_loss=game_loss.tolist(),
    per_ply={k: v.tolist() for k, v in ply.items()},
    max_game_loss=float(game_loss.max()),
    strata=by_stratum.result(),
    failures=failures,
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
  """Evaluates checkpoint `which` of `workdir` ("best", "latest"; None: `default_checkpoint`) on
  `datasets` and writes WORKDIR/eval/.

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
    which = workdir.default_checkpoint(run_dir) if which is None else which
    restored = workdir.restore(run_dir, which)
  chief = jax.process_index() == 0
  out_dir = as_path(run_dir) / workdir.EVAL_DIR
  if chief:
    (out_dir / "boards").mkdir(parents=True, exist_ok=True)

  results = {}
  for name, (path, split) in resolved.items():
    result = evaluate_split(
      restored,
      path,
      split,
      batch_size=batch_size,
      max_games=max_games,
      max_len=max_len,
      logits_fn=logits_fn,
    )
    failures = result.pop("failures")
    result["boards"] = []
    if gallery > 0:  # Every process runs the model; process 0 writes.
      views = gallery_views(restored, path, split, result, gallery)
      if chief:
        heading = f"{result['family']} {result['size']} at step {result['checkpoint_step']}: "
        heading += f"the {len(views)} worst-tracked games of {name} ({label})"
        write_text(out_dir / f"{name}_gallery.html", page.page_html(views, heading))
    if chief:
      result["boards"] = draw_failures(name, path, split, failures, boards, out_dir / "boards")
      write_json(out_dir / f"{name}.json", result, flat=True)
      write_text(out_dir / f"{name}.md", results_markdown({name: result}, label))
    results[name] = result
    if verbose:
      print(_progress_line(name, result), flush=True)
  if chief:
    every = saved_results(out_dir)
    write_text(out_dir / "results.md", results_markdown(every, label))
    fig = plots.prefix_bins_figure(every, as_path(run_dir).name)
    try:
      write_figure(out_dir / "prefix_bins.png", fig)
    finally:
      plt.close(fig)
  return results


def gallery_views(restored, path, split: str, result: dict, count: int) -> list[dict]:
  """`page.game_view`s of the `count` games of a scored split with the lowest ExactState (ties:
  the earlier first wrong step first), each cut to the steps that were scored."""
  exact = np.asarray(result["exact_steps"])
  lengths = pipeline.game_lengths(path, split)[: len(exact)]
  max_len = result["dataset"]["max_len"]
  scored = lengths if max_len is None else np.minimum(lengths, max_len)
  first = np.asarray(result["first_error_steps"])
  order = np.lexsort((np.where(first < 0, INT32_MAX, first), exact / scored))[:count]
  source, views = GameSource(path, split), []
  for g in order:
    game = source[int(g)]
    moves, states = game["moves"][: scored[g]], game["states"][: scored[g]]
    pred = np.asarray(labels.argmax_labels(restored.predict(moves[None].astype(np.int32))))[0]
    ucis = [id_to_move(int(m)) for m in moves[1:]]
    views.append(page.game_view(f"game {g} ({game['example_id']})", ucis, states, pred))
  return views


def saved_results(out_dir: Path) -> dict[str, dict]:
  """Every dataset's result in an eval folder (its NAME.json files), by name."""
  return {p.stem: json.loads(p.read_text()) for p in sorted(as_path(out_dir).glob("*.json"))}


def _progress_line(name: str, r: dict) -> str:
  d = r["dataset"]
  line = (
    f"{name}: {d['games']} games of {d['path']}:{d['split']} in {r['eval_seconds']:.1f}s "
    f"({r['games_per_s']:.1f} games/s, {r['compile_seconds']:.1f}s compiling)"
  )
  if d["truncated_games"]:
    line += f"; {d['truncated_games']} games truncated to max_len={d['max_len']} steps"
  if r["nonfinite_logits"]:
    line += f"; {r['nonfinite_logits']:,} NON-FINITE logits"
  return line


# ------------------------------------------------------------------------------------------------
# Reports


def format_loss(x: float) -> str:
  """The paper's loss format: 6 decimals, scientific below 1e-3."""
  if not np.isfinite(x):
    return str(x)
  return f"{x:.6f}" if x >= 1e-3 or x == 0 else f"{x:.2e}"


def results_markdown(results: dict[str, dict], run_dir) -> str:
  """The paper's table plus label groups, first errors, non-finite logits and notes."""
  any_r = next(iter(results.values()))
  steps = {r["checkpoint_step"] for r in results.values()}
  if len(steps) == 1:
    when = f"checkpoint step {any_r['checkpoint_step']}"
  else:
    when = "checkpoint steps " + ", ".join(
      f"{n} {r['checkpoint_step']}" for n, r in results.items()
    )
  lines = [
    f"# Evaluation of `{run_dir}`",
    "",
    f"{any_r['family']} {any_r['size']}, {when}.",
    "",
    "| dataset | Loss | Labelwise % | ExactState % | Trajectory % |",
    "|---|---:|---:|---:|---:|",
  ]
  for name, r in results.items():
    lines.append(
      f"| {name} | {format_loss(r['loss'])} | {100 * r['labelwise']:.2f} | "
      f"{100 * r['exact_state']:.2f} | {100 * r['trajectory']:.2f} |"
    )
  lines += ["", "## Accuracy per label group (%)", ""]
  lines.append("| dataset | " + " | ".join(metrics.GROUP_NAMES) + " |")
  lines.append("|---|" + "---:|" * len(metrics.GROUP_NAMES))
  for name, r in results.items():
    cells = " | ".join(f"{100 * r['groups'][g]:.2f}" for g in metrics.GROUP_NAMES)
    lines.append(f"| {name} | {cells} |")
  lines += [
    "",
    "## First wrong step per game",
    "",
    "| dataset | games | games with an error | median first wrong step | games by first wrong "
    "step (bins of 20 from t = 0) |",
    "|---|---:|---:|---:|---|",
  ]
  for name, r in results.items():
    fe = r["first_error"]
    median = "-" if fe["median_step"] is None else f"{fe['median_step']:g}"
    hist = " ".join(str(x) for x in fe["histogram_bins_of_20"]) or "-"
    lines.append(f"| {name} | {r['games']} | {fe['games_with_error']} | {median} | {hist} |")
  lines += [
    "",
    "## Data, non-finite logits and throughput",
    "",
    "| dataset | path:split | steps | truncated to max_len | non-finite logits | games/s |",
    "|---|---|---:|---:|---:|---:|",
  ]
  for name, r in results.items():
    d = r["dataset"]
    lines.append(
      f"| {name} | `{d['path']}:{d['split']}` | {r['steps']:,} | {d['truncated_games']} "
      f"(max_len {d['max_len']}) | {r['nonfinite_logits']:,} | {r['games_per_s']:.1f} |"
    )
  lines += strata_markdown(results)
  boards = [(name, b) for name, r in results.items() for b in r["boards"]]
  if boards:
    lines += ["", "## Boards at the first wrong step", ""]
    for name, b in boards:
      lines.append(
        f"* {name} game {b['game']} step {b['step']}: [{b['svg']}]({b['svg']}) "
        f"({len(b['wrong'])} wrong labels)"
      )
  if any(r["dataset"]["truncated_games"] for r in results.values()):
    lines += ["", "Truncated games are scored on their first max_len steps, as in training."]
  return "\n".join(lines) + "\n"


def strata_markdown(results: dict[str, dict]) -> list[str]:
  """Lines of the strata table: ExactState, the squares' accuracy and the worst label group on
  the hard steps (`chessjax.world_model.strata`), each beside the same model's on the other steps
  at the same plies (`matched`), and the split's overall ExactState."""
  lines = [
    "",
    "## Hard steps (strata): ExactState % and the worst label group",
    "",
    "Steps where a capture, check, king move, promotion, lost castling right, legal en-passant "
    "capture or change of the e.p. label happens, and the steps right after (`after_`). Matched: "
    "the other steps at the same plies, weighted as the stratum's (events come at their own "
    "plies, and ExactState falls with the ply); overall ExactState for comparison.",
    "",
    "| dataset | stratum | steps | ExactState % | matched % | vs overall | pieces % | matched % "
    "| worst group (acc. %; matched %) |",
    "|---|---|---:|---:|---:|---:|---:|---:|---|",
  ]
  pct = lambda v: "-" if v is None else f"{100 * v:.2f}"  # noqa: E731
  for name, r in results.items():
    if "strata" not in r:  # Results written before strata existed.
      continue
    overall = 100 * r["exact_state"]
    for stratum, s in r["strata"].items():
      if not s["steps"]:
        lines.append(f"| {name} | {stratum} | 0 | - | - | - | - | - | - |")
        continue
      m = s.get("matched") or {"exact_state": None, "groups": {}}  # Results before `matched`.
      exact = 100 * s["exact_state"]
      group, acc = min(s["groups"].items(), key=lambda kv: kv[1])
      lines.append(
        f"| {name} | {stratum} | {s['steps']:,} | {exact:.2f} | {pct(m['exact_state'])} | "
        f"{exact - overall:+.2f} | {pct(s['groups']['pieces'])} | "
        f"{pct(m['groups'].get('pieces'))} | {group} ({pct(acc)}; {pct(m['groups'].get(group))}) |"
      )
  return lines


def draw_failures(name: str, path, split: str, failures: dict, count: int, out_dir) -> list[dict]:
  """SVGs of the first `count` failing games (by index); returns what each shows."""
  for stale in as_path(out_dir).glob(f"{name}_game*_step*.svg"):
    stale.unlink()  # Boards of an earlier checkpoint would pass for this one's.
  source = GameSource(path, split) if failures and count > 0 else None
  drawn = []
  for g in sorted(failures)[: max(count, 0)]:
    step, pred = failures[g]
    game = source[g]
    true = game["states"][step]
    move = id_to_move(int(game["moves"][step])) if step > 0 else None
    where = f"ply {step}, move {move}" if move else "the initial position"
    title = f"{name} game {g} ({game['example_id']}): first wrong step {step}, after {where}"
    file = f"{name}_game{g}_step{step}.svg"
    write_text(as_path(out_dir) / file, failure_svg(pred, true, title, move))
    wrong = [int(i) for i in np.nonzero(np.asarray(pred) != true)[0]]
    drawn.append({"game": g, "step": step, "svg": f"boards/{file}", "wrong": wrong})
  return drawn


# ------------------------------------------------------------------------------------------------
# Command line


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(
    prog="python -m chessjax.world_model.evaluate", description=__doc__.split("\n")[0]
  )
  ap.add_argument("--workdir", required=True, help="training workdir (config.json, checkpoints/)")
  ap.add_argument(
    "--data", nargs="+", required=True, metavar="NAME=PATH[:SPLIT]", help="datasets to score"
  )
  ap.add_argument(
    "--checkpoint",
    choices=workdir.CHECKPOINTS,
    default=None,
    help="default: best if the workdir has WORKDIR/best, else latest",
  )
  ap.add_argument("--batch-size", type=int, default=64)
  ap.add_argument("--max-games", type=int, default=None, help="only the first N games of each")
  ap.add_argument("--boards", type=int, default=5, help="failure boards drawn per dataset")
  ap.add_argument(
    "--max-len", type=int, default=None, help="steps scored per game (default: the training cut)"
  )
  ap.add_argument(
    "--gallery", type=int, default=0, metavar="N", help="page of the N worst games per dataset"
  )
  args = ap.parse_args(argv)
  runtime.setup_for_workdir(args.workdir)
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
  logging.getLogger("absl").setLevel(logging.WARNING)
  if args.batch_size < 1 or any(x is not None and x < 1 for x in (args.max_games, args.max_len)):
    ap.error("--batch-size, --max-games and --max-len must be positive")
  if args.gallery < 0:
    ap.error("--gallery must be >= 0")
  try:
    with processes.fail_together():  # Several processes: one's error stops them all.
      results = evaluate(
        args.workdir,
        workdir.parse_datasets(args.data),
        which=args.checkpoint,
        batch_size=args.batch_size,
        max_games=args.max_games,
        boards=args.boards,
        max_len=args.max_len,
        gallery=args.gallery,
      )
  except (ValueError, FileNotFoundError, KeyError) as e:
    ap.error(str(e))
  if jax.process_index() == 0:
    out = as_path(args.workdir) if is_url(args.workdir) else Path(args.workdir)
    out = out / workdir.EVAL_DIR
    print()
    print((out / "results.md").read_text().split("\n## ")[0].strip())
    print()
    print(f"metrics:  {', '.join(str(out / f'{n}.json') for n in results)}")
    print(f"report:   {out / 'results.md'}")
    print(f"plot:     {out / 'prefix_bins.png'}")
    n_boards = sum(len(r["boards"]) for r in results.values())
    print(f"boards:   {n_boards} SVGs under {out / 'boards'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
