"""Populations (`chessjax.population`): K runs in one compiled step, each member the run alone.

One population of the smoke family, its dropout off, is trained once for the module: a base
member, one with another learning rate, one with another seed (its own data order, its batches
padded to the longer ones at the steps where the two orders fall in different length buckets) and
one whose learning rate diverges. Its members are compared with the same configs trained alone by
`chessjax.train`, its resume with an uninterrupted run, and its workdirs are read by the
evaluators, the sweep's collect and the selection rule as any run's.
"""

import dataclasses
import json

import jax
import numpy as np
import pytest
from conftest import SMOKE_FAMILY, host_bits

from chessjax import compile as compiling
from chessjax import memory, population, train, workdir
from chessjax.batches import train_batches
from chessjax.data.rows import GameRows
from chessjax.members import MemberError, check_members, member_config, parse_member
from chessjax.spec import TrainSpec
from chessjax.world_model import evaluate, selection, track
from configs import cwm
from configs import lm as lm_config
from launch import sweep

pytestmark = pytest.mark.slow

FAMILY = SMOKE_FAMILY  # Its dropout off (`cwm_config`): a padded member still equals its run alone.
STEPS = 6
MEMBERS = ["base", "lr:optim.lr=3e-4,optim.warmup_steps=2", "seed:seed=1", "bad:optim.lr=1e38"]


def cwm_config(dataset):
  c = cwm.get_config(f"family={FAMILY},size=d128,smoke=True")
  c.model.dropout = 0.0
  c.data.train = str(dataset)
  c.train.update(steps=STEPS, log_every=3, eval_every=STEPS, checkpoint_every=3, eval_batches=1)
  c.train.update(max_bad_batches=2, snapshot_every=2, compile_ahead="false")
  return c


def params(run_dir, which="latest") -> list[np.ndarray]:
  restored = workdir.restore(run_dir, which=which)
  return [np.asarray(x) for x in jax.tree.leaves(restored.state["params"])]


def assert_close(a: list, b: list) -> None:
  """The parameters as one vector within 1e-4 of the other's norm, and every parameter within
  1e-4: a member's step is vmapped, so XLA sums in another order, and Adam, dividing each update
  by its gradient's own scale, turns those last bits in a near-zero gradient into differences
  of a fraction of the learning rate in a few parameters."""
  assert len(a) == len(b) > 0
  x, y = (np.concatenate([p.ravel() for p in ps]) for ps in (a, b))
  assert np.linalg.norm(x - y) <= 1e-4 * np.linalg.norm(y), np.linalg.norm(x - y) / np.linalg.norm(
    y
  )
  np.testing.assert_allclose(x, y, rtol=0, atol=1e-4)


@pytest.fixture(scope="module")
def trained(small_dataset, tmp_path_factory):
  """The population of `MEMBERS` (6 steps, checkpoints every 3) and two of them alone."""
  root = tmp_path_factory.mktemp("population")
  base = cwm_config(small_dataset)
  summaries = population.train_population(base, root / "pop", MEMBERS)
  alone = {}
  for text in ("lr:optim.lr=3e-4,optim.warmup_steps=2", "seed:seed=1"):
    name, overrides = parse_member(text)
    config = member_config(base, name, overrides)
    alone[name] = root / f"alone_{name}"
    train.train_and_evaluate(config, alone[name])
  return {"root": root, "pop": root / "pop", "summaries": summaries, "alone": alone}


def test_the_seed_member_was_padded(small_dataset):
  """The two data orders do fall in different length buckets at some steps, so the seed member
  below is compared with its run alone across padded steps."""
  spec = TrainSpec.from_config(cwm_config(small_dataset))
  lengths = []
  for seed in (0, 1):
    it, _ = train_batches(spec.replace(seed=seed), GameRows())
    lengths.append([it.plan.global_batch(i)[1] for i in range(STEPS)])
    it.close()
  assert lengths[0] != lengths[1]


def test_members_equal_their_runs_alone(trained):
  for name in ("lr", "seed"):
    assert_close(params(trained["pop"] / name), params(trained["alone"][name]))
    got = workdir.read_summary(trained["pop"] / name)
    want = workdir.read_summary(trained["alone"][name])
    assert got["steps"] == want["steps"] == STEPS and not got["aborted"]
    assert got["validation"]["loss"] == pytest.approx(want["validation"]["loss"], rel=1e-4)


def test_a_diverging_member_stops_alone(trained):
  bad = workdir.read_summary(trained["pop"] / "bad")
  assert bad["aborted"] and "consecutive" in bad["abort_reason"] and bad["steps"] < STEPS
  base = workdir.read_summary(trained["pop"] / "base")
  assert not base["aborted"] and base["steps"] == STEPS and base["bad_batches"] == 0
  assert [s["aborted"] for s in trained["summaries"]] == [False, False, False, True]
  assert workdir.finished(trained["pop"] / "bad") and workdir.finished(trained["pop"] / "base")


