"""`train.profile=START:STOP` (chessjax.profiling): a smoke run writes a trace of those steps, with
one annotation per step; a bad value stops the run before it starts, naming the key."""

import gzip
import json

import pytest
from conftest import SMOKE_FAMILY

from chessjax import profiling, train
from configs import cwm, lm


def test_parse_range():
  assert profiling.parse_range("") is None
  assert profiling.parse_range("3:5") == (3, 5)
  assert profiling.parse_range(" 0 : 1 ") == (0, 1)
  for bad in ("5", "5:3", "2:2", "a:b", "1:2:3", "-1:4", "1-4"):
    with pytest.raises(ValueError, match=r"train\.profile must be START:STOP"):
      profiling.parse_range(bad)
  for get_config in (cwm.get_config, lm.get_config):
    assert get_config(None).train.profile == ""  # Off by default, in both tracks.


def _config(dataset, profile: str):
  config = cwm.get_config(f"family={SMOKE_FAMILY},size=d128,smoke=True")
  config.data.train = str(dataset)
  config.data.bucket_lengths = (128,)
  config.train.steps, config.train.log_every = 4, 2
  config.train.eval_every = config.train.checkpoint_every = 4
  config.train.eval_batches = 1
  config.train.compile_ahead = "false"
  config.train.profile = profile
  return config


@pytest.mark.slow  # A smoke run: about 10-30 s on one core.
def test_trace_of_the_chosen_steps(small_dataset, tmp_path):
  train.train_and_evaluate(_config(small_dataset, "1:3"), tmp_path)
  runs = list((tmp_path / "profile" / "plugins" / "profile").iterdir())
  assert len(runs) == 1, runs  # One trace: started once, stopped once.
  names = {p.name for p in runs[0].iterdir()}
  assert any(n.endswith(".xplane.pb") for n in names), names  # TensorBoard's profile plugin.
  assert "perfetto_trace.json.gz" in names, names
  with gzip.open(runs[0] / "perfetto_trace.json.gz") as f:
    events = json.load(f)
  events = events["traceEvents"] if isinstance(events, dict) else events
  steps = sorted(int(e["args"]["step_num"]) for e in events if e.get("name") == "train")
  assert steps == [2, 3]  # From step 1 to step 3: the 2nd and 3rd steps, as the log numbers them.


def test_bad_profile_value_stops_before_training(small_dataset, tmp_path):
  with pytest.raises(ValueError, match=r"train\.profile must be START:STOP.*'7'"):
    train.train_and_evaluate(_config(small_dataset, "7"), tmp_path)
  assert not (tmp_path / "config.json").exists()  # Nothing written: refused before the run.
