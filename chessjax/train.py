"""The training loop, for any task: `train_and_evaluate(config, workdir)` trains one run;
`train_runs(...)` is the same loop over the members of a population (`chessjax.population`).

Reads top to bottom: read the config once (`chessjax.spec`), get the task (`chessjax.task`) and
the training batches (`chessjax.batches`), build the model, train state and jitted step
(`chessjax.step.build`, or a population's), restore the newest readable checkpoint of each run,
then run the compiled train step once per batch. Nothing here knows what a batch holds beyond
`task.batch_keys` and its `mask` (True on scored positions, used to count tokens).

* Data parallel over every device of every process (`chessjax.step`): each process feeds its rows
  of the global batch (`jax.make_array_from_process_local_data`). The same code runs on 1 CPU,
  N fake CPU devices, a GPU, or a multi-host TPU slice.
* The device is kept busy: a background thread reads the next batches, pads them and puts them
  on the devices while the current step runs (`chessjax.prefetch`, `PREFETCH_DEPTH` ahead); no
  device value is read on the host between logging, validation and checkpoint steps (a progress
  line shows only outputs already computed), and the host queues at most `IN_FLIGHT` steps ahead
  of the device. Every log line says how long the loop waited on its input ("input wait", a share
  of the interval) and how long the host itself took per step ("host ms/step").
* Non-finite guard: the step skips non-finite batches and rolls parameters back to a snapshot
  (`chessjax.step.train_step`); after `max_bad_batches` consecutive bad batches the step leaves
  the state where it is, and the loop, reading the counters at its next logging, validation or
  checkpoint step, ends that run there (its summary says aborted and why).
* Checkpoints (orbax) every `checkpoint_every` steps and at the end hold the train state and the
  input iterator's state: rerunning the same command resumes and reaches the same parameters,
  bit for bit on CPU, as an uninterrupted run. The workdir may be a URL (`gs://...`). A run that
  is finished (`chessjax.workdir.finished`) is not trained further by a rerun.
* Preemption (`chessjax.preemption`): SIGTERM or SIGINT finishes the step in progress; every
  process saves a checkpoint at the same step, the summary says preempted, and `Preempted` is
  raised (`chessjax.main` exits with `preemption.EXIT_STATUS`); the same command resumes there.
* Only process 0 writes TensorBoard summaries, logs and JSON files; a progress line (step, loss,
  tokens/s, time left) is printed at least every `progress_seconds`.
* Compilation (`chessjax.compile`): the step compiles once per batch length (`StepCompiler`),
  checked against the machine's memory before the first step. Where a core is free to do it
  (`train.compile_ahead`), the lengths the run's plan will use are compiled in a background
  thread while the first one trains; `data.min_bucket_batches` merges the length buckets that
  few of the run's batches use into longer ones (fewer compilations for a short run).
"""

import collections
import contextlib
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Protocol

import jax
import ml_collections
import numpy as np

from chessjax import batches, evaluation, flops, init_from, logs, peaks, profiling
from chessjax import workdir as workdir_lib
from chessjax.checkpointing import Checkpointer, abstract_like
from chessjax.compile import StepCompiler, batch_shape, check_memory
from chessjax.data.plan import bucket_length
from chessjax.files import as_path, write_json, write_text
from chessjax.models import count_params
from chessjax.preemption import Preempted, Preemption
from chessjax.prefetch import DevicePrefetch
from chessjax.spec import TrainSpec
from chessjax.step import build
from chessjax.task import Task, get_task

log = logging.getLogger(__name__)

IN_FLIGHT = 3  # Steps the host may queue ahead of the device (it then waits on the oldest).
PREFETCH_DEPTH = 2  # Batches on the devices ahead of the step that needs them.


class NonFiniteError(RuntimeError):
  """Training produced too many consecutive non-finite batches (counters as the guard read them)."""

  def __init__(self, message: str, *, step: int = 0, bad_batches: int = 0, rollbacks: int = 0):
    super().__init__(message)
    self.step, self.bad_batches, self.rollbacks = step, bad_batches, rollbacks


