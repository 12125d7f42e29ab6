"""`launch.transfer`'s record as Markdown tables and a figure: ExactState and loss on atomic games
against N, fine-tuned against from scratch per family; the chess score before and after; the
atomic strata. Read by the command (WORK/transfer.md, WORK/transfer.png) and by the docs renderer
(docgen), from the record alone.
"""

import os
from pathlib import Path

from chessjax.world_model import strata


# PLACEHOLDER: replaced by branch h54b (transfer_tables in the arms form). Until it lands, a record
# in the arms form (families -> seeds -> runs -> N -> arm) is shown in the first form: its first
# seed's source, ft and scratch arms.
def _first_form(record: dict) -> dict:
  if not all("seeds" in row for row in record["families"].values()):
    return record
  families = {}
  for family, row in record["families"].items():
    seed, cell = next(iter(row["seeds"].items()))
    runs = {n: {a: r.get(a) for a in ("ft", "scratch")} for n, r in cell["runs"].items()}
    families[family] = {"source": cell["source"], "runs": runs}
  return {**record, "args": {**record["args"], "seed": int(seed)}, "families": families}


def _pct(x) -> str:
  return "-" if x is None else f"{100 * x:.2f}"


def _count(x) -> str:
  return "-" if x is None else f"{x:,}"


def _num(x) -> str:
  return "-" if x is None else f"{x:.4f}"


def setup(record: dict) -> str:
  """The protocol in one paragraph."""
  p = record["args"]
  games = "a lichess export" if p["lichess_atomic"] else f"random-uniform, seed {p['train_seed']}"
  given = p["sources"]
  steps = {f: row["source"].get("steps") for f, row in record["families"].items()}
  trained = "; ".join(
    f"{f}: {given[f] + ', ' if f in given else ''}{_count(steps[f])} steps" for f in steps
  )
  return (
    f"d128, one seed ({p['seed']}); sources trained on real chess games ({trained}); "
    f"fine-tuned and from-scratch runs {p['steps']:,} steps on the first N atomic training "
    f"games ({games}), batch {p['batch_size']}, {p['max_len']} steps per game; test sets: "
    f"{p['test_games']:,} random-uniform games of seed {p['test_seed']} under each rule set."
  )


def atomic_table(record: dict) -> str:
  """ExactState and loss on the atomic test set per family and N, fine-tuned and from scratch."""
  lines = [
    "| family | N | fine-tuned ExactState % | from scratch ExactState % | fine-tuned loss "
    "| from scratch loss |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for family, row in record["families"].items():
    src = row["source"].get("atomic")
    if src:
      lines.append(
        f"| {family} | 0 (source) | {_pct(src['exact_state'])} | - | {_num(src['loss'])} | - |"
      )
    for n, runs in row["runs"].items():
      ft, sc = (runs[k]["atomic"] if runs[k] else {} for k in ("ft", "scratch"))
      lines.append(
        f"| {family} | {int(n):,} | {_pct(ft.get('exact_state'))} "
        f"| {_pct(sc.get('exact_state'))} | {_num(ft.get('loss'))} | {_num(sc.get('loss'))} |"
      )
  return "\n".join(lines)


def chess_table(record: dict) -> str:
  """ExactState and loss on the chess test set: the source, then each run after its N."""
  lines = ["| family | run | ExactState % | loss |", "|---|---|---:|---:|"]
  for family, row in record["families"].items():
    if row["source"].get("chess"):
      c = row["source"]["chess"]
      lines.append(f"| {family} | source | {_pct(c['exact_state'])} | {_num(c['loss'])} |")
    for n, runs in row["runs"].items():
      for kind, label in (("ft", "fine-tuned"), ("scratch", "from scratch")):
        if runs[kind]:
          c = runs[kind]["chess"]
          lines.append(
            f"| {family} | {label}, N={int(n):,} | {_pct(c['exact_state'])} | {_num(c['loss'])} |"
          )
  return "\n".join(lines)


def strata_table(record: dict) -> str:
  """Per atomic stratum: ExactState on its steps / on the other steps at the same plies; the
  squares' accuracy on its steps / on every step; (its steps)."""
  lines = [
    "| family | run | " + " | ".join(strata.ATOMIC_STRATA) + " |",
    "|---|---|" + "---:|" * len(strata.ATOMIC_STRATA),
  ]
  for family, row in record["families"].items():
    named = [("source", row["source"])]
    for n, runs in row["runs"].items():
      named += [(f"{k} N={int(n):,}", runs[k]) for k in ("ft", "scratch") if runs[k]]
    for label, r in named:
      if not r or "atomic" not in r:
        continue
      cells = []
      for s in strata.ATOMIC_STRATA:
        v = r["atomic"]["strata"][s]
        cells.append(
          f"{_pct(v['exact_state'])} / {_pct(v['matched']['exact_state'])}; "
          f"{_pct(v.get('pieces'))} / {_pct(r['atomic'].get('pieces'))} ({v['steps']:,})"
        )
      lines.append(f"| {family} | {label} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def tables_markdown(record: dict) -> str:
  record = _first_form(record)  # PLACEHOLDER: replaced by branch h54b.
  return "\n".join(
    [
      "# World models across rules: atomic games after chess",
      "",
      setup(record),
      "",
      "## ExactState % and loss on atomic games against N",
      "",
      atomic_table(record),
      "",
      "## Chess before and after: ExactState % and loss on the chess test set",
      "",
      chess_table(record),
      "",
      "## Atomic strata: ExactState % on the stratum's steps / on the other steps at the same "
      "plies; squares' accuracy % on its steps / on every step (its steps)",
      "",
      strata_table(record),
      "",
    ]
  )


def figure(record: dict, out: Path) -> None:
  """ExactState and loss on atomic games against N (log scale), fine-tuned (solid) and from
  scratch (dashed) per family; the source at N = 0 as a dotted level."""
  import matplotlib

  record = _first_form(record)  # PLACEHOLDER: replaced by branch h54b.
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 2, figsize=(10, 5))
  colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  for j, (family, row) in enumerate(record["families"].items()):
    color = colors[j % len(colors)]
    for ax, metric, scale in ((axes[0], "exact_state", 100), (axes[1], "loss", 1)):
      for kind, style in (("ft", "-"), ("scratch", "--")):
        pts = [
          (int(n), runs[kind]["atomic"][metric] * scale)
          for n, runs in row["runs"].items()
          if runs[kind]
        ]
        if pts:
          xs, ys = zip(*pts, strict=True)
          label = f"{family} {'fine-tuned' if kind == 'ft' else 'from scratch'}"
          ax.plot(xs, ys, style, marker="o", color=color, label=label)
      if row["source"].get("atomic"):
        level = row["source"]["atomic"][metric] * scale
        ax.axhline(level, color=color, linestyle=":", linewidth=1, label=f"{family} source")
  for ax, title in zip(axes, ("ExactState % (atomic test)", "loss (atomic test)"), strict=True):
    ax.set_xscale("log")
    ns = sorted({int(n) for row in record["families"].values() for n in row["runs"]})
    ax.set_xticks(ns, [f"{n:,}" for n in ns])
    ax.minorticks_off()
    ax.set_xlabel("atomic training games N")
    ax.set_title(title)
  handles, labels = axes[0].get_legend_handles_labels()
  fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7)  # Below both panels.
  fig.tight_layout(rect=(0, 0.05 + 0.04 * ((len(labels) + 3) // 4), 1, 1))
  tmp = out.with_name(f".{out.stem}.tmp.png")
  fig.savefig(tmp, dpi=120)
  plt.close(fig)
  os.replace(tmp, out)
