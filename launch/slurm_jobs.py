"""Plans and the protocol on SLURM: each stage's commands one job array over a manifest, each step
a job that starts when the arrays before it have ended (`launch.cluster` is its command line).

Everything lives in ROOT/slurm/ (ROOT is the experiment's folder: its WORK, or the protocol's root
with runs under ROOT/runs):
  plan.jsonl, plan.json         a plan's every task and its stages in order (`run_plan`), or
  protocol.json                 the protocol's steps (`launch.protocol.Protocol`);
  options.json                  the jobs' resources and limits (`Options`);
  manifests/NAME-NNN.jsonl      one per array (`launch.manifest`: index -> one command);
  logs/NAME-NNN_I.log           the log of task I (appended to across requeues and retries; a
                                task that names its own `log` writes its output there instead);
  logs/step-STEP.log            the log of each step job;
  tasks/NAME-NNN_I              start and exit lines of task I, written by `slurm_array.sh`;
  jobs.jsonl                    every job submitted: kind, name, id, manifest, dependencies;
  chain.json                    where the chain is: running, stopped (and why) or done.

A plan (`run_plan`: the tasks of `launch.transfer`, `launch.cwm_mini`, ... in stages): each stage's
tasks that have not ended are one array, and the step job named after the next stage (`end` after
the last) checks them, then submits the next stage's array and step; a stage with nothing left to
run goes straight on in the same job. The protocol: [data ->] stage 1 -> collect stage 1, stage 2
round 1 -> collect, round 2 ... (at most `rounds`, while the replacement rule emits runs) ->
select, evaluate -> report. A step job runs `python -m launch.cluster step ROOT STEP --after
MANIFEST...` with `--dependency=afterany:` the arrays of those manifests: it first checks that
every task of them ended (`Task.ended`: its runs finished, or aborted by the non-finite guard, which
is reported, and its outputs present; a task with neither, such as a report, exited 0); a task that
did not is named with its log and the chain stops there (chain.json says so), never skipping it.
Otherwise it runs its step, submits the next array and the next step, and ends. Submitting again
submits only what did not end (`Task.ended`; the protocol's `launch.sweep --skip-finished`).
Nothing here imports JAX: the step jobs start in a fraction of a second.
"""

import dataclasses
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from chessjax import rundir
from launch import manifest
from launch.manifest import Task
from launch.protocol import REPO, REPORT, Protocol, StepError

ARRAY_SCRIPT = REPO / "launch" / "slurm_array.sh"
STAGES = ("data", "stage1", "stage2", "evaluate", "report")
UNTIL = ("stage1", "stage2", "evaluate", "report")
ACTIVE = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"}
STATES = ("finished", "running", "pending", "preempted", "aborted", "failed")
END = "end"  # A plan's last step: after the last stage's arrays.


class ClusterError(RuntimeError):
  """SLURM refused or is unreachable, or the root is busy."""


@dataclasses.dataclass
class Options:
  """How the jobs are submitted: resources per run, limits, retries."""

  partition: str | None = None
  account: str | None = None
  qos: str | None = None
  time: str | None = None  # Each array task's limit (sbatch --time), e.g. 24:00:00.
  step_time: str | None = None  # Each step job's limit (collect, select, report).
  gpus_per_task: int = 0
  tasks_per_run: int = 1  # Processes of one run (one per GPU; jax.distributed finds them).
  cpus_per_task: int = 1
  throttle: int = 0  # Array tasks running at once (%N); 0: as many as SLURM gives.
  retries: int = 2  # Reruns of a task that crashed (not preempted), in its allocation.
  signal_seconds: int = 120  # SIGTERM this long before the time limit: save, exit 75, requeue.
  max_array: int = 1000  # Tasks per array (SLURM's MaxArraySize is 1001 by default).
  until: str = "report"  # The last stage of the chain.
  sbatch_args: list[str] = dataclasses.field(default_factory=list)
  python: str = sys.executable


# The fields the SLURM flags set (`launch.scheduler.add_slurm_flags`); each command sets the others.
OWN_KEYS = ("until", "python")
OPTION_KEYS = tuple(f.name for f in dataclasses.fields(Options) if f.name not in OWN_KEYS)


