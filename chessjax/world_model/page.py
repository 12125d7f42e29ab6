"""A page to watch a model lose the board: true and predicted boards after every ply, in one
self-contained HTML file (no network, no external script or font).

Used by `chessjax.world_model.track --html OUT.html` (one game) and by
`chessjax.world_model.evaluate --gallery N` (the N worst-tracked games of each split, one page
per split with a game selector). For the shown game the page draws:
* the true board and the model's argmax board after the current ply, the squares of the ply's
  move highlighted on both, every square the model gets wrong marked in red on its board;
* side to move, castling, en passant and clocks, true against predicted, wrong ones marked;
* the fraction of the 75 labels right at every step (a line) and the exact steps (dots), with the
  current ply marked; a click on the plot jumps there;
* a slider, buttons and keys (left/right arrows, Home, End) to step, and a link to the first
  wrong ply.
Everything is computed here: the page only draws the label rows it carries (JSON in the page).
"""

import html
import json

import numpy as np

PIECES = ".PNBRQKpnbrqk"  # Label classes of a square (chessjax.labels).


def game_view(title: str, ucis, true_states, pred_labels) -> dict:
  """What the page needs of one game: its UCI moves (T - 1 of them), true and predicted label
  rows [T, 75] (step 0: the initial position)."""
  true_states, pred_labels = np.asarray(true_states), np.asarray(pred_labels)
  hit = true_states == pred_labels
  exact = hit.all(-1)
  wrong = np.nonzero(~exact)[0]
  return {
    "title": title,
    "moves": [None, *ucis],
    "true": true_states.astype(int).tolist(),
    "pred": pred_labels.astype(int).tolist(),
    "accuracy": [round(float(x), 4) for x in hit.mean(-1)],
    "exact_state": float(exact.mean()),
    "first_wrong": int(wrong[0]) if len(wrong) else -1,
  }


