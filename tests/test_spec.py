"""The config read once (`chessjax.spec.TrainSpec`) and the workdir's own files
(`chessjax.workdir`): defaults held once, old configs read, wrong keys and values refused, one
rule of a finished run."""

import json

import ml_collections
import pytest

from chessjax import runtime, workdir
from chessjax import spec as spec_lib
from chessjax.early_stopping import EarlyStopping
from chessjax.spec import DataSpec, LoopSpec, OptimSpec, TrainSpec
from configs import cwm
from configs import lm as lm_config

# Keys the config files gained with the spec (2026-11-27): a workdir's config.json written before
# lacks them, and must mean what it meant.
ADDED = {
  "train": ("epochs", "early_stopping_patience", "memory_limit_gb"),
  "data": ("max_train_games",),
  "optim": ("warmup_fraction", "decay_all"),
}


def test_the_config_files_blocks_are_the_spec_defaults():
  c = cwm.get_config("family=slice,size=d128")
  for block, cls in (("train", LoopSpec), ("data", DataSpec)):
    defaults = spec_lib.defaults(cls)
    assert set(c[block]) == {f for f in cls.__dataclass_fields__}
    kept = {k: v for k, v in c[block].items() if k in defaults and v == defaults[k]}
    assert len(kept) >= len(defaults) - 6, (block, kept)  # Each file overrides only a few.
  lm = lm_config.get_config("family=gpt2,size=tiny")
  assert set(lm.train) == set(c.train) and set(lm.data) == set(c.data)
  assert set(lm.optim) == set(c.optim) == {f for f in OptimSpec.__dataclass_fields__}


def test_an_old_config_json_reads_as_it_did(tmp_path):
  config = cwm.get_config("family=gated_deltanet,size=d128,smoke=True")
  old = config.to_dict()
  for block, keys in ADDED.items():
    for key in keys:
      old[block].pop(key)
  (tmp_path / workdir.CONFIG).write_text(json.dumps(old))
  spec = TrainSpec.from_config(workdir.read_config(tmp_path))
  assert spec == TrainSpec.from_config(config)
  assert spec.total_steps == config.train.steps == 20 and spec.warmup_steps == 5
  assert spec.dtype == "float32" and spec.micro_batches == 1 and not spec.optim.decay_all
  del old["task"]  # Written before tasks existed: the world model.
  assert TrainSpec.from_config(ml_collections.ConfigDict(old)).task == "world_model"


def test_derived_values():
  c = lm_config.get_config("family=slice,size=d128,epochs=2")
  spec = TrainSpec.from_config(c, epoch_steps=50)
  assert spec.total_steps == 100 and spec.warmup_steps == 10  # 10% of the run.
  assert float(spec.lr_at(9)) == pytest.approx(5e-4, rel=1e-6) and float(spec.lr_at(100)) == 0.0
  unknown = TrainSpec.from_config(c)  # Read back without its training data.
  assert unknown.total_steps is None
  with pytest.raises(ValueError, match="schedule's length is unknown"):
    unknown.lr_at(0)
  c = cwm.get_config("family=slice,size=d128")
  c.train.memory_limit_gb = 2.0
  assert TrainSpec.from_config(c).memory_limit_bytes == 2 * 2**30


@pytest.mark.parametrize(
  "change, message",
  [
    (lambda c: c.train.update(epochs=2), "both set"),
    (lambda c: c.train.update(micro_batches=3), r"train.micro_batches=3 must be >= 1 and divide"),
    (lambda c: c.train.update(compile_ahead="sometimes"), "compile_ahead must be auto"),
    (lambda c: c.train.update(profile="7"), "train.profile must be START:STOP"),
    (lambda c: c.train.update(log_every=0), "train.log_every must be >= 1"),
    (lambda c: c.train.update(steps_per_call=0), "train.steps_per_call must be >= 1, got 0"),
    (lambda c: c.optim.update(schedule="exponential"), "optim.schedule must be one of"),
  ],
)
def test_wrong_values_are_refused(change, message):
  c = cwm.get_config("family=slice,size=d128")
  change(c)
  with pytest.raises(ValueError, match=message):
    TrainSpec.from_config(c)


