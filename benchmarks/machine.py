"""The CPU a benchmark ran on, for the line each table records."""

from pathlib import Path


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
  """The first `model name` of `cpuinfo`; "" where there is none (not Linux, no such line)."""
  try:
    for line in cpuinfo.read_text().splitlines():
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return ""
