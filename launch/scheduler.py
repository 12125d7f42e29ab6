"""Where an experiment's plan of tasks runs: here (`launch.local`) or on SLURM
(`launch.slurm_jobs`), chosen by the same flags in every experiment command (`launch.cwm_mini`,
`launch.transfer`, `launch.lm_sweep`, `launch.reproduce_mini`).

    --scheduler local   (default) the tasks here: `--cores 0,1` one at a time on each core, pinned
                        (one XLA thread), or `--jobs N` N at a time, unpinned;
    --scheduler slurm   each stage one job array, each step between stages a job
                        (`launch.cluster status WORK` reads it); `--wait` returns when the chain
                        has ended, 0 only if every stage finished;
    --python PY         the interpreter of every task (default: this one);
    --until STAGE       the plan's stages up to STAGE only (e.g. train: no evaluation yet);
    SLURM's flags       (`add_slurm_flags`, shared with `launch.cluster`) each array task's and
                        step's resources and limits: partition, account, time, CPUs, GPUs, ...
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
  add_slurm_flags(ap)


def add_slurm_flags(ap: argparse.ArgumentParser) -> None:
  """The resources and limits of SLURM's jobs (`launch.slurm_jobs.Options`: a flag given
  overrides what an earlier submission of the same root saved; one not given keeps it)."""
  g = ap.add_argument_group("SLURM jobs (--scheduler slurm, launch.cluster)")
  g.add_argument("--partition")
  g.add_argument("--account")
  g.add_argument("--qos")
  g.add_argument("--time", help="time limit of each array task (sbatch --time), e.g. 24:00:00")
  g.add_argument("--step-time", help="time limit of each step job between stages")
  g.add_argument("--gpus-per-task", type=int, help="GPUs of each process of a run (0: CPU)")
  g.add_argument("--tasks-per-run", type=int, help="processes of one run (one per GPU)")
  g.add_argument("--cpus-per-task", type=int, help="CPUs of each process, bound by SLURM (1)")
  g.add_argument("--throttle", type=int, help="array tasks running at once (%%N); 0: no limit")
  g.add_argument("--retries", type=int, help="reruns of a crashed task (default 2)")
  g.add_argument("--signal-seconds", type=int, help="SIGTERM this long before the limit (120)")
  g.add_argument("--max-array", type=int, help="tasks per array (default 1000)")
  g.add_argument(
    "--sbatch-arg", action="append", dest="sbatch_args", metavar="ARG",
    help="passed to every sbatch as is (repeatable), e.g. --sbatch-arg=--constraint=a100",
  )  # fmt: skip


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