def options(args, base: dict | None = None, *, until: bool = True) -> Options:
  """`base` (what an earlier submission saved) with the SLURM flags `args` gives, its `--python`
  and (with `until`) its `--until`."""
  values = dict(base or {})
  values.update({k: getattr(args, k) for k in OPTION_KEYS if getattr(args, k, None) is not None})
  if until and getattr(args, "until", None):
    values["until"] = args.until
  if getattr(args, "python", None):
    values["python"] = args.python
  return Options(**values)


class Root:
  """ROOT/slurm/: the chain's manifests, logs, task states and jobs."""

  def __init__(self, root):
    self.root = Path(root).resolve()
    self.dir = self.root / "slurm"
    self.manifests = self.dir / "manifests"
    self.logs = self.dir / "logs"
    self.tasks = self.dir / "tasks"

  def make(self) -> "Root":
    for d in (self.manifests, self.logs, self.tasks):
      d.mkdir(parents=True, exist_ok=True)
    return self

  def read_json(self, name: str):
    path = self.dir / name
    return json.loads(path.read_text()) if path.exists() else None

  def write_json(self, name: str, value) -> None:
    path = self.dir / name
    tmp = path.with_name(f".{name}.{os.getpid()}")
    tmp.write_text(json.dumps(value, indent=1) + "\n")
    os.replace(tmp, path)

  def next_stem(self, name: str) -> str:
    taken = [p for p in self.manifests.glob("*.jsonl")]
    return f"{name}-{len(taken) + 1:03d}"

  def manifest_files(self) -> list[Path]:
    """Every manifest, in the order they were written."""
    return sorted(self.manifests.glob("*.jsonl"), key=lambda p: p.stem.rsplit("-", 1)[-1])

  def record(self, **job) -> None:
    with open(self.dir / "jobs.jsonl", "a") as f:
      f.write(json.dumps(dict(job, time=time.time())) + "\n")

  def jobs(self) -> list[dict]:
    path = self.dir / "jobs.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x] if path.exists() else []

  def set_chain(self, state: str, step: str, message: str = "", **extra) -> None:
    self.write_json(
      "chain.json", {"state": state, "step": step, "message": message, "time": time.time(), **extra}
    )

  def chain(self) -> dict:
    return self.read_json("chain.json") or {"state": "none", "step": "", "message": ""}

  def log(self, stem: str, index: int) -> Path:
    return self.logs / f"{stem}_{index}.log"

  def history(self, stem: str, index: int) -> list[list[str]]:
    """Task INDEX of manifest STEM's start and exit lines (`slurm_array.sh --task-dir`)."""
    path = self.tasks / f"{stem}_{index}"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

  def last_exit(self, stem: str, index: int) -> str | None:
    """The exit status of the task's last attempt, None when it never exited."""
    exits = [h for h in self.history(stem, index) if h and h[0] == "exit"]
    return exits[-1][-1] if exits and len(exits[-1]) >= 4 else None

  @property
  def plan_file(self) -> Path:
    return self.dir / "plan.jsonl"

  def plan(self) -> tuple[list[Task], list[str], str] | None:
    """A submitted plan's (tasks, stages in order, command name); None for another root."""
    meta = self.read_json("plan.json")
    if meta is None:
      return None
    return manifest.read(self.plan_file), list(meta["stages"]), meta.get("prog", "")


# --- SLURM's commands --------------------------------------------------------------------------


def _env() -> dict:
  """This environment without the SLURM variables of the job it may run in (a step submitting
  the next array): sbatch would pass them on, and srun in the new job would read them."""
  drop = ("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")
  return {k: v for k, v in os.environ.items() if not k.startswith(drop) or k == "SLURM_CONF"}


def _run(argv: list[str]) -> str:
  try:
    r = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=120)
  except FileNotFoundError:
    raise ClusterError(f"{argv[0]} not found: is this a SLURM login node?") from None
  if r.returncode != 0:
    raise ClusterError(f"{' '.join(argv[:2])} failed ({r.returncode}): {r.stderr.strip()}")
  return r.stdout


def sbatch(args: list[str]) -> str:
  """Submits a job; returns its id."""
  return _run(["sbatch", "--parsable", *args]).strip().split(";")[0]


