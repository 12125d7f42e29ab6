"""The results tables of the README and docs/ against their committed records in docs/results/.

The language-model, atomic and reproduce-mini numbers come from runs whose files stay outside the
repository; each record holds what the docs report, with its command, date and commit. These
tests read the Markdown tables the docs point at and check that every number of ours they show is
the one in the record, so a number edited on one side only fails here. Paper numbers beside ours
are not checked here (they come from the papers' data files).

Every `<!-- KEY -->...<!-- /KEY -->` span of the README and docs/*.md is what `docgen.docs`
renders for KEY from the records and the papers' data files (tables, and the findings computed
from them: `docgen.findings`, `docgen.findings_long`, `docgen.claims`, ...), and the prose outside
the spans keeps at most `docgen.docs.MAX_DECIMALS` decimal numbers."""

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_DOCS = (
  "README.md",
  "docs/world_model.md",
  "docs/lm.md",
  "docs/atomic.md",
  "docs/performance.md",
  "docs/claims.md",
)
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _record(name: str) -> dict:
  return json.loads((REPO / "docs" / "results" / f"{name}.json").read_text())


def _table(doc: str, header: str) -> dict[str, list[str]]:
  """The one Markdown table of `doc` whose header row starts with `| header |`: its rows, first
  cell -> the other cells."""
  lines = (REPO / doc).read_text().splitlines()
  starts = [i for i, line in enumerate(lines) if line.startswith(f"| {header} |")]
  assert len(starts) == 1, f"{doc}: {len(starts)} tables start with {header!r}"
  rows = {}
  for line in lines[starts[0] + 2 :]:
    if not line.startswith("|"):
      break
    cells = [c.strip() for c in line.strip("|").split("|")]
    rows[cells[0]] = cells[1:]
  return rows


def _numbers(cell: str) -> list[float]:
  return [float(x.replace(",", "")) for x in NUMBER.findall(cell.replace("**", ""))]


def _check(rows: dict[str, list[str]], expected: dict[str, list]) -> None:
  """Each row's cells hold the expected numbers in order; None skips a number (the paper's)."""
  assert set(rows) == set(expected), (sorted(rows), sorted(expected))
  for label, cells in rows.items():
    assert len(cells) == len(expected[label]), label
    for cell, want in zip(cells, expected[label], strict=True):
      want = want if isinstance(want, list) else [want]
      if want == ["-"]:
        assert cell.split(" / ")[0] == "-", (label, cell)
        continue
      got = _numbers(cell)
      assert len(got) == len(want), (label, cell, want)
      for g, w in zip(got, want, strict=True):
        assert w is None or g == pytest.approx(w, abs=1e-9), (label, cell, want)


def _ratio(a: float, b: float, shown: str) -> float:
  """a / b rounded to the digits `shown` prints (a ratio the docs derive from two numbers)."""
  digits = len(shown.split(".")[1].rstrip("x*")) if "." in shown else 0
  return round(a / b, digits)


LM_END = ("lgm", "r_precision", "other_lgm", "other_r_precision", "exm")


def _lm_probe(run: dict, where: str) -> list:
  """A Table 4/5/6 row's five "ours / paper" cells."""
  return [[run[where][k], None] for k in LM_END]


def _lgm_exm(run: dict, where: str) -> list | str:
  """An "LgM / ExM" cell of ours, "-" for a task the run cannot take (no Start task for UCI)."""
  return [run[where]["lgm"], run[where]["exm"]] if where in run else "-"


def test_lm_train_s_tables():
  record = _record("lm_train_s")
  runs, rl = record["runs"], record["data"]["random_legal"]

  def ppl(run: str) -> dict:
    return runs[run]["perplexity"]

  doc = "docs/lm.md"
  gpt2 = {"UCI": "gpt2-uci", "UCI + RAP (p = 0.25)": "gpt2-rap", "UCI + AP": "gpt2-ap"}
  _check(
    _table(doc, "notation"),
    {
      label: [runs[r]["params"], [ppl(r)["dev"], None], [ppl(r)["test"], None]]
      for label, r in gpt2.items()
    },
  )
  end = {"UCI": "gpt2-uci", "UCI + RAP": "gpt2-rap", "UCI + AP": "gpt2-ap"}
  _check(
    _table(doc, "End squares (Table 5)"),
    {label: _lm_probe(runs[r], "end") for label, r in end.items()}
    | {"random legal": ["-"] * 4 + [[rl["end_actual_exm"], None]]},
  )
  _check(
    _table(doc, "Start squares (Table 4)"),
    {label: _lm_probe(runs[r], "start") for label, r in end.items() if r != "gpt2-uci"}
    | {"random legal": ["-"] * 4 + [[rl["start_actual_exm"], None]]},
  )
  table6 = {
    "GPT-2 micro": "gpt2-uci",
    "GPT-2 (w = 50) micro": "gpt2w50-uci",
    "Reformer micro": "reformer-uci",
    "Performer micro": "performer-uci",
    "LSTM micro": "lstm-uci",
    "LSTM micro + RAP": "lstm-rap",
  }
  _check(
    _table(doc, "model (Train-S)"),
    {
      label: [runs[r]["params"], [ppl(r)["dev"], ppl(r)["test"]]] + _lm_probe(runs[r], "end")
      for label, r in table6.items()
    }
    | {"random legal": ["-"] * 6 + [[rl["end_actual_exm"], None]]},
  )


