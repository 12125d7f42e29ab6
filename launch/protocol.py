"""The paper's protocol as steps (Table 8: stage 1, collect and select, stage 2 in rounds, the
evaluation, the report), each step a `launch.sweep` invocation whose commands a runner executes.

A `Protocol` is JSON-able (`spec`): the root (stage results, selection and report go there, runs
under ROOT/runs), the interpreter, the `launch.sweep` arguments every stage shares (`common`) and
each stage's own, the test data of the evaluation, and optional data-preparation commands. Two
runners drive the same steps, so they run the same commands in the same order:
* `run_local` (`launch.reproduce_mini`): each stage's commands run by `launch.local`, `jobs` at a
  time, each one's output in ROOT/logs/STAGE/NAME.log (its times in bench.json beside it);
* `launch.slurm_jobs`: each stage's commands as one SLURM job array, each step a job after it.
Every `launch.sweep` invocation runs in this process (the same code as its command line) and is
logged with its output file in ROOT/commands.sh; stage commands are logged as a stage starts.
The module imports no JAX (`launch.sweep` is imported when a step runs it), so the chain's step
jobs and `launch.cluster` start light.
"""

import contextlib
import dataclasses
import io
import json
import shlex
import subprocess
from pathlib import Path

from launch import local, manifest

REPO = Path(__file__).resolve().parents[1]
REPORT = "report"


class StepError(RuntimeError):
  """A step could not run: a command failed or a run it needs did not finish."""


