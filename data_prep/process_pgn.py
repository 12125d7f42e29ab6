"""PGN files -> a prepared dataset of ArrayRecord shards (Walker & Lyons, section 2.5).

    python -m data_prep.process_pgn --pgn games.pgn.zst --out data/lichess_2025-03 \\
        [--min-fullmoves 10] [--max-games N] [--val-fraction 0.005] [--test-fraction 0] \\
        [--split NAME] [--workers K] [--ep-mode pseudo|legal] [--variant chess|atomic] [--overwrite]

Games are kept as Walker & Lyons do (appendix B.1: standard start, standard chess, replays legally,
at least 2 * min_fullmoves plies); every skipped game is counted by reason in the manifest.
`--variant atomic` keeps atomic games instead (a `Variant` header such as lichess's "Atomic",
replayed under atomic rules by python-chess; Co & Konuganti 2026) and skips standard ones as
`variant`. A kept game goes to `validation` iff its id's MD5 bucket is below round(val_fraction *
10000), to `test` iff the bucket is in the next round(test_fraction * 10000) buckets, else to
`train`; `--split NAME` sends every kept game to one split instead (e.g. `test` for a held-out
month). `--max-games` keeps the first N kept games in file order. Output is identical for any number
of workers: batches of games are encoded in parallel and written in input order.
"""

import argparse
import hashlib
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

import chess
from tqdm import tqdm

from chessjax import encoding, labels, pgn_reader
from chessjax.data import records, shards
from data_prep import interrupt, ordered_pool, pgn_files

BUCKETS = 10_000


def bucket_of(example_id: str) -> int:
  """The id's split bucket: first 8 bytes of MD5, little-endian, mod 10000 (Walker & Lyons, B.1)."""
  return int.from_bytes(hashlib.md5(example_id.encode()).digest()[:8], "little") % BUCKETS


def split_of(example_id: str, val_cut: int, test_cut: int) -> str:
  bucket = bucket_of(example_id)
  if bucket < val_cut:
    return "validation"
  if bucket < val_cut + test_cut:
    return "test"
  return "train"


def _encode_batch(job, *, min_plies, ep_mode, variant, val_cut, test_cut, fixed_split):
  """Worker: one batch of game texts -> ([(split, record, plies)], skip counts)."""
  texts, last_is_final = job
  games, counts = pgn_reader.encode_games(
    texts, min_plies=min_plies, ep_mode=ep_mode, last_is_final=last_is_final, variant=variant
  )
  out = []
  for g in games:
    split = fixed_split or split_of(g.example_id, val_cut, test_cut)
    out.append((split, records.encode_record(g.moves, g.states, g.example_id, g.result), g.plies))
  return out, counts, len(texts)


def parse_args(argv=None) -> argparse.Namespace:
  ap = argparse.ArgumentParser(
    prog="python -m data_prep.process_pgn", description=__doc__.split("\n\n")[0]
  )
  ap.add_argument("--pgn", nargs="+", required=True, help="input files (.pgn[.gz|.bz2|.zst])")
  ap.add_argument("--out", required=True, help="output dataset directory")
  ap.add_argument("--min-fullmoves", type=int, default=10)
  ap.add_argument("--max-games", type=int, default=None, help="keep the first N kept games")
  ap.add_argument("--val-fraction", type=float, default=0.005)
  ap.add_argument("--test-fraction", type=float, default=0.0)
  ap.add_argument("--split", default=None, help="put every kept game in this split")
  ap.add_argument("--workers", type=int, default=1)
  ap.add_argument("--ep-mode", choices=encoding.EP_MODES, default="pseudo")
  ap.add_argument("--variant", choices=encoding.VARIANTS, default="chess", help="games to keep")
  ap.add_argument("--games-per-shard", type=int, default=50_000)
  ap.add_argument("--overwrite", action="store_true", help="replace a complete dataset")
  args = ap.parse_args(argv)
  for p in args.pgn:
    if not Path(p).is_file():
      ap.error(f"no such file: {p}")
    if not p.lower().endswith(pgn_files.SUFFIXES):
      ap.error(f"{p}: expected one of {', '.join(pgn_files.SUFFIXES)}")
  if (
    not 0 <= args.val_fraction + args.test_fraction <= 1
    or min(args.val_fraction, args.test_fraction) < 0
  ):
    ap.error("--val-fraction and --test-fraction must be >= 0 and sum to at most 1")
  if args.workers < 1 or args.min_fullmoves < 0 or args.games_per_shard < 1:
    ap.error("--workers and --games-per-shard must be >= 1, --min-fullmoves >= 0")
  if args.max_games is not None and args.max_games < 1:
    ap.error("--max-games must be >= 1")
  return args


