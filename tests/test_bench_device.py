"""benchmarks.bench_device --toy: every row of the accelerator check is listed in both outputs, and
one row of each kind runs at toy shapes on the CPU (an attention and a recurrent family, both
precision policies, GPT-2, every implementation of every recurrence), so the check cannot rot
before a GPU runs it. All rows at toy shapes compile about 45 programs (minutes on a CPU); the
kinds run here exercise every code path of the others."""

import json
import math

import pytest

from benchmarks import bench_device
from chessjax.models.registry import FAMILIES
from chessjax.ops.impl import RECURRENCES


def expected_names() -> set[str]:
  """The rows the issue asks for, spelled out from the grid and the recurrences' registry."""
  train = {
    f"{family} {case} {dtype}"
    for family in FAMILIES
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


ONLY = (
  "transformer d128 b32 float32",
  "gated_deltanet d128 b32 bfloat16",
  "gpt2 small float32",
  "affine_scan sequential",
  "affine_scan chunked C16",
  "affine_scan associative",
  "delta_rule sequential",
  "delta_rule chunked C32",
  "ssd sequential",
  "ssd chunked C32",
)


@pytest.mark.slow  # About 14 small programs compiled.
def test_toy_run_lists_every_row_and_runs_each_kind(tmp_path):
  doc = bench_device.main(["--toy", "--out", str(tmp_path), "--only", ",".join(ONLY)])
  names = expected_names()
  saved = json.loads((tmp_path / "bench_device.json").read_text())
  assert saved["device_kind"] and saved["jax"] and saved["date"] and saved["toy"] is True
  rows = {r["name"]: r for r in saved["rows"]}
  assert set(rows) == names and len(saved["rows"]) == len(names) == len(doc["rows"])
  ran = {name for name in names if any(o in name for o in ONLY)}
  assert len(ran) == len(ONLY)
  for name, row in rows.items():
    if name not in ran:
      assert row["status"] == "skipped (--only)", (name, row["status"])
      continue
    assert row["status"] == "ok", (name, row["status"])
    assert row["ms"] > 0 and row["tokens_s"] > 0 and row["compile_s"] > 0, row
    assert (row["part"] == "recurrence") == (row["forward_ms"] > 0), row
    assert (row["part"] == "recurrence") != math.isfinite(row["mfu"]), row  # Steps have an MFU.
  table = (tmp_path / "bench_device.md").read_text()
  assert "TOY shapes" in table
  for name in names:
    assert f"| {name} |" in table, name