def queue() -> dict[str, tuple[str, str]]:
  """Every job in SLURM's queue: id (array tasks as ARRAY_TASK) -> (state, reason)."""
  out = {}
  for row in _run(["squeue", "-h", "-r", "-o", "%i|%T|%r"]).splitlines():
    job, state, reason = (row.split("|") + ["", ""])[:3]
    m = re.fullmatch(r"(\d+)_\[([0-9,\-]+)(%\d+)?\]", job)
    if not m:
      out[job] = (state, reason)
      continue
    for part in m.group(2).split(","):
      lo, _, hi = part.partition("-")
      for i in range(int(lo), int(hi or lo) + 1):
        out[f"{m.group(1)}_{i}"] = (state, reason)
  return out


def _common(opts: Options) -> list[str]:
  out = [f"--chdir={REPO}"]
  for flag, value in (("partition", opts.partition), ("account", opts.account), ("qos", opts.qos)):
    if value:
      out.append(f"--{flag}={value}")
  return out + list(opts.sbatch_args)


def _resources(opts: Options, kind: str) -> list[str]:
  if kind == "train":
    out = [f"--ntasks={opts.tasks_per_run}", f"--cpus-per-task={opts.cpus_per_task}"]
    return out + ([f"--gpus-per-task={opts.gpus_per_task}"] if opts.gpus_per_task else [])
  out = ["--ntasks=1", f"--cpus-per-task={opts.cpus_per_task}"]
  return out + (["--gpus-per-task=1"] if kind == "evaluate" and opts.gpus_per_task else [])


def submit_array(
  root: Root, name: str, entries: list[Task], opts: Options, kind: str = "train", after=()
) -> list[tuple[str, str]]:
  """`entries` as job arrays of at most `max_array` tasks (one manifest each); returns
  [(manifest stem, array job id)]."""
  out = []
  for start in range(0, len(entries), max(opts.max_array, 1)):
    chunk = manifest.renumber(entries[start : start + opts.max_array])
    stem = root.next_stem(name)
    path = manifest.write(root.manifests / f"{stem}.jsonl", chunk)
    spec = f"0-{len(chunk) - 1}" + (f"%{opts.throttle}" if opts.throttle else "")
    args = [*_common(opts), f"--array={spec}", f"--job-name=cjx-{stem}"]
    args += [f"--output={root.logs}/{stem}_%a.log", "--open-mode=append", "--requeue"]
    args += [f"--signal=TERM@{opts.signal_seconds}", *_resources(opts, kind)]
    if opts.time:
      args.append(f"--time={opts.time}")
    if after:
      args.append("--dependency=afterany:" + ":".join(after))
    args += [str(ARRAY_SCRIPT), "--manifest", str(path), "--python", opts.python]
    args += ["--retries", str(opts.retries), "--task-dir", str(root.tasks)]
    job = sbatch(args)
    stage = chunk[0].stage
    root.record(kind="array", name=name, stage=stage, job=job, manifest=stem, tasks=len(chunk))
    print(f"{stem}: {len(chunk)} task(s) as array job {job} ({path})", flush=True)
    out.append((stem, job))
  return out


def submit_step(root: Root, step: str, opts: Options, after: list[tuple[str, str]] = ()) -> str:
  """The step job `launch.cluster step ROOT STEP`, after the arrays `after` ended."""
  cmd = [opts.python, "-m", "launch.cluster", "step", str(root.root), step]
  if after:
    cmd += ["--after", *(stem for stem, _ in after)]
  args = [*_common(opts), f"--job-name=cjx-step-{step}", "--ntasks=1", "--cpus-per-task=1"]
  args += [f"--output={root.logs}/step-{step}.log", "--open-mode=append"]
  if opts.step_time:
    args.append(f"--time={opts.step_time}")
  if after:
    args.append("--dependency=afterany:" + ":".join(job for _, job in after))
  job = sbatch([*args, "--wrap", shlex.join(cmd)])
  root.record(kind="step", name=step, job=job, after=[stem for stem, _ in after])
  print(f"step {step}: job {job}" + (f" after {', '.join(j for _, j in after)}" if after else ""))
  return job


# --- The chain ---------------------------------------------------------------------------------


