"""benchmarks/bench_cwm_mini.py across sessions: finished runs of the committed record are not
trained again and enter the tables; a record of another protocol is ignored."""

import json

from benchmarks import bench_cwm_mini as bench
from benchmarks.machine import cpu_model


def _record(tmp_path, **protocol):
  args = vars(bench.parse_args(["--work", str(tmp_path / "old")]))
  args.update(protocol)
  row = {"family": "slice", "seed": 0, "workdir": "runs/slice_s0", "curve": [[250, 1.0]]}
  path = tmp_path / "record.json"
  path.write_text(json.dumps({"args": args, "runs": [row], "summary": {}}))
  return path, row


def test_recorded_runs_are_skipped_and_reported(tmp_path, monkeypatch):
  path, row = _record(tmp_path)
  argv = ["--work", str(tmp_path / "w"), "--record", str(path), "--families", "slice,mamba3"]
  args = bench.parse_args(argv + ["--seeds", "0"])
  assert bench.recorded(args) == {("slice", 0): row}
  assert bench.collect(args, tmp_path / "w") == [row]  # mamba3_s0: neither local nor recorded
  trained = []
  monkeypatch.setattr(
    bench, "do_run", lambda args, family, seed, *rest: trained.append((family, seed))
  )
  bench.run_all(args, tmp_path / "w", data={})
  assert trained == [("mamba3", 0)]


def test_a_record_of_another_protocol_or_none_is_not_used(tmp_path):
  path, _ = _record(tmp_path, steps=12000)
  args = bench.parse_args(["--work", str(tmp_path / "w"), "--record", str(path)])
  assert bench.recorded(args) == {}
  args = bench.parse_args(["--work", str(tmp_path / "w"), "--record", ""])
  assert bench.recorded(args) == {}


def test_machine_line_names_the_cpu(tmp_path):
  info = tmp_path / "cpuinfo"
  info.write_text(
    "processor\t: 0\nmodel name\t: Test CPU 9000\nprocessor\t: 1\nmodel name\t: Other\n"
  )
  assert cpu_model(info) == "Test CPU 9000"
  info.write_text("processor\t: 0\n")
  assert cpu_model(info) == ""
  assert cpu_model(tmp_path / "absent") == ""
  assert bench.machine_line().split(", ")[0] == (cpu_model() or "unknown CPU")


def test_paired_counts_seeds_where_one_family_beats_another():
  def row(family, seed, loss, exact):
    split = {"loss": loss, "labelwise": 0.9, "exact_state": exact, "trajectory": 0.0}
    return {"family": family, "seed": seed, "real": split, "random": split}

  rows = [
    row("transformer", 0, 0.40, 0.10),
    row("transformer", 1, 0.30, 0.20),
    row("mamba3", 0, 0.20, 0.15),  # better than the Transformer on both
    row("mamba3", 1, 0.35, 0.20),  # worse loss, equal ExactState
    row("mamba3", 2, 0.10, 0.90),  # no Transformer seed 2: not paired
  ]
  better, worse, n, diff = bench.paired(rows, "transformer", "mamba3", "real", "loss")
  assert (better, worse, n) == (1, 1, 2) and abs(diff - (-0.2 + 0.05) / 2) < 1e-12
  better, worse, n, diff = bench.paired(rows, "transformer", "mamba3", "real", "exact_state")
  assert (better, worse, n) == (1, 0, 2) and abs(diff - 2.5) < 1e-9  # percent
  assert bench.paired(rows, "transformer", "slice", "real", "loss")[2] == 0
  lines = bench._paired_table(rows, [("transformer", "mamba3")], "## t", "better")
  assert "| mamba3 vs transformer | real | better in 1/2, -0.0750 |" in "\n".join(lines)
