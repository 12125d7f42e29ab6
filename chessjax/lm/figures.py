"""The figures of the language-model report (`chessjax.lm.report`), Toshniwal et al. (2022):

* Figure 2: dev perplexity against the RAP probability p (UCI is p = 0), one line per model, size
  and training size, from the report's Table 3 rows; the paper's plot has no numbers in its text,
  so only its Table 3 points (UCI and the tuned p) are drawn beside ours, unconnected;
* Figure 4: tokens of each training game written in UCI (`<s>` and `</s>` included), per training
  set (data set, split, first N games) of the runs;
* Figure 5: prefix lengths in moves of each probing set the runs were probed on (the End-Actual
  records of the first run's `eval/probes.jsonl`);
* Figure 8: per run, End task and piece type, the mean path length of the legal predictions and
  of the path-obstruction errors (`eval/probes.jsonl`); path length is the Chebyshev distance
  from the start square to the predicted one (king moves), so knights always score 2 and kings 1.

`figure_data` gathers the numbers (they go into tables.json), `draw` makes the matplotlib figures.
Data that cannot be read is left out with a note.
"""

import json
from pathlib import Path

import grain.python as grain
import numpy as np

from chessjax import plotting
from chessjax.data import records, source
from chessjax.lm import probing
from chessjax.lm import tokens as tk

HISTOGRAM_BIN = 10  # Figure 4's bin width in tokens.


def train_token_lengths(data, split: str = "train", limit: int = 0) -> np.ndarray:
  """Tokens of each of the first `limit` (0: all) games of a data set split written in UCI, `<s>`
  and `</s>` included (`tokens.token_length`; Toshniwal et al. 2022, Figure 4)."""
  paths = source.shard_paths(data, split)
  src = grain.ArrayRecordDataSource(paths) if paths else []
  n = len(src) if not limit else min(limit, len(src))
  out = np.empty(n, dtype=np.int64)
  chunk = 4096
  for lo in range(0, n, chunk):
    hi = min(lo + chunk, n)
    for i, rec in enumerate(src.__getitems__(list(range(lo, hi))), lo):
      out[i] = tk.token_length(records.decode_moves(rec), notation="uci")
  return out