def config_json(config) -> str:
  """The config as the workdir keeps it (`config.json`)."""
  return json.dumps(config.to_dict(), indent=2, sort_keys=True, default=str) + "\n"


class Runs(Protocol):
  """What the loop trains together: one run (`OneRun`) or a population's members."""

  task: Task
  model: object  # One member's model (its parameter count and FLOPs).
  state: dict  # The initial train state of every member.
  train_step: object  # jitted (state, batch) -> (state, outputs)
  length_axis: int  # The positions axis of a device batch.

  def device_batch(self, host: list[dict]) -> dict: ...  # Global arrays of each member's batch.

  def member_like(self) -> dict: ...  # The abstract train state of one member.

  def member(self, state: dict, i: int) -> dict: ...  # Member i's train state.

  def with_members(self, state: dict, members: dict[int, dict]) -> dict: ...

  def with_active(self, state: dict, active: list[bool]) -> dict: ...  # Inactive: frozen.

  def outputs(self, out: dict, i: int) -> dict: ...  # Member i's of the host outputs.

  def validate(self, state: dict, batches: list[dict]) -> list[dict]: ...  # One per member.

  def lr_at(self, i: int): ...  # Member i's schedule.


class OneRun:
  """A run trained alone: the step `chessjax.step.build` makes, on an unbatched state."""

  length_axis = 1

  def __init__(self, spec: TrainSpec, task: Task):
    self.model, self.state, self.fns = build(spec, task)
    self.task, self.train_step = task, self.fns.train_step

  def device_batch(self, host):
    return evaluation.device_batch(host[0], self.fns)

  def member_like(self):
    return abstract_like(self.state)

  def member(self, state, i):
    return state

  def with_members(self, state, members):
    return members.get(0, state)

  def with_active(self, state, active):
    return state  # The loop stops when its one run does.

  def outputs(self, out, i):
    return out

  def validate(self, state, batches):
    return [evaluation.accumulate(self.fns, state, batches)]

  def lr_at(self, i):
    return self.fns.lr_at


@dataclasses.dataclass
class Member:
  """One run of a loop: its config (as its workdir keeps it), spec and workdir."""

  name: str  # "" for a run trained alone.
  config: ml_collections.ConfigDict
  spec: TrainSpec
  workdir: Path


def train_and_evaluate(config: ml_collections.ConfigDict, workdir) -> dict:
  """Trains per `config`, resuming from `workdir` if it holds checkpoints. Returns a summary
  (also written to the workdir: `workdir.SUMMARY`).

  Length: `config.train.steps`, or `config.train.epochs` whole epochs of the training split when
  that is set (> 0). Validation: every `eval_every` steps (0: once per epoch) on the first
  `eval_batches` batches of the validation split (0: all of it). Whenever validation improves the
  task's selection metric (`task.selection_metric`, lower is better) the state is also saved as
  WORKDIR/best; with `early_stopping_patience` > 0, training stops after that many validations
  without improvement. Raises `NonFiniteError` when the non-finite guard ended the run and
  `chessjax.preemption.Preempted` on a preemption notice (its checkpoint saved).
  """
  task = get_task(config)
  member = Member("", config, TrainSpec.from_config(config), as_path(workdir))
  (summary,) = train_runs([member], task, lambda specs: OneRun(specs[0], task))
  if summary.get("aborted"):
    raise NonFiniteError(
      summary["abort_reason"],
      step=summary["steps"],
      bad_batches=summary["bad_batches"],
      rollbacks=summary["rollbacks"],
    )
  return summary