def active_jobs(root: Root) -> list[str]:
  """The root's jobs that SLURM still holds (pending, running, requeued)."""
  ids = {j["job"] for j in root.jobs()}
  return sorted({k for k in queue() if k.split("_")[0] in ids})


def _refuse_busy(root: Root) -> None:
  busy = active_jobs(root)
  if busy:
    raise ClusterError(
      f"{root.root}: jobs of an earlier submission are still queued ({', '.join(busy[:8])}); "
      "wait for them or scancel them, then submit again"
    )


def submit_protocol(p: Protocol, opts: Options) -> str:
  """Writes the protocol and options into ROOT/slurm/ and submits the chain's first step;
  returns its job id. Refuses while jobs of an earlier submission are still queued."""
  if opts.until not in UNTIL:
    raise ClusterError(f"--until {opts.until!r}: expected one of {list(UNTIL)}")
  root = Root(p.root)
  if root.read_json("plan.json"):
    raise ClusterError(f"{root.root} holds a plan ({root.plan_file}), not the protocol")
  root.make()
  _refuse_busy(root)
  root.write_json("protocol.json", p.spec())
  root.write_json("options.json", dataclasses.asdict(opts))
  first = "data" if p.data else "stage1"
  root.set_chain("submitted", first)
  return submit_step(root, first, opts)


def task_ended(root: Root, stem: str, t: Task) -> bool:
  """Whether task `t` of manifest `stem` has ended: `Task.ended`, or, for a task with neither runs
  nor outputs (a report), its last attempt exited 0."""
  if t.runs or t.outputs:
    return t.ended()
  return root.last_exit(stem, t.index) == "0"


def missing(root: Root, stems: list[str]) -> tuple[list[str], list[str]]:
  """(tasks of the manifests `stems` that did not end, one line each; aborted runs)."""
  bad, aborted = [], []
  for stem in stems:
    for t in manifest.read(root.manifests / f"{stem}.jsonl"):
      aborted += [r.workdir for r in t.runs if r.aborted()]
      if not task_ended(root, stem, t):
        code = root.last_exit(stem, t.index)
        what = ", ".join(t.missing()) or ("never ran" if code is None else f"exit status {code}")
        bad.append(f"{stem} task {t.index} ({t.name}: {what}); log {root.log(stem, t.index)}")
  return bad, aborted


def run_step(root_dir, step: str, after: list[str] = ()) -> None:
  """One step of the chain (see the module docstring); raises StepError when it stops."""
  root = Root(root_dir)
  plan = root.plan()
  opts = Options(**root.read_json("options.json"))
  root.set_chain("running", step)
  bad, aborted = missing(root, list(after))
  for workdir in aborted:
    print(f"step {step}: run {workdir} was aborted by the non-finite guard (reported, kept out)")
  if bad:
    message = f"{len(bad)} task(s) before step {step} did not finish: " + "; ".join(bad)
    root.set_chain("stopped", step, message, missing=bad)
    again = "submit again (the same command" if plan else "python -m launch.cluster submit"
    again += f", or python -m launch.cluster submit {root.root})" if plan else f" {root.root}"
    raise StepError(f"{message}. Fix them, then: {again}")
  try:
    if plan:
      _plan_step(root, opts, *plan[:2], step)
    else:
      _step(root, Protocol.from_spec(root.read_json("protocol.json")), opts, step)
  except Exception as e:
    root.set_chain("failed", step, f"{type(e).__name__}: {e}")
    raise


def _go(root: Root, p: Protocol, opts: Options, name, entries, next_step, kind) -> None:
  if not entries:
    print(f"{name}: nothing to run", flush=True)
    return _step(root, p, opts, next_step)
  arrays = submit_array(root, name, entries, opts, kind)
  submit_step(root, next_step, opts, arrays)


def _done(root: Root, step: str, what: str) -> None:
  root.set_chain("done", step, what)
  print(f"chain done: {what}", flush=True)


