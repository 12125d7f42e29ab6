"""One single-node SLURM for the whole test run (`tests/slurm/local_slurm.sh`), started by the
first cluster test and stopped at the end, also when a test fails: configuration, munge key and
socket, state and logs in a temporary folder, the daemons stopped by their pids.

It needs root (munged runs as user munge, slurmd as root) and Debian's slurmctld, slurmd,
slurm-client and munge (`make slurm` installs them). Where one is missing the cluster tests skip
with one line naming it; under CI=true they fail instead, so CI always runs them.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "slurm" / "local_slurm.sh"
TOOLS = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scontrol", "scancel")


def missing() -> str | None:
  """What this machine lacks to start the test SLURM, in words (None: nothing)."""
  if os.geteuid() != 0:
    return "root (munged runs as user munge, slurmd as root)"
  path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
  absent = [t for t in TOOLS if not shutil.which(t, path=path)]
  if absent:
    return f"{', '.join(absent)} (make slurm: apt-get install slurmctld slurmd slurm-client munge)"
  return None


@pytest.fixture(scope="session")
def slurm():
  """SLURM_CONF of a running single-node SLURM (also set in os.environ while it runs)."""
  lack = missing()
  if lack:
    if os.environ.get("CI", "").lower() == "true":
      pytest.fail(f"cluster tests need {lack}; CI must run them")
    pytest.skip(f"cluster tests need {lack}")
  # Not under pytest's 0700 temporary folders: munged (user munge) must reach its socket.
  folder = Path(tempfile.mkdtemp(prefix="chessjax-slurm-", dir="/tmp"))
  env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
  try:
    r = subprocess.run(
      ["bash", str(SCRIPT), "start", str(folder)], env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, f"local SLURM did not start:\n{r.stdout}{r.stderr}"
    conf = folder / "slurm.conf"
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    os.environ["PATH"] = env["PATH"]
    yield conf
  finally:
    subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], env=env, capture_output=True)
    if "before" in locals():
      if before is None:
        os.environ.pop("SLURM_CONF", None)
      else:
        os.environ["SLURM_CONF"] = before
    shutil.rmtree(folder, ignore_errors=True)