def train_runs(members: list[Member], task: Task, make_runs) -> list[dict]:
  """Trains `members` together (one run, or a population's members, which share every setting
  of the loop and the shapes) with the `Runs` that `make_runs(specs)` builds from their specs.
  Returns their summaries, in order; raises `Preempted` after saving on a preemption notice."""
  if jax.process_index() == 0:
    for m in members:
      m.workdir.mkdir(parents=True, exist_ok=True)
      write_text(m.workdir / workdir_lib.CONFIG, config_json(m.config))
  # One iterator per data order: members with the same seed share theirs.
  seeds = list(dict.fromkeys(m.spec.seed for m in members))
  groups, epoch_specs = [], {}
  try:
    for seed in seeds:
      first = next(m for m in members if m.spec.seed == seed)
      # The task of that seed's rows (a language model's RAP annotations draw from the seed).
      rows = task.rows if first is members[0] else get_task(first.config).rows
      it, epoch_specs[seed] = batches.train_batches(first.spec, rows)
      groups.append(it)
    members = [
      dataclasses.replace(m, spec=m.spec.replace(epoch_steps=epoch_specs[m.spec.seed].epoch_steps))
      for m in members
    ]
    loop = _Loop(members, task, make_runs, groups, [seeds.index(m.spec.seed) for m in members])
  except BaseException:
    for it in groups:
      it.close()
    raise
  try:
    return loop.run()
  finally:
    loop.close()


class _Run:
  """The loop's bookkeeping of one member: checkpoints, early stopping, logs, how it ended."""

  def __init__(self, member: Member, *, validates: bool, params: int, **logger_kwargs):
    self.chief = jax.process_index() == 0
    self.spec, self.workdir = member.spec, member.workdir
    self.ckpt = Checkpointer(self.workdir, max_to_keep=self.spec.train.keep_checkpoints)
    self.best = Checkpointer(self.workdir, max_to_keep=1, subdir="best") if validates else None
    self.stopping = _EarlyStopping(self.workdir, self.spec.train.early_stopping_patience)
    self.logger = logs.TrainLogger(
      self.workdir if self.chief else None, name=member.name, **logger_kwargs
    )
    self.params = params
    self.ended = ""  # Why it no longer trains: "total", "stopped", "aborted" or "preempted".
    self.steps = 0  # Steps done: where it is, or where it stopped.
    self.resumed_from = 0
    self.counters = {"bad_batches": 0, "rollbacks": 0}  # The guard's, as last read.
    self.abort_reason = ""
    self.last_eval: dict = {}
    self.kept_summary: dict | None = None  # An aborted run's summary, kept by a rerun.

  def end(self, why: str, step: int) -> None:
    self.ended, self.steps = why, step

  def summary(self, total: int) -> dict:
    if self.kept_summary is not None:
      return self.kept_summary
    if self.ended == "aborted":
      health = {"aborted": True, "abort_reason": self.abort_reason, **self.counters}
    else:
      health = {
        "aborted": False,
        "stopped_early": self.ended == "stopped",
        "preempted": self.ended == "preempted",
        "best_step": self.stopping.best_step,
        **self.counters,
      }
    summary = {
      "task": self.spec.task,
      "family": self.spec.family,
      "size": self.spec.size,
      "params": self.params,
      "steps": self.steps,
      "total_steps": total,
      "resumed_from": self.resumed_from,
      **health,
      "validation": {k: v for k, v in self.last_eval.items() if k != "bins"},
    }
    init = init_from.read_record(self.workdir)  # Started from another run's parameters.
    if init is not None:
      summary["init"] = init
    if self.chief:
      workdir_lib.write_summary(self.workdir, summary)
    return summary

  def close(self) -> None:
    for ckpt in (self.ckpt, self.best):
      if ckpt is not None:
        ckpt.close()
    self.logger.close()


@dataclasses.dataclass
class _Prepared:
  """One step's input on the devices, each member's token counts (of the whole batch) and each
  data order's iterator state after it."""

  batch: dict
  tokens: list[int]
  cells: list[int]
  data_states: list[dict]