def test_lm_rap_ap_and_backbone_tables():
  runs = _record("lm_train_s")["runs"]
  doc = "docs/lm.md"
  rows = _table(doc, "backbone")
  expected = {}
  for label, uci, rap in (
    ("GPT-2 micro (868,736 parameters)", "gpt2-uci", "gpt2-rap"),
    ("Gated DeltaNet (875,001)", "gdn-uci", "gdn-rap"),
  ):
    a, b = runs[uci]["perplexity"]["dev"], runs[rap]["perplexity"]["dev"]
    roles = runs[rap]["token_roles"]
    m_from, m_to = roles["piece_mass_before_from"], roles["piece_mass_before_to"]
    expected[label] = [a, b, _ratio(b, a, rows[label][2]), m_from, m_to]
    expected[label].append(_ratio(m_from, m_to, rows[label][5]))
  _check(rows, expected)

  cols = ("gdn-uci", "gdn-rap", "gdn-ap", "gpt2-ap")
  _check(
    _table(doc, "Gated DeltaNet (875,001 parameters)"),
    {
      "dev perplexity (per move)": [runs[r]["perplexity"]["dev"] for r in cols] + [None],
      "test perplexity": [runs[r]["perplexity"]["test"] for r in cols] + [None],
      "End-Actual LgM / ExM": [_lgm_exm(runs[r], "end") for r in cols] + [[None, None]],
      "End-Other LgM": [runs[r]["end"]["other_lgm"] for r in cols] + [None],
      "Start-Actual LgM / ExM": [_lgm_exm(runs[r], "start") for r in cols] + [[None, None]],
    },
  )

  backbones = {
    "Transformer (GPT-2 micro)": "gpt2-uci",
    "SLiCE": "slice-uci",
    "Gated DeltaNet (negative eigenvalues)": "gdn-uci",
    "Mamba-3": "mamba3-uci",
  }
  probes = ("all_squares", "non_empty", "changed")
  _check(
    _table(doc, "backbone (UCI)"),
    {
      label: [
        runs[r]["params"],
        [runs[r]["perplexity"]["dev"], runs[r]["perplexity"]["test"]],
        _lgm_exm(runs[r], "end"),
        runs[r]["end"]["other_lgm"],
      ]
      + [runs[r]["linear_probe"][p] for p in probes]
      + [runs[r]["train_wall_min"]]
      for label, r in backbones.items()
    },
  )


def _atomic_row(picker: dict, diff: bool) -> list:
  row = []
  for rules in ("chess", "atomic"):
    r = picker[rules]
    row += [[r["mean_win_loss"], *r["ci95"]], r["blunder_pct"], r["best_pct"]]
  if diff:
    row.append(round(picker["atomic"]["mean_win_loss"] - picker["chess"]["mean_win_loss"], 1))
  return row


def test_atomic_tables():
  experiments = _record("atomic")["experiments"]
  pickers = experiments["prior_conflict"]["pickers"]
  labels = {
    "Stockfish 15.1 depth 12, chess rules": "stockfish_d12_chess",
    "GPT-2 micro UCI LM (master games)": "gpt2_micro_lm",
    "random legal move": "random",
    "Fairy-Stockfish depth 4, atomic rules": "fairy_stockfish_d4_atomic",
  }
  _check(
    _table("docs/atomic.md", "move-picker | chess: mean Win% loss [95% CI]"),
    {label: _atomic_row(pickers[p], diff=True) for label, p in labels.items()},
  )
  pickers = experiments["depth12"]["pickers"]
  labels = {
    "Stockfish 15.1 depth 12, standard rules": "stockfish_d12_chess",
    "Stockfish 15.1 depth 4, standard rules": "stockfish_d4_chess",
    "Fairy-Stockfish depth 4, atomic rules": "fairy_stockfish_d4_atomic",
    "uniformly random legal move": "random",
  }
  _check(
    _table("docs/atomic.md", "move-picker | standard: mean Win% loss [95% CI]"),
    {label: _atomic_row(pickers[p], diff=False) for label, p in labels.items()},
  )


