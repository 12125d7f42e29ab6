"""Evaluation of a trained chess language model: per-move perplexity and the board-state probes.

    python -m chessjax.lm.evaluate --workdir runs/lm_gpt2_rap_S --sets data/probing \\
        [--data dev=data/lm_masters:dev test=data/lm_masters:test] [--checkpoint best|latest]
        [--batch-size 64]

Scores a checkpoint of the workdir (default: the best one, WORKDIR/best, the one early stopping
kept, when the workdir has it, else the newest; `--checkpoint` picks) as Toshniwal et al. 2022
report it:
* per-move loss and perplexity (Table 3) of every `--data NAME=PATH[:SPLIT]` (default: the run's
  own dev and test splits): summed NLL over (moves + 1) per game, piece logits masked for every
  non-AP model, AP's piece letters present and scored;
* the probing tasks the model can take (End-Actual, End-Other; Start tasks for RAP and AP models;
  Tables 4-5): ExM, LgM and R-precision (%), the random-legal baselines, the error categories of
  the End tasks (Table 7), in total and per piece type, pseudo-legal errors by check and king
  (Table 13) and path-obstruction errors by piece (Table 14). Each row's prompts share its prefix,
  which runs once (`chessjax.lm.probing.task_logits`, `chessjax.lm.continuations`);
  `probe_reference` runs every prompt on its own and gives the same outputs.
WORKDIR/eval/ receives `results.json`, `results.md` (the paper's table layout) and `probes.jsonl`
(one line per task and row: prompt prefix, piece and start square, answers, the model's top-1
token, its error category, Table 13 case and path length; `probe_result`). Files
are written atomically by process 0. The conventions are those of every evaluation of a workdir
(`chessjax.workdir`, `chessjax.cli`): reports under WORKDIR/eval/, the best checkpoint by default
(`workdir.restore`).
"""

import json
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from chessjax import cli, evaluation, workdir
from chessjax.batches import eval_batches
from chessjax.data.source import resolve_split
from chessjax.files import as_path, write_json, write_text
from chessjax.lm import continuations, probing

TASK_NAMES = {
  "end_actual": "End-Actual",
  "end_other": "End-Other",
  "start_actual": "Start-Actual",
  "start_other": "Start-Other",
}


def _next_token(predict, params, model_state, tokens, lengths):
  logits = predict(params, model_state, tokens)
  return jnp.take_along_axis(logits, (lengths - 1)[:, None, None], axis=1)[:, 0]


def next_token_fn(restored):
  """`logits_fn(tokens int32[B, T], lengths int32[B]) -> float32[B, V]` of a restored model."""
  fn = jax.jit(partial(_next_token, restored.fns.predict))
  state = restored.state
  return lambda tokens, lengths: np.asarray(
    fn(state["params"], state["model_state"], jnp.asarray(tokens), jnp.asarray(lengths))
  )


def perplexity(restored, path, split: str, *, batch_size: int) -> dict:
  """Per-move loss and perplexity of a dataset split (the task's evaluation rows)."""
  batches = eval_batches(
    restored.spec,
    restored.task.eval_rows,
    path,
    split,
    batch_size=workdir.device_batch_size(batch_size),
  )
  try:
    result = evaluation.accumulate(restored.fns, restored.state, batches, ahead=True)
  finally:
    batches.close()
  return {**result, "dataset": {"path": str(path), "split": split}}


def probe(restored, sets_dir, *, batch_size: int) -> tuple[dict, list[dict]]:
  """({task: scores}, per-row records) of the probing sets in `sets_dir`; each row's shared
  prefix runs once, `batch_size` rows at a time."""
  task = restored.task
  end_rows, start_rows = probing.read_rows(sets_dir)
  state = restored.state
  fn = continuations.continuation_logits_fn(
    restored.fns.graphdef, state["params"], state["model_state"], pad_id=task.vocab.pad_id
  )
  logits = probing.task_logits(
    end_rows, start_rows, fn, task.vocab, notation=task.notation, batch_size=batch_size
  )
  return probe_result(end_rows, start_rows, logits, task)