class _Loop:
  """One training loop's objects and its steps (`run`)."""

  def __init__(self, members, task: Task, make_runs, groups, group_of):
    self.members, self.task, self.groups, self.group_of = members, task, groups, group_of
    self.spec = spec = members[0].spec
    self.total = spec.total_steps
    self.eval_every = spec.train.eval_every or spec.epoch_steps
    self.runs: Runs = make_runs([m.spec for m in members])
    self.params = count_params(self.runs.model)
    played = np.minimum(groups[0].plan.lengths, spec.data.max_len)  # For MFU in the logs.
    flops_per_token = flops.model_per_token(self.runs.model, played)
    self.runs.model = None
    self.val_batches = batches.validation_batches(spec, task.eval_rows)
    self.profiler = profiling.StepProfiler(spec.train.profile, members[0].workdir / "profile")
    self.rs = [
      _Run(
        m,
        validates=bool(self.val_batches),
        params=self.params,
        total=self.total,
        progress_seconds=spec.train.progress_seconds,
        flops_per_token=flops_per_token,
        peak_flops=peaks.system_peak(spec.dtype),
      )
      for m in members
    ]
    self.compiler = StepCompiler(self.runs.train_step, length_axis=self.runs.length_axis)
    self.checked = False  # Whether the memory check has run (at the first compilation).
    self.prefetch = None
    self.timing = _Timing()

  def close(self) -> None:
    if self.prefetch is not None:
      self.prefetch.close()
    self.profiler.close()
    self.compiler.close()
    for it in self.groups:
      it.close()
    for r in self.rs:
      r.close()

  def live(self, i: int) -> bool:
    return not self.rs[i].ended

  def run(self) -> list[dict]:
    spec, total, runs, rs = self.spec, self.total, self.runs, self.rs
    state, step = self._restore()
    for i, r in enumerate(rs):
      r.logger.start(lr_at=runs.lr_at(i))
    banner = (
      f"{spec.family} {spec.size} ({spec.task}): {self.params:,} parameters, "
      f"{jax.device_count()} devices, {jax.process_count()} processes, global batch "
      f"{spec.data.batch_size}, {total} steps ({spec.epoch_steps} per epoch)"
    )
    if len(rs) > 1:
      banner += f", a population of {len(rs)} ({sum(map(self.live, range(len(rs))))} to train)"
    rs[0].logger.message(banner + (f", resumed from step {step}" if step else ""))
    active = [self.live(i) for i in range(len(rs))]  # As the device state has it.
    state = runs.with_active(state, active)
    self.prefetch = DevicePrefetch(self._produce, depth=PREFETCH_DEPTH, count=max(total - step, 0))
    pending = collections.deque()  # The outputs of the steps not read yet, oldest first.
    signal_name = ""
    with Preemption() as preemption:
      while step < total and any(active):
        self.profiler.step(step)
        item = next(self.prefetch)
        state, out = self._step(state, item, step)
        step += 1
        self.timing.steps += 1
        pending.append(out)
        for i, r in enumerate(rs):
          if active[i]:
            r.logger.dispatched(item.tokens[i], item.cells[i])
        if len(pending) > IN_FLIGHT:  # Waits on, without reading, the oldest queued step.
          oldest = pending[-IN_FLIGHT - 1]
          self.timing.device(lambda o=oldest: jax.block_until_ready(o))
        preempted = preemption.reached(step)
        logged = step % spec.train.log_every == 0 or step == total
        validated = bool(self.val_batches) and (step % self.eval_every == 0 or step == total)
        saved = step % spec.train.checkpoint_every == 0 or step == total or preempted
        if logged or validated or saved:
          self.timing.device(lambda: self._read(pending, block=True))
        elif any(r.logger.progress_due() for i, r in enumerate(rs) if self.live(i)):
          self._read(pending, block=False)
          for i, r in enumerate(rs):
            if self.live(i):
              r.logger.progress(step)
        if logged:
          self._log(step, active)
        with self.timing.aside():
          stopped = self._validate(state, step, item) if validated else []
          if saved or stopped:
            self._save(state, step, item, saved, stopped)
        for i, r in enumerate(rs):
          if validated and r.chief and self.live(i):
            # After the checkpoints are started: a rerun sees the early stopping of the saved
            # state.
            r.stopping.write()
        for i in stopped:
          rs[i].end("stopped", step)
        if preempted:
          signal_name = preemption.signal_name
          for i, r in enumerate(rs):
            if self.live(i):
              r.end("preempted", step)
        now = [self.live(i) for i in range(len(rs))]
        if now != active:
          active = now
          state = runs.with_active(state, active)
    self._read(pending, block=True)
    for i, r in enumerate(rs):
      if self.live(i):
        r.end("total", step)
    summaries = self._summaries(state)
    if signal_name:
      raise Preempted(step, signal_name)
    return summaries

  def _produce(self) -> _Prepared:
    """The next step's input (the prefetch thread calls it)."""
    host = [next(it) for it in self.groups]
    data_states = [it.get_state() for it in self.groups]
    batch = self.runs.device_batch([host[g] for g in self.group_of])
    # This process's rows times the processes: every process holds as many rows of each batch,
    # so tokens/s counts the whole batch (exact for one process, an estimate for several).
    n = jax.process_count()
    tokens = [n * int(host[g]["mask"].sum()) for g in self.group_of]
    cells = [n * host[g]["mask"].size for g in self.group_of]
    return _Prepared(batch, tokens, cells, data_states)

  def _step(self, state, item: _Prepared, step: int):
    """Runs the compiled step on `item` (compiling it first for a new batch shape)."""
    keys = self.task.batch_keys
    shape = batch_shape(item.batch, keys)
    compiled = self.compiler.ready(shape)
    if compiled is None:  # Compiled now, or awaited from the background thread.
      started = time.perf_counter()
      compiled = self.compiler.get(shape, state, item.batch)
      if not self.checked:  # The run's first compilation.
        self.checked = True
        plans = [it.plan for it in self.groups]
        longest = max(bucket_length(int(p.lengths.max()), p.batching.bucket_lengths) for p in plans)
        check_memory(self.spec, keys, state, item.batch, self.compiler, longest,
                     members=len(self.rs), length_axis=self.runs.length_axis)  # fmt: skip
        if self.spec.compile_ahead:
          horizon = min(self.total, step + self.spec.epoch_steps)
          self.compiler.start_ahead(state, item.batch, keys, _first_uses(plans, step, horizon))
      seconds = time.perf_counter() - started
      self.timing.compiled(seconds)
      for r in self.rs:
        r.logger.compiled(seconds)
    return compiled(state, item.batch)

  def _read(self, pending: collections.deque, *, block: bool) -> None:
    """Reads the queued steps' outputs into the logs: all of them (`block`, at the steps every
    process syncs at), ending the runs the non-finite guard has halted; or, for a progress line,
    only those the device has finished, ending nothing (a halted run stays halted, so the next
    sync finds it; processes must end runs at the same step)."""
    outs = []
    while pending and (block or all(x.is_ready() for x in jax.tree.leaves(pending[0]))):
      outs.append(pending.popleft())
    max_bad = self.spec.train.max_bad_batches
    for out in jax.device_get(outs):
      for i, r in enumerate(self.rs):
        if not self.live(i):
          continue
        o = self.runs.outputs(out, i)
        r.counters = {"bad_batches": int(o["bad_batches"]), "rollbacks": int(o["rollbacks"])}
        if int(o["bad_in_a_row"]) < max_bad:
          r.logger.add(o)
        elif block:
          r.abort_reason = (
            f"step {int(o['step'])}: {int(o['bad_in_a_row'])} consecutive batches with a "
            f"non-finite loss, gradient or parameters ({r.counters['bad_batches']} in all, "
            f"{r.counters['rollbacks']} rollbacks); lower the learning rate or check the data"
          )
          r.end("aborted", int(o["step"]))
          r.logger.message(f"error: {r.abort_reason}")
          r.kept_summary = r.summary(self.total)  # Now: a crash later must not lose it.

  def _log(self, step: int, active: list[bool]) -> None:
    waits = self.timing.interval(self.prefetch)
    for i, r in enumerate(self.rs):
      if active[i] and self.live(i):
        r.logger.write_interval(step, **waits)
    if len(self.rs) > 1:
      self.rs[0].logger.message(
        f"population step {step}/{self.total}: {sum(active)} of {len(self.rs)} training, "
        f"input wait {100 * waits['input_wait']:.1f}%, host {waits['host_ms']:.1f} ms/step"
      )

  def _validate(self, state, step: int, item: _Prepared) -> list[int]:
    """Validation of the members still training; returns those that stop early now."""
    task, stopped = self.task, []
    results = self.runs.validate(state, self.val_batches)
    for i, r in enumerate(self.rs):
      if not self.live(i):
        continue
      r.last_eval = results[i]
      r.logger.write_eval(step, *task.summarize(r.last_eval))
      if r.stopping.update(step, float(r.last_eval[task.selection_metric])):
        member = self.runs.member(state, i)
        r.best.save(step, member, item.data_states[self.group_of[i]], force=True)
      if r.stopping.stopped:
        stopped.append(i)
        r.logger.message(
          f"step {step}: no validation improvement in {r.stopping.patience} evaluations, "
          f"stopping (best {task.selection_metric} {r.stopping.best:.6g} at step "
          f"{r.stopping.best_step})"
        )
    return stopped

  def _save(self, state, step: int, item: _Prepared, saved: bool, stopped: list[int]) -> None:
    """Starts the checkpoints at `step` of the members still training (all of them when `saved`,
    else those that stop early now)."""
    for i, r in enumerate(self.rs):
      if self.live(i) and (saved or i in stopped):
        member = self.runs.member(state, i)
        r.ckpt.save(step, member, item.data_states[self.group_of[i]], force=True)

  def _restore(self) -> tuple[dict, int]:
    """Each member's newest readable checkpoint, and the step the members still training resume
    from (they must agree); a finished member (`workdir.finished`'s rule) stays as it ended."""
    runs, rs, total = self.runs, self.rs, self.total
    like = runs.member_like()
    restored = {}
    for i, r in enumerate(rs):
      got = r.ckpt.restore_latest(like)
      summary = workdir_lib.read_summary(r.workdir)
      step_i = got[0] if got is not None else 0
      r.steps = r.resumed_from = step_i
      if summary is not None and summary.get("aborted"):
        r.kept_summary = summary
        r.end("aborted", int(summary["steps"]))
      elif r.stopping.stopped or step_i >= total:  # Its summary is written again, validated.
        r.end("stopped" if r.stopping.stopped else "total", step_i)
      if got is not None:
        restored[i] = got
    training = [i for i in range(len(rs)) if self.live(i)]
    steps = {i: restored[i][0] if i in restored else 0 for i in training}
    start = min(steps.values(), default=0)
    for i in training:
      if steps[i] == start:
        continue
      if start not in rs[i].ckpt.steps():
        others = ", ".join(f"{self.members[j].name or 'run'} at {steps[j]}" for j in training)
        raise ValueError(
          f"the members resume from different steps ({others}) and "
          f"{self.members[i].name} has no checkpoint at step {start}: train them as separate "
          "populations, or remove the workdirs of the members that start over"
        )
      restored[i] = (start, *rs[i].ckpt.restore(start, like))
    for i in training:
      rs[i].steps = rs[i].resumed_from = start
    for g, it in enumerate(self.groups):
      saved = [restored[i][2] for i in training if self.group_of[i] == g and i in restored]
      it.set_state(saved[0] if saved else {"next_batch": start, "plan": it.plan.fingerprint()})
    state = runs.with_members(runs.state, {i: s for i, (_, s, _) in restored.items()})
    # A member with no checkpoint of its own starts from its `init` source, if it names one.
    fresh = [i for i in training if i not in restored]
    state = init_from.initialise(runs, state, self.members, fresh, [r.logger.message for r in rs])
    for i, (_, s, _) in restored.items():
      rs[i].counters = {k: int(s[k]) for k in ("bad_batches", "rollbacks")}
    if restored and start:
      log.info("resumed from step %d", start)
    return state, start

  def _summaries(self, state) -> list[dict]:
    """Each member's summary (written), validated first if it never was in this process (a
    rerun of a finished run)."""
    unseen = [i for i, r in enumerate(self.rs) if self.val_batches and not r.last_eval
              and r.kept_summary is None and r.ended in ("total", "stopped")]  # fmt: skip
    if unseen:
      results = self.runs.validate(state, self.val_batches)
      for i in unseen:
        self.rs[i].last_eval = results[i]
    return [r.summary(self.total) for r in self.rs]


