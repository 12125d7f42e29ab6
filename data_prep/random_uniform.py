"""Random-uniform games: uniformly random legal play from the initial position (Walker & Lyons,
section 2.5).

    python -m data_prep.random_uniform --games 10000 --seed 0 --out data/random_uniform_10k \\
        [--variant chess|atomic] [--compat reference] [--workers K] [--ep-mode pseudo|legal] \\
        [--min-plies 20] [--split test] [--games-per-shard 50000] [--overwrite] [--quiet]

Each ply picks uniformly among `list(board.legal_moves)` until `board.is_game_over(claim_draw=True)`
(python-chess 1.11.2: checkmate, stalemate, insufficient material, 75-move, fivefold, claimable
fifty-move and threefold with the one-move lookahead); `data_prep.termination.GameEnd` decides that
incrementally with exactly the same result. Games shorter than `--min-plies` (default 20, the
paper's "at least 10 full moves") are skipped but counted. `--games N` is the number of KEPT games
written, as in the released generator (`--games`: "Number of kept games to write") and the paper
("retaining 10k games of length at least 10 full moves").

`--variant atomic` plays atomic chess instead (`chess.variant.AtomicBoard`, Co & Konuganti
2026): its legal moves and its game end, which adds the explosion of a king (`variant_loss`) and
atomic insufficient material; same tokens and labels.

Two modes:
  * `--compat reference` regenerates the released test split exactly: one `random.Random(seed)` for
    the whole run, one `rng.randrange(len(legal))` per ply, games back to back (short games
    consume draws too), ids `cwm_random_{n:05d}` with n counting every generated game, output in
    generation order. `--seed 0 --games 10000` is the paper's random-uniform test set. Sequential
    by construction (one random stream), so it runs in one process.
  * default: game n (counting skipped games) draws from its own `random.Random`, seeded with the
    128-bit integer `numpy.random.SeedSequence(seed, spawn_key=(n,)).generate_state(4)` (see
    `game_seed`), so games are independent of each other and of `--workers`; they are generated
    in parallel and written in index order. Ids are `cwm_uniform_s{seed}_{n:05d}` (atomic:
    `cwm_atomic_uniform_s{seed}_{n:05d}`). Same distribution as the reference, different games.

The dataset is written with `chessjax.data.shards.DatasetWriter` into split `--split` (default
`test`); the manifest records the generator, mode, seed, variant, counts, terminations and
throughput.
"""

import argparse
import dataclasses
import itertools
import multiprocessing
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial

import chess
import numpy as np
from tqdm import tqdm

from chessjax import encoding, labels
from chessjax.data import records, shards
from data_prep import interrupt, ordered_pool
from data_prep.termination import GameEnd

GENERATOR = "data_prep.random_uniform"
MODES = ("default", "reference")
REFERENCE_ID = "cwm_random_{index:05d}"
DEFAULT_ID = "cwm_uniform_s{seed}_{index:05d}"
ATOMIC_ID = "cwm_atomic_uniform_s{seed}_{index:05d}"
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclasses.dataclass(frozen=True)
class GameResult:
  """One generated game as the writer needs it; `record` is None for a game that was too short."""

  index: int
  plies: int
  result: str
  termination: str
  record: bytes | None


@dataclasses.dataclass(frozen=True)
class GameConfig:
  """What every game of a run shares (sent to the workers once per chunk)."""

  seed: int
  ep_mode: str
  min_plies: int
  variant: str = "chess"


def play_random_game(
  randrange: Callable[[int], int], ep_mode: str = "pseudo", variant: str = "chess"
) -> tuple[list[int], list[tuple[int, ...]], chess.Outcome]:
  """Plays one game of uniformly random legal moves from the initial position of `variant`.

  `randrange(n)` picks the index of the move among `list(board.legal_moves)`. Returns the move ids
  (START first), the `encoding.snapshot` of every position (initial one first) and the outcome.
  """
  board = encoding.new_board(variant)
  end = GameEnd(board)
  moves = [encoding.START_ID]
  snaps = [encoding.snapshot(board, ep_mode)]
  while True:
    # The same list serves the end-of-game test and the draw, in python-chess's order.
    legal = list(board.generate_legal_moves())
    outcome = end.outcome(legal)
    if outcome is not None:
      return moves, snaps, outcome
    move = legal[randrange(len(legal))]
    moves.append(encoding.move_id(move))
    end.push(move)
    snaps.append(encoding.snapshot(board, ep_mode))


def game_seed(seed: int, index: int) -> int:
  """The 128-bit seed of game `index` in the default mode (independent of the worker count)."""
  words = np.random.SeedSequence(seed, spawn_key=(index,)).generate_state(4, dtype=np.uint32)
  return int.from_bytes(words.astype("<u4").tobytes(), "little")


