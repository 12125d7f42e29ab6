"""The training loop's own cost: milliseconds a step the real loop spends beyond its compiled call
run alone back to back, for one run and for a population, at 1 and more steps per call.

    python -m benchmarks.bench_loop_overhead [--rounds 5] [--steps-per-call 1,4,8] \
        [--members 1,2] [--family slice] [--d 16] [--batch 8] [--length 32] [--log-every 100] \
        [--intervals 3] [--work DIR] [--out docs/results/loop_overhead_cpu.json] [--toy]

The loop is `chessjax.train`'s, as `chessjax.main` (one run) and `chessjax.population` (K
members that differ in learning rate, one data order) run it: the bundled sample prepared once
under `--work` (every game in `train`, no validation split), the smoke world model of `--family`
at width `--d` (a step cheap enough that a tenth of a millisecond shows), one length bucket, a
log line every `--log-every` steps and `--intervals` + 1 intervals, the first (compilation,
start-up) left out; its time per step is the time between the first and the last log line over
the steps between them (`chessjax.logs.TrainLogger.write_interval`, wrapped while inside).

Two yardsticks, each the loop's own program (`chessjax.dispatch.StepCall`, the state's buffers
as a list) on full calls of the sample's batches already on the device, dispatched back to back
for at least `--seconds`: "step alone", the one-step call, and "call alone", the row's k-step
call (per step; the same as the step alone at k = 1). The loop's own cost is loop ms/step -
call alone ms/step: what the loop adds to the program it runs. What k changes in the program
itself is call alone against step alone. Each round measures, for every row in turn, its
yardsticks and then its loop (interleaved, so a shared machine whose speed drifts moves them
alike); the table gives the medians over the rounds, the loop's own cost as the median of the
rounds' differences, with their range. "host ms/step" and "input wait" are what the loop's own
log lines said (`chessjax.timing`). On a CPU the loop's threads share the cores with the
program's, so the record also gives CPU ms a step: the process's for the call alone and for the
loop, and the loop's main thread's and input thread's (`chessjax.prefetch`; "-" where this
platform has no per-thread clock) over the same intervals.

Goal (issue 52): at most 0.5 ms a step for one run at one step per call. `--out` writes the
record (docs/results/loop_overhead_cpu.json, rendered into docs/performance.md by
`python -m docgen`); the table is `benchmarks.loop_overhead_table`. `--toy`: d = 8, batch 2 x
16, 2 intervals of 8 steps, one round, rows k = 1 and 2 (seconds;
tests/test_bench_loop_overhead.py runs it).
"""

import argparse
import contextlib
import datetime
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import jax
import ml_collections

from benchmarks.loop_overhead_table import table
from chessjax import batches, logs, machine, populations, runtime, train
from chessjax.dispatch import StepCall
from chessjax.files import write_text
from chessjax.members import member_config, parse_member
from chessjax.prefetch import THREAD_NAME as INPUT_THREAD
from chessjax.runs import OneRun
from chessjax.spec import TrainSpec
from chessjax.task import get_task
from configs import cwm

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"
GOAL_MS = 0.5  # The loop's own cost a step, one run at one step per call (issue 52).


def prepared_sample(work: Path) -> Path:
  """The bundled sample prepared by its command (`data_prep.process_pgn`, every game in
  `train`) under `work`, once."""
  path = work / "sample"
  if not (path / "manifest.json").exists():
    args = ["--pgn", str(SAMPLE), "--out", str(path), "--split", "train", "--overwrite"]
    subprocess.run([sys.executable, "-m", "data_prep.process_pgn", *args], cwd=REPO, check=True)
  return path


def loop_config(opts, data: Path, steps_per_call: int) -> ml_collections.ConfigDict:
  """The smoke world model at `opts.d`, one bucket, logging every `opts.log_every` steps, no
  validation and no checkpoint before the last step."""
  c = cwm.get_config(f"family={opts.family},size=d128,smoke=True")
  c.model.d = opts.d
  c.data.train, c.data.val_split = str(data), "none"
  c.data.batch_size, c.data.max_len, c.data.bucket_lengths = opts.batch, opts.length, (opts.length,)
  c.train.update(
    steps=opts.log_every * (opts.intervals + 1),
    log_every=opts.log_every,
    checkpoint_every=10**9,
    progress_seconds=1e9,
    compile_ahead="false",
  )
  if steps_per_call != 1:  # Left at its default otherwise (a checkout before the key ran it).
    c.train.steps_per_call = steps_per_call
  return c