class _Timing:
  """Where one logging interval's time went: compiling, waiting on the input, waiting on the
  device, validating and saving; the rest is the host's own work."""

  def __init__(self):
    self._reset()

  def _reset(self) -> None:
    self.start, self.steps = time.perf_counter(), 0
    self.compile_s = self.device_s = self.aside_s = 0.0

  def compiled(self, seconds: float) -> None:
    self.compile_s += seconds

  def device(self, wait) -> None:
    started = time.perf_counter()
    wait()
    self.device_s += time.perf_counter() - started

  @contextlib.contextmanager
  def aside(self):
    """Around work (validation, starting checkpoints) whose time is left out of the host's."""
    started = time.perf_counter()
    try:
      yield
    finally:
      self.aside_s += time.perf_counter() - started

  def interval(self, prefetch: DevicePrefetch) -> dict:
    """`input_wait` (share of the interval's time, compilation left out) and `host_ms` (per
    step) since the last call."""
    wall = max(time.perf_counter() - self.start - self.compile_s, 1e-9)
    steps = max(self.steps, 1)
    input_s = prefetch.waited
    prefetch.waited = 0.0
    host_s = max(wall - input_s - self.device_s - self.aside_s, 0.0)
    out = {"input_wait": min(input_s / wall, 1.0), "host_ms": 1e3 * host_s / steps}
    self._reset()
    return out


