"""PLACEHOLDER: replaced by branch h54b (issue 54: each atomic test game against its chess twin).

Only what `launch.transfer`'s report calls, so that the plan's report task runs on this branch;
the record's "twins" entry is empty until the real module lands.
"""

# PLACEHOLDER: replaced by branch h54b


def twin_summary(atomic_dir, chess_dir, max_len) -> dict:
  """PLACEHOLDER: replaced by branch h54b."""
  return {}