def member_texts(config, members: int) -> list[str]:
  """`--member` texts of `members` members differing in learning rate only."""
  lr = config.optim.lr
  return [f"m{i}:optim.lr={lr * 2 ** (i / members):.6g}" for i in range(members)]


def thread_cpu(name: str) -> float | None:
  """CPU seconds of the live thread named `name` so far (None: no such thread, or no per-thread
  clock on this platform)."""
  thread = next((t for t in threading.enumerate() if t.name == name), None)
  if thread is None or not hasattr(time, "pthread_getcpuclockid"):
    return None
  try:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
  except OSError:  # The thread ended meanwhile.
    return None


class Marks:
  """The loop's log lines as its logger writes them: time, step, input wait and host ms/step of
  each `write_interval` call, and the CPU time so far of the process, the loop's (main) thread
  and its input thread (`chessjax.prefetch`)."""

  def __enter__(self):
    self.marks = []
    self._saved = write_interval = logs.TrainLogger.write_interval
    seen = set()

    def marked(logger, step, *, input_wait=0.0, host_ms=0.0):
      if step not in seen:  # A population's members log the same step: its first is the mark.
        seen.add(step)
        self.marks.append({
          "time": time.perf_counter(), "step": step, "input_wait": input_wait, "host_ms": host_ms,
          "cpu": time.process_time(), "main_cpu": time.thread_time(),  # This is the main thread.
          "input_cpu": thread_cpu(INPUT_THREAD),
        })  # fmt: skip
      return write_interval(logger, step, input_wait=input_wait, host_ms=host_ms)

    logs.TrainLogger.write_interval = marked
    return self

  def __exit__(self, *exc):
    logs.TrainLogger.write_interval = self._saved

  def summary(self) -> dict:
    """ms/step over the intervals after the first, their input wait and host ms/step (weighted by
    their time and steps), and CPU ms/step: the process's and its main thread's over the same
    intervals, the input thread's over those it lived through (it ends once it has read the
    last call's batches; None where it could not be read)."""
    m = self.marks
    if len(m) < 2:
      raise RuntimeError(f"the loop logged {len(m)} interval(s); 2 or more are needed")
    steps = m[-1]["step"] - m[0]["step"]
    seconds = m[-1]["time"] - m[0]["time"]
    spans = [(b["time"] - a["time"], b["step"] - a["step"], b) for a, b in itertools.pairwise(m)]
    lived = [x for x in m if x["input_cpu"] is not None]
    input_cpu = None
    if len(lived) >= 2 and lived[0] is m[0]:
      a, b = lived[0], lived[-1]
      input_cpu = 1e3 * (b["input_cpu"] - a["input_cpu"]) / (b["step"] - a["step"])
    return {
      "ms": 1e3 * seconds / steps,
      "input_wait": sum(s * b["input_wait"] for s, _, b in spans) / seconds,
      "host_ms": sum(n * b["host_ms"] for _, n, b in spans) / steps,
      "cpu_ms": 1e3 * (m[-1]["cpu"] - m[0]["cpu"]) / steps,
      "main_cpu_ms": 1e3 * (m[-1]["main_cpu"] - m[0]["main_cpu"]) / steps,
      "input_cpu_ms": input_cpu,
    }


