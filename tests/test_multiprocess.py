"""The public commands as 2 local JAX processes of 2 CPU devices each, against 1 process of 4.

Every check runs the commands as subprocesses (`tests/multiprocess.py`: free port, gloo, a hard
deadline, every process's log on failure); a one-process, one-device reference runs in this
process. The runs are shared: one 2-process and one 1-process training per task, reused by the
parity, resume, elastic and evaluation checks.
"""

import json
import shutil
import signal
import socket
import time

import jax
import numpy as np
import pytest
from conftest import REPO, SMOKE_FAMILY
from multiprocess import PEER_SECONDS, free_port, run, start

from chessjax import workdir as workdirs

pytestmark = pytest.mark.slow

FAMILY = SMOKE_FAMILY
STEPS, CHECKPOINT_EVERY = 2, 1
WM_OVERRIDES = (
  f"--config.train.steps={STEPS}",
  f"--config.train.checkpoint_every={CHECKPOINT_EVERY}",
  f"--config.train.log_every={CHECKPOINT_EVERY}",
  "--config.train.compile_ahead=false",
)
# Validation (at the last step) in the reference runs (`runs`, compared by the parity and read
# by the evaluations) and the population's; the runs compared with them by their parameters name
# no validation split, so they skip it (a run always validates at its last step when it has one).
VALIDATED, UNVALIDATED = f"--config.train.eval_every={STEPS}", "--config.data.val_split=none"


def wm_train(dataset, work, *overrides, validate=False):
  return [
    "-m", "chessjax.main",
    f"--config={REPO / 'configs' / 'cwm.py'}:family={FAMILY},size=d128,smoke=True",
    f"--workdir={work}", f"--config.data.train={dataset}", "--config.data.max_len=32",
    "--config.data.bucket_lengths=(32,)", *WM_OVERRIDES, VALIDATED if validate else UNVALIDATED,
    *overrides,
  ]  # fmt: skip


def params_of(work):
  return [
    np.asarray(x) for x in jax.tree.leaves(workdirs.restore(work, which="latest").state["params"])
  ]


def assert_params_close(a, b):
  """Equal up to the order of the gradient's sums over devices: the same run on another process
  layout sums the 4 devices' gradients in another order (last bits), and Adam, dividing each
  update by the gradient's own scale, turns last-bit differences of a near-zero gradient into
  differences up to the learning rate (1e-3) in a few of 2.6M parameters."""
  for x, y in zip(params_of(a), params_of(b), strict=True):
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-4)


def assert_params_equal(a, b):
  for x, y in zip(params_of(a), params_of(b), strict=True):
    np.testing.assert_array_equal(x, y)


def drop_checkpoints_after(work, step: int) -> None:
  """WORK as it was when checkpoint `step` was the newest: later ones and the final files gone."""
  for path in (work / "checkpoints").iterdir():
    if path.name.isdigit() and int(path.name) > step:
      shutil.rmtree(path)
  for name in (workdirs.SUMMARY, workdirs.EARLY_STOPPING):
    (work / name).unlink(missing_ok=True)
  shutil.rmtree(work / "best", ignore_errors=True)


def test_the_coordinators_port_is_free_and_outside_the_ephemeral_range():
  """Drawn below the kernel's ephemeral range, where no other socket is handed a port unasked,
  and free on every address: a port something listens on is never drawn."""
  import multiprocess

  low = multiprocess._ephemeral_low()
  ports = {free_port() for _ in range(20)}
  assert all(1024 <= p < low for p in ports) and len(ports) > 1
  with socket.socket() as busy:
    busy.bind(("127.0.0.1", min(ports)))
    busy.listen()
    assert not multiprocess._bindable(min(ports))
  assert multiprocess._bindable(min(ports))


@pytest.fixture(scope="module")
def runs(small_dataset, tmp_path_factory):
  """The world-model smoke training as 2 processes x 2 devices and as 1 process x 4 devices."""
  root = tmp_path_factory.mktemp("multiprocess")
  two = run(wm_train(small_dataset, root / "two", validate=True), root, tag="two")
  one = run(
    wm_train(small_dataset, root / "one", validate=True), root, processes=1, devices=4, tag="one"
  )
  return {"root": root, "two": root / "two", "one": root / "one", "logs2": two, "logs1": one}


