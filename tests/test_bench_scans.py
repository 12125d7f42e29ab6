"""benchmarks.bench_scans: a toy run gives a record whose table `chessjax.ops.impl` reads, and a
GPU check's side-by-side rows (recurrences alone, populations per implementation) merge into the
record as that device's run."""

import json

import jax
import pytest

from benchmarks import bench_scans
from chessjax.ops import impl
from chessjax.ops.impl import Impl


@pytest.mark.slow  # 10 small programs compiled and timed once each.
def test_toy_run_writes_a_record_and_the_table_auto_reads(tmp_path):
  out, table = tmp_path / "scan_choice.json", tmp_path / "scan_table.json"
  argv = ["--toy", "--out", str(out), "--table", str(table)]
  record = bench_scans.main(argv)
  (run,) = record["runs"]
  backend = jax.default_backend()
  assert run["backend"] == backend and run["source"] == "bench_scans"
  assert run["machine"]["cores"] >= 1 and run["machine"]["loadavg_before"] >= 0
  assert "/tmp" not in run["command"] and "--out docs/results/scan_choice.json" in run["command"]
  assert [r["family"] for r in run["rows"]] == ["slice", "slice_diag", "gated_deltanet", "mamba2"]
  for r in run["rows"]:
    assert set(r["timings"]) == {str(i) for i in impl.RECURRENCES[r["recurrence"]]}, r
    assert r["timings"][r["yardstick"]]["ratio"] == 1.0 and r["yardstick"] == impl.fallback(
      r["recurrence"], backend)  # fmt: skip
    assert r["choice"] == impl.choose(r["recurrence"], backend, r["timings"])
  entries = impl.load_table(table)
  assert [{**e, "impl": str(e["impl"])} for e in entries] == impl.derive(record)
  for r in run["rows"]:
    got = impl.resolve("auto", r["recurrence"], backend, rows=r["rows"], length=r["length"],
                       width=r["width"], table=entries)  # fmt: skip
    assert got == r["choice"], r
  # A second run of this backend by this command takes the first's place in the record.
  assert len(bench_scans.main(argv)["runs"]) == 1


def _row(part, name, ms, b2b_ms=None, **extra):
  return {"part": part, "name": name, "status": "ok", "ms": ms, "b2b_ms": b2b_ms or ms,
          "extra": extra}  # fmt: skip


def test_a_checks_rows_merge_as_its_devices_run(tmp_path):
  population = dict(recurrence="affine_scan", family="slice", size="d128", length=256, width=1024)
  doc = {
    "device_kind": "NVIDIA H200", "platform": "gpu", "jax": "0.11.2", "date": "2026-12-01",
    "rows": [
      _row("recurrence", "affine_scan sequential", 5.8, rows=128, length=256, width=4096),
      _row("recurrence", "affine_scan chunked C16", 8.3, rows=128, length=256, width=4096),
      _row("recurrence", "affine_scan chunked C256", 9.6, rows=128, length=256, width=4096),
      _row("recurrence", "delta_rule sequential", 43.1, rows=128, length=256, width=36864),
      _row("recurrence", "delta_rule chunked C64", 4.6, rows=128, length=256, width=36864),
      *(_row("population", f"population slice d128 b128 K16 {name}", 50.0, b2b, k=16, rows=2048,
             impl=i, chunk=c, **population)
        for name, i, c, b2b in (("sequential", "sequential", None, 40.0),
                                ("chunked C16", "chunked", 16, 30.0),
                                ("chunked C64", "chunked", 64, 31.0),
                                ("associative", "associative", None, 39.0))),
      _row("population", "population slice d128 b128 K16", 42.0, 40.6, k=16),  # `auto`: no impl
      {"part": "train", "name": "slice d128 b32 float32", "status": "ok", "ms": 5.0, "extra": {}},
    ],
  }  # fmt: skip
  path = tmp_path / "bench_device.json"
  path.write_text(json.dumps(doc))
  run = bench_scans.device_run(path)
  assert run["backend"] == "gpu" and run["machine"]["device_kind"] == "NVIDIA H200"
  assert str(tmp_path) not in run["command"] and "--device bench_device.json" in run["command"]
  rows = {(r["recurrence"], r["rows"]): r for r in run["rows"]}
  assert set(rows) == {("affine_scan", 128), ("delta_rule", 128), ("affine_scan", 2048)}
  layer = rows["affine_scan", 128]
  assert layer["timings"]["chunked"]["chunk"] == 256  # SLiCE's chunk size where measured
  assert layer["choice"] == "sequential" and rows["delta_rule", 128]["choice"] == "chunked"
  pop = rows["affine_scan", 2048]
  assert pop["timings"]["chunked"]["chunk"] == 16  # the fastest where the default is not there
  assert pop["timings"]["chunked"]["ratio"] == pytest.approx(30.0 / 40.0)  # back to back
  assert pop["choice"] == "chunked" and pop["length"] == 256 and pop["width"] == 1024
  # Merged beside a CPU run; the table then sends a GPU population of 16 at batch 128 chunked.
  cpu = {"source": "bench_scans", "backend": "cpu", "rows": []}
  record = bench_scans.merged(bench_scans.merged(None, cpu), run)
  assert [r["backend"] for r in record["runs"]] == ["cpu", "gpu"]
  table = [{**e, "impl": Impl(e["impl"])} for e in impl.derive(record)]
  with impl.members(16):
    assert impl.resolve("auto", "affine_scan", "gpu", rows=128, length=256, width=1024,
                        table=table) is Impl.CHUNKED  # fmt: skip
  assert impl.resolve("auto", "affine_scan", "gpu", rows=128, length=256, width=1024,
                      table=table) is Impl.SEQUENTIAL  # fmt: skip