def _step(root: Root, p: Protocol, opts: Options, step: str) -> None:
  root.set_chain("running", step)
  if step == "data":
    return _go(root, p, opts, "data", p.data_entries(), "stage1", "data")
  if step == "stage1":
    return _go(root, p, opts, "stage1", p.stage1_entries(), "stage2.1", "train")
  if step.startswith("stage2."):
    round_ = int(step.split(".")[1])
    p.collect(1 if round_ == 1 else 2)
    if opts.until == "stage1":
      return _done(root, step, "stage 1 finished and collected")
    if round_ <= p.rounds:
      entries = p.stage2_entries(round_)
      if entries:
        return _go(root, p, opts, f"stage2_round{round_}", entries, f"stage2.{round_ + 1}", "train")
      p.collect(2)
    return _step(root, p, opts, "evaluate")
  if step == "evaluate":
    p.select()
    if opts.until == "stage2":
      return _done(root, step, "stage 2 finished, selection written")
    return _go(root, p, opts, "evaluate", p.evaluate_entries(), "report", "evaluate")
  if step == "report":
    if opts.until == "evaluate":
      return _done(root, step, "evaluation finished")
    p.report()
    return _done(root, step, f"report in {p.work / REPORT}")
  raise StepError(f"unknown step {step!r}")


# --- Plans -------------------------------------------------------------------------------------


def check_plan(tasks: list[Task], stages: list[str]) -> list[str]:
  """The plan's stages that hold tasks, in order; raises ClusterError for a plan SLURM cannot run
  as stages: names not unique, a stage not in `stages`, or a task that needs one of its own stage
  or a later one (a stage's array waits for the stages before it, not for its own tasks)."""
  names = [t.name for t in tasks]
  dup = sorted({n for n in names if names.count(n) > 1})
  if dup:
    raise ClusterError(f"task names must be unique in a plan: {dup}")
  unknown = sorted({t.stage for t in tasks} - set(stages))
  if unknown or END in stages:
    raise ClusterError(f"tasks of stages not in the plan's order {stages}: {unknown or [END]}")
  order = {s: i for i, s in enumerate(stages)}
  stage_of = {t.name: t.stage for t in tasks}
  for t in tasks:
    late = [n for n in t.after or () if order.get(stage_of.get(n), -1) >= order[t.stage]]
    absent = [n for n in t.after or () if n not in stage_of]
    if late or absent:
      raise ClusterError(
        f"task {t.name} ({t.stage}) needs {', '.join(late + absent)}: on SLURM a task may need "
        "only tasks of the stages before its own"
      )
  return [s for s in stages if s in stage_of.values()]


def _kind(stage: str, tasks: list[Task]) -> str:
  """The resources of a stage's array: a run's (train), an evaluation's, or one CPU (data)."""
  if any(t.runs for t in tasks):
    return "train"
  return "evaluate" if stage == "evaluate" else "data"


def _plan_step(root: Root, opts: Options, tasks: list[Task], stages: list[str], step: str) -> None:
  """Submits the first stage from `step` on that has tasks left, and the step after it; the chain
  is done when no stage has any."""
  if step == END:
    return _done(root, step, f"every stage finished ({', '.join(stages)})")
  if step not in stages:
    raise StepError(f"unknown step {step!r}: the plan's stages are {stages}")
  for i in range(stages.index(step), len(stages)):
    stage = stages[i]
    root.set_chain("running", stage)
    todo = [t for t in tasks if t.stage == stage and not t.ended()]
    if todo:
      arrays = submit_array(root, stage, todo, opts, _kind(stage, todo))
      submit_step(root, stages[i + 1] if i + 1 < len(stages) else END, opts, arrays)
      return
    print(f"{stage}: nothing to run (every task ended)", flush=True)
  _done(root, END, f"every stage finished ({', '.join(stages)})")


def submit_plan(root: Root, tasks: list[Task], stages: list[str], opts: Options, prog: str):
  """Writes the plan into ROOT/slurm/ and submits its first stage with tasks left (see the module
  docstring). Refuses while jobs of an earlier submission are still queued."""
  stages = check_plan(tasks, list(stages))
  if root.read_json("protocol.json"):
    raise ClusterError(f"{root.root} holds the protocol (launch.cluster submit); not a plan")
  root.make()
  _refuse_busy(root)
  manifest.write(root.plan_file, manifest.renumber(tasks))
  root.write_json("plan.json", {"prog": prog, "stages": stages, "submitted": time.time()})
  root.write_json("options.json", dataclasses.asdict(opts))
  root.set_chain("submitted", stages[0])
  _plan_step(root, opts, manifest.read(root.plan_file), stages, stages[0])


