"""The main job on the bundled sample, on a CPU, in minutes: `make demo`.

    python -m chessjax.demo --workdir runs/demo [--random-games 200]

Stages: prepare the bundled lichess sample into train/validation/test shards, generate a small
random-uniform test set, and report their sizes and move-token coverage in `WORKDIR/report.md`.
Each stage reuses its output when a complete dataset is already there, so a rerun is quick.
"""

import argparse
import sys
import time
from pathlib import Path

from chessjax.data import read_manifest
from data_prep import coverage, process_pgn, random_uniform

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"


def prepare(workdir: Path, random_games: int, workers: int) -> tuple[Path, Path]:
  """Prepares (or reuses) the real and random-uniform datasets; returns their directories."""
  real, rand = workdir / "data" / "real", workdir / "data" / "random"
  if not (real / "manifest.json").exists():
    process_pgn.run(
      process_pgn.parse_args(
        ["--pgn", str(SAMPLE), "--out", str(real), "--test-fraction", "0.1"]
        + ["--workers", str(workers)]
      )
    )
  if not (rand / "manifest.json").exists():
    argv = ["--games", str(random_games), "--seed", "0", "--out", str(rand)]
    argv += ["--workers", str(workers), "--quiet"]
    if random_uniform.main(argv) != 0:
      raise RuntimeError("random-uniform generation failed")
  return real, rand


def data_report(real: Path, rand: Path) -> str:
  lines = ["## Data", ""]
  manifest = read_manifest(real)
  lines.append(process_pgn.summary_table(manifest))
  rmanifest = read_manifest(rand)
  lines += ["", f"random-uniform: {rmanifest['splits']['test']['games']:,} games, seed 0", ""]
  lines.append(coverage.format_report(coverage.coverage_report([real, rand])))
  return "\n".join(lines)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="python -m chessjax.demo", description=__doc__.split("\n")[0])
  ap.add_argument("--workdir", default="runs/demo")
  ap.add_argument("--random-games", type=int, default=200)
  ap.add_argument("--workers", type=int, default=2)
  args = ap.parse_args(argv)
  workdir = Path(args.workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  start = time.perf_counter()
  print(f"[1/1] preparing data under {workdir / 'data'} ...", flush=True)
  real, rand = prepare(workdir, args.random_games, args.workers)
  report = "# chessjax demo\n\n" + data_report(real, rand) + "\n"
  (workdir / "report.md").write_text(report)
  print(report)
  print(f"done in {time.perf_counter() - start:.1f}s; report: {workdir / 'report.md'}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
