"""A run started from another run's parameters (`--config.init.workdir`, `chessjax.init_from`):
at learning rate 0 it keeps the source's parameters bit for bit (one run, a population, two
processes, a language model); another model is refused before step 1, naming the parameter;
`init.parts=backbone` crosses tasks; a rerun resumes its own checkpoint.

One world-model source (the smoke family, 4 steps, checkpoints at steps 2 and 4, validated at
both) is trained once for the module.
"""

import json
import re

import jax
import numpy as np
import pytest
from conftest import REPO, SMOKE_FAMILY
from multiprocess import run

from chessjax import init_from, population, train, workdir
from chessjax.checkpointing import Checkpointer
from chessjax.spec import TrainSpec
from configs import cwm
from configs import lm as lm_config

LENGTH = 32  # One training shape, one compilation.


def wm_config(dataset, family=SMOKE_FAMILY, size="d128", **train):
  c = cwm.get_config(f"family={family},size={size},smoke=True")
  c.data.train = str(dataset)
  c.data.max_len, c.data.bucket_lengths = LENGTH, (LENGTH,)
  c.train.update(steps=2, log_every=1, eval_every=2, eval_batches=1, checkpoint_every=2)
  c.train.update(compile_ahead="false", **train)
  return c


def params(run_dir, which=None, step=None) -> dict:
  state = workdir.restore(run_dir, which, step=step).state
  return init_from._flat(state["params"])


def assert_bitwise(a: dict, b: dict, names=None) -> None:
  names = list(a) if names is None else names
  assert names and set(names) <= set(a) and set(names) <= set(b)
  for n in names:
    np.testing.assert_array_equal(np.asarray(a[n]), np.asarray(b[n]), err_msg=n)


@pytest.fixture(scope="module")
def source(small_dataset, tmp_path_factory):
  run_dir = tmp_path_factory.mktemp("init") / "source"
  train.train_and_evaluate(wm_config(small_dataset, steps=4), run_dir)
  assert Checkpointer(run_dir).steps() == [2, 4] and (run_dir / "best").is_dir()
  return run_dir


# ------------------------------------------------------------------------------------------------
# The config and the comparison (no training)


@pytest.mark.parametrize(
  "change, message",
  [
    (dict(parts="heads"), "init.parts must be one of"),
    (dict(checkpoint="newest"), "init.checkpoint must be best, latest or a step"),
    (dict(workdir="", parts="backbone"), "need init.workdir"),
    (dict(source="x"), r"unknown config key\(s\) init.source"),
  ],
)
def test_wrong_init_values_are_refused(change, message):
  c = cwm.get_config("family=slice,size=d128")
  c.init.update(workdir="runs/x")
  with c.unlocked():
    c.init.update(change)
  with pytest.raises(ValueError, match=message):
    TrainSpec.from_config(c)


def test_the_spec_reads_the_checkpoint_and_an_old_config_without_init():
  c = cwm.get_config("family=slice,size=d128")
  assert TrainSpec.from_config(c).init == TrainSpec.from_config(c).init.__class__()
  c.init.update(workdir="runs/x", checkpoint="500")
  init = TrainSpec.from_config(c).init
  assert (init.which, init.step) == (None, 500)
  c.init.checkpoint = "best"
  assert (TrainSpec.from_config(c).init.which, TrainSpec.from_config(c).init.step) == ("best", None)
  old = c.to_dict()
  del old["init"]
  assert TrainSpec.from_config(type(c)(old)).init.workdir == ""


def _shapes(**named):
  return {n: jax.ShapeDtypeStruct(s, np.float32) for n, s in named.items()}