@dataclasses.dataclass
class Protocol:
  root: str
  python: str
  common: list[str]  # launch.sweep arguments of stages 1 and 2 (families, data, --set, ...).
  stage1: list[str]  # The stage-1 grid and --steps.
  stage2: list[str]  # --steps of stage 2.
  families: str
  sizes: str
  test_data: list[str]
  eval_args: str = ""
  rounds: int = 3  # Stage-2 rounds at most (the replacement rule may need several).
  data: list[dict] = dataclasses.field(default_factory=list)  # {name, command, outputs}.
  repo: str = str(REPO)

  @property
  def work(self) -> Path:
    return Path(self.root)

  def spec(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_spec(cls, spec: dict) -> "Protocol":
    return cls(**spec)

  # --- Logging and the in-process launch.sweep ---------------------------------------------------

  def record(self, argv: list[str], stdout=None) -> str:
    """Prints and logs a command line (`argv`, its output redirected to `stdout` if given)."""
    line = shlex.join(argv) + (f" > {shlex.quote(str(stdout))}" if stdout else "")
    print(f"$ {line}", flush=True)
    with open(self.work / "commands.sh", "a") as f:
      f.write(line + "\n")
    return line

  def sweep(self, *args: str, out: Path) -> str:
    """`python -m launch.sweep ARGS > OUT`, run in this process; returns its output."""
    from launch import sweep  # Imports JAX: only when a step runs it.

    line = self.record([self.python, "-m", "launch.sweep", *args], stdout=out)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
      code = sweep.main(list(args))
    if code:
      raise StepError(f"command failed ({code}): {line}")
    Path(out).write_text(text.getvalue())
    return text.getvalue()

  def sh(self, argv: list[str]) -> None:
    """Runs one command from the repository root."""
    line = self.record(argv)
    result = subprocess.run(argv, cwd=self.repo)
    if result.returncode != 0:
      raise StepError(f"command failed ({result.returncode}): {line}")

  # --- The steps --------------------------------------------------------------------------------

  def data_entries(self) -> list[manifest.Task]:
    """The data-preparation commands whose outputs are missing."""
    out = [
      manifest.entry(0, "data", d["name"], d["command"], self.repo, outputs=d["outputs"])
      for d in self.data
    ]
    return manifest.renumber([e for e in out if not manifest.ended(e)])

  def _stage(self, stage: str, text: str) -> list[manifest.Task]:
    """`launch.sweep --format json` output (runs or populations) as manifest entries."""
    out = []
    for item in json.loads(text) if text.strip() else []:
      runs = item.get("runs", [item])
      runs = [{"workdir": r["workdir"], "steps": r["overrides"]["train.steps"]} for r in runs]
      out.append(manifest.entry(0, stage, item["name"], item["command"], self.repo, runs=runs))
    return manifest.renumber(out)

  def stage1_entries(self) -> list[manifest.Task]:
    """Stage 1's runs (or populations) not yet finished."""
    args = ["--stage", "1", *self.stage1, *self.common, "--skip-finished", "--format", "json"]
    return self._stage("stage1", self.sweep(*args, out=self.work / "stage1.json"))

  def collect(self, stage: int) -> None:
    self.sweep(
      "--collect", str(self.work / "runs" / f"stage{stage}"), out=self.work / f"stage{stage}.csv"
    )

  def stage2_entries(self, round_: int) -> list[manifest.Task]:
    """Stage 2's runs of round `round_` (from 1): each cell's selected configuration at both
    floors, unstable ones replaced given the rounds before; those not yet finished."""
    more = ["--stage2-results", str(self.work / "stage2.csv")] if round_ > 1 else []
    args = ["--stage", "2", "--results", str(self.work / "stage1.csv"), *self.stage2, *more]
    args += [*self.common, "--skip-finished", "--format", "json"]
    out = self.work / f"stage2_round{round_}.json"
    return self._stage("stage2", self.sweep(*args, out=out))

  def _both(self) -> list[str]:
    w = self.work
    return ["--results", str(w / "stage1.csv"), "--stage2-results", str(w / "stage2.csv")]

  def select(self) -> list[dict]:
    args = ["--select", *self._both(), "--families", self.families, "--sizes", self.sizes]
    return json.loads(self.sweep(*args, out=self.work / "selection.json"))

  def evaluate_entries(self) -> list[manifest.Task]:
    """The evaluation of every selected run on the test data (those not yet written): the jobs
    of `launch.sweep --evaluate --format json`, each with the files it writes."""
    args = ["--evaluate", *self._both(), "--test-data", *self.test_data]
    args += ["--families", self.families, "--sizes", self.sizes, "--python", self.python]
    args += ["--eval-args", self.eval_args, "--format", "json"]
    jobs = json.loads(self.sweep(*args, out=self.work / "evaluate.json"))
    out = [
      manifest.entry(0, "evaluate", j["name"], j["command"], self.repo, outputs=j["outputs"])
      for j in jobs
    ]
    return manifest.renumber([e for e in out if not manifest.ended(e)])

  def report_argv(self) -> list[str]:
    runs, out = str(self.work / "runs"), str(self.work / REPORT)
    return [self.python, "-m", "chessjax.world_model.report", "--runs", runs, "--out", out]

  def report(self) -> None:
    self.sh(self.report_argv())


def run_stage(p: Protocol, tasks: list[manifest.Task], jobs: int, say=print) -> None:
  """A stage's tasks run here by `launch.local`, `jobs` at a time (each logged in
  ROOT/commands.sh first); raises StepError naming each one that failed, with its log."""
  if not tasks:
    return
  for t in tasks:
    p.record(list(t.argv))
  result = local.run(tasks, local.pool(jobs), log_dir=p.work / "logs", say=say)
  if result.failures or result.blocked:
    raise StepError("; ".join(map(str, result.failures)) or "tasks not run")
  if result.stopped:
    raise StepError("stopped by a signal; rerun the same command to resume")


def run_local(p: Protocol, jobs: int, say=print) -> None:
  """The whole protocol in this process: each stage's commands `jobs` at a time."""

  def run_all(tasks: list[manifest.Task]) -> None:
    run_stage(p, tasks, jobs, say)

  say("[1/6] data")
  run_all(p.data_entries())
  say("[2/6] stage 1")
  run_all(p.stage1_entries())
  say("[3/6] collect stage 1, stage 2")
  p.collect(1)
  for round_ in range(1, p.rounds + 1):
    entries = p.stage2_entries(round_)
    run_all(entries)
    p.collect(2)
    if not entries:
      break
  say("[4/6] select")
  p.select()
  say("[5/6] evaluate")
  run_all(p.evaluate_entries())
  say("[6/6] report")
  p.report()
