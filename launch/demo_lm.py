"""A chess language model on the bundled sample, on a CPU, in minutes: `make demo-lm`.

    python -m launch.demo_lm --workdir runs/demo_lm [--family slice] [--epochs 2]

1. Prepare the bundled lichess sample with Toshniwal et al.'s protocol (`data_prep.lm_data`:
   10-150 plies, duplicates dropped, a seeded shuffle into train / probing pool / dev / test)
   and two probing sets (`data_prep.probing_sets`): 200 rows with prefixes of 21-60 plies, and
   a short-prefix set of up to 200 rows with prefixes of 8-20 plies, where what a CPU-sized
   model learns in minutes shows first (`tests/lm/test_lm_learns.py`).
2. Train the same small model (SLiCE d128 by default) as a UCI language model with plain UCI and
   with UCI + RAP (p = 0.25): the paper's recipe (AdamW, linear warmup and decay, early stopping,
   best checkpoint), shortened to a few epochs.
3. Evaluate both (`chessjax.lm.evaluate`: per-move perplexity, the probing tasks on the first
   set, reports in WORKDIR/NOTATION/eval/; the short-prefix set probed as well) and print the
   End-square ExM and LgM of both sets beside each set's random-legal baseline, with one line per
   set saying what the numbers show (computed from them).
Everything lands in WORKDIR; rerunning reuses prepared data and finished runs.
"""

import argparse
import math
import sys
import time
from pathlib import Path

from chessjax import train
from chessjax.files import write_json
from chessjax.lm import evaluate
from chessjax.workdir import restore as workdir_restore
from configs import lm as lm_config
from data_prep import lm_data, probing_sets

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"


# Probing sets: (name, directory, --min-len, --max-len, label); 200 rows each at most.
SETS = (
  ("long", "probing", 21, 60, "prefixes of 21-60 plies"),
  ("short", "probing_short", 8, 20, "prefixes of 8-20 plies"),
)


def prepare(workdir: Path) -> tuple[Path, dict[str, Path]]:
  data = workdir / "data"
  if not (data / "manifest.json").exists():
    argv = ["--pgn", str(SAMPLE), "--out", str(data), "--train-size", "3000"]
    argv += ["--pool-size", "600", "--dev-size", "200", "--test-size", "200", "--overwrite"]
    if lm_data.main(argv) != 0:
      raise RuntimeError("data_prep.lm_data failed")
  sets = {}
  for name, folder, lo, hi, _ in SETS:
    sets[name] = workdir / folder
    if not (sets[name] / "end.jsonl").exists():
      argv = ["--pool", str(data), "--train", str(data), "--out", str(sets[name]), "--count"]
      argv += ["200", "--min-len", str(lo), "--max-len", str(hi)]
      if probing_sets.main(argv) != 0:
        raise RuntimeError("data_prep.probing_sets failed")
  return data, sets


def verdict(label: str, rows: int, exm: dict, lgm: dict, baseline: float) -> str:
  """One line on a probing set: each model's End-Actual ExM against the set's random-legal
  baseline (a uniform guess among the legal ending squares), as clearly above or below it (by
  more than two binomial standard errors of the ExM over `rows` prompts) or within noise, and
  how often the top-1 square is legal (LgM)."""
  calls = {}
  for n, x in exm.items():
    se = 100 * math.sqrt(max(x / 100 * (1 - x / 100), 1e-4) / max(rows, 1))
    gap = x - baseline
    calls[n] = "above" if gap > 2 * se else "below" if gap < -2 * se else "level"
  kinds = set(calls.values())
  if kinds == {"above"}:
    what = "both models pick the played square clearly more often than a uniform legal guess"
  elif kinds == {"below"}:
    what = "both models pick the played square clearly less often than a uniform legal guess"
  elif kinds == {"level"}:
    what = "neither model is told apart from a uniform legal guess at this size"
  else:
    words = {"above": "clearly above", "below": "clearly below", "level": "level with"}
    what = "; ".join(f"{n.upper()} {words[c]} that guess" for n, c in calls.items())
  cells = ", ".join(f"{n.upper()} {exm[n]:.1f} ({exm[n] - baseline:+.1f})" for n in exm)
  legal = " / ".join(f"{lgm[n]:.0f}%" for n in lgm)
  return (
    f"{label} ({rows} rows): End-Actual ExM {cells} against random-legal {baseline:.1f}: {what}; "
    f"top-1 legal in {legal} of the prompts."
  )


def demo_config(family: str, notation: str, data: Path, epochs: int):
  config = lm_config.get_config(f"family={family},size=d128,notation={notation},train=all")
  config.data.train = str(data)
  config.data.batch_size = 16
  config.data.max_len = 512
  config.data.bucket_lengths = (128, 192, 256, 384, 512)
  config.optim.lr = 3e-3
  config.train.epochs = epochs
  config.train.log_every = 50
  return config


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m launch.demo_lm", description=__doc__.split("\n")[0])
  ap.add_argument("--workdir", default="runs/demo_lm")
  ap.add_argument("--family", default="slice")
  ap.add_argument("--epochs", type=int, default=2)
  args = ap.parse_args(argv)
  workdir = Path(args.workdir)
  start = time.perf_counter()
  print(f"[1/3] preparing LM data and probing sets under {workdir} ...", flush=True)
  data, sets = prepare(workdir)
  results, probes = {}, {}
  for i, notation in enumerate(("uci", "rap")):
    print(f"[2/3] training {args.family} d128 with {notation.upper()} ({i + 1}/2) ...", flush=True)
    run_dir = workdir / notation
    train.train_and_evaluate(demo_config(args.family, notation, data, args.epochs), run_dir)
    results[notation] = evaluate.evaluate(run_dir, sets=sets["long"])
    probes[notation] = {"long": results[notation]["probes"]}
    restored = workdir_restore(run_dir, results[notation]["checkpoint"])
    for name, path in sets.items():
      if name != "long":
        probes[notation][name], _ = evaluate.probe(restored, path, batch_size=64)
  print("[3/3] results (best checkpoint of each run)\n")
  print(
    "| probing set | notation | dev perplexity | End-Actual ExM | random legal | End-Actual LgM "
    "| End-Other LgM |"
  )
  print("|---|---|---:|---:|---:|---:|---:|")
  lines = []
  for name, _, _, _, label in SETS:
    base = probes["uci"][name]["random_legal"]["end_actual"]
    for notation, r in results.items():
      t = probes[notation][name]["tasks"]
      print(
        f"| {label} | {notation.upper()} | {r['perplexity']['dev']['perplexity']:.2f} | "
        f"{t['end_actual']['exm']:.1f} | {base:.1f} | {t['end_actual']['lgm']:.1f} | "
        f"{t['end_other']['lgm']:.1f} |"
      )
    exm = {n: probes[n][name]["tasks"]["end_actual"]["exm"] for n in results}
    lgm = {n: probes[n][name]["tasks"]["end_actual"]["lgm"] for n in results}
    lines.append(verdict(label, probes["uci"][name]["rows"], exm, lgm, base))
  print("\n" + "\n".join(lines))
  summary = {
    n: {"perplexity": r["perplexity"], "probes": probes[n], "checkpoint": r["checkpoint"]}
    for n, r in results.items()
  }
  summary["verdicts"] = lines
  write_json(workdir / "summary.json", summary)
  print(f"\ndone in {time.perf_counter() - start:.0f}s; reports: {workdir}/*/eval/results.md")
  return 0


if __name__ == "__main__":
  sys.exit(main())
