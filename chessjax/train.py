"""The training loop, for any task: `train_and_evaluate(config, workdir)` trains one run;
`train_runs(...)` is the same loop over the members of a population (`chessjax.population`).

Reads top to bottom: read the config once (`chessjax.spec`), get the task (`chessjax.task`) and
the training batches (`chessjax.batches`), build the model, train state and jitted step (the
`chessjax.runs.Runs` the loop is given: `OneRun`, `chessjax.step.build`'s, or a population),
restore the newest readable checkpoint of each run, then call the compiled train step
(`chessjax.dispatch`: once per batch, or once per `train.steps_per_call` batches). Each run's
checkpoints, early stopping (`chessjax.early_stopping`), logs and summary are its
`chessjax.runs.RunBook`. Nothing here knows what a batch holds beyond `task.batch_keys` and
its `mask` (True on scored positions, used to count tokens).

* Data parallel over every device of every process (`chessjax.step`): each process feeds its rows
  of the global batch (`jax.make_array_from_process_local_data`). The same code runs on 1 CPU,
  N fake CPU devices, a GPU, or a multi-host TPU slice.
* The device is kept busy: a background thread reads the next batches, pads them and puts them
  on the devices while the current call runs (`chessjax.prefetch`, `PREFETCH_DEPTH` calls
  ahead); no device value is read on the host between logging, validation and checkpoint steps
  (a progress line shows only outputs already computed), and the host queues at most `IN_FLIGHT`
  calls ahead of the device. The loop holds the train state as the list of its buffers, and
  builds its tree only at the steps that read it (`chessjax.dispatch`). Every log line says how
  long the loop waited on its input ("input wait", a share of the interval) and how long the
  host itself took per step ("host ms/step"; `chessjax.timing`).
* Non-finite guard: the step skips non-finite batches and rolls parameters back to a snapshot
  (`chessjax.step.train_step`); after `max_bad_batches` consecutive bad batches the step leaves
  the state where it is, and the loop, reading the counters at its next logging, validation or
  checkpoint step, ends that run there (its summary says aborted and why).
* Checkpoints (orbax) every `checkpoint_every` steps and at the end hold the train state and the
  input iterator's state: rerunning the same command resumes and reaches the same parameters,
  bit for bit on CPU, as an uninterrupted run. The workdir may be a URL (`gs://...`). A run that
  is finished (`chessjax.workdir.finished`) is not trained further by a rerun.
* Several steps per call (`train.steps_per_call` = k > 1, `chessjax.dispatch`): up to k
  consecutive batches of one shape in one compiled call, in the data plan's order; a call ends
  where the batch shape changes and at every logging, validation and checkpoint step (and at the
  ends of a profiled range), so those keep their steps; the parameters after any number of steps
  are those of k = 1, bit for bit.
* Preemption (`chessjax.preemption`): SIGTERM or SIGINT finishes the call in progress; every
  process saves a checkpoint at the same step (the call's last), the summary says preempted,
  and `Preempted` is raised (`chessjax.main` exits with `preemption.EXIT_STATUS`); the same
  command resumes there.
* Only process 0 writes TensorBoard summaries, logs and JSON files; a progress line (step, loss,
  tokens/s, time left) is printed at least every `progress_seconds`.
* Compilation (`chessjax.compile`): the step compiles once per batch length (`StepCompiler`),
  checked against the machine's memory before the first step. Where a core is free to do it
  (`train.compile_ahead`), the lengths the run's plan will use are compiled in a background
  thread while the first one trains; `data.min_bucket_batches` merges the length buckets that
  few of the run's batches use into longer ones (fewer compilations for a short run).
"""

import collections
import dataclasses
import json
import logging
import time

import jax
import ml_collections
import numpy as np

from chessjax import batches, flops, init_from, peaks, profiling
from chessjax import workdir as workdir_lib
from chessjax.compile import StepCompiler, batch_shape, check_memory
from chessjax.data.plan import bucket_length
from chessjax.dispatch import StepCall
from chessjax.files import as_path, write_text
from chessjax.members import ResumeError
from chessjax.models import count_params
from chessjax.preemption import Preempted, Preemption
from chessjax.prefetch import DevicePrefetch
from chessjax.runs import Member, OneRun, RunBook, Runs
from chessjax.spec import TrainSpec
from chessjax.task import Task, get_task
from chessjax.timing import IntervalTiming

log = logging.getLogger(__name__)