class Alone:
  """A yardstick: the loop's compiled call at `steps_per_call` steps (`chessjax.dispatch`) alone,
  on its state and a few of the sample's batches already on the device (full calls), dispatched
  back to back."""

  def __init__(self, config, members: int, steps_per_call: int):
    task = get_task(config)
    if members == 1:
      runs = OneRun(TrainSpec.from_config(config), task)
    else:
      texts = member_texts(config, members)
      configs = [member_config(config, *parse_member(t)) for t in texts]
      runs = populations.Population([TrainSpec.from_config(c) for c in configs], task)
    k = self.k = steps_per_call
    self.call = StepCall(runs.step_fn, runs.state, runs.data_sharding,
                         length_axis=runs.length_axis, steps_per_call=k)  # fmt: skip
    it, _ = batches.train_batches(TrainSpec.from_config(config), task.rows)
    keys = task.batch_keys
    hosts = [runs.host_batch([next(it)] * members) for _ in range(4 * k)]
    it.close()
    self.batches = [self.call.device_input(hosts[i : i + k], keys) for i in range(0, 4 * k, k)]
    self.leaves = self.call.flat(runs.state)
    started = time.perf_counter()
    self.compiled = self.call.jitted.lower(self.leaves, self.batches[0]).compile()
    self.compile_s = time.perf_counter() - started
    self.steps(3)

  def steps(self, calls: int) -> tuple[float, float]:
    """Seconds a step over `calls` calls back to back, and the process's CPU seconds a step."""
    started, cpu = time.perf_counter(), time.process_time()
    leaves, out = self.leaves, None
    for i in range(calls):
      leaves, out = self.compiled(leaves, self.batches[i % len(self.batches)])
    jax.block_until_ready((leaves, out))
    self.leaves = leaves
    n = calls * self.k
    return (time.perf_counter() - started) / n, (time.process_time() - cpu) / n

  def for_at_least(self, seconds: float) -> tuple[float, float]:
    """`steps` over at least `seconds` (and 10 calls) of calls back to back."""
    first, _ = self.steps(3)
    return self.steps(max(10, int(seconds / max(first * self.k, 1e-9))))


def run_loop(config, members: int, workdir: Path) -> dict:
  """One run of the training loop (`chessjax.train`) of `config` (`members` > 1: a population
  of them), timed between its log lines."""
  shutil.rmtree(workdir, ignore_errors=True)
  with Marks() as marks, contextlib.redirect_stdout(open(os.devnull, "w")):  # noqa: SIM115
    if members == 1:
      train.train_and_evaluate(config, workdir)
    else:
      populations.train_population(config, workdir, member_texts(config, members))
  shutil.rmtree(workdir, ignore_errors=True)
  return marks.summary()


def measure(opts) -> dict:
  work = Path(opts.work)
  work.mkdir(parents=True, exist_ok=True)
  runtime.setup()  # As `chessjax.main`: the per-user compilation cache (later rounds load it).
  runtime.set_matmul_precision("float32")
  data = prepared_sample(work)
  rows = [(m, k) for m in opts.members for k in opts.steps_per_call]
  alone = {(m, k): Alone(loop_config(opts, data, 1), m, k) for m in opts.members
           for k in sorted({1, *opts.steps_per_call})}  # fmt: skip
  for (m, k), a in alone.items():
    print(f"{_name(m, k)}, alone: compiled in {a.compile_s:.1f} s", flush=True)
  m, k = rows[0]  # One loop first, untimed: the process's first one starts its threads.
  run_loop(loop_config(opts, data, k), m, work / "runs" / "warm-up")
  loadavg = round(os.getloadavg()[0], 2)
  rounds = {row: [] for row in rows}
  for r in range(opts.rounds):
    for m, k in rows:
      step_s, step_cpu = alone[(m, 1)].for_at_least(opts.seconds)
      call_s, call_cpu = (step_s, step_cpu) if k == 1 else alone[(m, k)].for_at_least(opts.seconds)
      step_ms, call_ms = 1e3 * step_s, 1e3 * call_s
      loop = run_loop(loop_config(opts, data, k), m, work / "runs" / f"m{m}_k{k}")
      rounds[(m, k)].append({"step_alone_ms": step_ms, "call_alone_ms": call_ms,
                             "call_alone_cpu_ms": 1e3 * call_cpu, **loop})  # fmt: skip
      print(f"round {r + 1}/{opts.rounds} {_name(m, k)}: step alone {step_ms:.3f} ms, call "
            f"alone {call_ms:.3f} ms/step, loop {loop['ms']:.3f} ms/step, its own "
            f"{loop['ms'] - call_ms:.3f} ms", flush=True)  # fmt: skip
  out_rows = []
  for (m, k), rs in rounds.items():
    own = [x["ms"] - x["call_alone_ms"] for x in rs]
    med = lambda key, rs=rs: statistics.median(x[key] for x in rs)  # noqa: E731
    out_rows.append({
      "name": _name(m, k),
      "members": m,
      "steps_per_call": k,
      "step_alone_ms": med("step_alone_ms"),
      "call_alone_ms": med("call_alone_ms"),
      "loop_ms": med("ms"),
      "own_ms": statistics.median(own),
      "own_ms_range": [min(own), max(own)],
      "host_ms": med("host_ms"),
      "input_wait": med("input_wait"),
      "call_alone_cpu_ms": med("call_alone_cpu_ms"),
      "cpu_ms": med("cpu_ms"),
      "main_cpu_ms": med("main_cpu_ms"),
      "input_cpu_ms": _median_known(x["input_cpu_ms"] for x in rs),
      "rounds": rs,
    })  # fmt: skip
  return {
    "what": "The training loop's own cost per step: chessjax.train against its compiled call "
    "alone (benchmarks.bench_loop_overhead).",
    "command": "python -m benchmarks.bench_loop_overhead --out docs/results/loop_overhead_cpu.json",
    "machine": {**header(), "loadavg": loadavg, "loadavg_end": round(os.getloadavg()[0], 2)},
    "config": {
      "family": opts.family,
      "d": opts.d,
      "batch": opts.batch,
      "length": opts.length,
      "steps": opts.log_every * (opts.intervals + 1),
      "log_every": opts.log_every,
    },
    "rounds": opts.rounds,
    "seconds": opts.seconds,
    "goal_ms": GOAL_MS,
    "rows": out_rows,
  }


