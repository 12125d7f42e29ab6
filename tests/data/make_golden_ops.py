"""Golden outputs of the released recurrences' pure-PyTorch references (tests/test_golden_ops.py).

* Gated DeltaNet: `naive_recurrent_gated_delta_rule` of flash-linear-attention
  (`fla/ops/gated_delta_rule/naive.py` in the `fla-core` wheel; it computes in float32), with
  beta in (0, 2) (negative eigenvalues), strong and weak decays and an initial state.
* Mamba-2: `ssd_minimal_discrete` of mamba_ssm (`mamba_ssm/modules/ssd_minimal.py`, "Listing 1"
  of the SSD paper), in float64, with an initial state and several chunks.
* Mamba-3 (SISO): `mamba3_siso_fwd_ref` of mamba_ssm's tests (`tests/ops/triton/
  test_mamba3_siso.py`; decays and step sizes in float32): the trapezoid with its data-dependent
  rotation, from the empty state, biases zero, no D skip or Z gate (those are the module's).
* Mamba-3 MIMO (rank 4): `mamba3_MIMO_step_ref` of mamba_ssm's tests (`tests/ops/tilelang/
  test_mamba3_mimo.py`), the same way, with its per-rank value up- and output down-projections.

The four reference files are imported by path from an unpacked wheel and a checkout (their
Triton/CUDA siblings are never imported; the Triton and pytest imports at the top of those files
are stubbed); nothing of them is copied. The inputs are drawn here with numpy and stored with the
outputs:

    python -m venv /tmp/ref && /tmp/ref/bin/pip install torch einops numpy
    /tmp/ref/bin/pip download --no-deps fla-core -d /tmp/w
    unzip /tmp/w/fla_core-*.whl -d /tmp/fla
    git clone https://github.com/state-spaces/mamba /tmp/mamba
    /tmp/ref/bin/python tests/data/make_golden_ops.py --fla /tmp/fla --mamba /tmp/mamba \\
        --out tests/data/golden_ops.npz
"""

import argparse
import importlib.util
import sys
import types
from pathlib import Path
from unittest import mock

import numpy as np


def delta_rule_inputs() -> dict[str, np.ndarray]:
  """q, k (L2-normalised, as the model feeds them), v, g, beta [B=2, T=37, H=2, K=16, V=8]."""
  rng = np.random.default_rng(1)
  b, t, h, k, v = 2, 37, 2, 16, 8
  q, kk = (rng.standard_normal((b, t, h, k)) for _ in range(2))
  q, kk = (x / np.linalg.norm(x, axis=-1, keepdims=True) for x in (q, kk))
  g = -np.exp(rng.uniform(-6.0, 1.5, (b, t, h)))  # decays from ~1 down to e^-4.5
  return {
    "q": q,
    "k": kk,
    "v": rng.standard_normal((b, t, h, v)),
    "g": g,
    "beta": rng.uniform(0.0, 2.0, (b, t, h)),
    "s0_BHKV": 0.5 * rng.standard_normal((b, h, k, v)),
  }


def ssd_inputs() -> dict[str, np.ndarray]:
  """x, dt, A per step, B, C [B=2, T=40, H=3, P=4, N=6] and an initial state [B, H, P, N]."""
  rng = np.random.default_rng(2)
  b, t, h, p, n = 2, 40, 3, 4, 6
  return {
    "x": rng.standard_normal((b, t, h, p)),
    "dt": np.log1p(np.exp(rng.normal(-1.0, 1.5, (b, t, h)))),  # softplus, as the model's dt
    "A": -np.exp(rng.uniform(-2.0, 1.0, (b, t, h))),
    "B": rng.standard_normal((b, t, h, n)),
    "C": rng.standard_normal((b, t, h, n)),
    "s0_BHPN": rng.standard_normal((b, h, p, n)),
  }


SSD_BLOCK_LEN = 8


def trapezoid_inputs(seed: int, *, steps: int, n: int, p: int, s: int, rank: int | None = None):
  """Mamba-3 in the reference's layout, batch 2, 2 heads: Q, K [B, T, H, N] (SISO) or
  [B, T, R, H, N] (MIMO), RMS-normalised; V [B, T, H, P]; for MIMO the per-rank projections
  mimo_v, mimo_o [H, R, P]; ADT = A dt, DT and Trap (lambda = sigmoid(Trap)) [B, H, T]; angles
  [B, T, S] shared by the heads."""
  rng = np.random.default_rng(seed)
  b, h = 2, 2
  qk_shape = (b, steps, h, n) if rank is None else (b, steps, rank, h, n)
  q, k = (rng.standard_normal(qk_shape) for _ in range(2))
  q, k = (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) for x in (q, k))
  dt = np.exp(rng.uniform(np.log(0.01), np.log(1.0), (b, h, steps)))
  out = {"q": q, "k": k, "dt": dt, "v": rng.standard_normal((b, steps, h, p))}
  if rank is not None:
    out["mimo_v"] = rng.standard_normal((h, rank, p))
    out["mimo_o"] = rng.standard_normal((h, rank, p)) / rank
  out["adt"] = -rng.uniform(0.5, 4.0, (b, h, steps)) * dt
  out["trap"] = rng.uniform(-3.0, 3.0, (b, h, steps))
  out["angles"] = rng.standard_normal((b, steps, s))
  return out


