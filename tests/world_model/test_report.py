"""The results report (chessjax.world_model.report) and the toy pipeline (launch.reproduce_mini).

Every number of tables.json must be the number of the run file it names (train_summary.json or
eval/NAME.json, percentages x 100), cells without a run "-", the paper's numbers beside ours.
"""

import json
import math
from pathlib import Path

from chessjax.workdir import SUMMARY
from chessjax.world_model import report

PAPER = report.paper_results()


def _workdir(root: Path, name, family, size, *, schedule, lr, floor=0.1, loss, evals=None, **h):
  w = root / name
  (w / "eval").mkdir(parents=True)
  config = {  # What the spec needs of a world model's config.json (chessjax.spec.TrainSpec).
    "family": family,
    "size": size,
    "seed": 0,
    "data": {},
    "optim": {
      "lr": lr,
      "warmup_steps": 10,
      "b2": 0.99,
      "weight_decay": 0.0,
      "floor": floor,
      "schedule": schedule,
    },
    "train": {"steps": 100},
  }
  summary = {
    "steps": 100,
    "total_steps": 100,
    "params": 1_234_567,
    "bad_batches": 0,
    "rollbacks": h.get("rollbacks", 0),
    "aborted": h.get("aborted", False),
    "validation": {"loss": loss, "exact_state": 0.125, "labelwise": 0.75, "trajectory": 0.0625},
  }
  (w / "config.json").write_text(json.dumps(config))
  (w / SUMMARY).write_text(json.dumps(summary))
  for split, r in (evals or {}).items():
    (w / "eval" / f"{split}.json").write_text(json.dumps(r))
  return w


def _eval(loss, exact):
  starts = list(range(0, 520, 20))
  return {
    "loss": loss,
    "labelwise": 0.9123456789,
    "exact_state": exact,
    "trajectory": 0.01,
    "bins": {
      "start": starts,
      "exact_state": [exact / (1 + i) for i in range(len(starts))],
      "labelwise": [0.99] * len(starts),
    },
  }


def _rows(tables, key):
  return [r for r in tables["tables"][key]["rows"] if r.get("workdir")]


def test_report_from_fake_runs(tmp_path):
  root = tmp_path / "runs"
  _workdir(root / "stage1", "a", "slice", "d128", schedule="constant", lr=1e-3, loss=0.6)
  _workdir(root / "stage1", "b", "slice", "d128", schedule="constant", lr=3e-3, loss=0.5)
  # Stage 2 of the winner (lr 3e-3): floor 0.1 rolled back, so lr 1e-3 takes its place.
  _workdir(
    root / "stage2",
    "b1",
    "slice",
    "d128",
    schedule="cosine",
    lr=3e-3,
    floor=0.1,
    loss=0.1,
    rollbacks=1,
    evals={"real": _eval(9.0, 0.9)},
  )
  _workdir(
    root / "stage2",
    "a1",
    "slice",
    "d128",
    schedule="cosine",
    lr=1e-3,
    floor=0.1,
    loss=0.3,
    evals={"real": _eval(0.31, 0.41), "random": _eval(1.5e-5, 0.02)},
  )
  _workdir(
    root / "stage2",
    "a2",
    "slice",
    "d128",
    schedule="cosine",
    lr=1e-3,
    floor=0.01,
    loss=0.2,
    evals={"real": _eval(0.21, 0.51), "random": _eval(2.5e-5, 0.03)},
  )
  # A family of one's own, by its dotted path, and an ablation variant without a stage 1.
  _workdir(
    root / "other",
    "p",
    "my_lab.mixer",
    "d128",
    schedule="cosine",
    lr=1e-3,
    loss=0.4,
    evals={"real": _eval(0.4, 0.3)},
  )
  _workdir(
    root / "other",
    "v",
    "slice_diag",
    "d128",
    schedule="cosine",
    lr=1e-3,
    loss=0.7,
    evals={"real": _eval(0.7, 0.2), "random": _eval(35.0, 0.01)},
  )
  out = tmp_path / "report"
  assert report.main(["--runs", str(root), "--out", str(out)]) == 0
  doc = json.loads((out / "tables.json").read_text())
  md = (out / "tables.md").read_text()
  assert (out / "figure3.png").stat().st_size > 10_000 and (out / "figure4.png").exists()

  (t5,) = _rows(doc, "table5")
  assert (t5["val_loss"], t5["lr"], t5["exact_state"]) == (0.5, 3e-3, 12.5)
  assert t5["paper"]["val_loss"] == 0.061826
  t6 = next(r for r in _rows(doc, "table6") if r["family"] == "slice")
  assert (t6["best_floor"], t6["best_val_loss"], t6["other_floor"], t6["other_val_loss"]) == (
    0.01,
    0.2,
    0.1,
    0.3,
  )
  assert t6["workdir"].endswith("a2") and "rolled back 1 time(s)" in t6["replaced"][0]
  assert "ours, slice d128: lr=0.003" in md
  # Table 8: each cell the run's eval JSON, to the last digit.
  t8 = _rows(doc, "table8")
  assert {(r["family"], r["split"]) for r in t8} == {
    ("slice", "real"),
    ("slice", "random"),
    ("my_lab.mixer", "real"),
  }
  for r in t8:
    ev = json.loads((Path(r["workdir"]) / r["eval_file"]).read_text())
    assert r["loss"] == ev["loss"] and r["exact_state"] == 100 * ev["exact_state"]
    assert r["labelwise"] == 100 * ev["labelwise"] and r["trajectory"] == 100 * ev["trajectory"]
  mixer_random = [
    r
    for r in doc["tables"]["table8"]["rows"]
    if (r["family"], r["split"]) == ("my_lab.mixer", "random")
  ]
  assert mixer_random[0]["loss"] is None and mixer_random[0]["paper"] is None
  assert "| my_lab.mixer | d128 | real | 0.400000 / - |" in md
  assert "| my_lab.mixer | d128 | random | - / - |" in md
  # Table 4: the registry for a built-in family, the run's summary for an unknown one.
  t4 = {r["family"]: r for r in _rows(doc, "table4")}
  assert t4["slice"]["params_source"] == "registry" and t4["slice"]["params_m"] > 3
  assert (t4["my_lab.mixer"]["params_m"], t4["my_lab.mixer"]["params_source"]) == (
    1.234567,
    SUMMARY,
  )
  # Tables 10 and 11: the variant's random split and the prefix bins.
  (t10,) = _rows(doc, "table10")
  assert (t10["family"], t10["loss"]) == ("slice_diag", 35.0)
  (t11,) = [r for r in _rows(doc, "table11") if r["family"] == "slice"]
  ev = json.loads((Path(t11["workdir"]) / "eval" / "random.json").read_text())
  assert t11["bin_80_100"] == 100 * ev["bins"]["exact_state"][4]
  assert t11["bin_500_520"] == 100 * ev["bins"]["exact_state"][25]
  # The paper's rows without a run of ours: "-" on our side, the published number beside it.
  assert "| Mamba-3 | d512 | random | - / 0.015915 | - / 99.66 | - / 81.13 | - / 10.82 |" in md