def run(args: argparse.Namespace) -> dict:
  """Prepares the dataset described by parsed arguments; returns the manifest."""
  start = time.perf_counter()
  writer = shards.DatasetWriter(
    args.out, games_per_shard=args.games_per_shard, overwrite=args.overwrite
  )
  infos = [pgn_files.SourceInfo(str(p)) for p in args.pgn]
  work = partial(
    _encode_batch,
    min_plies=2 * args.min_fullmoves,
    ep_mode=args.ep_mode,
    variant=args.variant,
    val_cut=round(args.val_fraction * BUCKETS),
    test_cut=round(args.test_fraction * BUCKETS),
    fixed_split=args.split,
  )
  total_bytes = sum(Path(p).stat().st_size for p in args.pgn)
  skipped, kept, parsed, limit_hit = Counter(), 0, 0, False
  progress = tqdm(total=total_bytes, unit="B", unit_scale=True, desc="pgn", disable=None)
  jobs = pgn_files.game_batches(args.pgn, infos, progress)
  results = ordered_pool.ordered_map(work, jobs, args.workers)
  try:
    for out, counts, n_texts in results:
      parsed += n_texts
      skipped.update(counts)
      for split, record, plies in out:
        writer.add(split, record, plies)
        kept += 1
        if args.max_games is not None and kept >= args.max_games:
          limit_hit = True
          break
      progress.set_postfix(
        kept=kept, skipped=sum(skipped.values()) - skipped["python_chess_fallback"]
      )
      if limit_hit:
        break
  except BaseException:
    writer.abort()
    raise
  finally:
    results.close()  # The workers' pool: its jobs not started dropped.
    progress.close()
  elapsed = time.perf_counter() - start
  fallback = skipped.pop("python_chess_fallback", 0)
  manifest = writer.finish(
    {
      "kind": "pgn",
      "encoding": encoding_spec(args.ep_mode, args.variant),
      "counts": {
        "games_read": parsed,
        "kept": kept,
        "skipped": sum(skipped.values()),
        "python_chess_fallback": fallback,
        "stopped_at_max_games": limit_hit,
      },
      "skipped": {r: skipped.get(r, 0) for r in pgn_reader.SKIP_REASONS},
      "options": {
        "min_fullmoves": args.min_fullmoves,
        "max_games": args.max_games,
        "val_fraction": args.val_fraction,
        "test_fraction": args.test_fraction,
        "split": args.split,
        "workers": args.workers,
        "games_per_shard": args.games_per_shard,
      },
      "sources": [i.as_dict() for i in infos],
      "elapsed_s": round(elapsed, 3),
      "games_per_s": round(parsed / elapsed, 1) if elapsed > 0 else None,
    }
  )
  return manifest


def encoding_spec(ep_mode: str, variant: str) -> dict:
  """The manifest's `encoding` block: what the shards' records mean (also `data_prep.lm_data`'s)."""
  return {
    "move_vocab_size": encoding.MOVE_VOCAB_SIZE,
    "start_id": encoding.START_ID,
    "pad_id": encoding.PAD_ID,
    "num_labels": labels.NUM_LABELS,
    "label_classes": labels.LABEL_CLASSES.tolist(),
    "ep_mode": ep_mode,
    "variant": variant,
    "layout": "Walker & Lyons A.1 (squares a8..h1, side, KQkq, ep file/rank, clocks hi/lo)",
    "python_chess": chess.__version__,
  }


def summary_table(manifest: dict) -> str:
  """A short Markdown summary of a dataset manifest."""
  rows = ["| split | games | plies | shards |", "|---|---:|---:|---:|"]
  for name, s in manifest["splits"].items():
    rows.append(f"| {name} | {s['games']:,} | {s['plies']:,} | {len(s['shards'])} |")
  skipped = {k: v for k, v in manifest.get("skipped", {}).items() if v}
  rows.append("")
  rows.append("skipped: " + (", ".join(f"{k} {v:,}" for k, v in skipped.items()) or "none"))
  for src in manifest.get("sources", []):
    if src.get("truncated"):
      rows.append(f"WARNING: {src['file']} ended early ({src['error']}); games before the cut kept")
  return "\n".join(rows)


def main(argv=None) -> int:
  args = parse_args(argv)
  try:
    with interrupt.sigterm_as_interrupt():
      manifest = run(args)
  except FileExistsError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print(f"interrupted: no dataset written to {args.out} (staged shards removed)", file=sys.stderr)
    return 130
  c = manifest["counts"]
  print(summary_table(manifest))
  print(
    f"read {c['games_read']:,} games, kept {c['kept']:,}, skipped {c['skipped']:,} "
    f"in {manifest['elapsed_s']:.2f}s ({manifest['games_per_s']:,} games/s) -> {args.out}"
  )
  return 0


if __name__ == "__main__":
  sys.exit(main())
