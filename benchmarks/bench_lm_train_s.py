"""The Train-S experiment of Learning Chess Blindfolded (Toshniwal et al. 2022) on a CPU, and the
state-tracking backbones as UCI language models.

    python -m benchmarks.bench_lm_train_s --pgn ../shared/data/masters/*.pgn.bz2 --work DIR \\
        [--runs gpt2-uci,gpt2-rap,gpt2-ap,slice-uci,gdn-uci,mamba3-uci] [--epochs 3] [--lr 1e-3] \\
        [--cores 0,1]

1. Data (`data_prep.lm_data`, the paper's protocol: 10-150 plies, exact dedup, seeded shuffle into
   train / probing pool / dev / test, scaled down with a warning when the corpus is smaller than the
   paper's) into DIR/data, and the 1000-row probing set (`data_prep.probing_sets`, prefixes of
   51-100 plies from the pool, none a prefix of a Train-S game) into DIR/probing.
2. Training (`python -m chessjax.main --config=configs/lm.py:...,train=S`): the first 15,000
   training games, the paper's recipe (AdamW, betas 0.9/0.999, decay 0.01 on all parameters,
   clipping 1.0, batch 60, linear warmup over 10% of the horizon then linear decay to 0, early
   stopping with patience 1 on the per-move dev loss, best checkpoint) with a CPU-sized model, a
   horizon of `--epochs` epochs instead of 10 and learning rate `--lr` instead of 5e-4 (a model of
   under a million parameters trained for a few epochs). Validation during training: the first
   `--eval-batches` batches of dev. Every run gets the same budget. Runs go one per core of
   `--cores`, pinned, in parallel; a finished run is not trained again (a cut one resumes).
3. Evaluation (`chessjax.lm.evaluate`, best checkpoint): per-move perplexity of the whole dev and
   test splits and the four probing tasks; for the UCI runs, linear probes of every layer
   (`chessjax.lm.linear_probe`, defaults: 500 training and 500 test games) against the same
   architecture randomly initialised.
4. Tables (printed and in WORK/tables.md): perplexity (Table 3) and End / Start probes (Tables 5
   and 6 / 4) beside the paper's Train-S rows of the same model and notation, the random-legal
   baseline of this probing set, RAP and AP against UCI per backbone with where the loss goes
   (`chessjax.lm.token_roles`: the piece-letter mass before from- and to-squares, the per-move
   loss of each target role), and the best layer's linear-probe accuracy per UCI run; then
   `chessjax.lm.report` over WORK/runs into WORK/report (the paper's layouts and figures).

RUNS names the models: GPT-2 `micro` (4 layers, width 128, 4 heads: 868,736 parameters) with UCI,
UCI + RAP (p = 0.25) and UCI + AP, and chessjax's recurrent backbones as UCI language models
through the token head at about the same parameter count (3 layers of width 128; Gated DeltaNet's
MLP 480 wide and Mamba-3's 384 to land there); Gated DeltaNet with RAP and AP too (why RAP hurts
small models); and the paper's Table 6 baselines as UCI models at `micro` size: GPT-2 w=50
(868,736), Reformer (807,309), Performer (811,085), the LSTM (846,333; also with RAP).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from chessjax import workdir

REPO = Path(__file__).resolve().parents[1]

# name -> (model, size, notation, model overrides)
RUNS = {
  "gpt2-uci": ("gpt2", "micro", "uci", {}),
  "gpt2-rap": ("gpt2", "micro", "rap", {}),
  "gpt2-ap": ("gpt2", "micro", "ap", {}),
  "slice-uci": ("slice", "d128", "uci", {"layers": 3}),
  "gdn-uci": ("gated_deltanet", "d128", "uci", {"layers": 3, "mlp_width": 480}),
  "mamba3-uci": ("mamba3", "d128", "uci", {"layers": 3, "mlp_hidden": 384}),
  # Why RAP hurts small models: the best backbone above with RAP and AP (README, docs/lm.md).
  "gdn-rap": ("gated_deltanet", "d128", "rap", {"layers": 3, "mlp_width": 480}),
  "gdn-ap": ("gated_deltanet", "d128", "ap", {"layers": 3, "mlp_width": 480}),
  # Table 6 (section 5.3, UCI): the paper's other models at about GPT-2 micro's parameter count.
  "gpt2w50-uci": ("gpt2_w50", "micro", "uci", {}),
  "reformer-uci": ("reformer", "micro", "uci", {}),
  "performer-uci": ("performer", "micro", "uci", {}),
  "lstm-uci": ("lstm", "micro", "uci", {}),
  "lstm-rap": ("lstm", "micro", "rap", {}),
}

PROBE_COLUMNS = ("lgm_actual_acc", "lgm_actual_r_prec", "lgm_other_acc", "lgm_other_r_prec")
PROBE_COLUMNS += ("exm_acc",)


def paper_train_s(table: str) -> dict:
  """(model, notation) -> the paper's Train-S row of `table` (Toshniwal et al. 2022; the data file
  of `chessjax.lm.report`)."""
  from chessjax.lm.report import paper_results

  rows = paper_results()["tables"][table]["rows"]
  return {(r["model"], r["notation"]): r for r in rows if r["train"] == "S"}


def paper_baseline(table: str) -> float:
  """The paper's random-legal ExM baseline of Table 4 (Start) or 5 (End)."""
  from chessjax.lm.report import paper_results

  return paper_results()["tables"][table]["random_legal"]["exm_acc"]


