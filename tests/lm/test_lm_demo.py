"""The LM demo's one-line reading of a probing set (`launch.demo_lm.verdict`)."""

from launch import demo_lm as demo


def test_verdict_reads_the_numbers_against_the_baseline():
  # 200 rows at ExM ~30%: a standard error of ~3.2 points, so +/-6.5 is the line.
  above = demo.verdict("short", 200, {"uci": 33.0, "rap": 31.0}, {"uci": 80, "rap": 75}, 23.0)
  assert "clearly more often" in above and "UCI 33.0 (+10.0)" in above and "80% / 75%" in above
  below = demo.verdict("long", 200, {"uci": 12.0, "rap": 11.0}, {"uci": 50, "rap": 52}, 22.6)
  assert "clearly less often" in below and "RAP 11.0 (-11.6)" in below
  level = demo.verdict("long", 200, {"uci": 20.0, "rap": 25.0}, {"uci": 50, "rap": 52}, 22.6)
  assert "neither model is told apart" in level
  mixed = demo.verdict("short", 200, {"uci": 35.0, "rap": 24.0}, {"uci": 70, "rap": 60}, 23.0)
  assert "UCI clearly above that guess; RAP level with that guess" in mixed