def test_member_workdirs_hold_their_full_config(trained):
  config = json.loads((trained["pop"] / "lr" / workdir.CONFIG).read_text())
  assert config["optim"]["lr"] == 3e-4 and config["optim"]["warmup_steps"] == 2
  assert json.loads((trained["pop"] / "seed" / workdir.CONFIG).read_text())["seed"] == 1
  assert list((trained["pop"] / "seed" / "tb").iterdir())


def test_a_resumed_population_is_bit_exact(small_dataset, trained, tmp_path):
  """The population as a crash after its step-3 checkpoint leaves it (later checkpoints and the
  members' final files gone; the member the guard aborted at step 3 has its summary already):
  rerunning the command resumes every member and ends bit for bit as the uninterrupted run."""
  import shutil

  work = tmp_path / "resumed"
  shutil.copytree(trained["pop"], work)
  for name in ("base", "lr", "seed"):
    for path in (work / name / "checkpoints").iterdir():
      if path.name.isdigit() and int(path.name) > 3:
        shutil.rmtree(path)
    shutil.rmtree(work / name / "best", ignore_errors=True)
    for file in (workdir.SUMMARY, workdir.EARLY_STOPPING):
      (work / name / file).unlink(missing_ok=True)
  summaries = population.train_population(cwm_config(small_dataset), work, MEMBERS)
  assert [s["resumed_from"] for s in summaries[:3]] == [3, 3, 3]
  for name in ("base", "lr", "seed"):
    for a, b in zip(params(work / name), params(trained["pop"] / name), strict=True):
      np.testing.assert_array_equal(a, b)
  assert summaries[3]["aborted"]


def test_a_member_continues_alone(trained, tmp_path):
  """A member's workdir is a run's: `chessjax.main`'s loop resumes it from its last checkpoint
  (here asked for two more steps)."""
  import shutil

  work = tmp_path / "seed"
  shutil.copytree(trained["pop"] / "seed", work)
  config = workdir.read_config(work)
  config.train.steps = STEPS + 2
  summary = train.train_and_evaluate(config, work)
  assert summary["resumed_from"] == STEPS and summary["steps"] == STEPS + 2


def test_a_population_that_does_not_fit_is_refused_before_step_1(small_dataset, tmp_path):
  """The memory check counts the members: under a limit that one member's share fits but all
  four do not, the population stops before its first step, naming the largest that fits."""
  base = cwm_config(small_dataset)
  base.train.memory_limit_gb = 1e-6
  with pytest.raises(memory.StepTooLarge, match="needs about") as tiny:
    population.train_population(base, tmp_path / "tiny", MEMBERS)
  base.train.memory_limit_gb = 0.6 * tiny.value.needed / 2**30  # 2.4 members' worth.
  with pytest.raises(memory.StepTooLarge, match="At most 2 members of this population fit"):
    population.train_population(base, tmp_path / "refused", MEMBERS)
  assert not list((tmp_path / "refused").glob("*/checkpoints/*"))  # No step ran.


def test_member_workdirs_read_as_runs(small_dataset, trained, capsys):
  member = trained["pop"] / "lr"
  assert evaluate.main(["--workdir", str(member), "--data", f"t={small_dataset}:test",
                        "--max-games", "8", "--boards", "0"]) == 0  # fmt: skip
  assert json.loads((member / workdir.EVAL_DIR / "t.json").read_text())["games"] == 8
  assert track.main(["--workdir", str(member), "--moves", "e2e4 e7e5 g1f3"]) == 0
  assert "exact" in capsys.readouterr().out.lower()
  rows = {row["workdir"]: row for row in sweep.collect(trained["pop"])}
  assert len(rows) == 4 and rows[str(member)]["lr"] == 3e-4
  assert rows[str(trained["pop"] / "bad")]["aborted"]
  run = selection.read_run(member)
  assert run.finished and run.lr == 3e-4 and run.steps == STEPS


def test_keys_that_change_the_program_are_refused(small_dataset, tmp_path):
  base = cwm_config(small_dataset)
  for member, words in (
    ("a:data.batch_size=16", "data.batch_size changes the model, the batch's shapes"),
    ("a:model.dtype=bfloat16", "model.dtype changes the model"),
    ("a:optim.schedule=constant", "optim.schedule changes"),
    ("a:train.log_every=2", "train.log_every is the population's own"),
    ("a:optim.lrr=1", "optim.lrr is the population's own"),
  ):
    with pytest.raises(MemberError, match=words.replace("(", r"\(")):
      population.train_population(base, tmp_path / "refused", ["ok", member])
  with pytest.raises(MemberError, match="given twice"):
    population.train_population(base, tmp_path / "refused", ["a", "a:seed=2"])
  with pytest.raises(MemberError, match="is not KEY=VALUE"):
    parse_member("a:seed")
  other = base.copy_and_resolve_references()
  other.family = "gated_deltanet"
  with pytest.raises(MemberError, match="differ in family"):
    check_members([("a", base), ("b", other)])
  assert not (tmp_path / "refused").exists()  # Refused before anything was written.