def test_two_processes_train_like_one_with_four_devices(runs):
  assert "4 devices, 2 processes" in runs["logs2"][0]
  assert_params_close(runs["two"], runs["one"])
  two = workdirs.read_summary(runs["two"])
  one = workdirs.read_summary(runs["one"])
  assert two["validation"]["loss"] == pytest.approx(one["validation"]["loss"], rel=1e-5)
  # Each process read its own half of every batch: 4 rows of each global batch of 8.
  for i, log in enumerate(runs["logs2"]):
    assert f"process {i} of 2 read {4 * STEPS} records" in log, log[-3000:]
  assert f"process 0 of 1 read {8 * STEPS} records" in runs["logs1"][0]


def test_one_process_killed_in_a_checkpoint_is_named_and_a_rerun_is_bit_exact(small_dataset, runs):
  """SIGKILL of process 1 while the step-1 checkpoint is being written: process 0, waiting in the
  checkpoint's barrier or the next collective, names process 1 within `PEER_SECONDS` (plus its
  checks' period) and stops; the same command again resumes and ends bit for bit as the
  uninterrupted 2-process run."""
  work = runs["root"] / "killed"
  procs = start(wm_train(small_dataset, work), runs["root"], tag="killed")
  deadline = time.monotonic() + 240
  checkpoints = work / "checkpoints"
  while not (
    checkpoints.is_dir()
    and any(p.name.startswith(f"{CHECKPOINT_EVERY}") for p in checkpoints.iterdir())
  ):
    assert time.monotonic() < deadline and procs.procs[1].poll() is None, procs.report()
    time.sleep(0.002)
  procs.kill([1])
  killed_at = time.monotonic()
  procs.wait(deadline=time.monotonic() - procs.started + PEER_SECONDS + 30)
  named_within = time.monotonic() - killed_at
  assert procs.returncodes[0] == 1, procs.report()
  assert not (work / workdirs.SUMMARY).exists(), "the run finished before the kill"
  survivor = procs.logs()[0]
  assert "error: process 1 of 2 stopped answering" in survivor, procs.report()
  assert "training resumes from its last checkpoint" in survivor
  assert named_within < PEER_SECONDS + 10, named_within
  run(wm_train(small_dataset, work), runs["root"], tag="rerun")
  assert workdirs.read_summary(work)["resumed_from"] <= CHECKPOINT_EVERY
  assert_params_equal(work, runs["two"])


@pytest.mark.parametrize("steps_per_call", [1, 3])
def test_sigterm_to_one_process_saves_both_at_one_step(small_dataset, runs, steps_per_call):
  """SIGTERM (a preemption notice) to process 1 only: JAX's preemption service tells process 0,
  both save one checkpoint at the step they agree on, write the summary as preempted and exit with
  status 75 (that a rerun resumes there bit for bit is tested with one process, test_train.py);
  with 3 steps per call, at the end of a call (the sync point JAX picks is the loop's next call,
  which a count of steps would skip)."""
  from chessjax.checkpointing import Checkpointer
  from chessjax.preemption import EXIT_STATUS

  work, steps = runs["root"] / f"preempted_k{steps_per_call}", 400
  quiet = ("checkpoint_every", "log_every", "eval_every")
  args = wm_train(
    small_dataset,
    work,
    f"--config.train.steps={steps}",
    "--config.train.progress_seconds=0",
    f"--config.train.steps_per_call={steps_per_call}",
    *(f"--config.train.{k}=1000" for k in quiet),
  )
  procs = start(args, runs["root"], tag="preempted")
  deadline = time.monotonic() + 240
  while f"step 3/{steps}" not in procs.logs()[0]:
    assert time.monotonic() < deadline and procs.procs[1].poll() is None, procs.report()
    time.sleep(0.01)
  procs.procs[1].send_signal(signal.SIGTERM)
  signalled = time.monotonic()
  procs.wait(deadline=time.monotonic() - procs.started + 60)
  assert time.monotonic() - signalled < 60
  assert procs.returncodes == [EXIT_STATUS, EXIT_STATUS], procs.report()
  summary = workdirs.read_summary(work)
  stop = summary["steps"]
  assert summary["preempted"] and 3 <= stop < steps and stop % steps_per_call == 0, summary
  for log in procs.logs():
    assert f"stopped at step {stop} with a checkpoint there" in log, procs.report()
  assert Checkpointer(work).steps() == [stop] and not workdirs.finished(work)


