"""Where an experiment's plan of tasks runs: here (`launch.local`) or on SLURM
(`launch.slurm_jobs`), chosen by the same flags in every experiment command (`launch.cwm_mini`,
`launch.transfer`, `launch.lm_sweep`, `launch.reproduce_mini`).

    --scheduler local   (default) the tasks here: `--cores 0,1` one at a time on each core, pinned
                        (one XLA thread), or `--jobs N` N at a time, unpinned;
    --scheduler slurm   each stage one job array, each step between stages a job
                        (`launch.cluster status WORK` reads it); `--wait` returns when the chain
                        has ended, 0 only if every stage finished;
    --python PY         the interpreter of every task (default: this one);
    --until STAGE       the plan's stages up to STAGE only (e.g. train: no evaluation yet).
"""

import argparse
import sys
from pathlib import Path

from launch import local
from launch.manifest import Task


def add_flags(ap: argparse.ArgumentParser, *, cores: str = "") -> None:
  g = ap.add_argument_group("where the tasks run")
  g.add_argument("--scheduler", choices=("local", "slurm"), default="local")
  g.add_argument("--wait", action="store_true", help="slurm: return when the chain has ended")
  g.add_argument("--python", default=sys.executable, help="interpreter of the tasks")
  g.add_argument("--cores", default=cores, help="local: one task at a time on each of these cores")
  g.add_argument("--jobs", type=int, default=0, help="local: N tasks at a time, unpinned")
  g.add_argument("--until", default="", metavar="STAGE", help="the stages up to STAGE only")


def until(tasks: list[Task], stage: str, stages: list[str]) -> list[Task]:
  """The tasks of the stages up to `stage` (all for "") of the stages in order `stages`."""
  if not stage:
    return list(tasks)
  if stage not in stages:
    raise SystemExit(f"--until {stage}: the plan's stages are {', '.join(stages)}")
  keep = set(stages[: stages.index(stage) + 1])
  return [t for t in tasks if t.stage in keep]


def lanes(args) -> local.Lanes:
  if args.jobs or not args.cores:
    return local.pool(args.jobs or 1)
  return local.cores(args.cores)


def execute(tasks: list[Task], args, work: Path, *, prog: str, stages=None) -> int:
  """Runs `tasks` where `args` says; returns the command's exit status (`local.report`).
  `stages`: the plan's stages in order (default: as they first appear in `tasks`)."""
  stages = list(stages or dict.fromkeys(t.stage for t in tasks))
  tasks = until(tasks, args.until, stages)
  if args.scheduler == "slurm":
    from launch import slurm_jobs

    return slurm_jobs.run_plan(tasks, args, work, prog=prog, stages=stages)
  result = local.run(tasks, lanes(args), log_dir=Path(work) / "logs", stages=stages)
  return local.report(result, prog)
