"""Tables and facts of records that are tables already: a record's `tables` and `facts`
(docs/results/performance_cpu.json, lm_notes.json) rendered as they stand, one span each.

A table is {"header": [...], "align": "lrr...", "rows": [[cell, ...], ...]}, a fact list is
{"items": [cell, ...]} (one bullet each), and a cell is one of:
* a string: text shown as is, which may not hold a decimal number (the numbers are values);
* a number: shown with `{:,}` (integers) or `{:g}`;
* {"t": template, "v": [values]}: `template.format(*values)`, e.g. {"t": "{:.1f}x", "v": [2.44]};
  `null` values show as "-".
A table or fact list may carry `command`, `machine`, `date` and `commit`: the provenance the page
states beside it. Spans: `PREFIX:KEY` for each key of a record's `tables` and `facts`.
"""

import re

from docgen.findings import record

DECIMAL = re.compile(r"(?<![\w.\-/])\d[\d,]*\.\d+(?![\w.])")
RECORDS = {"perf": "performance_cpu", "lmn": "lm_notes"}


def cell(c) -> str:
  if isinstance(c, str):
    if DECIMAL.search(c):
      raise ValueError(f"a text cell holds a decimal number (make it a value): {c!r}")
    return c
  if isinstance(c, bool) or c is None:
    return "-"
  if isinstance(c, int):
    return f"{c:,}"
  if isinstance(c, float):
    return f"{c:g}"
  if isinstance(c, dict):
    values = c["v"] if isinstance(c["v"], list) else [c["v"]]
    if any(v is None for v in values):
      return "-"
    return c["t"].format(*values)
  if isinstance(c, list):
    return " ".join(cell(x) for x in c)
  raise TypeError(f"cell {c!r}")


def table(spec: dict) -> str:
  header = spec["header"]
  align = spec.get("align") or "l" * len(header)
  rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
  out = ["| " + " | ".join(header) + " |", rule]
  for row in spec["rows"]:
    if len(row) != len(header):
      raise ValueError(f"row {row[0]!r}: {len(row)} cells for {len(header)} columns")
    out.append("| " + " | ".join(cell(c) for c in row) + " |")
  return "\n".join(out)


def facts(spec: dict) -> str:
  return "\n".join(f"* {cell(c)}" for c in spec["items"])


def register(spans: dict) -> None:
  """Adds a span per table and fact list of each record of `RECORDS`."""
  for prefix, name in RECORDS.items():
    rec = record(name)
    for key in rec.get("tables", {}):
      spans[f"{prefix}:{key}"] = lambda n=name, k=key: table(record(n)["tables"][k])
    for key in rec.get("facts", {}):
      spans[f"{prefix}:{key}"] = lambda n=name, k=key: facts(record(n)["facts"][k])
