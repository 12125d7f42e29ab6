"""The protocol on SLURM: each stage's commands one job array over a manifest, each step a job
that starts when the arrays before it have ended (`launch.cluster` is its command line).

Everything lives in ROOT/slurm/ (ROOT is the protocol's root, runs under ROOT/runs):
  protocol.json, options.json   what was submitted (`launch.protocol.Protocol`, `Options`);
  manifests/NAME-NNN.jsonl      one per array (`launch.manifest`: index -> one command);
  logs/NAME-NNN_I.log           the log of task I (appended to across requeues and retries);
  logs/step-STEP.log            the log of each step job;
  tasks/NAME-NNN_I              start and exit lines of task I, written by `slurm_array.sh`;
  jobs.jsonl                    every job submitted: kind, name, id, manifest, dependencies;
  chain.json                    where the chain is: running, stopped (and why) or done.

The chain: [data ->] stage 1 -> collect stage 1, stage 2 round 1 -> collect, round 2 ... (at most
`rounds`, while the replacement rule emits runs) -> select, evaluate -> report. A step job runs
`python -m launch.cluster step ROOT STEP --after MANIFEST...` with `--dependency=afterany:` the
arrays of those manifests: it first checks that every task of them ended (`manifest.ended`:
finished, or aborted by the non-finite guard, which is reported); a task that did not is named
with its log and the chain stops there (chain.json says so), never skipping it. Otherwise it runs
its `launch.sweep` step, submits the next array and the next step, and ends. A stage with
nothing left to run goes straight on to the next step in the same job. Submitting again submits
only what is not finished (`launch.sweep --skip-finished`, `manifest.ended`).
"""

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from launch import manifest
from launch.protocol import REPO, REPORT, Protocol, StepError

ARRAY_SCRIPT = REPO / "launch" / "slurm_array.sh"
STAGES = ("data", "stage1", "stage2", "evaluate", "report")
UNTIL = ("stage1", "stage2", "evaluate", "report")
ACTIVE = {"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"}


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
  root: Root, name: str, entries: list[dict], opts: Options, kind: str = "train", after=()
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
    stage = chunk[0]["stage"]
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


def submit_protocol(p: Protocol, opts: Options) -> str:
  """Writes the protocol and options into ROOT/slurm/ and submits the chain's first step;
  returns its job id. Refuses while jobs of an earlier submission are still queued."""
  if opts.until not in UNTIL:
    raise ClusterError(f"--until {opts.until!r}: expected one of {list(UNTIL)}")
  root = Root(p.root).make()
  busy = active_jobs(root)
  if busy:
    raise ClusterError(
      f"{root.root}: jobs of an earlier submission are still queued ({', '.join(busy[:8])}); "
      "wait for them or scancel them, then submit again"
    )
  root.write_json("protocol.json", p.spec())
  root.write_json("options.json", dataclasses.asdict(opts))
  first = "data" if p.data else "stage1"
  root.set_chain("submitted", first)
  return submit_step(root, first, opts)


def missing(root: Root, stems: list[str]) -> tuple[list[str], list[str]]:
  """(tasks of the manifests `stems` that did not end, one line each; aborted runs)."""
  bad, aborted = [], []
  for stem in stems:
    for e in manifest.read(root.manifests / f"{stem}.jsonl"):
      aborted += [r["workdir"] for r in e["runs"] if manifest.run_aborted(r)]
      if not manifest.ended(e):
        runs = [Path(r["workdir"]).name for r in e["runs"] if not manifest.run_ended(r)]
        outs = [Path(o).name for o in e["outputs"] if not Path(o).exists()]
        what = ", ".join(runs + outs)
        bad.append(
          f"{stem} task {e['index']} ({e['name']}: {what}); log {root.log(stem, e['index'])}"
        )
  return bad, aborted


def run_step(root_dir, step: str, after: list[str] = ()) -> None:
  """One step of the chain (see the module docstring); raises StepError when it stops."""
  root = Root(root_dir)
  p = Protocol.from_spec(root.read_json("protocol.json"))
  opts = Options(**root.read_json("options.json"))
  root.set_chain("running", step)
  bad, aborted = missing(root, list(after))
  for workdir in aborted:
    print(f"step {step}: run {workdir} was aborted by the non-finite guard (reported, kept out)")
  if bad:
    message = f"{len(bad)} task(s) before step {step} did not finish: " + "; ".join(bad)
    root.set_chain("stopped", step, message, missing=bad)
    raise StepError(message + f". Fix them, then: python -m launch.cluster submit {root.root}")
  try:
    _step(root, p, opts, step)
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


def wait(root_dir, poll: float = 5.0, say=print) -> tuple[bool, str]:
  """Waits until none of the root's jobs is queued and the chain is not running; returns
  (whether it is done, chain.json's message)."""
  root = Root(root_dir)
  idle = 0
  while True:
    chain = root.chain()
    if active_jobs(root):
      idle = 0
    elif chain["state"] in ("done", "stopped", "failed"):
      ok = chain["state"] == "done"
      return ok, f"chain {chain['state']} at step {chain['step']}: {chain['message']}"
    else:
      idle += 1  # A step may be between its last sbatch and its end; look again.
      if idle >= 3:
        return False, (
          f"chain ended without finishing (state {chain['state']} at step {chain['step']}, no "
          f"job queued); see {root.logs}/step-{chain['step']}.log"
        )
    time.sleep(poll)


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