@pytest.mark.parametrize("doc", ["docs/world_model.md", "README.md"])
def test_reproduce_mini_table_and_time(doc):
  record = _record("reproduce_mini")
  names = {"Transformer": "transformer", "SLiCE": "slice"}
  lines = (REPO / doc).read_text().splitlines()
  header = "| Model | Size | Split | Loss | Labelwise (%) | ExactState (%) | Trajectory (%) |"
  assert lines.count(header) == 1
  seen = 0
  for line in lines[lines.index(header) + 2 :]:
    if not line.startswith("|"):
      break
    model, size, split, *cells = (c.strip() for c in line.strip("|").split("|"))
    ours = record["table8"].get(names[model], {}).get(size, {}).get(split)
    metrics = ("loss", "labelwise", "exact_state", "trajectory")
    for cell, metric in zip(cells, metrics, strict=True):
      shown = cell.split(" / ")[0]
      assert shown == "-" if ours is None else float(shown) == ours[metric], (line, metric)
    seen += 1
  assert seen >= 3
  minutes, seconds = divmod(record["wall_s"], 60)
  assert f"{minutes} min {seconds} s" in " ".join((REPO / doc).read_text().split())


def test_bench_device_h200_tables():
  """docs/performance.md's H200 table is bench_device's own table of the record's measured rows,
  and the paper-step table sets the paper's whole-run average (four days over its 310,944 steps)
  against each d512 step, measured at 256 steps and scaled to the paper-like batch's mean padded
  length (docs/results/roofline.json)."""
  from benchmarks.device.common import Row
  from benchmarks.device.steps import table
  from chessjax.world_model import grid

  record = _record("bench_device_h200")
  assert record["device_kind"] == "NVIDIA H200" and record["platform"] == "gpu"
  measured = [r for r in record["rows"] if r["status"] == "ok"]
  assert len(measured) == 39 and all(r["run"] in (1, 2, 3) for r in measured)
  rows = [Row(**{k: v for k, v in r.items() if k != "run"}) for r in measured]
  assert table(rows) in (REPO / "docs/performance.md").read_text()

  step = {tuple(r["name"].split()[::3]): r["ms"] for r in measured if " d512 " in r["name"]}
  padded = _record("roofline")["sample"]["mean_padded_steps"]
  paper = 4 * 86400e3 / grid.STEPS_4_EPOCHS
  shown = _table("docs/performance.md", "family | float32 step ms (256 steps, measured)")
  expected = {}
  for family in {f for f, _ in step}:
    ms32, ms16 = step[family, "float32"], step[family, "bfloat16"]
    e32, e16 = ms32 * padded / 256, ms16 * padded / 256
    expected[family] = [round(ms32, 2), round(ms16, 2), round(e32, 2), round(e16, 2)]
    expected[family] += [_ratio(paper, e32, shown[family][4]), _ratio(paper, e16, shown[family][5])]
  _check(shown, expected)


def _marked(doc: str, key: str) -> str:
  """The text between `<!-- KEY -->` and `<!-- /KEY -->` in `doc` (KEY: `prefix:NAME`)."""
  text = (REPO / doc).read_text()
  start, end = f"<!-- {key} -->", f"<!-- /{key} -->"
  assert text.count(start) == 1 and text.count(end) == 1, key
  return text.split(start)[1].split(end)[0]


# record -> (the marker prefix in docs/world_model.md, the bench's arguments of its protocol).
LONG_RECORDS = {
  "bench_cwm_long": ("long", ["--max-len", "128", "--eval-max-len", "1024", "--tag", "_L128"]),
  "bench_cwm_whole": ("whole", ["--eval-max-len", "1024"]),
  "bench_cwm_x4": (
    "x4",
    ["--eval-max-len", "1024", "--steps", "12000", "--tag", "_x4"]
    + ["--families", "transformer,slice,gated_deltanet,mamba3"],
  ),
}