def _finish(index, example_id, moves, snaps, outcome, cfg: GameConfig) -> GameResult:
  plies = len(moves) - 1
  result = outcome.result()
  record = None
  if plies >= cfg.min_plies:
    states = encoding.states_from_snapshots(snaps)
    record = records.encode_record(np.asarray(moves, np.int32), states, example_id, result)
  return GameResult(index, plies, result, outcome.termination.name.lower(), record)


def _default_id(variant: str) -> str:
  return ATOMIC_ID if variant == "atomic" else DEFAULT_ID


def _default_game(cfg: GameConfig, index: int) -> GameResult:
  rng = random.Random(game_seed(cfg.seed, index))
  moves, snaps, outcome = play_random_game(rng.randrange, cfg.ep_mode, cfg.variant)
  example_id = _default_id(cfg.variant).format(seed=cfg.seed, index=index)
  return _finish(index, example_id, moves, snaps, outcome, cfg)


def reference_games(cfg: GameConfig) -> Iterator[GameResult]:
  """The released generator's games, back to back from one `random.Random(seed)`, endlessly."""
  rng = random.Random(cfg.seed)
  index = 0
  while True:
    moves, snaps, outcome = play_random_game(rng.randrange, cfg.ep_mode)
    yield _finish(index, REFERENCE_ID.format(index=index), moves, snaps, outcome, cfg)
    index += 1


def _default_chunk(cfg: GameConfig, bounds: tuple[int, int]) -> list[GameResult]:
  return [_default_game(cfg, index) for index in range(*bounds)]