SISO = {"seed": 3, "steps": 37, "n": 16, "p": 8, "s": 4}
MIMO = {"seed": 4, "steps": 29, "n": 8, "p": 4, "s": 2, "rank": 4}


def _load(path: Path, name: str):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def main(argv=None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--fla", required=True, type=Path, help="unpacked fla-core wheel (has fla/ops)")
  ap.add_argument("--mamba", required=True, type=Path, help="checkout of state-spaces/mamba")
  ap.add_argument("--out", required=True)
  args = ap.parse_args(argv)
  import torch

  out = {}
  fla = _load(args.fla / "fla/ops/gated_delta_rule/naive.py", "fla_gated_delta_rule_naive")
  d = delta_rule_inputs()
  t32 = {key: torch.from_numpy(val.astype(np.float32)) for key, val in d.items()}
  o, s_final = fla.naive_recurrent_gated_delta_rule(
    t32["q"], t32["k"], t32["v"], t32["beta"], t32["g"],
    initial_state=t32["s0_BHKV"], output_final_state=True,
  )  # fmt: skip
  out.update({f"gdn/{key}": val.astype(np.float32) for key, val in d.items()})
  out["gdn/o"], out["gdn/final_BHKV"] = o.numpy(), s_final.numpy()

  # ssd_minimal.py imports the Triton kernel at the top; only its pure-PyTorch function is used.
  for name in ("mamba_ssm", "mamba_ssm.ops", "mamba_ssm.ops.triton"):
    sys.modules.setdefault(name, types.ModuleType(name))
  stub = types.ModuleType("mamba_ssm.ops.triton.ssd_combined")
  stub.mamba_chunk_scan_combined = None
  sys.modules["mamba_ssm.ops.triton.ssd_combined"] = stub
  ssd = _load(args.mamba / "mamba_ssm/modules/ssd_minimal.py", "mamba_ssd_minimal")
  s = ssd_inputs()
  t64 = {key: torch.from_numpy(val) for key, val in s.items()}
  dt = t64["dt"]
  y, final = ssd.ssd_minimal_discrete(
    t64["x"] * dt[..., None], t64["A"] * dt, t64["B"], t64["C"], SSD_BLOCK_LEN,
    initial_states=t64["s0_BHPN"][:, None],
  )  # fmt: skip
  out.update({f"ssd/{key}": val for key, val in s.items()})
  out["ssd/y"], out["ssd/final_BHPN"] = y.numpy(), final.numpy()

  for name in ("pytest", "triton", "mamba_ssm.ops.triton.mamba3"):
    sys.modules.setdefault(name, mock.MagicMock())
  for name in ("mamba3_siso_combined", "mamba3_siso_step"):
    sys.modules[f"mamba_ssm.ops.triton.mamba3.{name}"] = mock.MagicMock()
  siso = _load(args.mamba / "tests/ops/triton/test_mamba3_siso.py", "mamba3_siso_test")
  m = trapezoid_inputs(**SISO)
  t32 = {key: torch.from_numpy(val.astype(np.float32)) for key, val in m.items()}
  h, n = m["q"].shape[2:]
  y, (theta, ssm, k_last, v_last) = siso.mamba3_siso_fwd_ref(
    t32["q"], t32["k"], t32["v"], t32["adt"], t32["dt"], t32["trap"],
    torch.zeros(h, n), torch.zeros(h, n), t32["angles"][:, :, None],
  )  # fmt: skip
  out.update({f"mamba3/{key}": val.astype(np.float32) for key, val in m.items()})
  out["mamba3/y"], out["mamba3/final_ssm_BHPN"] = y.numpy(), ssm.numpy()
  out["mamba3/final_theta_BHS"], out["mamba3/final_k_BHN"] = theta.numpy(), k_last.numpy()

  mimo = _load(args.mamba / "tests/ops/tilelang/test_mamba3_mimo.py", "mamba3_mimo_test")
  m = trapezoid_inputs(**MIMO)
  t32 = {key: torch.from_numpy(val.astype(np.float32)) for key, val in m.items()}
  _, _, r, h, n = m["q"].shape
  angles = t32["angles"][:, :, None].expand(-1, -1, h, -1).contiguous()  # shared by the heads
  y, (_, ssm, _, _) = mimo.mamba3_MIMO_step_ref(
    t32["q"], t32["k"], t32["v"], t32["adt"], t32["dt"], t32["trap"],
    torch.zeros(h, r, n), torch.zeros(h, r, n), angles, t32["mimo_v"], t32["mimo_o"],
  )  # fmt: skip
  out.update({f"mimo/{key}": val.astype(np.float32) for key, val in m.items()})
  out["mimo/y"], out["mimo/final_ssm_BHPN"] = y.numpy(), ssm.numpy()
  np.savez_compressed(args.out, **out)
  print(f"wrote {args.out}: torch {torch.__version__}, " + ", ".join(sorted(out)))


if __name__ == "__main__":
  main()