@pytest.mark.parametrize("name", sorted(LONG_RECORDS))
def test_long_games_tables_are_the_bench_rendering_of_the_record(name):
  """docs/world_model.md's long-game tables are what `launch.cwm_mini` renders from the committed
  record (docs/results/NAME.json), table for table; the whole-game record also holds the report's
  Tables 11-12, whose d128 cells the docs show."""
  from launch import cwm_mini as bench

  prefix, argv = LONG_RECORDS[name]
  record = _record(name)
  args = bench.parse_args(argv + ["--record", "", "--seeds", "0", "--ablation-seeds", "0"])
  for key in ("steps", "batch_size", "max_len", "eval_max_len", "test_games", "tag", "families"):
    assert record["args"][key] == getattr(args, key), key
  runs = record["runs"]
  names = [f"{r['family']}_s{r['seed']}" for r in runs]
  assert f"({', '.join(names)})" in _marked("docs/world_model.md", f"{prefix}:RUNS_DONE")
  rendered = bench.tables_markdown(args, runs, "machine") + bench.long_tables_markdown(args, runs)
  keys = {"bench_cwm_long": ("LENGTH_TABLE", "STRATA_TABLE"), "bench_cwm_whole": ("LENGTH_TABLE",)}
  for key in ("TABLE8_LONG", "TIME_TABLE") + keys.get(name, ()):
    tables = [t.strip() for t in _marked("docs/world_model.md", f"{prefix}:{key}").split("\n\n")]
    tables = [t for t in tables if t.startswith("|")]
    assert tables, key
    for t in tables:
      assert t in rendered, (key, t.splitlines()[:3])
  if "report_tables" not in record:
    return
  display = json.loads((REPO / "chessjax/world_model/paper_results.json").read_text())["families"]
  # "Table 11 (...)" then "Table 12 (...)", each followed by the report's Markdown table.
  shown = _marked("docs/world_model.md", f"{prefix}:TABLES_11_12").split("\nTable 12 ")
  assert len(shown) == 2 and shown[0].lstrip().startswith("Table 11 ")
  checked = 0
  for key, text in zip(("table11", "table12"), shown, strict=True):
    table = record["report_tables"][key]
    for row in table["rows"]:
      line = f"| {display[row['family']]} | {row['size']} | {row['split']} |"
      [match] = [x for x in text.splitlines() if x.startswith(line)]
      cells = [c.strip() for c in match[len(line) :].strip(" |").split("|")]
      for column, cell in zip(table["columns"], cells, strict=True):
        assert cell.split(" / ")[0] == f"{row[column]:.2f}", (line, column, cell)
        checked += 1
  assert checked == 2 * 4 * 7  # Tables 11-12: the 4 main families, 7 bins each


# ------------------------------------------------------------------------------------------------
# Every marked span is rendered from the records; the prose around them restates no numbers.


@pytest.mark.parametrize("doc", _DOCS)
def test_every_marked_span_is_its_rendering(doc):
  """`<!-- KEY -->...<!-- /KEY -->`: the text is what `docgen.docs` renders for KEY from the
  records (`python -m docgen` rewrites them)."""
  from docgen import docs

  text = (REPO / doc).read_text()
  found = docs.spans(text)
  assert found, doc
  for key, content in found:
    assert content.strip("\n") == docs.render(key), f"{doc}: span {key} is not its rendering"


def test_every_renderer_has_its_span():
  from docgen import docs

  assert docs.DOCS == _DOCS
  shown = set()
  for doc in docs.DOCS:
    shown |= {key for key, _ in docs.spans((REPO / doc).read_text())}
  assert set(docs.SPANS) - shown == set()


def test_the_command_runs_the_renderer():
  """`python -m docgen` is `docgen.docs`'s command (its older name, `python -m launch.docs`, is
  gone: no script folder imports the docs renderer)."""
  from docgen import __main__ as entry
  from docgen import docs

  assert entry.main is docs.main
  assert not (REPO / "launch" / "docs.py").exists()


def test_decimals_are_counted_as_a_reader_sees_them():
  from docgen import docs

  text = "loss 0.3892 (-0.0199), 2.44x, 85.29%, 2.4e-06, 1,632.5; not gpt-5.4, 1.11.2, d128 e2e4"
  assert docs.decimals(text) == ["0.3892", "-0.0199", "2.44", "85.29", "2.4e-06", "1,632.5"]
  assert docs.decimals("<!-- k -->0.5 and 0.25<!-- /k --> 0.75") == ["0.75"]