def test_plan_names_the_first_parameter_that_differs_and_what_backbone_leaves():
  wm = TrainSpec.from_config(cwm.get_config("family=slice,size=d128"))
  lm = TrainSpec.from_config(lm_config.get_config("family=slice,size=d128"))
  big = TrainSpec.from_config(cwm.get_config("family=slice,size=d256"))
  block = {"backbone.blocks.0.w": (128, 128)}
  src = _shapes(**{"backbone.embed.embedding": (20482, 128), **block, "head.kernel": (128, 1878)})
  dst = _shapes(**{"backbone.embed.embedding": (77, 128), **block, "head.linear.kernel": (128, 77)})
  assert init_from.plan(src, src, wm, wm, "all") == (list(src), [])
  with pytest.raises(init_from.InitError, match=r"embedding: the source's is \(20482, 128\)"):
    init_from.plan(src, dst, wm, lm, "all")
  taken, left = init_from.plan(src, dst, wm, lm, "backbone")
  assert taken == ["backbone.blocks.0.w"]
  assert init_from.left_parts(left) == ["backbone.embed", "head.linear"]
  assert init_from.plan(src, src, wm, wm, "backbone")[1] == ["head.kernel"]  # Never the head.
  wide = _shapes(**{"backbone.embed.embedding": (20482, 256), "backbone.blocks.0.w": (256, 256)})
  with pytest.raises(init_from.InitError, match=r"another size.*\(20482, 128\).*\(20482, 256\)"):
    init_from.plan(src, wide, wm, big, "backbone")


# ------------------------------------------------------------------------------------------------
# Training from the source


@pytest.mark.slow
def test_lr_0_keeps_the_source_bitwise_and_a_rerun_resumes_its_own(source, small_dataset, tmp_path):
  """Two steps at learning rate 0 from the source's best checkpoint: the same parameters bit for
  bit, a fresh optimizer and step, the source in config.json, init.json and the summary; a rerun
  (one step more) resumes the run's own checkpoint and never reads the source again."""
  c = wm_config(small_dataset, checkpoint_every=1)
  c.optim.lr = 0.0
  c.init.workdir = str(source)
  run_dir = tmp_path / "ft"
  summary = train.train_and_evaluate(c, run_dir)
  best = workdir.restore(source)
  assert best.checkpoint == "best"
  assert_bitwise(params(run_dir, "latest"), init_from._flat(best.state["params"]))
  record = {
    "workdir": str(source), "checkpoint": "best", "step": best.step, "parts": "all", "left": [],
    "source": {"task": "world_model", "family": SMOKE_FAMILY, "size": "d128"},
  }  # fmt: skip
  assert summary["init"] == record == init_from.read_record(run_dir)
  assert json.loads((run_dir / workdir.CONFIG).read_text())["init"]["workdir"] == str(source)
  assert summary["steps"] == 2 and summary["resumed_from"] == 0
  state = workdir.restore(run_dir, "latest").state
  counts = [int(x) for name, x in init_from._flat(state["opt_state"]).items() if "count" in name]
  assert int(state["step"]) == 2 and counts and set(counts) == {2}  # A fresh optimizer.
  c.train.steps, c.init.workdir = 3, str(tmp_path / "absent")  # Read again, it would fail.
  summary = train.train_and_evaluate(c, run_dir)
  assert summary["resumed_from"] == 2 and summary["steps"] == 3 and summary["init"] == record
  assert_bitwise(params(run_dir, "latest"), init_from._flat(best.state["params"]))


@pytest.mark.slow
@pytest.mark.parametrize("family, size", [(SMOKE_FAMILY, "d256"), ("transformer", "d128")])
def test_another_size_or_family_is_refused_before_step_1(source, small_dataset, tmp_path, family,
                                                          size):  # fmt: skip
  c = wm_config(small_dataset, family=family, size=size)
  c.init.workdir = str(source)
  with pytest.raises(init_from.InitError) as e:
    train.train_and_evaluate(c, tmp_path / "x")
  text = str(e.value)
  assert "parameter backbone." in text and f"this run world_model {family} {size}" in text
  if size == "d256":
    shapes = re.search(r"the source's is (\(.*\)) float32, this run's (\(.*\)) float32", text)
    assert shapes and shapes[1] != shapes[2], text
  assert Checkpointer(tmp_path / "x").steps() == []  # Nothing trained.


@pytest.mark.slow
def test_the_command_line_refuses_in_one_line(source, small_dataset, tmp_path):
  args = [
    "-m", "chessjax.main", f"--config={REPO / 'configs' / 'cwm.py'}:family={SMOKE_FAMILY},"
    "size=d256,smoke=True", f"--workdir={tmp_path / 'x'}", f"--config.data.train={small_dataset}",
    f"--config.data.max_len={LENGTH}", f"--config.data.bucket_lengths=({LENGTH},)",
    f"--config.init.workdir={source}",
  ]  # fmt: skip
  procs = __import__("multiprocess").start(args, tmp_path, processes=1, devices=1)
  procs.wait()
  log = procs.logs()[0]
  assert procs.returncodes == [1], log
  assert log.strip().splitlines()[-1].startswith("error: init.workdir: parameter backbone."), log


