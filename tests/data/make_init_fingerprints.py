"""Initial-parameter fingerprints of every model family, for tests/models/test_init_fingerprints.py.

Records, for each family at d128 (two layers where the family allows it) and seed 0, one row
(sum, sum of squares, size, shape) per parameter and the eval-mode logits on `MOVES` (every
`LOGIT_STRIDE`-th column, and per-position sums of all columns), so a
refactor of the model code can prove it builds the same initial model (same rng draws, same
values) and the same forward pass without storing full weights. Rows are kept in
`nnx.to_flat_state` order of the code that made them (by path); the test compares them as
multisets because refactors rename paths. Regenerate only when initial values are meant to change:

    .venv/bin/python tests/data/make_init_fingerprints.py --out tests/data/init_fingerprints.npz
"""

import argparse

import jax
import numpy as np
from flax import nnx

# family -> model overrides (layers=2 covers more than one block; transformer is cheap at d128).
CASES = {
  "transformer": {"layers": 2},
  "slice": {"layers": 2},
  "slice_diag": {"layers": 2},
  "gated_deltanet": {"layers": 2},
  "gated_deltanet_pos": {"layers": 2},
  "mamba2": {"layers": 2},
  "mamba3": {"layers": 2},
  "mamba3_mimo": {"layers": 2},
}
MAX_RANK = 4  # shapes are stored padded with -1 to this many axes
# Every 8th logit column is stored in full (keeps the file small); all columns enter per-position
# sums, so a change anywhere in the head shows up.
LOGIT_STRIDE = 8


def moves() -> np.ndarray:
  """Two games of move ids int32[2, 7]: START, random real moves; the second right-padded."""
  rng = np.random.default_rng(20260101)
  out = rng.integers(0, 20480, (2, 7)).astype(np.int32)
  out[:, 0] = 20480  # START
  out[1, 5:] = 20481  # PAD
  return out


MOVES = moves()


def param_rows(model) -> np.ndarray:
  """float64[P, 3 + MAX_RANK]: (sum, sum of squares, size, *shape padded with -1) per parameter."""
  rows = []
  for _, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
    x = np.asarray(var.get_value(), np.float64)
    shape = list(x.shape) + [-1] * (MAX_RANK - x.ndim)
    rows.append([x.sum(), np.square(x).sum(), x.size, *shape])
  return np.asarray(rows, np.float64)


def logit_sums(logits) -> np.ndarray:
  """float64[B, T, 2]: sum and sum of squares of every position's logits."""
  x = np.asarray(logits, np.float64)
  return np.stack([x.sum(-1), np.square(x).sum(-1)], axis=-1)


def fingerprint(family: str, create_model):
  model = create_model(family, "d128", seed=0, **CASES[family])
  with jax.default_matmul_precision("highest"):
    logits = np.asarray(model(MOVES, train=False), np.float32)
  return param_rows(model), logits


def main(argv=None) -> None:
  from chessjax.models import create_model

  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--out", required=True)
  args = ap.parse_args(argv)
  out = {"moves": MOVES}
  for family in CASES:
    rows, logits = fingerprint(family, create_model)
    out[family + "/params"] = rows
    out[family + "/logits"] = logits[..., ::LOGIT_STRIDE]
    out[family + "/logit_sums"] = logit_sums(logits)
    print(
      f"{family}: {len(rows)} parameters, {int(rows[:, 2].sum())} values, logits {logits.shape}"
    )
  np.savez_compressed(args.out, **out)


if __name__ == "__main__":
  main()
