"""The memory check before the first train step: a clear stop naming the remedies."""

import pytest
from conftest import SMOKE_FAMILY

from chessjax import memory, train
from configs import cwm


@pytest.mark.slow
def test_a_step_too_large_stops_before_running_and_names_the_remedies(small_dataset, tmp_path):
  config = cwm.get_config(f"family={SMOKE_FAMILY},size=d128,smoke=True")
  config.data.train = str(small_dataset)
  # tests/test_train.py's 8-step smoke runs (32 plies): their compiled train step.
  config.data.max_len, config.data.bucket_lengths = 32, (32,)
  config.train.steps = 8
  config.train.memory_limit_gb = 1e-4  # A fake machine of about 100 KiB.
  with pytest.raises(memory.StepTooLarge) as raised:
    train.train_and_evaluate(config, tmp_path / "run")
  text = str(raised.value)
  assert "train.micro_batches" in text and "train.remat" in text
  assert "more than the 0.0 GiB available" in text
  saved = tmp_path / "run" / "checkpoints"
  assert not saved.exists() or not any(saved.iterdir())  # Nothing ran, nothing was saved.


def test_check_and_the_machines_memory():
  memory.check(10, 20, "x")
  memory.check(None, 20, "x")  # Unknown needs or limits never stop a run.
  with pytest.raises(memory.StepTooLarge, match=r"x needs about 2\.0 GiB"):
    memory.check(2 * 2**30, 2**30, "x")
  assert memory.available_bytes() > 2**20
