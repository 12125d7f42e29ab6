"""What the comparisons with the released Chess-World-Model code share: the bundled sample and
its cut by position (`split_pgn`), the glue each side's trainer runs under (`REF_GLUE`, `CJ_GLUE`:
log lines with the wall clock and CPU time at each log step) with the patterns that read them,
and the reference checkout's arguments (`add_reference_args`). `bench_vs_reference_train`,
`bench_parity_quality` and `bench_compile` import these, not each other."""

import argparse
import bz2
import re
import sys
from pathlib import Path

from data_prep import pgn_files

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "lichess_2013-01_sample5000.pgn.bz2"

REF_GLUE = r"""
import sys, time, torch
torch.set_num_threads(1)
torch.set_num_interop_threads(1)
import training
training.format_rate = lambda x: "%.3f@%.6f@%.6f" % (x, time.perf_counter(), time.process_time())
_orig = training.make_collate_fn
_pad = [0, 0]
def _collate_counting(pad_move_id, max_steps):
    inner = _orig(pad_move_id=pad_move_id, max_steps=max_steps)
    def collate(batch):
        b = inner(batch)
        _pad[0] += int((~b.pad_mask).sum())
        _pad[1] += b.pad_mask.numel()
        return b
    return collate
training.make_collate_fn = _collate_counting
import main
print("[glue] torch", torch.__version__, "threads", torch.get_num_threads(), flush=True)
main.main()
print("[glue] valid_steps %d cells %d" % tuple(_pad), flush=True)
"""

CJ_GLUE = r"""
import sys, time
import jax
jax.config.update("jax_log_compiles", True)
from absl import app
from chessjax import logs, main
_write_interval = logs.TrainLogger.write_interval
def _timed_write_interval(self, step, **kwargs):
    print("[glue] step %d tokens %d wall %.6f cpu %.6f" % (
        step, self.tokens, time.perf_counter(), time.process_time()), file=sys.stderr, flush=True)
    return _write_interval(self, step, **kwargs)
logs.TrainLogger.write_interval = _timed_write_interval
app.run(main.main)
"""

REF_LINE = re.compile(r"step=(\d+)\].*state_tok/s=([0-9.]+)@([0-9.]+)@([0-9.]+)")
CJ_GLUE_LINE = re.compile(r"^\[glue\] step (\d+) tokens (\d+) wall ([0-9.]+) cpu ([0-9.]+)")


def split_pgn(train_games: int, heldout_games: int, work: Path) -> tuple[Path, Path]:
  """The sample cut by position: first `train_games` games, last `heldout_games` games."""
  games = [g.strip() for g in pgn_files.split_games(bz2.decompress(SAMPLE.read_bytes()).decode())]
  if train_games + heldout_games > len(games):
    sys.exit(f"the sample has {len(games)} games, fewer than {train_games} + {heldout_games}")
  train, heldout = work / "train.pgn", work / "heldout.pgn"
  train.write_text("\n\n".join(games[:train_games]) + "\n")
  heldout.write_text("\n\n".join(games[-heldout_games:]) + "\n")
  return train, heldout


def add_reference_args(parser: argparse.ArgumentParser) -> None:
  """`--ref` (a checkout of the released repository), `--ref-python` (its interpreter, with torch
  and torch-slices) and `--ref-prep-python` (one with python-chess, for its data preparation)."""
  parser.add_argument("--ref", required=True, help="a checkout of the released repository")
  parser.add_argument("--ref-python", required=True, help="python with torch and torch-slices")
  parser.add_argument("--ref-prep-python", default=sys.executable, help="python with python-chess")
