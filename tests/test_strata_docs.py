"""The strata table (`launch.cwm_tables.strata_lines`) and their reading in the docs
(`docgen.findings_long.strata_findings`) on a synthetic long-game record whose four main
families have the ply-matched numbers (`matched`, `transition_error`, the `ep_label` stratum) and
whose ablations do not, as the record will be once the main families' L128 runs are evaluated
again; and on the committed record, which has none."""

import copy

from docgen import findings, findings_long
from launch import cwm_tables

MAIN = ("transformer", "slice", "gated_deltanet", "mamba3")


def _with_matched(rec: dict, low: set[str], breaks: set[str]) -> dict:
  """`rec` with every main-family run given matched numbers: a stratum's ExactState at least
  0.05, in `low` 0.01 below its matched ExactState (else 0.01 above), one in `breaks` with a
  transition error 0.05 above its matched (else 0.05 below); `ep_label` added."""
  rec = copy.deepcopy(rec)
  for r in rec["runs"]:
    if r["family"] not in MAIN:
      continue
    for split in ("real", "random"):
      strata = r[split]["long"]["strata"]
      strata["ep_label"] = {"steps": 900, "exact_state": 0.05}
      for name, st in strata.items():
        # At least 5% exact: every stratum's expected count is large enough to be called.
        st["exact_state"] = e = max(st["exact_state"] or 0.0, 0.05)
        st["matched"] = {"steps": st["steps"], "exact_state": e + (0.01 if name in low else -0.01)}
        t = 0.2
        st["transition_error"] = {
          "steps": st["steps"] // 2,
          "error": t,
          "matched": {"steps": st["steps"] // 2, "error": t - 0.05 if name in breaks else t + 0.05},
        }
  return rec


def _patch(monkeypatch, rec):
  real = findings.record
  monkeypatch.setattr(findings_long, "record", lambda n: rec if n == "bench_cwm_long" else real(n))


def test_the_committed_record_has_matched_strata_for_the_four_main_families():
  """The L128 record (issue 48): the four main families' runs hold `ep_label`, the ply-matched
  scores and the transition error; the three ablations' older runs do not, and both readings are
  rendered, each naming its runs."""
  rows = findings.record("bench_cwm_long")["runs"]
  assert [cwm_tables.has_matched(r) for r in rows] == [r["family"] in MAIN for r in rows]
  for r in rows:
    if r["family"] in MAIN:
      for split in ("real", "random"):
        strata = r[split]["long"]["strata"]
        assert "ep_label" in strata
        assert {"matched", "transition_error"} <= set(strata["capture"])
  text = "\n".join(cwm_tables.strata_lines(rows))
  assert " / " in text.split("| run |")[1] and "(D)" in text
  said = "\n".join(findings_long.strata_findings())
  assert "Runs without the ply-matched numbers" in said and "In every one of these runs" in said


def test_matched_runs_show_both_numbers_and_the_reading_follows_them(monkeypatch):
  rec = _with_matched(findings.record("bench_cwm_long"), {"capture", "ep_label"}, {"check"})
  rows = rec["runs"]
  assert [cwm_tables.has_matched(r) for r in rows] == [r["family"] in MAIN for r in rows]
  lines = cwm_tables.strata_lines(rows)
  header = next(x for x in lines if x.startswith("| run |"))
  assert "ep_label" in header and "`E / M (T / TM)`" in lines[2] and "`E (D)`" in lines[2]
  gdn = next(x for x in lines if x.startswith("| gated_deltanet_s0 | real |"))
  st = rows[2]["real"]["long"]["strata"]["capture"]
  assert (
    f"| {100 * st['exact_state']:.2f} / {100 * st['matched']['exact_state']:.2f} (20.0 / 25.0) |"
    in gdn
  )
  diag = next(x for x in lines if x.startswith("| slice_diag_s0 | real |"))
  assert " / " not in diag and diag.count("|") == header.count("|")  # no ep_label there: "-"

  _patch(monkeypatch, rec)
  said = "\n".join(findings_long.strata_findings())
  assert "| `capture` | 4 of 4 | 0 of 4 |" in said and "| `check` | 0 of 4 | 4 of 4 |" in said
  assert "on `capture` and `ep_label`; the state broken more often" in said
  assert "same plies on `check`." in said
  assert (
    "Runs without the ply-matched numbers (Diagonal SLiCE, Gated DeltaNet with positive "
    "eigenvalues and Mamba-2; seed 0, one seed" in said
  )

  # One run's capture above its matched value: the reading no longer says "every run".
  capture = rows[0]["real"]["long"]["strata"]["capture"]
  capture["matched"]["exact_state"] = capture["exact_state"] - 0.01
  said = "\n".join(findings_long.strata_findings())
  assert "| `capture` | 3 of 4 |" in said and "on `ep_label`; the state broken" in said
  assert "Too thin" not in said

  # 0 exact steps on 13 steps whose matched ExactState is 10%: 1.3 expected, too thin to call
  # below (the claims' rule, `verdict.MIN_EXPECTED`).
  capture.update(steps=13, exact_state=0.0, matched={"steps": 13, "exact_state": 0.1})
  said = "\n".join(findings_long.strata_findings())
  assert "| `capture` | 3 of 3 (1 too thin) |" in said
  assert "below the other steps' at the same plies on `ep_label`;" in said
  assert "fewer than 5 exact or broken states on the stratum's steps): `capture`." in said


def test_every_run_matched_leaves_no_older_sentence(monkeypatch):
  rec = _with_matched(findings.record("bench_cwm_long"), set(), set())
  rec["runs"] = [r for r in rec["runs"] if r["family"] in MAIN]
  _patch(monkeypatch, rec)
  said = "\n".join(findings_long.strata_findings())
  assert "Runs without" not in said
  assert "below the other steps' at the same plies on no stratum" in said