def prepare(args, work: Path) -> tuple[Path, Path]:
  from data_prep import lm_data, probing_sets

  data, sets = work / "data", work / "probing"
  if not (data / "manifest.json").exists():
    argv = [
      "--pgn",
      *args.pgn,
      "--out",
      str(data),
      "--workers",
      str(len(args.cores)),
      "--overwrite",
    ]
    if lm_data.main(argv) != 0:
      sys.exit("data_prep.lm_data failed")
  if not (sets / "end.jsonl").exists():
    argv = ["--pool", str(data), "--train", str(data), "--train-limit", "15000", "--out", str(sets)]
    if probing_sets.main(argv) != 0:
      sys.exit("data_prep.probing_sets failed")
  return data, sets


def train_command(name: str, args, data: Path, run_dir: Path) -> list[str]:
  model, size, notation, overrides = RUNS[name]
  arg = f"family={model},size={size},notation={notation},train=S"
  arg += "".join(f",model.{k}={v}" for k, v in overrides.items())
  cmd = [
    sys.executable, "-m", "chessjax.main", f"--config={REPO / 'configs' / 'lm.py'}:{arg}",
    f"--workdir={run_dir}", f"--config.data.train={data}", f"--config.optim.lr={args.lr}",
    f"--config.train.epochs={args.epochs}", f"--config.train.eval_batches={args.eval_batches}",
  ]  # fmt: skip
  return cmd


def finished(run_dir: Path) -> bool:
  """A run a rerun would not train further (`chessjax.workdir.finished`)."""
  return workdir.finished(run_dir)


def train_all(names, args, data: Path, work: Path) -> None:
  """Trains the unfinished runs, one per core, pinned; logs in WORK/runs/NAME.log."""
  todo = [n for n in names if not finished(work / "runs" / n)]
  running: dict[int, tuple[str, subprocess.Popen, float]] = {}
  free = list(args.cores)
  taskset = shutil.which("taskset")
  env = {**os.environ, "PYTHONPATH": str(REPO)}
  while todo or running:
    while todo and free:
      name, core = todo.pop(0), free.pop(0)
      run_dir = work / "runs" / name
      run_dir.parent.mkdir(parents=True, exist_ok=True)
      cmd = train_command(name, args, data, run_dir)
      if taskset:
        cmd = [taskset, "-c", str(core), *cmd]
      print(f"train {name} on core {core}", flush=True)
      with open(work / "runs" / f"{name}.log", "a") as log:  # The child keeps its own copy.
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=log)
      running[core] = (name, proc, time.time())
    time.sleep(5)
    for core, (name, proc, t0) in list(running.items()):
      if proc.poll() is None:
        continue
      del running[core]
      free.append(core)
      if proc.returncode:
        sys.exit(f"{name} failed (exit {proc.returncode}); see {work / 'runs' / name}.log")
      print(f"{name} done in {time.time() - t0:,.0f} s", flush=True)


def evaluate_all(names, work: Path, sets: Path) -> dict:
  from chessjax.lm import evaluate

  results = {}
  for name in names:
    out = work / "runs" / name / "eval" / "results.json"
    if not out.exists():
      print(f"evaluate {name}", flush=True)
      evaluate.evaluate(work / "runs" / name, sets=sets)
    results[name] = json.loads(out.read_text())
  return results


