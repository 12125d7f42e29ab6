"""Moved: the d128 experiment driver is `launch/cwm_mini.py` (`python -m launch.cwm_mini`).

This name stays for one release so that earlier commands (`python -m benchmarks.bench_cwm_mini
...`, e.g. in the records of docs/results/) keep working: it runs the new module with the same
arguments and re-exports its names.
"""

import sys

from launch import cwm_mini
from launch.cwm_mini import *  # noqa: F403

if __name__ == "__main__":
  print("benchmarks.bench_cwm_mini is now launch.cwm_mini", file=sys.stderr)
  cwm_mini.main()