IN_FLIGHT = 3  # Calls the host may queue ahead of the device (it then waits on the oldest).
PREFETCH_DEPTH = 2  # Calls' input on the devices ahead of the call that needs it.


class NonFiniteError(RuntimeError):
  """Training produced too many consecutive non-finite batches (counters as the guard read them)."""

  def __init__(self, message: str, *, step: int = 0, bad_batches: int = 0, rollbacks: int = 0):
    super().__init__(message)
    self.step, self.bad_batches, self.rollbacks = step, bad_batches, rollbacks


def config_json(config) -> str:
  """The config as the workdir keeps it (`config.json`)."""
  return json.dumps(config.to_dict(), indent=2, sort_keys=True, default=str) + "\n"


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


@dataclasses.dataclass
class _Prepared:
  """One call's input on the devices (`steps` consecutive batches of one shape,
  `chessjax.dispatch`), each member's token counts per step (of the whole batch) and each data
  order's iterator state after the call's last step."""

  batch: dict
  shape: tuple  # The call's compiled program is kept under it (`chessjax.compile.batch_shape`).
  steps: int
  tokens: list[list[int]]
  cells: list[list[int]]
  data_states: list[dict]


@dataclasses.dataclass
class _Read:
  """One step's batches on the host, as the prefetch thread read them: the step's batch
  (`Runs.host_batch`), its shapes, each member's token counts and the iterators' states after
  it."""

  batch: dict
  shape: tuple
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
      RunBook(
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
    runs, k = self.runs, spec.train.steps_per_call
    self.call = StepCall(
      runs.step_fn, runs.state, runs.data_sharding, length_axis=runs.length_axis, steps_per_call=k
    )
    self.compiler = StepCompiler(self.call.jitted, length_axis=self.call.length_axis)
    self.checked = False  # Whether the memory check has run (at the first compilation).
    self.prefetch = None
    self.timing = IntervalTiming()

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
    if self.call.k > 1:
      banner += f", up to {self.call.k} steps per call"
    if len(rs) > 1:
      banner += f", a population of {len(rs)} ({sum(map(self.live, range(len(rs))))} to train)"
    rs[0].logger.message(banner + (f", resumed from step {step}" if step else ""))
    active = [self.live(i) for i in range(len(rs))]  # As the device state has it.
    state = runs.with_active(state, active)
    leaves = self.call.flat(state)  # The state between the steps that read it (dispatch).
    self.prefetch = DevicePrefetch(self._calls(step), depth=PREFETCH_DEPTH)
    pending = collections.deque()  # The outputs of the calls not read yet, oldest first.
    signal_name, calls = "", 0
    with Preemption() as preemption:
      while step < total and any(active):
        self.profiler.step(step)
        item = next(self.prefetch)
        leaves, out = self._call(leaves, item, step)
        step += item.steps
        calls += 1
        self.timing.steps += item.steps
        pending.append((out, item.steps))
        for i, r in enumerate(rs):
          if active[i]:
            for tokens, cells in zip(item.tokens[i], item.cells[i], strict=True):
              r.logger.dispatched(tokens, cells)
        if len(pending) > IN_FLIGHT:  # Waits on, without reading, the oldest queued call.
          self.timing.device(pending[-IN_FLIGHT - 1][0].block_until_ready)
        preempted = preemption.reached(calls)
        logged, validated, saved = self._syncs(step)
        saved = saved or preempted
        if logged or validated or saved:
          self.timing.device(lambda: self._read(pending, block=True))
        elif any(r.logger.progress_due() for i, r in enumerate(rs) if self.live(i)):
          self._read(pending, block=False)
          for i, r in enumerate(rs):
            if self.live(i):
              r.logger.progress(step)
        if logged:
          self._log(step, active)
        if not (logged or validated or saved):
          continue  # No run ends between the steps every process syncs at.
        with self.timing.aside():
          state = self.call.tree(leaves) if validated or saved else None
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
          state = self.call.tree(leaves) if state is None else state
          leaves = self.call.flat(runs.with_active(state, active))
    self._read(pending, block=True)
    for i, r in enumerate(rs):
      if self.live(i):
        r.end("total", step)
    summaries = self._summaries(self.call.tree(leaves))
    if signal_name:
      raise Preempted(step, signal_name)
    return summaries

  def _syncs(self, step: int) -> tuple[bool, bool, bool]:
    """Whether the loop logs, validates and saves after `step` (the steps every process syncs
    at; a call of several steps ends at each of them)."""
    t, total = self.spec.train, self.total
    logged = step % t.log_every == 0 or step == total
    validated = bool(self.val_batches) and (step % self.eval_every == 0 or step == total)
    saved = step % t.checkpoint_every == 0 or step == total
    return logged, validated, saved

  def _ends_call(self, step: int) -> bool:
    """Whether a call ends after `step`: at every step the loop syncs at, and at the ends of
    the profiled range (so that its trace holds those steps' calls only)."""
    if any(self._syncs(step)):
      return True
    return self.profiler.range is not None and step in self.profiler.range

  def _calls(self, step: int):
    """The calls from `step` to the run's end (the prefetch thread walks it): consecutive steps
    of one batch shape, at most `train.steps_per_call` of them, a call ending where
    `_ends_call` says; a batch of another shape read ahead waits for the next call."""
    k, total = self.call.k, self.total
    ahead = None
    while step < total:
      reads = []
      while True:
        read, ahead = ahead or self._read_step(), None
        if reads and read.shape != reads[0].shape:
          ahead = read
          break
        reads.append(read)
        step += 1
        if len(reads) == k or step == total or self._ends_call(step):
          break
      members = range(len(self.group_of))
      batch = self.call.device_input([r.batch for r in reads], self.task.batch_keys)
      yield _Prepared(
        batch,
        batch_shape(batch, self.task.batch_keys),
        len(reads),
        [[r.tokens[i] for r in reads] for i in members],
        [[r.cells[i] for r in reads] for i in members],
        reads[-1].data_states,
      )

  def _read_step(self) -> _Read:
    """The next step's batches on the host (the prefetch thread reads them)."""
    host = [next(it) for it in self.groups]
    data_states = [it.get_state() for it in self.groups]
    batch = self.runs.host_batch([host[g] for g in self.group_of])
    # This process's rows times the processes: every process holds as many rows of each batch,
    # so tokens/s counts the whole batch (exact for one process, an estimate for several).
    n = jax.process_count()
    group_tokens = [n * np.count_nonzero(x["mask"]) for x in host]
    tokens = [group_tokens[g] for g in self.group_of]
    cells = [n * host[g]["mask"].size for g in self.group_of]
    return _Read(batch, batch_shape(batch, self.task.batch_keys), tokens, cells, data_states)

  def _call(self, leaves: list, item: _Prepared, step: int):
    """Runs the compiled call on `item` (compiling it first for a new batch shape)."""
    keys, shape = self.task.batch_keys, item.shape
    compiled = self.compiler.ready(shape)
    if compiled is None:  # Compiled now, or awaited from the background thread.
      started = time.perf_counter()
      compiled = self.compiler.get(shape, leaves, item.batch)
      if not self.checked:  # The run's first compilation.
        self.checked = True
        plans = [it.plan for it in self.groups]
        longest = max(bucket_length(int(p.lengths.max()), p.batching.bucket_lengths) for p in plans)
        check_memory(self.spec, keys, leaves, item.batch, self.compiler, longest,
                     members=len(self.rs), length_axis=self.call.length_axis)  # fmt: skip
        if self.spec.compile_ahead:
          horizon = min(self.total, step + self.spec.epoch_steps)
          self.compiler.start_ahead(leaves, item.batch, keys, _first_uses(plans, step, horizon))
      seconds = time.perf_counter() - started
      self.timing.compiled(seconds)
      for r in self.rs:
        r.logger.compiled(seconds)
    return compiled(leaves, item.batch)

  def _read(self, pending: collections.deque, *, block: bool) -> None:
    """Reads the queued calls' outputs into the logs, step by step: all of them (`block`, at the
    steps every process syncs at), ending the runs the non-finite guard has halted; or, for a
    progress line, only those the device has finished, ending nothing (a halted run stays
    halted, so the next sync finds it; processes must end runs at the same step)."""
    outs, steps = [], []
    while pending and (block or all(x.is_ready() for x in jax.tree.leaves(pending[0][0]))):
      out, n = pending.popleft()
      outs.append(out)
      steps.append(n)
    max_bad = self.spec.train.max_bad_batches
    read = [self.call.step_outputs(o, n) for o, n in zip(jax.device_get(outs), steps, strict=True)]
    for out in (o for call in read for o in call):
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
        raise ResumeError(
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