def probe_reference(restored, sets_dir, *, batch_size: int) -> tuple[dict, list[dict]]:
  """`probe` by the reference path: every prompt on its own, all padded to the longest
  (`probing.reference_task_logits`, `batch_size` prompts at a time)."""
  task = restored.task
  end_rows, start_rows = probing.read_rows(sets_dir)
  logits = probing.reference_task_logits(
    end_rows,
    start_rows,
    next_token_fn(restored),
    task.vocab,
    notation=task.notation,
    batch_size=batch_size,
  )
  return probe_result(end_rows, start_rows, logits, task)


def probe_result(end_rows, start_rows, logits: dict, task):
  """(scores, per-row records) of per-task logits (`probing.task_logits`) under the language-model
  `task` (its vocab, notation and `eval_logits`). A record holds the
  prompt (prefix, `piece` letter, End tasks' `start` square; `start` None for Start tasks), the
  answers, the model's top-1 token and, for End tasks, its `error` category (None when legal),
  Table 13's `pseudo_legal_case` and the top-1's `path_length` (`probing.end_row_details`)."""
  vocab = task.vocab
  boards = probing.boards_after(end_rows) if any(n.startswith("end") for n in logits) else None
  results = probing.score_tasks(
    end_rows, start_rows, logits, vocab, notation=task.notation, boards=boards
  )
  records = []
  for name, task_logits in logits.items():
    scored = task.eval_logits(task_logits)
    top1 = np.argmax(scored, axis=-1)
    pairs = [probing.answers(e, s, name) for e, s in zip(end_rows, start_rows, strict=True)]
    if name.startswith("end"):
      details = probing.end_row_details(end_rows, name, scored, vocab, boards)
    else:
      piece_key = "piece_type" if name == "start_actual" else "other_piece_type"
      details = [{"start": None, "piece": s[piece_key]} for s in start_rows]
    for i, (e, (want, ok)) in enumerate(zip(end_rows, pairs, strict=True)):
      predicted = vocab.tokens[int(top1[i])]
      records.append(
        {
          "task": name,
          "row": i,
          "prefix": e["prefix"],
          "exact": want,
          "legal": ok,
          "top1": predicted,
          "exact_match": None if want is None else predicted == want,
          "legal_match": predicted in ok,
          **details[i],
        }
      )
  baselines = {
    "end_actual": probing.random_legal_baseline(end_rows, "end"),
    "start_actual": probing.random_legal_baseline(start_rows, "start"),
  }
  return {"tasks": results, "random_legal": baselines, "rows": len(end_rows)}, records


def _fmt(x) -> str:
  return "-" if x is None else f"{x:.1f}"