@pytest.mark.parametrize("doc", _DOCS)
def test_prose_outside_the_spans_keeps_few_decimals(doc):
  """The hand-written prose frames the rendered numbers without restating them: at most
  `docgen.docs.MAX_DECIMALS` decimal numbers outside the spans (constants such as a learning
  rate); the README counts its results section."""
  from docgen import docs

  text = (REPO / doc).read_text()
  if doc == "README.md":
    text = text.split("\n## Results\n")[1].split("\n## ")[0]
  found = docs.decimals(text)
  assert len(found) <= docs.MAX_DECIMALS, (doc, len(found), found)


def test_rewrite_fills_inline_and_block_spans(monkeypatch):
  from docgen import docs

  monkeypatch.setitem(docs.SPANS, "t:X", lambda: "\n| a |\n")
  text = "a <!-- t:X -->old<!-- /t:X --> b\n<!-- t:X -->\nold\n<!-- /t:X -->\n"
  want = "a <!-- t:X -->| a |<!-- /t:X --> b\n<!-- t:X -->\n| a |\n<!-- /t:X -->\n"
  assert docs.rewrite(text) == want
  assert [k for k, _ in docs.spans(want)] == ["t:X", "t:X"]
  with pytest.raises(KeyError, match="no renderer"):
    docs.render("t:NONE")


def test_record_tables_take_their_numbers_as_values():
  """A record's table holds numbers as values; a text cell with a decimal number is refused."""
  from docgen import record_tables

  assert record_tables.cell({"t": "{:.2f}x over {}", "v": [1.616, 2]}) == "1.62x over 2"
  assert (
    record_tables.cell(13200) == "13,200" and record_tables.cell({"t": "{}", "v": [None]}) == "-"
  )
  assert record_tables.cell("jax 0.10.2, 4 GiB") == "jax 0.10.2, 4 GiB"
  with pytest.raises(ValueError, match="decimal"):
    record_tables.cell("about 1.5 s")
  spec = {"header": ["a", "b"], "align": "lr", "rows": [["x", {"t": "{:.1f}", "v": [0.25]}]]}
  assert record_tables.table(spec) == "| a | b |\n|---|---:|\n| x | 0.2 |"


def test_the_roofline_record_is_its_arithmetic():
  """docs/results/roofline.json's times are its FLOPs and bytes over `chessjax.peaks`, and the
  paper-like batches are each padded to their longest game."""
  import numpy as np

  from benchmarks import bench_roofline
  from chessjax import peaks

  rec = _record("roofline")
  assert set(rec["rows"]) == set(bench_roofline.FAMILIES)
  for r in rec["rows"].values():
    for chip in rec["chips"]:
      p = peaks.PEAKS[chip]
      assert r[chip]["compute_ms"] == pytest.approx(1e3 * r["flop_per_step"] / p.fp32)
      assert r[chip]["memory_ms"] == pytest.approx(1e3 * r["bytes_per_step"] / p.bandwidth)
  s = rec["sample"]
  assert s["padding"] == pytest.approx(1 - s["mean_steps"] / s["mean_padded_steps"])
  steps = np.array([5, 1, 9, 3, 7])
  padded = bench_roofline.padded_lengths(steps, batch=2, shuffles=3, seed=1)
  assert len(padded) == 6 and all(p in (5, 9, 3, 7) for p in padded)  # 1 never the longest


def test_the_back_to_back_test_time_rows_are_their_arithmetic():
  """docs/results/performance_cpu.json's two back-to-back `make test` rows of 2026-11-29/30: the
  percentage main took longer than e636b4a, and the SLURM comparisons' sum and its share of the
  two workers' wall time, are computed from the seconds beside them."""
  rows = _record("performance_cpu")["tables"]["COMMANDS"]["rows"]
  cells = {r[1]["t"].split(":")[0]: r[1]["v"] for r in rows if isinstance(r[1], dict)}
  v = cells["5e83608"]  # main, e636b4a; longer by; three SLURM tests, their sum, / 2 workers
  assert v[4] == round(100 * (v[1] / v[3] - 1))
  assert v[8] == round(v[5] + v[6] + v[7], 1) and v[9] == round(v[8] / 2)
  n = cells["d621585 (the last landing)"]  # d621585, a13a5b5, e636b4a: longer by, both ours
  assert [n[9], n[10]] == sorted(round(100 * (ours / n[6] - 1)) for ours in (n[1], n[4]))