def run_plan(tasks: list[Task], args, work, *, prog: str, stages: list[str]) -> int:
  """A plan on SLURM (`launch.scheduler.execute`): ROOT = `work`; each stage's tasks not ended one
  job array, each step between stages a job (module docstring). The SLURM flags of `args`
  (`launch.scheduler.add_slurm_flags`) override what an earlier submission saved. With
  `args.wait`, returns when the chain has ended. Returns the command's exit status: 0 submitted
  (with --wait: every stage finished), 1 not (each task that did not end named with its log)."""
  root = Root(work)
  try:
    opts = options(args, root.read_json("options.json"), until=False)
    submit_plan(root, list(tasks), stages, opts, prog)
  except (ClusterError, StepError, manifest.ManifestError) as e:
    print(f"{prog}: error: {e}", file=sys.stderr)
    return 1
  if not getattr(args, "wait", False):
    print(f"submitted; follow it with: python -m launch.cluster status {root.root}", flush=True)
    return 0
  print(f"waiting for the chain (python -m launch.cluster status {root.root})", flush=True)
  ok, message = wait(root.root)
  print(message if ok else f"{prog}: {message}", file=sys.stdout if ok else sys.stderr, flush=True)
  return 0 if ok else 1


def resubmit_plan(root: Root, opts: Options) -> None:
  """The plan of `root`, submitted again: only what did not end (`launch.cluster submit`)."""
  tasks, stages, prog = root.plan()
  submit_plan(root, tasks, stages, opts, prog)


def wait(root_dir, poll: float = 5.0, look: float = 0.5) -> tuple[bool, str]:
  """Waits until none of the root's jobs is queued and the chain is not running; returns
  (whether it is done, chain.json's message). Asks SLURM's queue every `poll` seconds, and every
  `look` seconds once chain.json (a file, read every `look` seconds) says the chain ended: its
  last step job is leaving the queue, and the command returns about when it has left."""
  root = Root(root_dir)
  idle, asked = 0, -math.inf
  while True:
    chain = root.chain()
    ended = chain["state"] in ("done", "stopped", "failed")
    if ended or time.monotonic() - asked >= poll:
      asked = time.monotonic()
      if active_jobs(root):
        idle = 0
      elif ended:
        ok = chain["state"] == "done"
        return ok, f"chain {chain['state']} at step {chain['step']}: {chain['message']}"
      else:
        idle += 1  # A step may be between its last sbatch and its end; look again.
        if idle >= 3:
          return False, (
            f"chain ended without finishing (state {chain['state']} at step {chain['step']}, "
            f"no job queued); see {root.logs}/step-{chain['step']}.log"
          )
    time.sleep(look)


# --- Status --------------------------------------------------------------------------------------

PROGRESS = re.compile(
  r"^(?:\[(?P<name>[^\]]+)\] )?step (?P<step>\d+)/(?P<total>\d+)\s.*?eta (?P<eta>\d+):(\d\d):(\d\d)"
)


def _progress(log: Path) -> dict[str | None, tuple[int, int]]:
  """The last progress line's step and seconds left per run name (None: a lone run's)."""
  out = {}
  if log.exists():
    for line in log.read_text(errors="replace").splitlines():
      m = PROGRESS.match(line)
      if m:
        h, mi, s = int(m.group("eta")), int(m.group(5)), int(m.group(6))
        out[m.group("name")] = (int(m.group("step")), h * 3600 + mi * 60 + s)
  return out


def _checkpoint_step(workdir: Path) -> int:
  steps = [int(p.name) for p in (workdir / "checkpoints").glob("*") if p.name.isdigit()]
  return max(steps, default=0)


def task_state(root: Root, stem: str, t: Task, job, q: dict) -> tuple[str, float | None]:
  """What task `t` of manifest `stem` (array job `job`) is doing, from SLURM's queue `q` and its
  history: running, preempted (exited 75, queued to resume), pending (queued), or failed (no longer
  queued: ended, cancelled, or crashed past its retries; its runs and outputs say whether it
  ended); and the seconds of its last attempt when that one exited 0."""
  state = q.get(f"{job}_{t.index}", ("", ""))[0] if job else ""
  history = root.history(stem, t.index)
  exits = [h for h in history if h[0] == "exit"]
  starts = [h for h in history if h[0] == "start"]
  if state in ACTIVE:
    now = "running"
  elif state:
    now = "preempted" if exits and exits[-1][-1] == "75" else "pending"
  else:
    now = "failed"
  seconds = None
  if starts and exits and exits[-1][-1] == "0":
    seconds = float(exits[-1][1]) - float(starts[-1][1])
  return now, seconds