def test_paper_results_are_consistent():
  t = PAPER["tables"]
  assert [len(t[f"table{i}"]["rows"]) for i in range(4, 13)] == [28, 16, 16, 16, 32, 12, 12, 4, 4]
  # Table 6's best floor is Table 7's floor; Table 5 and 7 differ only in the replaced cell.
  for a, b in zip(t["table6"]["rows"], t["table7"]["rows"], strict=True):
    assert a["best_floor"] == b["lr_floor"] and a["best_val_loss"] < a["other_val_loss"]
  keys = ("lr", "warmup", "b2", "wd")
  differ = [
    (a["family"], a["size"])
    for a, b in zip(t["table5"]["rows"], t["table7"]["rows"], strict=True)
    if tuple(a[k] for k in keys) != tuple(b[k] for k in keys)
  ]
  assert differ == [(r["family"], r["size"]) for r in PAPER["stage2_replacements"]]
  for row in t["table8"]["rows"] + t["table9"]["rows"] + t["table10"]["rows"]:
    assert 0 <= row["exact_state"] <= row["labelwise"] <= 100 and math.isfinite(row["loss"])


def test_reproduce_mini_end_to_end(reproduce_mini_local):
  work = reproduce_mini_local
  doc = json.loads((work / "report" / "tables.json").read_text())
  assert (work / "report" / "figure3.png").exists()
  checked = 0
  for key, table in doc["tables"].items():
    for row in table["rows"]:
      if not row.get("workdir"):
        assert all(row[c] is None for c in table["columns"] if c != "params_m")
        continue
      w = Path(row["workdir"])
      summary = json.loads((w / SUMMARY).read_text())
      source = json.loads((w / row["eval_file"]).read_text()) if row.get("eval_file") else None
      for c in table["columns"]:
        v = row[c]
        if c in ("loss", "labelwise", "exact_state", "trajectory") and source is not None:
          want = source[c] * (100 if c != "loss" else 1)
        elif c.startswith("bin_"):
          start = int(c.split("_")[1])
          bins = source["bins"]
          metric = "exact_state" if key == "table11" else "labelwise"
          x = bins[metric][bins["start"].index(start)] if start in bins["start"] else None
          want = None if x is None else 100 * x
        elif c in ("val_loss", "best_val_loss"):
          want = summary["validation"]["loss"]
        elif c in ("exact_state", "labelwise", "trajectory"):
          want = 100 * summary["validation"][c]
        else:
          continue
        assert v == want, (key, row, c)
        checked += 1
  assert checked >= 20
  selection = json.loads((work / "selection.json").read_text())
  assert [c["status"] for c in selection] == ["done"]