def _median_known(values) -> float | None:
  known = [v for v in values if v is not None]
  return statistics.median(known) if known else None


def _name(members: int, k: int) -> str:
  who = "one run" if members == 1 else f"population of {members}"
  return f"{who}, {k} step{'s' if k > 1 else ''} per call"


def header() -> dict:
  return {
    "cpu": machine.cpu_model() or "unknown CPU",
    "cores": os.cpu_count(),
    "backend": jax.default_backend(),
    "device_kind": jax.devices()[0].device_kind,
    "jax": jax.__version__,
    "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
  }


def parse_args(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--family", default="slice")
  p.add_argument("--d", type=int, default=16, help="the model's width (the smoke model's is 128)")
  p.add_argument("--batch", type=int, default=8)
  p.add_argument("--length", type=int, default=32, help="games cut to this many steps (1 bucket)")
  p.add_argument("--log-every", type=int, default=100)
  p.add_argument("--intervals", type=int, default=3, help="timed log intervals after the first")
  p.add_argument("--steps-per-call", default="", help="the loops' train.steps_per_call (1,4,8)")
  p.add_argument("--members", default="1,2", help="1: a run alone; K > 1: a population of K")
  p.add_argument("--rounds", type=int, default=5, help="timing rounds (medians over them)")
  p.add_argument("--seconds", type=float, default=1.0, help="the step alone, at least this long")
  p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "chessjax_loop_overhead"),
                 help="where the prepared sample and the runs go")  # fmt: skip
  p.add_argument("--out", default="", help="also write the table's record (JSON) here")
  p.add_argument("--toy", action="store_true", help="a tiny model and loop, one round: seconds")
  opts = p.parse_args(argv)
  if opts.toy:
    opts.d, opts.batch, opts.length, opts.log_every, opts.intervals = 8, 2, 16, 8, 2
    opts.rounds, opts.seconds = 1, 0.0
  ks = opts.steps_per_call or ("1,2" if opts.toy else "1,4,8")
  opts.steps_per_call = [int(k) for k in ks.split(",") if k]
  opts.members = [int(m) for m in opts.members.split(",") if m]
  return opts


def main(argv=None) -> dict:
  opts = parse_args(argv)
  doc = measure(opts)
  print("\n" + table(doc))
  if opts.out:
    Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(opts.out, json.dumps(doc, indent=1) + "\n")  # Atomically: a record is never half.
  return doc


if __name__ == "__main__":
  main()