def _task_history(path: Path) -> list[list[str]]:
  return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _checkpoint_step(workdir: Path) -> int:
  steps = [int(p.name) for p in (workdir / "checkpoints").glob("*") if p.name.isdigit()]
  return max(steps, default=0)


def status(root_dir) -> dict:
  """Per stage: runs finished / running / pending / preempted / aborted / failed of the total,
  steps done, an estimate of the time left (from the logs) and the job ids; and the chain."""
  from chessjax import workdir as workdirs

  root = Root(root_dir)
  if not root.dir.is_dir():
    raise ClusterError(f"{root.root}: no {root.dir.name}/ here; nothing was submitted")
  jobs = root.jobs()
  arrays = {j["manifest"]: j["job"] for j in jobs if j["kind"] == "array"}
  try:
    q, note = queue(), ""
  except ClusterError as e:
    q, note = {}, f"queue unknown: {e}"
  # The protocol's stages (if one was submitted), then those of other manifests (submit-manifest).
  stages = list(STAGES) if root.read_json("protocol.json") else []
  for path in root.manifest_files():
    stages += [e["stage"] for e in manifest.read(path) if e["stage"] not in stages]
  units: dict[str, dict[str, dict]] = {s: {} for s in stages}
  task_seconds: dict[str, list[float]] = {s: [] for s in stages}
  for path in root.manifest_files():
    stem = path.stem
    job = arrays.get(stem)
    for e in manifest.read(path):
      task = f"{job}_{e['index']}" if job else None
      state, _ = q.get(task, ("", "")) if task else ("", "")
      history = _task_history(root.tasks / f"{stem}_{e['index']}")
      exits = [h for h in history if h[0] == "exit"]
      starts = [h for h in history if h[0] == "start"]
      if state in ACTIVE:
        now = "running"
      elif state:
        now = "preempted" if exits and exits[-1][-1] == "75" else "pending"
      else:
        now = "failed"
      if starts and exits and exits[-1][-1] == "0":
        task_seconds[e["stage"]].append(float(exits[-1][1]) - float(starts[-1][1]))
      progress = _progress(root.log(stem, e["index"])) if now == "running" else {}
      stage = e["stage"]
      for r in e["runs"] or [{"outputs": e["outputs"], "name": e["name"]}]:
        if "workdir" in r:
          workdir = Path(r["workdir"])
          summary = workdirs.read_summary(workdir)
          done_steps = int(summary["steps"]) if isinstance(summary, dict) else 0
          done_steps = max(done_steps, _checkpoint_step(workdir))
          step, left = progress.get(workdir.name, progress.get(None, (0, None)))
          if manifest.run_ended(r):
            state_r = "aborted" if manifest.run_aborted(r) else "finished"
            left = 0
          else:
            state_r = now
          unit = {
            "state": state_r, "steps": max(done_steps, step), "total_steps": int(r["steps"]),
            "eta_s": left if state_r == "running" else None, "task": task,
            "log": str(root.log(stem, e["index"])),
          }  # fmt: skip
          units[stage][str(workdir)] = unit
        else:
          ended = all(Path(o).exists() for o in e["outputs"])
          state_o = "finished" if ended and now != "running" else now
          unit = {"state": state_o, "task": task, "eta_s": None}
          unit["log"] = str(root.log(stem, e["index"]))
          units[stage][f"{stem}:{e['name']}"] = unit
  chain = root.chain()
  report_done = (root.root / REPORT / "tables.json").exists() and chain["state"] == "done"
  out = {"root": str(root.root), "chain": chain, "stages": {}, "note": note}
  for stage in stages:
    if stage == "report":
      states = {"report": {"state": "finished" if report_done else "pending", "eta_s": None}}
    else:
      states = units[stage]
    counts = {k: 0 for k in ("finished", "running", "pending", "preempted", "aborted", "failed")}
    for u in states.values():
      counts[u["state"]] += 1
    running = [u["eta_s"] for u in states.values() if u["state"] == "running" and u["eta_s"]]
    waiting = counts["pending"] + counts["preempted"]
    eta = max(running, default=0)
    if waiting and task_seconds[stage]:
      mean = sum(task_seconds[stage]) / len(task_seconds[stage])
      eta += mean * waiting / max(counts["running"], 1)
    out["stages"][stage] = {
      "total": len(states),
      **counts,
      "steps": sum(u.get("steps", 0) for u in states.values()),
      "total_steps": sum(u.get("total_steps", 0) for u in states.values()),
      "eta_s": round(eta) if counts["running"] or waiting else 0,
      "jobs": [j["job"] for j in jobs if j["kind"] == "array" and j.get("stage") == stage],
      "problems": {k: u["log"] for k, u in states.items() if u["state"] in ("failed", "aborted")},
    }
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
