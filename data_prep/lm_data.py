"""Language-model data sets of the blindfolded chess LM (Toshniwal et al. 2022, section 4 "Data",
appendix D Table 10), written in chessjax's shard format (moves + states per game).

    python -m data_prep.lm_data --pgn a.pgn.bz2 [b.pgn.zst ...] --out DIR [--seed 42] \\
        [--train-size 500000] [--pool-size 50000] [--dev-size 15000] [--test-size 15000] \\
        [--min-plies 10] [--max-plies 150] [--max-games N] [--workers K] [--overwrite]
    python -m data_prep.lm_data --uci games.txt [...] --out DIR        (one game per line)
    python -m data_prep.lm_data --layout split-files --uci-dir D --out DIR
        (D holds train.txt, dev.txt, test.txt and optionally other_eval.txt, used as they are)

Protocol (default `--layout protocol`): drop games with null moves, keep min..max plies (10..150),
drop exact duplicates (same move sequence; the first is kept), shuffle with
`np.random.default_rng(seed).permutation`, then cut train / probing_pool / dev / test in that order
(500K / 50K / 15K / 15K; scaled down in proportion, with a warning, when the corpus is smaller;
games beyond the four are left out and counted). Train-S/M/L are the first 15K / 50K / 200K games
of split `train` (the manifest's `lm.train_subsets`). Games that do not replay are counted by
reason, never crash the run. `--max-games N` reads only the first N games of the input (over the
files in the order given, before any filter; every split file with `--layout split-files`), so a
quick data set comes from the front of a large corpus; the manifest records it. The probing pool
is also written as `DIR/probing_pool.txt` (UCI, one game per line) for `data_prep.probing_sets`,
and the vocab as `DIR/vocab.txt`.
"""

import argparse
import hashlib
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

import numpy as np
from tqdm import tqdm

from chessjax import encoding, pgn_reader
from chessjax.data import records, shards
from chessjax.files import write_text
from chessjax.lm import tokens
from data_prep import interrupt, ordered_pool, pgn_files, process_pgn

SPLITS = ("train", "probing_pool", "dev", "test")
PAPER_SIZES = (500_000, 50_000, 15_000, 15_000)
TRAIN_SUBSETS = {"S": 15_000, "M": 50_000, "L": 200_000}
SPLIT_FILES = {"train": "train.txt", "dev": "dev.txt", "test": "test.txt"}
SPLIT_FILES_OPTIONAL = {"probing_pool": "other_eval.txt"}
SKIP_REASONS = (*pgn_reader.SKIP_REASONS, "illegal_move", "too_long", "duplicate")
_UCI_BATCH = 2000


def _game_key(moves: np.ndarray) -> bytes:
  """Exact-duplicate key: a 16-byte BLAKE2 digest of the move ids."""
  return hashlib.blake2b(np.asarray(moves, dtype="<u2").tobytes(), digest_size=16).digest()


def _pgn_batch(job, *, min_plies, max_plies, ep_mode):
  """Worker: PGN texts -> ([(key, record, plies)], skip counts, texts read)."""
  texts, last_is_final = job
  games, counts = pgn_reader.encode_games(
    texts, min_plies=min_plies, ep_mode=ep_mode, last_is_final=last_is_final
  )
  counts.pop("python_chess_fallback", None)
  out = []
  for g in games:
    if max_plies is not None and g.plies > max_plies:
      counts["too_long"] += 1
      continue
    rec = records.encode_record(g.moves, g.states, g.example_id, g.result)
    out.append((_game_key(g.moves), rec, g.plies))
  return out, counts, len(texts)


def encode_uci_line(line: str, *, min_plies: int, max_plies: int | None, ep_mode: str):
  """One UCI text line -> ((key, record, plies), None) or (None, skip reason, message)."""
  ucis = line.split()
  if any(u in ("0000", "--", "@@@@") for u in ucis):
    return None, "null_move", None
  if len(ucis) < min_plies:
    return None, "too_short", None
  if max_plies is not None and len(ucis) > max_plies:
    return None, "too_long", None
  try:
    moves, states = encoding.encode_game(ucis, ep_mode=ep_mode)
  except ValueError as e:
    return None, "illegal_move", str(e)
  ident = "md5:" + hashlib.md5(" ".join(ucis).encode()).hexdigest()
  rec = records.encode_record(moves, states, ident, "*")
  return (_game_key(moves), rec, len(ucis)), None, None


