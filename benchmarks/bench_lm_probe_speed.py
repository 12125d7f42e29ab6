"""Seconds to run the four board-state probing tasks (Toshniwal et al. 2022) on a GPT-2 language
model on this machine, batched, through `chessjax.lm.evaluate.probe`.

    python -m benchmarks.bench_lm_probe_speed --sets DIR [--size small] [--notation rap] \\
        [--batch-size 64] [--reps 2] [--rows N] [--path shared|reference|both]

SETS is a probing set of `data_prep.probing_sets` (end.jsonl, start.jsonl; the paper's has 1000
rows; `--rows N` takes its first N). A RAP model takes all four tasks (End-Actual, End-Other,
Start-Actual, Start-Other): 4 x rows prompts. The model is GPT-2 at `--size` (`small`: the
paper's 85,508,352 parameters) with freshly initialised weights: the time does not depend on
their values. Two paths, the same outputs (checked here, row by row, when both run):
* `shared` (`evaluate.probe`): each row's prefix runs once, its four one-token continuations
  read against the prefix's cached keys and values; rows sorted by length, each batch of
  `--batch-size` rows padded to its own longest (a multiple of 32): one compilation per width;
* `reference` (`evaluate.probe_reference`): every prompt on its own, batches of `--batch-size`
  prompts all padded to the set's longest prompt: one compilation.
The first pass compiles; the table gives it and the median of `--reps` passes after it (0: none),
in wall and process CPU seconds, prompts per second and prompt tokens per second, per path, and
the ratios of the medians (of the first passes when `--reps 0`).
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--sets", required=True, help="probing sets (end.jsonl, start.jsonl)")
  ap.add_argument("--size", default="small", help="a GPT-2 size of configs/lm.py")
  ap.add_argument("--notation", default="rap", choices=("uci", "rap", "ap"))
  ap.add_argument("--batch-size", type=int, default=64)
  ap.add_argument("--reps", type=int, default=2)
  ap.add_argument("--rows", type=int, default=0, help="the first ROWS rows of SETS (0: all)")
  ap.add_argument("--path", choices=("shared", "reference", "both"), default="both")
  args = ap.parse_args(argv)
  sys.path.insert(0, str(REPO))
  import jax

  from chessjax import workdir
  from chessjax.lm import evaluate, probing
  from chessjax.models import count_params
  from configs import lm

  config = lm.get_config(f"family=gpt2,size={args.size},notation={args.notation}")
  restored = workdir.initial(config)
  sets = Path(args.sets)
  scratch = tempfile.TemporaryDirectory(prefix="probe_rows_")  # Removed at exit.
  if args.rows:  # The first rows, in a scratch directory, read by the same reader.
    cut = Path(scratch.name)
    for name in ("end.jsonl", "start.jsonl"):
      lines = (sets / name).read_text().splitlines(keepends=True)[: args.rows]
      (cut / name).write_text("".join(lines))
    sets = cut
  end_rows, start_rows = probing.read_rows(sets)
  tasks = probing.tasks_for(args.notation)
  vocab = restored.task.vocab
  prompts = [
    probing.prompt(e, s, name, vocab, args.notation)
    for name in tasks
    for e, s in zip(end_rows, start_rows, strict=True)
  ]
  longest = max(len(p) for p in prompts)
  n, tokens = len(prompts), sum(len(p) for p in prompts)
  paths = {"shared": evaluate.probe, "reference": evaluate.probe_reference}
  names = list(paths) if args.path == "both" else [args.path]
  times, cpu, outputs = {}, {}, {}
  for name in names:
    times[name], cpu[name] = [], []
    for _ in range(args.reps + 1):
      t0, c0 = time.perf_counter(), time.process_time()
      result, records = paths[name](restored, sets, batch_size=args.batch_size)
      times[name].append(time.perf_counter() - t0)
      cpu[name].append(time.process_time() - c0)
    assert sum(r["rows"] for r in result["tasks"].values()) == n
    outputs[name] = records
  print(
    f"\nGPT-2 {args.size} ({count_params(restored.state['params']):,} parameters), "
    f"{args.notation.upper()}:"
    f" {len(tasks)} tasks x {len(end_rows)} rows = {n} prompts ({tokens:,} tokens, longest "
    f"{longest}), batch {args.batch_size}, {jax.device_count()} {jax.default_backend()} "
    f"device(s)\n"
  )
  print("| path | pass | seconds | CPU seconds | prompts/s | prompt tokens/s |")
  print("|---|---|---:|---:|---:|---:|")
  summary, summary_cpu = {}, {}
  for name in names:
    rows = [("first (compiles)", times[name][0], cpu[name][0])]
    if args.reps:
      median = statistics.median
      label = f"median of {args.reps} after"
      rows.append((label, median(times[name][1:]), median(cpu[name][1:])))
    summary[name], summary_cpu[name] = rows[-1][1], rows[-1][2]
    for label, t, c in rows:
      print(f"| {name} | {label} | {t:.1f} | {c:.1f} | {n / t:.1f} | {tokens / t:,.0f} |")
  if len(names) == 2:
    same = outputs["shared"] == outputs["reference"]
    print(
      f"\nshared prefix / reference: {summary['reference'] / summary['shared']:.2f}x faster in "
      f"seconds, {summary_cpu['reference'] / summary_cpu['shared']:.2f}x in CPU seconds (the "
      f"measure that holds on a shared machine); per-row outputs (top-1 token, matches) "
      f"identical: {same}"
    )
    if not same:
      return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