def _run_unit(r: manifest.Run, now: str, progress: dict, task, log: str) -> dict:
  """One run of a task: its state (finished or aborted once ended, else the task's), steps done
  (summary, newest checkpoint, or the log's progress) and, while running, the time left."""
  workdir = Path(r.workdir)
  summary = rundir.read_summary(workdir)
  done = int(summary.get("steps", 0)) if isinstance(summary, dict) else 0
  done = max(done, _checkpoint_step(workdir))
  step, left = progress.get(workdir.name, progress.get(None, (0, None)))
  total = r.steps if r.steps is not None else (summary or {}).get("total_steps") or 0
  state = ("aborted" if r.aborted() else "finished") if r.ended() else now
  return {
    "state": state, "steps": max(done, step), "total_steps": int(total),
    "eta_s": left if state == "running" else None, "task": task, "log": log,
  }  # fmt: skip


def task_units(root: Root, stem: str | None, t: Task, job, now: str, key: str) -> dict[str, dict]:
  """What status counts of task `t` (of manifest `stem`, None when never submitted): each of its
  runs, by workdir, or the task itself under `key` when it trains none."""
  task = f"{job}_{t.index}" if job else None
  log = str(root.log(stem, t.index)) if stem else ""
  if t.runs:
    out = Path(t.log) if t.log else root.log(stem, t.index)  # Where its progress lines go.
    progress = _progress(out) if stem and now == "running" else {}
    return {r.workdir: _run_unit(r, now, progress, task, log) for r in t.runs}
  ended = task_ended(root, stem, t) if stem else t.ended()
  state = "finished" if ended and now != "running" else now
  return {key: {"state": state, "task": task, "eta_s": None, "log": log}}


def _manifest_units(root: Root, stages: list[str], arrays: dict, q: dict):
  """({stage: {unit: state}}, {stage: [seconds of its tasks that exited 0]}) of every task of
  every manifest of `root` (the protocol's and those of submit-manifest)."""
  units = {s: {} for s in stages}
  seconds = {s: [] for s in stages}
  for path in root.manifest_files():
    job = arrays.get(path.stem)
    for t in manifest.read(path):
      now, took = task_state(root, path.stem, t, job, q)
      seconds[t.stage] += [] if took is None else [took]
      units[t.stage].update(task_units(root, path.stem, t, job, now, f"{path.stem}:{t.name}"))
  return units, seconds


def _plan_units(root: Root, tasks: list[Task], stages: list[str], arrays: dict, q: dict):
  """As `_manifest_units`, for every task of a plan: each one as its latest array ran it, a task
  not submitted since the plan was (its stage not reached yet) pending unless it has ended."""
  since = (root.read_json("plan.json") or {}).get("submitted", 0)
  fresh = {j["manifest"] for j in root.jobs() if j["kind"] == "array" and j["time"] >= since}
  latest = {}
  for path in root.manifest_files():
    latest.update({t.name: (path.stem, t.index) for t in manifest.read(path)})
  units = {s: {} for s in stages}
  seconds = {s: [] for s in stages}
  for t in tasks:
    stem, index = latest.get(t.name, (None, t.index))
    t = dataclasses.replace(t, index=index)
    now, took = task_state(root, stem, t, arrays.get(stem), q) if stem else ("pending", None)
    if stem not in fresh and now == "failed":
      now = "pending"  # Failed in an earlier submission; this one has not reached it yet.
    seconds[t.stage] += [] if took is None else [took]
    units[t.stage].update(task_units(root, stem, t, arrays.get(stem), now, t.name))
  return units, seconds