def _uci_batch(job, *, min_plies, max_plies, ep_mode):
  """Worker: (first line number, lines) -> ([(key, record, plies)], skip counts, lines, errors)."""
  first, lines = job
  out, counts, errors = [], Counter(), []
  for n, line in enumerate(lines, start=first):
    kept, reason, msg = encode_uci_line(
      line, min_plies=min_plies, max_plies=max_plies, ep_mode=ep_mode
    )
    if kept is not None:
      out.append(kept)
    else:
      counts[reason] += 1
      if msg is not None and len(errors) < 5:
        errors.append(f"line {n}: {msg}")
  return out, counts, len(lines), errors


def _uci_jobs(path, info: dict):
  """(first line number, non-blank lines) batches of a UCI text file; hashes it into `info`."""
  h = hashlib.sha256()
  batch, first = [], 1
  with open(path, "rb") as f:
    for n, raw in enumerate(f, start=1):
      h.update(raw)
      info["bytes"] += len(raw)
      line = raw.decode("utf-8", errors="replace").strip()
      if not line:
        continue
      if not batch:
        first = n
      batch.append(line)
      if len(batch) >= _UCI_BATCH:
        info["games"] += len(batch)
        yield first, batch
        batch = []
  info["games"] += len(batch)
  info["sha256"] = h.hexdigest()
  if batch:
    yield first, batch


def _uci_info(path) -> dict:
  return {"file": Path(path).name, "bytes": 0, "sha256": "", "games": 0, "truncated": False}