def test_a_population_that_does_not_fit_names_the_largest_that_would():
  assert compiling.largest_population(needed=10 * 2**30, members=4, limit=6 * 2**30) == 2
  hint = compiling._population_hint(None, 4, 6 * 2**30)(10 * 2**30, 64)
  assert "At most 2 members" in hint and "--population 2" in hint
  with pytest.raises(memory.StepTooLarge, match="At most 2 members"):
    memory.check(10 * 2**30, 6 * 2**30, "the train step (...)", hint=hint)


def test_language_model_members_equal_their_runs_alone(lm_sample, tmp_path):
  """A language model's member with another seed (its RAP annotations drawn from it) and another
  learning rate equals its run alone (one bucket: no padding, so dropout draws the run alone's
  masks)."""
  base = lm_config.get_config("family=gpt2,size=tiny,notation=rap,steps=4")
  base.data.train, base.data.batch_size = str(lm_sample["data"]), 8
  base.data.max_len, base.data.bucket_lengths = 256, (256,)  # RAP rows of 60 plies fit.
  base.train.update(log_every=2, checkpoint_every=4, eval_batches=1, compile_ahead="false")
  members = ["a", "b:seed=3,optim.lr=1e-3"]
  population.train_population(base, tmp_path / "pop", members)
  for text in members[1:]:
    name, overrides = parse_member(text)
    alone = tmp_path / f"alone_{name}"
    train.train_and_evaluate(member_config(base, name, overrides), alone)
    assert_close(params(tmp_path / "pop" / name), params(alone))


def test_population_specs_differ_only_in_member_keys(small_dataset):
  base = cwm_config(small_dataset)
  specs = [TrainSpec.from_config(member_config(base, n, o)) for n, o in map(parse_member, MEMBERS)]
  fields = {f.name for f in dataclasses.fields(TrainSpec)} - {"seed", "optim"}
  for spec in specs[1:]:
    assert all(getattr(spec, f) == getattr(specs[0], f) for f in fields if f != "model")


def test_a_population_step_picks_its_scans_for_every_members_rows(small_dataset, monkeypatch):
  """`auto` resolves a recurrence for the population's shape: traced, the step counts its K
  members in each call's rows (`chessjax.ops.impl.members`), the validation step too."""
  from chessjax.ops import impl
  from chessjax.task import get_task

  base = cwm_config(small_dataset)
  specs = [TrainSpec.from_config(member_config(base, n, o)) for n, o in [("a", {}), ("b", {})]]
  pop = population.Population(specs, get_task(base))
  seen, resolve = [], impl.resolve

  def spy(*args, **kwargs):
    seen.append(impl._MEMBERS.k)
    return resolve(*args, **kwargs)

  monkeypatch.setattr(impl, "resolve", spy)
  rows = pop.task.rows.batch([None] * 2, 16, max_len=None, epoch=0)
  jax.eval_shape(pop.step_fn, pop.state, pop.device_batch([rows, rows]))
  assert seen and set(seen) == {2}
  seen.clear()
  members = pop.state["members"]
  batch = {k: rows[k] for k in pop.task.batch_keys}
  jax.eval_shape(pop.eval_step, members["params"], members["model_state"], batch)
  assert seen and set(seen) == {2}


def test_members_differing_in_optimizer_numbers_share_one_model_build(small_dataset, monkeypatch):
  """A learning-rate sweep's members have the same initial values: the population builds their
  model once (the other seed's member builds its own), and each member's initial state is, bit
  for bit, the one its run alone starts from."""
  from chessjax import populations, step
  from chessjax.task import get_task

  base = cwm_config(small_dataset)
  configs = [member_config(base, *parse_member(m)) for m in MEMBERS]
  specs, task = [TrainSpec.from_config(c) for c in configs], get_task(base)
  built = []
  real = step.build_model
  monkeypatch.setattr(step, "build_model", lambda s, t: built.append(s.seed) or real(s, t))
  pop = populations.Population(specs, task)
  assert built == [0, 1]  # base (lr and bad share it), then the seed member's.
  monkeypatch.undo()
  for i, spec in enumerate(specs):
    alone = step.new_state(spec, task)[-1]
    ours = jax.tree.map(lambda x, i=i: x[i], pop.state["members"])
    for x, y in zip(jax.tree.leaves(ours), jax.tree.leaves(alone), strict=True):
      np.testing.assert_array_equal(host_bits(x), host_bits(y))