def linear_probe_all(names, work: Path) -> dict:
  """`chessjax.lm.linear_probe` of each run's best checkpoint (500 train / 500 test games, 500
  steps per layer), into WORK/runs/NAME/eval/."""
  from chessjax.lm import linear_probe

  results = {}
  for name in names:
    run_dir = work / "runs" / name
    out = run_dir / "eval" / "linear_probe.json"
    if not out.exists():
      print(f"linear probes {name}", flush=True)
      if linear_probe.main(["--workdir", str(run_dir), "--checkpoint", "best"]) != 0:
        sys.exit(f"linear probes of {name} failed")
    results[name] = json.loads(out.read_text())
  return results


def probe_table(probes: dict) -> str:
  """Per run: held-out accuracy of the best layer's probe, model / control, per square subset."""
  subsets = ("all", "nonempty", "changed")
  lines = [
    "Linear probes of the board (best layer; model / randomly initialised control; %):",
    "",
    "| run | layers | all squares | non-empty squares | changed squares | majority (all) |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for name, r in probes.items():
    cells = []
    for k in subsets:
      m = max(row[k] for row in r["model"] if row[k] is not None)
      c = max(row[k] for row in r["control"] if row[k] is not None)
      cells.append(f"{100 * m:.1f} / {100 * c:.1f}")
    majority = 100 * r["majority"]["all"]
    lines.append(f"| {name} | {len(r['layers'])} | " + " | ".join(cells) + f" | {majority:.1f} |")
  return "\n".join(lines) + "\n"


def _cells(scores: dict, paper: dict | None) -> list[str]:
  keys = [("actual", "lgm"), ("actual", "r_precision"), ("other", "lgm"), ("other", "r_precision")]
  ours = [scores[k][m] for k, m in keys] + [scores["actual"].get("exm")]
  if paper is None:
    return [f"{o:.1f}" for o in ours]
  return [f"{o:.1f} / {paper[c]:.1f}" for o, c in zip(ours, PROBE_COLUMNS, strict=True)]


def tables(results: dict, work: Path) -> str:
  """Tables 3, 5 and 4 (End rows of other models: Table 6), ours / the paper's Train-S row of the
  same model and notation (GPT-2 small, Table 6's models at their paper sizes)."""
  params = {}
  for name in results:
    summary = workdir.read_summary(work / "runs" / name)
    params[name] = summary.get("params")
  table3 = paper_train_s("table3")
  end_rows = {**paper_train_s("table6"), **paper_train_s("table5")}
  lines = [
    "Perplexity per move (Table 3; ours / paper Train-S, GPT-2 small):",
    "",
    "| run | parameters | best step | dev | test |",
    "|---|---:|---:|---:|---:|",
  ]
  for name, r in results.items():
    paper = table3.get((RUNS[name][0], r["notation"]))
    dev, test = r["perplexity"]["dev"]["perplexity"], r["perplexity"]["test"]["perplexity"]
    cell = lambda x, p: f"{x:.2f} / {p}" if p else f"{x:.2f}"  # noqa: E731
    p_dev, p_test = (paper["dev_perplexity"], paper["test_perplexity"]) if paper else (None, None)
    count = f"{params[name]:,}" if params[name] else "?"
    lines.append(f"| {name} | {count} | {r['step']} | {cell(dev, p_dev)} | {cell(test, p_test)} |")
  for kind, paper_rows, label in (
    ("end", end_rows, "Tables 5 and 6"),
    ("start", paper_train_s("table4"), "Table 4"),
  ):
    lines += [
      "",
      f"{kind.title()} squares ({label}; ours / paper Train-S where the paper has the row):",
      "",
      "| run | LgM Actual Acc. | LgM Actual R-Prec. | LgM Other Acc. | LgM Other R-Prec. | ExM |",
      "|---|---:|---:|---:|---:|---:|",
    ]
    baseline = None
    for name, r in results.items():
      tasks = r["probes"]["tasks"]
      baseline = r["probes"]["random_legal"][f"{kind}_actual"]
      if f"{kind}_actual" not in tasks:
        continue
      scores = {"actual": tasks[f"{kind}_actual"], "other": tasks[f"{kind}_other"]}
      paper = paper_rows.get((RUNS[name][0], r["notation"]))
      lines.append(f"| {name} | " + " | ".join(_cells(scores, paper)) + " |")
    paper_base = paper_baseline("table5" if kind == "end" else "table4")
    lines.append(f"| random legal | - | - | - | - | {baseline:.1f} / {paper_base} |")
  return "\n".join(lines) + "\n"


def token_roles_all(names, work: Path) -> dict:
  """`chessjax.lm.token_roles` of each run's best checkpoint on its first 2,000 dev games."""
  from chessjax.lm import token_roles

  results = {}
  for name in names:
    out = work / "runs" / name / "eval" / "token_roles.json"
    if not out.exists():
      print(f"token roles {name}", flush=True)
      token_roles.run(work / "runs" / name, max_games=2000)
    results[name] = json.loads(out.read_text())
  return results


def rap_table(results: dict, roles: dict) -> str:
  """Why RAP hurts small models: per backbone, dev perplexity of RAP and AP over UCI, and (first
  2,000 dev games) the unmasked piece-letter mass before from- and to-square targets and the
  per-move loss of each target role."""
  by_model: dict[str, dict] = {}
  for name, r in results.items():
    by_model.setdefault(RUNS[name][0], {})[r["notation"]] = (name, r)
  lines = [
    "RAP and AP against UCI per backbone (dev perplexity; ratio to the same backbone's UCI run):",
    "",
    "| backbone | UCI | RAP | RAP / UCI | AP | AP / UCI |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for model, runs in by_model.items():
    ppl = {n: r["perplexity"]["dev"]["perplexity"] for n, (_, r) in runs.items()}
    uci = ppl.get("uci")
    cells = [f"{uci:.2f}" if uci else "-"]
    for n in ("rap", "ap"):
      x = ppl.get(n)
      cells += [f"{x:.2f}" if x else "-", f"{x / uci:.2f}x" if x and uci else "-"]
    lines.append(f"| {model} | " + " | ".join(cells) + " |")
  lines += [
    "",
    "Target roles (`chessjax.lm.token_roles`, first 2,000 dev games): piece-letter mass before "
    "from- / to-square targets (unmasked), and the per-move loss from each role:",
    "",
    "| run | mass before from | mass before to | from | to | piece | promotion | end | total |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for name, t in roles.items():
    dev = t["splits"]["dev"]["roles"]
    cells = [f"{dev[k]['piece_mass']:.3f}" for k in ("from", "to")]
    cells += [f"{dev[k]['loss_per_move']:.3f}" for k in ("from", "to", "piece", "promotion", "end")]
    cells.append(f"{t['splits']['dev']['loss']:.3f}")
    lines.append(f"| {name} | " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--pgn", nargs="+", required=True, help="master games (PGN, .bz2 allowed)")
  ap.add_argument("--work", required=True, help="data, runs and tables (outside the repository)")
  ap.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of {list(RUNS)}")
  ap.add_argument("--epochs", type=int, default=3, help="the schedule's horizon and the cap")
  ap.add_argument("--lr", type=float, default=1e-3)
  ap.add_argument("--eval-batches", type=int, default=40, help="dev batches per validation")
  ap.add_argument("--cores", default="0,1", help="one run per core, pinned")
  args = ap.parse_args(argv)
  args.cores = [int(c) for c in args.cores.split(",")]
  names = args.runs.split(",")
  unknown = sorted(set(names) - set(RUNS))
  if unknown:
    sys.exit(f"unknown runs {unknown}; expected some of {list(RUNS)}")
  sys.path.insert(0, str(REPO))
  from chessjax.files import write_text

  work = Path(args.work)
  data, sets = prepare(args, work)
  train_all(names, args, data, work)
  results = evaluate_all(names, work, sets)
  text = tables(results, work)
  text += "\n" + rap_table(results, token_roles_all(names, work))
  uci = [n for n in names if RUNS[n][2] == "uci"]
  if uci:
    text += "\n" + probe_table(linear_probe_all(uci, work))
  write_text(work / "tables.md", text)
  print(text)
  # The paper's layouts (Tables 3-7, 13, 14, Figures 2, 4, 5, 8) over every run of WORK.
  report = [sys.executable, "-m", "chessjax.lm.report", "--runs", str(work / "runs")]
  subprocess.run([*report, "--out", str(work / "report")], cwd=REPO, check=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