def page_html(games: list[dict], heading: str) -> str:
  """The page for `games` (`game_view` dicts); the first one is shown first."""
  data = json.dumps(games, separators=(",", ":")).replace("</", "<\\/")
  return (
    _TEMPLATE.replace("__HEADING__", html.escape(heading))
    .replace("__PIECES__", PIECES)
    .replace("__DATA__", data)
  )


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__HEADING__</title>
<style>
body { font-family: sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 8px; }
#controls { margin: 8px 0; display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
#slider { width: 420px; }
.boards { display: flex; gap: 24px; }
.board { display: grid; grid-template-columns: repeat(8, 44px); grid-template-rows: repeat(8, 44px);
  border: 2px solid #444; }
.sq { display: flex; align-items: center; justify-content: center; font-size: 32px;
  line-height: 1; position: relative; }
.light { background: #eeeed2; }
.dark { background: #b0b58a; }
.sq.move { background: #f6d743; }
.sq.wrong { background: #e8413c; }
.sq.move.wrong { background: #c0392b; }
.caption { font-weight: bold; margin: 4px 0; }
table.aux { border-collapse: collapse; margin-top: 6px; font-size: 13px; }
table.aux td, table.aux th { border: 1px solid #bbb; padding: 2px 6px; }
td.bad { background: #f4b6b3; }
#plot { border: 1px solid #bbb; margin-top: 10px; cursor: pointer; }
#status { font-size: 14px; }
</style>
</head>
<body>
<h1>__HEADING__</h1>
<div id="controls">
  <select id="game"></select>
  <button id="prev" title="left arrow">&#9664;</button>
  <input id="slider" type="range" min="0" value="0">
  <button id="next" title="right arrow">&#9654;</button>
  <a href="#" id="firstwrong"></a>
</div>
<div id="status"></div>
<div class="boards">
  <div><div class="caption">true</div><div class="board" id="true"></div></div>
  <div><div class="caption">model (wrong squares red)</div><div class="board" id="pred"></div>
  </div>
  <div><div class="caption">other labels</div><table class="aux" id="aux"></table></div>
</div>
<svg id="plot" width="760" height="170"></svg>
<script>
"use strict";
const GAMES = __DATA__;
const PIECES = "__PIECES__";
const GLYPHS = {P: "\\u2659", N: "\\u2658", B: "\\u2657", R: "\\u2656", Q: "\\u2655", K: "\\u2654",
  p: "\\u265F", n: "\\u265E", b: "\\u265D", r: "\\u265C", q: "\\u265B", k: "\\u265A", ".": ""};
let game = 0, ply = 0;

function squareIndex(name) {  // "e4" -> label index (a8 = 0, h1 = 63)
  return (8 - Number(name[1])) * 8 + (name.charCodeAt(0) - 97);
}

function makeBoard(id) {
  const el = document.getElementById(id);
  for (let i = 0; i < 64; i++) {
    const sq = document.createElement("div");
    sq.dataset.sq = String(i);
    el.appendChild(sq);
  }
}

function aux(row) {
  const ep = row[69] ? "abcdefgh"[row[69] - 1] + (row[70] === 1 ? "3" : "6") : "-";
  const castle = ["K", "Q", "k", "q"].filter((c, i) => row[65 + i]).join("") || "-";
  return {side: row[64] ? "black" : "white", castling: castle, "en passant": ep,
    halfmove: row[71] * 256 + row[72], fullmove: row[73] * 256 + row[74]};
}

function drawBoard(id, row, other, moveSquares, markWrong) {
  const cells = document.getElementById(id).children;
  for (let i = 0; i < 64; i++) {
    const c = cells[i];
    const shade = ((i >> 3) + (i & 7)) % 2 ? "dark" : "light";
    c.className = "sq " + shade + (moveSquares.includes(i) ? " move" : "")
      + (markWrong && row[i] !== other[i] ? " wrong" : "");
    c.textContent = GLYPHS[PIECES[row[i]]];
  }
}

function drawPlot() {
  const g = GAMES[game], svg = document.getElementById("plot");
  const w = 760, h = 170, pad = 24, n = g.accuracy.length;
  const x = t => pad + (w - 2 * pad) * (n > 1 ? t / (n - 1) : 0);
  const y = a => h - pad - (h - 2 * pad) * a;
  let s = `<rect x="0" y="0" width="${w}" height="${h}" fill="white"/>`;
  s += `<line x1="${pad}" y1="${y(1)}" x2="${w - pad}" y2="${y(1)}" stroke="#ddd"/>`;
  const pts = g.accuracy.map((a, t) => `${x(t).toFixed(1)},${y(a).toFixed(1)}`).join(" ");
  s += `<polyline points="${pts}" fill="none" stroke="#2c6fbb" stroke-width="1.5"/>`;
  g.accuracy.forEach((a, t) => {
    if (a === 1) s += `<circle cx="${x(t).toFixed(1)}" cy="${y(1)}" r="1.6" fill="#2a9d4b"/>`;
  });
  s += `<line id="cursor" x1="${x(ply)}" y1="${pad / 2}" x2="${x(ply)}" y2="${h - pad}"
    stroke="#e8413c" stroke-width="2"/>`;
  s += `<text x="${pad}" y="14" font-size="12">labels right per ply (green dots: exact state);`
    + ` ply 0-${n - 1}</text>`;
  svg.innerHTML = s;
}

function show() {
  const g = GAMES[game];
  const t = ply, move = g.moves[t];
  const moveSquares = move ? [squareIndex(move.slice(0, 2)), squareIndex(move.slice(2, 4))] : [];
  drawBoard("true", g.true[t], g.pred[t], moveSquares, false);
  drawBoard("pred", g.pred[t], g.true[t], moveSquares, true);
  const a = aux(g.true[t]), b = aux(g.pred[t]);
  let rows = "<tr><th></th><th>true</th><th>model</th></tr>";
  for (const k of Object.keys(a)) {
    rows += `<tr><td>${k}</td><td>${a[k]}</td><td class="${a[k] === b[k] ? "" : "bad"}">`
      + `${b[k]}</td></tr>`;
  }
  document.getElementById("aux").innerHTML = rows;
  const wrong = g.true[t].filter((v, i) => v !== g.pred[t][i]).length;
  document.getElementById("status").textContent = `ply ${t} of ${g.moves.length - 1}`
    + (move ? `, move ${move}` : ", initial position")
    + (wrong ? `: ${wrong} of 75 labels wrong` : ": exact");
  document.getElementById("slider").value = String(t);
  drawPlot();
}

function go(t) {
  const n = GAMES[game].moves.length;
  ply = Math.max(0, Math.min(n - 1, t));
  show();
}

function selectGame(i) {
  game = i;
  const g = GAMES[game];
  document.getElementById("slider").max = String(g.moves.length - 1);
  const link = document.getElementById("firstwrong");
  link.textContent = g.first_wrong < 0 ? "never wrong" : `first wrong ply: ${g.first_wrong}`;
  go(0);
}

makeBoard("true");
makeBoard("pred");
const select = document.getElementById("game");
GAMES.forEach((g, i) => {
  const o = document.createElement("option");
  o.value = String(i);
  o.textContent = `${g.title} (ExactState ${(100 * g.exact_state).toFixed(1)}%)`;
  select.appendChild(o);
});
select.addEventListener("change", () => selectGame(Number(select.value)));
document.getElementById("slider").addEventListener("input", e => go(Number(e.target.value)));
document.getElementById("prev").addEventListener("click", () => go(ply - 1));
document.getElementById("next").addEventListener("click", () => go(ply + 1));
document.getElementById("firstwrong").addEventListener("click", e => {
  e.preventDefault();
  if (GAMES[game].first_wrong >= 0) go(GAMES[game].first_wrong);
});
document.getElementById("plot").addEventListener("click", e => {
  const r = e.currentTarget.getBoundingClientRect(), n = GAMES[game].moves.length;
  go(Math.round((e.clientX - r.left - 24) / (r.width - 48) * (n - 1)));
});
document.addEventListener("keydown", e => {
  if (e.target.tagName === "SELECT" || e.target.tagName === "INPUT") return;
  if (e.key === "ArrowRight") go(ply + 1);
  else if (e.key === "ArrowLeft") go(ply - 1);
  else if (e.key === "Home") go(0);
  else if (e.key === "End") go(GAMES[game].moves.length - 1);
  else return;
  e.preventDefault();
});
selectGame(0);
</script>
</body>
</html>
"""