def stage_summary(units: dict[str, dict], seconds: list[float], jobs: list[dict], stage: str):
  """One stage's row: its units per state of the total, steps done of all steps, the time left
  (the running tasks' longest estimate, plus the waiting ones at the mean time of those that
  finished), its array jobs and, for every failed or aborted unit, its log."""
  counts = {k: 0 for k in STATES}
  for u in units.values():
    counts[u["state"]] += 1
  running = [u["eta_s"] for u in units.values() if u["state"] == "running" and u["eta_s"]]
  waiting = counts["pending"] + counts["preempted"]
  eta = max(running, default=0)
  if waiting and seconds:
    eta += sum(seconds) / len(seconds) * waiting / max(counts["running"], 1)
  return {
    "total": len(units),
    **counts,
    "steps": sum(u.get("steps", 0) for u in units.values()),
    "total_steps": sum(u.get("total_steps", 0) for u in units.values()),
    "eta_s": round(eta) if counts["running"] or waiting else 0,
    "jobs": [j["job"] for j in jobs if j["kind"] == "array" and j.get("stage") == stage],
    "problems": {k: u["log"] for k, u in units.items() if u["state"] in ("failed", "aborted")},
  }


def status(root_dir) -> dict:
  """Per stage: runs finished / running / pending / preempted / aborted / failed of the total,
  steps done, an estimate of the time left (from the logs) and the job ids; and the chain. A
  plan's root counts every task of the plan; another counts its manifests' tasks."""
  root = Root(root_dir)
  if not root.dir.is_dir():
    raise ClusterError(f"{root.root}: no {root.dir.name}/ here; nothing was submitted")
  jobs = root.jobs()
  arrays = {j["manifest"]: j["job"] for j in jobs if j["kind"] == "array"}
  try:
    q, note = queue(), ""
  except ClusterError as e:
    q, note = {}, f"queue unknown: {e}"
  chain = root.chain()
  plan = root.plan()
  if plan:
    stages = plan[1]
    units, seconds = _plan_units(root, plan[0], stages, arrays, q)
  else:
    # The protocol's stages (if one was submitted), then those of other manifests.
    protocol = bool(root.read_json("protocol.json"))
    stages = list(STAGES) if protocol else []
    for path in root.manifest_files():
      stages += [t.stage for t in manifest.read(path) if t.stage not in stages]
    units, seconds = _manifest_units(root, stages, arrays, q)
    if protocol:  # The report is the last step's own work, not a task.
      done = (root.root / REPORT / "tables.json").exists() and chain["state"] == "done"
      units["report"] = {"report": {"state": "finished" if done else "pending", "eta_s": None}}
  out = {"root": str(root.root), "chain": chain, "stages": {}, "note": note}
  out["stages"] = {s: stage_summary(units[s], seconds[s], jobs, s) for s in stages}
  out["steps"] = [
    {"step": j["name"], "job": j["job"], "state": q.get(j["job"], ("ended", ""))[0]}
    for j in jobs
    if j["kind"] == "step"
  ]
  return out


def format_status(s: dict) -> str:
  """The status as a table, then the chain's state and any problem."""
  head = f"{'stage':<9}{'finished':>9}{'running':>8}{'pending':>8}{'preempt':>8}{'aborted':>8}"
  head += f"{'failed':>7}{'total':>6}  {'steps':>15}  {'eta':>8}  jobs"
  lines = [f"{s['root']}", head]
  for name, st in s["stages"].items():
    steps = f"{st['steps']}/{st['total_steps']}" if st["total_steps"] else "-"
    eta = time.strftime("%H:%M:%S", time.gmtime(st["eta_s"])) if st["eta_s"] else "-"
    lines.append(
      f"{name:<9}{st['finished']:>9}{st['running']:>8}{st['pending']:>8}{st['preempted']:>8}"
      f"{st['aborted']:>8}{st['failed']:>7}{st['total']:>6}  {steps:>15}  {eta:>8}  "
      + (",".join(st["jobs"]) or "-")
    )
  c = s["chain"]
  lines.append(
    f"chain: {c['state']} at step {c['step']}" + (f": {c['message']}" if c["message"] else "")
  )
  for st_name, st in s["stages"].items():
    for what, log in st["problems"].items():
      lines.append(f"{st_name}: {what}: see {log}")
  if s["note"]:
    lines.append(s["note"])
  return "\n".join(lines)