def default_games(cfg: GameConfig, games: int, workers: int) -> Iterator[GameResult]:
  """Default-mode games in index order until `games` of them are kept (short ones included)."""
  # Chunks of consecutive games (`ordered_pool`: a few a worker in flight, stopped when the last
  # game is kept). A game takes about 15 ms (atomic: 25 ms), so small chunks cost little in
  # messaging and waste little at the end.
  chunk = 1 if workers == 1 else max(1, min(4, games // (16 * workers)))
  bounds = ((i, i + chunk) for i in itertools.count(0, chunk))
  kept = 0
  for results in ordered_pool.ordered_map(partial(_default_chunk, cfg), bounds, workers):
    for r in results:
      kept += r.record is not None
      yield r
      if kept == games:
        return


def generate(
  out_dir,
  *,
  games: int,
  seed: int = 0,
  compat: str = "default",
  variant: str = "chess",
  workers: int = 1,
  ep_mode: str = "pseudo",
  min_plies: int = 20,
  split: str = "test",
  games_per_shard: int = 50_000,
  overwrite: bool = False,
  progress: bool = True,
) -> dict:
  """Generates `games` kept random-uniform games into a dataset directory; returns the manifest.

  With `workers > 1` the workers are spawned processes, which import the caller's main module:
  a script calling this must do so under `if __name__ == "__main__":`.
  """
  if compat not in MODES:
    raise ValueError(f"compat must be one of {MODES}, got {compat!r}")
  if variant not in encoding.VARIANTS:
    raise ValueError(f"variant must be one of {encoding.VARIANTS}, got {variant!r}")
  if compat == "reference" and variant != "chess":
    raise ValueError("the reference mode regenerates the released standard-chess games only")
  if ep_mode not in encoding.EP_MODES:
    raise ValueError(f"ep_mode must be one of {encoding.EP_MODES}, got {ep_mode!r}")
  if games < 1:
    raise ValueError(f"games must be >= 1, got {games}")
  if seed < 0:
    raise ValueError(f"seed must be >= 0, got {seed}")
  if workers < 1:
    raise ValueError(f"workers must be >= 1, got {workers}")
  if compat == "reference" and workers != 1:
    raise ValueError(
      "the reference mode is one random stream played game after game, so it runs in one "
      "process; drop --workers or use the default mode"
    )
  if min_plies < 0:
    raise ValueError(f"min_plies must be >= 0, got {min_plies}")
  if games_per_shard < 1:
    raise ValueError(f"games_per_shard must be >= 1, got {games_per_shard}")
  if not _SPLIT_NAME.match(split):
    raise ValueError(f"split must be letters, digits or '_', got {split!r}")

  start = time.perf_counter()
  cfg = GameConfig(seed=seed, ep_mode=ep_mode, min_plies=min_plies, variant=variant)
  writer = shards.DatasetWriter(out_dir, games_per_shard=games_per_shard, overwrite=overwrite)
  results = reference_games(cfg) if compat == "reference" else default_games(cfg, games, workers)
  kept = skipped = generated = 0
  plies: list[int] = []
  terminations: Counter[str] = Counter()
  desc = f"random-uniform {variant} ({compat})"
  bar = tqdm(total=games, unit="game", desc=desc, disable=not progress)
  try:
    for r in results:
      generated += 1
      if r.record is None:
        skipped += 1
        continue
      writer.add(split, r.record, r.plies)
      kept += 1
      plies.append(r.plies)
      terminations[r.termination] += 1
      bar.update(1)
      if kept == games:
        break
  except BaseException:
    writer.abort()
    raise
  finally:
    results.close()  # Stops the worker pool (its chunks not started dropped) before anything else.
    bar.close()
  elapsed = time.perf_counter() - start
  return writer.finish(
    {
      "kind": "random_uniform",
      "generator": {
        "name": GENERATOR,
        "mode": compat,
        "seed": seed,
        "id_format": REFERENCE_ID if compat == "reference" else _default_id(variant),
        "game_seeds": (
          "one random.Random(seed) for the whole run"
          if compat == "reference"
          else "random.Random(int of SeedSequence(seed, spawn_key=(n,)).generate_state(4))"
        ),
        "termination": "board.is_game_over(claim_draw=True), python-chess semantics",
        "python_chess": chess.__version__,
      },
      "encoding": {
        "move_vocab_size": encoding.MOVE_VOCAB_SIZE,
        "start_id": encoding.START_ID,
        "pad_id": encoding.PAD_ID,
        "num_labels": labels.NUM_LABELS,
        "ep_mode": ep_mode,
        "variant": variant,
      },
      "counts": {
        "games_requested": games,
        "generated": generated,
        "kept": kept,
        "skipped_short": skipped,
      },
      "plies": {
        "total": sum(plies),
        "mean": round(statistics.fmean(plies), 2),
        "min": min(plies),
        "max": max(plies),
      },
      "terminations": dict(sorted(terminations.items())),
      "options": {
        "min_plies": min_plies,
        "split": split,
        "workers": workers,
        "games_per_shard": games_per_shard,
      },
      "elapsed_s": round(elapsed, 3),
      "games_per_s": round(kept / elapsed, 1) if elapsed > 0 else None,
    }
  )


def parse_args(argv=None) -> argparse.Namespace:
  ap = argparse.ArgumentParser(
    prog="python -m data_prep.random_uniform", description=__doc__.split("\n\n")[0]
  )
  ap.add_argument("--games", type=int, required=True, help="number of kept games to write")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--out", required=True, help="output dataset directory")
  ap.add_argument("--variant", choices=encoding.VARIANTS, default="chess", help="rules (chess)")
  ap.add_argument(
    "--compat",
    choices=MODES,
    default="default",
    help="'reference' regenerates the released generator's games exactly (single process)",
  )
  ap.add_argument("--workers", type=int, default=None, help="default: all cores (default mode)")
  ap.add_argument("--ep-mode", choices=encoding.EP_MODES, default="pseudo")
  ap.add_argument("--min-plies", type=int, default=20, help="skip shorter games (default 20)")
  ap.add_argument("--split", default="test", help="split name in the dataset (default test)")
  ap.add_argument("--games-per-shard", type=int, default=50_000)
  ap.add_argument("--overwrite", action="store_true", help="replace a complete dataset")
  ap.add_argument("--quiet", action="store_true", help="no progress bar")
  args = ap.parse_args(argv)
  if args.workers is None:
    args.workers = 1 if args.compat == "reference" else multiprocessing.cpu_count()
  if args.games < 1:
    ap.error("--games must be >= 1")
  if args.seed < 0:
    ap.error("--seed must be >= 0")
  if args.workers < 1:
    ap.error("--workers must be >= 1")
  if args.compat == "reference" and args.workers != 1:
    ap.error("--compat reference is one random stream, played in one process: use --workers 1")
  if args.compat == "reference" and args.variant != "chess":
    ap.error("--compat reference regenerates the released standard-chess games: no --variant")
  if args.min_plies < 0:
    ap.error("--min-plies must be >= 0")
  if args.games_per_shard < 1:
    ap.error("--games-per-shard must be >= 1")
  if not _SPLIT_NAME.match(args.split):
    ap.error("--split must be letters, digits or '_'")
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  try:
    with interrupt.sigterm_as_interrupt():
      manifest = generate(
        args.out,
        games=args.games,
        seed=args.seed,
        compat=args.compat,
        variant=args.variant,
        workers=args.workers,
        ep_mode=args.ep_mode,
        min_plies=args.min_plies,
        split=args.split,
        games_per_shard=args.games_per_shard,
        overwrite=args.overwrite,
        progress=not args.quiet,
      )
  except FileExistsError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print(f"interrupted: no dataset written to {args.out} (staged shards removed)", file=sys.stderr)
    return 130
  c, p = manifest["counts"], manifest["plies"]
  print(
    f"kept {c['kept']:,} of {c['generated']:,} games ({c['skipped_short']:,} shorter than "
    f"{args.min_plies} plies), {p['total']:,} plies (mean {p['mean']}, max {p['max']}) "
    f"in {manifest['elapsed_s']:.2f}s ({manifest['games_per_s']:,} games/s) -> {args.out}"
  )
  print("terminations: " + ", ".join(f"{k} {v:,}" for k, v in manifest["terminations"].items()))
  return 0


if __name__ == "__main__":
  sys.exit(main())
