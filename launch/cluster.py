r"""The paper's protocol, or one stage of it, or any experiment's plan, as SLURM job arrays
chained by dependencies.

    python -m launch.cluster submit ROOT --data /shared/data/lichess_2025-03 \
        --test-data real=/shared/data/lichess_2025-04:test random=/shared/data/random:test \
        --population 8 --gpus-per-task 1 --time 24:00:00 --throttle 64 --partition gpu
    python -m launch.cluster submit ROOT                  # again: only what is not finished
    python -m launch.cluster status ROOT [--json]
    python -m launch.cluster submit-manifest ROOT FILE.jsonl [SLURM flags]   # any commands

`submit` writes ROOT/slurm/ (launch/slurm_jobs.py): the protocol, then a chain of jobs: stage 1
as one array (a population or a run per task), a job that checks every stage-1 run finished,
collects them and submits stage 2's round as an array, ... the evaluation, the report
(`chessjax.world_model.report`: ROOT/report/tables.json, tables.md, figures). `--until stage1`
submits stage 1 alone. Submitting again (same ROOT, no protocol flags needed) submits only what is
not finished, from stage 1 on. `status` shows per stage the runs finished / running / pending /
preempted / aborted / failed of the total, the steps done, an estimate of the time left and the
job ids. launch/README.md ("The protocol on a SLURM cluster") walks through it.

An experiment's plan (`launch.transfer --scheduler slurm`, ...; `launch.slurm_jobs.run_plan`)
lives in its WORK the same way: `status WORK` counts every task of it, and `submit WORK` (or the
same command again) submits what did not end.

Internal commands, run by the jobs: `step ROOT STEP --after MANIFEST...` (a step of the chain),
`exec MANIFEST INDEX` (a manifest's command, in place of this process), `ended MANIFEST INDEX`
(prints "ended", status 0, if that task has nothing left to do, else "not ended", status 1). Both
read the manifest alone (no JAX is imported); an unreadable manifest or line is one
`launch.cluster: error: ...` line and status 1, as every error here.
"""

import argparse
import json
import shlex
import sys
from pathlib import Path

from launch import manifest, slurm_jobs
from launch.protocol import Protocol, StepError
from launch.scheduler import add_slurm_flags


def parse_args(argv):
  ap = argparse.ArgumentParser(prog="python -m launch.cluster", description=__doc__.split("\n")[0])
  sub = ap.add_subparsers(dest="command", required=True)
  s = sub.add_parser("submit", help="submit the protocol (or resubmit what is not finished)")
  s.add_argument("root")
  s.add_argument("--data", help="prepared training data, on a filesystem the nodes share")
  s.add_argument("--test-data", nargs="+", metavar="NAME=PATH[:SPLIT]")
  s.add_argument("--families", help="launch.sweep --families (default: the paper's four)")
  s.add_argument("--sizes", help="launch.sweep --sizes (default: the paper's four)")
  s.add_argument("--population", type=int, default=0, metavar="K", help="runs per task (0: 1)")
  s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
  s.add_argument("--stage1-args", default="", help="more launch.sweep flags for stage 1")
  s.add_argument("--stage2-args", default="", help="more launch.sweep flags for stage 2")
  s.add_argument("--eval-args", default="", help="more chessjax.world_model.evaluate flags")
  s.add_argument("--rounds", type=int, default=3, help="stage-2 rounds at most")
  s.add_argument("--until", choices=("stage1", "stage2", "evaluate", "report"))
  s.add_argument("--python", help="interpreter of the jobs (default: this one)")
  add_slurm_flags(s)
  m = sub.add_parser("submit-manifest", help="submit a manifest's unfinished tasks as an array")
  m.add_argument("root")
  m.add_argument("manifest")
  m.add_argument("--name", help="the array's name (default: the manifest's file name)")
  m.add_argument("--python")
  add_slurm_flags(m)
  st = sub.add_parser("status", help="per stage: runs finished, running, ... of the total")
  st.add_argument("root")
  st.add_argument("--json", action="store_true")
  step = sub.add_parser("step", help="(run by the chain's jobs) one step of the chain")
  step.add_argument("root")
  step.add_argument("step")
  step.add_argument("--after", nargs="*", default=[])
  for name in ("exec", "ended"):
    t = sub.add_parser(name, help="(run by the array tasks)")
    t.add_argument("manifest")
    t.add_argument("index", type=int)
  return ap, ap.parse_args(argv)


def _protocol(args, ap):
  from chessjax.world_model import grid

  root = Path(args.root).resolve()
  if not args.data or not args.test_data:
    ap.error(f"submit: {root} holds no submitted protocol yet; needs --data and --test-data")
  python = args.python or sys.executable
  families = args.families or ",".join(grid.MAIN)
  sizes = args.sizes or ",".join(grid.SIZES)
  common = ["--families", families, "--sizes", sizes, "--data", args.data]
  common += ["--workdir-root", str(root / "runs"), "--python", python]
  common += ["--population", str(args.population)]
  for item in args.set:
    common += ["--set", item]
  return Protocol(
    root=str(root),
    python=python,
    common=common,
    stage1=shlex.split(args.stage1_args),
    stage2=shlex.split(args.stage2_args),
    families=families,
    sizes=sizes,
    test_data=list(args.test_data),
    eval_args=args.eval_args,
    rounds=args.rounds,
  )


def _task(args) -> int:
  """`exec` (replaces this process with the task's command) or `ended` (prints "ended" or "not
  ended"; status 0 or 1). Both read the manifest alone: no JAX, no SLURM."""
  t = manifest.line(args.manifest, args.index)
  if args.command == "exec":
    manifest.exec_task(t)  # Never returns: the command replaces this process, or OSError.
  ended = t.ended()
  print("ended" if ended else "not ended")
  return 0 if ended else 1


def _submit(args, ap) -> int:
  root = slurm_jobs.Root(args.root)
  if args.command == "submit-manifest":
    tasks = manifest.read(args.manifest)
    todo = manifest.renumber([t for t in tasks if not t.ended()])
    print(f"{len(tasks) - len(todo)} of {len(tasks)} task(s) already ended")
    if todo:
      opts = slurm_jobs.options(args, None)
      name = args.name or Path(args.manifest).stem
      slurm_jobs.submit_array(root.make(), name, todo, opts, kind="train")
    return 0
  saved = root.read_json("options.json")
  if root.plan() is not None:
    slurm_jobs.resubmit_plan(root, slurm_jobs.options(args, saved, until=False))
    print(f"plan submitted again; python -m launch.cluster status {root.root}")
    return 0
  spec = root.read_json("protocol.json")
  p = Protocol.from_spec(spec) if spec else _protocol(args, ap)
  job = slurm_jobs.submit_protocol(p, slurm_jobs.options(args, saved))
  print(f"chain submitted (first step: job {job}); python -m launch.cluster status {p.root}")
  return 0


def main(argv=None) -> int:
  ap, args = parse_args(argv)
  try:
    if args.command in ("exec", "ended"):
      return _task(args)
    if args.command == "status":
      s = slurm_jobs.status(args.root)
      print(json.dumps(s, indent=1) if args.json else slurm_jobs.format_status(s))
      return 0
    if args.command == "step":
      slurm_jobs.run_step(args.root, args.step, args.after)
      return 0
    return _submit(args, ap)
  except (slurm_jobs.ClusterError, StepError, manifest.ManifestError, OSError) as e:
    print(f"launch.cluster: error: {e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
  sys.exit(main())
