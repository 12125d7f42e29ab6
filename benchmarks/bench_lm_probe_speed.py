"""Seconds to run the four board-state probing tasks (Toshniwal et al. 2022) on a GPT-2 language
model on this machine, batched, through `chessjax.lm.evaluate.probe`.

    python -m benchmarks.bench_lm_probe_speed --sets DIR [--size small] [--notation rap] \\
        [--batch-size 64] [--reps 2] [--rows N]

SETS is a probing set of `data_prep.probing_sets` (end.jsonl, start.jsonl; the paper's has 1000
rows; `--rows N` takes its first N). A RAP model takes all four tasks (End-Actual, End-Other,
Start-Actual, Start-Other): 4 x rows prompts. The model is GPT-2 at `--size` (`small`: the
paper's 85,508,352 parameters) with freshly initialised weights: the time does not depend on
their values. One pass compiles the prompt shape (every batch is [batch, longest prompt]); the
table gives the first pass and the median of `--reps` passes after it (0: none), prompts per
second and prompt tokens per second.
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
  args = ap.parse_args(argv)
  sys.path.insert(0, str(REPO))
  import jax

  from chessjax import train, workdir
  from chessjax.lm import evaluate, probing
  from chessjax.models import count_params
  from configs import lm

  config = lm.get_config(f"model=gpt2,size={args.size},notation={args.notation}")
  _, state, run = train.build(config, total_steps=1)
  restored = workdir.Restored(config=config, run=run, state=state, step=0)
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
  times = []
  for _ in range(args.reps + 1):
    t0 = time.perf_counter()
    result, _ = evaluate.probe(restored, sets, batch_size=args.batch_size)
    times.append(time.perf_counter() - t0)
  n, tokens = len(prompts), sum(len(p) for p in prompts)
  print(
    f"\nGPT-2 {args.size} ({count_params(state['params']):,} parameters), {args.notation.upper()}:"
    f" {len(tasks)} tasks x {len(end_rows)} rows = {n} prompts ({tokens:,} tokens, longest "
    f"{longest}), batch {args.batch_size}, {jax.device_count()} {jax.default_backend()} "
    f"device(s)\n"
  )
  print("| pass | seconds | prompts/s | prompt tokens/s |")
  print("|---|---:|---:|---:|")
  rows = [("first (compiles)", times[0])]
  if args.reps:
    rows.append((f"median of {args.reps} after", statistics.median(times[1:])))
  for label, t in rows:
    print(f"| {label} | {t:.1f} | {n / t:.1f} | {tokens / t:,.0f} |")
  assert sum(r["rows"] for r in result["tasks"].values()) == n
  return 0


if __name__ == "__main__":
  sys.exit(main())