def test_a_population_as_two_processes_trains_like_one(small_dataset, runs):
  """A population as 2 processes x 2 devices (members replicated, the batch sharded as for one
  run): its member of the shared config (another's seed differs) ends as that config's run alone
  on 2 processes does, itself as on 1 process of 4 devices (above)."""
  work = runs["root"] / "pop_two"
  args = ["-m", "chessjax.population", *wm_train(small_dataset, work, validate=True)[2:]]
  logs = run([*args, "--member=a", "--member=b:seed=1"], runs["root"], tag="pop_two")
  assert "a population of 2" in logs[0] and "4 devices, 2 processes" in logs[0]
  assert_params_close(work / "a", runs["two"])
  assert workdirs.read_summary(work / "b")["steps"] == STEPS


@pytest.mark.parametrize("written_by, resumed_by", [("two", 1), ("one", 2)])
def test_elastic_resume(small_dataset, runs, written_by, resumed_by):
  """A checkpoint written by 2 processes continues in 1 (and one of 1 in 2) with the same data
  order (the plan's global batches do not depend on the process count): the end matches the run
  that wrote it."""
  work = runs["root"] / f"elastic_{written_by}"
  shutil.copytree(runs[written_by], work)
  drop_checkpoints_after(work, CHECKPOINT_EVERY)
  devices = 4 // resumed_by
  logs = run(
    wm_train(small_dataset, work), runs["root"], processes=resumed_by, devices=devices,
    tag=f"elastic_{written_by}",
  )  # fmt: skip
  assert f"resumed from step {CHECKPOINT_EVERY}" in logs[0]
  assert_params_close(work, runs[written_by])


def wm_evaluate(work, data, *extra):
  return ["-m", "chessjax.world_model.evaluate", f"--workdir={work}", "--data", data, *extra]


TIMING = ("compile_seconds", "eval_seconds", "games_per_s", "steps_per_s")


def test_evaluation_by_two_processes_equals_one(small_dataset, runs, capsys):
  """The test split (35 games) in global batches of 12, the last one 11 games and a padding row:
  2 processes score every game once, as 1 process (this one, one device) does, from a checkpoint
  written by 2."""
  from chessjax.world_model import evaluate

  work, results = runs["two"], []
  args = wm_evaluate(work, f"test={small_dataset}:test", "--batch-size=12", "--boards=1")
  logs = run(args, runs["root"], tag="evaluate2")
  assert "report:" in logs[0] and "report:" not in logs[1]
  results.append(json.loads((work / "eval" / "test.json").read_text()))
  assert evaluate.main(args[2:]) == 0 and "report:" in capsys.readouterr().out
  results.append(json.loads((work / "eval" / "test.json").read_text()))
  two, one = ({k: v for k, v in r.items() if k not in TIMING} for r in results)
  assert two["dataset"]["games"] % 12 and two["batch_size"] == 12  # A partial last batch.
  assert two["first_error_steps"] == one["first_error_steps"]
  assert -2 not in two["first_error_steps"]
  assert two.pop("boards") == one.pop("boards")
  assert two.keys() == one.keys()
  for key in two:
    if isinstance(two[key], float):
      assert two[key] == pytest.approx(one[key], rel=1e-6), key
    elif key == "bins":  # Counts exactly, rates as the floats above.
      assert two[key].keys() == one[key].keys()
      for k, v in one[key].items():
        if isinstance(v, list):
          v = [x if x is None or isinstance(x, int) else pytest.approx(x, rel=1e-6) for x in v]
        assert two[key][k] == v, (key, k)
    else:
      assert two[key] == one[key], key
  assert sum(two["bins"]["steps"]) == two["steps"]


def test_track_reads_a_two_process_checkpoint(runs, capsys):
  from chessjax.world_model import track

  assert track.main([f"--workdir={runs['two']}", "--moves", "e2e4 e7e5"]) == 0
  assert f"checkpoint step {STEPS}, 2 plies" in capsys.readouterr().out


def test_a_missing_data_path_on_one_host_stops_every_process(small_dataset, runs):
  missing = runs["root"] / "no_such_data"
  args = lambda i: wm_train(small_dataset if i == 0 else missing, runs["root"] / "bad")  # noqa: E731
  procs = start(args, runs["root"], tag="bad_path").wait(deadline=120)
  assert all(code != 0 for code in procs.returncodes), procs.report()
  logs = procs.logs()
  assert "FileNotFoundError" in logs[1] and str(missing) in logs[1], procs.report()
  assert "process 1 of 2 failed" in logs[0] and str(missing) in logs[0], procs.report()


