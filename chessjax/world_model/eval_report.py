"""The reports of a world-model evaluation (`chessjax.world_model.evaluate`): Markdown tables,
failure boards, the gallery of the worst-tracked games and the summary over every dataset.

Everything here reads the results `evaluate_split` returns (or that WORKDIR/eval/NAME.json holds)
and the games of the dataset; only `gallery_views` runs the model again (every process does; the
chief writes). Files are written atomically, by the caller's process 0.
"""

import json
from pathlib import Path

import numpy as np

from chessjax import labels
from chessjax.data import pipeline
from chessjax.data.source import GameSource
from chessjax.encoding import id_to_move
from chessjax.files import as_path, write_figure, write_text
from chessjax.world_model import metrics, page, plots
from chessjax.world_model.boards import failure_svg

INT32_MAX = np.iinfo(np.int32).max


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


def write_gallery(out_dir, name: str, label: str, result: dict, views: list[dict]) -> None:
  """OUT/NAME_gallery.html: one page of the `views` (`gallery_views`) of a scored dataset."""
  heading = f"{result['family']} {result['size']} at step {result['checkpoint_step']}: "
  heading += f"the {len(views)} worst-tracked games of {name} ({label})"
  write_text(as_path(out_dir) / f"{name}_gallery.html", page.page_html(views, heading))


def saved_results(out_dir: Path) -> dict[str, dict]:
  """Every dataset's result in an eval folder (its NAME.json files), by name."""
  return {p.stem: json.loads(p.read_text()) for p in sorted(as_path(out_dir).glob("*.json"))}


def write_summary(out_dir, label: str, run_name: str) -> None:
  """OUT/results.md and OUT/prefix_bins.png over every dataset scored in the folder so far (its
  NAME.json files), so a later evaluation of another dataset adds its rows."""
  every = saved_results(out_dir)
  write_text(as_path(out_dir) / "results.md", results_markdown(every, label))
  write_figure(as_path(out_dir) / "prefix_bins.png", plots.prefix_bins_figure(every, run_name))


def progress_line(name: str, r: dict) -> str:
  """One line of a scored dataset: games, time, throughput, truncation, non-finite logits."""
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
  at the same plies (`matched`), and the split's overall ExactState; then the transition error
  (of the steps whose previous step was exact, the share made wrong there), beside the matched
  steps'."""
  lines = [
    "",
    "## Hard steps (strata): ExactState % and the worst label group",
    "",
    "Steps where a capture, check, king move, promotion, lost castling right, legal en-passant "
    "capture or change of the e.p. label happens, and the steps right after (`after_`). Matched: "
    "the other steps at the same plies, weighted as the stratum's (events come at their own "
    "plies, and ExactState falls with the ply); overall ExactState for comparison. Transition "
    "error: of the steps whose previous step was exact, the share not exact (the state broken at "
    "this step), beside the matched steps'.",
    "",
    "| dataset | stratum | steps | ExactState % | matched % | vs overall | pieces % | matched % "
    "| worst group (acc. %; matched %) | transition error % | matched % |",
    "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
  ]
  pct = lambda v: "-" if v is None else f"{100 * v:.2f}"  # noqa: E731
  for name, r in results.items():
    if "strata" not in r:  # Results written before strata existed.
      continue
    overall = 100 * r["exact_state"]
    for stratum, s in r["strata"].items():
      if not s["steps"]:
        lines.append(f"| {name} | {stratum} | 0 | - | - | - | - | - | - | - | - |")
        continue
      m = s.get("matched") or {"exact_state": None, "groups": {}}  # Results before `matched`.
      exact = 100 * s["exact_state"]
      group, acc = min(s["groups"].items(), key=lambda kv: kv[1])
      te = s.get("transition_error") or {"error": None, "matched": {"error": None}}
      lines.append(
        f"| {name} | {stratum} | {s['steps']:,} | {exact:.2f} | {pct(m['exact_state'])} | "
        f"{exact - overall:+.2f} | {pct(s['groups']['pieces'])} | "
        f"{pct(m['groups'].get('pieces'))} | {group} ({pct(acc)}; {pct(m['groups'].get(group))}) | "
        f"{pct(te['error'])} | {pct(te['matched']['error'])} |"
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