def test_unknown_keys_and_types_are_refused():
  c = cwm.get_config("family=slice,size=d128").to_dict()
  c["train"]["stpes"] = 10
  with pytest.raises(ValueError, match=r"unknown config key\(s\) train.stpes; train has"):
    TrainSpec.from_config(ml_collections.ConfigDict(c))
  c = cwm.get_config("family=slice,size=d128").to_dict()
  c["data"]["batch_size"] = "many"
  with pytest.raises(ValueError, match="data.batch_size='many' is not a <class 'int'>"):
    TrainSpec.from_config(ml_collections.ConfigDict(c))
  c = cwm.get_config("family=slice,size=d128").to_dict()
  del c["optim"]["lr"]
  with pytest.raises(ValueError, match="the config has no optim.lr"):
    TrainSpec.from_config(ml_collections.ConfigDict(c))
  for key in ("seed", "data"):
    c = cwm.get_config("family=slice,size=d128").to_dict()
    del c[key]
    with pytest.raises(ValueError, match=f"the config has no {key}$"):
      TrainSpec.from_config(ml_collections.ConfigDict(c))


def test_an_evaluation_compiles_with_its_workdirs_cache_setting(tmp_path, monkeypatch):
  """`runtime.setup_for_workdir` reads `train.compilation_cache` through the spec: a config.json
  without it (or no workdir at all) means the default."""
  monkeypatch.setattr(runtime, "setup", lambda setting: setting)  # No process-wide change.
  c = cwm.get_config("family=slice,size=d128")
  c.train.compilation_cache = ""
  config = c.to_dict()
  (tmp_path / workdir.CONFIG).write_text(json.dumps(config))
  assert runtime.setup_for_workdir(tmp_path) == ""
  del config["train"]["compilation_cache"]
  (tmp_path / workdir.CONFIG).write_text(json.dumps(config))
  assert runtime.setup_for_workdir(tmp_path) == LoopSpec().compilation_cache == runtime.AUTO
  assert runtime.setup_for_workdir(tmp_path / "missing") == runtime.AUTO


@pytest.mark.parametrize(
  "summary, finished",
  [
    (None, False),  # Never ended (running, crashed, killed).
    ({"steps": 100, "total_steps": 100}, True),
    ({"steps": 40, "total_steps": 100}, False),
    ({"steps": 40, "total_steps": 100, "aborted": True}, True),
    ({"steps": 40, "total_steps": 100, "stopped_early": True}, True),
    ({"steps": 40, "total_steps": 100, "preempted": True}, False),
  ],
)
def test_one_rule_of_a_finished_run(tmp_path, summary, finished):
  if summary is not None:
    workdir.write_summary(tmp_path, summary)
  assert workdir.finished(tmp_path) is finished
  if summary is not None and not summary.get("aborted") and not summary.get("stopped_early"):
    assert workdir.finished(tmp_path, total_steps=40) is True  # A shorter run asked for.


def test_early_stopping_reads_its_old_name(tmp_path):
  (tmp_path / "selection.json").write_text(json.dumps({"best": 0.5, "best_step": 7, "stopped": 1}))
  stopping = EarlyStopping(tmp_path, patience=1)
  assert (stopping.best, stopping.best_step, stopping.stopped) == (0.5, 7, True)
  stopping.write()
  assert json.loads((tmp_path / workdir.EARLY_STOPPING).read_text())["best_step"] == 7


def test_the_bucket_ladder_cut_at_a_runs_length():
  """`DataSpec.buckets_to_max_len`: the one ladder the launchers cut (`launch.cpu_runs`,
  `launch.reproduce_mini`), the run's own length last."""
  assert DataSpec(max_len=128).buckets_to_max_len() == (64, 128)
  assert DataSpec(max_len=100).buckets_to_max_len() == (64, 100)
  assert DataSpec(max_len=32).buckets_to_max_len() == (32,)
  assert DataSpec().buckets_to_max_len() == DataSpec().bucket_lengths
  assert DataSpec(max_len=2048).buckets_to_max_len() == (*DataSpec().bucket_lengths, 2048)