def test_an_unreadable_shard_on_one_host_stops_every_process(small_dataset, runs):
  bad = runs["root"] / "bad_shard"
  shutil.copytree(small_dataset, bad)
  for shard in bad.glob("test*"):
    if shard.suffix not in (".npy", ".json"):
      shard.write_bytes(b"not an array_record file" * 10)
  args = lambda i: wm_evaluate(runs["two"], f"test={small_dataset if i == 0 else bad}:test")  # noqa: E731
  procs = start(args, runs["root"], tag="bad_shard").wait(deadline=120)
  assert all(code != 0 for code in procs.returncodes), procs.report()
  logs = procs.logs()
  assert "process 1 of 2 failed" in logs[0], procs.report()


def lm_train(data, work):
  return [
    "-m", "chessjax.main",
    f"--config={REPO / 'configs' / 'lm.py'}:family=gpt2,size=tiny,notation=uci,train=S,steps=4",
    f"--workdir={work}", f"--config.data.train={data}", "--config.data.batch_size=8",
    "--config.data.max_len=128", "--config.data.bucket_lengths=(128,)",
    "--config.train.eval_batches=2", "--config.train.eval_every=4", "--config.train.log_every=2",
    "--config.train.checkpoint_every=2", "--config.train.compile_ahead=false",
  ]  # fmt: skip


@pytest.fixture(scope="module")
def lm_runs(lm_sample, tmp_path_factory):
  """GPT-2 tiny as a UCI language model, 4 steps, as 2 processes x 2 devices and 1 x 4."""
  root = tmp_path_factory.mktemp("multiprocess_lm")
  run(lm_train(lm_sample["data"], root / "two"), root, tag="lm_two")
  run(lm_train(lm_sample["data"], root / "one"), root, processes=1, devices=4, tag="lm_one")
  return {"root": root, "two": root / "two", "one": root / "one"}


def test_language_model_two_processes_train_like_one(lm_runs):
  assert_params_close(lm_runs["two"], lm_runs["one"])


def test_language_model_evaluation_and_analyses_as_two_processes(lm_sample, lm_runs):
  """Perplexity and probing by 2 processes equal those of 1 (this process, one device);
  token_roles and the linear probe run as 2 processes, process 0 alone printing and writing."""
  from chessjax.lm import evaluate

  work, data = lm_runs["two"], lm_sample["data"]
  logs = run(
    ["-m", "chessjax.lm.evaluate", f"--workdir={work}", "--latest", "--sets", lm_sample["sets"],
     "--data", f"dev={data}:dev", "--batch-size=16"],
    lm_runs["root"], tag="lm_evaluate",
  )  # fmt: skip
  assert "results:" in logs[0] and "results:" not in logs[1]
  two = json.loads((work / "eval" / "results.json").read_text())
  one = evaluate.evaluate(
    work, sets=lm_sample["sets"], data={"dev": (data, "dev")}, which="latest", batch_size=16
  )
  assert two["probes"] == json.loads(json.dumps(one["probes"]))  # Argmax answers: the same.
  ppl_two, ppl_one = two["perplexity"]["dev"], one["perplexity"]["dev"]
  assert ppl_two.pop("dataset") == ppl_one.pop("dataset")
  assert ppl_two["moves"] == ppl_one["moves"] and ppl_two == pytest.approx(ppl_one, rel=1e-6)
  logs = run(
    ["-m", "chessjax.lm.token_roles", f"--workdir={work}", "--checkpoint=latest",
     "--data", f"dev={data}:dev", "--max-games=12", "--batch-size=8"],
    lm_runs["root"], tag="lm_token_roles",
  )  # fmt: skip
  assert (work / "eval" / "token_roles.json").exists() and logs[0].strip() and logs[1]
  logs = run(
    ["-m", "chessjax.lm.linear_probe", f"--workdir={work}", "--which=latest", "--max-games=8",
     "--steps=5", "--max-train-positions=100", "--batch-size=64"],
    lm_runs["root"], tag="lm_linear_probe",
  )  # fmt: skip
  assert "written:" in logs[0] and "written:" not in logs[1]
  assert (work / "eval" / "linear_probe.json").exists()
