"""benchmarks.bench_device --toy: every row of the accelerator check runs at toy shapes on the CPU
and lands in both outputs, so the check cannot rot before a GPU runs it."""

import json
import math

import pytest

from benchmarks import bench_device
from chessjax.ops.impl import RECURRENCES
from configs import cwm


def expected_names() -> set[str]:
  """The rows the issue asks for, spelled out from the grid and the recurrences' registry."""
  train = {
    f"{family} {case} {dtype}"
    for family in cwm.MAIN_FAMILY
    for case in ("d128 b32", "d512 b128")
    for dtype in ("float32", "bfloat16")
  }
  recurrences = set()
  for recurrence, impls in RECURRENCES.items():
    for impl in impls:
      if impl == "chunked":
        recurrences |= {f"{recurrence} chunked C{c}" for c in bench_device.CHUNKS[recurrence]}
      else:
        recurrences.add(f"{recurrence} {impl}")
  assert len(recurrences) == 13  # 3 + 1 + 1 affine, 1 + 3 delta rule, 1 + 3 SSD
  return train | recurrences | {"gpt2 small float32", "gpt2 small bfloat16"}


@pytest.mark.slow  # About 60 programs compiled: minutes on one shared core.
def test_toy_run_has_every_row(tmp_path):
  doc = bench_device.main(["--toy", "--out", str(tmp_path)])
  names = expected_names()
  saved = json.loads((tmp_path / "bench_device.json").read_text())
  assert saved["device_kind"] and saved["jax"] and saved["date"] and saved["toy"] is True
  rows = {r["name"]: r for r in saved["rows"]}
  assert set(rows) == names and len(saved["rows"]) == len(names) == len(doc["rows"])
  for name, row in rows.items():
    assert row["status"] == "ok", (name, row["status"])
    assert row["ms"] > 0 and row["tokens_s"] > 0 and row["compile_s"] > 0, row
    assert (row["part"] == "recurrence") == (row["forward_ms"] > 0), row
    assert (row["part"] == "recurrence") != math.isfinite(row["mfu"]), row  # Steps have an MFU.
  table = (tmp_path / "bench_device.md").read_text()
  assert "TOY shapes" in table
  for name in names:
    assert f"| {name} |" in table, name