@pytest.mark.slow
def test_backbone_across_tasks(source, lm_sample, tmp_path):
  """A language model (the same family and size) from the world model: its blocks taken, its
  token embedding (another vocabulary) and head left at the fresh initialisation, and named."""
  c = lm_config.get_config("family=slice,size=d128,notation=uci,train=S,steps=2")
  c.data.train, c.data.batch_size = str(lm_sample["data"]), 8
  c.data.max_len, c.data.bucket_lengths = 128, (128,)
  c.train.update(compile_ahead="false", eval_batches=1, log_every=1)
  c.optim.lr = 0.0
  c.init.update(workdir=str(source), parts="backbone")
  summary = train.train_and_evaluate(c, tmp_path / "lm")
  assert summary["init"]["left"] == ["backbone.embed", "head.linear"]
  got, fresh = (
    params(tmp_path / "lm", "latest"),
    init_from._flat(workdir.initial(c).state["params"]),
  )
  taken = [n for n in got if not n.startswith(("backbone.embed.", "head."))]
  assert len(taken) > 5
  assert_bitwise(got, params(source), taken)
  assert_bitwise(got, fresh, [n for n in got if n not in taken])


@pytest.mark.slow
def test_a_language_model_from_a_language_model(trained_lm, lm_sample, tmp_path):
  c = lm_config.get_config("family=gpt2,size=tiny,notation=uci,train=S,steps=2")
  c.data.train, c.data.batch_size = str(lm_sample["data"]), 8
  c.data.max_len, c.data.bucket_lengths = 128, (128,)
  c.train.update(compile_ahead="false", eval_batches=1, log_every=1)
  c.optim.lr = 0.0
  c.init.update(workdir=str(trained_lm), checkpoint="latest")
  summary = train.train_and_evaluate(c, tmp_path / "lm")
  assert summary["init"]["checkpoint"] == "latest" and summary["init"]["left"] == []
  assert_bitwise(params(tmp_path / "lm", "latest"), params(trained_lm, "latest"))


@pytest.mark.slow
def test_population_members_each_from_their_own_source(source, small_dataset, tmp_path):
  base = wm_config(small_dataset)
  base.optim.lr = 0.0
  members = [f"a:init.workdir={source}", f"b:init.workdir={source},init.checkpoint=2", "c"]
  summaries = population.train_population(base, tmp_path / "pop", members)
  assert [s["init"]["step"] for s in summaries[:2]] == [workdir.restore(source).step, 2]
  assert "init" not in summaries[2]
  assert_bitwise(params(tmp_path / "pop" / "a", "latest"), params(source))
  assert_bitwise(params(tmp_path / "pop" / "b", "latest"), params(source, step=2))
  with pytest.raises(AssertionError):  # The member without a source starts fresh.
    assert_bitwise(params(tmp_path / "pop" / "c", "latest"), params(source))


@pytest.mark.slow
@pytest.mark.multiprocess
def test_two_processes_start_from_a_one_process_run(source, small_dataset, tmp_path):
  args = [
    "-m", "chessjax.main", f"--config={REPO / 'configs' / 'cwm.py'}:family={SMOKE_FAMILY},"
    "size=d128,smoke=True", f"--workdir={tmp_path / 'two'}",
    f"--config.data.train={small_dataset}", f"--config.data.max_len={LENGTH}",
    f"--config.data.bucket_lengths=({LENGTH},)", "--config.train.steps=2",
    "--config.train.compile_ahead=false", "--config.data.val_split=none", "--config.optim.lr=0",
    f"--config.init.workdir={source}",
  ]  # fmt: skip
  logs = run(args, tmp_path, tag="two")
  assert "4 devices, 2 processes" in logs[0] and "initialised from" in logs[0]
  assert_bitwise(params(tmp_path / "two", "latest"), params(source))
  assert workdir.read_summary(tmp_path / "two")["init"]["checkpoint"] == "best"
