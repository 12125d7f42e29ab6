"""benchmarks/bench_lm_train_s.py's tables: the paper's Train-S row of each run's own model and
notation (from chessjax/lm/paper_results.json), and the RAP table's ratios and roles."""

import json

from benchmarks import bench_lm_train_s as bench
from chessjax.workdir import SUMMARY


def _result(notation: str, dev: float) -> dict:
  scores = {"rows": 10, "lgm": 50.0, "r_precision": 40.0, "exm": 12.5}
  tasks = {"end_actual": scores, "end_other": {k: v for k, v in scores.items() if k != "exm"}}
  if notation != "uci":
    tasks |= {"start_actual": scores, "start_other": tasks["end_other"]}
  return {
    "notation": notation,
    "step": 750,
    "perplexity": {"dev": {"perplexity": dev}, "test": {"perplexity": dev + 1}},
    "probes": {"tasks": tasks, "random_legal": {"end_actual": 20.1, "start_actual": 87.2}},
  }


def _roles(mass_from: float, mass_to: float) -> dict:
  role = lambda mass, loss: {"targets": 5, "loss_per_move": loss, "piece_mass": mass}  # noqa: E731
  roles = {"from": role(mass_from, 2.0), "to": role(mass_to, 1.0), "piece": role(None, 0.0)}
  roles |= {"promotion": role(0.0, 0.01), "end": role(0.0, 0.02)}
  return {"splits": {"dev": {"loss": 3.03, "roles": roles}}}


def test_tables_take_each_runs_own_paper_row(tmp_path):
  names = {"gpt2-uci": "uci", "gpt2-rap": "rap", "gpt2w50-uci": "uci", "gdn-rap": "rap"}
  for name in names:
    (tmp_path / "runs" / name).mkdir(parents=True)
    (tmp_path / "runs" / name / SUMMARY).write_text(json.dumps({"params": 868736}))
  results = {name: _result(n, 100.0 + i) for i, (name, n) in enumerate(names.items())}
  text = bench.tables(results, tmp_path)
  assert "| gpt2-uci | 868,736 | 750 | 100.00 / 23.6 | 101.00 / 23.6 |" in text
  assert "| gpt2-rap | 868,736 | 750 | 101.00 / 15.9 | 102.00 / 15.9 |" in text
  assert "| gdn-rap | 868,736 | 750 | 103.00 | 104.00 |" in text  # no paper row
  # End: GPT-2 w=50 takes Table 6's Train-S row, GPT-2 RAP Table 5's; Start: Table 4's.
  assert (
    "| gpt2w50-uci | 50.0 / 69.5 | 40.0 / 57.4 | 50.0 / 60.4 | 40.0 / 53.2 | 12.5 / 23.1 |" in text
  )
  assert (
    "| gpt2-rap | 50.0 / 88.4 | 40.0 / 75.5 | 50.0 / 80.4 | 40.0 / 72.1 | 12.5 / 33.3 |" in text
  )
  assert (
    "| gpt2-rap | 50.0 / 91.3 | 40.0 / 90.2 | 50.0 / 89.3 | 40.0 / 89.2 | 12.5 / 78.8 |" in text
  )
  assert "| random legal | - | - | - | - | 20.1 / 19.6 |" in text
  assert "| random legal | - | - | - | - | 87.2 / 86.0 |" in text


def test_rap_table_ratios_and_roles():
  results = {"gpt2-uci": _result("uci", 100.0), "gpt2-rap": _result("rap", 250.0)}
  results["gdn-rap"] = _result("rap", 45.0)
  text = bench.rap_table(results, {"gpt2-rap": _roles(0.2, 0.15), "gdn-rap": _roles(0.25, 0.01)})
  assert "| gpt2 | 100.00 | 250.00 | 2.50x | - | - |" in text
  assert "| gated_deltanet | - | 45.00 | - | - | - |" in text
  assert "| gpt2-rap | 0.200 | 0.150 | 2.000 | 1.000 | 0.000 | 0.010 | 0.020 | 3.030 |" in text
  assert "| gdn-rap | 0.250 | 0.010 |" in text
