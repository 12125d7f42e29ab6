"""`benchmarks.bench_loop_overhead` at toy size: the real loop and its yardsticks run, for one run
and a population at 2 steps per call, and its record renders as the docs' table."""

import json

import pytest

from benchmarks import bench_loop_overhead, loop_overhead_table


@pytest.mark.slow
def test_the_loop_overhead_benchmark_runs_and_renders(tmp_path):
  out = tmp_path / "record.json"
  argv = ["--toy", "--members", "1,2", "--steps-per-call", "2", "--work", str(tmp_path / "work")]
  bench_loop_overhead.main([*argv, "--out", str(out)])
  doc = json.loads(out.read_text())
  assert [(r["members"], r["steps_per_call"]) for r in doc["rows"]] == [(1, 2), (2, 2)]
  for r in doc["rows"]:
    assert r["loop_ms"] > 0 and r["call_alone_ms"] > 0 and r["step_alone_ms"] > 0
    assert r["own_ms"] == pytest.approx(r["loop_ms"] - r["call_alone_ms"])  # One round.
    # CPU a step: the process's, the loop's main thread's and its input thread's (Linux has the
    # per-thread clocks), each a part of the process's.
    assert r["call_alone_cpu_ms"] > 0 and r["cpu_ms"] > 0
    assert 0 < r["main_cpu_ms"] < r["cpu_ms"] and 0 < r["input_cpu_ms"] < r["cpu_ms"]
  text = loop_overhead_table.table(doc)
  assert "| population of 2, 2 steps per call |" in text and doc["machine"]["cpu"] in text