def split_sizes(available: int, requested: tuple[int, ...]) -> tuple[list[int], bool]:
  """Sizes of train / probing_pool / dev / test: the requested ones if `available` covers them,
  else each scaled by available / sum (rounded down; train takes the remainder). Returns (sizes,
  scaled_down)."""
  total = sum(requested)
  if available >= total:
    return list(requested), False
  sizes = [int(r * available // total) if total else 0 for r in requested]
  sizes[0] += available - sum(sizes)
  return sizes, True


def parse_args(argv=None) -> argparse.Namespace:
  ap = argparse.ArgumentParser(
    prog="python -m data_prep.lm_data", description=__doc__.split("\n\n")[0]
  )
  src = ap.add_mutually_exclusive_group(required=True)
  src.add_argument("--pgn", nargs="+", help="PGN files (.pgn[.gz|.bz2|.zst])")
  src.add_argument("--uci", nargs="+", help="UCI text files, one game per line")
  src.add_argument("--uci-dir", help="with --layout split-files: train.txt, dev.txt, test.txt")
  ap.add_argument("--layout", choices=("protocol", "split-files"), default="protocol")
  ap.add_argument("--out", required=True, help="output dataset directory")
  ap.add_argument("--seed", type=int, default=42)
  for name, size in zip(("train", "pool", "dev", "test"), PAPER_SIZES, strict=True):
    ap.add_argument(f"--{name}-size", type=int, default=size)
  ap.add_argument("--min-plies", type=int, default=10)
  ap.add_argument("--max-plies", type=int, default=150)
  ap.add_argument(
    "--max-games", type=int, default=None, help="read at most the first N games of the input"
  )
  ap.add_argument("--workers", type=int, default=1)
  ap.add_argument("--ep-mode", choices=encoding.EP_MODES, default="pseudo")
  ap.add_argument("--games-per-shard", type=int, default=50_000)
  ap.add_argument("--overwrite", action="store_true", help="replace a complete dataset")
  args = ap.parse_args(argv)
  if args.layout == "split-files" and not args.uci_dir:
    ap.error("--layout split-files needs --uci-dir")
  if args.uci_dir and args.layout != "split-files":
    ap.error("--uci-dir needs --layout split-files")
  if args.uci_dir:
    d = Path(args.uci_dir)
    missing = [f for f in SPLIT_FILES.values() if not (d / f).is_file()]
    if missing:
      ap.error(f"{d} lacks {', '.join(missing)}")
  for p in args.pgn or []:
    if not Path(p).is_file():
      ap.error(f"no such file: {p}")
    if not p.lower().endswith(pgn_files.SUFFIXES):
      ap.error(f"{p}: expected one of {', '.join(pgn_files.SUFFIXES)}")
  for p in args.uci or []:
    if not Path(p).is_file():
      ap.error(f"no such file: {p}")
  sizes = (args.train_size, args.pool_size, args.dev_size, args.test_size)
  if min(sizes) < 0 or args.workers < 1 or args.games_per_shard < 1:
    ap.error("split sizes must be >= 0, --workers and --games-per-shard >= 1")
  if not 0 <= args.min_plies <= args.max_plies:
    ap.error("need 0 <= --min-plies <= --max-plies")
  if args.max_games is not None and args.max_games < 1:
    ap.error("--max-games must be >= 1")
  return args


def capped(jobs, max_games: int | None, texts_of, with_texts):
  """The jobs cut after their first `max_games` games in order (all of them for None):
  `texts_of(job)` is a job's game list, `with_texts(job, texts)` the same job with fewer."""
  left = max_games
  for job in jobs:
    if left is None:
      yield job
      continue
    texts = texts_of(job)
    if len(texts) >= left:
      yield with_texts(job, texts[:left])
      return
    left -= len(texts)
    yield job


def _read(jobs, work, workers: int, skipped: Counter, errors: list, dedup: bool):
  """Runs the workers over the jobs in input order; returns the kept (record, plies) in order."""
  kept, seen, read = [], set(), 0
  results = ordered_pool.ordered_map(work, jobs, workers)
  try:
    for res in results:
      out, counts, n = res[:3]
      if len(res) > 3:
        errors.extend(res[3][: max(0, 5 - len(errors))])
      read += n
      skipped.update(counts)
      for key, rec, plies in out:
        if dedup:
          if key in seen:
            skipped["duplicate"] += 1
            continue
          seen.add(key)
        kept.append((rec, plies))
  finally:
    results.close()  # The workers' pool: its jobs not started dropped.
  return kept, read


def run(args: argparse.Namespace) -> dict:
  """Prepares the LM data set described by parsed arguments; returns the manifest."""
  start = time.perf_counter()
  skipped, errors = Counter(), []
  progress = tqdm(unit="B", unit_scale=True, desc="lm_data", disable=None)
  if args.layout == "split-files":
    return _run_split_files(args, start, skipped, errors)
  if args.pgn:
    infos = [pgn_files.SourceInfo(str(p)) for p in args.pgn]
    work = partial(
      _pgn_batch, min_plies=args.min_plies, max_plies=args.max_plies, ep_mode=args.ep_mode
    )
    jobs = pgn_files.game_batches(args.pgn, infos, progress)
    # A cut batch's last game is not its file's last: no truncation check for it.
    jobs = capped(
      jobs, args.max_games, lambda j: j[0], lambda j, t: (t, j[1] and len(t) == len(j[0]))
    )
  else:
    infos = [_uci_info(p) for p in args.uci]
    work = partial(
      _uci_batch, min_plies=args.min_plies, max_plies=args.max_plies, ep_mode=args.ep_mode
    )
    jobs = (job for p, info in zip(args.uci, infos, strict=True) for job in _uci_jobs(p, info))
    jobs = capped(jobs, args.max_games, lambda j: j[1], lambda j, t: (j[0], t))
  try:
    kept, read = _read(jobs, work, args.workers, skipped, errors, dedup=True)
  finally:
    progress.close()
  requested = (args.train_size, args.pool_size, args.dev_size, args.test_size)
  sizes, scaled = split_sizes(len(kept), requested)
  if scaled:
    print(
      f"warning: {len(kept):,} games kept, fewer than the {sum(requested):,} requested; "
      f"splits scaled down to {dict(zip(SPLITS, sizes, strict=True))}",
      file=sys.stderr,
    )
  order = np.random.default_rng(args.seed).permutation(len(kept))
  assignment, at = {}, 0
  for split, size in zip(SPLITS, sizes, strict=True):
    assignment[split] = order[at : at + size]
    at += size
  sources = [i.as_dict() if isinstance(i, pgn_files.SourceInfo) else i for i in infos]
  return _write(
    args,
    kept,
    assignment,
    start=start,
    read=read,
    skipped=skipped,
    errors=errors,
    sources=sources,
    extra={"requested_sizes": dict(zip(SPLITS, requested, strict=True)), "scaled_down": scaled},
    unused=len(kept) - at,
  )


def _run_split_files(args, start, skipped, errors) -> dict:
  d = Path(args.uci_dir)
  files = dict(SPLIT_FILES)
  for split, name in SPLIT_FILES_OPTIONAL.items():
    if (d / name).is_file():
      files[split] = name
  work = partial(_uci_batch, min_plies=0, max_plies=None, ep_mode=args.ep_mode)
  kept, assignment, sources, read = [], {}, [], 0
  for split in SPLITS:
    if split not in files:
      continue
    info = _uci_info(d / files[split])
    jobs = capped(
      _uci_jobs(d / files[split], info), args.max_games, lambda j: j[1], lambda j, t: (j[0], t)
    )
    games, n = _read(jobs, work, args.workers, skipped, errors, False)
    assignment[split] = np.arange(len(kept), len(kept) + len(games))
    kept.extend(games)
    read += n
    sources.append(info)
  return _write(
    args,
    kept,
    assignment,
    start=start,
    read=read,
    skipped=skipped,
    errors=errors,
    sources=sources,
    extra={"split_files": files},
    unused=0,
  )


def _write(args, kept, assignment, *, start, read, skipped, errors, sources, extra, unused):
  if read == 0:
    raise ValueError("the input holds no games")
  if not kept:
    raise ValueError(f"no game of {read:,} was kept (skipped: {dict(skipped)})")
  vocab = tokens.Vocab.default()
  writer = shards.DatasetWriter(
    args.out, games_per_shard=args.games_per_shard, overwrite=args.overwrite
  )
  try:
    pool_lines = []
    for split, idx in assignment.items():
      for i in idx:
        rec, plies = kept[i]
        writer.add(split, rec, plies)
        if split == "probing_pool":
          moves = records.decode_moves(rec)
          pool_lines.append(" ".join(tokens.ucis_of_moves(moves)))
    out = Path(args.out)
    write_text(out / "probing_pool.txt", "".join(line + "\n" for line in pool_lines))
    vocab.to_file(out / "vocab.txt")
  except BaseException:
    writer.abort()
    raise
  elapsed = time.perf_counter() - start
  n_train = len(assignment.get("train", ()))
  manifest = writer.finish(
    {
      "kind": "lm",
      "encoding": process_pgn.encoding_spec(args.ep_mode, "chess"),
      "lm": {
        "paper": "Toshniwal et al. 2022, Learning Chess Blindfolded",
        "layout": args.layout,
        "split_order": [s for s in SPLITS if s in assignment],
        "train_subsets": {k: min(v, n_train) for k, v in TRAIN_SUBSETS.items()},
        "vocab": list(vocab.tokens),
        "probing_pool_file": "probing_pool.txt",
        **extra,
      },
      "counts": {
        "games_read": read,
        "kept": len(kept),
        "written": sum(len(v) for v in assignment.values()),
        "unused": unused,
        "skipped": sum(skipped.values()),
      },
      "skipped": {r: skipped.get(r, 0) for r in SKIP_REASONS},
      "skip_examples": errors[:5],
      "options": {
        "seed": args.seed,
        "min_plies": args.min_plies,
        "max_plies": args.max_plies,
        "max_games": args.max_games,
        "workers": args.workers,
        "games_per_shard": args.games_per_shard,
      },
      "sources": sources,
      "elapsed_s": round(elapsed, 3),
      "games_per_s": round(read / elapsed, 1) if elapsed > 0 else None,
    }
  )
  return manifest


def main(argv=None) -> int:
  args = parse_args(argv)
  try:
    with interrupt.sigterm_as_interrupt():
      manifest = run(args)
  except (FileExistsError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print(f"interrupted: no dataset written to {args.out} (staged shards removed)", file=sys.stderr)
    return 130
  c = manifest["counts"]
  print(process_pgn.summary_table(manifest))
  for msg in manifest["skip_examples"]:
    print(f"  did not replay: {msg}", file=sys.stderr)
  print(
    f"read {c['games_read']:,} games, kept {c['kept']:,} (wrote {c['written']:,}, unused "
    f"{c['unused']:,}), skipped {c['skipped']:,} in {manifest['elapsed_s']:.2f}s "
    f"({manifest['games_per_s']:,} games/s) -> {args.out}"
  )
  return 0


if __name__ == "__main__":
  sys.exit(main())