def _first_uses(plans, start: int, stop: int):
  """The batch lengths of steps [start, stop) in the order they are first used: the longest of
  the members' batches at each step (`BatchPlan.first_uses` for one data order)."""
  plans = [p.copy() for p in plans]  # Walked in the compile thread: caches of their own.
  if len(plans) == 1:
    yield from plans[0].first_uses(start, stop)
    return
  seen = set()
  for i in range(start, min(stop, len(plans[0]))):
    t = max(p.global_batch(i)[1] for p in plans)
    if t not in seen:
      seen.add(t)
      yield t


class _EarlyStopping:
  """Best validation metric so far and early stopping, persisted in WORKDIR/early_stopping.json
  (`workdir_lib.EARLY_STOPPING`) so a resumed run continues the count (and a run that stopped
  early stays stopped)."""

  def __init__(self, workdir, patience: int):
    self.path, self.patience = workdir_lib.early_stopping_path(workdir), int(patience)
    saved_at = workdir_lib.early_stopping_path(workdir, existing=True)
    saved = json.loads(saved_at.read_text()) if saved_at.exists() else {}
    self.best = saved.get("best", float("inf"))
    self.best_step = saved.get("best_step")
    self.since_best = saved.get("since_best", 0)
    self.stopped = bool(saved.get("stopped", False))

  def update(self, step: int, metric: float) -> bool:
    """Records a validation result; returns whether it is the best so far."""
    if metric < self.best:
      self.best, self.best_step, self.since_best = metric, step, 0
      return True
    self.since_best += 1
    self.stopped = self.patience > 0 and self.since_best >= self.patience
    return False

  def write(self) -> None:
    state = {
      "best": self.best,
      "best_step": self.best_step,
      "since_best": self.since_best,
      "stopped": self.stopped,
    }
    write_json(self.path, state)