def _histogram(values: np.ndarray, width: int) -> dict:
  values = np.asarray(values, dtype=np.int64)
  if not len(values):
    return {"count": 0, "mean": None, "min": None, "max": None, "bin_width": width, "bins": []}
  lo = int(values.min()) // width * width
  counts = np.bincount((values - lo) // width)
  return {
    "count": int(len(values)),
    "mean": float(values.mean()),
    "min": int(values.min()),
    "max": int(values.max()),
    "bin_width": width,
    "bin_start": lo,
    "bins": counts.tolist(),
  }


def figure4_data(runs, notes: list[str]) -> list[dict]:
  """One histogram of tokenized UCI game lengths per training set the runs were trained on."""
  groups: dict = {}
  for r in runs:
    if r.data:
      groups.setdefault((r.data, r.train_split, r.max_train_games), []).append(r.workdir)
  out = []
  for (data, split, limit), workdirs in groups.items():
    try:
      lengths = train_token_lengths(data, split, limit)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
      notes.append(f"figure 4: training data {data}:{split} unreadable ({type(e).__name__}: {e})")
      continue
    out.append(
      {
        "data": data,
        "split": split,
        "max_train_games": limit,
        "workdirs": workdirs,
        **_histogram(lengths, HISTOGRAM_BIN),
      }
    )
  return out


def read_probes(path) -> list[dict]:
  return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def figure5_data(runs, notes: list[str]) -> list[dict]:
  """One histogram of probing prefix lengths (moves) per probing set the runs were probed on
  (prefixes of each set's End-Actual records in its first run's `eval/probes.jsonl`)."""
  groups: dict = {}
  for r in runs:
    if r.probes is None:
      continue
    try:
      prefixes = tuple(x["prefix"] for x in read_probes(r.probes) if x["task"] == "end_actual")
    except (OSError, ValueError, KeyError) as e:
      notes.append(f"figure 5: {r.probes} unreadable ({type(e).__name__}: {e})")
      continue
    sets = ((r.results or {}).get("probes") or {}).get("sets")
    groups.setdefault(prefixes, {"sets": sets, "workdirs": []})["workdirs"].append(r.workdir)
  out = []
  for prefixes, group in groups.items():
    lengths = np.array([len(p.split()) for p in prefixes], dtype=np.int64)
    out.append({**group, "workdir": group["workdirs"][0], **_histogram(lengths, 1)})
  return out


def figure8_data(runs, notes: list[str]) -> list[dict]:
  """Per run and End task and piece type: mean path length of the legal predictions and of the
  path-obstruction errors, with their counts (from `eval/probes.jsonl`)."""
  out = []
  for r in runs:
    if r.probes is None:
      continue
    try:
      recs = [x for x in read_probes(r.probes) if x["task"] in ("end_actual", "end_other")]
      if recs and "path_length" not in recs[0]:
        notes.append(
          f"figure 8: {r.probes} predates path lengths; rerun chessjax.lm.evaluate for it"
        )
        continue
      for task in ("end_actual", "end_other"):
        for piece in probing.TABLE11_PIECES:
          mine = [x for x in recs if x["task"] == task and x["piece"] == piece]
          legal = [x["path_length"] for x in mine if x["legal_match"]]
          blocked = [x["path_length"] for x in mine if x["error"] == "path_obstruction"]
          out.append(
            {
              "workdir": r.workdir,
              "model": r.family,
              "size": r.size,
              "notation": r.notation,
              "rap_p": r.rap_p,
              "train": r.train,
              "task": task,
              "piece": piece,
              "legal_count": len(legal),
              "legal_mean_path": float(np.mean(legal)) if legal else None,
              "path_obstruction_count": len(blocked),
              "path_obstruction_mean_path": float(np.mean(blocked)) if blocked else None,
            }
          )
    except (OSError, ValueError, KeyError, TypeError) as e:
      notes.append(f"figure 8: {r.probes} unreadable ({type(e).__name__}: {e})")
  return out


def figure2_data(tables: dict, paper: dict) -> dict:
  """Dev perplexity against RAP p in % (UCI is p = 0) per (model, size, training size) from
  Table 3's rows, and the paper's known points (its Table 3: UCI and the tuned p)."""
  ours: dict = {}
  for row in tables["table3"]["rows"]:
    if row["workdir"] is None or row["notation"] not in ("uci", "rap"):
      continue
    if row["dev_perplexity"] is None:
      continue
    p = 0.0 if row["notation"] == "uci" else 100 * row["rap_p"]
    key = (row["model"], row["size"], row["train"])
    ours.setdefault(key, []).append([p, row["dev_perplexity"], row["workdir"]])
  tuned = paper["rap_p"]["tuned"]
  known: dict = {}
  for row in paper["tables"]["table3"]["rows"]:
    if row["notation"] in ("uci", "rap"):
      p = 0.0 if row["notation"] == "uci" else 100 * tuned[row["train"]]
      known.setdefault(row["train"], []).append([p, row["dev_perplexity"]])
  return {
    "ours": [
      {"model": m, "size": s, "train": t, "points": sorted(v)} for (m, s, t), v in ours.items()
    ],
    "paper": [{"train": t, "points": sorted(v)} for t, v in known.items()],
    "grid_percent": [100 * p for p in paper["rap_p"]["grid"]],
  }


# ------------------------------------------------------------------------------------------------
# Figures


def figure2(data: dict):
  fig, ax = plotting.subplots(figsize=(7, 4.5))
  colors = {"S": "tab:blue", "M": "tab:orange", "L": "tab:green", "all": "tab:red"}
  for line in data["ours"]:
    x = [p for p, _, _ in line["points"]]
    y = [v for _, v, _ in line["points"]]
    label = f"ours: {line['model']} {line['size']} Train-{line['train']}"
    ax.plot(x, y, "o-", color=colors.get(line["train"], "tab:gray"), label=label)
  for line in data["paper"]:
    x, y = zip(*line["points"], strict=True)
    color = colors.get(line["train"], "tab:gray")
    label = f"paper Train-{line['train']} (Table 3 points only)"
    ax.plot(x, y, "s", mfc="none", color=color, label=label)
  ax.set_xticks(sorted({0.0, *data["grid_percent"]}))
  ax.set_yscale("log")
  ax.set_xlabel("RAP probability p (%)  (0 = UCI)")
  ax.set_ylabel("dev perplexity per move")
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  if not data["ours"]:
    ax.text(0.5, 0.5, "no evaluated UCI or RAP run", ha="center", transform=ax.transAxes)
  ax.set_title("Figure 2: dev perplexity against RAP probability")
  fig.tight_layout()
  return fig


def _hist_axes(ax, hist: dict, title: str, xlabel: str):
  if hist["count"]:
    width = hist["bin_width"]
    edges = hist["bin_start"] + width * np.arange(len(hist["bins"]))
    ax.bar(edges, hist["bins"], width=width, align="edge", edgecolor="white")
  ax.set_title(title, fontsize=8)
  ax.set_xlabel(xlabel)
  ax.set_ylabel("count")


def histogram_figure(data: list[dict], title: str, xlabel: str, name):
  n = max(len(data), 1)
  fig, axes = plotting.subplots(n, 1, figsize=(7, 3 * n), squeeze=False)
  for ax, hist in zip(axes[:, 0], data, strict=False):
    _hist_axes(ax, hist, name(hist), xlabel)
  if not data:
    axes[0][0].text(0.5, 0.5, "no data", ha="center", transform=axes[0][0].transAxes)
  fig.suptitle(title)
  fig.tight_layout()
  return fig


def figure8(data: list[dict]):
  runs = list(dict.fromkeys(d["workdir"] for d in data))
  fig, axes = plotting.subplots(max(len(runs), 1), 2, figsize=(10, 3.2 * max(len(runs), 1)))
  axes = np.atleast_2d(axes)
  x = np.arange(len(probing.TABLE11_PIECES))
  for i, w in enumerate(runs):
    for j, task in enumerate(("end_actual", "end_other")):
      ax = axes[i][j]
      rows = {d["piece"]: d for d in data if d["workdir"] == w and d["task"] == task}
      for k, (key, label) in enumerate(
        (("legal_mean_path", "legal"), ("path_obstruction_mean_path", "path obstruction"))
      ):
        y = [rows[p][key] if rows[p][key] is not None else np.nan for p in probing.TABLE11_PIECES]
        ax.bar(x + (k - 0.5) * 0.38, y, width=0.38, label=label)
      ax.set_xticks(x, list(probing.TABLE11_PIECES))
      ax.set_ylabel("mean path length (king moves)")
      first = next(iter(rows.values()))
      ax.set_title(
        f"{'End-Actual' if task == 'end_actual' else 'End-Other'}: {first['model']} "
        f"{first['size']} {first['notation'].upper()} Train-{first['train']}",
        fontsize=8,
      )
      ax.legend(fontsize=7)
  if not runs:
    axes[0][0].text(0.5, 0.5, "no probed run", ha="center", transform=axes[0][0].transAxes)
  fig.suptitle("Figure 8: path length of predicted moves (knights always 2, kings 1)")
  fig.tight_layout()
  return fig


# ------------------------------------------------------------------------------------------------
# Entry points


def figure_data(runs, tables: dict, paper: dict, notes: list[str]) -> dict:
  """{figure2, figure4, figure5, figure8}: the numbers of each figure, for tables.json and `draw`.
  `runs` are `chessjax.lm.report.LMRun`s, `tables` the report's tables; notes on data that could
  not be read are appended to `notes`."""
  return {
    "figure2": figure2_data(tables, paper),
    "figure4": figure4_data(runs, notes),
    "figure5": figure5_data(runs, notes),
    "figure8": figure8_data(runs, notes),
  }


def draw(data: dict) -> dict:
  """{file name: matplotlib figure} of `figure_data`'s numbers (the caller saves and closes)."""
  return {
    "figure2.png": figure2(data["figure2"]),
    "figure4.png": histogram_figure(
      data["figure4"],
      "Figure 4: tokenized UCI game lengths of the training data",
      "tokens per game",
      lambda h: (
        f"{h['data']}:{h['split']}"
        + (f" (first {h['max_train_games']:,})" if h["max_train_games"] else "")
      ),
    ),
    "figure5.png": histogram_figure(
      data["figure5"],
      "Figure 5: prefix lengths of the probing prompts",
      "prefix length (moves)",
      lambda h: str(h["sets"] or h["workdir"]),
    ),
    "figure8.png": figure8(data["figure8"]),
  }