def results_markdown(result: dict) -> str:
  """Perplexity (Table 3) and the probes (Tables 4-5 layout), with the random-legal baselines."""
  r = result
  lines = [
    f"# {r['family']} {r['size']} ({r['notation'].upper()}), checkpoint step {r['step']}",
    "",
    "| data | per-move loss | perplexity | moves |",
    "|---|---:|---:|---:|",
  ]
  for name, p in r["perplexity"].items():
    lines.append(f"| {name} | {p['loss']:.4f} | {p['perplexity']:.2f} | {p['moves']:,} |")
  if "probes" in r:
    tasks, base = r["probes"]["tasks"], r["probes"]["random_legal"]
    for kind, table in (("end", "Table 5"), ("start", "Table 4")):
      actual, other = tasks.get(f"{kind}_actual"), tasks.get(f"{kind}_other")
      if actual is None:
        continue
      lines += [
        "",
        f"{kind.title()} squares ({r['probes']['rows']} prompts; layout of Toshniwal et al. "
        f"2022, {table}):",
        "",
        "| | LgM Actual Acc. | LgM Actual R-Prec. | LgM Other Acc. | LgM Other R-Prec. "
        "| ExM Acc. |",
        "|---|---:|---:|---:|---:|---:|",
        f"| model | {_fmt(actual['lgm'])} | {_fmt(actual['r_precision'])} | "
        f"{_fmt(other['lgm'])} | {_fmt(other['r_precision'])} | {_fmt(actual.get('exm'))} |",
        f"| random legal | - | - | - | - | {_fmt(base[f'{kind}_actual'])} |",
      ]
    for name in ("end_actual", "end_other"):
      errors = tasks[name]["errors"]
      lines += [
        "",
        f"{TASK_NAMES[name]} errors (Table 7 categories), in total and per piece type:",
        "",
        "| piece | " + " | ".join(probing.ERROR_CATEGORIES) + " |",
        "|---|" + "---:|" * len(probing.ERROR_CATEGORIES),
        "| all | " + " | ".join(str(errors["counts"][c]) for c in probing.ERROR_CATEGORIES) + " |",
      ]
      for piece, counts in errors["by_piece"].items():
        cells = " | ".join(str(counts[c]) for c in probing.ERROR_CATEGORIES)
        lines.append(f"| {piece} | {cells} |")
    lines += [
      "",
      "Pseudo-legal errors by case (Table 13) and path-obstruction errors by piece (Table 14), "
      "errors / total (total: the rows of the case or piece less those with an error of another "
      "category):",
      "",
      "| case or piece | End-Actual | End-Other |",
      "|---|---:|---:|",
    ]
    for key, names in (
      ("pseudo_legal_by_case", probing.PSEUDO_LEGAL_CASES),
      ("path_obstruction_by_piece", probing.TABLE11_PIECES),
    ):
      for name in (*names, "total"):
        cells = [tasks[t]["errors"][key][name] for t in ("end_actual", "end_other")]
        label = f"{name} ({key.split('_by_')[0].replace('_', '-')})"
        pairs = " | ".join(f"{c['errors']} / {c['total']}" for c in cells)
        lines.append(f"| {label} | {pairs} |")
  return "\n".join(lines) + "\n"


def evaluate(run_dir, *, sets=None, data=None, which=None, batch_size=64) -> dict:
  """Scores a workdir (module docstring) at checkpoint `which` ("best", "latest"; None: best,
  else latest, as `workdir.restore` picks); writes WORKDIR/eval/ and returns results.json."""
  restored = workdir.restore(run_dir, which)
  config = restored.config
  if data is None:
    data = {"dev": (config.data.train, "dev"), "test": (config.data.train, "test")}
  resolved = {name: (path, resolve_split(path, split)) for name, (path, split) in data.items()}
  result = {
    "family": config.family,
    "size": config.size,
    "notation": restored.task.notation,
    "step": int(restored.step),
    "checkpoint": restored.checkpoint,
    "perplexity": {
      name: perplexity(restored, path, split, batch_size=batch_size)
      for name, (path, split) in resolved.items()
    },
  }
  records = []
  if sets is not None:
    result["probes"], records = probe(restored, sets, batch_size=batch_size)
    result["probes"]["sets"] = str(sets)
  if jax.process_index() == 0:
    out = as_path(run_dir) / workdir.EVAL_DIR
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", result)
    write_text(out / "results.md", results_markdown(result))
    write_text(out / "probes.jsonl", "".join(json.dumps(x) + "\n" for x in records))
  return result


def main(argv=None) -> int:
  ap = cli.workdir_parser(
    "chessjax.lm.evaluate",
    __doc__,
    datasets="optional",
    batch_size=64,
    batch_help="probing rows per model call",
  )
  ap.add_argument("--sets", default=None, help="probing sets (end.jsonl, start.jsonl)")
  ap.add_argument("--latest", action="store_true", help="same as --checkpoint latest")
  args = ap.parse_args(argv)

  def run():
    which = "latest" if args.latest else args.checkpoint
    return evaluate(
      args.workdir, sets=args.sets, data=cli.datasets(args), which=which, batch_size=args.batch_size
    )

  def report(result):
    print(results_markdown(result))
    print(f"results: {as_path(args.workdir) / workdir.EVAL_DIR}")

  return cli.run_workdir_command(ap, args, run, report=report)


if __name__ == "__main__":
  sys.exit(main())
